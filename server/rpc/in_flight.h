// Counts the RPCs in flight, for SIGTERM's drain (server/main.cc): a gRPC server interceptor made for every
// call and destroyed with it. grpc::Server::Shutdown waits not only for calls but for every client to close
// its connection after the GOAWAY, and an idle client notices that only at its next poll (gRPC's backup
// poller: up to 5 s): so the drain waits for the calls here, then shuts the server down at once, which
// closes the idle connections.
//
// Threads: created and destroyed by gRPC on its threads (any); AwaitNone on main.
#ifndef RDMAD_SERVER_RPC_IN_FLIGHT_H_
#define RDMAD_SERVER_RPC_IN_FLIGHT_H_

#include <cstddef>
#include <memory>

#include <grpcpp/support/server_interceptor.h>

#include "absl/base/thread_annotations.h"
#include "server/common/sync.h"
#include "absl/time/time.h"

namespace rdmad {

class InFlightCalls {
 public:
  // The factory to hand to ServerBuilder::experimental().SetInterceptorCreators; it counts into this
  // object, which must outlive the server.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> Factory();
  // Waits until no call is in flight or `deadline`; returns how many still are.
  size_t AwaitNone(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  size_t count() const ABSL_LOCKS_EXCLUDED(mu_);

  void Started() ABSL_LOCKS_EXCLUDED(mu_);
  void Finished() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable Mutex mu_;
  size_t count_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace rdmad

#endif  // RDMAD_SERVER_RPC_IN_FLIGHT_H_
