// client/transfer.h: the bench's statistics (nearest-rank percentiles, rates) and the read and bench loops
// against a fake reader and clock. GrantReader itself needs an RDMA device (the conformance suite reads
// through it with rdmactl read and bench read).
#include "client/transfer.h"

#include <cstring>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace rdmad::client {
namespace {

using ::testing::ElementsAre;

// ---- statistics

TEST(PercentileTest, NearestRank) {
  std::vector<uint64_t> v;
  for (uint64_t i = 1; i <= 1000; i++) v.push_back(i);
  EXPECT_EQ(Percentile(v, 50), 500u);
  EXPECT_EQ(Percentile(v, 99), 990u);
  EXPECT_EQ(Percentile(v, 99.9), 999u);
  EXPECT_EQ(Percentile(v, 100), 1000u);
  EXPECT_EQ(Percentile(v, 0.01), 1u);
  EXPECT_EQ(Percentile({}, 50), 0u);
  EXPECT_EQ(Percentile({7}, 50), 7u);
  EXPECT_EQ(Percentile({7}, 99.9), 7u);
  // Few samples: p99 and p999 are the largest.
  EXPECT_EQ(Percentile({1, 2, 3, 4}, 50), 2u);
  EXPECT_EQ(Percentile({1, 2, 3, 4}, 51), 3u);
  EXPECT_EQ(Percentile({1, 2, 3, 4}, 99), 4u);
}

TEST(SummarizeTest, RatesAndMicroseconds) {
  std::vector<uint64_t> ns;
  for (uint64_t i = 1000; i >= 1; i--) ns.push_back(i * 1000);  // 1..1000 us, unsorted
  BenchResult r = Summarize(ns, 4096, 16, absl::Seconds(2));
  EXPECT_EQ(r.reads, 1000u);
  EXPECT_EQ(r.bytes, 4096000u);
  EXPECT_DOUBLE_EQ(r.iops, 500);
  EXPECT_DOUBLE_EQ(r.mib_per_s, 4096000.0 / 2 / 1048576);
  EXPECT_DOUBLE_EQ(r.p50_us, 500);
  EXPECT_DOUBLE_EQ(r.p99_us, 990);
  EXPECT_DOUBLE_EQ(r.p999_us, 999);
  BenchResult none = Summarize({}, 4096, 1, absl::ZeroDuration());
  EXPECT_EQ(none.reads, 0u);
  EXPECT_EQ(none.iops, 0);
  EXPECT_EQ(none.p50_us, 0);
}

// ---- loops, against a fake reader

// Completes reads in post order, up to `batch` per Poll, advancing the clock 10 us per Poll; fills each
// destination with the low byte of its offset. Read number `fail_at` (1-based, 0: none) fails.
class FakeReader {
 public:
  struct ReadOp {
    uint64_t offset = 0;
    uint64_t length = 0;
    void* destination = nullptr;
    absl::Status status;
  };

