// The gRPC services of rdmad.v1: thin adapters from RPCs to the Registry.
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

#include <memory>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "rdmad/v1/rdmad.grpc.pb.h"
#include "server/cm/manager.h"
#include "server/grants/manager.h"
#include "server/registry/registry.h"

namespace rdmad {

// Every rdmad.v1 service of the verbs resources, bound to one registry. With `grants`, DeregisterMr,
// ReregisterMr and DeletePd first ask it about the grants on what they remove (revoke_grants).
std::vector<std::unique_ptr<grpc::Service>> MakeServices(Registry* registry, grants::GrantManager* grants = nullptr);
// EventChannels, CmIds and ConnectTokens, bound to the CM manager (which must outlive the server too).
std::vector<std::unique_ptr<grpc::Service>> MakeCmServices(cm::CmManager* manager);
// Grants, bound to the grant manager (which must outlive the server).
std::vector<std::unique_ptr<grpc::Service>> MakeGrantServices(grants::GrantManager* grants);

}  // namespace rdmad

#endif  // RDMAD_SERVER_RPC_SERVICES_H_
