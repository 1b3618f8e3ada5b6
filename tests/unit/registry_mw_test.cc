// Unit tests of rdmad::Registry over the fake fabric (registry_fixture.h): memory windows. Allocation per
// the device's support; binding type 1 and type 2 windows (the ibv_bind_mw(3) rules refused before the fabric,
// the new rkey published only after a successful completion, failed completions, rebinding); the QPs of
// type 2 windows; invalidation (idempotent, a flushed one still revokes); deallocation; and the private
// bounds region of each bound window.
//
// Threads: the test's own; the registry's dispatchers run the bind and invalidate completions its calls
// wait for.
#include <cerrno>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "server/common/status.h"
#include "tests/support/server_status.h"
#include "tests/support/status.h"
#include "tests/unit/registry_fixture.h"

namespace rdmad::registry_test {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::rdmad::test::IsError;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// ---------------------------------------------------------------------------------------------------------
// Memory windows

TEST_F(RegistryTest, AllocMwChecksTheDeviceSupport) {
  fabric::DeviceInfo no_type2 = fake::MakeDeviceInfo("rxe0");
  no_type2.mw_type2a = no_type2.mw_type2b = false;
  fabric::DeviceInfo no_mw = fake::MakeDeviceInfo("rxe1");
  no_mw.mw_type1 = no_mw.mw_type2a = no_mw.mw_type2b = false;
  Reset({no_type2, no_mw});
  const std::string a = NewPd("rxe0"), b = NewPd("rxe1");
  v1::AllocMwRequest r;
  r.set_pd(a);
  r.set_type(v1::TYPE_2);
  EXPECT_TRUE(IsError(registry_->AllocMw(r), absl::StatusCode::kFailedPrecondition, "type"));
  r.set_type(v1::MW_TYPE_UNSPECIFIED);
  EXPECT_TRUE(IsError(registry_->AllocMw(r), absl::StatusCode::kInvalidArgument, "type"));
  r.set_pd(b);
  r.set_type(v1::TYPE_1);
  EXPECT_TRUE(IsError(registry_->AllocMw(r), absl::StatusCode::kFailedPrecondition, "type"));
  EXPECT_EQ(ledger_->calls("alloc_mw"), 0);
  EXPECT_EQ(Pd(a).mw_count(), 0u);

  r.set_pd(a);
  v1::MemoryWindow w = OK(registry_->AllocMw(r));
  EXPECT_EQ(w.type(), v1::TYPE_1);
  EXPECT_FALSE(w.bound());
  EXPECT_EQ(w.pd(), a);
  EXPECT_EQ(Pd(a).mw_count(), 1u);

  // Type 2A alone is enough for type 2.
  fabric::DeviceInfo only_2a = fake::MakeDeviceInfo("rxe0");
  only_2a.mw_type2b = false;
  only_2a.mw_type2a = true;
  Reset({only_2a});
  EXPECT_EQ(NewMw(NewPd(), v1::TYPE_2).type(), v1::TYPE_2);

  ledger_->FailNextAllocMw(ENOMEM);
  r.set_pd("pds/1");
  r.set_type(v1::TYPE_1);
  absl::StatusOr<v1::MemoryWindow> failed = registry_->AllocMw(r);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CallOf(failed.status()), "ibv_alloc_mw");
  EXPECT_EQ(Pd("pds/1").mw_count(), 1u);
}

