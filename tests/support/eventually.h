// Eventually: the bounded poll the tests wait with, instead of a sleep or a timing assertion:
//   EXPECT_TRUE(Eventually([&] { return !cm.GetCmId(id).ok(); }));
//   ASSERT_TRUE(Eventually([&] { return LiveGrants(r) == 0; }, absl::Seconds(30)));
// The deadline is on wire::WallNow (CLOCK_REALTIME, proto/wire/wall_clock.h), the clock the guest tests read:
// Debian's absl::Now() comes from the cycle counter, which the test harness's TCG guests do not keep in step.
//
// Threads: runs `pred` on the calling thread, as often as every millisecond (unless told `every`); pred
// synchronizes whatever it reads that other threads write.
#ifndef RDMAD_TESTS_SUPPORT_EVENTUALLY_H_
#define RDMAD_TESTS_SUPPORT_EVENTUALLY_H_

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "proto/wire/wall_clock.h"

namespace rdmad::test {

// True as soon as `pred` is; else, once `timeout` has passed, what pred() says then. `every`: the pause
// between two asks, for a pred that is costly itself (a TLS handshake).
template <typename Pred>
bool Eventually(Pred pred, absl::Duration timeout = absl::Seconds(10), absl::Duration every = absl::Milliseconds(1)) {
  const absl::Time deadline = wire::WallNow() + timeout;
  while (wire::WallNow() < deadline) {
    if (pred()) return true;
    absl::SleepFor(every);
  }
  return pred();
}

}  // namespace rdmad::test

#endif  // RDMAD_TESTS_SUPPORT_EVENTUALLY_H_
