// The statuses of RemoteRegion's reads and writes (client/remote_region.h): what a failed completion means, and
// the rule that a region's first error is the only one its caller sees. Pure functions and a plain value
// type, so the whole table is tested on a host without RDMA (read_status_test.cc).
//
// A failed read completion, in this order:
//   IBV_WC_REM_ACCESS_ERR  outside [0, length) of the grant       OUT_OF_RANGE "refused by rdmad's NIC"
//                          an ENDED message arrived                PERMISSION_DENIED naming its reason
//                                                                  (DEADLINE_EXCEEDED if it is EXPIRED)
//                          in range, at or after the lease's end   DEADLINE_EXCEEDED "expired"
//                            (or less than clock_tolerance before it)
//                          in range, earlier                       PERMISSION_DENIED "revoked"
//   IBV_WC_RETRY_EXC_ERR, IBV_WC_RNR_RETRY_EXC_ERR, IBV_WC_WR_FLUSH_ERR
//                          an ENDED message arrived                as above (rdmad ended the grant, then
//                                                                  disconnected: that is the cause)
//                          at or after the lease's end (less the   DEADLINE_EXCEEDED "expired"
//                            clock tolerance)
//                          otherwise                               UNAVAILABLE "connection lost"
//   any other status                                               INTERNAL with ibv_wc_status_str
// A write (RDMA WRITE) is classified the same way, with one more case after the range check: an
// IBV_WC_REM_ACCESS_ERR for a write on a grant whose key gives no write access (GrantView::access without
// kGrantWrite) is PERMISSION_DENIED "gives no write access", refused by rdmad's NIC.
// A failed completion leaves the QP in the error state, so the first error is sticky (StickyError): every
// later failed completion (the flushed reads behind it) and every later Post gets that first error.
//
// Threads: stateless functions; a StickyError belongs to its RemoteRegion (one thread at a time).
#ifndef RDMAD_CLIENT_READ_STATUS_H_
#define RDMAD_CLIENT_READ_STATUS_H_

#include <infiniband/verbs.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace rdmad::client::internal {

// What a region knows about its grant when it classifies a completion.
struct GrantView {
  std::string grant;                    // "grants/9"
  uint64_t length = 0;                  // the bytes the key covers (ACTIVE's length)
  absl::Time expiry = absl::InfiniteFuture();  // the lease's end as known here
  // How far this host's clock may lag rdmad's: a failure less than this before `expiry` (by this host's
  // clock) is taken for the lease's end, since rdmad may already have passed it.
  absl::Duration clock_tolerance = absl::ZeroDuration();
  std::optional<uint8_t> ended_reason;  // set once an ENDED message arrived: its GrantEndReason
  uint32_t access = 1;                  // the key's access bits (ACTIVE): wire::kGrantRead | kGrantWrite
};

// What a work request does: read the grant (RDMA READ) or write it (RDMA WRITE).
enum class OpKind { kRead, kWrite };

// "read of 8 bytes at offset 4", "write of ...".
std::string OpName(OpKind kind, uint64_t offset, uint64_t length);

// True iff [offset, offset + length) lies within [0, granted); no overflow for any inputs.
bool InGrantedRange(uint64_t offset, uint64_t length, uint64_t granted);

// The status of a read of [offset, offset + length) whose completion failed with `status` (not
// IBV_WC_SUCCESS), classified as in the table above, at time `now`.
absl::Status ClassifyReadError(ibv_wc_status status, uint64_t offset, uint64_t length, const GrantView& grant,
                               absl::Time now, OpKind kind = OpKind::kRead);

// An ENDED message's meaning: PERMISSION_DENIED "grants/9 ended by rdmad: REVOKED", or DEADLINE_EXCEEDED
// for EXPIRED.
absl::Status EndedStatus(absl::string_view grant, uint8_t reason);

// The connection went away without a more specific cause: UNAVAILABLE "grants/9: connection lost (...)".
absl::Status ConnectionLost(absl::string_view grant, absl::string_view how);

// The connection ended (a flush, retries exceeded, a DISCONNECTED event; `how` says which): the ENDED
// message's status if one arrived, DEADLINE_EXCEEDED "expired" at or after the lease's end (less the clock
// tolerance), else ConnectionLost.
absl::Status ConnectionEnded(const GrantView& grant, absl::string_view how, absl::Time now);

// A library check refused a read (or write) before posting it: OUT_OF_RANGE.
absl::Status OutOfRangeRead(absl::string_view grant, uint64_t offset, uint64_t length, uint64_t granted,
                            OpKind kind = OpKind::kRead);

// A library check refused a write before posting it, the grant's key giving no write access (`access`, the
// ACTIVE message's bits): PERMISSION_DENIED naming the access.
absl::Status NoWriteAccess(absl::string_view grant, uint64_t offset, uint64_t length, uint32_t access);

// A failed system or rdma-core call: "<context>: <call>: <strerror> (errno N, ENAME)" with `code`.
absl::Status ErrnoStatus(absl::StatusCode code, absl::string_view context, absl::string_view call, int err);
// "EINVAL" for 22; "errno N" for a value not in the short table.
std::string ErrnoName(int err);

// A region's first error. Record keeps the first non-OK status it is given and returns the status the
// caller should see: OK stays OK, an error becomes the first error.
class StickyError {
 public:
  bool broken() const { return !first_.ok(); }
  const absl::Status& first() const { return first_; }
  absl::Status Record(absl::Status status) {
    if (status.ok()) return status;
    if (first_.ok()) first_ = std::move(status);
    return first_;
  }

 private:
  absl::Status first_;
};

// One completion of a read: OK on IBV_WC_SUCCESS; else the region's first error, which is this
// completion's classification if the region was not broken yet.
absl::Status CompleteRead(StickyError& sticky, ibv_wc_status status, uint64_t offset, uint64_t length,
                          const GrantView& grant, absl::Time now, OpKind kind = OpKind::kRead);

}  // namespace rdmad::client::internal

#endif  // RDMAD_CLIENT_READ_STATUS_H_
