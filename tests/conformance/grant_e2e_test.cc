// Grants end to end on real rdma_rxe, between two machines (two Soft-RoCE guests on one private wire,
// tests/guest/run-two-guests.sh). This binary runs in guest B and uses only the client library: Client over
// gRPC/TCP to rdmad in guest A, and RemoteRegion for the data plane (rdma_cm to A's listener, RDMA reads
// from this process). rdmad is not in the data path.
//
// Guest A's side (run-two-host.sh) plays the application: before B starts, a process in A writes random
// bytes to a file on tmpfs (RDMAD_GRANT_FILE, in A's /dev/shm) and puts a copy in the shared directory
// (RDMAD_GRANT_EXPECTED). B asks A's rdmad to register that file (FileMemory, LOCAL_WRITE, REMOTE_READ,
// MW_BIND) and issues grants on it; every byte read over RDMA is compared with the copy.
//
// Cases: the file's bytes through a grant; zero-copy reads into registered memory and reads longer than a
// slot or a message, on both paths, and the whole grant in one read (RDMAD_GRANT_LARGE_BYTES, default 64 MiB,
// and RDMAD_GRANT_WHOLE=1 for a region over 64 MiB: both need a file that large in A); bad destinations
// refused; a long read failing whole; one byte outside the grant refused at the NIC (check_bounds off);
// revoke and expiry during a stream of reads from another thread; a renewed lease; a client SIGKILLed while
// it holds a grant (A ends it DISCONNECTED and releases its window, QP and CM id, also checked with `rdma
// resource show` in A when run under run-two-host.sh); 32 clients at once from one IssueGrants batch.
//
// Environment: RDMAD_REMOTE_TARGET (rdmad A's gRPC, default 10.0.3.1:50051), RDMAD_GRANT_FILE,
// RDMAD_GRANT_EXPECTED, RDMAD_GUEST_ADDR (this guest's address, default 10.0.3.2), RDMAD_GRANT_CLIENTS
// (default 32), RDMAD_GRANT_SYNC_CLOCK=1 (set this guest's clock to A's first, as NTP would: see
// SyncClockToA). With RDMAD_GUEST_OUT and RDMAD_GUEST_ROLE=b set (run-two-guests.sh), A's resources are
// snapshotted through files in the shared directory: B writes snap-req-LABEL, A answers with a-res-LABEL.txt
// and snap-LABEL (run-two-host.sh).
//
// The binary is also its own child process: `grant_e2e_test --hold-grant HOST PORT TOKEN_HEX MR_OFFSET`
// opens the grant, checks one read, prints "ACTIVE grants/N" and waits to be killed.
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/client.h"
#include "client/remote_region.h"
#include "proto/wire/wall_clock.h"
#include "tests/support/eventually.h"
#include "tests/support/grant_state.h"

