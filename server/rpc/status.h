// absl::Status <-> grpc::Status, with the structured detail (rdmad.v1.ErrorDetail inside an RpcStatus that
// is wire-compatible with google.rpc.Status) carried in grpc::Status::error_details().
// Thread-safety: stateless.
#ifndef RDMAD_SERVER_RPC_STATUS_H_
#define RDMAD_SERVER_RPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "rdmad/v1/rdmad.pb.h"

namespace rdmad {

grpc::Status ToGrpc(const absl::Status& status);
// The ErrorDetail an absl::Status carries (empty fields where absent).
v1::ErrorDetail DetailOf(const absl::Status& status);

}  // namespace rdmad

#endif  // RDMAD_SERVER_RPC_STATUS_H_
