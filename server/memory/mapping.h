// Mapping: memory an MR covers. Either anonymous memory rdmad allocates (optionally huge pages) or a
// range of a file an application shares with rdmad, mapped MAP_SHARED (the sidecar case: tmpfs or
// hugetlbfs). The destructor unmaps; the registry keeps a Mapping alive until every MR over it is
// deregistered (shared_ptr: an emulated rereg briefly has the old and the new MR over the same mapping).
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

namespace rdmad {

class Mapping {
 public:
  // `field` prefixes errors ("source" or "source.anonymous" ...): the caller's request field.
  static absl::StatusOr<std::unique_ptr<Mapping>> Anonymous(uint64_t size, bool huge_pages,
                                                            const std::string& field);
  // `allowed_roots`: the file's real path (symlinks resolved) must lie under one of them.
  static absl::StatusOr<std::unique_ptr<Mapping>> File(const std::string& path, uint64_t offset,
                                                       uint64_t length,
                                                       const std::vector<std::string>& allowed_roots,
                                                       const std::string& field);
  ~Mapping();
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  void* data() const { return data_; }
  uint64_t length() const { return length_; }

 private:
  Mapping(void* base, size_t base_length, void* data, uint64_t length)
      : base_(base), base_length_(base_length), data_(data), length_(length) {}

  void* const base_;          // what mmap returned (page aligned)
  const size_t base_length_;  // what munmap needs
  void* const data_;          // first byte of the requested range
  const uint64_t length_;     // requested length
};

// The default huge page size of this host (Hugepagesize in /proc/meminfo), or 2 MiB if unknown.
uint64_t DefaultHugePageSize();

}  // namespace rdmad

#endif  // RDMAD_SERVER_MEMORY_MAPPING_H_
