// scale_bench's object sections: rdmad filled with N objects of a kind (in parallel, one Client per fill
// thread), then each operation sampled at that N; the next N adds to the same objects. rdmad's VmRSS before
// the first object and at the largest N gives its memory per object, beside the same objects made directly
// in this process (scale_direct.cc).
// Threads: the calling thread; Parallel() runs one thread per fill client and joins them before returning.
#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/bench/scale_bench.h"

namespace rdmad::bench::scale {
namespace {

namespace v1 = rdmad::v1;
using client::Client;

template <typename T>
T Must(absl::StatusOr<T> r, const std::string& what) {
  if (!r.ok()) Die(what + ": " + r.status().ToString());
  return *std::move(r);
}
void Must(const absl::Status& s, const std::string& what) {
  if (!s.ok()) Die(what + ": " + s.ToString());
}

// Runs make(client, i) for i in [0, n) on the fill clients' threads; the names made, in no particular order.
template <typename Make>
std::vector<std::string> Parallel(Clients& c, uint64_t n, Make make) {
  std::vector<std::vector<std::string>> parts(c.fill.size());
  std::atomic<uint64_t> next{0};
  std::mutex mu;
  std::string failure;  // guarded by mu
  std::vector<std::thread> threads;
  for (size_t t = 0; t < c.fill.size(); ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t i; (i = next++) < n;) {
        absl::StatusOr<std::string> r = make(*c.fill[t], i);
        if (!r.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          failure = absl::StrCat("object ", i, ": ", r.status().ToString());
          next = n;
          return;
        }
        if (!r->empty()) parts[t].push_back(*std::move(r));
      }
    });
  }
  for (auto& th : threads) th.join();
  if (!failure.empty()) Die(failure);
  std::vector<std::string> out;
  for (auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// The samples of one group at one count, in the order the operations were first timed.
class Samples {
 public:
  template <typename F>
  void Time(const std::string& op, F f) {
    const auto t = Clock::now();
    f();
    Get(op).push_back(UsSince(t));
  }
  void Add(const std::string& op, double us) { Get(op).push_back(us); }
  void Flush(const std::string& group, uint64_t count, Report* report) {
    for (auto& [op, us] : ops_) report->ops.push_back(OpRow{group, op, count, Summarize(us)});
    ops_.clear();
  }

 private:
  std::vector<double>& Get(const std::string& op) {
    for (auto& [name, us] : ops_) {
      if (name == op) return us;
    }
    ops_.emplace_back(op, std::vector<double>());
    return ops_.back().second;
  }
  std::vector<std::pair<std::string, std::vector<double>>> ops_;
};

v1::RegisterMrRequest MrRequest(const std::string& pd, uint64_t size) {
  v1::RegisterMrRequest r;
  r.set_pd(pd);
  r.mutable_source()->mutable_anonymous()->set_size(size);
  r.add_access(v1::LOCAL_WRITE);
  r.add_access(v1::REMOTE_READ);
  r.add_access(v1::MW_BIND);
  return r;
}

v1::ProtectionDomain NewPd(Client& c, const std::string& device, const std::string& label) {
  v1::CreatePdRequest r;
  r.set_device(device);
  r.set_label(label);
  return Must(c.CreatePd(r), "CreatePd");
}

// rdmad's per-connection and per-thread state (gRPC buffers, malloc arenas of its server threads) is made
// on first use: one object made and deleted through each fill client before the first RSS reading.
template <typename Make, typename Delete>
void WarmUp(Clients& c, Make make, Delete del) {
  std::vector<std::string> names = Parallel(c, c.fill.size() * 2, make);
  Parallel(c, names.size(), [&](Client& cl, uint64_t i) -> absl::StatusOr<std::string> {
    absl::Status s = del(cl, names[i]);
    if (!s.ok()) return s;
    return std::string();
  });
}

// Sampled with each group at each count: the no-op RPC (rdmad holds a handful of PDs), so that a change in
// the machine's load between counts shows as a change of the no-op too.
constexpr char kNoop[] = "ListPds (no-op, the load's reference)";

uint64_t Pick(const std::vector<std::string>& names, int i) { return (static_cast<uint64_t>(i) * 7919) % names.size(); }

}  // namespace

