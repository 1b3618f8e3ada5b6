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
// A second case shows what recovery promises for files, from outside: tenant a, an unprivileged unix peer
// (uid 1000, "unix:uid:1000" in the config, its file root a directory under /dev/shm it owns), registers two
// files of its own; uid 1001 has a 0600 file of known bytes; a replaces one of its files by a symlink to that
// file while rdmad is up, rdmad is killed (SIGKILL) and restarted from its state file. The swapped region must
// come back MR_LOST with a reason naming the link, a's IssueGrant on it is refused and rdmad holds no MR of
// it; the untouched region comes back MR_READY, and a grant of a's reads a's bytes.
// a's calls are made by this binary itself as a child process (--call-as, below) that drops to uid/gid 1000
// before it connects, so rdmad sees the peer a real unprivileged client would be.
// run-recovery.sh compares the whole device's `rdma resource show` before and after the binary.
// Threads: the main thread, and the churn thread during the kill; rdmad and the --call-as children are
// child processes.
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <spawn.h>
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

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/client.h"
#include "client/remote_region.h"
#include "tests/conformance/rdmad_process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/grant_state.h"

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
  // `more_tenants` (JSON objects, each with a leading comma) follow tenant t; `more_settings` (JSON members,
  // each with a leading comma) follow the rest of the config.
  explicit Rdmad(const std::string& more_tenants = "", const std::string& more_settings = "") {
    sock_ = dir_.Sub("rdmad.sock");
    std::ofstream(dir_.Sub("rdmad.json"))
        << "{ \"listen\": [\"unix:" << sock_ << "\"], \"rdma_listen\": [\"" << test::EnvOr("RDMAD_GUEST_ADDR", "10.0.2.15")
        << ":7471\"], \"grant_quarantine_ms\": 0, \"state_file\": \"" << dir_.Sub("state.db") << "\", "
        // The test (root) is tenant "t": its PDs must stay its own after the restart.
        << "\"unix_principals\": [{\"uid\": 0, \"principal\": \"recovery-app\"}], "
        << "\"tenants\": [{\"name\": \"t\", \"principals\": [\"recovery-app\"]}" << more_tenants << "]"
        << more_settings << " }\n";
  }
  ~Rdmad() { Kill(); }

  void Start() {
    ++runs_;
    unlink(sock_.c_str());
    pid_ = test::StartRdmad(dir_.Sub("rdmad.json"), dir_.Sub(absl::StrCat("rdmad-", runs_, ".log")), sock_);
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
    std::ifstream in(dir_.Sub(absl::StrCat("rdmad-", runs_, ".log")));
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  Client& client() { return *client_; }  // replaced by each Start
  pid_t pid() const { return pid_; }
  std::string target() const { return "unix:" + sock_; }

 private:
  // In /tmp (the socket's path stays short), searchable by all: other uids reach the socket only where its mode
  // lets them. Removed last, once rdmad is gone.
  test::TempDir dir_{test::TempDir::Options{.base = "/tmp", .prefix = "rdmad-recovery.", .mode = 0755}};
  std::string sock_;
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
  // The key left with its bind: rdmad may report ACTIVATING until it has seen the bind complete.
  ASSERT_EQ(test::PastActivating(c, grant.grant().name()).value().state(), v1::GRANT_ACTIVE);

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

// ---- calls as another uid (--call-as)

// What a --call-as child answered: the status (code, ErrorDetail field, message) and the response in
// protobuf text format.
struct Reply {
  absl::StatusCode code = absl::StatusCode::kUnknown;
  std::string field, message, response;
  bool ok() const { return code == absl::StatusCode::kOk; }
  template <typename M>
  M As() const {
    M m;
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(response, &m)) << response;
    return m;
  }
};
std::ostream& operator<<(std::ostream& os, const Reply& r) {
  return os << absl::StatusCodeToString(r.code) << " (field '" << r.field << "'): " << r.message;
}

