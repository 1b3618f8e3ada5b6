// rdmad's access policy: from what the transport proved about a peer (a TLS certificate's principal, a
// unix peer's uid and gid) to a Caller: its principal, tenant and role, and the rights it has on files.
// docs/security.md describes the rules; the config keys are admins, tenants, unix_principals (config.h).
//
// Single-tenant mode (the config names neither admins nor tenants): every caller who can connect is an
// admin, as before tenants existed; only the file-rights check of unix peers applies.
//
// Thread-safety: immutable after construction; every method may be called from any thread.
#ifndef RDMAD_SERVER_AUTH_POLICY_H_
#define RDMAD_SERVER_AUTH_POLICY_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/auth/caller.h"
#include "server/auth/peer.h"
#include "server/config.h"

namespace rdmad::auth {

class Policy {
 public:
  explicit Policy(const Config& config);

  bool single_tenant() const { return single_tenant_; }
  // The caller, or PERMISSION_DENIED naming the principal when it is neither an admin nor in a tenant.
  absl::StatusOr<Caller> Resolve(const Peer& peer) const;
  // The principal a peer is known by, whether or not it may call: the unix mapping, the certificate's, or
  // "anonymous".
  std::string PrincipalOf(const Peer& peer) const;
  // The unix peer's principal: unix_principals by uid, then by gid, else "unix:uid:N".
  std::string UnixPrincipal(int64_t uid, int64_t gid) const;
  // A tenant by name ("app" or "tenants/app"); nullptr if none.
  const TenantConfig* FindTenant(absl::string_view name) const;
  const std::vector<TenantConfig>& tenants() const { return tenants_; }

 private:
  bool single_tenant_;
  std::vector<rdmad::UnixPrincipal> unix_principals_;
  std::vector<std::string> admins_;
  std::vector<TenantConfig> tenants_;
  std::map<std::string, size_t, std::less<>> tenant_of_;  // principal -> index in tenants_
};

}  // namespace rdmad::auth

#endif  // RDMAD_SERVER_AUTH_POLICY_H_
