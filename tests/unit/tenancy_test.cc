// Tenancy through a whole rdmad in-process (tests/support/daemon_fixture.h; server/rpc/, server/tenancy/gate.h)
// over the fake fabric and the fake rdma_cm: two tenants and an admin, the caller named per call by the
// fixture (the identity layer, server/auth/, is tested on its own). Tenant b gets NOT_FOUND, with the message
// of a missing resource, for every one of a's resources in Get, List, Watch and every mutation; quotas stop creations
// exactly at the limit with nothing half created; the per-connection rate limit; unknown principals;
// the audit log records each mutation.
#include <stdlib.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "rdmad/v1/rdmad.grpc.pb.h"
#include "server/audit/audit_log.h"
#include "server/auth/policy.h"
#include "server/cm/token.h"
#include "server/common/sync.h"
#include "server/config.h"
#include "server/daemon.h"
#include "server/registry/registry.h"
#include "server/tenancy/gate.h"
#include "tests/support/daemon_fixture.h"
#include "tests/support/eventually.h"
#include "tests/unit/fake_client.h"
#include "tests/unit/fake_cm.h"
#include "tests/unit/fake_fabric.h"

namespace rdmad {
namespace tenancy {
class GateTestPeer {
 public:
  static Mutex& BookLock(Gate& gate, const std::string& tenant) { return gate.BookOf(tenant).mu; }
};
}  // namespace tenancy

namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kAddr[] = "10.0.2.15";

Config TwoTenants() {
  absl::StatusOr<Config> c = ParseConfig(R"({
    "admins": ["ops"],
    "tenants": [
      {"name": "a", "principals": ["spiffe://t/a"],
       "quotas": {"mrs": 2, "pinned_bytes": 12288, "mws": 1, "qps": 1, "cm_ids": 1, "grants": 1, "tokens": 2}},
      {"name": "b", "principals": ["spiffe://t/b"], "quotas": {"rpc_per_second": 1, "rpc_burst": 3}},
      {"name": "c", "principals": ["spiffe://t/c"]},
      {"name": "d", "principals": ["spiffe://t/d"], "quotas": {"connections": 1}},
      {"name": "e", "principals": ["spiffe://t/e"], "devices": ["rxe9"], "quotas": {"channels": 1, "watch_streams": 1}},
      {"name": "f", "principals": ["spiffe://t/f"], "quotas": {"pds": 1}}
    ]})");
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

struct Record {
  std::string principal, tenant, method, resource;
  absl::StatusCode code;
};

class TenancyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const Config tenants = TwoTenants();
    rdmad_.config().admins = tenants.admins;
    rdmad_.config().tenants = tenants.tenants;
    rdmad_.config().audit = rdmad_.dir().Sub("audit.log");
    ASSERT_TRUE(rdmad_.Start().ok());
    ledger_ = rdmad_.ledger();
    fake_cm_ = rdmad_.cm();
    device_ = rdmad_.device();
    const Daemon::Layers layers = rdmad_.layers();
    registry_ = layers.registry;
    policy_ = layers.policy;
    gate_ = layers.gate;
    channel_ = rdmad_.Channel();
    // The calls' audit records (not the data plane's or the grants' ends), as the audit log publishes them:
    // on the recording call's thread, before that call answers.
    audit_watcher_ = layers.audit->hub().Subscribe(audit::AuditFilter(), 0);
    audit_watcher_->set_wake([this] {
      MutexLock lock(&audit_mu_);
      while (std::optional<v1::AuditRecord> r = audit_watcher_->Next()) {
        if (absl::StartsWith(r->method(), "data-plane") || r->method() == "grant ended") continue;
        audit_.push_back({r->principal(), r->tenant(), r->method(), r->resource(), CodeNamed(r->code())});
      }
    });
  }
  void TearDown() override {
    rdmad_.Stop();
    audit_watcher_.reset();
    EXPECT_THAT(ledger_->violations(), IsEmpty());
    fake::FakeLedger::Counts c = ledger_->live();
    EXPECT_EQ(c.mrs + c.mws + c.qps, 0);
  }
  // "NOT_FOUND" -> absl::StatusCode::kNotFound.
  static absl::StatusCode CodeNamed(const std::string& name) {
    for (int c = 0; c <= static_cast<int>(absl::StatusCode::kUnauthenticated); ++c) {
      if (absl::StatusCodeToString(static_cast<absl::StatusCode>(c)) == name) return static_cast<absl::StatusCode>(c);
    }
    ADD_FAILURE() << "an audit record's code " << name;
    return absl::StatusCode::kUnknown;
  }

  // A context as `principal` (a fresh connection name each time unless given).
  std::unique_ptr<grpc::ClientContext> As(const std::string& principal, const std::string& connection = "") {
    return test::DaemonFixture::As(principal, connection.empty() ? "conn-" + std::to_string(++conns_) : connection);
  }

  std::string CreatePd(const std::string& who) {
    v1::CreatePdRequest req;
    req.set_device("rxe0");
    v1::ProtectionDomain pd;
    grpc::Status s = v1::ProtectionDomains::NewStub(channel_)->CreatePd(As(who).get(), req, &pd);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return pd.name();
  }
  // A grant of the first 4 KiB of `mr` to "reader".
  static v1::IssueGrantRequest GrantReq(const std::string& mr) {
    v1::IssueGrantRequest req;
    req.set_mr(mr);
    req.set_length(4096);
    req.set_principal("reader");
    return req;
  }
  grpc::Status RegisterMr(const std::string& who, const std::string& pd, uint64_t size, v1::MemoryRegion* mr) {
    v1::RegisterMrRequest req;
    req.set_pd(pd);
    req.mutable_source()->mutable_anonymous()->set_size(size);
    for (v1::Access a : {v1::LOCAL_WRITE, v1::REMOTE_READ, v1::MW_BIND}) req.add_access(a);
    return v1::MemoryRegions::NewStub(channel_)->RegisterMr(As(who).get(), req, mr);
  }

  test::DaemonFixture rdmad_;
  std::shared_ptr<fake::FakeLedger> ledger_;
  fake::FakeCm* fake_cm_ = nullptr;
  fabric::Device* device_ = nullptr;
  Registry* registry_ = nullptr;
  auth::Policy* policy_ = nullptr;
  tenancy::Gate* gate_ = nullptr;
  std::shared_ptr<grpc::Channel> channel_;
  std::shared_ptr<audit::AuditWatcher> audit_watcher_;
  int conns_ = 0;
  Mutex audit_mu_;
  std::vector<Record> audit_;
};

