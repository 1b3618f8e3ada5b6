// grant_bench: the grants data plane between two machines, beside baselines measured in the same run (prints
// figures; judges nothing). Runs in guest B against rdmad in guest A (run-grant-bench.sh, which first runs
// perftest's ib_read_lat / ib_read_bw between the same two guests and passes their figures in):
//   1. read latency at depth 1 through a grant (client::RemoteRegion), p50/p99 per size, and its ratio to
//      ib_read_lat's typical (median) latency at the same size;
//   2. read bandwidth with --depth reads outstanding through a grant, and its ratio to ib_read_bw's average;
//   2b. --zero-copy-sizes: read bandwidth with --depth reads outstanding, copying (reads land in
//      RemoteRegion's slots and are copied out) and zero-copy (into a buffer registered once with
//      RegisterDestination), each with its ratio to ib_read_bw's average at that size and depth;
//   3. IssueGrant -> first byte read (IssueGrant RPC, RemoteRegion::Open: rdma_cm connect + window bind on
//      the client's QP + the key's SEND, then one 64-byte read), beside a plain type 2 bind: the BindMw RPC
//      on a connected QP of the same PD (a data-plane connection made with a connect token by a plain
//      librdmacm client, tests/conformance/cm_peer.cc); and RevokeGrant beside the InvalidateMw RPC.
// Usage: grant_bench --target 10.0.3.1:50051 [--sizes 64,4096,65536] [--lat-iters N] [--bw-iters N]
//                    [--depth 16] [--first-byte-iters N] [--perftest-lat 64=604.1,...] [--perftest-bw 64=1.2,...]
//                    [--zero-copy-sizes 4096,65536,1048576] [--zero-copy-reads N] [--zero-copy-big-reads N]
//                    [--zero-copy-markdown FILE]
//                    [--markdown FILE]
//   --sizes '': no read table (run-grant-bench.sh measures reads with `rdmactl bench read`); --markdown: the
//   first-byte table, for docs/performance.md (tests/bench/regenerate.sh).
//   --perftest-lat: ib_read_lat t_typical per size (us); --perftest-bw: ib_read_bw BW average (MiB/s).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <CLI/CLI.hpp>

#include "tests/bench/stats.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/client.h"
#include "client/remote_region.h"
#include "tests/conformance/cm_peer.h"

namespace {

using Clock = std::chrono::steady_clock;
using rdmad::client::Client;
using rdmad::client::RemoteRegion;
namespace v1 = rdmad::v1;

double UsSince(Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count(); }

using rdmad::bench::Stats;
using rdmad::bench::Summarize;

std::map<uint64_t, double> ParseFigures(const std::string& text) {
  std::map<uint64_t, double> out;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(item, '=');
    uint64_t size = 0;
    double value = 0;
    if (absl::SimpleAtoi(kv.first, &size) && absl::SimpleAtod(kv.second, &value) && value > 0) out[size] = value;
  }
  return out;
}

std::string SizeName(uint64_t n) {
  if (n >= (1 << 20) && n % (1 << 20) == 0) return std::to_string(n >> 20) + " MiB";
  if (n >= 1024 && n % 1024 == 0) return std::to_string(n >> 10) + " KiB";
  return std::to_string(n) + " B";
}

[[noreturn]] void Die(const std::string& what, const absl::Status& s) {
  std::fprintf(stderr, "grant_bench: %s: %s\n", what.c_str(), s.ToString().c_str());
  std::exit(1);
}

class Bench {
 public:
  Bench(Client* a, std::string mr, uint64_t mr_length) : a_(a), mr_(std::move(mr)), mr_length_(mr_length) {}

