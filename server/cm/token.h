// Connection tokens for rdmad's rdma_cm data-plane listener, and the private data of its rejects.
// docs/PROTOCOL.md is the client-facing description of both formats; keep the two in step.
//
// A client gets a token from the control plane (IssueConnectToken) and sends it as the private data of
// its CONNECT_REQUEST. The listener hands those bytes to TokenStore::Redeem, which answers with the
// token's Claims or a RejectReason; a rejection is sent back with rdma_reject(EncodeReject(...)).
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
// The secret cannot be guessed: it is 128 uniformly random bits (getrandom(2), the kernel CSPRNG), bound
// to one id. A guess names an id and tests that token's secret only, so G guesses succeed with
// probability at most G/2^128, however many tokens are live (about 1e-29 for 10^6 guesses a second for
// an hour); each guess is a full CM round trip, and a token lives at most max_ttl and is used once. Secrets are compared in
// constant time after a lookup by id (which is not secret), so timing reveals nothing about them.
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
// Secrets never appear in logs, statuses, names or Redemption::detail; only ids do. Issued::bytes and
// Token::secret are the only places that hold one.
//
// Threads: the free functions are stateless and callable from any thread. TokenStore is thread-safe: one
// mutex (mu_) guards all its state and is held for each call; expired entries are purged at the start of
// each call from two expiry-ordered indexes, in O(log n) per purged entry, never by a scan.
#ifndef RDMAD_SERVER_CM_TOKEN_H_
#define RDMAD_SERVER_CM_TOKEN_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace rdmad::cm {

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

// "tokens/17", and back (false if `name` is not of that form with a number > 0).
std::string TokenName(uint64_t id);
bool ParseTokenName(absl::string_view name, uint64_t* id);

// What a token entitles its bearer to. Room for more fields: they live in the store, not on the wire.
struct Claims {
  std::string pd;         // required: "pds/3"
  std::string grant;      // empty for a plain connect token; set: a grant token (kind 2)
  std::string principal;  // who asked for it, for logs and audit; may be empty
};

struct Issued {
  std::string bytes;  // the token (kTokenSize bytes) to hand to the client. Holds the secret: never log.
  std::string id;     // "tokens/17"
  absl::Time expiry;
};

// The outcome of TokenStore::Redeem.
struct Redemption {
  std::optional<Claims> claims;  // set iff accepted
  RejectReason reason = RejectReason::kInternal;  // when !accepted()
  uint64_t token_id = 0;         // the id the private data named, 0 if it did not decode
  std::string detail;            // when !accepted(), for logs; never contains the secret
  bool accepted() const { return claims.has_value(); }
  Reject reject() const { return Reject{reason, token_id}; }
};

class TokenStore {
 public:
  struct Options {
    // Tokens issued and neither redeemed, revoked nor expired. Issue beyond it: RESOURCE_EXHAUSTED.
    size_t max_outstanding = 65536;
    // Longest ttl Issue accepts.
    absl::Duration max_ttl = absl::Hours(1);
    // How long a finished (redeemed, revoked or expired) token is remembered after its expiry, so that
    // it is rejected as REPLAYED / REVOKED / EXPIRED rather than UNKNOWN.
    absl::Duration grace = absl::Minutes(10);
    // Hard bound on remembered finished tokens; beyond it the ones due to be dropped first are dropped
    // early (they then read as UNKNOWN: still rejected).
    size_t max_finished = 4 * 65536;
    // Called with the store's mutex held: must not call back into the store.
    std::function<absl::Time()> clock = [] { return absl::Now(); };
  };

  struct Counters {
    uint64_t issued = 0;
    uint64_t redeemed = 0;
    uint64_t revoked = 0;
    uint64_t expired = 0;  // outstanding tokens whose ttl ran out unused
    std::map<RejectReason, uint64_t> rejected;  // by reason; reasons never seen are absent
  };

  TokenStore() : TokenStore(Options()) {}
  explicit TokenStore(Options options);
  TokenStore(const TokenStore&) = delete;
  TokenStore& operator=(const TokenStore&) = delete;

  // A new single-use token for `claims`, valid for `ttl`. INVALID_ARGUMENT on "pd" (empty) or "ttl"
  // (not in (0, max_ttl]); RESOURCE_EXHAUSTED at max_outstanding; getrandom(2) failing: its errno.
  absl::StatusOr<Issued> Issue(Claims claims, absl::Duration ttl);

  // Checks a connect request's private data and, if it holds a live token, uses the token up.
  Redemption Redeem(absl::string_view private_data);

  // Cancels an outstanding token ("tokens/17"). INVALID_ARGUMENT on "name" if malformed, NOT_FOUND if
  // not remembered, FAILED_PRECONDITION if already redeemed, revoked or expired.
  absl::Status Revoke(absl::string_view name);

  size_t Outstanding();
  Counters GetCounters();

 private:
  enum class State { kOutstanding, kRedeemed, kRevoked, kExpired };
  struct Entry {
    std::array<uint8_t, kTokenSecretBytes> secret{};
    TokenKind kind = TokenKind::kConnect;
    State state = State::kOutstanding;
    absl::Time expiry;
    Claims claims;  // cleared once finished
  };
  using Index = std::set<std::pair<absl::Time, uint64_t>>;

  // Expires outstanding tokens whose expiry has come and forgets finished ones past their grace.
  void PurgeLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves an outstanding entry to `state` and into finished_, keeping finished_ within max_finished.
  void FinishLocked(uint64_t id, Entry& entry, State state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropFirstFinishedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Redemption RejectLocked(RejectReason reason, uint64_t id, std::string detail)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::unordered_map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  Index outstanding_ ABSL_GUARDED_BY(mu_);  // (expiry, id) of outstanding entries
  Index finished_ ABSL_GUARDED_BY(mu_);     // (expiry + grace, id) of finished entries
  Counters counters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rdmad::cm

#endif  // RDMAD_SERVER_CM_TOKEN_H_
