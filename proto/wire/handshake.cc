#include "proto/wire/handshake.h"

#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace rdmad::wire {
namespace {

constexpr char kTokenMagic[4] = {'R', 'D', 'T', 'K'};
constexpr char kRejectMagic[4] = {'R', 'D', 'R', 'J'};
constexpr char kVersionMagic[4] = {'R', 'D', 'V', 'R'};
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
    case RejectReason::kOverQuota:
      return "OVER_QUOTA";
    case RejectReason::kInternal:
      return "INTERNAL";
    case RejectReason::kSessionMismatch:
      return "SESSION_MISMATCH";
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

ConnectRequest SplitConnectRequest(absl::string_view data) {
  ConnectRequest out;
  out.token = data;
  const absl::string_view magic(kVersionMagic, sizeof(kVersionMagic));
  if (data.size() < kTokenSize + kVersionOfferSize || data.substr(kTokenSize, magic.size()) != magic) return out;
  const uint8_t offered = U8(data, kTokenSize + 4);
  // A malformed offer leaves the bytes to DecodeToken, which refuses them (nonzero bytes after the token).
  if (offered < 1 || !AllZero(data.substr(kTokenSize + 5))) return out;
  out.token = data.substr(0, kTokenSize);
  out.offered = offered;
  return out;
}

std::string EncodeConnectRequest(absl::string_view token, uint8_t highest) {
  std::string out(token);
  out.append(kVersionMagic, sizeof(kVersionMagic));
  out.push_back(static_cast<char>(highest));
  out.append(3, '\0');
  return out;
}

std::string EncodeAcceptData(const AcceptData& accept) {
  std::string out(kVersionMagic, sizeof(kVersionMagic));
  out.push_back(static_cast<char>(accept.version));
  out.push_back(static_cast<char>(accept.credits));
  out.append(2, '\0');
  return out;
}

AcceptData DecodeAcceptData(absl::string_view data) {
  AcceptData out;
  if (data.size() < kAcceptDataSize || !absl::StartsWith(data, absl::string_view(kVersionMagic, 4))) return out;
  if (U8(data, 4) < 2) return out;
  out.version = U8(data, 4);
  out.credits = U8(data, 5);
  return out;
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

}  // namespace rdmad::wire
