// Who is calling, as the transport proved it: the client certificate of a mutual-TLS connection, the kernel's
// credentials of a unix-socket peer (SO_PEERCRED), or nothing (insecure TCP). rdmad's policy (policy.h) maps
// a Peer to a Caller; docs/security.md#listeners-what-each-one-trusts has the rules.
//
// How a call is recognized (gRPC 1.51, checked in tests/unit/listeners_test.cc):
//   - TLS: the call's auth context has transport_security_type "tls" (TlsServerCredentials) or "ssl"; the
//     handshake already refused unverified, expired and missing client certificates.
//   - insecure TCP: transport_security_type "insecure", peer "ipv4:..." / "ipv6:...".
//   - unix: rdmad accepts unix connections itself (listeners.h) and hands each fd to gRPC, whose peer string
//     is then "fd:N"; the acceptor recorded fd N's SO_PEERCRED here before gRPC saw the fd.
//
// Thread-safety: PeerDirectory is safe to use from any thread: Record() runs on the accept thread
// (`unix-accept`), Identify() on gRPC's threads; one mutex guards the fd table, held only to copy an entry.
#ifndef RDMAD_SERVER_AUTH_PEER_H_
#define RDMAD_SERVER_AUTH_PEER_H_

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "server/common/sync.h"

namespace rdmad::auth {

inline constexpr char kTransportUnix[] = "unix";
inline constexpr char kTransportTls[] = "tls";
inline constexpr char kTransportInsecureTcp[] = "insecure_tcp";
inline constexpr char kTransportUnknown[] = "unknown";  // none of rdmad's listeners (e.g. an in-process channel)
inline constexpr char kPrincipalAnonymous[] = "anonymous";

struct Peer {
  std::string transport;  // kTransportUnix, kTransportTls, kTransportInsecureTcp, kTransportUnknown
  // TLS: the client certificate's single URI SAN ("spiffe://cluster/ns/app/sa/reader"), or, if it has no URI
  // SAN, "CN=<subject CN>"; empty if neither names it (then authenticated is false). insecure TCP:
  // "anonymous". unix: empty (the policy maps uid and gid).
  std::string principal;
  // TLS: a verified certificate that names a principal. unix: the kernel's credentials are known.
  bool authenticated = false;
  // unix: the connecting process's credentials when it called connect() (SO_PEERCRED), and its
  // supplementary groups then (SO_PEERGROUPS). -1 / empty elsewhere.
  int64_t uid = -1, gid = -1, pid = -1;
  std::vector<uint32_t> groups;
  std::string address;  // the gRPC peer string: "ipv4:10.0.0.7:51234", "ipv6:[::1]:5123", "fd:12"
};

// What the kernel says about a unix-socket peer, read when rdmad accepted its connection.
struct UnixCredentials {
  int64_t uid = -1, gid = -1, pid = -1;
  std::vector<uint32_t> groups;
};

// The principal a verified client certificate names, from a TLS call's auth context ("" if none): its URI
// SAN if it has exactly one (with a URI scheme other than "unix", so no certificate can pose as a unix
// peer's "unix:uid:N"), "CN=<cn>" if it has no URI SAN; "" if it has several URI SANs (ambiguous), no CN,
// or a name with control characters. A bare URI and "CN=..." never collide: "CN=" is not a URI scheme.
std::string TlsPrincipal(const grpc::AuthContext& auth);

class PeerDirectory {
 public:
  PeerDirectory() = default;
  PeerDirectory(const PeerDirectory&) = delete;
  PeerDirectory& operator=(const PeerDirectory&) = delete;

  // The accept thread, before it hands `fd` to gRPC: the connection on fd is this peer's. An entry for a
  // reused fd number is overwritten (its previous connection is gone: see Identify).
  void RecordUnix(int fd, const UnixCredentials& credentials);

  // The peer of a call, on any listener. For "fd:N", the entry the acceptor recorded for N: gRPC closes a
  // connection's fd only when its transport is destroyed, after the last call on it ended, so while a call
  // runs its fd number cannot have been reused by a newer connection; a call's Identify therefore always
  // finds its own connection's entry. (A number with no entry -- never accepted by our acceptor -- gives
  // transport "unix", authenticated false.)
  Peer Identify(const grpc::ServerContextBase& ctx) const;
  // The same from the parts (tests; `auth` may be null).
  Peer Identify(const std::string& peer, const grpc::AuthContext* auth) const;

 private:
  mutable Mutex mu_;
  std::unordered_map<int, UnixCredentials> unix_ ABSL_GUARDED_BY(mu_);  // accepted fd -> credentials
};

}  // namespace rdmad::auth

#endif  // RDMAD_SERVER_AUTH_PEER_H_
