// scale_bench's concurrent clients: K threads, each with its own Client (its own gRPC connection to rdmad),
// run the same operation in a loop for a fixed time; the throughput is all their completed operations over
// the wall time between the start signal and the last thread's end.
//   - no-op: ListPds (rdmad holds one PD, this section's);
//   - RegisterMr 4 KiB + DeregisterMr: one pair counted as one operation, on the section's PD.
// Threads: the calling thread starts and joins K workers; each worker uses its own Client only.
#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/bench/scale_bench.h"

namespace rdmad::bench::scale {
namespace {

namespace v1 = rdmad::v1;
using client::Client;

// One round: `k` clients running `op` for `seconds`; returns the operations completed and the wall time.
template <typename Op>
ClientRow Round(const Options& o, const std::string& name, int k, Op op) {
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < k; ++i) {
    clients.push_back(NewClient(o.target));
    absl::Status s = op(*clients.back());  // connects, and warms the connection up
    if (!s.ok()) Die(name + " (warm-up): " + s.ToString());
  }
  std::atomic<bool> go{false}, stop{false};
  std::atomic<uint64_t> done{0};
  std::mutex mu;
  std::string failure;  // guarded by mu
  std::vector<std::thread> threads;
  for (int i = 0; i < k; ++i) {
    threads.emplace_back([&, i] {
      while (!go) std::this_thread::yield();
      uint64_t n = 0;
      while (!stop) {
        absl::Status s = op(*clients[i]);
        if (!s.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          failure = s.ToString();
          break;
        }
        ++n;
      }
      done += n;
    });
  }
  const auto start = Clock::now();
  go = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(o.client_seconds));
  stop = true;
  for (auto& t : threads) t.join();
  const double seconds = UsSince(start) / 1e6;
  if (!failure.empty()) Die(name + ": " + failure);
  return ClientRow{name, k, done.load(), seconds};
}

}  // namespace

void MeasureClients(const Options& o, Report* report) {
  if (o.clients.empty()) return;
  std::unique_ptr<Client> setup = NewClient(o.target);
  v1::CreatePdRequest p;
  p.set_device(o.device);
  p.set_label("scale-clients");
  absl::StatusOr<v1::ProtectionDomain> pd = setup->CreatePd(p);
  if (!pd.ok()) Die("CreatePd: " + pd.status().ToString());
  v1::RegisterMrRequest req;
  req.set_pd(pd->name());
  req.mutable_source()->mutable_anonymous()->set_size(4096);
  req.add_access(v1::LOCAL_WRITE);
  req.add_access(v1::REMOTE_READ);
  for (int k : o.clients) {
    report->clients.push_back(Round(o, "ListPds (no-op)", k, [](Client& c) { return c.ListPds().status(); }));
    report->clients.push_back(Round(o, "RegisterMr 4 KiB + DeregisterMr", k, [&req](Client& c) {
      absl::StatusOr<v1::MemoryRegion> m = c.RegisterMr(req);
      if (!m.ok()) return m.status();
      return c.DeregisterMr(m->name());
    }));
    Progress(std::to_string(k) + " clients done");
  }
  (void)setup->DeletePd(pd->name(), /*cascade=*/true);
}

}  // namespace rdmad::bench::scale
