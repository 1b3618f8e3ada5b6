#include "server/registry/rules.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/common/status.h"
#include "server/memory/file_rights.h"

namespace rdmad {

unsigned FileRightsFor(uint32_t access) {
  constexpr uint32_t kWrites = fabric::kLocalWrite | fabric::kRemoteWrite | fabric::kRemoteAtomic;
  return kFileRead | ((access & kWrites) ? kFileWrite : 0u);
}

std::string Name(const char* kind, uint64_t id) { return absl::StrCat(kind, "/", id); }

absl::StatusOr<uint64_t> ParseName(const std::string& name, const char* kind, const std::string& field) {
  if (name.empty()) return InvalidArgument(field, absl::StrCat("is required (", kind, "/N)"));
  const std::string prefix = absl::StrCat(kind, "/");
  uint64_t id = 0;
  const std::string digits = name.substr(std::min(prefix.size(), name.size()));
  if (!absl::StartsWith(name, prefix) || digits.empty() || digits[0] == '0' ||
      digits.find_first_not_of("0123456789") != std::string::npos || !absl::SimpleAtoi(digits, &id)) {
    return InvalidArgument(field, absl::StrCat("'", name, "' is not a name of the form ", kind, "/N"));
  }
  return id;
}

const char* AccessName(uint32_t bit) {
  switch (bit) {
    case fabric::kLocalWrite: return "LOCAL_WRITE";
    case fabric::kRemoteWrite: return "REMOTE_WRITE";
    case fabric::kRemoteRead: return "REMOTE_READ";
    case fabric::kRemoteAtomic: return "REMOTE_ATOMIC";
    case fabric::kMwBind: return "MW_BIND";
    default: return "?";
  }
}

absl::StatusOr<uint32_t> AccessBits(const google::protobuf::RepeatedField<int>& access, const std::string& field) {
  uint32_t bits = 0;
  for (int a : access) {
    switch (a) {
      case v1::LOCAL_WRITE: bits |= fabric::kLocalWrite; break;
      case v1::REMOTE_WRITE: bits |= fabric::kRemoteWrite; break;
      case v1::REMOTE_READ: bits |= fabric::kRemoteRead; break;
      case v1::REMOTE_ATOMIC: bits |= fabric::kRemoteAtomic; break;
      case v1::MW_BIND: bits |= fabric::kMwBind; break;
      default: return InvalidArgument(field, absl::StrCat("unknown access flag ", a));
    }
  }
  return bits;
}

void AccessList(uint32_t bits, google::protobuf::RepeatedField<int>* out) {
  if (bits & fabric::kLocalWrite) out->Add(v1::LOCAL_WRITE);
  if (bits & fabric::kRemoteWrite) out->Add(v1::REMOTE_WRITE);
  if (bits & fabric::kRemoteRead) out->Add(v1::REMOTE_READ);
  if (bits & fabric::kRemoteAtomic) out->Add(v1::REMOTE_ATOMIC);
  if (bits & fabric::kMwBind) out->Add(v1::MW_BIND);
}

namespace {
constexpr uint32_t kNeedsLocalWrite[] = {fabric::kRemoteWrite, fabric::kRemoteAtomic};
}  // namespace

absl::Status CheckMrAccessRule(uint32_t bits, const std::string& field) {
  for (uint32_t needs_write : kNeedsLocalWrite) {
    if ((bits & needs_write) && !(bits & fabric::kLocalWrite)) {
      return InvalidArgument(field, absl::StrCat(AccessName(needs_write), " requires LOCAL_WRITE (ibv_reg_mr(3))"));
    }
  }
  return absl::OkStatus();
}

namespace {

// ibv_bind_mw(3): the range lies inside the MR.
absl::Status CheckBindRange(const BindCheck& b) {
  if (b.length == 0) return InvalidArgument("length", "must be > 0 (InvalidateMw unbinds a window)");
  if (b.offset >= b.mr_length) {
    return OutOfRange("offset", absl::StrCat("offset ", b.offset, " is at or past the end of ", b.mr_name, " (",
                                             b.mr_length, " bytes)"));
  }
  if (b.length > b.mr_length - b.offset) {
    return OutOfRange("length", absl::StrCat("offset ", b.offset, " + length ", b.length, " passes the end of ",
                                             b.mr_name, " (", b.mr_length, " bytes)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<uint32_t> CheckBind(const BindCheck& b, const google::protobuf::RepeatedField<int>& requested) {
  RDMAD_RETURN_IF_ERROR(CheckBindRange(b));  // first, as for bits
  RDMAD_ASSIGN_OR_RETURN(uint32_t access, AccessBits(requested, "access"));
  return CheckBind(b, access);
}

absl::StatusOr<uint32_t> CheckBind(const BindCheck& b, uint32_t access) {
  RDMAD_RETURN_IF_ERROR(CheckBindRange(b));
  if (access & (fabric::kLocalWrite | fabric::kMwBind)) {
    return InvalidArgument("access", "a window takes only REMOTE_READ, REMOTE_WRITE and REMOTE_ATOMIC "
                                     "(ibv_bind_mw(3))");
  }
  if (!(b.mr_access & fabric::kMwBind)) {
    return FailedPrecondition("mr", absl::StrCat(b.mr_name, " was registered without MW_BIND"));
  }
  for (uint32_t needs_write : kNeedsLocalWrite) {
    if ((access & needs_write) && !(b.mr_access & fabric::kLocalWrite)) {
      return FailedPrecondition("access", absl::StrCat(AccessName(needs_write), " on a window requires LOCAL_WRITE on ",
                                                       b.mr_name, " (ibv_bind_mw(3))"));
    }
  }
  if (b.zero_based) {
    if (b.type1) return InvalidArgument("zero_based", "type 1 windows cannot be zero-based (IBA o10-36.2.2)");
    access |= fabric::kZeroBased;
  }
  return access;
}

absl::StatusOr<int> ReregFlags(const v1::ReregisterMrRequest& request) {
  int flags = 0;
  for (int f : request.flags()) {
    switch (f) {
      case v1::CHANGE_TRANSLATION: flags |= fabric::kChangeTranslation; break;
      case v1::CHANGE_PD: flags |= fabric::kChangePd; break;
      case v1::CHANGE_ACCESS: flags |= fabric::kChangeAccess; break;
      default: return InvalidArgument("flags", absl::StrCat("unknown flag ", f));
    }
  }
  if (flags == 0) return InvalidArgument("flags", "at least one of CHANGE_TRANSLATION, CHANGE_PD, CHANGE_ACCESS");
  const bool has_source = request.source().kind_case() != v1::MemorySource::KIND_NOT_SET;
  if (has_source != bool(flags & fabric::kChangeTranslation)) {
    return InvalidArgument(has_source ? "source" : "flags",
                           "source must be given exactly when flags has CHANGE_TRANSLATION");
  }
  if (!request.pd().empty() != bool(flags & fabric::kChangePd)) {
    return InvalidArgument(request.pd().empty() ? "flags" : "pd", "pd must be given exactly when flags has CHANGE_PD");
  }
  if (!request.access().empty() && !(flags & fabric::kChangeAccess)) {
    return InvalidArgument("access", "access is given but flags lacks CHANGE_ACCESS");
  }
  return flags;
}

uint32_t DefaultGidIndex(const fabric::PortInfo& port) {
  const fabric::GidEntry* v2 = nullptr;
  for (const auto& g : port.gids) {
    if (g.type != "RoCEv2") continue;
    if (absl::StartsWith(g.gid, "0000:0000:0000:0000:0000:ffff:")) return g.index;
    if (v2 == nullptr) v2 = &g;
  }
  return v2 ? v2->index : 0;
}

}  // namespace rdmad
