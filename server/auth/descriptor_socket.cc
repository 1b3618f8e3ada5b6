// The descriptor socket (descriptor_socket.h). Threads: main creates, starts and stops; `fd-socket` owns the
// listening socket's accepts and every connection between Start and Stop.
#include "server/auth/descriptor_socket.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/wire/descriptor_message.h"
#include "server/auth/unix_socket.h"
#include "server/common/log.h"
#include "server/common/status.h"
#include "server/memory/mapping.h"

namespace rdmad::auth {

absl::StatusOr<std::unique_ptr<DescriptorSocket>> DescriptorSocket::Create(const Config& config,
                                                                            const std::string& path,
                                                                            const Policy* policy,
                                                                            DescriptorStore* store) {
  if (path.empty() || path[0] != '/') return InvalidArgument("descriptor_socket", "must be an absolute path");
  gid_t group = 0;
  const bool set_group = !config.unix_socket.group.empty();
  if (set_group) {
    absl::StatusOr<gid_t> g = ResolveGroup(config.unix_socket.group);
    if (!g.ok()) return g.status();
    group = *g;
  }
  RDMAD_RETURN_IF_ERROR(PrepareUnixSocket(path, SOCK_SEQPACKET, "descriptor_socket"));
  std::unique_ptr<DescriptorSocket> d(new DescriptorSocket(path, policy, store, config.allow_disk_files));
  absl::StatusOr<int> fd =
      ListenUnix(path, SOCK_SEQPACKET, config.unix_socket.mode, group, set_group, "descriptor_socket");
  if (!fd.ok()) return fd.status();
  d->listen_fd_ = UniqueFd(*fd);
  d->wake_fd_ = UniqueFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!d->wake_fd_.valid()) return ErrnoError("eventfd", errno, "the descriptor socket");
  return d;
}

DescriptorSocket::~DescriptorSocket() {
  Stop();
  if (listen_fd_.valid()) unlink(path_.c_str());
}

absl::Status DescriptorSocket::Start() {
  if (thread_.joinable()) return absl::FailedPreconditionError("the descriptor socket is already serving");
  thread_ = std::thread([this] { Loop(); });
  RDMAD_LOG_INFO("accepting descriptors on %s (SOCK_SEQPACKET; SO_PEERCRED identifies each peer)", path_.c_str());
  return absl::OkStatus();
}

void DescriptorSocket::Stop() {
  if (!thread_.joinable()) return;
  const uint64_t one = 1;
  if (write(wake_fd_.get(), &one, sizeof one) < 0) RDMAD_LOG_WARN("descriptor socket: waking its thread: errno %d", errno);
  thread_.join();
}

struct DescriptorSocket::Connection {
  UniqueFd fd;
  Peer peer;
  absl::Status identified;  // SO_PEERCRED read (else every request is refused with this)
  absl::Time last;
};

namespace {

// Every descriptor a message carried, owned (so closed unless kept).
std::vector<UniqueFd> ReceivedDescriptors(msghdr& msg) {
  std::vector<UniqueFd> fds;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    const unsigned char* data = CMSG_DATA(c);
    for (size_t k = 0; k < count; ++k) {
      int v;
      std::memcpy(&v, data + k * sizeof(int), sizeof v);
      fds.emplace_back(v);
    }
  }
  return fds;
}

}  // namespace

