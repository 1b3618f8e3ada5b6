// Unit tests of client/read_status.h, on the host (no RDMA device): the classification of failed read
// completions, the range check at its edges, and the rule that a region's first error is sticky.
#include "client/read_status.h"

#include <cerrno>
#include <cstdint>
#include <limits>
#include <optional>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/time/time.h"

namespace rdmad::client::internal {
namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

const absl::Time kExpiry = absl::FromUnixSeconds(1'700'000'000);
const absl::Time kBefore = kExpiry - absl::Seconds(1);
const absl::Time kAfter = kExpiry + absl::Seconds(1);

GrantView Grant(std::optional<uint8_t> ended = std::nullopt) {
  GrantView g;
  g.grant = "grants/9";
  g.length = 4096;
  g.expiry = kExpiry;
  g.ended_reason = ended;
  return g;
}

void ExpectStatus(const absl::Status& s, absl::StatusCode code, absl::string_view text) {
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), text)) << s << " should contain: " << text;
  EXPECT_TRUE(absl::StrContains(s.message(), "grants/9")) << s;
}

TEST(InGrantedRange, EdgesAndOverflow) {
  EXPECT_TRUE(InGrantedRange(0, 4096, 4096));
  EXPECT_TRUE(InGrantedRange(4095, 1, 4096));
  EXPECT_TRUE(InGrantedRange(4096, 0, 4096));
  EXPECT_FALSE(InGrantedRange(4096, 1, 4096));
  EXPECT_FALSE(InGrantedRange(0, 4097, 4096));
  EXPECT_FALSE(InGrantedRange(4097, 0, 4096));
  // offset + length wraps around to a small number: still outside.
  EXPECT_FALSE(InGrantedRange(kMax, 2, 4096));
  EXPECT_FALSE(InGrantedRange(2, kMax, 4096));
  EXPECT_TRUE(InGrantedRange(1, kMax - 1, kMax));
  EXPECT_FALSE(InGrantedRange(1, kMax, kMax));
}

TEST(ClassifyReadError, RemoteAccessOutsideTheRangeIsOutOfRange) {
  // Out of range wins over everything else: the lease, an ENDED message.
  for (absl::Time now : {kBefore, kAfter}) {
    for (std::optional<uint8_t> ended : {std::optional<uint8_t>(), std::optional<uint8_t>(1)}) {
      ExpectStatus(ClassifyReadError(IBV_WC_REM_ACCESS_ERR, 4000, 100, Grant(ended), now),
                   absl::StatusCode::kOutOfRange, "refused by rdmad's NIC");
      ExpectStatus(ClassifyReadError(IBV_WC_REM_ACCESS_ERR, kMax, 2, Grant(ended), now),
                   absl::StatusCode::kOutOfRange, "outside the granted range of 4096 bytes");
    }
  }
}

TEST(ClassifyReadError, RemoteAccessInRangeBeforeTheLeaseEndIsRevoked) {
  ExpectStatus(ClassifyReadError(IBV_WC_REM_ACCESS_ERR, 0, 4096, Grant(), kBefore),
               absl::StatusCode::kPermissionDenied, "grants/9 revoked: the key was refused by rdmad's NIC");
}

TEST(ClassifyReadError, RemoteAccessInRangeAtOrAfterTheLeaseEndIsExpired) {
  for (absl::Time now : {kExpiry, kAfter}) {
    ExpectStatus(ClassifyReadError(IBV_WC_REM_ACCESS_ERR, 0, 1, Grant(), now),
                 absl::StatusCode::kDeadlineExceeded, "grants/9 expired");
  }
}

