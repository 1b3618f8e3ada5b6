// Reading a grant's memory in bulk, for applications and rdmactl: GrantReader opens a grant (one it issued
// through a Client, or someone else's token) and reads its range into a sink in chunks, or measures reads
// (latency percentiles, IOPS, MiB/s). The loops themselves are templates over the reader (RemoteRegion, or a
// fake in tests): a Reader has RemoteRegion's ReadOp, Read, Post and Poll. Offsets are from the start of the
// granted range.
//
// Thread-safety: a GrantReader, like its RemoteRegion, is used by one thread at a time; the functions are
// stateless.
#ifndef RDMAD_CLIENT_TRANSFER_H_
#define RDMAD_CLIENT_TRANSFER_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/client.h"
#include "client/remote_region.h"

namespace rdmad::client {

// ---- statistics

// The p-th percentile (0 < p <= 100) of `sorted` (ascending) by the nearest-rank method: the smallest sample
// with at least p% of the samples at or below it, i.e. sorted[ceil(p/100 * n) - 1]. 0 for no samples.
uint64_t Percentile(const std::vector<uint64_t>& sorted, double p);

struct BenchResult {
  uint64_t reads = 0;        // completed reads
  uint64_t bytes = 0;        // reads * size
  uint64_t size = 0;         // bytes per read
  uint64_t depth = 0;        // reads kept outstanding
  absl::Duration elapsed;    // first post to last completion
  double iops = 0;           // reads / elapsed
  double mib_per_s = 0;      // bytes / elapsed / 2^20
  double p50_us = 0, p99_us = 0, p999_us = 0;  // latency, post to completion seen, microseconds
};

// Latencies (nanoseconds, any order; sorted here) and totals -> the result. elapsed <= 0 gives 0 rates.
BenchResult Summarize(std::vector<uint64_t> latencies_ns, uint64_t size, uint64_t depth, absl::Duration elapsed);

// ---- loops

// The offset of the i-th read of `size` bytes cycling through [0, span): reads never cross the span's end
// (the last size - 1 bytes of a span that is not a multiple of size are never read). span >= size > 0.
inline uint64_t BenchOffset(uint64_t i, uint64_t size, uint64_t span) { return (i % (span / size)) * size; }

// Reads [offset, offset + length) of the granted range in chunks of at most `chunk` bytes (one read at a
// time, in order), handing each to `sink` (which may fail: the loop stops with its status). The error of a
// failed read says how many bytes were read before it.
template <typename Reader>
absl::Status ReadInChunks(Reader& reader, uint64_t offset, uint64_t length, uint64_t chunk,
                          const std::function<absl::Status(const char*, size_t)>& sink) {
  if (chunk == 0) return absl::InvalidArgumentError("chunk: must be greater than 0");
  std::vector<char> buffer(static_cast<size_t>(std::min(chunk, std::max<uint64_t>(length, 1))));
  for (uint64_t done = 0; done < length;) {
    const uint64_t n = std::min<uint64_t>(chunk, length - done);
    absl::Status s = reader.Read(offset + done, n, buffer.data());
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat(s.message(), " (after ", done, " of ", length, " bytes)"));
    }
    absl::Status written = sink(buffer.data(), static_cast<size_t>(n));
    if (!written.ok()) return written;
    done += n;
  }
  return absl::OkStatus();
}

struct BenchPlan {
  uint64_t offset = 0;   // of the range read, from the start of the granted range
  uint64_t span = 0;     // bytes of that range; >= size
  uint64_t size = 4096;  // bytes per read
  uint64_t depth = 16;   // reads kept outstanding
  absl::Duration duration = absl::Seconds(10);  // no new read is posted after this
};