namespace rdmad::testing {
namespace {

using client::Client;
using client::RemoteRegion;
using ::rdmad::test::Eventually;

std::string Env(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

Client& A() {
  static Client* c = [] {
    Client::Options o;
    o.target = Env("RDMAD_REMOTE_TARGET", "10.0.3.1:50051");
    o.timeout = std::chrono::seconds(60);
    return new Client(o);
  }();
  return *c;
}
std::string SelfAddr() { return Env("RDMAD_GUEST_ADDR", "10.0.3.2"); }

// The bytes the application in A wrote, as copied to the shared directory.
const std::string& Expected() {
  static const std::string* bytes = [] {
    auto* s = new std::string;
    std::ifstream in(Env("RDMAD_GRANT_EXPECTED", "/dev/shm/rdmad-grant-e2e.expected"), std::ios::binary);
    if (in) {  // in one read: a large file char by char takes minutes under TCG
      in.seekg(0, std::ios::end);
      s->resize(static_cast<size_t>(std::max<std::streamoff>(in.tellg(), 0)));
      in.seekg(0);
      in.read(s->data(), static_cast<std::streamsize>(s->size()));
      if (!in) s->clear();
    }
    return s;
  }();
  return *bytes;
}

// "" if `got` equals the expected bytes at `mr_offset`; else where they first differ.
std::string Compare(const char* got, size_t n, uint64_t mr_offset) {
  const std::string& want = Expected();
  if (mr_offset > want.size() || n > want.size() - mr_offset) {
    return absl::StrCat("range [", mr_offset, ", +", n, ") is past the expected bytes (", want.size(), ")");
  }
  if (std::memcmp(got, want.data() + mr_offset, n) == 0) return "";
  for (size_t i = 0; i < n; ++i) {
    if (got[i] != want[mr_offset + i]) {
      return absl::StrFormat("byte %u of the region differs: got 0x%02x, want 0x%02x", mr_offset + i,
                             static_cast<uint8_t>(got[i]), static_cast<uint8_t>(want[mr_offset + i]));
    }
  }
  return "";
}

// The region under test: A's file, registered by this test over gRPC (once for the binary).
struct Region {
  std::string pd, mr;
  uint64_t length = 0;
};
void SyncClockToA(const Region& r);  // below
const Region* TheRegion(std::string* error) {
  static Region* region = nullptr;
  static std::string failure;
  if (region != nullptr || !failure.empty()) {
    *error = failure;
    return region;
  }
  if (Expected().empty()) {
    failure = "no expected bytes (RDMAD_GRANT_EXPECTED): guest A's application step did not run";
    *error = failure;
    return nullptr;
  }
  v1::CreatePdRequest pd_req;
  pd_req.set_device("rxe0");
  pd_req.set_label("grant-e2e");
  absl::StatusOr<v1::ProtectionDomain> pd = A().CreatePd(pd_req);
  if (!pd.ok()) {
    failure = absl::StrCat("CreatePd on rdmad A: ", pd.status().ToString());
    *error = failure;
    return nullptr;
  }
  v1::RegisterMrRequest mr_req;
  mr_req.set_pd(pd->name());
  v1::FileMemory* file = mr_req.mutable_source()->mutable_file();
  file->set_path(Env("RDMAD_GRANT_FILE", "/dev/shm/rdmad-grant-e2e.bin"));
  file->set_offset(0);
  file->set_length(Expected().size());
  mr_req.add_access(v1::LOCAL_WRITE);
  mr_req.add_access(v1::REMOTE_READ);
  mr_req.add_access(v1::MW_BIND);
  absl::StatusOr<v1::MemoryRegion> mr = A().RegisterMr(mr_req);
  if (!mr.ok()) {
    failure = absl::StrCat("RegisterMr (file ", file->path(), ") on rdmad A: ", mr.status().ToString());
    *error = failure;
    return nullptr;
  }
  region = new Region{pd->name(), mr->name(), mr->length()};
  std::printf("[ setup    ] %s (%s) registers %s in A: %llu bytes\n", mr->name().c_str(), pd->name().c_str(),
              file->path().c_str(), static_cast<unsigned long long>(mr->length()));
  if (Env("RDMAD_GRANT_SYNC_CLOCK", "") == "1") SyncClockToA(*region);
  return region;
}

#define REGION_OR_FAIL(var)                       \
  std::string var##_error;                        \
  const Region* var = TheRegion(&var##_error);    \
  ASSERT_NE(var, nullptr) << var##_error

absl::StatusOr<v1::IssuedGrant> Issue(const Region& r, uint64_t offset, uint64_t length, uint32_t ttl_ms,
                                      const std::string& principal, bool writable = false) {
  v1::IssueGrantRequest req;
  req.set_mr(r.mr);
  req.set_offset(offset);
  req.set_length(length);
  req.add_access(v1::REMOTE_READ);
  if (writable) req.add_access(v1::REMOTE_WRITE);
  req.set_ttl_ms(ttl_ms);
  req.set_principal(principal);
  return A().IssueGrant(req);
}

RemoteRegion::Options Opts(size_t depth, size_t max_read) {
  RemoteRegion::Options o;
  o.queue_depth = depth;
  o.max_read_bytes = max_read;
  o.connect_timeout = absl::Seconds(30);
  return o;
}

// ---- A's clock, seen from here

// A's wall clock minus this guest's (nanoseconds), from the issue time of a probe grant: the midpoint of
// the fastest of a few IssueGrant round trips; `uncertainty` is half that round trip.
int64_t ClockOffsetNs(const Region& r, int64_t* uncertainty) {
  int64_t best_rtt = INT64_MAX, offset = 0;
  for (int i = 0; i < 5; ++i) {
    const absl::Time sent = wire::WallNow();
    absl::StatusOr<v1::IssuedGrant> probe = Issue(r, 0, 1, 5000, "clock-probe");
    const absl::Time got = wire::WallNow();
    if (!probe.ok()) continue;
    const int64_t rtt = absl::ToInt64Nanoseconds(got - sent);
    if (rtt < best_rtt) {
      best_rtt = rtt;
      const int64_t mid = absl::ToUnixNanos(sent) + rtt / 2;
      offset = probe->grant().issue_time_unix_nanos() - mid;
    }
    (void)A().RevokeGrant(probe->grant().name());
  }
  *uncertainty = best_rtt == INT64_MAX ? 0 : best_rtt / 2;
  return offset;
}

// What ntpdate would do on a real machine: sets this guest's clock to A's, as measured by ClockOffsetNs. The
// guests have no NTP and read the RTC at boot, one second apart at worst; RemoteRegion tells an expired
// grant from a revoked one by comparing its own clock with rdmad's lease end when no ENDED message arrived,
// so it assumes clocks in sync (run-two-host.sh sets RDMAD_GRANT_SYNC_CLOCK=1).
void SyncClockToA(const Region& r) {
  int64_t uncertainty = 0;
  const int64_t offset = ClockOffsetNs(r, &uncertainty);
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  const int64_t ns = static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec + offset;
  const timespec set{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  const bool ok = clock_settime(CLOCK_REALTIME, &set) == 0;
  int64_t after_uncertainty = 0;
  const int64_t after = ClockOffsetNs(r, &after_uncertainty);
  std::printf("[ setup    ] B's clock set to A's (%s): A - B was %+.3f ms (+-%.3f), now %+.3f ms (+-%.3f)\n",
              ok ? "clock_settime" : std::strerror(errno), offset / 1e6, uncertainty / 1e6, after / 1e6,
              after_uncertainty / 1e6);
}

// Polls GetGrant until the grant is ENDED (or `timeout`); returns the last answer.
v1::Grant WaitEnded(const std::string& name, absl::Duration timeout = absl::Seconds(30)) {
  const absl::Time until = wire::WallNow() + timeout;
  v1::Grant g;
  while (true) {
    absl::StatusOr<v1::Grant> got = A().GetGrant(name);
    if (got.ok()) g = *got;
    if ((got.ok() && got->state() == v1::GRANT_ENDED) || wire::WallNow() >= until) return g;
    absl::SleepFor(absl::Milliseconds(20));
  }
}

// rdmad A's data-plane connections from this guest (any state but LISTENING).
std::vector<v1::CmId> MyConnections() {
  std::vector<v1::CmId> out;
  absl::StatusOr<v1::ListCmIdsResponse> ids = A().ListCmIds();
  if (!ids.ok()) return out;
  for (const v1::CmId& id : ids->cm_ids()) {
    if (id.data_plane() && id.state() != v1::CM_LISTENING && id.remote().address() == SelfAddr()) out.push_back(id);
  }
  return out;
}
// Waits until A holds no connection from this guest; returns how many remain.
size_t WaitNoConnections(absl::Duration timeout = absl::Seconds(30)) {
  const absl::Time until = wire::WallNow() + timeout;
  size_t n = 0;
  while ((n = MyConnections().size()) > 0 && wire::WallNow() < until) absl::SleepFor(absl::Milliseconds(50));
  return n;
}
// Live (not ENDED) grants on the MR.
size_t LiveGrants(const Region& r) {
  absl::StatusOr<v1::ListGrantsResponse> l = A().ListGrants(r.mr);
  // A region deregistered (the last test) is a name of nothing: NOT_FOUND, and it has no live grant.
  if (!l.ok()) return l.status().code() == absl::StatusCode::kNotFound ? 0 : 9999;
  size_t n = 0;
  for (const v1::Grant& g : l->grants()) n += g.state() != v1::GRANT_ENDED;
  return n;
}
bool HasCmId(const std::string& name) {
  absl::StatusOr<v1::ListCmIdsResponse> ids = A().ListCmIds();
  if (!ids.ok()) return true;
  for (const v1::CmId& id : ids->cm_ids()) {
    if (id.name() == name) return true;
  }
  return false;
}
bool HasQp(const std::string& name) {
  absl::StatusOr<v1::ListQpsResponse> qps = A().ListQps();
  if (!qps.ok()) return true;
  for (const v1::QueuePair& qp : qps->qps()) {
    if (qp.name() == name) return true;
  }
  return false;
}

// ---- A's device resources, through the shared directory (run-two-host.sh answers in A)

bool CanSnapshotA() {
  return !Env("RDMAD_GUEST_OUT", "").empty() && Env("RDMAD_GUEST_ROLE", "") == "b";
}
// rxe0's summary line of `rdma resource show` in A: {"pd": 2, "qp": 3, ...}; empty on failure.
std::map<std::string, long> SnapshotA(const std::string& label) {
  std::map<std::string, long> counts;
  const std::string dir = Env("RDMAD_GUEST_OUT", "");
  const std::string req = absl::StrCat(dir, "/snap-req-", label), done = absl::StrCat(dir, "/snap-", label);
  const std::string tmp = absl::StrCat(dir, "/.tmp-", label);  // never matches A's snap-req-* glob
  { std::ofstream(tmp).put('\n'); }
  if (std::rename(tmp.c_str(), req.c_str()) != 0) return counts;
  const absl::Time until = wire::WallNow() + absl::Seconds(30);
  while (access(done.c_str(), F_OK) != 0) {
    if (wire::WallNow() >= until) return counts;
    absl::SleepFor(absl::Milliseconds(50));
  }
  std::ifstream in(absl::StrCat(dir, "/a-res-", label, ".txt"));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string index, dev;
    words >> index >> dev;
    if (dev != "rxe0:") continue;
    std::string key;
    long value;
    while (words >> key >> value) counts[key] = value;
  }
  return counts;
}
std::string Show(const std::map<std::string, long>& counts) {
  std::string s;
  for (const auto& [k, v] : counts) absl::StrAppend(&s, s.empty() ? "" : " ", k, " ", v);
  return s;
}

// ---- a stream of reads on its own thread

struct ReadRecord {
  absl::Time start, end;
  absl::Status status;
  uint64_t offset = 0;
  std::string mismatch;  // a read that succeeded with the wrong bytes
};

class Reader {
 public:
  // Reads `size` bytes at a time from the granted range [0, span) of a grant that starts at `mr_offset`.
  Reader(RemoteRegion* region, uint64_t mr_offset, uint64_t span, size_t size)
      : region_(region), mr_offset_(mr_offset), span_(span), size_(size) {}
  ~Reader() { Stop(); }
  void Start() {
    thread_ = std::thread([this] { Run(); });
  }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int successes() const { return successes_; }
  int failures() const { return failures_; }
  const std::vector<ReadRecord>& records() const { return records_; }  // after Stop

 private:
  void Run() {
    std::vector<char> buf(size_);
    const uint64_t slots = span_ / size_;
    for (uint64_t i = 0; !stop_ && records_.size() < 500000; ++i) {
      ReadRecord rec;
      rec.offset = ((i * 7) % slots) * size_;
      rec.start = wire::WallNow();
      rec.status = region_->Read(rec.offset, size_, buf.data());
      rec.end = wire::WallNow();
      if (rec.status.ok()) {
        rec.mismatch = Compare(buf.data(), size_, mr_offset_ + rec.offset);
        ++successes_;
      } else {
        ++failures_;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));  // failures are immediate once the QP is down
      }
      records_.push_back(std::move(rec));
    }
  }
  RemoteRegion* region_;
  const uint64_t mr_offset_, span_;
  const size_t size_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> successes_{0}, failures_{0};
  std::vector<ReadRecord> records_;
};

class GrantE2e : public ::testing::Test {
 protected:
  void TearDown() override {
    // Every test lets go of what it opened: A keeps no connection from here and no live grant.
    EXPECT_EQ(WaitNoConnections(), 0u) << "rdmad A kept data-plane connections from this guest";
    std::string error;
    if (const Region* r = TheRegion(&error)) {
      EXPECT_TRUE(Eventually([r] { return LiveGrants(*r) == 0; }, absl::Seconds(30)))
          << "live grants remain on " << r->mr;
    }
  }
};

// The application's file in A, through a grant, byte for byte: the whole region, then an unaligned range
// with its first and last bytes; the grant as A shows it while active; revoked at the end.
TEST_F(GrantE2e, FileWrittenInAReadsBackOverRdmaFromB) {
  REGION_OR_FAIL(r);
  ASSERT_EQ(r->length, Expected().size());

  // The whole region.
  {
    absl::StatusOr<v1::IssuedGrant> whole = Issue(*r, 0, r->length, 60000, "b-reader");
    ASSERT_TRUE(whole.ok()) << whole.status();
    auto region = RemoteRegion::Open(*whole, Opts(16, 64 << 10));
    ASSERT_TRUE(region.ok()) << region.status();
    std::string got(r->length, '\0');
    std::vector<RemoteRegion::ReadOp> ops;
    for (uint64_t off = 0; off < r->length; off += 64 << 10) {
      RemoteRegion::ReadOp op;
      op.offset = off;
      op.length = std::min<uint64_t>(64 << 10, r->length - off);
      op.destination = got.data() + off;
      ops.push_back(op);
    }
    const absl::Time t0 = wire::WallNow();
    absl::Status read = (*region)->ReadBatch(absl::MakeSpan(ops));
    ASSERT_TRUE(read.ok()) << read;
    const absl::Duration took = wire::WallNow() - t0;
    EXPECT_EQ(Compare(got.data(), got.size(), 0), "");
    std::printf("[          ] %s: the whole region (%llu bytes) in %s\n", (*region)->grant_name().c_str(),
                static_cast<unsigned long long>(r->length), absl::FormatDuration(took).c_str());
  }
  ASSERT_EQ(WaitNoConnections(), 0u);

  // An unaligned range inside it.
  const uint64_t offset = 4096 + 17, length = (1 << 20) + 3;
  absl::StatusOr<v1::IssuedGrant> issued = Issue(*r, offset, length, 60000, "b-reader");
  ASSERT_TRUE(issued.ok()) << issued.status();
  EXPECT_EQ(issued->grant().state(), v1::GRANT_ISSUED);
  EXPECT_EQ(issued->grant().scope(), v1::SCOPE_QP) << "rxe has type 2 windows";
  EXPECT_EQ(issued->grant().principal(), "b-reader");
  ASSERT_FALSE(issued->endpoints().empty());
  EXPECT_EQ(issued->endpoints(0).address(), Env("RDMAD_REMOTE_ADDR", "10.0.3.1"));
  const std::string name = issued->grant().name();

  auto region = RemoteRegion::Open(*issued, Opts(16, 64 << 10));
  ASSERT_TRUE(region.ok()) << region.status();
  EXPECT_EQ((*region)->grant_name(), name);
  EXPECT_EQ((*region)->length(), length);
  EXPECT_EQ((*region)->key().scope, wire::GrantKeyScope::kQp);
  EXPECT_EQ((*region)->key().access, wire::kGrantRead);

  // The key left with its bind: rdmad may report ACTIVATING until it has seen the bind complete.
  absl::StatusOr<v1::Grant> active = test::PastActivating(A(), name);
  ASSERT_TRUE(active.ok()) << active.status();
  EXPECT_EQ(active->state(), v1::GRANT_ACTIVE);
  EXPECT_FALSE(active->cm_id().empty());
  EXPECT_FALSE(active->qp().empty());
  EXPECT_FALSE(active->window().empty());
  absl::StatusOr<v1::MemoryWindow> mw = A().GetMw(active->window());
  ASSERT_TRUE(mw.ok()) << mw.status();
  EXPECT_TRUE(mw->bound());
  EXPECT_EQ(mw->type(), v1::TYPE_2);
  EXPECT_EQ(mw->binding().qp(), active->qp());
  EXPECT_EQ(mw->binding().length(), length);
  EXPECT_EQ(mw->owner(), "grants");

  std::string got(length, '\0');
  std::vector<RemoteRegion::ReadOp> ops;
  for (uint64_t off = 0; off < length; off += 64 << 10) {
    RemoteRegion::ReadOp op;
    op.offset = off;
    op.length = std::min<uint64_t>(64 << 10, length - off);
    op.destination = got.data() + off;
    ops.push_back(op);
  }
  ASSERT_TRUE((*region)->ReadBatch(absl::MakeSpan(ops)).ok());
  EXPECT_EQ(Compare(got.data(), length, offset), "");
  char first = 0, last = 0;
  ASSERT_TRUE((*region)->Read(0, 1, &first).ok());
  ASSERT_TRUE((*region)->Read(length - 1, 1, &last).ok());
  EXPECT_EQ(first, Expected()[offset]);
  EXPECT_EQ(last, Expected()[offset + length - 1]);

  absl::StatusOr<v1::Grant> revoked = A().RevokeGrant(name);
  ASSERT_TRUE(revoked.ok()) << revoked.status();
  EXPECT_EQ(revoked->state(), v1::GRANT_ENDED);
  EXPECT_EQ(revoked->end_reason(), v1::END_REVOKED);
  absl::Status after = (*region)->Read(0, 1, &first);
  EXPECT_EQ(after.code(), absl::StatusCode::kPermissionDenied) << after;
}

// With the library's bounds check off, a read one byte past the end, one byte before the start, and one
// straddling the end are posted, and rdmad's NIC refuses each: OUT_OF_RANGE from the completion, and the
// connection is then broken (the library's own refusal leaves it usable, checked first). A then ends the
// grant when the client leaves (DISCONNECTED) and the window is unbound.
TEST_F(GrantE2e, OneByteOutsideTheGrantIsRefusedAtTheNic) {
  REGION_OR_FAIL(r);
  const uint64_t offset = (64 << 10) + 5, length = (8 << 10) - 3;

  {  // the library's check: refused before posting, the connection stays good
    absl::StatusOr<v1::IssuedGrant> issued = Issue(*r, offset, length, 60000, "b-bounds");
    ASSERT_TRUE(issued.ok()) << issued.status();
    auto region = RemoteRegion::Open(*issued, Opts(4, 4096));
    ASSERT_TRUE(region.ok()) << region.status();
    char c = 0;
    absl::Status s = (*region)->Read(length, 1, &c);
    EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "library")) << s;
    ASSERT_TRUE((*region)->Read(length - 1, 1, &c).ok());
    EXPECT_EQ(c, Expected()[offset + length - 1]);
  }

