// DaemonFixture: a whole rdmad in-process (server/daemon.h's Daemon::Start) for the RPC unit tests, over the
// fake fabric and the fake rdma_cm (tests/unit/fake_fabric.h, fake_cm.h), serving on a unix socket in a
// TempDir, its grant leases on a FakeClock the test advances. The test adjusts the Config (tenants, admins,
// limits, quotas, audit log, ...) and the fake devices before Start, then calls through the socket:
//
//   test::DaemonFixture rdmad;
//   rdmad.config().limits.grants = 3;
//   rdmad.config().audit = rdmad.dir().Sub("audit.log");
//   ASSERT_OK(rdmad.Start());
//   client::Client root = rdmad.Client();             // this process over the socket: uid 0, an admin
//   auto pds = v1::ProtectionDomains::NewStub(rdmad.Channel());
//   pds->CreatePd(test::DaemonFixture::As("spiffe://t/a").get(), req, &pd);  // that call as a tenant's principal
//   client::Client a = rdmad.ClientAs("spiffe://t/a");  // every call of it as that principal
//   rdmad.clock().Advance(absl::Seconds(5));
//
// Callers: a call without the fixture's metadata is identified by its transport, as rdmad does it (the unix
// peer's SO_PEERCRED: this process, root). A call that names a principal (As, ChannelAs, ClientAs) is taken
// to be an authenticated TLS caller of that principal, from the connection `connection` names (default
// "inproc"): one process holds no certificate or uid per principal, so the daemon's test-only
// Options::identify reads the names from the metadata. The Config's admins, tenants and quotas then apply as
// to any caller.
//
// The Config is rdmad's defaults but for listen (the socket), rdma_listen and shutdown_deadline_s (10 s): so
// the audit log is stdout unless the test names a file (or "" for none).
//
// The fake CM and the ledger outlive the daemon; the destructor (or Stop) drains it (shutdown_deadline_s).
//
// Threads: the test's thread starts, stops and configures it; the daemon's threads serve.
#ifndef RDMAD_TESTS_SUPPORT_DAEMON_FIXTURE_H_
#define RDMAD_TESTS_SUPPORT_DAEMON_FIXTURE_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/client_interceptor.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/client.h"
#include "server/auth/peer.h"
#include "server/config.h"
#include "server/daemon.h"
#include "server/fabric/fabric.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/fake_cm.h"
#include "tests/unit/fake_fabric.h"

namespace rdmad::test {

// A clock that moves only when told: the grant manager's (Daemon::Options::clock). Starts at 2033-05-18.
// Threads: Now from any thread (the grant manager's); Advance and Set from the test's.
class FakeClock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(2'000'000'000)) : ns_(absl::ToUnixNanos(start)) {}
  absl::Time Now() const { return absl::FromUnixNanos(ns_.load()); }
  void Advance(absl::Duration d) { ns_.fetch_add(absl::ToInt64Nanoseconds(d)); }
  void Set(absl::Time t) { ns_.store(absl::ToUnixNanos(t)); }
  // For Daemon::Options::clock; the clock must outlive what holds it.
  std::function<absl::Time()> Function() const {
    return [this] { return Now(); };
  }

 private:
  std::atomic<int64_t> ns_;
};

class DaemonFixture {
 public:
  // The data-plane listener's address, routed to the first fake device (rdma_listen is kRdmaAddress:7471).
  static constexpr char kRdmaAddress[] = "10.0.2.15";
  // The metadata a call names its caller with (Options::identify below).
  static constexpr char kPrincipalHeader[] = "x-test-principal";
  static constexpr char kConnectionHeader[] = "x-test-connection";

  DaemonFixture() {
    config_.listen = {"unix:" + socket_};
    config_.rdma_listen = {absl::StrCat(kRdmaAddress, ":7471")};
    config_.shutdown_deadline_s = 10;
  }
  ~DaemonFixture() { Stop(); }
  DaemonFixture(const DaemonFixture&) = delete;
  DaemonFixture& operator=(const DaemonFixture&) = delete;

  // What Start starts with; change it before Start.
  Config& config() { return config_; }
  // The fake devices (default: rxe0, which does not enforce window bounds, as rxe) and the routes of the
  // fake rdma_cm (host address -> device name).
  std::vector<fabric::DeviceInfo>& devices() { return devices_; }
  std::map<std::string, std::string>& routes() { return routes_; }

  // The options Start uses: the config, the fake fabric, the fake clock, the identity from metadata. A test
  // of the start-up itself may change them and call Daemon::Start on its own.
  Daemon::Options Options() {
    Daemon::Options o;
    o.config = config_;
    o.open_fabric = [this]() -> absl::StatusOr<std::unique_ptr<fabric::Fabric>> {
      auto fabric = std::make_unique<fake::FakeFabric>(devices_, ledger_);
      cm_ = std::make_unique<fake::FakeCm>(fabric->devices(), routes_);
      fabric->set_cm(cm_.get());
      device_ = fabric->devices().empty() ? nullptr : fabric->devices()[0];
      return std::unique_ptr<fabric::Fabric>(std::move(fabric));
    };
    o.clock = clock_.Function();
    o.identify = &IdentifyFromMetadata;
    return o;
  }

  // Starts rdmad with Options(); it serves on socket() when this returns OK.
  absl::Status Start() {
    if (daemon_ != nullptr) return absl::FailedPreconditionError("the daemon is already started");
    absl::StatusOr<std::unique_ptr<Daemon>> d = Daemon::Start(Options());
    if (!d.ok()) return d.status();
    daemon_ = std::move(d).value();
    return absl::OkStatus();
  }
  // Drains and destroys the daemon (no-op if not started); the fakes stay until the fixture goes.
  void Stop() {
    channels_.clear();
    daemon_.reset();
  }

