#include "server/cm/token.h"

#include <sys/random.h>

#include <array>
#include <cerrno>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/common/status.h"

namespace rdmad::cm {
namespace {

// No early exit: the time taken does not depend on where the secrets differ.
bool SecretsEqual(const std::array<uint8_t, kTokenSecretBytes>& a,
                  const std::array<uint8_t, kTokenSecretBytes>& b) {
  volatile uint8_t diff = 0;
  for (size_t i = 0; i < kTokenSecretBytes; ++i) diff = diff | (a[i] ^ b[i]);
  return diff == 0;
}

absl::Status FillRandom(uint8_t* buf, size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t got = getrandom(buf + done, n - done, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("getrandom", errno, "issuing a connection token");
    }
    done += static_cast<size_t>(got);
  }
  return absl::OkStatus();
}

}  // namespace

TokenStore::TokenStore(Options options) : options_(std::move(options)) {}

absl::Status TokenStore::CheckIssue(const Claims& claims, absl::Duration ttl) {
  if (claims.pd.empty()) return InvalidArgument("pd", "required");
  if (ttl <= absl::ZeroDuration()) {
    return InvalidArgument("ttl", absl::StrCat("must be > 0, got ", absl::FormatDuration(ttl)));
  }
  if (ttl > options_.max_ttl) {
    return InvalidArgument("ttl", absl::StrCat("must be at most ", absl::FormatDuration(options_.max_ttl),
                                               " (rdmad's fixed maximum), got ", absl::FormatDuration(ttl)));
  }
  MutexLock lock(&mu_);
  PurgeLocked(options_.clock());
  if (outstanding_.size() >= options_.max_outstanding) {
    return OverLimit("tokens", options_.max_outstanding, outstanding_.size(), 1,
                     "outstanding tokens; they end when redeemed, revoked or expired");
  }
  return absl::OkStatus();
}

absl::StatusOr<Issued> TokenStore::Issue(Claims claims, absl::Duration ttl) {
  if (claims.pd.empty()) return InvalidArgument("pd", "required");
  if (ttl <= absl::ZeroDuration()) {
    return InvalidArgument("ttl", absl::StrCat("must be > 0, got ", absl::FormatDuration(ttl)));
  }
  if (ttl > options_.max_ttl) {
    return InvalidArgument("ttl", absl::StrCat("must be at most ", absl::FormatDuration(options_.max_ttl),
                                               " (rdmad's fixed maximum), got ", absl::FormatDuration(ttl)));
  }
  Entry entry;
  RDMAD_RETURN_IF_ERROR(FillRandom(entry.secret.data(), entry.secret.size()));
  entry.kind = claims.grant.empty() ? TokenKind::kConnect : TokenKind::kGrant;
  entry.claims = std::move(claims);

  MutexLock lock(&mu_);
  const absl::Time now = options_.clock();
  PurgeLocked(now);
  if (outstanding_.size() >= options_.max_outstanding) {
    return OverLimit("tokens", options_.max_outstanding, outstanding_.size(), 1,
                     "outstanding tokens; they end when redeemed, revoked or expired");
  }
  const uint64_t id = next_id_.Next();
  entry.expiry = now + ttl;
  Token token;
  token.kind = entry.kind;
  token.id = id;
  token.secret = entry.secret;
  Issued issued{EncodeToken(token), TokenName(id), entry.expiry};
  outstanding_.emplace(entry.expiry, id);
  entry.pd = entry.claims.pd;
  if (!entry.pd.empty()) by_pd_[entry.pd]++;
  entries_.emplace(id, std::move(entry));
  ++counters_.issued;
  return issued;
}

Redemption TokenStore::Redeem(absl::string_view private_data) { return Check(private_data, /*consume=*/true); }

Redemption TokenStore::Peek(absl::string_view private_data) { return Check(private_data, /*consume=*/false); }

Redemption TokenStore::Check(absl::string_view private_data, bool consume) {
  DecodedToken decoded = DecodeToken(private_data);
  MutexLock lock(&mu_);
  if (!decoded.ok()) return RejectLocked(decoded.reason, 0, std::move(decoded.detail));
  const Token& token = *decoded.token;
  const absl::Time now = options_.clock();
  PurgeLocked(now);
  auto it = entries_.find(token.id);
  if (it == entries_.end()) {
    return RejectLocked(RejectReason::kUnknown, token.id, "no such token (never issued, or forgotten)");
  }
  Entry& entry = it->second;
  // A wrong secret learns nothing about the token's state: the same answer as for an absent one.
  if (!SecretsEqual(entry.secret, token.secret) || entry.kind != token.kind) {
    return RejectLocked(RejectReason::kUnknown, token.id, "the secret does not match");
  }
  if (now >= entry.expiry) {
    return RejectLocked(RejectReason::kExpired, token.id,
                        absl::StrCat("expired ", absl::FormatDuration(now - entry.expiry), " ago"));
  }
  switch (entry.state) {
    case State::kOutstanding:
      break;
    case State::kRedeemed:
      return RejectLocked(RejectReason::kReplayed, token.id, "already redeemed");
    case State::kRevoked:
      return RejectLocked(RejectReason::kRevoked, token.id, "revoked");
    case State::kExpired:  // not reached: an expired entry has now >= expiry
      return RejectLocked(RejectReason::kExpired, token.id, "expired");
  }
  Redemption r;
  r.token_id = token.id;
  if (!consume) {
    r.claims = entry.claims;
    return r;
  }
  r.claims = std::move(entry.claims);
  FinishLocked(token.id, entry, State::kRedeemed);
  ++counters_.redeemed;
  return r;
}