constexpr char kA[] = "spiffe://t/a";
constexpr char kB[] = "spiffe://t/c";  // c: no quotas, so b's rate limit does not get in the way

// What a caller gets for a resource that does not exist at all: b must get exactly this shape.
void ExpectHidden(const grpc::Status& s, const std::string& field, const std::string& name) {
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << field << " " << name << ": " << s.error_message();
  EXPECT_EQ(s.error_message(), field + ": " + name + " does not exist") << s.error_message();
}

TEST_F(TenancyTest, AnotherTenantsResourcesAreNotFoundEverywhere) {
  const std::string pd = CreatePd(kA);
  v1::MemoryRegion mr;
  ASSERT_TRUE(RegisterMr(kA, pd, 8192, &mr).ok());
  auto mws = v1::MemoryWindows::NewStub(channel_);
  auto mrs = v1::MemoryRegions::NewStub(channel_);
  auto pds = v1::ProtectionDomains::NewStub(channel_);
  auto qps = v1::QueuePairs::NewStub(channel_);
  v1::AllocMwRequest alloc;
  alloc.set_pd(pd);
  alloc.set_type(v1::TYPE_2);
  v1::MemoryWindow mw;
  ASSERT_TRUE(mws->AllocMw(As(kA).get(), alloc, &mw).ok());
  v1::CreateQpRequest cq;
  cq.set_pd(pd);
  v1::QueuePair qp;
  ASSERT_TRUE(qps->CreateQp(As(kA).get(), cq, &qp).ok());

  // A resource that never existed, for comparison: the same shape.
  v1::GetPdRequest missing;
  missing.set_name("pds/999");
  v1::ProtectionDomain unused_pd;
  ExpectHidden(pds->GetPd(As(kB).get(), missing, &unused_pd), "name", "pds/999");

  v1::GetPdRequest gp;
  gp.set_name(pd);
  ExpectHidden(pds->GetPd(As(kB).get(), gp, &unused_pd), "name", pd);
  v1::GetMrRequest gm;
  gm.set_name(mr.name());
  v1::MemoryRegion unused_mr;
  ExpectHidden(mrs->GetMr(As(kB).get(), gm, &unused_mr), "name", mr.name());
  v1::GetMwRequest gw;
  gw.set_name(mw.name());
  v1::MemoryWindow unused_mw;
  ExpectHidden(mws->GetMw(As(kB).get(), gw, &unused_mw), "name", mw.name());
  v1::GetQpRequest gq;
  gq.set_name(qp.name());
  v1::QueuePair unused_qp;
  ExpectHidden(qps->GetQp(As(kB).get(), gq, &unused_qp), "name", qp.name());

  // Lists: nothing of a's.
  v1::ListPdsResponse lp;
  ASSERT_TRUE(pds->ListPds(As(kB).get(), v1::ListPdsRequest(), &lp).ok());
  EXPECT_EQ(lp.pds_size(), 0);
  v1::ListMrsResponse lm;
  ASSERT_TRUE(mrs->ListMrs(As(kB).get(), v1::ListMrsRequest(), &lm).ok());
  EXPECT_EQ(lm.mrs_size(), 0);
  v1::ListMrsRequest lm_pd;
  lm_pd.set_pd(pd);
  ExpectHidden(mrs->ListMrs(As(kB).get(), lm_pd, &lm), "pd", pd);
  v1::ListMwsResponse lw;
  ASSERT_TRUE(mws->ListMws(As(kB).get(), v1::ListMwsRequest(), &lw).ok());
  EXPECT_EQ(lw.mws_size(), 0);
  v1::ListQpsResponse lq;
  ASSERT_TRUE(qps->ListQps(As(kB).get(), v1::ListQpsRequest(), &lq).ok());
  EXPECT_EQ(lq.qps_size(), 0);

  // Mutations: create in a's PD, bind on a's window or with a's MR or QP, remove anything of a's.
  v1::MemoryRegion into;
  ExpectHidden(RegisterMr(kB, pd, 4096, &into), "pd", pd);
  ExpectHidden(mws->AllocMw(As(kB).get(), alloc, &unused_mw), "pd", pd);
  ExpectHidden(qps->CreateQp(As(kB).get(), cq, &unused_qp), "pd", pd);
  v1::BindMwRequest bind;
  bind.set_name(mw.name());
  bind.set_mr(mr.name());
  bind.set_qp(qp.name());
  bind.set_length(4096);
  bind.add_access(v1::REMOTE_READ);
  ExpectHidden(mws->BindMw(As(kB).get(), bind, &unused_mw), "name", mw.name());
  // b's own window, a's MR: still hidden.
  const std::string pd_b = CreatePd(kB);
  v1::AllocMwRequest alloc_b = alloc;
  alloc_b.set_pd(pd_b);
  v1::MemoryWindow mw_b;
  ASSERT_TRUE(mws->AllocMw(As(kB).get(), alloc_b, &mw_b).ok());
  bind.set_name(mw_b.name());
  ExpectHidden(mws->BindMw(As(kB).get(), bind, &unused_mw), "mr", mr.name());
  v1::InvalidateMwRequest inv;
  inv.set_name(mw.name());
  ExpectHidden(mws->InvalidateMw(As(kB).get(), inv, &unused_mw), "name", mw.name());
  v1::DeallocMwRequest dealloc;
  dealloc.set_name(mw.name());
  v1::DeallocMwResponse unused_dealloc;
  ExpectHidden(mws->DeallocMw(As(kB).get(), dealloc, &unused_dealloc), "name", mw.name());
  v1::DeregisterMrRequest dereg;
  dereg.set_name(mr.name());
  v1::DeregisterMrResponse unused_dereg;
  ExpectHidden(mrs->DeregisterMr(As(kB).get(), dereg, &unused_dereg), "name", mr.name());
  v1::ReregisterMrRequest rereg;
  rereg.set_name(mr.name());
  rereg.add_flags(v1::CHANGE_ACCESS);
  rereg.add_access(v1::LOCAL_WRITE);
  v1::ReregisterMrResponse unused_rereg;
  ExpectHidden(mrs->ReregisterMr(As(kB).get(), rereg, &unused_rereg), "name", mr.name());
  v1::DeleteQpRequest dq;
  dq.set_name(qp.name());
  v1::DeleteQpResponse unused_dq;
  ExpectHidden(qps->DeleteQp(As(kB).get(), dq, &unused_dq), "name", qp.name());
  v1::DeletePdRequest dp;
  dp.set_name(pd);
  dp.set_cascade(true);
  v1::DeletePdResponse unused_dp;
  ExpectHidden(pds->DeletePd(As(kB).get(), dp, &unused_dp), "name", pd);

  // All of a's still there; the admin sees both tenants' PDs.
  v1::ListPdsResponse all;
  ASSERT_TRUE(pds->ListPds(As("ops").get(), v1::ListPdsRequest(), &all).ok());
  EXPECT_EQ(all.pds_size(), 2);
  ASSERT_TRUE(mrs->GetMr(As(kA).get(), gm, &unused_mr).ok());

  // Cleanup by the admin.
  for (const std::string& p : {pd, pd_b}) {
    v1::DeletePdRequest d;
    d.set_name(p);
    d.set_cascade(true);
    grpc::Status s = pds->DeletePd(As("ops").get(), d, &unused_dp);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
}

TEST_F(TenancyTest, GrantsChannelsAndIdsOfAnotherTenantAreNotFound) {
  const std::string pd = CreatePd(kA);
  v1::MemoryRegion mr;
  ASSERT_TRUE(RegisterMr(kA, pd, 8192, &mr).ok());
  auto grants = v1::Grants::NewStub(channel_);
  v1::IssueGrantRequest issue = GrantReq(mr.name());
  v1::IssuedGrant issued;
  ASSERT_TRUE(grants->IssueGrant(As(kA).get(), issue, &issued).ok());
  const std::string g = issued.grant().name();

  v1::IssuedGrant unused;
  ExpectHidden(grants->IssueGrant(As(kB).get(), issue, &unused), "mr", mr.name());
  v1::IssueGrantsRequest batch;
  *batch.add_grants() = issue;
  v1::IssueGrantsResponse unused_batch;
  ExpectHidden(grants->IssueGrants(As(kB).get(), batch, &unused_batch), "grants[0].mr", mr.name());
  v1::GetGrantRequest get;
  get.set_name(g);
  v1::Grant grant;
  grpc::Status s = grants->GetGrant(As(kB).get(), get, &grant);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "name: " + g + " does not exist (or ended long ago)");
  v1::RenewGrantRequest renew;
  renew.set_name(g);
  EXPECT_EQ(grants->RenewGrant(As(kB).get(), renew, &grant).error_code(), grpc::StatusCode::NOT_FOUND);
  v1::RevokeGrantRequest revoke;
  revoke.set_name(g);
  EXPECT_EQ(grants->RevokeGrant(As(kB).get(), revoke, &grant).error_code(), grpc::StatusCode::NOT_FOUND);
  v1::ListGrantsResponse list;
  ASSERT_TRUE(grants->ListGrants(As(kB).get(), v1::ListGrantsRequest(), &list).ok());
  EXPECT_EQ(list.grants_size(), 0);
  v1::WatchGrantsRequest watch;
  watch.set_mr(mr.name());
  auto ctx = As(kB);
  auto reader = grants->WatchGrants(ctx.get(), watch);
  v1::GrantEvent ev;
  EXPECT_FALSE(reader->Read(&ev));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);

  // rdma_cm: a's channel and id.
  auto channels = v1::EventChannels::NewStub(channel_);
  v1::EventChannel ch;
  ASSERT_TRUE(channels->CreateChannel(As(kA).get(), v1::CreateChannelRequest(), &ch).ok());
  v1::GetChannelRequest gc;
  gc.set_name(ch.name());
  v1::EventChannel unused_ch;
  ExpectHidden(channels->GetChannel(As(kB).get(), gc, &unused_ch), "name", ch.name());
  auto ids = v1::CmIds::NewStub(channel_);
  v1::CreateCmIdRequest create;
  create.set_pd(pd);
  create.set_channel(ch.name());
  v1::CmId id;
  ASSERT_TRUE(ids->CreateCmId(As(kA).get(), create, &id).ok());
  const std::string pd_b = CreatePd(kB);
  create.set_pd(pd_b);
  v1::CmId unused_id;
  ExpectHidden(ids->CreateCmId(As(kB).get(), create, &unused_id), "channel", ch.name());
  v1::GetCmIdRequest gi;
  gi.set_name(id.name());
  ExpectHidden(ids->GetCmId(As(kB).get(), gi, &unused_id), "name", id.name());
  v1::ListenRequest listen;
  listen.set_name(id.name());
  ExpectHidden(ids->Listen(As(kB).get(), listen, &unused_id), "name", id.name());
  v1::DeleteCmIdRequest del;
  del.set_name(id.name());
  v1::DeleteCmIdResponse unused_del;
  ExpectHidden(ids->DeleteCmId(As(kB).get(), del, &unused_del), "name", id.name());
  v1::ListCmIdsResponse li;
  ASSERT_TRUE(ids->ListCmIds(As(kB).get(), v1::ListCmIdsRequest(), &li).ok());
  EXPECT_EQ(li.cm_ids_size(), 0);
  v1::WatchEventsRequest we;
  we.set_cm_id(id.name());
  auto wctx = As(kB);
  auto events = ids->WatchEvents(wctx.get(), we);
  v1::CmEvent cev;
  EXPECT_FALSE(events->Read(&cev));
  EXPECT_EQ(events->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
  v1::IssueConnectTokenRequest token;
  token.set_pd(pd);
  v1::ConnectToken unused_token;
  ExpectHidden(v1::ConnectTokens::NewStub(channel_)->IssueConnectToken(As(kB).get(), token, &unused_token), "pd", pd);

  // a still owns everything: it deletes the id, then the admin the PDs.
  ASSERT_TRUE(ids->DeleteCmId(As(kA).get(), del, &unused_del).ok());
  auto pds = v1::ProtectionDomains::NewStub(channel_);
  for (const std::string& p : {pd, pd_b}) {
    v1::DeletePdRequest d;
    d.set_name(p);
    d.set_cascade(true);
    d.set_revoke_grants(true);
    v1::DeletePdResponse r;
    grpc::Status ds = pds->DeletePd(As("ops").get(), d, &r);
    EXPECT_TRUE(ds.ok()) << ds.error_message();
  }
}

