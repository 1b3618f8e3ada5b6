#include "server/memory/mapping.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/common/fd.h"
#include "server/common/log.h"
#include "server/common/status.h"

namespace rdmad {

namespace {
constexpr uint32_t kDmaBufMagic = 0x444d4142;  // DMA_BUF_MAGIC (linux/magic.h)
#ifdef F_SEAL_FUTURE_WRITE
constexpr int kSealFutureWrite = F_SEAL_FUTURE_WRITE;
#else
constexpr int kSealFutureWrite = 0x0010;  // Linux 5.1
#endif
}  // namespace

bool UnderRoot(const std::string& real, const std::string& root) {
  if (root.empty()) return false;
  char resolved[PATH_MAX];
  std::string r = realpath(root.c_str(), resolved) ? std::string(resolved) : root;
  while (r.size() > 1 && r.back() == '/') r.pop_back();
  if (r == "/") return true;
  return real.size() > r.size() && real.compare(0, r.size(), r) == 0 && real[r.size()] == '/';
}

bool IsMemoryFilesystem(int64_t f_type) {
  const uint32_t t = static_cast<uint32_t>(f_type);
  return t == TMPFS_MAGIC || t == HUGETLBFS_MAGIC || t == RAMFS_MAGIC;
}

std::string FilesystemName(int64_t f_type) {
  switch (static_cast<uint32_t>(f_type)) {
    case TMPFS_MAGIC:
      return "tmpfs";
    case HUGETLBFS_MAGIC:
      return "hugetlbfs";
    case RAMFS_MAGIC:
      return "ramfs";
    case EXT4_SUPER_MAGIC:
      return "ext2/ext3/ext4";
    case XFS_SUPER_MAGIC:
      return "xfs";
    case BTRFS_SUPER_MAGIC:
      return "btrfs";
    case F2FS_SUPER_MAGIC:
      return "f2fs";
    case OVERLAYFS_SUPER_MAGIC:
      return "overlayfs";
    case FUSE_SUPER_MAGIC:
      return "fuse";
    case NFS_SUPER_MAGIC:
      return "nfs";
    case CIFS_SUPER_MAGIC:
    case SMB2_SUPER_MAGIC:
      return "cifs/smb";
    default:
      break;
  }
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%x", static_cast<uint32_t>(f_type));
  return hex;
}

absl::StatusOr<int64_t> FilesystemOf(const std::string& path, const std::string& field) {
  struct statfs fs {};
  if (statfs(path.c_str(), &fs) != 0) return ErrnoError("statfs", errno, path, field);
  return static_cast<int64_t>(fs.f_type);
}

namespace {

// Opens the absolute `path` with O_PATH one component at a time from "/", none of them followed if it is a
// symlink (O_NOFOLLOW; a link is opened as itself and refused here). "." and empty components are
// skipped; ".." is refused (a real path has none). Returns the descriptor of the last component.
absl::StatusOr<int> OpenWithoutSymlinks(const std::string& path, const std::string& field) {
  std::vector<std::string> parts;
  for (size_t at = 1; at <= path.size();) {
    size_t slash = path.find('/', at);
    if (slash == std::string::npos) slash = path.size();
    std::string part = path.substr(at, slash - at);
    at = slash + 1;
    if (!part.empty() && part != ".") parts.push_back(std::move(part));
  }
  if (parts.empty()) return InvalidArgument(field, absl::StrCat(path, " names no file"));
  UniqueFd parent(open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (parent.get() < 0) return ErrnoError("open", errno, "/", field);
  std::string walked;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i] == "..") {
      return FieldError(absl::StatusCode::kPermissionDenied, field,
                        absl::StrCat(path, " holds a '..' component, which this open does not follow"));
    }
    absl::StrAppend(&walked, "/", parts[i]);
    UniqueFd next(openat(parent.get(), parts[i].c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (next.get() < 0) {
      return ErrnoError(errno == ENOENT ? absl::StatusCode::kNotFound : absl::ErrnoToStatusCode(errno), "open",
                        errno, walked, field);
    }
    struct stat st {};
    if (fstat(next.get(), &st) != 0) return ErrnoError("fstat", errno, walked, field);
    if (S_ISLNK(st.st_mode)) {
      return ErrnoError(absl::StatusCode::kPermissionDenied, "open", ELOOP,
                        absl::StrCat(walked, " is a symbolic link, which this open does not follow (no component of ",
                                     path, " may be one)"),
                        field);
    }
    if (i + 1 < parts.size() && !S_ISDIR(st.st_mode)) {
      return ErrnoError(absl::StatusCode::kFailedPrecondition, "open", ENOTDIR,
                        absl::StrCat(walked, " is not a directory"), field);
    }
    parent = std::move(next);
  }
  const int out = dup(parent.get());  // the last component; `parent` closes its own copy
  if (out < 0) return ErrnoError("dup", errno, walked, field);
  return out;
}

}  // namespace

std::vector<std::string> IntersectRoots(const std::vector<std::string>& a, const std::vector<std::string>& b,
                                        bool* disjoint) {
  *disjoint = false;
  if (a.empty()) return b;
  if (b.empty()) return a;
  auto resolved = [](const std::string& root) {
    char buf[PATH_MAX];
    std::string r = realpath(root.c_str(), buf) ? std::string(buf) : root;
    while (r.size() > 1 && r.back() == '/') r.pop_back();
    return r;
  };
  std::vector<std::string> out;
  for (const auto& x : a) {
    for (const auto& y : b) {
      const std::string rx = resolved(x), ry = resolved(y);
      if (rx.empty() || ry.empty()) continue;
      // The deeper of a nested pair (or either, if the same): its subtree is the other's and its own.
      const std::string& deeper = (rx == ry || UnderRoot(rx, ry)) ? rx : UnderRoot(ry, rx) ? ry : std::string();
      if (!deeper.empty() && std::find(out.begin(), out.end(), deeper) == out.end()) out.push_back(deeper);
    }
  }
  *disjoint = out.empty();
  return out;
}

absl::StatusOr<FileAccess> RightsAtRecovery(const FileAccess& recorded, const std::string& tenant,
                                                  const std::vector<std::string>* tenant_roots,
                                                  const std::string& field) {
  // rdmad's own rights (an admin over TLS, an internal caller): allowed_file_roots alone, as at registration.
  if (tenant.empty() || !recorded.check) return recorded;
  if (tenant_roots == nullptr) {
    return FailedPrecondition(field, absl::StrCat("its PD's tenant ", tenant,
                                                  " is no longer in rdmad's config, so no one's rights cover it"));
  }
  FileAccess now = recorded;
  bool disjoint = false;
  now.roots = IntersectRoots(recorded.roots, *tenant_roots, &disjoint);
  if (disjoint) {
    return FailedPrecondition(field, absl::StrCat("the file roots of tenant ", tenant,
                                                  " no longer overlap those it had when the region was registered"));
  }
  return now;
}

uint64_t DefaultHugePageSize() {
  uint64_t kib = 0;
  if (FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f)) {
      unsigned long long v;
      if (std::sscanf(line, "Hugepagesize: %llu kB", &v) == 1) kib = v;
    }
    std::fclose(f);
  }
  return kib ? kib * 1024 : 2ull << 20;
}

