// The caller's rights on a file it asks rdmad to register: rdmad (root) opens the file, but a
// caller may register it only with the access its own file-system identity has to that inode: read for any
// registration (rdmad maps it) and for REMOTE_READ, write for LOCAL_WRITE / REMOTE_WRITE / REMOTE_ATOMIC.
//
// POSIX permission classes, as the kernel decides them without ACLs: the owner class if the uid matches,
// else the group class if the gid or a supplementary group matches the file's group, else other; uid 0
// may read and write anything (CAP_DAC_OVERRIDE). ACLs, other capabilities and the search permission of
// the directories on the way are not considered (the allowed roots confine the path instead).
//
// Threads: pure functions on plain values, callable from any thread.
#ifndef RDMAD_SERVER_MEMORY_FILE_RIGHTS_H_
#define RDMAD_SERVER_MEMORY_FILE_RIGHTS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "server/memory/file_access.h"

namespace rdmad {

// What a registration needs of the file: bits as in a mode's class (r = 4, w = 2).
inline constexpr unsigned kFileRead = 4;
inline constexpr unsigned kFileWrite = 2;

// The inode rdmad opened, as fstat(2) saw it.
struct FileOwnership {
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint32_t mode = 0;  // st_mode; only the permission bits (0777) are looked at
};

// The permission class that applies to `who` ("owner", "group", "other"), or "root" for uid 0.
const char* PermissionClass(const FileIdentity& who, const FileOwnership& file);

// True if `who` has every right in `want` (kFileRead | kFileWrite) on `file`.
bool MayAccess(const FileIdentity& who, const FileOwnership& file, unsigned want);

// "read", "write", "read and write".
std::string RightsName(unsigned want);

// A caller that may register no file at all (`check` set, no identity): PERMISSION_DENIED on `field`,
// saying why. OK otherwise (the per-file check comes once the file is open).
absl::Status CheckMayUseFiles(const FileAccess& files, const std::string& field);

// The whole decision for one opened file (`real`: its real path, for the message). OK if `files.check` is
// false (rdmad's own rights). Refusal: PERMISSION_DENIED on `field` with errno EACCES, naming the rights
// asked for, the identity, the class that applied and the file's owner, group and mode.
absl::Status CheckFileRights(const FileAccess& files, const FileOwnership& file, unsigned want,
                             const std::string& real, const std::string& field);

}  // namespace rdmad

#endif  // RDMAD_SERVER_MEMORY_FILE_RIGHTS_H_
