#include "server/auth/policy.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/common/status.h"

namespace rdmad::auth {

Policy::Policy(const Config& config)
    : single_tenant_(config.admins.empty() && config.tenants.empty()),
      unix_principals_(config.unix_principals),
      admins_(config.admins),
      tenants_(config.tenants) {
  for (size_t i = 0; i < tenants_.size(); ++i) {
    for (const auto& p : tenants_[i].principals) tenant_of_[p] = i;
  }
}

std::string Policy::UnixPrincipal(int64_t uid, int64_t gid) const {
  for (const auto& m : unix_principals_) {
    if (m.uid >= 0 && m.uid == uid) return m.principal;
  }
  for (const auto& m : unix_principals_) {
    if (m.gid >= 0 && m.gid == gid) return m.principal;
  }
  return absl::StrCat("unix:uid:", uid);
}

const TenantConfig* Policy::FindTenant(absl::string_view name) const {
  if (absl::StartsWith(name, "tenants/")) name.remove_prefix(8);
  for (const auto& t : tenants_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::string Policy::PrincipalOf(const Peer& peer) const {
  if (peer.transport == kTransportUnix && peer.uid >= 0) return UnixPrincipal(peer.uid, peer.gid);
  return peer.principal.empty() ? kPrincipalAnonymous : peer.principal;
}

absl::StatusOr<Caller> Policy::Resolve(const Peer& peer) const {
  Caller c;
  c.transport = peer.transport;
  c.peer = peer.address;
  c.authenticated = peer.authenticated;
  c.uid = peer.uid;
  c.gid = peer.gid;
  const bool unix_peer = peer.transport == kTransportUnix && peer.uid >= 0;
  c.principal = PrincipalOf(peer);
  c.files.principal = c.principal;
  // A unix peer's files are checked with its own uid and groups, whatever its role: rdmad (root) never
  // registers a file for someone who could not open it.
  if (unix_peer) {
    FileIdentity who{static_cast<uint32_t>(peer.uid), static_cast<uint32_t>(peer.gid), peer.groups};
    c.files.identity = who;
    c.files.check = true;
  }
  if (single_tenant_) {
    c.admin = true;
    return c;
  }
  if (std::find(admins_.begin(), admins_.end(), c.principal) != admins_.end()) {
    c.admin = true;
    return c;
  }
  auto it = tenant_of_.find(c.principal);
  if (it == tenant_of_.end()) {
    return FieldError(absl::StatusCode::kPermissionDenied, "",
                      absl::StrCat("principal '", c.principal, "' (", peer.transport,
                                   ") is neither an admin nor in a tenant of this rdmad"));
  }
  const TenantConfig& t = tenants_[it->second];
  c.tenant = t.name;
  c.files.check = true;
  c.files.roots = t.file_roots;
  if (!unix_peer) {
    // TLS callers act on files as the tenant's declared uid/gid, or not at all.
    c.files.identity.reset();
    if (t.uid >= 0) c.files.identity = FileIdentity{static_cast<uint32_t>(t.uid), static_cast<uint32_t>(t.gid), {}};
  }
  return c;
}

}  // namespace rdmad::auth