TEST_F(TenancyTest, QuotasStopExactlyAtTheLimitAndNothingIsHalfCreated) {
  const std::string pd = CreatePd(kA);
  v1::MemoryRegion mr1, mr2, mr3;
  ASSERT_TRUE(RegisterMr(kA, pd, 4096, &mr1).ok());
  // pinned_bytes 12288: 8192 more fits exactly; then mrs (2) is full.
  ASSERT_TRUE(RegisterMr(kA, pd, 8192, &mr2).ok());
  grpc::Status s = RegisterMr(kA, pd, 4096, &mr3);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("quota mrs of tenant a: limit 2, in use 2"));
  // At its quota, a name of nothing and another tenant's PD still answer alike: NOT_FOUND before the quota.
  ExpectHidden(RegisterMr(kA, "pds/999", 4096, &mr3), "pd", "pds/999");
  const std::string pd_c = CreatePd(kB);
  ExpectHidden(RegisterMr(kA, pd_c, 4096, &mr3), "pd", pd_c);
  auto mrs = v1::MemoryRegions::NewStub(channel_);
  v1::DeregisterMrRequest dereg;
  dereg.set_name(mr1.name());
  v1::DeregisterMrResponse unused;
  ASSERT_TRUE(mrs->DeregisterMr(As(kA).get(), dereg, &unused).ok());
  s = RegisterMr(kA, pd, 8192, &mr3);  // 8192 + 8192 > 12288
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("quota pinned_bytes of tenant a: limit 12288, in use 8192"));
  ASSERT_TRUE(RegisterMr(kA, pd, 4096, &mr3).ok());  // exactly at the limit
  v1::ListMrsResponse list;
  ASSERT_TRUE(mrs->ListMrs(As(kA).get(), v1::ListMrsRequest(), &list).ok());
  EXPECT_EQ(list.mrs_size(), 2);

  auto mws = v1::MemoryWindows::NewStub(channel_);
  v1::AllocMwRequest alloc;
  alloc.set_pd(pd);
  alloc.set_type(v1::TYPE_2);
  v1::MemoryWindow mw;
  ASSERT_TRUE(mws->AllocMw(As(kA).get(), alloc, &mw).ok());
  s = mws->AllocMw(As(kA).get(), alloc, &mw);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("quota mws of tenant a: limit 1, in use 1"));

  auto qps = v1::QueuePairs::NewStub(channel_);
  v1::CreateQpRequest cq;
  cq.set_pd(pd);
  v1::QueuePair qp;
  ASSERT_TRUE(qps->CreateQp(As(kA).get(), cq, &qp).ok());
  EXPECT_EQ(qps->CreateQp(As(kA).get(), cq, &qp).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);

  auto grants = v1::Grants::NewStub(channel_);
  v1::IssueGrantRequest issue = GrantReq(mr2.name());
  v1::IssuedGrant issued;
  ASSERT_TRUE(grants->IssueGrant(As(kA).get(), issue, &issued).ok());
  s = grants->IssueGrant(As(kA).get(), issue, &issued);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("quota grants of tenant a: limit 1, in use 1"));
  // tokens: 2, the grant's token is one of them.
  v1::IssueConnectTokenRequest token;
  token.set_pd(pd);
  v1::ConnectToken t;
  ASSERT_TRUE(v1::ConnectTokens::NewStub(channel_)->IssueConnectToken(As(kA).get(), token, &t).ok());
  s = v1::ConnectTokens::NewStub(channel_)->IssueConnectToken(As(kA).get(), token, &t);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("quota tokens of tenant a: limit 2, in use 2"));

  // The usage as the tenant sees it.
  v1::GetTenantRequest gt;
  gt.set_name("a");
  v1::Tenant tenant;
  ASSERT_TRUE(v1::Tenants::NewStub(channel_)->GetTenant(As(kA).get(), gt, &tenant).ok());
  std::map<std::string, std::pair<uint64_t, uint64_t>> use;
  for (const auto& q : tenant.quotas()) use[q.quota()] = {q.used(), q.limit()};
  EXPECT_EQ(use["mrs"], std::make_pair(uint64_t{2}, uint64_t{2}));
  EXPECT_EQ(use["pinned_bytes"], std::make_pair(uint64_t{12288}, uint64_t{12288}));
  EXPECT_EQ(use["mws"], std::make_pair(uint64_t{1}, uint64_t{1}));
  EXPECT_EQ(use["qps"], std::make_pair(uint64_t{1}, uint64_t{1}));
  EXPECT_EQ(use["grants"], std::make_pair(uint64_t{1}, uint64_t{1}));
  EXPECT_EQ(use["tokens"], std::make_pair(uint64_t{2}, uint64_t{2}));
  EXPECT_EQ(tenant.pds_size(), 1);
  // Another tenant does not see a at all.
  EXPECT_EQ(v1::Tenants::NewStub(channel_)->GetTenant(As(kB).get(), gt, &tenant).error_code(),
            grpc::StatusCode::NOT_FOUND);
  v1::ListTenantsResponse lt;
  ASSERT_TRUE(v1::Tenants::NewStub(channel_)->ListTenants(As(kB).get(), v1::ListTenantsRequest(), &lt).ok());
  ASSERT_EQ(lt.tenants_size(), 1);
  EXPECT_EQ(lt.tenants(0).name(), "tenants/c");
  ASSERT_TRUE(v1::Tenants::NewStub(channel_)->ListTenants(As("ops").get(), v1::ListTenantsRequest(), &lt).ok());
  EXPECT_EQ(lt.tenants_size(), 6);

  v1::DeletePdRequest d;
  d.set_name(pd);
  d.set_cascade(true);
  d.set_revoke_grants(true);
  v1::DeletePdResponse r;
  s = v1::ProtectionDomains::NewStub(channel_)->DeletePd(As(kA).get(), d, &r);
  EXPECT_TRUE(s.ok()) << s.error_message();
}

