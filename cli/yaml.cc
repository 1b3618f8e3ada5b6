#include "cli/yaml.h"

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace rdmad::cli {
namespace {

using Json = nlohmann::ordered_json;

// Plain only when YAML cannot read it as anything else (a number, a bool, null, a structure, a comment).
std::string Scalar(const std::string& s) {
  static const char* const kReserved[] = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"};
  bool plain = !s.empty() && (absl::ascii_isalpha(static_cast<unsigned char>(s[0])) || s[0] == '/' || s[0] == '_') &&
               s.back() != ' ' && s.back() != ':' && !absl::StrContains(s, ": ") && !absl::StrContains(s, " #");
  for (char c : s) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && std::string(" _./:+=@,-").find(c) == std::string::npos) {
      plain = false;
    }
  }
  for (const char* r : kReserved) plain = plain && !absl::EqualsIgnoreCase(s, r);
  return plain ? s : Json(s).dump();
}

std::string Value(const Json& v) {
  if (v.is_string()) return Scalar(v.get<std::string>());
  if (v.is_object()) return "{}";  // only when empty
  if (v.is_array()) return "[]";
  return v.dump();  // number, bool, null
}

bool Nested(const Json& v) { return (v.is_object() || v.is_array()) && !v.empty(); }

// Lines of `v` (an object or array, not empty), each indented by `indent` spaces.
void Emit(const Json& v, size_t indent, std::string& out) {
  const std::string pad(indent, ' ');
  if (v.is_object()) {
    for (const auto& [key, item] : v.items()) {
      out += pad + Scalar(key) + ":";
      if (!Nested(item)) {
        out += " " + Value(item) + "\n";
      } else {
        out += "\n";
        Emit(item, item.is_object() ? indent + 2 : indent, out);  // a list under a key: kubectl's indent
      }
    }
    return;
  }
  for (const Json& item : v) {
    if (!Nested(item)) {
      out += pad + "- " + Value(item) + "\n";
      continue;
    }
    std::string block;
    Emit(item, indent + 2, block);
    block.replace(indent, 2, "- ");  // the first line carries the dash
    out += block;
  }
}

}  // namespace

absl::StatusOr<std::string> JsonToYaml(absl::string_view json) {
  Json v = Json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) return absl::InvalidArgumentError("not JSON");
  if (!Nested(v)) return Value(v) + "\n";
  std::string out;
  Emit(v, 0, out);
  return out;
}

}  // namespace rdmad::cli
