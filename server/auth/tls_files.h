// rdmad's mutual-TLS server credentials, reloadable: the configured PEM files (tls.cert, tls.key,
// tls.client_ca) are checked and copied into a private directory, and gRPC's FileWatcherCertificateProvider
// watches the copies (every second). Reload() -- on SIGHUP -- re-reads and re-checks the configured files and
// atomically replaces the copies, so new handshakes use them within about a second; connections already
// established keep their session. Editing the configured files without a reload changes nothing, and a
// reload that fails its checks changes nothing either (the error is returned; the old credentials stay).
//
// The copies: <dir>/identity.pem (the private key, then the certificate chain, in one file so that the key
// and its certificate always change together) and <dir>/client_ca.pem, mode 0600 in a 0700 directory made
// with mkdtemp under the base directory given; the directory is removed by the destructor. Each copy is
// written to a temporary file, given a modification time at least a second after the one it replaces (gRPC
// re-reads a file whose second-granularity mtime changed while it read it), and renamed over the old copy.
//
// Checks (libcrypto): the certificate file holds at least one certificate, the first (rdmad's own) has not
// expired, the key parses (unencrypted) and matches it; the client CA file holds at least one certificate.
//
// Clients must present a certificate that chains to client_ca and is within its validity period
// (GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY); otherwise the handshake is refused.
//
// Thread-safety: Reload() may be called from any thread (main's signal loop calls it), serialized by mu_;
// gRPC's provider thread reads the copies; credentials() is immutable after Create.
#ifndef RDMAD_SERVER_AUTH_TLS_FILES_H_
#define RDMAD_SERVER_AUTH_TLS_FILES_H_

#include <memory>
#include <string>

#include <grpcpp/security/server_credentials.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "server/common/sync.h"
#include "server/config.h"

namespace rdmad::auth {

class TlsFiles {
 public:
  // Checks and copies the files named by `tls` into a new directory under `base_dir` (which must exist),
  // then builds the credentials. INVALID_ARGUMENT (naming tls.cert / tls.key / tls.client_ca) if a file
  // fails its checks, the errno's code if it cannot be read or the copies cannot be written.
  static absl::StatusOr<std::unique_ptr<TlsFiles>> Create(const TlsConfig& tls, const std::string& base_dir);
  ~TlsFiles();  // removes the copies and their directory
  TlsFiles(const TlsFiles&) = delete;
  TlsFiles& operator=(const TlsFiles&) = delete;

  // The credentials for every TCP listener: shared, so every listener follows the reloads.
  std::shared_ptr<grpc::ServerCredentials> credentials() const { return credentials_; }
  // Re-reads the configured files; if they pass the checks, replaces the copies. Returns a one-line summary
  // of what is now served ("CN=rdmad, expires 2027-01-01T00:00:00Z; 1 client CA") or the error.
  absl::StatusOr<std::string> Reload();
  const std::string& dir() const { return dir_; }

 private:
  TlsFiles(TlsConfig tls, std::string dir) : tls_(std::move(tls)), dir_(std::move(dir)) {}
  absl::StatusOr<std::string> Install() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const TlsConfig tls_;
  const std::string dir_;
  std::shared_ptr<grpc::ServerCredentials> credentials_;
  Mutex mu_;  // one reload at a time
};

}  // namespace rdmad::auth

#endif  // RDMAD_SERVER_AUTH_TLS_FILES_H_