void MeasureMrs(const Options& o, Clients& c, Report* report) {
  if (o.mr_counts.empty()) return;
  Client& rdmad = *c.main;
  const uint64_t max = o.mr_counts.back();
  RssRow rss{"MR, 4 KiB (RegisterMr)", max};
  std::string error;
  rss.direct_kb = DirectMrsKb(o.device, max, &error);
  rss.direct_n = max;
  rss.baseline = "mmap 4 KiB + ibv_reg_mr";
  if (!error.empty()) report->notes.push_back("direct MR baseline failed: " + error);

  const v1::ProtectionDomain pd = NewPd(rdmad, o.device, "scale-mrs");
  const v1::ProtectionDomain small = NewPd(rdmad, o.device, "scale-small");
  Must(rdmad.RegisterMr(MrRequest(small.name(), 4096)), "RegisterMr (small PD)");
  const v1::MemoryRegion region = Must(rdmad.RegisterMr(MrRequest(pd.name(), 64 * 1024)), "RegisterMr 64 KiB");
  v1::AllocMwRequest a;
  a.set_pd(pd.name());
  a.set_type(v1::TYPE_1);
  const v1::MemoryWindow mw = Must(rdmad.AllocMw(a), "AllocMw");
  v1::BindMwRequest bind;
  bind.set_name(mw.name());
  bind.set_mr(region.name());
  bind.set_length(4096);
  bind.add_access(v1::REMOTE_READ);

  const v1::RegisterMrRequest req = MrRequest(pd.name(), 4096);
  auto make = [&](Client& cl, uint64_t) -> absl::StatusOr<std::string> {
    absl::StatusOr<v1::MemoryRegion> m = cl.RegisterMr(req);
    if (!m.ok()) return m.status();
    return m->name();
  };
  WarmUp(c, make, [](Client& cl, const std::string& n) { return cl.DeregisterMr(n); });
  const long before = RssKb(o.rdmad_pid);
  std::vector<std::string> names;
  for (uint64_t count : o.mr_counts) {
    std::vector<std::string> more = Parallel(c, count - names.size(), make);
    names.insert(names.end(), more.begin(), more.end());
    if (count == max) rss.rdmad_kb = o.rdmad_pid ? RssKb(o.rdmad_pid) - before : -1;
    Progress(absl::StrCat(count, " MRs made"));
    Samples s;
    for (int i = 0; i < o.samples; ++i) {
      std::string name;
      s.Time(kNoop, [&] { Must(rdmad.ListPds(), "ListPds"); });
      s.Time("RegisterMr 4 KiB", [&] { name = Must(rdmad.RegisterMr(req), "RegisterMr").name(); });
      s.Time("DeregisterMr 4 KiB", [&] { Must(rdmad.DeregisterMr(name), "DeregisterMr"); });
      s.Time("GetMr", [&] { Must(rdmad.GetMr(names[Pick(names, i)]), "GetMr"); });
      s.Time("ListMrs of another PD (1 MR)", [&] { Must(rdmad.ListMrs(small.name()), "ListMrs"); });
      s.Time("BindMw type 1", [&] { Must(rdmad.BindMw(bind), "BindMw"); });
      s.Time("InvalidateMw type 1", [&] { Must(rdmad.InvalidateMw(mw.name()), "InvalidateMw"); });
    }
    size_t bytes = 0;
    for (int i = 0; i < o.list_samples; ++i) {
      s.Time("ListMrs of the PD (all N)",
             [&] { bytes = Must(rdmad.ListMrs(pd.name()), "ListMrs (all)").ByteSizeLong(); });
    }
    if (count == max) report->notes.push_back(absl::StrCat("ListMrs of the PD at ", count, " MRs: ", bytes,
                                                           " bytes of answer (gRPC's default receive limit: 4194304)"));
    s.Flush("mrs", count, report);
  }
  report->rss.push_back(rss);
  Must(rdmad.DeallocMw(mw.name()), "DeallocMw");
  Must(rdmad.DeletePd(pd.name(), /*cascade=*/true), "DeletePd");  // its N regions with it
  Must(rdmad.DeletePd(small.name(), /*cascade=*/true), "DeletePd");
  Progress("MRs done");
}

