// Unix sockets as rdmad makes and reads them: a listening socket created with its mode and group before
// anyone can connect, and a connected peer's credentials (SO_PEERCRED, SO_PEERGROUPS). Used by the gRPC
// listeners (listeners.h) and the descriptor socket (descriptor_socket.h).
// Threads: plain functions, any thread.
#ifndef RDMAD_SERVER_AUTH_UNIX_SOCKET_H_
#define RDMAD_SERVER_AUTH_UNIX_SOCKET_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "server/auth/peer.h"

namespace rdmad::auth {

// Prepares a unix socket path: creates its directory (0755) and removes a stale socket left by a crashed
// rdmad. A live socket (something accepts connections of `type` on it) is FAILED_PRECONDITION on `field`.
absl::Status PrepareUnixSocket(const std::string& path, int type, const std::string& field);
// A group by name or number (unix_socket.group).
absl::StatusOr<gid_t> ResolveGroup(const std::string& group);
// A listening, non-blocking socket of `type` (SOCK_STREAM, SOCK_SEQPACKET) at `path`: socket, bind, then
// the group and mode, then listen, so that no one connects while the socket still has the mode bind gave
// it. Errors name `field` (the path's config key) or unix_socket.group / unix_socket.mode.
absl::StatusOr<int> ListenUnix(const std::string& path, int type, uint32_t mode, gid_t group, bool set_group,
                               const std::string& field);
// The credentials of the process that connected `fd` (when it called connect), and its supplementary
// groups then (Linux 4.13+; without them, uid and gid only). *status is set on failure.
UnixCredentials PeerCredentials(int fd, absl::Status* status);

}  // namespace rdmad::auth

#endif  // RDMAD_SERVER_AUTH_UNIX_SOCKET_H_
