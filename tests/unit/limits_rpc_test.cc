// The caps on what callers may hold, through a whole rdmad in-process (tests/support/daemon_fixture.h) over
// the fake fabric and the fake rdma_cm, the caller named per call by the fixture (as in tenancy_test):
//   - a tenant's watch_streams quota and the rdmad-wide limit watch_streams, on WatchEvents, WatchGrants and
//     WatchAudit: an admitted stream says so at once with the initial metadata "rdmad-watch: open", a
//     refused one ends at once with RESOURCE_EXHAUSTED naming the quota or limit, and a closed stream frees
//     its slot;
//   - BindMw whose bounds region (a device that does not enforce window bounds) would pass the tenant's
//     pinned_bytes quota: refused before anything is pinned;
//   - the rdmad-wide limit grants on IssueGrant and IssueGrants, admins included.
// Threads: the test's thread drives the clients; the daemon's gRPC callback threads run the handlers and the
// watch streams' reactors; the fixture drains the daemon in TearDown, after closing the streams.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "rdmad/v1/rdmad.grpc.pb.h"
#include "server/cm/token.h"
#include "server/config.h"
#include "server/registry/registry.h"
#include "server/tenancy/gate.h"
#include "tests/support/daemon_fixture.h"
#include "tests/support/eventually.h"
#include "tests/unit/fake_fabric.h"

namespace rdmad {
namespace {

using ::rdmad::test::Eventually;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kAdmin[] = "ops";
constexpr char kWatcher[] = "spiffe://t/w";  // tenant w: watch_streams 2
constexpr char kPinner[] = "spiffe://t/p";   // tenant p: pinned_bytes 16384
constexpr char kFree[] = "spiffe://t/f";     // tenant f: no quotas of its own
constexpr uint64_t kPage = 4096;
constexpr uint64_t kWatchLimit = 4;  // rdmad-wide limits.watch_streams in these tests
constexpr uint64_t kGrantLimit = 3;  // rdmad-wide limits.grants

Config Tenants() {
  absl::StatusOr<Config> c = ParseConfig(R"({
    "admins": ["ops"],
    "tenants": [
      {"name": "w", "principals": ["spiffe://t/w"], "quotas": {"watch_streams": 2}},
      {"name": "p", "principals": ["spiffe://t/p"], "quotas": {"pinned_bytes": 16384}},
      {"name": "f", "principals": ["spiffe://t/f"]}
    ]})");
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

grpc::Status ExhaustedNaming(const grpc::Status& s, const std::string& what) {
  if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED && s.error_message().find(what) != std::string::npos) {
    return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::UNKNOWN, "expected RESOURCE_EXHAUSTED naming " + what + ", got " +
                                                     std::to_string(s.error_code()) + ": " + s.error_message());
}

// One watch stream, of any of the three kinds, from the client's side.
struct Stream {
  std::unique_ptr<grpc::ClientContext> ctx;
  std::unique_ptr<grpc::ClientReaderInterface<v1::GrantEvent>> grants;
  std::unique_ptr<grpc::ClientReaderInterface<v1::CmEvent>> events;
  std::unique_ptr<grpc::ClientReaderInterface<v1::AuditRecord>> audit;

