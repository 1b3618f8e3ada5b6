// GID <-> text ("fe80:0000:0000:0000:0202:03ff:fe04:0506", 8 groups of 4 hex digits).
// Thread-safety: stateless.
#ifndef RDMAD_SERVER_VERBS_GID_H_
#define RDMAD_SERVER_VERBS_GID_H_

#include <infiniband/verbs.h>

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace rdmad::verbs {

std::string GidToString(const ibv_gid& gid);
absl::StatusOr<ibv_gid> ParseGid(absl::string_view text);
bool GidIsZero(const ibv_gid& gid);

}  // namespace rdmad::verbs

#endif  // RDMAD_SERVER_VERBS_GID_H_
