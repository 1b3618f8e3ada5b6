// The test-support headers themselves: what the status macros report and assign, TempDir's options and its
// removal (which never follows a symlink out of the directory), Eventually's answer.
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/support/eventually.h"
#include "tests/support/status.h"
#include "tests/support/temp_dir.h"

namespace rdmad::test {
namespace {

absl::Status Broken() { return absl::InternalError("broken"); }
absl::StatusOr<int> Seven() { return 7; }
absl::StatusOr<int> NoNumber() { return absl::NotFoundError("no number"); }

TEST(StatusMacros, PassOnOk) {
  ASSERT_OK(absl::OkStatus());
  EXPECT_OK(Seven());
  ASSERT_OK_AND_ASSIGN(const int seven, Seven());
  EXPECT_EQ(seven, 7);
  int assigned = 0;
  ASSERT_OK_AND_ASSIGN(assigned, Seven());
  EXPECT_EQ(assigned, 7);
}

TEST(StatusMacros, FailuresNameTheExpressionAndTheStatus) {
  EXPECT_NONFATAL_FAILURE(EXPECT_OK(Broken()), "Broken() is not OK: INTERNAL: broken");
  EXPECT_FATAL_FAILURE(ASSERT_OK(NoNumber()), "NoNumber() is not OK: NOT_FOUND: no number");
  EXPECT_FATAL_FAILURE(
      [] {
        ASSERT_OK_AND_ASSIGN(const int n, NoNumber());
        (void)n;
      }(),
      "NoNumber() is not OK: NOT_FOUND: no number");
}

TEST(TempDirTest, MadeWithItsOptionsAndRemovedWithoutFollowingLinks) {
  TempDir outside;
  const std::string kept = outside.WriteFile("kept", 10);
  std::string path;
  {
    TempDir dir({.base = outside.path(), .prefix = "made.", .mode = 0755});
    ASSERT_TRUE(dir.ok());
    path = dir.path();
    EXPECT_EQ(path.rfind(outside.path() + "/made.", 0), 0u) << path;
    struct stat st {};
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0755u);
    dir.MakeDir("sub");
    EXPECT_EQ(dir.WriteFile("sub/file", 5000), dir.Sub("sub/file"));
    ASSERT_EQ(stat(dir.Sub("sub/file").c_str(), &st), 0);
    EXPECT_EQ(st.st_size, 5000);
    ASSERT_EQ(symlink(outside.path().c_str(), dir.Sub("link").c_str()), 0);
  }
  EXPECT_NE(access(path.c_str(), F_OK), 0) << path << " is still there";
  EXPECT_EQ(access(kept.c_str(), F_OK), 0) << "the removal followed the link";
}

TEST(TempDirTest, OneThatCannotBeMadeFailsTheTestUnlessNotRequired) {
  EXPECT_NONFATAL_FAILURE(TempDir({.base = "/nonexistent/dir"}), "mkdtemp(/nonexistent/dir/rdmad-test-");
  TempDir missing({.base = "/nonexistent/dir", .required = false});
  EXPECT_FALSE(missing.ok());
  EXPECT_EQ(missing.path(), "");
}

TEST(EventuallyTest, TrueOnceThePredicateIsElseItsLastAnswer) {
  int calls = 0;
  EXPECT_TRUE(Eventually([&] { return ++calls == 3; }));
  EXPECT_EQ(calls, 3);
  EXPECT_FALSE(Eventually([] { return false; }, absl::Milliseconds(20)));
  int slow = 0;  // asked at the start, every 10 ms, and once more at the deadline: a few times, not 50
  EXPECT_FALSE(Eventually([&] { return ++slow < 0; }, absl::Milliseconds(50), absl::Milliseconds(10)));
  EXPECT_GE(slow, 2);
  EXPECT_LE(slow, 8);
}

}  // namespace
}  // namespace rdmad::test
