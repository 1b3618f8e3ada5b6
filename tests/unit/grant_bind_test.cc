// Registry::BindGrantAsync: the grant layer's bind, by the numbers of objects it resolved once. It binds
// exactly as BindMw would (the window then shows its binding by name), fails like a deleted name when an
// object has gone since, and checks ibv_bind_mw(3)'s rules on the objects as they are now.
// Threads: the test's own; the fake fabric's completions run on the registry's dispatcher.
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/common/status.h"
#include "server/registry/registry.h"
#include "server/registry/rules.h"
#include "tests/support/server_status.h"
#include "tests/unit/fake_fabric.h"

namespace rdmad {
namespace {

using ::rdmad::fake::FakeLedger;
using ::rdmad::test::IsError;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr uint64_t kPage = 4096;

class GrantBindTest : public ::testing::Test {
 protected:
  GrantBindTest() : ledger_(std::make_shared<FakeLedger>()) {
    registry_ = std::make_unique<Registry>(
        std::make_unique<fake::FakeFabric>(std::vector<fabric::DeviceInfo>{fake::MakeDeviceInfo("rxe0")}, ledger_),
        Registry::Options());
    v1::CreatePdRequest pd;
    pd.set_device("rxe0");
    pd_ = registry_->CreatePd(pd).value().name();
  }
  ~GrantBindTest() override {
    registry_.reset();
    EXPECT_THAT(ledger_->violations(), IsEmpty());
    FakeLedger::Counts c = ledger_->live();
    EXPECT_EQ(c.pds + c.mrs + c.mws + c.qps, 0);
  }

  static uint64_t Number(const std::string& name, const char* kind) { return ParseName(name, kind, "name").value(); }
  v1::MemoryRegion NewMr(std::vector<v1::Access> access) {
    v1::RegisterMrRequest r;
    r.set_pd(pd_);
    r.mutable_source()->mutable_anonymous()->set_size(4 * kPage);
    for (v1::Access a : access) r.add_access(a);
    return registry_->RegisterMr(r).value();
  }
  std::string NewWindow(const std::string& owner) {
    v1::AllocMwRequest r;
    r.set_pd(pd_);
    r.set_type(v1::TYPE_2);
    return registry_->AllocMw(r, owner).value().name();
  }
  std::string NewQp() {
    v1::CreateQpRequest r;
    r.set_pd(pd_);
    std::string name = registry_->CreateQp(r).value().name();
    v1::ConnectQpRequest c;
    c.set_name(name);
    c.mutable_remote()->set_qpn(0x4242);
    c.mutable_remote()->set_gid("0000:0000:0000:0000:0000:ffff:0a00:0002");
    EXPECT_TRUE(registry_->ConnectQp(c).ok());
    return name;
  }
  absl::StatusOr<Registry::Key> Bind(const Registry::GrantBind& bind) {
    return AwaitResult<Registry::Key>([&](Done<Registry::Key> d) { registry_->BindGrantAsync(bind, std::move(d)); });
  }
  Registry::GrantBind Of(const std::string& window, const v1::MemoryRegion& mr, const std::string& qp) {
    Registry::GrantBind b;
    b.window = Number(window, "mws");
    b.mr = Number(mr.name(), "mrs");
    b.qp = Number(qp, "qps");
    b.offset = kPage;
    b.length = 2 * kPage;
    b.access = fabric::kRemoteRead;
    return b;
  }

