#include "server/memory/file_rights.h"

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/common/status.h"

namespace rdmad {
namespace {

enum class Class { kRoot, kOwner, kGroup, kOther };

Class ClassOf(const FileIdentity& who, const FileOwnership& file) {
  if (who.uid == 0) return Class::kRoot;
  if (who.uid == file.uid) return Class::kOwner;
  if (who.gid == file.gid || std::find(who.groups.begin(), who.groups.end(), file.gid) != who.groups.end()) {
    return Class::kGroup;
  }
  return Class::kOther;
}

}  // namespace

const char* PermissionClass(const FileIdentity& who, const FileOwnership& file) {
  switch (ClassOf(who, file)) {
    case Class::kRoot:
      return "root";
    case Class::kOwner:
      return "owner";
    case Class::kGroup:
      return "group";
    case Class::kOther:
      break;
  }
  return "other";
}

bool MayAccess(const FileIdentity& who, const FileOwnership& file, unsigned want) {
  want &= kFileRead | kFileWrite;
  unsigned granted = 0;
  switch (ClassOf(who, file)) {
    case Class::kRoot:
      return true;  // like the kernel's CAP_DAC_OVERRIDE for read and write
    case Class::kOwner:
      granted = (file.mode >> 6) & 7;
      break;
    case Class::kGroup:
      granted = (file.mode >> 3) & 7;
      break;
    case Class::kOther:
      granted = file.mode & 7;
      break;
  }
  // Only the class that applies counts: an owner without a bit is refused even if "other" has it (POSIX).
  return (granted & want) == want;
}

std::string RightsName(unsigned want) {
  const bool r = want & kFileRead, w = want & kFileWrite;
  if (r && w) return "read and write";
  if (w) return "write";
  if (r) return "read";
  return "no";
}

absl::Status CheckMayUseFiles(const FileAccess& files, const std::string& field) {
  if (!files.check || files.identity.has_value()) return absl::OkStatus();
  return FieldError(absl::StatusCode::kPermissionDenied, field,
                    "this caller has no file-system identity (a tenant without uid/gid, docs/security.md), so it "
                    "may register anonymous memory only, no file");
}

absl::Status CheckFileRights(const FileAccess& files, const FileOwnership& file, unsigned want,
                             const std::string& real, const std::string& field) {
  if (!files.check) return absl::OkStatus();
  RDMAD_RETURN_IF_ERROR(CheckMayUseFiles(files, field));
  const FileIdentity& who = *files.identity;
  if (MayAccess(who, file, want)) return absl::OkStatus();
  std::string groups;
  for (uint32_t g : who.groups) absl::StrAppend(&groups, groups.empty() ? "" : ",", g);
  return ErrnoError(absl::StatusCode::kPermissionDenied, "access", EACCES,
                    absl::StrFormat("the caller (uid %u, gid %u%s%s) may not %s %s (owner %u, group %u, mode "
                                    "0%03o: the %s class applies); a registration needs read, and write for "
                                    "LOCAL_WRITE, REMOTE_WRITE or REMOTE_ATOMIC",
                                    who.uid, who.gid, groups.empty() ? "" : ", groups ", groups,
                                    RightsName(want), real, file.uid, file.gid, file.mode & 07777,
                                    PermissionClass(who, file)),
                    field);
}

}  // namespace rdmad
