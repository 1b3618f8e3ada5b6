// Identity from the transport (server/auth/listeners.h, peer.h, tls_files.h), against a real in-process gRPC
// server on 127.0.0.1:0 and on unix sockets: the principal of a mutual-TLS caller (URI SAN, CN fallback,
// ambiguous names), handshakes refused (expired, untrusted, plaintext, no client certificate), the reload
// of the TLS files (a new server certificate and client CA take effect, the old ones stop working; without
// a reload nothing changes; a bad reload changes nothing), insecure TCP ("anonymous"), and unix peers: our
// own uid/gid/pid, a child that became uid 65534, the socket's mode and group, stale and live sockets, the
// fd-number reuse race, and the socket's removal at the end.
//
// Certificates are made at test time by gen_test_certs.sh (the openssl CLI). Runs as root (rdmad does; CI
// does) and without Bazel's sandbox (its user namespace maps uid 0 only, so no child can become 65534).
// Children are this binary, re-executed (posix_spawn; no gRPC after fork) with --child-call.
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/common/sync.h"
#include "client/channel.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "server/auth/listeners.h"
#include "server/auth/peer.h"
#include "server/auth/tls_files.h"
#include "server/common/status.h"
#include "server/config.h"
#include "tests/support/eventually.h"
#include "tests/support/temp_dir.h"

namespace rdmad::auth {
namespace {

using ::grpc::health::v1::Health;
using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
using ::testing::HasSubstr;

constexpr uint32_t kNobody = 65534;

std::string g_self;   // this binary, for the children
std::string g_certs;  // gen_test_certs.sh's output

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
void WriteAll(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}
std::string Cert(const std::string& name) { return g_certs + "/" + name; }

// A short directory in /tmp (unix socket paths must fit in 108 bytes; TEST_TMPDIR may be long), searchable by
// everyone so that a child running as uid 65534 can reach a socket in it. Removed at the end.
class ShortDir : public test::TempDir {
 public:
  explicit ShortDir(bool required = true)
      : TempDir(Options{.base = "/tmp", .prefix = "rdmad-ltest-", .mode = 0755, .required = required}) {}
};

// The test service: grpc.health.v1 Check, answering with the caller's Peer in trailing metadata. A check of
// service "block" waits until Release() and records the Peer it sees then.
class IdentityService final : public Health::Service {
 public:
  explicit IdentityService(const PeerDirectory* peers) : peers_(peers) {}

  grpc::Status Check(grpc::ServerContext* ctx, const HealthCheckRequest* req, HealthCheckResponse* resp) override {
    if (req->service() == "block") {
      blocked_address_ = ctx->peer();
      blocked_ctx_ = ctx;
      entered_.Notify();
      release_.WaitForNotification();
      blocked_peer_ = peers_->Identify(*ctx);
      finished_.Notify();
    }
    const Peer p = peers_->Identify(*ctx);
    ctx->AddTrailingMetadata("x-transport", p.transport);
    ctx->AddTrailingMetadata("x-principal", p.principal);
    ctx->AddTrailingMetadata("x-authenticated", p.authenticated ? "true" : "false");
    ctx->AddTrailingMetadata("x-uid", std::to_string(p.uid));
    ctx->AddTrailingMetadata("x-gid", std::to_string(p.gid));
    ctx->AddTrailingMetadata("x-pid", std::to_string(p.pid));
    std::string groups;
    for (uint32_t g : p.groups) absl::StrAppend(&groups, groups.empty() ? "" : ",", g);
    ctx->AddTrailingMetadata("x-groups", groups);
    ctx->AddTrailingMetadata("x-address", p.address);
    resp->set_status(HealthCheckResponse::SERVING);
    return grpc::Status::OK;
  }

  void WaitEntered() { entered_.WaitForNotification(); }
  void Release() { release_.Notify(); }
  const Peer& WaitBlockedPeer() {
    finished_.WaitForNotification();
    return blocked_peer_;
  }
  const std::string& blocked_address() const { return blocked_address_; }
  // Whether gRPC has seen the blocked call's client go (its connection closed): the call is cancelled.
  bool blocked_cancelled() const { return blocked_ctx_ != nullptr && blocked_ctx_->IsCancelled(); }