  struct Case {
    const char* what;
    uint64_t read_offset, read_length;
  };
  for (const Case& c : {Case{"one byte past the end", length, 1}, Case{"one byte before the start", UINT64_MAX, 1},
                        Case{"a read straddling the end", length - 4, 8}}) {
    SCOPED_TRACE(c.what);
    absl::StatusOr<v1::IssuedGrant> issued = Issue(*r, offset, length, 60000, "b-bounds");
    ASSERT_TRUE(issued.ok()) << issued.status();
    const std::string name = issued->grant().name();
    RemoteRegion::Options o = Opts(4, 4096);
    o.check_bounds = false;
    auto region = RemoteRegion::Open(*issued, o);
    ASSERT_TRUE(region.ok()) << region.status();
    char buf[8] = {};
    // The edges themselves are readable: the window is exactly the range.
    ASSERT_TRUE((*region)->Read(0, 1, buf).ok());
    EXPECT_EQ(buf[0], Expected()[offset]);
    ASSERT_TRUE((*region)->Read(length - 1, 1, buf).ok());
    EXPECT_EQ(buf[0], Expected()[offset + length - 1]);
    absl::StatusOr<v1::Grant> active = A().GetGrant(name);
    ASSERT_TRUE(active.ok());
    const std::string window = active->window();

    absl::Status s = (*region)->Read(c.read_offset, c.read_length, buf);
    EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "NIC")) << s;
    EXPECT_FALSE(absl::StrContains(s.message(), "library")) << s;
    // The completion error broke the connection: an in-range read now fails too (with the first error).
    absl::Status next = (*region)->Read(0, 1, buf);
    EXPECT_FALSE(next.ok());
    EXPECT_EQ(next.code(), absl::StatusCode::kOutOfRange) << next;

    region->reset();  // the client leaves
    v1::Grant ended = WaitEnded(name);
    EXPECT_EQ(ended.state(), v1::GRANT_ENDED);
    EXPECT_EQ(ended.end_reason(), v1::END_DISCONNECTED) << ended.end_detail();
    absl::StatusOr<v1::MemoryWindow> mw = A().GetMw(window);
    ASSERT_TRUE(mw.ok()) << mw.status();
    EXPECT_FALSE(mw->bound());
    EXPECT_EQ(WaitNoConnections(), 0u);
  }
}

// A thread reads in a loop; another revokes. Every read that started after RevokeGrant returned fails, as
// revoked (PERMISSION_DENIED); reads that succeeded carry the right bytes.
TEST_F(GrantE2e, RevokeDuringAStreamOfReads) {
  REGION_OR_FAIL(r);
  const uint64_t offset = 1 << 20, length = 256 << 10;
  absl::StatusOr<v1::IssuedGrant> issued = Issue(*r, offset, length, 60000, "b-stream");
  ASSERT_TRUE(issued.ok()) << issued.status();
  auto region = RemoteRegion::Open(*issued, Opts(4, 4096));
  ASSERT_TRUE(region.ok()) << region.status();
  Reader reader(region->get(), offset, length, 4096);
  reader.Start();
  ASSERT_TRUE(Eventually([&] { return reader.successes() >= 50 || reader.failures() > 0; }, absl::Seconds(30)));
  ASSERT_EQ(reader.failures(), 0) << "a read failed before the revoke";
  const absl::Time called = wire::WallNow();
  absl::StatusOr<v1::Grant> revoked = A().RevokeGrant(issued->grant().name());
  const absl::Time returned = wire::WallNow();
  ASSERT_TRUE(revoked.ok()) << revoked.status();
  EXPECT_EQ(revoked->state(), v1::GRANT_ENDED);
  EXPECT_EQ(revoked->end_reason(), v1::END_REVOKED);
  // Let the reader run on after the revoke: its reads must all fail.
  Eventually([&] { return reader.failures() >= 20; }, absl::Seconds(10));
  absl::SleepFor(absl::Milliseconds(100));
  reader.Stop();

  int before_ok = 0, during_ok = 0, during_failed = 0, after = 0;
  const ReadRecord* first_failure = nullptr;
  for (const ReadRecord& rec : reader.records()) {
    EXPECT_EQ(rec.mismatch, "") << "read at " << rec.offset;
    if (!rec.status.ok() && first_failure == nullptr) first_failure = &rec;
    if (rec.start >= returned) {
      ++after;
      EXPECT_FALSE(rec.status.ok()) << "a read started " << absl::FormatDuration(rec.start - returned)
                                    << " after RevokeGrant returned succeeded";
      EXPECT_EQ(rec.status.code(), absl::StatusCode::kPermissionDenied) << rec.status;
      EXPECT_TRUE(absl::StrContains(absl::AsciiStrToLower(rec.status.message()), "revoked")) << rec.status;
    } else if (rec.end <= called) {
      before_ok += rec.status.ok();
    } else {
      (rec.status.ok() ? during_ok : during_failed)++;
    }
  }
  EXPECT_GT(after, 0) << "no read started after RevokeGrant returned";
  ASSERT_NE(first_failure, nullptr);
  EXPECT_EQ(first_failure->status.code(), absl::StatusCode::kPermissionDenied) << first_failure->status;
  std::printf("[          ] revoke took %s; reads: %d ok before, %d ok / %d failed overlapping the call, %d after "
              "(all failed); first error: %s\n",
              absl::FormatDuration(returned - called).c_str(), before_ok, during_ok, during_failed, after,
              first_failure->status.ToString().c_str());
}

// The same with the lease running out: every read that started once A had ended the grant fails as expired
// (DEADLINE_EXCEEDED). Checked twice:
// - without clocks: every read started after this guest saw the grant ENDED (GetGrant's answer) must fail;
// - to the millisecond: A's end time moved to this guest's clock with the offset measured before the lease
//   and again after it; the margin is the larger measurement uncertainty plus how far the offset moved.
TEST_F(GrantE2e, ExpiryDuringAStreamOfReads) {
  REGION_OR_FAIL(r);
  int64_t uncertainty = 0, uncertainty_after = 0;
  const int64_t offset_ns = ClockOffsetNs(*r, &uncertainty);
  std::printf("[          ] A's clock - B's clock: %+.3f ms (+-%.3f ms)\n", offset_ns / 1e6, uncertainty / 1e6);
  ASSERT_EQ(WaitNoConnections(), 0u);

  const uint64_t offset = 2 << 20, length = 128 << 10;
  absl::StatusOr<v1::IssuedGrant> issued = Issue(*r, offset, length, 3000, "b-lease");
  ASSERT_TRUE(issued.ok()) << issued.status();
  const std::string name = issued->grant().name();
  auto region = RemoteRegion::Open(*issued, Opts(4, 4096));
  ASSERT_TRUE(region.ok()) << region.status();
  Reader reader(region->get(), offset, length, 4096);
  reader.Start();
  v1::Grant ended = WaitEnded(name, absl::Seconds(30));
  const absl::Time seen_ended = wire::WallNow();  // causally after A ended the grant
  Eventually([&] { return reader.failures() >= 20; }, absl::Seconds(10));
  absl::SleepFor(absl::Milliseconds(100));
  reader.Stop();
  ASSERT_EQ(ended.state(), v1::GRANT_ENDED);
  EXPECT_EQ(ended.end_reason(), v1::END_EXPIRED) << ended.end_detail();
  const int64_t offset_after_ns = ClockOffsetNs(*r, &uncertainty_after);
  std::printf("[          ] after the lease: A's clock - B's clock: %+.3f ms (+-%.3f ms)\n", offset_after_ns / 1e6,
              uncertainty_after / 1e6);

  // A's times on this guest's clock.
  const absl::Time expiry = absl::FromUnixNanos(ended.expire_time_unix_nanos() - offset_ns);
  const absl::Time end = absl::FromUnixNanos(ended.end_time_unix_nanos() - offset_ns);
  const absl::Duration margin = absl::Nanoseconds(std::max(uncertainty, uncertainty_after)) +
                                absl::Nanoseconds(std::llabs(offset_after_ns - offset_ns)) + absl::Milliseconds(1);
  int ok_before = 0, ok_after_expiry = 0, after_end = 0, after_seen = 0;
  const ReadRecord* first_failure = nullptr;
  for (const ReadRecord& rec : reader.records()) {
    EXPECT_EQ(rec.mismatch, "") << "read at " << rec.offset;
    if (!rec.status.ok() && first_failure == nullptr) first_failure = &rec;
    if (rec.status.ok()) (rec.start < expiry ? ok_before : ok_after_expiry)++;
    if (rec.start >= seen_ended) {
      ++after_seen;
      EXPECT_FALSE(rec.status.ok()) << "a read started " << absl::FormatDuration(rec.start - seen_ended)
                                    << " after GetGrant answered ENDED succeeded";
    }
    if (rec.start >= end + margin) {
      ++after_end;
      EXPECT_FALSE(rec.status.ok()) << "a read started " << absl::FormatDuration(rec.start - end)
                                    << " after A ended the grant succeeded (margin " << absl::FormatDuration(margin)
                                    << ")";
      EXPECT_EQ(rec.status.code(), absl::StatusCode::kDeadlineExceeded) << rec.status;
    }
  }
  EXPECT_GT(ok_before, 0);
  EXPECT_GT(after_seen, 0) << "no read started after GetGrant answered ENDED";
  EXPECT_GT(after_end, 0) << "no read started after the grant ended";
  ASSERT_NE(first_failure, nullptr);
  EXPECT_EQ(first_failure->status.code(), absl::StatusCode::kDeadlineExceeded) << first_failure->status;
  EXPECT_TRUE(absl::StrContains(absl::AsciiStrToLower(first_failure->status.message()), "expired"))
      << first_failure->status;
  std::printf("[          ] lease end -> key dead in A: %s; first failed read started %s after the lease's end; %d "
              "reads ok before it, %d ok after it (the key still live), %d started after ENDED was seen (all "
              "failed); margin %s; first error: %s\n",
              absl::FormatDuration(absl::Nanoseconds(ended.end_time_unix_nanos() - ended.expire_time_unix_nanos()))
                  .c_str(),
              absl::FormatDuration(first_failure->start - expiry).c_str(), ok_before, ok_after_expiry, after_seen,
              absl::FormatDuration(margin).c_str(), first_failure->status.ToString().c_str());
}

