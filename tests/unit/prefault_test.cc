// Prefault (server/memory/prefault.h): every page of a large anonymous region is resident afterwards
// (mincore), and small regions or a single thread are left alone.
#include "server/memory/prefault.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

namespace rdmad {
namespace {

class Region {
 public:
  explicit Region(uint64_t length) : length_(length) {
    data_ = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  }
  ~Region() {
    if (data_ != MAP_FAILED) munmap(data_, length_);
  }
  void* data() const { return data_; }
  // Pages of the region in memory.
  uint64_t Resident() const {
    const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> in((length_ + page - 1) / page);
    if (mincore(data_, length_, in.data()) != 0) return 0;
    uint64_t n = 0;
    for (unsigned char c : in) n += c & 1;
    return n;
  }

 private:
  uint64_t length_;
  void* data_;
};

const uint64_t kPage = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));

TEST(Prefault, FaultsInEveryPageOfALargeRegionFromSeveralThreads) {
  const uint64_t length = kPrefaultMinBytes + 3 * kPage;  // not a multiple of the chunk: the tail too
  Region r(length);
  ASSERT_NE(r.data(), MAP_FAILED);
  EXPECT_EQ(r.Resident(), 0u);
  const uint64_t done = Prefault(r.data(), length, kPage, 3);
  if (done == 0) GTEST_SKIP() << "this kernel has no MADV_POPULATE_WRITE (Linux 5.14+)";
  EXPECT_EQ(done, length);
  EXPECT_EQ(r.Resident(), length / kPage);
}

TEST(Prefault, LeavesSmallRegionsAndASingleThreadToIbvRegMr) {
  Region small(kPrefaultMinBytes - kPage);
  ASSERT_NE(small.data(), MAP_FAILED);
  EXPECT_EQ(Prefault(small.data(), kPrefaultMinBytes - kPage, kPage, 4), 0u);
  EXPECT_EQ(small.Resident(), 0u);
  Region large(kPrefaultMinBytes);
  ASSERT_NE(large.data(), MAP_FAILED);
  EXPECT_EQ(Prefault(large.data(), kPrefaultMinBytes, kPage, 1), 0u);
  EXPECT_EQ(large.Resident(), 0u);
}

TEST(Prefault, ThreadsFollowTheCpusUpToFour) {
  EXPECT_GE(PrefaultThreads(), 1);
  EXPECT_LE(PrefaultThreads(), 4);
}

}  // namespace
}  // namespace rdmad