// Runs this binary as `--call-as UID:GID ARGS...` and reads its reply. posix_spawn, not fork: this process
// has gRPC's threads.
Reply RunAs(uid_t uid, gid_t gid, const std::vector<std::string>& args) {
  Reply r;
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    r.message = "readlink /proc/self/exe failed";
    return r;
  }
  self[n] = '\0';
  std::vector<std::string> all = {self, "--call-as", absl::StrCat(uid, ":", gid)};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    r.message = "pipe2 failed";
    return r;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, self, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t got;
  while ((got = read(fds[0], buf, sizeof buf)) > 0 || (got < 0 && errno == EINTR)) {
    if (got > 0) out.append(buf, got);
  }
  close(fds[0]);
  int status = 0;
  if (spawned == 0) waitpid(pid, &status, 0);
  // "CODE\nFIELD\nESCAPED MESSAGE\nRESPONSE"
  std::vector<std::string> parts = absl::StrSplit(out, absl::MaxSplits('\n', 3));
  int code = 0;
  if (spawned != 0 || parts.size() < 3 || !absl::SimpleAtoi(parts[0], &code)) {
    r.message = absl::StrCat("the --call-as child failed (spawn ", spawned, ", wait status ", status, "): ", out);
    return r;
  }
  r.code = static_cast<absl::StatusCode>(code);
  r.field = parts[1];
  (void)absl::CUnescape(parts[2], &r.message);
  if (parts.size() > 3) r.response = parts[3];
  return r;
}

// One RPC through the client library as uid:gid, on a unix socket: `method` is a Client method's name.
Reply CallAs(uid_t uid, gid_t gid, const std::string& target, const std::string& method,
             const google::protobuf::Message& request) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(request, &text);
  return RunAs(uid, gid, {target, method, text});
}

void WriteOwned(const std::string& path, const std::string& bytes, uid_t uid, gid_t gid) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  ASSERT_EQ(chown(path.c_str(), uid, gid), 0) << path;
  ASSERT_EQ(chmod(path.c_str(), 0600), 0) << path;
}

v1::IssueGrantRequest GrantRequest(const std::string& mr) {
  v1::IssueGrantRequest g;
  g.set_mr(mr);
  g.set_length(kFileBytes);
  g.set_principal("recovery-test");
  g.set_ttl_ms(600000);
  return g;
}

constexpr uid_t kUidA = 1000;  // tenant a
constexpr uid_t kUidB = 1001;  // owns the file a must never read