// A lease renewed before it runs out keeps working past its first end; the region learns the new end with
// set_expiry, and when the renewed lease runs out the reads fail as expired.
TEST_F(GrantE2e, RenewedGrantKeepsWorkingPastItsFirstExpiry) {
  REGION_OR_FAIL(r);
  int64_t uncertainty = 0;
  const absl::Duration skew = absl::Nanoseconds(ClockOffsetNs(*r, &uncertainty));  // A - B
  const uint64_t offset = 3 << 20, length = 64 << 10;
  absl::StatusOr<v1::IssuedGrant> issued = Issue(*r, offset, length, 2000, "b-renew");
  ASSERT_TRUE(issued.ok()) << issued.status();
  const std::string name = issued->grant().name();
  auto region = RemoteRegion::Open(*issued, Opts(4, 4096));
  ASSERT_TRUE(region.ok()) << region.status();
  const absl::Time first_expiry = (*region)->expiry();
  EXPECT_EQ(absl::ToUnixNanos(first_expiry), issued->grant().expire_time_unix_nanos());

  std::vector<char> buf(4096);
  auto read_one = [&](uint64_t i) -> absl::Status {
    const uint64_t off = (i % (length / 4096)) * 4096;
    absl::Status s = (*region)->Read(off, 4096, buf.data());
    if (s.ok()) {
      EXPECT_EQ(Compare(buf.data(), 4096, offset + off), "");
    }
    return s;
  };
  uint64_t i = 0;
  const absl::Time started = wire::WallNow();
  while (wire::WallNow() < started + absl::Milliseconds(700)) {
    ASSERT_TRUE(read_one(i++).ok());
  }
  absl::StatusOr<v1::Grant> renewed = A().RenewGrant(name, std::chrono::milliseconds(5000));
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  EXPECT_EQ(renewed->renewals(), 1u);
  EXPECT_GT(renewed->expire_time_unix_nanos(), issued->grant().expire_time_unix_nanos());
  const absl::Time second_expiry = absl::FromUnixNanos(renewed->expire_time_unix_nanos());
  (*region)->set_expiry(second_expiry);
  // Well past the first end (A's time, on this guest's clock).
  const absl::Time first_end_here = first_expiry - skew, second_end_here = second_expiry - skew;
  int n_past_first = 0;
  while (wire::WallNow() < first_end_here + absl::Milliseconds(1500)) {
    absl::Status s = read_one(i++);
    ASSERT_TRUE(s.ok()) << "a read " << absl::FormatDuration(wire::WallNow() - first_end_here)
                        << " after the first expiry failed: " << s;
    n_past_first += wire::WallNow() > first_end_here;
  }
  EXPECT_GT(n_past_first, 0);
  absl::StatusOr<v1::Grant> still = A().GetGrant(name);
  ASSERT_TRUE(still.ok());
  EXPECT_EQ(still->state(), v1::GRANT_ACTIVE);
  // Then the renewed lease runs out.
  absl::Status last;
  absl::Time failed_at;
  while (wire::WallNow() < second_end_here + absl::Seconds(15)) {
    failed_at = wire::WallNow();
    last = read_one(i++);
    if (!last.ok()) break;
  }
  EXPECT_EQ(last.code(), absl::StatusCode::kDeadlineExceeded) << last;
  v1::Grant ended = WaitEnded(name);
  EXPECT_EQ(ended.end_reason(), v1::END_EXPIRED);
  std::printf("[          ] %d reads past the first expiry; the first failed read started %s after the renewed "
              "lease's end (A - B %+.3f ms): %s\n",
              n_past_first, absl::FormatDuration(failed_at - second_end_here).c_str(), absl::ToDoubleMilliseconds(skew),
              last.ToString().c_str());
}

// A client process opens a grant and is SIGKILLed. A ends the grant DISCONNECTED and releases its window
// (unbound), QP and CM id; A's device counts (`rdma resource show`) are back where they were.
TEST_F(GrantE2e, KilledClientsGrantEndsDisconnectedAndEverythingIsReleased) {
  REGION_OR_FAIL(r);
  ASSERT_EQ(WaitNoConnections(), 0u);
  const bool snapshots = CanSnapshotA();
  std::map<std::string, long> before, during, after;
  if (snapshots) {
    before = SnapshotA("kill-before");
    ASSERT_FALSE(before.empty()) << "no snapshot from guest A";
  }

  const uint64_t offset = 12345, length = 32 << 10;
  absl::StatusOr<v1::IssuedGrant> issued = Issue(*r, offset, length, 60000, "b-doomed");
  ASSERT_TRUE(issued.ok()) << issued.status();
  const std::string name = issued->grant().name();
  ASSERT_FALSE(issued->endpoints().empty());

  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const std::string port = absl::StrCat(issued->endpoints(0).port());
  const std::string token = absl::BytesToHexString(issued->token());
  const std::string mr_offset = absl::StrCat(offset);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    dup2(out[1], 1);
    close(out[0]);
    close(out[1]);
    execl("/proc/self/exe", "grant_e2e_test", "--hold-grant", issued->endpoints(0).address().c_str(), port.c_str(),
          token.c_str(), mr_offset.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  std::string line;
  {
    const absl::Time until = wire::WallNow() + absl::Seconds(60);
    char ch;
    while (wire::WallNow() < until && line.find('\n') == std::string::npos) {
      pollfd pfd{out[0], POLLIN, 0};
      if (poll(&pfd, 1, 100) > 0) {
        if (read(out[0], &ch, 1) != 1) break;
        line.push_back(ch);
      }
    }
  }
  close(out[0]);
  const bool held = absl::StartsWith(line, "ACTIVE ");
  absl::StatusOr<v1::Grant> active = test::PastActivating(A(), name);
  if (held && snapshots) during = SnapshotA("kill-during");
  kill(child, SIGKILL);
  const absl::Time killed = wire::WallNow();
  int wstatus = 0;
  waitpid(child, &wstatus, 0);
  ASSERT_TRUE(held) << "the child did not report its grant: '" << line << "'";
  EXPECT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL);
  ASSERT_TRUE(active.ok()) << active.status();
  ASSERT_EQ(active->state(), v1::GRANT_ACTIVE);
  const std::string cm_id = active->cm_id(), qp = active->qp(), window = active->window();
  ASSERT_FALSE(cm_id.empty());
  ASSERT_FALSE(qp.empty());
  ASSERT_FALSE(window.empty());
  if (snapshots) {
    EXPECT_EQ(during["qp"], before["qp"] + 1) << "before: " << Show(before) << "; during: " << Show(during);
    EXPECT_EQ(during["cm_id"], before["cm_id"] + 1) << "before: " << Show(before) << "; during: " << Show(during);
  }

  v1::Grant ended = WaitEnded(name, absl::Seconds(60));
  const absl::Duration to_end = wire::WallNow() - killed;
  ASSERT_EQ(ended.state(), v1::GRANT_ENDED) << "the grant of a killed client is still " << ended.ShortDebugString();
  EXPECT_EQ(ended.end_reason(), v1::END_DISCONNECTED) << ended.end_detail();
  EXPECT_TRUE(Eventually([&] { return !HasCmId(cm_id); }, absl::Seconds(30))) << cm_id << " is still in ListCmIds";
  EXPECT_TRUE(Eventually([&] { return !HasQp(qp); }, absl::Seconds(30))) << qp << " is still in ListQps";
  absl::StatusOr<v1::MemoryWindow> mw = A().GetMw(window);
  ASSERT_TRUE(mw.ok()) << mw.status();
  EXPECT_FALSE(mw->bound()) << mw->ShortDebugString();
  if (snapshots) {
    after = SnapshotA("kill-after");
    for (const char* k : {"pd", "cq", "qp", "cm_id", "mr"}) {
      EXPECT_EQ(after[k], before[k]) << k << ": before: " << Show(before) << "; after: " << Show(after);
    }
  }
  std::printf("[          ] killed client's %s (%s, %s, %s) ended %s %s after SIGKILL (%s); A before/during/after: "
              "[%s] [%s] [%s]\n",
              name.c_str(), cm_id.c_str(), qp.c_str(), window.c_str(), v1::GrantEndReason_Name(ended.end_reason()).c_str(),
              absl::FormatDuration(to_end).c_str(), ended.end_detail().c_str(), Show(before).c_str(),
              Show(during).c_str(), Show(after).c_str());
}

