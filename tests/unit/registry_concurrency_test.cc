// The registry's concurrency design (server/registry/registry.h, docs/dev/architecture.md), over the fake
// fabric with latches, never timings: while a bind or a registration is held inside the fabric, other
// RPCs on other objects complete, conflicting ones are refused or queued (never parked), and the
// registry shuts down without hanging or leaking.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/common/status.h"
#include "server/common/sync.h"
#include "server/registry/registry.h"
#include "tests/support/eventually.h"
#include "tests/support/server_status.h"
#include "tests/unit/fake_fabric.h"

namespace rdmad {
namespace {

using ::rdmad::fake::FakeLedger;
using ::rdmad::test::IsError;
using ::testing::IsEmpty;

constexpr uint64_t kPage = 4096;

// The result of an asynchronous registry call, readable once it arrived.
template <typename T>
struct Pending {
  Notification arrived;
  absl::StatusOr<T> result = absl::UnknownError("not arrived");
  Done<T> Callback() {
    return [this](absl::StatusOr<T> r) {
      result = std::move(r);
      arrived.Notify();
    };
  }
};

class ConcurrencyTest : public ::testing::Test {
 protected:
  ConcurrencyTest() : ledger_(std::make_shared<FakeLedger>()) {
    Registry::Options options;
    registry_ = std::make_unique<Registry>(
        std::make_unique<fake::FakeFabric>(std::vector<fabric::DeviceInfo>{fake::MakeDeviceInfo("rxe0")}, ledger_),
        options);
  }
  ~ConcurrencyTest() override {
    ledger_->ReleaseCompletions();
    ledger_->SetRegMrHook(nullptr);
    registry_.reset();
    EXPECT_THAT(ledger_->violations(), IsEmpty());
    FakeLedger::Counts c = ledger_->live();
    EXPECT_EQ(c.pds + c.mrs + c.mws + c.qps, 0) << "pds " << c.pds << " mrs " << c.mrs << " mws " << c.mws
                                                << " qps " << c.qps;
  }

  std::string NewPd() {
    v1::CreatePdRequest r;
    r.set_device("rxe0");
    return registry_->CreatePd(r).value().name();
  }
  v1::RegisterMrRequest MrReq(const std::string& pd) {
    v1::RegisterMrRequest r;
    r.set_pd(pd);
    r.mutable_source()->mutable_anonymous()->set_size(4 * kPage);
    for (v1::Access a : {v1::LOCAL_WRITE, v1::REMOTE_READ, v1::MW_BIND}) r.add_access(a);
    return r;
  }
  std::string NewMr(const std::string& pd) { return registry_->RegisterMr(MrReq(pd)).value().name(); }
  std::string NewMw(const std::string& pd, v1::MwType type) {
    v1::AllocMwRequest r;
    r.set_pd(pd);
    r.set_type(type);
    return registry_->AllocMw(r).value().name();
  }
  std::string NewQp(const std::string& pd) {
    v1::CreateQpRequest r;
    r.set_pd(pd);
    std::string name = registry_->CreateQp(r).value().name();
    v1::ConnectQpRequest c;
    c.set_name(name);
    c.mutable_remote()->set_qpn(0x4242);
    c.mutable_remote()->set_gid("0000:0000:0000:0000:0000:ffff:0a00:0002");
    EXPECT_TRUE(registry_->ConnectQp(c).ok());
    return name;
  }
  static v1::BindMwRequest BindReq(const std::string& mw, const std::string& mr, uint64_t offset,
                                   const std::string& qp = "") {
    v1::BindMwRequest r;
    r.set_name(mw);
    r.set_mr(mr);
    r.set_offset(offset);
    r.set_length(kPage);
    r.add_access(v1::REMOTE_READ);
    r.set_qp(qp);
    return r;
  }

