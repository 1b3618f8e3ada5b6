// rdmad: owns this host's RDMA resources and manages them for others through the rdmad.v1 gRPC API.
//
// main.cc only parses the flags and the config, blocks the signals and maps them onto the Daemon handle
// (server/daemon.h), which builds, serves and releases everything.
//
// Threads: main() parses flags and config, starts the Daemon (devices, registry, gRPC server), then waits in sigwait() for SIGHUP (reload the TLS certificates, reopen the audit log, keep waiting) and SIGTERM/SIGINT
// (drain and shut down); all three are blocked in every thread, so only main (and, during the drain, the
// watchdog) sees them. gRPC's
// threads serve RPCs against the registry, the CM manager and the grant manager; the dispatchers (one per device, one per
// event channel) and the pin workers are theirs (docs/dev/architecture.md); `unix-accept` accepts unix-socket
// connections and hands them to gRPC (server/auth/listeners.h). On SIGTERM/SIGINT main stops accepting unix
// connections and removes the sockets, refuses new calls (UNAVAILABLE; health NOT_SERVING), ends every grant
// the normal way (SHUTDOWN: key killed, ENDED sent, disconnected), quiesces rdma_cm (watch streams end,
// waiting connects fail), shuts the server down (in-flight RPCs finish), destroys the CM manager (CM ids,
// their QPs first, then channels), then the registry (windows, regions, QPs, PDs, devices, in that order)
// and removes its TLS copies: nothing is left behind. All within shutdown_deadline_s; a second signal or the
// deadline forces the exit (the watchdog thread).
//
// systemd (deploy/rdmad.service, Type=notify): main tells the service manager through sd_notify(3) when
// rdmad serves (READY=1, after Daemon::Start), when a SIGHUP reload runs (RELOADING=1, then READY=1), when
// the drain starts (STOPPING=1) and which stage it is in (STATUS=). Without $NOTIFY_SOCKET these do nothing.
#include <signal.h>
#include <sys/resource.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/common/log.h"
#include "server/common/status.h"
#include "server/common/version.h"
#include "server/config.h"
#include "server/daemon.h"
#include "server/drain_watchdog.h"
#include "server/verbs/device.h"