// ReregisterMr with revoke_grants checks the request before it revokes anything: a request the registry
// refuses costs no grant (revoke only after validating).
TEST_F(TenancyTest, ARefusedReregistrationDoesNotRevokeTheGrantsItAskedToRevoke) {
  const std::string pd = CreatePd(kB);
  v1::MemoryRegion mr;
  ASSERT_TRUE(RegisterMr(kB, pd, 8192, &mr).ok());
  auto grants = v1::Grants::NewStub(channel_);
  v1::IssueGrantRequest issue = GrantReq(mr.name());
  v1::IssuedGrant issued;
  ASSERT_TRUE(grants->IssueGrant(As(kB).get(), issue, &issued).ok());
  auto get_state = [&] {
    v1::GetGrantRequest get;
    get.set_name(issued.grant().name());
    v1::Grant g;
    EXPECT_TRUE(grants->GetGrant(As(kB).get(), get, &g).ok());
    return g;
  };

  auto mrs = v1::MemoryRegions::NewStub(channel_);
  v1::ReregisterMrRequest bad;
  bad.set_name(mr.name());
  bad.add_flags(v1::CHANGE_ACCESS);
  bad.add_access(v1::REMOTE_WRITE);  // without LOCAL_WRITE: refused by ibv_reg_mr(3)'s rule
  bad.set_revoke_grants(true);
  v1::ReregisterMrResponse r;
  grpc::Status s = mrs->ReregisterMr(As(kB).get(), bad, &r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("access"));
  EXPECT_EQ(get_state().state(), v1::GRANT_ISSUED);  // the grant survived the refused request
  v1::ReregisterMrRequest other_pd = bad;
  other_pd.clear_flags();
  other_pd.clear_access();
  other_pd.add_flags(v1::CHANGE_PD);
  other_pd.set_pd("pds/999");
  EXPECT_EQ(mrs->ReregisterMr(As(kB).get(), other_pd, &r).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(get_state().state(), v1::GRANT_ISSUED);
  // The same for a removal the registry would refuse anyway: DeletePd without a cascade of a PD that
  // holds a region, DeregisterMr of a region with a window of the caller's own bound to it.
  v1::DeletePdRequest del;
  del.set_name(pd);
  del.set_revoke_grants(true);
  v1::DeletePdResponse deleted;
  s = v1::ProtectionDomains::NewStub(channel_)->DeletePd(As(kB).get(), del, &deleted);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_EQ(get_state().state(), v1::GRANT_ISSUED);
  auto mws = v1::MemoryWindows::NewStub(channel_);
  v1::AllocMwRequest alloc;
  alloc.set_pd(pd);
  alloc.set_type(v1::TYPE_1);
  v1::MemoryWindow mw;
  ASSERT_TRUE(mws->AllocMw(As(kB).get(), alloc, &mw).ok());
  v1::BindMwRequest bind;
  bind.set_name(mw.name());
  bind.set_mr(mr.name());
  bind.set_length(4096);
  bind.add_access(v1::REMOTE_READ);
  ASSERT_TRUE(mws->BindMw(As(kB).get(), bind, &mw).ok());
  v1::DeregisterMrRequest dereg;
  dereg.set_name(mr.name());
  dereg.set_revoke_grants(true);
  v1::DeregisterMrResponse dereged;
  s = mrs->DeregisterMr(As(kB).get(), dereg, &dereged);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr(mw.name()));
  EXPECT_EQ(get_state().state(), v1::GRANT_ISSUED);
  v1::DeallocMwRequest dealloc;
  dealloc.set_name(mw.name());
  v1::DeallocMwResponse dealloced;
  ASSERT_TRUE(mws->DeallocMw(As(kB).get(), dealloc, &dealloced).ok());

  v1::ReregisterMrRequest good = bad;
  good.clear_access();
  for (v1::Access a : {v1::LOCAL_WRITE, v1::REMOTE_READ, v1::MW_BIND}) good.add_access(a);
  s = mrs->ReregisterMr(As(kB).get(), good, &r);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const v1::Grant ended = get_state();
  EXPECT_EQ(ended.state(), v1::GRANT_ENDED);
  EXPECT_EQ(ended.end_reason(), v1::END_MR_REREGISTERED);
  del.set_cascade(true);
  s = v1::ProtectionDomains::NewStub(channel_)->DeletePd(As(kB).get(), del, &deleted);
  EXPECT_TRUE(s.ok()) << s.error_message();
}

