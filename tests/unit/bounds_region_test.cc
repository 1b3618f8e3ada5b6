// The bounds region of memory windows (server/registry/entries.h MwEntry::bounds_mr) against the device's
// answer to the start-up window-bounds probe (server/verbs/mw_probe.h) and the mw_bounds_region setting:
// a bind registers a private region over the window's range only where it is needed; without it, binds,
// rebinds, invalidations (type 1 and 2), deallocation, the PD cascade and the destructor work on the parent
// MR directly, in the order ibv_dereg_mr(3) requires (the fake refuses to deregister an MR a window is
// bound to, and records any violation). GetDevice says which applies.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/time/clock.h"

#include "absl/strings/str_cat.h"
#include "server/common/sync.h"
#include "server/memory/memlock.h"
#include "server/registry/registry.h"
#include "tests/support/server_status.h"
#include "tests/unit/fake_fabric.h"

namespace rdmad {
namespace {

using ::rdmad::fake::FakeLedger;
using ::rdmad::test::IsError;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr uint64_t kPage = 4096;
constexpr char kRxe[] = "devices/rxe0";      // the probe: window bounds not enforced (rxe's answer)
constexpr char kEnforcing[] = "devices/hca0";  // the probe: enforced

template <typename T>
T Ok(absl::StatusOr<T> s) {
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : T();
}

class BoundsRegionTest : public ::testing::TestWithParam<MwBoundsRegion> {
 protected:
  void SetUp() override { Remake(Options()); }
  // The parameter's mw_bounds_region, the rest as given.
  Registry::Options Options() const {
    Registry::Options options;
    options.mw_bounds_region = GetParam();
    return options;
  }
  // A new registry (on a new fake fabric: rxe0, which needs bounds regions, and hca0, which does not).
  void Remake(Registry::Options options) {
    ledger_ = std::make_shared<FakeLedger>();
    registry_ = std::make_unique<Registry>(
        std::make_unique<fake::FakeFabric>(
            std::vector<fabric::DeviceInfo>{fake::MakeDeviceInfo("rxe0"),
                                            fake::MakeDeviceInfo("hca0", false, /*mw_bounds_enforced=*/true)},
            ledger_),
        options);
  }
  void TearDown() override {
    registry_.reset();  // children before parents; the fake records any out-of-order release
    EXPECT_THAT(ledger_->violations(), IsEmpty());
    FakeLedger::Counts c = ledger_->live();
    EXPECT_EQ(c.pds + c.mrs + c.mws + c.qps + c.devices, 0);
  }

  // Whether binds on `device` should register a bounds region under the parameter.
  bool Expected(const std::string& device) const {
    switch (GetParam()) {
      case MwBoundsRegion::kAlways: return true;
      case MwBoundsRegion::kNever: return false;
      case MwBoundsRegion::kAuto: return device == kRxe;
    }
    return true;
  }

  std::string NewPd(const std::string& device) {
    v1::CreatePdRequest r;
    r.set_device(device);
    return Ok(registry_->CreatePd(r)).name();
  }
  v1::MemoryRegion NewMr(const std::string& pd, uint64_t size) {
    v1::RegisterMrRequest r;
    r.set_pd(pd);
    r.mutable_source()->mutable_anonymous()->set_size(size);
    for (v1::Access a : {v1::LOCAL_WRITE, v1::REMOTE_READ, v1::REMOTE_WRITE, v1::MW_BIND}) r.add_access(a);
    return Ok(registry_->RegisterMr(r));
  }
  std::string NewMw(const std::string& pd, v1::MwType type) {
    v1::AllocMwRequest r;
    r.set_pd(pd);
    r.set_type(type);
    return Ok(registry_->AllocMw(r)).name();
  }
  std::string NewQp(const std::string& pd) {
    v1::CreateQpRequest r;
    r.set_pd(pd);
    v1::ConnectQpRequest c;
    c.set_name(Ok(registry_->CreateQp(r)).name());
    c.mutable_remote()->set_qpn(0x4242);
    c.mutable_remote()->set_psn(7);
    c.mutable_remote()->set_gid("0000:0000:0000:0000:0000:ffff:0a00:0002");
    return Ok(registry_->ConnectQp(c)).name();
  }
  static v1::BindMwRequest Bind(const std::string& mw, const std::string& mr, uint64_t offset, uint64_t length,
                                const std::string& qp = "") {
    v1::BindMwRequest r;
    r.set_name(mw);
    r.set_mr(mr);
    r.set_offset(offset);
    r.set_length(length);
    r.add_access(v1::REMOTE_READ);
    r.set_qp(qp);
    return r;
  }