// 32 clients at once, each with its own grant from one IssueGrants batch: all connected and ACTIVE at the
// same time, reading concurrently from their own threads, every byte checked.
TEST_F(GrantE2e, ThirtyTwoClientsAtOnceFromOneBatch) {
  REGION_OR_FAIL(r);
  const int n = std::atoi(Env("RDMAD_GRANT_CLIENTS", "32").c_str());
  ASSERT_GE(n, 1);
  // Each reads at most 128 KiB (twice): what counts here is 32 connections at once, not the bytes, which
  // the emulated wire carries at a few MiB/s shared by all of them (the leases are 120 s).
  const uint64_t stride = r->length / n, length = std::min<uint64_t>(stride, 128 << 10) - 64;
  v1::IssueGrantsRequest batch;
  for (int i = 0; i < n; ++i) {
    v1::IssueGrantRequest* g = batch.add_grants();
    g->set_mr(r->mr);
    g->set_offset(i * stride + i);
    g->set_length(length);
    g->add_access(v1::REMOTE_READ);
    g->set_ttl_ms(120000);
    g->set_principal(absl::StrCat("client-", i));
  }
  absl::StatusOr<v1::IssueGrantsResponse> issued = A().IssueGrants(batch);
  ASSERT_TRUE(issued.ok()) << issued.status();
  ASSERT_EQ(issued->grants_size(), n);
  std::set<std::string> names, tokens;
  for (const v1::IssuedGrant& g : issued->grants()) {
    names.insert(g.grant().name());
    tokens.insert(g.token());
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(n));
  EXPECT_EQ(tokens.size(), static_cast<size_t>(n));

  std::mutex mu;
  std::condition_variable cv;
  int opened = 0, open_failed = 0;
  bool go = false;
  std::vector<std::string> errors(n);
  std::vector<uint64_t> bytes_read(n, 0);
  std::vector<std::thread> threads;
  const absl::Time t0 = wire::WallNow();
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      const v1::IssuedGrant& g = issued->grants(i);
      auto region = RemoteRegion::Open(g, Opts(4, 16 << 10));
      {
        std::lock_guard<std::mutex> lock(mu);
        if (region.ok()) ++opened; else ++open_failed;
        cv.notify_all();
      }
      if (!region.ok()) {
        errors[i] = absl::StrCat("open: ", region.status().ToString());
        return;
      }
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return go; });
      }
      std::string got(length, '\0');
      for (int round = 0; round < 2 && errors[i].empty(); ++round) {
        std::fill(got.begin(), got.end(), '\0');
        std::vector<RemoteRegion::ReadOp> ops;
        for (uint64_t off = 0; off < length; off += 16 << 10) {
          RemoteRegion::ReadOp op;
          op.offset = off;
          op.length = std::min<uint64_t>(16 << 10, length - off);
          op.destination = got.data() + off;
          ops.push_back(op);
        }
        absl::Status s = (*region)->ReadBatch(absl::MakeSpan(ops));
        if (!s.ok()) {
          errors[i] = absl::StrCat("read: ", s.ToString());
        } else {
          errors[i] = Compare(got.data(), length, g.grant().offset());
          bytes_read[i] += length;
        }
      }
    });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(120), [&] { return opened + open_failed == n; });
  }
  const absl::Duration open_time = wire::WallNow() - t0;
  // All of them live at once in A. A key leaves with its bind, so a client may hold it while A has not yet
  // seen the bind complete: those still ACTIVATING are looked at again (for up to 30 s), not counted out.
  int active = 0;
  for (const absl::Time until = absl::Now() + absl::Seconds(30);;) {
    absl::StatusOr<v1::ListGrantsResponse> listed = A().ListGrants(r->mr);
    ASSERT_TRUE(listed.ok()) << listed.status();
    int activating = 0;
    active = 0;
    for (const v1::Grant& g : listed->grants()) {
      if (!names.count(g.name())) continue;
      active += g.state() == v1::GRANT_ACTIVE;
      activating += g.state() == v1::GRANT_ACTIVATING;
    }
    if (activating == 0 || absl::Now() >= until) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  const size_t connections = MyConnections().size();
  const absl::Time t1 = wire::WallNow();
  {
    std::lock_guard<std::mutex> lock(mu);
    go = true;
    cv.notify_all();
  }
  for (std::thread& t : threads) t.join();
  const absl::Duration read_time = wire::WallNow() - t1;
  EXPECT_EQ(opened, n);
  EXPECT_EQ(active, n) << "grants ACTIVE at once in A";
  EXPECT_EQ(connections, static_cast<size_t>(n)) << "data-plane connections from this guest in A";
  uint64_t total = 0;
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(errors[i], "") << "client " << i << " (" << issued->grants(i).grant().name() << ")";
    total += bytes_read[i];
  }
  for (const std::string& name : names) {
    v1::Grant g = WaitEnded(name);
    EXPECT_EQ(g.end_reason(), v1::END_DISCONNECTED) << name;
  }
  std::printf("[          ] %d clients: all open in %s, %d ACTIVE at once; %llu bytes read and checked in %s\n", n,
              absl::FormatDuration(open_time).c_str(), active, static_cast<unsigned long long>(total),
              absl::FormatDuration(read_time).c_str());
}

// ---- zero-copy and long reads

// A buffer with `guard` bytes of 0x5A on each side of `n` bytes; Guards() says whether both sides are intact.
struct Guarded {
  static constexpr size_t kGuard = 4096;
  explicit Guarded(size_t n) : bytes(n + 2 * kGuard, '\x5a'), size(n) {}
  char* data() { return bytes.data() + kGuard; }
  std::string Guards() const {
    for (size_t i = 0; i < kGuard; ++i) {
      if (bytes[i] != '\x5a') return absl::StrCat("byte ", i, " before the destination was written");
      if (bytes[kGuard + size + i] != '\x5a') return absl::StrCat("byte ", i, " after the destination was written");
    }
    return "";
  }
  std::string bytes;
  size_t size;
};

// The largest read the long-read tests make: RDMAD_GRANT_LARGE_BYTES (default 64 MiB), at most the region
// less 3 (they read from an unaligned offset).
uint64_t LargeReadBytes(const Region& r) {
  const uint64_t want = std::strtoull(Env("RDMAD_GRANT_LARGE_BYTES", "67108864").c_str(), nullptr, 10);
  const uint64_t fits = r.length - 3;
  if (want > fits) {
    std::printf("[          ] the region is %llu bytes: long reads of %llu bytes instead of %llu\n",
                static_cast<unsigned long long>(r.length), static_cast<unsigned long long>(fits),
                static_cast<unsigned long long>(want));
  }
  return std::min(want, fits);
}

// A zero-copy read lands in the caller's registered memory, at the offset asked, byte for byte, with
// nothing around it touched and nothing copied; a copying read of the same bytes copies them.
TEST_F(GrantE2e, ZeroCopyReadLandsInRegisteredMemory) {
  REGION_OR_FAIL(r);
  const uint64_t offset = 8192 + 11, length = (256 << 10) + 5;
  absl::StatusOr<v1::IssuedGrant> issued = Issue(*r, offset, length, 60000, "b-zero-copy");
  ASSERT_TRUE(issued.ok()) << issued.status();
  auto region = RemoteRegion::Open(*issued, Opts(16, 64 << 10));
  ASSERT_TRUE(region.ok()) << region.status();
  RemoteRegion& rr = **region;
  EXPECT_GE(rr.max_message_bytes(), uint64_t{1} << 20) << "rxe's max_msg_sz";

  Guarded dest(length + 100);
  absl::StatusOr<client::LocalBuffer> lb = rr.RegisterDestination(dest.data(), dest.size);
  ASSERT_TRUE(lb.ok()) << lb.status();
  EXPECT_EQ(lb->data(), dest.data());
  EXPECT_EQ(lb->size(), dest.size);

  // The whole grant at byte 100 of the buffer: one work request, no copy.
  const RemoteRegion::Counters before = rr.counters();
  ASSERT_TRUE(rr.Read(0, length, *lb, 100).ok());
  const RemoteRegion::Counters after = rr.counters();
  EXPECT_EQ(Compare(dest.data() + 100, length, offset), "");
  EXPECT_EQ(dest.Guards(), "");
  for (int i = 0; i < 100; ++i) ASSERT_EQ(dest.data()[i], '\x5a') << "byte " << i << " before the read's place";
  EXPECT_EQ(after.work_requests - before.work_requests, 1u);
  EXPECT_EQ(after.bytes_copied, before.bytes_copied) << "a zero-copy read was copied";

  // Post/Poll with a registered ReadOp: one byte at the grant's end, into the buffer's last byte.
  RemoteRegion::ReadOp op;
  op.offset = length - 1;
  op.length = 1;
  op.destination = dest.data() + dest.size - 1;
  op.registered = &*lb;
  ASSERT_TRUE(rr.Post(&op).ok());
  absl::StatusOr<std::vector<RemoteRegion::ReadOp*>> done = rr.Poll(1);
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_EQ(done->size(), 1u);
  ASSERT_TRUE(op.status.ok()) << op.status;
  EXPECT_EQ(dest.data()[dest.size - 1], Expected()[offset + length - 1]);
  EXPECT_EQ(rr.counters().bytes_copied, before.bytes_copied);

  // The copying path over the same range copies every byte once.
  std::string copy(length, '\0');
  ASSERT_TRUE(rr.Read(0, length, copy.data()).ok());
  EXPECT_EQ(Compare(copy.data(), length, offset), "");
  EXPECT_EQ(rr.counters().bytes_copied - before.bytes_copied, length);
  EXPECT_EQ(rr.outstanding(), 0u);
}

// Reads far longer than one slot (1 MiB) or one work request, byte for byte: zero-copy at the port's
// message size, zero-copy split at 256 KiB (many work requests, the queue kept full), and copying through
// 1 MiB slots. RDMAD_GRANT_LARGE_BYTES sets the length (default 64 MiB; less on a smaller region).
TEST_F(GrantE2e, LongReadsByteForByteZeroCopyAndCopying) {
  REGION_OR_FAIL(r);
  const uint64_t length = LargeReadBytes(*r);
  ASSERT_GT(length, uint64_t{1} << 20) << "the region is too small for a read longer than 1 MiB";
  const uint64_t offset = 3;

  struct Case {
    const char* what;
    bool zero_copy;
    uint64_t max_message;  // 0: the port's
  };
  for (const Case& c : {Case{"zero-copy, the port's message size", true, 0},
                        Case{"zero-copy in 256 KiB work requests", true, 256 << 10},
                        Case{"copying through 1 MiB slots", false, 0}}) {
    SCOPED_TRACE(c.what);
    absl::StatusOr<v1::IssuedGrant> issued = Issue(*r, 0, r->length, 600000, "b-long");  // a token opens once
    ASSERT_TRUE(issued.ok()) << issued.status();
    RemoteRegion::Options o = Opts(16, 1 << 20);
    o.max_message_bytes = c.max_message;
    auto region = RemoteRegion::Open(*issued, o);
    ASSERT_TRUE(region.ok()) << region.status();
    RemoteRegion& rr = **region;
    Guarded dest(length);
    std::optional<client::LocalBuffer> lb;
    if (c.zero_copy) {
      absl::StatusOr<client::LocalBuffer> registered = rr.RegisterDestination(dest.data(), dest.size);
      ASSERT_TRUE(registered.ok()) << registered.status();
      lb = std::move(*registered);
    }
    const uint64_t chunk = c.zero_copy ? rr.max_message_bytes() : uint64_t{1} << 20;
    const absl::Time t0 = absl::Now();
    absl::Status s = c.zero_copy ? rr.Read(offset, length, *lb) : rr.Read(offset, length, dest.data());
    const absl::Duration took = absl::Now() - t0;
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(Compare(dest.data(), length, offset), "");
    EXPECT_EQ(dest.Guards(), "");
    EXPECT_EQ(rr.counters().work_requests, (length + chunk - 1) / chunk);
    EXPECT_EQ(rr.counters().bytes_copied, c.zero_copy ? 0 : length);
    EXPECT_EQ(rr.outstanding(), 0u);
    std::printf("[          ] %s: %llu bytes in %llu work requests, %s (%.1f MiB/s)\n", c.what,
                static_cast<unsigned long long>(length),
                static_cast<unsigned long long>(rr.counters().work_requests), absl::FormatDuration(took).c_str(),
                static_cast<double>(length) / 1048576 / absl::ToDoubleSeconds(took));
    lb.reset();  // deregistered before its region goes
    region->reset();
    ASSERT_EQ(WaitNoConnections(), 0u);
    (void)A().RevokeGrant(issued->grant().name());
  }
}

