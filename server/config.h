// rdmad's settings, read from a JSON file (nlohmann/json). Unknown keys are errors, so a typo never
// silently falls back to a default. See docs/config.md.
// Thread-safety: a plain value, built once at start-up.
#ifndef RDMAD_SERVER_CONFIG_H_
#define RDMAD_SERVER_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "absl/status/statusor.h"

namespace rdmad {

inline constexpr char kDefaultSocket[] = "/run/rdmad/rdmad.sock";

// Security settings (docs/security.md). Quotas: 0 is unlimited.
struct TlsConfig {
  std::string cert;       // PEM: rdmad's certificate chain
  std::string key;        // PEM: its private key
  std::string client_ca;  // PEM: the CAs that sign client certificates (mutual TLS)
  bool enabled() const { return !cert.empty(); }
};
struct UnixSocketConfig {
  uint32_t mode = 0660;   // who can connect at all
  std::string group;      // the socket's group (name or number); empty: rdmad's
};
// A unix peer's uid (or, failing a uid match, gid) -> principal. Unmapped peers are "unix:uid:N".
struct UnixPrincipal {
  int64_t uid = -1;
  int64_t gid = -1;
  std::string principal;
};
struct Quotas {
  uint64_t pinned_bytes = 0, mrs = 0, mws = 0, qps = 0, cm_ids = 0, grants = 0, tokens = 0, connections = 0;
  uint64_t channels = 0;       // user event channels (each a thread and three descriptors)
  uint64_t watch_streams = 0;  // open Watch* streams
  uint64_t pds = 0;            // protection domains (each holds rdmad's bind QP and its CQ too)
  uint64_t rpc_per_second = 0;  // per gRPC connection
  uint64_t rpc_burst = 0;       // 0: rpc_per_second
};
struct TenantConfig {
  std::string name;
  std::vector<std::string> principals;
  std::vector<std::string> file_roots;  // narrow allowed_file_roots; empty: those
  std::vector<std::string> devices;     // "rxe0"; empty: every device
  int64_t uid = -1, gid = -1;           // file-system identity of its TLS callers; -1: none (no files)
  Quotas quotas;
};

// rdmad-wide caps on what all callers together may hold (admins included; docs/security.md#limits). Each is
// checked before the object is made: past it the call is RESOURCE_EXHAUSTED naming the limit. Tenants'
// quotas narrow these, never widen them.
struct Limits {
  uint64_t channels = 128;        // user event channels (each a thread and three descriptors)
  uint64_t watch_streams = 1024;  // open Watch* streams
  uint64_t cm_ids = 16384;        // CM ids made through the API (data-plane connections are `connections`)
  uint64_t tokens = 65536;        // outstanding connection tokens
  uint64_t connections = 16384;   // data-plane connections and user CM ids connected or connecting
  uint64_t grants = 65536;        // grants not ended
  uint64_t pds = 4096;            // protection domains
  uint64_t mrs = 1048576;         // memory regions
  uint64_t mws = 65536;           // memory windows made by AllocMw (grants' own windows count as grants)
  uint64_t qps = 16384;           // QPs made by CreateQp (rdma_cm ids' count as CM ids and connections)
  uint64_t descriptors = 256;     // descriptors passed over the descriptor socket, waiting to be registered
};

struct Config {
  // gRPC listen addresses: "unix:/path" or "host:port" (TCP, which has no authentication yet).
  std::vector<std::string> listen = {std::string("unix:") + kDefaultSocket};
  std::vector<std::string> allowed_file_roots = {"/dev/shm", "/dev/hugepages", "/run/rdmad"};
  // Files on other filesystems than tmpfs, hugetlbfs and ramfs may back a region (their page cache stays
  // pinned while it lives); false: refused (FAILED_PRECONDITION), and such a root is warned at start-up.
  bool allow_disk_files = false;
  uint64_t max_mr_bytes = 0;  // 0: the device's max_mr_size
  std::string log_level = "info";
  // The data-plane listener (rdma_cm): "10.0.2.15:7471", "[fe80::1]:7471", "0.0.0.0:7471". Empty: none.
  std::vector<std::string> rdma_listen;
  // The Prometheus endpoint (plain HTTP, unauthenticated: docs/operations.md#metrics): "127.0.0.1:9470".
  // Empty: none.
  std::string metrics_listen;
  int cm_workers = 2;   // worker event channels for accepted connections (1..64)
  int pin_workers = 2;  // threads that map and pin memory (1..64)
  // After posting a bind or an invalidation, how long the posting thread polls for its completion before
  // leaving it to the device's dispatcher (0..100000 us; 0: always the dispatcher).
  int64_t completion_poll_us = 300;
  int watch_buffer = 1024;  // events buffered per WatchEvents stream before it is cut off (16..1048576)
  int64_t max_grant_ttl_s = 86400;   // longest grant lease (1..604800 s)
  int64_t grant_quarantine_ms = 60000;  // a revoked key's window and value rest this long (0..3600000)
  int grant_window_pool = 8;  // windows kept ready per PD for grants (0..4096)
  // How long revoking a grant's key may wait on its client's connection before rdmad disconnects the client
  // to kill the key (100..600000 ms).
  int64_t grant_key_kill_timeout_ms = 5000;
  int64_t grant_end_grace_ms = 250;  // an ended grant's connection stays this long after ENDED (0..10000)
  // The widest key a grant may give (docs/grants.md#scopes-what-a-key-exposes), as rdmad::v1::GrantScope's
  // number: "qp" 1, "pd" 2, "mr" 3 (any: a device's narrowest, down to the MR's own rkey).
  int grant_max_scope = 3;
  // SIGTERM's drain (docs/operations.md#drain-and-shutdown): how long rdmad may take to end its grants,
  // disconnect and release everything before it forces its exit (1..3600 s).
  int64_t shutdown_deadline_s = 30;
  // The crash-safe state store (SQLite; docs/operations.md#restart-recovery): PDs, file-backed MRs, grants
  // and the name marks survive a restart. "": nothing is kept (names start at 1 again after a restart).
  std::string state_file;
  // Bind each memory window to a private bounds region over its range: "auto" (where the device's start-up
  // probe did not see it enforce window bounds), "always", "never" (unsafe where it does not: warned).
  std::string mw_bounds_region = "auto";

