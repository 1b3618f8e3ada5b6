// TempDir: a fresh directory for a test (mkdtemp), removed with everything in it by the destructor. Its path
// has symlinks resolved, so it can serve as an allowed file root (the registry compares real paths).
//
//   TempDir dir;                                    under TEST_TMPDIR (else /tmp), mode 0700
//   TempDir sockets({.base = "/tmp", .prefix = "rdmad-ltest-", .mode = 0755});
//                                                   a short path for unix sockets, searchable by other uids
//
// If the directory cannot be made, ok() is false and path() empty; the test fails (ADD_FAILURE) unless
// Options::required is false, for callers that skip instead (ShmDir, tests/unit/shm_dir.h) or that are not in
// a test (a main()). The removal is depth first and never follows a symlink (tests plant links that point
// outside); it is best effort, as root also for what was given to other owners.
//
// Threads: a plain object of the test's thread.
#ifndef RDMAD_TESTS_SUPPORT_TEMP_DIR_H_
#define RDMAD_TESTS_SUPPORT_TEMP_DIR_H_

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace rdmad::test {

class TempDir {
 public:
  struct Options {
    // The parent directory; empty: $TEST_TMPDIR, else /tmp.
    std::string base;
    // The directory's name: `prefix` and six characters of mkdtemp's.
    std::string prefix = "rdmad-test-";
    // Set with chmod once made (mkdtemp makes it 0700).
    mode_t mode = 0700;
    // False: a directory that cannot be made is no test failure, only ok() false.
    bool required = true;
  };

  TempDir() : TempDir(Options()) {}
  explicit TempDir(const Options& options) {
    std::string base = options.base;
    if (base.empty()) {
      const char* env = std::getenv("TEST_TMPDIR");
      base = env != nullptr && *env != '\0' ? env : "/tmp";
    }
    std::string tmpl = absl::StrCat(base, "/", options.prefix, "XXXXXX");
    if (mkdtemp(tmpl.data()) == nullptr) {
      if (options.required) ADD_FAILURE() << "mkdtemp(" << tmpl << "): " << std::strerror(errno);
      return;
    }
    char real[PATH_MAX];
    path_ = realpath(tmpl.c_str(), real) != nullptr ? real : tmpl;
    if (chmod(path_.c_str(), options.mode) != 0 && options.required) {
      ADD_FAILURE() << "chmod(" << path_ << "): " << std::strerror(errno);
    }
  }
  ~TempDir() { Remove(); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  bool ok() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& rel) const { return absl::StrCat(path_, "/", rel); }

  // Writes `size` bytes of Pattern(i) to path()/rel (mode 0600) and returns the full path.
  std::string WriteFile(const std::string& rel, size_t size) const {
    const std::string p = Sub(rel);
    const int fd = open(p.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0) {
      ADD_FAILURE() << "open(" << p << "): " << std::strerror(errno);
      return p;
    }
    std::string data(size, '\0');
    for (size_t i = 0; i < size; ++i) data[i] = static_cast<char>(Pattern(i));
    size_t done = 0;
    while (done < size) {
      const ssize_t n = write(fd, data.data() + done, size - done);
      if (n <= 0) {
        ADD_FAILURE() << "write(" << p << "): " << std::strerror(errno);
        break;
      }
      done += static_cast<size_t>(n);
    }
    close(fd);
    return p;
  }
  // Makes the directory path()/rel and returns its full path.
  std::string MakeDir(const std::string& rel, mode_t mode = 0700) const {
    const std::string p = Sub(rel);
    if (mkdir(p.c_str(), mode) != 0) ADD_FAILURE() << "mkdir(" << p << "): " << std::strerror(errno);
    return p;
  }

  // A byte pattern that differs between neighbouring offsets and between pages.
  static unsigned char Pattern(size_t i) { return static_cast<unsigned char>((i * 131 + i / 4096 * 7 + 1) & 0xff); }

 protected:
  // Removes the directory now (ok() is false afterwards).
  void Remove() {
    if (path_.empty()) return;
    nftw(
        path_.c_str(),
        [](const char* p, const struct stat*, int, struct FTW*) {
          std::remove(p);  // best effort
          return 0;
        },
        16, FTW_DEPTH | FTW_PHYS);
    path_.clear();
  }

 private:
  std::string path_;
};

}  // namespace rdmad::test

#endif  // RDMAD_TESTS_SUPPORT_TEMP_DIR_H_