// A PD with an MR (LOCAL_WRITE, REMOTE_READ, REMOTE_WRITE, MW_BIND; 4 pages), a type 1 and a type 2 window
// and a connected QP.
class BindTest : public RegistryTest {
 protected:
  void SetUp() override {
    pd_ = NewPd();
    mr_ = NewMr(pd_, 4 * kPage);
    w1_ = NewMw(pd_, v1::TYPE_1);
    w2_ = NewMw(pd_, v1::TYPE_2);
    qp_ = NewQp(pd_);
  }
  // Expect `req` refused with (code, field), with nothing bound, registered or posted.
  void ExpectRefused(const v1::BindMwRequest& req, absl::StatusCode code, const std::string& field) {
    const v1::MemoryWindow before = Mw(req.name());
    const int binds = ledger_->calls("bind"), regs = ledger_->calls("reg_mr");
    const std::string live = Live();
    EXPECT_TRUE(IsError(registry_->BindMw(req), code, field));
    EXPECT_EQ(ledger_->calls("bind"), binds);
    EXPECT_EQ(ledger_->calls("reg_mr"), regs);  // no bounds region either
    EXPECT_EQ(Live(), live);
    EXPECT_TRUE(MessageDifferencer::Equals(Mw(req.name()), before));
    EXPECT_EQ(Mr(mr_.name()).bound_windows(), 0u);
    EXPECT_EQ(Qp(qp_.name()).bound_windows(), 0u);
  }

  std::string pd_;
  v1::MemoryRegion mr_;
  v1::MemoryWindow w1_, w2_;
  v1::QueuePair qp_;
};

TEST_F(BindTest, BindsATypeOneWindowAndPublishesTheNewRkey) {
  v1::MemoryWindow w = OK(registry_->BindMw(BindReq(w1_.name(), mr_.name(), 100, 2 * kPage,
                                                    {v1::REMOTE_READ, v1::REMOTE_WRITE})));
  EXPECT_TRUE(w.bound());
  EXPECT_EQ(w.rkey(), fake::IncRkey(w1_.rkey()));
  EXPECT_EQ(w.binding().mr(), mr_.name());
  EXPECT_EQ(w.binding().offset(), 100u);
  EXPECT_EQ(w.binding().length(), 2 * kPage);
  EXPECT_THAT(w.binding().access(), ElementsAre(v1::REMOTE_READ, v1::REMOTE_WRITE));
  EXPECT_FALSE(w.binding().zero_based());
  EXPECT_EQ(w.binding().addr(), mr_.addr() + 100);
  EXPECT_EQ(w.binding().remote_addr(), mr_.addr() + 100);
  EXPECT_EQ(w.binding().qp(), "");
  EXPECT_EQ(Mr(mr_.name()).bound_windows(), 1u);
  EXPECT_TRUE(MessageDifferencer::Equals(Mw(w1_.name()), w));
  // The window is bound to its private bounds MR: exactly its range, in its PD, with the parent's
  // LOCAL_WRITE and MW_BIND and no remote access of its own.
  const uint64_t parent = ledger_->MrIdByLkey(mr_.lkey());
  const FakeLedger::MrView bounds = ledger_->Mr(ledger_->MwBoundMr(ledger_->MwIdByRkey(w.rkey())));
  ASSERT_NE(bounds.id, 0u);
  EXPECT_NE(bounds.id, parent);
  EXPECT_EQ(bounds.pd, ledger_->Mr(parent).pd);
  EXPECT_EQ(bounds.addr, mr_.addr() + 100);
  EXPECT_EQ(bounds.length, 2 * kPage);
  EXPECT_EQ(bounds.access, static_cast<uint32_t>(fabric::kLocalWrite | fabric::kMwBind));
  EXPECT_EQ(ledger_->MrBoundWindows(parent), 0);
  EXPECT_EQ(Live(), "pds=1 mrs=2 mws=2 qps=2");  // qps: the user QP and the PD's bind QP
  // The whole MR, to the last byte: a new bounds MR; the previous one is released after the bind.
  ledger_->ClearEvents();
  v1::MemoryWindow again = OK(registry_->BindMw(BindReq(w1_.name(), mr_.name(), 0, 4 * kPage)));
  EXPECT_EQ(again.rkey(), fake::IncRkey(w.rkey()));
  EXPECT_EQ(Mr(mr_.name()).bound_windows(), 1u);
  const FakeLedger::MrView bounds2 = ledger_->Mr(ledger_->MwBoundMr(ledger_->MwIdByRkey(again.rkey())));
  EXPECT_EQ(bounds2.addr, mr_.addr());
  EXPECT_EQ(bounds2.length, 4 * kPage);
  EXPECT_THAT(ledger_->events_of({"reg_mr", "bind_mw", "dereg_mr"}),
              ElementsAre("reg_mr " + S(bounds2.id), "bind_mw " + S(ledger_->MwIdByRkey(again.rkey())),
                          "dereg_mr " + S(bounds.id)));
  EXPECT_EQ(Live(), "pds=1 mrs=2 mws=2 qps=2");
  // ListMws with the filter.
  v1::ListMwsRequest list;
  list.set_pd(pd_);
  EXPECT_EQ(OK(registry_->ListMws(list)).size(), 2u);
}

