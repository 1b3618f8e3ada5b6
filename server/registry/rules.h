// The man-page rules the registry enforces, as pure functions on plain values: no registry state, no
// fabric, no lock. Each returns OK or a status naming the request field at fault.
//   ibv_reg_mr(3):   REMOTE_WRITE or REMOTE_ATOMIC requires LOCAL_WRITE.
//   ibv_bind_mw(3):  a window takes only REMOTE_READ/WRITE/ATOMIC; REMOTE_WRITE/ATOMIC need the MR's
//                    LOCAL_WRITE; the MR needs MW_BIND; the range lies inside the MR; type 1 windows cannot
//                    be zero-based; a bound type 2 window must be invalidated before it is bound again.
//   ibv_rereg_mr(3): the flags and which arguments go with them.
// Threads: stateless; callable from any thread.
#ifndef RDMAD_SERVER_REGISTRY_RULES_H_
#define RDMAD_SERVER_REGISTRY_RULES_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "rdmad/v1/rdmad.pb.h"
#include "server/fabric/fabric.h"

namespace rdmad {

// "pds/3" -> 3. Exactly the canonical form (no sign, no leading zero); malformed: INVALID_ARGUMENT.
absl::StatusOr<uint64_t> ParseName(const std::string& name, const char* kind, const std::string& field);
std::string Name(const char* kind, uint64_t id);

// Access flags: proto list <-> fabric bits. Unknown values are an INVALID_ARGUMENT naming `field`.
absl::StatusOr<uint32_t> AccessBits(const google::protobuf::RepeatedField<int>& access, const std::string& field);
void AccessList(uint32_t bits, google::protobuf::RepeatedField<int>* out);
const char* AccessName(uint32_t bit);

// ibv_reg_mr(3): REMOTE_WRITE or REMOTE_ATOMIC requires LOCAL_WRITE.
absl::Status CheckMrAccessRule(uint32_t bits, const std::string& field);

// The access bits for which the kernel pins a region's memory for writing (ib_access_writable): a region
// over memory the caller may not write (a read-only or write-sealed descriptor) can have none of them.
inline constexpr uint32_t kWritableAccess =
    fabric::kLocalWrite | fabric::kRemoteWrite | fabric::kRemoteAtomic | fabric::kMwBind;

// What a registration with `access` (fabric bits) needs of a file (file_rights.h): read always (rdmad maps
// it, and REMOTE_READ reads it), write for LOCAL_WRITE, REMOTE_WRITE or REMOTE_ATOMIC (MW_BIND alone lets
// a window write only through the region's LOCAL_WRITE).
unsigned FileRightsFor(uint32_t access);

// ibv_bind_mw(3), for a bind of [offset, offset + length) of an MR of `mr_length` bytes with `mr_access`.
struct BindCheck {
  std::string mr_name;
  uint64_t mr_length = 0;
  uint32_t mr_access = 0;
  bool type1 = true;
  bool window_bound = false;  // the window is bound now
  uint64_t offset = 0, length = 0;
  bool zero_based = false;
};
// Returns the window's access bits (with kZeroBased where asked) or why the bind is refused: for an API
// request's access list, or for access bits already converted (fabric::kRemoteRead...).
absl::StatusOr<uint32_t> CheckBind(const BindCheck& b, const google::protobuf::RepeatedField<int>& access);
absl::StatusOr<uint32_t> CheckBind(const BindCheck& b, uint32_t access);

// ibv_rereg_mr(3): the flags as bits, and that exactly the arguments they name are given.
absl::StatusOr<int> ReregFlags(const v1::ReregisterMrRequest& request);

// The GID a QP uses by default: on Ethernet the first RoCEv2 GID that is an IPv4-mapped address (what
// peers on an IPv4 network reach), else the first RoCEv2 GID, else index 0.
uint32_t DefaultGidIndex(const fabric::PortInfo& port);

}  // namespace rdmad

#endif  // RDMAD_SERVER_REGISTRY_RULES_H_
