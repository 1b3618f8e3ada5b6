// Unit tests of rdmad::Registry over the fake fabric (registry_fixture.h): ReregisterMr. The validation
// both paths share (bad flags and arguments refused with the old region valid and unchanged; EBUSY while a
// window is bound), the emulated path on rxe0 (register the new, then deregister the old: access, PD and
// translation changes, and each half failing), UsageOfPd's running totals through every change, and the
// native path on rxe1 (ibv_rereg_mr(3) and the outcome of each of its result codes, the unusable region).
//
// Threads: the test's own; the registry's workers map and pin memory (ReregisterMr waits for them), its
// dispatchers run the bind and invalidate completions.
#include <cerrno>
#include <cstdint>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "server/common/status.h"
#include "server/rpc/status.h"
#include "tests/support/server_status.h"
#include "tests/support/status.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/registry_fixture.h"

namespace rdmad::registry_test {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::rdmad::test::IsError;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// ---------------------------------------------------------------------------------------------------------
// ReregisterMr: validation (both paths)

class ReregValidationTest : public RegistryTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(ReregValidationTest, BadRequestsAreRefusedAndTheRegionIsValidAndUnchanged) {
  const std::string device = GetParam();
  const std::string pd = NewPd(device);
  const std::string pd2 = NewPd(device);
  const std::string foreign_pd = NewPd(device == kEmu ? kNat : kEmu);
  v1::MemoryRegion mr = NewMr(pd);

  auto with_source = [](v1::ReregisterMrRequest r, uint64_t size) {
    r.mutable_source()->mutable_anonymous()->set_size(size);
    return r;
  };
  auto with_pd = [](v1::ReregisterMrRequest r, const std::string& p) {
    r.set_pd(p);
    return r;
  };
  auto with_access = [](v1::ReregisterMrRequest r, const Access& a) {
    SetAccess(&r, a);
    return r;
  };
  v1::ReregisterMrRequest unknown_flag = ReregReq(mr.name(), {v1::CHANGE_ACCESS});
  unknown_flag.add_flags(static_cast<v1::ReregFlag>(9));
  struct Case {
    const char* what;
    v1::ReregisterMrRequest req;
    absl::StatusCode code;
    const char* field;
  };
  const std::string n = mr.name();
  const std::vector<Case> cases = {
      {"no flags", ReregReq(n, {}), absl::StatusCode::kInvalidArgument, "flags"},
      {"unknown flag", unknown_flag, absl::StatusCode::kInvalidArgument, "flags"},
      {"source without CHANGE_TRANSLATION", with_source(ReregReq(n, {v1::CHANGE_ACCESS}), kPage),
       absl::StatusCode::kInvalidArgument, "source"},
      {"CHANGE_TRANSLATION without source", ReregReq(n, {v1::CHANGE_TRANSLATION}),
       absl::StatusCode::kInvalidArgument, "flags"},
      {"pd without CHANGE_PD", with_pd(ReregReq(n, {v1::CHANGE_ACCESS}), pd2), absl::StatusCode::kInvalidArgument,
       "pd"},
      {"CHANGE_PD without pd", ReregReq(n, {v1::CHANGE_PD}), absl::StatusCode::kInvalidArgument, "flags"},
      {"access without CHANGE_ACCESS",
       with_access(with_source(ReregReq(n, {v1::CHANGE_TRANSLATION}), kPage), {v1::LOCAL_WRITE}),
       absl::StatusCode::kInvalidArgument, "access"},
      {"unknown new pd", with_pd(ReregReq(n, {v1::CHANGE_PD}), "pds/99"), absl::StatusCode::kNotFound, "pd"},
      {"malformed new pd", with_pd(ReregReq(n, {v1::CHANGE_PD}), "pd2"), absl::StatusCode::kInvalidArgument, "pd"},
      {"pd on another device", with_pd(ReregReq(n, {v1::CHANGE_PD}), foreign_pd),
       absl::StatusCode::kInvalidArgument, "pd"},
      {"access rule", with_access(ReregReq(n, {v1::CHANGE_ACCESS}), {v1::REMOTE_WRITE}),
       absl::StatusCode::kInvalidArgument, "access"},
      {"new source of size 0", with_source(ReregReq(n, {v1::CHANGE_TRANSLATION}), 0),
       absl::StatusCode::kInvalidArgument, "source.anonymous.size"},
  };
  const int reg_calls = ledger_->calls("reg_mr");
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    absl::StatusOr<v1::ReregisterMrResponse> r = registry_->ReregisterMr(c.req);
    EXPECT_TRUE(IsError(r, c.code, c.field));
    EXPECT_EQ(DetailOf(r.status()).rereg_outcome(), v1::OUTCOME_OLD_MR_VALID);
  }
  EXPECT_EQ(ledger_->calls("rereg_mr"), 0);
  EXPECT_EQ(ledger_->calls("reg_mr"), reg_calls);
  EXPECT_EQ(ledger_->calls("dereg_mr"), 0);
  EXPECT_TRUE(MessageDifferencer::Equals(Mr(n), mr));
  EXPECT_EQ(Pd(pd).mr_count(), 1u);
  EXPECT_EQ(Pd(pd2).mr_count(), 0u);
}

