// rdmad: owns this host's RDMA resources and manages them for others through the rdmad.v1 gRPC API.
//
// Threads: main() parses flags and config, opens the devices, builds the registry and the gRPC server,
// then waits in sigwait() for SIGTERM/SIGINT (blocked in every thread, so only main sees them). gRPC's
// threads serve RPCs against the registry, the CM manager and the grant manager; the dispatchers (one per device, one per
// event channel) and the pin workers are theirs (docs/architecture.md). On a signal main quiesces rdma_cm
// (watch streams end, waiting connects fail), shuts the server down (in-flight RPCs finish, new ones are
// refused), destroys the CM manager (CM ids, their QPs first, then channels), then the registry (windows,
// regions, QPs, PDs, devices, in that order) and removes its unix socket: nothing is left behind.
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
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

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "server/common/log.h"
#include "server/cm/manager.h"
#include "server/cm/token.h"
#include "server/config.h"
#include "server/fabric/cm.h"
#include "server/grants/manager.h"
#include "server/registry/registry.h"
#include "server/auth/policy.h"
#include "server/tenancy/gate.h"
#include "server/rpc/services.h"
#include "server/verbs/device.h"

namespace rdmad {
namespace {

std::string UnixPath(const std::string& address) {
  if (absl::StartsWith(address, "unix://")) return address.substr(7);
  if (absl::StartsWith(address, "unix:")) return address.substr(5);
  return "";
}

// Prepares a unix socket path: creates its directory (0755) and removes a stale socket left by a crashed
// rdmad. A live socket (something accepts connections on it) is an error: two daemons must not share it.
bool PrepareUnixSocket(const std::string& path) {
  std::string dir = path.substr(0, path.find_last_of('/'));
  if (!dir.empty() && mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    RDMAD_LOG_ERROR("cannot create %s: %s", dir.c_str(), std::strerror(errno));
    return false;
  }
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return true;
  if (!S_ISSOCK(st.st_mode)) {
    RDMAD_LOG_ERROR("%s exists and is not a socket; refusing to remove it", path.c_str());
    return false;
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path.c_str());
  bool live = fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  if (fd >= 0) close(fd);
  if (live) {
    RDMAD_LOG_ERROR("%s is in use by a running rdmad", path.c_str());
    return false;
  }
  unlink(path.c_str());
  return true;
}

// The transport's identity from the peer string alone: unix peers of unknown uid, TCP unauthenticated.
auth::PeerIdentity IdentifyByPeerString(const grpc::ServerContextBase& ctx) {
  auth::PeerIdentity p;
  p.address = ctx.peer();
  p.transport = absl::StartsWith(p.address, "unix:") ? "unix" : "insecure_tcp";
  return p;
}

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

  // Only main receives SIGTERM/SIGINT: block them before any thread is created.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  RaiseMemlockLimit();
  auto fabric = verbs::VerbsFabric::Open();
  if (!fabric.ok()) {
    RDMAD_LOG_ERROR("%s", std::string(fabric.status().message()).c_str());
    return 1;
  }
  LogDevices(**fabric);
  Registry::Options options;
  options.allowed_file_roots = config.allowed_file_roots;
  options.max_mr_bytes = config.max_mr_bytes;
  options.workers = config.pin_workers;
  fabric::Fabric* fab = fabric->get();
  auto registry = std::make_unique<Registry>(std::move(fabric).value(), options);

  cm::CmManager::Options cm_options;
  cm_options.workers = config.cm_workers;
  cm_options.events.watcher_capacity = static_cast<size_t>(config.watch_buffer);
  for (const auto& a : config.rdma_listen) {
    fabric::SockAddr addr;
    if (absl::Status s = SplitHostPort(a, "rdma_listen", &addr.host, &addr.port); !s.ok()) return 2;
    cm_options.listen.push_back(addr);
  }
  cm::TokenStore tokens;
  auto cm = std::make_unique<cm::CmManager>(fab->cm(), registry.get(), &tokens, cm_options);
  if (absl::Status s = cm->Start(); !s.ok()) {
    RDMAD_LOG_ERROR("%s", std::string(s.message()).c_str());
    return 1;
  }

  grants::GrantManager::Options grant_options;
  grant_options.max_ttl = absl::Seconds(config.max_grant_ttl_s);
  grant_options.quarantine = absl::Milliseconds(config.grant_quarantine_ms);
  grant_options.pool_size = static_cast<size_t>(config.grant_window_pool);
  grant_options.watch_buffer = static_cast<size_t>(config.watch_buffer);
  auto grants = std::make_unique<grants::GrantManager>(registry.get(), cm.get(), &tokens, grant_options);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  std::vector<std::string> sockets;
  for (const auto& address : config.listen) {
    std::string path = UnixPath(address);
    if (!path.empty()) {
      if (!PrepareUnixSocket(path)) return 1;
      sockets.push_back(path);
    } else {
      RDMAD_LOG_WARN("listening on TCP %s without authentication: anyone who reaches it controls this host's "
                     "RDMA resources", address.c_str());
    }
    builder.AddListeningPort(address, grpc::InsecureServerCredentials());
  }
  // Who may see and use what (docs/security.md): the policy maps each caller to a tenant and a role.
  auth::Policy policy(config);
  tenancy::Gate gate(&policy, {registry.get(), cm.get(), grants.get(), &tokens});
  Env env;
  env.registry = registry.get();
  env.cm = cm.get();
  env.grants = grants.get();
  env.gate = &gate;
  env.identify = IdentifyByPeerString;
  auto services = MakeServices(&env);
  for (auto& s : MakeCmServices(&env)) services.push_back(std::move(s));
  for (auto& s : MakeGrantServices(&env)) services.push_back(std::move(s));
  for (auto& s : services) builder.RegisterService(s.get());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) {
    RDMAD_LOG_ERROR("cannot listen on %s", absl::StrJoin(config.listen, ", ").c_str());
    return 1;
  }
  for (const auto& path : sockets) chmod(path.c_str(), 0660);  // owner and group only
  RDMAD_LOG_INFO("serving rdmad.v1 on %s", absl::StrJoin(config.listen, ", ").c_str());

  int sig = 0;
  sigwait(&signals, &sig);
  RDMAD_LOG_INFO("%s: shutting down", strsignal(sig));
  grants->Shutdown();  // grants end (SHUTDOWN), their watchers too; keys die with the resources below
  cm->Quiesce();  // event streams end, connects still waiting fail: no RPC is left waiting on rdmad
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  server->Wait();
  server.reset();
  services.clear();
  grants.reset();    // its thread stops; the windows it holds are the registry's
  cm.reset();        // dispatchers stop; CM ids (their QPs first), then event channels
  registry.reset();  // windows, regions, QPs, PDs, devices
  for (const auto& path : sockets) unlink(path.c_str());
  RDMAD_LOG_INFO("stopped; every resource released");
  return 0;
}

}  // namespace
}  // namespace rdmad

int main(int argc, char** argv) { return rdmad::Run(argc, argv); }
