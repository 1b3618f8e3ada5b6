#include "cli/parse.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"

namespace rdmad::cli {
namespace {

// "'TEXT'" and why it is wrong: the error of every parser here.
template <typename... Why>
absl::Status Bad(absl::string_view text, const Why&... why) {
  return absl::InvalidArgumentError(absl::StrCat("'", text, "'", why...));
}

bool AllDigits(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

absl::Status SizeSyntaxError(absl::string_view text) {
  return Bad(text, " is not a size: expected a number of bytes with an optional unit (B, KiB, MiB, GiB, TiB), ",
             "e.g. 4096, 4KiB, 1MiB");
}

// Binary multiplier of a (lower-cased) unit, 0 if unknown.
uint64_t UnitMultiplier(const std::string& unit) {
  if (unit.empty() || unit == "b") return 1;
  static const char kPrefixes[] = "kmgtpe";
  if (unit.size() > 3) return 0;
  const char* p = std::strchr(kPrefixes, unit[0]);
  if (p == nullptr) return 0;
  const std::string rest = unit.substr(1);
  if (!rest.empty() && rest != "b" && rest != "ib") return 0;
  return uint64_t{1} << (10 * (p - kPrefixes + 1));
}

struct AccessSpelling {
  const char* name;
  v1::Access value;
};
constexpr AccessSpelling kAccess[] = {
    {"local-write", v1::LOCAL_WRITE},     {"remote-write", v1::REMOTE_WRITE}, {"remote-read", v1::REMOTE_READ},
    {"remote-atomic", v1::REMOTE_ATOMIC}, {"mw-bind", v1::MW_BIND},
};

// "a memory region", "an event channel".
std::string A(absl::string_view noun) {
  return absl::StrCat(!noun.empty() && std::strchr("aeiou", noun[0]) != nullptr ? "an " : "a ", noun);
}

std::string KnownAccess() {
  std::vector<std::string> names;
  for (const auto& a : kAccess) names.push_back(a.name);
  return absl::StrJoin(names, ", ");
}

}  // namespace

absl::StatusOr<uint64_t> ParseSize(absl::string_view text) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  if (s.empty()) return absl::InvalidArgumentError("a size is required, e.g. 4096, 4KiB, 1MiB");
  if (s[0] == '-') return Bad(text, " is not a size: sizes cannot be negative");
  size_t i = 0;
  while (i < s.size() && absl::ascii_isdigit(static_cast<unsigned char>(s[i]))) i++;
  absl::string_view whole = s.substr(0, i);
  absl::string_view fraction;
  if (i < s.size() && s[i] == '.') {
    size_t start = ++i;
    while (i < s.size() && absl::ascii_isdigit(static_cast<unsigned char>(s[i]))) i++;
    fraction = s.substr(start, i - start);
    if (fraction.empty()) return SizeSyntaxError(text);
  }
  if (whole.empty()) return SizeSyntaxError(text);
  const std::string unit = absl::AsciiStrToLower(absl::StripAsciiWhitespace(s.substr(i)));
  const uint64_t multiplier = UnitMultiplier(unit);
  if (multiplier == 0) return SizeSyntaxError(text);

  // Exact arithmetic: value = whole * m + fraction * m / 10^digits, which must be a whole number.
  using u128 = unsigned __int128;
  const u128 kMax = UINT64_MAX;
  u128 value = 0;
  for (char c : whole) {
    value = value * 10 + static_cast<unsigned>(c - '0');
    if (value > kMax) return Bad(text, " is too large");
  }
  value *= multiplier;
  if (value > kMax) return Bad(text, " is too large");
  while (!fraction.empty() && fraction.back() == '0') fraction.remove_suffix(1);
  if (!fraction.empty()) {
    if (fraction.size() > 18) return Bad(text, " is not a whole number of bytes");
    u128 numerator = 0, denominator = 1;
    for (char c : fraction) {
      numerator = numerator * 10 + static_cast<unsigned>(c - '0');
      denominator *= 10;
    }
    numerator *= multiplier;
    if (numerator % denominator != 0) return Bad(text, " is not a whole number of bytes");
    value += numerator / denominator;
    if (value > kMax) return Bad(text, " is too large");
  }
  return static_cast<uint64_t>(value);
}

absl::StatusOr<uint64_t> ParseUint(absl::string_view text, uint64_t max) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  uint64_t value = 0;
  bool ok = false;
  if (absl::StartsWithIgnoreCase(s, "0x")) {
    absl::string_view digits = s.substr(2);
    ok = !digits.empty() && digits.find_first_not_of("0123456789abcdefABCDEF") == absl::string_view::npos &&
         absl::SimpleHexAtoi(digits, &value);
  } else {
    ok = AllDigits(s) && absl::SimpleAtoi(s, &value);
  }
  if (!ok) {
    if (!s.empty() && s[0] == '-') return Bad(text, " is negative; expected an unsigned number");
    // SimpleAtoi fails on overflow as well as on junk: tell them apart for the message.
    if (AllDigits(s)) return Bad(text, " is too large (max ", max, ")");
    return Bad(text, " is not a number (decimal or 0x hex)");
  }
  if (value > max) return Bad(text, " is too large (max ", max, ")");
  return value;
}

