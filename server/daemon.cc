// Daemon (daemon.h): the layers of rdmad built in order from a Config, served, and released in order.
//
// Threads: see daemon.h. What the layers own and run is theirs (docs/dev/architecture.md#threads-locks-and-who-owns-what).
#include "server/daemon.h"

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "server/audit/audit_log.h"
#include "server/audit/reject_summary.h"
#include "server/auth/listeners.h"
#include "server/auth/peer.h"
#include "server/auth/descriptor_socket.h"
#include "server/auth/policy.h"
#include "server/cm/manager.h"
#include "server/cm/token.h"
#include "server/common/log.h"
#include "server/dataplane/listener.h"
#include "server/grants/manager.h"
#include "server/memory/prefault.h"
#include "server/metrics/http.h"
#include "server/metrics/rdmad_metrics.h"
#include "server/registry/registry.h"
#include "server/rpc/audit_service.h"
#include "server/rpc/in_flight.h"
#include "server/rpc/services.h"
#include "server/state/journal.h"
#include "server/state/store.h"
#include "server/tenancy/gate.h"

namespace rdmad {
namespace {

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

}  // namespace

// Declared in the order main declared them as locals: destroyed in reverse, so that on a failed start
// everything goes as it did there. Drain releases them explicitly, in the order the layers need.
struct Daemon::Impl {
  Config config;
  auth::PeerDirectory peers;  // who is calling: the TLS principal, or the unix peer's SO_PEERCRED
  std::unique_ptr<auth::Listeners> listeners;
  // Before the CM and grant managers, gone after them: their event hubs call into it (rdmad_metrics.h).
  metrics::RdmadMetrics rdmad_metrics;
  std::unique_ptr<state::Store> store;
  // The one ordered writer of the store's records and the audit trail's lines (state/journal.h): after the
  // store (which it writes, and which must outlive it), before everything that submits to it.
  std::unique_ptr<state::Journal> journal;
  // Descriptors passed over the descriptor socket, waiting for their RegisterMr: before the registry, which
  // claims from it.
  std::unique_ptr<DescriptorStore> descriptors;
  std::unique_ptr<Registry> registry;
  std::unique_ptr<cm::TokenStore> tokens;
  // Before the CM manager, gone after it: its dispatchers call into the listener.
  std::unique_ptr<dataplane::Listener> data_plane;
  std::unique_ptr<cm::CmManager> cm;
  std::unique_ptr<grants::GrantManager> grants;
  std::unique_ptr<audit::AuditLog> audit;
  std::unique_ptr<audit::RejectLimiter> rejects;
  std::unique_ptr<auth::Policy> policy;
  // After the policy and the store it uses, so gone before them.
  std::unique_ptr<auth::DescriptorSocket> descriptor_socket;
  std::unique_ptr<tenancy::Gate> gate;
  Env env;
  std::unique_ptr<metrics::HttpEndpoint> metrics_http;
  std::vector<std::unique_ptr<grpc::Service>> services;
  InFlightCalls in_flight;  // the drain waits for these (server/rpc/in_flight.h)
  std::unique_ptr<grpc::Server> server;
  bool drained = false;

