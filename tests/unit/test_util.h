// Small helpers shared by the unit tests: status assertions and temporary directories.
#ifndef RDMAD_TESTS_UNIT_TEST_UTIL_H_
#define RDMAD_TESTS_UNIT_TEST_UTIL_H_

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/common/status.h"

namespace rdmad::test {

// EXPECT_TRUE(IsError(s, code, "field")): the code, the field payload (FieldOf), and the field named in the
// message. An empty `field` requires that the status carries none.
inline ::testing::AssertionResult IsError(const absl::Status& s, absl::StatusCode code,
                                          const std::string& field) {
  if (s.ok()) return ::testing::AssertionFailure() << "expected " << absl::StatusCodeToString(code) << ", got OK";
  if (s.code() != code) {
    return ::testing::AssertionFailure() << "expected " << absl::StatusCodeToString(code) << ", got " << s;
  }
  if (FieldOf(s) != field) {
    return ::testing::AssertionFailure() << "expected field '" << field << "', got '" << FieldOf(s) << "' in " << s;
  }
  // docs/api.md: the message starts with the request field at fault.
  if (!field.empty() && !absl::StartsWith(s.message(), absl::StrCat(field, ": "))) {
    return ::testing::AssertionFailure() << "the message does not start with '" << field << ": ': " << s;
  }
  return ::testing::AssertionSuccess();
}

template <typename T>
::testing::AssertionResult IsError(const absl::StatusOr<T>& s, absl::StatusCode code, const std::string& field) {
  return IsError(s.status(), code, field);
}

// A fresh directory under the test's TEST_TMPDIR (or /tmp), with symlinks resolved (so it can serve as an
// allowed file root: the registry compares real paths). Removed (recursively) by the destructor.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TEST_TMPDIR");
    std::string tmpl = absl::StrCat(base && *base ? base : "/tmp", "/rdmad-unit-XXXXXX");
    char* made = mkdtemp(tmpl.data());
    if (made == nullptr) {
      ADD_FAILURE() << "mkdtemp(" << tmpl << "): " << std::strerror(errno);
      return;
    }
    char real[PATH_MAX];
    path_ = realpath(made, real) ? real : made;
  }
  ~TempDir() {
    if (path_.empty()) return;
    // Depth first, without following symlinks (tests plant links that point outside).
    nftw(
        path_.c_str(),
        [](const char* p, const struct stat*, int, struct FTW*) {
          std::remove(p);  // best effort
          return 0;
        },
        16,
        FTW_DEPTH | FTW_PHYS);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string Sub(const std::string& rel) const { return absl::StrCat(path_, "/", rel); }

  // Writes `size` bytes of Pattern(i) to path()/rel and returns the full path.
  std::string WriteFile(const std::string& rel, size_t size) const {
    const std::string p = Sub(rel);
    int fd = open(p.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0) {
      ADD_FAILURE() << "open(" << p << "): " << std::strerror(errno);
      return p;
    }
    std::string data(size, '\0');
    for (size_t i = 0; i < size; ++i) data[i] = static_cast<char>(Pattern(i));
    size_t done = 0;
    while (done < size) {
      ssize_t n = write(fd, data.data() + done, size - done);
      if (n <= 0) {
        ADD_FAILURE() << "write(" << p << "): " << std::strerror(errno);
        break;
      }
      done += static_cast<size_t>(n);
    }
    close(fd);
    return p;
  }
  std::string MakeDir(const std::string& rel) const {
    const std::string p = Sub(rel);
    if (mkdir(p.c_str(), 0700) != 0) ADD_FAILURE() << "mkdir(" << p << "): " << std::strerror(errno);
    return p;
  }

  // A byte pattern that differs between neighbouring offsets and between pages.
  static unsigned char Pattern(size_t i) { return static_cast<unsigned char>((i * 131 + i / 4096 * 7 + 1) & 0xff); }

 private:
  std::string path_;
};

}  // namespace rdmad::test

#define RDMAD_TEST_CONCAT_INNER_(a, b) a##b
#define RDMAD_TEST_CONCAT_(a, b) RDMAD_TEST_CONCAT_INNER_(a, b)
// ASSERT_OK_AND_ASSIGN(auto x, registry.CreatePd(...)); fails the test (and returns) on error.
#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  ASSERT_OK_AND_ASSIGN_IMPL_(RDMAD_TEST_CONCAT_(rdmad_test_statusor_, __LINE__), lhs, expr)
#define ASSERT_OK_AND_ASSIGN_IMPL_(tmp, lhs, expr)  \
  auto tmp = (expr);                                \
  ASSERT_TRUE(tmp.ok()) << tmp.status();            \
  lhs = std::move(tmp).value()
#define ASSERT_OK(expr)                              \
  do {                                               \
    const ::absl::Status rdmad_test_s_ = (expr);     \
    ASSERT_TRUE(rdmad_test_s_.ok()) << rdmad_test_s_; \
  } while (0)
#define EXPECT_OK(expr)                              \
  do {                                               \
    const ::absl::Status rdmad_test_s_ = (expr);     \
    EXPECT_TRUE(rdmad_test_s_.ok()) << rdmad_test_s_; \
  } while (0)

#endif  // RDMAD_TESTS_UNIT_TEST_UTIL_H_