TEST_P(ReregValidationTest, RefusedWithEbusyWhileAWindowIsBound) {
  const std::string pd = NewPd(GetParam());
  v1::MemoryRegion mr = NewMr(pd);
  v1::MemoryWindow w = NewMw(pd, v1::TYPE_1);
  ASSERT_OK(registry_->BindMw(BindReq(w.name(), mr.name(), 0, kPage)).status());
  mr = Mr(mr.name());
  v1::ReregisterMrRequest req = ReregReq(mr.name(), {v1::CHANGE_ACCESS});
  SetAccess(&req, {v1::LOCAL_WRITE, v1::MW_BIND});
  absl::StatusOr<v1::ReregisterMrResponse> r = registry_->ReregisterMr(req);
  EXPECT_TRUE(IsError(r, absl::StatusCode::kFailedPrecondition, "name"));
  EXPECT_EQ(ErrnoOf(r.status()), EBUSY);
  EXPECT_EQ(DetailOf(r.status()).rereg_outcome(), v1::OUTCOME_OLD_MR_VALID);
  EXPECT_EQ(ledger_->calls("rereg_mr"), 0);
  EXPECT_TRUE(MessageDifferencer::Equals(Mr(mr.name()), mr));
  // After the window is invalidated, the same request succeeds.
  ASSERT_OK(registry_->InvalidateMw(w.name()).status());
  EXPECT_TRUE(registry_->ReregisterMr(req).ok());
}

INSTANTIATE_TEST_SUITE_P(BothPaths, ReregValidationTest, ::testing::Values(kEmu, kNat),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param) == kEmu ? "Emulated" : "Native";
                         });

// ---------------------------------------------------------------------------------------------------------
// ReregisterMr: emulated (register the new, then deregister the old)

TEST_F(RegistryTest, EmulatedReregChangesAccessKeepingTheName) {
  const std::string pd = NewPd(kEmu);
  v1::MemoryRegion mr = NewMr(pd, kPage, {v1::LOCAL_WRITE});
  const uint64_t old_fake = ledger_->MrIdByLkey(mr.lkey());
  ledger_->ClearEvents();
  v1::ReregisterMrRequest req = ReregReq(mr.name(), {v1::CHANGE_ACCESS});
  SetAccess(&req, {v1::LOCAL_WRITE, v1::REMOTE_READ, v1::MW_BIND});
  v1::ReregisterMrResponse r = OK(registry_->ReregisterMr(req));
  EXPECT_EQ(r.method(), v1::EMULATED);
  EXPECT_EQ(r.mr().name(), mr.name());
  EXPECT_EQ(r.mr().generation(), 1u);
  EXPECT_TRUE(r.keys_changed());
  EXPECT_EQ(r.old_lkey(), mr.lkey());
  EXPECT_EQ(r.old_rkey(), mr.rkey());
  EXPECT_NE(r.mr().lkey(), mr.lkey());
  EXPECT_NE(r.mr().rkey(), mr.rkey());
  EXPECT_THAT(r.mr().access(), ElementsAre(v1::LOCAL_WRITE, v1::REMOTE_READ, v1::MW_BIND));
  EXPECT_EQ(r.mr().addr(), mr.addr());  // same memory
  EXPECT_EQ(r.mr().length(), mr.length());
  EXPECT_TRUE(r.warning().empty());
  EXPECT_TRUE(MessageDifferencer::Equals(Mr(mr.name()), r.mr()));
  // The new registration first, then the old one released: never a moment without a valid MR.
  const uint64_t new_fake = ledger_->MrIdByLkey(r.mr().lkey());
  EXPECT_THAT(ledger_->events_of({"reg_mr", "dereg_mr"}),
              ElementsAre("reg_mr " + S(new_fake), "dereg_mr " + S(old_fake)));
  EXPECT_EQ(ledger_->calls("rereg_mr"), 0);
  EXPECT_EQ(Live(), "pds=1 mrs=1 mws=0 qps=0");
  // A second rereg counts up again.
  EXPECT_EQ(OK(registry_->ReregisterMr(req)).mr().generation(), 2u);
}