  void WaitForInitialMetadata() {
    if (grants) grants->WaitForInitialMetadata();
    if (events) events->WaitForInitialMetadata();
    if (audit) audit->WaitForInitialMetadata();
  }
  bool Open() const {
    auto m = ctx->GetServerInitialMetadata();
    auto it = m.find("rdmad-watch");
    return it != m.end() && std::string(it->second.data(), it->second.size()) == "open";
  }
  // Whether the stream ended without a message (what a refused stream does at once).
  bool EndsEmpty() {
    if (grants) {
      v1::GrantEvent e;
      return !grants->Read(&e);
    }
    if (events) {
      v1::CmEvent e;
      return !events->Read(&e);
    }
    v1::AuditRecord r;
    return !audit->Read(&r);
  }
  grpc::Status Finish() {
    if (grants) return grants->Finish();
    if (events) return events->Finish();
    return audit->Finish();
  }
  void Close() {
    ctx->TryCancel();
    Finish();
  }
};

enum class Kind { kGrants, kEvents, kAudit };

class LimitsRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const Config tenants = Tenants();
    Config& config = rdmad_.config();
    config.admins = tenants.admins;
    config.tenants = tenants.tenants;
    config.limits.grants = kGrantLimit;
    config.limits.watch_streams = kWatchLimit;
    config.audit = rdmad_.dir().Sub("audit.log");  // WatchAudit: admins only, a slot of the rdmad-wide limit
    // rxe0 does not enforce window bounds (the fake's default, as rxe): every bind registers a bounds region
    // (mw_bounds_region "auto").
    ASSERT_TRUE(rdmad_.Start().ok());
    ledger_ = rdmad_.ledger();
    registry_ = rdmad_.layers().registry;
    tokens_ = rdmad_.layers().tokens;
    gate_ = rdmad_.layers().gate;
    channel_ = rdmad_.Channel();
  }
  void TearDown() override {
    for (Stream& s : streams_) s.Close();
    streams_.clear();
    rdmad_.Stop();
    EXPECT_THAT(ledger_->violations(), IsEmpty());
    fake::FakeLedger::Counts c = ledger_->live();
    EXPECT_EQ(c.mrs + c.mws + c.qps, 0);
  }

  // A context as `principal`. A deadline bounds every wait: a stream that never says whether it was admitted
  // ends with DEADLINE_EXCEEDED (and so counts as refused) instead of hanging the test.
  static std::unique_ptr<grpc::ClientContext> As(const std::string& principal) {
    auto ctx = test::DaemonFixture::As(principal);
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    return ctx;
  }

  // Opens a stream of `kind` as `who` and waits for its initial metadata (or its end, if refused).
  Stream Watch(Kind kind, const std::string& who) {
    Stream s;
    s.ctx = As(who);
    switch (kind) {
      case Kind::kGrants:
        s.grants = v1::Grants::NewStub(channel_)->WatchGrants(s.ctx.get(), v1::WatchGrantsRequest());
        break;
      case Kind::kEvents:
        s.events = v1::CmIds::NewStub(channel_)->WatchEvents(s.ctx.get(), v1::WatchEventsRequest());
        break;
      case Kind::kAudit:
        s.audit = v1::Audit::NewStub(channel_)->WatchAudit(s.ctx.get(), v1::WatchAuditRequest());
        break;
    }
    s.WaitForInitialMetadata();
    return s;
  }
  // Opens a stream that must be admitted, and keeps it open until the test ends (or it is closed).
  ::testing::AssertionResult KeepOpen(Kind kind, const std::string& who) {
    Stream s = Watch(kind, who);
    if (!s.Open()) {
      grpc::Status st = s.Finish();
      return ::testing::AssertionFailure() << "no \"rdmad-watch: open\"; the stream ended " << st.error_code()
                                           << ": " << st.error_message();
    }
    streams_.push_back(std::move(s));
    return ::testing::AssertionSuccess();
  }
  // Opens a stream that must be refused: no handshake, ended at once, RESOURCE_EXHAUSTED naming `what`.
  ::testing::AssertionResult Refused(Kind kind, const std::string& who, const std::string& what) {
    Stream s = Watch(kind, who);
    if (s.Open()) {
      s.Close();
      return ::testing::AssertionFailure() << "admitted (\"rdmad-watch: open\"); expected a refusal naming " << what;
    }
    if (!s.EndsEmpty()) return ::testing::AssertionFailure() << "a refused stream sent a message";
    grpc::Status st = ExhaustedNaming(s.Finish(), what);
    if (!st.ok()) return ::testing::AssertionFailure() << st.error_message();
    return ::testing::AssertionSuccess();
  }

  std::string CreatePd(const std::string& who) {
    v1::CreatePdRequest req;
    req.set_device("rxe0");
    v1::ProtectionDomain pd;
    grpc::Status s = v1::ProtectionDomains::NewStub(channel_)->CreatePd(As(who).get(), req, &pd);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return pd.name();
  }
  std::string RegisterMr(const std::string& who, const std::string& pd, uint64_t size) {
    v1::RegisterMrRequest req;
    req.set_pd(pd);
    req.mutable_source()->mutable_anonymous()->set_size(size);
    for (v1::Access a : {v1::LOCAL_WRITE, v1::REMOTE_READ, v1::MW_BIND}) req.add_access(a);
    v1::MemoryRegion mr;
    grpc::Status s = v1::MemoryRegions::NewStub(channel_)->RegisterMr(As(who).get(), req, &mr);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return mr.name();
  }
  std::string AllocMw(const std::string& who, const std::string& pd) {
    v1::AllocMwRequest req;
    req.set_pd(pd);
    req.set_type(v1::TYPE_1);
    v1::MemoryWindow mw;
    grpc::Status s = v1::MemoryWindows::NewStub(channel_)->AllocMw(As(who).get(), req, &mw);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return mw.name();
  }
  grpc::Status BindMw(const std::string& who, const std::string& mw, const std::string& mr, uint64_t length) {
    v1::BindMwRequest req;
    req.set_name(mw);
    req.set_mr(mr);
    req.set_length(length);
    req.add_access(v1::REMOTE_READ);
    v1::MemoryWindow out;
    return v1::MemoryWindows::NewStub(channel_)->BindMw(As(who).get(), req, &out);
  }
  static v1::IssueGrantRequest GrantReq(const std::string& mr) {
    v1::IssueGrantRequest req;
    req.set_mr(mr);
    req.set_length(4096);
    req.set_principal("reader");
    return req;
  }
  grpc::Status IssueGrant(const std::string& who, const std::string& mr, v1::IssuedGrant* out) {
    return v1::Grants::NewStub(channel_)->IssueGrant(As(who).get(), GrantReq(mr), out);
  }
  size_t ListGrants() {
    v1::ListGrantsResponse all;
    EXPECT_TRUE(v1::Grants::NewStub(channel_)->ListGrants(As(kAdmin).get(), v1::ListGrantsRequest(), &all).ok());
    return static_cast<size_t>(all.grants_size());
  }

  test::DaemonFixture rdmad_;
  std::shared_ptr<fake::FakeLedger> ledger_;
  Registry* registry_ = nullptr;
  cm::TokenStore* tokens_ = nullptr;
  tenancy::Gate* gate_ = nullptr;
  std::shared_ptr<grpc::Channel> channel_;
  std::vector<Stream> streams_;
};

