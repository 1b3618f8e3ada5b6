// rdmad's reloadable mutual-TLS credentials (tls_files.h). Thread-safety: Reload() under mu_; the
// FileWatcherCertificateProvider's own thread (gRPC's) only reads the copies.
#include "server/auth/tls_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "absl/strings/str_cat.h"
#include "server/common/log.h"
#include "server/common/status.h"

namespace rdmad::auth {
namespace {

constexpr char kIdentityFile[] = "identity.pem";
constexpr char kClientCaFile[] = "client_ca.pem";
constexpr unsigned kRefreshSeconds = 1;

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
using Cert = std::unique_ptr<X509, X509Free>;
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;

absl::StatusOr<std::string> ReadFile(const std::string& path, const std::string& field) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open", errno, path, field);
  std::string out;
  char buf[16384];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      return ErrnoError("read", err, path, field);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > (1u << 20)) {
      close(fd);
      return InvalidArgument(field, path + " is larger than 1 MiB: not a PEM file");
    }
  }
  close(fd);
  return out;
}

// Never prompts for a passphrase: an encrypted key is refused (rdmad runs unattended).
int NoPassphrase(char*, int, int, void*) { return -1; }

std::vector<Cert> ParseCerts(const std::string& pem) {
  std::vector<Cert> out;
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  while (bio) {
    Cert c(PEM_read_bio_X509(bio.get(), nullptr, NoPassphrase, nullptr));
    if (!c) break;
    out.push_back(std::move(c));
  }
  ERR_clear_error();
  return out;
}

// What a memory BIO holds, as a string.
std::string Contents(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return n > 0 ? std::string(data, static_cast<size_t>(n)) : std::string();
}

// "CN=rdmad,O=example" (RFC 2253).
std::string Subject(X509* cert) {
  Bio out(BIO_new(BIO_s_mem()));
  if (!out || X509_NAME_print_ex(out.get(), X509_get_subject_name(cert), 0, XN_FLAG_RFC2253) < 0) return "?";
  return Contents(out.get());
}

std::string NotAfter(X509* cert) {
  struct tm tm {};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert), &tm) != 1) return "?";
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Writes `data` to dir/name through a temporary file and rename(2): a reader sees the old file or the new
// one, never a mix. The new file's mtime is at least a second after the old one's (see tls_files.h).
absl::Status Replace(const std::string& dir, const char* name, const std::string& data) {
  const std::string path = dir + "/" + name;
  std::string tmp = dir + "/." + name + ".XXXXXX";
  int fd = mkostemp(tmp.data(), O_CLOEXEC);  // mode 0600
  if (fd < 0) return ErrnoError("mkostemp", errno, tmp);
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      unlink(tmp.c_str());
      return ErrnoError("write", err, tmp);
    }
    done += static_cast<size_t>(n);
  }
  struct stat old {};
  time_t mtime = std::time(nullptr);
  if (stat(path.c_str(), &old) == 0 && old.st_mtime >= mtime) mtime = old.st_mtime + 1;
  const struct timespec times[2] = {{0, UTIME_OMIT}, {mtime, 0}};
  if (futimens(fd, times) != 0 || fsync(fd) != 0 || close(fd) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    return ErrnoError("futimens/fsync/close", err, tmp);
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    return ErrnoError("rename", err, path);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<TlsFiles>> TlsFiles::Create(const TlsConfig& tls, const std::string& base_dir) {
  std::string dir = base_dir + "/tls-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) return ErrnoError("mkdtemp", errno, dir, "tls");  // mode 0700
  std::unique_ptr<TlsFiles> files(new TlsFiles(tls, dir));
  {
    MutexLock lock(&files->mu_);
    absl::StatusOr<std::string> summary = files->Install();
    if (!summary.ok()) return summary.status();  // the destructor removes the directory
    RDMAD_LOG_INFO("TLS: serving %s (copies in %s, reloaded on SIGHUP)", summary->c_str(), dir.c_str());
  }
  const std::string identity = dir + "/" + kIdentityFile;
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      identity, identity, dir + "/" + kClientCaFile, kRefreshSeconds);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  files->credentials_ = grpc::experimental::TlsServerCredentials(options);
  if (!files->credentials_) return absl::InternalError("tls: gRPC refused the TLS server credentials");
  return files;
}

