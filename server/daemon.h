// Daemon: a whole rdmad as a handle. Start() builds every layer from a Config (listeners, state store,
// devices, registry, CM and grant managers, audit trail, tenancy gate, metrics, the gRPC server) and serves;
// Drain() shuts it down in order; the destructor drains if no one did. main.cc only parses flags, blocks
// the signals and maps them to Reload and Drain; tests start a Daemon in-process over the fake fabric on a
// temporary socket.
//
// Threads: Start, Reload* and Drain are called from one thread (main's, or a test's), never from an RPC
// handler. Start creates the threads (gRPC's, the dispatchers, the pin workers, unix-accept, metrics-http):
// block the signals rdmad handles before calling it (main does), so that none of them takes a signal.
#ifndef RDMAD_SERVER_DAEMON_H_
#define RDMAD_SERVER_DAEMON_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/auth/peer.h"
#include "server/config.h"
#include "server/fabric/fabric.h"

namespace grpc {
class ServerContextBase;
}  // namespace grpc

namespace rdmad {

class Registry;
namespace audit {
class AuditLog;
}  // namespace audit
namespace auth {
class Policy;
}  // namespace auth
namespace cm {
class TokenStore;
}  // namespace cm
namespace grants {
class GrantManager;
}  // namespace grants
namespace tenancy {
class Gate;
}  // namespace tenancy

class Daemon {
 public:
  struct Options {
    Config config;
    // Opens the devices, after the listeners and the state store were set up (a bad TLS file or socket fails
    // before any device is opened). main passes the rdma-core backend; tests a fake fabric.
    std::function<absl::StatusOr<std::unique_ptr<fabric::Fabric>>()> open_fabric;
    // The grant manager's clock, which decides leases (default: the wall clock, server/grants/manager.h).
    std::function<absl::Time()> clock;
    // Tests only (main leaves it unset, and then the transport's word is final): who a call is from, given
    // who its transport says it is. The RPC unit tests name a caller per call in request metadata through
    // it (tests/support/daemon_fixture.h): one process cannot hold a certificate or a uid per principal.
    std::function<auth::Peer(const grpc::ServerContextBase& ctx, auth::Peer transport)> identify;
  };

  // Builds and serves, or says why not. `config_error` (optional) is set when the failure is the
  // configuration's (a bad TLS file, unix-socket group, address): rdmad then exits 2, else 1.
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(Options options, bool* config_error = nullptr);
  // Drains (with the configured shutdown_deadline_s) unless Drain was called.
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // SIGHUP: re-reads the TLS files (the certificates in use stay if they fail their checks), and reopens the
  // audit log (logrotate moved it away). What was reloaded, or why not.
  absl::StatusOr<std::string> ReloadTls();
  absl::Status ReopenAudit();  // OK without an audit log

  // The drain (docs/operations.md#drain-and-shutdown): refuses new calls, ends every grant (SHUTDOWN), ends
  // the streams, lets the calls in flight finish until `deadline`, stops the server and releases every
  // resource in order. `stage` (optional) hears each step's name as it starts. Idempotent.
  void Drain(absl::Time deadline, const std::function<void(const char* stage)>& stage = nullptr);

  // The TCP ports the server listens on (the port chosen for a configured port 0).
  std::vector<int> tcp_ports() const;
  const Config& config() const;

  // Tests only (tests/support/daemon_fixture.h): the layers the RPC unit tests check directly, beyond what
  // the API shows (a tenant's open watch streams, a PD's pinned bytes, the outstanding tokens, the gate's
  // locks). Null once drained; audit is null without an audit log.
  struct Layers {
    Registry* registry = nullptr;
    cm::TokenStore* tokens = nullptr;
    auth::Policy* policy = nullptr;
    tenancy::Gate* gate = nullptr;
    audit::AuditLog* audit = nullptr;
    grants::GrantManager* grants = nullptr;
  };
  Layers layers_for_testing() const;

 private:
  struct Impl;
  explicit Daemon(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rdmad

#endif  // RDMAD_SERVER_DAEMON_H_
