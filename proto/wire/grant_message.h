// The grant message: what rdmad sends a client on a grant's data-plane connection (docs/PROTOCOL.md#grant-messages).
// Shared by rdmad (server/grants/), the client library (client/remote_region.h) and tests; any rdma-core
// client can implement it from docs/PROTOCOL.md alone.
//
// rdmad sends at most two messages on a grant connection, each as one SEND of kGrantMessageSize bytes,
// so a client posts two receive buffers of at least that size before it connects:
//   1. ACTIVE, once the window over the granted range is bound on the client's QP (its completion was
//      polled): the key. Or FAILED, if rdmad could not bind it, or ENDED, if the grant ended while its key
//      was being bound; rdmad then disconnects.
//   2. ENDED, after the key died at the NIC (revoked, expired, the MR deregistered, ...): the reason.
//      rdmad then disconnects. Best effort: not sent when the QP is already in the error state.
//
// Layout, version 1: 48 bytes, multi-byte fields big-endian.
//   offset size  field
//        0    4  magic "RDGM" (52 44 47 4D)
//        4    1  version (1). Bytes 0-4 keep their meaning in every version.
//        5    1  type: 1 ACTIVE, 2 ENDED, 3 FAILED
//        6    1  scope: 1 QP (type 2 window), 2 PD (type 1 window), 3 MR (the MR's own rkey)
//        7    1  reason (ENDED, FAILED): a GrantEndReason number of rdmad.v1; 0 in ACTIVE
//        8    8  grant id (grants/<id>)
//       16    8  remote_addr: what the client puts in rdma_post_read's remote_addr for the first byte
//       24    8  length: the bytes the key covers, from remote_addr
//       32    4  rkey
//       36    4  access: bit 0 REMOTE_READ, bit 1 REMOTE_WRITE
//       40    8  expiry, Unix time in nanoseconds (signed): the lease's end when the message was sent
// ENDED and FAILED carry the grant id and the reason; the key fields are 0.
//
// Version 2 (a session: many grants on one connection, docs/PROTOCOL.md#sessions): 64 bytes, the first 48
// laid out as in version 1 (version byte 2), then
//       48    8  tag: the client's, echoed from the ACTIVATE this answers; 0 for the connect request's grant
//       56    8  token id (tokens/<id>): the token the grant was activated with (REFUSED: the one presented)
// and three more types: 4 REFUSED (rdmad refused an ACTIVATE or a RELEASE: the reason byte is a
// RejectReason of handshake.h, the grant id 0), 5 ACTIVATE (client to rdmad: bytes 8-15 zero, 16-47 the
// grant's token, the tag at 48, 56-63 zero) and 6 RELEASE (client to rdmad: bytes 8-15 the grant id, the
// tag at 48, the rest zero: the client is done with that grant).
//
// Threads: stateless functions.
#ifndef RDMAD_PROTO_WIRE_GRANT_MESSAGE_H_
#define RDMAD_PROTO_WIRE_GRANT_MESSAGE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rdmad::wire {

inline constexpr size_t kGrantMessageSize = 48;
inline constexpr uint8_t kGrantMessageVersion = 1;
inline constexpr size_t kSessionMessageSize = 64;  // version 2
inline constexpr uint8_t kSessionMessageVersion = 2;

enum class GrantMessageType : uint8_t {
  kActive = 1,
  kEnded = 2,
  kFailed = 3,
  kRefused = 4,
  kActivate = 5,
  kRelease = 6,
};
enum class GrantKeyScope : uint8_t { kQp = 1, kPd = 2, kMr = 3 };

inline constexpr uint32_t kGrantRead = 1;
inline constexpr uint32_t kGrantWrite = 2;

struct GrantMessage {
  GrantMessageType type = GrantMessageType::kActive;
  GrantKeyScope scope = GrantKeyScope::kQp;
  uint8_t reason = 0;  // rdmad.v1.GrantEndReason
  uint64_t grant_id = 0;
  uint64_t remote_addr = 0;
  uint64_t length = 0;
  uint32_t rkey = 0;
  uint32_t access = 0;
  int64_t expiry_unix_nanos = 0;
  // Version 2 (version >= 2 on decoding).
  uint8_t version = kGrantMessageVersion;
  uint64_t tag = 0;
  uint64_t token_id = 0;
  std::string token;  // ACTIVATE: the token's 32 bytes (holds its secret: never log)
};

// Exactly kGrantMessageSize bytes for version 1 (ACTIVE, ENDED and FAILED only; the version 2 fields are
// not sent), kSessionMessageSize for version 2.
std::string EncodeGrantMessage(const GrantMessage& message);
// INVALID_ARGUMENT naming what is wrong (short, wrong magic, unknown type or scope, an ACTIVATE or REFUSED
// of version 1). A message of version 2 or later is read with its version 2 fields, and must be
// kSessionMessageSize bytes long at least; bytes after those are ignored.
absl::StatusOr<GrantMessage> DecodeGrantMessage(absl::string_view bytes);

// "ACTIVE", "ENDED", "FAILED", "REFUSED", "ACTIVATE", "RELEASE".
const char* GrantMessageTypeName(GrantMessageType type);
// "REVOKED", "EXPIRED", "DISCONNECTED", ... (GrantEndReason without its END_ prefix); "REASON_<n>" else.
std::string GrantEndReasonName(uint8_t reason);

}  // namespace rdmad::wire

#endif  // RDMAD_PROTO_WIRE_GRANT_MESSAGE_H_
