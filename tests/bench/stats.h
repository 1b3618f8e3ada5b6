// Latency summaries for the benchmarks: p50, p99 and mean of a sample in microseconds.
// Threads: stateless.
#ifndef RDMAD_TESTS_BENCH_STATS_H_
#define RDMAD_TESTS_BENCH_STATS_H_

#include <algorithm>
#include <cstddef>
#include <vector>

namespace rdmad::bench {

struct Stats {
  double p50 = 0, p99 = 0, mean = 0;
  size_t n = 0;
};

inline Stats Summarize(std::vector<double> us) {
  Stats s;
  if (us.empty()) return s;
  std::sort(us.begin(), us.end());
  s.n = us.size();
  s.p50 = us[us.size() / 2];
  s.p99 = us[std::min(us.size() - 1, us.size() * 99 / 100)];
  double sum = 0;
  for (double v : us) sum += v;
  s.mean = sum / us.size();
  return s;
}

}  // namespace rdmad::bench

#endif  // RDMAD_TESTS_BENCH_STATS_H_
