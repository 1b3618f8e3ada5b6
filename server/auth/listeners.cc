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
#include "server/common/log.h"
#include "server/common/status.h"

namespace rdmad::auth {
namespace {

// Prepares a unix socket path: creates its directory (0755) and removes a stale socket left by a crashed
// rdmad. A live socket (something accepts connections on it) is an error: two daemons must not share it.
absl::Status PrepareUnixSocket(const std::string& path) {
  std::string dir = path.substr(0, path.find_last_of('/'));
  if (!dir.empty() && mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoError("mkdir", errno, dir, "listen");
  }
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return absl::OkStatus();
  if (!S_ISSOCK(st.st_mode)) {
    return FailedPrecondition("listen", path + " exists and is not a socket; refusing to remove it");
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path.c_str());
  bool live = fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  if (fd >= 0) close(fd);
  if (live) return FailedPrecondition("listen", path + " is in use by a running rdmad");
  RDMAD_LOG_INFO("removing the stale socket %s", path.c_str());
  unlink(path.c_str());
  return absl::OkStatus();
}

absl::StatusOr<gid_t> ResolveGroup(const std::string& group) {
  uint32_t number = 0;
  if (absl::SimpleAtoi(group, &number)) return static_cast<gid_t>(number);
  std::vector<char> buf(16384);
  struct group g {};
  struct group* found = nullptr;
  int err = getgrnam_r(group.c_str(), &g, buf.data(), buf.size(), &found);
  if (err != 0) return ErrnoError("getgrnam_r", err, group, "unix_socket.group");
  if (found == nullptr) return InvalidArgument("unix_socket.group", "no group named '" + group + "'");
  return g.gr_gid;
}

// socket, bind, then the group and mode, then listen: until listen(2) a connect is refused, so no one
// connects while the socket still has the mode bind gave it.
absl::StatusOr<int> ListenUnix(const std::string& path, uint32_t mode, gid_t group, bool set_group) {
  sockaddr_un sa{};
  if (path.size() >= sizeof sa.sun_path) return InvalidArgument("listen", "unix socket path too long: " + path);
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return ErrnoError("socket", errno, path, "listen");
  absl::Status s;
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    s = ErrnoError("bind", errno, path, "listen");
    close(fd);
    return s;
  }
  if (set_group && chown(path.c_str(), static_cast<uid_t>(-1), group) != 0) {
    s = ErrnoError("chown", errno, path, "unix_socket.group");
  } else if (chmod(path.c_str(), mode) != 0) {
    s = ErrnoError("chmod", errno, path, "unix_socket.mode");
  } else if (listen(fd, SOMAXCONN) != 0) {
    s = ErrnoError("listen", errno, path, "listen");
  }
  if (!s.ok()) {
    close(fd);
    unlink(path.c_str());
    return s;
  }
  return fd;
}

std::string DefaultTlsBase() {
  if (mkdir("/run/rdmad", 0755) == 0 || errno == EEXIST) {
    if (access("/run/rdmad", W_OK | X_OK) == 0) return "/run/rdmad";
  }
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr && tmp[0] == '/' ? tmp : "/tmp";
}

UnixCredentials PeerCredentials(int fd, absl::Status* status) {
  UnixCredentials c;
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    *status = ErrnoError("getsockopt(SO_PEERCRED)", errno);
    return c;
  }
  c.uid = cred.uid;
  c.gid = cred.gid;
  c.pid = cred.pid;
  // Supplementary groups at connect time (Linux 4.13+); without them the policy knows uid and gid only.
  std::vector<gid_t> groups(64);
  for (int attempt = 0; attempt < 4; ++attempt) {
    socklen_t bytes = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &bytes) == 0) {
      groups.resize(bytes / sizeof(gid_t));
      c.groups.assign(groups.begin(), groups.end());
      break;
    }
    if (errno != ERANGE) break;
    groups.resize(bytes / sizeof(gid_t) + 1);
  }
  return c;
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
    RDMAD_RETURN_IF_ERROR(PrepareUnixSocket(path));
    RDMAD_ASSIGN_OR_RETURN(int fd, ListenUnix(path, config.unix_socket.mode, group, set_group));
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
