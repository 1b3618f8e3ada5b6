// rdmad's gRPC listeners (listeners.h). Threads: main creates, starts, reloads and stops; `unix-accept`
// accepts unix connections between Start and StopAccepting, touching only the listening sockets, the
// PeerDirectory (its own lock) and grpc::AddInsecureChannelFromFd.
#include "server/auth/listeners.h"

#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <grpcpp/server_posix.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/auth/unix_socket.h"
#include "server/common/log.h"
#include "server/common/status.h"

namespace rdmad::auth {
namespace {

std::string DefaultTlsBase() {
  if (mkdir("/run/rdmad", 0755) == 0 || errno == EEXIST) {
    if (access("/run/rdmad", W_OK | X_OK) == 0) return "/run/rdmad";
  }
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr && tmp[0] == '/' ? tmp : "/tmp";
}

}  // namespace

std::string UnixSocketPath(const std::string& address) {
  if (absl::StartsWith(address, "unix://")) return address.substr(7);
  if (absl::StartsWith(address, "unix:")) return address.substr(5);
  return "";
}

absl::StatusOr<std::unique_ptr<Listeners>> Listeners::Create(const Config& config, PeerDirectory* peers,
                                                            const Options& options) {
  std::unique_ptr<Listeners> l(new Listeners());
  l->peers_ = peers;
  for (const std::string& address : config.listen) {
    if (UnixSocketPath(address).empty()) l->tcp_addresses_.push_back(address);
  }
  l->tcp_ports_ = std::make_unique<int[]>(l->tcp_addresses_.size() + 1);
  if (!l->tcp_addresses_.empty() && config.tls.enabled()) {
    const std::string base = options.tls_base_dir.empty() ? DefaultTlsBase() : options.tls_base_dir;
    RDMAD_ASSIGN_OR_RETURN(l->tls_, TlsFiles::Create(config.tls, base));
    if (config.insecure_tcp) {
      RDMAD_LOG_WARN("insecure_tcp is ignored: tls is configured, so every TCP listener uses mutual TLS");
    }
  } else if (!l->tcp_addresses_.empty()) {
    if (!config.insecure_tcp) {  // CheckListeners refused this already; never serve plaintext by accident
      return FailedPrecondition("listen", "TCP listeners need \"tls\" or \"insecure_tcp\"");
    }
    l->insecure_tcp_ = true;
  } else if (config.tls.enabled()) {
    RDMAD_LOG_INFO("tls is configured but no TCP address is in listen: it is not used");
  }

  gid_t group = 0;
  const bool set_group = !config.unix_socket.group.empty();
  if (set_group) {
    RDMAD_ASSIGN_OR_RETURN(group, ResolveGroup(config.unix_socket.group));
  }
  l->unix_mode_ = config.unix_socket.mode;
  l->unix_group_ = set_group ? config.unix_socket.group : "rdmad's";
  for (const std::string& address : config.listen) {
    const std::string path = UnixSocketPath(address);
    if (path.empty()) continue;
    if (path[0] != '/') return InvalidArgument("listen", "unix socket path must be absolute: " + address);
    RDMAD_RETURN_IF_ERROR(PrepareUnixSocket(path, SOCK_STREAM, "listen"));
    RDMAD_ASSIGN_OR_RETURN(int fd, ListenUnix(path, SOCK_STREAM, config.unix_socket.mode, group, set_group, "listen"));
    UnixSocket u;
    u.path = path;
    u.fd = fd;
    struct stat st {};
    if (lstat(path.c_str(), &st) == 0) {
      u.inode = st.st_ino;
      u.device = st.st_dev;
    }
    l->unix_.push_back(u);  // from here on the destructor closes and removes it
    l->unix_paths_.push_back(path);
  }
  if (!l->unix_.empty()) {
    l->wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (l->wake_fd_ < 0) return ErrnoError("eventfd", errno, "the unix socket acceptor");
  }
  return l;
}

Listeners::~Listeners() {
  StopAccepting();
  if (wake_fd_ >= 0) close(wake_fd_);
}

void Listeners::AddTcpPorts(grpc::ServerBuilder* builder) {
  for (size_t i = 0; i < tcp_addresses_.size(); ++i) {
    const std::string& address = tcp_addresses_[i];
    if (tls_) {
      builder->AddListeningPort(address, tls_->credentials(), &tcp_ports_[i]);
      RDMAD_LOG_INFO("listening on TCP %s with mutual TLS: client certificates required", address.c_str());
    } else {
      builder->AddListeningPort(address, grpc::InsecureServerCredentials(), &tcp_ports_[i]);
      RDMAD_LOG_WARN("listening on TCP %s without TLS (insecure_tcp): every caller on it is unauthenticated "
                     "(\"anonymous\")", address.c_str());
    }
  }
}

std::vector<int> Listeners::tcp_ports() const { return {tcp_ports_.get(), tcp_ports_.get() + tcp_addresses_.size()}; }

absl::Status Listeners::Start(grpc::Server* server) {
  if (unix_.empty()) return absl::OkStatus();
  if (accept_thread_.joinable() || server == nullptr) {
    return absl::FailedPreconditionError("Listeners::Start: called twice, or without a server");
  }
  server_ = server;
  accept_thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "unix-accept");
    AcceptLoop();
  });
  RDMAD_LOG_INFO("accepting unix connections on %s (mode %04o, group %s): SO_PEERCRED identifies each peer",
                 absl::StrJoin(unix_paths_, ", ").c_str(), unix_mode_, unix_group_.c_str());
  return absl::OkStatus();
}