  std::shared_ptr<FakeLedger> ledger_;
  std::unique_ptr<Registry> registry_;
  std::string pd_;
};

TEST_F(GrantBindTest, BindsAsBindMwWouldAndTheWindowShowsItsBindingByName) {
  const v1::MemoryRegion mr = NewMr({v1::LOCAL_WRITE, v1::REMOTE_READ, v1::MW_BIND});
  const std::string window = NewWindow("grants"), qp = NewQp();
  absl::StatusOr<Registry::Key> key = Bind(Of(window, mr, qp));
  ASSERT_TRUE(key.ok()) << key.status();
  const v1::MemoryWindow shown = registry_->GetMw(window).value();
  EXPECT_TRUE(shown.bound());
  EXPECT_EQ(key->rkey, shown.rkey());
  EXPECT_EQ(key->remote_addr, mr.addr() + kPage);
  EXPECT_EQ(shown.binding().mr(), mr.name());
  EXPECT_EQ(shown.binding().qp(), qp);
  EXPECT_EQ(shown.binding().offset(), kPage);
  EXPECT_EQ(shown.binding().length(), 2 * kPage);
  EXPECT_THAT(shown.binding().access(), ElementsAre(v1::REMOTE_READ));
  EXPECT_EQ(shown.binding().remote_addr(), mr.addr() + kPage);
  // Bound: a type 2 window must be invalidated first, as for BindMw.
  EXPECT_TRUE(IsError(Bind(Of(window, mr, qp)).status(), absl::StatusCode::kFailedPrecondition, "name"));
}

TEST_F(GrantBindTest, AnObjectGoneSinceItWasResolvedFailsAsADeletedNameWould) {
  const v1::MemoryRegion mr = NewMr({v1::LOCAL_WRITE, v1::REMOTE_READ, v1::MW_BIND});
  const std::string window = NewWindow("grants"), qp = NewQp();
  Registry::GrantBind bind = Of(window, mr, qp);
  ASSERT_TRUE(registry_->DeleteQp(qp).ok());
  absl::Status gone = Bind(bind).status();
  EXPECT_TRUE(IsError(gone, absl::StatusCode::kNotFound, "qp")) << gone;
  EXPECT_THAT(gone.message(), HasSubstr(qp));
  bind = Of(window, mr, NewQp());
  bind.window = 999;
  EXPECT_TRUE(IsError(Bind(bind).status(), absl::StatusCode::kNotFound, "name"));
  bind = Of(window, mr, NewQp());
  bind.mr = 999;
  EXPECT_TRUE(IsError(Bind(bind).status(), absl::StatusCode::kNotFound, "mr"));
  // Nothing was reserved by the refusals: the window binds.
  EXPECT_TRUE(Bind(Of(window, mr, NewQp())).ok());
}

TEST_F(GrantBindTest, TheManPagesRulesAreCheckedOnTheObjectsAsTheyAreNow) {
  const std::string qp = NewQp();
  // ibv_bind_mw(3): REMOTE_WRITE on a window needs the region's LOCAL_WRITE.
  const v1::MemoryRegion read_only = NewMr({v1::REMOTE_READ, v1::MW_BIND});
  Registry::GrantBind bind = Of(NewWindow("grants"), read_only, qp);
  bind.access = fabric::kRemoteRead | fabric::kRemoteWrite;
  EXPECT_TRUE(IsError(Bind(bind).status(), absl::StatusCode::kFailedPrecondition, "access"));
  // The region needs MW_BIND.
  const v1::MemoryRegion no_bind = NewMr({v1::LOCAL_WRITE, v1::REMOTE_READ});
  EXPECT_TRUE(IsError(Bind(Of(NewWindow("grants"), no_bind, qp)).status(), absl::StatusCode::kFailedPrecondition,
                      "mr"));
  // The range lies inside the region.
  const v1::MemoryRegion mr = NewMr({v1::LOCAL_WRITE, v1::REMOTE_READ, v1::MW_BIND});
  bind = Of(NewWindow("grants"), mr, qp);
  bind.length = 4 * kPage;
  EXPECT_TRUE(IsError(Bind(bind).status(), absl::StatusCode::kOutOfRange, "length"));
  // Only the grant layer's windows: a user's window is not bound behind its owner's back.
  EXPECT_TRUE(IsError(Bind(Of(NewWindow(""), mr, qp)).status(), absl::StatusCode::kFailedPrecondition, "name"));
}

}  // namespace
}  // namespace rdmad
