// The gRPC services of rdmad.v1: thin adapters from RPCs to the Registry.
//
// Threads: gRPC's synchronous server runs each RPC on a thread of its pool. Handlers block on verbs calls
// (pinning memory, polling a bind's completion), which the callback API's reactors must not do, hence the
// synchronous API. All state lives in the Registry, which is safe for concurrent calls; services hold only
// a pointer to it, and the Registry must outlive the grpc::Server they are registered with.
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