// Recovery re-opens a file only as its registering caller could now: a symlink that tenant a put in place of
// its own file while rdmad was down (here: killed) is not followed to uid 1001's private file.
TEST(Recovery, AFileSwappedForASymlinkToAnothersFileComesBackLostNotFollowed) {
  const std::string device = test::EnvOr("RDMAD_DEVICE", "rxe0");
  // Removed at the end (declared before rdmad: after it is gone), with what a and b left in them.
  test::TempDir tmp_a({.base = "/dev/shm", .prefix = "rdmad-recovery-a.", .mode = 0755});
  test::TempDir tmp_b({.base = "/dev/shm", .prefix = "rdmad-recovery-b.", .mode = 0755});
  ASSERT_TRUE(tmp_a.ok() && tmp_b.ok());
  const std::string dir_a = tmp_a.path(), dir_b = tmp_b.path();
  ASSERT_EQ(chown(dir_a.c_str(), kUidA, kUidA), 0);
  ASSERT_EQ(chown(dir_b.c_str(), kUidB, kUidB), 0);
  const std::string swapped = dir_a + "/swapped.bin", plain = dir_a + "/plain.bin", secret = dir_b + "/secret.bin";
  std::string mine(kFileBytes, '\0'), theirs(kFileBytes, '\0');
  for (uint64_t i = 0; i < kFileBytes; ++i) {
    mine[i] = Pattern(i);
    theirs[i] = static_cast<char>(~Pattern(i));
  }
  WriteOwned(swapped, mine, kUidA, kUidA);
  WriteOwned(plain, mine, kUidA, kUidA);
  WriteOwned(secret, theirs, kUidB, kUidB);

  Rdmad rdmad(absl::StrCat(", {\"name\": \"a\", \"principals\": [\"unix:uid:", kUidA, "\"], \"file_roots\": [\"",
                           dir_a, "\"]}"),
              ", \"unix_socket\": {\"mode\": \"0666\"}");
  rdmad.Start();
  ASSERT_TRUE(rdmad.client().Health().ok()) << rdmad.Log();
  auto as_a = [&](const std::string& method, const google::protobuf::Message& request) {
    return CallAs(kUidA, kUidA, rdmad.target(), method, request);
  };

  const Reply who = as_a("WhoAmI", v1::WhoAmIRequest());
  ASSERT_TRUE(who.ok()) << who;
  EXPECT_EQ(who.As<v1::Caller>().tenant(), "a");
  EXPECT_EQ(who.As<v1::Caller>().uid(), static_cast<int64_t>(kUidA));
  v1::CreatePdRequest create;
  create.set_device(device);
  create.set_label("a-files");
  const Reply pd = as_a("CreatePd", create);
  ASSERT_TRUE(pd.ok()) << pd;
  const std::string pd_name = pd.As<v1::ProtectionDomain>().name();
  const Reply mr_swapped = as_a("RegisterMr", FileMr(pd_name, swapped));
  ASSERT_TRUE(mr_swapped.ok()) << mr_swapped;
  const Reply mr_plain = as_a("RegisterMr", FileMr(pd_name, plain));
  ASSERT_TRUE(mr_plain.ok()) << mr_plain;
  const v1::MemoryRegion swapped_before = mr_swapped.As<v1::MemoryRegion>();
  const v1::MemoryRegion plain_before = mr_plain.As<v1::MemoryRegion>();
  Stage("a registered its files");

  // a, owner of its directory, replaces its file by a symlink to uid 1001's private file.
  const Reply link = RunAs(kUidA, kUidA, {"-", "symlink", secret, swapped});
  ASSERT_TRUE(link.ok()) << link;
  struct stat st {};
  ASSERT_EQ(lstat(swapped.c_str(), &st), 0);
  ASSERT_TRUE(S_ISLNK(st.st_mode));
  // A live registration of that name is refused: the link leads out of a's file root to a file a may not read.
  const Reply live = as_a("RegisterMr", FileMr(pd_name, swapped));
  EXPECT_EQ(live.code, absl::StatusCode::kPermissionDenied) << live;
  EXPECT_EQ(live.field, "source.file.path") << live;

  // ---- SIGKILL, then the restart from the state file
  const pid_t old_pid = rdmad.pid();
  rdmad.Kill();
  EXPECT_EQ(Held("mr", old_pid), 0);
  rdmad.Start();
  ASSERT_TRUE(rdmad.client().Health().ok()) << rdmad.Log();
  Stage("restarted after a's swap");

  v1::GetMrRequest get;
  get.set_name(swapped_before.name());
  const Reply lost = as_a("GetMr", get);
  ASSERT_TRUE(lost.ok()) << lost;
  const v1::MemoryRegion lost_mr = lost.As<v1::MemoryRegion>();
  EXPECT_EQ(lost_mr.state(), v1::MR_LOST) << lost_mr.ShortDebugString();
  EXPECT_TRUE(absl::StrContains(lost_mr.unusable_reason(), "lost at rdmad's restart")) << lost_mr.unusable_reason();
  EXPECT_TRUE(absl::StrContains(lost_mr.unusable_reason(), swapped + " is a symbolic link"))
      << lost_mr.unusable_reason();
  EXPECT_FALSE(absl::StrContains(lost_mr.unusable_reason(), secret)) << "the reason names b's file";
  std::printf("%s after the restart: %s\n", lost_mr.name().c_str(), lost_mr.unusable_reason().c_str());

  get.set_name(plain_before.name());
  const Reply ready = as_a("GetMr", get);
  ASSERT_TRUE(ready.ok()) << ready;
  const v1::MemoryRegion ready_mr = ready.As<v1::MemoryRegion>();
  EXPECT_EQ(ready_mr.state(), v1::MR_READY) << ready_mr.ShortDebugString();
  EXPECT_EQ(ready_mr.source().file().path(), plain);
  EXPECT_NE(ready_mr.rkey(), plain_before.rkey());

  // rdmad holds one MR on the device: the untouched file's. Nothing maps b's file.
  EXPECT_EQ(Held("mr", rdmad.pid()), 1) << Shell("rdma resource show mr");
  EXPECT_EQ(Held("pd", rdmad.pid()), 1) << Shell("rdma resource show pd");

  // a cannot get a key to the lost region: refused, naming the link.
  const Reply refused = as_a("IssueGrant", GrantRequest(swapped_before.name()));
  EXPECT_EQ(refused.code, absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_EQ(refused.field, "mr") << refused;
  EXPECT_TRUE(absl::StrContains(refused.message, "is unusable")) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message, "symbolic link")) << refused;

  // The untouched region: a's grant reads a's bytes.
  const Reply issued = as_a("IssueGrant", GrantRequest(plain_before.name()));
  ASSERT_TRUE(issued.ok()) << issued;
  absl::StatusOr<std::unique_ptr<RemoteRegion>> region =
      RemoteRegion::Open(issued.As<v1::IssuedGrant>(), RemoteRegion::Options());
  ASSERT_TRUE(region.ok()) << region.status() << "\n" << rdmad.Log();
  ExpectFileBytes(**region);
  region->reset();
  Stage("a's grant read its bytes");

  // The lost region accepts DeregisterMr, which forgets it.
  v1::DeregisterMrRequest dereg;
  dereg.set_name(swapped_before.name());
  const Reply forgotten = as_a("DeregisterMr", dereg);
  EXPECT_TRUE(forgotten.ok()) << forgotten;
  get.set_name(swapped_before.name());
  EXPECT_EQ(as_a("GetMr", get).code, absl::StatusCode::kNotFound);

  const pid_t pid = rdmad.pid();
  EXPECT_EQ(rdmad.Stop(), 0) << rdmad.Log();
  EXPECT_EQ(Held("pd", pid) + Held("mr", pid) + Held("qp", pid) + Held("cm_id", pid), 0);
}

}  // namespace
}  // namespace rdmad