absl::StatusOr<std::chrono::milliseconds> ParseTimeout(absl::string_view text) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  absl::Duration d;
  uint64_t seconds = 0;
  if (AllDigits(s) && absl::SimpleAtoi(s, &seconds) && seconds <= 1000000000) {
    d = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(s, &d)) {
    return Bad(text, " is not a duration: expected e.g. 30s, 500ms, 2m, 1m30s or a number of seconds");
  }
  if (d <= absl::ZeroDuration() || d == absl::InfiniteDuration()) {
    return Bad(text, ": the timeout must be positive and finite");
  }
  return std::chrono::milliseconds(absl::ToInt64Milliseconds(absl::Ceil(d, absl::Milliseconds(1))));
}

const std::vector<KindInfo>& AllKinds() {
  static const std::vector<KindInfo> kinds = {
      {Kind::kDevice, "device", "devices", "device", false}, {Kind::kPd, "pd", "pds", "protection domain", true},
      {Kind::kMr, "mr", "mrs", "memory region", true},       {Kind::kMw, "mw", "mws", "memory window", true},
      {Kind::kQp, "qp", "qps", "queue pair", true},
      {Kind::kChannel, "channel", "channels", "event channel", true},
      {Kind::kCmId, "cmid", "cmids", "CM id", true},
      {Kind::kToken, "token", "tokens", "connection token", true},
      {Kind::kGrant, "grant", "grants", "grant", true},
      {Kind::kTenant, "tenant", "tenants", "tenant", false},
  };
  return kinds;
}

const KindInfo& Info(Kind kind) {
  for (const KindInfo& k : AllKinds()) {
    if (k.kind == kind) return k;
  }
  return AllKinds().front();  // unreachable: every Kind is listed
}

std::optional<Kind> KindFromNoun(absl::string_view noun) {
  for (const KindInfo& k : AllKinds()) {
    if (absl::EqualsIgnoreCase(noun, k.singular) || absl::EqualsIgnoreCase(noun, k.plural)) return k.kind;
  }
  return std::nullopt;
}

absl::StatusOr<std::string> NormalizeName(Kind kind, absl::string_view text) {
  const KindInfo& info = Info(kind);
  absl::string_view s = absl::StripAsciiWhitespace(text);
  if (s.empty()) return absl::InvalidArgumentError(absl::StrCat(A(info.title), " name is required"));
  absl::string_view id = s;
  if (size_t slash = s.find('/'); slash != absl::string_view::npos) {
    absl::string_view noun = s.substr(0, slash);
    id = s.substr(slash + 1);
    std::optional<Kind> named = KindFromNoun(noun);
    if (!named) {
      return Bad(text, " is not ", A(info.title), " name (", info.plural, "/", info.numeric ? "N" : "NAME", ")");
    }
    if (*named != kind) return Bad(text, " names ", A(Info(*named).title), ", not ", A(info.title));
  }
  if (!info.numeric) {
    if (id.empty() || id.find('/') != absl::string_view::npos ||
        id.find_first_of(" \t\r\n") != absl::string_view::npos) {
      return Bad(text, " is not ", A(info.title), " name");
    }
    if (kind == Kind::kTenant && !std::all_of(id.begin(), id.end(), [](char c) {
          return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
        })) {
      return Bad(text, " is not a tenant name (letters, digits, '.', '_' and '-': app, tenants/app)");
    }
    return absl::StrCat(info.plural, "/", id);
  }
  uint64_t n = 0;
  if (!AllDigits(id) || !absl::SimpleAtoi(id, &n) || n == 0) {
    return Bad(text, " is not ", A(info.title), " name (", info.plural, "/N, ", info.singular, "/N or N, N > 0)");
  }
  return absl::StrCat(info.plural, "/", n);
}