// A name of another kind than the field holds is INVALID_ARGUMENT whoever's it would be: hiding another
// tenant's (NOT_FOUND) while a missing one is INVALID_ARGUMENT would tell them apart (API fuzzer, --tenants).
TEST_F(TenancyTest, ANameOfAnotherKindIsInvalidWhetherAnotherTenantsOrNothing) {
  const std::string theirs = CreatePd(kA);
  auto mrs = v1::MemoryRegions::NewStub(channel_);
  for (const std::string& name : {theirs, std::string("pds/999")}) {
    SCOPED_TRACE(name);
    v1::GetMrRequest get;
    get.set_name(name);
    v1::MemoryRegion mr;
    grpc::Status s = mrs->GetMr(As(kB).get(), get, &mr);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("is not a name of the form mrs/N"));
    v1::DeregisterMrRequest dereg;
    dereg.set_name(name);
    dereg.set_revoke_grants(true);
    v1::DeregisterMrResponse unused;
    s = mrs->DeregisterMr(As(kB).get(), dereg, &unused);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    v1::IssueGrantRequest issue = GrantReq(name);
    v1::IssuedGrant issued;
    s = v1::Grants::NewStub(channel_)->IssueGrant(As(kB).get(), issue, &issued);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  }
  // The right kind of another tenant's is still NOT_FOUND, as a missing one.
  v1::GetPdRequest get_pd;
  get_pd.set_name(theirs);
  v1::ProtectionDomain pd;
  ExpectHidden(v1::ProtectionDomains::NewStub(channel_)->GetPd(As(kB).get(), get_pd, &pd), "name", theirs);
}

