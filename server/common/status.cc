#include "server/common/status.h"

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace rdmad {
namespace {

std::string PayloadOf(const absl::Status& status, const char* key) {
  absl::optional<absl::Cord> p = status.GetPayload(key);
  return p ? std::string(*p) : std::string();
}

}  // namespace

std::string ErrnoName(int err) {
  switch (err) {
#define RDMAD_ERRNO_CASE(e) \
  case e:                   \
    return #e;
    RDMAD_ERRNO_CASE(EPERM) RDMAD_ERRNO_CASE(ENOENT) RDMAD_ERRNO_CASE(EINTR) RDMAD_ERRNO_CASE(EIO)
    RDMAD_ERRNO_CASE(ENXIO) RDMAD_ERRNO_CASE(E2BIG) RDMAD_ERRNO_CASE(EBADF) RDMAD_ERRNO_CASE(EAGAIN)
    RDMAD_ERRNO_CASE(ENOMEM) RDMAD_ERRNO_CASE(EACCES) RDMAD_ERRNO_CASE(EFAULT) RDMAD_ERRNO_CASE(EBUSY)
    RDMAD_ERRNO_CASE(EEXIST) RDMAD_ERRNO_CASE(ENODEV) RDMAD_ERRNO_CASE(ENOTDIR) RDMAD_ERRNO_CASE(EISDIR)
    RDMAD_ERRNO_CASE(EINVAL) RDMAD_ERRNO_CASE(ENFILE) RDMAD_ERRNO_CASE(EMFILE) RDMAD_ERRNO_CASE(EFBIG)
    RDMAD_ERRNO_CASE(ENOSPC) RDMAD_ERRNO_CASE(ERANGE) RDMAD_ERRNO_CASE(ENOSYS) RDMAD_ERRNO_CASE(ETIMEDOUT)
    RDMAD_ERRNO_CASE(EOPNOTSUPP) RDMAD_ERRNO_CASE(EOVERFLOW) RDMAD_ERRNO_CASE(ENAMETOOLONG)
    RDMAD_ERRNO_CASE(ELOOP) RDMAD_ERRNO_CASE(ECONNREFUSED) RDMAD_ERRNO_CASE(EPROTO)
    RDMAD_ERRNO_CASE(EADDRNOTAVAIL) RDMAD_ERRNO_CASE(ENETUNREACH) RDMAD_ERRNO_CASE(ECANCELED)
#undef RDMAD_ERRNO_CASE
    default:
      return absl::StrCat("errno ", err);
  }
}

absl::Status FieldError(absl::StatusCode code, absl::string_view field, absl::string_view message) {
  absl::Status s(code, field.empty() ? std::string(message) : absl::StrCat(field, ": ", message));
  if (!field.empty()) s.SetPayload(kFieldPayload, absl::Cord(field));
  return s;
}

absl::Status OverLimit(absl::string_view limit, uint64_t max, uint64_t in_use, uint64_t needs,
                       absl::string_view counted) {
  return absl::ResourceExhaustedError(absl::StrCat("limit ", limit, " of rdmad: limit ", max, ", in use ", in_use,
                                                   "; this call needs ", needs, " (the limit counts every caller's",
                                                   counted.empty() ? "" : " ", counted, ")"));
}

absl::Status ErrnoError(absl::StatusCode code, absl::string_view call, int err, absl::string_view context,
                        absl::string_view field) {
  std::string msg;
  if (!field.empty()) absl::StrAppend(&msg, field, ": ");
  if (!context.empty()) absl::StrAppend(&msg, context, ": ");
  absl::StrAppend(&msg, call, ": ", std::strerror(err), " (errno ", err, ", ", ErrnoName(err), ")");
  absl::Status s(code, msg);
  s.SetPayload(kCallPayload, absl::Cord(call));
  s.SetPayload(kErrnoPayload, absl::Cord(absl::StrCat(err)));
  if (!field.empty()) s.SetPayload(kFieldPayload, absl::Cord(field));
  return s;
}

absl::Status ErrnoError(absl::string_view call, int err, absl::string_view context, absl::string_view field) {
  // errno 0 means the library failed without saying why: report it as an internal error, not as OK.
  absl::StatusCode code = err == 0 ? absl::StatusCode::kInternal : absl::ErrnoToStatusCode(err);
  return ErrnoError(code, call, err, context, field);
}

absl::Status FromReturn(absl::string_view call, int ret, absl::string_view context) {
  if (ret == 0) return absl::OkStatus();
  // Some providers return -1 and set errno instead of returning the errno value.
  return ErrnoError(call, ret < 0 ? errno : ret, context);
}

absl::Status FromRdmaCm(absl::string_view call, int ret, absl::string_view context) {
  if (ret == 0) return absl::OkStatus();
  return ErrnoError(call, errno, context);
}

absl::Status Busy(absl::string_view field, absl::string_view message) {
  absl::Status s = FailedPrecondition(field, message);
  s.SetPayload(kErrnoPayload, absl::Cord(absl::StrCat(EBUSY)));
  return s;
}

absl::Status InProgress(absl::string_view field, absl::string_view name, absl::string_view operation) {
  return FieldError(absl::StatusCode::kAborted, field,
                    absl::StrCat(name, ": ", operation, " is in progress on it; retry when it has finished"));
}

absl::Status WithField(absl::Status status, absl::string_view field) {
  if (status.ok() || field.empty() || status.GetPayload(kFieldPayload)) return status;
  absl::Status out(status.code(), absl::StrCat(field, ": ", status.message()));
  status.ForEachPayload([&out](absl::string_view key, const absl::Cord& value) { out.SetPayload(key, value); });
  out.SetPayload(kFieldPayload, absl::Cord(field));
  return out;
}

absl::Status RenameField(absl::Status status, absl::string_view field) {
  const std::string old = FieldOf(status);
  if (status.ok() || old.empty()) return WithField(std::move(status), field);
  absl::string_view message = status.message();
  const std::string prefix = absl::StrCat(old, ": ");
  if (absl::StartsWith(message, prefix)) message.remove_prefix(prefix.size());
  absl::Status out(status.code(), absl::StrCat(field, ": ", message));
  status.ForEachPayload([&out](absl::string_view key, const absl::Cord& value) { out.SetPayload(key, value); });
  out.SetPayload(kFieldPayload, absl::Cord(field));
  return out;
}

absl::Status WithContext(absl::Status status, absl::string_view context) {
  if (status.ok() || context.empty()) return status;
  absl::Status out(status.code(), absl::StrCat(context, ": ", status.message()));
  status.ForEachPayload([&out](absl::string_view key, const absl::Cord& value) { out.SetPayload(key, value); });
  return out;
}

std::string FieldOf(const absl::Status& status) { return PayloadOf(status, kFieldPayload); }
std::string CallOf(const absl::Status& status) { return PayloadOf(status, kCallPayload); }
int ErrnoOf(const absl::Status& status) {
  int v = 0;
  return absl::SimpleAtoi(PayloadOf(status, kErrnoPayload), &v) ? v : 0;
}

}  // namespace rdmad
