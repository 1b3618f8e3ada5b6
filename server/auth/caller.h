// Who is calling an RPC, as rdmad's policy decides from the transport's identity (peer.h) and the config
// (policy.h). Resolved once per RPC, on the handler's thread; a plain value after that.
#ifndef RDMAD_SERVER_AUTH_CALLER_H_
#define RDMAD_SERVER_AUTH_CALLER_H_

#include <cstdint>
#include <string>

#include "server/memory/file_access.h"

namespace rdmad::auth {

struct Caller {
  std::string principal;      // "spiffe://...", "CN=reader", "unix:uid:1000", "anonymous"
  std::string tenant;         // empty: an admin outside any tenant
  bool admin = false;
  bool authenticated = false;
  std::string transport;      // "unix", "tls", "insecure_tcp"
  std::string peer;           // the gRPC peer string
  int64_t uid = -1, gid = -1;  // unix peers (SO_PEERCRED)
  FileAccess files;           // the file rights its registrations get (server/memory/file_access.h)
};

}  // namespace rdmad::auth

#endif  // RDMAD_SERVER_AUTH_CALLER_H_