TEST_F(TenancyTest, CallersOutsideEveryTenantAreRefusedAndRatesAreLimitedPerConnection) {
  v1::Caller who;
  auto tenants = v1::Tenants::NewStub(channel_);
  grpc::Status s = tenants->WhoAmI(As("spiffe://t/stranger").get(), v1::WhoAmIRequest(), &who);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(), HasSubstr("spiffe://t/stranger"));
  ASSERT_TRUE(tenants->WhoAmI(As(kA).get(), v1::WhoAmIRequest(), &who).ok());
  EXPECT_EQ(who.tenant(), "a");
  EXPECT_EQ(who.role(), v1::ROLE_TENANT);
  ASSERT_TRUE(tenants->WhoAmI(As("ops").get(), v1::WhoAmIRequest(), &who).ok());
  EXPECT_EQ(who.role(), v1::ROLE_ADMIN);

  // b: 1 call per second per connection, burst 3. The fourth call in a row on one connection is refused;
  // another connection has its own bucket.
  int ok = 0, limited = 0;
  for (int i = 0; i < 4; ++i) {
    s = tenants->WhoAmI(As("spiffe://t/b", "conn-b").get(), v1::WhoAmIRequest(), &who);
    if (s.ok()) ++ok;
    if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++limited;
      EXPECT_THAT(s.error_message(), HasSubstr("quota rpc_per_second of tenant b: limit 1"));
    }
  }
  EXPECT_EQ(ok, 3);
  EXPECT_EQ(limited, 1);
  EXPECT_TRUE(tenants->WhoAmI(As("spiffe://t/b", "conn-b2").get(), v1::WhoAmIRequest(), &who).ok());
}

TEST_F(TenancyTest, EachMutationIsAudited) {
  const std::string pd = CreatePd(kA);
  v1::MemoryRegion mr;
  ASSERT_TRUE(RegisterMr(kA, pd, 4096, &mr).ok());
  v1::GetPdRequest gp;
  gp.set_name(pd);
  v1::ProtectionDomain unused;
  ASSERT_FALSE(v1::ProtectionDomains::NewStub(channel_)->GetPd(As(kB).get(), gp, &unused).ok());
  v1::DeletePdRequest d;
  d.set_name(pd);
  v1::DeletePdResponse r;
  EXPECT_EQ(v1::ProtectionDomains::NewStub(channel_)->DeletePd(As(kB).get(), d, &r).error_code(),
            grpc::StatusCode::NOT_FOUND);
  d.set_cascade(true);
  ASSERT_TRUE(v1::ProtectionDomains::NewStub(channel_)->DeletePd(As(kA).get(), d, &r).ok());
  MutexLock lock(&audit_mu_);
  ASSERT_EQ(audit_.size(), 4u);  // GetPd is not a mutation
  EXPECT_EQ(audit_[0].method, "CreatePd");
  EXPECT_EQ(audit_[0].resource, pd);
  EXPECT_EQ(audit_[0].tenant, "a");
  EXPECT_EQ(audit_[1].method, "RegisterMr");
  EXPECT_EQ(audit_[1].resource, mr.name());
  EXPECT_EQ(audit_[2].method, "DeletePd");
  EXPECT_EQ(audit_[2].principal, kB);
  EXPECT_EQ(audit_[2].code, absl::StatusCode::kNotFound);
  EXPECT_EQ(audit_[3].method, "DeletePd");
  EXPECT_EQ(audit_[3].code, absl::StatusCode::kOk);
}

TEST_F(TenancyTest, FilesAreRegisteredWithTheCallersOwnRights) {
  // Tenant a's TLS callers have no file-system identity (no uid in its config): no file at all, refused
  // before the path is opened. The admin (rdmad's own rights over TLS) may.
  const std::string pd = CreatePd(kA);
  char path[] = "/tmp/rdmad-tenancy-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 8192), 0);
  close(fd);
  v1::RegisterMrRequest req;
  req.set_pd(pd);
  req.mutable_source()->mutable_file()->set_path(path);
  req.mutable_source()->mutable_file()->set_length(4096);
  req.add_access(v1::REMOTE_READ);
  v1::MemoryRegion mr;
  auto mrs = v1::MemoryRegions::NewStub(channel_);
  grpc::Status s = mrs->RegisterMr(As(kA).get(), req, &mr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("source.file.path"));
  v1::DeletePdRequest d;
  d.set_name(pd);
  d.set_cascade(true);
  v1::DeletePdResponse r;
  EXPECT_TRUE(v1::ProtectionDomains::NewStub(channel_)->DeletePd(As(kA).get(), d, &r).ok());
  unlink(path);
}