TEST(ClassifyReadError, ARefusalWithinTheClockToleranceBeforeTheEndIsExpired) {
  // This host's clock may lag rdmad's: rdmad killed the key at its lease's end, which here is still a little
  // ahead. Within the tolerance that is the expiry; beyond it, a revocation. The message says by how much.
  GrantView g = Grant();
  g.clock_tolerance = absl::Milliseconds(100);
  const absl::Status near = ClassifyReadError(IBV_WC_REM_ACCESS_ERR, 0, 1, g, kExpiry - absl::Milliseconds(3));
  ExpectStatus(near, absl::StatusCode::kDeadlineExceeded, "grants/9 expired: the key was refused by rdmad's NIC 3ms "
                                                          "before the lease's end");
  EXPECT_TRUE(absl::StrContains(near.message(), "within the clock tolerance of 100ms")) << near;
  ExpectStatus(ClassifyReadError(IBV_WC_REM_ACCESS_ERR, 0, 1, g, kExpiry - absl::Milliseconds(100)),
               absl::StatusCode::kDeadlineExceeded, "expired");
  ExpectStatus(ClassifyReadError(IBV_WC_REM_ACCESS_ERR, 0, 1, g, kExpiry - absl::Milliseconds(101)),
               absl::StatusCode::kPermissionDenied, "revoked");
  // The same for a connection that ends.
  ExpectStatus(ConnectionEnded(g, "rdmad disconnected", kExpiry - absl::Milliseconds(50)),
               absl::StatusCode::kDeadlineExceeded, "expired: the connection ended (rdmad disconnected) 50ms before");
  ExpectStatus(ConnectionEnded(g, "rdmad disconnected", kExpiry - absl::Milliseconds(150)),
               absl::StatusCode::kUnavailable, "connection lost");
  // No tolerance: strictly at or after the end.
  ExpectStatus(ClassifyReadError(IBV_WC_REM_ACCESS_ERR, 0, 1, Grant(), kExpiry - absl::Nanoseconds(1)),
               absl::StatusCode::kPermissionDenied, "revoked");
}

TEST(ClassifyReadError, AnEndedMessageNamesTheReason) {
  // REVOKED (1) before the lease's end, and MR_DEREGISTERED (4) even after it: the message says why.
  ExpectStatus(ClassifyReadError(IBV_WC_REM_ACCESS_ERR, 0, 1, Grant(1), kBefore),
               absl::StatusCode::kPermissionDenied, "REVOKED");
  ExpectStatus(ClassifyReadError(IBV_WC_REM_ACCESS_ERR, 0, 1, Grant(4), kAfter),
               absl::StatusCode::kPermissionDenied, "MR_DEREGISTERED");
  // EXPIRED (2) is DEADLINE_EXCEEDED, even if the client's clock says the lease has not ended.
  ExpectStatus(ClassifyReadError(IBV_WC_REM_ACCESS_ERR, 0, 1, Grant(2), kBefore),
               absl::StatusCode::kDeadlineExceeded, "expired");
}

TEST(ClassifyReadError, TransportErrorsAndFlushesAreConnectionLost) {
  for (ibv_wc_status st : {IBV_WC_RETRY_EXC_ERR, IBV_WC_RNR_RETRY_EXC_ERR, IBV_WC_WR_FLUSH_ERR}) {
    ExpectStatus(ClassifyReadError(st, 0, 1, Grant(), kBefore), absl::StatusCode::kUnavailable,
                 "connection lost");
    // Even out of range: that is only known from a remote access error.
    ExpectStatus(ClassifyReadError(st, 5000, 1, Grant(), kBefore), absl::StatusCode::kUnavailable,
                 "connection lost");
    // rdmad ended the grant and then disconnected: the ENDED message is the cause.
    ExpectStatus(ClassifyReadError(st, 0, 1, Grant(6), kBefore), absl::StatusCode::kPermissionDenied,
                 "PD_DELETED");
  }
}

TEST(ClassifyReadError, AConnectionEndingAtOrAfterTheLeaseEndIsExpired) {
  // The ENDED message can be lost with the connection (rdmad's QP went to the error state before its SEND
  // left): past the lease's end the grant is over whatever the wire said, and a retry would not help.
  for (ibv_wc_status st : {IBV_WC_RETRY_EXC_ERR, IBV_WC_RNR_RETRY_EXC_ERR, IBV_WC_WR_FLUSH_ERR}) {
    for (absl::Time now : {kExpiry, kAfter}) {
      const absl::Status s = ClassifyReadError(st, 0, 1, Grant(), now);
      ExpectStatus(s, absl::StatusCode::kDeadlineExceeded, "grants/9 expired: the connection ended (");
      EXPECT_TRUE(absl::StrContains(s.message(), ibv_wc_status_str(st))) << s;
    }
    // An ENDED message still names the cause: revoked after the lease's end (its renewal not yet seen here).
    ExpectStatus(ClassifyReadError(st, 0, 1, Grant(1), kAfter), absl::StatusCode::kPermissionDenied, "REVOKED");
  }
}

