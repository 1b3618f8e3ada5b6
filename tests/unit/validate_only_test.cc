// validate_only on RegisterMr, BindMw and IssueGrant (docs/api.md#validate-only) through a whole rdmad
// in-process (tests/support/daemon_fixture.h) over the fake fabric: a good request answers what the call
// would have made and leaves nothing (no fabric call, nothing listed, the PD's pinned bytes and the tenant's
// quotas as they were, no name used up, an audit record of the validation only); each bad request gets
// exactly the real call's error (code, message, ErrorDetail field), quota refusals included.
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "rdmad/v1/rdmad.grpc.pb.h"
#include "server/config.h"
#include "server/registry/registry.h"
#include "tests/support/daemon_fixture.h"
#include "tests/support/eventually.h"
#include "tests/unit/fake_fabric.h"

namespace rdmad {
namespace {

using ::testing::HasSubstr;

constexpr char kA[] = "spiffe://t/a";  // tenant a, with quotas
constexpr char kAdmin[] = "ops";

// The request field a failed call's ErrorDetail names, read as the client library reads it.
std::string FieldOf(const grpc::Status& s) { return client::Detail(client::FromGrpc(s)).field(); }

// The validation's failure is the real call's, exactly; and the real call did fail.
void ExpectSameError(const grpc::Status& validated, const grpc::Status& real, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_FALSE(real.ok()) << "the real call succeeded";
  EXPECT_EQ(validated.error_code(), real.error_code()) << validated.error_message() << " | " << real.error_message();
  EXPECT_EQ(validated.error_message(), real.error_message());
  EXPECT_EQ(FieldOf(validated), FieldOf(real));
}

class ValidateOnlyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Config> c = ParseConfig(R"({
      "admins": ["ops"],
      "tenants": [{"name": "a", "principals": ["spiffe://t/a"],
                   "quotas": {"mrs": 2, "pinned_bytes": 16384, "grants": 1, "tokens": 4}}]})");
    ASSERT_TRUE(c.ok()) << c.status();
    rdmad_.config().admins = c->admins;
    rdmad_.config().tenants = c->tenants;
    rdmad_.config().audit = rdmad_.dir().Sub("audit.log");
    ASSERT_TRUE(rdmad_.Start().ok());
    channel_ = rdmad_.Channel();
    registry_ = rdmad_.layers().registry;
    file_ = absl::StrCat("/dev/shm/rdmad-validate-only-", getpid());
    std::ofstream(file_) << std::string(4096, 'x');
  }
  void TearDown() override { std::remove(file_.c_str()); }

  std::unique_ptr<grpc::ClientContext> Ctx(const std::string& who) {
    return test::DaemonFixture::As(who.empty() ? kAdmin : who);
  }
  std::string CreatePd(const std::string& who = "") {
    v1::CreatePdRequest req;
    req.set_device("rxe0");
    v1::ProtectionDomain pd;
    grpc::Status s = v1::ProtectionDomains::NewStub(channel_)->CreatePd(Ctx(who).get(), req, &pd);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return pd.name();
  }
  static v1::RegisterMrRequest MrReq(const std::string& pd, uint64_t size,
                                     std::vector<v1::Access> access = {v1::LOCAL_WRITE, v1::REMOTE_READ,
                                                                       v1::MW_BIND}) {
    v1::RegisterMrRequest req;
    req.set_pd(pd);
    req.mutable_source()->mutable_anonymous()->set_size(size);
    for (v1::Access a : access) req.add_access(a);
    return req;
  }
  grpc::Status RegisterMr(v1::RegisterMrRequest req, bool validate, v1::MemoryRegion* out,
                          const std::string& who = "") {
    req.set_validate_only(validate);
    return v1::MemoryRegions::NewStub(channel_)->RegisterMr(Ctx(who).get(), req, out);
  }
  grpc::Status BindMw(v1::BindMwRequest req, bool validate, v1::MemoryWindow* out, const std::string& who = "") {
    req.set_validate_only(validate);
    return v1::MemoryWindows::NewStub(channel_)->BindMw(Ctx(who).get(), req, out);
  }
  grpc::Status IssueGrant(v1::IssueGrantRequest req, bool validate, v1::IssuedGrant* out, const std::string& who = "") {
    req.set_validate_only(validate);
    return v1::Grants::NewStub(channel_)->IssueGrant(Ctx(who).get(), req, out);
  }
  // Validates, then calls for real: the same error.
  template <typename Call>
  void SameError(Call call, const std::string& what) {
    const grpc::Status validated = call(true), real = call(false);
    ExpectSameError(validated, real, what);
  }
  // The tenant's use of `quota`, as GetTenant counts it.
  uint64_t Used(const std::string& quota) {
    v1::GetTenantRequest req;
    req.set_name("a");
    v1::Tenant t;
    EXPECT_TRUE(v1::Tenants::NewStub(channel_)->GetTenant(Ctx("").get(), req, &t).ok());
    for (const auto& q : t.quotas()) {
      if (q.quota() == quota) return q.used();
    }
    ADD_FAILURE() << "no quota " << quota;
    return 0;
  }
  uint64_t PinnedBytes(const std::string& pd) {
    absl::StatusOr<Registry::PdUsage> u = registry_->UsageOfPd(pd);
    EXPECT_TRUE(u.ok()) << u.status();
    return u.ok() ? u->mr_bytes : 0;
  }
  std::string AuditLog() {
    std::ifstream f(rdmad_.config().audit);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }

  test::DaemonFixture rdmad_;
  std::shared_ptr<grpc::Channel> channel_;
  Registry* registry_ = nullptr;
  std::string file_;
};

