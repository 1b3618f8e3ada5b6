// Who is calling (peer.h). Thread-safety: PeerDirectory's table is guarded by mu_; the rest is stateless.
#include "server/auth/peer.h"

#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"

namespace rdmad::auth {
namespace {

std::vector<std::string> Values(const grpc::AuthContext& auth, const char* name) {
  std::vector<std::string> out;
  for (const grpc::string_ref& v : auth.FindPropertyValues(name)) out.emplace_back(v.data(), v.size());
  return out;
}

// Printable ASCII only: a principal is logged, audited and compared, and a certificate is not trusted to
// put control characters (or bytes a terminal would interpret) into any of those.
bool Printable(const std::string& s) {
  if (s.empty() || s.size() > 1024) return false;
  for (unsigned char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

// RFC 3986: scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ), then ":".
bool HasUriScheme(const std::string& uri, std::string* scheme) {
  size_t colon = uri.find(':');
  if (colon == 0 || colon == std::string::npos || !std::isalpha(static_cast<unsigned char>(uri[0]))) return false;
  for (size_t i = 1; i < colon; ++i) {
    const char c = uri[i];
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' && c != '.') return false;
  }
  *scheme = absl::AsciiStrToLower(uri.substr(0, colon));
  return true;
}

bool IsTls(const grpc::AuthContext* auth) {
  if (auth == nullptr) return false;
  for (const std::string& t : Values(*auth, GRPC_TRANSPORT_SECURITY_TYPE_PROPERTY_NAME)) {
    if (t == "tls" || t == "ssl") return true;
  }
  return false;
}

}  // namespace

std::string TlsPrincipal(const grpc::AuthContext& auth) {
  if (!auth.IsPeerAuthenticated()) return "";
  const std::vector<std::string> uris = Values(auth, GRPC_PEER_URI_PROPERTY_NAME);
  if (uris.size() > 1) return "";  // which one? the certificate names several identities
  if (uris.size() == 1) {
    std::string scheme;
    if (!Printable(uris[0]) || !HasUriScheme(uris[0], &scheme) || scheme == "unix") return "";
    return uris[0];
  }
  const std::vector<std::string> cns = Values(auth, GRPC_X509_CN_PROPERTY_NAME);
  if (cns.size() != 1 || !Printable(cns[0])) return "";
  return "CN=" + cns[0];
}

void PeerDirectory::RecordUnix(int fd, const UnixCredentials& credentials) {
  MutexLock lock(&mu_);
  unix_[fd] = credentials;
}

Peer PeerDirectory::Identify(const grpc::ServerContextBase& ctx) const {
  std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
  return Identify(ctx.peer(), auth.get());
}

Peer PeerDirectory::Identify(const std::string& address, const grpc::AuthContext* auth) const {
  Peer p;
  p.address = address;
  if (IsTls(auth)) {
    p.transport = kTransportTls;
    p.principal = TlsPrincipal(*auth);
    p.authenticated = !p.principal.empty();
    return p;
  }
  int fd = -1;
  if (absl::StartsWith(address, "fd:") && absl::SimpleAtoi(address.substr(3), &fd)) {
    p.transport = kTransportUnix;
    MutexLock lock(&mu_);
    auto it = unix_.find(fd);
    if (it != unix_.end()) {
      p.uid = it->second.uid;
      p.gid = it->second.gid;
      p.pid = it->second.pid;
      p.groups = it->second.groups;
      p.authenticated = true;
    }
    return p;
  }
  if (absl::StartsWith(address, "ipv4:") || absl::StartsWith(address, "ipv6:")) {
    p.transport = kTransportInsecureTcp;
    p.principal = kPrincipalAnonymous;
    return p;
  }
  // Not one of rdmad's listeners: gRPC's own unix listener ("unix:..."), an in-process channel, ...
  p.transport = absl::StartsWith(address, "unix:") ? kTransportUnix : kTransportUnknown;
  return p;
}

}  // namespace rdmad::auth
