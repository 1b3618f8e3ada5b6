// reject_flood: run in guest B of the two-guest step (run-two-host.sh). Floods rdmad A's data-plane listener
// with connect requests carrying garbage private data (no valid token), then checks, as A's operator would:
//   1. every attempt was rejected (none established, none lost to a timeout);
//   2. rdmad A still answers a gRPC call (ListDevices over the test wire);
//   3. once the summary interval has passed, A's audit trail holds far fewer reject records than attempts:
//      the first reject of (B's address, reason) per interval one by one, the rest in "data-plane reject
//      summary" records whose counts add up to at least the attempts not recorded one by one; and A's log
//      the same (one line per first reject, one per summary).
// Usage: reject_flood --address A --port 7471 --grpc A:50051 --self B --audit FILE --log FILE
//                     [--count 300] [--interval-s 10]
// Prints what it saw; exits 0 if all holds, 1 with the reasons on stderr ("FAIL: ...") otherwise.
// Threads: one (the flood, the call and the reading of A's files run in turn).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "rdmad/v1/rdmad.grpc.pb.h"
#include "tests/fuzz/dp_peer.h"

namespace {

std::vector<std::string> ReadLines(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// "10.0.3.2:41752" -> "10.0.3.2" (the data-plane peers here are IPv4).
std::string HostOf(const std::string& peer) {
  const size_t colon = peer.rfind(':');
  return colon == std::string::npos ? peer : peer.substr(0, colon);
}

struct Args {
  std::string address, grpc, self, audit, log;
  int port = 7471;
  int count = 300;
  int interval_s = 10;
};

bool Parse(int argc, char** argv, Args* a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--address") a->address = v;
    else if (k == "--port") a->port = std::atoi(v.c_str());
    else if (k == "--grpc") a->grpc = v;
    else if (k == "--self") a->self = v;
    else if (k == "--audit") a->audit = v;
    else if (k == "--log") a->log = v;
    else if (k == "--count") a->count = std::atoi(v.c_str());
    else if (k == "--interval-s") a->interval_s = std::atoi(v.c_str());
    else return false;
  }
  return !a->address.empty() && !a->grpc.empty() && !a->self.empty() && !a->audit.empty() && !a->log.empty() &&
         a->count > 0 && a->interval_s > 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!Parse(argc, argv, &args)) {
    std::fprintf(stderr,
                 "usage: reject_flood --address A --port P --grpc A:50051 --self B --audit FILE --log FILE "
                 "[--count N] [--interval-s S]\n");
    return 2;
  }
  std::vector<std::string> problems;
  // What A had written before the flood: only what comes after counts.
  const size_t audit_before = ReadLines(args.audit).size();
  const size_t log_before = ReadLines(args.log).size();

  // 1. The flood: garbage private data of 1..56 bytes (never a token rdmad issued; 56 is what a connect
  // request carries on RoCE, rdma_connect(3)).
  std::mt19937 rng(20);
  std::map<std::string, int> outcomes;  // "REJECTED", "ESTABLISHED", "error: ..."
  for (int i = 0; i < args.count; ++i) {
    std::string garbage(1 + rng() % 56, '\0');
    for (char& c : garbage) c = static_cast<char>(rng());
    rdmad::fuzz::DpPeer peer;
    rdmad::fuzz::DpPeer::Result r = peer.Dial(args.address, args.port, garbage, 0, 5000);
    switch (r.outcome) {
      case rdmad::fuzz::DpPeer::Outcome::kRejected: ++outcomes["REJECTED"]; break;
      case rdmad::fuzz::DpPeer::Outcome::kEstablished: ++outcomes["ESTABLISHED"]; break;
      case rdmad::fuzz::DpPeer::Outcome::kError: ++outcomes[absl::StrCat("error: ", r.event, " ", r.error)]; break;
    }
  }
  for (const auto& [what, n] : outcomes) std::printf("reject_flood: %d x %s\n", n, what.c_str());
  if (outcomes["REJECTED"] != args.count) {
    problems.push_back(absl::StrCat(args.count - outcomes["REJECTED"], " of ", args.count,
                                    " garbage connect requests were not rejected"));
  }

