// Watchdog: see drain_watchdog.h.
#include "server/drain_watchdog.h"

#include <pthread.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/log.h"

namespace rdmad {

Watchdog::Watchdog(sigset_t signals, absl::Time deadline) : signals_(signals), deadline_(deadline) {
  thread_ = std::thread([this] { Run(); });
}

void Watchdog::Stage(const char* what) {
  stage_.store(what);
  RDMAD_LOG_INFO("drain: %s", what);
}

void Watchdog::Stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void Watchdog::Run() {
  pthread_setname_np(pthread_self(), "drain-watchdog");
  while (!stop_.load()) {
    timespec slice{0, 100 * 1000 * 1000};
    const int sig = sigtimedwait(&signals_, nullptr, &slice);
    if (sig == SIGHUP) continue;
    if (sig > 0) Force(absl::StrCat("second ", strsignal(sig)));
    if (absl::Now() >= deadline_) Force("shutdown_deadline_s passed");
  }
}

void Watchdog::Force(const std::string& why) {
  RDMAD_LOG_ERROR("drain: %s while %s: forcing the exit; the kernel releases the verbs objects", why.c_str(),
                  stage_.load());
  _exit(1);
}

}  // namespace rdmad