void MeasureGrants(const Options& o, Clients& c, Report* report) {
  if (o.grant_counts.empty()) return;
  Client& rdmad = *c.main;
  const uint64_t max = o.grant_counts.back();
  const v1::ProtectionDomain pd = NewPd(rdmad, o.device, "scale-grants");
  const v1::MemoryRegion region = Must(rdmad.RegisterMr(MrRequest(pd.name(), 64 * 1024)), "RegisterMr 64 KiB");
  auto grant = [&](const std::string& principal) {
    v1::IssueGrantRequest g;
    g.set_mr(region.name());
    g.set_length(4096);
    g.add_access(v1::REMOTE_READ);
    g.set_ttl_ms(3600 * 1000);  // the token store's longest: the grants outlive the run
    g.set_principal(principal);
    return g;
  };
  Must(rdmad.IssueGrant(grant("scale-one")), "IssueGrant");
  // Filled in batches (IssueGrants, 100 per call) from the fill threads.
  const uint64_t kBatch = 100;
  auto make = [&](Client& cl, uint64_t) -> absl::StatusOr<std::string> {
    v1::IssueGrantsRequest b;
    for (uint64_t k = 0; k < kBatch; ++k) *b.add_grants() = grant("scale-fill");
    absl::StatusOr<v1::IssueGrantsResponse> r = cl.IssueGrants(b);
    if (!r.ok()) return r.status();
    std::string names;
    for (const auto& g : r->grants()) absl::StrAppend(&names, names.empty() ? "" : " ", g.grant().name());
    return names;
  };
  WarmUp(
      c, [&](Client& cl, uint64_t) -> absl::StatusOr<std::string> {
        absl::StatusOr<v1::IssuedGrant> g = cl.IssueGrant(grant("scale-warm"));
        if (!g.ok()) return g.status();
        return g->grant().name();
      },
      [](Client& cl, const std::string& n) { return cl.RevokeGrant(n).status(); });
  const long before = RssKb(o.rdmad_pid);
  std::vector<std::string> names;
  uint64_t issued = 0;
  RssRow rss{"grant, issued (IssueGrant)", max};
  rss.baseline = "none: an issued grant holds no verbs object until a client connects";
  for (uint64_t count : o.grant_counts) {
    const uint64_t batches = (count - issued + kBatch - 1) / kBatch;
    for (const std::string& joined : Parallel(c, batches, make)) {
      for (size_t p = 0, q; p < joined.size(); p = q + 1) {
        q = joined.find(' ', p);
        if (q == std::string::npos) q = joined.size();
        names.push_back(joined.substr(p, q - p));
      }
    }
    issued += batches * kBatch;
    if (count == o.grant_counts.back()) rss.n = issued, rss.rdmad_kb = o.rdmad_pid ? RssKb(o.rdmad_pid) - before : -1;
    Progress(absl::StrCat(issued, " grants issued"));
    Samples s;
    for (int i = 0; i < o.samples; ++i) {
      std::string name;
      s.Time(kNoop, [&] { Must(rdmad.ListPds(), "ListPds"); });
      s.Time("IssueGrant", [&] { name = Must(rdmad.IssueGrant(grant("scale-sample")), "IssueGrant").grant().name(); });
      s.Time("RevokeGrant (issued, not connected)", [&] { Must(rdmad.RevokeGrant(name), "RevokeGrant"); });
      s.Time("GetGrant", [&] { Must(rdmad.GetGrant(names[Pick(names, i)]), "GetGrant"); });
      s.Time("ListGrants of a principal (1 grant)", [&] { Must(rdmad.ListGrants("", "scale-one"), "ListGrants"); });
    }
    size_t bytes = 0;
    for (int i = 0; i < o.list_samples; ++i) {
      s.Time("ListGrants of the MR (all N)",
             [&] { bytes = Must(rdmad.ListGrants(region.name()), "ListGrants (all)").ByteSizeLong(); });
    }
    if (count == o.grant_counts.back()) {
      report->notes.push_back(absl::StrCat("ListGrants of the MR at ", issued, " grants: ", bytes, " bytes of answer"));
    }
    s.Flush("grants", issued, report);
  }
  report->rss.push_back(rss);
  Must(rdmad.DeletePd(pd.name(), /*cascade=*/true, /*revoke_grants=*/true), "DeletePd");
  Progress("grants done");
}