// The whole of the grant in one Read, zero-copy then copying. On a region over 64 MiB only with
// RDMAD_GRANT_WHOLE=1: under TCG reads run at about 5 MiB/s, and a 1 GiB grant took 3 min 41 s (zero-copy)
// and 3 min 58 s (copying). It needs guests with room for it: A holds the file (tmpfs), B the expected copy
// and the destination, so a 1 GiB region needs RDMAD_GUEST_MEM=3G.
TEST_F(GrantE2e, WholeGrantInOneRead) {
  REGION_OR_FAIL(r);
  if (r->length > (uint64_t{64} << 20) && Env("RDMAD_GRANT_WHOLE", "") != "1") {
    GTEST_SKIP() << "a " << r->length << "-byte region: set RDMAD_GRANT_WHOLE=1 to read it whole";
  }
  for (bool zero_copy : {true, false}) {
    SCOPED_TRACE(zero_copy ? "zero-copy" : "copying");
    absl::StatusOr<v1::IssuedGrant> issued = Issue(*r, 0, r->length, 3600000, "b-whole");  // a token opens once
    ASSERT_TRUE(issued.ok()) << issued.status();
    auto region = RemoteRegion::Open(*issued, Opts(16, 1 << 20));
    ASSERT_TRUE(region.ok()) << region.status();
    RemoteRegion& rr = **region;
    std::unique_ptr<char[]> dest(new char[r->length]);
    std::memset(dest.get(), 0x5a, r->length);
    std::optional<client::LocalBuffer> lb;
    if (zero_copy) {
      absl::StatusOr<client::LocalBuffer> registered = rr.RegisterDestination(dest.get(), r->length);
      ASSERT_TRUE(registered.ok()) << registered.status();
      lb = std::move(*registered);
    }
    const absl::Time t0 = absl::Now();
    absl::Status s = zero_copy ? rr.Read(0, r->length, *lb) : rr.Read(0, r->length, dest.get());
    const absl::Duration took = absl::Now() - t0;
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(Compare(dest.get(), r->length, 0), "");
    EXPECT_EQ(rr.outstanding(), 0u);
    std::printf("[          ] %s: the whole grant, %llu bytes, in one Read: %llu work requests, %s (%.1f MiB/s)\n",
                zero_copy ? "zero-copy" : "copying", static_cast<unsigned long long>(r->length),
                static_cast<unsigned long long>(rr.counters().work_requests), absl::FormatDuration(took).c_str(),
                static_cast<double>(r->length) / 1048576 / absl::ToDoubleSeconds(took));
    lb.reset();
    region->reset();
    ASSERT_EQ(WaitNoConnections(), 0u);
    (void)A().RevokeGrant(issued->grant().name());
  }
}

// Bad destinations are refused before anything is posted, naming the argument, and leave the connection
// usable; bad reads keep today's statuses.
TEST_F(GrantE2e, ZeroCopyDestinationsRefused) {
  REGION_OR_FAIL(r);
  const uint64_t length = 64 << 10;
  absl::StatusOr<v1::IssuedGrant> issued = Issue(*r, 0, length, 60000, "b-refused");
  ASSERT_TRUE(issued.ok()) << issued.status();
  RemoteRegion::Options o = Opts(4, 4096);
  o.max_message_bytes = 8192;
  auto region = RemoteRegion::Open(*issued, o);
  ASSERT_TRUE(region.ok()) << region.status();
  RemoteRegion& rr = **region;
  std::vector<char> mem(16384), other(16384);
  absl::StatusOr<client::LocalBuffer> lb = rr.RegisterDestination(mem.data(), 4096);
  ASSERT_TRUE(lb.ok()) << lb.status();

  auto invalid = [](const absl::Status& s, absl::string_view names) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), names)) << s << " does not name " << names;
  };
  invalid(rr.RegisterDestination(nullptr, 4096).status(), "addr");
  invalid(rr.RegisterDestination(mem.data(), 0).status(), "length");
  invalid(rr.Read(0, 4097, *lb), "destination");      // the buffer is too small
  invalid(rr.Read(0, 4096, *lb, 1), "destination");   // does not fit from there
  invalid(rr.Read(0, 1, *lb, 4097), "destination");   // past its end
  client::LocalBuffer empty;
  invalid(rr.Read(0, 1, empty), "destination");
  client::LocalBuffer moved = std::move(*lb);
  invalid(rr.Read(0, 1, *lb), "destination");         // moved from
  invalid(rr.Read(0, 0, moved), "length");
  invalid(rr.Read(0, 0, mem.data()), "length");
  // A ReadOp whose destination is not inside its LocalBuffer: unregistered memory.
  RemoteRegion::ReadOp op;
  op.length = 16;
  op.destination = other.data();
  op.registered = &moved;
  invalid(rr.Post(&op), "destination");
  op.destination = mem.data() + 4090;  // straddles the registered end
  invalid(rr.Post(&op), "destination");
  // One work request is at most the message size (zero-copy) or a slot (copying); Read splits instead.
  std::vector<char> big(16384);
  absl::StatusOr<client::LocalBuffer> big_lb = rr.RegisterDestination(big.data(), big.size());
  ASSERT_TRUE(big_lb.ok()) << big_lb.status();
  op.destination = big.data();
  op.registered = &*big_lb;
  op.length = 8193;
  invalid(rr.Post(&op), "length");
  op.registered = nullptr;
  op.length = 4097;
  invalid(rr.Post(&op), "length");
  EXPECT_EQ(rr.outstanding(), 0u);
  // Out of the grant: OUT_OF_RANGE on both paths, as before.
  EXPECT_EQ(rr.Read(length - 8, 16, *big_lb).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(rr.Read(length, 1, big.data()).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(rr.outstanding(), 0u);
  // A LocalBuffer of another connection.
  absl::StatusOr<v1::IssuedGrant> second = Issue(*r, 0, length, 60000, "b-refused-2");
  ASSERT_TRUE(second.ok()) << second.status();
  auto region2 = RemoteRegion::Open(*second, o);
  ASSERT_TRUE(region2.ok()) << region2.status();
  invalid((*region2)->Read(0, 16, *big_lb), "destination");
  // The connection is still good: a 16 KiB zero-copy read in two work requests.
  ASSERT_TRUE(rr.Read(100, big.size(), *big_lb).ok());
  EXPECT_EQ(Compare(big.data(), big.size(), 100), "");
  region2->reset();
  (void)A().RevokeGrant(second->grant().name());
  (void)A().RevokeGrant(issued->grant().name());
}

// With the library's bounds check off, a long read (32 parts of 64 KiB, all outstanding at once) with one part
// outside the grant: that part is refused at the NIC, the whole read fails with OUT_OF_RANGE, and nothing of
// it is outstanding on return. The last part: every part was posted. The first (its offset wraps past 2^64
// to the grant's start): the 31 parts behind it are flushed, more than one poll of the CQ takes, and waited for.
TEST_F(GrantE2e, LongReadFailsWholeOnOnePartsError) {
  REGION_OR_FAIL(r);
  const uint64_t length = 2 << 20;
  for (int c = 0; c < 4; ++c) {
    const bool zero_copy = c % 2 == 0, last_part = c < 2;
    SCOPED_TRACE(absl::StrCat(zero_copy ? "zero-copy" : "copying", last_part ? ", the last part" : ", the first part"));
    absl::StatusOr<v1::IssuedGrant> issued = Issue(*r, 0, length, 60000, "b-long-fail");
    ASSERT_TRUE(issued.ok()) << issued.status();
    RemoteRegion::Options o = Opts(32, 64 << 10);
    o.max_message_bytes = 64 << 10;
    o.check_bounds = false;
    auto region = RemoteRegion::Open(*issued, o);
    ASSERT_TRUE(region.ok()) << region.status();
    RemoteRegion& rr = **region;
    std::vector<char> dest(length);
    absl::StatusOr<client::LocalBuffer> lb = rr.RegisterDestination(dest.data(), dest.size());
    ASSERT_TRUE(lb.ok()) << lb.status();
    // From 32 KiB, the last part starts 32 KiB before the grant's end; from 2^64 - 64 KiB, the first part is
    // all before its start.
    const uint64_t offset = last_part ? 32 << 10 : 0 - (uint64_t{64} << 10);
    absl::Status s = zero_copy ? rr.Read(offset, length, *lb) : rr.Read(offset, length, dest.data());
    EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "NIC")) << s;
    EXPECT_EQ(rr.outstanding(), 0u);
    if (last_part) EXPECT_EQ(rr.counters().work_requests, 32u) << "every part was posted before the refusal came back";
    // The connection is broken now: every read fails with that first error.
    EXPECT_EQ(rr.Read(0, 1, dest.data()).code(), absl::StatusCode::kOutOfRange);
    *lb = client::LocalBuffer();  // deregistered before its region goes
    region->reset();
    ASSERT_EQ(WaitNoConnections(), 0u);
    (void)WaitEnded(issued->grant().name());
  }
}

// ---- Writes through a grant that allows them, and the completion-channel wait

absl::StatusOr<v1::IssuedGrant> IssueWritable(const Region& r, uint64_t offset, uint64_t length,
                                              const std::string& principal) {
  return Issue(r, offset, length, 60000, principal, /*writable=*/true);
}

// Puts A's bytes at [offset, offset + length) back as they were (Expected), through a grant of its own, and
// checks them: the other tests compare every read with Expected.
void RestoreInA(const Region& r, uint64_t offset, uint64_t length) {
  absl::StatusOr<v1::IssuedGrant> issued = IssueWritable(r, offset, length, "b-restore");
  ASSERT_TRUE(issued.ok()) << issued.status();
  auto region = RemoteRegion::Open(*issued, Opts(8, 64 << 10));
  ASSERT_TRUE(region.ok()) << region.status();
  ASSERT_TRUE((*region)->Write(0, length, Expected().data() + offset).ok());
  std::string back(length, '\0');
  ASSERT_TRUE((*region)->Read(0, length, back.data()).ok());
  ASSERT_EQ(Compare(back.data(), length, offset), "") << "A's file was not restored: later tests would fail";
}

// RestoreInA when the test's scope ends, however it ends (a failed ASSERT included).
struct RestoredInA {
  const Region* r;
  uint64_t offset, length;
  ~RestoredInA() { RestoreInA(*r, offset, length); }
};

