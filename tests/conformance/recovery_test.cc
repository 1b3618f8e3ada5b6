// Restart recovery on real rdmad (rxe0 in the Soft-RoCE guest; docs/operations.md#restart-recovery). The test
// starts rdmad itself (RDMAD_BIN; a unix socket, the data-plane listener on RDMAD_GUEST_ADDR:7471 and a
// state_file in a scratch directory), declares PDs, file-backed regions on /dev/shm, an anonymous region and
// a grant with a connected client (RemoteRegion), as a tenant's caller (unix uid 0 -> tenant "t"), kills rdmad with SIGKILL while another thread is creating
// and deleting PDs and regions, and checks:
//   - after the kill: no verbs object of rdmad's is left on the device (`rdma resource show`, by its pid);
//   - after the restart (same config): the PDs and file regions are back under the same names with new keys,
//     the anonymous region is MR_LOST, the grant is ENDED with END_RESTARTED (GetGrant, and a watcher that
//     connects afterwards with from_oldest), no name handed out before (the churn thread's included) comes
//     back, and rdmad holds on the device exactly the PDs and regions it lists (nothing leaked, nothing
//     doubled);
//   - the client moves to a new grant (RemoteRegion::Reconnect) and reads the file's bytes again;
//   - SIGTERM: exit 0 and nothing of rdmad's left on the device.
// run-recovery.sh compares the whole device's `rdma resource show` before and after the binary.
// Threads: the main thread, and the churn thread during the kill; rdmad is a child process.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/client.h"
#include "client/remote_region.h"
#include "tests/conformance/rdmad_process.h"

namespace rdmad {
namespace {

using client::Client;
using client::RemoteRegion;

std::string Shell(const std::string& command) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

// Objects of `kind` ("pd", "mr", "qp", "cm_id") that process `pid` holds on the devices (rdma resource show).
int Held(const std::string& kind, pid_t pid) {
  int n = 0;
  for (absl::string_view line : absl::StrSplit(Shell("rdma resource show " + kind + " 2>&1"), '\n')) {
    if (absl::StrContains(line, absl::StrCat(" pid ", pid, " "))) ++n;
  }
  return n;
}

uint64_t Number(const std::string& name) {
  uint64_t n = 0;
  std::vector<std::string> parts = absl::StrSplit(name, '/');
  if (parts.size() == 2) (void)absl::SimpleAtoi(parts[1], &n);
  return n;
}

class Rdmad {
 public:
  Rdmad() {
    char tmpl[] = "/tmp/rdmad-recovery.XXXXXX";
    dir_ = mkdtemp(tmpl);
    sock_ = dir_ + "/rdmad.sock";
    std::ofstream(dir_ + "/rdmad.json")
        << "{ \"listen\": [\"unix:" << sock_ << "\"], \"rdma_listen\": [\"" << test::EnvOr("RDMAD_GUEST_ADDR", "10.0.2.15")
        << ":7471\"], \"grant_quarantine_ms\": 0, \"state_file\": \"" << dir_ << "/state.db\", "
        // The test (root) is tenant "t": its PDs must stay its own after the restart.
        << "\"unix_principals\": [{\"uid\": 0, \"principal\": \"recovery-app\"}], "
        << "\"tenants\": [{\"name\": \"t\", \"principals\": [\"recovery-app\"]}] }\n";
  }
  ~Rdmad() {
    Kill();
    std::string rm = "rm -rf " + dir_;
    (void)std::system(rm.c_str());
  }

