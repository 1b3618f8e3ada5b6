// The channel to rdmad (channel.h). Thread-safety: stateless.
#include "client/channel.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <grpc/grpc.h>

#include "absl/strings/match.h"

namespace rdmad::client {
namespace {

// `what`: "the CA file", ... for the message.
absl::StatusOr<std::string> ReadPem(const std::string& path, const std::string& what) {
  if (path.empty()) {
    return absl::InvalidArgumentError("TLS needs " + what + " (a CA file, a client certificate and its key)");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError("cannot read " + what + " " + path + ": " + std::strerror(errno));
  std::stringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  if (text.find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(what + " " + path + " is not a PEM file");
  }
  return text;
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> Dial(const std::string& target, const TlsOptions& tls) {
  return Dial(target, tls, grpc::ChannelArguments());
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> Dial(const std::string& target, const TlsOptions& tls,
                                                    const grpc::ChannelArguments& channel_args) {
  if (absl::StartsWith(target, "unix:") || !tls.enabled()) {
    return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), channel_args);
  }
  grpc::SslCredentialsOptions options;
  absl::StatusOr<std::string> ca = ReadPem(tls.ca_file, "the CA file");
  if (!ca.ok()) return ca.status();
  absl::StatusOr<std::string> cert = ReadPem(tls.cert_file, "the client certificate");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem(tls.key_file, "the client key");
  if (!key.ok()) return key.status();
  options.pem_root_certs = *std::move(ca);
  options.pem_cert_chain = *std::move(cert);
  options.pem_private_key = *std::move(key);
  grpc::ChannelArguments args = channel_args;
  if (!tls.server_name.empty()) args.SetSslTargetNameOverride(tls.server_name);
  return grpc::CreateCustomChannel(target, grpc::SslCredentials(options), args);
}

GrpcRuntime::GrpcRuntime() { grpc_init(); }

GrpcRuntime::~GrpcRuntime() { grpc_shutdown_blocking(); }

}  // namespace rdmad::client
