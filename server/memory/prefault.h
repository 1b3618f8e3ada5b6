// Prefault: faults in the pages of a large anonymous region from several threads at once, before
// ibv_reg_mr pins them (docs/performance.md#registering-large-regions). ibv_reg_mr of untouched
// memory faults and zeroes every page on one thread; madvise(MADV_POPULATE_WRITE, Linux 5.14+) on chunks
// of the region from T threads does that work in parallel, and the pinning then finds the pages present.
// What it gains is measured by the registration benchmark (docs/performance.md).
//
// An optimization only: a kernel without MADV_POPULATE_WRITE (EINVAL), or any other failure, leaves the
// remaining pages to ibv_reg_mr, which reports what really fails (ENOMEM ...).
//
// Threads: runs on the caller's thread (a registry pin worker, off the request path); starts threads - 1
// helper threads and joins them before returning. Touches nothing but the given range.
#ifndef RDMAD_SERVER_MEMORY_PREFAULT_H_
#define RDMAD_SERVER_MEMORY_PREFAULT_H_

#include <cstdint>

namespace rdmad {

// Regions below this many bytes are left to ibv_reg_mr (threads cost more than they save).
inline constexpr uint64_t kPrefaultMinBytes = uint64_t{64} << 20;

// The threads Prefault uses on this machine: the CPUs, at most 4 (1: no parallel prefault).
int PrefaultThreads();

// Faults in [data, data + length) from `threads` threads, in chunks aligned to `align` bytes (the mapping's
// page size: 4 KiB, or the huge page size). Returns how many bytes were populated (0 if the kernel lacks
// MADV_POPULATE_WRITE, the region is below kPrefaultMinBytes, or threads < 2).
uint64_t Prefault(void* data, uint64_t length, uint64_t align, int threads);

}  // namespace rdmad

#endif  // RDMAD_SERVER_MEMORY_PREFAULT_H_
