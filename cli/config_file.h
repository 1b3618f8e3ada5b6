// rdmactl's config file: named contexts (an rdmad address and its TLS files) and the current one, JSON:
//
//   {"current-context": "lab",
//    "contexts": [{"name": "lab", "server": "10.0.0.5:7470", "tls-ca": "ca.pem", "tls-cert": "me.pem",
//                  "tls-key": "me.key", "tls-server-name": "rdmad.lab"}]}
//
// at $RDMACTL_CONFIG, else $XDG_CONFIG_HOME/rdmactl/config, else ~/.config/rdmactl/config. Relative TLS paths are
// from the file's directory. Settings come from, first to last: the flags, the environment (RDMAD_SERVER,
// RDMAD_TLS_*), the context (--context NAME, else current-context), the defaults.
//
// Thread-safety: stateless functions; a ConfigFile is a plain value.
#ifndef RDMAD_CLI_CONFIG_FILE_H_
#define RDMAD_CLI_CONFIG_FILE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace rdmad::cli {

struct ContextEntry {
  std::string name, server, tls_ca, tls_cert, tls_key, tls_server_name;
};

struct ConfigFile {
  std::string current;  // current-context; "" when not set
  std::vector<ContextEntry> contexts;
  const ContextEntry* Find(const std::string& name) const;
};

// Where the file is ("" when neither $RDMACTL_CONFIG, $XDG_CONFIG_HOME nor $HOME is set).
std::string ConfigPath();
// A missing file is an empty config; malformed JSON, a context without a name, twice the same name or an
// unknown key is an error naming the file (and the context).
absl::StatusOr<ConfigFile> LoadConfig(const std::string& path);
// Sets current-context in the file (the rest kept as it was), replacing it atomically; the context must exist.
absl::Status UseContext(const std::string& path, const std::string& name);

// The fields `config set-context` was given; nullopt: left as they are. TLS paths as they go in the file
// (the caller makes a relative one absolute: in the file it would be from the file's directory).
struct ContextChange {
  std::optional<std::string> server, tls_ca, tls_cert, tls_key, tls_server_name;
};
// Creates context `name` with the given fields, or changes only those of an existing one; `make_current`
// also sets current-context. The file (and its directory) is created if missing. Sets *created.
absl::Status SetContext(const std::string& path, const std::string& name, const ContextChange& change,
                        bool make_current, bool* created);
// Removes context `name` (NOT_FOUND if the file has none); if it was current-context, that is unset too
// (*was_current says so).
absl::Status DeleteContext(const std::string& path, const std::string& name, bool* was_current);
// Each rewrite goes to a new file beside `path` (mode kept; 0600 for a new file), flushed to disk, then
// renamed over it: a reader sees the old file or the new one, never half of one.

// The precedence: `flag` when given, else `env` when set and not empty, else `context` when not empty, else
// `fallback`.
std::string Pick(const std::optional<std::string>& flag, const char* env, const std::string& context,
                 const std::string& fallback);

}  // namespace rdmad::cli

#endif  // RDMAD_CLI_CONFIG_FILE_H_
