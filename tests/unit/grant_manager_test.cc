// GrantManager (server/grants/manager.h) over the fake fabric and the fake rdma_cm: a grant's whole life
// (issue, the client's connection, the bind on its QP, the key sent only after the bind's completion,
// revocation at the NIC, the goodbye), the fallbacks to type 1 windows and to the MR's own key, the
// guards of DeregisterMr/DeletePd, expiry and renewal, disconnection, a QP in the error state, key
// quarantine, batches and bad input. Waits are bounded polls of state, never timing assertions.
#include <pthread.h>

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "proto/wire/grant_message.h"
#include "server/cm/manager.h"
#include "server/cm/token.h"
#include "server/common/status.h"
#include "server/common/sync.h"
#include "server/dataplane/listener.h"
#include "server/grants/manager.h"
#include "tests/support/eventually.h"
#include "tests/support/server_status.h"
#include "tests/unit/fake_client.h"
#include "tests/unit/fake_cm.h"
#include "tests/unit/fake_fabric.h"

namespace rdmad::grants {

// Runs the steps of Issue and of the expiry timer apart, so a test can put another call between them.
class GrantManagerTestPeer {
 public:
  static std::vector<uint64_t> TakeDue(GrantManager& m) { return m.TakeDue(); }
  static size_t Partings(GrantManager& m) {
    MutexLock lock(&m.mu_);
    return m.partings_.size();
  }
  static void EndDue(GrantManager& m, const std::vector<uint64_t>& due) { m.EndDue(due); }
  static absl::StatusOr<v1::IssuedGrant> IssueChecked(GrantManager& m, const v1::IssueGrantRequest& request,
                                                      const std::function<void()>& between) {
    return m.IssueChecked(request, between);
  }
};

namespace {

using ::rdmad::test::Eventually;

using ::rdmad::test::IsError;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kAddr[] = "10.0.2.15";
constexpr uint16_t kPort = 7471;

class GrantManagerTest : public ::testing::Test {
 protected:
  void Build(fabric::DeviceInfo device = fake::MakeDeviceInfo("rxe0"), absl::Duration quarantine = absl::Minutes(1)) {
    ledger_ = std::make_shared<fake::FakeLedger>();
    auto fabric = std::make_unique<fake::FakeFabric>(std::vector<fabric::DeviceInfo>{device}, ledger_);
    fake_cm_ = std::make_unique<fake::FakeCm>(fabric->devices(), std::map<std::string, std::string>{{kAddr, "rxe0"}});
    fabric->set_cm(fake_cm_.get());
    device_ = fabric->devices()[0];
    registry_ = std::make_unique<Registry>(std::move(fabric), Registry::Options());
    cm_ = std::make_unique<cm::CmManager>(fake_cm_.get(), registry_.get(), cm::CmManager::Options());
    ASSERT_TRUE(cm_->Start().ok());
    dataplane::Listener::Options data_plane;
    data_plane.listen = {{kAddr, kPort}};
    listener_ = std::make_unique<dataplane::Listener>(cm_.get(), registry_.get(), &tokens_, data_plane);
    ASSERT_TRUE(listener_->Start().ok());
    GrantManager::Options options;
    options.quarantine = quarantine;
    options.pool_size = 2;
    if (fake_clock_) options.clock = [this] { return Now(); };
    if (max_grants_ != 0) options.max_grants = max_grants_;
    options.max_scope = max_scope_;
    options.end_grace = end_grace_;
    grants_ = std::make_unique<GrantManager>(registry_.get(), cm_.get(), listener_.get(), &tokens_, options);
    v1::CreatePdRequest pd;
    pd.set_device("rxe0");
    pd_ = registry_->CreatePd(pd).value().name();
    mr_ = Register(1 << 20);
  }
  void TearDown() override {
    for (test::FakeClient& c : clients_) c.Leave();
    if (grants_) grants_->Shutdown();  // a test may have destroyed the manager already, as rdmad does first
    cm_->Quiesce();
    grants_.reset();
    cm_.reset();
    registry_.reset();
    EXPECT_THAT(fake_cm_->violations(), IsEmpty());
    EXPECT_THAT(ledger_->violations(), IsEmpty());
    fake::FakeLedger::Counts c = ledger_->live();
    EXPECT_EQ(c.mrs + c.mws + c.qps, 0);
  }
  std::string Register(uint64_t size, const std::string& pd = "") {
    v1::RegisterMrRequest r;
    r.set_pd(pd.empty() ? pd_ : pd);
    r.mutable_source()->mutable_anonymous()->set_size(size);
    for (v1::Access a : {v1::LOCAL_WRITE, v1::REMOTE_READ, v1::REMOTE_WRITE, v1::MW_BIND}) r.add_access(a);
    return registry_->RegisterMr(r).value().name();
  }
  v1::IssueGrantRequest Request(uint64_t offset = 4096, uint64_t length = 8192) {
    v1::IssueGrantRequest r;
    r.set_mr(mr_);
    r.set_offset(offset);
    r.set_length(length);
    r.set_principal("app-7");
    return r;
  }
  // Issues a grant and connects a client with its token; returns the grant once ACTIVE.
  v1::Grant Activate(v1::IssueGrantRequest request) {
    absl::StatusOr<v1::IssuedGrant> issued = grants_->Issue(request);
    EXPECT_TRUE(issued.ok()) << issued.status();
    if (!issued.ok()) return {};
    EXPECT_EQ(issued->grant().state(), v1::GRANT_ISSUED);
    clients_.emplace_back();
    fabric::CmEvent e = clients_.back().Dial(*fake_cm_, device_, issued->token());
    EXPECT_EQ(e.type, fabric::CmEventType::kEstablished);
    const std::string name = issued->grant().name();
    EXPECT_TRUE(Eventually([&] { return grants_->Get(name).value().state() == v1::GRANT_ACTIVE; }))
        << grants_->Get(name).value().DebugString();
    v1::Grant g = grants_->Get(name).value();
    // The key's SEND is posted once ACTIVE is recorded; its completion comes through the dispatcher.
    EXPECT_TRUE(Eventually([&] { return !Messages(g).empty(); })) << "no ACTIVE message for " << name;
    return g;
  }
  // The grant messages rdmad sent on the grant's connection.
  std::vector<wire::GrantMessage> Messages(const v1::Grant& g) {
    std::vector<wire::GrantMessage> out;
    absl::StatusOr<v1::QueuePair> qp = registry_->GetQp(g.qp());
    if (!qp.ok()) return out;
    for (const std::string& bytes : ledger_->Sent(qp->local().qpn())) out.push_back(wire::DecodeGrantMessage(bytes).value());
    return out;
  }
  absl::StatusOr<v1::Grant> Revoke(const std::string& name) {
    return AwaitResult<v1::Grant>([&](Done<v1::Grant> d) { grants_->Revoke(name, std::move(d)); });
  }
  absl::Status Retire(const std::string& mr, const std::string& pd, bool revoke) {
    Notification n;
    absl::Status out;
    // Unretire from the callback, as the RPC layer does (services.cc AfterGrants): a refusal must not call
    // back with the manager's lock held (a self-deadlock the API fuzzer found).
    grants_->Retire(mr, pd, revoke, mr.empty() ? v1::END_PD_DELETED : v1::END_MR_DEREGISTERED, "name",
                    [&](absl::Status s) {
                      out = s;
                      grants_->Unretire(mr, pd);
                      n.Notify();
                    });
    n.WaitForNotification();
    return out;
  }

