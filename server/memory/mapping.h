// Mapping: memory an MR covers. Either anonymous memory rdmad allocates (optionally huge pages) or a
// range of a file an application shares with rdmad, mapped MAP_SHARED (the sidecar case: tmpfs or
// hugetlbfs). The destructor unmaps; the registry keeps a Mapping alive until every MR over it is
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
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/auth/caller.h"
#include "server/memory/file_rights.h"

namespace rdmad {

class Mapping {
 public:
  // `field` prefixes errors ("source" or "source.anonymous" ...): the caller's request field.
  static absl::StatusOr<std::unique_ptr<Mapping>> Anonymous(uint64_t size, bool huge_pages,
                                                            const std::string& field);
  // `allowed_roots`: the file's real path (symlinks resolved) must lie under one of them, and under one of
  // `files.roots` too if there are any. With `files.check`, the caller's identity must have `rights`
  // (kFileRead | kFileWrite) on the opened inode; without an identity no file is mapped at all. Errors
  // about the file name `field`.path (PERMISSION_DENIED for every refusal of the caller's).
  static absl::StatusOr<std::unique_ptr<Mapping>> File(const std::string& path, uint64_t offset,
                                                       uint64_t length,
                                                       const std::vector<std::string>& allowed_roots,
                                                       const std::string& field,
                                                       const auth::FileAccess& files = {},
                                                       unsigned rights = kFileRead | kFileWrite);
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

 private:
  Mapping(void* base, size_t base_length, void* data, uint64_t length)
      : base_(base), base_length_(base_length), data_(data), length_(length) {}

  void* const base_;          // what mmap returned (page aligned)
  const size_t base_length_;  // what munmap needs
  void* const data_;          // first byte of the requested range
  const uint64_t length_;     // requested length
  std::string real_path_;     // set once by File, before the mapping is handed out
  FileOwnership ownership_;
};

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

// The default huge page size of this host (Hugepagesize in /proc/meminfo), or 2 MiB if unknown.
uint64_t DefaultHugePageSize();

}  // namespace rdmad

#endif  // RDMAD_SERVER_MEMORY_MAPPING_H_