 private:
  const PeerDirectory* peers_;
  Notification entered_, release_, finished_;
  std::string blocked_address_;
  grpc::ServerContext* blocked_ctx_ = nullptr;  // set before entered_, alive until release_
  Peer blocked_peer_;
};

// What a call saw: its status and the Peer the server reported.
struct Seen {
  grpc::Status status;
  std::map<std::string, std::string> peer;
};

Seen Call(const std::shared_ptr<grpc::Channel>& channel, const std::string& service = "",
          std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
  auto stub = Health::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  HealthCheckRequest req;
  req.set_service(service);
  HealthCheckResponse resp;
  Seen seen;
  seen.status = stub->Check(&ctx, req, &resp);
  for (const auto& [k, v] : ctx.GetServerTrailingMetadata()) {
    seen.peer[std::string(k.data(), k.size()).substr(2)] = std::string(v.data(), v.size());
  }
  return seen;
}

// A server with rdmad's listeners for `config`, the identity service, and the acceptor started.
class TestServer {
 public:
  explicit TestServer(const Config& config, const std::string& tls_base = "/tmp") : service_(&peers_) {
    Listeners::Options options;
    options.tls_base_dir = tls_base;
    auto l = Listeners::Create(config, &peers_, options);
    status_ = l.status();
    if (!l.ok()) return;
    listeners_ = std::move(*l);
    grpc::ServerBuilder builder;
    listeners_->AddTcpPorts(&builder);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    if (server_ == nullptr) {
      status_ = absl::UnavailableError("BuildAndStart failed");
      return;
    }
    status_ = listeners_->Start(server_.get());
  }
  ~TestServer() {
    if (listeners_) listeners_->StopAccepting();
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }

  const absl::Status& status() const { return status_; }
  Listeners& listeners() { return *listeners_; }
  IdentityService& service() { return service_; }
  std::string tcp(size_t i = 0) const { return absl::StrCat("127.0.0.1:", listeners_->tcp_ports().at(i)); }

 private:
  PeerDirectory peers_;
  IdentityService service_;
  absl::Status status_;
  std::unique_ptr<Listeners> listeners_;
  std::unique_ptr<grpc::Server> server_;
};

std::shared_ptr<grpc::Channel> TlsChannel(const std::string& target, const std::string& client,
                                          const std::string& ca = "ca", const std::string& server_name = "") {
  client::TlsOptions tls;
  tls.ca_file = Cert(ca + ".pem");
  if (!client.empty()) {
    tls.cert_file = Cert(client + ".pem");
    tls.key_file = Cert(client + ".key");
  }
  tls.server_name = server_name;
  auto ch = client::Dial(target, tls);
  EXPECT_TRUE(ch.ok()) << ch.status();
  return ch.ok() ? *ch : nullptr;
}

// Without a client certificate: gRPC's SSL credentials with the CA only (client::Dial requires all three).
std::shared_ptr<grpc::Channel> TlsChannelNoClientCert(const std::string& target) {
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = ReadAll(Cert("ca.pem"));
  return grpc::CreateChannel(target, grpc::SslCredentials(o));
}

std::shared_ptr<grpc::Channel> Plain(const std::string& target) {
  return grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
}

Config TlsConfig(const std::string& dir) {
  Config c;
  c.listen = {"127.0.0.1:0"};
  c.tls.cert = dir + "/server.pem";
  c.tls.key = dir + "/server.key";
  c.tls.client_ca = dir + "/ca.pem";
  return c;
}

// ---- children: this binary with --child-call SOCKET SERVICE [UID]

struct Child {
  pid_t pid = -1;
  int out = -1;  // its stdout
};

Child Spawn(const std::vector<std::string>& args) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return {};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, p[1], 1);
  std::vector<std::string> all = {g_self};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  Child c;
  if (posix_spawn(&c.pid, g_self.c_str(), &actions, nullptr, argv.data(), environ) != 0) c.pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  close(p[1]);
  c.out = p[0];
  return c;
}