size_t TokenStore::RevokeWhere(const std::function<bool(const Claims&)>& match) {
  MutexLock lock(&mu_);
  PurgeLocked(options_.clock());
  std::vector<uint64_t> ids;
  for (const auto& [expiry, id] : outstanding_) {
    auto it = entries_.find(id);
    if (it != entries_.end() && match(it->second.claims)) ids.push_back(id);
  }
  for (uint64_t id : ids) {
    FinishLocked(id, entries_.at(id), State::kRevoked);
    ++counters_.revoked;
  }
  return ids.size();
}

absl::Status TokenStore::Revoke(absl::string_view name) {
  uint64_t id = 0;
  if (!ParseTokenName(name, &id)) {
    return InvalidArgument("name", absl::StrCat("expected tokens/<number>, got '", name, "'"));
  }
  MutexLock lock(&mu_);
  PurgeLocked(options_.clock());
  auto it = entries_.find(id);
  if (it == entries_.end()) {
    return NotFound("name", absl::StrCat(TokenName(id), " does not exist (never issued, or forgotten after expiry)"));
  }
  Entry& entry = it->second;
  switch (entry.state) {
    case State::kOutstanding:
      FinishLocked(id, entry, State::kRevoked);
      ++counters_.revoked;
      return absl::OkStatus();
    case State::kRedeemed:
      return FailedPrecondition("name", absl::StrCat(TokenName(id), " was already redeemed"));
    case State::kRevoked:
      return FailedPrecondition("name", absl::StrCat(TokenName(id), " was already revoked"));
    case State::kExpired:
      return FailedPrecondition("name", absl::StrCat(TokenName(id), " has expired"));
  }
  return absl::InternalError("unreachable token state");
}

size_t TokenStore::Outstanding() {
  MutexLock lock(&mu_);
  PurgeLocked(options_.clock());
  return outstanding_.size();
}

size_t TokenStore::Outstanding(const std::function<bool(const Claims&)>& match) {
  MutexLock lock(&mu_);
  PurgeLocked(options_.clock());
  size_t n = 0;
  for (const auto& [expiry, id] : outstanding_) {
    auto it = entries_.find(id);
    if (it != entries_.end() && match(it->second.claims)) ++n;
  }
  return n;
}

size_t TokenStore::OutstandingOnPd(const std::string& pd) {
  MutexLock lock(&mu_);
  PurgeLocked(options_.clock());
  auto it = by_pd_.find(pd);
  return it == by_pd_.end() ? 0 : it->second;
}

TokenStore::Counters TokenStore::GetCounters() {
  MutexLock lock(&mu_);
  PurgeLocked(options_.clock());
  return counters_;
}

void TokenStore::PurgeLocked(absl::Time now) {
  while (!outstanding_.empty() && outstanding_.begin()->first <= now) {
    const uint64_t id = outstanding_.begin()->second;
    FinishLocked(id, entries_.at(id), State::kExpired);
    ++counters_.expired;
  }
  while (!finished_.empty() && finished_.begin()->first <= now) DropFirstFinishedLocked();
}

void TokenStore::FinishLocked(uint64_t id, Entry& entry, State state) {
  outstanding_.erase({entry.expiry, id});
  if (!entry.pd.empty()) {
    auto it = by_pd_.find(entry.pd);
    if (it != by_pd_.end() && --it->second == 0) by_pd_.erase(it);
    entry.pd.clear();
  }
  entry.state = state;
  entry.claims = Claims();
  finished_.emplace(entry.expiry + options_.grace, id);
  // `entry` may be the one dropped here (max_finished 0): callers do not touch it afterwards.
  while (finished_.size() > options_.max_finished) DropFirstFinishedLocked();
}

void TokenStore::DropFirstFinishedLocked() {
  entries_.erase(finished_.begin()->second);
  finished_.erase(finished_.begin());
}

Redemption TokenStore::RejectLocked(RejectReason reason, uint64_t id, std::string detail) {
  ++counters_.rejected[reason];
  Redemption r;
  r.reason = reason;
  r.token_id = id;
  r.detail = std::move(detail);
  return r;
}

}  // namespace rdmad::cm