TEST_F(TenancyTest, DataPlaneConnectionsOverTheQuotaAreRejectedWithTheTokenLeftUnused) {
  const std::string pd = CreatePd("spiffe://t/d");
  auto tokens = v1::ConnectTokens::NewStub(channel_);
  v1::IssueConnectTokenRequest req;
  req.set_pd(pd);
  v1::ConnectToken first, second;
  ASSERT_TRUE(tokens->IssueConnectToken(As("spiffe://t/d").get(), req, &first).ok());
  ASSERT_TRUE(tokens->IssueConnectToken(As("spiffe://t/d").get(), req, &second).ok());
  fabric::Device* device = device_;
  test::FakeClient one, two;
  EXPECT_EQ(one.Dial(*fake_cm_, device, first.token()).type, fabric::CmEventType::kEstablished);
  fabric::CmEvent refused = two.Dial(*fake_cm_, device, second.token());
  EXPECT_EQ(refused.type, fabric::CmEventType::kRejected);
  absl::StatusOr<cm::Reject> why = cm::DecodeReject(refused.private_data);
  EXPECT_TRUE(why.ok() && why->reason == cm::RejectReason::kOverQuota) << refused.private_data.size();
  two.Leave();
  // Once the first connection is gone, the second token (not used up) connects.
  one.Leave();
  auto ids = v1::CmIds::NewStub(channel_);
  // Until rdmad has seen the connection go (DISCONNECTED, on its dispatcher): d lists no CM id.
  bool listed = true;
  auto none_left = [&] {
    v1::ListCmIdsResponse list;
    listed = ids->ListCmIds(As("spiffe://t/d").get(), v1::ListCmIdsRequest(), &list).ok();
    return !listed || list.cm_ids_size() == 0;
  };
  EXPECT_TRUE(test::Eventually(none_left)) << "the first connection's id is still listed";
  ASSERT_TRUE(listed);
  test::FakeClient again;
  EXPECT_EQ(again.Dial(*fake_cm_, device, second.token()).type, fabric::CmEventType::kEstablished);
  again.Leave();
  EXPECT_TRUE(test::Eventually(none_left)) << "the second connection's id is still listed";
  ASSERT_TRUE(listed);
  v1::DeletePdRequest d;
  d.set_name(pd);
  d.set_cascade(true);
  v1::DeletePdResponse r;
  grpc::Status s = v1::ProtectionDomains::NewStub(channel_)->DeletePd(As("spiffe://t/d").get(), d, &r);
  EXPECT_TRUE(s.ok()) << s.error_message();
}

}  // namespace
}  // namespace rdmad

namespace rdmad {
namespace {

constexpr char kE[] = "spiffe://t/e";  // may use rxe9 only; one channel, one watch stream

TEST_F(TenancyTest, ADeviceTheTenantMayNotUseIsNotFoundUnderEitherSpelling) {
  auto devices = v1::Devices::NewStub(channel_);
  for (const std::string name : {"rxe0", "devices/rxe0"}) {
    v1::GetDeviceRequest get;
    get.set_name(name);
    v1::Device d;
    grpc::Status hidden = devices->GetDevice(As(kE).get(), get, &d);
    EXPECT_EQ(hidden.error_code(), grpc::StatusCode::NOT_FOUND) << name;
    EXPECT_EQ(hidden.error_message(), "name: no device '" + name + "'");  // the registry's words for a missing one
    EXPECT_TRUE(devices->GetDevice(As(kA).get(), get, &d).ok()) << name;  // a tenant with every device
  }
}

TEST_F(TenancyTest, AnIdNeedsAPdAndItsPdCannotBeDeletedUnderIt) {
  auto ids = v1::CmIds::NewStub(channel_);
  v1::CreateCmIdRequest bare;
  v1::CmId id;
  for (const char* who : {kA, "ops"}) {  // the proto says required: for admins too
    grpc::Status s = ids->CreateCmId(As(who).get(), bare, &id);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << who;
    EXPECT_THAT(s.error_message(), HasSubstr("pd: is required"));
  }
  const std::string pd = CreatePd(kA);
  v1::CreateCmIdRequest create;
  create.set_pd(pd);
  ASSERT_TRUE(ids->CreateCmId(As(kA).get(), create, &id).ok());
  v1::ListenRequest listen;
  listen.set_name(id.name());
  listen.mutable_address()->set_address(kAddr);
  listen.mutable_address()->set_port(7800);
  v1::CmId listening;
  ASSERT_TRUE(ids->Listen(As(kA).get(), listen, &listening).ok());
  auto pds = v1::ProtectionDomains::NewStub(channel_);
  v1::DeletePdRequest del;
  del.set_name(pd);
  del.set_cascade(true);
  v1::DeletePdResponse deleted;
  grpc::Status refused = pds->DeletePd(As(kA).get(), del, &deleted);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << refused.error_message();
  EXPECT_THAT(refused.error_message(), HasSubstr(id.name()));
  // The id is still the tenant's: it sees it and deletes it, and then the PD goes.
  v1::GetCmIdRequest get;
  get.set_name(id.name());
  ASSERT_TRUE(ids->GetCmId(As(kA).get(), get, &listening).ok());
  v1::DeleteCmIdRequest del_id;
  del_id.set_name(id.name());
  v1::DeleteCmIdResponse gone;
  ASSERT_TRUE(ids->DeleteCmId(As(kA).get(), del_id, &gone).ok());
  EXPECT_TRUE(pds->DeletePd(As(kA).get(), del, &deleted).ok());
  // Listen is a mutation like the others: audited (it is no List call).
  MutexLock lock(&audit_mu_);
  bool audited = false;
  for (const auto& r : audit_) audited |= r.method == "Listen" && r.resource == id.name() && r.code == absl::StatusCode::kOk;
  EXPECT_TRUE(audited);
}

TEST_F(TenancyTest, ListenOnlyThroughTheTenantsDevices) {
  v1::CreatePdRequest made;
  made.set_device("rxe0");
  // e may not create a PD on rxe0; one is made for it (as a restart restores one) to hold an id.
  const std::string pd = registry_->CreatePd(made, "e").value().name();
  auto ids = v1::CmIds::NewStub(channel_);
  v1::CreateCmIdRequest create;
  create.set_pd(pd);
  v1::CmId id;
  ASSERT_TRUE(ids->CreateCmId(As(kE).get(), create, &id).ok());
  v1::ListenRequest listen;
  listen.set_name(id.name());
  listen.mutable_address()->set_address(kAddr);  // rxe0's
  listen.mutable_address()->set_port(7801);
  v1::CmId out;
  grpc::Status s = ids->Listen(As(kE).get(), listen, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("address: "));
  listen.mutable_address()->set_address("0.0.0.0");
  EXPECT_EQ(ids->Listen(As(kE).get(), listen, &out).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // The refused binds were given back: an admin's id listens on that port.
  v1::CmId admins;
  create.clear_pd();
  create.set_pd(CreatePd("ops"));
  ASSERT_TRUE(ids->CreateCmId(As("ops").get(), create, &admins).ok());
  listen.set_name(admins.name());
  listen.mutable_address()->set_address(kAddr);
  EXPECT_TRUE(ids->Listen(As("ops").get(), listen, &out).ok());
}

TEST_F(TenancyTest, ChannelsAndWatchStreamsStopAtTheTenantsQuota) {
  auto chans = v1::EventChannels::NewStub(channel_);
  v1::EventChannel ch;
  ASSERT_TRUE(chans->CreateChannel(As(kE).get(), v1::CreateChannelRequest(), &ch).ok());
  v1::EventChannel more;
  grpc::Status s = chans->CreateChannel(As(kE).get(), v1::CreateChannelRequest(), &more);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("quota channels of tenant e: limit 1, in use 1"));
  v1::DeleteChannelRequest del;
  del.set_name(ch.name());
  v1::DeleteChannelResponse unused;
  ASSERT_TRUE(chans->DeleteChannel(As(kE).get(), del, &unused).ok());
  EXPECT_TRUE(chans->CreateChannel(As(kE).get(), v1::CreateChannelRequest(), &more).ok());

  auth::Caller e;
  e.tenant = "e";
  absl::StatusOr<tenancy::Gate::WatchSlot> first = gate_->OpenWatch(e);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<tenancy::Gate::WatchSlot> second = gate_->OpenWatch(e);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("quota watch_streams of tenant e: limit 1, in use 1"));
  auth::Caller admin;
  admin.admin = true;
  EXPECT_TRUE(gate_->OpenWatch(admin).ok());  // no quota; the rdmad-wide limit (1024) is far
  EXPECT_EQ(gate_->OpenWatches("e"), 1u);
  *first = tenancy::Gate::WatchSlot();  // the stream ended
  EXPECT_EQ(gate_->OpenWatches("e"), 0u);
  EXPECT_EQ(gate_->OpenWatches(), 0u);
  EXPECT_TRUE(gate_->OpenWatch(e).ok());
}

// Quota accounting is per tenant: while one tenant's book is taken (here held by the test, as a slow count
// of that tenant's use would hold it), another tenant's reservations, watch streams, connection admissions
// and usage go on.
TEST_F(TenancyTest, OneTenantsQuotaChecksNeverWaitForAnothers) {
  const std::string pd_a = CreatePd(kA);
  Mutex& d_book = tenancy::GateTestPeer::BookLock(*gate_, "d");
  Notification done;
  d_book.Lock();
  std::thread other([&] {
    auth::Caller a;
    a.tenant = "a";
    EXPECT_TRUE(gate_->Reserve(a, {{tenancy::Quota::kMrs, 1}}).ok());
    EXPECT_TRUE(gate_->OpenWatch(a).ok());
    EXPECT_TRUE(gate_->AdmitConnection(pd_a).ok());
    EXPECT_FALSE(gate_->Usage(*policy_->FindTenant("a")).empty());
    done.Notify();
  });
  const bool went_on = done.WaitForNotificationWithTimeout(absl::Seconds(30));
  d_book.Unlock();
  other.join();
  EXPECT_TRUE(went_on) << "tenant a's quota checks waited for tenant d's book";
}

TEST_F(TenancyTest, PdsStopAtTheTenantsQuota) {
  constexpr char kF[] = "spiffe://t/f";
  auto pds = v1::ProtectionDomains::NewStub(channel_);
  v1::CreatePdRequest req;
  req.set_device("rxe0");
  v1::ProtectionDomain first, more;
  ASSERT_TRUE(pds->CreatePd(As(kF).get(), req, &first).ok());
  const int allocated = ledger_->live().pds;
  grpc::Status s = pds->CreatePd(As(kF).get(), req, &more);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("quota pds of tenant f: limit 1, in use 1"));
  EXPECT_EQ(ledger_->live().pds, allocated);  // refused before anything was allocated
  v1::GetTenantRequest get;
  get.set_name("tenants/f");
  v1::Tenant t;
  ASSERT_TRUE(v1::Tenants::NewStub(channel_)->GetTenant(As(kF).get(), get, &t).ok());
  bool shown = false;
  for (const auto& q : t.quotas()) shown |= q.quota() == "pds" && q.limit() == 1 && q.used() == 1;
  EXPECT_TRUE(shown) << t.DebugString();
  v1::DeletePdRequest del;
  del.set_name(first.name());
  v1::DeletePdResponse unused;
  ASSERT_TRUE(pds->DeletePd(As(kF).get(), del, &unused).ok());
  ASSERT_TRUE(pds->CreatePd(As(kF).get(), req, &more).ok());
  del.set_name(more.name());
  ASSERT_TRUE(pds->DeletePd(As(kF).get(), del, &unused).ok());
}