TlsFiles::~TlsFiles() {
  for (const char* name : {kIdentityFile, kClientCaFile}) unlink((dir_ + "/" + name).c_str());
  if (rmdir(dir_.c_str()) != 0 && errno != ENOENT) {
    RDMAD_LOG_WARN("cannot remove %s: %s", dir_.c_str(), std::strerror(errno));
  }
}

absl::StatusOr<std::string> TlsFiles::Reload() {
  MutexLock lock(&mu_);
  return Install();
}

absl::StatusOr<std::string> TlsFiles::Install() {
  RDMAD_ASSIGN_OR_RETURN(std::string cert_pem, ReadFile(tls_.cert, "tls.cert"));
  RDMAD_ASSIGN_OR_RETURN(std::string key_pem, ReadFile(tls_.key, "tls.key"));
  RDMAD_ASSIGN_OR_RETURN(std::string ca_pem, ReadFile(tls_.client_ca, "tls.client_ca"));

  std::vector<Cert> chain = ParseCerts(cert_pem);
  if (chain.empty()) return InvalidArgument("tls.cert", tls_.cert + " holds no PEM certificate");
  X509* leaf = chain.front().get();
  if (X509_cmp_current_time(X509_get0_notAfter(leaf)) <= 0) {
    return InvalidArgument("tls.cert", tls_.cert + " (" + Subject(leaf) + ") expired at " + NotAfter(leaf));
  }
  if (X509_cmp_current_time(X509_get0_notBefore(leaf)) > 0) {
    RDMAD_LOG_WARN("TLS: %s (%s) is not valid yet: clients refuse it until then", tls_.cert.c_str(),
                   Subject(leaf).c_str());
  }
  Key key;
  {
    Bio bio(BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())));
    if (bio) key.reset(PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr));
    ERR_clear_error();
  }
  if (!key) return InvalidArgument("tls.key", tls_.key + " holds no unencrypted PEM private key");
  if (X509_check_private_key(leaf, key.get()) != 1) {
    ERR_clear_error();
    return InvalidArgument("tls.key", tls_.key + " is not the private key of " + tls_.cert);
  }
  std::vector<Cert> cas = ParseCerts(ca_pem);
  if (cas.empty()) return InvalidArgument("tls.client_ca", tls_.client_ca + " holds no PEM certificate");

  // The key first, then the chain, each re-encoded from what was parsed (nothing else from the files): gRPC
  // reads the first private key and the certificates of the one file.
  Bio out(BIO_new(BIO_s_mem()));
  if (!out || PEM_write_bio_PrivateKey(out.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return absl::InternalError("tls.key: cannot re-encode the private key");
  }
  for (const Cert& c : chain) {
    if (PEM_write_bio_X509(out.get(), c.get()) != 1) return absl::InternalError("tls.cert: cannot re-encode");
  }
  std::string identity = Contents(out.get());
  OPENSSL_cleanse(key_pem.data(), key_pem.size());
  absl::Status written = Replace(dir_, kIdentityFile, identity);
  OPENSSL_cleanse(identity.data(), identity.size());
  RDMAD_RETURN_IF_ERROR(written);
  RDMAD_RETURN_IF_ERROR(Replace(dir_, kClientCaFile, ca_pem));
  return absl::StrCat(Subject(leaf), ", expires ", NotAfter(leaf), "; ", cas.size(), " client CA",
                      cas.size() == 1 ? "" : "s");
}

}  // namespace rdmad::auth
