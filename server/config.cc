#include "server/config.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
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
    } else if (key == "allow_disk_files") {
      if (!value.is_boolean()) return InvalidArgument(key, "must be true or false");
      c.allow_disk_files = value.get<bool>();
    } else if (key == "max_mr_bytes") {
      if (!value.is_number_unsigned()) return InvalidArgument(key, "must be a non-negative integer");
      c.max_mr_bytes = value.get<uint64_t>();
    } else if (key == "log_level") {
      LogLevel level;
      if (!value.is_string() || !ParseLogLevel(value.get<std::string>().c_str(), &level)) {
        return InvalidArgument(key, "must be one of debug, info, warning, error");
      }
      c.log_level = value.get<std::string>();
    } else if (key == "rdma_listen") {
      RDMAD_ASSIGN_OR_RETURN(c.rdma_listen, strings(value, key));
      for (const auto& a : c.rdma_listen) {
        std::string host;
        uint16_t port;
        RDMAD_RETURN_IF_ERROR(SplitHostPort(a, key, &host, &port));
      }
    } else if (key == "metrics_listen") {
      if (!value.is_string()) return InvalidArgument(key, "must be a string: host:port, or \"\" for none");
      c.metrics_listen = value.get<std::string>();
      if (!c.metrics_listen.empty()) {
        std::string host;
        uint16_t port;
        RDMAD_RETURN_IF_ERROR(SplitHostPort(c.metrics_listen, key, &host, &port));
      }
    } else if (key == "cm_workers" || key == "pin_workers") {
      if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > 64) {
        return InvalidArgument(key, "must be an integer from 1 to 64");
      }
      (key == "cm_workers" ? c.cm_workers : c.pin_workers) = value.get<int>();
    } else if (key == "completion_poll_us") {
      if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() > 100000) {
        return InvalidArgument(key, "must be an integer from 0 to 100000 (microseconds)");
      }
      c.completion_poll_us = value.get<int64_t>();
    } else if (key == "watch_buffer") {
      if (!value.is_number_integer() || value.get<int64_t>() < 16 || value.get<int64_t>() > 1048576) {
        return InvalidArgument(key, "must be an integer from 16 to 1048576");
      }
      c.watch_buffer = value.get<int>();
    } else if (key == "max_grant_ttl_s" || key == "grant_quarantine_ms" || key == "grant_window_pool" ||
               key == "grant_key_kill_timeout_ms" || key == "grant_end_grace_ms") {
      const int64_t lo = key == "max_grant_ttl_s" ? 1 : key == "grant_key_kill_timeout_ms" ? 100 : 0;
      const int64_t hi = key == "max_grant_ttl_s"             ? 604800
                         : key == "grant_quarantine_ms"       ? 3600000
                         : key == "grant_key_kill_timeout_ms" ? 600000
                         : key == "grant_end_grace_ms"        ? 10000
                                                              : 4096;
      if (!value.is_number_integer() || value.get<int64_t>() < lo || value.get<int64_t>() > hi) {
        return InvalidArgument(key, absl::StrCat("must be an integer from ", lo, " to ", hi));
      }
      if (key == "max_grant_ttl_s") c.max_grant_ttl_s = value.get<int64_t>();
      else if (key == "grant_quarantine_ms") c.grant_quarantine_ms = value.get<int64_t>();
      else if (key == "grant_key_kill_timeout_ms") c.grant_key_kill_timeout_ms = value.get<int64_t>();
      else if (key == "grant_end_grace_ms") c.grant_end_grace_ms = value.get<int64_t>();
      else c.grant_window_pool = value.get<int>();
    } else if (key == "grant_max_scope") {
      const std::string v = value.is_string() ? value.get<std::string>() : "";
      if (v != "qp" && v != "pd" && v != "mr") {
        return InvalidArgument(key, "must be \"qp\", \"pd\" or \"mr\" (the widest key a grant may give)");
      }
      c.grant_max_scope = v == "qp" ? 1 : v == "pd" ? 2 : 3;
    } else if (key == "shutdown_deadline_s") {
      if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > 3600) {
        return InvalidArgument(key, "must be an integer from 1 to 3600 (seconds)");
      }
      c.shutdown_deadline_s = value.get<int64_t>();
    } else if (key == "state_file") {
      if (!value.is_string() || (!value.get<std::string>().empty() && value.get<std::string>()[0] != '/')) {
        return InvalidArgument(key, "must be an absolute path, or \"\" (no state kept across restarts)");
      }
      c.state_file = value.get<std::string>();
    } else if (key == "descriptor_socket") {
      const std::string v = value.is_string() ? value.get<std::string>() : "-";
      if (v != "auto" && !v.empty() && v[0] != '/') {
        return InvalidArgument(key, "must be \"auto\", an absolute path, or \"\" (none)");
      }
      c.descriptor_socket = v;
    } else if (key == "descriptor_ttl_s" || key == "max_descriptors_per_principal") {
      const int64_t hi = key == "descriptor_ttl_s" ? 3600 : 4096;
      if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > hi) {
        return InvalidArgument(key, absl::StrCat("must be an integer from 1 to ", hi));
      }
      if (key == "descriptor_ttl_s") c.descriptor_ttl_s = value.get<int64_t>();
      else c.max_descriptors_per_principal = value.get<uint64_t>();
    } else if (key == "mw_bounds_region") {
      const std::string v = value.is_string() ? value.get<std::string>() : "";
      if (v != "auto" && v != "always" && v != "never") {
        return InvalidArgument(key, "must be \"auto\", \"always\" or \"never\"");
      }
      c.mw_bounds_region = v;
    } else if (absl::Status s; ParseSecurityKey(key, value, &c, &s)) {
      RDMAD_RETURN_IF_ERROR(s);
    } else {
      return InvalidArgument(key, "unknown setting (known: listen, allowed_file_roots, allow_disk_files, "
                                  "max_mr_bytes, log_level, rdma_listen, cm_workers, pin_workers, completion_poll_us, watch_buffer, max_grant_ttl_s, "
                                  "grant_quarantine_ms, grant_window_pool, grant_key_kill_timeout_ms, grant_end_grace_ms, grant_max_scope, shutdown_deadline_s, state_file, insecure_tcp, "
                                  "tls, unix_socket, unix_principals, admins, tenants, audit, metrics_listen, "
                                  "mw_bounds_region, descriptor_socket, descriptor_ttl_s, "
                                  "max_descriptors_per_principal, default_quotas, limits)");
    }
  }
  ApplyDefaultQuotas(j, &c);
  return c;
}

std::string DescriptorSocketPath(const Config& config) {
  if (config.descriptor_socket != "auto") return config.descriptor_socket;
  for (const std::string& address : config.listen) {
    if (address.rfind("unix://", 0) == 0) return address.substr(7) + ".fd";
    if (address.rfind("unix:", 0) == 0) return address.substr(5) + ".fd";
  }
  return "";
}

absl::Status SplitHostPort(const std::string& text, const std::string& field, std::string* host, uint16_t* port) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return InvalidArgument(field, absl::StrCat("'", text, "' is not host:port"));
  }
  std::string h = text.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  int p = 0;
  if (!absl::SimpleAtoi(text.substr(colon + 1), &p) || p < 1 || p > 65535) {
    return InvalidArgument(field, absl::StrCat("'", text, "': the port must be 1..65535"));
  }
  *host = h;
  *port = static_cast<uint16_t>(p);
  return absl::OkStatus();
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