// Waits for the child; its stdout.
std::string Finish(Child c, int* exit_status = nullptr) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(c.out, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(c.out);
  int status = 0;
  waitpid(c.pid, &status, 0);
  if (exit_status != nullptr) *exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

// "key=value key=value" -> map
std::map<std::string, std::string> Fields(const std::string& line) {
  std::map<std::string, std::string> m;
  for (absl::string_view kv : absl::StrSplit(line, absl::ByAnyChar(" \n"), absl::SkipWhitespace())) {
    std::pair<std::string, std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
    m[p.first] = p.second;
  }
  return m;
}

int ChildMain(int argc, char** argv) {
  // --child-call SOCKET SERVICE [UID]: drop to UID (and its gid, no supplementary groups) before touching
  // gRPC, call Check over the unix socket, print what the server saw.
  if (argc >= 5) {
    uint32_t id = 0;
    if (!absl::SimpleAtoi(argv[4], &id) || setgroups(0, nullptr) != 0 || setgid(id) != 0 || setuid(id) != 0) {
      std::printf("error=setuid\n");
      return 3;
    }
  }
  Seen s = Call(Plain(std::string("unix:") + argv[2]), argv[3]);
  if (!s.status.ok()) {
    std::printf("error=%d\n", static_cast<int>(s.status.error_code()));
    return 1;
  }
  std::printf("pid=%d", static_cast<int>(getpid()));
  for (const auto& [k, v] : s.peer) std::printf(" %s=%s", k.c_str(), v.c_str());
  std::printf("\n");
  return 0;
}

bool IsRoot() { return geteuid() == 0; }

// ---- TLS

TEST(ListenersTls, UriSanIsThePrincipal) {
  TestServer s(TlsConfig(g_certs));
  ASSERT_TRUE(s.status().ok()) << s.status();
  Seen seen = Call(TlsChannel(s.tcp(), "spiffe"));
  ASSERT_TRUE(seen.status.ok()) << seen.status.error_message();
  EXPECT_EQ(seen.peer["transport"], "tls");
  EXPECT_EQ(seen.peer["principal"], "spiffe://cluster/ns/a/sa/x");
  EXPECT_EQ(seen.peer["authenticated"], "true");
  EXPECT_EQ(seen.peer["uid"], "-1");
  EXPECT_THAT(seen.peer["address"], ::testing::StartsWith("ipv4:127.0.0.1:"));
}

TEST(ListenersTls, CommonNameWhenNoUriSan) {
  TestServer s(TlsConfig(g_certs));
  ASSERT_TRUE(s.status().ok()) << s.status();
  Seen seen = Call(TlsChannel(s.tcp(), "cn"));
  ASSERT_TRUE(seen.status.ok()) << seen.status.error_message();
  EXPECT_EQ(seen.peer["principal"], "CN=reader");
  EXPECT_EQ(seen.peer["authenticated"], "true");
}

TEST(ListenersTls, AmbiguousOrUnixUriNamesNoOne) {
  TestServer s(TlsConfig(g_certs));
  ASSERT_TRUE(s.status().ok()) << s.status();
  for (const char* who : {"two-uris", "unix-uri"}) {
    Seen seen = Call(TlsChannel(s.tcp(), who));
    ASSERT_TRUE(seen.status.ok()) << who << ": " << seen.status.error_message();  // the handshake is fine
    EXPECT_EQ(seen.peer["transport"], "tls") << who;
    EXPECT_EQ(seen.peer["principal"], "") << who;
    EXPECT_EQ(seen.peer["authenticated"], "false") << who;
  }
}

TEST(ListenersTls, HandshakesRefused) {
  TestServer s(TlsConfig(g_certs));
  ASSERT_TRUE(s.status().ok()) << s.status();
  ASSERT_TRUE(Call(TlsChannel(s.tcp(), "spiffe")).status.ok());  // the control: a good certificate works
  EXPECT_EQ(Call(TlsChannel(s.tcp(), "expired")).status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Call(TlsChannel(s.tcp(), "untrusted")).status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Call(TlsChannelNoClientCert(s.tcp())).status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Call(Plain(s.tcp())).status.error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST(ListenersTls, ServerNameOverride) {
  TestServer s(TlsConfig(g_certs));
  ASSERT_TRUE(s.status().ok()) << s.status();
  EXPECT_TRUE(Call(TlsChannel(s.tcp(), "spiffe", "ca", "localhost")).status.ok());
  EXPECT_EQ(Call(TlsChannel(s.tcp(), "spiffe", "ca", "not-rdmad.example")).status.error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

TEST(ListenersTls, CopiesArePrivateAndRemoved) {
  ShortDir base;
  std::string dir;
  {
    TestServer s(TlsConfig(g_certs), base.path());
    ASSERT_TRUE(s.status().ok()) << s.status();
    dir = s.listeners().tls()->dir();
    struct stat st {};
    ASSERT_EQ(stat(dir.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    ASSERT_EQ(stat((dir + "/identity.pem").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    EXPECT_EQ(ReadAll(dir + "/client_ca.pem"), ReadAll(Cert("ca.pem")));
  }
  EXPECT_NE(access(dir.c_str(), F_OK), 0) << dir << " is still there";
}

TEST(ListenersTls, BadFilesAtStartUp) {
  ShortDir d;
  Config c = TlsConfig(g_certs);
  c.tls.key = Cert("server2.key");  // not server.pem's key
  TestServer mismatched(c, d.path());
  EXPECT_EQ(mismatched.status().code(), absl::StatusCode::kInvalidArgument) << mismatched.status();
  EXPECT_THAT(std::string(mismatched.status().message()), HasSubstr("not the private key"));

  c = TlsConfig(g_certs);
  c.tls.cert = Cert("expired.pem");
  c.tls.key = Cert("expired.key");
  TestServer expired(c, d.path());
  EXPECT_EQ(expired.status().code(), absl::StatusCode::kInvalidArgument) << expired.status();
  EXPECT_THAT(std::string(expired.status().message()), HasSubstr("expired"));

  c = TlsConfig(g_certs);
  c.tls.client_ca = Cert("server.key");  // no certificate in it
  TestServer no_ca(c, d.path());
  EXPECT_EQ(no_ca.status().code(), absl::StatusCode::kInvalidArgument) << no_ca.status();
  EXPECT_EQ(FieldOf(no_ca.status()), "tls.client_ca");

  c = TlsConfig(g_certs);
  c.tls.cert = d.path() + "/missing.pem";
  TestServer missing(c, d.path());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  EXPECT_EQ(FieldOf(missing.status()), "tls.cert");

  // Nothing is left behind by the failures.
  EXPECT_EQ(std::system(("test -z \"$(ls -A '" + d.path() + "')\"").c_str()), 0) << "copies left in " << d.path();
}

// Polls `check` (a fresh connection each time, every 100 ms) for up to 6 s; the time it took, or -1.
double Within(const std::function<bool()>& check) {
  auto start = std::chrono::steady_clock::now();
  if (!test::Eventually(check, absl::Seconds(6), absl::Milliseconds(100))) return -1;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// gRPC re-reads the certificate files it serves every second (the copies in Listeners' TLS directory): a
// change that must not take effect is watched through more than two of those refreshes.
constexpr absl::Duration kRefreshes = absl::Milliseconds(2500);

TEST(ListenersTls, ReloadTakesEffectOnlyWhenAsked) {
  ShortDir d;
  for (const char* f : {"server.pem", "server.key", "ca.pem"}) WriteAll(d.path() + "/" + f, ReadAll(Cert(f)));
  TestServer s(TlsConfig(d.path()), d.path());
  ASSERT_TRUE(s.status().ok()) << s.status();
  auto old_works = [&] { return Call(TlsChannel(s.tcp(), "spiffe", "ca")).status.ok(); };
  ASSERT_TRUE(old_works());

  // New files in place: rdmad's certificate from other-ca, clients from other-ca only. No reload yet.
  WriteAll(d.path() + "/server.pem", ReadAll(Cert("server2.pem")));
  WriteAll(d.path() + "/server.key", ReadAll(Cert("server2.key")));
  WriteAll(d.path() + "/ca.pem", ReadAll(Cert("other-ca.pem")));
  // Through > 2 of gRPC's refreshes, the old certificates keep working at every look.
  EXPECT_FALSE(test::Eventually([&] { return !old_works(); }, kRefreshes, absl::Milliseconds(100)))
      << "the configured files changed without a reload, and that took effect";
  EXPECT_TRUE(old_works()) << "the configured files changed without a reload, and that took effect";

  absl::StatusOr<std::string> r = s.listeners().Reload();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(*r, HasSubstr("CN=rdmad"));
  // The new certificate takes effect: a client trusting other-ca with a certificate from other-ca gets in.
  auto new_works = [&] {
    Seen seen = Call(TlsChannel(s.tcp(), "untrusted", "other-ca"));
    return seen.status.ok() && seen.peer["principal"] == "spiffe://cluster/ns/a/sa/x";
  };
  double took = Within(new_works);
  EXPECT_GE(took, 0) << "the reloaded certificates did not take effect within 6 s";
  EXPECT_LT(took, 3) << "took " << took << " s";
  std::printf("reload took effect after %.2f s\n", took);
  // ... and the old ones stop working: rdmad no longer presents a certificate from ca, and a client
  // certificate from ca is refused even by a client that trusts rdmad's new one.
  EXPECT_FALSE(old_works());
  EXPECT_EQ(Call(TlsChannel(s.tcp(), "spiffe", "other-ca")).status.error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST(ListenersTls, BadReloadChangesNothing) {
  ShortDir d;
  for (const char* f : {"server.pem", "server.key", "ca.pem"}) WriteAll(d.path() + "/" + f, ReadAll(Cert(f)));
  TestServer s(TlsConfig(d.path()), d.path());
  ASSERT_TRUE(s.status().ok()) << s.status();
  const std::string identity = ReadAll(s.listeners().tls()->dir() + "/identity.pem");

  WriteAll(d.path() + "/server.pem", ReadAll(Cert("server2.pem")));  // the key stays server.key's
  absl::StatusOr<std::string> r = s.listeners().Reload();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_EQ(FieldOf(r.status()), "tls.key");
  WriteAll(d.path() + "/server.pem", "");
  r = s.listeners().Reload();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_EQ(FieldOf(r.status()), "tls.cert");

  EXPECT_EQ(ReadAll(s.listeners().tls()->dir() + "/identity.pem"), identity);
  // Through gRPC's next refreshes, the certificates in use keep working at every look.
  EXPECT_FALSE(test::Eventually([&] { return !Call(TlsChannel(s.tcp(), "spiffe", "ca")).status.ok(); }, kRefreshes,
                                absl::Milliseconds(100)))
      << "a refused reload took effect";
  EXPECT_TRUE(Call(TlsChannel(s.tcp(), "spiffe", "ca")).status.ok());
}

// ---- insecure TCP

TEST(ListenersInsecureTcp, EveryCallerIsAnonymous) {
  Config c;
  c.listen = {"127.0.0.1:0"};
  c.insecure_tcp = true;
  TestServer s(c);
  ASSERT_TRUE(s.status().ok()) << s.status();
  Seen seen = Call(Plain(s.tcp()));
  ASSERT_TRUE(seen.status.ok()) << seen.status.error_message();
  EXPECT_EQ(seen.peer["transport"], "insecure_tcp");
  EXPECT_EQ(seen.peer["principal"], "anonymous");
  EXPECT_EQ(seen.peer["authenticated"], "false");
}

TEST(ListenersInsecureTcp, RefusedWithoutTlsOrInsecureTcp) {
  Config c;
  c.listen = {"unix:/tmp/x.sock", "127.0.0.1:0"};
  EXPECT_EQ(CheckListeners(c).code(), absl::StatusCode::kFailedPrecondition);
  PeerDirectory peers;
  EXPECT_EQ(Listeners::Create(c, &peers, {}).status().code(), absl::StatusCode::kFailedPrecondition);
  c.insecure_tcp = true;
  EXPECT_TRUE(CheckListeners(c).ok());
  c = TlsConfig(g_certs);
  EXPECT_TRUE(CheckListeners(c).ok());
}

// ---- unix sockets

Config UnixConfig(const std::string& path) {
  Config c;
  c.listen = {"unix:" + path};
  return c;
}

TEST(ListenersUnix, OurOwnCredentials) {
  ShortDir d;
  const std::string path = d.path() + "/rdmad.sock";
  TestServer s(UnixConfig(path));
  ASSERT_TRUE(s.status().ok()) << s.status();
  Seen seen = Call(Plain("unix:" + path));
  ASSERT_TRUE(seen.status.ok()) << seen.status.error_message();
  EXPECT_EQ(seen.peer["transport"], "unix");
  EXPECT_EQ(seen.peer["principal"], "");
  EXPECT_EQ(seen.peer["authenticated"], "true");
  EXPECT_EQ(seen.peer["uid"], std::to_string(geteuid()));
  EXPECT_EQ(seen.peer["gid"], std::to_string(getegid()));
  EXPECT_EQ(seen.peer["pid"], std::to_string(getpid()));
  EXPECT_THAT(seen.peer["address"], ::testing::StartsWith("fd:"));
  // The default mode: owner and group.
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
}

TEST(ListenersUnix, AnotherUserAndTheSocketsModeAndGroup) {
  if (!IsRoot()) GTEST_SKIP() << "needs root to run a child as uid 65534 (rdmad runs as root; CI does)";
  ShortDir d;
  const std::string path = d.path() + "/rdmad.sock";
  Config c = UnixConfig(path);
  c.unix_socket.group = std::to_string(kNobody);
  c.unix_socket.mode = 0660;
  {
    TestServer s(c);
    ASSERT_TRUE(s.status().ok()) << s.status();
    struct stat st {};
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0660u);
    EXPECT_EQ(st.st_gid, kNobody);
    EXPECT_EQ(st.st_uid, geteuid());

    Child child = Spawn({"--child-call", path, "", std::to_string(kNobody)});
    ASSERT_GT(child.pid, 0);
    const pid_t pid = child.pid;
    int rc = -1;
    auto f = Fields(Finish(child, &rc));
    ASSERT_EQ(rc, 0) << "child: " << f["error"];
    EXPECT_EQ(f["transport"], "unix");
    EXPECT_EQ(f["uid"], std::to_string(kNobody));
    EXPECT_EQ(f["gid"], std::to_string(kNobody));
    EXPECT_EQ(f["pid"], std::to_string(pid));
    EXPECT_EQ(f["groups"], "") << "the child dropped its supplementary groups";
    EXPECT_EQ(f["authenticated"], "true");
  }
  // Mode 0600: only rdmad's user may connect; uid 65534 is refused by the kernel.
  c.unix_socket.mode = 0600;
  TestServer s(c);
  ASSERT_TRUE(s.status().ok()) << s.status();
  int rc = -1;
  auto f = Fields(Finish(Spawn({"--child-call", path, "", std::to_string(kNobody)}), &rc));
  EXPECT_EQ(rc, 1);
  EXPECT_EQ(f["error"], std::to_string(static_cast<int>(grpc::StatusCode::UNAVAILABLE)));
  EXPECT_TRUE(Call(Plain("unix:" + path)).status.ok()) << "rdmad's own user still connects";
}

TEST(ListenersUnix, GroupByName) {
  ShortDir d;
  Config c = UnixConfig(d.path() + "/rdmad.sock");
  struct group* g = getgrgid(getegid());
  ASSERT_NE(g, nullptr);
  c.unix_socket.group = g->gr_name;
  c.unix_socket.mode = 0640;
  TestServer s(c);
  ASSERT_TRUE(s.status().ok()) << s.status();
  struct stat st {};
  ASSERT_EQ(stat((d.path() + "/rdmad.sock").c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, getegid());
  EXPECT_EQ(st.st_mode & 0777, 0640u);

  c.unix_socket.group = "no-such-group-rdmad";
  c.listen = {"unix:" + d.path() + "/other.sock"};
  TestServer bad(c);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  EXPECT_EQ(FieldOf(bad.status()), "unix_socket.group");
}

TEST(ListenersUnix, StaleSocketReplacedLiveOneRefused) {
  ShortDir d;
  const std::string path = d.path() + "/rdmad.sock";
  {  // a stale socket: bound, never listening, its owner gone
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path.c_str());
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
    close(fd);
  }
  TestServer s(UnixConfig(path));
  ASSERT_TRUE(s.status().ok()) << s.status();
  EXPECT_TRUE(Call(Plain("unix:" + path)).status.ok());

  TestServer second(UnixConfig(path));  // a second rdmad on a live socket
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition) << second.status();
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("in use"));
  EXPECT_TRUE(Call(Plain("unix:" + path)).status.ok()) << "the first one still serves on it";

  WriteAll(d.path() + "/file", "x");
  TestServer not_socket(UnixConfig(d.path() + "/file"));
  EXPECT_EQ(not_socket.status().code(), absl::StatusCode::kFailedPrecondition) << not_socket.status();
  EXPECT_EQ(ReadAll(d.path() + "/file"), "x");
}

TEST(ListenersUnix, StopAcceptingRemovesTheSocket) {
  ShortDir d;
  const std::string path = d.path() + "/rdmad.sock";
  TestServer s(UnixConfig(path));
  ASSERT_TRUE(s.status().ok()) << s.status();
  ASSERT_TRUE(Call(Plain("unix:" + path)).status.ok());
  s.listeners().StopAccepting();
  EXPECT_NE(access(path.c_str(), F_OK), 0) << path << " is still there";
  EXPECT_EQ(Call(Plain("unix:" + path), "", std::chrono::milliseconds(1000)).status.error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

// The fd-number race (peer.h): a call whose client died keeps its fd number until the call ends, so newer
// connections get other numbers and the call still identifies its own client.
TEST(ListenersUnix, AFinishedConnectionsFdIsNotReusedUnderARunningCall) {
  ShortDir d;
  const std::string path = d.path() + "/rdmad.sock";
  TestServer s(UnixConfig(path));
  ASSERT_TRUE(s.status().ok()) << s.status();
  Child child = Spawn({"--child-call", path, "block"});
  ASSERT_GT(child.pid, 0);
  s.service().WaitEntered();
  const std::string address = s.service().blocked_address();  // "fd:N"
  ASSERT_THAT(address, ::testing::StartsWith("fd:"));
  char before[64] = {}, after[64] = {};
  const std::string proc = "/proc/self/fd/" + address.substr(3);
  ASSERT_GT(readlink(proc.c_str(), before, sizeof before - 1), 0);

  kill(child.pid, SIGKILL);
  Finish(child);
  EXPECT_TRUE(test::Eventually([&] { return s.service().blocked_cancelled(); }))
      << "gRPC did not see the dead client's connection close";
  for (int i = 0; i < 8; ++i) {
    Seen seen = Call(Plain("unix:" + path));  // a new channel, a new connection, each time
    ASSERT_TRUE(seen.status.ok()) << seen.status.error_message();
    EXPECT_NE(seen.peer["address"], address) << "fd reused while a call on it still runs";
    EXPECT_EQ(seen.peer["pid"], std::to_string(getpid()));
  }
  ASSERT_GT(readlink(proc.c_str(), after, sizeof after - 1), 0);
  EXPECT_STREQ(before, after) << "the blocked call's fd now names another file";

  s.service().Release();
  const Peer& p = s.service().WaitBlockedPeer();
  EXPECT_EQ(p.address, address);
  EXPECT_EQ(p.pid, child.pid) << "the blocked call no longer identifies its own (dead) client";
}

}  // namespace
}  // namespace rdmad::auth

int main(int argc, char** argv) {
  if (argc >= 4 && std::string(argv[1]) == "--child-call") return rdmad::auth::ChildMain(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  char self[4096] = {};
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 2;
  rdmad::auth::g_self = self;
  // The certificates: made once for the whole run, in a directory removed at the end.
  rdmad::auth::ShortDir certs(/*required=*/false);  // not in a test yet: no failure to record
  if (!certs.ok()) {
    std::perror("a directory for the certificates in /tmp");
    return 2;
  }
  rdmad::auth::g_certs = certs.path() + "/certs";
  // Under Bazel the working directory is the runfiles tree, where data files keep their workspace paths.
  const std::string script = "tests/unit/gen_test_certs.sh";
  if (std::system(("bash '" + script + "' '" + rdmad::auth::g_certs + "'").c_str()) != 0) {
    std::fprintf(stderr, "%s failed (is openssl installed?)\n", script.c_str());
    return 2;
  }
  return RUN_ALL_TESTS();
}