  Daemon& daemon() { return *daemon_; }
  bool started() const { return daemon_ != nullptr; }
  // The daemon's layers (Daemon::layers_for_testing): null before Start and once drained.
  Daemon::Layers layers() const { return daemon_ != nullptr ? daemon_->layers_for_testing() : Daemon::Layers(); }

  FakeClock& clock() { return clock_; }
  const std::shared_ptr<fake::FakeLedger>& ledger() const { return ledger_; }
  // The fake rdma_cm and the first device, once started (for data-plane clients, tests/unit/fake_client.h).
  fake::FakeCm* cm() const { return cm_.get(); }
  fabric::Device* device() const { return device_; }
  const TempDir& dir() const { return dir_; }
  const std::string& socket() const { return socket_; }
  std::string target() const { return "unix:" + socket_; }

  // A channel to the socket, shared by the calls that use it (one connection); the caller is this process
  // unless a call names another (As).
  std::shared_ptr<grpc::Channel> Channel() { return ChannelFor("", ""); }
  // A channel whose every call is from `principal` on the connection `connection` (Options::identify).
  std::shared_ptr<grpc::Channel> ChannelAs(const std::string& principal, const std::string& connection = "") {
    return ChannelFor(principal, connection);
  }
  // The client library over Channel() / ChannelAs().
  client::Client Client(std::chrono::milliseconds timeout = std::chrono::milliseconds(10000)) {
    return client::Client(Channel(), timeout);
  }
  client::Client ClientAs(const std::string& principal,
                          std::chrono::milliseconds timeout = std::chrono::milliseconds(10000)) {
    return client::Client(ChannelAs(principal), timeout);
  }
  // A context for one call from `principal` (on `connection`, if given; else "inproc").
  static std::unique_ptr<grpc::ClientContext> As(const std::string& principal, const std::string& connection = "") {
    auto ctx = std::make_unique<grpc::ClientContext>();
    Name(ctx.get(), principal, connection);
    return ctx;
  }
  static void Name(grpc::ClientContext* ctx, const std::string& principal, const std::string& connection = "") {
    ctx->AddMetadata(kPrincipalHeader, principal);
    if (!connection.empty()) ctx->AddMetadata(kConnectionHeader, connection);
  }

  // Daemon::Options::identify: the caller a call's metadata names, else the transport's.
  static auth::Peer IdentifyFromMetadata(const grpc::ServerContextBase& ctx, auth::Peer transport) {
    const auto& md = ctx.client_metadata();
    auto principal = md.find(kPrincipalHeader);
    if (principal == md.end()) return transport;
    auth::Peer p;
    p.transport = auth::kTransportTls;
    p.authenticated = true;
    p.principal = std::string(principal->second.data(), principal->second.size());
    auto conn = md.find(kConnectionHeader);
    p.address = conn == md.end() ? "inproc" : std::string(conn->second.data(), conn->second.size());
    return p;
  }

 private:
  // Adds the caller's metadata to every call of a channel.
  class NamingInterceptor final : public grpc::experimental::Interceptor {
   public:
    NamingInterceptor(std::string principal, std::string connection)
        : principal_(std::move(principal)), connection_(std::move(connection)) {}
    void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
      if (methods->QueryInterceptionHookPoint(grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
        auto* md = methods->GetSendInitialMetadata();
        md->emplace(kPrincipalHeader, principal_);
        if (!connection_.empty()) md->emplace(kConnectionHeader, connection_);
      }
      methods->Proceed();
    }

   private:
    const std::string principal_, connection_;
  };
  class NamingFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
   public:
    NamingFactory(std::string principal, std::string connection)
        : principal_(std::move(principal)), connection_(std::move(connection)) {}
    grpc::experimental::Interceptor* CreateClientInterceptor(grpc::experimental::ClientRpcInfo*) override {
      return new NamingInterceptor(principal_, connection_);
    }

   private:
    const std::string principal_, connection_;
  };

  std::shared_ptr<grpc::Channel> ChannelFor(const std::string& principal, const std::string& connection) {
    std::shared_ptr<grpc::Channel>& ch = channels_[{principal, connection}];
    if (ch != nullptr) return ch;
    if (principal.empty()) {
      ch = grpc::CreateChannel(target(), grpc::InsecureChannelCredentials());
    } else {
      std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> naming;
      naming.push_back(std::make_unique<NamingFactory>(principal, connection));
      ch = grpc::experimental::CreateCustomChannelWithInterceptors(target(), grpc::InsecureChannelCredentials(),
                                                                    grpc::ChannelArguments(), std::move(naming));
    }
    return ch;
  }

  // In /tmp: the socket's path stays short enough for sockaddr_un (TEST_TMPDIR may be long).
  TempDir dir_{TempDir::Options{.base = "/tmp", .prefix = "rdmad-fixture."}};
  const std::string socket_ = dir_.Sub("rdmad.sock");
  Config config_;
  std::vector<fabric::DeviceInfo> devices_ = {fake::MakeDeviceInfo("rxe0")};
  std::map<std::string, std::string> routes_ = {{kRdmaAddress, "rxe0"}};
  FakeClock clock_;
  std::shared_ptr<fake::FakeLedger> ledger_ = std::make_shared<fake::FakeLedger>();
  std::unique_ptr<fake::FakeCm> cm_;  // outlives the daemon, which holds the fabric that points at it
  fabric::Device* device_ = nullptr;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<grpc::Channel>> channels_;
  std::unique_ptr<Daemon> daemon_;  // last: destroyed (drained) first
};

}  // namespace rdmad::test

#endif  // RDMAD_TESTS_SUPPORT_DAEMON_FIXTURE_H_
