// control_bench: each control-plane RPC of rdmad beside the verbs call it wraps and beside a no-op RPC
// (GetDevice), all measured in this one process, interleaved sample by sample (no-op RPC, direct verbs, RPC)
// so that a change in the machine's load touches all three alike. Prints a table; judges nothing.
//   - verbs: DirectVerbs (direct_verbs.h), libibverbs on the same device in this process: mmap + ibv_reg_mr,
//     ibv_dereg_mr + munmap, binds and invalidations with their completions busy-polled;
//   - RPC: the same operation through rdmad's gRPC API over its unix socket (client/client.h);
//   - no-op: ListPds (one PD) on the same channel, the RPC's own floor. GetDevice would be the obvious one, but rdmad
//     reads the device's hardware counters from sysfs on each GetDevice (milliseconds in the guest), so the
//     run first prints both side by side and takes ListPds unless --noop GetDevice;
//   - ratio: the median of (RPC - the no-op RPC sampled just before it), over the verbs call's median: what
//     rdmad adds beyond a no-op call per unit of verbs work (the goal: at most 1.2). Paired per sample,
//     because the no-op's own spread under load is larger than many verbs calls.
// IssueGrant -> first byte read is in first_byte.cc (its baseline: a plain librdmacm connection).
// Usage: control_bench --target unix:/path [--device rxe0] [--sizes 4096,1048576,...] [--iters N]
//                      [--big-iters N] [--mw-iters N] [--first-byte-iters N] [--baseline-addr 10.0.2.15]
//                      [--noop ListPds|GetDevice] [--pause-us 2000] [--markdown FILE [--caption LINE]]
//                      [--data-prefix PREFIX] [--metrics HOST:PORT]
// Threads: one (the main thread); DirectVerbs and Client are used from it only.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/client.h"
#include "tests/bench/direct_verbs.h"
#include "absl/strings/str_cat.h"
#include "tests/bench/first_byte.h"
#include "tests/bench/rdmad_time.h"
#include "tests/bench/stats.h"

namespace {

using Clock = std::chrono::steady_clock;
using rdmad::bench::DirectVerbs;
using rdmad::bench::Stats;
using rdmad::bench::Summarize;
using rdmad::client::Client;
namespace v1 = rdmad::v1;

double UsSince(Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count(); }

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "control_bench: %s\n", what.c_str());
  std::exit(1);
}
template <typename T>
T Must(absl::StatusOr<T> r, const std::string& what) {
  if (!r.ok()) Die(what + ": " + r.status().ToString());
  return *std::move(r);
}
double Must(double us, const std::string& error) {
  if (us < 0) Die(error);
  return us;
}

std::string SizeName(uint64_t n) {
  if (n >= (1 << 20) && n % (1 << 20) == 0) return std::to_string(n >> 20) + " MiB";
  if (n >= 1024 && n % 1024 == 0) return std::to_string(n >> 10) + " KiB";
  return std::to_string(n) + " B";
}

// One line of the table: the three samples of one operation.
struct Row {
  explicit Row(std::string name = "") : op(std::move(name)) {}
  std::string op;
  std::vector<double> verbs, rpc, noop;
};

class Bench {
 public:
  Bench(Client* rdmad, DirectVerbs* direct, std::string device)
      : rdmad_(rdmad), direct_(direct), device_(std::move(device)) {}

  // The no-op RPC, its time appended to `row`.
  // Each timed call starts after a short pause, so that the previous call's trailing work (rdmad's threads
  // finishing after the reply, the kernel's) does not land in it: without it, a direct bind measured right
  // after an RPC took up to twice as long as one measured after another direct call.
  void Settle() const {
    if (pause_.count() > 0) std::this_thread::sleep_for(pause_);
  }
  void SetPause(std::chrono::microseconds pause) { pause_ = pause; }

  double Noop() {
    Settle();
    return get_device_noop_ ? GetDevice() : ListPds();
  }
  void Noop(Row& row) { row.noop.push_back(Noop()); }
  void UseGetDeviceAsNoop() { get_device_noop_ = true; }