std::vector<size_t> BareWords(const std::vector<std::string>& args, const std::set<std::string>& valued_options,
                              size_t max) {
  std::vector<size_t> words;
  for (size_t i = 0; i < args.size() && words.size() < max; i++) {
    const std::string& a = args[i];
    if (a == "--") break;
    if (!a.empty() && a[0] == '-') {
      if (valued_options.count(a) != 0) i++;  // skip its value
      continue;
    }
    words.push_back(i);
  }
  return words;
}

std::vector<std::string> SplitTypeSlashName(std::vector<std::string> args,
                                            const std::set<std::string>& valued_options) {
  std::vector<size_t> words = BareWords(args, valued_options, 2);
  if (words.size() < 2) return args;
  const std::string noun = args[words[1]];
  size_t slash = noun.find('/');
  if (slash != std::string::npos && slash > 0 && KindFromNoun(noun.substr(0, slash))) {
    args.insert(args.begin() + static_cast<std::ptrdiff_t>(words[1]), noun.substr(0, slash));
  }
  return args;
}

absl::StatusOr<std::string> NormalizeGid(absl::string_view text) {
  const std::string s(absl::StripAsciiWhitespace(text));
  unsigned char raw[16] = {};
  in_addr v4{};
  if (inet_pton(AF_INET, s.c_str(), &v4) == 1) {
    raw[10] = raw[11] = 0xff;
    std::memcpy(raw + 12, &v4, 4);
  } else if (inet_pton(AF_INET6, s.c_str(), raw) != 1) {
    return Bad(text, " is not a GID (IPv6 form, e.g. fe80::1 or fe80:0000:...:0001, or an IPv4 address)");
  }
  std::string out;
  for (int i = 0; i < 16; i += 2) {
    if (i > 0) out += ':';
    out += absl::StrFormat("%02x%02x", raw[i], raw[i + 1]);
  }
  return out;
}

absl::StatusOr<std::vector<v1::Access>> ParseAccess(absl::string_view text) {
  std::vector<v1::Access> out;
  if (absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(text), "none")) return out;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    std::string word = absl::AsciiStrToLower(absl::StripAsciiWhitespace(item));
    std::replace(word.begin(), word.end(), '_', '-');
    if (word.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("empty access flag in '", text, "' (known: ", KnownAccess(), ", or none)"));
    }
    const AccessSpelling* found = nullptr;
    for (const auto& a : kAccess) {
      if (word == a.name) found = &a;
    }
    if (found == nullptr) {
      if (word == "none") {
        return absl::InvalidArgumentError(absl::StrCat("'none' cannot be combined with other access flags"));
      }
      return absl::InvalidArgumentError(absl::StrCat("unknown access flag '", absl::StripAsciiWhitespace(item),
                                                     "' (known: ", KnownAccess(), ", or none)"));
    }
    if (std::find(out.begin(), out.end(), found->value) == out.end()) out.push_back(found->value);
  }
  return out;
}

std::string AccessName(int access) {
  for (const auto& a : kAccess) {
    if (a.value == access) return a.name;
  }
  return absl::StrCat("access(", access, ")");
}

absl::StatusOr<v1::SocketAddress> ParseSocketAddress(absl::string_view text) {
  const absl::string_view s = absl::StripAsciiWhitespace(text);
  auto syntax = [&text](absl::string_view why) {
    return Bad(text, " is not an address:port (", why, "; e.g. 10.0.2.15:7471 or [fe80::1]:7471)");
  };
  std::string host;
  absl::string_view port;
  if (absl::StartsWith(s, "[")) {
    const size_t close = s.find(']');
    if (close == absl::string_view::npos) return syntax("no ']' after the IPv6 address");
    host = std::string(s.substr(1, close - 1));
    absl::string_view rest = s.substr(close + 1);
    if (!absl::ConsumePrefix(&rest, ":")) return syntax("a port is required after ']'");
    port = rest;
    in6_addr v6{};
    if (inet_pton(AF_INET6, host.c_str(), &v6) != 1) return syntax(absl::StrCat("'", host, "' is not an IPv6 address"));
  } else {
    const size_t colon = s.rfind(':');
    if (colon == absl::string_view::npos) return syntax("a port is required");
    host = std::string(s.substr(0, colon));
    port = s.substr(colon + 1);
    if (host.find(':') != std::string::npos) return syntax("put an IPv6 address in brackets");
    in_addr v4{};
    if (inet_pton(AF_INET, host.c_str(), &v4) != 1) {
      return syntax(absl::StrCat("'", host, "' is not a numeric IPv4 address"));
    }
  }
  uint64_t n = 0;
  if (!AllDigits(port) || !absl::SimpleAtoi(port, &n) || n == 0 || n > 65535) {
    return syntax(absl::StrCat("the port must be a number from 1 to 65535, not '", port, "'"));
  }
  v1::SocketAddress out;
  out.set_address(host);
  out.set_port(static_cast<uint32_t>(n));
  return out;
}

