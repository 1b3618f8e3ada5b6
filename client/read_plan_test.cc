// read_plan.h: chunking and the in-flight window of a long read, against a fake queue.
#include "client/read_plan.h"

#include <gtest/gtest.h>

#include <deque>
#include <vector>

namespace rdmad::client::internal {
namespace {

TEST(MessageLimitTest, PortLimitLoweredByOptionAndCappedAt2Pow31) {
  EXPECT_EQ(MessageLimit(1 << 20, 0), 1u << 20);
  EXPECT_EQ(MessageLimit(1 << 20, 4096), 4096u);
  EXPECT_EQ(MessageLimit(4096, 1 << 20), 4096u);  // the option never raises the port's limit
  EXPECT_EQ(MessageLimit(uint64_t{1} << 32, 0), uint64_t{1} << 31);
  EXPECT_EQ(MessageLimit(0, 0), uint64_t{1} << 31);
  EXPECT_EQ(MessageLimit(0, 100), 100u);
}

std::vector<Chunk> All(ChunkPlan plan) {
  std::vector<Chunk> out;
  while (!plan.finished()) out.push_back(plan.Next());
  return out;
}

TEST(ChunkPlanTest, SplitsInOrderWithAShortLastChunk) {
  ChunkPlan plan(100, 10, 4);
  EXPECT_EQ(plan.count(), 3u);
  std::vector<Chunk> c = All(plan);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].offset, 100u);
  EXPECT_EQ(c[0].length, 4u);
  EXPECT_EQ(c[0].done, 0u);
  EXPECT_EQ(c[1].offset, 104u);
  EXPECT_EQ(c[1].done, 4u);
  EXPECT_EQ(c[2].offset, 108u);
  EXPECT_EQ(c[2].length, 2u);
  EXPECT_EQ(c[2].done, 8u);
}

TEST(ChunkPlanTest, ExactMultipleAndSingleChunk) {
  EXPECT_EQ(All(ChunkPlan(0, 8, 4)).size(), 2u);
  EXPECT_EQ(ChunkPlan(0, 8, 4).count(), 2u);
  std::vector<Chunk> one = All(ChunkPlan(7, 3, 1 << 20));
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].length, 3u);
  // 1 GiB at the rxe port's 2 GiB limit: one work request; at 1 MiB slots: 1024.
  EXPECT_EQ(ChunkPlan(0, uint64_t{1} << 30, uint64_t{1} << 31).count(), 1u);
  EXPECT_EQ(ChunkPlan(0, uint64_t{1} << 30, 1 << 20).count(), 1024u);
  EXPECT_TRUE(ChunkPlan(0, 0, 4).finished());
}

TEST(ChunkPlanTest, CoversEveryByteOnce) {
  for (uint64_t length : {1u, 5u, 4096u, 4097u, 65535u}) {
    for (uint64_t chunk : {1u, 3u, 4096u, 1u << 20}) {
      uint64_t next = 0;
      for (const Chunk& c : All(ChunkPlan(9, length, chunk))) {
        EXPECT_EQ(c.done, next);
        EXPECT_EQ(c.offset, 9 + next);
        EXPECT_GE(c.length, 1u);
        EXPECT_LE(c.length, chunk);
        next += c.length;
      }
      EXPECT_EQ(next, length) << length << "/" << chunk;
    }
  }
}

// A queue that completes posted chunks in order, `per_progress` at a time, and fails the ones listed.
struct FakeQueue {
  std::deque<Chunk> in_flight;
  std::vector<Chunk> posted;
  size_t max_in_flight = 0;
  size_t per_progress = 1;
  std::vector<uint64_t> fail_completion;  // chunk.done values whose completion fails
  std::vector<uint64_t> fail_post;        // chunk.done values whose post fails
  size_t no_room_left = 0;                // this many posts first answer "no room"
  bool flushed = false;                   // after a failed completion, the rest fail too (the QP's error state)

