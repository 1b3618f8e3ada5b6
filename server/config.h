// rdmad's settings, read from a JSON file (nlohmann/json). Unknown keys are errors, so a typo never
// silently falls back to a default. See docs/config.md.
// Thread-safety: a plain value, built once at start-up.
#ifndef RDMAD_SERVER_CONFIG_H_
#define RDMAD_SERVER_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace rdmad {

inline constexpr char kDefaultSocket[] = "/run/rdmad/rdmad.sock";

struct Config {
  // gRPC listen addresses: "unix:/path" or "host:port" (TCP, which has no authentication yet).
  std::vector<std::string> listen = {std::string("unix:") + kDefaultSocket};
  std::vector<std::string> allowed_file_roots = {"/dev/shm", "/dev/hugepages", "/run/rdmad"};
  uint64_t max_mr_bytes = 0;  // 0: the device's max_mr_size
  std::string log_level = "info";
  // The data-plane listener (rdma_cm): "10.0.2.15:7471", "[fe80::1]:7471", "0.0.0.0:7471". Empty: none.
  std::vector<std::string> rdma_listen;
  int cm_workers = 2;   // worker event channels for accepted connections (1..64)
  int pin_workers = 2;  // threads that map and pin memory (1..64)
  int watch_buffer = 1024;  // events buffered per WatchEvents stream before it is cut off (16..1048576)
  int64_t max_grant_ttl_s = 86400;   // longest grant lease (1..604800 s)
  int64_t grant_quarantine_ms = 60000;  // a revoked key's window and value rest this long (0..3600000)
  int grant_window_pool = 8;  // windows kept ready per PD for grants (0..4096)
};

// "host:port" or "[v6]:port" -> host and port; INVALID_ARGUMENT naming `field` otherwise.
absl::Status SplitHostPort(const std::string& text, const std::string& field, std::string* host, uint16_t* port);

absl::StatusOr<Config> ParseConfig(const std::string& json_text);
absl::StatusOr<Config> LoadConfig(const std::string& path);

}  // namespace rdmad

#endif  // RDMAD_SERVER_CONFIG_H_
