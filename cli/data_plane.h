// rdmactl's data-plane loops (`read`, `bench read`) and the bench's statistics, apart from the device:
// the loops are templates over the reader (client::RemoteRegion in rdmactl; a fake in the tests), the
// statistics and their output pure functions. No I/O of their own, no client calls.
//
// A Reader has what RemoteRegion has: a nested ReadOp {offset, length, destination, status}, `absl::Status
// Read(offset, length, destination)`, `absl::Status Post(ReadOp*)` and `absl::StatusOr<std::vector<ReadOp*>>
// Poll(size_t min)`. Offsets are from the start of the granted range.
//
// Thread-safety: stateless functions; a loop uses its reader from the calling thread only.
#ifndef RDMAD_CLI_DATA_PLANE_H_
#define RDMAD_CLI_DATA_PLANE_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace rdmad::cli {

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

// `bench read` output. Table: one header line and one row: READS SIZE DEPTH SECONDS IOPS MIB/S P50-US P99-US
// P999-US. JSON: one object with `grant` (may be empty), `reads`, `bytes`, `size`, `depth`, `seconds`,
// `iops`, `mib_per_s` and `latency_us` {`p50`, `p99`, `p999`}. Both end in a newline.
std::string BenchTable(const BenchResult& result);
std::string BenchJson(const BenchResult& result, const std::string& grant);

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

}  // namespace rdmad::cli

#endif  // RDMAD_CLI_DATA_PLANE_H_
