#include "server/auth/unix_socket.h"

#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "server/common/log.h"
#include "server/common/status.h"

namespace rdmad::auth {

// Prepares a unix socket path: creates its directory (0755) and removes a stale socket left by a crashed
// rdmad. A live socket (something accepts connections on it) is an error: two daemons must not share it.
absl::Status PrepareUnixSocket(const std::string& path, int type, const std::string& field) {
  std::string dir = path.substr(0, path.find_last_of('/'));
  if (!dir.empty() && mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoError("mkdir", errno, dir, field);
  }
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return absl::OkStatus();
  if (!S_ISSOCK(st.st_mode)) {
    return FailedPrecondition(field, path + " exists and is not a socket; refusing to remove it");
  }
  int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path.c_str());
  bool live = fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  if (fd >= 0) close(fd);
  if (live) return FailedPrecondition(field, path + " is in use by a running rdmad");
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
absl::StatusOr<int> ListenUnix(const std::string& path, int type, uint32_t mode, gid_t group, bool set_group,
                               const std::string& field) {
  sockaddr_un sa{};
  if (path.size() >= sizeof sa.sun_path) return InvalidArgument(field, "unix socket path too long: " + path);
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
  int fd = socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return ErrnoError("socket", errno, path, field);
  absl::Status s;
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    s = ErrnoError("bind", errno, path, field);
    close(fd);
    return s;
  }
  if (set_group && chown(path.c_str(), static_cast<uid_t>(-1), group) != 0) {
    s = ErrnoError("chown", errno, path, "unix_socket.group");
  } else if (chmod(path.c_str(), mode) != 0) {
    s = ErrnoError("chmod", errno, path, "unix_socket.mode");
  } else if (listen(fd, SOMAXCONN) != 0) {
    s = ErrnoError("listen", errno, path, field);
  }
  if (!s.ok()) {
    close(fd);
    unlink(path.c_str());
    return s;
  }
  return fd;
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


}  // namespace rdmad::auth