TEST_F(RegistryTest, EmulatedReregChangePdMovesTheCount) {
  const std::string a = NewPd(kEmu), b = NewPd(kEmu);
  v1::MemoryRegion mr = NewMr(a);
  v1::ReregisterMrRequest req = ReregReq(mr.name(), {v1::CHANGE_PD});
  req.set_pd(b);
  v1::ReregisterMrResponse r = OK(registry_->ReregisterMr(req));
  EXPECT_EQ(r.mr().pd(), b);
  EXPECT_EQ(r.mr().generation(), 1u);
  EXPECT_EQ(Pd(a).mr_count(), 0u);
  EXPECT_EQ(Pd(b).mr_count(), 1u);
  v1::ListMrsRequest list;
  list.set_pd(b);
  EXPECT_EQ(OK(registry_->ListMrs(list)).size(), 1u);
  // A is empty now (and the fake checks that its fabric PD really holds nothing when it is deallocated).
  v1::DeletePdRequest del;
  del.set_name(a);
  EXPECT_TRUE(registry_->DeletePd(del).ok());
  EXPECT_THAT(ledger_->violations(), IsEmpty());
  // A window of B binds to it.
  v1::MemoryWindow w = NewMw(b, v1::TYPE_1);
  EXPECT_TRUE(registry_->BindMw(BindReq(w.name(), mr.name(), 0, kPage)).ok());
}

