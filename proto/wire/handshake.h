// The data-plane handshake's wire formats: the connection token a client sends as the private data of its
// CONNECT_REQUEST, and the private data of rdmad's rejects. docs/PROTOCOL.md is the client-facing
// description of both formats; keep the two in step. Shared by rdmad (server/cm/token.h re-exports these
// names into rdmad::cm), the client library (client/remote_region.h) and tests.
//
// Token, version 1: 32 bytes, multi-byte fields big-endian.
//   offset size  field
//        0    4  magic "RDTK" (52 44 54 4B): random or foreign private data is recognised as no token
//        4    1  version (1). Bytes 0-4 keep their meaning in every version.
//        5    1  kind: 1 connect (a PD), 2 grant (names a grant)
//        6    2  reserved, 0
//        8    8  id: the token's number, not secret ("tokens/17" in logs and APIs)
//       16   16  secret: 128 bits from getrandom(2)
// It fits the 56 bytes an RDMA_PS_TCP connect request carries over IB/RoCE, leaving 24 for later
// versions. The IB CM delivers the whole 56-byte private data area, zero-padded: decoding accepts zero
// bytes after the token (and reads an all-zero area as "missing") but nothing else.
//
// Reject private data, version 1: 16 bytes (an IB REJ carries 148; the client sees them zero-padded).
//   offset size  field
//        0    4  magic "RDRJ" (52 44 52 4A)
//        4    1  version (1)
//        5    1  reserved, 0
//        6    2  reason (RejectReason)
//        8    8  id of the rejected token, 0 when none could be read
// Bytes 0-7 keep their meaning in every version, so an older client still reads the reason.
//
// Data-plane protocol versions (docs/PROTOCOL.md#versions). Version 1 is the token alone. A client that
// speaks a later version (2: sessions, many grants on one connection) appends a version offer to the token:
//   offset size  field
//       32    4  magic "RDVR" (52 44 56 52)
//       36    1  the highest version the client speaks (2 or more)
//       37    3  reserved, 0
// rdmad answers an offer with the version it chose in its accept's private data (8 bytes, the same magic,
// then the version, then the number of requests the client may have outstanding, then 2 reserved bytes);
// an accept without it (no private data, or zeros) means version 1. rdmad honours an offer only for a grant's
// token; a connect token's connection is always version 1.
//
// Secrets never appear in DecodedToken::detail or in any status made here; only ids do. Token::secret is
// the only place that holds one.
//
// Threads: stateless functions, callable from any thread.
#ifndef RDMAD_PROTO_WIRE_HANDSHAKE_H_
#define RDMAD_PROTO_WIRE_HANDSHAKE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rdmad::wire {

// Private data limits of the IB CM for RDMA_PS_TCP (92 and 148 bytes, less rdma_cm's 36-byte header on
// the request).
inline constexpr size_t kConnectPrivateDataMax = 56;
inline constexpr size_t kRejectPrivateDataMax = 148;

inline constexpr uint8_t kTokenVersion = 1;
inline constexpr size_t kTokenSecretBytes = 16;  // 128 bits
inline constexpr size_t kTokenSize = 32;
inline constexpr uint8_t kRejectVersion = 1;
inline constexpr size_t kRejectSize = 16;

enum class TokenKind : uint8_t { kConnect = 1, kGrant = 2 };

// Why the listener refused a connection. The numbers are on the wire: never renumber or reuse one; add
// new reasons at the end. 0 is never sent (a zero-filled area is no reason).
enum class RejectReason : uint16_t {
  kMissing = 1,       // no private data (or all zeros)
  kMalformed = 2,     // not a token: wrong magic, wrong length, nonzero reserved bits, unknown kind
  kWrongVersion = 3,  // a token of a version this rdmad does not speak
  kUnknown = 4,       // well formed, but no such token (never issued, wrong secret, or forgotten)
  kExpired = 5,       // its ttl ran out
  kReplayed = 6,      // already redeemed: a token is single use
  kRevoked = 7,       // cancelled by Revoke before use
  kInternal = 8,      // rdmad failed on its side (sent by the listener, never by TokenStore)
  kOverQuota = 9,     // a good token, but its tenant is at its connections quota: retry later (the token
                      // is not used up)
  kSessionMismatch = 10,  // an ACTIVATE (version 2) whose token cannot join this connection: a connect token,
                          // or a grant on another PD than the connection's (the token is not used up)
};
// "TOKEN_EXPIRED", ...; "REASON_<n>" for a number this build does not know.
std::string RejectReasonName(RejectReason reason);

// A decoded token. `secret` is the credential: never log it.
struct Token {
  uint8_t version = kTokenVersion;
  TokenKind kind = TokenKind::kConnect;
  uint64_t id = 0;
  std::array<uint8_t, kTokenSecretBytes> secret{};
};

// Exactly kTokenSize bytes.
std::string EncodeToken(const Token& token);

// The outcome of DecodeToken: a token, or why the bytes are not one.
struct DecodedToken {
  std::optional<Token> token;
  // When !token: kMissing, kMalformed or kWrongVersion.
  RejectReason reason = RejectReason::kMalformed;
  // When !token, for logs: "truncated: 20 of 32 bytes". Never contains the bytes themselves.
  std::string detail;
  bool ok() const { return token.has_value(); }
};
DecodedToken DecodeToken(absl::string_view private_data);

struct Reject {
  RejectReason reason = RejectReason::kInternal;
  uint64_t token_id = 0;  // 0: none could be read
};
// Exactly kRejectSize bytes.
std::string EncodeReject(const Reject& reject);
// For clients, with the private data of an RDMA_CM_EVENT_REJECTED. INVALID_ARGUMENT if it is no rdmad
// reject (rejected by the CM itself, or by another listener: the area is then usually all zeros). A
// higher version is read by its first 8 bytes.
absl::StatusOr<Reject> DecodeReject(absl::string_view private_data);

// The data-plane protocol versions this build speaks: 1 and 2.
inline constexpr uint8_t kProtocolVersion = 2;
inline constexpr size_t kVersionOfferSize = 8;
inline constexpr size_t kAcceptDataSize = 8;

// A connect request's private data, split: the token's part, and the version the client offered (1 when
// there is no well-formed offer, in which case `token` is the whole private data, for DecodeToken to judge).
struct ConnectRequest {
  absl::string_view token;
  uint8_t offered = 1;
};
ConnectRequest SplitConnectRequest(absl::string_view private_data);
// A token followed by an offer of `highest` (2 or more): what a version 2 client connects with.
std::string EncodeConnectRequest(absl::string_view token, uint8_t highest);

// What rdmad's accept says, for a version it chose above 1.
struct AcceptData {
  uint8_t version = 1;
  uint8_t credits = 0;  // ACTIVATE requests the client may have outstanding at once
};
std::string EncodeAcceptData(const AcceptData& accept);
// For clients, with the private data of their ESTABLISHED: version 1 (credits 0) if it holds no accept data.
AcceptData DecodeAcceptData(absl::string_view private_data);

// "tokens/17", and back (false if `name` is not of that form with a number > 0).
std::string TokenName(uint64_t id);
bool ParseTokenName(absl::string_view name, uint64_t* id);

}  // namespace rdmad::wire

#endif  // RDMAD_PROTO_WIRE_HANDSHAKE_H_