TEST(GateWatchLimitTest, TheRdmadWideWatchLimitCountsEveryCallerAdminsIncluded) {
  Config config;
  auth::Policy policy(config);
  tenancy::Gate::Deps deps;
  deps.max_watch_streams = 2;
  tenancy::Gate gate(&policy, deps);
  auth::Caller admin;
  admin.admin = true;
  absl::StatusOr<tenancy::Gate::WatchSlot> a = gate.OpenWatch(admin), b = gate.OpenWatch(admin);
  ASSERT_TRUE(a.ok() && b.ok());
  absl::StatusOr<tenancy::Gate::WatchSlot> c = gate.OpenWatch(admin);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("limit watch_streams of rdmad: limit 2, in use 2"));
}

TEST_F(TenancyTest, TheGateForgetsDestroyedIdsBeyondTheReplayableOnes) {
  const std::string pd = CreatePd(kA);
  auto ids = v1::CmIds::NewStub(channel_);
  const size_t before = gate_->KnownCmIds();
  for (int i = 0; i < 5000; ++i) {  // more than remember_gone_cm_ids (4096)
    v1::CreateCmIdRequest create;
    create.set_pd(pd);
    v1::CmId id;
    ASSERT_TRUE(ids->CreateCmId(As(kA).get(), create, &id).ok());
    v1::DeleteCmIdRequest del;
    del.set_name(id.name());
    v1::DeleteCmIdResponse gone;
    ASSERT_TRUE(ids->DeleteCmId(As(kA).get(), del, &gone).ok());
  }
  EXPECT_LE(gate_->KnownCmIds(), before + 4096);
}

}  // namespace
}  // namespace rdmad
