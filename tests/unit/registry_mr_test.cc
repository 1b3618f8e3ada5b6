// Unit tests of rdmad::Registry over the fake fabric (registry_fixture.h): registering memory regions
// (anonymous memory, a range of a shared file at any offset), what is refused before anything is pinned or the
// fabric is called (RLIMIT_MEMLOCK, the ibv_reg_mr(3) access rule, bad file and anonymous sources, the size
// limit, physical memory), a failed ibv_reg_mr, and deregistration (refused with EBUSY while a window is bound;
// a failed one keeps the region).
//
// Threads: the test's own; the registry's workers map and pin memory (RegisterMr waits for them, and the
// fake's RegMr hook runs there), its dispatchers run the bind and invalidate completions.
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

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
// Access rule (ibv_reg_mr(3)): REMOTE_WRITE / REMOTE_ATOMIC need LOCAL_WRITE, checked before the fabric.

TEST_F(RegistryTest, ARegistrationPastRlimitMemlockIsRefusedBeforeAnythingIsPinned) {
  // What the kernel counts as pinned (VmPin in rdmad): set by the test as the fake "pins".
  auto pinned = std::make_shared<std::atomic<uint64_t>>(0);
  Reset({fake::MakeDeviceInfo("rxe0", false), fake::MakeDeviceInfo("rxe1", true)}, 0,
        Memlock(16 * kPage, [pinned] { return pinned->load(); }));
  const std::string pd = NewPd();
  NewMr(pd, 8 * kPage);
  pinned->store(8 * kPage);
  absl::StatusOr<v1::MemoryRegion> over = registry_->RegisterMr(AnonReq(pd, 9 * kPage, kFull));
  ASSERT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted) << over.status();
  EXPECT_EQ(FieldOf(over.status()), "source");
  EXPECT_THAT(std::string(over.status().message()),
              ::testing::AllOf(HasSubstr("RLIMIT_MEMLOCK of 65536 bytes"), HasSubstr("32768 bytes pinned already"),
                    HasSubstr("LimitMEMLOCK=infinity"), HasSubstr("CAP_IPC_LOCK")));
  EXPECT_EQ(Live(), "pds=1 mrs=1 mws=0 qps=0");  // nothing reached the NIC
  NewMr(pd, 8 * kPage);  // exactly up to the limit is fine
  EXPECT_EQ(Live(), "pds=1 mrs=2 mws=0 qps=0");
}

TEST_F(RegistryTest, RemoteWriteOrAtomicWithoutLocalWriteIsRefusedBeforeTheFabric) {
  const std::string pd = NewPd();
  const std::vector<std::string> events = ledger_->events();
  for (const Access& access : {Access{v1::REMOTE_WRITE}, Access{v1::REMOTE_ATOMIC},
                               Access{v1::REMOTE_READ, v1::REMOTE_WRITE, v1::MW_BIND},
                               Access{v1::REMOTE_ATOMIC, v1::REMOTE_READ}}) {
    absl::StatusOr<v1::MemoryRegion> r = registry_->RegisterMr(AnonReq(pd, kPage, access));
    EXPECT_TRUE(IsError(r, absl::StatusCode::kInvalidArgument, "access"));
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("LOCAL_WRITE"));
  }
  // An unknown flag value is refused the same way.
  v1::RegisterMrRequest unknown = AnonReq(pd, kPage, {v1::LOCAL_WRITE});
  unknown.add_access(static_cast<v1::Access>(42));
  EXPECT_TRUE(IsError(registry_->RegisterMr(unknown), absl::StatusCode::kInvalidArgument, "access"));

  EXPECT_EQ(ledger_->calls("reg_mr"), 0);
  EXPECT_EQ(ledger_->events(), events);
  EXPECT_EQ(Live(), "pds=1 mrs=0 mws=0 qps=0");
  EXPECT_EQ(Pd(pd).mr_count(), 0u);

  // With LOCAL_WRITE they are accepted, and the MR reports what it was given.
  v1::MemoryRegion mr = NewMr(pd, kPage, {v1::REMOTE_ATOMIC, v1::LOCAL_WRITE, v1::REMOTE_WRITE});
  EXPECT_THAT(mr.access(), ElementsAre(v1::LOCAL_WRITE, v1::REMOTE_WRITE, v1::REMOTE_ATOMIC));
  // No access at all (local read only) is valid.
  EXPECT_THAT(NewMr(pd, kPage, {}).access(), IsEmpty());
}