  absl::StatusOr<bool> Post(const Chunk& c) {
    if (no_room_left > 0) {
      --no_room_left;
      return false;
    }
    for (uint64_t d : fail_post) {
      if (d == c.done) return absl::ResourceExhaustedError("post failed");
    }
    in_flight.push_back(c);
    posted.push_back(c);
    max_in_flight = std::max(max_in_flight, in_flight.size());
    return true;
  }
  std::vector<absl::Status> Progress() {
    std::vector<absl::Status> out;
    for (size_t i = 0; i < per_progress && !in_flight.empty(); ++i) {
      Chunk c = in_flight.front();
      in_flight.pop_front();
      bool fail = flushed;
      for (uint64_t d : fail_completion) fail = fail || d == c.done;
      if (fail && !flushed) {
        flushed = true;
        out.push_back(absl::PermissionDeniedError("first"));
      } else if (fail) {
        out.push_back(absl::UnavailableError("flushed"));
      } else {
        out.push_back(absl::OkStatus());
      }
    }
    return out;
  }
  absl::Status Run(ChunkPlan plan, size_t depth) {
    return RunChunks(
        plan, depth, [&](const Chunk& c) { return Post(c); }, [&] { return Progress(); });
  }
};

TEST(RunChunksTest, KeepsTheQueueFullAndPostsEveryChunkOnce) {
  FakeQueue q;
  ASSERT_TRUE(q.Run(ChunkPlan(0, 100, 3), 16).ok());
  EXPECT_EQ(q.posted.size(), 34u);
  EXPECT_EQ(q.max_in_flight, 16u);
  EXPECT_TRUE(q.in_flight.empty());
  for (size_t i = 0; i < q.posted.size(); ++i) EXPECT_EQ(q.posted[i].done, i * 3);
}

TEST(RunChunksTest, DepthOneIsOneAtATime) {
  FakeQueue q;
  ASSERT_TRUE(q.Run(ChunkPlan(0, 10, 1), 1).ok());
  EXPECT_EQ(q.posted.size(), 10u);
  EXPECT_EQ(q.max_in_flight, 1u);
}

TEST(RunChunksTest, FailedCompletionStopsPostingReturnsFirstErrorNothingOutstanding) {
  FakeQueue q;
  q.fail_completion = {6};  // the third chunk of 3
  absl::Status s = q.Run(ChunkPlan(0, 300, 3), 4);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), "first");
  EXPECT_TRUE(q.in_flight.empty());
  EXPECT_LE(q.posted.size(), 7u);  // nothing posted after the failure was seen
}

TEST(RunChunksTest, FailedPostWaitsForTheOutstandingOnes) {
  FakeQueue q;
  q.fail_post = {9};
  absl::Status s = q.Run(ChunkPlan(0, 300, 3), 8);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(q.in_flight.empty());
  EXPECT_EQ(q.posted.size(), 3u);  // chunks 0, 3, 6; nothing after the failed post
}

TEST(RunChunksTest, FailedFirstPostReturnsAtOnce) {
  FakeQueue q;
  q.fail_post = {0};
  EXPECT_EQ(q.Run(ChunkPlan(0, 30, 3), 8).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(q.posted.empty());
}

TEST(RunChunksTest, NoRoomIsRetriedAfterProgress) {
  FakeQueue q;
  q.no_room_left = 5;
  ASSERT_TRUE(q.Run(ChunkPlan(0, 12, 4), 2).ok());
  EXPECT_EQ(q.posted.size(), 3u);
  EXPECT_EQ(q.posted[0].done, 0u);  // the chunk refused for lack of room is posted, not skipped
  EXPECT_EQ(q.posted[2].done, 8u);
}

TEST(RunChunksTest, ManyCompletionsPerProgress) {
  FakeQueue q;
  q.per_progress = 5;
  ASSERT_TRUE(q.Run(ChunkPlan(0, 1000, 7), 3).ok());
  EXPECT_EQ(q.posted.size(), 143u);
  EXPECT_LE(q.max_in_flight, 3u);
}

}  // namespace
}  // namespace rdmad::client::internal