  // 2. rdmad A still serves.
  auto channel = grpc::CreateChannel(args.grpc, grpc::InsecureChannelCredentials());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  rdmad::v1::ListDevicesResponse devices;
  grpc::Status s = rdmad::v1::Devices::NewStub(channel)->ListDevices(&ctx, rdmad::v1::ListDevicesRequest(), &devices);
  if (!s.ok()) {
    problems.push_back(absl::StrCat("rdmad A did not answer ListDevices after the flood: ", s.error_code(), " ",
                                    s.error_message()));
  } else {
    std::printf("reject_flood: rdmad A answers ListDevices after the flood (%d device(s))\n", devices.devices_size());
  }

  // 3. Past the interval (plus the flush thread's margin), the summaries are written.
  sleep(static_cast<unsigned>(args.interval_s + 3));
  std::vector<std::string> audit = ReadLines(args.audit);
  uint64_t one_by_one = 0, summaries = 0, summarized = 0;
  for (size_t i = audit_before; i < audit.size(); ++i) {
    nlohmann::json j = nlohmann::json::parse(audit[i], nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) continue;
    const std::string method = j.value("method", ""), peer = j.value("peer", ""), detail = j.value("detail", "");
    if (HostOf(peer) != args.self && peer != args.self) continue;
    if (method == "data-plane reject") ++one_by_one;
    if (method == "data-plane reject summary") {
      // "<REASON>: <N> more reject(s) from <peer> after the first, ..."
      ++summaries;
      const size_t colon = detail.find(": ");
      const size_t more = detail.find(" more reject(s)");
      uint64_t n = 0;
      if (colon != std::string::npos && more != std::string::npos && more > colon &&
          absl::SimpleAtoi(detail.substr(colon + 2, more - colon - 2), &n)) {
        summarized += n;
      } else {
        problems.push_back("a summary record without its count: " + audit[i]);
      }
    }
  }
  std::printf("reject_flood: A's audit trail: %llu reject record(s) one by one, %llu summary record(s) counting "
              "%llu more, for %d attempts\n",
              static_cast<unsigned long long>(one_by_one), static_cast<unsigned long long>(summaries),
              static_cast<unsigned long long>(summarized), args.count);
  // Earlier rejects from B in the same interval may be summarized here too: at least the flood's.
  if (one_by_one + summarized < static_cast<uint64_t>(args.count)) {
    problems.push_back(absl::StrCat("the audit trail accounts for ", one_by_one + summarized, " rejects of ",
                                    args.count, " attempts (", one_by_one, " one by one, ", summarized,
                                    " in summaries)"));
  }
  if (summaries == 0) problems.push_back("no data-plane reject summary record in the audit trail");
  // One record per (peer, reason) per interval: a flood of a few intervals makes a handful, not hundreds.
  if (one_by_one + summaries > static_cast<uint64_t>(args.count) / 10) {
    problems.push_back(absl::StrCat("the audit trail holds ", one_by_one, " reject records and ", summaries,
                                    " summaries for ", args.count, " attempts: not aggregated"));
  }

  std::vector<std::string> log = ReadLines(args.log);
  uint64_t log_rejects = 0, log_summaries = 0;
  for (size_t i = log_before; i < log.size(); ++i) {
    if (absl::StrContains(log[i], "data-plane connect from") && absl::StrContains(log[i], "rejected")) ++log_rejects;
    if (absl::StrContains(log[i], "data-plane rejects from")) ++log_summaries;
  }
  std::printf("reject_flood: A's log: %llu reject line(s), %llu summary line(s)\n",
              static_cast<unsigned long long>(log_rejects), static_cast<unsigned long long>(log_summaries));
  if (log_rejects + log_summaries > static_cast<uint64_t>(args.count) / 10) {
    problems.push_back(absl::StrCat("A's log holds ", log_rejects, " reject lines and ", log_summaries,
                                    " summary lines for ", args.count, " attempts: not aggregated"));
  }
  if (log_summaries == 0) problems.push_back("no summary line in A's log");

  for (const std::string& p : problems) std::fprintf(stderr, "reject_flood: FAIL: %s\n", p.c_str());
  return problems.empty() ? 0 : 1;
}