  // Opens a grant over the whole MR with the given depth and read size.
  std::unique_ptr<RemoteRegion> Open(size_t depth, size_t size, std::string* grant) {
    v1::IssueGrantRequest req;
    req.set_mr(mr_);
    req.set_length(mr_length_);
    req.add_access(v1::REMOTE_READ);
    req.set_ttl_ms(600000);
    req.set_principal("grant-bench");
    absl::StatusOr<v1::IssuedGrant> g = a_->IssueGrant(req);
    if (!g.ok()) Die("IssueGrant", g.status());
    RemoteRegion::Options o;
    o.queue_depth = depth;
    o.max_read_bytes = size;
    o.connect_timeout = absl::Seconds(30);
    auto region = RemoteRegion::Open(*g, o);
    if (!region.ok()) Die("RemoteRegion::Open", region.status());
    *grant = g->grant().name();
    if (!g->endpoints().empty()) {
      listener_host_ = g->endpoints(0).address();
      listener_port_ = static_cast<int>(g->endpoints(0).port());
    }
    return *std::move(region);
  }
  void Close(std::unique_ptr<RemoteRegion> region, const std::string& grant) {
    (void)a_->RevokeGrant(grant);
    region.reset();
  }

  Stats Latency(uint64_t size, int iters) {
    std::string grant;
    std::unique_ptr<RemoteRegion> region = Open(1, size, &grant);
    std::vector<char> buf(size);
    const uint64_t slots = mr_length_ / size;
    std::vector<double> us;
    for (int i = -20; i < iters; ++i) {  // 20 warm-up reads
      const auto t = Clock::now();
      absl::Status s = region->Read((static_cast<uint64_t>(i + 20) % slots) * size, size, buf.data());
      if (!s.ok()) Die("read", s);
      if (i >= 0) us.push_back(UsSince(t));
    }
    Close(std::move(region), grant);
    return Summarize(us);
  }

  // MiB/s with `depth` reads outstanding, over `iters` reads; zero-copy: into one buffer registered once
  // (RegisterDestination, outside the timed part), else through the region's slots.
  double Bandwidth(uint64_t size, int iters, size_t depth, bool zero_copy = false) {
    std::string grant;
    std::unique_ptr<RemoteRegion> region = Open(depth, size, &grant);
    std::vector<char> bufs(size * depth);
    std::optional<rdmad::client::LocalBuffer> registered;
    if (zero_copy) {
      absl::StatusOr<rdmad::client::LocalBuffer> lb = region->RegisterDestination(bufs.data(), bufs.size());
      if (!lb.ok()) Die("RegisterDestination", lb.status());
      registered = std::move(*lb);
    }
    std::vector<RemoteRegion::ReadOp> ops(depth);
    std::vector<RemoteRegion::ReadOp*> free_ops;
    for (size_t i = 0; i < depth; ++i) {
      ops[i].destination = bufs.data() + i * size;
      ops[i].length = size;
      ops[i].registered = registered ? &*registered : nullptr;
      free_ops.push_back(&ops[i]);
    }
    const uint64_t slots = mr_length_ / size;
    int posted = 0, done = 0;
    const auto t = Clock::now();
    while (done < iters) {
      while (posted < iters && !free_ops.empty()) {
        RemoteRegion::ReadOp* op = free_ops.back();
        op->offset = (static_cast<uint64_t>(posted) % slots) * size;
        if (absl::Status s = region->Post(op); !s.ok()) Die("post", s);
        free_ops.pop_back();
        ++posted;
      }
      absl::StatusOr<std::vector<RemoteRegion::ReadOp*>> finished = region->Poll(1);
      if (!finished.ok()) Die("poll", finished.status());
      for (RemoteRegion::ReadOp* op : *finished) {
        if (!op->status.ok()) Die("read", op->status);
        free_ops.push_back(op);
        ++done;
      }
    }
    const double seconds = UsSince(t) / 1e6;
    registered.reset();  // before its region
    Close(std::move(region), grant);
    return static_cast<double>(size) * iters / seconds / (1 << 20);
  }

