// Mapping: memory an MR covers. Either anonymous memory rdmad allocates (optionally huge pages), a
// range of a file an application shares with rdmad, mapped MAP_SHARED (the sidecar case: tmpfs or
// hugetlbfs), or a range of a file a local application passed as a descriptor (a memfd; descriptors.h). The destructor unmaps; the registry keeps a Mapping alive until every MR over it is
// deregistered (shared_ptr: an emulated rereg briefly has the old and the new MR over the same mapping).
//
// A file is mapped with rdmad's rights, but only after the caller's were checked on the very inode opened
// (file_rights.h): the FileAccess given, and the rights the registration needs.
//
// Thread-safety: immutable after creation.
#ifndef RDMAD_SERVER_MEMORY_MAPPING_H_
#define RDMAD_SERVER_MEMORY_MAPPING_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/common/fd.h"
#include "server/memory/file_access.h"
#include "server/memory/file_rights.h"

namespace rdmad {

// A file's identity on this host: its device and inode, as fstat(2) gives them.
struct FileId {
  uint64_t dev = 0;
  uint64_t ino = 0;
  bool operator==(const FileId& o) const { return dev == o.dev && ino == o.ino; }
};

// How Mapping::File may open a file, beyond the roots and the caller's rights.
struct FileRules {
  // Files on filesystems other than the memory ones (tmpfs, hugetlbfs, ramfs) are refused unless set: a
  // registered range of a disk file pins its page cache for as long as the region lives (config
  // allow_disk_files).
  bool allow_disk = false;
  // No component of the path may be a symlink: each is opened with O_NOFOLLOW, from "/". For restart
  // recovery, which opens the real path recorded at registration: a link found now was not there then.
  bool no_symlinks = false;
  // The file must be this one (restart recovery: the device and inode recorded at registration).
  std::optional<FileId> expect;
};

// Whether the descriptor `fd` can back a region (Mapping::Descriptor's checks that need no range or access):
// a regular file, on a memory filesystem unless `allow_disk`, not a dma-buf, not open write-only. Errors
// name `field`.
absl::Status CheckDescriptor(int fd, bool allow_disk, const std::string& field);

// True for the filesystems whose pages live in memory anyway (tmpfs, hugetlbfs, ramfs): registering a
// range of such a file pins nothing a disk would otherwise hold. `f_type` as statfs(2) reports it.
bool IsMemoryFilesystem(int64_t f_type);
// A name for statfs(2)'s f_type ("tmpfs", "ext2/ext3/ext4", "xfs", ...), or "0x<hex>" if not known here.
std::string FilesystemName(int64_t f_type);
// The f_type of the filesystem `path` is on, or the statfs error (errno kept, naming `field`).
absl::StatusOr<int64_t> FilesystemOf(const std::string& path, const std::string& field);

class Mapping {
 public:
  // `field` prefixes errors ("source" or "source.anonymous" ...): the caller's request field.
  static absl::StatusOr<std::unique_ptr<Mapping>> Anonymous(uint64_t size, bool huge_pages,
                                                            const std::string& field);
  // `allowed_roots`: the file's real path (symlinks resolved) must lie under one of them, and under one of
  // `files.roots` too if there are any. With `files.check`, the caller's identity must have `rights`
  // (kFileRead | kFileWrite) on the opened inode; without an identity no file is mapped at all. Errors
  // about the file name `field`.path (PERMISSION_DENIED for every refusal of the caller's). `rules`: a file
  // outside the memory filesystems is FAILED_PRECONDITION unless allowed; with no_symlinks a symlink on the
  // path is PERMISSION_DENIED (ELOOP); a file other than `expect` is FAILED_PRECONDITION.
  static absl::StatusOr<std::unique_ptr<Mapping>> File(const std::string& path, uint64_t offset,
                                                       uint64_t length,
                                                       const std::vector<std::string>& allowed_roots,
                                                       const std::string& field,
                                                       const FileAccess& files = {},
                                                       unsigned rights = kFileRead | kFileWrite,
                                                       const FileRules& rules = {});
  // A range of the file behind `fd`, a descriptor a client passed (descriptors.h): no path, roots or owner
  // to check, the caller's rights are the descriptor's own. `writable`: the registration needs the memory
  // writable (LOCAL_WRITE, REMOTE_WRITE, REMOTE_ATOMIC or MW_BIND: the kernel pins such a region for
  // writing); a descriptor open read-only or sealed against writing (F_SEAL_WRITE, F_SEAL_FUTURE_WRITE)
  // then is PERMISSION_DENIED on `field`, and is otherwise mapped read-only. Only memory filesystems (a
  // memfd is tmpfs or hugetlbfs) unless `allow_disk`; a dma-buf is FAILED_PRECONDITION (not mapped here).
  // The descriptor is closed when this returns; the mapping keeps the file's memory.
  static absl::StatusOr<std::unique_ptr<Mapping>> Descriptor(UniqueFd fd, uint64_t offset, uint64_t length,
                                                             bool writable, bool allow_disk,
                                                             const std::string& field);
  ~Mapping();
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  void* data() const { return data_; }
  uint64_t length() const { return length_; }
  // A file mapping: the file's real path and its owner, group and mode as fstat(2) saw them when it was
  // opened (what a re-registration that only changes the access flags is checked against). Empty for
  // anonymous memory.
  bool is_file() const { return !real_path_.empty(); }
  const std::string& real_path() const { return real_path_; }
  const FileOwnership& ownership() const { return ownership_; }
  // The file's device and inode when it was opened (zero for anonymous memory).
  const FileId& file_id() const { return file_id_; }
  // The caller's rights the file was opened and checked with (what restart recovery checks again).
  const FileAccess& files() const { return files_; }
  // A descriptor's memory (Descriptor), and whether it is mapped writable (false only for a descriptor that
  // allows no writing: a re-registration may then not ask for write access either).
  bool is_descriptor() const { return descriptor_; }
  bool writable() const { return writable_; }
  // What munmap is given (the mapped length; on hugetlbfs whole huge pages).
  size_t mapped_length() const { return base_length_; }