TEST_F(BindTest, BindsATypeTwoWindowOnItsQp) {
  v1::MemoryWindow w = OK(registry_->BindMw(BindReq(w2_.name(), mr_.name(), kPage, kPage,
                                                    {v1::REMOTE_READ}, qp_.name(), /*zero_based=*/true)));
  EXPECT_TRUE(w.bound());
  EXPECT_EQ(w.rkey(), fake::IncRkey(w2_.rkey()));
  EXPECT_TRUE(w.binding().zero_based());
  EXPECT_EQ(w.binding().addr(), mr_.addr() + kPage);
  EXPECT_EQ(w.binding().remote_addr(), 0u);
  EXPECT_EQ(w.binding().qp(), qp_.name());
  EXPECT_EQ(Qp(qp_.name()).bound_windows(), 1u);
  EXPECT_EQ(Mr(mr_.name()).bound_windows(), 1u);
}

TEST_F(BindTest, ATypeTwoWindowCannotBeBoundTwice) {
  v1::MemoryWindow w = OK(registry_->BindMw(BindReq(w2_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ},
                                                    qp_.name())));
  absl::StatusOr<v1::MemoryWindow> r =
      registry_->BindMw(BindReq(w2_.name(), mr_.name(), kPage, kPage, {v1::REMOTE_READ}, qp_.name()));
  EXPECT_TRUE(IsError(r, absl::StatusCode::kFailedPrecondition, "name"));
  EXPECT_TRUE(MessageDifferencer::Equals(Mw(w2_.name()), w));
  EXPECT_EQ(Mr(mr_.name()).bound_windows(), 1u);
  EXPECT_EQ(Qp(qp_.name()).bound_windows(), 1u);
  // After invalidation it binds again, with a new rkey.
  v1::MemoryWindow inv = OK(registry_->InvalidateMw(w2_.name()));
  EXPECT_FALSE(inv.bound());
  EXPECT_EQ(Qp(qp_.name()).bound_windows(), 0u);
  v1::MemoryWindow again =
      OK(registry_->BindMw(BindReq(w2_.name(), mr_.name(), kPage, kPage, {v1::REMOTE_READ}, qp_.name())));
  EXPECT_EQ(again.rkey(), fake::IncRkey(inv.rkey()));
  EXPECT_NE(again.rkey(), w.rkey());
}

TEST_F(BindTest, RefusesAZeroOrOutOfRangeExtent) {
  ExpectRefused(BindReq(w1_.name(), mr_.name(), 0, 0), absl::StatusCode::kInvalidArgument, "length");
  ExpectRefused(BindReq(w1_.name(), mr_.name(), 4 * kPage, 1), absl::StatusCode::kOutOfRange, "offset");
  ExpectRefused(BindReq(w1_.name(), mr_.name(), UINT64_MAX, 1), absl::StatusCode::kOutOfRange, "offset");
  ExpectRefused(BindReq(w1_.name(), mr_.name(), 1, 4 * kPage), absl::StatusCode::kOutOfRange, "length");
  ExpectRefused(BindReq(w1_.name(), mr_.name(), 0, 4 * kPage + 1), absl::StatusCode::kOutOfRange, "length");
  ExpectRefused(BindReq(w1_.name(), mr_.name(), 2, UINT64_MAX), absl::StatusCode::kOutOfRange, "length");
}

