// DescriptorSocket: where local clients pass memory to rdmad as a file descriptor
// (docs/PROTOCOL.md#memory-shared-by-file-descriptor; the messages are proto/wire/descriptor_message.h).
// gRPC cannot carry descriptors, so this is a small side channel beside the unix listener: a
// SOCK_SEQPACKET socket with unix_socket's mode and group. A client sends DEPOSIT with exactly one
// descriptor (SCM_RIGHTS); rdmad identifies it by the connection's SO_PEERCRED through the same Policy as
// its gRPC unix socket (so a caller has the same principal on both), checks that the descriptor can back a
// region (server/memory/mapping.h CheckDescriptor), keeps it in the DescriptorStore under a handle bound to
// that principal, and answers the handle. A connection may deposit any number of descriptors, one message
// at a time.
//
// Bounded: at most kMaxConnections connections at once (one more is accepted and closed at once); a
// connection that sends nothing for kIdle is closed; a message is read whole or not at all, so no client
// can hold the thread. Descriptors beyond the one expected, and any that arrive with a refused request, are
// closed at once.
//
// Threads: `fd-socket` (one, from Start to Stop) owns the listening socket and every connection; it calls
// the Policy and the DescriptorStore, both safe from any thread. Create, Start, Stop and destruction run on
// the daemon's thread (main).
#ifndef RDMAD_SERVER_AUTH_DESCRIPTOR_SOCKET_H_
#define RDMAD_SERVER_AUTH_DESCRIPTOR_SOCKET_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/auth/policy.h"
#include "server/common/fd.h"
#include "server/config.h"
#include "server/memory/descriptors.h"

namespace rdmad::auth {

class DescriptorSocket {
 public:
  static constexpr int kMaxConnections = 64;
  static constexpr absl::Duration kIdle = absl::Seconds(10);

  // Listens at `path` (a stale socket of a crashed rdmad is removed; a live one is FAILED_PRECONDITION on
  // descriptor_socket) with `config`'s unix_socket mode and group. `policy` and `store` must outlive Stop.
  static absl::StatusOr<std::unique_ptr<DescriptorSocket>> Create(const Config& config, const std::string& path,
                                                                  const Policy* policy, DescriptorStore* store);
  ~DescriptorSocket();  // Stop(), then the socket is closed and its path removed
  DescriptorSocket(const DescriptorSocket&) = delete;
  DescriptorSocket& operator=(const DescriptorSocket&) = delete;

  absl::Status Start();  // starts `fd-socket`
  void Stop();           // wakes it, joins it; its connections are closed
  const std::string& path() const { return path_; }

 private:
  DescriptorSocket(std::string path, const Policy* policy, DescriptorStore* store, bool allow_disk)
      : path_(std::move(path)), policy_(policy), store_(store), allow_disk_(allow_disk) {}
  struct Connection;
  void Loop();
  // One message on a readable connection: false when the connection is to be closed.
  bool Serve(Connection& c);

  const std::string path_;
  const Policy* const policy_;
  DescriptorStore* const store_;
  const bool allow_disk_;
  UniqueFd listen_fd_;
  UniqueFd wake_fd_;
  std::thread thread_;
};

}  // namespace rdmad::auth

#endif  // RDMAD_SERVER_AUTH_DESCRIPTOR_SOCKET_H_