TEST_F(ValidateOnlyTest, RegisterMrValidatedLeavesNothing) {
  const std::string pd = CreatePd(kA);
  const std::vector<std::string> events = rdmad_.ledger()->events();
  v1::MemoryRegion would;
  grpc::Status s = RegisterMr(MrReq(pd, 8192), true, &would, kA);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(would.name(), "");
  EXPECT_EQ(would.addr(), 0u);
  EXPECT_EQ(would.lkey(), 0u);
  EXPECT_EQ(would.rkey(), 0u);
  EXPECT_EQ(would.pd(), pd);
  EXPECT_EQ(would.length(), 8192u);
  EXPECT_EQ(would.state(), v1::MR_READY);
  EXPECT_THAT(would.access(), ::testing::ElementsAre(v1::LOCAL_WRITE, v1::REMOTE_READ, v1::MW_BIND));
  EXPECT_TRUE(would.source().has_anonymous());

  // Nothing at the NIC, nothing listed, no pinned bytes, no quota used, no name used up.
  EXPECT_EQ(rdmad_.ledger()->events(), events);
  client::Client root = rdmad_.ClientAs(kAdmin);
  absl::StatusOr<v1::ListMrsResponse> listed = root.ListMrs();
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->mrs_size(), 0);
  EXPECT_EQ(PinnedBytes(pd), 0u);
  EXPECT_EQ(Used("mrs"), 0u);
  EXPECT_EQ(Used("pinned_bytes"), 0u);
  v1::MemoryRegion real;
  ASSERT_TRUE(RegisterMr(MrReq(pd, 8192), false, &real, kA).ok());
  EXPECT_EQ(real.name(), "mrs/1");
  EXPECT_NE(real.rkey(), 0u);
  EXPECT_EQ(PinnedBytes(pd), 8192u);

  // Audited as a validation, naming the PD; the real one names the region it made.
  EXPECT_TRUE(test::Eventually([&] {
    const std::string log = AuditLog();
    return log.find("\"method\":\"RegisterMr (validate_only)\"") != std::string::npos &&
           log.find("\"resource\":\"mrs/1\"") != std::string::npos;
  })) << AuditLog();
}

