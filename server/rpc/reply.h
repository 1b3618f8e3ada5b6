// Finishing an RPC from a status value (private to server/rpc/): Reply for quick RPCs on the synchronous
// API, Replier for RPCs that finish later on gRPC's callback API.
// Threads: Reply runs on the handler's thread; the callback made by Replier may run on any thread, once.
#ifndef RDMAD_SERVER_RPC_REPLY_H_
#define RDMAD_SERVER_RPC_REPLY_H_

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "server/common/log.h"
#include "server/registry/registry.h"
#include "server/rpc/status.h"

namespace rdmad::rpc_internal {

inline void LogFailure(const char* method, const std::string& peer, const absl::Status& status) {
  if (!status.ok()) RDMAD_LOG_INFO("%s from %s: %s", method, peer.c_str(), std::string(status.message()).c_str());
}

// A quick RPC (synchronous API): sets *response from an absl::StatusOr<T> (or nothing from an absl::Status)
// and returns the RPC's status.
template <typename Result, typename Response>
grpc::Status Reply(grpc::ServerContext* ctx, const char* method, Result result, Response* response) {
  absl::Status status;
  if constexpr (std::is_same_v<Result, absl::Status>) {
    status = result;
  } else {
    status = result.status();
    if (status.ok()) *response = std::move(result).value();
  }
  LogFailure(method, ctx->peer(), status);
  return ToGrpc(status);
}

// A Done<T> that finishes the RPC when the registry calls it (from any thread). The response and the
// reactor stay valid until Finish, which gRPC requires exactly once even after a cancellation.
template <typename T, typename Response>
Done<T> Replier(grpc::CallbackServerContext* ctx, const char* method, grpc::ServerUnaryReactor* reactor,
                Response* response) {
  return [method, peer = ctx->peer(), reactor, response](absl::StatusOr<T> result) {
    LogFailure(method, peer, result.status());
    if (result.ok()) *response = std::move(result).value();
    reactor->Finish(ToGrpc(result.status()));
  };
}

template <typename T, typename Repeated>
void Fill(std::vector<T> items, Repeated* out) {
  for (auto& i : items) *out->Add() = std::move(i);
}

}  // namespace rdmad::rpc_internal

#endif  // RDMAD_SERVER_RPC_REPLY_H_