  // The manager's clock, when a test sets fake_clock_ before Build: it moves only by Advance. The expiry
  // timer is armed in real time for the fake lease, so with leases of many seconds it never fires in a test.
  absl::Time Now() {
    MutexLock lock(&clock_mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    MutexLock lock(&clock_mu_);
    now_ += d;
  }
  // Deregisters `mr` as the RPC layer does: the grants' guard, the registry, then Unretire.
  absl::Status Deregister(const std::string& mr) {
    Notification n;
    absl::Status out;
    grants_->Retire(mr, "", false, v1::END_MR_DEREGISTERED, "name", [&](absl::Status s) {
      out = s.ok() ? registry_->DeregisterMr(mr) : s;
      grants_->Unretire(mr, "");
      n.Notify();
    });
    n.WaitForNotification();
    return out;
  }

  bool fake_clock_ = false;
  absl::Duration end_grace_ = GrantManager::Options().end_grace;  // set before Build
  uint64_t max_grants_ = 0;  // set before Build: the rdmad-wide limit grants (0: the default)
  v1::GrantScope max_scope_ = v1::SCOPE_MR;  // set before Build: grant_max_scope (SCOPE_MR: the default, any)
  Mutex clock_mu_;
  absl::Time now_ ABSL_GUARDED_BY(clock_mu_) = absl::FromUnixSeconds(1800000000);
  cm::TokenStore tokens_;
  std::unique_ptr<dataplane::Listener> listener_;  // outlives cm_, whose dispatchers call it
  std::shared_ptr<fake::FakeLedger> ledger_;
  std::unique_ptr<fake::FakeCm> fake_cm_;
  fabric::Device* device_ = nullptr;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<cm::CmManager> cm_;
  std::unique_ptr<GrantManager> grants_;
  std::deque<test::FakeClient> clients_;
  std::string pd_, mr_;
};

TEST_F(GrantManagerTest, TheKeyIsAType2WindowOnTheClientsQpSentOnlyAfterItsBindAndRevokedAtTheNic) {
  Build();
  auto watcher = grants_->events().Subscribe(GrantFilter{mr_, "app-7"}, 0);
  v1::Grant g = Activate(Request(4096, 8192));
  EXPECT_EQ(g.scope(), v1::SCOPE_QP);
  v1::MemoryWindow w = registry_->GetMw(g.window()).value();
  EXPECT_EQ(w.type(), v1::TYPE_2);
  EXPECT_EQ(w.owner(), "grants");
  EXPECT_EQ(w.binding().qp(), g.qp());  // bound on the client's own connection
  EXPECT_EQ(w.binding().offset(), 4096u);
  EXPECT_EQ(w.binding().length(), 8192u);
  std::vector<wire::GrantMessage> sent = Messages(g);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].type, wire::GrantMessageType::kActive);
  EXPECT_EQ(sent[0].scope, wire::GrantKeyScope::kQp);
  EXPECT_EQ(sent[0].rkey, w.rkey());
  EXPECT_EQ(sent[0].remote_addr, registry_->GetMr(mr_).value().addr() + 4096);
  EXPECT_EQ(sent[0].length, 8192u);
  EXPECT_EQ(sent[0].access, wire::kGrantRead);
  const uint64_t fake_mw = ledger_->MwIdByRkey(w.rkey());
  EXPECT_NE(ledger_->MwBoundMr(fake_mw), 0u);
  // A user cannot touch the grant's window.
  EXPECT_TRUE(IsError(registry_->DeallocMw(g.window()), absl::StatusCode::kFailedPrecondition, "name"));

  absl::StatusOr<v1::Grant> revoked = Revoke(g.name());
  ASSERT_TRUE(revoked.ok()) << revoked.status();
  EXPECT_EQ(revoked->state(), v1::GRANT_ENDED);
  EXPECT_EQ(revoked->end_reason(), v1::END_REVOKED);
  EXPECT_EQ(ledger_->MwBoundMr(fake_mw), 0u);  // dead at the NIC when Revoke returned
  // The goodbye, then the connection goes.
  EXPECT_TRUE(Eventually([&] { return !cm_->GetCmId(g.cm_id()).ok(); }));
  // Revoking again answers with how it ended.
  EXPECT_EQ(Revoke(g.name()).value().end_reason(), v1::END_REVOKED);
  // The stream told it all, in order.
  std::vector<v1::GrantEventType> seen;
  while (std::optional<v1::GrantEvent> e = watcher->Next()) seen.push_back(e->type());
  EXPECT_THAT(seen, ::testing::ElementsAre(v1::GRANT_ISSUED_EVENT, v1::GRANT_ACTIVATED, v1::GRANT_REVOKED));
}

TEST_F(GrantManagerTest, WithoutType2WindowsTheKeyIsAType1WindowAndWithoutWindowsTheMrsOwnRotatedToRevoke) {
  fabric::DeviceInfo type1 = fake::MakeDeviceInfo("rxe0");
  type1.mw_type2b = false;
  Build(type1);
  v1::Grant g = Activate(Request());
  EXPECT_EQ(g.scope(), v1::SCOPE_PD);
  EXPECT_EQ(registry_->GetMw(g.window()).value().type(), v1::TYPE_1);
  EXPECT_EQ(Messages(g).at(0).scope, wire::GrantKeyScope::kPd);
  EXPECT_EQ(Revoke(g.name()).value().state(), v1::GRANT_ENDED);
  EXPECT_FALSE(registry_->GetMw(g.window()).value().bound());
}

TEST_F(GrantManagerTest, WithoutWindowsTheKeyIsTheMrsOwnAndRevokingRotatesItEndingEveryMrScopeGrant) {
  fabric::DeviceInfo none = fake::MakeDeviceInfo("rxe0");
  none.mw_type1 = none.mw_type2b = false;
  Build(none);
  // The fixture's region allows REMOTE_WRITE, which its own rkey gives: the grants ask for it.
  v1::IssueGrantRequest rw = Request(0, 4096);
  rw.add_access(v1::REMOTE_WRITE);
  v1::Grant a = Activate(rw);
  rw.set_offset(8192);
  v1::Grant b = Activate(rw);
  EXPECT_EQ(a.scope(), v1::SCOPE_MR);
  const v1::MemoryRegion before = registry_->GetMr(mr_).value();
  EXPECT_EQ(Messages(a).at(0).rkey, before.rkey());
  EXPECT_EQ(Messages(b).at(0).remote_addr, before.addr() + 8192);
  ASSERT_TRUE(Revoke(a.name()).ok());
  EXPECT_NE(registry_->GetMr(mr_).value().rkey(), before.rkey());  // the old key is dead
  EXPECT_EQ(grants_->Get(b.name()).value().state(), v1::GRANT_ENDED);
  EXPECT_THAT(grants_->Get(b.name()).value().end_detail(), HasSubstr("rotated"));
}

// Without windows the key is the MR's own rkey: a grant that asks for less than the MR allows remotely
// (read only, on a region with REMOTE_WRITE or REMOTE_ATOMIC) is refused, naming what the key would add.
TEST_F(GrantManagerTest, WithoutWindowsAGrantAskingLessThanTheMrsOwnKeyGivesIsRefused) {
  fabric::DeviceInfo none = fake::MakeDeviceInfo("rxe0");
  none.mw_type1 = none.mw_type2b = false;
  Build(none);
  absl::StatusOr<v1::IssuedGrant> refused = grants_->Issue(Request());  // read only; the region allows writes
  EXPECT_TRUE(IsError(refused, absl::StatusCode::kFailedPrecondition, "access")) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("also allows REMOTE_WRITE"));
  EXPECT_THAT(grants_->List(v1::ListGrantsRequest()).value(), IsEmpty());
  // A region registered for remote reads only: its key is exactly a read grant.
  v1::RegisterMrRequest ro;
  ro.set_pd(pd_);
  ro.mutable_source()->mutable_anonymous()->set_size(1 << 16);
  ro.add_access(v1::REMOTE_READ);
  v1::IssueGrantRequest read = Request(0, 4096);
  read.set_mr(registry_->RegisterMr(ro).value().name());
  EXPECT_EQ(Activate(read).scope(), v1::SCOPE_MR);
  // REMOTE_ATOMIC, which no grant gives, is refused whatever was asked.
  ro.add_access(v1::LOCAL_WRITE);
  ro.add_access(v1::REMOTE_WRITE);
  ro.add_access(v1::REMOTE_ATOMIC);
  read.set_mr(registry_->RegisterMr(ro).value().name());
  read.add_access(v1::REMOTE_WRITE);
  EXPECT_THAT(grants_->Issue(read).status().message(), HasSubstr("also allows REMOTE_ATOMIC"));
}

