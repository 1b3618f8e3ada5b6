// The gRPC services of rdmad.v1: thin adapters from RPCs to the Registry, the CM manager and the grant
// manager, through the tenancy gate: every call is admitted (who is calling), every resource it names
// must be visible to the caller (NOT_FOUND otherwise), creations reserve against the tenant's quotas,
// lists and watches show only what the caller may see, and mutating calls leave an audit record (call.h).
//
// Threads: no handler waits for a verbs completion or for pinning. Quick RPCs (lookups, creations,
// deletions: a short registry lock and non-waiting verbs calls) run on gRPC's synchronous thread pool and
// answer at once. RegisterMr, ReregisterMr, BindMw and InvalidateMw are on gRPC's callback API: they hand
// their work to the registry, which finishes the RPC's reactor from a pin worker or from the device's
// dispatcher (the bind's completion). Quick RPCs stay synchronous: in the Soft-RoCE guest a no-op RPC on
// the callback API had twice the p99 of the synchronous one (tests/bench/rpc_latency). Services hold only a pointer to the
// Registry, which must outlive the grpc::Server they are registered with.
#ifndef RDMAD_SERVER_RPC_SERVICES_H_
#define RDMAD_SERVER_RPC_SERVICES_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "rdmad/v1/rdmad.grpc.pb.h"
#include "server/cm/manager.h"
#include "server/dataplane/listener.h"
#include "server/grants/manager.h"
#include "server/auth/policy.h"
#include "server/registry/registry.h"
#include "server/tenancy/gate.h"

namespace rdmad {

// What the services stand on. Everything it points to must outlive the grpc::Server.
struct Env {
  Registry* registry = nullptr;          // required
  cm::CmManager* cm = nullptr;           // the rdma_cm services: required by MakeCmServices
  dataplane::Listener* data_plane = nullptr;  // connect tokens (IssueConnectToken, DeletePd's revocation)
  grants::GrantManager* grants = nullptr;  // optional for MakeServices (DeletePd, DeregisterMr, ReregisterMr
                                           // ask it about grants), required by MakeGrantServices
  tenancy::Gate* gate = nullptr;         // required: who may see and use what
  // What the transport proved about the caller of this call (server/auth/peer.h). Required.
  std::function<auth::Peer(const grpc::ServerContextBase&)> identify;
  // The audit trail of mutating calls; optional.
  std::function<void(const auth::Caller&, const std::string& method, const std::string& resource,
                     const absl::Status& status)>
      audit;
  // The metrics of each finished call (method, code, time since admission); optional. Called once per call,
  // on the thread that answers it.
  // `handoffs`: the threads the call's work moved to after its handler's (server/dispatch/handoffs.h).
  std::function<void(const std::string& method, absl::StatusCode code, absl::Duration elapsed, int handoffs)>
      observe_rpc;
};

// Devices, ProtectionDomains, MemoryRegions, QueuePairs, MemoryWindows and Tenants.
std::vector<std::unique_ptr<grpc::Service>> MakeServices(const Env* env);
// EventChannels, CmIds and ConnectTokens.
std::vector<std::unique_ptr<grpc::Service>> MakeCmServices(const Env* env);
// Grants.
std::vector<std::unique_ptr<grpc::Service>> MakeGrantServices(const Env* env);

}  // namespace rdmad

#endif  // RDMAD_SERVER_RPC_SERVICES_H_