// Keeps `depth` reads of `size` outstanding (Post, then Poll for at least one completion and post again)
// until `duration` has passed, then waits for the outstanding ones. `now` is the clock (absl::Now in rdmactl).
// The first failed read ends the bench with its status (after the outstanding reads completed or failed).
template <typename Reader>
absl::StatusOr<BenchResult> RunReadBench(Reader& reader, const BenchPlan& plan, const std::function<absl::Time()>& now) {
  using ReadOp = typename Reader::ReadOp;
  if (plan.size == 0 || plan.depth == 0 || plan.span < plan.size) {
    return absl::InvalidArgumentError("bench: size and depth must be > 0 and the range at least size bytes");
  }
  std::vector<char> buffers(static_cast<size_t>(plan.size * plan.depth));
  std::vector<ReadOp> ops(static_cast<size_t>(plan.depth));
  std::vector<absl::Time> posted(ops.size());
  std::vector<uint64_t> latencies;
  uint64_t next = 0;
  size_t outstanding = 0;
  absl::Status failed;
  const absl::Time start = now();
  const absl::Time stop = start + plan.duration;
  absl::Time last = start;

  auto post = [&](size_t slot) -> absl::Status {
    ReadOp& op = ops[slot];
    op = ReadOp();
    op.offset = plan.offset + BenchOffset(next++, plan.size, plan.span);
    op.length = plan.size;
    op.destination = buffers.data() + slot * plan.size;
    posted[slot] = now();
    absl::Status s = reader.Post(&op);
    if (s.ok()) outstanding++;
    return s;
  };
  for (size_t slot = 0; slot < ops.size() && failed.ok(); slot++) failed = post(slot);
  while (outstanding > 0) {
    absl::StatusOr<std::vector<ReadOp*>> done = reader.Poll(1);
    if (!done.ok()) {
      if (failed.ok()) failed = done.status();
      break;  // the reader is broken: nothing more will complete
    }
    const absl::Time t = now();
    for (ReadOp* op : *done) {
      outstanding--;
      last = t;
      const size_t slot = static_cast<size_t>(op - ops.data());
      if (!op->status.ok()) {
        if (failed.ok()) failed = op->status;
        continue;
      }
      latencies.push_back(static_cast<uint64_t>(absl::ToInt64Nanoseconds(t - posted[slot])));
      if (failed.ok() && t < stop) failed = post(slot);
    }
  }
  if (!failed.ok()) return failed;
  return Summarize(std::move(latencies), plan.size, plan.depth, last - start);
}

// ---- a grant opened for reading

// What reading [offset, offset + length) of `mr` needs granted: `length`, or with 0 the rest of the region
// (its length asked with GetMr). OUT_OF_RANGE when `offset` is at or beyond the region's end; GetMr's own
// error otherwise.
absl::StatusOr<uint64_t> RangeLength(Client& client, const std::string& mr, uint64_t offset, uint64_t length);

class GrantReader {
 public:
  // Opens `issued`, a grant `client` issued: Close revokes it. When opening fails the grant is revoked
  // before returning; `revoked` (if set) then says whether that worked ("" on success, else why not).
  static absl::StatusOr<std::unique_ptr<GrantReader>> OpenIssued(Client& client, const v1::IssuedGrant& issued,
                                                                 const RemoteRegion::Options& options,
                                                                 std::string* revoke_error = nullptr);
  // Opens someone else's grant by its token at host:port; nothing is issued or revoked.
  static absl::StatusOr<std::unique_ptr<GrantReader>> OpenToken(const std::string& host, uint16_t port,
                                                                const std::string& token,
                                                                const RemoteRegion::Options& options);
  ~GrantReader();

  // The range read, within the granted one: [offset, offset + length), length 0 for the rest of the grant.
  // INVALID_ARGUMENT when it does not fit. By default the whole grant.
  absl::Status SetRange(uint64_t offset, uint64_t length);

  // Reads the range in chunks of at most `chunk` bytes (one at a time, in order) into `sink`.
  absl::Status ReadTo(uint64_t chunk, const std::function<absl::Status(const char*, size_t)>& sink);
  // Keeps `depth` reads of `size` outstanding over the range for `duration` (RunReadBench).
  absl::StatusOr<BenchResult> Bench(uint64_t size, uint64_t depth, absl::Duration duration);

  // Revokes a grant this reader issued (while still connected: rdmad kills the key, then disconnects), then
  // disconnects. Returns the revocation's error, if any (the grant also ends when the connection closes).
  // Called by the destructor if not before.
  absl::Status Close();

  const std::string& grant() const { return grant_; }  // "grants/9"
  uint64_t granted() const;                              // bytes in the granted range
  uint64_t offset() const { return offset_; }
  uint64_t length() const { return length_; }
  bool issued() const { return client_ != nullptr; }

 private:
  GrantReader(std::unique_ptr<RemoteRegion> region, Client* client, std::string grant);
  std::unique_ptr<RemoteRegion> region_;
  Client* client_;  // set when this reader issued the grant (and revokes it)
  std::string grant_;
  uint64_t offset_ = 0, length_ = 0;
};

}  // namespace rdmad::client

#endif  // RDMAD_CLIENT_TRANSFER_H_