// A write grant: bytes written from B (copying, then zero-copy from registered memory, both longer than a slot
// and a work request so they are split) read back byte for byte, through this connection and through a
// second, read-only grant on the same range; a write at the grant's last bytes, and one byte past it refused
// by the library. A's bytes are put back afterwards.
TEST_F(GrantE2e, WriteToAWriteGrantReadsBackByteForByte) {
  REGION_OR_FAIL(r);
  const uint64_t offset = (2 << 20) + 13, length = (1 << 20) + 5;
  ASSERT_GE(r->length, offset + length);
  const RestoredInA restore{r, offset, length};

  absl::StatusOr<v1::IssuedGrant> issued = IssueWritable(*r, offset, length, "b-writer");
  ASSERT_TRUE(issued.ok()) << issued.status();
  EXPECT_EQ(issued->grant().access_size(), 2);
  RemoteRegion::Options o = Opts(8, 64 << 10);
  o.max_message_bytes = 256 << 10;
  auto region = RemoteRegion::Open(*issued, o);
  ASSERT_TRUE(region.ok()) << region.status();
  RemoteRegion& rr = **region;
  EXPECT_EQ(rr.key().access, wire::kGrantRead | wire::kGrantWrite);

  // Copying: every byte differs from what A had.
  std::string first(length, '\0');
  for (uint64_t i = 0; i < length; ++i) first[i] = static_cast<char>(Expected()[offset + i] ^ 0x5a);
  const RemoteRegion::Counters c0 = rr.counters();
  absl::Status w = rr.Write(0, length, first.data());
  ASSERT_TRUE(w.ok()) << w;
  const RemoteRegion::Counters c1 = rr.counters();
  EXPECT_EQ(c1.bytes_copied - c0.bytes_copied, length) << "a copying write copies every byte once";
  EXPECT_EQ(c1.work_requests - c0.work_requests, (length + (64 << 10) - 1) / (64 << 10));
  std::string back(length, '\0');
  ASSERT_TRUE(rr.Read(0, length, back.data()).ok());
  EXPECT_TRUE(back == first) << "the copying write did not land byte for byte";

  // Zero-copy, from byte 7 of a registered buffer; read back zero-copy into another.
  std::vector<char> src(length + 7), dst(length);
  for (uint64_t i = 0; i < length; ++i) src[7 + i] = static_cast<char>(Expected()[offset + i] ^ 0x3c);
  absl::StatusOr<client::LocalBuffer> src_lb = rr.RegisterDestination(src.data(), src.size());
  ASSERT_TRUE(src_lb.ok()) << src_lb.status();
  absl::StatusOr<client::LocalBuffer> dst_lb = rr.RegisterDestination(dst.data(), dst.size());
  ASSERT_TRUE(dst_lb.ok()) << dst_lb.status();
  const RemoteRegion::Counters c2 = rr.counters();
  w = rr.Write(0, length, *src_lb, 7);
  ASSERT_TRUE(w.ok()) << w;
  const RemoteRegion::Counters c3 = rr.counters();
  EXPECT_EQ(c3.bytes_copied, c2.bytes_copied) << "a zero-copy write was copied";
  EXPECT_EQ(c3.work_requests - c2.work_requests, (length + (256 << 10) - 1) / (256 << 10));
  ASSERT_TRUE(rr.Read(0, length, *dst_lb).ok());
  EXPECT_EQ(std::memcmp(dst.data(), src.data() + 7, length), 0) << "the zero-copy write did not land byte for byte";
  // A source not inside its LocalBuffer is refused.
  EXPECT_EQ(rr.Write(0, length, *src_lb, 8).code(), absl::StatusCode::kInvalidArgument);

  // Another client's read-only grant on the same range sees the written bytes.
  {
    absl::StatusOr<v1::IssuedGrant> ro = Issue(*r, offset, length, 60000, "b-after-write");
    ASSERT_TRUE(ro.ok()) << ro.status();
    auto other = RemoteRegion::Open(*ro, Opts(8, 64 << 10));
    ASSERT_TRUE(other.ok()) << other.status();
    std::string seen(length, '\0');
    ASSERT_TRUE((*other)->Read(0, length, seen.data()).ok());
    EXPECT_EQ(std::memcmp(seen.data(), src.data() + 7, length), 0);
  }

  // The grant's last three bytes; one byte past the end refused by the library, the connection still good.
  ASSERT_TRUE(rr.Write(length - 3, 3, "xyz").ok());
  char tail[3] = {};
  ASSERT_TRUE(rr.Read(length - 3, 3, tail).ok());
  EXPECT_EQ(std::string(tail, 3), "xyz");
  absl::Status past = rr.Write(length - 2, 3, "abc");
  EXPECT_EQ(past.code(), absl::StatusCode::kOutOfRange) << past;
  EXPECT_TRUE(absl::StrContains(past.message(), "write of 3 bytes")) << past;
  EXPECT_TRUE(absl::StrContains(past.message(), "library")) << past;
  EXPECT_TRUE(rr.Read(0, 1, tail).ok());
  *src_lb = client::LocalBuffer();
  *dst_lb = client::LocalBuffer();
}

// The write forms of the pipeline (ReadOp::write): Post of writes and reads mixed, Poll for them, and a
// ReadBatch of writes (copying and zero-copy) then one of reads: each op lands byte for byte; a write op on
// a read-only grant is refused by the library before posting, in the op's own status.
TEST_F(GrantE2e, PostAndReadBatchWriteForms) {
  REGION_OR_FAIL(r);
  const uint64_t offset = (3 << 20) + 101, length = 256 << 10;
  ASSERT_GE(r->length, offset + length);
  const RestoredInA restore{r, offset, length};
  absl::StatusOr<v1::IssuedGrant> issued = IssueWritable(*r, offset, length, "b-pipeline-writer");
  ASSERT_TRUE(issued.ok()) << issued.status();
  auto region = RemoteRegion::Open(*issued, Opts(8, 64 << 10));
  ASSERT_TRUE(region.ok()) << region.status();
  RemoteRegion& rr = **region;

  // Post: four 64 KiB writes, then Poll for them; then four reads of the same ranges.
  std::string pattern(length, '\0');
  for (uint64_t i = 0; i < length; ++i) pattern[i] = static_cast<char>(Expected()[offset + i] ^ 0xa5);
  std::vector<RemoteRegion::ReadOp> writes(4);
  for (size_t i = 0; i < writes.size(); ++i) {
    writes[i].offset = i * (64 << 10);
    writes[i].length = 64 << 10;
    writes[i].destination = pattern.data() + writes[i].offset;
    writes[i].write = true;
    ASSERT_TRUE(rr.Post(&writes[i]).ok()) << writes[i].status;
  }
  size_t done = 0;
  while (done < writes.size()) {
    auto finished = rr.Poll(1, absl::Seconds(30));
    ASSERT_TRUE(finished.ok()) << finished.status();
    ASSERT_FALSE(finished->empty()) << "no write completed in 30 s";
    for (RemoteRegion::ReadOp* op : *finished) EXPECT_TRUE(op->status.ok()) << op->status;
    done += finished->size();
  }
  std::string back(length, '\0');
  std::vector<RemoteRegion::ReadOp> reads(4);
  for (size_t i = 0; i < reads.size(); ++i) {
    reads[i].offset = i * (64 << 10);
    reads[i].length = 64 << 10;
    reads[i].destination = back.data() + reads[i].offset;
  }
  ASSERT_TRUE(rr.ReadBatch(absl::MakeSpan(reads)).ok());
  EXPECT_TRUE(back == pattern) << "the posted writes did not land byte for byte";

  // ReadBatch of writes: copying from plain memory, and zero-copy from a registered buffer.
  std::vector<char> src(length);
  for (uint64_t i = 0; i < length; ++i) src[i] = static_cast<char>(Expected()[offset + i] ^ 0x17);
  absl::StatusOr<client::LocalBuffer> lb = rr.RegisterDestination(src.data(), src.size());
  ASSERT_TRUE(lb.ok()) << lb.status();
  std::vector<RemoteRegion::ReadOp> batch(4);
  for (size_t i = 0; i < batch.size(); ++i) {
    batch[i].offset = i * (64 << 10);
    batch[i].length = 64 << 10;
    batch[i].destination = src.data() + batch[i].offset;
    batch[i].write = true;
    if (i % 2 == 1) batch[i].registered = &*lb;
  }
  const RemoteRegion::Counters before = rr.counters();
  ASSERT_TRUE(rr.ReadBatch(absl::MakeSpan(batch)).ok());
  EXPECT_EQ(rr.counters().bytes_copied - before.bytes_copied, 2u * (64 << 10)) << "only the copying writes copy";
  ASSERT_TRUE(rr.Read(0, length, back.data()).ok());
  EXPECT_EQ(std::memcmp(back.data(), src.data(), length), 0) << "the batch's writes did not land byte for byte";
  *lb = client::LocalBuffer();

  // On a read-only grant the write op is refused in its own status, before posting; the read op still runs.
  absl::StatusOr<v1::IssuedGrant> ro = Issue(*r, offset, length, 60000, "b-pipeline-reader");
  ASSERT_TRUE(ro.ok()) << ro.status();
  auto reader = RemoteRegion::Open(*ro, Opts(8, 64 << 10));
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<char> one(4096), two(4096);
  std::vector<RemoteRegion::ReadOp> mixed(2);
  mixed[0].offset = 0;
  mixed[0].length = 4096;
  mixed[0].destination = one.data();
  mixed[0].write = true;
  mixed[1].offset = 0;
  mixed[1].length = 4096;
  mixed[1].destination = two.data();
  absl::Status s = (*reader)->ReadBatch(absl::MakeSpan(mixed));
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_EQ(mixed[0].status.code(), absl::StatusCode::kPermissionDenied) << mixed[0].status;
  EXPECT_TRUE(mixed[1].status.ok()) << mixed[1].status;
  EXPECT_EQ(std::memcmp(two.data(), src.data(), 4096), 0);
}

// A read-only grant is not written: the library refuses the write before posting it (PERMISSION_DENIED,
// naming the access; the connection stays good), and with check_bounds off the write is posted and rdmad's
// NIC refuses it (the window has no REMOTE_WRITE). A's bytes are unchanged either way.
TEST_F(GrantE2e, WriteToAReadOnlyGrantRefusedByTheLibraryAndByTheNic) {
  REGION_OR_FAIL(r);
  const uint64_t offset = (4 << 20) + 1, length = 64 << 10;
  ASSERT_GE(r->length, offset + length);
  std::string junk(length, '\xee');
  {
    absl::StatusOr<v1::IssuedGrant> issued = Issue(*r, offset, length, 60000, "b-ro-write");
    ASSERT_TRUE(issued.ok()) << issued.status();
    auto region = RemoteRegion::Open(*issued, Opts(4, 4096));
    ASSERT_TRUE(region.ok()) << region.status();
    RemoteRegion& rr = **region;
    EXPECT_EQ(rr.key().access, wire::kGrantRead);
    absl::Status s = rr.Write(0, 8, junk.data());
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "no write access")) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "library")) << s;
    absl::StatusOr<client::LocalBuffer> lb = rr.RegisterDestination(junk.data(), junk.size());
    ASSERT_TRUE(lb.ok()) << lb.status();
    s = rr.Write(0, length, *lb);
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
    EXPECT_EQ(rr.counters().work_requests, 0u) << "a refused write was posted";
    char buf[8];
    ASSERT_TRUE(rr.Read(0, 8, buf).ok()) << "the library's refusal broke the connection";
    EXPECT_EQ(Compare(buf, 8, offset), "");
  }
  {
    absl::StatusOr<v1::IssuedGrant> issued = Issue(*r, offset, length, 60000, "b-ro-write-nic");
    ASSERT_TRUE(issued.ok()) << issued.status();
    RemoteRegion::Options o = Opts(4, 4096);
    o.check_bounds = false;
    auto region = RemoteRegion::Open(*issued, o);
    ASSERT_TRUE(region.ok()) << region.status();
    RemoteRegion& rr = **region;
    absl::Status s = rr.Write(0, 8, junk.data());
    EXPECT_EQ(rr.counters().work_requests, 1u) << "with check_bounds off the write is posted";
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "no write access")) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "NIC")) << s;
    EXPECT_FALSE(absl::StrContains(s.message(), "revoked")) << s;
    char buf[8];
    EXPECT_EQ(rr.Read(0, 8, buf).code(), absl::StatusCode::kPermissionDenied) << "the first error sticks";
  }
  ASSERT_EQ(WaitNoConnections(), 0u);
  absl::StatusOr<v1::IssuedGrant> check = Issue(*r, offset, length, 60000, "b-ro-check");
  ASSERT_TRUE(check.ok()) << check.status();
  auto region = RemoteRegion::Open(*check, Opts(4, 64 << 10));
  ASSERT_TRUE(region.ok()) << region.status();
  std::string got(length, '\0');
  ASSERT_TRUE((*region)->Read(0, length, got.data()).ok());
  EXPECT_EQ(Compare(got.data(), length, offset), "") << "a refused write changed A's bytes";
}

