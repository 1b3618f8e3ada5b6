// rdmad's scrape-time and hub-driven metrics (server/metrics/rdmad_metrics.h) on the fake fabric: objects and
// pinned bytes by tenant as the registry, the grant manager and the token store hold them, and grant events
// counted from the grant hub. (The same on rxe0, with rdma_cm events and the data plane: tests/conformance/
// metrics_test.cc.)
#include <map>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "server/auth/policy.h"
#include "server/cm/manager.h"
#include "server/cm/token.h"
#include "server/common/sync.h"
#include "server/config.h"
#include "server/dataplane/listener.h"
#include "server/grants/manager.h"
#include "server/metrics/rdmad_metrics.h"
#include "server/tenancy/gate.h"
#include "tests/unit/fake_cm.h"
#include "tests/unit/fake_fabric.h"

namespace rdmad::metrics {
namespace {


bool Contains(const std::string& text, const std::string& line) {
  return text.find(line + "\n") != std::string::npos;
}

class RdmadMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ledger_ = std::make_shared<fake::FakeLedger>();
    auto fabric = std::make_unique<fake::FakeFabric>(
        std::vector<fabric::DeviceInfo>{fake::MakeDeviceInfo("rxe0")}, ledger_);
    fake_cm_ = std::make_unique<fake::FakeCm>(fabric->devices(),
                                              std::map<std::string, std::string>{{"10.0.2.15", "rxe0"}});
    fabric->set_cm(fake_cm_.get());
    fabric_ = fabric.get();
    registry_ = std::make_unique<Registry>(std::move(fabric), Registry::Options());
    cm_ = std::make_unique<cm::CmManager>(fake_cm_.get(), registry_.get(), cm::CmManager::Options());
    ASSERT_TRUE(cm_->Start().ok());
    dataplane::Listener::Options data_plane;
    data_plane.listen = {{"10.0.2.15", 7471}};  // grants need the data-plane listener
    listener_ = std::make_unique<dataplane::Listener>(cm_.get(), registry_.get(), &tokens_, data_plane);
    ASSERT_TRUE(listener_->Start().ok());
    grants::GrantManager::Options options;
    options.pool_size = 0;
    grants_ = std::make_unique<grants::GrantManager>(registry_.get(), cm_.get(), listener_.get(), &tokens_, options);
    TenantConfig t;
    t.name = "t";
    t.principals = {"spiffe://t"};
    config_.tenants = {t};
    policy_ = std::make_unique<auth::Policy>(config_);
    gate_ = std::make_unique<tenancy::Gate>(policy_.get(),
                                            tenancy::Gate::Deps{registry_.get(), cm_.get(), grants_.get(), &tokens_});
    metrics_.WatchEvents(cm_.get(), grants_.get());
    metrics_.SetSources({registry_.get(), cm_.get(), grants_.get(), &tokens_, gate_.get(), fabric_});
  }
  void TearDown() override {
    grants_->Shutdown();
    cm_->Quiesce();
    grants_.reset();
    cm_.reset();
    registry_.reset();
  }

  std::shared_ptr<fake::FakeLedger> ledger_;
  std::unique_ptr<fake::FakeCm> fake_cm_;
  fabric::Fabric* fabric_ = nullptr;
  cm::TokenStore tokens_;
  std::unique_ptr<dataplane::Listener> listener_;  // outlives cm_, whose dispatchers call it
  RdmadMetrics metrics_;  // before the managers: they are destroyed first (rdmad_metrics.h)
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<cm::CmManager> cm_;
  std::unique_ptr<grants::GrantManager> grants_;
  Config config_;
  std::unique_ptr<auth::Policy> policy_;
  std::unique_ptr<tenancy::Gate> gate_;
};