TEST_F(ValidateOnlyTest, RegisterMrRefusalsAreTheRealOnes) {
  const std::string pd = CreatePd(kA);
  auto reg = [&](v1::RegisterMrRequest req) {
    return [this, req](bool validate) {
      v1::MemoryRegion unused;
      return RegisterMr(req, validate, &unused, kA);
    };
  };
  SameError(reg(MrReq(pd, 4096, {v1::REMOTE_WRITE})), "REMOTE_WRITE without LOCAL_WRITE");
  SameError(reg(MrReq("pds/999", 4096)), "no such PD");
  SameError(reg(MrReq("bogus", 4096)), "a malformed PD");
  SameError(reg(MrReq(pd, 0)), "size 0");
  v1::RegisterMrRequest no_source = MrReq(pd, 4096);
  no_source.clear_source();
  SameError(reg(no_source), "no source");
  v1::RegisterMrRequest outside = MrReq(pd, 0, {v1::REMOTE_READ});
  outside.mutable_source()->mutable_file()->set_path("/etc/hostname");
  outside.mutable_source()->mutable_file()->set_length(1);
  // (Tenant a calls over TLS: it has no file-system identity, so every file is refused to it, alike.)
  SameError(reg(outside), "a file outside the roots");
  v1::RegisterMrRequest past = MrReq(pd, 0, {v1::REMOTE_READ});
  past.mutable_source()->mutable_file()->set_path(file_);
  past.mutable_source()->mutable_file()->set_offset(4000);
  past.mutable_source()->mutable_file()->set_length(200);
  SameError(reg(past), "past the file's end");
  v1::RegisterMrRequest missing = past;
  missing.mutable_source()->mutable_file()->set_path(file_ + ".missing");
  SameError(reg(missing), "no such file");
  SameError(reg(MrReq(pd, 20480)), "over pinned_bytes");

  // The mrs quota (2): two made for real, the third refused alike.
  v1::MemoryRegion made;
  ASSERT_TRUE(RegisterMr(MrReq(pd, 4096), false, &made, kA).ok());
  ASSERT_TRUE(RegisterMr(MrReq(pd, 4096), true, &made, kA).ok());  // would fit
  ASSERT_TRUE(RegisterMr(MrReq(pd, 4096), false, &made, kA).ok());
  SameError(reg(MrReq(pd, 4096)), "over the mrs quota");
  EXPECT_EQ(Used("mrs"), 2u);
  EXPECT_EQ(Used("pinned_bytes"), 8192u);
}

TEST_F(ValidateOnlyTest, BindMwValidatedLeavesTheWindowAsItWas) {
  const std::string pd = CreatePd(kA);
  v1::MemoryRegion mr;
  ASSERT_TRUE(RegisterMr(MrReq(pd, 8192), false, &mr, kA).ok());
  v1::AllocMwRequest alloc;
  alloc.set_pd(pd);
  alloc.set_type(v1::TYPE_1);
  v1::MemoryWindow mw;
  {
    ASSERT_TRUE(v1::MemoryWindows::NewStub(channel_)->AllocMw(Ctx("").get(), alloc, &mw).ok());
  }
  v1::BindMwRequest bind;
  bind.set_name(mw.name());
  bind.set_mr(mr.name());
  bind.set_offset(4096);
  bind.set_length(4096);
  bind.add_access(v1::REMOTE_READ);
  const std::vector<std::string> events = rdmad_.ledger()->events();
  const uint64_t pinned = PinnedBytes(pd);
  v1::MemoryWindow would;
  grpc::Status s = BindMw(bind, true, &would, kA);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(would.name(), mw.name());
  EXPECT_EQ(would.rkey(), 0u);
  EXPECT_TRUE(would.bound());
  EXPECT_EQ(would.binding().mr(), mr.name());
  EXPECT_EQ(would.binding().offset(), 4096u);
  EXPECT_EQ(would.binding().length(), 4096u);
  EXPECT_EQ(would.binding().addr(), mr.addr() + 4096);
  EXPECT_EQ(would.binding().remote_addr(), mr.addr() + 4096);
  // Nothing posted or pinned (rxe0 of the fake binds through a bounds region), the window unbound.
  EXPECT_EQ(rdmad_.ledger()->events(), events);
  EXPECT_EQ(PinnedBytes(pd), pinned);
  client::Client root = rdmad_.ClientAs(kAdmin);
  absl::StatusOr<v1::MemoryWindow> now = root.GetMw(mw.name());
  ASSERT_TRUE(now.ok());
  EXPECT_FALSE(now->bound());
  EXPECT_EQ(now->rkey(), mw.rkey());
  absl::StatusOr<v1::MemoryRegion> region = root.GetMr(mr.name());
  ASSERT_TRUE(region.ok());
  EXPECT_EQ(region->bound_windows(), 0u);

  // Bound for real, then a validation of another range leaves the binding as it is.
  v1::MemoryWindow bound;
  ASSERT_TRUE(BindMw(bind, false, &bound, kA).ok());
  EXPECT_NE(bound.rkey(), 0u);
  bind.set_offset(0);
  ASSERT_TRUE(BindMw(bind, true, &would, kA).ok());
  EXPECT_EQ(would.binding().offset(), 0u);
  now = root.GetMw(mw.name());
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->binding().offset(), 4096u);
  EXPECT_EQ(now->rkey(), bound.rkey());

  // Through the client library's MutateOptions too.
  client::MutateOptions validate;
  validate.validate_only = true;
  client::Client as_a(rdmad_.ChannelAs(kA));
  absl::StatusOr<v1::MemoryWindow> via = as_a.BindMw(bind, validate);
  ASSERT_TRUE(via.ok()) << via.status();
  EXPECT_EQ(via->rkey(), 0u);
}