// ---------------------------------------------------------------------------------------------------------
// RegisterMr

TEST_F(RegistryTest, RegistersAnonymousMemory) {
  const std::string pd = NewPd();
  v1::MemoryRegion mr = NewMr(pd, 3 * kPage + 5);
  EXPECT_EQ(mr.name(), "mrs/1");
  EXPECT_EQ(mr.pd(), pd);
  EXPECT_EQ(mr.length(), 3 * kPage + 5);
  EXPECT_NE(mr.addr(), 0u);
  EXPECT_EQ(mr.state(), v1::MR_READY);
  EXPECT_EQ(mr.generation(), 0u);
  EXPECT_EQ(mr.bound_windows(), 0u);
  EXPECT_EQ(mr.source().anonymous().size(), 3 * kPage + 5);
  EXPECT_THAT(mr.access(), ElementsAre(v1::LOCAL_WRITE, v1::REMOTE_WRITE, v1::REMOTE_READ, v1::MW_BIND));
  EXPECT_NE(ledger_->MrIdByLkey(mr.lkey()), 0u);
  EXPECT_NE(mr.lkey(), mr.rkey());
  // Anonymous memory is rdmad's own and zero-filled.
  const auto* bytes = reinterpret_cast<const unsigned char*>(mr.addr());
  EXPECT_EQ(bytes[0], 0);
  EXPECT_EQ(bytes[mr.length() - 1], 0);
  EXPECT_EQ(Pd(pd).mr_count(), 1u);
  EXPECT_EQ(Live(), "pds=1 mrs=1 mws=0 qps=0");

  // Keys are unique per registration.
  v1::MemoryRegion mr2 = NewMr(pd);
  EXPECT_NE(mr2.lkey(), mr.lkey());
  EXPECT_NE(mr2.rkey(), mr.rkey());
  EXPECT_NE(mr2.addr(), mr.addr());

  // ListMrs, with and without the PD filter.
  const std::string pd2 = NewPd();
  NewMr(pd2);
  EXPECT_EQ(OK(registry_->ListMrs(v1::ListMrsRequest())).size(), 3u);
  v1::ListMrsRequest list;
  list.set_pd(pd2);
  std::vector<v1::MemoryRegion> in2 = OK(registry_->ListMrs(list));
  ASSERT_EQ(in2.size(), 1u);
  EXPECT_EQ(in2[0].name(), "mrs/3");
}

TEST_F(RegistryTest, RegistersARangeOfASharedFileAtAnyOffset) {
  const std::string pd = NewPd();
  const std::string path = root_.WriteFile("shared.bin", 3 * kPage);
  v1::MemoryRegion mr = OK(registry_->RegisterMr(FileReq(pd, path, 100, 5000)));
  EXPECT_EQ(mr.length(), 5000u);
  EXPECT_EQ(mr.source().file().path(), path);
  EXPECT_EQ(mr.source().file().offset(), 100u);
  const auto* bytes = reinterpret_cast<const unsigned char*>(mr.addr());
  for (uint64_t i : {0ull, 1ull, 3995ull, 3996ull, 4999ull}) {
    EXPECT_EQ(bytes[i], TempDir::Pattern(100 + i)) << "byte " << i;
  }
  // The whole file, and its last byte alone.
  EXPECT_EQ(OK(registry_->RegisterMr(FileReq(pd, path, 0, 3 * kPage))).length(), 3 * kPage);
  v1::MemoryRegion last = OK(registry_->RegisterMr(FileReq(pd, path, 3 * kPage - 1, 1)));
  EXPECT_EQ(*reinterpret_cast<const unsigned char*>(last.addr()), TempDir::Pattern(3 * kPage - 1));
  EXPECT_EQ(Pd(pd).mr_count(), 3u);
}

