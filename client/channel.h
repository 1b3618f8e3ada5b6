// How a client reaches rdmad: the gRPC channel for a target, with mutual TLS on TCP when asked.
//
// rdmad's TCP listeners use mutual TLS when it has "tls" configured (docs/security.md): the client checks
// rdmad's certificate against ca_file (for the target's host name or IP address, or server_name), and
// presents cert_file / key_file, from which rdmad takes the caller's principal (its URI SAN, else
// "CN=<cn>"). On a unix socket rdmad identifies the peer by its uid and gid, so TLS is not used there.
//
// Thread-safety: stateless; Dial may be called from any thread, its channel used from many.
#ifndef RDMAD_CLIENT_CHANNEL_H_
#define RDMAD_CLIENT_CHANNEL_H_

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"

namespace rdmad::client {

struct TlsOptions {
  std::string ca_file;      // PEM: the CAs that sign rdmad's certificate
  std::string cert_file;    // PEM: this client's certificate chain
  std::string key_file;     // PEM: its private key (unencrypted)
  std::string server_name;  // check rdmad's certificate for this name instead of the target's host (tests)
  bool enabled() const { return !ca_file.empty() || !cert_file.empty() || !key_file.empty(); }
};

// "unix:/path" (or "unix:///path"): plaintext over the socket; `tls` is not used. "host:port": mutual TLS if
// tls.enabled() (ca_file, cert_file and key_file all required), plaintext otherwise (an rdmad with
// insecure_tcp). INVALID_ARGUMENT naming the file if one of the three is missing, unreadable or not PEM; the
// channel itself connects lazily, on the first call (a refused handshake is then UNAVAILABLE).
absl::StatusOr<std::shared_ptr<grpc::Channel>> Dial(const std::string& target, const TlsOptions& tls);
// As above, with gRPC's channel arguments (e.g. SetMaxReceiveMessageSize; Dial adds the TLS server name
// override to a copy).
absl::StatusOr<std::shared_ptr<grpc::Channel>> Dial(const std::string& target, const TlsOptions& tls,
                                                    const grpc::ChannelArguments& args);

// gRPC's library held open for a short-lived process's whole run (a command-line tool: one in main, before
// any channel). Its destructor, after the last channel has gone, ends the library and waits for its
// threads (grpc_shutdown_blocking). Without it the last channel's end may leave that to a thread of gRPC's
// own, still running when the process exits, with OpenSSL's per-thread state of a TLS handshake not yet
// freed (LeakSanitizer reports it). Not copyable; one per process.
class GrpcRuntime {
 public:
  GrpcRuntime();
  ~GrpcRuntime();
  GrpcRuntime(const GrpcRuntime&) = delete;
  GrpcRuntime& operator=(const GrpcRuntime&) = delete;
};

}  // namespace rdmad::client

#endif  // RDMAD_CLIENT_CHANNEL_H_