TEST_F(ValidateOnlyTest, BindMwRefusalsAreTheRealOnes) {
  const std::string pd = CreatePd(kA), other_pd = CreatePd(kA);
  v1::MemoryRegion mr, no_bind, other;
  ASSERT_TRUE(RegisterMr(MrReq(pd, 8192), false, &mr, kA).ok());
  ASSERT_TRUE(RegisterMr(MrReq(other_pd, 4096, {v1::LOCAL_WRITE, v1::REMOTE_READ}), false, &no_bind, kA).ok());
  auto mws = v1::MemoryWindows::NewStub(channel_);
  auto alloc = [&](const std::string& in, v1::MwType type) {
    v1::AllocMwRequest req;
    req.set_pd(in);
    req.set_type(type);
    v1::MemoryWindow w;
    EXPECT_TRUE(mws->AllocMw(Ctx("").get(), req, &w).ok());
    return w.name();
  };
  const std::string t1 = alloc(pd, v1::TYPE_1), t2 = alloc(pd, v1::TYPE_2), t1_other = alloc(other_pd, v1::TYPE_1);
  v1::CreateQpRequest cq;
  cq.set_pd(pd);
  v1::QueuePair qp;
  {
    ASSERT_TRUE(v1::QueuePairs::NewStub(channel_)->CreateQp(Ctx("").get(), cq, &qp).ok());
  }
  auto bind = [&](const std::string& w, const std::string& region, uint64_t offset, uint64_t length,
                  std::vector<v1::Access> access = {v1::REMOTE_READ}) {
    v1::BindMwRequest req;
    req.set_name(w);
    req.set_mr(region);
    req.set_offset(offset);
    req.set_length(length);
    for (v1::Access a : access) req.add_access(a);
    return req;
  };
  auto call = [&](v1::BindMwRequest req) {
    return [this, req](bool validate) {
      v1::MemoryWindow unused;
      return BindMw(req, validate, &unused, kA);
    };
  };
  SameError(call(bind(t1, mr.name(), 0, 0)), "length 0");
  SameError(call(bind(t1, mr.name(), 4096, 8192)), "past the region");
  SameError(call(bind(t1, mr.name(), 0, 4096, {v1::LOCAL_WRITE})), "a local access");
  SameError(call(bind("mws/999", mr.name(), 0, 4096)), "no such window");
  SameError(call(bind(t1, "mrs/999", 0, 4096)), "no such region");
  SameError(call(bind(t1_other, no_bind.name(), 0, 4096)), "a region without MW_BIND");
  SameError(call(bind(t1, no_bind.name(), 0, 4096)), "a region of another PD");
  SameError(call(bind(t2, mr.name(), 0, 4096)), "type 2 without a QP");
  v1::BindMwRequest on_qp = bind(t2, mr.name(), 0, 4096);
  on_qp.set_qp(qp.name());
  SameError(call(on_qp), "type 2 on a QP not connected");
  v1::BindMwRequest zero_based = bind(t1, mr.name(), 0, 4096);
  zero_based.set_zero_based(true);
  SameError(call(zero_based), "zero-based type 1");
  // The bounds region's pages against the tenant's pinned_bytes (16384): 12288 registered, 8192 more.
  SameError(call(bind(t1, mr.name(), 0, 8192)), "over pinned_bytes");
  EXPECT_EQ(Used("pinned_bytes"), 12288u);
}