// A tenant's quotas read UsageOfPd's running totals (no listing per creation). Through every change
// of membership or length they must equal what the lists say.
TEST_F(RegistryTest, UsageOfPdMatchesTheListsThroughEveryChange) {
  auto expect_matches = [&](const std::string& pd, const char* when) {
    SCOPED_TRACE(absl::StrCat(pd, " ", when));
    Registry::PdUsage u = OK(registry_->UsageOfPd(pd));
    v1::ListMrsRequest mrs;
    mrs.set_pd(pd);
    uint64_t n = 0, bytes = 0;
    const std::vector<v1::MemoryRegion> listed = OK(registry_->ListMrs(mrs));
    for (const v1::MemoryRegion& m : listed) n++, bytes += m.length();
    EXPECT_EQ(u.mrs, n);
    EXPECT_EQ(u.mr_bytes, bytes);
    v1::ListMwsRequest mws;
    mws.set_pd(pd);
    uint64_t own = 0;
    const std::vector<v1::MemoryWindow> windows = OK(registry_->ListMws(mws));
    for (const v1::MemoryWindow& w : windows) own += w.owner().empty() ? 1 : 0;
    EXPECT_EQ(u.mws, own);
    uint64_t qps = 0;
    for (const v1::QueuePair& q : registry_->ListQps()) qps += q.pd() == pd ? 1 : 0;
    EXPECT_EQ(u.qps, qps);
  };
  const std::string a = NewPd(kEmu), b = NewPd(kEmu), c = NewPd(kNat);
  expect_matches(a, "empty");
  v1::MemoryRegion m1 = NewMr(a, kPage), m2 = NewMr(a, 3 * kPage), m3 = NewMr(a, 5 * kPage);
  v1::MemoryRegion m4 = NewMr(c, 2 * kPage);
  v1::MemoryWindow own = NewMw(a, v1::TYPE_1);
  v1::AllocMwRequest pool;
  pool.set_pd(a);
  pool.set_type(v1::TYPE_2);
  v1::MemoryWindow grants = OK(registry_->AllocMw(pool, "grants"));
  v1::QueuePair qp = NewQp(a, false);
  expect_matches(a, "after creations");
  EXPECT_EQ(OK(registry_->UsageOfPd(a)).mr_bytes, 9 * kPage);
  EXPECT_EQ(OK(registry_->UsageOfPd(a)).mws, 1u);  // the grant pool's window is rdmad's

  v1::ReregisterMrRequest grow = ReregReq(m2.name(), {v1::CHANGE_TRANSLATION});  // emulated: 3 -> 7 pages
  grow.mutable_source()->mutable_anonymous()->set_size(7 * kPage);
  ASSERT_TRUE(registry_->ReregisterMr(grow).ok());
  expect_matches(a, "after an emulated rereg of the length");
  v1::ReregisterMrRequest move = ReregReq(m3.name(), {v1::CHANGE_PD});
  move.set_pd(b);
  ASSERT_TRUE(registry_->ReregisterMr(move).ok());
  expect_matches(a, "after CHANGE_PD away");
  expect_matches(b, "after CHANGE_PD in");
  v1::ReregisterMrRequest shrink = ReregReq(m4.name(), {v1::CHANGE_TRANSLATION});  // native: 2 -> 1 page
  shrink.mutable_source()->mutable_anonymous()->set_size(kPage);
  ASSERT_TRUE(registry_->ReregisterMr(shrink).ok());
  expect_matches(c, "after a native rereg of the length");
  EXPECT_EQ(OK(registry_->UsageOfPd(c)).mr_bytes, kPage);

  ASSERT_TRUE(registry_->DeregisterMr(m1.name()).ok());
  ASSERT_TRUE(registry_->DeallocMw(own.name()).ok());
  ASSERT_TRUE(registry_->DeleteQp(qp.name()).ok());
  expect_matches(a, "after removals");
  EXPECT_EQ(OK(registry_->UsageOfPd(a)).mrs, 1u);
  EXPECT_EQ(OK(registry_->UsageOfPd(a)).mws, 0u);
  EXPECT_EQ(OK(registry_->UsageOfPd(a)).qps, 0u);
  ASSERT_TRUE(registry_->DeallocMw(grants.name(), "grants").ok());

  v1::DeletePdRequest del;
  del.set_name(b);
  del.set_cascade(true);
  ASSERT_TRUE(registry_->DeletePd(del).ok());
  EXPECT_TRUE(IsError(registry_->UsageOfPd(b), absl::StatusCode::kNotFound, "pd"));
  for (const std::string& pd : {a, c}) {
    del.set_name(pd);
    ASSERT_TRUE(registry_->DeletePd(del).ok());
  }
}

TEST_F(RegistryTest, EmulatedReregChangeTranslationChangesSourceAndLength) {
  const std::string pd = NewPd(kEmu);
  v1::MemoryRegion mr = NewMr(pd, kPage);
  v1::ReregisterMrRequest req = ReregReq(mr.name(), {v1::CHANGE_TRANSLATION});
  req.mutable_source()->mutable_anonymous()->set_size(3 * kPage);
  v1::ReregisterMrResponse r = OK(registry_->ReregisterMr(req));
  EXPECT_EQ(r.mr().length(), 3 * kPage);
  EXPECT_EQ(r.mr().source().anonymous().size(), 3 * kPage);
  EXPECT_TRUE(r.keys_changed());
  EXPECT_EQ(r.mr().generation(), 1u);

  // To a file range.
  const std::string path = root_.WriteFile("t.bin", 2 * kPage);
  v1::ReregisterMrRequest to_file = ReregReq(mr.name(), {v1::CHANGE_TRANSLATION, v1::CHANGE_ACCESS});
  auto* f = to_file.mutable_source()->mutable_file();
  f->set_path(path);
  f->set_offset(10);
  f->set_length(kPage);
  SetAccess(&to_file, {v1::LOCAL_WRITE});
  r = OK(registry_->ReregisterMr(to_file));
  EXPECT_EQ(r.mr().length(), kPage);
  EXPECT_EQ(r.mr().source().file().path(), path);
  EXPECT_EQ(*reinterpret_cast<const unsigned char*>(r.mr().addr()), TempDir::Pattern(10));
  EXPECT_THAT(r.mr().access(), ElementsAre(v1::LOCAL_WRITE));
  EXPECT_EQ(r.mr().generation(), 2u);

  // A new source past the end of the file: refused, nothing changes.
  f->set_offset(2 * kPage);
  absl::StatusOr<v1::ReregisterMrResponse> bad = registry_->ReregisterMr(to_file);
  EXPECT_TRUE(IsError(bad, absl::StatusCode::kOutOfRange, "source.file.offset"));
  EXPECT_EQ(DetailOf(bad.status()).rereg_outcome(), v1::OUTCOME_OLD_MR_VALID);
  EXPECT_TRUE(MessageDifferencer::Equals(Mr(mr.name()), r.mr()));
  EXPECT_EQ(Live(), "pds=1 mrs=1 mws=0 qps=0");
}

