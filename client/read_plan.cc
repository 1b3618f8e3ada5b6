// read_plan.h: the message limit (the rest is inline).
#include "client/read_plan.h"

namespace rdmad::client::internal {

uint64_t MessageLimit(uint64_t port_max_msg_sz, uint64_t limit) {
  constexpr uint64_t kMax = uint64_t{1} << 31;
  uint64_t n = port_max_msg_sz == 0 ? kMax : std::min(port_max_msg_sz, kMax);
  if (limit != 0) n = std::min(n, limit);
  return n;
}

}  // namespace rdmad::client::internal
