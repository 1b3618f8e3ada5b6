// Unit tests of rdmad::Mapping (server/memory/mapping.h): the memory a region covers. File mappings at any
// offset alignment map exactly the requested bytes, MAP_SHARED; paths are resolved and confined to the
// allowed roots; anonymous mappings are zero-filled and size-checked.
#include "server/memory/mapping.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/common/status.h"
#include "tests/support/server_status.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/shm_dir.h"

// open(2) interposer, to make a race deterministic: a test arms BeforeOpen() with the path it expects
// Mapping::File to open and an action to run just before that open happens. Every other open passes
// straight through.
namespace {
std::string g_open_path;
std::function<void()> g_before_open;
int PassThroughOpen(const char* path, int flags, va_list ap) {
  int mode = 0;
  if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE) mode = va_arg(ap, int);
  if (g_before_open && path != nullptr && g_open_path == path) {
    std::function<void()> action = std::move(g_before_open);
    g_before_open = nullptr;
    action();
  }
  return static_cast<int>(syscall(SYS_openat, AT_FDCWD, path, flags, mode));
}
}  // namespace
extern "C" int open(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  int fd = PassThroughOpen(path, flags, ap);
  va_end(ap);
  return fd;
}
extern "C" int open64(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  int fd = PassThroughOpen(path, flags, ap);
  va_end(ap);
  return fd;
}

namespace rdmad {
namespace {

using ::rdmad::test::IsError;
using ::rdmad::test::TempDir;
using ::testing::HasSubstr;

const uint64_t kPage = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));

// TempDir is under TEST_TMPDIR, usually a disk filesystem: these tests opt in to it (allow_disk_files);
// the rule itself is tested below with a directory on /dev/shm.
FileRules Disk() {
  FileRules rules;
  rules.allow_disk = true;
  return rules;
}

class MappingFileTest : public ::testing::Test {
 protected:
  absl::StatusOr<std::unique_ptr<Mapping>> Map(const std::string& path, uint64_t offset, uint64_t length) {
    return Mapping::File(path, offset, length, {root_.path()}, "f", {}, kFileRead | kFileWrite, Disk());
  }
  TempDir root_;
};

TEST_F(MappingFileTest, MapsExactlyTheRequestedBytesAtAnyOffset) {
  const std::string path = root_.WriteFile("data.bin", 4 * kPage + 123);
  struct Range {
    uint64_t offset, length;
  };
  for (const Range& r : std::vector<Range>{{0, 1},
                                           {1, 10},
                                           {kPage - 1, 2},
                                           {kPage, kPage},
                                           {kPage + 1, 2 * kPage},
                                           {3 * kPage - 7, kPage + 14},
                                           {12345, 4 * kPage + 123 - 12345},
                                           {4 * kPage + 122, 1},
                                           {0, 4 * kPage + 123}}) {
    SCOPED_TRACE(testing::Message() << "offset " << r.offset << " length " << r.length);
    absl::StatusOr<std::unique_ptr<Mapping>> m = Map(path, r.offset, r.length);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ((*m)->length(), r.length);
    const auto* bytes = static_cast<const unsigned char*>((*m)->data());
    for (uint64_t i = 0; i < r.length; ++i) {
      if (bytes[i] != TempDir::Pattern(r.offset + i)) {
        ADD_FAILURE() << "byte " << i << " (file offset " << r.offset + i << ") is " << int(bytes[i]) << ", expected "
                      << int(TempDir::Pattern(r.offset + i));
        break;
      }
    }
  }
}

TEST_F(MappingFileTest, IsSharedWithTheFile) {
  const std::string path = root_.WriteFile("shared.bin", 2 * kPage);
  absl::StatusOr<std::unique_ptr<Mapping>> m = Map(path, kPage + 5, 10);
  ASSERT_TRUE(m.ok()) << m.status();
  static_cast<unsigned char*>((*m)->data())[0] = 0xAB;
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  unsigned char b = 0;
  EXPECT_EQ(pread(fd, &b, 1, static_cast<off_t>(kPage + 5)), 1);
  EXPECT_EQ(b, 0xAB);
  // And what the file gets is visible in the mapping.
  const unsigned char c = 0x5C;
  EXPECT_EQ(pwrite(fd, &c, 1, static_cast<off_t>(kPage + 6)), 1);
  EXPECT_EQ(static_cast<unsigned char*>((*m)->data())[1], 0x5C);
  close(fd);
}

