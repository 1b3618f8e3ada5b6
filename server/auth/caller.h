// Who is calling an RPC, as rdmad's policy decides from the transport's identity (peer.h) and the config
// (policy.h). Resolved once per RPC, on the handler's thread; a plain value after that.
#ifndef RDMAD_SERVER_AUTH_CALLER_H_
#define RDMAD_SERVER_AUTH_CALLER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rdmad::auth {

// A file-system identity: whose rights decide which files a caller may register, and with what access
// (read for REMOTE_READ, write for LOCAL_WRITE / REMOTE_WRITE), checked on the file rdmad opened.
struct FileIdentity {
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::vector<uint32_t> groups;  // supplementary groups
};

// What a caller may do with file-backed memory. The default (no identity, no roots) is rdmad's own view:
// only allowed_file_roots apply. Internal callers and tests use it.
struct FileAccess {
  std::optional<FileIdentity> identity;  // nullopt and `check` set: no file may be registered
  bool check = false;                    // false: rdmad's own rights (single-tenant mode, internal)
  std::vector<std::string> roots;        // narrow allowed_file_roots further; empty: no narrowing
};

struct Caller {
  std::string principal;      // "spiffe://...", "CN=reader", "unix:uid:1000", "anonymous"
  std::string tenant;         // empty: an admin outside any tenant
  bool admin = false;
  bool authenticated = false;
  std::string transport;      // "unix", "tls", "insecure_tcp"
  std::string peer;           // the gRPC peer string
  int64_t uid = -1, gid = -1;  // unix peers (SO_PEERCRED)
  FileAccess files;
};

}  // namespace rdmad::auth

#endif  // RDMAD_SERVER_AUTH_CALLER_H_
