// Unit tests of rdmad::Registry over the fake fabric (registry_fixture.h) as a whole: the destructor's
// release order (windows, regions, QPs, PDs, devices), registrations and deregistrations from several threads
// at once, and the fake fabric itself, which must catch the verbs-rule violations every other registry test
// relies on it to catch (their TearDown checks it saw none).
//
// Threads: the test's own; four more in ConcurrentRegisterAndDeregisterKeepCountsConsistent, joined before
// it checks; the fake's completions are drained on the test's thread in CatchesVerbsRuleViolations.
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/common/status.h"
#include "tests/unit/registry_fixture.h"

namespace rdmad::registry_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;
using ::testing::UnorderedElementsAreArray;

// ---------------------------------------------------------------------------------------------------------
// Destruction

TEST_F(RegistryTest, DestructorReleasesWindowsThenRegionsThenQpsThenPdsThenDevices) {
  struct Made {
    v1::MemoryRegion mr;
    v1::QueuePair qp;
    v1::MemoryWindow w1, w2;
  };
  std::vector<Made> made;
  for (const char* device : {kEmu, kNat}) {
    const std::string pd = NewPd(device);
    Made m;
    m.mr = NewMr(pd);
    m.qp = NewQp(pd);
    m.w1 = NewMw(pd, v1::TYPE_1);
    m.w2 = NewMw(pd, v1::TYPE_2);
    m.w1 = OK(registry_->BindMw(BindReq(m.w1.name(), m.mr.name(), 0, kPage)));
    m.w2 = OK(registry_->BindMw(BindReq(m.w2.name(), m.mr.name(), kPage, kPage, {v1::REMOTE_WRITE}, m.qp.name())));
    made.push_back(m);
  }
  std::set<uint64_t> user_qps;
  for (const Made& m : made) user_qps.insert(ledger_->QpIdByQpn(m.qp.local().qpn()));
  std::vector<uint64_t> bind_qps;
  for (uint64_t id : CreatedQpIds()) {
    if (!user_qps.count(id)) bind_qps.push_back(id);
  }
  ASSERT_EQ(bind_qps.size(), 2u);
  std::map<std::string, std::string> bounds_of;  // "dealloc_mw W" -> "dereg_mr B" (W's bounds MR)
  for (const Made& m : made) {
    for (const v1::MemoryWindow* w : {&m.w1, &m.w2}) {
      const uint64_t id = ledger_->MwIdByRkey(w->rkey());
      bounds_of["dealloc_mw " + S(id)] = "dereg_mr " + S(ledger_->MwBoundMr(id));
    }
  }
  ASSERT_EQ(bounds_of.size(), 4u);
  auto mr = [&](const v1::MemoryRegion& m) { return "dereg_mr " + S(ledger_->MrIdByLkey(m.lkey())); };
  auto qp = [&](const v1::QueuePair& q) { return "destroy_qp " + S(ledger_->QpIdByQpn(q.local().qpn())); };
  const std::vector<std::string> regions = {mr(made[0].mr), mr(made[1].mr)};
  const std::vector<std::string> qps = {qp(made[0].qp), qp(made[1].qp)};
  ledger_->ClearEvents();
  registry_.reset();
  // Within a kind the order is the registry's business; across kinds it is fixed. Each window's bounds MR
  // goes right after the window; each PD's internal bind QP goes with (just before) its PD.
  std::vector<std::string> ev =
      ledger_->events_of({"dealloc_mw", "dereg_mr", "destroy_qp", "dealloc_pd", "close_device"});
  ASSERT_EQ(ev.size(), 18u) << ::testing::PrintToString(ev);
  std::set<std::string> windows_seen;
  for (size_t i = 0; i < 8; i += 2) {
    ASSERT_TRUE(bounds_of.count(ev[i])) << ev[i];
    EXPECT_EQ(ev[i + 1], bounds_of[ev[i]]);
    windows_seen.insert(ev[i]);
  }
  EXPECT_EQ(windows_seen.size(), 4u);
  ev.erase(ev.begin(), ev.begin() + 8);  // the windows are checked; now regions, QPs, PDs, devices
  EXPECT_THAT(std::vector<std::string>(ev.begin(), ev.begin() + 2), UnorderedElementsAreArray(regions));
  EXPECT_THAT(std::vector<std::string>(ev.begin() + 2, ev.begin() + 4), UnorderedElementsAreArray(qps));
  std::vector<std::string> pds(ev.begin() + 4, ev.begin() + 8);
  if (pds[1] == "dealloc_pd 2") {  // PD 2 went first
    std::swap(pds[0], pds[2]);
    std::swap(pds[1], pds[3]);
  }
  EXPECT_THAT(pds, ElementsAre("destroy_qp " + S(bind_qps[0]), "dealloc_pd 1", "destroy_qp " + S(bind_qps[1]),
                               "dealloc_pd 2"));
  EXPECT_THAT(std::vector<std::string>(ev.begin() + 8, ev.end()),
              UnorderedElementsAre("close_device rxe0", "close_device rxe1"));
  EXPECT_THAT(ledger_->violations(), IsEmpty());
  EXPECT_EQ(Live(), "pds=0 mrs=0 mws=0 qps=0");
}

