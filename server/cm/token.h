// Connection tokens for rdmad's rdma_cm data-plane listener: the TokenStore that issues and redeems them.
// The wire formats (the token, the reject's private data) and their stateless codec live in
// proto/wire/handshake.h, shared with clients; this header re-exports those names into rdmad::cm.
// docs/PROTOCOL.md is the client-facing description of both formats; keep the two in step.
//
// A client gets a token from the control plane (IssueConnectToken) and sends it as the private data of
// its CONNECT_REQUEST. The listener hands those bytes to TokenStore::Redeem, which answers with the
// token's Claims or a RejectReason; a rejection is sent back with rdma_reject(EncodeReject(...)).
//
// The secret cannot be guessed: it is 128 uniformly random bits (getrandom(2), the kernel CSPRNG), bound
// to one id. A guess names an id and tests that token's secret only, so G guesses succeed with
// probability at most G/2^128, however many tokens are live (about 1e-29 for 10^6 guesses a second for
// an hour); each guess is a full CM round trip, and a token lives at most max_ttl and is used once. Secrets are compared in
// constant time after a lookup by id (which is not secret), so timing reveals nothing about them.
//
// Secrets never appear in logs, statuses, names or Redemption::detail; only ids do. Issued::bytes and
// Token::secret are the only places that hold one.
//
// Threads: the re-exported codec functions are stateless and callable from any thread. TokenStore is
// thread-safe: one mutex (mu_) guards all its state and is held for each call; expired entries are purged
// at the start of each call from two expiry-ordered indexes, in O(log n) per purged entry, never by a scan.
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
#include "server/common/sync.h"
#include "absl/time/time.h"
#include "proto/wire/handshake.h"
#include "proto/wire/wall_clock.h"
#include "server/state/names.h"

namespace rdmad::cm {

// The handshake codec (proto/wire/handshake.h), under its old names.
using wire::DecodedToken;
using wire::DecodeReject;
using wire::DecodeToken;
using wire::EncodeReject;
using wire::EncodeToken;
using wire::kConnectPrivateDataMax;
using wire::kRejectPrivateDataMax;
using wire::kRejectSize;
using wire::kRejectVersion;
using wire::kTokenSecretBytes;
using wire::kTokenSize;
using wire::kTokenVersion;
using wire::ParseTokenName;
using wire::Reject;
using wire::RejectReason;
using wire::RejectReasonName;
using wire::Token;
using wire::TokenKind;
using wire::TokenName;

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
    // Tokens issued and neither redeemed, revoked nor expired, of every caller (config limits.tokens). Issue
    // beyond it: RESOURCE_EXHAUSTED "limit tokens of rdmad: limit N, in use N; ...".
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
    std::function<absl::Time()> clock = [] { return wire::WallNow(); };  // not absl::Now(): see wall_clock.h
    // The crash-safe state store (not owned; may be null): token ids are never reused across restarts
    // (a token of the previous run then reads as UNKNOWN, never as another token).
    state::Store* state = nullptr;
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
  // Issue's refusals (the same errors), without issuing: a grant's validate_only.
  absl::Status CheckIssue(const Claims& claims, absl::Duration ttl);

  // Checks a connect request's private data and, if it holds a live token, uses the token up.
  Redemption Redeem(absl::string_view private_data);
  // What Redeem would answer, without redeeming (a rejection is counted as Redeem's would be). The
  // listener peeks, asks the tenant's connections quota, then redeems (which checks everything again).
  Redemption Peek(absl::string_view private_data);

  // Cancels an outstanding token ("tokens/17"). INVALID_ARGUMENT on "name" if malformed, NOT_FOUND if
  // not remembered, FAILED_PRECONDITION if already redeemed, revoked or expired.
  absl::Status Revoke(absl::string_view name);

  // Revokes the outstanding tokens whose claims match (DeletePd: the tokens on that PD); how many.
  size_t RevokeWhere(const std::function<bool(const Claims&)>& match);

  size_t Outstanding();
  // Outstanding tokens whose claims match (metrics: tokens per tenant). O(outstanding).
  size_t Outstanding(const std::function<bool(const Claims&)>& match);
  // Outstanding tokens on one PD (a tenant's tokens quota), from a running count: O(log n).
  size_t OutstandingOnPd(const std::string& pd);
  Counters GetCounters();

 private:
  enum class State { kOutstanding, kRedeemed, kRevoked, kExpired };
  struct Entry {
    std::array<uint8_t, kTokenSecretBytes> secret{};
    TokenKind kind = TokenKind::kConnect;
    State state = State::kOutstanding;
    absl::Time expiry;
    Claims claims;  // cleared once finished
    std::string pd;  // claims.pd while outstanding (counted in by_pd_), empty once finished
  };
  using Index = std::set<std::pair<absl::Time, uint64_t>>;

  // Expires outstanding tokens whose expiry has come and forgets finished ones past their grace.
  void PurgeLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves an outstanding entry to `state` and into finished_, keeping finished_ within max_finished.
  void FinishLocked(uint64_t id, Entry& entry, State state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropFirstFinishedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Redemption Check(absl::string_view private_data, bool consume);
  Redemption RejectLocked(RejectReason reason, uint64_t id, std::string detail)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  Mutex mu_;
  state::NameCounter next_id_ ABSL_GUARDED_BY(mu_){options_.state, "tokens"};
  std::unordered_map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  Index outstanding_ ABSL_GUARDED_BY(mu_);  // (expiry, id) of outstanding entries
  Index finished_ ABSL_GUARDED_BY(mu_);     // (expiry + grace, id) of finished entries
  std::map<std::string, size_t> by_pd_ ABSL_GUARDED_BY(mu_);  // outstanding entries per claims.pd
  Counters counters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rdmad::cm

#endif  // RDMAD_SERVER_CM_TOKEN_H_
