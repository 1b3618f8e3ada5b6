// Client::ShareFd: a file descriptor passed to rdmad over its descriptor socket (proto/wire/descriptor_message.h,
// docs/PROTOCOL.md#memory-shared-by-file-descriptor). Threads: the caller's; a socket of its own per call.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "proto/wire/descriptor_message.h"

namespace rdmad::client {
namespace {

absl::Status Errno(const std::string& what, int err) {
  return absl::Status(absl::ErrnoToStatusCode(err),
                      absl::StrCat(what, ": ", std::strerror(err), " (errno ", err, ")"));
}

// Waits until `fd` is ready for `events`, up to `deadline`.
absl::Status WaitFor(int fd, short events, std::chrono::steady_clock::time_point deadline, const std::string& what) {
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return absl::DeadlineExceededError(absl::StrCat(what, ": no answer from rdmad in time"));
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, static_cast<int>(left.count()));
    if (n > 0) return absl::OkStatus();
    if (n < 0 && errno != EINTR) return Errno(absl::StrCat(what, ": poll"), errno);
  }
}

}  // namespace

absl::StatusOr<std::string> Client::ShareFd(int fd) {
  if (descriptor_socket_.empty()) {
    return absl::FailedPreconditionError(
        "descriptor_socket: descriptors go to a local rdmad's descriptor socket: connect on its unix socket, or "
        "set Client::Options::descriptor_socket");
  }
  if (fd < 0) return absl::InvalidArgumentError("fd: not a file descriptor");
  const std::string& path = descriptor_socket_;
  sockaddr_un sa{};
  if (path.size() >= sizeof sa.sun_path) {
    return absl::InvalidArgumentError(absl::StrCat("descriptor_socket: path too long: ", path));
  }
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
  const int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s < 0) return Errno("socket", errno);
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{s};
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  const std::string where = absl::StrCat("rdmad's descriptor socket ", path);
  if (connect(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    const int err = errno;
    if (err != EAGAIN && err != EINPROGRESS) {
      return absl::UnavailableError(absl::StrCat(where, ": connect: ", std::strerror(err), " (errno ", err, ")"));
    }
    if (absl::Status w = WaitFor(s, POLLOUT, deadline, where); !w.ok()) return w;
  }
  const std::string request = wire::EncodeDescriptorRequest();
  iovec iov{const_cast<char*>(request.data()), request.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  while (sendmsg(s, &msg, MSG_NOSIGNAL) < 0) {
    if (errno == EINTR) continue;
    if (errno != EAGAIN) {
      const int err = errno;
      return err == EBADF ? absl::InvalidArgumentError(absl::StrCat("fd: ", fd, " is not an open descriptor"))
                          : Errno(absl::StrCat(where, ": sendmsg"), err);
    }
    if (absl::Status w = WaitFor(s, POLLOUT, deadline, where); !w.ok()) return w;
  }
  char reply[wire::kDescriptorHeaderBytes + wire::kDescriptorMaxText];
  ssize_t n;
  while ((n = recv(s, reply, sizeof reply, 0)) < 0) {
    if (errno == EINTR) continue;
    if (errno != EAGAIN) return Errno(absl::StrCat(where, ": recv"), errno);
    if (absl::Status w = WaitFor(s, POLLIN, deadline, where); !w.ok()) return w;
  }
  if (n == 0) return absl::UnavailableError(absl::StrCat(where, ": rdmad closed the connection without an answer"));
  absl::StatusOr<wire::DescriptorReply> answer = wire::DecodeDescriptorReply(absl::string_view(reply, n));
  if (!answer.ok()) return absl::InternalError(absl::StrCat(where, ": ", answer.status().message()));
  if (answer->code != 0) {
    return absl::Status(static_cast<absl::StatusCode>(answer->code), answer->text);
  }
  return answer->text;
}

}  // namespace rdmad::client
