#include "proto/wire/grant_message.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace rdmad::wire {
namespace {

constexpr char kMagic[4] = {'R', 'D', 'G', 'M'};

void PutBig(std::string& out, size_t offset, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out[offset + i] = static_cast<char>((value >> (8 * (bytes - 1 - i))) & 0xff);
}

uint64_t GetBig(absl::string_view in, size_t offset, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<uint8_t>(in[offset + i]);
  return v;
}

}  // namespace

std::string EncodeGrantMessage(const GrantMessage& m) {
  const bool v2 = m.version >= kSessionMessageVersion;
  std::string out(v2 ? kSessionMessageSize : kGrantMessageSize, '\0');
  out.replace(0, 4, kMagic, 4);
  out[4] = static_cast<char>(v2 ? kSessionMessageVersion : kGrantMessageVersion);
  out[5] = static_cast<char>(m.type);
  out[6] = static_cast<char>(m.scope);
  out[7] = static_cast<char>(m.reason);
  PutBig(out, 8, m.grant_id, 8);
  PutBig(out, 16, m.remote_addr, 8);
  PutBig(out, 24, m.length, 8);
  PutBig(out, 32, m.rkey, 4);
  PutBig(out, 36, m.access, 4);
  PutBig(out, 40, static_cast<uint64_t>(m.expiry_unix_nanos), 8);
  if (!v2) return out;
  PutBig(out, 48, m.tag, 8);
  if (m.type == GrantMessageType::kRelease) {
    // A grant id and a tag, nothing else.
    out[6] = out[7] = '\0';
    out.replace(16, 32, std::string(32, '\0'));
    return out;
  }
  if (m.type == GrantMessageType::kActivate) {
    // The request carries a token where an answer carries the key: nothing else of the grant is known.
    out[6] = out[7] = '\0';
    out.replace(8, 40, std::string(40, '\0'));
    out.replace(16, std::min<size_t>(m.token.size(), 32), m.token.substr(0, 32));
    return out;
  }
  PutBig(out, 56, m.token_id, 8);
  return out;
}

absl::StatusOr<GrantMessage> DecodeGrantMessage(absl::string_view in) {
  if (in.size() < kGrantMessageSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("grant message: ", in.size(), " bytes, expected ", kGrantMessageSize));
  }
  if (in.substr(0, 4) != absl::string_view(kMagic, 4)) {
    return absl::InvalidArgumentError("grant message: wrong magic (not an rdmad grant message)");
  }
  const uint8_t version = static_cast<uint8_t>(in[4]);
  if (version < kGrantMessageVersion) {
    return absl::InvalidArgumentError(absl::StrCat("grant message: version ", static_cast<int>(version)));
  }
  const bool v2 = version >= kSessionMessageVersion;
  if (v2 && in.size() < kSessionMessageSize) {
    return absl::InvalidArgumentError(absl::StrCat("grant message: ", in.size(), " bytes of version ",
                                                   static_cast<int>(version), ", expected ", kSessionMessageSize));
  }
  GrantMessage m;
  m.version = v2 ? kSessionMessageVersion : kGrantMessageVersion;
  const uint8_t type = static_cast<uint8_t>(in[5]), scope = static_cast<uint8_t>(in[6]);
  if (type < 1 || type > (v2 ? 6 : 3)) {
    return absl::InvalidArgumentError(absl::StrCat("grant message: unknown type ", type));
  }
  if (v2) {
    m.tag = GetBig(in, 48, 8);
    if (type == static_cast<uint8_t>(GrantMessageType::kActivate)) {
      m.type = GrantMessageType::kActivate;
      m.token = std::string(in.substr(16, 32));
      return m;
    }
    if (type == static_cast<uint8_t>(GrantMessageType::kRelease)) {
      m.type = GrantMessageType::kRelease;
      m.grant_id = GetBig(in, 8, 8);
      return m;
    }
    m.token_id = GetBig(in, 56, 8);
  }
  if (scope < 1 || scope > 3) {
    // ENDED and FAILED may be sent before a scope was decided: 0 is accepted there.
    if (!(scope == 0 && type != static_cast<uint8_t>(GrantMessageType::kActive))) {
      return absl::InvalidArgumentError(absl::StrCat("grant message: unknown scope ", scope));
    }
    m.scope = GrantKeyScope::kQp;
  } else {
    m.scope = static_cast<GrantKeyScope>(scope);
  }
  m.type = static_cast<GrantMessageType>(type);
  m.reason = static_cast<uint8_t>(in[7]);
  m.grant_id = GetBig(in, 8, 8);
  m.remote_addr = GetBig(in, 16, 8);
  m.length = GetBig(in, 24, 8);
  m.rkey = static_cast<uint32_t>(GetBig(in, 32, 4));
  m.access = static_cast<uint32_t>(GetBig(in, 36, 4));
  m.expiry_unix_nanos = static_cast<int64_t>(GetBig(in, 40, 8));
  return m;
}

const char* GrantMessageTypeName(GrantMessageType type) {
  switch (type) {
    case GrantMessageType::kActive: return "ACTIVE";
    case GrantMessageType::kEnded: return "ENDED";
    case GrantMessageType::kFailed: return "FAILED";
    case GrantMessageType::kRefused: return "REFUSED";
    case GrantMessageType::kActivate: return "ACTIVATE";
    case GrantMessageType::kRelease: return "RELEASE";
  }
  return "UNKNOWN";
}

std::string GrantEndReasonName(uint8_t reason) {
  static const char* const kNames[] = {"UNSPECIFIED",     "REVOKED",         "EXPIRED",
                                       "DISCONNECTED",    "MR_DEREGISTERED", "MR_REREGISTERED",
                                       "PD_DELETED",      "ACTIVATION_FAILED", "SHUTDOWN",
                                       "RESTARTED",       "RELEASED"};
  if (reason < sizeof(kNames) / sizeof(kNames[0])) return kNames[reason];
  return absl::StrCat("REASON_", reason);
}

}  // namespace rdmad::wire