  std::shared_ptr<FakeLedger> ledger_;
  std::unique_ptr<Registry> registry_;
};

TEST_F(ConcurrencyTest, WhileABindIsInsideTheFabricOtherRpcsComplete) {
  const std::string a = NewPd(), b = NewPd();
  const std::string mr_a = NewMr(a), qp_a = NewQp(a), w_a = NewMw(a, v1::TYPE_2);
  ledger_->HoldCompletions();
  Pending<v1::MemoryWindow> bind;
  registry_->BindMwAsync(BindReq(w_a, mr_a, 0, qp_a), bind.Callback());
  EXPECT_FALSE(bind.arrived.HasBeenNotified());
  // Posted by a pin worker (rxe0's binds pin a bounds region there first).
  ASSERT_TRUE(test::Eventually([&] { return ledger_->QueuedCompletions() == 1; }));

  // Everything on PD B completes, and so do reads of A.
  const std::string mr_b = NewMr(b), qp_b = NewQp(b), w_b = NewMw(b, v1::TYPE_1);
  EXPECT_TRUE(registry_->GetMw(w_a).ok());
  EXPECT_EQ(registry_->ListPds().size(), 2u);
  EXPECT_EQ(registry_->GetMr(mr_a).value().bound_windows(), 1u);  // the bind holds the region
  // Conflicting operations are refused at once, naming what holds the object.
  EXPECT_TRUE(IsError(registry_->BindMw(BindReq(w_a, mr_a, kPage, qp_a)), absl::StatusCode::kAborted, "name"));
  EXPECT_TRUE(IsError(registry_->DeallocMw(w_a), absl::StatusCode::kAborted, "name"));
  EXPECT_TRUE(IsError(registry_->InvalidateMw(w_a), absl::StatusCode::kAborted, "name"));
  absl::Status dereg = registry_->DeregisterMr(mr_a);
  EXPECT_TRUE(IsError(dereg, absl::StatusCode::kFailedPrecondition, "name"));
  EXPECT_EQ(ErrnoOf(dereg), EBUSY);
  EXPECT_TRUE(IsError(registry_->DeleteQp(qp_a), absl::StatusCode::kFailedPrecondition, "name"));
  v1::DeletePdRequest del;
  del.set_name(a);
  del.set_cascade(true);
  EXPECT_TRUE(IsError(registry_->DeletePd(del), absl::StatusCode::kAborted, "name"));

  ledger_->ReleaseCompletions();
  bind.arrived.WaitForNotification();
  ASSERT_TRUE(bind.result.ok()) << bind.result.status();
  EXPECT_TRUE(bind.result->bound());
  EXPECT_EQ(registry_->GetMw(w_a).value().rkey(), bind.result->rkey());
  EXPECT_TRUE(registry_->DeletePd(del).ok());
  del.set_name(b);
  EXPECT_TRUE(registry_->DeletePd(del).ok());
}

TEST_F(ConcurrencyTest, TypeOneBindsOfOnePdQueueOnItsLaneInsteadOfFailing) {
  const std::string pd = NewPd(), mr = NewMr(pd);
  const std::string w1 = NewMw(pd, v1::TYPE_1), w2 = NewMw(pd, v1::TYPE_1), w3 = NewMw(pd, v1::TYPE_1);
  ledger_->HoldCompletions();
  Pending<v1::MemoryWindow> b1, b2, b3;
  registry_->BindMwAsync(BindReq(w1, mr, 0), b1.Callback());
  registry_->BindMwAsync(BindReq(w2, mr, kPage), b2.Callback());
  registry_->BindMwAsync(BindReq(w3, mr, 2 * kPage), b3.Callback());
  // One at a time on the PD's bind QP: the first, posted by a pin worker after its bounds region; the
  // others wait on the PD's lane, which only the first's completion frees.
  ASSERT_TRUE(test::Eventually([&] { return ledger_->QueuedCompletions() == 1; }));
  // The PD is busy with them: a cascade is refused, not half done.
  v1::DeletePdRequest del;
  del.set_name(pd);
  del.set_cascade(true);
  EXPECT_TRUE(IsError(registry_->DeletePd(del), absl::StatusCode::kFailedPrecondition, "name"));
  ledger_->ReleaseCompletions();
  for (auto* b : {&b1, &b2, &b3}) {
    b->arrived.WaitForNotification();
    EXPECT_TRUE(b->result.ok()) << b->result.status();
  }
  EXPECT_EQ(registry_->GetMr(mr).value().bound_windows(), 3u);
  EXPECT_TRUE(registry_->DeletePd(del).ok());
}

TEST_F(ConcurrencyTest, WhileARegistrationPinsOtherPdsAreServed) {
  const std::string a = NewPd(), b = NewPd();
  Notification inside, release;
  std::atomic<int> hooks{0};
  ledger_->SetRegMrHook([&] {
    if (hooks++ == 0) {  // only the first registration is held
      inside.Notify();
      release.WaitForNotification();
    }
  });
  Pending<v1::MemoryRegion> held;
  registry_->RegisterMrAsync(MrReq(a), held.Callback());
  inside.WaitForNotification();
  // The worker is pinning A's region; B is served (its registration on the second worker), and A cannot go.
  const std::string mr_b = NewMr(b);
  EXPECT_TRUE(registry_->GetMr(mr_b).ok());
  v1::DeletePdRequest del;
  del.set_name(a);
  EXPECT_TRUE(IsError(registry_->DeletePd(del), absl::StatusCode::kFailedPrecondition, "name"));
  release.Notify();
  held.arrived.WaitForNotification();
  ASSERT_TRUE(held.result.ok()) << held.result.status();
  del.set_cascade(true);
  EXPECT_TRUE(registry_->DeletePd(del).ok());
  del.set_name(b);
  EXPECT_TRUE(registry_->DeletePd(del).ok());
}

TEST_F(ConcurrencyTest, ShutdownWithACompletionStillInsideTheFabricDoesNotHangOrLeak) {
  const std::string pd = NewPd(), mr = NewMr(pd), qp = NewQp(pd), w = NewMw(pd, v1::TYPE_2);
  ledger_->HoldCompletions();
  Pending<v1::MemoryWindow> bind;
  registry_->BindMwAsync(BindReq(w, mr, 0, qp), bind.Callback());
  registry_.reset();  // the destructor checks run in ~ConcurrencyTest with the registry already gone
  EXPECT_FALSE(bind.arrived.HasBeenNotified());  // never finished: its RPC was cancelled by the server first
}

TEST_F(ConcurrencyTest, GetQpAndListQpsAskTheDeviceOutsideTheLock) {
  const std::string pd = NewPd(), qp = NewQp(pd);
  v1::QueuePair before = registry_->GetQp(qp).value();
  EXPECT_EQ(before.state(), v1::QP_RTS);
  ledger_->ForceQpError(before.local().qpn());  // a peer's bad read, which rdmad sees no completion of
  EXPECT_EQ(registry_->GetQp(qp).value().state(), v1::QP_ERROR);
  std::vector<v1::QueuePair> all = registry_->ListQps();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].state(), v1::QP_ERROR);
  // Readers and deleters side by side: nothing is destroyed under a query (the fake would flag it).
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    while (!stop) registry_->ListQps();
  });
  for (int i = 0; i < 50; ++i) {
    const std::string q = NewQp(pd);
    EXPECT_TRUE(registry_->DeleteQp(q).ok());
  }
  stop = true;
  reader.join();
  EXPECT_TRUE(registry_->DeleteQp(qp).ok());
  v1::DeletePdRequest del;
  del.set_name(pd);
  EXPECT_TRUE(registry_->DeletePd(del).ok());
}