TEST_F(BindTest, RefusesLocalWriteOrMwBindOnAWindow) {
  ExpectRefused(BindReq(w1_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ, v1::LOCAL_WRITE}),
                absl::StatusCode::kInvalidArgument, "access");
  ExpectRefused(BindReq(w1_.name(), mr_.name(), 0, kPage, {v1::MW_BIND}), absl::StatusCode::kInvalidArgument,
                "access");
  v1::BindMwRequest unknown = BindReq(w1_.name(), mr_.name(), 0, kPage);
  unknown.add_access(static_cast<v1::Access>(77));
  ExpectRefused(unknown, absl::StatusCode::kInvalidArgument, "access");
}

TEST_F(BindTest, RefusesAnMrWithoutMwBind) {
  v1::MemoryRegion plain = NewMr(pd_, kPage, {v1::LOCAL_WRITE, v1::REMOTE_READ, v1::REMOTE_WRITE});
  ExpectRefused(BindReq(w1_.name(), plain.name(), 0, kPage), absl::StatusCode::kFailedPrecondition, "mr");
  ExpectRefused(BindReq(w2_.name(), plain.name(), 0, kPage, {v1::REMOTE_READ}, qp_.name()),
                absl::StatusCode::kFailedPrecondition, "mr");
}

TEST_F(BindTest, RemoteWriteOrAtomicWindowsNeedLocalWriteOnTheMr) {
  v1::MemoryRegion ro = NewMr(pd_, kPage, {v1::REMOTE_READ, v1::MW_BIND});
  ExpectRefused(BindReq(w1_.name(), ro.name(), 0, kPage, {v1::REMOTE_WRITE}), absl::StatusCode::kFailedPrecondition,
                "access");
  ExpectRefused(BindReq(w1_.name(), ro.name(), 0, kPage, {v1::REMOTE_READ, v1::REMOTE_ATOMIC}),
                absl::StatusCode::kFailedPrecondition, "access");
  // REMOTE_READ alone is fine there.
  EXPECT_TRUE(registry_->BindMw(BindReq(w1_.name(), ro.name(), 0, kPage, {v1::REMOTE_READ})).ok());
  // A window may ask for REMOTE_WRITE/ATOMIC the MR itself lacks, as long as the MR has LOCAL_WRITE.
  v1::MemoryRegion lw = NewMr(pd_, kPage, {v1::LOCAL_WRITE, v1::MW_BIND});
  EXPECT_TRUE(registry_->BindMw(BindReq(w2_.name(), lw.name(), 0, kPage, {v1::REMOTE_WRITE, v1::REMOTE_ATOMIC},
                                        qp_.name()))
                  .ok());
}

TEST_F(BindTest, ZeroBasedIsForTypeTwoOnly) {
  ExpectRefused(BindReq(w1_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ}, "", true),
                absl::StatusCode::kInvalidArgument, "zero_based");
  ExpectRefused(BindReq(w1_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ}, qp_.name(), true),
                absl::StatusCode::kInvalidArgument, "zero_based");
}

TEST_F(BindTest, TypeTwoNeedsAConnectedQpOfTheSamePd) {
  ExpectRefused(BindReq(w2_.name(), mr_.name(), 0, kPage), absl::StatusCode::kInvalidArgument, "qp");
  v1::QueuePair idle = NewQp(pd_, /*connect=*/false);
  ExpectRefused(BindReq(w2_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ}, idle.name()),
                absl::StatusCode::kFailedPrecondition, "qp");
  // A type 1 window on an explicitly named QP needs it connected too.
  ExpectRefused(BindReq(w1_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ}, idle.name()),
                absl::StatusCode::kFailedPrecondition, "qp");
  const std::string other = NewPd();
  v1::QueuePair foreign = NewQp(other);
  ExpectRefused(BindReq(w2_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ}, foreign.name()),
                absl::StatusCode::kInvalidArgument, "qp");
  ExpectRefused(BindReq(w2_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ}, "qps/99"), absl::StatusCode::kNotFound,
                "qp");
}