  ~Impl() {
    // On a failed start the gate goes before the CM manager: the manager must not call into it afterwards.
    if (cm != nullptr) cm->set_cm_id_gone(nullptr);
  }
};

Daemon::Daemon(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Daemon::~Daemon() {
  if (impl_ != nullptr && !impl_->drained) Drain(absl::Now() + absl::Seconds(impl_->config.shutdown_deadline_s));
}

const Config& Daemon::config() const { return impl_->config; }

Daemon::Layers Daemon::layers_for_testing() const {
  if (impl_->drained) return Layers();
  return Layers{impl_->registry.get(), impl_->tokens.get(), impl_->policy.get(), impl_->gate.get(),
                impl_->audit.get(), impl_->grants.get()};
}

std::vector<int> Daemon::tcp_ports() const {
  return impl_->listeners != nullptr ? impl_->listeners->tcp_ports() : std::vector<int>();
}

absl::StatusOr<std::string> Daemon::ReloadTls() {
  if (impl_->listeners == nullptr) return absl::FailedPreconditionError("rdmad has stopped");
  return impl_->listeners->Reload();
}

absl::Status Daemon::ReopenAudit() { return impl_->audit != nullptr ? impl_->audit->Reopen() : absl::OkStatus(); }

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(Options options, bool* config_error) {
  bool ignored = false;
  bool& bad_config = config_error != nullptr ? *config_error : ignored;
  bad_config = false;
  auto impl = std::make_unique<Impl>();
  Impl* i = impl.get();
  i->config = std::move(options.config);
  const Config& config = i->config;
  if (!options.open_fabric) return absl::InvalidArgumentError("Daemon::Options::open_fabric is required");

  // The listeners first, so that a bad TLS file or socket fails before any device is opened: TLS checked and
  // copied, unix sockets bound with their mode and group (listening; accepted once the server runs).
  auto created = auth::Listeners::Create(config, &i->peers, {});
  if (!created.ok()) {
    const absl::StatusCode code = created.status().code();  // a bad file or group: the config
    bad_config = code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kNotFound;
    return created.status();
  }
  i->listeners = std::move(created).value();
  // Who may see and use what (docs/security.md): the policy maps each caller to a tenant and a role.
  i->policy = std::make_unique<auth::Policy>(config);
  // The descriptor socket beside the unix listener (docs/PROTOCOL.md#memory-shared-by-file-descriptor): bound
  // here with the listeners, serving once the server does.
  DescriptorStore::Options descriptor_options;
  descriptor_options.ttl = absl::Seconds(config.descriptor_ttl_s);
  descriptor_options.per_principal = config.max_descriptors_per_principal;
  descriptor_options.total = config.limits.descriptors;
  i->descriptors = std::make_unique<DescriptorStore>(descriptor_options);
  if (const std::string path = DescriptorSocketPath(config); !path.empty()) {
    auto socket = auth::DescriptorSocket::Create(config, path, i->policy.get(), i->descriptors.get());
    if (!socket.ok()) {
      bad_config = socket.status().code() == absl::StatusCode::kInvalidArgument;
      return socket.status();
    }
    i->descriptor_socket = std::move(socket).value();
  }

  // The crash-safe state store (docs/operations.md#restart-recovery): opened before any device, so a bad
  // file fails the start-up; what it holds is re-created below, before the server serves.
  state::Snapshot recovered_state;
  if (!config.state_file.empty()) {
    auto opened = state::Store::Open(config.state_file);
    absl::StatusOr<state::Snapshot> loaded = opened.ok() ? (*opened)->Load() : opened.status();
    if (!loaded.ok()) return loaded.status();
    i->store = std::move(opened).value();
    recovered_state = std::move(loaded).value();
  }
  // Its writer thread ("state-writer") from here on: the store's mutations (the store attaches it) and the
  // audit lines, group-committed in submission order. Also without a store, for the audit trail.
  i->journal = std::make_unique<state::Journal>(i->store.get());

  auto fabric = options.open_fabric();
  if (!fabric.ok()) return fabric.status();
  LogDevices(**fabric);
  Registry::Options registry_options;
  registry_options.mw_bounds_region = config.mw_bounds_region == "always" ? MwBoundsRegion::kAlways
                                      : config.mw_bounds_region == "never" ? MwBoundsRegion::kNever
                                                                           : MwBoundsRegion::kAuto;
  LogBoundsRegions(**fabric, registry_options.mw_bounds_region, config.mw_bounds_region);
  registry_options.allowed_file_roots = config.allowed_file_roots;
  registry_options.allow_disk_files = config.allow_disk_files;
  registry_options.descriptors = i->descriptor_socket != nullptr ? i->descriptors.get() : nullptr;
  registry_options.completion_poll = absl::Microseconds(config.completion_poll_us);
  for (const auto& root : config.allowed_file_roots) {  // registrations there would be refused
    absl::StatusOr<int64_t> fs = FilesystemOf(root, "allowed_file_roots");
    if (fs.ok() && !IsMemoryFilesystem(*fs) && !config.allow_disk_files) {
      RDMAD_LOG_WARN("allowed_file_roots: %s is on %s, not a memory filesystem (tmpfs, hugetlbfs, ramfs): files "
                     "there are refused unless allow_disk_files is set", root.c_str(), FilesystemName(*fs).c_str());
    }
  }
  registry_options.max_mr_bytes = config.max_mr_bytes;
  registry_options.limits = {config.limits.pds, config.limits.mrs, config.limits.mws, config.limits.qps};
  registry_options.workers = config.pin_workers;
  // What the kernel will let rdmad pin (its RLIMIT_MEMLOCK, unless it has CAP_IPC_LOCK): registrations past
  // it are refused up front with the limit named (docs/operations.md).
  registry_options.memlock = Memlock::OfThisProcess();
  registry_options.prefault_threads = PrefaultThreads();
  RDMAD_LOG_INFO("pinned memory limit (RLIMIT_MEMLOCK%s): %s",
                 registry_options.memlock.limit() == Memlock::kUnlimited ? " or CAP_IPC_LOCK" : "",
                 registry_options.memlock.Describe().c_str());
  registry_options.state = i->store.get();
  fabric::Fabric* fab = fabric->get();
  i->registry = std::make_unique<Registry>(std::move(fabric).value(), registry_options);
  // A recovered file is mapped with its registering caller's rights as they are now: its tenant's current
  // file roots (and the tenant must still exist).
  auto rights_now = [&config](const std::string& tenant, const FileAccess& recorded) {
    const TenantConfig* found = nullptr;
    for (const auto& t : config.tenants) found = t.name == tenant ? &t : found;
    return RightsAtRecovery(recorded, tenant, found ? &found->file_roots : nullptr, "source.file.path");
  };
  absl::StatusOr<Registry::Recovered> recovered = i->registry->Recover(recovered_state, rights_now);
  if (!recovered.ok()) return WithContext(recovered.status(), "recovery");

  cm::CmManager::Options cm_options;
  cm_options.workers = config.cm_workers;
  cm_options.state = i->store.get();
  cm_options.events.watcher_capacity = static_cast<size_t>(config.watch_buffer);
  cm_options.max_channels = config.limits.channels;
  cm_options.max_cm_ids = config.limits.cm_ids;
  cm_options.max_connections = config.limits.connections;
  dataplane::Listener::Options data_plane_options;
  for (const auto& a : config.rdma_listen) {
    fabric::SockAddr addr;
    if (absl::Status s = SplitHostPort(a, "rdma_listen", &addr.host, &addr.port); !s.ok()) {
      bad_config = true;
      return s;
    }
    data_plane_options.listen.push_back(addr);
  }
  cm::TokenStore::Options token_options;
  token_options.state = i->store.get();
  token_options.max_outstanding = static_cast<size_t>(config.limits.tokens);
  i->tokens = std::make_unique<cm::TokenStore>(token_options);
  i->cm = std::make_unique<cm::CmManager>(fab->cm(), i->registry.get(), cm_options);
  RDMAD_RETURN_IF_ERROR(i->cm->Start());
  // The data-plane listener opens once everything it calls is wired (below, before the gRPC server starts).
  i->data_plane = std::make_unique<dataplane::Listener>(i->cm.get(), i->registry.get(), i->tokens.get(),
                                                          data_plane_options);
  i->data_plane->set_observer(&i->rdmad_metrics);

  grants::GrantManager::Options grant_options;
  grant_options.max_ttl = absl::Seconds(config.max_grant_ttl_s);
  grant_options.quarantine = absl::Milliseconds(config.grant_quarantine_ms);
  grant_options.key_kill_timeout = absl::Milliseconds(config.grant_key_kill_timeout_ms);
  grant_options.end_grace = absl::Milliseconds(config.grant_end_grace_ms);
  grant_options.pool_size = static_cast<size_t>(config.grant_window_pool);
  grant_options.max_scope = static_cast<v1::GrantScope>(config.grant_max_scope);
  grant_options.watch_buffer = static_cast<size_t>(config.watch_buffer);
  grant_options.max_grants = config.limits.grants;  // rdmad-wide, every caller's
  grant_options.state = i->store.get();
  if (options.clock) grant_options.clock = options.clock;
  i->grants = std::make_unique<grants::GrantManager>(i->registry.get(), i->cm.get(), i->data_plane.get(),
                                                     i->tokens.get(), grant_options);
  i->grants->Recover(recovered_state.grants);  // live before the restart: ended, END_RESTARTED

  // The audit trail (docs/security.md#audit-trail): mutating RPCs, data-plane accepts, rejects and grant ends.
  if (!config.audit.empty()) {
    audit::AuditLog::Options audit_options;
    audit_options.watcher_capacity = static_cast<size_t>(config.watch_buffer);
    audit_options.journal = i->journal.get();
    auto opened = audit::AuditLog::Open(config.audit, audit_options);
    if (!opened.ok()) return WithContext(opened.status(), "audit");
    i->audit = std::move(opened).value();
    i->grants->set_audit(i->audit.get());
  }
  // The data-plane listener's rejects, which any peer can drive at line rate, reach the audit trail and the
  // log counted per peer address and reason (the first of each per interval at once, the rest in one
  // summary at its end); the metrics count every one.
  i->rejects = std::make_unique<audit::RejectLimiter>(i->audit.get(), audit::RejectLimiter::Options());
  i->data_plane->set_audit(i->rejects.get());

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  i->listeners->AddTcpPorts(&builder);  // mutual TLS, or plaintext under insecure_tcp; unix sockets are ours
  i->gate = std::make_unique<tenancy::Gate>(
      i->policy.get(),
      tenancy::Gate::Deps{i->registry.get(), i->cm.get(), i->grants.get(), i->tokens.get(), config.limits.watch_streams});
  tenancy::Gate* gate = i->gate.get();
  i->data_plane->set_admit_connection([gate](const cm::Claims& claims) { return gate->AdmitConnection(claims.pd); });
  i->cm->set_cm_id_gone([gate](const std::string& cm_id) { gate->ForgetCmId(cm_id); });
  // A grant's bounds region pins pages of its PD's tenant: its pinned_bytes quota, held until the bind commits.
  i->grants->set_admit_pinned([gate](const std::string& pd, uint64_t bytes) -> absl::StatusOr<std::shared_ptr<void>> {
    auth::Caller owner;
    owner.tenant = gate->TenantOfPd(pd);
    if (owner.tenant.empty()) return std::shared_ptr<void>();
    absl::StatusOr<tenancy::Gate::Reservation> r = gate->Reserve(owner, {{tenancy::Quota::kPinnedBytes, bytes}});
    if (!r.ok()) return r.status();
    return std::shared_ptr<void>(std::make_shared<tenancy::Gate::Reservation>(std::move(r).value()));
  });
  RDMAD_RETURN_IF_ERROR(i->data_plane->Start());
  Env& env = i->env;
  env.registry = i->registry.get();
  env.cm = i->cm.get();
  env.data_plane = i->data_plane.get();
  env.grants = i->grants.get();
  env.gate = gate;
  env.identify = [peers = &i->peers, identify = std::move(options.identify)](const grpc::ServerContextBase& ctx) {
    auth::Peer peer = peers->Identify(ctx);
    return identify ? identify(ctx, std::move(peer)) : peer;
  };
  // The metrics (docs/operations.md#metrics): counted from here on, served over plain HTTP if metrics_listen.
  i->rdmad_metrics.WatchEvents(i->cm.get(), i->grants.get());
  i->rdmad_metrics.SetSources({i->registry.get(), i->cm.get(), i->grants.get(), i->tokens.get(), gate, fab,
                               [j = i->journal.get()] {
                                 const state::Journal::Counts c = j->counts();
                                 return metrics::RdmadMetrics::WriterCounts{c.commits, c.records, c.lines,
                                                                        c.commit_errors};
                               }});
  env.observe_rpc = [m = &i->rdmad_metrics](const std::string& method, absl::StatusCode code, absl::Duration d,
                                              int handoffs) { m->ObserveRpc(method, code, d, handoffs); };
  if (!config.metrics_listen.empty()) {
    std::string host;
    uint16_t port = 0;
    if (absl::Status s = SplitHostPort(config.metrics_listen, "metrics_listen", &host, &port); !s.ok()) {
      bad_config = true;
      return s;
    }
    auto started = metrics::HttpEndpoint::Start(host, port, [m = &i->rdmad_metrics] { return m->Render(); });
    if (!started.ok()) return started.status();
    i->metrics_http = std::move(started).value();
  }
  if (i->audit) {
    env.audit = [log = i->audit.get()](const auth::Caller& caller, const std::string& method,
                                       const std::string& resource, const absl::Status& status) {
      log->RecordCall(caller, method, resource, status);
    };
  }
  i->services = MakeServices(&env);
  for (auto& s : MakeCmServices(&env)) i->services.push_back(std::move(s));
  for (auto& s : MakeGrantServices(&env)) i->services.push_back(std::move(s));
  auto require_admin = [gate, &env](const grpc::ServerContextBase& ctx) -> absl::Status {
    absl::StatusOr<auth::Caller> caller = gate->Admit(env.identify(ctx));
    if (!caller.ok()) return caller.status();
    if (!caller->admin) {
      return absl::PermissionDeniedError(absl::StrCat("the audit trail is for admins only; ", caller->principal,
                                                      " is in tenant ", caller->tenant));
    }
    return absl::OkStatus();
  };
  // WatchAudit streams count against rdmad's limits.watch_streams like every other watch.
  OpenWatchSlot open_watch = [gate](const grpc::ServerContextBase&) -> absl::StatusOr<std::shared_ptr<void>> {
    auth::Caller admin;  // WatchAudit is for admins only (require_admin): the rdmad-wide limit applies
    admin.admin = true;
    absl::StatusOr<tenancy::Gate::WatchSlot> slot = gate->OpenWatch(admin);
    if (!slot.ok()) return slot.status();
    return std::shared_ptr<void>(std::make_shared<tenancy::Gate::WatchSlot>(std::move(slot).value()));
  };
  for (auto& s : MakeAuditServices(i->audit.get(), require_admin, open_watch)) i->services.push_back(std::move(s));
  for (auto& s : i->services) builder.RegisterService(s.get());
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(i->in_flight.Factory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  i->server = builder.BuildAndStart();
  if (!i->server) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", absl::StrJoin(config.listen, ", ")));
  }
  RDMAD_RETURN_IF_ERROR(i->listeners->Start(i->server.get()));
  if (i->descriptor_socket != nullptr) RDMAD_RETURN_IF_ERROR(i->descriptor_socket->Start());
  std::string ports;
  for (int port : i->listeners->tcp_ports()) ports += (ports.empty() ? " (TCP port " : ", ") + std::to_string(port);
  RDMAD_LOG_INFO("serving rdmad.v1 on %s%s", absl::StrJoin(config.listen, ", ").c_str(),
                 ports.empty() ? "" : (ports + ")").c_str());
  return std::unique_ptr<Daemon>(new Daemon(std::move(impl)));
}

void Daemon::Drain(absl::Time deadline, const std::function<void(const char*)>& stage) {
  Impl* i = impl_.get();
  if (i->drained) return;
  i->drained = true;
  auto step = [&stage](const char* name) {
    if (stage) stage(name);
  };
  step("refusing new calls");
  i->gate->StartDraining();  // new calls: UNAVAILABLE; those in flight finish
  i->server->GetHealthCheckService()->SetServingStatus(false);  // probes and load balancers look elsewhere
  i->listeners->StopAccepting();  // no new unix connections; the sockets are removed
  if (i->descriptor_socket != nullptr) i->descriptor_socket->Stop();  // no more descriptors
  // Grants' goodbyes get half the time at most: a client that does not take its ENDED (no receive posted)
  // holds its SEND up for rdma_cm's RNR retries; the release in order gets the rest.
  step("ending grants (SHUTDOWN)");
  const absl::Time goodbyes = absl::Now() + (deadline - absl::Now()) / 2;
  if (size_t left = i->grants->Drain(goodbyes); left != 0) {
    RDMAD_LOG_WARN("drain: %zu grant end(s) or goodbye(s) still under way after half the deadline; releasing anyway",
                   left);
  }
  step("closing streams and connections");
  if (i->audit) i->audit->Shutdown();  // WatchAudit streams end
  i->grants->Shutdown();  // watchers end; any grant still live ends (SHUTDOWN) with the resources below
  i->cm->Quiesce();  // event streams end, connects still waiting fail: no RPC is left waiting on rdmad
  step("finishing calls in flight");
  // Then at once: Shutdown would otherwise also wait for each idle client to close its connection.
  if (size_t left = i->in_flight.AwaitNone(deadline); left != 0) {
    RDMAD_LOG_WARN("drain: %zu call(s) still in flight at the deadline are cancelled", left);
  }
  i->server->Shutdown(std::chrono::system_clock::now());
  i->server->Wait();
  i->server.reset();
  i->services.clear();
  i->metrics_http.reset();  // no scrape is left reading what goes below
  step("releasing resources");
  // The CM manager before the grant manager: until its dispatchers have stopped, a connection's event can
  // still call into the grant manager (OnConnected, OnGone), which must be alive then. Then the grants'
  // thread stops; the windows it holds are the registry's. The data-plane listener after the grant manager,
  // which tells it on the way out that it takes no more connection reports.
  i->cm.reset();  // dispatchers stop; CM ids (their QPs first), then event channels
  i->grants.reset();
  i->data_plane.reset();
  i->registry.reset();   // windows, regions, QPs, PDs, devices
  // Every record queued (the last removals, grant ends, audit lines) is written, then the writer stops; a
  // record made later (the audit log's last reject summary) is written on its own thread. The store closes
  // with the Impl, after the journal.
  i->journal->Close();
  i->listeners.reset();  // the TLS copies
  RDMAD_LOG_INFO("stopped; every resource released");
}

}  // namespace rdmad
