// Status helpers shared by every server layer.
//
// Recoverable errors cross layer boundaries as absl::Status / absl::StatusOr, never as exceptions. A status
// made here carries, as payloads, the request field at fault, the verbs/OS call that failed and its errno,
// so the RPC layer can put them into the structured ErrorDetail without parsing messages.
//
// The three error conventions of rdma-core are converted here and nowhere else:
//   - creators (ibv_reg_mr, ibv_alloc_pd, ...) return NULL and set errno:     FromErrno(call, errno)
//   - ibv_dereg_mr, ibv_dealloc_pd, ibv_post_send, ... return the errno value: FromReturn(call, ret)
//   - rdma_* return 0 / -1 and set errno:                                     FromRdmaCm(call, ret)
//
// Thread-safety: stateless; every function may be called from any thread.
#ifndef RDMAD_SERVER_COMMON_STATUS_H_
#define RDMAD_SERVER_COMMON_STATUS_H_


#include <cerrno>
#include <string>

#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace rdmad {

// Payload keys (type URLs) used on absl::Status.
inline constexpr char kFieldPayload[] = "rdmad.v1/field";
inline constexpr char kCallPayload[] = "rdmad.v1/verbs_call";
inline constexpr char kErrnoPayload[] = "rdmad.v1/errno";
inline constexpr char kReregOutcomePayload[] = "rdmad.v1/rereg_outcome";

// An error about a request field: InvalidArgument("size", "must be > 0") -> "size: must be > 0".
absl::Status FieldError(absl::StatusCode code, absl::string_view field, absl::string_view message);
inline absl::Status InvalidArgument(absl::string_view field, absl::string_view message) {
  return FieldError(absl::StatusCode::kInvalidArgument, field, message);
}
inline absl::Status NotFound(absl::string_view field, absl::string_view message) {
  return FieldError(absl::StatusCode::kNotFound, field, message);
}
inline absl::Status FailedPrecondition(absl::string_view field, absl::string_view message) {
  return FieldError(absl::StatusCode::kFailedPrecondition, field, message);
}
inline absl::Status OutOfRange(absl::string_view field, absl::string_view message) {
  return FieldError(absl::StatusCode::kOutOfRange, field, message);
}
// An rdmad-wide limit (config "limits") reached: RESOURCE_EXHAUSTED "limit <limit> of rdmad: limit <max>, in
// use <in_use>; this call needs <needs> (the limit counts every caller's[ <counted>])".
absl::Status OverLimit(absl::string_view limit, uint64_t max, uint64_t in_use, uint64_t needs = 1,
                       absl::string_view counted = {});

// A failed system or verbs call. The code follows the errno (absl::ErrnoToStatusCode: EBUSY ->
// FAILED_PRECONDITION, ENOMEM -> RESOURCE_EXHAUSTED, EOPNOTSUPP -> UNIMPLEMENTED, ...); the message reads
// "<context>: <call>: <strerror> (errno N, ENAME)".
absl::Status ErrnoError(absl::string_view call, int err, absl::string_view context = {},
                        absl::string_view field = {});
// The same with a chosen code (e.g. FAILED_PRECONDITION + EBUSY for a refusal rdmad makes itself).
absl::Status ErrnoError(absl::StatusCode code, absl::string_view call, int err,
                        absl::string_view context, absl::string_view field);

// rdma-core's three error conventions, converted here and nowhere else (`context` prefixes the message):
//   creators (ibv_reg_mr, ibv_alloc_pd, rdma_create_event_channel, ...) return NULL and set errno:
inline absl::Status FromErrno(absl::string_view call, absl::string_view context = {}) {
  return ErrnoError(call, errno, context);
}
//   ibv_dereg_mr, ibv_dealloc_pd, ibv_post_send, ibv_modify_qp, ... return the errno value itself:
absl::Status FromReturn(absl::string_view call, int ret, absl::string_view context = {});
//   rdma_* (librdmacm) return 0 or -1 and set errno:
absl::Status FromRdmaCm(absl::string_view call, int ret, absl::string_view context = {});

// A refusal rdmad makes itself because an object is in use: FAILED_PRECONDITION "<field>: <message>" with
// errno EBUSY.
absl::Status Busy(absl::string_view field, absl::string_view message);
// Another operation holds the object: ABORTED "<field>: <name>: <operation> is in progress on it; retry ...".
absl::Status InProgress(absl::string_view field, absl::string_view name, absl::string_view operation);

// Attach a field name to a status that has none (keeps an existing one).
absl::Status WithField(absl::Status status, absl::string_view field);
// Prefix the message with context, keeping code and payloads.
absl::Status WithContext(absl::Status status, absl::string_view context);
// The same error, attributed to `field` instead of the field it names (a lookup made for another request
// field): the payload and the message's "<field>: " prefix change; a status without a field gets one.
absl::Status RenameField(absl::Status status, absl::string_view field);

// Payload readers.
std::string FieldOf(const absl::Status& status);
std::string CallOf(const absl::Status& status);
int ErrnoOf(const absl::Status& status);  // 0 if none

// "EBUSY" for 16, "errno 1234" for unknown values.
std::string ErrnoName(int err);

}  // namespace rdmad

// Early return on error, for functions returning absl::Status or absl::StatusOr.
#define RDMAD_RETURN_IF_ERROR(expr)                 \
  do {                                              \
    ::absl::Status rdmad_status_ = (expr);          \
    if (!rdmad_status_.ok()) return rdmad_status_;  \
  } while (0)

#define RDMAD_CONCAT_INNER_(a, b) a##b
#define RDMAD_CONCAT_(a, b) RDMAD_CONCAT_INNER_(a, b)
#define RDMAD_ASSIGN_OR_RETURN(lhs, expr) \
  RDMAD_ASSIGN_OR_RETURN_IMPL_(RDMAD_CONCAT_(rdmad_statusor_, __LINE__), lhs, expr)
#define RDMAD_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return std::move(tmp).status();     \
  lhs = std::move(tmp).value()

#endif  // RDMAD_SERVER_COMMON_STATUS_H_