TEST_F(RegistryTest, EmulatedReregWhoseNewRegistrationFailsLeavesTheOldOne) {
  const std::string a = NewPd(kEmu), b = NewPd(kEmu);
  v1::MemoryRegion mr = NewMr(a);
  ledger_->FailNextRegMr(ENOMEM);
  v1::ReregisterMrRequest req = ReregReq(mr.name(), {v1::CHANGE_PD, v1::CHANGE_TRANSLATION});
  req.set_pd(b);
  req.mutable_source()->mutable_anonymous()->set_size(2 * kPage);
  absl::StatusOr<v1::ReregisterMrResponse> r = registry_->ReregisterMr(req);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_EQ(ErrnoOf(r.status()), ENOMEM);
  EXPECT_EQ(CallOf(r.status()), "ibv_reg_mr");
  EXPECT_EQ(DetailOf(r.status()).rereg_outcome(), v1::OUTCOME_OLD_MR_VALID);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("unchanged"));
  EXPECT_TRUE(MessageDifferencer::Equals(Mr(mr.name()), mr));  // same keys, PD, source, generation 0
  EXPECT_EQ(Pd(a).mr_count(), 1u);
  EXPECT_EQ(Pd(b).mr_count(), 0u);
  EXPECT_EQ(ledger_->calls("dereg_mr"), 0);
  EXPECT_EQ(Live(), "pds=2 mrs=1 mws=0 qps=0");
  EXPECT_NE(ledger_->MrIdByLkey(mr.lkey()), 0u);  // the old registration is still the live one
}

TEST_F(RegistryTest, EmulatedReregWhoseOldReleaseFailsUndoesTheNewOne) {
  const std::string a = NewPd(kEmu), b = NewPd(kEmu);
  v1::MemoryRegion mr = NewMr(a);
  const uint64_t old_fake = ledger_->MrIdByLkey(mr.lkey());
  ledger_->ClearEvents();
  ledger_->FailNextRelease(EIO);
  v1::ReregisterMrRequest req = ReregReq(mr.name(), {v1::CHANGE_PD});
  req.set_pd(b);
  absl::StatusOr<v1::ReregisterMrResponse> r = registry_->ReregisterMr(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(ErrnoOf(r.status()), EIO);
  EXPECT_EQ(CallOf(r.status()), "ibv_dereg_mr");
  EXPECT_EQ(DetailOf(r.status()).rereg_outcome(), v1::OUTCOME_OLD_MR_VALID);
  EXPECT_TRUE(MessageDifferencer::Equals(Mr(mr.name()), mr));
  EXPECT_EQ(Pd(a).mr_count(), 1u);
  EXPECT_EQ(Pd(b).mr_count(), 0u);
  // The new registration was made and undone; the old one is still live.
  std::vector<std::string> ev = ledger_->events_of({"reg_mr", "dereg_mr"});
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].substr(0, 7), "reg_mr ");
  EXPECT_EQ(ev[1], "dereg_mr " + ev[0].substr(7));
  EXPECT_NE(ev[1], "dereg_mr " + S(old_fake));
  EXPECT_EQ(ledger_->MrIdByLkey(mr.lkey()), old_fake);
  EXPECT_EQ(Live(), "pds=2 mrs=1 mws=0 qps=0");
  // And the region still works: it can be deleted normally.
  EXPECT_OK(registry_->DeregisterMr(mr.name()));
}