TEST_F(MappingFileTest, RefusesAnOffsetAtOrPastTheEnd) {
  const std::string path = root_.WriteFile("f.bin", kPage + 10);
  EXPECT_TRUE(IsError(Map(path, kPage + 10, 1), absl::StatusCode::kOutOfRange, "f.offset"));
  EXPECT_TRUE(IsError(Map(path, 10 * kPage, 1), absl::StatusCode::kOutOfRange, "f.offset"));
  EXPECT_TRUE(IsError(Map(path, kPage + 9, 2), absl::StatusCode::kOutOfRange, "f.length"));
  EXPECT_TRUE(IsError(Map(path, 0, kPage + 11), absl::StatusCode::kOutOfRange, "f.length"));
  EXPECT_TRUE(IsError(Map(path, UINT64_MAX, 1), absl::StatusCode::kOutOfRange, "f.length"));  // overflows
  EXPECT_TRUE(IsError(Map(path, 1, UINT64_MAX), absl::StatusCode::kOutOfRange, "f.length"));
  EXPECT_TRUE(Map(path, kPage + 9, 1).ok());
  // An empty file has no offset to map at.
  const std::string empty = root_.WriteFile("empty.bin", 0);
  EXPECT_TRUE(IsError(Map(empty, 0, 1), absl::StatusCode::kOutOfRange, "f.offset"));
}

TEST_F(MappingFileTest, RefusesBadPathsAndLengths) {
  const std::string path = root_.WriteFile("f.bin", kPage);
  EXPECT_TRUE(IsError(Map("", 0, 1), absl::StatusCode::kInvalidArgument, "f.path"));
  EXPECT_TRUE(IsError(Map("f.bin", 0, 1), absl::StatusCode::kInvalidArgument, "f.path"));
  EXPECT_TRUE(IsError(Map(path, 0, 0), absl::StatusCode::kInvalidArgument, "f.length"));
  // A NUL would cut the path short for open(2): another file than the one named.
  EXPECT_TRUE(IsError(Map(path + std::string(1, '\0') + "/../x", 0, 1), absl::StatusCode::kInvalidArgument, "f.path"));
  absl::StatusOr<std::unique_ptr<Mapping>> missing = Map(root_.Sub("missing.bin"), 0, 1);
  EXPECT_TRUE(IsError(missing, absl::StatusCode::kNotFound, "f.path"));
  EXPECT_EQ(ErrnoOf(missing.status()), ENOENT);
  EXPECT_EQ(CallOf(missing.status()), "open");
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("missing.bin"));
}

TEST_F(MappingFileTest, RefusesDirectoriesAndOtherNonRegularFiles) {
  const std::string dir = root_.MakeDir("dir");
  absl::StatusOr<std::unique_ptr<Mapping>> d = Map(dir, 0, 1);
  // Opened with O_PATH, then refused as not a regular file, like any other non-regular file.
  EXPECT_TRUE(IsError(d, absl::StatusCode::kInvalidArgument, "f.path"));
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("not a regular file"));
  const std::string fifo = root_.Sub("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  absl::StatusOr<std::unique_ptr<Mapping>> p = Map(fifo, 0, 1);
  EXPECT_TRUE(IsError(p, absl::StatusCode::kInvalidArgument, "f.path"));
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("not a regular file"));
}