  struct FirstByte {
    std::vector<double> issue, open, read, total, revoke;
  };
  FirstByte TimeToFirstByte(int iters) {
    FirstByte f;
    char buf[64];
    for (int i = 0; i < iters; ++i) {
      v1::IssueGrantRequest req;
      req.set_mr(mr_);
      req.set_offset(static_cast<uint64_t>(i) * 4096 % mr_length_);
      req.set_length(64);
      req.add_access(v1::REMOTE_READ);
      req.set_ttl_ms(60000);
      req.set_principal("first-byte");
      RemoteRegion::Options o;
      o.queue_depth = 1;
      o.max_read_bytes = 64;
      o.connect_timeout = absl::Seconds(30);
      const auto t0 = Clock::now();
      absl::StatusOr<v1::IssuedGrant> g = a_->IssueGrant(req);
      if (!g.ok()) Die("IssueGrant", g.status());
      const auto t1 = Clock::now();
      auto region = RemoteRegion::Open(*g, o);
      if (!region.ok()) Die("RemoteRegion::Open", region.status());
      const auto t2 = Clock::now();
      if (absl::Status s = (*region)->Read(0, 64, buf); !s.ok()) Die("first read", s);
      const auto t3 = Clock::now();
      auto us = [](Clock::time_point a, Clock::time_point b) {
        return std::chrono::duration<double, std::micro>(b - a).count();
      };
      f.issue.push_back(us(t0, t1));
      f.open.push_back(us(t1, t2));
      f.read.push_back(us(t2, t3));
      f.total.push_back(us(t0, t3));
      const auto r0 = Clock::now();
      absl::StatusOr<v1::Grant> revoked = a_->RevokeGrant(g->grant().name());
      if (!revoked.ok()) Die("RevokeGrant", revoked.status());
      f.revoke.push_back(UsSince(r0));
      region->reset();
    }
    return f;
  }

 // rdmad A's data-plane listener, as the grants name it.
  const std::string& listener_host() const { return listener_host_; }
  int listener_port() const { return listener_port_; }

 private:
  Client* a_;
  std::string mr_;
  uint64_t mr_length_;
  std::string listener_host_ = "10.0.3.1";
  int listener_port_ = 7471;
};