// grant_max_scope: an issue whose device can only give a wider key than the setting allows is refused
// (FAILED_PRECONDITION on "mr", the message naming the device and the setting) before anything is made;
// a device that can give a key within it is unaffected.
TEST_F(GrantManagerTest, GrantMaxScopeRefusesAWiderKeyThanItAllowsNamingTheSettingAndTheDevice) {
  fabric::DeviceInfo none = fake::MakeDeviceInfo("rxe0");
  none.mw_type1 = none.mw_type2b = false;  // an SR-IOV VF's: no memory windows, only the MR's own rkey
  max_scope_ = v1::SCOPE_QP;
  Build(none);
  absl::StatusOr<v1::IssuedGrant> refused = grants_->Issue(Request());
  EXPECT_TRUE(IsError(refused, absl::StatusCode::kFailedPrecondition, "mr"));
  EXPECT_THAT(refused.status().message(), HasSubstr("grant_max_scope"));
  EXPECT_THAT(refused.status().message(), HasSubstr("rxe0"));
  EXPECT_THAT(refused.status().message(), HasSubstr("SCOPE_MR"));
  EXPECT_THAT(grants_->List(v1::ListGrantsRequest()).value(), IsEmpty());  // nothing was made
  EXPECT_EQ(grants_->Live(), 0u);
  v1::IssueGrantsRequest batch;  // a batch is refused as a whole, naming the grant
  *batch.add_grants() = Request();
  EXPECT_TRUE(IsError(grants_->IssueBatch(batch), absl::StatusCode::kFailedPrecondition, "grants[0].mr"));
}

TEST_F(GrantManagerTest, GrantMaxScopePdRefusesTheMrsOwnKeyButAllowsAType1Window) {
  max_scope_ = v1::SCOPE_PD;
  fabric::DeviceInfo type1 = fake::MakeDeviceInfo("rxe0");
  type1.mw_type2b = false;
  Build(type1);
  v1::Grant g = Activate(Request());  // SCOPE_PD is within the setting
  EXPECT_EQ(g.scope(), v1::SCOPE_PD);
  EXPECT_EQ(Revoke(g.name()).value().state(), v1::GRANT_ENDED);
}

TEST_F(GrantManagerTest, GrantMaxScopePdOnADeviceWithoutWindowsIsRefused) {
  max_scope_ = v1::SCOPE_PD;
  fabric::DeviceInfo none = fake::MakeDeviceInfo("rxe0");
  none.mw_type1 = none.mw_type2b = false;
  Build(none);
  absl::StatusOr<v1::IssuedGrant> refused = grants_->Issue(Request());
  EXPECT_TRUE(IsError(refused, absl::StatusCode::kFailedPrecondition, "mr"));
  EXPECT_THAT(refused.status().message(), HasSubstr("grant_max_scope allows (SCOPE_PD)"));
}

TEST_F(GrantManagerTest, GrantMaxScopeQpStillIssuesType2Windows) {
  max_scope_ = v1::SCOPE_QP;
  Build();  // the fake rxe0 has type 2 windows
  EXPECT_EQ(Activate(Request()).scope(), v1::SCOPE_QP);
}

// ListGrants' pages: List(request, after, limit) walks from past `after`, in number order, through the index
// the filter uses, and stops at `limit` taken (filtered-out grants skipped, not counted).
TEST_F(GrantManagerTest, ListTakesAPageFromPastAfterInNumberOrderAndStopsAtTheLimit) {
  Build();
  std::vector<uint64_t> ids, mine;
  for (int i = 0; i < 6; ++i) {
    v1::IssueGrantRequest r = Request();
    r.set_principal(i % 2 == 0 ? "app-7" : "app-8");
    v1::IssuedGrant g = grants_->Issue(r).value();
    ids.push_back(std::stoull(g.grant().name().substr(std::string("grants/").size())));
    if (i % 2 == 0) mine.push_back(ids.back());
  }
  auto numbers = [](const std::vector<v1::Grant>& gs) {
    std::vector<uint64_t> out;
    for (const v1::Grant& g : gs) out.push_back(std::stoull(g.name().substr(std::string("grants/").size())));
    return out;
  };
  v1::ListGrantsRequest all;
  EXPECT_EQ(numbers(grants_->List(all).value()), ids);
  EXPECT_EQ(numbers(grants_->List(all, ids[1], 2).value()), (std::vector<uint64_t>{ids[2], ids[3]}));
  EXPECT_EQ(numbers(grants_->List(all, ids[4], 2).value()), (std::vector<uint64_t>{ids[5]}));
  EXPECT_THAT(grants_->List(all, ids[5], 2).value(), IsEmpty());
  v1::ListGrantsRequest by_principal;  // the principal's index
  by_principal.set_principal("app-7");
  EXPECT_EQ(numbers(grants_->List(by_principal, ids[0], 1).value()), (std::vector<uint64_t>{mine[1]}));
  EXPECT_EQ(numbers(grants_->List(by_principal, mine[1], 5).value()), (std::vector<uint64_t>{mine[2]}));
  v1::ListGrantsRequest by_mr;  // the region's index, with the principal filtered on the way
  by_mr.set_mr(mr_);
  by_mr.set_principal("app-8");
  EXPECT_EQ(numbers(grants_->List(by_mr, 0, 2).value()), (std::vector<uint64_t>{ids[1], ids[3]}));
}

TEST_F(GrantManagerTest, MrAndPdRemovalRefusedWhileGrantsLiveUnlessAskedToRevokeThem) {
  Build();
  v1::Grant g = Activate(Request());
  v1::IssuedGrant waiting = grants_->Issue(Request()).value();
  absl::Status refused = Retire(mr_, "", false);
  EXPECT_TRUE(IsError(refused, absl::StatusCode::kFailedPrecondition, "name"));
  EXPECT_THAT(refused.message(), HasSubstr(g.name()));
  EXPECT_EQ(ErrnoOf(refused), EBUSY);
  EXPECT_TRUE(Retire(mr_, "", true).ok());
  EXPECT_EQ(grants_->Get(g.name()).value().end_reason(), v1::END_MR_DEREGISTERED);
  EXPECT_EQ(grants_->Get(waiting.grant().name()).value().state(), v1::GRANT_ENDED);
  // Its client's token is dead too.
  test::FakeClient late;
  fabric::CmEvent e = late.Dial(*fake_cm_, device_, waiting.token());
  EXPECT_EQ(e.type, fabric::CmEventType::kRejected);
  EXPECT_EQ(cm::DecodeReject(e.private_data).value().reason, cm::RejectReason::kRevoked);
  late.Leave();
  EXPECT_TRUE(Eventually([&] { return registry_->DeregisterMr(mr_).ok(); }));
  // The deregistered region's ended grants are still listed by its name; a filter naming nothing is refused
  // like any name; a watch needs a region.
  v1::ListGrantsRequest list;
  list.set_mr(mr_);
  list.set_include_ended(true);
  EXPECT_EQ(grants_->List(list).value().size(), 2u);
  list.set_mr("mrs/999");
  EXPECT_TRUE(IsError(grants_->List(list).status(), absl::StatusCode::kNotFound, "mr"));
  list.set_mr("mrs/01");
  EXPECT_TRUE(IsError(grants_->List(list).status(), absl::StatusCode::kInvalidArgument, "mr"));
  EXPECT_TRUE(IsError(grants_->CheckMrFilter(mr_), absl::StatusCode::kNotFound, "mr"));
  // The PD's pool windows go with a Retire of the PD; then DeletePd without cascade succeeds, guarded as the
  // RPC guards it: not while the PD has CM ids (a grant's connection leaves the registry's QPs before its id,
  // and with it the QP, is destroyed).
  EXPECT_TRUE(Retire("", pd_, false).ok());
  v1::DeletePdRequest del;
  del.set_name(pd_);
  EXPECT_TRUE(Eventually([&] {
    if (!cm_->BeginPdRemoval(pd_).ok()) return false;
    const bool deleted = registry_->DeletePd(del).ok();
    cm_->EndPdRemoval(pd_);
    return deleted;
  }));
}