TEST_F(ValidateOnlyTest, IssueGrantValidatedIssuesNothing) {
  const std::string pd = CreatePd(kA);
  v1::MemoryRegion mr;
  ASSERT_TRUE(RegisterMr(MrReq(pd, 8192), false, &mr, kA).ok());
  v1::IssueGrantRequest req;
  req.set_mr(mr.name());
  req.set_offset(4096);
  req.set_length(4096);
  req.set_ttl_ms(30000);
  req.set_principal("reader");
  const std::vector<std::string> events = rdmad_.ledger()->events();
  v1::IssuedGrant would;
  grpc::Status s = IssueGrant(req, true, &would, kA);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(would.grant().name(), "");
  EXPECT_EQ(would.grant().token(), "");
  EXPECT_EQ(would.token(), "");
  EXPECT_GE(would.endpoints_size(), 1);
  EXPECT_EQ(would.grant().mr(), mr.name());
  EXPECT_EQ(would.grant().pd(), pd);
  EXPECT_EQ(would.grant().offset(), 4096u);
  EXPECT_EQ(would.grant().principal(), "reader");
  EXPECT_EQ(would.grant().state(), v1::GRANT_ISSUED);
  EXPECT_NE(would.grant().scope(), v1::GRANT_SCOPE_UNSPECIFIED);
  EXPECT_EQ(would.grant().expire_time_unix_nanos() - would.grant().issue_time_unix_nanos(), 30000 * 1000000LL);
  EXPECT_EQ(rdmad_.ledger()->events(), events);
  client::Client root = rdmad_.ClientAs(kAdmin);
  absl::StatusOr<v1::ListGrantsResponse> listed = root.ListGrants("", "", /*include_ended=*/true);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->grants_size(), 0);
  EXPECT_EQ(Used("grants"), 0u);
  EXPECT_EQ(Used("tokens"), 0u);

  // The real one: the first grant name, a token; then the quota (1) refuses the next alike.
  v1::IssuedGrant real;
  ASSERT_TRUE(IssueGrant(req, false, &real, kA).ok());
  EXPECT_EQ(real.grant().name(), "grants/1");
  EXPECT_FALSE(real.token().empty());
  SameError([&](bool validate) {
    v1::IssuedGrant unused;
    return IssueGrant(req, validate, &unused, kA);
  }, "over the grants quota");

  // Not in a batch.
  v1::IssueGrantsRequest batch;
  *batch.add_grants() = req;
  batch.mutable_grants(0)->set_validate_only(true);
  v1::IssueGrantsResponse unused;
  s = v1::Grants::NewStub(channel_)->IssueGrants(Ctx("").get(), batch, &unused);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(FieldOf(s), "grants[0].validate_only");
}

TEST_F(ValidateOnlyTest, IssueGrantRefusalsAreTheRealOnes) {
  const std::string pd = CreatePd();
  v1::MemoryRegion mr, no_bind;
  ASSERT_TRUE(RegisterMr(MrReq(pd, 8192), false, &mr).ok());
  ASSERT_TRUE(RegisterMr(MrReq(pd, 4096, {v1::LOCAL_WRITE, v1::REMOTE_READ}), false, &no_bind).ok());
  auto grant = [&](const std::string& region, uint64_t offset, uint64_t length) {
    v1::IssueGrantRequest req;
    req.set_mr(region);
    req.set_offset(offset);
    req.set_length(length);
    req.set_principal("reader");
    return req;
  };
  auto call = [&](v1::IssueGrantRequest req) {
    return [this, req](bool validate) {
      v1::IssuedGrant unused;
      return IssueGrant(req, validate, &unused);
    };
  };
  SameError(call(grant(mr.name(), 0, 0)), "length 0");
  SameError(call(grant(mr.name(), 4096, 8192)), "past the region");
  SameError(call(grant("mrs/999", 0, 4096)), "no such region");
  SameError(call(grant(no_bind.name(), 0, 4096)), "a region without MW_BIND");
  v1::IssueGrantRequest nobody = grant(mr.name(), 0, 4096);
  nobody.clear_principal();
  SameError(call(nobody), "no principal");
  v1::IssueGrantRequest long_lease = grant(mr.name(), 0, 4096);
  long_lease.set_ttl_ms(4000000000u);
  SameError(call(long_lease), "a lease past max_grant_ttl");
  v1::IssueGrantRequest write = grant(mr.name(), 0, 4096);
  write.add_access(v1::REMOTE_ATOMIC);
  SameError(call(write), "an access a grant does not give");
  absl::StatusOr<v1::ListGrantsResponse> listed = rdmad_.ClientAs(kAdmin).ListGrants("", "", true);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->grants_size(), 0);
}

}  // namespace
}  // namespace rdmad