  void Start() {
    ++runs_;
    unlink(sock_.c_str());
    pid_ = test::StartRdmad(dir_ + "/rdmad.json", absl::StrCat(dir_, "/rdmad-", runs_, ".log"), sock_);
    Client::Options o;
    o.target = "unix:" + sock_;
    o.timeout = std::chrono::milliseconds(10000);
    client_ = std::make_unique<Client>(o);
  }
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  int Stop() {  // SIGTERM; the exit status
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  std::string Log() const {
    std::ifstream in(absl::StrCat(dir_, "/rdmad-", runs_, ".log"));
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  Client& client() { return *client_; }  // replaced by each Start
  pid_t pid() const { return pid_; }
  std::string target() const { return "unix:" + sock_; }

 private:
  std::string dir_, sock_;
  int runs_ = 0;
  pid_t pid_ = -1;
  std::unique_ptr<Client> client_;
};

constexpr uint64_t kFileBytes = 64 << 10;

// Where the time goes (printed: the suite's duration matters for CI).
void Stage(const char* what) {
  static const absl::Time start = absl::Now();
  std::printf("[%7.0f ms] %s\n", absl::ToDoubleMilliseconds(absl::Now() - start), what);
  std::fflush(stdout);
}

char Pattern(uint64_t i) { return static_cast<char>((i * 131 + 7) & 0xff); }

std::string MakeFile() {
  char tmpl[] = "/dev/shm/rdmad-recovery-XXXXXX";
  const int fd = mkstemp(tmpl);
  EXPECT_GE(fd, 0);
  std::string data(kFileBytes, '\0');
  for (uint64_t i = 0; i < kFileBytes; ++i) data[i] = Pattern(i);
  EXPECT_EQ(write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  close(fd);
  return tmpl;
}

v1::RegisterMrRequest FileMr(const std::string& pd, const std::string& path) {
  v1::RegisterMrRequest r;
  r.set_pd(pd);
  r.mutable_source()->mutable_file()->set_path(path);
  r.mutable_source()->mutable_file()->set_length(kFileBytes);
  for (v1::Access a : {v1::LOCAL_WRITE, v1::REMOTE_READ, v1::MW_BIND}) r.add_access(a);
  return r;
}

v1::IssuedGrant Grant(Client& c, const std::string& mr) {
  v1::IssueGrantRequest g;
  g.set_mr(mr);
  g.set_length(kFileBytes);
  g.set_principal("recovery-test");
  g.set_ttl_ms(600000);
  absl::StatusOr<v1::IssuedGrant> issued = c.IssueGrant(g);
  EXPECT_TRUE(issued.ok()) << issued.status();
  return issued.ok() ? *issued : v1::IssuedGrant();
}

void ExpectFileBytes(RemoteRegion& region) {
  std::vector<char> buf(4096);
  absl::Status s = region.Read(8192, buf.size(), buf.data());
  ASSERT_TRUE(s.ok()) << s;
  for (uint64_t i = 0; i < buf.size(); ++i) ASSERT_EQ(buf[i], Pattern(8192 + i)) << "byte " << 8192 + i;
}

TEST(Recovery, KillNineInTheMiddleOfActivityThenRestart) {
  const std::string device = test::EnvOr("RDMAD_DEVICE", "rxe0");
  const std::string file = MakeFile(), file2 = MakeFile();
  Rdmad rdmad;
  rdmad.Start();
  Client& c = rdmad.client();
  ASSERT_TRUE(c.Health().ok()) << rdmad.Log();
  ASSERT_EQ(c.WhoAmI().value().tenant(), "t");

  Stage("started");
  // ---- what clients declare
  v1::CreatePdRequest create;
  create.set_device(device);
  create.set_label("kept-a");
  const v1::ProtectionDomain pd_a = c.CreatePd(create).value();
  create.set_label("kept-b");
  const v1::ProtectionDomain pd_b = c.CreatePd(create).value();
  create.set_label("deleted");
  const v1::ProtectionDomain pd_gone = c.CreatePd(create).value();
  ASSERT_TRUE(c.DeletePd(pd_gone.name()).ok());
  const v1::MemoryRegion mr_file = c.RegisterMr(FileMr(pd_a.name(), file)).value();
  const v1::MemoryRegion mr_file2 = c.RegisterMr(FileMr(pd_b.name(), file2)).value();
  v1::RegisterMrRequest anon;
  anon.set_pd(pd_b.name());
  anon.mutable_source()->mutable_anonymous()->set_size(1 << 20);
  anon.add_access(v1::LOCAL_WRITE);
  const v1::MemoryRegion mr_anon = c.RegisterMr(anon).value();
  v1::AllocMwRequest mw;
  mw.set_pd(pd_a.name());
  mw.set_type(v1::TYPE_2);
  absl::StatusOr<v1::MemoryWindow> window = c.AllocMw(mw);
  const v1::IssuedGrant grant = Grant(c, mr_file.name());
  absl::StatusOr<std::unique_ptr<RemoteRegion>> region = RemoteRegion::Open(grant, RemoteRegion::Options());
  ASSERT_TRUE(region.ok()) << region.status() << "\n" << rdmad.Log();
  ExpectFileBytes(**region);
  ASSERT_EQ(c.GetGrant(grant.grant().name()).value().state(), v1::GRANT_ACTIVE);

  // Every name rdmad handed out in this run.
  std::set<std::string> seen = {pd_a.name(), pd_b.name(), pd_gone.name(), mr_file.name(), mr_file2.name(),
                                mr_anon.name(), grant.grant().name(), grant.grant().token()};
  if (window.ok()) seen.insert(window->name());

  Stage("declared");
  // ---- churn: PDs and regions created and removed while rdmad is killed
  std::mutex seen_mu;
  std::atomic<bool> stop{false};
  std::atomic<int> rounds{0};
  std::thread churn([&] {
    Client::Options o;
    o.target = rdmad.target();
    o.timeout = std::chrono::milliseconds(2000);
    Client cc(o);
    v1::CreatePdRequest r;
    r.set_device(device);
    r.set_label("churn");
    while (!stop.load()) {
      absl::StatusOr<v1::ProtectionDomain> pd = cc.CreatePd(r);
      if (!pd.ok()) continue;
      {
        std::lock_guard<std::mutex> l(seen_mu);
        seen.insert(pd->name());
      }
      absl::StatusOr<v1::MemoryRegion> mr = cc.RegisterMr(FileMr(pd->name(), file2));
      if (mr.ok()) {
        std::lock_guard<std::mutex> l(seen_mu);
        seen.insert(mr->name());
      }
      if (mr.ok()) (void)cc.DeregisterMr(mr->name());
      (void)cc.DeletePd(pd->name());
      rounds++;
    }
  });
  while (rounds.load() < 20) absl::SleepFor(absl::Milliseconds(5));
  const pid_t old_pid = rdmad.pid();
  // SIGKILL, reaped on another thread while the client reads until its connection is gone. The exit itself
  // takes about 50 s here (measured): the dying process sits in rxe's __rxe_cleanup (rxe_destroy_qp), waiting
  // for the references to a QP to drop; most likely the grant's bound type 2 window's. Nothing rdmad can do
  // once killed (docs/operations.md#restart-recovery).
  Stage("killing");
  std::atomic<bool> reaped{false};
  std::thread killer([&] {
    rdmad.Kill();
    reaped = true;
    Stage("reaped");
  });
  stop = true;
  churn.join();
  Stage("churn joined");
  std::vector<char> probe(64);
  absl::Status read_after_kill;
  for (const absl::Time until = absl::Now() + absl::Seconds(60); absl::Now() < until;) {
    absl::Status s = (*region)->Read(0, probe.size(), probe.data());
    if (read_after_kill.ok()) read_after_kill = s;
    if (!read_after_kill.ok() && reaped.load()) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  killer.join();
  std::printf("killed rdmad (pid %d) after %d churn rounds\n", old_pid, rounds.load());

  Stage("killed");
  // ---- after the kill: the kernel released every verbs object of rdmad's
  EXPECT_EQ(Held("pd", old_pid), 0);
  EXPECT_EQ(Held("mr", old_pid), 0);
  EXPECT_EQ(Held("qp", old_pid), 0);
  EXPECT_EQ(Held("cm_id", old_pid), 0);
  Stage("resources checked");
  // The client's reads failed: its connection went with rdmad.
  EXPECT_FALSE(read_after_kill.ok());
  std::printf("the client's read after the kill: %s\n", read_after_kill.ToString().c_str());

  Stage("client read failed");
  // ---- restart
  rdmad.Start();
  ASSERT_TRUE(rdmad.client().Health().ok()) << rdmad.Log();
  Stage("restarted");
  Client& c2 = rdmad.client();
  absl::StatusOr<v1::ListPdsResponse> pds = c2.ListPds();
  ASSERT_TRUE(pds.ok()) << pds.status();
  std::set<std::string> pd_names;
  for (const auto& p : pds->pds()) pd_names.insert(p.name());
  EXPECT_TRUE(pd_names.count(pd_a.name()));
  EXPECT_TRUE(pd_names.count(pd_b.name()));
  EXPECT_FALSE(pd_names.count(pd_gone.name()));
  // Still tenant t's: a PD of no tenant would be NOT_FOUND for a tenant's caller.
  EXPECT_EQ(c2.WhoAmI().value().tenant(), "t");
  EXPECT_EQ(c2.GetPd(pd_a.name()).value().label(), "kept-a");
  // The file regions: same names, same source, new keys (rxe allocates MR indexes cyclically).
  for (const v1::MemoryRegion& before : {mr_file, mr_file2}) {
    absl::StatusOr<v1::MemoryRegion> after = c2.GetMr(before.name());
    ASSERT_TRUE(after.ok()) << after.status() << "\n" << rdmad.Log();
    EXPECT_EQ(after->state(), v1::MR_READY);
    EXPECT_EQ(after->pd(), before.pd());
    EXPECT_EQ(after->source().file().path(), before.source().file().path());
    EXPECT_NE(after->rkey(), before.rkey());
    EXPECT_NE(after->lkey(), before.lkey());
    std::printf("%s: rkey 0x%x -> 0x%x\n", before.name().c_str(), before.rkey(), after->rkey());
  }
  absl::StatusOr<v1::MemoryRegion> lost = c2.GetMr(mr_anon.name());
  ASSERT_TRUE(lost.ok()) << lost.status();
  EXPECT_EQ(lost->state(), v1::MR_LOST);
  EXPECT_TRUE(absl::StrContains(lost->unusable_reason(), "anonymous")) << lost->unusable_reason();
  if (window.ok()) EXPECT_EQ(c2.GetMw(window->name()).status().code(), absl::StatusCode::kNotFound);
  // The grant: ended, END_RESTARTED.
  absl::StatusOr<v1::Grant> g = c2.GetGrant(grant.grant().name());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->state(), v1::GRANT_ENDED);
  EXPECT_EQ(g->end_reason(), v1::END_RESTARTED);
  Stage("checked names and keys");
  // A watcher that connects now learns it.
  v1::WatchGrantsRequest watch;
  watch.set_from_oldest(true);
  std::vector<v1::GrantEvent> events;
  client::WatchOptions wo;
  wo.idle_timeout = std::chrono::milliseconds(1500);
  absl::Status watched = c2.WatchGrants(watch, [&](const v1::GrantEvent& e) {
    events.push_back(e);
    return true;
  }, wo);
  EXPECT_TRUE(watched.ok()) << watched;
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events[0].type(), v1::GRANT_REVOKED);
  EXPECT_EQ(events[0].grant().name(), grant.grant().name());
  EXPECT_EQ(events[0].grant().end_reason(), v1::END_RESTARTED);

  Stage("watched");
  // Nothing leaked, nothing doubled: rdmad holds exactly the PDs it lists and the regions that are READY.
  absl::StatusOr<v1::ListMrsResponse> mrs = c2.ListMrs();
  ASSERT_TRUE(mrs.ok());
  int ready = 0;
  for (const auto& m : mrs->mrs()) ready += m.state() == v1::MR_READY ? 1 : 0;
  EXPECT_EQ(Held("pd", rdmad.pid()), pds->pds_size()) << Shell("rdma resource show pd");
  EXPECT_EQ(Held("mr", rdmad.pid()), ready) << Shell("rdma resource show mr");
  std::printf("after the restart: %d PD(s) (churn's committed ones included), %d ready region(s)\n",
              pds->pds_size(), ready);

  // No name comes back: new PD, region, grant are all past everything seen before.
  create.set_label("after");
  const v1::ProtectionDomain pd_new = c2.CreatePd(create).value();
  const v1::MemoryRegion mr_new = c2.RegisterMr(FileMr(pd_new.name(), file2)).value();
  {
    std::lock_guard<std::mutex> l(seen_mu);
    EXPECT_FALSE(seen.count(pd_new.name())) << pd_new.name();
    EXPECT_FALSE(seen.count(mr_new.name())) << mr_new.name();
    for (const std::string& s : seen) {
      if (absl::StartsWith(s, "pds/")) EXPECT_GT(Number(pd_new.name()), Number(s)) << s;
      if (absl::StartsWith(s, "mrs/")) EXPECT_GT(Number(mr_new.name()), Number(s)) << s;
    }
  }

  Stage("new names checked");
  // The control plane re-grants; the client moves to the new grant and reads the file's bytes again.
  const v1::IssuedGrant regrant = Grant(c2, mr_file.name());
  EXPECT_GT(Number(regrant.grant().name()), Number(grant.grant().name()));
  EXPECT_NE(regrant.grant().token(), grant.grant().token());
  absl::Status moved = (*region)->Reconnect(regrant);
  ASSERT_TRUE(moved.ok()) << moved << "\n" << rdmad.Log();
  EXPECT_EQ((*region)->grant_name(), regrant.grant().name());
  ExpectFileBytes(**region);
  region->reset();

  Stage("reconnected");
  // ---- a clean stop releases everything
  const pid_t pid = rdmad.pid();
  EXPECT_EQ(rdmad.Stop(), 0) << rdmad.Log();
  EXPECT_EQ(Held("pd", pid) + Held("mr", pid) + Held("qp", pid) + Held("cm_id", pid), 0);
  Stage("stopped");
  unlink(file.c_str());
  unlink(file2.c_str());
}

}  // namespace
}  // namespace rdmad