TEST(ConnectionEnded, DisconnectedBeforeAtAndAfterTheLeaseEnd) {
  ExpectStatus(ConnectionEnded(Grant(), "rdmad disconnected", kBefore), absl::StatusCode::kUnavailable,
               "grants/9: connection lost (rdmad disconnected)");
  ExpectStatus(ConnectionEnded(Grant(), "rdmad disconnected", kExpiry), absl::StatusCode::kDeadlineExceeded,
               "expired: the connection ended (rdmad disconnected) at or after the lease's end");
  ExpectStatus(ConnectionEnded(Grant(2), "rdmad disconnected", kBefore), absl::StatusCode::kDeadlineExceeded,
               "EXPIRED");
}

TEST(ClassifyReadError, AnythingElseIsInternalWithTheVerbsName) {
  for (ibv_wc_status st : {IBV_WC_LOC_PROT_ERR, IBV_WC_LOC_LEN_ERR, IBV_WC_REM_INV_REQ_ERR, IBV_WC_FATAL_ERR}) {
    const absl::Status s = ClassifyReadError(st, 0, 1, Grant(1), kAfter);
    ExpectStatus(s, absl::StatusCode::kInternal, ibv_wc_status_str(st));
  }
}

TEST(EndedStatus, ReasonsAndUnknownNumbers) {
  ExpectStatus(EndedStatus("grants/9", 1), absl::StatusCode::kPermissionDenied, "grants/9 ended by rdmad: REVOKED");
  ExpectStatus(EndedStatus("grants/9", 8), absl::StatusCode::kPermissionDenied, "SHUTDOWN");
  ExpectStatus(EndedStatus("grants/9", 200), absl::StatusCode::kPermissionDenied, "REASON_200");
  ExpectStatus(EndedStatus("grants/9", 2), absl::StatusCode::kDeadlineExceeded, "grants/9 expired");
}

TEST(StickyError, TheFirstErrorIsTheOnlyOneSeen) {
  StickyError sticky;
  EXPECT_FALSE(sticky.broken());
  GrantView g = Grant();
  // Successes before the error (completed ahead of it on the send queue) stay successes.
  EXPECT_TRUE(CompleteRead(sticky, IBV_WC_SUCCESS, 0, 1, g, kBefore).ok());
  EXPECT_FALSE(sticky.broken());

  const absl::Status first = CompleteRead(sticky, IBV_WC_REM_ACCESS_ERR, 0, 1, g, kBefore);
  ExpectStatus(first, absl::StatusCode::kPermissionDenied, "revoked");
  EXPECT_TRUE(sticky.broken());
  EXPECT_EQ(sticky.first(), first);

  // The reads behind it are flushed: they get the first error, not "connection lost".
  EXPECT_EQ(CompleteRead(sticky, IBV_WC_WR_FLUSH_ERR, 0, 1, g, kBefore), first);
  // Nor does anything learnt later change it: an ENDED message, the lease running out, another status.
  g.ended_reason = 2;
  EXPECT_EQ(CompleteRead(sticky, IBV_WC_REM_ACCESS_ERR, 0, 1, g, kAfter), first);
  EXPECT_EQ(CompleteRead(sticky, IBV_WC_RETRY_EXC_ERR, 0, 1, g, kAfter), first);
  EXPECT_EQ(sticky.Record(absl::UnavailableError("disconnected")), first);
  EXPECT_TRUE(sticky.Record(absl::OkStatus()).ok());
  EXPECT_EQ(sticky.first(), first);
}

TEST(StickyError, AFlushWithNoEarlierErrorIsConnectionLostAndSticks) {
  StickyError sticky;
  const absl::Status first = CompleteRead(sticky, IBV_WC_WR_FLUSH_ERR, 0, 1, Grant(), kBefore);
  ExpectStatus(first, absl::StatusCode::kUnavailable, "connection lost");
  EXPECT_EQ(CompleteRead(sticky, IBV_WC_REM_ACCESS_ERR, 9999, 1, Grant(), kBefore), first);
}