void DescriptorSocket::Loop() {
  pthread_setname_np(pthread_self(), "fd-socket");
  std::vector<Connection> conns;
  absl::Time last_full_warning = absl::InfinitePast();
  absl::Time last_emfile_warning = absl::InfinitePast();
  while (true) {
    std::vector<pollfd> fds;
    fds.push_back({wake_fd_.get(), POLLIN, 0});
    fds.push_back({listen_fd_.get(), POLLIN, 0});
    for (const Connection& c : conns) fds.push_back({c.fd.get(), POLLIN, 0});
    if (poll(fds.data(), fds.size(), 1000) < 0 && errno != EINTR) {
      RDMAD_LOG_ERROR("descriptor socket: poll: errno %d; it stops accepting descriptors", errno);
      return;
    }
    if (fds[0].revents != 0) return;  // Stop(): the connections close with `conns`
    const absl::Time now = absl::Now();
    for (size_t i = conns.size(); i-- > 0;) {
      const short re = fds[2 + i].revents;
      bool keep = true;
      if (re & POLLIN) {
        keep = Serve(conns[i]);
        conns[i].last = now;
      } else if (re & (POLLHUP | POLLERR | POLLNVAL)) {
        keep = false;
      } else if (now - conns[i].last > kIdle) {
        keep = false;
      }
      if (!keep) conns.erase(conns.begin() + static_cast<std::ptrdiff_t>(i));
    }
    if ((fds[1].revents & POLLIN) == 0) continue;
    while (true) {
      const int fd = accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE) {
          // Out of descriptors: the connection waits in the backlog; try again shortly rather than spin.
          if (now - last_emfile_warning > absl::Seconds(10)) {
            RDMAD_LOG_WARN("descriptor socket: accept: out of file descriptors (errno %d)", errno);
            last_emfile_warning = now;
          }
          poll(nullptr, 0, 100);
        }
        break;
      }
      if (conns.size() >= static_cast<size_t>(kMaxConnections)) {
        close(fd);
        if (now - last_full_warning > absl::Seconds(10)) {
          RDMAD_LOG_WARN("descriptor socket: %d connections open: closing new ones until some end", kMaxConnections);
          last_full_warning = now;
        }
        continue;
      }
      Connection c;
      c.fd = UniqueFd(fd);
      const UnixCredentials cred = PeerCredentials(fd, &c.identified);
      c.peer.transport = kTransportUnix;
      c.peer.authenticated = c.identified.ok();
      c.peer.uid = cred.uid;
      c.peer.gid = cred.gid;
      c.peer.pid = cred.pid;
      c.peer.groups = cred.groups;
      c.peer.address = absl::StrCat("descriptor-socket:pid:", cred.pid);
      c.last = now;
      conns.push_back(std::move(c));
    }
  }
}

bool DescriptorSocket::Serve(Connection& c) {
  char buf[wire::kDescriptorHeaderBytes + 1];
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
  iovec iov{buf, sizeof buf};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  const ssize_t n = recvmsg(c.fd.get(), &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  if (n == 0) return false;  // the client closed
  if (n < 0) return errno == EAGAIN || errno == EINTR;
  std::vector<UniqueFd> received = ReceivedDescriptors(msg);  // closed on return unless deposited
  absl::Status s = (msg.msg_flags & MSG_TRUNC)
                       ? absl::InvalidArgumentError("a descriptor-socket request is 16 bytes; this one is longer")
                       : wire::DecodeDescriptorRequest(absl::string_view(buf, static_cast<size_t>(n)));
  if (s.ok() && (msg.msg_flags & MSG_CTRUNC)) {
    s = InvalidArgument("descriptor", "the request carried more descriptors than rdmad reads: send exactly one");
  }
  if (s.ok() && received.size() != 1) {
    s = InvalidArgument("descriptor",
                        absl::StrCat("expected exactly one descriptor (SCM_RIGHTS) with the request, got ",
                                     received.size()));
  }
  if (s.ok()) s = c.identified;
  absl::StatusOr<Caller> caller = s.ok() ? policy_->Resolve(c.peer) : absl::StatusOr<Caller>(s);
  if (caller.ok()) s = CheckDescriptor(received[0].get(), allow_disk_, "descriptor");
  else s = caller.status();
  absl::StatusOr<std::string> handle = s.ok() ? store_->Deposit(std::move(received[0]), caller->principal)
                                              : absl::StatusOr<std::string>(s);
  if (handle.ok()) {
    RDMAD_LOG_DEBUG("descriptor socket: %s (pid %lld) deposited a descriptor", caller->principal.c_str(),
                    static_cast<long long>(c.peer.pid));
  }
  const std::string reply =
      handle.ok() ? wire::EncodeDescriptorReply(0, *handle)
                  : wire::EncodeDescriptorReply(static_cast<uint16_t>(handle.status().code()), handle.status().message());
  // A client that does not read its replies loses its connection (the socket's buffer is its to drain).
  return send(c.fd.get(), reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT) == static_cast<ssize_t>(reply.size());
}

}  // namespace rdmad::auth
