// cm_bench: rdma_cm through rdmad, beside a baseline measured in the same run (prints figures; judges
// nothing). Runs in the Soft-RoCE guest next to an rdmad with a data-plane listener and an `rping -s -P`
// (run-cm-bench.sh starts both).
//   1. connect -> ESTABLISHED, p50/p99, and connections per second, for one plain librdmacm client
//      (tests/conformance/cm_peer.cc) dialing rdmad's listener with a fresh token each time, against the
//      same client dialing rping's listener (the baseline: librdmacm's own accept path, no token, no
//      migration, no QP registration);
//   2. event delivery to a watcher: from the event's publication in rdmad (its time stamp) to its arrival
//      in a WatchEvents stream, p50/p99 over the events of part 1.
// Usage: cm_bench --target unix:... --addr 10.0.2.15 --rdmad-port 7471 --rping-port 7901 --connections N
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <grpcpp/grpcpp.h>

#include "tests/bench/stats.h"
#include "rdmad/v1/rdmad.grpc.pb.h"
#include "tests/conformance/cm_peer.h"

namespace {

using Clock = std::chrono::steady_clock;

using rdmad::bench::Stats;
using rdmad::bench::Summarize;

// Dials `port` n times; `data` gives each connection's private data. Returns per-connection latencies
// (us) and the wall time of the whole run (s); -1 latency entries are failures.
struct Run {
  std::vector<double> latency_us;
  double seconds = 0;
  int failures = 0;
};
template <typename Data>
Run Dial(const std::string& addr, int port, int n, Data data) {
  Run r;
  const auto start = Clock::now();
  for (int i = 0; i < n; ++i) {
    std::string pd = data();
    rdmad::testing::CmPeer peer;
    const auto t0 = Clock::now();
    rdmad::testing::CmPeer::Result res = peer.Dial(addr, port, pd);
    const auto t1 = Clock::now();
    if (res.outcome != rdmad::testing::CmPeer::Outcome::kEstablished) {
      r.failures++;
      std::fprintf(stderr, "dial %d to port %d: %s %s\n", i, port, res.event.c_str(), res.error.c_str());
      continue;
    }
    r.latency_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    peer.Disconnect(2000);
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cm_bench: rdma_cm through rdmad against a baseline in the same run"};
  std::string target = "unix:/run/rdmad/rdmad.sock", addr = "10.0.2.15";
  int rdmad_port = 7471, rping_port = 7901, connections = 20;
  app.add_option("--target", target);
  app.add_option("--addr", addr);
  app.add_option("--rdmad-port", rdmad_port);
  app.add_option("--rping-port", rping_port);
  app.add_option("--connections", connections)->check(CLI::PositiveNumber);
  std::string markdown, caption;
  app.add_option("--markdown", markdown, "also write the table to this file (docs/performance.md's fragment)");
  app.add_option("--caption", caption, "with --markdown: the fragment's first line (what ran, where)");
  CLI11_PARSE(app, argc, argv);

  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  auto pds = rdmad::v1::ProtectionDomains::NewStub(channel);
  auto ids = rdmad::v1::CmIds::NewStub(channel);
  auto tokens = rdmad::v1::ConnectTokens::NewStub(channel);
  rdmad::v1::CreatePdRequest pr;
  pr.set_device("rxe0");
  rdmad::v1::ProtectionDomain pd;
  {
    grpc::ClientContext ctx;
    if (grpc::Status s = pds->CreatePd(&ctx, pr, &pd); !s.ok()) {
      std::fprintf(stderr, "CreatePd: %s\n", s.error_message().c_str());
      return 1;
    }
  }

  // The watcher: every event's delivery delay, measured against the event's own time stamp.
  std::mutex mu;
  std::vector<double> delivery_us;
  grpc::ClientContext watch_ctx;
  auto reader = ids->WatchEvents(&watch_ctx, rdmad::v1::WatchEventsRequest());
  std::thread watcher([&] {
    rdmad::v1::CmEvent e;
    while (reader->Read(&e)) {
      const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
      std::lock_guard<std::mutex> lock(mu);
      delivery_us.push_back((now - e.time_unix_nanos()) / 1000.0);
    }
  });

  // Warm-up: one of each.
  Dial(addr, rping_port, 1, [] { return std::string(); });
  auto token = [&] {
    rdmad::v1::IssueConnectTokenRequest req;
    req.set_pd(pd.name());
    rdmad::v1::ConnectToken t;
    grpc::ClientContext ctx;
    grpc::Status s = tokens->IssueConnectToken(&ctx, req, &t);
    if (!s.ok()) std::fprintf(stderr, "IssueConnectToken: %s\n", s.error_message().c_str());
    return t.token();
  };
  Dial(addr, rdmad_port, 1, token);

  Run base = Dial(addr, rping_port, connections, [] { return std::string(); });
  Run ours = Dial(addr, rdmad_port, connections, token);
  watch_ctx.TryCancel();
  watcher.join();
  reader->Finish();

  Stats b = Summarize(base.latency_us), o = Summarize(ours.latency_us), d;
  {
    std::lock_guard<std::mutex> lock(mu);
    d = Summarize(delivery_us);
  }
  std::printf("\nrdma_cm connection setup, %d sequential connections each (client: plain librdmacm, same guest)\n",
              connections);
  std::printf("%-32s %10s %10s %10s %12s %8s\n", "listener", "p50 us", "p99 us", "mean us", "loop/s", "failed");
  std::printf("%-32s %10.0f %10.0f %10.0f %12.1f %8d\n", "rping -s -P (baseline)", b.p50, b.p99, b.mean,
              base.seconds > 0 ? base.latency_us.size() / base.seconds : 0.0, base.failures);
  std::printf("%-32s %10.0f %10.0f %10.0f %12.1f %8d\n", "rdmad data-plane listener", o.p50, o.p99, o.mean,
              ours.seconds > 0 ? ours.latency_us.size() / ours.seconds : 0.0, ours.failures);
  std::printf("(p50/p99/mean: connect -> ESTABLISHED. loop/s: whole dial loops per second, each also closing the\n"
              " connection and, for rdmad, issuing the token over gRPC first)\n");
  if (b.p50 > 0) {
    std::printf("ratio rdmad / rping: p50 %.2fx, p99 %.2fx (rdmad also checks the token, migrates the id to a worker\n"
                "channel and registers the QP; the token RPC itself is outside the timed span)\n",
                o.p50 / b.p50, b.p99 > 0 ? o.p99 / b.p99 : 0.0);
  }
  std::printf("\nevent delivery to a WatchEvents stream (rdmad's publication -> the client's read), %zu events:\n",
              d.n);
  std::printf("p50 %.0f us, p99 %.0f us, mean %.0f us\n", d.p50, d.p99, d.mean);
  if (!markdown.empty()) {
    std::FILE* md = std::fopen(markdown.c_str(), "w");
    if (md == nullptr) {
      std::fprintf(stderr, "cm_bench: cannot write %s\n", markdown.c_str());
      return 1;
    }
    if (!caption.empty()) std::fprintf(md, "%s\n\n", caption.c_str());
    std::fprintf(md, "| listener | connect -> ESTABLISHED p50 | p99 | mean | dial loops/s |\n");
    std::fprintf(md, "| --- | --- | --- | --- | --- |\n");
    std::fprintf(md, "| `rping -s -P` (baseline) | %.0f us | %.0f us | %.0f us | %.1f |\n", b.p50, b.p99, b.mean,
                 base.seconds > 0 ? base.latency_us.size() / base.seconds : 0.0);
    std::fprintf(md, "| rdmad data-plane listener | %.0f us | %.0f us | %.0f us | %.1f |\n", o.p50, o.p99, o.mean,
                 ours.seconds > 0 ? ours.latency_us.size() / ours.seconds : 0.0);
    if (b.p50 > 0 && b.p99 > 0 && b.mean > 0) {
      std::fprintf(md, "| ratio | %.2fx | %.2fx | %.2fx | |\n", o.p50 / b.p50, o.p99 / b.p99, o.mean / b.mean);
    }
    std::fprintf(md, "\nEvent delivery to a `WatchEvents` stream, %zu events: p50 %.0f us, p99 %.0f us, mean %.0f us.\n",
                 d.n, d.p50, d.p99, d.mean);
    std::fclose(md);
  }
  return base.failures + ours.failures > 0 ? 1 : 0;
}