// Writes: the same table, with "write" in the message, and a refused key on a grant without write access is
// that, not a revocation. Out of range still comes first.
TEST(ClassifyWriteError, ARemoteAccessErrorOnAReadOnlyGrantIsNoWriteAccess) {
  GrantView read_only = Grant();
  read_only.access = 1;  // kGrantRead
  ExpectStatus(ClassifyReadError(IBV_WC_REM_ACCESS_ERR, 0, 8, read_only, kBefore, OpKind::kWrite),
               absl::StatusCode::kPermissionDenied, "write of 8 bytes at offset 0: the grant gives no write access");
  ExpectStatus(ClassifyReadError(IBV_WC_REM_ACCESS_ERR, 0, 8, read_only, kBefore, OpKind::kWrite),
               absl::StatusCode::kPermissionDenied, "refused by rdmad's NIC");
  // Even at the lease's end or after ENDED: the key never allowed it.
  read_only.ended_reason = 2;
  ExpectStatus(ClassifyReadError(IBV_WC_REM_ACCESS_ERR, 0, 8, read_only, kAfter, OpKind::kWrite),
               absl::StatusCode::kPermissionDenied, "no write access");
  ExpectStatus(ClassifyReadError(IBV_WC_REM_ACCESS_ERR, 4095, 2, read_only, kBefore, OpKind::kWrite),
               absl::StatusCode::kOutOfRange, "write of 2 bytes at offset 4095 is outside the granted range");
  // A read on the same grant is still a revocation.
  ExpectStatus(ClassifyReadError(IBV_WC_REM_ACCESS_ERR, 0, 8, Grant(), kBefore), absl::StatusCode::kPermissionDenied,
               "revoked");
}

TEST(ClassifyWriteError, AWriteGrantsRefusedKeyIsRevokedOrExpiredLikeARead) {
  GrantView writable = Grant();
  writable.access = 3;  // kGrantRead | kGrantWrite
  ExpectStatus(ClassifyReadError(IBV_WC_REM_ACCESS_ERR, 0, 8, writable, kBefore, OpKind::kWrite),
               absl::StatusCode::kPermissionDenied, "revoked");
  ExpectStatus(ClassifyReadError(IBV_WC_REM_ACCESS_ERR, 0, 8, writable, kAfter, OpKind::kWrite),
               absl::StatusCode::kDeadlineExceeded, "expired");
  ExpectStatus(ClassifyReadError(IBV_WC_RETRY_EXC_ERR, 0, 8, writable, kBefore, OpKind::kWrite),
               absl::StatusCode::kUnavailable, "connection lost");
  ExpectStatus(ClassifyReadError(IBV_WC_LOC_LEN_ERR, 0, 8, writable, kBefore, OpKind::kWrite),
               absl::StatusCode::kInternal, "write of 8 bytes");
  StickyError sticky;
  ExpectStatus(CompleteRead(sticky, IBV_WC_REM_ACCESS_ERR, 0, 8, writable, kBefore, OpKind::kWrite),
               absl::StatusCode::kPermissionDenied, "revoked");
}

TEST(NoWriteAccess, NamesTheAccessAndTheLibrary) {
  const absl::Status s = NoWriteAccess("grants/9", 16, 4, 1);
  ExpectStatus(s, absl::StatusCode::kPermissionDenied, "write of 4 bytes at offset 16");
  EXPECT_TRUE(absl::StrContains(s.message(), "access: REMOTE_READ;")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "REMOTE_WRITE")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "refused by the library")) << s;
  ExpectStatus(OutOfRangeRead("grants/9", 4096, 1, 4096, OpKind::kWrite), absl::StatusCode::kOutOfRange,
               "write of 1 bytes at offset 4096 is outside");
}

TEST(ErrnoStatus, KeepsCallErrnoAndName) {
  const absl::Status s = ErrnoStatus(absl::StatusCode::kUnavailable, "grants/9", "rdma_post_read", EINVAL);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(s.message(), "grants/9: rdma_post_read: ")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "(errno 22, EINVAL)")) << s;
  EXPECT_EQ(ErrnoName(123456), "errno 123456");
}

}  // namespace
}  // namespace rdmad::client::internal