absl::StatusOr<std::string> Listeners::Reload() {
  if (!tls_) return std::string("no TLS listener");
  return tls_->Reload();
}

void Listeners::StopAccepting() {
  if (accept_thread_.joinable()) {
    uint64_t one = 1;
    while (write(wake_fd_, &one, sizeof one) < 0 && errno == EINTR) {
    }
    accept_thread_.join();
  }
  for (UnixSocket& u : unix_) {
    if (u.fd < 0) continue;
    close(u.fd);
    u.fd = -1;
    struct stat st {};
    if (lstat(u.path.c_str(), &st) == 0 && st.st_ino == u.inode && st.st_dev == u.device) unlink(u.path.c_str());
  }
}

void Listeners::AcceptLoop() {
  std::vector<pollfd> fds;
  fds.push_back({wake_fd_, POLLIN, 0});
  for (const UnixSocket& u : unix_) fds.push_back({u.fd, POLLIN, 0});
  for (;;) {
    int n = poll(fds.data(), fds.size(), -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      RDMAD_LOG_ERROR("unix-accept: poll: %s; no longer accepting unix connections", std::strerror(errno));
      return;
    }
    if (fds[0].revents != 0) return;  // StopAccepting
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents != 0) AcceptFrom(fds[i].fd);
    }
  }
}

void Listeners::AcceptFrom(int listen_fd) {
  for (;;) {
    int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR || errno == ECONNABORTED) continue;
      // Out of descriptors or memory: the connection waits in the backlog; back off instead of spinning.
      RDMAD_LOG_WARN("unix-accept: accept4: %s", std::strerror(errno));
      struct timespec pause = {0, 100 * 1000 * 1000};
      nanosleep(&pause, nullptr);
      return;
    }
    absl::Status s;
    UnixCredentials c = PeerCredentials(fd, &s);
    if (!s.ok()) {  // cannot tell who it is: drop the connection rather than serve an unknown peer
      RDMAD_LOG_WARN("unix-accept: %s; connection dropped", std::string(s.message()).c_str());
      close(fd);
      continue;
    }
    // Recorded before gRPC sees the fd: the connection's first call finds it.
    peers_->RecordUnix(fd, c);
    RDMAD_LOG_DEBUG("unix connection fd:%d from pid %lld uid %lld gid %lld", fd, static_cast<long long>(c.pid),
                    static_cast<long long>(c.uid), static_cast<long long>(c.gid));
    grpc::AddInsecureChannelFromFd(server_, fd);
  }
}

}  // namespace rdmad::auth
