#include "cli/config_file.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace rdmad::cli {
namespace {

using Json = nlohmann::ordered_json;

absl::Status Bad(const std::string& path, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("config ", path, ": ", why));
}

// The file as JSON; nullopt when it does not exist.
absl::StatusOr<std::optional<Json>> Read(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::optional<Json>();
  std::stringstream text;
  text << in.rdbuf();
  Json j = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Bad(path, "not a JSON object");
  return std::optional<Json>(std::move(j));
}

std::string Dir(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
}

}  // namespace

const ContextEntry* ConfigFile::Find(const std::string& name) const {
  for (const ContextEntry& c : contexts) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

std::string ConfigPath() {
  if (const char* p = std::getenv("RDMACTL_CONFIG"); p != nullptr && *p != '\0') return p;
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x != nullptr && *x != '\0') return std::string(x) + "/rdmactl/config";
  if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') return std::string(h) + "/.config/rdmactl/config";
  return "";
}

absl::StatusOr<ConfigFile> LoadConfig(const std::string& path) {
  ConfigFile config;
  if (path.empty()) return config;
  absl::StatusOr<std::optional<Json>> read = Read(path);
  if (!read.ok()) return read.status();
  if (!read->has_value()) return config;
  const Json& j = **read;
  for (const auto& [key, value] : j.items()) {
    if (key == "current-context") {
      if (!value.is_string()) return Bad(path, "current-context is not a string");
      config.current = value.get<std::string>();
    } else if (key == "contexts") {
      if (!value.is_array()) return Bad(path, "contexts is not a list");
      for (const Json& c : value) {
        if (!c.is_object()) return Bad(path, "a context is not an object");
        ContextEntry e;
        for (const auto& [field, v] : c.items()) {
          if (!v.is_string()) return Bad(path, "context field '" + field + "' is not a string");
          const std::string s = v.get<std::string>();
          const std::string file = s.empty() || s[0] == '/' ? s : Dir(path) + "/" + s;
          if (field == "name") e.name = s;
          else if (field == "server") e.server = s;
          else if (field == "tls-ca") e.tls_ca = file;
          else if (field == "tls-cert") e.tls_cert = file;
          else if (field == "tls-key") e.tls_key = file;
          else if (field == "tls-server-name") e.tls_server_name = s;
          else return Bad(path, "unknown context field '" + field + "' (name, server, tls-ca, tls-cert, tls-key, tls-server-name)");
        }
        if (e.name.empty()) return Bad(path, "a context without a name");
        if (config.Find(e.name) != nullptr) return Bad(path, "two contexts named '" + e.name + "'");
        config.contexts.push_back(std::move(e));
      }
    } else {
      return Bad(path, "unknown key '" + key + "' (current-context, contexts)");
    }
  }
  return config;
}

absl::Status UseContext(const std::string& path, const std::string& name) {
  absl::StatusOr<ConfigFile> config = LoadConfig(path);
  if (!config.ok()) return config.status();
  if (config->Find(name) == nullptr) return absl::NotFoundError(absl::StrCat("no context '", name, "' in ", path));
  absl::StatusOr<std::optional<Json>> j = Read(path);
  if (!j.ok()) return j.status();
  (**j)["current-context"] = name;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << (**j).dump(2) << "\n";
    if (!out.flush()) return absl::InternalError(absl::StrCat("cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return absl::InternalError(absl::StrCat("cannot replace ", path));
  return absl::OkStatus();
}

std::string Pick(const std::optional<std::string>& flag, const char* env, const std::string& context,
                 const std::string& fallback) {
  if (flag) return *flag;
  if (env != nullptr && *env != '\0') return env;
  return context.empty() ? fallback : context;
}

}  // namespace rdmad::cli