TEST_F(GrantManagerTest, LeasesExpireAndRenewalsExtendThem) {
  fake_clock_ = true;  // the leases run on fake time: the test moves it, nothing sleeps
  Build();
  v1::IssueGrantRequest r = Request();
  r.set_ttl_ms(300);
  v1::Grant g = Activate(r);
  EXPECT_EQ(grants_->LiveOnPd(pd_), 1u);  // a tenant's grants quota counts it
  v1::RenewGrantRequest renew;
  renew.set_name(g.name());
  renew.set_ttl_ms(60000);
  EXPECT_EQ(grants_->Renew(renew).value().renewals(), 1u);
  Advance(absl::Milliseconds(600));  // past the first expiry: the renewal holds
  grants_->ClockMoved();
  EXPECT_EQ(grants_->Get(g.name()).value().state(), v1::GRANT_ACTIVE);
  renew.set_ttl_ms(50);
  ASSERT_TRUE(grants_->Renew(renew).ok());
  Advance(absl::Milliseconds(49));  // 1 ms before the end: still live
  grants_->ClockMoved();
  EXPECT_EQ(grants_->Get(g.name()).value().state(), v1::GRANT_ACTIVE);
  Advance(absl::Milliseconds(1));  // at the end: expired
  grants_->ClockMoved();
  EXPECT_TRUE(Eventually([&] { return grants_->Get(g.name()).value().state() == v1::GRANT_ENDED; }));
  EXPECT_EQ(grants_->Get(g.name()).value().end_reason(), v1::END_EXPIRED);
  EXPECT_EQ(grants_->LiveOnPd(pd_), 0u);
  EXPECT_FALSE(registry_->GetMw(g.window()).value().bound());
  EXPECT_TRUE(IsError(grants_->Renew(renew), absl::StatusCode::kFailedPrecondition, "name"));
}

// The expiry takes due grants from its index, then ends them. A RenewGrant in between must not answer OK
// with a new lease end for a grant that then ends EXPIRED: once the expiry has taken it, the grant is ending.
TEST_F(GrantManagerTest, ARenewalAfterTheExpiryTookTheGrantIsRefusedAndTheGrantEndsExpired) {
  fake_clock_ = true;
  Build();
  v1::IssueGrantRequest r = Request();
  r.set_ttl_ms(30000);
  v1::Grant active = Activate(r);
  absl::StatusOr<v1::IssuedGrant> issued = grants_->Issue(r);  // no client: stays ISSUED
  ASSERT_TRUE(issued.ok()) << issued.status();
  Advance(absl::Seconds(31));
  std::vector<uint64_t> due = GrantManagerTestPeer::TakeDue(*grants_);
  ASSERT_EQ(due.size(), 2u);
  for (const std::string& name : {active.name(), issued->grant().name()}) {
    v1::RenewGrantRequest renew;
    renew.set_name(name);
    renew.set_ttl_ms(60000);
    absl::StatusOr<v1::Grant> renewed = grants_->Renew(renew);
    EXPECT_TRUE(IsError(renewed, absl::StatusCode::kFailedPrecondition, "name")) << name;
    if (!renewed.ok()) EXPECT_THAT(renewed.status().message(), HasSubstr("ending")) << renewed.status();
  }
  GrantManagerTestPeer::EndDue(*grants_, due);
  for (const std::string& name : {active.name(), issued->grant().name()}) {
    EXPECT_TRUE(Eventually([&] { return grants_->Get(name).value().state() == v1::GRANT_ENDED; })) << name;
    v1::Grant g = grants_->Get(name).value();
    EXPECT_EQ(g.end_reason(), v1::END_EXPIRED) << name;
    EXPECT_EQ(g.renewals(), 0u) << name;
  }
  EXPECT_EQ(grants_->LiveOnPd(pd_), 0u);
}

// IssueGrant checks the region without the manager's lock and commits under it. A region deregistered in
// between (its guard, the registry, Unretire, all done by the time the issue commits) must not get a grant:
// the call answers as for a missing region.
TEST_F(GrantManagerTest, AnIssueWhoseRegionIsDeregisteredBeforeItCommitsAnswersAsForAMissingRegion) {
  Build();
  const std::string mr = Register(1 << 16);
  v1::IssueGrantRequest r = Request(0, 4096);
  r.set_mr(mr);
  absl::StatusOr<v1::IssuedGrant> issued = GrantManagerTestPeer::IssueChecked(*grants_, r, [&] {
    EXPECT_TRUE(Deregister(mr).ok());
  });
  EXPECT_TRUE(IsError(issued, absl::StatusCode::kNotFound, "mr")) << issued.status();
  EXPECT_EQ(grants_->LiveOnPd(pd_), 0u);
  v1::ListGrantsRequest all;
  all.set_include_ended(true);
  EXPECT_THAT(grants_->List(all).value(), IsEmpty());
  // The same for a PD deleted (with its regions) in between.
  v1::CreatePdRequest create;
  create.set_device("rxe0");
  const std::string pd2 = registry_->CreatePd(create).value().name();
  const std::string mr2 = Register(1 << 16, pd2);
  r.set_mr(mr2);
  issued = GrantManagerTestPeer::IssueChecked(*grants_, r, [&] {
    Notification n;
    grants_->Retire("", pd2, false, v1::END_PD_DELETED, "name", [&](absl::Status s) {
      EXPECT_TRUE(s.ok()) << s;
      v1::DeletePdRequest del;
      del.set_name(pd2);
      del.set_cascade(true);
      EXPECT_TRUE(registry_->DeletePd(del).ok());
      grants_->Unretire("", pd2);
      n.Notify();
    });
    n.WaitForNotification();
  });
  EXPECT_TRUE(IsError(issued, absl::StatusCode::kNotFound, "mr")) << issued.status();
  EXPECT_EQ(grants_->LiveOnPd(pd2), 0u);
  EXPECT_THAT(grants_->List(all).value(), IsEmpty());
}

// The fake rxe0 does not enforce window bounds, so a grant's bind pins a bounds region over its range:
// charged to the PD's pinned bytes while the key lives, and refused past the tenant's pinned_bytes quota
// (the admit hook, the tenancy gate in rdmad) before anything is pinned.
TEST_F(GrantManagerTest, AGrantsBoundsRegionCountsAsPinnedAndPastTheQuotaItsActivationFailsBeforePinning) {
  Build();
  std::atomic<int> holds{0};
  grants_->set_admit_pinned([&](const std::string& pd, uint64_t bytes) -> absl::StatusOr<std::shared_ptr<void>> {
    EXPECT_EQ(pd, pd_);
    if (bytes > 4096) {
      return absl::ResourceExhaustedError(absl::StrCat("quota pinned_bytes of tenant a: limit 4096; this call needs ",
                                                       bytes));
    }
    ++holds;
    return std::shared_ptr<void>(nullptr, [&holds](void*) { --holds; });
  });
  const uint64_t mr_bytes = registry_->UsageOfPd(pd_).value().mr_bytes;
  v1::Grant g = Activate(Request(0, 4096));
  EXPECT_EQ(registry_->UsageOfPd(pd_).value().mr_bytes, mr_bytes + 4096);
  EXPECT_EQ(holds.load(), 0);  // held only until the bind committed
  const int regs = ledger_->calls("reg_mr");
  absl::StatusOr<v1::IssuedGrant> big = grants_->Issue(Request(0, 8192));
  ASSERT_TRUE(big.ok()) << big.status();
  clients_.emplace_back();
  clients_.back().Dial(*fake_cm_, device_, big->token());
  const std::string name = big->grant().name();
  ASSERT_TRUE(Eventually([&] { return grants_->Get(name).value().state() == v1::GRANT_ENDED; }));
  EXPECT_EQ(grants_->Get(name).value().end_reason(), v1::END_ACTIVATION_FAILED);
  EXPECT_THAT(grants_->Get(name).value().end_detail(), HasSubstr("quota pinned_bytes"));
  EXPECT_EQ(ledger_->calls("reg_mr"), regs);  // no bounds region was registered
  EXPECT_EQ(registry_->UsageOfPd(pd_).value().mr_bytes, mr_bytes + 4096);
  ASSERT_TRUE(Revoke(g.name()).ok());
  EXPECT_EQ(registry_->UsageOfPd(pd_).value().mr_bytes, mr_bytes);
}