// ---------------------------------------------------------------------------------------------------------
// Threads

TEST_F(RegistryTest, ConcurrentRegisterAndDeregisterKeepCountsConsistent) {
  const std::string pd = NewPd();
  constexpr int kThreads = 4, kIterations = 40;
  std::mutex names_mu;
  std::set<std::string> names;
  std::vector<std::string> kept;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIterations; ++i) {
        absl::StatusOr<v1::MemoryRegion> mr = registry_->RegisterMr(AnonReq(pd, kPage * (1 + (i % 3))));
        if (!mr.ok()) {
          failures++;
          continue;
        }
        {
          std::lock_guard<std::mutex> lock(names_mu);
          names.insert(mr->name());
        }
        if (i % 4 == t % 4) {  // keep some
          std::lock_guard<std::mutex> lock(names_mu);
          kept.push_back(mr->name());
        } else if (!registry_->DeregisterMr(mr->name()).ok()) {
          failures++;
        }
        if (absl::StatusOr<v1::ProtectionDomain> p = registry_->GetPd(pd); !p.ok()) failures++;
      }
    });
  }
  // Meanwhile, list and read from this thread.
  for (int i = 0; i < kIterations; ++i) {
    absl::StatusOr<std::vector<v1::MemoryRegion>> all = registry_->ListMrs(v1::ListMrsRequest());
    EXPECT_TRUE(all.ok());
    if (all.ok()) {
      for (const auto& m : *all) EXPECT_EQ(m.state(), v1::MR_READY);
    }
  }
  for (auto& th : threads) th.join();

  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(names.size(), static_cast<size_t>(kThreads * kIterations));  // every name distinct
  EXPECT_EQ(ledger_->calls("reg_mr"), kThreads * kIterations);
  EXPECT_EQ(Pd(pd).mr_count(), kept.size());
  EXPECT_EQ(OK(registry_->ListMrs(v1::ListMrsRequest())).size(), kept.size());
  EXPECT_EQ(ledger_->live().mrs, static_cast<int>(kept.size()));
  v1::DeletePdRequest del;
  del.set_name(pd);
  del.set_cascade(true);
  EXPECT_EQ(OK(registry_->DeletePd(del)).deleted_size(), static_cast<int>(kept.size()) + 1);
  EXPECT_EQ(Live(), "pds=0 mrs=0 mws=0 qps=0");
}

// ---------------------------------------------------------------------------------------------------------
// The fake itself: it must catch the rule violations the tests above rely on it to catch.

