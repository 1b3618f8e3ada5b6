#include "server/cm/token.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "server/common/status.h"

namespace rdmad::cm {
namespace {

constexpr char kTokenMagic[4] = {'R', 'D', 'T', 'K'};
constexpr char kRejectMagic[4] = {'R', 'D', 'R', 'J'};
constexpr char kTokenNamePrefix[] = "tokens/";

void PutU16(std::string& out, uint16_t v) {
  out.push_back(static_cast<char>(v >> 8));
  out.push_back(static_cast<char>(v & 0xff));
}
void PutU64(std::string& out, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}
uint8_t U8(absl::string_view in, size_t at) { return static_cast<uint8_t>(in[at]); }
uint16_t GetU16(absl::string_view in, size_t at) {
  return static_cast<uint16_t>(U8(in, at) << 8 | U8(in, at + 1));
}
uint64_t GetU64(absl::string_view in, size_t at) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v = v << 8 | U8(in, at + i);
  return v;
}
bool AllZero(absl::string_view in) {
  for (char c : in) {
    if (c != 0) return false;
  }
  return true;
}

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

DecodedToken Fail(RejectReason reason, std::string detail) {
  DecodedToken d;
  d.reason = reason;
  d.detail = std::move(detail);
  return d;
}

}  // namespace

std::string RejectReasonName(RejectReason reason) {
  switch (reason) {
    case RejectReason::kMissing:
      return "TOKEN_MISSING";
    case RejectReason::kMalformed:
      return "TOKEN_MALFORMED";
    case RejectReason::kWrongVersion:
      return "TOKEN_WRONG_VERSION";
    case RejectReason::kUnknown:
      return "TOKEN_UNKNOWN";
    case RejectReason::kExpired:
      return "TOKEN_EXPIRED";
    case RejectReason::kReplayed:
      return "TOKEN_REPLAYED";
    case RejectReason::kRevoked:
      return "TOKEN_REVOKED";
    case RejectReason::kInternal:
      return "INTERNAL";
  }
  return absl::StrCat("REASON_", static_cast<uint16_t>(reason));
}

std::string EncodeToken(const Token& token) {
  std::string out(kTokenMagic, sizeof(kTokenMagic));
  out.push_back(static_cast<char>(token.version));
  out.push_back(static_cast<char>(token.kind));
  PutU16(out, 0);
  PutU64(out, token.id);
  out.append(reinterpret_cast<const char*>(token.secret.data()), token.secret.size());
  return out;
}

DecodedToken DecodeToken(absl::string_view data) {
  if (data.empty()) return Fail(RejectReason::kMissing, "no private data");
  if (data.size() > kConnectPrivateDataMax) {
    return Fail(RejectReason::kMalformed,
                absl::StrCat("oversized: ", data.size(), " bytes, a connect request carries at most ",
                             kConnectPrivateDataMax));
  }
  if (AllZero(data)) return Fail(RejectReason::kMissing, "private data is all zeros");
  const absl::string_view magic(kTokenMagic, sizeof(kTokenMagic));
  if (!absl::StartsWith(magic, data.substr(0, magic.size()))) {
    return Fail(RejectReason::kMalformed, "not a token: wrong magic");
  }
  if (data.size() <= magic.size()) {
    return Fail(RejectReason::kMalformed, absl::StrCat("truncated: ", data.size(), " of ", kTokenSize, " bytes"));
  }
  const uint8_t version = U8(data, 4);
  if (version != kTokenVersion) {
    return Fail(RejectReason::kWrongVersion,
                absl::StrCat("token version ", version, ", this rdmad speaks ", kTokenVersion));
  }
  if (data.size() < kTokenSize) {
    return Fail(RejectReason::kMalformed, absl::StrCat("truncated: ", data.size(), " of ", kTokenSize, " bytes"));
  }
  if (!AllZero(data.substr(kTokenSize))) {
    return Fail(RejectReason::kMalformed,
                absl::StrCat("wrong length: nonzero bytes after the ", kTokenSize, "-byte token"));
  }
  const uint16_t reserved = GetU16(data, 6);
  if (reserved != 0) {
    return Fail(RejectReason::kMalformed, absl::StrFormat("reserved bits 0x%04x set", reserved));
  }
  const uint8_t kind = U8(data, 5);
  if (kind != static_cast<uint8_t>(TokenKind::kConnect) && kind != static_cast<uint8_t>(TokenKind::kGrant)) {
    return Fail(RejectReason::kMalformed, absl::StrCat("unknown token kind ", kind));
  }
  Token token;
  token.version = version;
  token.kind = static_cast<TokenKind>(kind);
  token.id = GetU64(data, 8);
  std::memcpy(token.secret.data(), data.data() + 16, kTokenSecretBytes);
  DecodedToken d;
  d.token = token;
  return d;
}

