#include "server/rpc/status.h"

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/common/status.h"

namespace rdmad {
namespace {

// A failure's message travels twice in the reply's trailers (grpc-message, and the RpcStatus in
// grpc-status-details-bin), and a client refuses trailers over its metadata limit (8 KiB by default): an
// error quoting a huge request field (a 70000-byte name) reached the client as RESOURCE_EXHAUSTED "received
// initial metadata size exceeds limit" instead of rdmad's error. Messages are cut to
// kMaxMessageBytes, on a UTF-8 character boundary, saying how long they were.
constexpr size_t kMaxMessageBytes = 1024;

std::string Clamp(std::string message) {
  if (message.size() <= kMaxMessageBytes) return message;
  const size_t total = message.size();
  size_t cut = kMaxMessageBytes;
  while (cut > 0 && (static_cast<unsigned char>(message[cut]) & 0xC0) == 0x80) --cut;
  message.resize(cut);
  absl::StrAppend(&message, "... (", total, " bytes)");
  return message;
}

}  // namespace

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
  const std::string message = Clamp(std::string(status.message()));
  v1::RpcStatus rpc;
  rpc.set_code(static_cast<int>(code));
  rpc.set_message(message);
  rpc.add_details()->PackFrom(DetailOf(status));
  return grpc::Status(code, message, rpc.SerializeAsString());
}

}  // namespace rdmad
