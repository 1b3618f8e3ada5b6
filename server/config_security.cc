// The security part of rdmad's config: TLS, the unix socket, principals, admins, tenants and their quotas,
// the audit log (docs/config.md#security, docs/security.md). Thread-safety: stateless.
#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/common/status.h"
#include "server/config.h"

namespace rdmad {
namespace {

using nlohmann::json;

absl::StatusOr<std::vector<std::string>> Strings(const json& v, const std::string& field) {
  if (!v.is_array()) return InvalidArgument(field, "must be an array of strings");
  std::vector<std::string> out;
  for (const auto& s : v) {
    if (!s.is_string() || s.get<std::string>().empty()) return InvalidArgument(field, "must be an array of non-empty strings");
    out.push_back(s.get<std::string>());
  }
  return out;
}

absl::StatusOr<std::string> String(const json& v, const std::string& field) {
  if (!v.is_string() || v.get<std::string>().empty()) return InvalidArgument(field, "must be a non-empty string");
  return v.get<std::string>();
}

absl::StatusOr<int64_t> Id(const json& v, const std::string& field) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 0xfffffffe) {
    return InvalidArgument(field, "must be an integer from 0 to 4294967294");
  }
  return v.get<int64_t>();
}

absl::Status AbsolutePaths(const std::vector<std::string>& paths, const std::string& field) {
  for (const auto& p : paths) {
    if (p[0] != '/') return InvalidArgument(field, "entries must be absolute paths");
  }
  return absl::OkStatus();
}

absl::Status ParseTls(const json& v, TlsConfig* tls) {
  if (!v.is_object()) return InvalidArgument("tls", "must be an object with cert, key and client_ca");
  for (const auto& [k, f] : v.items()) {
    const std::string field = "tls." + k;
    std::string* dst = k == "cert" ? &tls->cert : k == "key" ? &tls->key : k == "client_ca" ? &tls->client_ca : nullptr;
    if (dst == nullptr) return InvalidArgument(field, "unknown setting (known: cert, key, client_ca)");
    RDMAD_ASSIGN_OR_RETURN(*dst, String(f, field));
    if ((*dst)[0] != '/') return InvalidArgument(field, "must be an absolute path");
  }
  if (tls->cert.empty() || tls->key.empty() || tls->client_ca.empty()) {
    return InvalidArgument("tls", "needs cert, key and client_ca (rdmad requires client certificates)");
  }
  return absl::OkStatus();
}

absl::Status ParseUnixSocket(const json& v, UnixSocketConfig* u) {
  if (!v.is_object()) return InvalidArgument("unix_socket", "must be an object with mode and group");
  for (const auto& [k, f] : v.items()) {
    const std::string field = "unix_socket." + k;
    if (k == "mode") {
      uint32_t mode = 0;
      if (!f.is_string() || !absl::numbers_internal::safe_strtou32_base(f.get<std::string>(), &mode, 8) ||
          mode > 0777) {
        return InvalidArgument(field, "must be an octal string such as \"0660\"");
      }
      u->mode = mode;
    } else if (k == "group") {
      RDMAD_ASSIGN_OR_RETURN(u->group, String(f, field));
    } else {
      return InvalidArgument(field, "unknown setting (known: mode, group)");
    }
  }
  return absl::OkStatus();
}

absl::Status ParseUnixPrincipals(const json& v, std::vector<UnixPrincipal>* out) {
  if (!v.is_array()) return InvalidArgument("unix_principals", "must be an array of {uid|gid, principal}");
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string base = absl::StrCat("unix_principals[", i, "]");
    if (!v[i].is_object()) return InvalidArgument(base, "must be an object {uid|gid, principal}");
    UnixPrincipal p;
    for (const auto& [k, f] : v[i].items()) {
      const std::string field = base + "." + k;
      if (k == "uid") {
        RDMAD_ASSIGN_OR_RETURN(p.uid, Id(f, field));
      } else if (k == "gid") {
        RDMAD_ASSIGN_OR_RETURN(p.gid, Id(f, field));
      } else if (k == "principal") {
        RDMAD_ASSIGN_OR_RETURN(p.principal, String(f, field));
      } else {
        return InvalidArgument(field, "unknown setting (known: uid, gid, principal)");
      }
    }
    if ((p.uid < 0) == (p.gid < 0)) return InvalidArgument(base, "needs exactly one of uid and gid");
    if (p.principal.empty()) return InvalidArgument(base + ".principal", "is required");
    out->push_back(p);
  }
  return absl::OkStatus();
}

