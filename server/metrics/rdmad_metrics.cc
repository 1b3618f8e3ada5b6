#include "server/metrics/rdmad_metrics.h"

#include <sys/resource.h>

#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/common/version.h"
#include "absl/strings/strip.h"

namespace rdmad::metrics {
namespace {

// rdmad_rpc_duration_seconds: 100 us to 10 s (a lookup takes well under a millisecond; a registration
// pins its pages and can take seconds).
const std::vector<double> kRpcBounds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                        0.025,  0.05,    0.1,    0.25,  0.5,    1,     2.5, 5, 10};

// The kinds of rdmad_objects, in the order they are printed.
const char* const kKinds[] = {"pds", "mrs", "mws", "qps", "cm_ids", "grants", "tokens"};

std::string GrantEventName(v1::GrantEventType t) {
  std::string name = v1::GrantEventType_Name(t);
  if (name == "GRANT_ISSUED_EVENT") return "issued";
  name = std::string(absl::StripPrefix(name, "GRANT_"));
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

std::string EndReasonName(const v1::Grant& g) {
  if (g.end_reason() == v1::GRANT_END_UNSPECIFIED) return "";
  std::string name = std::string(absl::StripPrefix(v1::GrantEndReason_Name(g.end_reason()), "END_"));
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

double MemlockLimit() {
  rlimit now{};
  if (getrlimit(RLIMIT_MEMLOCK, &now) != 0) return std::nan("");
  if (now.rlim_cur == RLIM_INFINITY) return std::numeric_limits<double>::infinity();
  return static_cast<double>(now.rlim_cur);
}

}  // namespace

RdmadMetrics::RdmadMetrics() {
  rpcs_ = families_.AddCounter("rdmad_rpc_total", "RPCs of rdmad.v1 finished, by method and gRPC status code.",
                               {"method", "code"});
  rpc_seconds_ = families_.AddHistogram("rdmad_rpc_duration_seconds",
                                        "Time from an RPC's admission to its answer, by method.", {"method"},
                                        kRpcBounds);
  rpc_handoffs_ = families_.AddHistogram(
      "rdmad_rpc_thread_handoffs",
      "Thread hand-offs on an RPC's path from its handler's thread to where its answer leaves (a task "
      "posted to another thread, a completion run by a dispatcher), by method.",
      {"method"}, {0, 1, 2, 3, 4});
  cm_events_ = families_.AddCounter(
      "rdmad_cm_events_total",
      "rdma_cm events rdmad dispatched, by type and channel (rdmad's own channels by name; users' as \"user\").",
      {"type", "channel"});
  grant_events_ = families_.AddCounter(
      "rdmad_grant_events_total",
      "Grant events: issued, activated, renewed, revoked, expired; reason is the end reason of an ended grant.",
      {"event", "reason"});
  rejects_ = families_.AddCounter("rdmad_dataplane_rejections_total",
                                  "Data-plane connect requests rejected, by the reason sent (docs/PROTOCOL.md).",
                                  {"reason"});
  accepts_ = families_.AddCounter("rdmad_dataplane_accepted_total",
                                  "Data-plane connect requests accepted (token good, rdma_accept done).", {});
  accepts_->Add({}, 0);  // present from the start
}

void RdmadMetrics::ObserveRpc(const std::string& method, absl::StatusCode code, absl::Duration elapsed,
                              int handoffs) {
  rpcs_->Add({method, absl::StatusCodeToString(code)});
  rpc_seconds_->Observe({method}, absl::ToDoubleSeconds(elapsed));
  rpc_handoffs_->Observe({method}, handoffs);
}

void RdmadMetrics::OnDataPlaneAccepted() { accepts_->Add({}); }

void RdmadMetrics::OnDataPlaneRejected(cm::RejectReason reason) { rejects_->Add({cm::RejectReasonName(reason)}); }

void RdmadMetrics::CountCmEvent(const v1::CmEvent& e) {
  const std::string type(absl::StripPrefix(e.type(), "RDMA_CM_EVENT_"));
  cm_events_->Add({type, own_channels_.count(e.channel()) ? e.channel() : "user"});
}

void RdmadMetrics::CountGrantEvent(const v1::GrantEvent& e) {
  grant_events_->Add({GrantEventName(e.type()), EndReasonName(e.grant())});
}

void RdmadMetrics::WatchEvents(cm::CmManager* cm, grants::GrantManager* grants) {
  if (cm != nullptr) {
    if (auto channels = cm->ListChannels(); channels.ok()) {
      for (const auto& ch : *channels) {
        if (ch.role() != v1::CHANNEL_USER) own_channels_.insert(ch.name());
      }
    }
    // Drained on the publisher's thread as soon as an event is queued: it never falls behind. The raw
    // pointer is safe: the hub holds the watcher while it wakes it.
    cm_watcher_ = cm->events().Subscribe(cm::EventFilter(), 0);
    cm_watcher_->set_wake([this, w = cm_watcher_.get()] {
      while (auto e = w->Next()) CountCmEvent(*e);
    });
  }
  if (grants != nullptr) {
    grant_watcher_ = grants->events().Subscribe(grants::GrantFilter(), 0);
    grant_watcher_->set_wake([this, w = grant_watcher_.get()] {
      while (auto e = w->Next()) CountGrantEvent(*e);
    });
  }
}

void RdmadMetrics::SetSources(Sources sources) {
  sources_ = sources;
  families_.AddCollector([this](std::vector<Family>* out) { CollectObjects(out); });
  families_.AddCollector([this](std::vector<Family>* out) { CollectNic(out); });
  if (sources_.writer) {
    families_.AddCollector([this](std::vector<Family>* out) {
      const WriterCounts c = sources_.writer();
      out->push_back({"rdmad_state_commits_total",
                      "State store transactions: each is one group commit (one fsync) of every record queued "
                      "when the writer took them.",
                      "counter",
                      {{"", {}, static_cast<double>(c.commits)}}});
      out->push_back({"rdmad_state_records_total",
                      "State store records (PDs, regions, grants, name marks) written; divided by "
                      "rdmad_state_commits_total, the records per group commit.",
                      "counter",
                      {{"", {}, static_cast<double>(c.records)}}});
      out->push_back({"rdmad_state_commit_errors_total",
                      "State store transactions that failed as a whole (disk full, I/O error, read-only file, "
                      "the file locked by another process): none of their records was made durable.",
                      "counter",
                      {{"", {}, static_cast<double>(c.commit_errors)}}});
      out->push_back({"rdmad_audit_lines_total", "Audit lines appended to the audit file by the state writer.",
                      "counter",
                      {{"", {}, static_cast<double>(c.lines)}}});
    });
  }
  families_.AddCollector([](std::vector<Family>* out) {
    out->push_back({"rdmad_memlock_limit_bytes",
                    "rdmad's RLIMIT_MEMLOCK (soft): pinned memory the kernel lets it lock; +Inf when unlimited.",
                    "gauge",
                    {{"", {}, MemlockLimit()}}});
    // Prometheus' build_info convention: 1, labelled with what was built (joins a version to any series).
    out->push_back({"rdmad_build_info",
                    "rdmad's version and the API it serves, as labels; the value is always 1.",
                    "gauge",
                    {{"", {{"version", kRdmadVersion}, {"api", kApiVersion}}, 1}}});
  });
}

// Objects and pinned bytes by tenant, from the live resources (as the quotas count them: gate.h), and the
// data-plane connections. Each list takes its owner's lock briefly, as the List RPCs do.
void RdmadMetrics::CollectObjects(std::vector<Family>* out) const {
  const Sources& s = sources_;
  if (s.registry == nullptr) return;
  auto tenant_of = [&](const std::string& pd) { return s.gate ? s.gate->TenantOfPd(pd) : std::string(); };
  // tenant -> kind -> count; every configured tenant appears, and "" (resources in no tenant).
  std::map<std::string, std::map<std::string, double>> objects;
  std::map<std::string, double> pinned;
  auto zero = [&](const std::string& tenant) {
    for (const char* k : kKinds) objects[tenant][k] += 0;
    pinned[tenant] += 0;
  };
  zero("");
  if (s.gate != nullptr) {
    for (const auto& t : s.gate->policy().tenants()) zero(t.name);
  }
  std::map<std::string, std::string> pd_tenant;
  for (const auto& pd : s.registry->ListPds()) {
    const std::string t = tenant_of(pd.name());
    pd_tenant[pd.name()] = t;
    auto& o = objects[t];
    o["pds"] += 1;
    o["mrs"] += pd.mr_count();
    o["mws"] += pd.mw_count();
    o["qps"] += pd.qp_count();
  }
  auto tenant_by_pd = [&](const std::string& pd) {
    auto it = pd_tenant.find(pd);
    return it != pd_tenant.end() ? it->second : tenant_of(pd);
  };
  if (auto mrs = s.registry->ListMrs(v1::ListMrsRequest()); mrs.ok()) {
    for (const auto& m : *mrs) pinned[tenant_by_pd(m.pd())] += static_cast<double>(m.length());
  }
  double connections = 0;
  if (s.cm != nullptr) {
    if (auto ids = s.cm->ListCmIds(v1::ListCmIdsRequest()); ids.ok()) {
      for (const auto& id : *ids) {
        objects[tenant_by_pd(id.pd())]["cm_ids"] += 1;
        if (id.data_plane() && id.state() == v1::CM_CONNECTED) connections += 1;
      }
    }
  }
  if (s.grants != nullptr) {
    if (auto grants = s.grants->List(v1::ListGrantsRequest()); grants.ok()) {
      for (const auto& g : *grants) {
        if (g.state() != v1::GRANT_ENDED) objects[tenant_by_pd(g.pd())]["grants"] += 1;
      }
    }
  }
  if (s.tokens != nullptr) {
    std::map<std::string, double> by_pd;  // counted under the store's lock, resolved after it
    s.tokens->Outstanding([&](const cm::Claims& c) {
      by_pd[c.pd] += 1;
      return false;
    });
    for (const auto& [pd, n] : by_pd) objects[tenant_by_pd(pd)]["tokens"] += n;
  }

  Family obj{"rdmad_objects", "Live objects by kind (pds, mrs, mws, qps, cm_ids, grants, tokens) and tenant "
                              "(\"\": in no tenant).",
             "gauge", {}};
  for (const char* k : kKinds) {
    for (const auto& [tenant, kinds] : objects) {
      auto it = kinds.find(k);
      obj.samples.push_back({"", {{"kind", k}, {"tenant", tenant}}, it == kinds.end() ? 0 : it->second});
    }
  }
  out->push_back(std::move(obj));
  Family pin{"rdmad_pinned_bytes", "Bytes of memory registered (pinned) in memory regions, by tenant.", "gauge", {}};
  for (const auto& [tenant, bytes] : pinned) pin.samples.push_back({"", {{"tenant", tenant}}, bytes});
  out->push_back(std::move(pin));
  if (s.cm != nullptr) {
    out->push_back({"rdmad_dataplane_connections", "Data-plane connections established now.", "gauge",
                    {{"", {}, connections}}});
  }
  const Registry::CompletionCounts done = s.registry->completion_counts();
  out->push_back({"rdmad_completions_total",
                  "Binds and invalidations by the thread that finished them: the one that posted the work "
                  "(its completion polled there, no thread hand-off) or the device's dispatcher.",
                  "counter",
                  {{"", {{"finished_on", "poster"}}, static_cast<double>(done.on_poster)},
                   {"", {{"finished_on", "dispatcher"}}, static_cast<double>(done.on_dispatcher)}}});
  if (s.grants != nullptr) {
    const grants::GrantManager::KeyHandoffs keys = s.grants->key_handoffs();
    Family f{"rdmad_grant_key_handoffs_total",
             "Keys of SCOPE_QP grants sent (posted with their window's bind), by the thread hand-offs on their path "
             "from the connect request on the data-plane listener, or from the receive of a session's ACTIVATE "
             "(\"3+\": three or more).",
             "counter", {}};
    for (size_t n = 0; n < keys.keys.size(); n++) {
      const std::string label = n + 1 < keys.keys.size() ? std::to_string(n) : std::to_string(n) + "+";
      f.samples.push_back({"", {{"handoffs", label}}, static_cast<double>(keys.keys[n])});
    }
    out->push_back(std::move(f));
  }
}

// The NIC's counters (sysfs hw_counters, read now): rdmad_nic_events_total for all of them, and the sum of
// the ones that count remote accesses this NIC refused (server/fabric/hw_counters.h) per device.
void RdmadMetrics::CollectNic(std::vector<Family>* out) const {
  if (sources_.fabric == nullptr) return;
  Family all{"rdmad_nic_events_total",
             "The NIC's own counters as the driver exposes them (sysfs hw_counters; port 0: device-level).",
             "counter", {}};
  Family refused{"rdmad_nic_remote_access_errors_total",
                 "Remote accesses this NIC refused (bad or dead rkey, range, rights, PD): the sum of the "
                 "driver's responder-side counters that count them.",
                 "counter", {}};
  for (const fabric::Device* d : sources_.fabric->devices()) {
    const std::string device = d->info().name;
    double errors = 0;
    for (const auto& c : d->ReadCounters()) {
      all.samples.push_back({"",
                             {{"device", device}, {"port", absl::StrCat(c.port)}, {"counter", c.name},
                              {"remote_access_error", c.remote_access_error ? "true" : "false"}},
                             static_cast<double>(c.value)});
      if (c.remote_access_error) errors += static_cast<double>(c.value);
    }
    refused.samples.push_back({"", {{"device", device}}, errors});
  }
  out->push_back(std::move(all));
  out->push_back(std::move(refused));
  if (sources_.registry == nullptr) return;
  // The window-bounds probe's answer and what rdmad made of it (docs/api.md#memory-windows).
  Family bounds{"rdmad_mw_bounds_region",
                "1 if rdmad binds this device's memory windows to a bounds region over their range; `enforced`: "
                "whether the start-up probe saw the device enforce window bounds itself.",
                "gauge", {}};
  for (const fabric::Device* d : sources_.fabric->devices()) {
    absl::StatusOr<v1::Device> info = sources_.registry->GetDevice(d->info().name, /*with_counters=*/false);
    if (!info.ok()) continue;
    bounds.samples.push_back({"",
                              {{"device", d->info().name},
                               {"enforced", info->caps().mw_bounds_enforced() ? "true" : "false"}},
                              info->caps().mw_bounds_region() ? 1.0 : 0.0});
  }
  out->push_back(std::move(bounds));
}

}  // namespace rdmad::metrics