 private:
  Mapping(void* base, size_t base_length, void* data, uint64_t length)
      : base_(base), base_length_(base_length), data_(data), length_(length) {}

  void* const base_;          // what mmap returned (page aligned)
  const size_t base_length_;  // what munmap needs
  void* const data_;          // first byte of the requested range
  const uint64_t length_;     // requested length
  std::string real_path_;     // set once by File, before the mapping is handed out
  FileOwnership ownership_;
  FileId file_id_;
  FileAccess files_;
  bool descriptor_ = false;
  bool writable_ = true;
};

// A failed registration (ibv_reg_mr) over `mapping`: for a descriptor's read-only mapping, the kernel's
// EFAULT said plainly (FAILED_PRECONDITION on source.fd, errno kept: before Linux 6.2 every region is pinned
// for writing, which a read-only shared mapping refuses). Any other failure as it is.
absl::Status ExplainReadOnlyPin(absl::Status failed, const Mapping& mapping);

// True if `real` (a resolved path) lies under `root` (resolved here; "/" holds everything).
bool UnderRoot(const std::string& real, const std::string& root);

// Where a file range [offset, offset + length) is mapped: mmap's offset (aligned down to `align`, the page
// or, on hugetlbfs, the huge page size), the requested first byte's distance from it, and the length to
// map and later unmap: on hugetlbfs a whole number of huge pages (munmap refuses to split one).
struct FileWindow {
  uint64_t base_offset = 0;
  uint64_t delta = 0;
  uint64_t base_length = 0;
};
FileWindow PlanFileWindow(uint64_t offset, uint64_t length, uint64_t align, bool hugetlbfs);

// The roots a path must lie under to be under one of `a` and one of `b` (each empty: no narrowing from
// it): the deeper of every nested pair. Empty `a` gives `b` and the other way round; a non-empty result
// from two non-empty lists, or an empty one when they do not overlap at all (*disjoint set).
std::vector<std::string> IntersectRoots(const std::vector<std::string>& a, const std::vector<std::string>& b,
                                        bool* disjoint);

// The rights a region's file is mapped with at restart recovery: never more than its registering caller
// could get now. `recorded`: the caller's rights as recorded at registration. `tenant`: the tenant of the
// region's PD (empty: an admin's PD, or single-tenant mode: the recorded rights as they are; so are
// rdmad's own rights, `check` false). `tenant_roots`: that tenant's file_roots in the current config,
// nullptr if it is no longer configured. Otherwise the file must lie under the recorded roots and the
// tenant's current ones both (so a region a unix admin registered in a tenant's PD comes back only under
// that tenant's roots). FAILED_PRECONDITION on `field` if the tenant is gone or the two sets of roots no
// longer overlap.
absl::StatusOr<FileAccess> RightsAtRecovery(const FileAccess& recorded, const std::string& tenant,
                                                  const std::vector<std::string>* tenant_roots,
                                                  const std::string& field);

// The default huge page size of this host (Hugepagesize in /proc/meminfo), or 2 MiB if unknown.
uint64_t DefaultHugePageSize();

}  // namespace rdmad

#endif  // RDMAD_SERVER_MEMORY_MAPPING_H_
