// A fresh directory on /dev/shm (tmpfs), for tests of file registrations under rdmad's default rule that
// only memory filesystems may back a region (server/memory/mapping.h, FileRules::allow_disk). Removed
// (recursively, without following symlinks) by the destructor. Tests that need it skip when /dev/shm is
// not a writable tmpfs here (ok() false).
//
// Threads: a plain object of the test's thread.
#ifndef RDMAD_TESTS_UNIT_SHM_DIR_H_
#define RDMAD_TESTS_UNIT_SHM_DIR_H_

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/unit/test_util.h"

namespace rdmad::test {

class ShmDir {
 public:
  ShmDir() {
    struct statfs fs {};
    if (statfs("/dev/shm", &fs) != 0 || static_cast<uint32_t>(fs.f_type) != TMPFS_MAGIC) return;
    std::string tmpl = "/dev/shm/rdmad-unit-XXXXXX";
    char* made = mkdtemp(tmpl.data());
    if (made == nullptr) return;
    char real[PATH_MAX];
    path_ = realpath(made, real) ? real : made;
  }
  ~ShmDir() {
    if (path_.empty()) return;
    nftw(
        path_.c_str(), [](const char* p, const struct stat*, int, struct FTW*) { return std::remove(p), 0; }, 16,
        FTW_DEPTH | FTW_PHYS);
  }
  ShmDir(const ShmDir&) = delete;
  ShmDir& operator=(const ShmDir&) = delete;

  bool ok() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& rel) const { return absl::StrCat(path_, "/", rel); }
  // Writes `size` bytes of TempDir::Pattern(i) to path()/rel and returns the full path.
  std::string WriteFile(const std::string& rel, size_t size) const {
    const std::string p = Sub(rel);
    const int fd = open(p.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0) {
      ADD_FAILURE() << "open(" << p << "): " << std::strerror(errno);
      return p;
    }
    std::string data(size, '\0');
    for (size_t i = 0; i < size; ++i) data[i] = static_cast<char>(TempDir::Pattern(i));
    if (write(fd, data.data(), size) != static_cast<ssize_t>(size)) ADD_FAILURE() << "write(" << p << ")";
    close(fd);
    return p;
  }
  std::string MakeDir(const std::string& rel) const {
    const std::string p = Sub(rel);
    if (mkdir(p.c_str(), 0755) != 0) ADD_FAILURE() << "mkdir(" << p << "): " << std::strerror(errno);
    return p;
  }

 private:
  std::string path_;
};

}  // namespace rdmad::test

#endif  // RDMAD_TESTS_UNIT_SHM_DIR_H_