TEST_F(MappingFileTest, ConfinesTheRealPathToTheAllowedRoots) {
  TempDir outside;
  const std::string secret = outside.WriteFile("secret.bin", kPage);
  // Directly outside.
  EXPECT_TRUE(IsError(Map(secret, 0, 1), absl::StatusCode::kPermissionDenied, "f.path"));
  // Through a symlink inside the root that points outside it.
  const std::string link = root_.Sub("escape.bin");
  ASSERT_EQ(symlink(secret.c_str(), link.c_str()), 0) << std::strerror(errno);
  absl::StatusOr<std::unique_ptr<Mapping>> escaped = Map(link, 0, 1);
  EXPECT_TRUE(IsError(escaped, absl::StatusCode::kPermissionDenied, "f.path"));
  EXPECT_THAT(std::string(escaped.status().message()), HasSubstr(secret));  // the real path is named
  // Through a symlinked directory inside the root.
  const std::string dirlink = root_.Sub("escape.d");
  ASSERT_EQ(symlink(outside.path().c_str(), dirlink.c_str()), 0) << std::strerror(errno);
  EXPECT_TRUE(IsError(Map(dirlink + "/secret.bin", 0, 1), absl::StatusCode::kPermissionDenied, "f.path"));
  // With ".." components.
  const std::string outside_name = outside.path().substr(outside.path().rfind('/') + 1);
  EXPECT_TRUE(IsError(Map(root_.path() + "/../" + outside_name + "/secret.bin", 0, 1),
                      absl::StatusCode::kPermissionDenied, "f.path"));
  // A symlink that stays inside the root is fine: the real path decides.
  const std::string inside = root_.WriteFile("inside.bin", kPage);
  const std::string good_link = root_.Sub("good.bin");
  ASSERT_EQ(symlink(inside.c_str(), good_link.c_str()), 0);
  EXPECT_TRUE(Map(good_link, 0, 1).ok());
  // A path reaching into the root through a symlink outside it is fine too.
  const std::string in_link = outside.Sub("to-root");
  ASSERT_EQ(symlink(root_.path().c_str(), in_link.c_str()), 0);
  EXPECT_TRUE(Map(in_link + "/inside.bin", 0, 1).ok());
}

// Security (time of check / time of use): a directory on the requested path replaced by a symlink to
// /etc just as rdmad opens the file must not make rdmad (root) map a file outside every allowed root.
// /dev/shm, a default root, is world-writable, so any local user could try. Mapping::File opens first
// (O_PATH) and checks the kernel's name for what it opened. The swap is made deterministic here by an
// open(2) interposer that runs it immediately before rdmad's open of the requested path.
TEST_F(MappingFileTest, ADirectorySwappedForASymlinkAfterTheCheckIsNotFollowed) {
  TempDir outside;
  const std::string secret = outside.WriteFile("target.bin", kPage);  // the Pattern() bytes
  const std::string dir = root_.MakeDir("d");
  const std::string decoy = dir + "/target.bin";
  {
    FILE* f = std::fopen(decoy.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(std::string(kPage, 'x').c_str(), f);
    std::fclose(f);
  }
  g_open_path = decoy;  // realpath of the request: already the real path
  g_before_open = [&] {
    ASSERT_EQ(rename(dir.c_str(), (dir + ".old").c_str()), 0);
    ASSERT_EQ(symlink(outside.path().c_str(), dir.c_str()), 0);
  };
  absl::StatusOr<std::unique_ptr<Mapping>> m = Map(decoy, 0, 16);
  EXPECT_EQ(g_before_open, nullptr) << "the interposer did not see Mapping::File open " << decoy;
  g_before_open = nullptr;
  // Refused, or at worst the file that was checked; never the file outside the root.
  if (m.ok()) {
    EXPECT_EQ(static_cast<const char*>((*m)->data())[0], 'x')
        << "mapped " << secret << ", outside the allowed root " << root_.path();
  } else {
    EXPECT_EQ(m.status().code(), absl::StatusCode::kPermissionDenied) << m.status();
  }
}

TEST_F(MappingFileTest, RootsMatchWholePathComponents) {
  const std::string path = root_.WriteFile("f.bin", kPage);
  // A root that is a string prefix of the directory but not a parent of it.
  const std::string prefix = root_.path().substr(0, root_.path().size() - 1);
  EXPECT_TRUE(IsError(Mapping::File(path, 0, 1, {prefix}, "f"), absl::StatusCode::kPermissionDenied, "f.path"));
  // The file itself as a "root" does not allow it (it must lie under a root).
  EXPECT_TRUE(IsError(Mapping::File(path, 0, 1, {path}, "f"), absl::StatusCode::kPermissionDenied, "f.path"));
  // No roots, or an empty one: nothing is allowed.
  EXPECT_TRUE(IsError(Mapping::File(path, 0, 1, {}, "f"), absl::StatusCode::kPermissionDenied, "f.path"));
  EXPECT_TRUE(IsError(Mapping::File(path, 0, 1, {""}, "f"), absl::StatusCode::kPermissionDenied, "f.path"));
  // A trailing slash on the root, a second root, and "/" all work.
  EXPECT_TRUE(Mapping::File(path, 0, 1, {root_.path() + "/"}, "f", {}, kFileRead, Disk()).ok());
  EXPECT_TRUE(Mapping::File(path, 0, 1, {"/nonexistent", root_.path()}, "f", {}, kFileRead, Disk()).ok());
  EXPECT_TRUE(Mapping::File(path, 0, 1, {"/"}, "f", {}, kFileRead, Disk()).ok());
}

TEST(MappingAnonymousTest, IsZeroFilledAndWritable) {
  for (uint64_t size : {uint64_t{1}, kPage - 1, kPage, 3 * kPage + 17}) {
    SCOPED_TRACE(size);
    absl::StatusOr<std::unique_ptr<Mapping>> m = Mapping::Anonymous(size, false, "a");
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ((*m)->length(), size);
    auto* bytes = static_cast<unsigned char*>((*m)->data());
    ASSERT_NE(bytes, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(bytes) % kPage, 0u);
    for (uint64_t i = 0; i < size; ++i) {
      if (bytes[i] != 0) {
        ADD_FAILURE() << "byte " << i << " is not zero";
        break;
      }
    }
    bytes[0] = 1;
    bytes[size - 1] = 2;
    EXPECT_EQ(bytes[size - 1], 2);
  }
}

TEST(MappingAnonymousTest, RefusesSizeZero) {
  EXPECT_TRUE(IsError(Mapping::Anonymous(0, false, "a"), absl::StatusCode::kInvalidArgument, "a.size"));
  EXPECT_TRUE(IsError(Mapping::Anonymous(0, true, "a"), absl::StatusCode::kInvalidArgument, "a.size"));
}

TEST(MappingAnonymousTest, HugePagesNeedAMultipleOfTheHugePageSize) {
  const uint64_t huge = DefaultHugePageSize();
  ASSERT_GT(huge, 0u);
  EXPECT_EQ(huge & (huge - 1), 0u) << "a power of two";
  EXPECT_EQ(huge % kPage, 0u);
  for (uint64_t size : {kPage, huge - 1, huge + 1, huge + kPage, 3 * huge / 2}) {
    SCOPED_TRACE(size);
    absl::StatusOr<std::unique_ptr<Mapping>> m = Mapping::Anonymous(size, true, "src.anonymous");
    EXPECT_TRUE(IsError(m, absl::StatusCode::kInvalidArgument, "src.anonymous.size"));
    EXPECT_THAT(std::string(m.status().message()), HasSubstr(std::to_string(huge)));
  }
}

TEST(MappingAnonymousTest, AnImpossibleSizeIsAnMmapError) {
  // Larger than any address space: mmap fails (ENOMEM), reported with the call and errno.
  absl::StatusOr<std::unique_ptr<Mapping>> m = Mapping::Anonymous(uint64_t{1} << 62, false, "a");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kResourceExhausted) << m.status();
  EXPECT_EQ(ErrnoOf(m.status()), ENOMEM);
  EXPECT_EQ(CallOf(m.status()), "mmap");
  EXPECT_EQ(FieldOf(m.status()), "a.size");
}