// ---------------------------------------------------------------------------------------------------------
// ReregisterMr: native (ibv_rereg_mr and its result codes)

TEST_F(RegistryTest, NativeReregOkAppliesEverything) {
  const std::string a = NewPd(kNat), b = NewPd(kNat);
  v1::MemoryRegion mr = NewMr(a, kPage, {v1::LOCAL_WRITE});
  const uint64_t fake_id = ledger_->MrIdByLkey(mr.lkey());
  v1::ReregisterMrRequest req = ReregReq(mr.name(), {v1::CHANGE_TRANSLATION, v1::CHANGE_PD, v1::CHANGE_ACCESS});
  req.mutable_source()->mutable_anonymous()->set_size(2 * kPage);
  req.set_pd(b);
  SetAccess(&req, {v1::LOCAL_WRITE, v1::REMOTE_READ});
  v1::ReregisterMrResponse r = OK(registry_->ReregisterMr(req));
  EXPECT_EQ(r.method(), v1::NATIVE);
  EXPECT_EQ(r.mr().name(), mr.name());
  EXPECT_EQ(r.mr().pd(), b);
  EXPECT_EQ(r.mr().length(), 2 * kPage);
  EXPECT_EQ(r.mr().source().anonymous().size(), 2 * kPage);
  EXPECT_THAT(r.mr().access(), ElementsAre(v1::LOCAL_WRITE, v1::REMOTE_READ));
  EXPECT_EQ(r.mr().generation(), 1u);
  EXPECT_EQ(r.mr().state(), v1::MR_READY);
  EXPECT_TRUE(r.keys_changed());
  EXPECT_EQ(r.old_lkey(), mr.lkey());
  EXPECT_EQ(r.old_rkey(), mr.rkey());
  EXPECT_TRUE(r.warning().empty());
  EXPECT_EQ(Pd(a).mr_count(), 0u);
  EXPECT_EQ(Pd(b).mr_count(), 1u);
  // One ibv_rereg_mr on the same fabric MR; no extra registration.
  EXPECT_EQ(ledger_->calls("rereg_mr"), 1);
  EXPECT_EQ(ledger_->calls("reg_mr"), 1);
  EXPECT_EQ(ledger_->MrIdByLkey(r.mr().lkey()), fake_id);
  EXPECT_TRUE(MessageDifferencer::Equals(Mr(mr.name()), r.mr()));
}

class NativeOldValidTest : public RegistryTest, public ::testing::WithParamInterface<fabric::ReregCode> {};