TEST(FakeFabricTest, CatchesVerbsRuleViolations) {
  auto ledger = std::make_shared<FakeLedger>();
  {
    fake::FakeFabric fabric({fake::MakeDeviceInfo("rxe0")}, ledger);
    ASSERT_EQ(fabric.devices().size(), 1u);
    absl::StatusOr<std::unique_ptr<fabric::Pd>> pd = fabric.devices()[0]->AllocPd();
    ASSERT_TRUE(pd.ok());
    std::vector<char> buf(2 * kPage);
    absl::StatusOr<std::unique_ptr<fabric::Mr>> mr =
        (*pd)->RegMr(buf.data(), buf.size(), fabric::kLocalWrite | fabric::kMwBind);
    ASSERT_TRUE(mr.ok());
    absl::StatusOr<std::unique_ptr<fabric::Mw>> mw = (*pd)->AllocMw(fabric::MwType::kType1);
    ASSERT_TRUE(mw.ok());
    fabric::QpOptions options;
    options.gid_index = 1;
    absl::StatusOr<std::unique_ptr<fabric::Qp>> qp = (*pd)->CreateQp(options);
    ASSERT_TRUE(qp.ok());
    EXPECT_EQ((*qp)->state(), fabric::QpState::kInit);

    fabric::BindSpec spec;
    spec.mr = mr->get();
    spec.addr = (*mr)->addr();
    spec.length = kPage;
    spec.access = fabric::kRemoteRead;
    fabric::Device* device = fabric.devices()[0];
    // Post, then drain the device's completions on this thread, as the dispatcher would.
    auto bind = [&](const fabric::BindSpec& s) -> absl::StatusOr<uint32_t> {
      absl::StatusOr<uint32_t> out = absl::UnknownError("no completion");
      if (absl::Status posted = (*qp)->PostBind(**mw, s, [&](absl::StatusOr<uint32_t> r) { out = r; }); !posted.ok()) {
        return posted;
      }
      device->DrainCompletions();
      return out;
    };
    EXPECT_FALSE(bind(spec).ok());  // not in RTS
    EXPECT_EQ(ledger->violations().size(), 1u);
    ASSERT_TRUE((*qp)->Connect((*qp)->local()).ok());
    EXPECT_EQ((*qp)->state(), fabric::QpState::kRts);
    spec.length = 3 * kPage;
    EXPECT_FALSE(bind(spec).ok());  // past the MR
    EXPECT_EQ((*qp)->state(), fabric::QpState::kError);
    ASSERT_TRUE((*qp)->Connect((*qp)->local()).ok());
    spec.length = kPage;
    const uint32_t before = (*mw)->rkey();
    absl::StatusOr<uint32_t> rkey = bind(spec);
    ASSERT_TRUE(rkey.ok());
    EXPECT_EQ(*rkey, fake::IncRkey(before));
    EXPECT_EQ((*mw)->rkey(), *rkey);
    // ibv_dereg_mr refuses while a window is bound.
    absl::Status busy = (*mr)->Release();
    EXPECT_EQ(ErrnoOf(busy), EBUSY);
    EXPECT_EQ(ledger->live().mrs, 1);
    absl::Status invalidated = absl::UnknownError("no completion");
    ASSERT_TRUE((*qp)->PostInvalidate(**mw, **mr, [&](absl::Status r) { invalidated = r; }).ok());
    device->DrainCompletions();
    ASSERT_TRUE(invalidated.ok());
    EXPECT_TRUE((*mr)->Release().ok());
    EXPECT_EQ(ledger->live().mrs, 0);
    EXPECT_EQ(ledger->violations().size(), 2u);
    // A PD destroyed while it holds a window and a QP.
    pd->reset();
    EXPECT_EQ(ledger->violations().size(), 3u);
    EXPECT_THAT(ledger->violations().back(), HasSubstr("pd 1 deallocated while it holds 2 object(s)"));
  }
  EXPECT_EQ(ledger->live().devices, 0);
  EXPECT_THAT(ledger->events_of({"dealloc_pd", "dealloc_mw", "destroy_qp", "close_device"}),
              ElementsAre("dealloc_pd 1", "destroy_qp 1", "dealloc_mw 1", "close_device rxe0"));
}

}  // namespace
}  // namespace rdmad::registry_test