  double GetDevice() {
    const auto t = Clock::now();
    Must(rdmad_->GetDevice(device_), "GetDevice");
    return UsSince(t);
  }
  double ListPds() {
    const auto t = Clock::now();
    Must(rdmad_->ListPds(), "ListPds");
    return UsSince(t);
  }

  // GetDevice is not free: rdmad reads the device's hardware counters from sysfs on every call. Beside
  // ListPds (one PD listed), `iters` pairs: the median of GetDevice - ListPds tells what that adds.
  void CompareNoops(int iters) {
    std::vector<double> get, list, diff;
    for (int i = 0; i < iters; ++i) {
      list.push_back(ListPds());
      get.push_back(GetDevice());
      diff.push_back(get.back() - list.back());
    }
    std::printf("no-op candidates, %d pairs: GetDevice p50 %.0f us (p99 %.0f), ListPds p50 %.0f us (p99 %.0f), "
                "median of GetDevice - ListPds %.0f us\n",
                iters, Summarize(get).p50, Summarize(get).p99, Summarize(list).p50, Summarize(list).p99,
                Summarize(diff).p50);
  }

  // RegisterMr / DeregisterMr of anonymous memory of `size` bytes, `iters` times each (one warm-up pair first).
  void Registration(uint64_t size, int iters, const std::string& pd, std::vector<Row>* rows) {
    Row reg("RegisterMr " + SizeName(size)), dereg("DeregisterMr " + SizeName(size));
    v1::RegisterMrRequest req;
    req.set_pd(pd);
    req.mutable_source()->mutable_anonymous()->set_size(size);
    req.add_access(v1::LOCAL_WRITE);
    req.add_access(v1::REMOTE_READ);
    req.add_access(v1::MW_BIND);
    const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND;
    std::string error;
    for (int i = -1; i < iters; ++i) {
      Row& r = i < 0 ? warm_ : reg;
      Row& d = i < 0 ? warm_ : dereg;
      Noop(r);
      ibv_mr* mr = nullptr;
      Settle();
      r.verbs.push_back(Must(direct_->RegMr(size, access, &mr, &error), error));
      Settle();
      auto t = Clock::now();
      v1::MemoryRegion m = Must(rdmad_->RegisterMr(req), "RegisterMr");
      r.rpc.push_back(UsSince(t));
      Noop(d);
      Settle();
      d.verbs.push_back(Must(direct_->DeregMr(mr, &error), error));
      Settle();
      t = Clock::now();
      if (absl::Status s = rdmad_->DeregisterMr(m.name()); !s.ok()) Die("DeregisterMr: " + s.ToString());
      d.rpc.push_back(UsSince(t));
    }
    rows->push_back(std::move(reg));
    rows->push_back(std::move(dereg));
  }