// (a) Tenant w may hold 2 watch streams: each says "rdmad-watch: open" at once (no event is needed), the
// third is refused at once naming the quota, and a closed stream frees its slot.
TEST_F(LimitsRpcTest, ATenantsWatchStreamsQuotaAdmitsWithTheHandshakeRefusesPastItAndFreesClosedSlots) {
  ASSERT_TRUE(KeepOpen(Kind::kGrants, kWatcher));
  ASSERT_TRUE(KeepOpen(Kind::kEvents, kWatcher));
  EXPECT_TRUE(Refused(Kind::kGrants, kWatcher, "quota watch_streams of tenant w: limit 2, in use 2"));
  EXPECT_TRUE(Refused(Kind::kEvents, kWatcher, "quota watch_streams of tenant w"));
  EXPECT_EQ(gate_->OpenWatches("w"), 2u);

  // Closing one frees its slot once the server has seen the stream end (its OnDone, on a gRPC thread).
  streams_.front().Close();
  streams_.erase(streams_.begin());
  EXPECT_TRUE(Eventually([&] { return gate_->OpenWatches("w") == 1; }));
  ASSERT_TRUE(KeepOpen(Kind::kGrants, kWatcher));
  EXPECT_TRUE(Refused(Kind::kGrants, kWatcher, "watch_streams"));
  // Another tenant is not affected by w's quota.
  ASSERT_TRUE(KeepOpen(Kind::kGrants, kFree));
}

// (b) The rdmad-wide limit counts every caller's streams and applies to admins too, on every Watch* call.
TEST_F(LimitsRpcTest, TheRdmadWideWatchStreamsLimitRefusesAnAdminPastIt) {
  ASSERT_TRUE(KeepOpen(Kind::kGrants, kWatcher));  // a tenant's stream counts in the rdmad-wide total
  ASSERT_TRUE(KeepOpen(Kind::kAudit, kAdmin));
  ASSERT_TRUE(KeepOpen(Kind::kEvents, kAdmin));
  ASSERT_TRUE(KeepOpen(Kind::kGrants, kAdmin));
  ASSERT_EQ(gate_->OpenWatches(), kWatchLimit);
  EXPECT_TRUE(Refused(Kind::kGrants, kAdmin, "limit watch_streams of rdmad: limit 4, in use 4"));
  EXPECT_TRUE(Refused(Kind::kEvents, kAdmin, "limit watch_streams of rdmad"));
  EXPECT_TRUE(Refused(Kind::kAudit, kAdmin, "limit watch_streams of rdmad"));
  EXPECT_TRUE(Refused(Kind::kGrants, kFree, "limit watch_streams of rdmad"));

  streams_.back().Close();
  streams_.pop_back();
  EXPECT_TRUE(Eventually([&] { return gate_->OpenWatches() == kWatchLimit - 1; }));
  ASSERT_TRUE(KeepOpen(Kind::kAudit, kAdmin));
}

