#include "cli/data_plane.h"

#include <cmath>

#include "absl/strings/str_format.h"
#include "cli/output.h"

namespace rdmad::cli {

uint64_t Percentile(const std::vector<uint64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  // Nearest rank, ceil(p/100 * n) (at least 1), in integers: p in thousandths of a percent, so that 99.9% of
  // 1000 samples is rank 999 exactly.
  const unsigned __int128 milli = static_cast<uint64_t>(std::llround(std::min(std::max(p, 0.0), 100.0) * 1000));
  const unsigned __int128 n = sorted.size();
  const uint64_t rank = static_cast<uint64_t>((milli * n + 99999) / 100000);
  return sorted[rank == 0 ? 0 : std::min<size_t>(rank - 1, sorted.size() - 1)];
}

BenchResult Summarize(std::vector<uint64_t> latencies_ns, uint64_t size, uint64_t depth, absl::Duration elapsed) {
  std::sort(latencies_ns.begin(), latencies_ns.end());
  BenchResult r;
  r.reads = latencies_ns.size();
  r.size = size;
  r.depth = depth;
  r.bytes = r.reads * size;
  r.elapsed = elapsed;
  const double seconds = absl::ToDoubleSeconds(elapsed);
  if (seconds > 0) {
    r.iops = static_cast<double>(r.reads) / seconds;
    r.mib_per_s = static_cast<double>(r.bytes) / seconds / (1024.0 * 1024.0);
  }
  r.p50_us = static_cast<double>(Percentile(latencies_ns, 50)) / 1000.0;
  r.p99_us = static_cast<double>(Percentile(latencies_ns, 99)) / 1000.0;
  r.p999_us = static_cast<double>(Percentile(latencies_ns, 99.9)) / 1000.0;
  return r;
}

std::string BenchTable(const BenchResult& r) {
  Table t({"READS", "SIZE", "DEPTH", "SECONDS", "IOPS", "MIB/S", "P50-US", "P99-US", "P999-US"});
  t.AddRow({absl::StrCat(r.reads), FormatSize(r.size), absl::StrCat(r.depth),
            absl::StrFormat("%.2f", absl::ToDoubleSeconds(r.elapsed)), absl::StrFormat("%.0f", r.iops),
            absl::StrFormat("%.1f", r.mib_per_s), absl::StrFormat("%.1f", r.p50_us),
            absl::StrFormat("%.1f", r.p99_us), absl::StrFormat("%.1f", r.p999_us)});
  return t.Render();
}

std::string BenchJson(const BenchResult& r, const std::string& grant) {
  return absl::StrFormat(
      "{\n \"grant\": %s,\n \"reads\": %d,\n \"bytes\": %d,\n \"size\": %d,\n \"depth\": %d,\n \"seconds\": %.3f,\n"
      " \"iops\": %.1f,\n \"mib_per_s\": %.2f,\n \"latency_us\": {\n  \"p50\": %.2f,\n  \"p99\": %.2f,\n"
      "  \"p999\": %.2f\n }\n}\n",
      JsonQuote(grant), r.reads, r.bytes, r.size, r.depth, absl::ToDoubleSeconds(r.elapsed), r.iops, r.mib_per_s,
      r.p50_us, r.p99_us, r.p999_us);
}

}  // namespace rdmad::cli