TEST_F(RdmadMetricsTest, ObjectsPinnedBytesAndGrantEventsByTenant) {
  const std::string empty = metrics_.Render();
  EXPECT_TRUE(Contains(empty, "rdmad_objects{kind=\"pds\",tenant=\"t\"} 0")) << empty;
  EXPECT_TRUE(Contains(empty, "rdmad_objects{kind=\"pds\",tenant=\"\"} 0")) << empty;
  EXPECT_TRUE(Contains(empty, "rdmad_pinned_bytes{tenant=\"t\"} 0")) << empty;
  EXPECT_TRUE(Contains(empty, "rdmad_dataplane_connections 0")) << empty;
  EXPECT_TRUE(Contains(empty, "rdmad_nic_remote_access_errors_total{device=\"rxe0\"} 0")) << empty;
  // The fake's rxe0 answers the window-bounds probe as rxe does: not enforced, so a bounds region ("auto").
  EXPECT_TRUE(Contains(empty, "rdmad_mw_bounds_region{device=\"rxe0\",enforced=\"false\"} 1")) << empty;

  v1::CreatePdRequest pr;
  pr.set_device("rxe0");
  const std::string mine = registry_->CreatePd(pr, "t").value().name();
  const std::string other = registry_->CreatePd(pr).value().name();  // in no tenant
  v1::RegisterMrRequest r;
  r.set_pd(mine);
  r.mutable_source()->mutable_anonymous()->set_size(3 * 4096);
  for (v1::Access a : {v1::LOCAL_WRITE, v1::REMOTE_READ, v1::MW_BIND}) r.add_access(a);
  const std::string mr = registry_->RegisterMr(r).value().name();
  r.set_pd(other);
  r.mutable_source()->mutable_anonymous()->set_size(4096);
  const std::string other_mr = registry_->RegisterMr(r).value().name();
  v1::IssueGrantRequest g;
  g.set_mr(mr);
  g.set_length(4096);
  g.set_principal("spiffe://reader");
  absl::StatusOr<v1::IssuedGrant> issued = grants_->Issue(g);
  ASSERT_TRUE(issued.ok()) << issued.status();
  const std::string live = metrics_.Render();
  EXPECT_TRUE(Contains(live, "rdmad_objects{kind=\"pds\",tenant=\"t\"} 1")) << live;
  EXPECT_TRUE(Contains(live, "rdmad_objects{kind=\"pds\",tenant=\"\"} 1")) << live;
  EXPECT_TRUE(Contains(live, "rdmad_objects{kind=\"mrs\",tenant=\"t\"} 1")) << live;
  EXPECT_TRUE(Contains(live, "rdmad_objects{kind=\"grants\",tenant=\"t\"} 1")) << live;
  EXPECT_TRUE(Contains(live, "rdmad_objects{kind=\"tokens\",tenant=\"t\"} 1")) << live;  // the grant's
  EXPECT_TRUE(Contains(live, "rdmad_pinned_bytes{tenant=\"t\"} 12288")) << live;
  EXPECT_TRUE(Contains(live, "rdmad_pinned_bytes{tenant=\"\"} 4096")) << live;
  EXPECT_TRUE(Contains(live, "rdmad_grant_events_total{event=\"issued\",reason=\"\"} 1")) << live;

  absl::StatusOr<v1::Grant> revoked =
      AwaitResult<v1::Grant>([&](Done<v1::Grant> d) { grants_->Revoke(issued->grant().name(), std::move(d)); });
  ASSERT_TRUE(revoked.ok()) << revoked.status();
  const std::string after = metrics_.Render();
  EXPECT_TRUE(Contains(after, "rdmad_grant_events_total{event=\"revoked\",reason=\"revoked\"} 1")) << after;
  EXPECT_TRUE(Contains(after, "rdmad_objects{kind=\"grants\",tenant=\"t\"} 0")) << after;

  ASSERT_TRUE(registry_->DeregisterMr(mr).ok());
  ASSERT_TRUE(registry_->DeregisterMr(other_mr).ok());
  const std::string gone = metrics_.Render();
  EXPECT_TRUE(Contains(gone, "rdmad_pinned_bytes{tenant=\"t\"} 0")) << gone;
  EXPECT_TRUE(Contains(gone, "rdmad_objects{kind=\"mrs\",tenant=\"t\"} 0")) << gone;
}

}  // namespace
}  // namespace rdmad::metrics