namespace rdmad {
namespace {

void RaiseMemlockLimit() {
  rlimit unlimited{RLIM_INFINITY, RLIM_INFINITY};
  if (setrlimit(RLIMIT_MEMLOCK, &unlimited) != 0) {
    rlimit now{};
    getrlimit(RLIMIT_MEMLOCK, &now);
    RDMAD_LOG_WARN("cannot lift RLIMIT_MEMLOCK (%s); registrations are limited to %llu bytes of pinned memory",
                   std::strerror(errno), static_cast<unsigned long long>(now.rlim_cur));
  }
}

// One sd_notify(3) message to the service manager; a no-op outside systemd (no $NOTIFY_SOCKET). A failure
// to send is logged and otherwise ignored: serving does not depend on it.
void Notify(const std::string& state) {
  if (int r = sd_notify(0, state.c_str()); r < 0) {
    RDMAD_LOG_WARN("sd_notify: %s", std::strerror(-r));
  }
}

// The CLOCK_MONOTONIC time in microseconds: systemd 253+ ties a RELOADING=1 to the reload it started by it
// (MONOTONIC_USEC=, needed with Type=notify-reload); systemd 252 (Debian 12) ignores the field.
unsigned long long MonotonicMicros() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<unsigned long long>(ts.tv_sec) * 1000000ULL +
         static_cast<unsigned long long>(ts.tv_nsec) / 1000;
}

int Run(int argc, char** argv) {
  CLI::App app{"rdmad: RDMA resource manager daemon (gRPC API rdmad.v1)"};
  app.set_version_flag("--version", std::string("rdmad ") + kRdmadVersion + " (API " + kApiVersion + ")");
  std::string config_path;
  std::vector<std::string> listen;
  std::string log_level;
  app.add_option("-c,--config", config_path, "JSON config file (see docs/config.md)")->check(CLI::ExistingFile);
  app.add_option("-l,--listen", listen,
                 "listen address, repeatable: unix:/path or host:port (default unix:/run/rdmad/rdmad.sock)");
  app.add_option("--log-level", log_level, "debug, info, warning or error");
  CLI11_PARSE(app, argc, argv);

  Config config;
  if (!config_path.empty()) {
    auto loaded = LoadConfig(config_path);
    if (!loaded.ok()) {
      std::fprintf(stderr, "rdmad: %s\n", std::string(loaded.status().message()).c_str());
      return 2;
    }
    config = *loaded;
  }
  if (!listen.empty()) config.listen = listen;
  if (!log_level.empty()) config.log_level = log_level;
  LogLevel level;
  if (!ParseLogLevel(config.log_level.c_str(), &level)) {
    std::fprintf(stderr, "rdmad: unknown log level '%s'\n", config.log_level.c_str());
    return 2;
  }
  SetLogLevel(level);
  // A TCP listener needs mutual TLS, or insecure_tcp to serve unauthenticated callers.
  if (absl::Status s = CheckListeners(config); !s.ok()) {
    std::fprintf(stderr, "rdmad: %s\n", std::string(s.message()).c_str());
    return 2;
  }

  // Only main receives SIGTERM/SIGINT/SIGHUP: block them before any thread is created.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  Daemon::Options options;
  options.config = config;
  options.open_fabric = []() -> absl::StatusOr<std::unique_ptr<fabric::Fabric>> {
    RaiseMemlockLimit();
    RDMAD_ASSIGN_OR_RETURN(std::unique_ptr<verbs::VerbsFabric> fabric, verbs::VerbsFabric::Open());
    return std::unique_ptr<fabric::Fabric>(std::move(fabric));
  };
  bool config_error = false;
  absl::StatusOr<std::unique_ptr<Daemon>> started = Daemon::Start(std::move(options), &config_error);
  if (!started.ok()) {
    RDMAD_LOG_ERROR("%s", std::string(started.status().message()).c_str());
    return config_error ? 2 : 1;
  }
  std::unique_ptr<Daemon> daemon = std::move(started).value();
  // Serving: a Type=notify unit is "active" from here (systemctl start returns, After= units start).
  const std::string serving = "STATUS=serving rdmad.v1 on " + absl::StrJoin(config.listen, ", ");
  Notify("READY=1\n" + serving);

  int sig = 0;
  for (;;) {
    sigwait(&signals, &sig);
    if (sig != SIGHUP) break;
    Notify("RELOADING=1\nSTATUS=reloading (SIGHUP: TLS certificates, audit log)\nMONOTONIC_USEC=" +
           std::to_string(MonotonicMicros()));
    // SIGHUP: re-read the TLS files; if they fail their checks the certificates in use stay.
    absl::StatusOr<std::string> reloaded = daemon->ReloadTls();
    if (reloaded.ok()) {
      RDMAD_LOG_INFO("SIGHUP: TLS: %s", reloaded->c_str());
    } else {
      RDMAD_LOG_ERROR("SIGHUP: TLS not reloaded, the certificates in use stay: %s",
                      std::string(reloaded.status().message()).c_str());
    }
    // And the audit log is opened again (logrotate moved it away).
    if (absl::Status s = daemon->ReopenAudit(); !s.ok()) {
      RDMAD_LOG_ERROR("SIGHUP: audit log not reopened: %s", std::string(s.message()).c_str());
    }
    // The reload is over, whatever it kept: rdmad serves throughout (the log says what failed).
    Notify("READY=1\n" + serving);
  }
  // The drain (docs/operations.md#drain-and-shutdown), within shutdown_deadline_s. A second SIGTERM/SIGINT,
  // or the deadline, forces the exit (status 1): the kernel then releases every verbs object of the process.
  const absl::Time deadline = absl::Now() + absl::Seconds(config.shutdown_deadline_s);
  RDMAD_LOG_INFO("%s: draining (deadline %llds; a second SIGTERM forces the exit)", strsignal(sig),
                 static_cast<long long>(config.shutdown_deadline_s));
  // systemd shows the unit "deactivating" from here, and each stage as its status.
  Notify("STOPPING=1\nSTATUS=draining");
  Watchdog watchdog(signals, deadline);
  daemon->Drain(deadline, [&watchdog](const char* stage) {
    watchdog.Stage(stage);
    Notify(std::string("STATUS=draining: ") + stage);
  });
  daemon.reset();
  watchdog.Stop();
  Notify("STATUS=drained, exiting");
  return 0;
}

}  // namespace
}  // namespace rdmad

int main(int argc, char** argv) { return rdmad::Run(argc, argv); }