  // BindMw and InvalidateMw of type 1 (rdmad's bind QP of the PD; directly: QP a of the loopback pair) and of
  // type 2 (rdmad: a QP of the PD connected to DirectVerbs' peer QP c; directly: QP a), a `window`-byte window on a
  // 64 KiB region, `iters` times each. Also the direct bind preceded by the ibv_reg_mr of the window's range
  // that rdmad makes on every bind (its "bounds region", the rxe workaround), for comparison.
  void Windows(int iters, const std::string& pd, uint64_t window, std::vector<Row>* rows) {
    const uint64_t region = 64 * 1024;
    v1::RegisterMrRequest mreq;
    mreq.set_pd(pd);
    mreq.mutable_source()->mutable_anonymous()->set_size(region);
    mreq.add_access(v1::LOCAL_WRITE);
    mreq.add_access(v1::REMOTE_READ);
    mreq.add_access(v1::MW_BIND);
    v1::MemoryRegion m = Must(rdmad_->RegisterMr(mreq), "RegisterMr");
    v1::AllocMwRequest a1, a2;
    a1.set_pd(pd);
    a1.set_type(v1::TYPE_1);
    a2.set_pd(pd);
    a2.set_type(v1::TYPE_2);
    v1::MemoryWindow w1 = Must(rdmad_->AllocMw(a1), "AllocMw type 1");
    v1::MemoryWindow w2 = Must(rdmad_->AllocMw(a2), "AllocMw type 2");
    std::string error;
    v1::CreateQpRequest cq;
    cq.set_pd(pd);
    v1::QueuePair qp = Must(rdmad_->CreateQp(cq), "CreateQp");
    v1::ConnectQpRequest cn;
    cn.set_name(qp.name());
    cn.mutable_remote()->set_qpn(direct_->PeerQpn());
    cn.mutable_remote()->set_gid(direct_->PeerGid());  // psn 0: what ConnectPeer starts with
    Must(rdmad_->ConnectQp(cn), "ConnectQp");
    if (std::string e = direct_->ConnectPeer(qp.local().qpn(), qp.local().psn(), qp.local().gid()); !e.empty()) {
      Die("peer QP: " + e);
    }

    ibv_mr* mr = nullptr;
    Must(direct_->RegMr(region, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND, &mr, &error),
         error);
    ibv_mw* d1 = direct_->AllocMw(IBV_MW_TYPE_1, &error);
    ibv_mw* d2 = d1 ? direct_->AllocMw(IBV_MW_TYPE_2, &error) : nullptr;
    if (!d2) Die(error);
    const uint64_t addr = reinterpret_cast<uint64_t>(mr->addr);

    Row b1("BindMw type 1"), b1b("&nbsp;&nbsp;beside bounds ibv_reg_mr + bind"), i1("InvalidateMw type 1"),
        b2("BindMw type 2"), b2b("&nbsp;&nbsp;beside bounds ibv_reg_mr + bind"), i2("InvalidateMw type 2");
    auto rpc_bind = [&](const v1::MemoryWindow& w, const std::string& on_qp, Row& row) {
      v1::BindMwRequest b;
      b.set_name(w.name());
      b.set_mr(m.name());
      b.set_length(window);
      b.add_access(v1::REMOTE_READ);
      b.set_qp(on_qp);
      Settle();
      const auto t = Clock::now();
      Must(rdmad_->BindMw(b), "BindMw " + w.name());
      row.rpc.push_back(UsSince(t));
    };
    auto rpc_invalidate = [&](const v1::MemoryWindow& w, Row& row) {
      Settle();
      const auto t = Clock::now();
      Must(rdmad_->InvalidateMw(w.name()), "InvalidateMw " + w.name());
      row.rpc.push_back(UsSince(t));
    };
    // The direct bind with the bounds region rdmad registers first (deregistered, untimed, after its unbind).
    auto bounded_bind = [&](ibv_mw* mw, Row& row) {
      Settle();
      const auto t = Clock::now();
      ibv_mr* bounds = ibv_reg_mr(direct_->pd(), mr->addr, window, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
      if (bounds == nullptr) Die("ibv_reg_mr (bounds)");
      Must(direct_->Bind(mw, bounds, addr, window, &error), error);
      row.verbs.push_back(UsSince(t));
      Must(direct_->Invalidate(mw, bounds, &error), error);
      ibv_dereg_mr(bounds);
    };
    for (int i = -1; i < iters; ++i) {
      const bool warm = i < 0;
      Row& rb1 = warm ? warm_ : b1;
      Row& ri1 = warm ? warm_ : i1;
      Row& rb2 = warm ? warm_ : b2;
      Row& ri2 = warm ? warm_ : i2;
      Noop(rb1);
      Settle();
      rb1.verbs.push_back(Must(direct_->Bind(d1, mr, addr, window, &error), error));
      rpc_bind(w1, "", rb1);
      Noop(ri1);
      Settle();
      ri1.verbs.push_back(Must(direct_->Invalidate(d1, mr, &error), error));
      rpc_invalidate(w1, ri1);
      Noop(rb2);
      Settle();
      rb2.verbs.push_back(Must(direct_->Bind(d2, mr, addr, window, &error), error));
      rpc_bind(w2, qp.name(), rb2);
      Noop(ri2);
      Settle();
      ri2.verbs.push_back(Must(direct_->Invalidate(d2, mr, &error), error));
      rpc_invalidate(w2, ri2);
      if (!warm) {
        bounded_bind(d1, b1b);
        bounded_bind(d2, b2b);
      }
    }
    // The bounds rows share their RPC and no-op samples with the plain bind rows.
    b1b.rpc = b1.rpc;
    b1b.noop = b1.noop;
    b2b.rpc = b2.rpc;
    b2b.noop = b2.noop;
    for (Row* r : {&b1, &b1b, &i1, &b2, &b2b, &i2}) rows->push_back(std::move(*r));
    ibv_dealloc_mw(d2);
    ibv_dealloc_mw(d1);
    Must(direct_->DeregMr(mr, &error), error);
    (void)rdmad_->DeallocMw(w1.name());
    (void)rdmad_->DeallocMw(w2.name());
    (void)rdmad_->DeleteQp(qp.name());
    (void)rdmad_->DeregisterMr(m.name());
  }

 private:
  Client* rdmad_;
  DirectVerbs* direct_;
  std::string device_;
  Row warm_;  // warm-up samples, dropped
  bool get_device_noop_ = false;
  std::chrono::microseconds pause_{2000};
};

// The median over samples of (RPC - the no-op RPC just before it): what rdmad adds beyond a no-op call,
// paired sample by sample so that a change of load between samples cancels out.
double MedianExtra(const std::vector<double>& rpc, const std::vector<double>& noop) {
  std::vector<double> extra;
  for (size_t i = 0; i < rpc.size() && i < noop.size(); ++i) extra.push_back(rpc[i] - noop[i]);
  return Summarize(extra).p50;
}

void Print(const std::vector<Row>& rows, std::FILE* out) {
  std::fprintf(out, "\n| operation | n | verbs p50 | verbs p99 | RPC p50 | RPC p99 | no-op p50 | no-op p99 | "
                    "RPC - no-op, p50 | (RPC - no-op) / verbs (goal <= 1.2) |\n");
  std::fprintf(out, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (const Row& r : rows) {
    const Stats v = Summarize(r.verbs), c = Summarize(r.rpc), n = Summarize(r.noop);
    const double extra = MedianExtra(r.rpc, r.noop);
    std::fprintf(out, "| %s | %zu | %.0f us | %.0f us | %.0f us | %.0f us | %.0f us | %.0f us | %.0f us | %.2fx |\n",
                 r.op.c_str(), v.n, v.p50, v.p99, c.p50, c.p99, n.p50, n.p99, extra, v.p50 > 0 ? extra / v.p50 : 0);
  }
  std::fflush(out);
}

// For the plot of cost against size: per RegisterMr size, the verbs call's, the RPC's and the no-op's p50.
void WriteSizeData(const std::vector<Row>& rows, const std::vector<uint64_t>& sizes, const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) Die("cannot write " + path);
  std::fprintf(f, "# size_bytes RegisterMr: verbs_p50_us rpc_p50_us noop_p50_us rpc_minus_noop_p50_us\n");
  for (uint64_t size : sizes) {
    for (const Row& r : rows) {
      if (r.op != "RegisterMr " + SizeName(size)) continue;
      std::fprintf(f, "%llu %.1f %.1f %.1f %.1f\n", static_cast<unsigned long long>(size), Summarize(r.verbs).p50,
                   Summarize(r.rpc).p50, Summarize(r.noop).p50, MedianExtra(r.rpc, r.noop));
    }
  }
  std::fclose(f);
}

// One group of rows (a registration size, or the window operations) with rdmad's RPC times around it.
struct Group {
  size_t first = 0, end = 0;  // rows [first, end)
  rdmad::bench::MethodTimes before, after;
};

// Where an RPC's time goes: rdmad's own time per call (admission -> answer handed to gRPC, from its
// /metrics) beside what the client saw (means over each group, both window types together since /metrics
// has one series per method), for each operation and for the no-op.
void PrintSplit(const std::vector<Row>& rows, const std::vector<Group>& groups, std::FILE* out) {
  std::fprintf(out, "\nWhere the time goes (means per call; rdmad's own: from its `rdmad_rpc_duration_seconds`, "
                    "admission to the answer handed to gRPC; outside: gRPC, the transport and the threads the answer "
                    "crosses):\n\n");
  std::fprintf(out, "| operation | RPC mean | of which in rdmad | outside rdmad | no-op mean | no-op in rdmad | "
                    "RPC - no-op: in rdmad | RPC - no-op: outside | thread hand-offs, mean |\n");
  std::fprintf(out, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (const Group& g : groups) {
    std::map<std::string, std::pair<std::string, std::vector<double>>> by_method;  // method -> (label, samples)
    std::vector<double> noop;
    std::vector<std::string> order;
    for (size_t i = g.first; i < g.end; ++i) {
      const Row& r = rows[i];
      if (absl::StartsWith(r.op, "&nbsp;")) continue;  // shares its samples with the row above
      const std::string method = r.op.substr(0, r.op.find(' '));
      auto [it, added] = by_method.try_emplace(method, r.op, std::vector<double>());
      if (added) order.push_back(method);
      else it->second.first = method + " (types 1 and 2)";
      it->second.second.insert(it->second.second.end(), r.rpc.begin(), r.rpc.end());
      noop.insert(noop.end(), r.noop.begin(), r.noop.end());
    }
    const double noop_client = Summarize(noop).mean;
    const double noop_rdmad = rdmad::bench::MeanBetween(g.before, g.after, "ListPds") * 1e6;
    for (const std::string& method : order) {
      const auto& [label, samples] = by_method[method];
      const double client = Summarize(samples).mean;
      const double rdmad = rdmad::bench::MeanBetween(g.before, g.after, method) * 1e6;
      const double handoffs = rdmad::bench::MeanHandoffsBetween(g.before, g.after, method);
      const std::string hops = handoffs < 0 ? "n/a" : absl::StrFormat("%.2f", handoffs);
      if (rdmad < 0 || noop_rdmad < 0) {
        std::fprintf(out, "| %s | %.0f us | n/a | n/a | %.0f us | n/a | n/a | n/a | %s |\n", label.c_str(), client,
                     noop_client, hops.c_str());
        continue;
      }
      std::fprintf(out, "| %s | %.0f us | %.0f us | %.0f us | %.0f us | %.0f us | %.0f us | %.0f us | %s |\n",
                   label.c_str(), client, rdmad, client - rdmad, noop_client, noop_rdmad, rdmad - noop_rdmad,
                   (client - rdmad) - (noop_client - noop_rdmad), hops.c_str());
    }
  }
  std::fflush(out);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"control_bench: rdmad's control-plane RPCs beside their verbs calls and a no-op RPC"};
  std::string target = rdmad::client::kDefaultTarget, device = "rxe0", sizes_text = "4096,1048576,16777216";
  std::string baseline_addr;
  int iters = 20, big_iters = 5, mw_iters = 20, first_byte_iters = 0;
  uint64_t window = 4096;
  app.add_option("--target", target, "rdmad address");
  app.add_option("--device", device, "RDMA device, for rdmad and for the direct calls");
  app.add_option("--sizes", sizes_text, "RegisterMr sizes in bytes, comma-separated");
  app.add_option("--iters", iters, "samples per operation below 16 MiB")->check(CLI::PositiveNumber);
  app.add_option("--big-iters", big_iters, "samples per operation at 16 MiB and above")->check(CLI::PositiveNumber);
  app.add_option("--mw-iters", mw_iters, "samples per window operation")->check(CLI::PositiveNumber);
  app.add_option("--window", window, "window length in bytes (on a 64 KiB region)");
  app.add_option("--first-byte-iters", first_byte_iters, "IssueGrant -> first byte samples (0: skip)");
  std::string noop = "ListPds";
  app.add_option("--noop", noop,
                 "the no-op RPC: ListPds (default) or GetDevice (which also reads the hardware counters)")
      ->check(CLI::IsMember({"GetDevice", "ListPds"}));
  int pause_us = 2000;
  app.add_option("--pause-us", pause_us, "pause before each timed call (0: none)")->check(CLI::NonNegativeNumber);
  app.add_option("--baseline-addr", baseline_addr, "this machine's RDMA address for the plain librdmacm baseline");
  std::string markdown, data_prefix, caption, metrics;
  app.add_option("--metrics", metrics,
                 "rdmad's metrics_listen (host:port): also split each RPC's time into rdmad's own and the rest");
  app.add_option("--markdown", markdown, "also write the tables to this file (docs/performance.md's fragment)");
  app.add_option("--caption", caption, "with --markdown: the fragment's first line (what ran, where)");
  app.add_option("--data-prefix", data_prefix, "also write PREFIX-size.dat (RegisterMr p50s by size, for gnuplot)");
  CLI11_PARSE(app, argc, argv);
  std::vector<uint64_t> sizes;
  for (absl::string_view s : absl::StrSplit(sizes_text, ',', absl::SkipEmpty())) {
    uint64_t v = 0;
    if (!absl::SimpleAtoi(s, &v) || v == 0) Die("--sizes: not a size: " + std::string(s));
    sizes.push_back(v);
  }

  std::string error;
  std::unique_ptr<DirectVerbs> direct = DirectVerbs::Open(device, &error);
  if (!direct) Die(error);
  Client::Options options;
  options.target = target;
  options.timeout = std::chrono::milliseconds(120000);
  Client rdmad(options);
  v1::CreatePdRequest pdreq;
  pdreq.set_device(device);
  pdreq.set_label("control-bench");
  v1::ProtectionDomain pd = Must(rdmad.CreatePd(pdreq), "CreatePd");

  Bench bench(&rdmad, direct.get(), device);
  bench.SetPause(std::chrono::microseconds(pause_us));
  bench.CompareNoops(std::max(iters, 20));
  if (noop == "GetDevice") bench.UseGetDeviceAsNoop();
  std::printf("no-op in the table: %s\n", noop.c_str());
  std::fflush(stdout);
  std::vector<Row> rows;
  std::vector<Group> groups;
  auto scrape = [&metrics]() {
    if (metrics.empty()) return rdmad::bench::MethodTimes();
    return Must(rdmad::bench::ScrapeRpcTimes(metrics), "--metrics");
  };
  auto measure = [&](const std::function<void()>& run) {
    Group g;
    g.first = rows.size();
    g.before = scrape();
    run();
    g.after = scrape();
    g.end = rows.size();
    groups.push_back(std::move(g));
  };
  for (uint64_t size : sizes) {
    measure([&] { bench.Registration(size, size >= (16u << 20) ? big_iters : iters, pd.name(), &rows); });
    std::fprintf(stderr, "control_bench: %s done\n", SizeName(size).c_str());
  }
  measure([&] { bench.Windows(mw_iters, pd.name(), window, &rows); });
  Print(rows, stdout);
  if (!metrics.empty()) PrintSplit(rows, groups, stdout);
  std::FILE* md = nullptr;
  if (!markdown.empty()) {
    md = std::fopen(markdown.c_str(), "w");
    if (md == nullptr) Die("cannot write " + markdown);
    if (!caption.empty()) std::fprintf(md, "%s\n", caption.c_str());
    Print(rows, md);
    if (!metrics.empty()) PrintSplit(rows, groups, md);
  }
  if (!data_prefix.empty()) WriteSizeData(rows, sizes, data_prefix + "-size.dat");
  if (first_byte_iters > 0) {
    auto keys = [&metrics]() {
      if (metrics.empty()) return std::map<std::string, double>();
      return rdmad::bench::ParseKeyHandoffs(Must(rdmad::bench::ScrapeMetrics(metrics), "--metrics"));
    };
    const std::map<std::string, double> keys_before = keys();
    rdmad::bench::FirstByteFigures f = rdmad::bench::MeasureFirstByte(
        &rdmad, [&bench] { return bench.Noop(); }, noop, pd.name(), baseline_addr, first_byte_iters);
    if (!f.error.empty()) Die("first byte: " + f.error);
    rdmad::bench::PrintFirstByte(f);
    if (md != nullptr) rdmad::bench::PrintFirstByte(f, md);
    if (!metrics.empty()) {
      // Where each grant's key left from, counted by rdmad (rdmad_grant_key_handoffs_total).
      std::string line = "thread hand-offs from the connect request to the key's post (rdmad's count):";
      for (const auto& [label, n] : keys()) {
        auto b = keys_before.find(label);
        absl::StrAppend(&line, " ", label, ": ", n - (b == keys_before.end() ? 0 : b->second), " keys;");
      }
      std::printf("%s\n", line.c_str());
      if (md != nullptr) std::fprintf(md, "\n%s\n", line.c_str());
    }
  }
  if (md != nullptr) std::fclose(md);
  (void)rdmad.DeletePd(pd.name(), /*cascade=*/true);
  return 0;
}
