// The gRPC services of rdmad.v1: thin adapters from RPCs to the Registry, on gRPC's callback API.
//
// Threads: handlers run on gRPC's callback threads and never block there. Quick RPCs (lookups, creations,
// deletions: a short registry lock and non-waiting verbs calls) finish inline. RegisterMr, ReregisterMr,
// BindMw and InvalidateMw hand their work to the registry, which finishes the RPC's reactor from a worker
// (pinning) or from the device's dispatcher (the bind's completion). Services hold only a pointer to the
// Registry, which must outlive the grpc::Server they are registered with.
#ifndef RDMAD_SERVER_RPC_SERVICES_H_
#define RDMAD_SERVER_RPC_SERVICES_H_

#include <memory>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "rdmad/v1/rdmad.grpc.pb.h"
#include "server/registry/registry.h"

namespace rdmad {

// Every rdmad.v1 service, bound to one registry.
std::vector<std::unique_ptr<grpc::Service>> MakeServices(Registry* registry);

}  // namespace rdmad

#endif  // RDMAD_SERVER_RPC_SERVICES_H_
