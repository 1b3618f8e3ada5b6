// PastActivating: a grant as rdmad reports it once its activation is over (ACTIVE, or ended), for tests that
// read through a grant and then look at it on the control plane. A SCOPE_QP key leaves with its window's bind
// (docs/grants.md#life-cycle), so a client may hold the key, and read, while rdmad has not yet seen the bind
// complete and still reports the grant ACTIVATING.
//   ASSERT_OK_AND_ASSIGN(v1::Grant g, PastActivating(client, name));
//   EXPECT_EQ(g.state(), v1::GRANT_ACTIVE);
//
// Threads: none of its own; it calls the client on the calling thread.
#ifndef RDMAD_TESTS_SUPPORT_GRANT_STATE_H_
#define RDMAD_TESTS_SUPPORT_GRANT_STATE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/client.h"

namespace rdmad::test {

// GetGrant until the state is no longer ACTIVATING, or `timeout` has passed (then the last answer, still
// ACTIVATING, for the caller's check to report). A failed GetGrant is returned at once.
inline absl::StatusOr<v1::Grant> PastActivating(client::Client& c, const std::string& name,
                                                absl::Duration timeout = absl::Seconds(30)) {
  const absl::Time until = absl::Now() + timeout;
  while (true) {
    absl::StatusOr<v1::Grant> g = c.GetGrant(name);
    if (!g.ok() || g->state() != v1::GRANT_ACTIVATING || absl::Now() >= until) return g;
    absl::SleepFor(absl::Milliseconds(5));
  }
}

}  // namespace rdmad::test

#endif  // RDMAD_TESTS_SUPPORT_GRANT_STATE_H_
