#include "server/config.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "server/common/log.h"
#include "server/common/status.h"

namespace rdmad {

absl::StatusOr<Config> ParseConfig(const std::string& json_text) {
  nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false,
                                           /*ignore_comments=*/true);
  if (j.is_discarded()) return absl::InvalidArgumentError("config: not valid JSON");
  if (!j.is_object()) return absl::InvalidArgumentError("config: the top level must be an object");
  Config c;
  auto strings = [](const nlohmann::json& v, const std::string& key) -> absl::StatusOr<std::vector<std::string>> {
    if (!v.is_array()) return InvalidArgument(key, "must be an array of strings");
    std::vector<std::string> out;
    for (const auto& s : v) {
      if (!s.is_string()) return InvalidArgument(key, "must be an array of strings");
      out.push_back(s.get<std::string>());
    }
    return out;
  };
  for (const auto& [key, value] : j.items()) {
    if (key == "listen") {
      RDMAD_ASSIGN_OR_RETURN(c.listen, strings(value, key));
      if (c.listen.empty()) return InvalidArgument(key, "needs at least one address");
    } else if (key == "allowed_file_roots") {
      RDMAD_ASSIGN_OR_RETURN(c.allowed_file_roots, strings(value, key));
      for (const auto& root : c.allowed_file_roots) {
        if (root.empty() || root[0] != '/') return InvalidArgument(key, "entries must be absolute paths");
      }
    } else if (key == "max_mr_bytes") {
      if (!value.is_number_unsigned()) return InvalidArgument(key, "must be a non-negative integer");
      c.max_mr_bytes = value.get<uint64_t>();
    } else if (key == "log_level") {
      LogLevel level;
      if (!value.is_string() || !ParseLogLevel(value.get<std::string>().c_str(), &level)) {
        return InvalidArgument(key, "must be one of debug, info, warning, error");
      }
      c.log_level = value.get<std::string>();
    } else {
      return InvalidArgument(key, "unknown setting (known: listen, allowed_file_roots, max_mr_bytes, log_level)");
    }
  }
  return c;
}

absl::StatusOr<Config> LoadConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return ErrnoError("open", errno, path);
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<Config> config = ParseConfig(text.str());
  if (!config.ok()) return WithContext(config.status(), path);
  return config;
}

}  // namespace rdmad
