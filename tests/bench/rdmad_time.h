// What rdmad itself spends on its RPCs, read from its Prometheus endpoint (control_bench --metrics):
// rdmad_rpc_duration_seconds' _sum and _count per method, scraped before and after a group of calls. Their
// difference over the group is the mean time from the call's admission in rdmad to the answer handed to gRPC
// (server/rpc/call.h, Ending); what a client sees beyond it is gRPC, the transport and the threads the answer
// crosses. Also rdmad_rpc_thread_handoffs' _sum and _count: the mean thread hand-offs per call over the group
// (server/dispatch/handoffs.h), and the grant keys' hand-offs (rdmad_grant_key_handoffs_total). Prints
// nothing; judges nothing.
// Threads: one (the caller's).
#ifndef RDMAD_TESTS_BENCH_RDMAD_TIME_H_
#define RDMAD_TESTS_BENCH_RDMAD_TIME_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace rdmad::bench {

struct MethodTime {
  double seconds = 0;        // rdmad_rpc_duration_seconds_sum
  double calls = 0;          // rdmad_rpc_duration_seconds_count
  double handoffs = 0;       // rdmad_rpc_thread_handoffs_sum
  double handoff_calls = 0;  // rdmad_rpc_thread_handoffs_count
};
using MethodTimes = std::map<std::string, MethodTime>;  // by method

// GET http://host:port/metrics: the exposition text.
absl::StatusOr<std::string> ScrapeMetrics(const std::string& host_port);
// GET http://host:port/metrics and parse the histogram's _sum and _count lines.
absl::StatusOr<MethodTimes> ScrapeRpcTimes(const std::string& host_port);

// rdmad_grant_key_handoffs_total by its `handoffs` label ("0", "1", "2", "3+"): keys of SCOPE_QP grants
// sent after that many thread hand-offs from their connect request (or ACTIVATE).
std::map<std::string, double> ParseKeyHandoffs(const std::string& text);

// Parses the exposition text (exposed for the unit test).
MethodTimes ParseRpcTimes(const std::string& text);

// Mean seconds per call of `method` between two scrapes; -1 if no call of it finished in between.
double MeanBetween(const MethodTimes& before, const MethodTimes& after, const std::string& method);
// Mean thread hand-offs per call of `method` between two scrapes; -1 if no call of it finished in between.
double MeanHandoffsBetween(const MethodTimes& before, const MethodTimes& after, const std::string& method);

}  // namespace rdmad::bench

#endif  // RDMAD_TESTS_BENCH_RDMAD_TIME_H_