TEST_F(BindTest, TheMrMustBeInTheWindowsPd) {
  const std::string other = NewPd();
  v1::MemoryRegion foreign = NewMr(other);
  const int binds = ledger_->calls("bind");
  EXPECT_TRUE(IsError(registry_->BindMw(BindReq(w1_.name(), foreign.name(), 0, kPage)),
                      absl::StatusCode::kInvalidArgument, "mr"));
  EXPECT_TRUE(IsError(registry_->BindMw(BindReq(w2_.name(), foreign.name(), 0, kPage, {v1::REMOTE_READ},
                                                qp_.name())),
                      absl::StatusCode::kInvalidArgument, "mr"));
  EXPECT_EQ(ledger_->calls("bind"), binds);
  EXPECT_EQ(Mr(foreign.name()).bound_windows(), 0u);
  EXPECT_TRUE(IsError(registry_->BindMw(BindReq(w1_.name(), "mrs/99", 0, kPage)), absl::StatusCode::kNotFound,
                      "mr"));
}

TEST_F(BindTest, RebindingATypeOneWindowMovesItBetweenRegions) {
  v1::MemoryRegion other = NewMr(pd_, kPage);
  ASSERT_OK(registry_->BindMw(BindReq(w1_.name(), mr_.name(), 0, kPage)).status());
  EXPECT_EQ(Mr(mr_.name()).bound_windows(), 1u);
  v1::MemoryWindow w = OK(registry_->BindMw(BindReq(w1_.name(), other.name(), 0, kPage)));
  EXPECT_EQ(w.binding().mr(), other.name());
  EXPECT_EQ(Mr(mr_.name()).bound_windows(), 0u);
  EXPECT_EQ(Mr(other.name()).bound_windows(), 1u);
  EXPECT_EQ(ledger_->Mr(ledger_->MwBoundMr(ledger_->MwIdByRkey(w.rkey()))).addr, other.addr());
  // The first region is free again.
  EXPECT_OK(registry_->DeregisterMr(mr_.name()));
  EXPECT_EQ(ErrnoOf(registry_->DeregisterMr(other.name())), EBUSY);
}

TEST_F(BindTest, AFailedBindCompletionLeavesTheWindowAsItWas) {
  v1::MemoryRegion other = NewMr(pd_, kPage);
  v1::MemoryWindow bound = OK(registry_->BindMw(BindReq(w1_.name(), mr_.name(), 0, kPage)));
  const int connects = ledger_->calls("connect");
  ledger_->FailNextBind();
  absl::StatusOr<v1::MemoryWindow> r = registry_->BindMw(BindReq(w1_.name(), other.name(), 0, kPage));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAborted) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(w1_.name()));
  EXPECT_TRUE(MessageDifferencer::Equals(Mw(w1_.name()), bound));  // same rkey, same binding
  EXPECT_EQ(Mr(mr_.name()).bound_windows(), 1u);
  EXPECT_EQ(Mr(other.name()).bound_windows(), 0u);
  const uint64_t bounds = ledger_->MwBoundMr(ledger_->MwIdByRkey(bound.rkey()));
  EXPECT_EQ(ledger_->Mr(bounds).addr, mr_.addr());  // still the old bounds MR
  EXPECT_EQ(Live(), "pds=1 mrs=3 mws=2 qps=2");     // the new bounds MR was released
  // The internal bind QP went to the error state; the next bind brings it back.
  v1::MemoryWindow w = OK(registry_->BindMw(BindReq(w1_.name(), other.name(), 0, kPage)));
  EXPECT_EQ(w.rkey(), fake::IncRkey(bound.rkey()));
  EXPECT_EQ(ledger_->calls("connect"), connects + 1);
  EXPECT_EQ(Mr(mr_.name()).bound_windows(), 0u);
  EXPECT_EQ(Mr(other.name()).bound_windows(), 1u);
}

