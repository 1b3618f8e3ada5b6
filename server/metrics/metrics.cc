#include "server/metrics/metrics.h"

#include <charconv>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace rdmad::metrics {
namespace {

std::string EscapeLabel(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string EscapeHelp(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

Labels Zip(const std::vector<std::string>& names, const std::vector<std::string>& values) {
  Labels out;
  for (size_t i = 0; i < names.size() && i < values.size(); ++i) out.emplace_back(names[i], values[i]);
  return out;
}

}  // namespace

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::general);
  if (ec != std::errc()) return absl::StrCat(v);
  return std::string(buf, end);
}

std::string RenderText(const std::vector<Family>& families) {
  std::string out;
  for (const Family& f : families) {
    absl::StrAppend(&out, "# HELP ", f.name, " ", EscapeHelp(f.help), "\n");
    absl::StrAppend(&out, "# TYPE ", f.name, " ", f.type, "\n");
    for (const Sample& s : f.samples) {
      absl::StrAppend(&out, f.name, s.suffix);
      if (!s.labels.empty()) {
        out += '{';
        for (size_t i = 0; i < s.labels.size(); ++i) {
          absl::StrAppend(&out, i ? "," : "", s.labels[i].first, "=\"", EscapeLabel(s.labels[i].second), "\"");
        }
        out += '}';
      }
      absl::StrAppend(&out, " ", FormatValue(s.value), "\n");
    }
  }
  return out;
}

Counter::Counter(std::string name, std::string help, std::vector<std::string> label_names)
    : name_(std::move(name)), help_(std::move(help)), label_names_(std::move(label_names)) {}

void Counter::Add(const std::vector<std::string>& values, double delta) {
  MutexLock lock(&mu_);
  values_[values] += delta;
}

Family Counter::Snapshot() const {
  Family f{name_, help_, "counter", {}};
  MutexLock lock(&mu_);
  for (const auto& [values, v] : values_) f.samples.push_back({"", Zip(label_names_, values), v});
  return f;
}

Histogram::Histogram(std::string name, std::string help, std::vector<std::string> label_names,
                     std::vector<double> bounds)
    : name_(std::move(name)),
      help_(std::move(help)),
      label_names_(std::move(label_names)),
      bounds_(std::move(bounds)) {}

void Histogram::Observe(const std::vector<std::string>& values, double v) {
  size_t bucket = 0;
  while (bucket < bounds_.size() && v > bounds_[bucket]) ++bucket;
  MutexLock lock(&mu_);
  Cell& c = cells_[values];
  if (c.counts.empty()) c.counts.assign(bounds_.size() + 1, 0);
  c.counts[bucket]++;
  c.sum += v;
  c.count++;
}

Family Histogram::Snapshot() const {
  std::map<std::vector<std::string>, Cell> cells;
  {
    MutexLock lock(&mu_);
    cells = cells_;
  }
  Family f{name_, help_, "histogram", {}};
  for (const auto& [values, c] : cells) {
    const Labels labels = Zip(label_names_, values);
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= bounds_.size(); ++i) {
      cumulative += c.counts[i];
      Labels with_le = labels;
      with_le.emplace_back("le", i < bounds_.size() ? FormatValue(bounds_[i]) : "+Inf");
      f.samples.push_back({"_bucket", std::move(with_le), static_cast<double>(cumulative)});
    }
    f.samples.push_back({"_sum", labels, c.sum});
    f.samples.push_back({"_count", labels, static_cast<double>(c.count)});
  }
  return f;
}

Counter* MetricRegistry::AddCounter(std::string name, std::string help, std::vector<std::string> label_names) {
  counters_.push_back(std::make_unique<Counter>(std::move(name), std::move(help), std::move(label_names)));
  Counter* c = counters_.back().get();
  owned_.push_back([c] { return c->Snapshot(); });
  return c;
}

Histogram* MetricRegistry::AddHistogram(std::string name, std::string help, std::vector<std::string> label_names,
                                  std::vector<double> bounds) {
  histograms_.push_back(std::make_unique<Histogram>(std::move(name), std::move(help), std::move(label_names),
                                                    std::move(bounds)));
  Histogram* h = histograms_.back().get();
  owned_.push_back([h] { return h->Snapshot(); });
  return h;
}

void MetricRegistry::AddCollector(Collector collector) { collectors_.push_back(std::move(collector)); }

std::vector<Family> MetricRegistry::Collect() const {
  std::vector<Family> out;
  for (const auto& snapshot : owned_) out.push_back(snapshot());
  for (const auto& collect : collectors_) collect(&out);
  return out;
}

}  // namespace rdmad::metrics