TEST_F(RegistryTest, FileSourceErrorsLeakNothing) {
  Reset({fake::MakeDeviceInfo("rxe0")}, /*max_mr_bytes=*/8 * kPage);
  const std::string pd = NewPd();
  const std::string path = root_.WriteFile("f.bin", 4 * kPage);
  TempDir outside;
  const std::string foreign = outside.WriteFile("foreign.bin", kPage);
  root_.MakeDir("dir");

  struct Case {
    const char* what;
    v1::RegisterMrRequest req;
    absl::StatusCode code;
    const char* field;
    int err;  // expected errno payload; -1: not checked
  };
  const std::vector<Case> cases = {
      {"offset at EOF", FileReq(pd, path, 4 * kPage, 1), absl::StatusCode::kOutOfRange, "source.file.offset", 0},
      {"offset past EOF", FileReq(pd, path, 9 * kPage, 1), absl::StatusCode::kOutOfRange, "source.file.offset", 0},
      {"length past EOF", FileReq(pd, path, 100, 4 * kPage), absl::StatusCode::kOutOfRange, "source.file.length", 0},
      {"offset + length overflows", FileReq(pd, path, UINT64_MAX - 10, 100), absl::StatusCode::kOutOfRange,
       "source.file.length", 0},
      {"missing file", FileReq(pd, root_.Sub("nope.bin"), 0, 1), absl::StatusCode::kNotFound, "source.file.path",
       ENOENT},
      {"outside the roots", FileReq(pd, foreign, 0, 1), absl::StatusCode::kPermissionDenied, "source.file.path", 0},
      {"relative path", FileReq(pd, "f.bin", 0, 1), absl::StatusCode::kInvalidArgument, "source.file.path", 0},
      {"empty path", FileReq(pd, "", 0, 1), absl::StatusCode::kInvalidArgument, "source.file.path", 0},
      {"length 0", FileReq(pd, path, 0, 0), absl::StatusCode::kInvalidArgument, "source.file.length", 0},
      {"length over the limit", FileReq(pd, path, 0, 8 * kPage + 1), absl::StatusCode::kOutOfRange,
       "source.file.length", 0},
      {"a directory", FileReq(pd, root_.Sub("dir"), 0, 1), absl::StatusCode::kInvalidArgument,
       "source.file.path", 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    absl::StatusOr<v1::MemoryRegion> r = registry_->RegisterMr(c.req);
    EXPECT_TRUE(IsError(r, c.code, c.field));
    if (c.err >= 0) {
      EXPECT_EQ(ErrnoOf(r.status()), c.err);
    }
  }
  EXPECT_EQ(ErrnoOf(registry_->RegisterMr(cases[4].req).status()), ENOENT);
  EXPECT_EQ(CallOf(registry_->RegisterMr(cases[4].req).status()), "open");
  EXPECT_EQ(ledger_->calls("reg_mr"), 0);
  EXPECT_EQ(Live(), "pds=1 mrs=0 mws=0 qps=0");
  EXPECT_EQ(Pd(pd).mr_count(), 0u);
  // No registration is left "in progress": the PD can be deleted without a cascade.
  v1::DeletePdRequest del;
  del.set_name(pd);
  EXPECT_THAT(OK(registry_->DeletePd(del)).deleted(), ElementsAre(pd));
}

TEST_F(RegistryTest, AnonymousSourceErrorsLeakNothing) {
  Reset({fake::MakeDeviceInfo("rxe0")}, /*max_mr_bytes=*/8 * kPage);
  const std::string pd = NewPd();
  EXPECT_TRUE(IsError(registry_->RegisterMr(AnonReq(pd, 0)), absl::StatusCode::kInvalidArgument,
                      "source.anonymous.size"));
  EXPECT_TRUE(IsError(registry_->RegisterMr(AnonReq(pd, 8 * kPage + 1)), absl::StatusCode::kOutOfRange,
                      "source.anonymous.size"));
  v1::RegisterMrRequest huge = AnonReq(pd, 3 * kPage);  // under the limit, not a multiple of a huge page
  huge.mutable_source()->mutable_anonymous()->set_huge_pages(true);
  EXPECT_TRUE(IsError(registry_->RegisterMr(huge), absl::StatusCode::kInvalidArgument, "source.anonymous.size"));
  v1::RegisterMrRequest none = AnonReq(pd, kPage);
  none.clear_source();
  EXPECT_TRUE(IsError(registry_->RegisterMr(none), absl::StatusCode::kInvalidArgument, "source"));
  EXPECT_EQ(ledger_->calls("reg_mr"), 0);
  // Exactly at the limit is fine.
  EXPECT_EQ(NewMr(pd, 8 * kPage).length(), 8 * kPage);
  EXPECT_EQ(Pd(pd).mr_count(), 1u);
  EXPECT_EQ(Live(), "pds=1 mrs=1 mws=0 qps=0");
}

TEST_F(RegistryTest, TheSizeLimitIsTheSmallerOfTheOptionAndTheDeviceMaximum) {
  fabric::DeviceInfo small = fake::MakeDeviceInfo("rxe0");
  small.max_mr_size = 2 * kPage;
  Reset({small}, /*max_mr_bytes=*/0);  // 0: the device's max_mr_size
  std::string pd = NewPd();
  EXPECT_TRUE(IsError(registry_->RegisterMr(AnonReq(pd, 2 * kPage + 1)), absl::StatusCode::kOutOfRange,
                      "source.anonymous.size"));
  EXPECT_EQ(NewMr(pd, 2 * kPage).length(), 2 * kPage);

  Reset({small}, /*max_mr_bytes=*/16 * kPage);  // larger than the device: the device wins
  pd = NewPd();
  EXPECT_TRUE(IsError(registry_->RegisterMr(AnonReq(pd, 3 * kPage)), absl::StatusCode::kOutOfRange,
                      "source.anonymous.size"));

  Reset({fake::MakeDeviceInfo("rxe0")}, /*max_mr_bytes=*/kPage);  // smaller than the device: the option wins
  pd = NewPd();
  EXPECT_TRUE(IsError(registry_->RegisterMr(AnonReq(pd, kPage + 1)), absl::StatusCode::kOutOfRange,
                      "source.anonymous.size"));
  EXPECT_EQ(ledger_->calls("reg_mr"), 0);
}

TEST_F(RegistryTest, NoRegionIsLargerThanPhysicalMemory) {
  fabric::DeviceInfo rxe = fake::MakeDeviceInfo("rxe0");
  rxe.max_mr_size = UINT64_MAX;  // what rxe reports
  Reset({rxe}, /*max_mr_bytes=*/0);
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  ASSERT_GT(pages, 0);
  ASSERT_GT(page, 0);
  const uint64_t phys = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
  const std::string pd = NewPd();
  EXPECT_TRUE(IsError(registry_->RegisterMr(AnonReq(pd, phys + 1)), absl::StatusCode::kOutOfRange,
                      "source.anonymous.size"));
  const std::string path = root_.WriteFile("small.bin", kPage);
  EXPECT_TRUE(IsError(registry_->RegisterMr(FileReq(pd, path, 0, phys + 1)), absl::StatusCode::kOutOfRange,
                      "source.file.length"));
  EXPECT_EQ(ledger_->calls("reg_mr"), 0);
  EXPECT_EQ(Live(), "pds=1 mrs=0 mws=0 qps=0");
}

TEST_F(RegistryTest, RegMrFailureIsReportedWithErrnoAndLeaksNothing) {
  const std::string pd = NewPd();
  ledger_->FailNextRegMr(ENOMEM);
  absl::StatusOr<v1::MemoryRegion> r = registry_->RegisterMr(AnonReq(pd, kPage));
  EXPECT_TRUE(IsError(r, absl::StatusCode::kResourceExhausted, ""));
  EXPECT_EQ(ErrnoOf(r.status()), ENOMEM);
  EXPECT_EQ(CallOf(r.status()), "ibv_reg_mr");
  v1::ErrorDetail d = DetailOf(r.status());
  EXPECT_EQ(d.verbs_call(), "ibv_reg_mr");
  EXPECT_EQ(d.errno_name(), "ENOMEM");
  EXPECT_EQ(ledger_->calls("reg_mr"), 1);
  EXPECT_EQ(Live(), "pds=1 mrs=0 mws=0 qps=0");
  EXPECT_EQ(Pd(pd).mr_count(), 0u);
  EXPECT_TRUE(OK(registry_->ListMrs(v1::ListMrsRequest())).empty());
  v1::DeletePdRequest del;
  del.set_name(pd);
  EXPECT_TRUE(registry_->DeletePd(del).ok());  // no pending registration left behind
}

TEST_F(RegistryTest, DeletePdIsRefusedWhileARegistrationIsInFlight) {
  const std::string pd = NewPd();
  int hook_runs = 0;
  // RegMr runs without the registry lock: from inside it, the registry answers, and refuses the delete.
  ledger_->SetRegMrHook([&] {
    ++hook_runs;
    v1::DeletePdRequest del;
    del.set_name(pd);
    del.set_cascade(true);
    absl::StatusOr<v1::DeletePdResponse> r = registry_->DeletePd(del);
    EXPECT_TRUE(IsError(r, absl::StatusCode::kFailedPrecondition, "name"));
    EXPECT_EQ(ErrnoOf(r.status()), EBUSY);
    EXPECT_EQ(Pd(pd).mr_count(), 0u);
  });
  v1::MemoryRegion mr = NewMr(pd);
  ledger_->SetRegMrHook(nullptr);
  EXPECT_EQ(hook_runs, 1);
  EXPECT_EQ(Pd(pd).mr_count(), 1u);
  v1::DeletePdRequest del;
  del.set_name(pd);
  del.set_cascade(true);
  EXPECT_THAT(OK(registry_->DeletePd(del)).deleted(), ElementsAre(mr.name(), pd));
}

// ---------------------------------------------------------------------------------------------------------
// DeregisterMr

TEST_F(RegistryTest, DeregisterIsRefusedWithEbusyWhileAWindowIsBound) {
  const std::string pd = NewPd();
  v1::MemoryRegion mr = NewMr(pd);
  v1::QueuePair qp = NewQp(pd);
  v1::MemoryWindow w1 = NewMw(pd, v1::TYPE_1), w2 = NewMw(pd, v1::TYPE_2);
  ASSERT_OK(registry_->BindMw(BindReq(w1.name(), mr.name(), 0, kPage)).status());
  ASSERT_OK(registry_->BindMw(BindReq(w2.name(), mr.name(), kPage, kPage, {v1::REMOTE_READ}, qp.name())).status());
  EXPECT_EQ(Mr(mr.name()).bound_windows(), 2u);

  absl::Status s = registry_->DeregisterMr(mr.name());
  EXPECT_TRUE(IsError(s, absl::StatusCode::kFailedPrecondition, "name"));
  EXPECT_EQ(ErrnoOf(s), EBUSY);
  EXPECT_THAT(std::string(s.message()), HasSubstr("mws/1, mws/2"));
  EXPECT_EQ(ledger_->calls("dereg_mr"), 0);  // refused by rdmad, not by the device

  ASSERT_OK(registry_->InvalidateMw(w1.name()).status());
  EXPECT_EQ(ErrnoOf(registry_->DeregisterMr(mr.name())), EBUSY);
  ASSERT_OK(registry_->InvalidateMw(w2.name()).status());
  EXPECT_EQ(Mr(mr.name()).bound_windows(), 0u);
  EXPECT_OK(registry_->DeregisterMr(mr.name()));
  EXPECT_EQ(Pd(pd).mr_count(), 0u);
  EXPECT_EQ(Live(), "pds=1 mrs=0 mws=2 qps=2");
}

TEST_F(RegistryTest, DeallocatingTheWindowAlsoAllowsDeregistration) {
  const std::string pd = NewPd();
  v1::MemoryRegion mr = NewMr(pd);
  v1::MemoryWindow w = NewMw(pd, v1::TYPE_1);
  ASSERT_OK(registry_->BindMw(BindReq(w.name(), mr.name(), 0, kPage)).status());
  ASSERT_OK(registry_->DeallocMw(w.name()));
  EXPECT_EQ(Mr(mr.name()).bound_windows(), 0u);
  EXPECT_EQ(Pd(pd).mw_count(), 0u);
  EXPECT_OK(registry_->DeregisterMr(mr.name()));
}

TEST_F(RegistryTest, AFailedDeregistrationKeepsTheRegion) {
  const std::string pd = NewPd();
  v1::MemoryRegion mr = NewMr(pd);
  ledger_->FailNextRelease(EINVAL);
  absl::Status s = registry_->DeregisterMr(mr.name());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(ErrnoOf(s), EINVAL);
  EXPECT_EQ(CallOf(s), "ibv_dereg_mr");
  EXPECT_THAT(std::string(s.message()), HasSubstr(mr.name()));
  EXPECT_TRUE(MessageDifferencer::Equals(Mr(mr.name()), mr));
  EXPECT_EQ(Pd(pd).mr_count(), 1u);
  EXPECT_EQ(Live(), "pds=1 mrs=1 mws=0 qps=0");
  EXPECT_OK(registry_->DeregisterMr(mr.name()));
  EXPECT_EQ(Live(), "pds=1 mrs=0 mws=0 qps=0");
}

}  // namespace
}  // namespace rdmad::registry_test
