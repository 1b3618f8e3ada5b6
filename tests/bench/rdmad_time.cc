// See rdmad_time.h.
#include "tests/bench/rdmad_time.h"


#include <httplib.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace rdmad::bench {
namespace {

constexpr absl::string_view kSum = "rdmad_rpc_duration_seconds_sum{";
constexpr absl::string_view kCount = "rdmad_rpc_duration_seconds_count{";
constexpr absl::string_view kHandoffSum = "rdmad_rpc_thread_handoffs_sum{";
constexpr absl::string_view kHandoffCount = "rdmad_rpc_thread_handoffs_count{";

// `{method="X"} 1.5` after the metric's name: X and the value.
bool MethodAndValue(absl::string_view rest, std::string* method, double* value) {
  const size_t open = rest.find("method=\"");
  if (open == absl::string_view::npos) return false;
  const size_t from = open + 8, to = rest.find('"', from);
  const size_t close = rest.find("} ", to == absl::string_view::npos ? 0 : to);
  if (to == absl::string_view::npos || close == absl::string_view::npos) return false;
  *method = std::string(rest.substr(from, to - from));
  return absl::SimpleAtod(rest.substr(close + 2), value);
}

}  // namespace

MethodTimes ParseRpcTimes(const std::string& text) {
  MethodTimes out;
  const struct {
    absl::string_view prefix;
    double MethodTime::*field;
  } kinds[] = {{kSum, &MethodTime::seconds},
               {kCount, &MethodTime::calls},
               {kHandoffSum, &MethodTime::handoffs},
               {kHandoffCount, &MethodTime::handoff_calls}};
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    for (const auto& k : kinds) {
      if (!absl::StartsWith(line, k.prefix)) continue;
      std::string method;
      double value = 0;
      if (MethodAndValue(line.substr(k.prefix.size() - 1), &method, &value)) out[method].*k.field = value;
      break;
    }
  }
  return out;
}

std::map<std::string, double> ParseKeyHandoffs(const std::string& text) {
  constexpr absl::string_view kKeys = "rdmad_grant_key_handoffs_total{handoffs=\"";
  std::map<std::string, double> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::StartsWith(line, kKeys)) continue;
    line.remove_prefix(kKeys.size());
    const size_t quote = line.find('"'), close = line.find("} ");
    double value = 0;
    if (quote == absl::string_view::npos || close == absl::string_view::npos ||
        !absl::SimpleAtod(line.substr(close + 2), &value)) {
      continue;
    }
    out[std::string(line.substr(0, quote))] = value;
  }
  return out;
}

absl::StatusOr<MethodTimes> ScrapeRpcTimes(const std::string& host_port) {
  absl::StatusOr<std::string> text = ScrapeMetrics(host_port);
  if (!text.ok()) return text.status();
  return ParseRpcTimes(*text);
}

absl::StatusOr<std::string> ScrapeMetrics(const std::string& host_port) {
  const size_t colon = host_port.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(host_port.substr(colon + 1), &port)) {
    return absl::InvalidArgumentError(absl::StrCat("--metrics: not host:port: ", host_port));
  }
  httplib::Client http(host_port.substr(0, colon), port);
  httplib::Result r = http.Get("/metrics");
  if (!r) return absl::UnavailableError(absl::StrCat("GET http://", host_port, "/metrics: ", httplib::to_string(r.error())));
  if (r->status != 200) return absl::UnavailableError(absl::StrCat("GET /metrics: HTTP ", r->status));
  return r->body;
}

namespace {

// (after - before) of `sum` over (after - before) of `count`, for `method`; -1 without a call in between.
double Mean(const MethodTimes& before, const MethodTimes& after, const std::string& method, double MethodTime::*sum,
            double MethodTime::*count) {
  auto a = after.find(method);
  if (a == after.end()) return -1;
  MethodTime b;
  if (auto it = before.find(method); it != before.end()) b = it->second;
  const double calls = a->second.*count - b.*count;
  return calls > 0 ? (a->second.*sum - b.*sum) / calls : -1;
}

}  // namespace

double MeanBetween(const MethodTimes& before, const MethodTimes& after, const std::string& method) {
  return Mean(before, after, method, &MethodTime::seconds, &MethodTime::calls);
}

double MeanHandoffsBetween(const MethodTimes& before, const MethodTimes& after, const std::string& method) {
  return Mean(before, after, method, &MethodTime::handoffs, &MethodTime::handoff_calls);
}

}  // namespace rdmad::bench
