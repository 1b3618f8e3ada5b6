// Whose rights decide which files a registration may map, and with what access: a plain value that the
// caller's identity (server/auth/caller.h) carries down to the registry and to Mapping (file_rights.h checks
// it against the file rdmad opened).
// Threads: a plain value.
#ifndef RDMAD_SERVER_MEMORY_FILE_ACCESS_H_
#define RDMAD_SERVER_MEMORY_FILE_ACCESS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rdmad {

// A file-system identity: read for REMOTE_READ, write for LOCAL_WRITE / REMOTE_WRITE, checked on the file
// rdmad opened.
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
  // The caller's principal: a descriptor passed over the descriptor socket (MemorySource.fd) is
  // claimed only for the principal that passed it. Empty: no descriptor can be claimed.
  std::string principal;
};

}  // namespace rdmad

#endif  // RDMAD_SERVER_MEMORY_FILE_ACCESS_H_
