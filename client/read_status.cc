#include "client/read_status.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "proto/wire/grant_message.h"

namespace rdmad::client::internal {
namespace {

// GrantEndReason END_EXPIRED (rdmad.v1).
constexpr uint8_t kEndExpired = 2;

std::string AccessText(uint32_t access) {
  std::string text;
  if (access & wire::kGrantRead) text = "REMOTE_READ";
  if (access & wire::kGrantWrite) absl::StrAppend(&text, text.empty() ? "" : ", ", "REMOTE_WRITE");
  return text.empty() ? "none" : text;
}

// True if a failure at `now` (this host's clock) is at the lease's end: at or after it, or so little before
// it that rdmad's clock may already have passed it.
bool AtLeaseEnd(const GrantView& grant, absl::Time now) { return now >= grant.expiry - grant.clock_tolerance; }

// "at or after the lease's end (T)", or "3.2ms before the lease's end (T) by this host's clock, within the
// clock tolerance of 100ms".
std::string WhenAtLeaseEnd(const GrantView& grant, absl::Time now) {
  const std::string end = absl::StrCat("the lease's end (", absl::FormatTime(grant.expiry), ")");
  if (now >= grant.expiry) return absl::StrCat("at or after ", end);
  return absl::StrCat(absl::FormatDuration(grant.expiry - now), " before ", end,
                      " by this host's clock, within the clock tolerance of ",
                      absl::FormatDuration(grant.clock_tolerance));
}

}  // namespace

std::string OpName(OpKind kind, uint64_t offset, uint64_t length) {
  return absl::StrCat(kind == OpKind::kWrite ? "write" : "read", " of ", length, " bytes at offset ", offset);
}

absl::Status NoWriteAccess(absl::string_view grant, uint64_t offset, uint64_t length, uint32_t access) {
  return absl::PermissionDeniedError(absl::StrCat(
      grant, ": ", OpName(OpKind::kWrite, offset, length), ": the grant gives no write access (access: ",
      AccessText(access), "; issue it with REMOTE_WRITE) (refused by the library, not posted)"));
}

bool InGrantedRange(uint64_t offset, uint64_t length, uint64_t granted) {
  return offset <= granted && length <= granted - offset;
}

absl::Status EndedStatus(absl::string_view grant, uint8_t reason) {
  if (reason == kEndExpired) {
    return absl::DeadlineExceededError(absl::StrCat(grant, " expired (rdmad ended it: EXPIRED)"));
  }
  return absl::PermissionDeniedError(
      absl::StrCat(grant, " ended by rdmad: ", wire::GrantEndReasonName(reason)));
}

absl::Status ConnectionLost(absl::string_view grant, absl::string_view how) {
  return absl::UnavailableError(absl::StrCat(grant, ": connection lost (", how, ")"));
}

absl::Status ConnectionEnded(const GrantView& grant, absl::string_view how, absl::Time now) {
  if (grant.ended_reason) return EndedStatus(grant.grant, *grant.ended_reason);
  if (AtLeaseEnd(grant, now)) {
    return absl::DeadlineExceededError(
        absl::StrCat(grant.grant, " expired: the connection ended (", how, ") ", WhenAtLeaseEnd(grant, now)));
  }
  return ConnectionLost(grant.grant, how);
}

absl::Status OutOfRangeRead(absl::string_view grant, uint64_t offset, uint64_t length, uint64_t granted,
                            OpKind kind) {
  return absl::OutOfRangeError(absl::StrCat(grant, ": ", OpName(kind, offset, length),
                                            " is outside the granted range of ", granted,
                                            " bytes (refused by the library, not posted)"));
}

absl::Status ClassifyReadError(ibv_wc_status status, uint64_t offset, uint64_t length, const GrantView& grant,
                               absl::Time now, OpKind kind) {
  switch (status) {
    case IBV_WC_REM_ACCESS_ERR:
      if (!InGrantedRange(offset, length, grant.length)) {
        return absl::OutOfRangeError(absl::StrCat(grant.grant, ": ", OpName(kind, offset, length),
                                                  " is outside the granted range of ", grant.length,
                                                  " bytes: refused by rdmad's NIC"));
      }
      if (kind == OpKind::kWrite && !(grant.access & wire::kGrantWrite)) {
        return absl::PermissionDeniedError(absl::StrCat(grant.grant, ": ", OpName(kind, offset, length),
                                                        ": the grant gives no write access (access: ",
                                                        AccessText(grant.access), "): refused by rdmad's NIC"));
      }
      if (grant.ended_reason) return EndedStatus(grant.grant, *grant.ended_reason);
      if (AtLeaseEnd(grant, now)) {
        return absl::DeadlineExceededError(
            absl::StrCat(grant.grant, " expired: the key was refused by rdmad's NIC ", WhenAtLeaseEnd(grant, now)));
      }
      return absl::PermissionDeniedError(
          absl::StrCat(grant.grant, " revoked: the key was refused by rdmad's NIC"));
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR:
    case IBV_WC_WR_FLUSH_ERR:
      return ConnectionEnded(grant, ibv_wc_status_str(status), now);
    default:
      return absl::InternalError(absl::StrCat(grant.grant, ": ", OpName(kind, offset, length), " failed: ",
                                              ibv_wc_status_str(status), " (ibv_wc_status ",
                                              static_cast<int>(status), ")"));
  }
}

absl::Status CompleteRead(StickyError& sticky, ibv_wc_status status, uint64_t offset, uint64_t length,
                          const GrantView& grant, absl::Time now, OpKind kind) {
  if (status == IBV_WC_SUCCESS) return absl::OkStatus();
  if (sticky.broken()) return sticky.first();
  return sticky.Record(ClassifyReadError(status, offset, length, grant, now, kind));
}

std::string ErrnoName(int err) {
  switch (err) {
#define RDMAD_CLIENT_ERRNO(e) \
  case e:                     \
    return #e;
    RDMAD_CLIENT_ERRNO(EPERM) RDMAD_CLIENT_ERRNO(ENOENT) RDMAD_CLIENT_ERRNO(EINTR) RDMAD_CLIENT_ERRNO(EIO)
    RDMAD_CLIENT_ERRNO(ENXIO) RDMAD_CLIENT_ERRNO(EBADF) RDMAD_CLIENT_ERRNO(EAGAIN) RDMAD_CLIENT_ERRNO(ENOMEM)
    RDMAD_CLIENT_ERRNO(EACCES) RDMAD_CLIENT_ERRNO(EFAULT) RDMAD_CLIENT_ERRNO(EBUSY) RDMAD_CLIENT_ERRNO(EEXIST)
    RDMAD_CLIENT_ERRNO(ENODEV) RDMAD_CLIENT_ERRNO(EINVAL) RDMAD_CLIENT_ERRNO(EMFILE) RDMAD_CLIENT_ERRNO(ENOSPC)
    RDMAD_CLIENT_ERRNO(ENOSYS) RDMAD_CLIENT_ERRNO(EPROTO) RDMAD_CLIENT_ERRNO(EOPNOTSUPP)
    RDMAD_CLIENT_ERRNO(EADDRNOTAVAIL) RDMAD_CLIENT_ERRNO(ENETUNREACH) RDMAD_CLIENT_ERRNO(ECONNRESET)
    RDMAD_CLIENT_ERRNO(ETIMEDOUT) RDMAD_CLIENT_ERRNO(ECONNREFUSED) RDMAD_CLIENT_ERRNO(EHOSTUNREACH)
    RDMAD_CLIENT_ERRNO(ECANCELED)
#undef RDMAD_CLIENT_ERRNO
    default:
      return absl::StrCat("errno ", err);
  }
}

absl::Status ErrnoStatus(absl::StatusCode code, absl::string_view context, absl::string_view call, int err) {
  std::string message;
  if (!context.empty()) absl::StrAppend(&message, context, ": ");
  absl::StrAppend(&message, call, ": ", std::strerror(err), " (errno ", err, ", ", ErrnoName(err), ")");
  return absl::Status(code, message);
}

}  // namespace rdmad::client::internal