TEST_F(BindTest, AFailedTypeTwoBindLeavesTheWindowUnboundAndTheQpInError) {
  ledger_->FailNextBind();
  absl::StatusOr<v1::MemoryWindow> r =
      registry_->BindMw(BindReq(w2_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ}, qp_.name()));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAborted) << r.status();
  EXPECT_TRUE(MessageDifferencer::Equals(Mw(w2_.name()), w2_));
  EXPECT_EQ(Qp(qp_.name()).bound_windows(), 0u);
  EXPECT_EQ(Mr(mr_.name()).bound_windows(), 0u);
  EXPECT_EQ(Qp(qp_.name()).state(), v1::QP_ERROR);
  // Not usable until reconnected.
  ExpectRefused(BindReq(w2_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ}, qp_.name()),
                absl::StatusCode::kFailedPrecondition, "qp");
  ASSERT_OK(registry_->ConnectQp(ConnectReq(qp_.name())).status());
  EXPECT_TRUE(registry_->BindMw(BindReq(w2_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ}, qp_.name())).ok());
}

TEST_F(BindTest, AQpWithABoundTypeTwoWindowCannotBeDeletedOrReconnected) {
  ASSERT_OK(registry_->BindMw(BindReq(w2_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ}, qp_.name())).status());
  absl::Status s = registry_->DeleteQp(qp_.name());
  EXPECT_TRUE(IsError(s, absl::StatusCode::kFailedPrecondition, "name"));
  EXPECT_EQ(ErrnoOf(s), EBUSY);
  absl::StatusOr<v1::QueuePair> c = registry_->ConnectQp(ConnectReq(qp_.name()));
  EXPECT_TRUE(IsError(c, absl::StatusCode::kFailedPrecondition, "name"));
  EXPECT_EQ(ErrnoOf(c.status()), EBUSY);
  EXPECT_EQ(Pd(pd_).qp_count(), 1u);

  ASSERT_OK(registry_->InvalidateMw(w2_.name()).status());
  EXPECT_OK(registry_->DeleteQp(qp_.name()));
  EXPECT_EQ(Pd(pd_).qp_count(), 0u);
}

TEST_F(BindTest, DeallocatingABoundTypeTwoWindowFreesItsQp) {
  ASSERT_OK(registry_->BindMw(BindReq(w2_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ}, qp_.name())).status());
  ASSERT_OK(registry_->DeallocMw(w2_.name()));
  EXPECT_EQ(Qp(qp_.name()).bound_windows(), 0u);
  EXPECT_EQ(Mr(mr_.name()).bound_windows(), 0u);
  EXPECT_EQ(Pd(pd_).mw_count(), 1u);
  EXPECT_OK(registry_->DeleteQp(qp_.name()));
}

TEST_F(BindTest, ATypeOneWindowBoundThroughAUserQpOutlivesIt) {
  v1::MemoryWindow w =
      OK(registry_->BindMw(BindReq(w1_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ}, qp_.name())));
  EXPECT_EQ(Qp(qp_.name()).bound_windows(), 0u);  // type 1 windows are not tied to the QP
  EXPECT_OK(registry_->DeleteQp(qp_.name()));
  EXPECT_TRUE(Mw(w1_.name()).bound());
  // Invalidation goes through rdmad's own bind QP.
  v1::MemoryWindow inv = OK(registry_->InvalidateMw(w1_.name()));
  EXPECT_FALSE(inv.bound());
  EXPECT_EQ(Mr(mr_.name()).bound_windows(), 0u);
}