// On hugetlbfs the kernel maps whole huge pages and refuses to unmap part of one (munmap of a length that
// ends inside a huge page is EINVAL): the mapped (and later unmapped) length is whole huge pages.
TEST(FileWindowTest, HugetlbfsMapsAndUnmapsWholeHugePages) {
  const uint64_t kHuge = 2ull << 20;
  FileWindow w = PlanFileWindow(0, 4096, kHuge, /*hugetlbfs=*/true);
  EXPECT_EQ(w.base_offset, 0u);
  EXPECT_EQ(w.delta, 0u);
  EXPECT_EQ(w.base_length, kHuge);
  w = PlanFileWindow(kHuge + 10, kHuge, kHuge, true);  // crosses into a second huge page
  EXPECT_EQ(w.base_offset, kHuge);
  EXPECT_EQ(w.delta, 10u);
  EXPECT_EQ(w.base_length, 2 * kHuge);
  w = PlanFileWindow(0, 3 * kHuge, kHuge, true);  // already whole
  EXPECT_EQ(w.base_length, 3 * kHuge);
  // Elsewhere the kernel rounds to pages itself: the requested bytes from the aligned offset.
  w = PlanFileWindow(kPage + 5, 10, kPage, false);
  EXPECT_EQ(w.base_offset, kPage);
  EXPECT_EQ(w.delta, 5u);
  EXPECT_EQ(w.base_length, 15u);
}

