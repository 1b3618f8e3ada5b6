#include "cli/config_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

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

// Replaces `path` by `j` atomically: a temporary file beside it with the old file's mode (0600 when new),
// written, fsync'ed and renamed over it. The directory is created (0700) if missing.
absl::Status WriteAtomically(const std::string& path, const Json& j) {
  const auto fail = [&](const char* what, const std::string& file, int err) {
    return absl::ErrnoToStatus(err, absl::StrCat("config ", path, ": ", what, " ", file));
  };
  std::error_code ec;
  if (std::filesystem::create_directories(Dir(path), ec); ec) return fail("cannot create the directory", Dir(path), ec.value());
  mode_t mode = 0600;
  if (struct stat st{}; stat(path.c_str(), &st) == 0) mode = st.st_mode & 07777;
  const std::string tmp = path + ".tmp";
  unlink(tmp.c_str());  // a leftover of an interrupted rewrite
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return fail("cannot create", tmp, errno);
  const std::string text = j.dump(2) + "\n";
  size_t done = 0;
  int err = 0;
  while (done < text.size() && err == 0) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno != EINTR) err = errno;
    if (n > 0) done += static_cast<size_t>(n);
  }
  if (err == 0 && fchmod(fd, mode) != 0) err = errno;
  if (err == 0 && fsync(fd) != 0) err = errno;
  if (close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    unlink(tmp.c_str());
    return fail("cannot write", tmp, err);
  }
  return absl::OkStatus();
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
  return WriteAtomically(path, **j);
}

absl::Status SetContext(const std::string& path, const std::string& name, const ContextChange& change,
                        bool make_current, bool* created) {
  if (name.empty()) return absl::InvalidArgumentError("config set-context: NAME is empty");
  absl::StatusOr<ConfigFile> config = LoadConfig(path);  // validates the file as it is
  if (!config.ok()) return config.status();
  absl::StatusOr<std::optional<Json>> read = Read(path);
  if (!read.ok()) return read.status();
  Json j = read->has_value() ? std::move(**read) : Json::object();
  if (!j.contains("contexts")) j["contexts"] = Json::array();
  Json* entry = nullptr;
  for (Json& c : j["contexts"]) {
    if (c.value("name", "") == name) entry = &c;
  }
  *created = entry == nullptr;
  if (entry == nullptr) {
    j["contexts"].push_back(Json{{"name", name}});
    entry = &j["contexts"].back();
  }
  const std::pair<const char*, const std::optional<std::string>*> fields[] = {
      {"server", &change.server},   {"tls-ca", &change.tls_ca},
      {"tls-cert", &change.tls_cert}, {"tls-key", &change.tls_key},
      {"tls-server-name", &change.tls_server_name}};
  for (const auto& [key, value] : fields) {
    if (*value) (*entry)[key] = **value;
  }
  if (make_current) j["current-context"] = name;
  return WriteAtomically(path, j);
}

absl::Status DeleteContext(const std::string& path, const std::string& name, bool* was_current) {
  absl::StatusOr<ConfigFile> config = LoadConfig(path);
  if (!config.ok()) return config.status();
  if (config->Find(name) == nullptr) return absl::NotFoundError(absl::StrCat("no context '", name, "' in ", path));
  absl::StatusOr<std::optional<Json>> read = Read(path);
  if (!read.ok()) return read.status();
  Json j = std::move(**read);  // the context exists: so does the file
  Json kept = Json::array();
  for (Json& c : j["contexts"]) {
    if (c.value("name", "") != name) kept.push_back(std::move(c));
  }
  j["contexts"] = std::move(kept);
  *was_current = config->current == name;
  if (*was_current) j.erase("current-context");
  return WriteAtomically(path, j);
}

std::string Pick(const std::optional<std::string>& flag, const char* env, const std::string& context,
                 const std::string& fallback) {
  if (flag) return *flag;
  if (env != nullptr && *env != '\0') return env;
  return context.empty() ? fallback : context;
}

}  // namespace rdmad::cli
