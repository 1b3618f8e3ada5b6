// rdmad: owns this host's RDMA resources and manages them for others through the rdmad.v1 gRPC API.
//
// Threads: main() parses flags and config, opens the devices, builds the registry and the gRPC server,
// then waits in sigwait() for SIGHUP (reload the TLS certificates, reopen the audit log, keep waiting) and SIGTERM/SIGINT
// (drain and shut down); all three are blocked in every thread, so only main (and, during the drain, the
// watchdog) sees them. gRPC's
// threads serve RPCs against the registry, the CM manager and the grant manager; the dispatchers (one per device, one per
// event channel) and the pin workers are theirs (docs/architecture.md); `unix-accept` accepts unix-socket
// connections and hands them to gRPC (server/auth/listeners.h). On SIGTERM/SIGINT main stops accepting unix
// connections and removes the sockets, refuses new calls (UNAVAILABLE; health NOT_SERVING), ends every grant
// the normal way (SHUTDOWN: key killed, ENDED sent, disconnected), quiesces rdma_cm (watch streams end,
// waiting connects fail), shuts the server down (in-flight RPCs finish), destroys the CM manager (CM ids,
// their QPs first, then channels), then the registry (windows, regions, QPs, PDs, devices, in that order)
// and removes its TLS copies: nothing is left behind. All within shutdown_deadline_s; a second signal or the
// deadline forces the exit (the watchdog thread).
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/common/log.h"
#include "server/cm/manager.h"
#include "server/cm/token.h"
#include "server/config.h"
#include "server/drain_watchdog.h"
#include "server/fabric/cm.h"
#include "server/grants/manager.h"
#include "server/metrics/http.h"
#include "server/memory/prefault.h"
#include "server/metrics/rdmad_metrics.h"
#include "server/registry/registry.h"
#include "server/audit/audit_log.h"
#include "server/audit/reject_summary.h"
#include "server/auth/listeners.h"
#include "server/auth/peer.h"
#include "server/auth/policy.h"
#include "server/tenancy/gate.h"
#include "server/rpc/audit_service.h"
#include "server/rpc/in_flight.h"
#include "server/rpc/services.h"
#include "server/state/store.h"
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

void LogDevices(const fabric::Fabric& fabric) {
  if (fabric.devices().empty()) {
    RDMAD_LOG_WARN("no RDMA devices: the API serves, but there is nothing to allocate on");
  }
  for (const fabric::Device* d : fabric.devices()) {
    const fabric::DeviceInfo& i = d->info();
    std::vector<std::string> ports;
    for (const auto& p : i.ports) ports.push_back(std::to_string(p.number) + " " + p.state + " " + p.link_layer);
    RDMAD_LOG_INFO("device %s (%s, guid %s): ports [%s], mw type1 %s type2 %s, native rereg %s", i.name.c_str(),
                   i.transport.c_str(), i.node_guid.c_str(), absl::StrJoin(ports, ", ").c_str(),
                   i.mw_type1 ? "yes" : "no", (i.mw_type2a || i.mw_type2b) ? "yes" : "no",
                   i.native_rereg ? "yes" : "no");
  }
}

// Per device: whether windows get a bounds region (docs/api.md#memory-windows). "never" on a device whose
// probe did not see it enforce window bounds is allowed (to measure, or where the operator knows better)
// but warned: there a window exposes its whole MR.
void LogBoundsRegions(const fabric::Fabric& fabric, MwBoundsRegion mode, const std::string& setting) {
  for (const fabric::Device* d : fabric.devices()) {
    const fabric::DeviceInfo& i = d->info();
    const bool uses = UsesBoundsRegion(mode, i);
    if (!uses && !i.mw_bounds_enforced) {
      RDMAD_LOG_WARN("device %s: mw_bounds_region \"never\", but the device is not known to enforce window bounds "
                     "(%s): UNSAFE, a window's key gives access to its whole memory region", i.name.c_str(),
                     i.mw_bounds_probe.c_str());
      continue;
    }
    RDMAD_LOG_INFO("device %s: windows %s a bounds region (mw_bounds_region \"%s\"; probe: %s)", i.name.c_str(),
                   uses ? "are bound to" : "are bound directly, without", setting.c_str(),
                   i.mw_bounds_probe.c_str());
  }
}