TEST_F(BindTest, InvalidateIsIdempotent) {
  const int before = ledger_->calls("invalidate");
  v1::MemoryWindow w = OK(registry_->InvalidateMw(w1_.name()));  // never bound
  EXPECT_FALSE(w.bound());
  EXPECT_EQ(ledger_->calls("invalidate"), before);
  ASSERT_OK(registry_->BindMw(BindReq(w1_.name(), mr_.name(), 0, kPage)).status());
  w = OK(registry_->InvalidateMw(w1_.name()));
  EXPECT_FALSE(w.bound());
  EXPECT_FALSE(w.has_binding());
  EXPECT_EQ(Mr(mr_.name()).bound_windows(), 0u);
  EXPECT_EQ(ledger_->MwBoundMr(ledger_->MwIdByRkey(w.rkey())), 0u);
  EXPECT_EQ(ledger_->calls("invalidate"), before + 1);
  EXPECT_EQ(Live(), "pds=1 mrs=1 mws=2 qps=2");  // the bounds MR is released
  v1::MemoryWindow again = OK(registry_->InvalidateMw(w1_.name()));
  EXPECT_TRUE(MessageDifferencer::Equals(again, w));
  EXPECT_EQ(ledger_->calls("invalidate"), before + 1);
  // Type 2 as well.
  ASSERT_OK(registry_->BindMw(BindReq(w2_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ}, qp_.name())).status());
  ASSERT_OK(registry_->InvalidateMw(w2_.name()).status());
  ASSERT_OK(registry_->InvalidateMw(w2_.name()).status());
  EXPECT_EQ(ledger_->calls("invalidate"), before + 2);
}

TEST_F(BindTest, AFlushedInvalidationStillRevokesByReplacingTheWindow) {
  // A type 2 window whose QP went to the error state (a client's bad read) cannot be invalidated with
  // LOCAL_INV: the work request is flushed. Revocation must still happen: the window is deallocated (which
  // invalidates it) and a new one takes its name, unbound.
  v1::MemoryWindow bound =
      OK(registry_->BindMw(BindReq(w2_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ}, qp_.name())));
  const uint64_t old_mw = ledger_->MwIdByRkey(bound.rkey());
  ledger_->FailNextInvalidate();
  v1::MemoryWindow r = OK(registry_->InvalidateMw(w2_.name()));
  EXPECT_FALSE(r.bound());
  EXPECT_EQ(r.name(), w2_.name());
  EXPECT_NE(r.rkey(), bound.rkey());
  EXPECT_EQ(ledger_->MwIdByRkey(bound.rkey()), 0u);  // the old window is gone from the device
  EXPECT_THAT(ledger_->events_of({"dealloc_mw"}), ::testing::Contains("dealloc_mw " + S(old_mw)));
  EXPECT_EQ(Mr(mr_.name()).bound_windows(), 0u);
  EXPECT_EQ(Qp(qp_.name()).bound_windows(), 0u);
  EXPECT_OK(registry_->DeregisterMr(mr_.name()));
}

TEST_F(BindTest, AWindowOnAQpKnownToBeInErrorIsReplacedWithoutPostingOnIt) {
  v1::MemoryWindow bound =
      OK(registry_->BindMw(BindReq(w2_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ}, qp_.name())));
  ledger_->ForceQpError(Qp(qp_.name()).local().qpn());  // a peer's bad read; GetQp (above) saw it
  EXPECT_EQ(Qp(qp_.name()).state(), v1::QP_ERROR);
  const int posted = ledger_->calls("invalidate");
  v1::MemoryWindow r = OK(registry_->InvalidateMw(w2_.name()));
  EXPECT_FALSE(r.bound());
  EXPECT_EQ(ledger_->calls("invalidate"), posted);  // nothing posted on the dead QP
  EXPECT_EQ(ledger_->MwIdByRkey(bound.rkey()), 0u);
}

TEST_F(BindTest, BoundsRegionsArePrivateAndReleasedWithTheirWindow) {
  ASSERT_OK(registry_->BindMw(BindReq(w1_.name(), mr_.name(), 0, kPage)).status());
  ASSERT_OK(registry_->BindMw(BindReq(w2_.name(), mr_.name(), kPage, kPage, {v1::REMOTE_READ}, qp_.name())).status());
  EXPECT_EQ(Live(), "pds=1 mrs=3 mws=2 qps=2");
  // Not visible as regions, not counted in the PD.
  std::vector<v1::MemoryRegion> all = OK(registry_->ListMrs(v1::ListMrsRequest()));
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].name(), mr_.name());
  EXPECT_EQ(Pd(pd_).mr_count(), 1u);
  // Released with the window: by invalidation (after it), by deallocation (after the window).
  const uint64_t w1 = ledger_->MwIdByRkey(Mw(w1_.name()).rkey()), w2 = ledger_->MwIdByRkey(Mw(w2_.name()).rkey());
  const uint64_t b1 = ledger_->MwBoundMr(w1), b2 = ledger_->MwBoundMr(w2);
  ledger_->ClearEvents();
  ASSERT_OK(registry_->InvalidateMw(w2_.name()).status());
  ASSERT_OK(registry_->DeallocMw(w1_.name()));
  EXPECT_THAT(ledger_->events_of({"unbind_mw", "invalidate_mw", "dealloc_mw", "dereg_mr"}),
              ElementsAre("invalidate_mw " + S(w2), "dereg_mr " + S(b2), "dealloc_mw " + S(w1), "dereg_mr " + S(b1)));
  EXPECT_EQ(Live(), "pds=1 mrs=1 mws=1 qps=2");
}