// A quota's field by its config key; null if there is none.
uint64_t Quotas::*QuotaField(const std::string& k) {
  static const std::pair<const char*, uint64_t Quotas::*> kFields[] = {
      {"pinned_bytes", &Quotas::pinned_bytes}, {"mrs", &Quotas::mrs},
      {"mws", &Quotas::mws},                   {"qps", &Quotas::qps},
      {"cm_ids", &Quotas::cm_ids},             {"grants", &Quotas::grants},
      {"tokens", &Quotas::tokens},             {"connections", &Quotas::connections},
      {"channels", &Quotas::channels},         {"watch_streams", &Quotas::watch_streams},
      {"pds", &Quotas::pds},
      {"rpc_per_second", &Quotas::rpc_per_second}, {"rpc_burst", &Quotas::rpc_burst}};
  for (const auto& [name, field] : kFields) {
    if (k == name) return field;
  }
  return nullptr;
}

absl::Status ParseQuotas(const json& v, const std::string& base, Quotas* q) {
  if (!v.is_object()) return InvalidArgument(base, "must be an object of quota: limit");
  for (const auto& [k, f] : v.items()) {
    const std::string field = base + "." + k;
    uint64_t Quotas::*member = QuotaField(k);
    uint64_t* dst = member == nullptr ? nullptr : &(q->*member);
    if (dst == nullptr) {
      return InvalidArgument(field, "unknown quota (known: pds, pinned_bytes, mrs, mws, qps, cm_ids, grants, "
                                    "tokens, connections, channels, watch_streams, rpc_per_second, rpc_burst)");
    }
    if (!f.is_number_unsigned()) return InvalidArgument(field, "must be a non-negative integer (0: unlimited)");
    *dst = f.get<uint64_t>();
  }
  return absl::OkStatus();
}

absl::Status ParseTenants(const json& v, std::vector<TenantConfig>* out) {
  if (!v.is_array()) return InvalidArgument("tenants", "must be an array of tenants");
  std::set<std::string> names;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string base = absl::StrCat("tenants[", i, "]");
    if (!v[i].is_object()) return InvalidArgument(base, "must be an object");
    TenantConfig t;
    for (const auto& [k, f] : v[i].items()) {
      const std::string field = base + "." + k;
      if (k == "name") {
        RDMAD_ASSIGN_OR_RETURN(t.name, String(f, field));
        for (char c : t.name) {
          if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) {
            return InvalidArgument(field, "may hold only letters, digits, '-', '_' and '.'");
          }
        }
      } else if (k == "principals") {
        RDMAD_ASSIGN_OR_RETURN(t.principals, Strings(f, field));
      } else if (k == "file_roots") {
        RDMAD_ASSIGN_OR_RETURN(t.file_roots, Strings(f, field));
        RDMAD_RETURN_IF_ERROR(AbsolutePaths(t.file_roots, field));
      } else if (k == "devices") {
        RDMAD_ASSIGN_OR_RETURN(t.devices, Strings(f, field));
      } else if (k == "uid") {
        RDMAD_ASSIGN_OR_RETURN(t.uid, Id(f, field));
      } else if (k == "gid") {
        RDMAD_ASSIGN_OR_RETURN(t.gid, Id(f, field));
      } else if (k == "quotas") {
        RDMAD_RETURN_IF_ERROR(ParseQuotas(f, field, &t.quotas));
      } else {
        return InvalidArgument(field, "unknown setting (known: name, principals, file_roots, devices, uid, gid, quotas)");
      }
    }
    if (t.name.empty()) return InvalidArgument(base + ".name", "is required");
    if (!names.insert(t.name).second) return InvalidArgument(base + ".name", "'" + t.name + "' is declared twice");
    if ((t.uid < 0) != (t.gid < 0)) return InvalidArgument(base, "uid and gid go together");
    out->push_back(std::move(t));
  }
  return absl::OkStatus();
}