TEST_P(NativeOldValidTest, TheRegionIsValidAndUnchanged) {
  const std::string a = NewPd(kNat), b = NewPd(kNat);
  v1::MemoryRegion mr = NewMr(a);
  ledger_->ScriptRereg(GetParam(), ENOMEM);
  v1::ReregisterMrRequest req = ReregReq(mr.name(), {v1::CHANGE_PD, v1::CHANGE_TRANSLATION});
  req.set_pd(b);
  req.mutable_source()->mutable_anonymous()->set_size(2 * kPage);
  absl::StatusOr<v1::ReregisterMrResponse> r = registry_->ReregisterMr(req);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_EQ(ErrnoOf(r.status()), ENOMEM);
  EXPECT_EQ(CallOf(r.status()), "ibv_rereg_mr");
  EXPECT_EQ(DetailOf(r.status()).rereg_outcome(), v1::OUTCOME_OLD_MR_VALID);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(fabric::ReregCodeName(GetParam())));
  v1::MemoryRegion now = Mr(mr.name());
  EXPECT_TRUE(MessageDifferencer::Equals(now, mr)) << now.DebugString();
  EXPECT_EQ(Pd(a).mr_count(), 1u);
  EXPECT_EQ(Pd(b).mr_count(), 0u);
  // Still usable: a window binds, a later rereg works.
  v1::MemoryWindow w = NewMw(a, v1::TYPE_1);
  ASSERT_TRUE(registry_->BindMw(BindReq(w.name(), mr.name(), 0, kPage)).ok());
  ASSERT_OK(registry_->InvalidateMw(w.name()).status());
  EXPECT_EQ(OK(registry_->ReregisterMr(req)).mr().generation(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Codes, NativeOldValidTest,
                         ::testing::Values(fabric::ReregCode::kErrInput, fabric::ReregCode::kErrDontForkNew),
                         [](const ::testing::TestParamInfo<fabric::ReregCode>& info) {
                           return info.param == fabric::ReregCode::kErrInput ? "ErrInput" : "ErrDontForkNew";
                         });

TEST_F(RegistryTest, NativeDoForkOldIsSuccessWithAWarning) {
  const std::string pd = NewPd(kNat);
  v1::MemoryRegion mr = NewMr(pd, kPage);
  ledger_->ScriptRereg(fabric::ReregCode::kErrDoForkOld, EFAULT);
  v1::ReregisterMrRequest req = ReregReq(mr.name(), {v1::CHANGE_TRANSLATION, v1::CHANGE_ACCESS});
  req.mutable_source()->mutable_anonymous()->set_size(5 * kPage);
  SetAccess(&req, {v1::LOCAL_WRITE, v1::REMOTE_WRITE});
  v1::ReregisterMrResponse r = OK(registry_->ReregisterMr(req));
  EXPECT_EQ(r.method(), v1::NATIVE);
  EXPECT_THAT(r.warning(), HasSubstr("IBV_REREG_MR_ERR_DO_FORK_OLD"));
  EXPECT_THAT(r.warning(), HasSubstr("EFAULT"));
  EXPECT_EQ(r.mr().length(), 5 * kPage);
  EXPECT_THAT(r.mr().access(), ElementsAre(v1::LOCAL_WRITE, v1::REMOTE_WRITE));
  EXPECT_EQ(r.mr().generation(), 1u);
  EXPECT_EQ(r.mr().state(), v1::MR_READY);
  EXPECT_TRUE(r.keys_changed());
  EXPECT_TRUE(MessageDifferencer::Equals(Mr(mr.name()), r.mr()));
}

class NativeUnusableTest : public RegistryTest, public ::testing::WithParamInterface<fabric::ReregCode> {};

TEST_P(NativeUnusableTest, TheRegionBecomesUnusableAndOnlyDeregisterIsAccepted) {
  const std::string pd = NewPd(kNat);
  v1::MemoryRegion mr = NewMr(pd);
  v1::MemoryWindow w = NewMw(pd, v1::TYPE_1);
  ledger_->ScriptRereg(GetParam(), EIO);
  v1::ReregisterMrRequest req = ReregReq(mr.name(), {v1::CHANGE_TRANSLATION});
  req.mutable_source()->mutable_anonymous()->set_size(2 * kPage);
  absl::StatusOr<v1::ReregisterMrResponse> r = registry_->ReregisterMr(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(ErrnoOf(r.status()), EIO);
  EXPECT_EQ(CallOf(r.status()), "ibv_rereg_mr");
  EXPECT_EQ(DetailOf(r.status()).rereg_outcome(), v1::OUTCOME_MR_UNUSABLE);

  v1::MemoryRegion now = Mr(mr.name());
  EXPECT_EQ(now.state(), v1::MR_UNUSABLE);
  EXPECT_THAT(now.unusable_reason(), HasSubstr(fabric::ReregCodeName(GetParam())));
  EXPECT_THAT(now.unusable_reason(), HasSubstr("EIO"));
  EXPECT_EQ(Pd(pd).mr_count(), 1u);

  // Rereg and BindMw are refused; nothing reaches the fabric.
  v1::ReregisterMrRequest again = ReregReq(mr.name(), {v1::CHANGE_ACCESS});
  EXPECT_TRUE(IsError(registry_->ReregisterMr(again), absl::StatusCode::kFailedPrecondition, "name"));
  EXPECT_TRUE(IsError(registry_->BindMw(BindReq(w.name(), mr.name(), 0, kPage)),
                      absl::StatusCode::kFailedPrecondition, "mr"));
  EXPECT_EQ(ledger_->calls("rereg_mr"), 1);
  EXPECT_EQ(ledger_->calls("bind"), 0);
  EXPECT_EQ(ledger_->calls("reg_mr"), 1);
  EXPECT_FALSE(Mw(w.name()).bound());

  // Deregister is accepted (ibv_rereg_mr(3) NOTES: even on failure, ibv_dereg_mr is still needed).
  EXPECT_OK(registry_->DeregisterMr(mr.name()));
  EXPECT_EQ(Pd(pd).mr_count(), 0u);
  EXPECT_EQ(Live(), "pds=1 mrs=0 mws=1 qps=0");
}

INSTANTIATE_TEST_SUITE_P(Codes, NativeUnusableTest,
                         ::testing::Values(fabric::ReregCode::kErrCmd, fabric::ReregCode::kErrCmdAndDoForkNew),
                         [](const ::testing::TestParamInfo<fabric::ReregCode>& info) {
                           return info.param == fabric::ReregCode::kErrCmd ? "ErrCmd" : "ErrCmdAndDoForkNew";
                         });

// BUG (contract gap; server/registry/registry.cc, Registry::ReregisterMr): docs/api.md promises that
// "every refusal before the fabric is called also carries" a rereg outcome, "so a client can always tell
// from the error alone what survived". A rereg of a region that is already MR_UNUSABLE is refused with
// FAILED_PRECONDITION but carries no rereg_outcome at all (REREG_OUTCOME_UNSPECIFIED): the `unusable`
// check returns before the `refuse` wrapper is applied. What survives is an unusable region, so the
// outcome should be OUTCOME_MR_UNUSABLE (OUTCOME_OLD_MR_VALID, the other refusals' value, would be false).
TEST_F(RegistryTest, ReregOfAnUnusableRegionSaysItIsUnusable) {
  const std::string pd = NewPd(kNat);
  v1::MemoryRegion mr = NewMr(pd);
  ledger_->ScriptRereg(fabric::ReregCode::kErrCmd, EIO);
  ASSERT_FALSE(registry_->ReregisterMr(ReregReq(mr.name(), {v1::CHANGE_ACCESS})).ok());
  absl::StatusOr<v1::ReregisterMrResponse> r = registry_->ReregisterMr(ReregReq(mr.name(), {v1::CHANGE_ACCESS}));
  EXPECT_TRUE(IsError(r, absl::StatusCode::kFailedPrecondition, "name"));
  EXPECT_EQ(DetailOf(r.status()).rereg_outcome(), v1::OUTCOME_MR_UNUSABLE);
}

TEST_F(RegistryTest, AnUnusableRegionIsReleasedByACascadeAndTheDestructor) {
  const std::string pd = NewPd(kNat);
  v1::MemoryRegion a = NewMr(pd), b = NewMr(pd);
  ledger_->ScriptRereg(fabric::ReregCode::kErrCmd, EINVAL);
  ledger_->ScriptRereg(fabric::ReregCode::kErrCmdAndDoForkNew, EINVAL);
  EXPECT_FALSE(registry_->ReregisterMr(ReregReq(a.name(), {v1::CHANGE_ACCESS})).ok());
  EXPECT_FALSE(registry_->ReregisterMr(ReregReq(b.name(), {v1::CHANGE_ACCESS})).ok());
  v1::DeletePdRequest del;
  del.set_name(pd);
  del.set_cascade(true);
  EXPECT_THAT(OK(registry_->DeletePd(del)).deleted(), ElementsAre(a.name(), b.name(), pd));
  const std::string pd2 = NewPd(kNat);
  v1::MemoryRegion c = NewMr(pd2);
  ledger_->ScriptRereg(fabric::ReregCode::kErrCmd, EINVAL);
  EXPECT_FALSE(registry_->ReregisterMr(ReregReq(c.name(), {v1::CHANGE_ACCESS})).ok());
  // TearDown destroys the registry with the unusable MR in it and checks it was released.
}

}  // namespace
}  // namespace rdmad::registry_test