absl::StatusOr<std::string> ParseHexBytes(absl::string_view text) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  if (absl::StartsWithIgnoreCase(s, "0x")) s.remove_prefix(2);
  std::string digits;
  for (size_t i = 0; i < s.size(); i++) {
    const char c = s[i];
    if (c == ':') {
      // Only between whole bytes: "0a:0b", not "0:a0b" or "0a::0b".
      if (digits.empty() || digits.size() % 2 != 0 || i + 1 == s.size() || s[i + 1] == ':') {
        return Bad(text, ": ':' goes only between bytes (0a:0b:0c)");
      }
      continue;
    }
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) {
      return Bad(text, " is not hex: '", std::string(1, c),
                 "' is not a hex digit (bytes as pairs of 0-9a-f, e.g. 0a0b0c)");
    }
    digits += c;
  }
  if (digits.empty()) return absl::InvalidArgumentError("no bytes given (bytes as pairs of hex digits, e.g. 0a0b0c)");
  if (digits.size() % 2 != 0) return Bad(text, " has an odd number of hex digits: give whole bytes");
  return absl::HexStringToBytes(digits);
}

const std::vector<std::string>& EventTypeNames() {
  static const std::vector<std::string> names = {
      "ADDR_RESOLVED",  "ADDR_ERROR",      "ROUTE_RESOLVED", "ROUTE_ERROR",   "CONNECT_REQUEST", "CONNECT_RESPONSE",
      "CONNECT_ERROR",  "UNREACHABLE",     "REJECTED",       "ESTABLISHED",   "DISCONNECTED",    "DEVICE_REMOVAL",
      "MULTICAST_JOIN", "MULTICAST_ERROR", "ADDR_CHANGE",    "TIMEWAIT_EXIT",
  };
  return names;
}

absl::StatusOr<std::vector<std::string>> ParseEventTypes(absl::string_view text) {
  std::vector<std::string> out;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    std::string word = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(item));
    std::replace(word.begin(), word.end(), '-', '_');
    absl::string_view name = word;
    absl::ConsumePrefix(&name, "RDMA_CM_EVENT_");
    const auto& known = EventTypeNames();
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string spelled = absl::AsciiStrToLower(absl::StrJoin(known, ", "));
      std::replace(spelled.begin(), spelled.end(), '_', '-');
      return absl::InvalidArgumentError(
          absl::StrCat(word.empty() ? "an empty event type" : absl::StrCat("unknown event type '", item, "'"),
                       " (known: ", spelled, ")"));
    }
    const std::string full = absl::StrCat("RDMA_CM_EVENT_", name);
    if (std::find(out.begin(), out.end(), full) == out.end()) out.push_back(full);
  }
  return out;
}

absl::StatusOr<std::string> TokenFromFile(absl::string_view contents) {
  constexpr size_t kMaxToken = 56;  // the private data of an RDMA_PS_TCP connect request
  const absl::string_view text = absl::StripAsciiWhitespace(contents);
  if (text.empty()) return absl::InvalidArgumentError("the file is empty: expected a token (raw, or in hex)");
  std::string token;
  if (text.find_first_not_of("0123456789abcdefABCDEFxX:") == absl::string_view::npos) {
    absl::StatusOr<std::string> bytes = ParseHexBytes(text);
    if (!bytes.ok()) return bytes.status();
    token = *std::move(bytes);
  } else {
    token = std::string(contents);
  }
  if (token.size() > kMaxToken) {
    return absl::InvalidArgumentError(
        absl::StrCat("the file holds ", token.size(), " bytes: a token is at most ", kMaxToken, " (rdmad's are 32)"));
  }
  return token;
}

}  // namespace rdmad::cli
