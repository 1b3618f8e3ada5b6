// The registry's rdmad-wide limits (Registry::Options::limits, config "limits"): PDs, regions, callers'
// windows and QPs stop at their limit with RESOURCE_EXHAUSTED naming it, before the fabric is called; a failed
// creation frees its place; removals free theirs; rdmad's own windows (grants') are not counted.
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/registry/registry.h"
#include "tests/unit/fake_fabric.h"

namespace rdmad {
namespace {

using ::rdmad::fake::FakeLedger;
using ::testing::HasSubstr;

constexpr char kDev[] = "devices/rxe0";

class RegistryLimitsTest : public ::testing::Test {
 protected:
  void Make(Registry::Options::Limits limits) {
    ledger_ = std::make_shared<FakeLedger>();
    Registry::Options options;
    options.limits = limits;
    registry_ = std::make_unique<Registry>(
        std::make_unique<fake::FakeFabric>(std::vector<fabric::DeviceInfo>{fake::MakeDeviceInfo("rxe0", false)},
                                           ledger_),
        options);
  }
  void TearDown() override {
    registry_.reset();
    if (ledger_) EXPECT_EQ(ledger_->live().pds, 0);
  }

  absl::StatusOr<v1::ProtectionDomain> CreatePd() {
    v1::CreatePdRequest r;
    r.set_device(kDev);
    return registry_->CreatePd(r);
  }
  absl::StatusOr<v1::MemoryRegion> RegisterMr(const std::string& pd) {
    v1::RegisterMrRequest r;
    r.set_pd(pd);
    r.mutable_source()->mutable_anonymous()->set_size(4096);
    r.add_access(v1::LOCAL_WRITE);
    r.add_access(v1::MW_BIND);
    return registry_->RegisterMr(r);
  }
  absl::StatusOr<v1::MemoryWindow> AllocMw(const std::string& pd, const std::string& owner = "") {
    v1::AllocMwRequest r;
    r.set_pd(pd);
    r.set_type(v1::TYPE_2);
    return registry_->AllocMw(r, owner);
  }
  absl::StatusOr<v1::QueuePair> CreateQp(const std::string& pd) {
    v1::CreateQpRequest r;
    r.set_pd(pd);
    return registry_->CreateQp(r);
  }
  static ::testing::AssertionResult Over(const absl::Status& s, const std::string& limit) {
    if (s.code() != absl::StatusCode::kResourceExhausted ||
        s.message().find("limit " + limit + " of rdmad") == absl::string_view::npos) {
      return ::testing::AssertionFailure() << "want RESOURCE_EXHAUSTED naming limit " << limit << ", got " << s;
    }
    return ::testing::AssertionSuccess();
  }

  std::shared_ptr<FakeLedger> ledger_;
  std::unique_ptr<Registry> registry_;
};

TEST_F(RegistryLimitsTest, PdsStopAtTheLimitAndADeletionOrAFailedAllocFreesAPlace) {
  Make({.pds = 2});
  absl::StatusOr<v1::ProtectionDomain> a = CreatePd(), b = CreatePd();
  ASSERT_TRUE(a.ok() && b.ok());
  const int allocated = ledger_->live().pds;
  absl::StatusOr<v1::ProtectionDomain> c = CreatePd();
  EXPECT_TRUE(Over(c.status(), "pds"));
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("limit 2, in use 2"));
  EXPECT_EQ(ledger_->live().pds, allocated);  // refused before the fabric was asked
  v1::DeletePdRequest del;
  del.set_name(a->name());
  ASSERT_TRUE(registry_->DeletePd(del).ok());
  ledger_->FailNextAllocPd(ENOMEM);
  EXPECT_EQ(CreatePd().status().code(), absl::StatusCode::kResourceExhausted);  // the fabric's ENOMEM
  EXPECT_TRUE(CreatePd().ok());  // the failure gave its place back
  for (const auto& pd : registry_->ListPds()) {
    v1::DeletePdRequest d;
    d.set_name(pd.name());
    d.set_cascade(true);
    EXPECT_TRUE(registry_->DeletePd(d).ok());
  }
}

TEST_F(RegistryLimitsTest, RegionsWindowsAndQpsStopAtTheirLimitsAcrossPds) {
  Make({.mrs = 2, .mws = 1, .qps = 1});
  const std::string p1 = CreatePd()->name(), p2 = CreatePd()->name();
  ASSERT_TRUE(RegisterMr(p1).ok());
  ASSERT_TRUE(RegisterMr(p2).ok());
  EXPECT_TRUE(Over(RegisterMr(p1).status(), "mrs"));
  ASSERT_TRUE(AllocMw(p1).ok());
  EXPECT_TRUE(Over(AllocMw(p2).status(), "mws"));
  EXPECT_TRUE(AllocMw(p2, "grants/1").ok());  // rdmad's own windows (grants) are not callers' windows
  ASSERT_TRUE(CreateQp(p2).ok());
  EXPECT_TRUE(Over(CreateQp(p1).status(), "qps"));
  // Removing a PD with its children frees their places.
  v1::DeletePdRequest d;
  d.set_name(p1);
  d.set_cascade(true);
  ASSERT_TRUE(registry_->DeletePd(d).ok());
  EXPECT_TRUE(RegisterMr(p2).ok());
  EXPECT_TRUE(AllocMw(p2).ok());
  d.set_name(p2);
  ASSERT_TRUE(registry_->DeletePd(d).ok());
}

TEST_F(RegistryLimitsTest, NoLimitsMeansNone) {
  Make({});
  const std::string pd = CreatePd()->name();
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(RegisterMr(pd).ok()) << i;
  v1::DeletePdRequest d;
  d.set_name(pd);
  d.set_cascade(true);
  ASSERT_TRUE(registry_->DeletePd(d).ok());
}

}  // namespace
}  // namespace rdmad
