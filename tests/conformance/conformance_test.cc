// The conformance suite: drives a running rdmad on a real verbs device (rxe0 in the project's Soft-RoCE
// guest, see tests/guest/) through the gRPC API, and checks every rule of the man pages in
// shared/reference/ with real RDMA reads where a rule is about remote access.
//
// Environment: RDMAD_TARGET (gRPC target of the rdmad under test), RDMAD_DEVICE (default rxe0),
// RDMAD_SHM_DIR (where test files are created; must be under rdmad's allowed_file_roots, default /dev/shm).
//
// Every test records the device's resource counts (`rdma resource show`) and rdmad's lists at SetUp and
// checks at TearDown, after deleting what the test created, that both are back where they were: no test
// (and no error path it drives) may leak a verbs object. Bad-input tests also check it around each call.
//
// Threads: single-threaded.
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "client/client.h"
#include "tests/conformance/test_peer.h"
#include "tests/support/status.h"

namespace rdmad::testing {
namespace {

using client::Client;
using client::Detail;
using ::rdmad::test::StatusOf;

std::string Env(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

Client& Rdmad() {
  static Client* c = [] {
    Client::Options o;
    o.target = Env("RDMAD_TARGET", "unix:/run/rdmad/rdmad.sock");
    return new Client(o);
  }();
  return *c;
}

std::string DeviceName() { return Env("RDMAD_DEVICE", "rxe0"); }

// One device context for the whole binary, so the context count stays constant between snapshots.
ibv_context* Ctx() {
  static ibv_context* ctx = [] {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    ibv_context* c = nullptr;
    for (int i = 0; list && i < n; ++i) {
      if (DeviceName() == ibv_get_device_name(list[i])) c = ibv_open_device(list[i]);
    }
    if (list) ibv_free_device_list(list);
    return c;
  }();
  return ctx;
}

// Device-wide resource counts from iproute2's `rdma resource show` (all processes).
std::map<std::string, long> DeviceResources() {
  std::map<std::string, long> counts;
  FILE* p = popen("rdma resource show 2>&1", "r");
  if (!p) return counts;
  char line[1024];
  const std::string dev = DeviceName() + ":";
  while (fgets(line, sizeof line, p)) {
    std::istringstream in(line);
    std::string word, prev;
    bool ours = false;
    while (in >> word) {
      if (word == dev) ours = true;
      if (ours && !prev.empty() && word.find_first_not_of("0123456789") == std::string::npos) {
        counts[prev] = std::stol(word);
      }
      prev = word;
    }
  }
  pclose(p);
  return counts;
}

struct Snapshot {
  std::map<std::string, long> device;
  size_t pds = 0, mrs = 0, mws = 0, qps = 0;
  bool operator==(const Snapshot& o) const {
    return device == o.device && pds == o.pds && mrs == o.mrs && mws == o.mws && qps == o.qps;
  }
};

std::ostream& operator<<(std::ostream& os, const Snapshot& s) {
  os << "{rdmad: " << s.pds << " pds, " << s.mrs << " mrs, " << s.mws << " mws, " << s.qps << " qps; device:";
  for (const auto& [k, v] : s.device) os << " " << k << "=" << v;
  return os << "}";
}

Snapshot Snap() {
  Snapshot s;
  s.device = DeviceResources();
  if (auto r = Rdmad().ListPds(); r.ok()) s.pds = r->pds_size();
  if (auto r = Rdmad().ListMrs(); r.ok()) s.mrs = r->mrs_size();
  if (auto r = Rdmad().ListMws(); r.ok()) s.mws = r->mws_size();
  if (auto r = Rdmad().ListQps(); r.ok()) s.qps = r->qps_size();
  return s;
}

uint8_t PatternByte(int seed, uint64_t offset) { return static_cast<uint8_t>((offset * 131 + seed * 17 + 5) & 0xff); }

// Checks an error's code, the field named in its detail, and (optionally) its errno name.
void ExpectError(const absl::Status& s, absl::StatusCode code, const std::string& field,
                 const std::string& errno_name = "") {
  EXPECT_EQ(s.code(), code) << s.message();
  v1::ErrorDetail d = Detail(s);
  EXPECT_EQ(d.field(), field) << s.message();
  if (!errno_name.empty()) {
    EXPECT_EQ(d.errno_name(), errno_name) << s.message();
  }
  EXPECT_FALSE(s.message().empty());
}

// Bad input: the call fails as expected and nothing is left behind.
#define EXPECT_REFUSED(call, code, field, ...)                 \
  do {                                                         \
    const Snapshot before_ = Snap();                           \
    ExpectError(StatusOf(call), code, field, ##__VA_ARGS__);   \
    EXPECT_EQ(Snap(), before_) << "after " #call;              \
  } while (0)

class Conformance : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(Ctx(), nullptr) << "cannot open " << DeviceName();
    baseline_ = Snap();
  }

  void TearDown() override {
    peers_.clear();
    for (const auto& pd : pds_) (void)Rdmad().DeletePd(pd, /*cascade=*/true);
    for (const auto& f : files_) unlink(f.c_str());
    EXPECT_EQ(Snap(), baseline_) << "resources left behind";
  }

  std::string NewPd(const std::string& label = "conformance") {
    v1::CreatePdRequest r;
    r.set_device("devices/" + DeviceName());
    r.set_label(label);
    auto pd = Rdmad().CreatePd(r);
    EXPECT_TRUE(pd.ok()) << pd.status().message();
    if (!pd.ok()) return "";
    pds_.push_back(pd->name());
    return pd->name();
  }

  // A file under RDMAD_SHM_DIR filled with PatternByte(seed, offset).
  std::string NewFile(const std::string& tag, size_t size, int seed) {
    std::string path = Env("RDMAD_SHM_DIR", "/dev/shm") + "/rdmad-conformance-" + std::to_string(getpid()) + "-" + tag;
    std::vector<uint8_t> data(size);
    for (size_t i = 0; i < size; ++i) data[i] = PatternByte(seed, i);
    int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
    EXPECT_GE(fd, 0) << path << ": " << std::strerror(errno);
    if (fd >= 0) {
      EXPECT_EQ(write(fd, data.data(), size), static_cast<ssize_t>(size));
      close(fd);
    }
    files_.push_back(path);
    return path;
  }

  absl::StatusOr<v1::MemoryRegion> RegisterFile(const std::string& pd, const std::string& path, uint64_t offset,
                                                 uint64_t length, std::vector<v1::Access> access) {
    v1::RegisterMrRequest r;
    r.set_pd(pd);
    r.mutable_source()->mutable_file()->set_path(path);
    r.mutable_source()->mutable_file()->set_offset(offset);
    r.mutable_source()->mutable_file()->set_length(length);
    for (auto a : access) r.add_access(a);
    return Rdmad().RegisterMr(r);
  }

  absl::StatusOr<v1::MemoryRegion> RegisterAnon(const std::string& pd, uint64_t size, std::vector<v1::Access> access) {
    v1::RegisterMrRequest r;
    r.set_pd(pd);
    r.mutable_source()->mutable_anonymous()->set_size(size);
    for (auto a : access) r.add_access(a);
    return Rdmad().RegisterMr(r);
  }

  absl::StatusOr<v1::MemoryWindow> NewMw(const std::string& pd, v1::MwType type) {
    v1::AllocMwRequest r;
    r.set_pd(pd);
    r.set_type(type);
    return Rdmad().AllocMw(r);
  }

  absl::StatusOr<v1::MemoryWindow> Bind(const std::string& mw, const std::string& mr, uint64_t offset,
                                        uint64_t length, const std::string& qp = "", bool zero_based = false,
                                        std::vector<v1::Access> access = {v1::REMOTE_READ}) {
    v1::BindMwRequest r;
    r.set_name(mw);
    r.set_mr(mr);
    r.set_offset(offset);
    r.set_length(length);
    r.set_qp(qp);
    r.set_zero_based(zero_based);
    for (auto a : access) r.add_access(a);
    return Rdmad().BindMw(r);
  }

  // A fresh rdmad QP in `pd`, connected to a fresh test peer. Returns the QP's name; *peer is set.
  absl::StatusOr<std::string> Link(const std::string& pd, TestPeer** peer) {
    std::string error;
    std::unique_ptr<TestPeer> p = TestPeer::Create(Ctx(), 1 << 16, &error);
    if (!p) return absl::InternalError("test peer: " + error);
    v1::CreateQpRequest cr;
    cr.set_pd(pd);
    auto qp = Rdmad().CreateQp(cr);
    if (!qp.ok()) return qp.status();
    v1::ConnectQpRequest cq;
    cq.set_name(qp->name());
    *cq.mutable_remote() = p->local();
    auto connected = Rdmad().ConnectQp(cq);
    if (!connected.ok()) return connected.status();
    if (connected->state() != v1::QP_RTS) return absl::InternalError("rdmad QP not in RTS after ConnectQp");
    if (std::string e = p->Connect(qp->local()); !e.empty()) return absl::InternalError("test peer: " + e);
    *peer = p.get();
    peers_.push_back(std::move(p));
    return qp->name();
  }

  // Reads [remote_addr, +length) through `rkey` on a fresh link (an access error kills both QPs) and
  // returns the completion status; the bytes are in last_peer_->buffer() for ExpectPattern.
  ibv_wc_status ReadOnFreshLink(const std::string& pd, uint64_t remote_addr, uint32_t rkey, uint32_t length) {
    TestPeer* peer = nullptr;
    auto qp = Link(pd, &peer);
    EXPECT_TRUE(qp.ok()) << qp.status().message();
    if (!qp.ok()) return IBV_WC_GENERAL_ERR;
    std::string error;
    ibv_wc_status st = peer->Read(remote_addr, rkey, length, &error);
    EXPECT_TRUE(error.empty()) << error;
    last_peer_ = peer;
    last_qp_ = *qp;
    return st;
  }

  // rdmad's view of one of its QPs, polled (bounded) until it reports `want`; returns the last state seen.
  v1::QpState WaitQpState(const std::string& qp, v1::QpState want) {
    v1::QpState seen = v1::QP_STATE_UNSPECIFIED;
    for (int i = 0; i < 100 && seen != want; ++i) {
      absl::StatusOr<v1::QueuePair> q = Rdmad().GetQp(qp);
      if (!q.ok()) return seen;
      seen = q->state();
      if (seen != want) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return seen;
  }

  void ExpectPattern(const TestPeer* peer, int seed, uint64_t file_offset, uint32_t length) {
    for (uint32_t i = 0; i < length; ++i) {
      if (peer->buffer()[i] != PatternByte(seed, file_offset + i)) {
        ADD_FAILURE() << "byte " << i << " of the read: got " << int(peer->buffer()[i]) << ", want "
                      << int(PatternByte(seed, file_offset + i)) << " (file offset " << file_offset + i << ")";
        return;
      }
    }
  }

  Snapshot baseline_;
  std::vector<std::string> pds_;
  std::vector<std::string> files_;
  std::vector<std::unique_ptr<TestPeer>> peers_;
  TestPeer* last_peer_ = nullptr;
  std::string last_qp_;  // rdmad's QP of the last ReadOnFreshLink
};

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
constexpr auto kNotFound = absl::StatusCode::kNotFound;
constexpr auto kPrecondition = absl::StatusCode::kFailedPrecondition;
constexpr auto kOutOfRange = absl::StatusCode::kOutOfRange;
constexpr auto kPermission = absl::StatusCode::kPermissionDenied;

// ---------------------------------------------------------------------------------------------------------
// Devices

TEST_F(Conformance, DeviceReportsPortsGidsAndCaps) {
  ASSERT_OK_AND_ASSIGN(auto list, Rdmad().ListDevices());
  ASSERT_EQ(list.devices_size(), 1);
  ASSERT_OK_AND_ASSIGN(auto d, Rdmad().GetDevice("devices/" + DeviceName()));
  EXPECT_EQ(d.name(), "devices/" + DeviceName());
  EXPECT_EQ(d.node_guid().size(), 19u);
  ASSERT_GE(d.ports_size(), 1);
  EXPECT_EQ(d.ports(0).state(), "ACTIVE");
  EXPECT_EQ(d.ports(0).link_layer(), "Ethernet");
  EXPECT_GT(d.ports(0).active_mtu(), 0u);
  bool rocev2 = false;
  for (const auto& g : d.ports(0).gids()) rocev2 = rocev2 || g.type() == "RoCEv2";
  EXPECT_TRUE(rocev2) << "no RoCEv2 GID on port 1";
  EXPECT_TRUE(d.caps().mw_type1());
  EXPECT_TRUE(d.caps().mw_type2b());
  EXPECT_GT(d.caps().max_mr(), 0u);
  EXPECT_GT(d.caps().max_mw(), 0u);
  // rxe has no ibv_rereg_mr (softroce-vm.md): the probe must have seen it, and said why.
  EXPECT_FALSE(d.caps().native_rereg());
  EXPECT_NE(d.caps().native_rereg_probe().find("EOPNOTSUPP"), std::string::npos) << d.caps().native_rereg_probe();
  // rxe in Linux 6.1 checks an access through a window against its MR's bounds only: the start-up probe
  // ran (not "could not run") and saw a read past a window succeed, so (mw_bounds_region "auto") rdmad
  // binds windows to bounds regions on it; Type1WindowReadsExactlyItsRange shows they hold.
  EXPECT_FALSE(d.caps().mw_bounds_enforced()) << d.caps().mw_bounds_probe();
  EXPECT_NE(d.caps().mw_bounds_probe().find("past the window (inside its MR) succeeded"), std::string::npos)
      << d.caps().mw_bounds_probe();
  EXPECT_TRUE(d.caps().mw_bounds_region());
  ExpectError(Rdmad().GetDevice("devices/nosuch0").status(), kNotFound, "name");
}

// ---------------------------------------------------------------------------------------------------------
// Protection domains

TEST_F(Conformance, PdLifecycle) {
  const Snapshot before = Snap();
  std::string pd = NewPd("lifecycle");
  ASSERT_OK_AND_ASSIGN(auto got, Rdmad().GetPd(pd));
  EXPECT_EQ(got.label(), "lifecycle");
  EXPECT_EQ(got.device(), "devices/" + DeviceName());
  EXPECT_EQ(Snap().device.at("pd"), before.device.at("pd") + 1);
  ASSERT_OK(Rdmad().DeletePd(pd).status());
  pds_.clear();
  ExpectError(Rdmad().GetPd(pd).status(), kNotFound, "name");
  EXPECT_EQ(Snap(), before);
  // A deleted PD's number is not reused.
  std::string next = NewPd();
  EXPECT_NE(next, pd);
}

TEST_F(Conformance, PdBadInputs) {
  v1::CreatePdRequest r;
  r.set_device("devices/nosuch0");
  EXPECT_REFUSED(Rdmad().CreatePd(r), kNotFound, "device");
  r.set_device("");
  EXPECT_REFUSED(Rdmad().CreatePd(r), kInvalid, "device");
  r.set_device(DeviceName());
  r.set_label(std::string(200, 'x'));
  EXPECT_REFUSED(Rdmad().CreatePd(r), kInvalid, "label");
  EXPECT_REFUSED(Rdmad().GetPd("pds/999999"), kNotFound, "name");
  EXPECT_REFUSED(Rdmad().GetPd("mrs/1"), kInvalid, "name");
  EXPECT_REFUSED(Rdmad().DeletePd("pds/abc"), kInvalid, "name");
}

TEST_F(Conformance, PdDeleteRefusedWhileInUseAndCascadeReleasesChildrenFirst) {
  std::string pd = NewPd();
  std::string file = NewFile("cascade", 8192, 1);
  ASSERT_OK_AND_ASSIGN(auto mr, RegisterFile(pd, file, 0, 8192, {v1::LOCAL_WRITE, v1::MW_BIND}));
  ASSERT_OK_AND_ASSIGN(auto mw, NewMw(pd, v1::TYPE_1));
  ASSERT_OK_AND_ASSIGN(auto bound, Bind(mw.name(), mr.name(), 0, 4096));
  EXPECT_REFUSED(Rdmad().DeletePd(pd), kPrecondition, "name", "EBUSY");
  ASSERT_OK_AND_ASSIGN(auto deleted, Rdmad().DeletePd(pd, /*cascade=*/true));
  pds_.clear();
  ASSERT_EQ(deleted.deleted_size(), 3);
  EXPECT_EQ(deleted.deleted(0), mw.name());
  EXPECT_EQ(deleted.deleted(1), mr.name());
  EXPECT_EQ(deleted.deleted(2), pd);
}

// ---------------------------------------------------------------------------------------------------------
// Memory regions

TEST_F(Conformance, RegisterAnonymousAndSharedFile) {
  std::string pd = NewPd();
  ASSERT_OK_AND_ASSIGN(auto anon, RegisterAnon(pd, 1 << 20, {v1::LOCAL_WRITE, v1::REMOTE_READ}));
  EXPECT_EQ(anon.length(), 1u << 20);
  EXPECT_EQ(anon.pd(), pd);
  EXPECT_EQ(anon.state(), v1::MR_READY);
  EXPECT_NE(anon.rkey(), 0u);
  ASSERT_EQ(anon.access_size(), 2);
  std::string file = NewFile("reg", 3 * 4096, 2);
  // An unaligned offset inside the file: rdmad maps from the page below and registers the exact range.
  ASSERT_OK_AND_ASSIGN(auto fmr, RegisterFile(pd, file, 100, 5000, {v1::REMOTE_READ}));
  EXPECT_EQ(fmr.length(), 5000u);
  EXPECT_EQ(fmr.source().file().offset(), 100u);
  ASSERT_OK_AND_ASSIGN(auto listed, Rdmad().ListMrs(pd));
  EXPECT_EQ(listed.mrs_size(), 2);
  // The MR's own rkey reads exactly the registered bytes of the file.
  EXPECT_EQ(ReadOnFreshLink(pd, fmr.addr(), fmr.rkey(), 5000), IBV_WC_SUCCESS);
  ExpectPattern(last_peer_, 2, 100, 5000);
  EXPECT_EQ(ReadOnFreshLink(pd, fmr.addr() + 1, fmr.rkey(), 5000), IBV_WC_REM_ACCESS_ERR);
  ASSERT_OK(Rdmad().DeregisterMr(fmr.name()));
  ExpectError(Rdmad().GetMr(fmr.name()).status(), kNotFound, "name");
}

TEST_F(Conformance, AccessFlagRuleIsEnforcedBeforeVerbs) {
  std::string pd = NewPd();
  // ibv_reg_mr(3): REMOTE_WRITE or REMOTE_ATOMIC requires LOCAL_WRITE.
  EXPECT_REFUSED(RegisterAnon(pd, 4096, {v1::REMOTE_WRITE}), kInvalid, "access");
  EXPECT_REFUSED(RegisterAnon(pd, 4096, {v1::REMOTE_ATOMIC, v1::REMOTE_READ}), kInvalid, "access");
  EXPECT_REFUSED(RegisterAnon(pd, 4096, {static_cast<v1::Access>(42)}), kInvalid, "access");
  ASSERT_OK_AND_ASSIGN(auto ok, RegisterAnon(pd, 4096, {v1::LOCAL_WRITE, v1::REMOTE_WRITE, v1::REMOTE_ATOMIC}));
  EXPECT_EQ(ok.access_size(), 3);
  ASSERT_OK_AND_ASSIGN(auto local_only, RegisterAnon(pd, 4096, {}));
  EXPECT_EQ(local_only.access_size(), 0);  // local read is always enabled
}

TEST_F(Conformance, RegisterBadInputsLeaveNothingBehind) {
  std::string pd = NewPd();
  std::string file = NewFile("bad", 8192, 3);
  EXPECT_REFUSED(RegisterAnon("pds/999999", 4096, {}), kNotFound, "pd");
  EXPECT_REFUSED(RegisterAnon("pd-1", 4096, {}), kInvalid, "pd");
  EXPECT_REFUSED(RegisterAnon(pd, 0, {}), kInvalid, "source.anonymous.size");
  EXPECT_REFUSED(RegisterAnon(pd, 1ull << 60, {}), kOutOfRange, "source.anonymous.size");
  v1::RegisterMrRequest nosource;
  nosource.set_pd(pd);
  EXPECT_REFUSED(Rdmad().RegisterMr(nosource), kInvalid, "source");
  v1::RegisterMrRequest huge;
  huge.set_pd(pd);
  huge.mutable_source()->mutable_anonymous()->set_size(4096);
  huge.mutable_source()->mutable_anonymous()->set_huge_pages(true);
  EXPECT_REFUSED(Rdmad().RegisterMr(huge), kInvalid, "source.anonymous.size");
  EXPECT_REFUSED(RegisterFile(pd, file + ".missing", 0, 4096, {}), kNotFound, "source.file.path", "ENOENT");
  EXPECT_REFUSED(RegisterFile(pd, file, 4096, 8192, {}), kOutOfRange, "source.file.length");
  EXPECT_REFUSED(RegisterFile(pd, file, 8192, 1, {}), kOutOfRange, "source.file.offset");
  EXPECT_REFUSED(RegisterFile(pd, file, 0, 0, {}), kInvalid, "source.file.length");
  EXPECT_REFUSED(RegisterFile(pd, file, 0, 1ull << 62, {}), kOutOfRange, "source.file.length");
  EXPECT_REFUSED(RegisterFile(pd, "relative/path", 0, 4096, {}), kInvalid, "source.file.path");
  EXPECT_REFUSED(RegisterFile(pd, "/etc/hostname", 0, 1, {}), kPermission, "source.file.path");
  EXPECT_REFUSED(Rdmad().GetMr("mrs/999999"), kNotFound, "name");
  EXPECT_REFUSED(Rdmad().DeregisterMr("mrs/999999"), kNotFound, "name");
}

// ---------------------------------------------------------------------------------------------------------
// Reregistration (rxe has no native ibv_rereg_mr: the emulated path)

TEST_F(Conformance, ReregChangeAccessEmulated) {
  std::string pd = NewPd();
  std::string file = NewFile("rereg-access", 8192, 4);
  ASSERT_OK_AND_ASSIGN(auto mr, RegisterFile(pd, file, 0, 8192, {v1::LOCAL_WRITE}));
  // Without REMOTE_READ the MR's rkey allows no read.
  EXPECT_EQ(ReadOnFreshLink(pd, mr.addr(), mr.rkey(), 64), IBV_WC_REM_ACCESS_ERR);
  v1::ReregisterMrRequest r;
  r.set_name(mr.name());
  r.add_flags(v1::CHANGE_ACCESS);
  r.add_access(v1::LOCAL_WRITE);
  r.add_access(v1::REMOTE_READ);
  ASSERT_OK_AND_ASSIGN(auto resp, Rdmad().ReregisterMr(r));
  EXPECT_EQ(resp.method(), v1::EMULATED);
  EXPECT_TRUE(resp.keys_changed());
  EXPECT_EQ(resp.old_rkey(), mr.rkey());
  EXPECT_EQ(resp.mr().name(), mr.name());
  EXPECT_EQ(resp.mr().generation(), 1u);
  EXPECT_NE(resp.mr().rkey(), mr.rkey());
  EXPECT_EQ(resp.mr().access_size(), 2);
  EXPECT_EQ(ReadOnFreshLink(pd, resp.mr().addr(), resp.mr().rkey(), 8192), IBV_WC_SUCCESS);
  ExpectPattern(last_peer_, 4, 0, 8192);
  // The access rule applies to the new flags too, and a refusal leaves the MR as it was.
  v1::ReregisterMrRequest bad = r;
  bad.clear_access();
  bad.add_access(v1::REMOTE_WRITE);
  const Snapshot before = Snap();
  auto refused = Rdmad().ReregisterMr(bad);
  ExpectError(refused.status(), kInvalid, "access");
  EXPECT_EQ(Detail(refused.status()).rereg_outcome(), v1::OUTCOME_OLD_MR_VALID);
  EXPECT_EQ(Snap(), before);
  ASSERT_OK_AND_ASSIGN(auto same, Rdmad().GetMr(mr.name()));
  EXPECT_EQ(same.rkey(), resp.mr().rkey());
}

TEST_F(Conformance, ReregChangeTranslationToANewFileRange) {
  std::string pd = NewPd();
  std::string a = NewFile("rereg-a", 8192, 5);
  std::string b = NewFile("rereg-b", 16384, 6);
  ASSERT_OK_AND_ASSIGN(auto mr, RegisterFile(pd, a, 0, 8192, {v1::REMOTE_READ}));
  v1::ReregisterMrRequest r;
  r.set_name(mr.name());
  r.add_flags(v1::CHANGE_TRANSLATION);
  r.mutable_source()->mutable_file()->set_path(b);
  r.mutable_source()->mutable_file()->set_offset(4096);
  r.mutable_source()->mutable_file()->set_length(4096);
  ASSERT_OK_AND_ASSIGN(auto resp, Rdmad().ReregisterMr(r));
  EXPECT_EQ(resp.method(), v1::EMULATED);
  EXPECT_TRUE(resp.keys_changed());
  EXPECT_EQ(resp.mr().length(), 4096u);
  EXPECT_EQ(resp.mr().source().file().path(), b);
  // The new rkey reads file b at 4096..8191; the old key is dead.
  EXPECT_EQ(ReadOnFreshLink(pd, resp.mr().addr(), resp.mr().rkey(), 4096), IBV_WC_SUCCESS);
  ExpectPattern(last_peer_, 6, 4096, 4096);
  EXPECT_EQ(ReadOnFreshLink(pd, mr.addr(), mr.rkey(), 64), IBV_WC_REM_ACCESS_ERR);
}

TEST_F(Conformance, ReregChangePdMovesTheRegion) {
  std::string pd1 = NewPd("one");
  std::string pd2 = NewPd("two");
  ASSERT_OK_AND_ASSIGN(auto mr, RegisterAnon(pd1, 8192, {v1::LOCAL_WRITE, v1::MW_BIND}));
  v1::ReregisterMrRequest r;
  r.set_name(mr.name());
  r.add_flags(v1::CHANGE_PD);
  r.set_pd(pd2);
  ASSERT_OK_AND_ASSIGN(auto resp, Rdmad().ReregisterMr(r));
  EXPECT_EQ(resp.mr().pd(), pd2);
  ASSERT_OK_AND_ASSIGN(auto p1, Rdmad().GetPd(pd1));
  ASSERT_OK_AND_ASSIGN(auto p2, Rdmad().GetPd(pd2));
  EXPECT_EQ(p1.mr_count(), 0u);
  EXPECT_EQ(p2.mr_count(), 1u);
  // Really in the new PD: a window of pd2 binds to it, one of pd1 is refused.
  ASSERT_OK_AND_ASSIGN(auto w2, NewMw(pd2, v1::TYPE_1));
  ASSERT_OK_AND_ASSIGN(auto bound, Bind(w2.name(), mr.name(), 0, 4096));
  EXPECT_TRUE(bound.bound());
  ASSERT_OK_AND_ASSIGN(auto w1, NewMw(pd1, v1::TYPE_1));
  EXPECT_REFUSED(Bind(w1.name(), mr.name(), 0, 4096), kInvalid, "mr");
}

TEST_F(Conformance, ReregFailureLeavesTheOldRegionValid) {
  std::string pd = NewPd();
  std::string a = NewFile("rereg-keep", 8192, 7);
  ASSERT_OK_AND_ASSIGN(auto mr, RegisterFile(pd, a, 0, 8192, {v1::REMOTE_READ}));
  v1::ReregisterMrRequest r;
  r.set_name(mr.name());
  r.add_flags(v1::CHANGE_TRANSLATION);
  r.mutable_source()->mutable_file()->set_path(a + ".missing");
  r.mutable_source()->mutable_file()->set_length(4096);
  const Snapshot before = Snap();
  auto failed = Rdmad().ReregisterMr(r);
  ExpectError(failed.status(), kNotFound, "source.file.path", "ENOENT");
  EXPECT_EQ(Detail(failed.status()).rereg_outcome(), v1::OUTCOME_OLD_MR_VALID);
  EXPECT_EQ(Snap(), before);
  ASSERT_OK_AND_ASSIGN(auto same, Rdmad().GetMr(mr.name()));
  EXPECT_EQ(same.rkey(), mr.rkey());
  EXPECT_EQ(same.lkey(), mr.lkey());
  EXPECT_EQ(same.generation(), 0u);
  EXPECT_EQ(same.state(), v1::MR_READY);
  EXPECT_EQ(ReadOnFreshLink(pd, mr.addr(), mr.rkey(), 8192), IBV_WC_SUCCESS);
  ExpectPattern(last_peer_, 7, 0, 8192);
}

TEST_F(Conformance, ReregBadFlagCombinations) {
  std::string pd = NewPd();
  ASSERT_OK_AND_ASSIGN(auto mr, RegisterAnon(pd, 4096, {v1::LOCAL_WRITE}));
  v1::ReregisterMrRequest none;
  none.set_name(mr.name());
  EXPECT_REFUSED(Rdmad().ReregisterMr(none), kInvalid, "flags");
  v1::ReregisterMrRequest source_without_flag = none;
  source_without_flag.add_flags(v1::CHANGE_ACCESS);
  source_without_flag.mutable_source()->mutable_anonymous()->set_size(4096);
  EXPECT_REFUSED(Rdmad().ReregisterMr(source_without_flag), kInvalid, "source");
  v1::ReregisterMrRequest pd_without_flag = none;
  pd_without_flag.add_flags(v1::CHANGE_ACCESS);
  pd_without_flag.set_pd(pd);
  EXPECT_REFUSED(Rdmad().ReregisterMr(pd_without_flag), kInvalid, "pd");
  v1::ReregisterMrRequest flag_without_pd = none;
  flag_without_pd.add_flags(v1::CHANGE_PD);
  EXPECT_REFUSED(Rdmad().ReregisterMr(flag_without_pd), kInvalid, "flags");
  v1::ReregisterMrRequest access_without_flag = none;
  access_without_flag.add_flags(v1::CHANGE_PD);
  access_without_flag.set_pd(pd);
  access_without_flag.add_access(v1::REMOTE_READ);
  EXPECT_REFUSED(Rdmad().ReregisterMr(access_without_flag), kInvalid, "access");
  v1::ReregisterMrRequest unknown_pd = none;
  unknown_pd.add_flags(v1::CHANGE_PD);
  unknown_pd.set_pd("pds/999999");
  EXPECT_REFUSED(Rdmad().ReregisterMr(unknown_pd), kNotFound, "pd");
  v1::ReregisterMrRequest past_end = none;
  past_end.add_flags(v1::CHANGE_TRANSLATION);
  past_end.mutable_source()->mutable_anonymous()->set_size(0);
  EXPECT_REFUSED(Rdmad().ReregisterMr(past_end), kInvalid, "source.anonymous.size");
}

// ---------------------------------------------------------------------------------------------------------
// Deregistration while a window is bound (ibv_dereg_mr(3) NOTES), and rereg likewise

TEST_F(Conformance, DeregRefusedWhileWindowBoundAcceptedAfterInvalidation) {
  std::string pd = NewPd();
  for (v1::MwType type : {v1::TYPE_1, v1::TYPE_2}) {
    SCOPED_TRACE(v1::MwType_Name(type));
    ASSERT_OK_AND_ASSIGN(auto mr, RegisterAnon(pd, 8192, {v1::LOCAL_WRITE, v1::MW_BIND}));
    ASSERT_OK_AND_ASSIGN(auto mw, NewMw(pd, type));
    std::string qp;
    if (type == v1::TYPE_2) {
      TestPeer* peer = nullptr;
      ASSERT_OK_AND_ASSIGN(auto linked, Link(pd, &peer));
      qp = linked;
    }
    ASSERT_OK_AND_ASSIGN(auto bound, Bind(mw.name(), mr.name(), 0, 4096, qp));
    ASSERT_OK_AND_ASSIGN(auto with_window, Rdmad().GetMr(mr.name()));
    EXPECT_EQ(with_window.bound_windows(), 1u);
    EXPECT_REFUSED(Rdmad().DeregisterMr(mr.name()), kPrecondition, "name", "EBUSY");
    v1::ReregisterMrRequest r;
    r.set_name(mr.name());
    r.add_flags(v1::CHANGE_ACCESS);
    EXPECT_REFUSED(Rdmad().ReregisterMr(r), kPrecondition, "name", "EBUSY");
    if (!qp.empty()) EXPECT_REFUSED(Rdmad().DeleteQp(qp), kPrecondition, "name", "EBUSY");
    ASSERT_OK_AND_ASSIGN(auto invalidated, Rdmad().InvalidateMw(mw.name()));
    EXPECT_FALSE(invalidated.bound());
    ASSERT_OK(Rdmad().DeregisterMr(mr.name()));
    ASSERT_OK(Rdmad().DeallocMw(mw.name()));
  }
}

// ---------------------------------------------------------------------------------------------------------
// Windows: the rkey reads exactly the window's range, nothing outside it

TEST_F(Conformance, Type1WindowReadsExactlyItsRange) {
  std::string pd = NewPd();
  std::string file = NewFile("mw1", 16384, 8);
  // The MR itself grants no remote access: only the window does.
  ASSERT_OK_AND_ASSIGN(auto mr, RegisterFile(pd, file, 0, 16384, {v1::LOCAL_WRITE, v1::MW_BIND}));
  ASSERT_OK_AND_ASSIGN(auto mw, NewMw(pd, v1::TYPE_1));
  const uint64_t off = 4096 + 123, len = 5000;
  ASSERT_OK_AND_ASSIGN(auto w, Bind(mw.name(), mr.name(), off, len));
  ASSERT_TRUE(w.bound());
  EXPECT_NE(w.rkey(), mw.rkey()) << "binding a type 1 window changes its rkey";
  const uint64_t start = w.binding().remote_addr();
  EXPECT_EQ(start, mr.addr() + off);
  EXPECT_EQ(ReadOnFreshLink(pd, start, w.rkey(), len), IBV_WC_SUCCESS);
  ExpectPattern(last_peer_, 8, off, len);
  EXPECT_EQ(ReadOnFreshLink(pd, start + len - 1, w.rkey(), 1), IBV_WC_SUCCESS);
  ExpectPattern(last_peer_, 8, off + len - 1, 1);
  EXPECT_EQ(ReadOnFreshLink(pd, start - 1, w.rkey(), 1), IBV_WC_REM_ACCESS_ERR) << "one byte before the window";
  EXPECT_EQ(ReadOnFreshLink(pd, start + len, w.rkey(), 1), IBV_WC_REM_ACCESS_ERR) << "one byte past the window";
  // The failed read moved rdmad's QP to ERROR without any completion of rdmad's: GetQp asks the device.
  EXPECT_EQ(WaitQpState(last_qp_, v1::QP_ERROR), v1::QP_ERROR) << last_qp_;
  EXPECT_EQ(ReadOnFreshLink(pd, start, w.rkey(), len + 1), IBV_WC_REM_ACCESS_ERR) << "spanning the end";
  EXPECT_EQ(ReadOnFreshLink(pd, mr.addr(), mr.rkey(), 1), IBV_WC_REM_ACCESS_ERR) << "the MR's own rkey";
  // Invalidation revokes the key for real.
  ASSERT_OK_AND_ASSIGN(auto inv, Rdmad().InvalidateMw(mw.name()));
  EXPECT_FALSE(inv.bound());
  EXPECT_EQ(ReadOnFreshLink(pd, start, w.rkey(), 1), IBV_WC_REM_ACCESS_ERR) << "revoked rkey";
  // Idempotent.
  ASSERT_OK_AND_ASSIGN(auto again, Rdmad().InvalidateMw(mw.name()));
  EXPECT_FALSE(again.bound());
}

TEST_F(Conformance, Type1RebindMovesTheWindowAndKillsTheOldKey) {
  std::string pd = NewPd();
  std::string file = NewFile("mw1-rebind", 16384, 9);
  ASSERT_OK_AND_ASSIGN(auto mr, RegisterFile(pd, file, 0, 16384, {v1::LOCAL_WRITE, v1::MW_BIND}));
  ASSERT_OK_AND_ASSIGN(auto mw, NewMw(pd, v1::TYPE_1));
  ASSERT_OK_AND_ASSIGN(auto first, Bind(mw.name(), mr.name(), 0, 4096));
  ASSERT_OK_AND_ASSIGN(auto second, Bind(mw.name(), mr.name(), 8192, 4096));
  EXPECT_NE(first.rkey(), second.rkey());
  ASSERT_OK_AND_ASSIGN(auto m, Rdmad().GetMr(mr.name()));
  EXPECT_EQ(m.bound_windows(), 1u);
  EXPECT_EQ(ReadOnFreshLink(pd, first.binding().remote_addr(), first.rkey(), 16), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(ReadOnFreshLink(pd, second.binding().remote_addr(), second.rkey(), 4096), IBV_WC_SUCCESS);
  ExpectPattern(last_peer_, 9, 8192, 4096);
  // Deallocating a bound window unbinds it: the MR can then be deregistered.
  ASSERT_OK(Rdmad().DeallocMw(mw.name()));
  ASSERT_OK(Rdmad().DeregisterMr(mr.name()));
}

TEST_F(Conformance, Type2WindowReadsExactlyItsRangeOnlyOnItsQp) {
  std::string pd = NewPd();
  std::string file = NewFile("mw2", 16384, 10);
  ASSERT_OK_AND_ASSIGN(auto mr, RegisterFile(pd, file, 0, 16384, {v1::LOCAL_WRITE, v1::MW_BIND}));
  const uint64_t off = 2000, len = 6000;
  // Each case on a fresh QP pair: an access error moves both QPs to the error state.
  struct Case {
    const char* what;
    int64_t from_start;
    uint32_t length;
    ibv_wc_status want;
  };
  const Case cases[] = {{"the whole window", 0, static_cast<uint32_t>(len), IBV_WC_SUCCESS},
                        {"one byte before", -1, 1, IBV_WC_REM_ACCESS_ERR},
                        {"one byte past", static_cast<int64_t>(len), 1, IBV_WC_REM_ACCESS_ERR},
                        {"spanning the end", 1, static_cast<uint32_t>(len), IBV_WC_REM_ACCESS_ERR}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    TestPeer* peer = nullptr;
    ASSERT_OK_AND_ASSIGN(auto qp, Link(pd, &peer));
    ASSERT_OK_AND_ASSIGN(auto mw, NewMw(pd, v1::TYPE_2));
    ASSERT_OK_AND_ASSIGN(auto w, Bind(mw.name(), mr.name(), off, len, qp));
    EXPECT_EQ(w.binding().qp(), qp);
    std::string error;
    EXPECT_EQ(peer->Read(w.binding().remote_addr() + c.from_start, w.rkey(), c.length, &error), c.want) << error;
    if (c.want == IBV_WC_SUCCESS) ExpectPattern(peer, 10, off, c.length);
    if (c.want != IBV_WC_SUCCESS) {
      // The bad read moved rdmad's QP to the error state, where a LOCAL_INV is only flushed: revocation
      // still works (the window is deallocated and replaced). Once with rdmad knowing the state first
      // (GetQp), once finding out from the flushed completion.
      if (c.from_start < 0) EXPECT_EQ(WaitQpState(qp, v1::QP_ERROR), v1::QP_ERROR);
      ASSERT_OK_AND_ASSIGN(auto inv, Rdmad().InvalidateMw(mw.name()));
      EXPECT_FALSE(inv.bound());
      EXPECT_NE(inv.rkey(), w.rkey());
      ASSERT_OK_AND_ASSIGN(auto region, Rdmad().GetMr(mr.name()));
      EXPECT_EQ(region.bound_windows(), 0u);
    }
    ASSERT_OK(Rdmad().DeallocMw(mw.name()));
  }
  // A type 2 window works only on the QP it is bound on.
  TestPeer* peer = nullptr;
  ASSERT_OK_AND_ASSIGN(auto qp, Link(pd, &peer));
  ASSERT_OK_AND_ASSIGN(auto mw, NewMw(pd, v1::TYPE_2));
  ASSERT_OK_AND_ASSIGN(auto w, Bind(mw.name(), mr.name(), off, len, qp));
  EXPECT_EQ(ReadOnFreshLink(pd, w.binding().remote_addr(), w.rkey(), 16), IBV_WC_REM_ACCESS_ERR)
      << "read through another QP of the same PD";
  std::string error;
  EXPECT_EQ(peer->Read(w.binding().remote_addr(), w.rkey(), 16, &error), IBV_WC_SUCCESS) << error;
  ExpectPattern(peer, 10, off, 16);
  // LOCAL_INV revokes it.
  ASSERT_OK_AND_ASSIGN(auto inv, Rdmad().InvalidateMw(mw.name()));
  EXPECT_FALSE(inv.bound());
  EXPECT_EQ(peer->Read(w.binding().remote_addr(), w.rkey(), 16, &error), IBV_WC_REM_ACCESS_ERR) << error;
}

TEST_F(Conformance, Type2ZeroBasedWindow) {
  std::string pd = NewPd();
  std::string file = NewFile("mw2-zb", 16384, 11);
  ASSERT_OK_AND_ASSIGN(auto mr, RegisterFile(pd, file, 0, 16384, {v1::LOCAL_WRITE, v1::MW_BIND}));
  const uint64_t off = 8192 + 7, len = 1000;
  for (uint64_t at : {uint64_t{0}, len - 1, len}) {
    SCOPED_TRACE(at);
    TestPeer* peer = nullptr;
    ASSERT_OK_AND_ASSIGN(auto qp, Link(pd, &peer));
    ASSERT_OK_AND_ASSIGN(auto mw, NewMw(pd, v1::TYPE_2));
    ASSERT_OK_AND_ASSIGN(auto w, Bind(mw.name(), mr.name(), off, len, qp, /*zero_based=*/true));
    EXPECT_EQ(w.binding().remote_addr(), 0u);
    std::string error;
    const ibv_wc_status want = at < len ? IBV_WC_SUCCESS : IBV_WC_REM_ACCESS_ERR;
    EXPECT_EQ(peer->Read(at, w.rkey(), 1, &error), want) << error;
    if (want == IBV_WC_SUCCESS) ExpectPattern(peer, 11, off + at, 1);
    ASSERT_OK(Rdmad().DeallocMw(mw.name()));
  }
}

TEST_F(Conformance, BindBadInputsLeaveNothingBehind) {
  std::string pd = NewPd();
  std::string other = NewPd("other");
  ASSERT_OK_AND_ASSIGN(auto mr, RegisterAnon(pd, 8192, {v1::LOCAL_WRITE, v1::MW_BIND}));
  ASSERT_OK_AND_ASSIGN(auto no_bind, RegisterAnon(pd, 8192, {v1::LOCAL_WRITE}));
  ASSERT_OK_AND_ASSIGN(auto read_only, RegisterAnon(pd, 8192, {v1::MW_BIND}));
  ASSERT_OK_AND_ASSIGN(auto elsewhere, RegisterAnon(other, 8192, {v1::LOCAL_WRITE, v1::MW_BIND}));
  ASSERT_OK_AND_ASSIGN(auto w1, NewMw(pd, v1::TYPE_1));
  ASSERT_OK_AND_ASSIGN(auto w2, NewMw(pd, v1::TYPE_2));
  v1::CreateQpRequest cq;
  cq.set_pd(pd);
  ASSERT_OK_AND_ASSIGN(auto unconnected, Rdmad().CreateQp(cq));

  EXPECT_REFUSED(Bind("mws/999999", mr.name(), 0, 64), kNotFound, "name");
  EXPECT_REFUSED(Bind(w1.name(), "mrs/999999", 0, 64), kNotFound, "mr");
  EXPECT_REFUSED(Bind(w1.name(), mr.name(), 0, 0), kInvalid, "length");
  EXPECT_REFUSED(Bind(w1.name(), mr.name(), 8192, 1), kOutOfRange, "offset");
  EXPECT_REFUSED(Bind(w1.name(), mr.name(), 4096, 4097), kOutOfRange, "length");
  EXPECT_REFUSED(Bind(w1.name(), mr.name(), 0, UINT64_MAX), kOutOfRange, "length");
  EXPECT_REFUSED(Bind(w1.name(), no_bind.name(), 0, 64), kPrecondition, "mr");
  EXPECT_REFUSED(Bind(w1.name(), read_only.name(), 0, 64, "", false, {v1::REMOTE_WRITE}), kPrecondition, "access");
  EXPECT_REFUSED(Bind(w1.name(), read_only.name(), 0, 64, "", false, {v1::REMOTE_ATOMIC}), kPrecondition, "access");
  EXPECT_REFUSED(Bind(w1.name(), mr.name(), 0, 64, "", false, {v1::LOCAL_WRITE}), kInvalid, "access");
  EXPECT_REFUSED(Bind(w1.name(), mr.name(), 0, 64, "", false, {v1::MW_BIND}), kInvalid, "access");
  EXPECT_REFUSED(Bind(w1.name(), mr.name(), 0, 64, "", /*zero_based=*/true), kInvalid, "zero_based");
  EXPECT_REFUSED(Bind(w1.name(), elsewhere.name(), 0, 64), kInvalid, "mr");
  EXPECT_REFUSED(Bind(w2.name(), mr.name(), 0, 64), kInvalid, "qp");
  EXPECT_REFUSED(Bind(w2.name(), mr.name(), 0, 64, unconnected.name()), kPrecondition, "qp");
  EXPECT_REFUSED(Bind(w2.name(), mr.name(), 0, 64, "qps/999999"), kNotFound, "qp");
  v1::AllocMwRequest bad_type;
  bad_type.set_pd(pd);
  EXPECT_REFUSED(Rdmad().AllocMw(bad_type), kInvalid, "type");
  EXPECT_REFUSED(Rdmad().InvalidateMw("mws/999999"), kNotFound, "name");
  EXPECT_REFUSED(Rdmad().DeallocMw("mws/0"), kInvalid, "name");
}

// ---------------------------------------------------------------------------------------------------------
// Key hygiene, measured (docs/security.md#keys): the NIC's counters as GetDevice reports them

// The device's hardware counters, from rdmad: "port/name" -> value, and the sum of those flagged
// remote_access_error. It first waits out the kernel's refresh period (`lifespan`, 10 ms by default:
// drivers/infiniband/core/sysfs.c serves a cached value younger than that).
struct Counters {
  std::map<std::string, uint64_t> values;
  uint64_t flagged = 0;
  size_t flagged_names = 0;
};

Counters DeviceCounters() {
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  Counters c;
  absl::StatusOr<v1::Device> d = Rdmad().GetDevice("devices/" + DeviceName());
  EXPECT_TRUE(d.ok()) << d.status().message();
  if (!d.ok()) return c;
  for (const v1::HwCounter& h : d->hw_counters()) {
    c.values[std::to_string(h.port()) + "/" + h.name()] = h.value();
    if (h.remote_access_error()) {
      c.flagged += h.value();
      c.flagged_names++;
    }
  }
  return c;
}

// "1/rcvd_pkts+2 1/sent_pkts+2": the counters that moved from `a` to `b`.
std::string Moved(const Counters& a, const Counters& b) {
  std::string out;
  for (const auto& [name, value] : b.values) {
    auto it = a.values.find(name);
    const uint64_t before = it == a.values.end() ? 0 : it->second;
    if (value != before) out += (out.empty() ? "" : " ") + name + "+" + std::to_string(value - before);
  }
  return out;
}

// A read with a dead key (a window's key after its invalidation) and one with a forged key (an index no
// object has), from the suite's own test QP, are refused at the NIC. Where the driver counts the remote
// accesses it refuses (server/fabric/hw_counters.cc: mlx5's resp_remote_access_errors, ...), GetDevice's
// flagged counters grow by one per refused read, and not on a good read. rxe counts no such thing
// (rxe_hw_counters.c): a refused read moves the same counters as a good one, so the refusals are invisible
// in rxe0's counters; that is what is checked on rxe. In the guest both ends are rxe0 (loopback): each
// read is one request and one answer (the data, or the NAK), sent and received by the same device.
TEST_F(Conformance, RefusedReadsInTheNicCounters) {
  std::string pd = NewPd();
  ASSERT_OK_AND_ASSIGN(auto mr, RegisterAnon(pd, 16384, {v1::LOCAL_WRITE, v1::MW_BIND}));
  ASSERT_OK_AND_ASSIGN(auto mw, NewMw(pd, v1::TYPE_1));
  ASSERT_OK_AND_ASSIGN(auto w, Bind(mw.name(), mr.name(), 0, 4096));
  const uint64_t addr = w.binding().remote_addr();
  const Counters c0 = DeviceCounters();
  ASSERT_FALSE(c0.values.empty()) << "GetDevice reports no hw_counters for " << DeviceName();
  EXPECT_EQ(ReadOnFreshLink(pd, addr, w.rkey(), 64), IBV_WC_SUCCESS) << "the live key";
  const Counters c1 = DeviceCounters();
  ASSERT_OK(Rdmad().InvalidateMw(mw.name()).status());
  EXPECT_EQ(ReadOnFreshLink(pd, addr, w.rkey(), 64), IBV_WC_REM_ACCESS_ERR) << "the dead key";
  const Counters c2 = DeviceCounters();
  const uint32_t forged = w.rkey() ^ 0x00400000u;  // another index, far from any object of this suite
  EXPECT_EQ(ReadOnFreshLink(pd, addr, forged, 64), IBV_WC_REM_ACCESS_ERR) << "a forged key";
  const Counters c3 = DeviceCounters();
  const std::string good = Moved(c0, c1), dead = Moved(c1, c2), forged_moved = Moved(c2, c3);
  std::cout << "counters moved by a good read: " << good << "\n"
            << "counters moved by a read with the dead key: " << dead << "\n"
            << "counters moved by a read with a forged key: " << forged_moved << "\n";
  RecordProperty("good_read", good);
  RecordProperty("dead_key_read", dead);
  RecordProperty("forged_key_read", forged_moved);
  if (c0.flagged_names > 0) {
    EXPECT_EQ(c1.flagged, c0.flagged) << "a good read is not a refused access";
    EXPECT_GE(c2.flagged, c1.flagged + 1) << "the dead key's refusal is counted: " << dead;
    EXPECT_GE(c3.flagged, c2.flagged + 1) << "the forged key's refusal is counted: " << forged_moved;
    return;
  }
  // rxe: no counter of refused remote accesses at all; requests and answers are counted alike.
  EXPECT_EQ(DeviceName().rfind("rxe", 0), 0u) << "a device other than rxe without remote-access-error counters";
  EXPECT_EQ(c0.values.count("1/rcvd_pkts"), 1u);
  EXPECT_EQ(c0.values.count("1/sent_pkts"), 1u);
  EXPECT_EQ(good, "1/rcvd_pkts+2 1/sent_pkts+2");
  EXPECT_EQ(dead, good) << "on rxe a refused read looks like a good one in the counters";
  EXPECT_EQ(forged_moved, good);
}

TEST_F(Conformance, QpBadInputs) {
  std::string pd = NewPd();
  v1::CreateQpRequest cq;
  cq.set_pd(pd);
  cq.set_port(9);
  EXPECT_REFUSED(Rdmad().CreateQp(cq), kInvalid, "port");
  cq.set_port(1);
  cq.set_gid_index(999);
  EXPECT_REFUSED(Rdmad().CreateQp(cq), kInvalid, "gid_index");
  cq.clear_gid_index();
  ASSERT_OK_AND_ASSIGN(auto qp, Rdmad().CreateQp(cq));
  EXPECT_EQ(qp.state(), v1::QP_INIT);
  v1::ConnectQpRequest c;
  c.set_name(qp.name());
  EXPECT_REFUSED(Rdmad().ConnectQp(c), kInvalid, "remote.qpn");
  c.mutable_remote()->set_qpn(qp.local().qpn());
  c.mutable_remote()->set_gid("not-a-gid");
  EXPECT_REFUSED(Rdmad().ConnectQp(c), kInvalid, "remote.gid");
  ASSERT_OK(Rdmad().DeleteQp(qp.name()));
}

}  // namespace
}  // namespace rdmad::testing
