// ShmDir: a TempDir (tests/support/temp_dir.h) on /dev/shm (tmpfs), for tests of file registrations under
// rdmad's default rule that only memory filesystems may back a region (server/memory/mapping.h,
// FileRules::allow_disk). Tests that need it skip when /dev/shm is not a writable tmpfs here: ok() is false
// then, and that is no test failure.
//
// Threads: a plain object of the test's thread.
#ifndef RDMAD_TESTS_UNIT_SHM_DIR_H_
#define RDMAD_TESTS_UNIT_SHM_DIR_H_

#include <linux/magic.h>
#include <sys/vfs.h>

#include <cstdint>

#include "tests/support/temp_dir.h"

namespace rdmad::test {

class ShmDir : public TempDir {
 public:
  ShmDir() : TempDir(Options{.base = "/dev/shm", .prefix = "rdmad-unit-", .required = false}) {
    struct statfs fs {};
    if (ok() && (statfs(path().c_str(), &fs) != 0 || static_cast<uint32_t>(fs.f_type) != TMPFS_MAGIC)) Remove();
  }
};

}  // namespace rdmad::test

#endif  // RDMAD_TESTS_UNIT_SHM_DIR_H_