// Only memory filesystems back a region unless the operator opts in: a registered range of a disk file
// would keep its page cache pinned for as long as the region lives.
TEST(MappingFilesystemTest, DiskFilesAreRefusedUnlessAllowedAndMemoryFilesAreNot) {
  TempDir disk;
  absl::StatusOr<int64_t> fs = FilesystemOf(disk.path(), "f");
  ASSERT_TRUE(fs.ok()) << fs.status();
  if (IsMemoryFilesystem(*fs)) GTEST_SKIP() << "TEST_TMPDIR is on " << FilesystemName(*fs) << " here";
  const std::string on_disk = disk.WriteFile("disk.bin", kPage);
  absl::StatusOr<std::unique_ptr<Mapping>> refused = Mapping::File(on_disk, 0, kPage, {disk.path()}, "f");
  ASSERT_TRUE(IsError(refused, absl::StatusCode::kFailedPrecondition, "f.path"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr(FilesystemName(*fs)));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("allow_disk_files"));
  EXPECT_TRUE(Mapping::File(on_disk, 0, kPage, {disk.path()}, "f", {}, kFileRead, Disk()).ok());

  test::ShmDir shm;
  if (!shm.ok()) GTEST_SKIP() << "/dev/shm is not a writable tmpfs here";
  const std::string in_memory = shm.WriteFile("mem.bin", kPage);
  absl::StatusOr<std::unique_ptr<Mapping>> m = Mapping::File(in_memory, 0, kPage, {shm.path()}, "f");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(FilesystemName(TMPFS_MAGIC), "tmpfs");
  EXPECT_TRUE(IsMemoryFilesystem(HUGETLBFS_MAGIC));
  EXPECT_TRUE(IsMemoryFilesystem(RAMFS_MAGIC));
  EXPECT_FALSE(IsMemoryFilesystem(EXT4_SUPER_MAGIC));
}

// Restart recovery opens the real path recorded at registration with no symlink on the way (FileRules::
// no_symlinks) and only the same inode (FileRules::expect).
TEST_F(MappingFileTest, NoSymlinksRefusesALinkAtAnyComponent) {
  FileRules strict = Disk();
  strict.no_symlinks = true;
  const std::string dir = root_.MakeDir("d");
  const std::string file = root_.WriteFile("d/f.bin", kPage);
  absl::StatusOr<std::unique_ptr<Mapping>> plain = Mapping::File(file, 0, kPage, {root_.path()}, "f", {}, kFileRead, strict);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ((*plain)->real_path(), file);
  // The last component a link (to a file inside the root, which a plain open would accept).
  const std::string link = root_.Sub("link.bin");
  ASSERT_EQ(symlink(file.c_str(), link.c_str()), 0);
  ASSERT_TRUE(Map(link, 0, kPage).ok());
  absl::StatusOr<std::unique_ptr<Mapping>> last = Mapping::File(link, 0, kPage, {root_.path()}, "f", {}, kFileRead, strict);
  ASSERT_TRUE(IsError(last, absl::StatusCode::kPermissionDenied, "f.path"));
  EXPECT_EQ(ErrnoOf(last.status()), ELOOP);
  EXPECT_THAT(std::string(last.status().message()), HasSubstr("symbolic link"));
  // An intermediate directory a link.
  const std::string dirlink = root_.Sub("dl");
  ASSERT_EQ(symlink(dir.c_str(), dirlink.c_str()), 0);
  ASSERT_TRUE(Map(dirlink + "/f.bin", 0, kPage).ok());
  absl::StatusOr<std::unique_ptr<Mapping>> middle =
      Mapping::File(dirlink + "/f.bin", 0, kPage, {root_.path()}, "f", {}, kFileRead, strict);
  ASSERT_TRUE(IsError(middle, absl::StatusCode::kPermissionDenied, "f.path"));
  EXPECT_EQ(ErrnoOf(middle.status()), ELOOP);
  EXPECT_THAT(std::string(middle.status().message()), HasSubstr(dirlink));
  // ".." is not walked either.
  EXPECT_TRUE(IsError(Mapping::File(dir + "/../d/f.bin", 0, kPage, {root_.path()}, "f", {}, kFileRead, strict),
                      absl::StatusCode::kPermissionDenied, "f.path"));
  // A missing component is NOT_FOUND, as for an ordinary open.
  EXPECT_TRUE(IsError(Mapping::File(root_.Sub("d/none.bin"), 0, kPage, {root_.path()}, "f", {}, kFileRead, strict),
                      absl::StatusCode::kNotFound, "f.path"));
}

