// The wall clock behind every *_unix_nanos field that crosses a machine (a grant's issue, expiry and end
// times, token expiries, audit and event times) and behind the client library's "expired or revoked?"
// answer, which compares this clock with rdmad's lease end.
//
// Why not absl::Now(): Debian's Abseil (20220623) computes absl::Now() from the CPU's cycle counter,
// re-calibrated against the kernel every so often. In the test harness's TCG guests, where the kernel
// refuses the TSC ("TSCs unsynchronized"), times taken with it were seen ~180 ms apart from the peer's for
// seconds under load, while clock_gettime(CLOCK_REALTIME) in the same guests stayed within 2 ms of the
// peer's (docs/dev/harness.md#clocks). clock_gettime is a vDSO call on Linux: cheap enough for every RPC.
#ifndef RDMAD_PROTO_WIRE_WALL_CLOCK_H_
#define RDMAD_PROTO_WIRE_WALL_CLOCK_H_

#include <time.h>

#include "absl/time/time.h"

namespace rdmad::wire {

// CLOCK_REALTIME, as the kernel keeps it.
inline absl::Time WallNow() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return absl::TimeFromTimespec(ts);
}

}  // namespace rdmad::wire

#endif  // RDMAD_PROTO_WIRE_WALL_CLOCK_H_
