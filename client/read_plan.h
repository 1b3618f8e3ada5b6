// How RemoteRegion splits one read into work requests and keeps them in flight (remote_region.h): pure code,
// tested on a host without RDMA (read_plan_test.cc).
//
// A read of [offset, offset + length) of a grant becomes chunks of at most `chunk` bytes, in order; each
// chunk is one RDMA read work request. RunChunks keeps up to `depth` chunks outstanding, stops posting at
// the first failure, and returns only when none of its chunks is outstanding any more, with the first error
// (OK if every chunk succeeded).
//
// Threads: stateless; a ChunkPlan is a plain value.
#ifndef RDMAD_CLIENT_READ_PLAN_H_
#define RDMAD_CLIENT_READ_PLAN_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace rdmad::client::internal {

// The largest message one work request may carry: the port's max_msg_sz, lowered to `limit` when `limit` is
// not 0, and never more than 2^31 (an sge's length is 32 bits; InfiniBand messages are at most 2^31 bytes).
// A port that reports 0 is taken at 2^31.
uint64_t MessageLimit(uint64_t port_max_msg_sz, uint64_t limit);

// One work request's share of a read.
struct Chunk {
  uint64_t offset = 0;  // in the granted range
  uint64_t length = 0;  // 1..chunk
  uint64_t done = 0;    // bytes of the read before this chunk: where it goes in the destination
};

// The chunks of a read of [offset, offset + length), each at most `chunk` bytes (> 0), in order.
class ChunkPlan {
 public:
  ChunkPlan(uint64_t offset, uint64_t length, uint64_t chunk)
      : offset_(offset), length_(length), chunk_(std::max<uint64_t>(chunk, 1)) {}
  bool finished() const { return done_ >= length_; }
  // The next chunk; only while !finished().
  Chunk Next() {
    Chunk c;
    c.offset = offset_ + done_;
    c.length = std::min(chunk_, length_ - done_);
    c.done = done_;
    done_ += c.length;
    return c;
  }
  // How many chunks the whole read has.
  uint64_t count() const { return length_ / chunk_ + (length_ % chunk_ != 0 ? 1 : 0); }

 private:
  uint64_t offset_, length_, chunk_;
  uint64_t done_ = 0;
};

// Drives one read through its chunks with up to `depth` (> 0) outstanding.
//   post(const Chunk&) -> absl::StatusOr<bool>: true when the chunk was posted (it is then outstanding until
//     `progress` reports it), false when there is no room for it now (tried again after a `progress`), an
//     error when it could not be posted (the read then fails with it, unless an earlier error came first).
//   progress() -> std::vector<absl::Status>: the statuses of this read's chunks that finished since the last
//     call (possibly none; it need not wait).
// After the first error nothing more is posted; RunChunks returns once nothing is outstanding, with the first
// error seen, in the order posts failed and completions were reported.
template <typename Post, typename Progress>
absl::Status RunChunks(ChunkPlan plan, size_t depth, Post&& post, Progress&& progress) {
  absl::Status first;
  size_t outstanding = 0;
  bool have = false;  // `pending` holds a chunk not posted yet
  Chunk pending;
  while (true) {
    while (first.ok() && outstanding < depth && (have || !plan.finished())) {
      if (!have) {
        pending = plan.Next();
        have = true;
      }
      absl::StatusOr<bool> posted = post(pending);
      if (!posted.ok()) {
        first = posted.status();
        break;
      }
      if (!*posted) break;  // no room now
      have = false;
      ++outstanding;
    }
    if (outstanding == 0 && (!first.ok() || (!have && plan.finished()))) return first;
    for (const absl::Status& s : progress()) {
      if (outstanding > 0) --outstanding;
      if (!s.ok() && first.ok()) first = s;
    }
  }
}

}  // namespace rdmad::client::internal

#endif  // RDMAD_CLIENT_READ_PLAN_H_