void MeasureCmIds(const Options& o, Clients& c, Report* report) {
  if (o.cm_counts.empty()) return;
  Client& rdmad = *c.main;
  const uint64_t max = o.cm_counts.back();
  RssRow rss{"CM id (CreateCmId)", max};
  std::string error;
  rss.direct_kb = DirectCmIdsKb(max, &error);
  rss.direct_n = max;
  rss.baseline = "rdma_create_id on one event channel";
  if (!error.empty()) report->notes.push_back("direct CM id baseline failed: " + error);
  const v1::ProtectionDomain pd = NewPd(rdmad, o.device, "scale-cm");
  v1::CreateChannelRequest ch;
  ch.set_label("scale-a");
  const v1::EventChannel chan_a = Must(rdmad.CreateChannel(ch), "CreateChannel");
  ch.set_label("scale-b");
  const v1::EventChannel chan_b = Must(rdmad.CreateChannel(ch), "CreateChannel");
  v1::CreateCmIdRequest req;
  req.set_channel(chan_a.name());
  req.set_pd(pd.name());
  auto make = [&](Client& cl, uint64_t) -> absl::StatusOr<std::string> {
    absl::StatusOr<v1::CmId> id = cl.CreateCmId(req);
    if (!id.ok()) return id.status();
    return id->name();
  };
  auto del = [](Client& cl, const std::string& n) { return cl.DeleteCmId(n); };
  WarmUp(c, make, del);
  const long before = RssKb(o.rdmad_pid);
  std::vector<std::string> names;
  for (uint64_t count : o.cm_counts) {
    std::vector<std::string> more = Parallel(c, count - names.size(), make);
    names.insert(names.end(), more.begin(), more.end());
    if (count == max) rss.rdmad_kb = o.rdmad_pid ? RssKb(o.rdmad_pid) - before : -1;
    Progress(absl::StrCat(count, " CM ids made"));
    Samples s;
    for (int i = 0; i < o.samples; ++i) {
      std::string name;
      s.Time(kNoop, [&] { Must(rdmad.ListPds(), "ListPds"); });
      s.Time("CreateCmId", [&] { name = Must(rdmad.CreateCmId(req), "CreateCmId").name(); });
      s.Time("DeleteCmId", [&] { Must(rdmad.DeleteCmId(name), "DeleteCmId"); });
      const std::string& some = names[Pick(names, i)];
      s.Time("GetCmId", [&] { Must(rdmad.GetCmId(some), "GetCmId"); });
      v1::MigrateCmIdRequest m;
      m.set_name(some);
      m.set_channel(chan_b.name());
      s.Time("MigrateCmId (to another channel)", [&] { Must(rdmad.MigrateCmId(m), "MigrateCmId"); });
      s.Time("ListCmIds of another channel (1 id)", [&] { Must(rdmad.ListCmIds(chan_b.name()), "ListCmIds"); });
      m.set_channel(chan_a.name());
      Must(rdmad.MigrateCmId(m), "MigrateCmId (back)");
    }
    for (int i = 0; i < o.list_samples; ++i) {
      s.Time("GetChannel (lists its N ids)", [&] { Must(rdmad.GetChannel(chan_a.name()), "GetChannel"); });
    }
    s.Flush("cmids", count, report);
  }
  report->rss.push_back(rss);
  Parallel(c, names.size(), [&](Client& cl, uint64_t i) -> absl::StatusOr<std::string> {
    absl::Status st = cl.DeleteCmId(names[i]);
    if (!st.ok()) return st;
    return std::string();
  });
  Must(rdmad.DeleteChannel(chan_a.name()), "DeleteChannel");
  Must(rdmad.DeleteChannel(chan_b.name()), "DeleteChannel");
  Must(rdmad.DeletePd(pd.name(), /*cascade=*/true), "DeletePd");
  Progress("CM ids done");
}

void MeasureMwRss(const Options& o, Clients& c, Report* report) {
  if (o.mw_count == 0) return;
  Client& rdmad = *c.main;
  RssRow rss{"MW type 1 (AllocMw)", o.mw_count};
  std::string error;
  rss.direct_kb = DirectMwsKb(o.device, o.mw_count, &error);
  rss.direct_n = o.mw_count;
  rss.baseline = "ibv_alloc_mw type 1";
  if (!error.empty()) report->notes.push_back("direct MW baseline failed: " + error);
  const v1::ProtectionDomain pd = NewPd(rdmad, o.device, "scale-mws");
  v1::AllocMwRequest a;
  a.set_pd(pd.name());
  a.set_type(v1::TYPE_1);
  auto make = [&](Client& cl, uint64_t) -> absl::StatusOr<std::string> {
    absl::StatusOr<v1::MemoryWindow> w = cl.AllocMw(a);
    if (!w.ok()) return w.status();
    return w->name();
  };
  WarmUp(c, make, [](Client& cl, const std::string& n) { return cl.DeallocMw(n); });
  const long before = RssKb(o.rdmad_pid);
  Parallel(c, o.mw_count, make);
  rss.rdmad_kb = o.rdmad_pid ? RssKb(o.rdmad_pid) - before : -1;
  report->rss.push_back(rss);
  Must(rdmad.DeletePd(pd.name(), /*cascade=*/true), "DeletePd");
  Progress("windows done");
}

}  // namespace rdmad::bench::scale