// (c) On a device that does not enforce window bounds, a bind pins a bounds region over the window's pages.
// Tenant p (pinned_bytes 16384) holds a 2-page region and a 1-page bind (12288 pinned): a 2-page bind
// would pass the quota and is refused before anything is pinned; a 1-page one still fits exactly.
TEST_F(LimitsRpcTest, BindMwPastPinnedBytesBecauseOfItsBoundsRegionIsRefusedAndPinsNothing) {
  const std::string pd = CreatePd(kPinner);
  const std::string mr = RegisterMr(kPinner, pd, 2 * kPage);
  const std::string first = AllocMw(kPinner, pd);
  const std::string second = AllocMw(kPinner, pd);
  ASSERT_TRUE(BindMw(kPinner, first, mr, kPage).ok());
  ASSERT_EQ(registry_->UsageOfPd(pd).value().mr_bytes, 3 * kPage);
  const fake::FakeLedger::Counts before = ledger_->live();
  const int reg_calls = ledger_->calls("reg_mr");

  grpc::Status s = BindMw(kPinner, second, mr, 2 * kPage);
  EXPECT_TRUE(ExhaustedNaming(s, "quota pinned_bytes of tenant p: limit 16384, in use 12288").ok())
      << s.error_code() << ": " << s.error_message();
  EXPECT_EQ(registry_->UsageOfPd(pd).value().mr_bytes, 3 * kPage);
  EXPECT_EQ(ledger_->live(), before);  // no bounds region registered
  EXPECT_EQ(ledger_->calls("reg_mr"), reg_calls);
  v1::GetMwRequest get;
  get.set_name(second);
  v1::MemoryWindow w;
  ASSERT_TRUE(v1::MemoryWindows::NewStub(channel_)->GetMw(As(kPinner).get(), get, &w).ok());
  EXPECT_FALSE(w.bound()) << w.DebugString();

  ASSERT_TRUE(BindMw(kPinner, second, mr, kPage).ok());  // 16384: exactly the quota
  EXPECT_EQ(registry_->UsageOfPd(pd).value().mr_bytes, 4 * kPage);
}

// (d) The rdmad-wide limit grants counts every caller's grants not yet ended; past it IssueGrant and
// IssueGrants are refused (admins too) and nothing is issued; an ended grant frees its place.
TEST_F(LimitsRpcTest, TheRdmadWideGrantsLimitRefusesIssueGrantPastItForEveryCaller) {
  const std::string tenant_mr = RegisterMr(kFree, CreatePd(kFree), 4 * kPage);
  const std::string admin_mr = RegisterMr(kAdmin, CreatePd(kAdmin), 4 * kPage);
  v1::IssuedGrant first, unused;
  ASSERT_TRUE(IssueGrant(kFree, tenant_mr, &first).ok());
  ASSERT_TRUE(IssueGrant(kFree, tenant_mr, &unused).ok());

  v1::IssueGrantsRequest batch;  // 2 more: the limit has room for 1, so none
  *batch.add_grants() = GrantReq(admin_mr);
  *batch.add_grants() = GrantReq(admin_mr);
  v1::IssueGrantsResponse issued;
  grpc::Status s = v1::Grants::NewStub(channel_)->IssueGrants(As(kAdmin).get(), batch, &issued);
  EXPECT_TRUE(ExhaustedNaming(s, "limit grants of rdmad: limit 3, in use 2; this call needs 2").ok())
      << s.error_code() << ": " << s.error_message();
  EXPECT_EQ(ListGrants(), 2u);

  ASSERT_TRUE(IssueGrant(kAdmin, admin_mr, &unused).ok());
  for (const char* who : {kFree, kAdmin}) {
    s = IssueGrant(who, who == kFree ? tenant_mr : admin_mr, &unused);
    EXPECT_TRUE(ExhaustedNaming(s, "limit grants of rdmad: limit 3, in use 3; this call needs 1").ok())
        << who << ": " << s.error_code() << ": " << s.error_message();
  }
  EXPECT_EQ(ListGrants(), 3u);
  EXPECT_EQ(tokens_->Outstanding(), 3u);

  v1::RevokeGrantRequest revoke;
  revoke.set_name(first.grant().name());
  v1::Grant ended;
  ASSERT_TRUE(v1::Grants::NewStub(channel_)->RevokeGrant(As(kFree).get(), revoke, &ended).ok());
  EXPECT_TRUE(IssueGrant(kAdmin, admin_mr, &unused).ok());
}

}  // namespace
}  // namespace rdmad