// --call-as UID:GID TARGET METHOD REQUEST: drops to UID:GID (no supplementary groups), makes one call with the
// client library on TARGET, and writes "CODE\nFIELD\nESCAPED MESSAGE\n" and the response in text format to
// stdout. --call-as UID:GID - symlink TARGET LINK: as UID:GID, replaces LINK by a symlink to TARGET.
namespace rdmad {
namespace {

template <typename T>
int Answer(const absl::StatusOr<T>& result) {
  std::string text;
  if (result.ok()) google::protobuf::TextFormat::PrintToString(*result, &text);
  const absl::Status& s = result.status();
  std::printf("%d\n%s\n%s\n%s", static_cast<int>(s.code()), client::Detail(s).field().c_str(),
              absl::CEscape(s.message()).c_str(), text.c_str());
  return 0;
}
int Answer(const absl::Status& s) {
  return s.ok() ? Answer(absl::StatusOr<v1::Caller>(v1::Caller())) : Answer(absl::StatusOr<v1::Caller>(s));
}

template <typename Request>
bool Parse(const char* text, Request* request) {
  return google::protobuf::TextFormat::ParseFromString(text, request);
}

int CallAsMain(int argc, char** argv) {
  unsigned uid = 0, gid = 0;
  std::vector<std::string> ids = absl::StrSplit(argc > 2 ? argv[2] : "", ':');
  if (argc < 6 || ids.size() != 2 || !absl::SimpleAtoi(ids[0], &uid) || !absl::SimpleAtoi(ids[1], &gid)) {
    std::fprintf(stderr, "usage: --call-as UID:GID TARGET METHOD REQUEST\n");
    return 2;
  }
  if (setgroups(0, nullptr) != 0 || setresgid(gid, gid, gid) != 0 || setresuid(uid, uid, uid) != 0 ||
      getuid() != uid || geteuid() != uid) {
    return Answer(absl::PermissionDeniedError(absl::StrCat("cannot become uid ", uid, " gid ", gid)));
  }
  const std::string method = argv[4];
  if (method == "symlink") {
    if (argc < 7) return 2;
    if (unlink(argv[6]) != 0 && errno != ENOENT) return Answer(absl::ErrnoToStatus(errno, "unlink"));
    if (symlink(argv[5], argv[6]) != 0) return Answer(absl::ErrnoToStatus(errno, "symlink"));
    return Answer(absl::OkStatus());
  }
  Client::Options o;
  o.target = argv[3];
  o.timeout = std::chrono::milliseconds(10000);
  Client c(o);
  const char* text = argv[5];
  auto bad = [&] { return Answer(absl::InvalidArgumentError("unparsable request for " + method)); };
  if (method == "WhoAmI") return Answer(c.WhoAmI());
  if (method == "CreatePd") {
    v1::CreatePdRequest r;
    return Parse(text, &r) ? Answer(c.CreatePd(r)) : bad();
  }
  if (method == "RegisterMr") {
    v1::RegisterMrRequest r;
    return Parse(text, &r) ? Answer(c.RegisterMr(r)) : bad();
  }
  if (method == "GetMr") {
    v1::GetMrRequest r;
    return Parse(text, &r) ? Answer(c.GetMr(r.name())) : bad();
  }
  if (method == "DeregisterMr") {
    v1::DeregisterMrRequest r;
    return Parse(text, &r) ? Answer(c.DeregisterMr(r.name(), r.revoke_grants())) : bad();
  }
  if (method == "IssueGrant") {
    v1::IssueGrantRequest r;
    return Parse(text, &r) ? Answer(c.IssueGrant(r)) : bad();
  }
  return Answer(absl::UnimplementedError("--call-as does not know " + method));
}

}  // namespace
}  // namespace rdmad

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--call-as") return rdmad::CallAsMain(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
