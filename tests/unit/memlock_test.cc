// Memlock (server/memory/memlock.h): the limit as the kernel counts it (whole pages), the refusal's message,
// ENOMEM from a registration explained the same way, and this process's own limit read back.
#include "server/memory/memlock.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstdint>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/common/status.h"

namespace rdmad {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kPage = 4096;
alignas(4096) char buffer[4 * kPage];

TEST(Memlock, CountsWholePagesAsTheKernelDoes) {
  Memlock m(2 * kPage, [] { return uint64_t{0}; });
  EXPECT_TRUE(m.Check(buffer, 2 * kPage, "source").ok());
  // 4096 bytes that straddle a page boundary pin two pages; three pages do not fit.
  EXPECT_TRUE(m.Check(buffer + 100, kPage, "source").ok());
  absl::Status s = m.Check(buffer + 100, 2 * kPage, "source");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(FieldOf(s), "source");
  EXPECT_THAT(std::string(s.message()), HasSubstr("pin 12288 bytes more, with 0 bytes pinned already"));
}

TEST(Memlock, WhatIsPinnedAlreadyCounts) {
  uint64_t pinned = 3 * kPage;
  Memlock m(4 * kPage, [&pinned] { return pinned; });
  EXPECT_TRUE(m.Check(buffer, kPage, "source").ok());
  EXPECT_FALSE(m.Check(buffer, 2 * kPage, "source").ok());
  pinned = 5 * kPage;  // past the limit already (CAP_IPC_LOCK dropped later, say): nothing more fits
  EXPECT_FALSE(m.Check(buffer, kPage, "source").ok());
}

TEST(Memlock, UnlimitedChecksNothing) {
  Memlock m;
  EXPECT_EQ(m.limit(), Memlock::kUnlimited);
  EXPECT_EQ(m.Describe(), "unlimited");
  EXPECT_TRUE(m.Check(buffer, UINT64_MAX / 2, "source").ok());
  absl::Status enomem = ErrnoError("ibv_reg_mr", ENOMEM);
  EXPECT_EQ(m.Explain(enomem, kPage, "source"), enomem);
}

TEST(Memlock, EnomemUnderALimitIsExplainedAndKeepsItsErrno) {
  Memlock m(64 << 20, [] { return uint64_t{60} << 20; });
  EXPECT_EQ(m.Describe(), "64 MiB (67108864 bytes)");
  absl::Status s = m.Explain(ErrnoError("ibv_reg_mr", ENOMEM), 8 << 20, "source");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ErrnoOf(s), ENOMEM);
  EXPECT_EQ(CallOf(s), "ibv_reg_mr");
  EXPECT_EQ(FieldOf(s), "source");
  EXPECT_THAT(std::string(s.message()), HasSubstr("past rdmad's RLIMIT_MEMLOCK of 64 MiB"));
  // Other errors are not the limit's.
  absl::Status einval = ErrnoError("ibv_reg_mr", EINVAL);
  EXPECT_EQ(m.Explain(einval, kPage, "source"), einval);
}

TEST(Memlock, ThisProcessHasTheLimitGetrlimitSaysUnlessItMayLockMemory) {
  rlimit l{};
  ASSERT_EQ(getrlimit(RLIMIT_MEMLOCK, &l), 0);
  Memlock m = Memlock::OfThisProcess();
  // Under root (CAP_IPC_LOCK) or an infinite limit: unlimited; otherwise exactly the soft limit.
  if (m.limit() != Memlock::kUnlimited) EXPECT_EQ(m.limit(), l.rlim_cur);
  if (l.rlim_cur == RLIM_INFINITY) EXPECT_EQ(m.limit(), Memlock::kUnlimited);
}

}  // namespace
}  // namespace rdmad