  std::shared_ptr<FakeLedger> ledger_;
  std::unique_ptr<Registry> registry_;
  std::atomic<uint64_t> ledger_pinned_{0};  // what the memlock test's Memlock sees as pinned
};

TEST_P(BoundsRegionTest, GetDeviceSaysWhatTheProbeSawAndWhetherWindowsGetABoundsRegion) {
  for (const char* device : {kRxe, kEnforcing}) {
    v1::Device d = Ok(registry_->GetDevice(device, /*with_counters=*/false));
    EXPECT_EQ(d.caps().mw_bounds_enforced(), std::string(device) == kEnforcing) << device;
    EXPECT_THAT(d.caps().mw_bounds_probe(), ::testing::HasSubstr("read past the window")) << device;
    EXPECT_EQ(d.caps().mw_bounds_region(), Expected(device)) << device;
  }
}

TEST_P(BoundsRegionTest, Type1BindRebindInvalidateAndDeallocUseTheParentMrUnlessABoundsRegionIsNeeded) {
  for (const char* device : {kRxe, kEnforcing}) {
    SCOPED_TRACE(device);
    const bool bounds = Expected(device);
    const std::string pd = NewPd(device);
    const v1::MemoryRegion mr = NewMr(pd, 4 * kPage);
    const uint64_t parent = ledger_->MrIdByLkey(mr.lkey());
    const std::string w = NewMw(pd, v1::TYPE_1);
    const int regs = ledger_->calls("reg_mr");

    v1::MemoryWindow bound = Ok(registry_->BindMw(Bind(w, mr.name(), kPage, kPage)));
    uint64_t fake_mw = ledger_->MwIdByRkey(bound.rkey());
    const FakeLedger::MrView to = ledger_->Mr(ledger_->MwBoundMr(fake_mw));
    EXPECT_EQ(ledger_->calls("reg_mr") - regs, bounds ? 1 : 0);
    if (bounds) {
      EXPECT_NE(to.id, parent);
      EXPECT_EQ(to.addr, mr.addr() + kPage);  // exactly the window's range
      EXPECT_EQ(to.length, kPage);
      EXPECT_EQ(ledger_->MrBoundWindows(parent), 0);
    } else {
      EXPECT_EQ(to.id, parent);  // bound to the MR itself
      EXPECT_EQ(ledger_->MrBoundWindows(parent), 1);
    }
    EXPECT_EQ(bound.binding().addr(), mr.addr() + kPage);

    // Bound again (type 1): the previous bounds region, if any, goes after the new bind completed.
    bound = Ok(registry_->BindMw(Bind(w, mr.name(), 0, 2 * kPage)));
    EXPECT_EQ(ledger_->calls("reg_mr") - regs, bounds ? 2 : 0);
    EXPECT_EQ(ledger_->live().mrs, bounds ? 2 : 1) << "one MR, and the current bounds region";

    // A bound window keeps its MR registered (EBUSY, before the fabric).
    EXPECT_TRUE(IsError(registry_->DeregisterMr(mr.name()), absl::StatusCode::kFailedPrecondition, "name"));

    // Invalidation (a zero-length bind naming the MR the window is bound to) releases the bounds region.
    v1::MemoryWindow unbound = Ok(registry_->InvalidateMw(w));
    EXPECT_FALSE(unbound.bound());
    EXPECT_EQ(ledger_->MwBoundMr(ledger_->MwIdByRkey(unbound.rkey())), 0u);
    EXPECT_EQ(ledger_->live().mrs, 1);

    // Bound again, then deallocated: the window goes before any region it referenced.
    bound = Ok(registry_->BindMw(Bind(w, mr.name(), 0, kPage)));
    fake_mw = ledger_->MwIdByRkey(bound.rkey());
    ledger_->ClearEvents();
    ASSERT_TRUE(registry_->DeallocMw(w).ok());
    if (bounds) {
      ASSERT_EQ(ledger_->events_of({"dealloc_mw", "dereg_mr"}).size(), 2u);
      EXPECT_EQ(ledger_->events_of({"dealloc_mw", "dereg_mr"})[0], absl::StrCat("dealloc_mw ", fake_mw));
    } else {
      EXPECT_THAT(ledger_->events_of({"dealloc_mw", "dereg_mr"}), ElementsAre(absl::StrCat("dealloc_mw ", fake_mw)));
    }
    EXPECT_EQ(ledger_->MrBoundWindows(parent), 0);
    ASSERT_TRUE(registry_->DeregisterMr(mr.name()).ok());
  }
}

TEST_P(BoundsRegionTest, Type2WindowsAndThePdCascadeWorkWithoutABoundsRegion) {
  for (const char* device : {kRxe, kEnforcing}) {
    SCOPED_TRACE(device);
    const bool bounds = Expected(device);
    const std::string pd = NewPd(device);
    const v1::MemoryRegion mr = NewMr(pd, 4 * kPage);
    const std::string qp = NewQp(pd);
    const std::string w2 = NewMw(pd, v1::TYPE_2);
    const std::string w1 = NewMw(pd, v1::TYPE_1);
    const int regs = ledger_->calls("reg_mr");
    Ok(registry_->BindMw(Bind(w2, mr.name(), 0, kPage, qp)));
    Ok(registry_->InvalidateMw(w2));  // LOCAL_INV on its QP
    Ok(registry_->BindMw(Bind(w2, mr.name(), 2 * kPage, kPage, qp)));
    Ok(registry_->BindMw(Bind(w1, mr.name(), kPage, kPage)));
    EXPECT_EQ(ledger_->calls("reg_mr") - regs, bounds ? 3 : 0);
    EXPECT_EQ(ledger_->MrBoundWindows(ledger_->MrIdByLkey(mr.lkey())), bounds ? 0 : 2);
    // The cascade: windows before the regions they are bound to (the fake would refuse and record it).
    v1::DeletePdRequest del;
    del.set_name(pd);
    del.set_cascade(true);
    Ok(registry_->DeletePd(del));
    EXPECT_THAT(ledger_->violations(), IsEmpty());
    EXPECT_EQ(ledger_->live().mws, 0);
  }
}

// Every pin happens on the pin workers: a bind that needs a bounds region registers it there (and posts the
// bind from there); a gRPC thread or a CM dispatcher calling BindMwAsync never pins.
TEST_P(BoundsRegionTest, TheBoundsRegionIsPinnedOnAPinWorkerNeverOnTheCallersThread) {
  const std::thread::id me = std::this_thread::get_id();
  for (const char* device : {kRxe, kEnforcing}) {
    SCOPED_TRACE(device);
    const std::string pd = NewPd(device);
    const v1::MemoryRegion mr = NewMr(pd, 2 * kPage);
    const std::string w1 = NewMw(pd, v1::TYPE_1);
    const std::string w2 = NewMw(pd, v1::TYPE_2);
    const std::string qp = NewQp(pd);
    std::atomic<int> pins{0}, pins_here{0};
    ledger_->SetRegMrHook([&] {
      pins++;
      if (std::this_thread::get_id() == me) pins_here++;
    });
    Ok(registry_->BindMw(Bind(w1, mr.name(), 0, kPage)));
    Ok(registry_->BindMw(Bind(w2, mr.name(), kPage, kPage, qp)));
    ledger_->SetRegMrHook(nullptr);
    EXPECT_EQ(pins.load(), Expected(device) ? 2 : 0);
    EXPECT_EQ(pins_here.load(), 0);
  }
}

// A bounds region pinned ahead (a grant's, during its client's handshake): pinned on a pin worker, counted
// as its PD's pinned bytes and keeping the PD from deletion until used or released; a type 2 bind given it
// pins nothing more; one that does not match its bind is released and the bind pins its own.
TEST_P(BoundsRegionTest, ABoundsRegionPinnedAheadIsPinnedOnAPinWorkerCountedAndUsedByItsBindWithoutAnotherPin) {
  const std::thread::id me = std::this_thread::get_id();
  for (const char* device : {kRxe, kEnforcing}) {
    SCOPED_TRACE(device);
    const std::string pd = NewPd(device);
    const v1::MemoryRegion mr = NewMr(pd, 16 * kPage);
    const std::string qp = NewQp(pd);
    const std::string w = NewMw(pd, v1::TYPE_2);
    auto pinned_bytes = [&] { return Ok(registry_->UsageOfPd(pd)).mr_bytes; };
    std::atomic<int> pins{0}, pins_here{0};
    ledger_->SetRegMrHook([&] {
      pins++;
      if (std::this_thread::get_id() == me) pins_here++;
    });
    auto pin = [&](const v1::BindMwRequest& b) {
      return AwaitResult<std::unique_ptr<Registry::PinnedBounds>>(
          [&](Done<std::unique_ptr<Registry::PinnedBounds>> d) { 
          registry_->PinBoundsAsync(ParseName(b.mr(), "mrs", "mr").value_or(999), b.offset(), b.length(), std::move(d));
        });
    };
    const v1::BindMwRequest bind = Bind(w, mr.name(), kPage / 2, 3 * kPage, qp);
    std::unique_ptr<Registry::PinnedBounds> ahead = Ok(pin(bind));
    if (!Expected(device)) {
      EXPECT_EQ(ahead, nullptr);  // none needed: nothing pinned, answered at once
      EXPECT_EQ(pins.load(), 0);
      ledger_->SetRegMrHook(nullptr);
      continue;
    }
    ASSERT_NE(ahead, nullptr);
    EXPECT_EQ(pins.load(), 1);
    EXPECT_EQ(pins_here.load(), 0);
    EXPECT_EQ(pinned_bytes(), 16 * kPage + 4 * kPage);
    v1::DeletePdRequest del;
    del.set_name(pd);
    del.set_cascade(true);
    EXPECT_TRUE(IsError(registry_->DeletePd(del), absl::StatusCode::kFailedPrecondition, "name"));  // retry
    absl::StatusOr<v1::MemoryWindow> bound = AwaitResult<v1::MemoryWindow>([&](Done<v1::MemoryWindow> d) {
      registry_->BindMwAsync(bind, std::move(d), "", nullptr, std::move(ahead));
    });
    ASSERT_TRUE(bound.ok()) << bound.status();
    EXPECT_EQ(pins.load(), 1);  // the bind pinned nothing
    EXPECT_EQ(pinned_bytes(), 16 * kPage + 4 * kPage);  // counted once, now as the binding's
    Ok(registry_->InvalidateMw(w));
    EXPECT_EQ(pinned_bytes(), 16 * kPage);

    // Pinned for another range: released, and the bind pins its own on a pin worker.
    ahead = Ok(pin(Bind(w, mr.name(), 0, kPage, qp)));
    EXPECT_EQ(pins.load(), 2);
    Ok(registry_->BindMw(bind));  // BindMw takes none: the same as a mismatch for the counts below
    absl::StatusOr<v1::MemoryWindow> again = AwaitResult<v1::MemoryWindow>([&](Done<v1::MemoryWindow> d) {
      registry_->BindMwAsync(Bind(NewMw(pd, v1::TYPE_2), mr.name(), kPage, kPage, qp), std::move(d), "", nullptr,
                             std::move(ahead));
    });
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(pins.load(), 4);  // BindMw's and the mismatched bind's own
    EXPECT_EQ(pins_here.load(), 0);
    EXPECT_EQ(pinned_bytes(), 16 * kPage + 4 * kPage + kPage);  // the one pinned ahead no longer counts
    ledger_->SetRegMrHook(nullptr);

    // Dropped unused: given back, and the PD can go.
    ahead = Ok(pin(bind));
    EXPECT_EQ(pinned_bytes(), 16 * kPage + 4 * kPage + kPage + 4 * kPage);
    ahead.reset();
    EXPECT_EQ(pinned_bytes(), 16 * kPage + 4 * kPage + kPage);
    EXPECT_TRUE(registry_->DeletePd(del).ok());
  }
}

// Pinning ahead is refused as a bind would be: a range outside the region, a region that does not exist.
TEST_P(BoundsRegionTest, PinningAheadRefusesARangeOutsideTheRegionNamingTheField) {
  const std::string pd = NewPd(kRxe);
  const v1::MemoryRegion mr = NewMr(pd, 4 * kPage);
  auto pin = [&](const v1::BindMwRequest& b) {
    return AwaitResult<std::unique_ptr<Registry::PinnedBounds>>(
        [&](Done<std::unique_ptr<Registry::PinnedBounds>> d) { 
          registry_->PinBoundsAsync(ParseName(b.mr(), "mrs", "mr").value_or(999), b.offset(), b.length(), std::move(d));
        });
  };
  if (!Expected(kRxe)) GTEST_SKIP() << "no bounds region under this setting";
  EXPECT_TRUE(IsError(pin(Bind("", mr.name(), 3 * kPage, 2 * kPage)), absl::StatusCode::kOutOfRange, "length"));
  EXPECT_TRUE(IsError(pin(Bind("", "mrs/999", 0, kPage)), absl::StatusCode::kNotFound, "mr"));
  EXPECT_EQ(Ok(registry_->UsageOfPd(pd)).mr_bytes, 4 * kPage);
}

TEST_P(BoundsRegionTest, TheDestructorReleasesBoundWindowsBeforeTheirRegions) {
  for (const char* device : {kRxe, kEnforcing}) {
    const std::string pd = NewPd(device);
    const v1::MemoryRegion mr = NewMr(pd, 2 * kPage);
    Ok(registry_->BindMw(Bind(NewMw(pd, v1::TYPE_1), mr.name(), 0, kPage)));
    Ok(registry_->BindMw(Bind(NewMw(pd, v1::TYPE_2), mr.name(), kPage, kPage, NewQp(pd))));
  }
  // TearDown: no violation, nothing left.
}

// A bounds region pins the window's pages again: they count in the PD's pinned bytes (what a tenant's
// pinned_bytes quota sums) from the bind until the region is released, however many windows are bound
// over the same range, and BoundsRegionBytes says beforehand what a bind will add.
TEST_P(BoundsRegionTest, BoundsRegionsCountAsPinnedBytesOfTheirPdUntilReleased) {
  for (const char* device : {kRxe, kEnforcing}) {
    SCOPED_TRACE(device);
    const bool bounds = Expected(device);
    const std::string pd = NewPd(device);
    const v1::MemoryRegion mr = NewMr(pd, 16 * kPage);
    const std::string qp = NewQp(pd);
    auto pinned = [&] { return Ok(registry_->UsageOfPd(pd)).mr_bytes; };
    EXPECT_EQ(pinned(), 16 * kPage);
    std::vector<std::string> windows;
    for (int i = 0; i < 8; ++i) windows.push_back(NewMw(pd, i % 2 ? v1::TYPE_2 : v1::TYPE_1));
    // Unaligned ranges pin every page they touch: [kPage/2, kPage/2 + 3 kPage) touches 4.
    for (size_t i = 0; i < windows.size(); ++i) {
      v1::BindMwRequest b = Bind(windows[i], mr.name(), kPage / 2, 3 * kPage, i % 2 ? qp : "");
      EXPECT_EQ(registry_->BoundsRegionBytes(b), bounds ? 4 * kPage : 0);
      Ok(registry_->BindMw(b));
      EXPECT_EQ(pinned(), 16 * kPage + (bounds ? (i + 1) * 4 * kPage : 0));
    }
    // A type 1 window bound again: the new region counts, the previous one no longer.
    Ok(registry_->BindMw(Bind(windows[0], mr.name(), 0, kPage)));
    EXPECT_EQ(pinned(), 16 * kPage + (bounds ? 7 * 4 * kPage + kPage : 0));
    // A failed bind (a type 2 window bound already) adds nothing.
    EXPECT_FALSE(registry_->BindMw(Bind(windows[1], mr.name(), 0, kPage, qp)).ok());
    EXPECT_EQ(pinned(), 16 * kPage + (bounds ? 7 * 4 * kPage + kPage : 0));
    Ok(registry_->InvalidateMw(windows[0]));
    Ok(registry_->InvalidateMw(windows[1]));
    EXPECT_EQ(pinned(), 16 * kPage + (bounds ? 6 * 4 * kPage : 0));
    for (const std::string& w : windows) ASSERT_TRUE(registry_->DeallocMw(w).ok());
    EXPECT_EQ(pinned(), 16 * kPage);
  }
}

// RLIMIT_MEMLOCK applies to bounds regions as to registrations: a bind whose region would pass it is
// refused before anything is pinned, naming the limit.
TEST_P(BoundsRegionTest, ABindWhoseBoundsRegionWouldPassTheMemlockLimitIsRefusedBeforePinning) {
  Registry::Options options = Options();
  options.memlock = Memlock(64 * kPage, [this] { return ledger_pinned_.load(); });
  Remake(options);
  for (const char* device : {kRxe, kEnforcing}) {
    SCOPED_TRACE(device);
    const std::string pd = NewPd(device);
    const v1::MemoryRegion mr = NewMr(pd, 16 * kPage);
    const std::string w = NewMw(pd, v1::TYPE_1);
    ledger_pinned_ = 60 * kPage;  // 4 pages left
    const int regs = ledger_->calls("reg_mr");
    absl::StatusOr<v1::MemoryWindow> bound = registry_->BindMw(Bind(w, mr.name(), 0, 8 * kPage));
    if (Expected(device)) {
      // (FinishBind puts "binding mws/N" first, so the message does not start with the field.)
      EXPECT_EQ(bound.status().code(), absl::StatusCode::kResourceExhausted) << bound.status();
      EXPECT_EQ(FieldOf(bound.status()), "length");
      EXPECT_THAT(std::string(bound.status().message()), ::testing::HasSubstr("RLIMIT_MEMLOCK"));
      EXPECT_EQ(ledger_->calls("reg_mr"), regs);  // nothing pinned
      EXPECT_EQ(Ok(registry_->UsageOfPd(pd)).mr_bytes, 16 * kPage);
      EXPECT_FALSE(Ok(registry_->GetMw(w)).bound());
    } else {
      EXPECT_TRUE(bound.ok()) << bound.status();  // no bounds region: nothing more is pinned
    }
    ledger_pinned_ = 0;
  }
}

// A pin worker that has pinned a bind's bounds region polls for the bind's completion until it comes (up
// to Options::pin_worker_poll) on a QP that carries only rdmad's local work: a completion that comes long
// after four times completion_poll is still finished on the pin worker, the RPC's one hand-off, not handed
// to the device's dispatcher as a second. With the short budget it is the dispatcher's.
TEST_P(BoundsRegionTest, APinWorkerWaitsForItsBindsCompletionRatherThanHandItToTheDispatcher) {
  if (!Expected(kRxe)) GTEST_SKIP() << "no bounds region under this setting";
  auto finished_on = [&](absl::Duration pin_worker_poll, bool type1) {
    Registry::Options options = Options();
    options.pin_worker_poll = pin_worker_poll;
    Remake(options);
    const std::string pd = NewPd(kRxe);
    const v1::MemoryRegion mr = NewMr(pd, 4 * kPage);
    v1::BindMwRequest bind = type1 ? Bind(NewMw(pd, v1::TYPE_1), mr.name(), 0, kPage)
                                   : Bind(NewMw(pd, v1::TYPE_2), mr.name(), 0, kPage, NewQp(pd));
    if (type1) Ok(registry_->BindMw(Bind(NewMw(pd, v1::TYPE_1), mr.name(), kPage, kPage)));  // the bind QP is up
    const Registry::CompletionCounts before = registry_->completion_counts();
    ledger_->DeferSignals(true);  // a completion is found only by a poller, until this is turned off
    ledger_->HoldCompletions();
    Notification arrived;  // rdmad's (server/common/sync.h), which TSan sees through
    absl::StatusOr<v1::MemoryWindow> bound;
    registry_->BindMwAsync(bind, [&](absl::StatusOr<v1::MemoryWindow> r) {
      bound = std::move(r);
      arrived.Notify();
    });
    absl::SleepFor(absl::Milliseconds(50));  // far past four times completion_poll (1.2 ms)
    ledger_->ReleaseCompletions();
    if (!arrived.WaitForNotificationWithTimeout(absl::Milliseconds(500))) ledger_->DeferSignals(false);
    arrived.WaitForNotification();
    ledger_->DeferSignals(false);
    EXPECT_TRUE(bound.ok()) << bound.status();
    const Registry::CompletionCounts after = registry_->completion_counts();
    EXPECT_EQ(after.on_poster - before.on_poster + after.on_dispatcher - before.on_dispatcher, 1u);
    return after.on_poster > before.on_poster ? "pin worker" : "dispatcher";
  };
  for (bool type1 : {false, true}) {
    SCOPED_TRACE(type1 ? "type 1, the PD's bind QP" : "type 2, a QP of the API");
    EXPECT_STREQ(finished_on(absl::Seconds(10), type1), "pin worker");
    EXPECT_STREQ(finished_on(absl::ZeroDuration(), type1), "dispatcher");
  }
}

// The device's dispatcher, woken by the completion's event, may take a completion off the queue while the
// thread that posted the work is still polling for it: the request is then handed back and finished on the
// poster (no hand-off), for a bind posted by a pin worker and for one posted by the caller's thread, and
// for invalidations.
TEST_P(BoundsRegionTest, ACompletionTheDispatcherTakesWhileThePosterPollsIsFinishedByThePoster) {
  Registry::Options options = Options();
  options.completion_poll = absl::Seconds(5);  // no poll may run out here: finish where it was polled
  options.pin_worker_poll = absl::Seconds(5);
  Remake(options);
  ledger_->PollersFindNothing(true);
  for (const char* device : {kRxe, kEnforcing}) {
    SCOPED_TRACE(device);
    const std::string pd = NewPd(device);
    const v1::MemoryRegion mr = NewMr(pd, 4 * kPage);
    const std::string w1 = NewMw(pd, v1::TYPE_1), w2 = NewMw(pd, v1::TYPE_2), qp = NewQp(pd);
    const Registry::CompletionCounts before = registry_->completion_counts();
    Ok(registry_->BindMw(Bind(w1, mr.name(), 0, kPage)));
    Ok(registry_->BindMw(Bind(w2, mr.name(), kPage, kPage, qp)));
    Ok(registry_->InvalidateMw(w1));
    Ok(registry_->InvalidateMw(w2));
    const Registry::CompletionCounts after = registry_->completion_counts();
    EXPECT_EQ(after.on_poster - before.on_poster, 4u);
    EXPECT_EQ(after.on_dispatcher - before.on_dispatcher, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, BoundsRegionTest,
                         ::testing::Values(MwBoundsRegion::kAuto, MwBoundsRegion::kAlways, MwBoundsRegion::kNever),
                         [](const ::testing::TestParamInfo<MwBoundsRegion>& i) {
                           return i.param == MwBoundsRegion::kAuto     ? std::string("Auto")
                                  : i.param == MwBoundsRegion::kAlways ? std::string("Always")
                                                                       : std::string("Never");
                         });

}  // namespace
}  // namespace rdmad