TEST_F(MappingFileTest, ExpectRefusesAnotherInodeAtThePath) {
  const std::string file = root_.WriteFile("f.bin", kPage);
  absl::StatusOr<std::unique_ptr<Mapping>> first = Map(file, 0, kPage);
  ASSERT_TRUE(first.ok()) << first.status();
  const FileId id = (*first)->file_id();
  struct stat st {};
  ASSERT_EQ(stat(file.c_str(), &st), 0);
  EXPECT_EQ(id.dev, static_cast<uint64_t>(st.st_dev));
  EXPECT_EQ(id.ino, static_cast<uint64_t>(st.st_ino));
  FileRules same = Disk();
  same.expect = id;
  EXPECT_TRUE(Mapping::File(file, 0, kPage, {root_.path()}, "f", {}, kFileRead, same).ok());
  // Replaced by another file of the same name (kept open first, so its inode number is not reused).
  const std::string other = root_.WriteFile("other.bin", kPage);
  ASSERT_EQ(rename(other.c_str(), file.c_str()), 0);
  absl::StatusOr<std::unique_ptr<Mapping>> replaced = Mapping::File(file, 0, kPage, {root_.path()}, "f", {}, kFileRead, same);
  ASSERT_TRUE(IsError(replaced, absl::StatusCode::kFailedPrecondition, "f.path"));
  EXPECT_THAT(std::string(replaced.status().message()), HasSubstr("replaced"));
}

TEST(RecoveryRightsTest, TenantRootsNarrowTheRecordedOnes) {
  TempDir base;
  const std::string a = base.MakeDir("a"), ab = base.MakeDir("a/b"), c = base.MakeDir("c");
  bool disjoint = true;
  EXPECT_EQ(IntersectRoots({}, {a}, &disjoint), std::vector<std::string>{a});
  EXPECT_FALSE(disjoint);
  EXPECT_EQ(IntersectRoots({a}, {}, &disjoint), std::vector<std::string>{a});
  EXPECT_EQ(IntersectRoots({a}, {ab}, &disjoint), std::vector<std::string>{ab});
  EXPECT_EQ(IntersectRoots({ab}, {a, c}, &disjoint), std::vector<std::string>{ab});
  EXPECT_EQ(IntersectRoots({a + "/"}, {a}, &disjoint), std::vector<std::string>{a});
  EXPECT_TRUE(IntersectRoots({ab}, {c}, &disjoint).empty());
  EXPECT_TRUE(disjoint);

  FileAccess recorded;
  recorded.check = true;
  recorded.identity = FileIdentity{1000, 1000, {27}};
  recorded.roots = {a};
  // An admin's PD (no tenant): as recorded.
  absl::StatusOr<FileAccess> same = RightsAtRecovery(recorded, "", nullptr, "source.file.path");
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->roots, recorded.roots);
  // The tenant's roots now narrower: those.
  const std::vector<std::string> narrower = {ab};
  absl::StatusOr<FileAccess> now = RightsAtRecovery(recorded, "t", &narrower, "source.file.path");
  ASSERT_TRUE(now.ok());
  EXPECT_TRUE(now->check);
  EXPECT_EQ(now->identity->uid, 1000u);
  EXPECT_EQ(now->roots, narrower);
  // Moved elsewhere, or the tenant gone: no rights at all.
  const std::vector<std::string> elsewhere = {c};
  EXPECT_TRUE(IsError(RightsAtRecovery(recorded, "t", &elsewhere, "source.file.path"),
                      absl::StatusCode::kFailedPrecondition, "source.file.path"));
  EXPECT_TRUE(IsError(RightsAtRecovery(recorded, "t", nullptr, "source.file.path"),
                      absl::StatusCode::kFailedPrecondition, "source.file.path"));
  // rdmad's own rights (an admin over TLS): as recorded, allowed_file_roots alone.
  FileAccess own;
  EXPECT_TRUE(RightsAtRecovery(own, "t", nullptr, "source.file.path").ok());
}

}  // namespace
}  // namespace rdmad
