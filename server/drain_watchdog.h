// The drain's watchdog (server/main.cc; docs/operations.md#drain-and-shutdown): during SIGTERM's drain, a
// second SIGTERM/SIGINT, or the deadline, ends the process at once with status 1, naming the stage the drain
// was in; the kernel then releases every verbs object of the process.
//
// Threads: its own thread takes the signals main() blocked (main no longer waits for them); Stage and Stop
// are called from main.
#ifndef RDMAD_SERVER_DRAIN_WATCHDOG_H_
#define RDMAD_SERVER_DRAIN_WATCHDOG_H_

#include <signal.h>

#include <atomic>
#include <string>
#include <thread>

#include "absl/time/time.h"

namespace rdmad {

class Watchdog {
 public:
  // `signals`: the set main() blocked (SIGTERM, SIGINT, SIGHUP; SIGHUP is ignored during the drain).
  Watchdog(sigset_t signals, absl::Time deadline);
  ~Watchdog() { Stop(); }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  // The drain's stage, logged, and named if the exit is forced. `what` must be a string literal.
  void Stage(const char* what);
  // The drain finished: the thread ends.
  void Stop();

 private:
  void Run();
  [[noreturn]] void Force(const std::string& why);

  sigset_t signals_;
  const absl::Time deadline_;
  std::atomic<const char*> stage_{"starting"};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace rdmad

#endif  // RDMAD_SERVER_DRAIN_WATCHDOG_H_