  absl::Status Read(uint64_t offset, uint64_t length, void* destination) {
    reads.push_back({offset, length});
    if (++count == fail_at) return absl::PermissionDeniedError("grants/9 was revoked");
    std::memset(destination, static_cast<int>(offset & 0xff), length);
    return absl::OkStatus();
  }
  absl::Status Post(ReadOp* op) {
    if (pending.size() >= depth) return absl::ResourceExhaustedError("queue full");
    reads.push_back({op->offset, op->length});
    pending.push_back(op);
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<ReadOp*>> Poll(size_t min) {
    now += absl::Microseconds(10);
    std::vector<ReadOp*> done;
    while (!pending.empty() && done.size() < batch) {
      ReadOp* op = pending.front();
      pending.pop_front();
      op->status = ++count == fail_at ? absl::PermissionDeniedError("grants/9 was revoked") : absl::OkStatus();
      done.push_back(op);
    }
    return done;
  }

  size_t depth = 4, batch = 4;
  uint64_t fail_at = 0, count = 0;
  absl::Time now = absl::UnixEpoch();
  std::vector<std::pair<uint64_t, uint64_t>> reads;  // offset, length
  std::deque<ReadOp*> pending;
};

TEST(ReadInChunksTest, ChunksInOrderToTheSink) {
  FakeReader r;
  std::string got;
  absl::Status s = ReadInChunks(r, 100, 2500, 1024, [&](const char* data, size_t n) {
    got.append(data, n);
    return absl::OkStatus();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(r.reads, ElementsAre(std::make_pair(100u, 1024u), std::make_pair(1124u, 1024u),
                                   std::make_pair(2148u, 452u)));
  ASSERT_EQ(got.size(), 2500u);
  EXPECT_EQ(got[0], static_cast<char>(100));
  EXPECT_EQ(got[1024], static_cast<char>(1124 & 0xff));
  EXPECT_EQ(got[2499], static_cast<char>(2148 & 0xff));
}

TEST(ReadInChunksTest, ErrorsSayHowFarItGot) {
  FakeReader r;
  r.fail_at = 2;
  size_t sunk = 0;
  absl::Status s = ReadInChunks(r, 0, 3000, 1024, [&](const char*, size_t n) {
    sunk += n;
    return absl::OkStatus();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), "grants/9 was revoked (after 1024 of 3000 bytes)");
  EXPECT_EQ(sunk, 1024u);
  // A failing sink stops the loop with its own status.
  FakeReader r2;
  s = ReadInChunks(r2, 0, 3000, 1024, [](const char*, size_t) { return absl::DataLossError("disk full"); });
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(r2.reads.size(), 1u);
  // Nothing to read: no read at all.
  FakeReader r3;
  EXPECT_TRUE(ReadInChunks(r3, 0, 0, 1024, [](const char*, size_t) { return absl::OkStatus(); }).ok());
  EXPECT_TRUE(r3.reads.empty());
}

TEST(RunReadBenchTest, KeepsDepthOutstandingForTheDuration) {
  FakeReader r;
  BenchPlan plan;
  plan.offset = 8;
  plan.span = 3 * 4096 + 100;
  plan.size = 4096;
  plan.depth = 4;
  plan.duration = absl::Microseconds(100);
  absl::StatusOr<BenchResult> res = RunReadBench(r, plan, [&] { return r.now; });
  ASSERT_TRUE(res.ok()) << res.status();
  // Polls at 10, 20, ..., 100 us each complete 4; reposted until 100 us.
  EXPECT_EQ(res->reads, 40u);
  EXPECT_EQ(r.reads.size(), 40u);
  EXPECT_EQ(res->elapsed, absl::Microseconds(100));
  EXPECT_DOUBLE_EQ(res->iops, 400000);
  EXPECT_DOUBLE_EQ(res->p50_us, 10);
  EXPECT_DOUBLE_EQ(res->p999_us, 10);
  // Offsets cycle through the whole reads that fit in the span, from plan.offset.
  EXPECT_EQ(r.reads[0], std::make_pair(uint64_t{8}, uint64_t{4096}));
  EXPECT_EQ(r.reads[1].first, 8u + 4096);
  EXPECT_EQ(r.reads[2].first, 8u + 8192);
  EXPECT_EQ(r.reads[3].first, 8u);
  EXPECT_TRUE(r.pending.empty());
}

TEST(RunReadBenchTest, LatencyIsPostToCompletion) {
  FakeReader r;
  r.batch = 1;  // one completion per 10 us poll: the i-th read of the first four waits 10 * i us
  BenchPlan plan;
  plan.span = 4096;
  plan.depth = 4;
  plan.duration = absl::ZeroDuration();  // the first reads only
  absl::StatusOr<BenchResult> res = RunReadBench(r, plan, [&] { return r.now; });
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_EQ(res->reads, 4u);
  EXPECT_DOUBLE_EQ(res->p50_us, 20);
  EXPECT_DOUBLE_EQ(res->p99_us, 40);
}

TEST(RunReadBenchTest, AFailedReadEndsItAfterTheOutstandingOnes) {
  FakeReader r;
  r.fail_at = 6;
  BenchPlan plan;
  plan.span = 1 << 20;
  plan.depth = 4;
  plan.duration = absl::Seconds(10);
  absl::StatusOr<BenchResult> res = RunReadBench(r, plan, [&] { return r.now; });
  EXPECT_EQ(res.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(r.pending.empty());  // drained, not abandoned
  // 4, then 4 reposted by the first poll, then 1 for read 5 (done before read 6 failed); none after that.
  EXPECT_EQ(r.reads.size(), 9u);
}

TEST(RunReadBenchTest, RefusesABadPlan) {
  FakeReader r;
  BenchPlan plan;
  plan.span = 100;  // smaller than one read
  EXPECT_EQ(RunReadBench(r, plan, [&] { return r.now; }).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(r.reads.empty());
}

}  // namespace
}  // namespace rdmad::client
