#include "server/verbs/gid.h"

#include <arpa/inet.h>

#include <cstdio>
#include <string>

#include "server/common/status.h"

namespace rdmad::verbs {

std::string GidToString(const ibv_gid& gid) {
  char out[40];
  const uint8_t* b = gid.raw;
  std::snprintf(out, sizeof out, "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x",
                b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return out;
}

absl::StatusOr<ibv_gid> ParseGid(absl::string_view text) {
  // inet_pton accepts the full 8-group form as well as "::" shorthand and IPv4-mapped forms.
  ibv_gid gid{};
  std::string s(text);
  if (inet_pton(AF_INET6, s.c_str(), gid.raw) != 1) {
    return absl::InvalidArgumentError("not a GID (expected 8 colon-separated groups of hex digits)");
  }
  return gid;
}

bool GidIsZero(const ibv_gid& gid) {
  for (uint8_t b : gid.raw) {
    if (b) return false;
  }
  return true;
}

}  // namespace rdmad::verbs