// The plain type 2 bind: a data-plane connection from a plain librdmacm client (a connect token on `pd`),
// then BindMw on its QP in A, `iters` times (each followed by an untimed InvalidateMw... timed separately).
struct PlainBind {
  std::vector<double> bind, invalidate;
  std::string error;
};
PlainBind TimePlainBind(Client& a, const std::string& pd, const std::string& mr, const std::string& self,
                        const std::string& host, int port, int iters) {
  PlainBind out;
  v1::IssueConnectTokenRequest treq;
  treq.set_pd(pd);
  absl::StatusOr<v1::ConnectToken> token = a.IssueConnectToken(treq);
  if (!token.ok()) {
    out.error = "IssueConnectToken: " + token.status().ToString();
    return out;
  }
  rdmad::testing::CmPeer peer;
  rdmad::testing::CmPeer::Result dial = peer.Dial(host, port, token->token());
  if (dial.outcome != rdmad::testing::CmPeer::Outcome::kEstablished) {
    out.error = "dial: " + dial.event + " " + dial.error;
    return out;
  }
  std::string qp;
  for (int i = 0; i < 500 && qp.empty(); ++i) {
    absl::StatusOr<v1::ListCmIdsResponse> ids = a.ListCmIds();
    if (ids.ok()) {
      for (const v1::CmId& id : ids->cm_ids()) {
        if (id.data_plane() && id.state() == v1::CM_CONNECTED && id.remote().address() == self && id.pd() == pd &&
            !id.qp().empty()) {
          qp = id.qp();
        }
      }
    }
    if (qp.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (qp.empty()) {
    out.error = "no connected QP from " + self + " in A";
    return out;
  }
  v1::AllocMwRequest alloc;
  alloc.set_pd(pd);
  alloc.set_type(v1::TYPE_2);
  absl::StatusOr<v1::MemoryWindow> mw = a.AllocMw(alloc);
  if (!mw.ok()) {
    out.error = "AllocMw: " + mw.status().ToString();
    return out;
  }
  for (int i = 0; i < iters; ++i) {
    v1::BindMwRequest bind;
    bind.set_name(mw->name());
    bind.set_mr(mr);
    bind.set_offset(static_cast<uint64_t>(i) * 4096);
    bind.set_length(64);
    bind.add_access(v1::REMOTE_READ);
    bind.set_qp(qp);
    auto t = Clock::now();
    absl::StatusOr<v1::MemoryWindow> bound = a.BindMw(bind);
    out.bind.push_back(UsSince(t));
    if (!bound.ok()) {
      out.error = "BindMw: " + bound.status().ToString();
      break;
    }
    t = Clock::now();
    absl::StatusOr<v1::MemoryWindow> inv = a.InvalidateMw(mw->name());
    out.invalidate.push_back(UsSince(t));
    if (!inv.ok()) {
      out.error = "InvalidateMw: " + inv.status().ToString();
      break;
    }
  }
  (void)a.DeallocMw(mw->name());
  (void)peer.Disconnect();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"grants data plane beside perftest and a plain bind (prints figures, judges nothing)"};
  std::string target = "10.0.3.1:50051", sizes_text = "64,4096,65536", lat_text, bw_text,
              self = "10.0.3.2", markdown;
  int lat_iters = 300, bw_iters = 1000, first_iters = 10;
  size_t depth = 16;
  app.add_option("--target", target, "rdmad A's gRPC address");
  app.add_option("--self", self, "this guest's address (to find the plain client's connection in A)");
  app.add_option("--sizes", sizes_text, "read sizes, comma-separated");
  app.add_option("--lat-iters", lat_iters, "reads per size at depth 1");
  app.add_option("--bw-iters", bw_iters, "reads per size for bandwidth");
  app.add_option("--depth", depth, "reads outstanding for bandwidth");
  app.add_option("--first-byte-iters", first_iters, "IssueGrant -> first byte runs (and plain binds)");
  app.add_option("--perftest-lat", lat_text, "ib_read_lat t_typical per size: 64=604.1,...");
  app.add_option("--perftest-bw", bw_text, "ib_read_bw BW average (MiB/s) per size: 64=1.2,...");
  app.add_option("--markdown", markdown, "also write the first-byte table to this file (markdown)");
  std::string zc_text, zc_markdown;
  int zc_reads = 200, zc_big_reads = 32;
  app.add_option("--zero-copy-sizes", zc_text, "sizes for copying vs zero-copy bandwidth at --depth (none: skip)");
  app.add_option("--zero-copy-reads", zc_reads, "reads per size and path up to 64 KiB");
  app.add_option("--zero-copy-big-reads", zc_big_reads, "reads per size and path above 64 KiB");
  app.add_option("--zero-copy-markdown", zc_markdown, "also write the copying / zero-copy table to this file");
  CLI11_PARSE(app, argc, argv);
  const std::map<uint64_t, double> pt_lat = ParseFigures(lat_text), pt_bw = ParseFigures(bw_text);
  std::vector<uint64_t> sizes, zc_sizes;
  for (auto [text, out, flag] :
       {std::tuple(&sizes_text, &sizes, "--sizes"), std::tuple(&zc_text, &zc_sizes, "--zero-copy-sizes")}) {
    for (absl::string_view v : absl::StrSplit(*text, ',', absl::SkipEmpty())) {
      uint64_t n = 0;
      if (!absl::SimpleAtoi(v, &n) || n == 0) {
        std::fprintf(stderr, "grant_bench: %s: bad size '%s'\n", flag, std::string(v).c_str());
        return 2;
      }
      out->push_back(n);
    }
  }

  Client::Options o;
  o.target = target;
  o.timeout = std::chrono::seconds(60);
  Client a(o);
  v1::CreatePdRequest pd_req;
  pd_req.set_device("rxe0");
  pd_req.set_label("grant-bench");
  absl::StatusOr<v1::ProtectionDomain> pd = a.CreatePd(pd_req);
  if (!pd.ok()) Die("CreatePd", pd.status());
  uint64_t largest = 0;
  for (uint64_t n : sizes) largest = std::max(largest, n);
  for (uint64_t n : zc_sizes) largest = std::max(largest, n);
  const uint64_t mr_length = std::max<uint64_t>(4 << 20, largest * depth * 2);
  v1::RegisterMrRequest mr_req;
  mr_req.set_pd(pd->name());
  mr_req.mutable_source()->mutable_anonymous()->set_size(mr_length);
  mr_req.add_access(v1::LOCAL_WRITE);
  mr_req.add_access(v1::REMOTE_READ);
  mr_req.add_access(v1::MW_BIND);
  absl::StatusOr<v1::MemoryRegion> mr = a.RegisterMr(mr_req);
  if (!mr.ok()) Die("RegisterMr", mr.status());

  Bench bench(&a, mr->name(), mr->length());
  if (!sizes.empty()) {  // without sizes: the first byte only (run-grant-bench.sh reads with rdmactl bench read)
    std::printf("grant reads from B through rdmad A's grants (client::RemoteRegion) beside perftest in the same run\n");
    std::printf("%-8s | %14s %14s %8s %10s | %14s %14s %8s\n", "size", "ib_read_lat", "grant p50", "ratio",
                "grant p99", "ib_read_bw", "grant", "ratio");
    std::printf("%-8s | %14s %14s %8s %10s | %14s %14s %8s\n", "", "typical (us)", "(us)", "", "(us)",
                "(MiB/s)", "(MiB/s)", "");
    for (uint64_t size : sizes) {
      const Stats lat = bench.Latency(size, lat_iters);
      const double bw = bench.Bandwidth(size, bw_iters, depth);
      auto fig = [](const std::map<uint64_t, double>& m, uint64_t k) {
        auto it = m.find(k);
        return it == m.end() ? -1.0 : it->second;
      };
      const double plat = fig(pt_lat, size), pbw = fig(pt_bw, size);
      char lat_ratio[32] = "n/a", bw_ratio[32] = "n/a", plat_s[32] = "n/a", pbw_s[32] = "n/a";
      if (plat > 0) {
        std::snprintf(plat_s, sizeof plat_s, "%.1f", plat);
        std::snprintf(lat_ratio, sizeof lat_ratio, "%.2fx", lat.p50 / plat);
      }
      if (pbw > 0) {
        std::snprintf(pbw_s, sizeof pbw_s, "%.2f", pbw);
        std::snprintf(bw_ratio, sizeof bw_ratio, "%.2fx", bw / pbw);
      }
      std::printf("%-8s | %14s %14.1f %8s %10.1f | %14s %14.2f %8s\n", SizeName(size).c_str(), plat_s, lat.p50,
                  lat_ratio, lat.p99, pbw_s, bw, bw_ratio);
      std::fflush(stdout);
    }
    std::printf("(latency: depth 1, %d reads per size after 20 warm-up; bandwidth: %zu outstanding, %d reads per "
                "size; ratio: grant / perftest)\n",
                lat_iters, depth, bw_iters);
  }

  if (!zc_sizes.empty()) {
    std::string md = "| size | `ib_read_bw` (MiB/s) | copying (MiB/s) | ratio | zero-copy (MiB/s) | ratio |\n"
                     "| --- | --- | --- | --- | --- | --- |\n";
    std::printf("\ncopying vs zero-copy reads through a grant, %zu outstanding, beside ib_read_bw in the same run\n",
                depth);
    std::printf("%-8s | %12s | %12s %7s | %12s %7s\n", "size", "ib_read_bw", "copying", "ratio", "zero-copy",
                "ratio");
    for (uint64_t size : zc_sizes) {
      const int iters = std::max(size > 65536 ? zc_big_reads : zc_reads, static_cast<int>(depth));
      const double copying = bench.Bandwidth(size, iters, depth, false);
      const double zero_copy = bench.Bandwidth(size, iters, depth, true);
      auto it = pt_bw.find(size);
      const double base = it == pt_bw.end() ? -1.0 : it->second;
      auto ratio = [base](double v) { return base > 0 ? absl::StrFormat("%.2fx", v / base) : std::string("n/a"); };
      const std::string base_s = base > 0 ? absl::StrFormat("%.2f", base) : "n/a";
      std::printf("%-8s | %12s | %12.2f %7s | %12.2f %7s\n", SizeName(size).c_str(), base_s.c_str(), copying,
                  ratio(copying).c_str(), zero_copy, ratio(zero_copy).c_str());
      std::fflush(stdout);
      absl::StrAppend(&md, "| ", SizeName(size), " | ", base_s, " | ", absl::StrFormat("%.2f", copying), " | ",
                      ratio(copying), " | ", absl::StrFormat("%.2f", zero_copy), " | ", ratio(zero_copy), " |\n");
    }
    std::printf("(%d reads per size and path, %d above 64 KiB; ratio: grant / ib_read_bw at the same size and depth)\n",
                zc_reads, zc_big_reads);
    if (!zc_markdown.empty()) {
      std::FILE* f = std::fopen(zc_markdown.c_str(), "w");
      if (f == nullptr) Die("--zero-copy-markdown", absl::InternalError("cannot write " + zc_markdown));
      std::fputs(md.c_str(), f);
      std::fclose(f);
    }
  }

  // IssueGrant -> first byte, beside a plain type 2 bind on a connected QP.
  Bench::FirstByte f = bench.TimeToFirstByte(first_iters);
  PlainBind plain = TimePlainBind(a, pd->name(), mr->name(), self, bench.listener_host(), bench.listener_port(),
                                  first_iters);
  const Stats total = Summarize(f.total), issue = Summarize(f.issue), open = Summarize(f.open),
              read = Summarize(f.read), revoke = Summarize(f.revoke), bind = Summarize(plain.bind),
              inv = Summarize(plain.invalidate);
  std::printf("\nfrom IssueGrant to the first byte read, %d runs (p50 / p99, us):\n", first_iters);
  std::printf("  IssueGrant -> first byte   %10.0f / %-10.0f\n", total.p50, total.p99);
  std::printf("    IssueGrant RPC           %10.0f / %-10.0f\n", issue.p50, issue.p99);
  std::printf("    Open (connect, bind, key)%10.0f / %-10.0f\n", open.p50, open.p99);
  std::printf("    first 64 B read          %10.0f / %-10.0f\n", read.p50, read.p99);
  if (plain.error.empty()) {
    std::printf("  plain BindMw RPC (type 2, connected QP) %10.0f / %-10.0f  ratio first byte / bind: %.1fx\n",
                bind.p50, bind.p99, bind.p50 > 0 ? total.p50 / bind.p50 : 0.0);
    std::printf("  RevokeGrant RPC            %10.0f / %-10.0f  plain InvalidateMw RPC %10.0f / %-10.0f\n", revoke.p50,
                revoke.p99, inv.p50, inv.p99);
  } else {
    std::printf("  plain BindMw: not measured: %s\n", plain.error.c_str());
    std::printf("  RevokeGrant RPC            %10.0f / %-10.0f\n", revoke.p50, revoke.p99);
  }

  if (!markdown.empty()) {
    std::FILE* md = std::fopen(markdown.c_str(), "w");
    if (md == nullptr) Die("--markdown", absl::InternalError("cannot write " + markdown));
    std::fprintf(md, "From `IssueGrant` to the first byte read (64 B), %d runs, beside a plain type 2 bind:\n\n",
                 first_iters);
    std::fprintf(md, "| step | p50 (us) | p99 (us) |\n| --- | --- | --- |\n");
    auto row = [md](const char* what, const Stats& st) {
      std::fprintf(md, "| %s | %.0f | %.0f |\n", what, st.p50, st.p99);
    };
    row("`IssueGrant` -> first byte, of which", total);
    row("&nbsp;&nbsp;the `IssueGrant` RPC (gRPC over the wire)", issue);
    row("&nbsp;&nbsp;`RemoteRegion::Open`: rdma_cm connect, token check, bind on the client's QP, the key's SEND",
        open);
    row("&nbsp;&nbsp;the first 64-byte read", read);
    if (plain.error.empty()) row("plain `BindMw` RPC, type 2, on a connected QP of the same PD", bind);
    row("`RevokeGrant` (returns once the key is dead at the NIC)", revoke);
    if (plain.error.empty()) row("plain `InvalidateMw` RPC", inv);
    if (plain.error.empty() && bind.p50 > 0) {
      std::fprintf(md, "\nFirst byte / plain bind, p50: %.1fx\n", total.p50 / bind.p50);
    }
    std::fclose(md);
  }

  (void)a.DeregisterMr(mr->name(), true);
  (void)a.DeletePd(pd->name(), true, true);
  return plain.error.empty() ? 0 : 1;
}