FileWindow PlanFileWindow(uint64_t offset, uint64_t length, uint64_t align, bool hugetlbfs) {
  FileWindow w;
  w.base_offset = offset - offset % align;
  w.delta = offset - w.base_offset;
  w.base_length = w.delta + length;
  // hugetlbfs: mmap maps whole huge pages whatever length it is given, but munmap of a length that ends
  // inside one fails (EINVAL: the huge page cannot be split) and would leave the whole mapping in place.
  // So the length kept for munmap is the one the kernel mapped. The file holds whole huge pages, so the
  // rounded range is backed by it.
  if (hugetlbfs && align > 1 && w.base_length % align != 0) w.base_length += align - w.base_length % align;
  return w;
}

absl::StatusOr<std::unique_ptr<Mapping>> Mapping::Anonymous(uint64_t size, bool huge_pages,
                                                            const std::string& field) {
  if (size == 0) return InvalidArgument(field + ".size", "must be > 0");
  int flags = MAP_PRIVATE | MAP_ANONYMOUS;
  if (huge_pages) {
    const uint64_t huge = DefaultHugePageSize();
    if (size % huge != 0) {
      return InvalidArgument(field + ".size",
                             absl::StrCat("with huge_pages, must be a multiple of the huge page size (", huge,
                                          " bytes); got ", size));
    }
    flags |= MAP_HUGETLB;
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (p == MAP_FAILED) {
    return ErrnoError("mmap", errno, huge_pages ? "allocating huge pages (are any reserved? see "
                                                  "/proc/sys/vm/nr_hugepages)"
                                                : "allocating memory",
                      field + ".size");
  }
  return std::unique_ptr<Mapping>(new Mapping(p, size, p, size));
}

absl::StatusOr<std::unique_ptr<Mapping>> Mapping::File(const std::string& path, uint64_t offset,
                                                       uint64_t length,
                                                       const std::vector<std::string>& allowed_roots,
                                                       const std::string& field,
                                                       const FileAccess& files, unsigned rights,
                                                       const FileRules& rules) {
  if (path.empty()) return InvalidArgument(field + ".path", "is required");
  // A caller without a file-system identity learns nothing about the path, not even whether it exists.
  RDMAD_RETURN_IF_ERROR(CheckMayUseFiles(files, field + ".path"));
  if (path[0] != '/') return InvalidArgument(field + ".path", "must be an absolute path");
  // No file's path holds a NUL: open(2) would see only the part before it, another path than the one given
  // ("/dev/shm/x\0/../../etc/passwd" would register /dev/shm/x).
  if (path.find('\0') != std::string::npos) return InvalidArgument(field + ".path", "holds a NUL byte");
  if (length == 0) return InvalidArgument(field + ".length", "must be > 0");
  if (offset > UINT64_MAX - length) return OutOfRange(field + ".length", "offset + length overflows");

  // Open first, then check what was opened: a check of the path followed by an open of the same string
  // would let a local user swap a directory for a symlink in between (/dev/shm is world-writable) and
  // make rdmad, as root, map a file outside every allowed root. O_PATH opens without side effects and
  // without needing read permission; the kernel's name for the opened file is then checked, and the
  // same inode is reopened read-write through /proc/self/fd.
  // With no_symlinks, every component is opened without following it: a link anywhere on the way is
  // refused rather than resolved.
  UniqueFd pathfd(-1);
  if (rules.no_symlinks) {
    RDMAD_ASSIGN_OR_RETURN(int opened, OpenWithoutSymlinks(path, field + ".path"));
    pathfd = UniqueFd(opened);
  } else {
    pathfd = UniqueFd(open(path.c_str(), O_PATH | O_CLOEXEC));
  }
  if (pathfd.get() < 0) {
    return ErrnoError(errno == ENOENT ? absl::StatusCode::kNotFound : absl::ErrnoToStatusCode(errno), "open",
                      errno, path, field + ".path");
  }
  struct stat st {};
  if (fstat(pathfd.get(), &st) != 0) return ErrnoError("fstat", errno, path, field + ".path");
  if (!S_ISREG(st.st_mode)) return InvalidArgument(field + ".path", absl::StrCat(path, " is not a regular file"));
  const std::string self = absl::StrCat("/proc/self/fd/", pathfd.get());
  char real[PATH_MAX];
  const ssize_t n = readlink(self.c_str(), real, sizeof real - 1);
  if (n < 0) return ErrnoError("readlink", errno, self, field + ".path");
  real[n] = '\0';
  bool allowed = false;
  for (const auto& root : allowed_roots) allowed = allowed || UnderRoot(real, root);
  if (!allowed) {
    return FieldError(absl::StatusCode::kPermissionDenied, field + ".path",
                      absl::StrCat(real, " is not under an allowed file root (config allowed_file_roots)"));
  }
  if (!files.roots.empty()) {
    bool narrowed = false;
    for (const auto& root : files.roots) narrowed = narrowed || UnderRoot(real, root);
    if (!narrowed) {
      return FieldError(absl::StatusCode::kPermissionDenied, field + ".path",
                        absl::StrCat(real, " is not under one of this caller's file roots (the tenant's file_roots)"));
    }
  }
  // The caller's own rights, on the inode opened above (never on a second lookup of the path).
  FileOwnership ownership;
  ownership.uid = st.st_uid;
  ownership.gid = st.st_gid;
  ownership.mode = st.st_mode;
  RDMAD_RETURN_IF_ERROR(CheckFileRights(files, ownership, rights, real, field + ".path"));
  const FileId id{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
  if (rules.expect.has_value() && !(id == *rules.expect)) {
    return FieldError(absl::StatusCode::kFailedPrecondition, field + ".path",
                      absl::StrCat(real, " is another file than the one registered (device ", id.dev, ", inode ",
                                   id.ino, "; at registration device ", rules.expect->dev, ", inode ",
                                   rules.expect->ino, "): it was replaced"));
  }
  // Only files whose pages live in memory anyway: a registered range of a disk file keeps its page cache
  // pinned for as long as the region lives, which the operator must ask for.
  struct statfs on {};
  if (fstatfs(pathfd.get(), &on) != 0) return ErrnoError("fstatfs", errno, real, field + ".path");
  if (!rules.allow_disk && !IsMemoryFilesystem(static_cast<int64_t>(on.f_type))) {
    return FieldError(absl::StatusCode::kFailedPrecondition, field + ".path",
                      absl::StrCat(real, " is on a ", FilesystemName(static_cast<int64_t>(on.f_type)),
                                   " filesystem, not a memory one (tmpfs, hugetlbfs, ramfs): registering it would "
                                   "pin its page cache for as long as the region lives; rdmad does that only with "
                                   "allow_disk_files (docs/config.md)"));
  }
  UniqueFd fd(open(self.c_str(), O_RDWR | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoError("open", errno, real, field + ".path");
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (offset >= size) {
    return OutOfRange(field + ".offset", absl::StrCat("offset ", offset, " is at or past the end of ", real,
                                                      " (", size, " bytes)"));
  }
  if (offset + length > size) {
    return OutOfRange(field + ".length", absl::StrCat("offset ", offset, " + length ", length,
                                                      " passes the end of ", real, " (", size, " bytes)"));
  }
  // mmap needs an aligned offset: a page, or the huge page size on hugetlbfs. Map from the aligned-down
  // offset and point data() at the requested first byte.
  uint64_t align = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  struct statfs fs {};
  const bool hugetlbfs = fstatfs(fd.get(), &fs) == 0 && fs.f_type == HUGETLBFS_MAGIC;
  if (hugetlbfs) align = static_cast<uint64_t>(fs.f_bsize);
  const FileWindow w = PlanFileWindow(offset, length, align, hugetlbfs);
  const size_t base_length = static_cast<size_t>(w.base_length);
  void* base = mmap(nullptr, base_length, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(),
                    static_cast<off_t>(w.base_offset));
  if (base == MAP_FAILED) return ErrnoError("mmap", errno, real, field);
  std::unique_ptr<Mapping> m(new Mapping(base, base_length, static_cast<char*>(base) + w.delta, length));
  m->real_path_ = real;
  m->ownership_ = ownership;
  m->file_id_ = id;
  m->files_ = files;
  return m;
}

absl::Status CheckDescriptor(int fd, bool allow_disk, const std::string& field) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return ErrnoError("fstat", errno, "the descriptor", field);
  struct statfs on {};
  if (fstatfs(fd, &on) != 0) return ErrnoError("fstatfs", errno, "the descriptor", field);
  const int64_t fs_type = static_cast<int64_t>(on.f_type);
  if (static_cast<uint32_t>(fs_type) == kDmaBufMagic) {
    return FailedPrecondition(field, "the descriptor is a dma-buf: this rdmad registers only memory it can map "
                                     "(a memfd, or a tmpfs or hugetlbfs file)");
  }
  if (!S_ISREG(st.st_mode)) {
    return InvalidArgument(field, "the descriptor is not a regular file (a memfd, or a tmpfs or hugetlbfs file)");
  }
  if (!allow_disk && !IsMemoryFilesystem(fs_type)) {
    return FailedPrecondition(field, absl::StrCat("the descriptor's file is on a ", FilesystemName(fs_type),
                                                  " filesystem, not a memory one (tmpfs, hugetlbfs, ramfs): rdmad "
                                                  "registers such files only with allow_disk_files"));
  }
  const int mode = fcntl(fd, F_GETFL);
  if (mode < 0) return ErrnoError("fcntl(F_GETFL)", errno, "the descriptor", field);
  if ((mode & O_ACCMODE) == O_WRONLY) {
    return FieldError(absl::StatusCode::kPermissionDenied, field, "the descriptor is open write-only: rdmad cannot "
                                                                  "map it (open it read-write, or read-only)");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Mapping>> Mapping::Descriptor(UniqueFd fd, uint64_t offset, uint64_t length,
                                                             bool writable, bool allow_disk,
                                                             const std::string& field) {
  if (length == 0) return InvalidArgument(field + ".length", "must be > 0");
  if (offset > UINT64_MAX - length) return OutOfRange(field + ".length", "offset + length overflows");
  RDMAD_RETURN_IF_ERROR(CheckDescriptor(fd.get(), allow_disk, field));
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return ErrnoError("fstat", errno, "the descriptor", field);
  struct statfs on {};
  if (fstatfs(fd.get(), &on) != 0) return ErrnoError("fstatfs", errno, "the descriptor", field);
  // The caller's rights are the descriptor's: its open mode, and its seals.
  const int mode = fcntl(fd.get(), F_GETFL);
  if (mode < 0) return ErrnoError("fcntl(F_GETFL)", errno, "the descriptor", field);
  const int seals = fcntl(fd.get(), F_GET_SEALS);  // EINVAL: a file that cannot be sealed (not a memfd)
  const bool sealed = seals > 0 && (seals & (F_SEAL_WRITE | kSealFutureWrite)) != 0;
  if (writable && ((mode & O_ACCMODE) == O_RDONLY || sealed)) {
    return FieldError(absl::StatusCode::kPermissionDenied, field,
                      absl::StrCat("the descriptor ", sealed ? "is sealed against writing" : "is open read-only",
                                   ": register it without local-write, remote-write, remote-atomic and mw-bind "
                                   "(the kernel pins a region with any of them for writing)"));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (offset >= size) {
    return OutOfRange(field + ".offset",
                      absl::StrCat("offset ", offset, " is at or past the end of the descriptor's file (", size,
                                   " bytes)"));
  }
  if (offset + length > size) {
    return OutOfRange(field + ".length", absl::StrCat("offset ", offset, " + length ", length,
                                                      " passes the end of the descriptor's file (", size, " bytes)"));
  }
  const bool hugetlbfs = on.f_type == HUGETLBFS_MAGIC;
  const uint64_t align = hugetlbfs ? static_cast<uint64_t>(on.f_bsize) : static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const FileWindow w = PlanFileWindow(offset, length, align, hugetlbfs);
  const size_t base_length = static_cast<size_t>(w.base_length);
  void* base = mmap(nullptr, base_length, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd.get(),
                    static_cast<off_t>(w.base_offset));
  if (base == MAP_FAILED) return ErrnoError("mmap", errno, "the descriptor", field);
  std::unique_ptr<Mapping> m(new Mapping(base, base_length, static_cast<char*>(base) + w.delta, length));
  m->descriptor_ = true;
  m->writable_ = writable;
  m->ownership_.uid = st.st_uid;
  m->ownership_.gid = st.st_gid;
  m->ownership_.mode = st.st_mode;
  m->file_id_ = FileId{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
  return m;
}

absl::Status ExplainReadOnlyPin(absl::Status failed, const Mapping& mapping) {
  // Before Linux 6.2 the kernel pins every user region as if for writing (ib_umem_get: FOLL_WRITE, with
  // FOLL_FORCE for a read-only region), which a shared read-only mapping refuses with EFAULT.
  if (!mapping.is_descriptor() || mapping.writable() || ErrnoOf(failed) != EFAULT) return failed;
  absl::Status s = FieldError(absl::StatusCode::kFailedPrecondition, "source.fd",
                              absl::StrCat("this kernel cannot pin memory rdmad may not write (before Linux 6.2 "
                                           "it pins every region for writing), so a descriptor open read-only "
                                           "or sealed against writing cannot be registered here: pass one open "
                                           "read-write (",
                                           failed.message(), ")"));
  s.SetPayload(kErrnoPayload, absl::Cord(absl::StrCat(EFAULT)));
  if (auto call = failed.GetPayload(kCallPayload)) s.SetPayload(kCallPayload, *call);
  return s;
}

Mapping::~Mapping() {
  if (munmap(base_, base_length_) != 0) {
    RDMAD_LOG_ERROR("munmap(%p, %zu) failed: errno %d", base_, base_length_, errno);
  }
}

}  // namespace rdmad