int Run(int argc, char** argv) {
  CLI::App app{"rdmad: RDMA resource manager daemon (gRPC API rdmad.v1)"};
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

  // The listeners first, so that a bad TLS file or socket fails before any device is opened: TLS checked and
  // copied, unix sockets bound with their mode and group (listening; accepted once the server runs).
  auth::PeerDirectory peers;  // who is calling: the TLS principal, or the unix peer's SO_PEERCRED
  auto created = auth::Listeners::Create(config, &peers, {});
  if (!created.ok()) {
    RDMAD_LOG_ERROR("%s", std::string(created.status().message()).c_str());
    const absl::StatusCode code = created.status().code();  // a bad file or group: the config; else 1
    return code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kNotFound ? 2 : 1;
  }
  std::unique_ptr<auth::Listeners> listeners = std::move(created).value();
  // Before the CM and grant managers, gone after them: their event hubs call into it (rdmad_metrics.h).
  metrics::RdmadMetrics rdmad_metrics;

  // The crash-safe state store (docs/operations.md#restart-recovery): opened before any device, so a bad
  // file fails the start-up; what it holds is re-created below, before the server serves.
  std::unique_ptr<state::Store> store;
  state::Snapshot recovered_state;
  if (!config.state_file.empty()) {
    auto opened = state::Store::Open(config.state_file);
    absl::StatusOr<state::Snapshot> loaded = opened.ok() ? (*opened)->Load() : opened.status();
    if (!loaded.ok()) {
      RDMAD_LOG_ERROR("%s", std::string(loaded.status().message()).c_str());
      return 1;
    }
    store = std::move(opened).value();
    recovered_state = std::move(loaded).value();
  }

  RaiseMemlockLimit();
  auto fabric = verbs::VerbsFabric::Open();
  if (!fabric.ok()) {
    RDMAD_LOG_ERROR("%s", std::string(fabric.status().message()).c_str());
    return 1;
  }
  LogDevices(**fabric);
  Registry::Options options;
  options.mw_bounds_region = config.mw_bounds_region == "always" ? MwBoundsRegion::kAlways
                             : config.mw_bounds_region == "never" ? MwBoundsRegion::kNever
                                                                  : MwBoundsRegion::kAuto;
  LogBoundsRegions(**fabric, options.mw_bounds_region, config.mw_bounds_region);
  options.allowed_file_roots = config.allowed_file_roots;
  options.allow_disk_files = config.allow_disk_files;
  for (const auto& root : config.allowed_file_roots) {  // registrations there would be refused
    absl::StatusOr<int64_t> fs = FilesystemOf(root, "allowed_file_roots");
    if (fs.ok() && !IsMemoryFilesystem(*fs) && !config.allow_disk_files) {
      RDMAD_LOG_WARN("allowed_file_roots: %s is on %s, not a memory filesystem (tmpfs, hugetlbfs, ramfs): files "
                     "there are refused unless allow_disk_files is set", root.c_str(), FilesystemName(*fs).c_str());
    }
  }
  options.max_mr_bytes = config.max_mr_bytes;
  options.limits = {config.limits.pds, config.limits.mrs, config.limits.mws, config.limits.qps};
  options.workers = config.pin_workers;
  // What the kernel will let rdmad pin (its RLIMIT_MEMLOCK, unless it has CAP_IPC_LOCK): registrations past
  // it are refused up front with the limit named (docs/operations.md).
  options.memlock = Memlock::OfThisProcess();
  options.prefault_threads = PrefaultThreads();
  RDMAD_LOG_INFO("pinned memory limit (RLIMIT_MEMLOCK%s): %s",
                 options.memlock.limit() == Memlock::kUnlimited ? " or CAP_IPC_LOCK" : "",
                 options.memlock.Describe().c_str());
  options.state = store.get();
  fabric::Fabric* fab = fabric->get();
  auto registry = std::make_unique<Registry>(std::move(fabric).value(), options);
  // A recovered file is mapped with its registering caller's rights as they are now: its tenant's current
  // file roots (and the tenant must still exist).
  auto rights_now = [&config](const std::string& tenant, const FileAccess& recorded) {
    const TenantConfig* found = nullptr;
    for (const auto& t : config.tenants) found = t.name == tenant ? &t : found;
    return RightsAtRecovery(recorded, tenant, found ? &found->file_roots : nullptr, "source.file.path");
  };
  absl::StatusOr<Registry::Recovered> recovered = registry->Recover(recovered_state, rights_now);
  if (!recovered.ok()) {
    RDMAD_LOG_ERROR("recovery: %s", std::string(recovered.status().message()).c_str());
    return 1;
  }

  cm::CmManager::Options cm_options;
  cm_options.workers = config.cm_workers;
  cm_options.state = store.get();
  cm_options.events.watcher_capacity = static_cast<size_t>(config.watch_buffer);
  cm_options.max_channels = config.limits.channels;
  cm_options.max_cm_ids = config.limits.cm_ids;
  cm_options.max_connections = config.limits.connections;
  for (const auto& a : config.rdma_listen) {
    fabric::SockAddr addr;
    if (absl::Status s = SplitHostPort(a, "rdma_listen", &addr.host, &addr.port); !s.ok()) return 2;
    cm_options.listen.push_back(addr);
  }
  cm::TokenStore::Options token_options;
  token_options.state = store.get();
  token_options.max_outstanding = static_cast<size_t>(config.limits.tokens);
  cm::TokenStore tokens(token_options);
  auto cm = std::make_unique<cm::CmManager>(fab->cm(), registry.get(), &tokens, cm_options);
  cm->set_data_plane_observer(&rdmad_metrics);
  if (absl::Status s = cm->Start(); !s.ok()) {
    RDMAD_LOG_ERROR("%s", std::string(s.message()).c_str());
    return 1;
  }

  grants::GrantManager::Options grant_options;
  grant_options.max_ttl = absl::Seconds(config.max_grant_ttl_s);
  grant_options.quarantine = absl::Milliseconds(config.grant_quarantine_ms);
  grant_options.pool_size = static_cast<size_t>(config.grant_window_pool);
  grant_options.watch_buffer = static_cast<size_t>(config.watch_buffer);
  grant_options.max_grants = config.limits.grants;  // rdmad-wide, every caller's
  grant_options.state = store.get();
  auto grants = std::make_unique<grants::GrantManager>(registry.get(), cm.get(), &tokens, grant_options);
  grants->Recover(recovered_state.grants);  // live before the restart: ended, END_RESTARTED

  // The audit trail (docs/security.md#audit-trail): mutating RPCs, data-plane accepts, rejects and grant ends.
  std::unique_ptr<audit::AuditLog> audit;
  if (!config.audit.empty()) {
    audit::AuditLog::Options audit_options;
    audit_options.watcher_capacity = static_cast<size_t>(config.watch_buffer);
    auto opened = audit::AuditLog::Open(config.audit, audit_options);
    if (!opened.ok()) {
      RDMAD_LOG_ERROR("audit: %s", std::string(opened.status().message()).c_str());
      return 1;
    }
    audit = std::move(opened).value();
    grants->set_audit(audit.get());
  }
  // The data-plane listener's rejects, which any peer can drive at line rate, reach the audit trail and the
  // log counted per peer address and reason (the first of each per interval at once, the rest in one
  // summary at its end); the metrics count every one.
  audit::RejectLimiter rejects(audit.get(), audit::RejectLimiter::Options());
  cm->set_audit(&rejects);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  listeners->AddTcpPorts(&builder);  // mutual TLS, or plaintext under insecure_tcp; unix sockets are ours
  // Who may see and use what (docs/security.md): the policy maps each caller to a tenant and a role.
  auth::Policy policy(config);
  tenancy::Gate gate(&policy, {registry.get(), cm.get(), grants.get(), &tokens, config.limits.watch_streams});
  for (const auto& [pd, tenant] : recovered->owners) {
    if (!tenant.empty()) gate.OwnPd(pd, tenant);  // restored PDs stay their tenant's
  }
  cm->set_admit_connection([&gate](const cm::Claims& claims) { return gate.AdmitConnection(claims.pd); });
  cm->set_cm_id_gone([&gate](const std::string& cm_id) { gate.ForgetCmId(cm_id); });
  // On the normal path cm.reset() below comes before the gate goes; on an early return the gate goes first,
  // so the CM manager must not call into it afterwards.
  absl::Cleanup unhook_gate = [&cm] {
    if (cm != nullptr) cm->set_cm_id_gone(nullptr);
  };
  // A grant's bounds region pins pages of its PD's tenant: its pinned_bytes quota, held until the bind commits.
  grants->set_admit_pinned([&gate](const std::string& pd, uint64_t bytes) -> absl::StatusOr<std::shared_ptr<void>> {
    auth::Caller owner;
    owner.tenant = gate.TenantOfPd(pd);
    if (owner.tenant.empty()) return std::shared_ptr<void>();
    absl::StatusOr<tenancy::Gate::Reservation> r = gate.Reserve(owner, {{tenancy::Quota::kPinnedBytes, bytes}});
    if (!r.ok()) return r.status();
    return std::shared_ptr<void>(std::make_shared<tenancy::Gate::Reservation>(std::move(r).value()));
  });
  Env env;
  env.registry = registry.get();
  env.cm = cm.get();
  env.grants = grants.get();
  env.gate = &gate;
  env.identify = [&peers](const grpc::ServerContextBase& ctx) { return peers.Identify(ctx); };
  // The metrics (docs/operations.md#metrics): counted from here on, served over plain HTTP if metrics_listen.
  rdmad_metrics.WatchEvents(cm.get(), grants.get());
  rdmad_metrics.SetSources({registry.get(), cm.get(), grants.get(), &tokens, &gate, fab});
  env.observe_rpc = [m = &rdmad_metrics](const std::string& method, absl::StatusCode code, absl::Duration d) {
    m->ObserveRpc(method, code, d);
  };
  std::unique_ptr<metrics::HttpEndpoint> metrics_http;
  if (!config.metrics_listen.empty()) {
    std::string host;
    uint16_t port = 0;
    if (absl::Status s = SplitHostPort(config.metrics_listen, "metrics_listen", &host, &port); !s.ok()) return 2;
    auto started = metrics::HttpEndpoint::Start(host, port, [m = &rdmad_metrics] { return m->Render(); });
    if (!started.ok()) {
      RDMAD_LOG_ERROR("%s", std::string(started.status().message()).c_str());
      return 1;
    }
    metrics_http = std::move(started).value();
  }
  if (audit) {
    env.audit = [log = audit.get()](const auth::Caller& caller, const std::string& method,
                                    const std::string& resource, const absl::Status& status) {
      log->RecordCall(caller, method, resource, status);
    };
  }
  auto services = MakeServices(&env);
  for (auto& s : MakeCmServices(&env)) services.push_back(std::move(s));
  for (auto& s : MakeGrantServices(&env)) services.push_back(std::move(s));
  auto require_admin = [&gate, &env](const grpc::ServerContextBase& ctx) -> absl::Status {
    absl::StatusOr<auth::Caller> caller = gate.Admit(env.identify(ctx));
    if (!caller.ok()) return caller.status();
    if (!caller->admin) {
      return absl::PermissionDeniedError(absl::StrCat("the audit trail is for admins; ", caller->principal,
                                                      " is in tenant ", caller->tenant));
    }
    return absl::OkStatus();
  };
  // WatchAudit streams count against rdmad's limits.watch_streams like every other watch.
  OpenWatchSlot open_watch = [&gate](const grpc::ServerContextBase&) -> absl::StatusOr<std::shared_ptr<void>> {
    auth::Caller admin;  // WatchAudit is for admins only (require_admin): the rdmad-wide limit applies
    admin.admin = true;
    absl::StatusOr<tenancy::Gate::WatchSlot> slot = gate.OpenWatch(admin);
    if (!slot.ok()) return slot.status();
    return std::shared_ptr<void>(std::make_shared<tenancy::Gate::WatchSlot>(std::move(slot).value()));
  };
  for (auto& s : MakeAuditServices(audit.get(), require_admin, open_watch)) services.push_back(std::move(s));
  for (auto& s : services) builder.RegisterService(s.get());
  InFlightCalls in_flight;  // the drain waits for these (server/rpc/in_flight.h)
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(in_flight.Factory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) {
    RDMAD_LOG_ERROR("cannot listen on %s", absl::StrJoin(config.listen, ", ").c_str());
    return 1;
  }
  if (absl::Status s = listeners->Start(server.get()); !s.ok()) {
    RDMAD_LOG_ERROR("%s", std::string(s.message()).c_str());
    return 1;
  }
  std::string ports;
  for (int port : listeners->tcp_ports()) ports += (ports.empty() ? " (TCP port " : ", ") + std::to_string(port);
  RDMAD_LOG_INFO("serving rdmad.v1 on %s%s", absl::StrJoin(config.listen, ", ").c_str(),
                 ports.empty() ? "" : (ports + ")").c_str());

  int sig = 0;
  for (;;) {
    sigwait(&signals, &sig);
    if (sig != SIGHUP) break;
    // SIGHUP: re-read the TLS files; if they fail their checks the certificates in use stay.
    absl::StatusOr<std::string> reloaded = listeners->Reload();
    if (reloaded.ok()) {
      RDMAD_LOG_INFO("SIGHUP: TLS: %s", reloaded->c_str());
    } else {
      RDMAD_LOG_ERROR("SIGHUP: TLS not reloaded, the certificates in use stay: %s",
                      std::string(reloaded.status().message()).c_str());
    }
    // And the audit log is opened again (logrotate moved it away).
    if (audit) {
      absl::Status s = audit->Reopen();
      if (!s.ok()) RDMAD_LOG_ERROR("SIGHUP: audit log not reopened: %s", std::string(s.message()).c_str());
    }
  }
  // The drain (docs/operations.md#drain-and-shutdown), within shutdown_deadline_s. A second SIGTERM/SIGINT,
  // or the deadline, forces the exit (status 1): the kernel then releases every verbs object of the process.
  const absl::Time deadline = absl::Now() + absl::Seconds(config.shutdown_deadline_s);
  RDMAD_LOG_INFO("%s: draining (deadline %llds; a second SIGTERM forces the exit)", strsignal(sig),
                 static_cast<long long>(config.shutdown_deadline_s));
  Watchdog watchdog(signals, deadline);
  watchdog.Stage("refusing new calls");
  gate.StartDraining();  // new calls: UNAVAILABLE; those in flight finish
  server->GetHealthCheckService()->SetServingStatus(false);  // probes and load balancers look elsewhere
  listeners->StopAccepting();  // no new unix connections; the sockets are removed
  // Grants' goodbyes get half the time at most: a client that does not take its ENDED (no receive posted)
  // holds its SEND up for rdma_cm's RNR retries; the release in order gets the rest.
  watchdog.Stage("ending grants (SHUTDOWN)");
  const absl::Time goodbyes = absl::Now() + (deadline - absl::Now()) / 2;
  if (size_t left = grants->Drain(goodbyes); left != 0) {
    RDMAD_LOG_WARN("drain: %zu grant end(s) or goodbye(s) still under way after half the deadline; releasing anyway",
                   left);
  }
  watchdog.Stage("closing streams and connections");
  if (audit) audit->Shutdown();  // WatchAudit streams end
  grants->Shutdown();  // watchers end; any grant still live ends (SHUTDOWN) with the resources below
  cm->Quiesce();  // event streams end, connects still waiting fail: no RPC is left waiting on rdmad
  watchdog.Stage("finishing calls in flight");
  // Then at once: Shutdown would otherwise also wait for each idle client to close its connection.
  if (size_t left = in_flight.AwaitNone(deadline); left != 0) {
    RDMAD_LOG_WARN("drain: %zu call(s) still in flight at the deadline are cancelled", left);
  }
  server->Shutdown(std::chrono::system_clock::now());
  server->Wait();
  server.reset();
  services.clear();
  metrics_http.reset();  // no scrape is left reading what goes below
  watchdog.Stage("releasing resources");
  // The CM manager before the grant manager: until its dispatchers have stopped, a connection's event can
  // still call into the grant manager (OnConnected, OnGone), which must be alive then. Then the grants'
  // thread stops; the windows it holds are the registry's.
  cm.reset();        // dispatchers stop; CM ids (their QPs first), then event channels
  grants.reset();
  registry.reset();  // windows, regions, QPs, PDs, devices
  listeners.reset();  // the TLS copies
  watchdog.Stop();
  RDMAD_LOG_INFO("stopped; every resource released");
  return 0;
}

}  // namespace
}  // namespace rdmad

int main(int argc, char** argv) { return rdmad::Run(argc, argv); }