  // The descriptor socket (docs/PROTOCOL.md#memory-shared-by-file-descriptor), where local clients pass
  // memory as file descriptors: "auto" (the first unix listener's path with ".fd" appended; none without a
  // unix listener), an absolute path, or "" (none). Its mode and group are unix_socket's.
  std::string descriptor_socket = "auto";
  int64_t descriptor_ttl_s = 60;           // how long a passed descriptor waits for its RegisterMr (1..3600)
  uint64_t max_descriptors_per_principal = 16;  // descriptors one principal may have waiting (1..4096)

  bool insecure_tcp = false;  // a TCP listener without TLS is refused at start-up unless this is set
  TlsConfig tls;
  UnixSocketConfig unix_socket;
  std::vector<UnixPrincipal> unix_principals;
  // Neither admins nor tenants: single-tenant mode, every caller who can connect is an admin.
  std::vector<std::string> admins;
  std::vector<TenantConfig> tenants;
  // Quotas for a tenant that does not set its own (per quota: a tenant's explicit value, 0 included, wins).
  Quotas default_quotas;
  Limits limits;
  std::string audit = "-";  // the audit log: a file path, "-" for stdout, "" for none
};

// The descriptor socket's path for `config` ("auto" resolved), or "" for none.
std::string DescriptorSocketPath(const Config& config);

// "host:port" or "[v6]:port" -> host and port; INVALID_ARGUMENT naming `field` otherwise.
absl::Status SplitHostPort(const std::string& text, const std::string& field, std::string* host, uint16_t* port);

absl::StatusOr<Config> ParseConfig(const std::string& json_text);
// Start-up check of the listeners against the security settings: a TCP listener needs `tls` or
// `insecure_tcp` (FAILED_PRECONDITION on "listen" otherwise). Call after flags override the file.
absl::Status CheckListeners(const Config& config);
// The security keys (config_security.cc): true if `key` is one of them, with *status its parse result.
bool ParseSecurityKey(const std::string& key, const nlohmann::json& value, Config* config, absl::Status* status);
// After every key was parsed: each tenant's quotas it did not set itself (in `root`, the whole config) take
// default_quotas' values.
void ApplyDefaultQuotas(const nlohmann::json& root, Config* config);
absl::StatusOr<Config> LoadConfig(const std::string& path);

}  // namespace rdmad

#endif  // RDMAD_SERVER_CONFIG_H_