std::string EncodeReject(const Reject& reject) {
  std::string out(kRejectMagic, sizeof(kRejectMagic));
  out.push_back(static_cast<char>(kRejectVersion));
  out.push_back(0);
  PutU16(out, static_cast<uint16_t>(reject.reason));
  PutU64(out, reject.token_id);
  return out;
}

absl::StatusOr<Reject> DecodeReject(absl::string_view data) {
  if (data.size() < 8 || !absl::StartsWith(data, absl::string_view(kRejectMagic, sizeof(kRejectMagic)))) {
    return absl::InvalidArgumentError("not an rdmad reject (no RDRJ magic in the private data)");
  }
  const uint8_t version = U8(data, 4);
  if (version == 0) return absl::InvalidArgumentError("not an rdmad reject (version 0)");
  Reject reject;
  reject.reason = static_cast<RejectReason>(GetU16(data, 6));
  if (version == kRejectVersion && data.size() < kRejectSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("truncated rdmad reject: ", data.size(), " of ", kRejectSize, " bytes"));
  }
  if (version == kRejectVersion) reject.token_id = GetU64(data, 8);
  return reject;
}

std::string TokenName(uint64_t id) { return absl::StrCat(kTokenNamePrefix, id); }

bool ParseTokenName(absl::string_view name, uint64_t* id) {
  if (!absl::ConsumePrefix(&name, kTokenNamePrefix)) return false;
  if (name.empty() || name.size() > 20) return false;
  for (char c : name) {
    if (c < '0' || c > '9') return false;
  }
  return absl::SimpleAtoi(name, id) && *id > 0;
}

TokenStore::TokenStore(Options options) : options_(std::move(options)) {}

absl::StatusOr<Issued> TokenStore::Issue(Claims claims, absl::Duration ttl) {
  if (claims.pd.empty()) return InvalidArgument("pd", "required");
  if (ttl <= absl::ZeroDuration()) {
    return InvalidArgument("ttl", absl::StrCat("must be > 0, got ", absl::FormatDuration(ttl)));
  }
  if (ttl > options_.max_ttl) {
    return InvalidArgument("ttl", absl::StrCat("must be at most ", absl::FormatDuration(options_.max_ttl),
                                               " (max_token_ttl), got ", absl::FormatDuration(ttl)));
  }
  Entry entry;
  RDMAD_RETURN_IF_ERROR(FillRandom(entry.secret.data(), entry.secret.size()));
  entry.kind = claims.grant.empty() ? TokenKind::kConnect : TokenKind::kGrant;
  entry.claims = std::move(claims);

  absl::MutexLock lock(&mu_);
  const absl::Time now = options_.clock();
  PurgeLocked(now);
  if (outstanding_.size() >= options_.max_outstanding) {
    return absl::ResourceExhaustedError(
        absl::StrCat("connection tokens: ", outstanding_.size(), " outstanding, the limit (max_outstanding_tokens) is ",
                     options_.max_outstanding, "; redeem or revoke some, or wait for them to expire"));
  }
  const uint64_t id = next_id_++;
  entry.expiry = now + ttl;
  Token token;
  token.kind = entry.kind;
  token.id = id;
  token.secret = entry.secret;
  Issued issued{EncodeToken(token), TokenName(id), entry.expiry};
  outstanding_.emplace(entry.expiry, id);
  entries_.emplace(id, std::move(entry));
  ++counters_.issued;
  return issued;
}

Redemption TokenStore::Redeem(absl::string_view private_data) {
  DecodedToken decoded = DecodeToken(private_data);
  absl::MutexLock lock(&mu_);
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
  r.claims = std::move(entry.claims);
  r.token_id = token.id;
  FinishLocked(token.id, entry, State::kRedeemed);
  ++counters_.redeemed;
  return r;
}

absl::Status TokenStore::Revoke(absl::string_view name) {
  uint64_t id = 0;
  if (!ParseTokenName(name, &id)) {
    return InvalidArgument("name", absl::StrCat("expected tokens/<number>, got '", name, "'"));
  }
  absl::MutexLock lock(&mu_);
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
  absl::MutexLock lock(&mu_);
  PurgeLocked(options_.clock());
  return outstanding_.size();
}

TokenStore::Counters TokenStore::GetCounters() {
  absl::MutexLock lock(&mu_);
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