absl::Status ParseLimits(const json& v, Limits* l) {
  if (!v.is_object()) return InvalidArgument("limits", "must be an object of limit: value");
  for (const auto& [k, f] : v.items()) {
    const std::string field = "limits." + k;
    uint64_t* dst = k == "channels" ? &l->channels : k == "watch_streams" ? &l->watch_streams
                  : k == "cm_ids" ? &l->cm_ids : k == "tokens" ? &l->tokens
                  : k == "connections" ? &l->connections : k == "grants" ? &l->grants
                  : k == "pds" ? &l->pds : k == "mrs" ? &l->mrs : k == "mws" ? &l->mws : k == "qps" ? &l->qps
                  : k == "descriptors" ? &l->descriptors : nullptr;
    if (dst == nullptr) {
      return InvalidArgument(field, "unknown limit (known: channels, watch_streams, cm_ids, tokens, connections, "
                                    "grants, pds, mrs, mws, qps, descriptors)");
    }
    // A cap every caller shares must exist: 0 would be none at all.
    if (!f.is_number_unsigned() || f.get<uint64_t>() < 1 || f.get<uint64_t>() > 1048576) {
      return InvalidArgument(field, "must be an integer from 1 to 1048576");
    }
    *dst = f.get<uint64_t>();
  }
  return absl::OkStatus();
}

// A principal is an admin or in one tenant, never two places.
absl::Status CheckPrincipals(const Config& c) {
  std::set<std::string> seen(c.admins.begin(), c.admins.end());
  if (seen.size() != c.admins.size()) return InvalidArgument("admins", "lists a principal twice");
  for (size_t i = 0; i < c.tenants.size(); ++i) {
    for (const auto& p : c.tenants[i].principals) {
      if (!seen.insert(p).second) {
        return InvalidArgument(absl::StrCat("tenants[", i, "].principals"),
                               "'" + p + "' is already an admin or in another tenant");
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool ParseSecurityKey(const std::string& key, const nlohmann::json& value, Config* c, absl::Status* status) {
  if (key == "insecure_tcp") {
    *status = value.is_boolean() ? absl::OkStatus() : InvalidArgument(key, "must be true or false");
    if (status->ok()) c->insecure_tcp = value.get<bool>();
  } else if (key == "tls") {
    *status = ParseTls(value, &c->tls);
  } else if (key == "unix_socket") {
    *status = ParseUnixSocket(value, &c->unix_socket);
  } else if (key == "unix_principals") {
    *status = ParseUnixPrincipals(value, &c->unix_principals);
  } else if (key == "admins") {
    auto a = Strings(value, key);
    *status = a.status();
    if (a.ok()) c->admins = *a;
    if (status->ok()) *status = CheckPrincipals(*c);
  } else if (key == "tenants") {
    *status = ParseTenants(value, &c->tenants);
    if (status->ok()) *status = CheckPrincipals(*c);
  } else if (key == "default_quotas") {
    *status = ParseQuotas(value, key, &c->default_quotas);
  } else if (key == "limits") {
    *status = ParseLimits(value, &c->limits);
  } else if (key == "audit") {
    *status = value.is_string() ? absl::OkStatus() : InvalidArgument(key, "must be a path, \"-\" or \"\"");
    if (status->ok()) c->audit = value.get<std::string>();
    if (status->ok() && !c->audit.empty() && c->audit != "-" && c->audit[0] != '/') {
      *status = InvalidArgument(key, "must be an absolute path, \"-\" (stdout) or \"\" (off)");
    }
  } else {
    return false;
  }
  return true;
}

void ApplyDefaultQuotas(const nlohmann::json& root, Config* c) {
  const json* tenants = root.contains("tenants") ? &root.at("tenants") : nullptr;
  for (size_t i = 0; i < c->tenants.size(); ++i) {
    const json* own = nullptr;
    if (tenants != nullptr && i < tenants->size() && (*tenants)[i].contains("quotas")) own = &(*tenants)[i]["quotas"];
    for (const char* k : {"pinned_bytes", "mrs", "mws", "qps", "cm_ids", "grants", "tokens", "connections",
                          "channels", "watch_streams", "rpc_per_second", "rpc_burst"}) {
      if (own != nullptr && own->contains(k)) continue;  // the tenant's own value, 0 included, wins
      uint64_t Quotas::*member = QuotaField(k);
      c->tenants[i].quotas.*member = c->default_quotas.*member;
    }
  }
}

absl::Status CheckListeners(const Config& c) {
  for (const auto& a : c.listen) {
    if (absl::StartsWith(a, "unix:")) continue;
    if (!c.tls.enabled() && !c.insecure_tcp) {
      return FailedPrecondition("listen", "TCP listener '" + a + "' without TLS: configure \"tls\" (mutual TLS), "
                                          "or set \"insecure_tcp\": true to accept unauthenticated callers");
    }
  }
  return absl::OkStatus();
}

}  // namespace rdmad
