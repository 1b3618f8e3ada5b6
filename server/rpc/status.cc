#include "server/rpc/status.h"

#include <string>

#include "absl/strings/numbers.h"
#include "server/common/status.h"

namespace rdmad {

v1::ErrorDetail DetailOf(const absl::Status& status) {
  v1::ErrorDetail d;
  d.set_field(FieldOf(status));
  d.set_verbs_call(CallOf(status));
  int err = ErrnoOf(status);
  d.set_errno_value(err);
  if (err != 0) d.set_errno_name(ErrnoName(err));
  int outcome = 0;
  if (auto p = status.GetPayload(kReregOutcomePayload); p && absl::SimpleAtoi(std::string(*p), &outcome)) {
    d.set_rereg_outcome(static_cast<v1::ReregOutcome>(outcome));
  }
  return d;
}

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl::StatusCode and grpc::StatusCode share their numbering (both follow google.rpc.Code).
  const auto code = static_cast<grpc::StatusCode>(status.code());
  const std::string message(status.message());
  v1::RpcStatus rpc;
  rpc.set_code(static_cast<int>(code));
  rpc.set_message(message);
  rpc.add_details()->PackFrom(DetailOf(status));
  return grpc::Status(code, message, rpc.SerializeAsString());
}

}  // namespace rdmad
