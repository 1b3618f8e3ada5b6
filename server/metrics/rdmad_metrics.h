// rdmad's own metrics (docs/operations.md#metrics): what is counted as it happens (RPCs, rdma_cm events,
// grant events, the data-plane listener's accepts and rejects) and what is computed at scrape time from
// the registry, the CM manager, the grant manager, the token store, the tenancy gate, the state journal and
// the NIC (objects and pinned bytes by tenant, data-plane connections, group commits, the NIC's counters,
// RLIMIT_MEMLOCK).
//
// Hooks: ObserveRpc from the RPC layer (server/rpc/call.h, Env::observe_rpc) on the thread that ends the
// call; the data-plane callbacks (dataplane::Observer) on the CM dispatchers; the CM and grant events
// through a watcher on each hub, whose wake callback drains it on the publisher's thread. Each takes only
// a counter's leaf lock. Label values are bounded: methods and codes are fixed sets, tenants come from
// the config, rdmad's own channels are named and users' channels are all "user".
//
// Lifetime: construct before the CM and grant managers and destroy after them (the hubs hold the wake
// callbacks, which point here); Render only while the sources given to Collect are alive (main stops the
// HTTP endpoint first).
#ifndef RDMAD_SERVER_METRICS_RDMAD_METRICS_H_
#define RDMAD_SERVER_METRICS_RDMAD_METRICS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "server/common/sync.h"
#include "absl/time/time.h"
#include "server/cm/manager.h"
#include "server/cm/token.h"
#include "server/dataplane/listener.h"
#include "server/fabric/fabric.h"
#include "server/grants/manager.h"
#include "server/metrics/metrics.h"
#include "server/registry/registry.h"
#include "server/tenancy/gate.h"

namespace rdmad::metrics {

class RdmadMetrics final : public dataplane::Observer {
 public:
  struct WriterCounts {
    uint64_t commits = 0;  // store transactions (group commits)
    uint64_t records = 0;  // store records in them
    uint64_t lines = 0;    // audit lines appended
    uint64_t commit_errors = 0;  // store transactions that failed as a whole (nothing of them durable)
  };
  // What the scrape-time families read; each may be null (its families are then left out).
  struct Sources {
    const Registry* registry = nullptr;
    const cm::CmManager* cm = nullptr;
    const grants::GrantManager* grants = nullptr;
    cm::TokenStore* tokens = nullptr;
    const tenancy::Gate* gate = nullptr;
    const fabric::Fabric* fabric = nullptr;
    // The state journal's counts (state/journal.h): group commits, store records, audit lines, failed commits.
    std::function<WriterCounts()> writer;
  };

  RdmadMetrics();
  RdmadMetrics(const RdmadMetrics&) = delete;
  RdmadMetrics& operator=(const RdmadMetrics&) = delete;

  // One finished RPC: rdmad_rpc_total and rdmad_rpc_duration_seconds.
  void ObserveRpc(const std::string& method, absl::StatusCode code, absl::Duration elapsed, int handoffs = 0);
  void OnDataPlaneAccepted() override;
  void OnDataPlaneRejected(cm::RejectReason reason) override;

  // Counts every event of both hubs from now on. Call after cm->Start() (rdmad's own channels exist
  // then) and before the gRPC server starts.
  void WatchEvents(cm::CmManager* cm, grants::GrantManager* grants);
  // The scrape-time families. Call once, before the first Render.
  void SetSources(Sources sources);

  std::string Render() const { return families_.Render(); }

 private:
  void CountCmEvent(const v1::CmEvent& e);
  void CountGrantEvent(const v1::GrantEvent& e);
  void CollectObjects(std::vector<Family>* out) const;
  void CollectNic(std::vector<Family>* out) const;

  MetricRegistry families_;
  Counter* rpcs_;
  Histogram* rpc_seconds_;
  Histogram* rpc_handoffs_;
  Counter* cm_events_;
  Counter* grant_events_;
  Counter* rejects_;
  Counter* accepts_;
  Sources sources_;

  std::set<std::string> own_channels_;  // set by WatchEvents before any event is counted; read-only after
  std::shared_ptr<cm::Watcher> cm_watcher_;
  std::shared_ptr<grants::GrantWatcher> grant_watcher_;
};

}  // namespace rdmad::metrics

#endif  // RDMAD_SERVER_METRICS_RDMAD_METRICS_H_