RemoteRegion::Options EventOpts(size_t depth, size_t max_read) {
  RemoteRegion::Options o = Opts(depth, max_read);
  o.wait = RemoteRegion::Options::Wait::kEvents;
  return o;
}

// Options::wait kEvents: reads work on both paths; completion_fd() (-1 when polling) wakes an epoll when a
// posted read completes, is quiet again once Poll took it (the CQ re-armed), and wakes again for the next;
// a Poll with a timeout and nothing outstanding returns nothing after the timeout.
TEST_F(GrantE2e, EventsModeReadsAndCompletionFdWakesEpoll) {
  REGION_OR_FAIL(r);
  const uint64_t offset = 12345, length = (512 << 10) + 9;
  absl::StatusOr<v1::IssuedGrant> issued = Issue(*r, offset, length, 60000, "b-events");
  ASSERT_TRUE(issued.ok()) << issued.status();
  auto region = RemoteRegion::Open(*issued, EventOpts(8, 64 << 10));
  ASSERT_TRUE(region.ok()) << region.status();
  RemoteRegion& rr = **region;
  const int fd = rr.completion_fd();
  ASSERT_GE(fd, 0);

  std::string got(length, '\0');
  ASSERT_TRUE(rr.Read(0, length, got.data()).ok());
  EXPECT_EQ(Compare(got.data(), length, offset), "");
  std::vector<char> dest(length);
  absl::StatusOr<client::LocalBuffer> lb = rr.RegisterDestination(dest.data(), dest.size());
  ASSERT_TRUE(lb.ok()) << lb.status();
  ASSERT_TRUE(rr.Read(0, length, *lb).ok());
  EXPECT_EQ(Compare(dest.data(), length, offset), "");
  RemoteRegion::ReadOp batch[3];
  for (int i = 0; i < 3; ++i) {
    batch[i].offset = uint64_t(i) * 100000;
    batch[i].length = 4096;
    batch[i].destination = got.data() + i * 4096;
  }
  ASSERT_TRUE(rr.ReadBatch(absl::MakeSpan(batch)).ok());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Compare(got.data() + i * 4096, 4096, offset + i * 100000), "");

  const int ep = epoll_create1(EPOLL_CLOEXEC);
  ASSERT_GE(ep, 0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);
  (void)rr.Poll(0);  // whatever the reads above left pending is taken, the CQs armed
  epoll_event out{};
  EXPECT_EQ(epoll_wait(ep, &out, 1, 0), 0) << "the fd is readable with nothing new";
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    RemoteRegion::ReadOp op;
    op.offset = length - 4096 - round;
    op.length = 4096;
    op.destination = dest.data();
    op.registered = &*lb;
    ASSERT_TRUE(rr.Post(&op).ok());
    ASSERT_EQ(epoll_wait(ep, &out, 1, 10000), 1) << "no wake-up for a completed read";
    EXPECT_EQ(out.data.fd, fd);
    absl::StatusOr<std::vector<RemoteRegion::ReadOp*>> done = rr.Poll(0);
    ASSERT_TRUE(done.ok()) << done.status();
    if (done->empty()) done = rr.Poll(1);
    ASSERT_TRUE(done.ok()) << done.status();
    ASSERT_EQ(done->size(), 1u);
    ASSERT_TRUE(op.status.ok()) << op.status;
    EXPECT_EQ(Compare(dest.data(), 4096, offset + op.offset), "");
    EXPECT_EQ(epoll_wait(ep, &out, 1, 0), 0) << "still readable after Poll took the completion";
  }
  close(ep);

  const absl::Time t0 = absl::Now();
  absl::StatusOr<std::vector<RemoteRegion::ReadOp*>> none = rr.Poll(1, absl::Milliseconds(200));
  const absl::Duration waited = absl::Now() - t0;
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
  EXPECT_GE(waited, absl::Milliseconds(190));
  EXPECT_LT(waited, absl::Seconds(5));
  *lb = client::LocalBuffer();

  absl::StatusOr<v1::IssuedGrant> polled = Issue(*r, offset, length, 60000, "b-polled");
  ASSERT_TRUE(polled.ok()) << polled.status();
  auto plain = RemoteRegion::Open(*polled, Opts(8, 64 << 10));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ((*plain)->completion_fd(), -1);
}

// This thread's CPU time (user + system).
absl::Duration ThreadCpu() {
  rusage ru{};
  getrusage(RUSAGE_THREAD, &ru);
  return absl::DurationFromTimeval(ru.ru_utime) + absl::DurationFromTimeval(ru.ru_stime);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Waiting one second for nothing (Poll(1, 1s), nothing outstanding) costs this thread almost no CPU with
// kEvents (asserted under 10% of the wall time; busy-polling is about 100%), measured against kPoll in the
// same run; then the latency of 4 KiB reads at depth 1 in both modes, interleaved (printed: the figures in
// docs/performance.md).
TEST_F(GrantE2e, EventsModeWaitCostsNoCpu) {
  REGION_OR_FAIL(r);
  const uint64_t offset = 1 << 20, length = 1 << 20;
  std::unique_ptr<RemoteRegion> regions[2];
  const char* names[2] = {"poll", "events"};
  for (int m = 0; m < 2; ++m) {
    absl::StatusOr<v1::IssuedGrant> issued = Issue(*r, offset, length, 60000, absl::StrCat("b-wait-", names[m]));
    ASSERT_TRUE(issued.ok()) << issued.status();
    auto region = RemoteRegion::Open(*issued, m == 0 ? Opts(4, 64 << 10) : EventOpts(4, 64 << 10));
    ASSERT_TRUE(region.ok()) << region.status();
    regions[m] = std::move(*region);
  }
  double cpu_share[2] = {0, 0};
  for (int m = 0; m < 2; ++m) {
    const absl::Duration cpu0 = ThreadCpu();
    const absl::Time t0 = absl::Now();
    absl::StatusOr<std::vector<RemoteRegion::ReadOp*>> none = regions[m]->Poll(1, absl::Seconds(1));
    const absl::Duration wall = absl::Now() - t0;
    const absl::Duration cpu = ThreadCpu() - cpu0;
    ASSERT_TRUE(none.ok()) << none.status();
    EXPECT_TRUE(none->empty());
    EXPECT_GE(wall, absl::Milliseconds(990));
    cpu_share[m] = absl::FDivDuration(cpu, wall);
    std::printf("[          ] wait 1 s for nothing, %s: wall %s, thread cpu %s (%.1f%%)\n", names[m],
                absl::FormatDuration(wall).c_str(), absl::FormatDuration(cpu).c_str(), 100 * cpu_share[m]);
  }
  EXPECT_LT(cpu_share[1], 0.10) << "kEvents spent CPU waiting for nothing";

  // 4 KiB reads at depth 1, copying Read: rounds of 100 in each mode, alternating.
  constexpr int kRounds = 10, kPerRound = 100;
  std::vector<double> us[2];
  absl::Duration cpu[2], wall[2];
  char buf[4096];
  for (int round = 0; round < kRounds; ++round) {
    for (int m = 0; m < 2; ++m) {
      const absl::Duration c0 = ThreadCpu();
      const absl::Time w0 = absl::Now();
      for (int i = 0; i < kPerRound; ++i) {
        const uint64_t at = uint64_t((round * kPerRound + i) % 256) * 4096;
        const absl::Time t0 = absl::Now();
        absl::Status s = regions[m]->Read(at, sizeof buf, buf);
        us[m].push_back(absl::ToDoubleMicroseconds(absl::Now() - t0));
        ASSERT_TRUE(s.ok()) << s;
      }
      wall[m] += absl::Now() - w0;
      cpu[m] += ThreadCpu() - c0;
      ASSERT_EQ(Compare(buf, sizeof buf, offset + uint64_t(((round + 1) * kPerRound - 1) % 256) * 4096), "");
    }
  }
  const double med[2] = {Median(us[0]), Median(us[1])};
  for (int m = 0; m < 2; ++m) {
    std::printf("[          ] 4 KiB reads at depth 1, %s: %zu reads, median %.1f us, cpu %.0f%% of wall\n",
                names[m], us[m].size(), med[m], 100 * absl::FDivDuration(cpu[m], wall[m]));
  }
  std::printf("[          ] events/poll: median latency x%.2f; waiting 1 s: cpu %.1f%% vs %.1f%%\n",
              med[0] > 0 ? med[1] / med[0] : 0.0, 100 * cpu_share[1], 100 * cpu_share[0]);
}

// The deregistration at the end: nothing of the grants is left on the MR, and it goes.
TEST_F(GrantE2e, ZzRegionDeregistersCleanly) {
  REGION_OR_FAIL(r);
  absl::StatusOr<v1::MemoryRegion> mr = A().GetMr(r->mr);
  ASSERT_TRUE(mr.ok()) << mr.status();
  EXPECT_EQ(mr->bound_windows(), 0u) << "windows still bound to " << r->mr;
  EXPECT_TRUE(A().DeregisterMr(r->mr).ok());
  absl::StatusOr<v1::DeletePdResponse> pd = A().DeletePd(r->pd, /*cascade=*/true);
  EXPECT_TRUE(pd.ok()) << pd.status();
}

// The child of KilledClients...: opens the grant, checks one read, says so, waits to be killed.
int HoldGrant(int argc, char** argv) {
  if (argc != 6) {
    std::printf("FAIL usage: --hold-grant HOST PORT TOKEN_HEX MR_OFFSET\n");
    return 2;
  }
  const std::string token = absl::HexStringToBytes(argv[4]);
  auto region = RemoteRegion::Open(argv[2], static_cast<uint16_t>(std::atoi(argv[3])), token, Opts(4, 4096));
  if (!region.ok()) {
    std::printf("FAIL %s\n", region.status().ToString().c_str());
    return 1;
  }
  char buf[4096];
  absl::Status s = (*region)->Read(0, sizeof buf, buf);
  std::string mismatch = s.ok() ? Compare(buf, sizeof buf, std::strtoull(argv[5], nullptr, 10)) : s.ToString();
  if (!mismatch.empty()) {
    std::printf("FAIL %s\n", mismatch.c_str());
    return 1;
  }
  std::printf("ACTIVE %s\n", (*region)->grant_name().c_str());
  std::fflush(stdout);
  while (true) pause();
}

}  // namespace
}  // namespace rdmad::testing

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "--hold-grant") == 0) return rdmad::testing::HoldGrant(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
