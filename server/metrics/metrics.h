// rdmad's metrics core: counters and histograms with labels, families computed at scrape time, and the
// Prometheus text exposition format (version 0.0.4) they are rendered in. No HTTP here (http.h), and nothing
// of rdmad's own metrics (rdmad_metrics.h): this file only knows how to count and how to print.
//
// Threads: Counter::Add and Histogram::Observe from any thread (each family has its own mutex, a leaf
// lock held for a map lookup and an addition); MetricRegistry::Render from the scraping thread: it copies each
// family under its lock, runs the collectors with no lock of this file held, then formats.
#ifndef RDMAD_SERVER_METRICS_METRICS_H_
#define RDMAD_SERVER_METRICS_METRICS_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "server/common/sync.h"

namespace rdmad::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;  // (name, value), in the family's order

// One line of a family: `name` + suffix ("_bucket", "_sum", "_count" or empty), labels, value.
struct Sample {
  std::string suffix;
  Labels labels;
  double value = 0;
};

// What a family is at one scrape.
struct Family {
  std::string name;
  std::string help;
  std::string type;  // "counter", "gauge", "histogram"
  std::vector<Sample> samples;
};

// The text exposition format: # HELP and # TYPE, then the samples, families in the given order. Label
// values are escaped (\\, \", \n), values printed as the shortest decimal that reads back the same,
// infinities as +Inf / -Inf.
std::string RenderText(const std::vector<Family>& families);
// A value as the format writes it ("3", "0.25", "+Inf").
std::string FormatValue(double v);

// A counter family: one monotonic value per combination of label values.
class Counter {
 public:
  Counter(std::string name, std::string help, std::vector<std::string> label_names);
  // `values` in the order of the label names (their count must match).
  void Add(const std::vector<std::string>& values, double delta = 1);
  Family Snapshot() const;

 private:
  const std::string name_, help_;
  const std::vector<std::string> label_names_;
  mutable Mutex mu_;
  std::map<std::vector<std::string>, double> values_ ABSL_GUARDED_BY(mu_);
};

// A histogram family: cumulative buckets (upper bounds, ascending; +Inf is implicit), sum and count.
class Histogram {
 public:
  Histogram(std::string name, std::string help, std::vector<std::string> label_names, std::vector<double> bounds);
  void Observe(const std::vector<std::string>& values, double v);
  Family Snapshot() const;

 private:
  struct Cell {
    std::vector<uint64_t> counts;  // per bucket, not cumulative; one more for +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  const std::string name_, help_;
  const std::vector<std::string> label_names_;
  const std::vector<double> bounds_;
  mutable Mutex mu_;
  std::map<std::vector<std::string>, Cell> cells_ ABSL_GUARDED_BY(mu_);
};

// The families of one process: counters and histograms it owns, and collectors that compute families at
// scrape time (gauges read from the registry, the NIC, ...). Add everything before the first Render.
class MetricRegistry {
 public:
  using Collector = std::function<void(std::vector<Family>* out)>;

  Counter* AddCounter(std::string name, std::string help, std::vector<std::string> label_names);
  Histogram* AddHistogram(std::string name, std::string help, std::vector<std::string> label_names,
                          std::vector<double> bounds);
  void AddCollector(Collector collector);

  // Every family, owned ones first (in the order added), then the collectors' (in theirs).
  std::vector<Family> Collect() const;
  std::string Render() const { return RenderText(Collect()); }

 private:
  std::vector<std::unique_ptr<Counter>> counters_;
  std::vector<std::unique_ptr<Histogram>> histograms_;
  std::vector<std::function<Family()>> owned_;  // snapshots of the two above, in the order added
  std::vector<Collector> collectors_;
};

}  // namespace rdmad::metrics

#endif  // RDMAD_SERVER_METRICS_METRICS_H_
