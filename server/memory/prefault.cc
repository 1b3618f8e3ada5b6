// See prefault.h.
#include "server/memory/prefault.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <thread>
#include <vector>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14 (uapi asm-generic/mman-common.h); older headers lack it
#endif

namespace rdmad {

int PrefaultThreads() {
  const unsigned cpus = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(cpus, 1u, 4u));
}

uint64_t Prefault(void* data, uint64_t length, uint64_t align, int threads) {
  if (threads < 2 || length < kPrefaultMinBytes || align == 0) return 0;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t end = begin + length;
  const uintptr_t first = (begin + align - 1) / align * align;  // madvise wants aligned starts
  if (first >= end) return 0;
  const uint64_t span = end - first;
  const uint64_t chunk = (span / threads + align - 1) / align * align;
  std::atomic<uint64_t> done{0};
  auto populate = [&done, end](uintptr_t from, uint64_t bytes) {
    bytes = std::min<uint64_t>(bytes, end - from);
    if (bytes > 0 && madvise(reinterpret_cast<void*>(from), bytes, MADV_POPULATE_WRITE) == 0) {
      done.fetch_add(bytes, std::memory_order_relaxed);
    }
  };
  std::vector<std::thread> helpers;
  for (int i = 1; i < threads; ++i) {
    const uintptr_t from = first + i * chunk;
    if (from >= end) break;
    helpers.emplace_back(populate, from, chunk);
  }
  populate(first, chunk);  // the first chunk on this thread
  for (std::thread& t : helpers) t.join();
  return done.load();
}

}  // namespace rdmad