TEST_F(GrantManagerTest, ADisconnectedClientsGrantEndsAndItsWindowQpAndIdAreReleased) {
  Build();
  v1::Grant g = Activate(Request());
  clients_.back().Leave();
  EXPECT_TRUE(Eventually([&] { return grants_->Get(g.name()).value().state() == v1::GRANT_ENDED; }));
  EXPECT_EQ(grants_->Get(g.name()).value().end_reason(), v1::END_DISCONNECTED);
  EXPECT_TRUE(Eventually([&] { return !cm_->GetCmId(g.cm_id()).ok() && !registry_->GetQp(g.qp()).ok(); }));
  EXPECT_FALSE(registry_->GetMw(g.window()).value().bound());
}

TEST_F(GrantManagerTest, ADrainEndsEveryGrantTheNormalWayWithReasonShutdownAndIssuesNoMore) {
  Build();
  v1::Grant a = Activate(Request(0, 4096));
  v1::Grant b = Activate(Request(8192, 4096));
  absl::StatusOr<v1::IssuedGrant> waiting = grants_->Issue(Request());  // its client never connects
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  const uint64_t mw_a = ledger_->MwIdByRkey(registry_->GetMw(a.window()).value().rkey());
  const uint64_t mw_b = ledger_->MwIdByRkey(registry_->GetMw(b.window()).value().rkey());
  std::map<std::string, uint32_t> qpn;  // the grants' connections, to read what was sent on them afterwards
  for (const v1::Grant& g : {a, b}) qpn[g.name()] = registry_->GetQp(g.qp()).value().local().qpn();

  EXPECT_EQ(grants_->Drain(absl::Now() + absl::Seconds(10)), 0u);  // everything done before the deadline

  for (const v1::Grant& g : {a, b, waiting->grant()}) {
    v1::Grant now = grants_->Get(g.name()).value();
    EXPECT_EQ(now.state(), v1::GRANT_ENDED) << g.name();
    EXPECT_EQ(now.end_reason(), v1::END_SHUTDOWN) << g.name();
  }
  EXPECT_EQ(ledger_->MwBoundMr(mw_a), 0u);  // the keys are dead at the NIC
  EXPECT_EQ(ledger_->MwBoundMr(mw_b), 0u);
  for (const v1::Grant& g : {a, b}) {
    // The client was told: ACTIVE, then ENDED with reason SHUTDOWN (8); then its connection went.
    std::vector<std::string> sent = ledger_->Sent(qpn[g.name()]);
    ASSERT_EQ(sent.size(), 2u) << g.name();
    wire::GrantMessage ended = wire::DecodeGrantMessage(sent[1]).value();
    EXPECT_EQ(ended.type, wire::GrantMessageType::kEnded);
    EXPECT_EQ(ended.reason, static_cast<uint8_t>(v1::END_SHUTDOWN));
    EXPECT_TRUE(Eventually([&] { return !cm_->GetCmId(g.cm_id()).ok(); })) << g.name();
  }
  // And no grant is issued any more.
  EXPECT_EQ(grants_->Issue(Request()).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(GrantManagerTest, RevokeWorksOnAQpInTheErrorStateAndRevokedKeysAreNeverReusedInQuarantine) {
  Build();
  std::set<uint32_t> keys;
  std::set<std::string> windows;
  for (int i = 0; i < 4; ++i) {
    v1::Grant g = Activate(Request());
    const uint32_t rkey = Messages(g).at(0).rkey;
    EXPECT_TRUE(keys.insert(rkey).second) << "key " << rkey << " handed out twice";
    EXPECT_TRUE(windows.insert(g.window()).second) << g.window() << " reused during its quarantine";
    if (i == 0) ledger_->ForceQpError(registry_->GetQp(g.qp()).value().local().qpn());  // a bad read by the peer
    absl::StatusOr<v1::Grant> r = Revoke(g.name());
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(ledger_->MwBoundMr(ledger_->MwIdByRkey(rkey)), 0u) << "the revoked key still opens a window";
  }
}

// A client whose connection takes nothing rdmad sends (no receive posted, RNR retried without end) holds up
// the send queue of its QP: the key's LOCAL_INV waits there behind a SEND that never completes. Past
// key_kill_timeout rdmad disconnects the client; the QP's error state flushes the queue, and the window is
// deallocated and replaced: the key dies all the same, and the revocation answers.
TEST_F(GrantManagerTest, AKeyKillStuckOnTheClientsQueueDisconnectsTheClientPastTheTimeoutAndStillKillsTheKey) {
  fake_clock_ = true;
  Build();
  v1::Grant g = Activate(Request());
  const uint32_t qpn = registry_->GetQp(g.qp()).value().local().qpn();
  const uint64_t fake_mw = ledger_->MwIdByRkey(registry_->GetMw(g.window()).value().rkey());
  ledger_->StallQp(qpn);
  Notification answered;
  absl::StatusOr<v1::Grant> revoked = absl::UnknownError("unanswered");
  grants_->Revoke(g.name(), [&](absl::StatusOr<v1::Grant> r) {
    revoked = std::move(r);
    answered.Notify();
  });
  ASSERT_TRUE(Eventually([&] { return ledger_->Stalled(qpn) == 1; }));  // the LOCAL_INV, held up

  Advance(absl::Milliseconds(4999));  // before the timeout (5 s): rdmad still waits, the client connected
  grants_->ClockMoved();
  EXPECT_FALSE(answered.HasBeenNotified());
  EXPECT_NE(ledger_->MwBoundMr(fake_mw), 0u);
  EXPECT_EQ(cm_->GetCmId(g.cm_id()).value().state(), v1::CM_CONNECTED);

  Advance(absl::Milliseconds(1));  // at the timeout
  grants_->ClockMoved();
  ASSERT_TRUE(answered.WaitForNotificationWithTimeout(absl::Seconds(30)));
  ASSERT_TRUE(revoked.ok()) << revoked.status();
  EXPECT_EQ(revoked->end_reason(), v1::END_REVOKED);
  EXPECT_EQ(ledger_->MwBoundMr(fake_mw), 0u);  // the window that carried the key is gone
  EXPECT_FALSE(registry_->GetMw(g.window()).value().bound());
  EXPECT_TRUE(Eventually([&] { return !cm_->GetCmId(g.cm_id()).ok() && !registry_->GetQp(g.qp()).ok(); }));

}

// After a grant ends, its connection stays for end_grace past the ENDED message, and only then is the client
// disconnected: reads through the dead key meanwhile are refused by the NIC (a remote access error within a
// round trip), and a refusal already on the wire arrives before the disconnect flushes the client's queue.
// The same with the QP in the error state (its ENDED flushed). The grace is real time: the leases' clock is
// fake here and does not move. A grace of 1 s, checked at 300 ms: well apart on a slow machine.
TEST_F(GrantManagerTest, AnEndedGrantsClientIsDisconnectedOnlyAfterTheGrace) {
  fake_clock_ = true;
  end_grace_ = absl::Seconds(1);
  Build();
  for (bool qp_error : {false, true}) {
    SCOPED_TRACE(qp_error ? "QP in the error state" : "QP ready");
    v1::Grant g = Activate(Request());
    const uint32_t qpn = registry_->GetQp(g.qp()).value().local().qpn();
    if (qp_error) ledger_->ForceQpError(qpn);
    ASSERT_TRUE(Revoke(g.name()).ok());
    if (!qp_error) {
      ASSERT_TRUE(Eventually([&] { return ledger_->Sent(qpn).size() == 2; }));
      EXPECT_EQ(wire::DecodeGrantMessage(ledger_->Sent(qpn)[1]).value().type, wire::GrantMessageType::kEnded);
    }
    // ENDED posted: the grace has begun.
    ASSERT_TRUE(Eventually([&] { return GrantManagerTestPeer::Partings(*grants_) == 1; }));
    const absl::Time began = absl::Now();
    absl::SleepFor(absl::Milliseconds(300));
    if (absl::Now() - began < absl::Milliseconds(900)) {
      EXPECT_EQ(cm_->GetCmId(g.cm_id()).value().state(), v1::CM_CONNECTED);
    }
    EXPECT_TRUE(Eventually([&] { return !cm_->GetCmId(g.cm_id()).ok() && !registry_->GetQp(g.qp()).ok(); }));
    EXPECT_EQ(GrantManagerTestPeer::Partings(*grants_), 0u);
  }
}

// A client that leaves within the grace leaves nothing to part: its parting is dropped, and a drain does not
// wait for the grace to run out (10 s here, the drain's bound 5 s).
TEST_F(GrantManagerTest, AClientThatLeavesWithinTheGraceDoesNotHoldADrain) {
  fake_clock_ = true;
  end_grace_ = absl::Seconds(10);
  Build();
  v1::Grant g = Activate(Request());
  ASSERT_TRUE(Revoke(g.name()).ok());
  ASSERT_TRUE(Eventually([&] { return GrantManagerTestPeer::Partings(*grants_) == 1; }));
  clients_.back().Leave();
  ASSERT_TRUE(Eventually([&] { return !cm_->GetCmId(g.cm_id()).ok(); }));  // well within the grace
  EXPECT_EQ(GrantManagerTestPeer::Partings(*grants_), 0u);
  EXPECT_EQ(grants_->Drain(absl::Now() + absl::Seconds(5)), 0u);
}

// The grace runs from the ENDED message's post, not its completion: a SEND that never completes (here its
// completion is held) does not hold the connection open past the grace.
TEST_F(GrantManagerTest, AnEndedGrantsClientIsDisconnectedAfterTheGraceEvenIfEndedNeverCompletes) {
  fake_clock_ = true;
  end_grace_ = absl::Milliseconds(300);
  Build();
  v1::Grant g = Activate(Request());
  const uint32_t qpn = registry_->GetQp(g.qp()).value().local().qpn();
  ASSERT_TRUE(Revoke(g.name()).ok());
  ledger_->HoldCompletions();
  ASSERT_TRUE(Eventually([&] { return ledger_->Sent(qpn).size() == 2; }));  // ENDED posted, not completed
  EXPECT_TRUE(Eventually([&] { return !cm_->GetCmId(g.cm_id()).ok(); }));
  EXPECT_EQ(GrantManagerTestPeer::Partings(*grants_), 0u);
  ledger_->ReleaseCompletions();
}

// Activation in one step: on the client's QP the key's SEND is posted with the window's bind, fenced behind
// it, so it is on the wire before rdmad has even seen the bind complete, and carries the key the bind gives.
TEST_F(GrantManagerTest, TheKeyLeavesWithItsBindInOnePostBeforeTheBindCompletes) {
  Build();
  (void)Activate(Request());  // the pool's first window, and the connection path, warmed up
  absl::StatusOr<v1::IssuedGrant> issued = grants_->Issue(Request());
  ASSERT_TRUE(issued.ok()) << issued.status();
  ledger_->HoldCompletions();
  ledger_->ClearEvents();
  clients_.emplace_back();
  ASSERT_EQ(clients_.back().Dial(*fake_cm_, device_, issued->token()).type, fabric::CmEventType::kEstablished);
  const std::string name = issued->grant().name();
  // The bind and the SEND were posted; neither completion has been seen, so the grant is still ACTIVATING.
  ASSERT_TRUE(Eventually([&] { return ledger_->events_of({"send"}).size() == 1; }));
  EXPECT_EQ(grants_->Get(name).value().state(), v1::GRANT_ACTIVATING);
  const std::vector<std::string> posted = ledger_->events_of({"bind_mw", "send"});
  ASSERT_EQ(posted.size(), 2u);
  EXPECT_EQ(posted[0].rfind("bind_mw ", 0), 0u) << posted[0];  // the bind first, then the SEND
  ledger_->ReleaseCompletions();
  ASSERT_TRUE(Eventually([&] { return grants_->Get(name).value().state() == v1::GRANT_ACTIVE; }));
  const v1::Grant g = grants_->Get(name).value();
  const std::vector<wire::GrantMessage> got = Messages(g);
  ASSERT_EQ(got.size(), 1u);  // once: not again when the bind's completion arrives
  EXPECT_EQ(got[0].type, wire::GrantMessageType::kActive);
  const v1::MemoryWindow w = registry_->GetMw(g.window()).value();
  EXPECT_EQ(got[0].rkey, w.rkey());
  EXPECT_EQ(got[0].remote_addr, w.binding().remote_addr());
  EXPECT_EQ(got[0].length, 8192u);
}

std::string ThreadName() {
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  return name;
}

// The fake rxe0 needs a bounds region for a window: it is pinned while the client's connection is being
// accepted, on a pin worker, once per activation; the bind that follows pins nothing more.
TEST_F(GrantManagerTest, TheBoundsRegionIsPinnedOnAPinWorkerDuringTheHandshakeOncePerActivation) {
  Build();
  (void)Activate(Request());  // the pool's first window, and the connection path, warmed up
  Mutex mu;
  std::vector<std::string> pinned_on;
  ledger_->SetRegMrHook([&] {
    MutexLock lock(&mu);
    pinned_on.push_back(ThreadName());
  });
  for (int i = 0; i < 3; ++i) (void)Activate(Request(4096 * i, 4096));
  ledger_->SetRegMrHook(nullptr);
  MutexLock lock(&mu);
  ASSERT_EQ(pinned_on.size(), 3u);
  for (const std::string& t : pinned_on) EXPECT_EQ(t.rfind("pin-", 0), 0u) << t;
}

// The pin starts at the connect request, before the accept: a pin that fails there (here ENOMEM) is not the
// activation's; the bind pins again and the grant activates.
TEST_F(GrantManagerTest, APinAheadThatFailsLeavesTheBindToPinAgain) {
  Build();
  (void)Activate(Request());
  const int regs = ledger_->calls("reg_mr");
  ledger_->FailNextRegMr(ENOMEM);
  const v1::Grant g = Activate(Request(0, 4096));
  EXPECT_EQ(g.state(), v1::GRANT_ACTIVE);
  EXPECT_EQ(ledger_->calls("reg_mr"), regs + 2);
}

// Pinned and ready before ESTABLISHED: the activation binds over it and pins nothing more.
TEST_F(GrantManagerTest, ABoundsRegionPinnedBeforeEstablishedIsTheOneTheBindUses) {
  Build();
  (void)Activate(Request());
  absl::StatusOr<v1::IssuedGrant> issued = grants_->Issue(Request(0, 8192));
  ASSERT_TRUE(issued.ok()) << issued.status();
  const uint64_t base = registry_->UsageOfPd(pd_).value().mr_bytes;
  const int regs = ledger_->calls("reg_mr");
  grants_->OnAccepting(issued->grant().name());  // as the listener does at the connect request
  ASSERT_TRUE(Eventually([&] { return ledger_->calls("reg_mr") == regs + 1; }));
  EXPECT_TRUE(Eventually([&] { return registry_->UsageOfPd(pd_).value().mr_bytes == base + 8192; }));
  clients_.emplace_back();
  ASSERT_EQ(clients_.back().Dial(*fake_cm_, device_, issued->token()).type, fabric::CmEventType::kEstablished);
  const std::string name = issued->grant().name();
  ASSERT_TRUE(Eventually([&] { return grants_->Get(name).value().state() == v1::GRANT_ACTIVE; }));
  EXPECT_EQ(ledger_->calls("reg_mr"), regs + 1);  // the listener's OnAccepting found it pinned; the bind used it
  EXPECT_EQ(registry_->UsageOfPd(pd_).value().mr_bytes, base + 8192);
  ASSERT_TRUE(Revoke(name).ok());
  EXPECT_EQ(registry_->UsageOfPd(pd_).value().mr_bytes, base);
}

// Pinned ahead, then the grant ends before its client connects: the region is given back with the end,
// and the PD can be deleted.
TEST_F(GrantManagerTest, ABoundsRegionPinnedAheadIsGivenBackWhenItsGrantEndsUnconnected) {
  Build();
  absl::StatusOr<v1::IssuedGrant> issued = grants_->Issue(Request(0, 8192));
  ASSERT_TRUE(issued.ok()) << issued.status();
  const uint64_t base = registry_->UsageOfPd(pd_).value().mr_bytes;
  const int regs = ledger_->calls("reg_mr");
  grants_->OnAccepting(issued->grant().name());
  ASSERT_TRUE(Eventually([&] { return ledger_->calls("reg_mr") == regs + 1; }));
  ASSERT_TRUE(Eventually([&] { return registry_->UsageOfPd(pd_).value().mr_bytes == base + 8192; }));
  ASSERT_TRUE(Revoke(issued->grant().name()).ok());
  EXPECT_EQ(registry_->UsageOfPd(pd_).value().mr_bytes, base);  // given back before RevokeGrant answered
  ASSERT_TRUE(Retire("", pd_, true).ok());
  v1::DeletePdRequest del;
  del.set_name(pd_);
  del.set_cascade(true);
  // (The issue's pool refill may still be allocating a window on the PD: that answers "retry" for a moment.)
  absl::Status deleted;
  EXPECT_TRUE(Eventually([&] { return (deleted = registry_->DeletePd(del).status()).ok(); })) << deleted;
  grants_->Unretire("", pd_);
}

// ESTABLISHED before the pin is done: the grant waits in ACTIVATING with nothing posted, and the pin
// worker posts the bind and the key as soon as the region is pinned; a revocation meanwhile waits for the
// activation, then kills the key, and the region is given back.
TEST_F(GrantManagerTest, EstablishedBeforeTheBoundsRegionIsPinnedThePinWorkerActivatesWhenItIsDone) {
  Build();
  (void)Activate(Request());
  const uint64_t base = registry_->UsageOfPd(pd_).value().mr_bytes;
  for (bool revoke : {false, true}) {
    SCOPED_TRACE(revoke ? "revoked while pinning" : "activated");
    Notification entered, go;
    ledger_->SetRegMrHook([&] {
      entered.Notify();
      go.WaitForNotification();
    });
    absl::StatusOr<v1::IssuedGrant> issued = grants_->Issue(Request(0, 8192));
    ASSERT_TRUE(issued.ok()) << issued.status();
    const std::string name = issued->grant().name();
    ledger_->ClearEvents();
    clients_.emplace_back();
    ASSERT_EQ(clients_.back().Dial(*fake_cm_, device_, issued->token()).type, fabric::CmEventType::kEstablished);
    ASSERT_TRUE(entered.WaitForNotificationWithTimeout(absl::Seconds(10)));
    ASSERT_TRUE(Eventually([&] { return grants_->Get(name).value().state() == v1::GRANT_ACTIVATING; }));
    EXPECT_TRUE(ledger_->events_of({"bind_mw"}).empty());  // nothing bound before the pin is done
    std::atomic<bool> answered{false};
    if (revoke) grants_->Revoke(name, [&](absl::StatusOr<v1::Grant>) { answered = true; });
    const int regs = ledger_->calls("reg_mr");
    go.Notify();
    if (revoke) {
      ASSERT_TRUE(Eventually([&] { return answered.load(); }));
      const v1::Grant g = grants_->Get(name).value();
      EXPECT_EQ(g.state(), v1::GRANT_ENDED);
      EXPECT_EQ(g.end_reason(), v1::END_REVOKED);
    } else {
      ASSERT_TRUE(Eventually([&] { return grants_->Get(name).value().state() == v1::GRANT_ACTIVE; }));
      const v1::Grant g = grants_->Get(name).value();
      ASSERT_TRUE(Eventually([&] { return !Messages(g).empty(); }));
      EXPECT_EQ(Messages(g)[0].type, wire::GrantMessageType::kActive);
      EXPECT_EQ(Messages(g)[0].rkey, registry_->GetMw(g.window()).value().rkey());
      EXPECT_EQ(registry_->UsageOfPd(pd_).value().mr_bytes, base + 8192);
      ASSERT_TRUE(Revoke(name).ok());
    }
    EXPECT_EQ(ledger_->calls("reg_mr"), regs + 1);  // the held pin itself; the bind pinned nothing more
    ledger_->SetRegMrHook(nullptr);
    EXPECT_TRUE(Eventually([&] { return registry_->UsageOfPd(pd_).value().mr_bytes == base; }));
  }
}

// The safety of the one step: a bind that fails (its completion in error, the QP with it) flushes the SEND
// behind it, so the key never reaches the client, and the grant ends ACTIVATION_FAILED.
TEST_F(GrantManagerTest, ABindThatFailsNeverLetsItsKeyOut) {
  Build();
  (void)Activate(Request());
  absl::StatusOr<v1::IssuedGrant> issued = grants_->Issue(Request());
  ASSERT_TRUE(issued.ok()) << issued.status();
  ledger_->FailNextBind();
  ledger_->ClearEvents();
  const int sends = ledger_->calls("send");
  clients_.emplace_back();
  ASSERT_EQ(clients_.back().Dial(*fake_cm_, device_, issued->token()).type, fabric::CmEventType::kEstablished);
  const std::string name = issued->grant().name();
  ASSERT_TRUE(Eventually([&] { return grants_->Get(name).value().state() == v1::GRANT_ENDED; }));
  const v1::Grant g = grants_->Get(name).value();
  EXPECT_EQ(g.end_reason(), v1::END_ACTIVATION_FAILED);
  // The key's SEND, posted with the bind, and the FAILED goodbye: both flushed, nothing reached the client.
  EXPECT_TRUE(Eventually([&] { return ledger_->calls("send") - sends == 2; }));
  EXPECT_TRUE(ledger_->events_of({"send"}).empty());
  EXPECT_TRUE(ledger_->events_of({"bind_mw"}).empty());
}

// rdmad destroys the grant manager before the CM manager and the registry: a completion of the manager's that
// arrives afterwards (here an invalidation held in the fabric) must find nothing of it to run. Without the
// lifeline, ASan reports the callback's heap-use-after-free.
TEST_F(GrantManagerTest, ACompletionArrivingAfterTheManagerIsGoneRunsNothingOfIt) {
  Build();
  v1::Grant g = Activate(Request());
  ledger_->HoldCompletions();
  auto answered = std::make_shared<std::atomic<bool>>(false);
  grants_->Revoke(g.name(), [answered](absl::StatusOr<v1::Grant>) { *answered = true; });
  ASSERT_TRUE(Eventually([&] { return ledger_->QueuedCompletions() > 0; }));
  listener_->set_grant_connections(nullptr);  // the client's DISCONNECTED (TearDown) must not reach it either
  grants_->Shutdown();
  grants_.reset();
  ledger_->ReleaseCompletions();
  // The registry commits the invalidation, then calls the manager's callback on the same thread; TearDown's
  // registry destruction waits for that thread.
  EXPECT_TRUE(Eventually([&] { return !registry_->GetMw(g.window()).value().bound(); }));
  EXPECT_FALSE(*answered);  // the manager is gone: nothing of it ran
}

TEST_F(GrantManagerTest, ABatchIsAllOrNothingAndBadInputNamesTheField) {
  Build();
  v1::IssueGrantsRequest batch;
  *batch.add_grants() = Request();
  *batch.add_grants() = Request(0, 2u << 20);  // past the end of the MR
  EXPECT_TRUE(IsError(grants_->IssueBatch(batch), absl::StatusCode::kOutOfRange, "grants[1].length"));
  EXPECT_THAT(grants_->List(v1::ListGrantsRequest()).value(), IsEmpty());
  batch.mutable_grants(1)->set_length(4096);
  v1::IssueGrantsResponse ok = grants_->IssueBatch(batch).value();
  EXPECT_EQ(ok.grants_size(), 2);
  v1::ListGrantsRequest by;
  by.set_principal("app-7");
  EXPECT_EQ(grants_->List(by).value().size(), 2u);
  by.set_principal("nobody");
  EXPECT_THAT(grants_->List(by).value(), IsEmpty());

  v1::IssueGrantRequest r = Request();
  r.clear_principal();
  EXPECT_TRUE(IsError(grants_->Issue(r), absl::StatusCode::kInvalidArgument, "principal"));
  r = Request();
  r.set_length(0);
  EXPECT_TRUE(IsError(grants_->Issue(r), absl::StatusCode::kInvalidArgument, "length"));
  r = Request();
  r.add_access(v1::REMOTE_ATOMIC);
  EXPECT_TRUE(IsError(grants_->Issue(r), absl::StatusCode::kInvalidArgument, "access"));
  r = Request();
  r.set_mr("mrs/99");
  EXPECT_TRUE(IsError(grants_->Issue(r), absl::StatusCode::kNotFound, "mr"));
  r = Request();
  r.set_ttl_ms(48u * 3600 * 1000);
  EXPECT_TRUE(IsError(grants_->Issue(r), absl::StatusCode::kInvalidArgument, "ttl_ms"));
  v1::RegisterMrRequest plain;
  plain.set_pd(pd_);
  plain.mutable_source()->mutable_anonymous()->set_size(4096);
  plain.add_access(v1::REMOTE_READ);
  r = Request(0, 4096);
  r.set_mr(registry_->RegisterMr(plain).value().name());
  EXPECT_TRUE(IsError(grants_->Issue(r), absl::StatusCode::kFailedPrecondition, "mr"));  // no MW_BIND
  EXPECT_TRUE(IsError(grants_->Get("grants/0"), absl::StatusCode::kInvalidArgument, "name"));
  EXPECT_TRUE(IsError(grants_->Get("grants/77"), absl::StatusCode::kNotFound, "name"));
}


// The rdmad-wide limit grants counts every grant not yet ended, whoever issued it. Past it an issue is
// refused before anything is made (no grant, no token); a batch needs room for all of its grants; an ended
// grant frees its place.
TEST_F(GrantManagerTest, TheRdmadWideGrantsLimitRefusesIssuesPastItAndABatchAsAWhole) {
  max_grants_ = 3;
  Build();
  absl::StatusOr<v1::IssuedGrant> first = grants_->Issue(Request());
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(grants_->Issue(Request()).ok());
  EXPECT_EQ(grants_->Live(), 2u);
  const size_t tokens_before = tokens_.Outstanding();

  v1::IssueGrantsRequest batch;
  *batch.add_grants() = Request();
  *batch.add_grants() = Request();
  absl::StatusOr<v1::IssueGrantsResponse> refused = grants_->IssueBatch(batch);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("limit grants of rdmad: limit 3, in use 2; this call needs 2"));
  EXPECT_EQ(grants_->List(v1::ListGrantsRequest()).value().size(), 2u);  // all or nothing: none of the two
  EXPECT_EQ(tokens_.Outstanding(), tokens_before);
  EXPECT_EQ(grants_->Live(), 2u);

  batch.mutable_grants()->RemoveLast();
  ASSERT_TRUE(grants_->IssueBatch(batch).ok());  // room for one
  absl::StatusOr<v1::IssuedGrant> past = grants_->Issue(Request());
  ASSERT_EQ(past.status().code(), absl::StatusCode::kResourceExhausted) << past.status();
  EXPECT_THAT(past.status().message(), HasSubstr("limit grants of rdmad: limit 3, in use 3; this call needs 1"));
  EXPECT_EQ(grants_->List(v1::ListGrantsRequest()).value().size(), 3u);
  EXPECT_EQ(tokens_.Outstanding(), tokens_before + 1);

  // An ended grant (revoked here; expired or disconnected alike) no longer counts.
  ASSERT_TRUE(Revoke(first->grant().name()).ok());
  EXPECT_EQ(grants_->Live(), 2u);
  EXPECT_TRUE(grants_->Issue(Request()).ok());
  EXPECT_EQ(grants_->Issue(Request()).status().code(), absl::StatusCode::kResourceExhausted);
}

// Issues racing from many threads never pass the limit together: exactly `limit` of them are issued.
TEST_F(GrantManagerTest, ConcurrentIssuesStopExactlyAtTheGrantsLimit) {
  max_grants_ = 20;
  Build();
  std::atomic<int> issued{0}, exhausted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 6; ++i) {
        v1::IssueGrantsRequest batch;  // a mix of single issues and batches of 2
        *batch.add_grants() = Request();
        if (i % 2) *batch.add_grants() = Request();
        absl::Status s = i % 2 ? grants_->IssueBatch(batch).status() : grants_->Issue(Request()).status();
        if (s.ok()) issued += batch.grants_size();
        if (s.code() == absl::StatusCode::kResourceExhausted) ++exhausted;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_LE(issued.load(), 20);
  EXPECT_GT(exhausted.load(), 0);
  EXPECT_EQ(grants_->Live(), static_cast<size_t>(issued.load()));
  EXPECT_EQ(grants_->List(v1::ListGrantsRequest()).value().size(), static_cast<size_t>(issued.load()));
  // Full unless a last batch of 2 found one place: it then takes none.
  EXPECT_GE(issued.load(), 19);
}

// A session (protocol version 2) under contention, for TSan: ACTIVATEs reach the listener and the grant layer
// on the device's thread while other grants of the same session are revoked from a second thread, and then
// the client leaves. Every grant settles (ended, or refused and left ISSUED), the connection goes with its QP,
// and TearDown finds nothing left at the fake NIC and no rule broken.
TEST_F(GrantManagerTest, ASessionsActivationsRevocationsAndItsClientLeavingRaceCleanly) {
  Build();
  absl::StatusOr<v1::IssuedGrant> first = grants_->Issue(Request(0, 4096));
  ASSERT_TRUE(first.ok()) << first.status();
  clients_.emplace_back();
  ASSERT_EQ(clients_.back().Dial(*fake_cm_, device_, wire::EncodeConnectRequest(first->token(), 2)).type,
            fabric::CmEventType::kEstablished);
  const std::string name = first->grant().name();
  ASSERT_TRUE(Eventually([&] { return grants_->Get(name).value().state() == v1::GRANT_ACTIVE; }));
  const std::string cm_id = grants_->Get(name).value().cm_id();
  EXPECT_EQ(grants_->Sessions(), 1u);
  std::vector<v1::IssuedGrant> more;
  for (int i = 1; i <= 24; ++i) {
    absl::StatusOr<v1::IssuedGrant> g = grants_->Issue(Request(4096 * i, 4096));
    ASSERT_TRUE(g.ok()) << g.status();
    more.push_back(*g);
  }
  std::thread revoker([&] {
    for (size_t i = 0; i < more.size(); i += 2) (void)Revoke(more[i].grant().name());
  });
  for (size_t i = 0; i < more.size(); ++i) {
    wire::GrantMessage activate;
    activate.version = wire::kSessionMessageVersion;
    activate.type = wire::GrantMessageType::kActivate;
    activate.tag = i + 1;
    activate.token = more[i].token();
    ASSERT_TRUE(clients_.back().Send(wire::EncodeGrantMessage(activate)).ok());
  }
  revoker.join();
  clients_.back().Leave();
  more.push_back(*first);
  for (const v1::IssuedGrant& g : more) {
    EXPECT_TRUE(Eventually([&] {
      const v1::GrantState s = grants_->Get(g.grant().name()).value().state();
      return s == v1::GRANT_ENDED || s == v1::GRANT_ISSUED;
    })) << grants_->Get(g.grant().name()).value().DebugString();
  }
  EXPECT_TRUE(Eventually([&] { return !cm_->GetCmId(cm_id).ok(); }));
  EXPECT_TRUE(Eventually([&] { return grants_->Sessions() == 0; }));
}

}  // namespace
}  // namespace rdmad::grants