TEST_F(BindTest, AFailedBoundsRegistrationLeavesTheWindowAsItWas) {
  ledger_->FailNextRegMr(ENOMEM);
  const int binds = ledger_->calls("bind");
  absl::StatusOr<v1::MemoryWindow> r = registry_->BindMw(BindReq(w1_.name(), mr_.name(), 0, kPage));
  EXPECT_TRUE(IsError(r, absl::StatusCode::kResourceExhausted, ""));
  EXPECT_EQ(CallOf(r.status()), "ibv_reg_mr");
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("bounds region"));
  EXPECT_EQ(ledger_->calls("bind"), binds);
  EXPECT_TRUE(MessageDifferencer::Equals(Mw(w1_.name()), w1_));
  EXPECT_EQ(Mr(mr_.name()).bound_windows(), 0u);
  EXPECT_OK(registry_->DeregisterMr(mr_.name()));
}

// A bind's or an invalidation's completion is polled on the thread that posted it: the answer leaves from
// there, with no hand-off to the dispatcher. What completes only later (here: held in the fabric) is the
// dispatcher's.
TEST_F(RegistryTest, ACompletionIsPolledOnThePostingThreadAndOneThatComesLaterIsTheDispatchers) {
  const std::string pd = NewPd();
  const std::string mr = NewMr(pd).name();
  const std::string mw = NewMw(pd, v1::TYPE_1).name();
  const std::thread::id me = std::this_thread::get_id();
  std::thread::id answered_on;
  Notification bound;
  std::thread::id pinned_on;
  ledger_->SetRegMrHook([&] { pinned_on = std::this_thread::get_id(); });
  ledger_->DeferSignals(true);  // the completion is there before the dispatcher could wake
  registry_->BindMwAsync(BindReq(mw, mr, 0, kPage), [&](absl::StatusOr<v1::MemoryWindow> w) {
    EXPECT_OK(w.status());
    answered_on = std::this_thread::get_id();
    bound.Notify();
  });
  // rxe0's binds pin a bounds region: a pin worker pins it, posts the bind, polls and answers (one hand-off).
  bound.WaitForNotification();
  ledger_->DeferSignals(false);
  ledger_->SetRegMrHook(nullptr);
  EXPECT_NE(pinned_on, me);
  EXPECT_EQ(answered_on, pinned_on);
  EXPECT_EQ(registry_->completion_counts().on_poster, 1u);
  EXPECT_EQ(registry_->completion_counts().on_dispatcher, 0u);

  ledger_->HoldCompletions();
  Notification invalidated;
  registry_->InvalidateMwAsync(mw, [&](absl::StatusOr<v1::MemoryWindow> w) {
    EXPECT_OK(w.status());
    answered_on = std::this_thread::get_id();
    invalidated.Notify();
  });
  EXPECT_FALSE(invalidated.HasBeenNotified());
  ledger_->ReleaseCompletions();
  invalidated.WaitForNotification();
  EXPECT_NE(answered_on, me);
  EXPECT_EQ(registry_->completion_counts().on_poster, 1u);
  EXPECT_EQ(registry_->completion_counts().on_dispatcher, 1u);
}


}  // namespace
}  // namespace rdmad::registry_test