TEST_F(ConcurrencyTest, AWindowDeallocatedTheMomentItsBindCompletesIsNotTouchedAgain) {
  // The API fuzzer's race on rxe: DeallocMw succeeds as soon as a type 1 bind's completion clears the
  // window's reservation, while the bind still has the PD's lane to release: it must not read the freed
  // window for that (rdmad crashed). Under ASan (tests/sanitizers) any such read is reported.
  const std::string pd = NewPd(), mr = NewMr(pd);
  for (int round = 0; round < 200; ++round) {
    const std::string w = NewMw(pd, v1::TYPE_1);
    Pending<v1::MemoryWindow> bind;
    registry_->BindMwAsync(BindReq(w, mr, 0), bind.Callback());
    absl::Status gone = absl::AbortedError("not yet");
    while (!gone.ok()) {
      gone = registry_->DeallocMw(w);
      ASSERT_TRUE(gone.ok() || gone.code() == absl::StatusCode::kAborted) << gone;
    }
    bind.arrived.WaitForNotification();
    EXPECT_TRUE(bind.result.ok()) << bind.result.status();
  }
  EXPECT_EQ(registry_->GetMr(mr).value().bound_windows(), 0u);
  v1::DeletePdRequest del;
  del.set_name(pd);
  del.set_cascade(true);
  EXPECT_TRUE(registry_->DeletePd(del).ok());
}

TEST_F(ConcurrencyTest, ManyThreadsBindAndInvalidateTheirOwnWindowsWhileOthersList) {
  const std::string pd = NewPd(), mr = NewMr(pd), qp = NewQp(pd);
  constexpr int kThreads = 4, kRounds = 50;
  std::vector<std::string> windows;
  for (int i = 0; i < kThreads; ++i) windows.push_back(NewMw(pd, i % 2 ? v1::TYPE_2 : v1::TYPE_1));
  std::atomic<int> failures{0};
  std::atomic<bool> done{false};
  std::thread lister([&] {
    while (!done) {
      if (!registry_->ListMws(v1::ListMwsRequest()).ok()) failures++;
    }
  });
  std::vector<std::thread> workers;
  for (int i = 0; i < kThreads; ++i) {
    workers.emplace_back([&, i] {
      for (int r = 0; r < kRounds; ++r) {
        if (!registry_->BindMw(BindReq(windows[i], mr, (i % 4) * kPage, i % 2 ? qp : "")).ok()) failures++;
        if (!registry_->InvalidateMw(windows[i]).ok()) failures++;
      }
    });
  }
  for (auto& t : workers) t.join();
  done = true;
  lister.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(registry_->GetMr(mr).value().bound_windows(), 0u);
  v1::DeletePdRequest del;
  del.set_name(pd);
  del.set_cascade(true);
  EXPECT_TRUE(registry_->DeletePd(del).ok());
}

}  // namespace
}  // namespace rdmad
