// rdmad's gRPC listeners (config "listen") and what each one trusts (docs/security.md#listeners-what-each-one-trusts):
//   - TCP ("host:port"): mutual TLS when "tls" is configured (TlsFiles: client certificates required and
//     verified against tls.client_ca, reloaded by Reload()), else plaintext if "insecure_tcp" is set, whose
//     callers are all "anonymous"; CheckListeners (config.h) refuses a TCP listener with neither at start-up.
//   - unix ("unix:/path"): rdmad creates, binds and listens on the socket itself, with its mode and group
//     from "unix_socket" set before listen(2) (so no one connects through a wider mode in between): they
//     decide who may connect at all. A thread accepts the connections, reads each peer's SO_PEERCRED (and
//     SO_PEERGROUPS) into the PeerDirectory and then hands the fd to gRPC (AddInsecureChannelFromFd), whose
//     calls on it have the peer "fd:N".
//
// Life cycle (main.cc): Create (TLS checked and copied, unix sockets listening, nothing accepted yet) ->
// AddTcpPorts(builder) -> builder.BuildAndStart() -> Start(server) -> Reload() on each SIGHUP ->
// StopAccepting() before server->Shutdown() -> destruction after the server is gone (TLS copies removed).
//
// Threads: `unix-accept` (one, started by Start, only if there is a unix listener) owns the listening unix
// sockets while it runs: it accepts, records credentials and hands fds to gRPC, and nothing else.
// Everything else runs on the caller's thread (main); StopAccepting wakes the thread and joins it before it
// closes the sockets. Reload may be called from any thread (TlsFiles serializes reloads).
#ifndef RDMAD_SERVER_AUTH_LISTENERS_H_
#define RDMAD_SERVER_AUTH_LISTENERS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "server/auth/peer.h"
#include "server/auth/tls_files.h"
#include "server/config.h"

namespace rdmad::auth {

// "unix:/path" or "unix:///path" -> "/path"; "" for anything else (TCP).
std::string UnixSocketPath(const std::string& address);

class Listeners {
 public:
  struct Options {
    // Where TlsFiles makes its private directory of copies. Empty: /run/rdmad (created 0755 if missing),
    // or $TMPDIR (else /tmp) if that cannot be created (rdmad not root).
    std::string tls_base_dir;
  };

  // Start-up, before the gRPC server is built. Errors: the TLS files (TlsFiles::Create), a unix socket path
  // that is in use by a live rdmad or is not a socket, an unknown unix_socket.group, bind/chown/chmod/listen.
  // `peers` must outlive the accept thread (StopAccepting / destruction).
  static absl::StatusOr<std::unique_ptr<Listeners>> Create(const Config& config, PeerDirectory* peers,
                                                           const Options& options);
  ~Listeners();  // StopAccepting(), then the TLS copies are removed
  Listeners(const Listeners&) = delete;
  Listeners& operator=(const Listeners&) = delete;

  // Adds every TCP address with the TLS credentials (or insecure ones under insecure_tcp). Call once.
  void AddTcpPorts(grpc::ServerBuilder* builder);
  // After BuildAndStart: starts the accept thread. `server` must outlive StopAccepting.
  absl::Status Start(grpc::Server* server);
  // SIGHUP: re-reads the TLS files (TlsFiles::Reload). Without TLS, OK and "no TLS listener".
  absl::StatusOr<std::string> Reload();
  // Stops accepting unix connections, closes the listening sockets and removes their paths (if they are
  // still the sockets rdmad bound). Connections already handed to gRPC are the server's. Idempotent.
  void StopAccepting();

  // The TCP ports gRPC bound, in config order (the actual port for "host:0"); valid after BuildAndStart.
  std::vector<int> tcp_ports() const;
  const std::vector<std::string>& unix_paths() const { return unix_paths_; }
  const TlsFiles* tls() const { return tls_.get(); }

 private:
  struct UnixSocket {
    std::string path;
    int fd = -1;
    ino_t inode = 0;  // the path's inode after bind: unlinked at the end only if it still is ours
    dev_t device = 0;
  };
  Listeners() = default;
  void AcceptLoop();
  void AcceptFrom(int listen_fd);

  PeerDirectory* peers_ = nullptr;
  std::unique_ptr<TlsFiles> tls_;
  bool insecure_tcp_ = false;
  std::vector<std::string> tcp_addresses_;
  std::unique_ptr<int[]> tcp_ports_;  // filled by gRPC at BuildAndStart
  std::vector<UnixSocket> unix_;
  std::vector<std::string> unix_paths_;
  uint32_t unix_mode_ = 0;
  std::string unix_group_;
  grpc::Server* server_ = nullptr;
  int wake_fd_ = -1;  // eventfd: StopAccepting -> accept thread
  std::thread accept_thread_;
};

}  // namespace rdmad::auth

#endif  // RDMAD_SERVER_AUTH_LISTENERS_H_
