// rdma_cm through rdmad's API on real rdma_cm (rxe0 in the Soft-RoCE guest): channels, ids, rdmad as the
// active side against `rping -s`, the token-checked data-plane listener against a plain librdmacm peer
// (tests/conformance/cm_peer.h), migration, watch streams, and release of everything.
//
// Environment: RDMAD_TARGET (gRPC target of the rdmad under test, which must run with
// "rdma_listen": ["<RDMAD_ADDR>:7471"] and "cm_workers": 2), RDMAD_ADDR (default 10.0.2.15).
// run-cm-conformance.sh starts rdmad so, and compares `rdma resource show` before and after.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "rdmad/v1/rdmad.grpc.pb.h"
#include "server/cm/token.h"
#include "tests/conformance/cm_peer.h"
#include "tests/support/eventually.h"

extern char** environ;

namespace rdmad::testing {
namespace {

std::string Env(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}
std::string Addr() { return Env("RDMAD_ADDR", "10.0.2.15"); }

std::shared_ptr<grpc::Channel> Channel() {
  static auto c = grpc::CreateChannel(Env("RDMAD_TARGET", "unix:/run/rdmad/rdmad.sock"), grpc::InsecureChannelCredentials());
  return c;
}

struct Stubs {
  std::unique_ptr<v1::ProtectionDomains::Stub> pds = v1::ProtectionDomains::NewStub(Channel());
  std::unique_ptr<v1::QueuePairs::Stub> qps = v1::QueuePairs::NewStub(Channel());
  std::unique_ptr<v1::EventChannels::Stub> channels = v1::EventChannels::NewStub(Channel());
  std::unique_ptr<v1::CmIds::Stub> ids = v1::CmIds::NewStub(Channel());
  std::unique_ptr<v1::ConnectTokens::Stub> tokens = v1::ConnectTokens::NewStub(Channel());
};
Stubs& Api() {
  static Stubs* s = new Stubs();
  return *s;
}

// Calls a unary RPC with a deadline; returns the status, fills *out.
template <typename Stub, typename Req, typename Resp>
grpc::Status Call(Stub* stub, grpc::Status (Stub::*m)(grpc::ClientContext*, const Req&, Resp*), const Req& req,
                  Resp* out, int seconds = 30) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  return (stub->*m)(&ctx, req, out);
}

#define ASSERT_RPC_OK(expr)                                               \
  do {                                                                    \
    grpc::Status s_ = (expr);                                             \
    ASSERT_TRUE(s_.ok()) << s_.error_code() << " " << s_.error_message(); \
  } while (0)

std::string NewPd() {
  v1::CreatePdRequest r;
  r.set_device("rxe0");
  v1::ProtectionDomain pd;
  grpc::Status s = Call(Api().pds.get(), &v1::ProtectionDomains::Stub::CreatePd, r, &pd);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return pd.name();
}
void DeletePd(const std::string& name) {
  v1::DeletePdRequest r;
  r.set_name(name);
  v1::DeletePdResponse resp;
  grpc::Status s = Call(Api().pds.get(), &v1::ProtectionDomains::Stub::DeletePd, r, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
}
std::string NewChannel() {
  v1::EventChannel ch;
  EXPECT_TRUE(Call(Api().channels.get(), &v1::EventChannels::Stub::CreateChannel, v1::CreateChannelRequest(), &ch).ok());
  return ch.name();
}
v1::CmId NewId(const std::string& pd, const std::string& channel = "") {
  v1::CreateCmIdRequest r;
  r.set_pd(pd);
  r.set_channel(channel);
  v1::CmId id;
  grpc::Status s = Call(Api().ids.get(), &v1::CmIds::Stub::CreateCmId, r, &id);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return id;
}
grpc::Status DeleteId(const std::string& name) {
  v1::DeleteCmIdRequest r;
  r.set_name(name);
  v1::DeleteCmIdResponse resp;
  return Call(Api().ids.get(), &v1::CmIds::Stub::DeleteCmId, r, &resp);
}
v1::CmId GetId(const std::string& name, grpc::Status* status = nullptr) {
  v1::GetCmIdRequest r;
  r.set_name(name);
  v1::CmId id;
  grpc::Status s = Call(Api().ids.get(), &v1::CmIds::Stub::GetCmId, r, &id);
  if (status) *status = s;
  return id;
}
std::vector<v1::CmId> ListIds() {
  v1::ListCmIdsResponse resp;
  EXPECT_TRUE(Call(Api().ids.get(), &v1::CmIds::Stub::ListCmIds, v1::ListCmIdsRequest(), &resp).ok());
  return {resp.cm_ids().begin(), resp.cm_ids().end()};
}
// Waits (bounded) for the connect request that reached `listener`; returns the new id's name ("" if none).
std::string WaitConnectRequest(const std::string& listener) {
  std::string found;
  test::Eventually(
      [&] {
        for (const v1::CmId& id : ListIds()) {
          if (id.listener() == listener && id.state() == v1::CM_CONNECT_REQUEST) found = id.name();
        }
        return !found.empty();
      },
      absl::Seconds(20), absl::Milliseconds(10));
  return found;
}

// Waits (bounded) until rdmad holds no accepted data-plane connection; returns how many are left.
int WaitDataPlaneConnectionsGone() {
  int left = 0;
  test::Eventually(
      [&] {
        left = 0;
        for (const auto& id : ListIds()) left += id.data_plane() && !id.listener().empty();
        return left == 0;
      },
      absl::Seconds(30), absl::Milliseconds(10));
  return left;
}

grpc::Status Migrate(const std::string& id, const std::string& channel, v1::CmId* out) {
  v1::MigrateCmIdRequest r;
  r.set_name(id);
  r.set_channel(channel);
  return Call(Api().ids.get(), &v1::CmIds::Stub::MigrateCmId, r, out);
}
std::string IssueToken(const std::string& pd, uint32_t ttl_ms = 30000) {
  v1::IssueConnectTokenRequest r;
  r.set_pd(pd);
  r.set_ttl_ms(ttl_ms);
  v1::ConnectToken t;
  grpc::Status s = Call(Api().tokens.get(), &v1::ConnectTokens::Stub::IssueConnectToken, r, &t);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return t.token();
}

// A watch stream read on its own thread into a list, for assertions after the fact.
class Watch {
 public:
  // Returns once rdmad has registered the watch (its initial metadata arrived): every event published from
  // then on is in the stream.
  explicit Watch(v1::WatchEventsRequest request) {
    reader_ = Api().ids->WatchEvents(&ctx_, request);
    reader_->WaitForInitialMetadata();
    thread_ = std::thread([this] {
      v1::CmEvent e;
      while (reader_->Read(&e)) {
        std::lock_guard<std::mutex> lock(mu_);
        events_.push_back(e);
      }
    });
  }
  ~Watch() {
    ctx_.TryCancel();
    thread_.join();
    reader_->Finish();
  }
  // Waits (bounded) until an event of `type` for `id` was seen; returns it (empty type if none).
  v1::CmEvent WaitFor(const std::string& id, const std::string& type, int seconds = 20) {
    return WaitForAny(id, {type}, seconds);
  }
  // As WaitFor, for the first event of `id` whose type is one of `types`.
  v1::CmEvent WaitForAny(const std::string& id, const std::vector<std::string>& types, int seconds = 20) {
    v1::CmEvent found;
    test::Eventually(
        [&] {
          std::lock_guard<std::mutex> lock(mu_);
          for (const auto& e : events_) {
            if (e.cm_id() != id) continue;
            for (const auto& t : types) {
              if (e.type() == t) found = e;
            }
            if (!found.type().empty()) return true;
          }
          return false;
        },
        absl::Seconds(seconds), absl::Milliseconds(10));
    return found;
  }
  int CountType(const std::string& type) {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    for (const auto& e : events_) n += e.type() == type;
    return n;
  }
  int Count(const std::string& id, const std::string& type) {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    for (const auto& e : events_) n += e.cm_id() == id && e.type() == type;
    return n;
  }

 private:
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReader<v1::CmEvent>> reader_;
  std::thread thread_;
  std::mutex mu_;
  std::vector<v1::CmEvent> events_;
};

// Once it returns, every event that `channel`'s dispatcher published before the call is in `watch`: a
// throwaway id on the channel connects to a port no one listens on, and its failure, which the same
// dispatcher publishes after them, is waited for in the stream. A check that something did *not* happen
// on a channel asks after this, instead of after a sleep.
void FlushChannel(Watch& watch, const std::string& pd, const std::string& channel) {
  v1::CmId marker = NewId(pd, channel);
  v1::ConnectRequest c;
  c.set_name(marker.name());
  c.mutable_remote()->set_address(Addr());
  c.mutable_remote()->set_port(7699);  // no test listens there
  v1::CmId out;
  EXPECT_FALSE(Call(Api().ids.get(), &v1::CmIds::Stub::Connect, c, &out).ok()) << "something listens on 7699";
  const v1::CmEvent failed = watch.WaitForAny(
      marker.name(), {"RDMA_CM_EVENT_REJECTED", "RDMA_CM_EVENT_UNREACHABLE", "RDMA_CM_EVENT_CONNECT_ERROR",
                      "RDMA_CM_EVENT_ADDR_ERROR", "RDMA_CM_EVENT_ROUTE_ERROR"});
  EXPECT_FALSE(failed.type().empty()) << "the marker's failure never reached the stream (channel " << channel << ")";
  EXPECT_TRUE(DeleteId(marker.name()).ok());
}

// Connects two rdmad ids through rdmad's API: a listener on `port` and an active id on `active_channel`.
// Returns {active, passive}.
std::pair<v1::CmId, v1::CmId> ConnectPair(const std::string& pd, int port, const std::string& active_channel = "") {
  v1::CmId listener = NewId(pd);
  v1::ListenRequest listen;
  listen.set_name(listener.name());
  listen.mutable_address()->set_address(Addr());
  listen.mutable_address()->set_port(port);
  v1::CmId out;
  EXPECT_TRUE(Call(Api().ids.get(), &v1::CmIds::Stub::Listen, listen, &out).ok());
  v1::CmId active = NewId(pd, active_channel);
  v1::ConnectRequest c;
  c.set_name(active.name());
  c.mutable_remote()->set_address(Addr());
  c.mutable_remote()->set_port(port);
  c.set_private_data("hello");
  v1::CmId connected;
  grpc::Status connect_status;
  std::thread connector([&] { connect_status = Call(Api().ids.get(), &v1::CmIds::Stub::Connect, c, &connected); });
  const std::string passive = WaitConnectRequest(listener.name());
  EXPECT_FALSE(passive.empty()) << "no connect request reached the listener";
  v1::AcceptRequest a;
  a.set_name(passive);
  a.set_private_data("welcome");
  v1::CmId accepted;
  EXPECT_TRUE(Call(Api().ids.get(), &v1::CmIds::Stub::Accept, a, &accepted).ok());
  connector.join();
  EXPECT_TRUE(connect_status.ok()) << connect_status.error_message();
  EXPECT_TRUE(DeleteId(listener.name()).ok());
  return {connected, GetId(passive)};
}

TEST(CmConformance, ChannelsAreDispatchersWithTheirOwnThreads) {
  v1::ListChannelsResponse resp;
  ASSERT_RPC_OK(Call(Api().channels.get(), &v1::EventChannels::Stub::ListChannels, v1::ListChannelsRequest(), &resp));
  ASSERT_GE(resp.channels_size(), 3);
  EXPECT_EQ(resp.channels(0).role(), v1::CHANNEL_DEFAULT);
  std::set<int> tids;
  for (const auto& c : resp.channels()) tids.insert(c.thread_id());
  EXPECT_EQ(tids.size(), static_cast<size_t>(resp.channels_size()));
  // The data-plane listener is an id on the default channel.
  bool listener = false;
  for (const v1::CmId& id : ListIds()) listener = listener || (id.data_plane() && id.state() == v1::CM_LISTENING);
  EXPECT_TRUE(listener);
}

TEST(CmConformance, ListeningOnAnAddressOfAnotherHostIsInvalidArgument) {
  const std::string pd = NewPd();
  v1::CmId id = NewId(pd);
  v1::ListenRequest listen;
  listen.set_name(id.name());
  listen.mutable_address()->set_address("10.9.9.9");
  listen.mutable_address()->set_port(7000);
  v1::CmId out;
  grpc::Status s = Call(Api().ids.get(), &v1::CmIds::Stub::Listen, listen, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("not an address of this host"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("EADDRNOTAVAIL"), std::string::npos) << s.error_message();
  ASSERT_RPC_OK(DeleteId(id.name()));
  DeletePd(pd);
}

TEST(CmConformance, RdmadConnectsToRpingServer) {
  const std::string pd = NewPd();
  pid_t rping = 0;
  std::vector<std::string> args = {"rping", "-s", "-a", Addr(), "-p", "7900", "-C", "1"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ASSERT_EQ(posix_spawnp(&rping, "rping", nullptr, nullptr, argv.data(), environ), 0);
  const std::string ch = NewChannel();
  v1::CmId id = NewId(pd, ch);
  v1::WatchEventsRequest wr;
  wr.set_channel(ch);
  Watch events(wr);
  v1::ConnectRequest c;
  c.set_name(id.name());
  c.mutable_remote()->set_address(Addr());
  c.mutable_remote()->set_port(7900);
  v1::CmId connected;
  grpc::Status s;
  for (int attempt = 0; attempt < 50; ++attempt) {  // rping -s needs a moment to listen
    s = Call(Api().ids.get(), &v1::CmIds::Stub::Connect, c, &connected);
    if (s.ok()) break;
    ASSERT_TRUE(DeleteId(id.name()).ok());
    id = NewId(pd, ch);
    c.set_name(id.name());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_RPC_OK(s);
  EXPECT_EQ(connected.state(), v1::CM_CONNECTED);
  EXPECT_EQ(connected.remote().port(), 7900u);
  EXPECT_EQ(events.WaitFor(id.name(), "RDMA_CM_EVENT_ESTABLISHED").channel(), ch);
  v1::GetQpRequest gq;
  gq.set_name(connected.qp());
  v1::QueuePair qp;
  ASSERT_RPC_OK(Call(Api().qps.get(), &v1::QueuePairs::Stub::GetQp, gq, &qp));
  EXPECT_EQ(qp.cm_id(), id.name());
  EXPECT_EQ(qp.state(), v1::QP_RTS);
  ASSERT_RPC_OK(DeleteId(id.name()));
  kill(rping, SIGTERM);
  waitpid(rping, nullptr, 0);
  v1::DeleteChannelRequest dc;
  dc.set_name(ch);
  v1::DeleteChannelResponse dr;
  ASSERT_RPC_OK(Call(Api().channels.get(), &v1::EventChannels::Stub::DeleteChannel, dc, &dr));
  DeletePd(pd);
}

TEST(CmConformance, DataPlaneListenerAcceptsATokenOnAWorkerChannelAndReleasesOnDisconnect) {
  const std::string pd = NewPd();
  const std::string token = IssueToken(pd);
  ASSERT_EQ(token.size(), 32u);
  std::set<std::string> before;
  for (const auto& id : ListIds()) before.insert(id.name());
  auto peer = std::make_unique<CmPeer>();
  CmPeer::Result r = peer->Dial(Addr(), 7471, token);
  ASSERT_EQ(r.outcome, CmPeer::Outcome::kEstablished) << r.event << " " << r.error;
  std::string accepted;
  ASSERT_TRUE(test::Eventually(
      [&] {
        for (const auto& id : ListIds()) {
          if (!before.count(id.name()) && id.data_plane() && id.state() == v1::CM_CONNECTED) accepted = id.name();
        }
        return !accepted.empty();
      },
      absl::Seconds(20), absl::Milliseconds(10)));
  v1::CmId id = GetId(accepted);
  v1::GetChannelRequest gc;
  gc.set_name(id.channel());
  v1::EventChannel ch;
  ASSERT_RPC_OK(Call(Api().channels.get(), &v1::EventChannels::Stub::GetChannel, gc, &ch));
  EXPECT_EQ(ch.role(), v1::CHANNEL_WORKER);
  EXPECT_EQ(id.counters().migrations(), 1u);
  v1::GetQpRequest gq;
  gq.set_name(id.qp());
  v1::QueuePair qp;
  ASSERT_RPC_OK(Call(Api().qps.get(), &v1::QueuePairs::Stub::GetQp, gq, &qp));
  EXPECT_EQ(qp.pd(), pd);
  EXPECT_EQ(qp.state(), v1::QP_RTS);
  EXPECT_EQ(peer->Disconnect(), "");
  peer.reset();
  grpc::Status gone;
  test::Eventually(
      [&] {
        GetId(accepted, &gone);
        return gone.error_code() == grpc::StatusCode::NOT_FOUND;
      },
      absl::Seconds(20), absl::Milliseconds(10));
  EXPECT_EQ(gone.error_code(), grpc::StatusCode::NOT_FOUND);
  DeletePd(pd);
}

TEST(CmConformance, BadTokensAreRejectedWithTheDocumentedReasonAndTheListenerKeepsServing) {
  const std::string pd = NewPd();
  const std::string used = IssueToken(pd);
  {
    CmPeer first;
    ASSERT_EQ(first.Dial(Addr(), 7471, used).outcome, CmPeer::Outcome::kEstablished);
  }
  const std::string expired = IssueToken(pd, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::string wrong_version = IssueToken(pd);
  wrong_version[4] = 9;
  std::string truncated = IssueToken(pd).substr(0, 20);
  std::string trailing = IssueToken(pd) + std::string(8, '\x7f');
  std::string unknown = IssueToken(pd);
  unknown[31] ^= 0x55;  // the secret's last byte
  struct Case {
    const char* what;
    std::string data;
    cm::RejectReason reason;
  };
  for (const Case& c : {Case{"missing", "", cm::RejectReason::kMissing},
                        Case{"malformed", std::string(32, 'x'), cm::RejectReason::kMalformed},
                        // The IB CM pads to 56 bytes: cut inside the secret, it reads as a token with
                        // the wrong secret (docs/PROTOCOL.md).
                        Case{"truncated", truncated, cm::RejectReason::kUnknown},
                        Case{"oversized", trailing, cm::RejectReason::kMalformed},
                        Case{"wrong version", wrong_version, cm::RejectReason::kWrongVersion},
                        Case{"unknown", unknown, cm::RejectReason::kUnknown},
                        Case{"expired", expired, cm::RejectReason::kExpired},
                        Case{"replayed", used, cm::RejectReason::kReplayed}}) {
    CmPeer peer;
    CmPeer::Result r = peer.Dial(Addr(), 7471, c.data);
    ASSERT_EQ(r.outcome, CmPeer::Outcome::kRejected) << c.what << ": " << r.event << " " << r.error;
    absl::StatusOr<cm::Reject> why = cm::DecodeReject(r.private_data);
    ASSERT_TRUE(why.ok()) << c.what << ": " << why.status();
    EXPECT_EQ(why->reason, c.reason) << c.what << ": got " << cm::RejectReasonName(why->reason);
  }
  CmPeer after;
  EXPECT_EQ(after.Dial(Addr(), 7471, IssueToken(pd)).outcome, CmPeer::Outcome::kEstablished);
  after.Disconnect();
  EXPECT_EQ(WaitDataPlaneConnectionsGone(), 0);
  DeletePd(pd);
}

TEST(CmConformance, AfterMigrationDisconnectArrivesOnTheNewChannelOnly) {
  const std::string pd = NewPd();
  const std::string target = NewChannel();
  auto [active, passive] = ConnectPair(pd, 7601);
  const std::string old_channel = passive.channel();
  v1::WatchEventsRequest all;
  Watch events(all);
  v1::CmId moved;
  ASSERT_RPC_OK(Migrate(passive.name(), target, &moved));
  EXPECT_EQ(moved.channel(), target);
  EXPECT_EQ(moved.qp(), passive.qp());
  v1::DisconnectRequest d;
  d.set_name(active.name());
  v1::CmId out;
  ASSERT_RPC_OK(Call(Api().ids.get(), &v1::CmIds::Stub::Disconnect, d, &out));
  v1::CmEvent e = events.WaitFor(passive.name(), "RDMA_CM_EVENT_DISCONNECTED");
  EXPECT_EQ(e.channel(), target);
  EXPECT_NE(e.channel(), old_channel);
  // No second DISCONNECTED, on either channel: whatever their dispatchers published has arrived by now.
  FlushChannel(events, pd, old_channel);
  FlushChannel(events, pd, target);
  EXPECT_EQ(events.Count(passive.name(), "RDMA_CM_EVENT_DISCONNECTED"), 1);
  ASSERT_RPC_OK(DeleteId(active.name()));
  ASSERT_RPC_OK(DeleteId(passive.name()));
  DeletePd(pd);
}

TEST(CmConformance, AnIdMigratedBeforeConnectGetsEstablishedOnItsNewChannel) {
  const std::string pd = NewPd();
  const std::string target = NewChannel();
  v1::WatchEventsRequest all;
  Watch events(all);
  // Create, migrate, then connect: ESTABLISHED must follow the id (a pitfall seen in the field).
  v1::CmId listener = NewId(pd);
  v1::ListenRequest listen;
  listen.set_name(listener.name());
  listen.mutable_address()->set_address(Addr());
  listen.mutable_address()->set_port(7602);
  v1::CmId out;
  ASSERT_RPC_OK(Call(Api().ids.get(), &v1::CmIds::Stub::Listen, listen, &out));
  v1::CmId active = NewId(pd);
  v1::CmId moved;
  ASSERT_RPC_OK(Migrate(active.name(), target, &moved));
  v1::ConnectRequest c;
  c.set_name(active.name());
  c.mutable_remote()->set_address(Addr());
  c.mutable_remote()->set_port(7602);
  grpc::Status connect_status;
  v1::CmId connected;
  std::thread connector([&] { connect_status = Call(Api().ids.get(), &v1::CmIds::Stub::Connect, c, &connected); });
  const std::string passive = WaitConnectRequest(listener.name());
  ASSERT_FALSE(passive.empty());
  v1::AcceptRequest a;
  a.set_name(passive);
  ASSERT_RPC_OK(Call(Api().ids.get(), &v1::CmIds::Stub::Accept, a, &out));
  connector.join();
  ASSERT_RPC_OK(connect_status);
  EXPECT_EQ(events.WaitFor(active.name(), "RDMA_CM_EVENT_ESTABLISHED").channel(), target);
  for (const std::string& n : {active.name(), passive, listener.name()}) ASSERT_RPC_OK(DeleteId(n));
  DeletePd(pd);
}

TEST(CmConformance, MigrationRacingADisconnectNeitherHangsNorLeaks) {
  const std::string pd = NewPd();
  const std::string target = NewChannel();
  // Named, not structured bindings: the threads' lambdas capture them (clang 14 refuses a captured binding).
  const auto [active_id, passive_id] = ConnectPair(pd, 7603);
  const std::string active = active_id.name(), passive = passive_id.name();
  grpc::Status migrated, disconnected;
  std::thread a([&] {
    v1::CmId out;
    migrated = Migrate(passive, target, &out);
  });
  std::thread b([&] {
    v1::DisconnectRequest d;
    d.set_name(active);
    v1::CmId out;
    disconnected = Call(Api().ids.get(), &v1::CmIds::Stub::Disconnect, d, &out);
  });
  a.join();
  b.join();
  EXPECT_TRUE(migrated.ok()) << migrated.error_message();
  EXPECT_TRUE(disconnected.ok()) << disconnected.error_message();
  EXPECT_EQ(GetId(passive).channel(), target);
  ASSERT_RPC_OK(DeleteId(active));
  ASSERT_RPC_OK(DeleteId(passive));
  DeletePd(pd);
}

TEST(CmConformance, DeletingAChannelEndsItsWatchStreamCleanly) {
  const std::string ch = NewChannel();
  v1::WatchEventsRequest wr;
  wr.set_channel(ch);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto reader = Api().ids->WatchEvents(&ctx, wr);
  reader->WaitForInitialMetadata();  // the watch is registered: DeleteChannel below ends it
  v1::DeleteChannelRequest dc;
  dc.set_name(ch);
  v1::DeleteChannelResponse dr;
  ASSERT_RPC_OK(Call(Api().channels.get(), &v1::EventChannels::Stub::DeleteChannel, dc, &dr));
  v1::CmEvent e;
  while (reader->Read(&e)) {
  }
  grpc::Status end = reader->Finish();
  EXPECT_TRUE(end.ok()) << end.error_code() << " " << end.error_message();
}

TEST(CmConformance, AWatcherThatNeverReadsIsCutOffWithACountWhileAnotherKeepsUp) {
  // rdmad runs with "watch_buffer": 128 here. The stalled stream's HTTP/2 window is kept small, so
  // rdmad's writes to it stop soon and its buffer fills.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 1024);
  auto stalled_channel =
      grpc::CreateCustomChannel(Env("RDMAD_TARGET", "unix:/run/rdmad/rdmad.sock"), grpc::InsecureChannelCredentials(), args);
  auto stalled_stub = v1::CmIds::NewStub(stalled_channel);
  grpc::ClientContext stalled_ctx;
  stalled_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  auto stalled = stalled_stub->WatchEvents(&stalled_ctx, v1::WatchEventsRequest());
  v1::WatchEventsRequest all;
  Watch keeping_up(all);
  const std::string pd = NewPd();
  constexpr int kConnections = 60;  // about 6 events each
  for (int i = 0; i < kConnections; ++i) {
    CmPeer peer;
    ASSERT_EQ(peer.Dial(Addr(), 7471, IssueToken(pd)).outcome, CmPeer::Outcome::kEstablished) << i;
  }
  // Now read the stalled stream: what it got before the cut, then the end.
  v1::CmEvent e;
  int got = 0;
  while (stalled->Read(&e)) ++got;
  grpc::Status end = stalled->Finish();
  EXPECT_EQ(end.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << end.error_message();
  EXPECT_NE(end.error_message().find("dropped"), std::string::npos) << end.error_message();
  EXPECT_NE(end.error_message().find("after_sequence = "), std::string::npos) << end.error_message();
  EXPECT_LT(got, kConnections * 5);
  // The other watcher saw the connections' events, through to the end: each connection's CONNECT_REQUEST
  // on rdmad's side. (Not its ESTABLISHED: on rxe a lost RTU followed by the peer's DREQ takes rdmad's id
  // from REP_SENT straight to DISCONNECTED, as ib_cm does, so a connection can rightly have none.)
  int requests = 0;
  test::Eventually(
      [&] { return (requests = keeping_up.CountType("RDMA_CM_EVENT_CONNECT_REQUEST")) >= kConnections; },
      absl::Seconds(10), absl::Milliseconds(10));
  EXPECT_GE(requests, kConnections);
  std::printf("[          ] the stalled watcher read %d events before its cut; the other saw %d CONNECT_REQUEST, "
              "%d ESTABLISHED\n",
              got, requests, keeping_up.CountType("RDMA_CM_EVENT_ESTABLISHED"));
  EXPECT_EQ(WaitDataPlaneConnectionsGone(), 0);
  DeletePd(pd);
}

TEST(CmConformance, HundredConnectionsSpreadOverTheWorkersAndAllGoAfterDisconnect) {
  const std::string pd = NewPd();
  constexpr int kConnections = 100;
  std::vector<std::unique_ptr<CmPeer>> peers;
  for (int i = 0; i < kConnections; ++i) {
    peers.push_back(std::make_unique<CmPeer>());
    CmPeer::Result r = peers.back()->Dial(Addr(), 7471, IssueToken(pd));
    ASSERT_EQ(r.outcome, CmPeer::Outcome::kEstablished) << i << ": " << r.event << " " << r.error;
  }
  std::map<std::string, int> per_channel;
  test::Eventually(
      [&] {
        per_channel.clear();
        int connected = 0;
        for (const auto& id : ListIds()) {
          if (id.data_plane() && !id.listener().empty() && id.state() == v1::CM_CONNECTED) {
            connected++;
            per_channel[id.channel()]++;
          }
        }
        return connected == kConnections;
      },
      absl::Seconds(20), absl::Milliseconds(10));
  int total = 0;
  for (const auto& [ch, n] : per_channel) total += n;
  EXPECT_EQ(total, kConnections);
  EXPECT_GE(per_channel.size(), 2u) << "accepted connections were not spread over the worker channels";
  for (const auto& [ch, n] : per_channel) EXPECT_GE(n, kConnections / 4) << ch;
  peers.clear();  // each disconnects
  EXPECT_EQ(WaitDataPlaneConnectionsGone(), 0);
  DeletePd(pd);
}

}  // namespace
}  // namespace rdmad::testing
