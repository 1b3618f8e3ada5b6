// CmManager (server/cm/manager.h) over the fake fabric and the fake rdma_cm (tests/unit/fake_cm.h):
// channels as dispatchers, ids through their life, migration (pending events move exactly once), the
// event stream and its overflow, the token-checked data-plane listener, and teardown. Waits are bounded
// event waits (a latch that opens when the awaited event is published), never timing assertions.
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/cm/manager.h"
#include "server/cm/token.h"
#include "server/common/status.h"
#include "server/common/sync.h"
#include "server/dataplane/listener.h"
#include "tests/support/eventually.h"
#include "tests/support/server_status.h"
#include "tests/unit/fake_cm.h"
#include "tests/unit/fake_fabric.h"

namespace rdmad::cm {
namespace {

using ::rdmad::test::IsError;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kAddr[] = "10.0.2.15";

class CmManagerTest : public ::testing::Test {
 protected:
  void Build(std::vector<fabric::SockAddr> listen = {}, size_t watcher_capacity = 1024,
             std::function<void(CmManager::Options&)> tweak = nullptr) {
    ledger_ = std::make_shared<fake::FakeLedger>();
    auto fabric = std::make_unique<fake::FakeFabric>(
        std::vector<fabric::DeviceInfo>{fake::MakeDeviceInfo("rxe0")}, ledger_);
    fake_cm_ = std::make_unique<fake::FakeCm>(fabric->devices(), std::map<std::string, std::string>{{kAddr, "rxe0"}});
    fabric->set_cm(fake_cm_.get());
    registry_ = std::make_unique<Registry>(std::move(fabric), Registry::Options());
    CmManager::Options options;
    options.workers = 2;
    options.events.watcher_capacity = watcher_capacity;
    if (tweak) tweak(options);
    manager_ = std::make_unique<CmManager>(fake_cm_.get(), registry_.get(), options);
    ASSERT_TRUE(manager_->Start().ok());
    dataplane::Listener::Options data_plane;
    data_plane.listen = std::move(listen);
    listener_ = std::make_unique<dataplane::Listener>(manager_.get(), registry_.get(), &tokens_, data_plane);
    ASSERT_TRUE(listener_->Start().ok());
    v1::CreatePdRequest pd;
    pd.set_device("rxe0");
    pd_ = registry_->CreatePd(pd).value().name();
  }
  void TearDown() override {
    if (!manager_) return;
    manager_->Quiesce();
    manager_.reset();
    listener_.reset();
    registry_.reset();
    EXPECT_THAT(fake_cm_->violations(), IsEmpty());
    EXPECT_EQ(fake_cm_->live().ids, 0);
    EXPECT_EQ(fake_cm_->live().channels, 0);
    EXPECT_THAT(ledger_->violations(), IsEmpty());
    fake::FakeLedger::Counts c = ledger_->live();
    EXPECT_EQ(c.pds + c.mrs + c.mws + c.qps, 0);
  }

  v1::CmId NewId(const std::string& channel = "") {
    v1::CreateCmIdRequest r;
    r.set_pd(pd_);
    r.set_channel(channel);
    return AwaitResult<v1::CmId>([&](Done<v1::CmId> d) { manager_->CreateCmId(r, std::move(d)); }).value();
  }
  std::string NewChannel() {
    return manager_->CreateChannel(v1::CreateChannelRequest()).value().name();
  }
  absl::StatusOr<v1::CmId> Listen(const std::string& id, uint32_t port) {
    v1::ListenRequest r;
    r.set_name(id);
    r.mutable_address()->set_address(kAddr);
    r.mutable_address()->set_port(port);
    return AwaitResult<v1::CmId>([&](Done<v1::CmId> d) { manager_->Listen(r, std::move(d)); });
  }
  v1::ConnectRequest ConnectReq(const std::string& id, uint32_t port, const std::string& data = "hello") {
    v1::ConnectRequest r;
    r.set_name(id);
    r.mutable_remote()->set_address(kAddr);
    r.mutable_remote()->set_port(port);
    r.set_private_data(data);
    return r;
  }
  template <typename Call>
  absl::StatusOr<v1::CmId> Run(Call call) {
    return AwaitResult<v1::CmId>([&](Done<v1::CmId> d) { call(std::move(d)); });
  }
  // Waits (bounded) for the next event the watcher gets.
  static absl::StatusOr<v1::CmEvent> NextEvent(Watcher& w) {
    absl::StatusOr<v1::CmEvent> out = absl::DeadlineExceededError("no event within 10 s");
    test::Eventually([&] {
      if (std::optional<v1::CmEvent> e = w.Next()) {
        out = *e;
      } else if (std::optional<absl::Status> closed = w.Closed()) {
        out = closed->ok() ? absl::OutOfRangeError("the stream ended cleanly") : *closed;
      } else {
        return false;
      }
      return true;
    });
    return out;
  }
  static absl::StatusOr<v1::CmEvent> NextOfType(Watcher& w, const std::string& type) {
    for (int i = 0; i < 64; ++i) {
      absl::StatusOr<v1::CmEvent> e = NextEvent(w);
      if (!e.ok() || e->type() == type) return e;
    }
    return absl::NotFoundError(type);
  }
  // UsageOfPd's running totals (a tenant's cm_ids and connections quotas) must equal the list's count.
  void ExpectUsageMatchesTheList(const char* when) {
    SCOPED_TRACE(when);
    uint64_t ids = 0, connections = 0;
    const std::vector<v1::CmId> all = manager_->ListCmIds(v1::ListCmIdsRequest()).value();
    for (const v1::CmId& id : all) {
      if (id.pd() != pd_) continue;
      if (!id.data_plane()) ids++;
      if (id.state() == v1::CM_CONNECTED || id.state() == v1::CM_CONNECTING || id.state() == v1::CM_CONNECT_REQUEST) {
        connections++;
      }
    }
    const CmManager::PdUsage u = manager_->UsageOfPd(pd_);
    EXPECT_EQ(u.ids, ids);
    EXPECT_EQ(u.connections, connections);
  }
  std::shared_ptr<Watcher> Watch(EventFilter filter = {}) { return manager_->events().Subscribe(std::move(filter), 0); }

  // A listener on `port` and a connected pair: returns {active, passive}.
  std::pair<v1::CmId, v1::CmId> Connected(uint32_t port, const std::string& active_channel = "") {
    v1::CmId listener = NewId();
    EXPECT_TRUE(Listen(listener.name(), port).ok());
    auto w = Watch(EventFilter{"", listener.name(), {"RDMA_CM_EVENT_CONNECT_REQUEST"}});
    v1::CmId active = NewId(active_channel);
    Notification connected;
    absl::StatusOr<v1::CmId> result = absl::UnknownError("");
    manager_->Connect(ConnectReq(active.name(), port), [&](absl::StatusOr<v1::CmId> r) {
      result = r;
      connected.Notify();
    });
    absl::StatusOr<v1::CmEvent> request = NextEvent(*w);
    EXPECT_TRUE(request.ok()) << request.status();
    v1::AcceptRequest accept;
    accept.set_name(request->cm_id());
    accept.set_private_data("welcome");
    absl::StatusOr<v1::CmId> passive = Run([&](Done<v1::CmId> d) { manager_->Accept(accept, std::move(d)); });
    EXPECT_TRUE(passive.ok()) << passive.status();
    EXPECT_TRUE(connected.WaitForNotificationWithTimeout(absl::Seconds(10)));
    EXPECT_TRUE(result.ok()) << result.status();
    manager_->events().Unsubscribe(w);
    return {result.ok() ? *result : active, passive.ok() ? *passive : v1::CmId()};
  }

  TokenStore tokens_;
  // The name of a data-plane connection the listener accepted, once it is CONNECTED (empty after 10 s without).
  std::string ConnectedDataPlaneId() {
    std::string accepted;
    test::Eventually([&] {
      const std::vector<v1::CmId> all = manager_->ListCmIds(v1::ListCmIdsRequest()).value();
      for (const v1::CmId& id : all) {
        if (id.data_plane() && !id.listener().empty() && id.state() == v1::CM_CONNECTED) accepted = id.name();
      }
      return !accepted.empty();
    });
    return accepted;
  }
  std::unique_ptr<dataplane::Listener> listener_;  // outlives manager_, whose dispatchers call it
  std::shared_ptr<fake::FakeLedger> ledger_;
  std::unique_ptr<fake::FakeCm> fake_cm_;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<CmManager> manager_;
  std::string pd_;
};

TEST_F(CmManagerTest, StartMakesADefaultAndWorkerChannelsEachServedByItsOwnThread) {
  Build();
  std::vector<v1::EventChannel> channels = manager_->ListChannels().value();
  ASSERT_EQ(channels.size(), 3u);
  EXPECT_EQ(channels[0].name(), "channels/1");
  EXPECT_EQ(channels[0].role(), v1::CHANNEL_DEFAULT);
  EXPECT_EQ(channels[1].role(), v1::CHANNEL_WORKER);
  EXPECT_EQ(channels[2].role(), v1::CHANNEL_WORKER);
  std::set<int> tids;
  for (const auto& c : channels) {
    EXPECT_EQ(c.thread(), absl::StrCat("cm-", c.name().substr(9)));
    tids.insert(c.thread_id());
  }
  EXPECT_EQ(tids.size(), 3u);
  EXPECT_TRUE(IsError(manager_->DeleteChannel("channels/2"), absl::StatusCode::kFailedPrecondition, "name"));
}

TEST_F(CmManagerTest, ConnectAcceptEstablishesBothSidesAndTheirQpsAreQueuePairs) {
  Build();
  v1::CmId active, passive;
  std::tie(active, passive) = Connected(7471, NewChannel());
  EXPECT_EQ(active.state(), v1::CM_CONNECTED);
  EXPECT_EQ(active.remote().port(), 7471u);
  ASSERT_FALSE(active.qp().empty());
  v1::QueuePair qp = registry_->GetQp(active.qp()).value();
  EXPECT_EQ(qp.cm_id(), active.name());
  EXPECT_EQ(qp.state(), v1::QP_RTS);
  EXPECT_EQ(passive.state(), v1::CM_CONNECTING);
  EXPECT_THAT(passive.listener(), HasSubstr("cmids/"));
  ExpectUsageMatchesTheList("connected");
  EXPECT_EQ(manager_->UsageOfPd(pd_).connections, 2u);
  // rdma_cm owns these QPs: the QueuePairs API refuses to delete or reconnect them.
  EXPECT_TRUE(IsError(registry_->DeleteQp(active.qp()), absl::StatusCode::kFailedPrecondition, "name"));
  // A type 2 window bound on the id's QP keeps the id from being deleted.
  v1::RegisterMrRequest mr;
  mr.set_pd(pd_);
  mr.mutable_source()->mutable_anonymous()->set_size(8192);
  for (v1::Access a : {v1::LOCAL_WRITE, v1::REMOTE_READ, v1::MW_BIND}) mr.add_access(a);
  const std::string mr_name = registry_->RegisterMr(mr).value().name();
  v1::AllocMwRequest mw;
  mw.set_pd(pd_);
  mw.set_type(v1::TYPE_2);
  const std::string mw_name = registry_->AllocMw(mw).value().name();
  v1::BindMwRequest bind;
  bind.set_name(mw_name);
  bind.set_mr(mr_name);
  bind.set_length(4096);
  bind.add_access(v1::REMOTE_READ);
  bind.set_qp(active.qp());
  ASSERT_TRUE(registry_->BindMw(bind).ok());
  absl::StatusOr<v1::CmId> refused = Run([&](Done<v1::CmId> d) { manager_->DeleteCmId(active.name(), std::move(d)); });
  EXPECT_TRUE(IsError(refused, absl::StatusCode::kFailedPrecondition, "name"));
  EXPECT_EQ(ErrnoOf(refused.status()), EBUSY);
  ASSERT_TRUE(registry_->InvalidateMw(mw_name).ok());
  auto w = Watch(EventFilter{"", passive.name(), {"RDMA_CM_EVENT_DISCONNECTED"}});
  ASSERT_TRUE(Run([&](Done<v1::CmId> d) { manager_->DeleteCmId(active.name(), std::move(d)); }).ok());
  EXPECT_TRUE(NextEvent(*w).ok());  // the peer saw the disconnect
  EXPECT_TRUE(IsError(registry_->GetQp(active.qp()), absl::StatusCode::kNotFound, "name"));
  ExpectUsageMatchesTheList("after the active side was deleted");
  EXPECT_TRUE(registry_->DeallocMw(mw_name).ok());
  EXPECT_TRUE(registry_->DeregisterMr(mr_name).ok());
}

TEST_F(CmManagerTest, AfterMigrationEventsArriveOnTheNewChannelOnly) {
  Build();
  const std::string target = NewChannel();
  v1::CmId active, passive;
  std::tie(active, passive) = Connected(7472);
  const std::string old_channel = passive.channel();
  v1::MigrateCmIdRequest m;
  m.set_name(passive.name());
  m.set_channel(target);
  absl::StatusOr<v1::CmId> moved =
      Run([&](Done<v1::CmId> d) { manager_->Migrate(m, absl::InfiniteFuture(), std::move(d)); });
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(moved->channel(), target);
  EXPECT_EQ(moved->name(), passive.name());
  EXPECT_EQ(moved->qp(), passive.qp());  // keeps its name and its QP
  EXPECT_EQ(moved->counters().migrations(), 1u);
  auto on_id = Watch(EventFilter{"", passive.name(), {}});
  ASSERT_TRUE(Run([&](Done<v1::CmId> d) { manager_->Disconnect(active.name(), std::move(d)); }).ok());
  absl::StatusOr<v1::CmEvent> e = NextOfType(*on_id, "RDMA_CM_EVENT_DISCONNECTED");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->channel(), target);
  EXPECT_NE(e->channel(), old_channel);
  EXPECT_EQ(manager_->GetCmId(passive.name()).value().state(), v1::CM_DISCONNECTED);
  EXPECT_THAT(manager_->GetChannel(target).value().cm_ids(), ::testing::Contains(passive.name()));
}

TEST_F(CmManagerTest, EventsPendingAtMigrationArriveOnceOnTheNewChannel) {
  Build();
  const std::string target = NewChannel();
  v1::CmId active, passive;
  std::tie(active, passive) = Connected(7473);
  auto on_id = Watch(EventFilter{"", passive.name(), {"RDMA_CM_EVENT_DISCONNECTED"}});
  fake_cm_->Hold();  // the passive side's DISCONNECTED waits in its old channel
  ASSERT_TRUE(Run([&](Done<v1::CmId> d) { manager_->Disconnect(active.name(), std::move(d)); }).ok());
  v1::MigrateCmIdRequest m;
  m.set_name(passive.name());
  m.set_channel(target);
  ASSERT_TRUE(Run([&](Done<v1::CmId> d) { manager_->Migrate(m, absl::InfiniteFuture(), std::move(d)); }).ok());
  fake_cm_->Release();
  absl::StatusOr<v1::CmEvent> e = NextEvent(*on_id);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->channel(), target);
  // Exactly once: deleting the id ends its watchers' streams; nothing else came before the end.
  ASSERT_TRUE(Run([&](Done<v1::CmId> d) { manager_->DeleteCmId(passive.name(), std::move(d)); }).ok());
  absl::StatusOr<v1::CmEvent> end = NextEvent(*on_id);
  EXPECT_EQ(end.status().code(), absl::StatusCode::kOutOfRange) << "a second DISCONNECTED arrived";
}

TEST_F(CmManagerTest, AnIdMigratedBeforeConnectGetsEstablishedOnItsNewChannel) {
  Build();
  const std::string target = NewChannel();
  v1::CmId listener = NewId();
  ASSERT_TRUE(Listen(listener.name(), 7474).ok());
  auto requests = Watch(EventFilter{"", listener.name(), {"RDMA_CM_EVENT_CONNECT_REQUEST"}});
  v1::CmId active = NewId();
  v1::MigrateCmIdRequest m;
  m.set_name(active.name());
  m.set_channel(target);
  ASSERT_TRUE(Run([&](Done<v1::CmId> d) { manager_->Migrate(m, absl::InfiniteFuture(), std::move(d)); }).ok());
  auto established = Watch(EventFilter{"", active.name(), {"RDMA_CM_EVENT_ESTABLISHED"}});
  Notification connected;
  manager_->Connect(ConnectReq(active.name(), 7474), [&](absl::StatusOr<v1::CmId> r) {
    EXPECT_TRUE(r.ok()) << r.status();
    connected.Notify();
  });
  absl::StatusOr<v1::CmEvent> request = NextEvent(*requests);
  ASSERT_TRUE(request.ok());
  v1::AcceptRequest accept;
  accept.set_name(request->cm_id());
  ASSERT_TRUE(Run([&](Done<v1::CmId> d) { manager_->Accept(accept, std::move(d)); }).ok());
  ASSERT_TRUE(connected.WaitForNotificationWithTimeout(absl::Seconds(10)));
  absl::StatusOr<v1::CmEvent> e = NextEvent(*established);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->channel(), target);
}

TEST_F(CmManagerTest, MigrationArgumentsAndDeadline) {
  Build();
  v1::CmId id = NewId();
  v1::MigrateCmIdRequest m;
  m.set_name(id.name());
  EXPECT_TRUE(IsError(Run([&](Done<v1::CmId> d) { manager_->Migrate(m, absl::InfiniteFuture(), std::move(d)); }),
                      absl::StatusCode::kInvalidArgument, "channel"));
  m.set_channel("channels/99");
  EXPECT_TRUE(IsError(Run([&](Done<v1::CmId> d) { manager_->Migrate(m, absl::InfiniteFuture(), std::move(d)); }),
                      absl::StatusCode::kNotFound, "channel"));
  m.set_channel(NewChannel());
  absl::StatusOr<v1::CmId> late =
      Run([&](Done<v1::CmId> d) { manager_->Migrate(m, absl::InfinitePast(), std::move(d)); });
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(manager_->GetCmId(id.name()).value().channel(), "channels/1");  // nothing changed
}

TEST_F(CmManagerTest, AnIdDeletedOnItsNewChannelWhileItsMigrationAnswersIsNotReadAgain) {
  // The API fuzzer's race on rxe: MigrateCmId and DeleteCmId at once. Once the id is on its new channel,
  // that channel's loop may destroy it; the migration's answer must not be read from the id after that (a
  // destroyed id's bytes reached a client). Under ASan (tests/sanitizers) any such read is reported.
  Build();
  const std::string to = NewChannel();
  for (int round = 0; round < 100; ++round) {
    const v1::CmId id = NewId();
    v1::MigrateCmIdRequest m;
    m.set_name(id.name());
    m.set_channel(to);
    Notification migrated;
    absl::StatusOr<v1::CmId> answer = absl::UnknownError("none");
    manager_->Migrate(m, absl::InfiniteFuture(), [&](absl::StatusOr<v1::CmId> r) {
      answer = std::move(r);
      migrated.Notify();
    });
    absl::StatusOr<v1::CmId> deleted = Run([&](Done<v1::CmId> d) { manager_->DeleteCmId(id.name(), std::move(d)); });
    migrated.WaitForNotification();
    ASSERT_TRUE(deleted.ok()) << deleted.status();
    if (answer.ok()) {
      EXPECT_EQ(answer->name(), id.name());
      EXPECT_EQ(answer->channel(), to);
    } else {
      EXPECT_EQ(answer.status().code(), absl::StatusCode::kNotFound) << answer.status();
    }
  }
}

TEST_F(CmManagerTest, RejectAndNoListenerFailTheConnectWithTheReason) {
  Build();
  v1::CmId lonely = NewId();
  absl::StatusOr<v1::CmId> r = Run([&](Done<v1::CmId> d) { manager_->Connect(ConnectReq(lonely.name(), 7999), std::move(d)); });
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(manager_->GetCmId(lonely.name()).value().state(), v1::CM_REJECTED);

  v1::CmId listener = NewId();
  ASSERT_TRUE(Listen(listener.name(), 7475).ok());
  auto requests = Watch(EventFilter{"", listener.name(), {"RDMA_CM_EVENT_CONNECT_REQUEST"}});
  v1::CmId active = NewId();
  Notification finished;
  absl::Status connect_status;
  manager_->Connect(ConnectReq(active.name(), 7475), [&](absl::StatusOr<v1::CmId> r) {
    connect_status = r.status();
    finished.Notify();
  });
  absl::StatusOr<v1::CmEvent> request = NextEvent(*requests);
  ASSERT_TRUE(request.ok());
  EXPECT_EQ(request->private_data().substr(0, 5), "hello");
  v1::RejectRequest reject;
  reject.set_name(request->cm_id());
  reject.set_private_data(EncodeReject(Reject{RejectReason::kUnknown, 0}));
  ASSERT_TRUE(Run([&](Done<v1::CmId> d) { manager_->Reject(reject, std::move(d)); }).ok());
  EXPECT_TRUE(IsError(manager_->GetCmId(request->cm_id()), absl::StatusCode::kNotFound, "name"));
  ASSERT_TRUE(finished.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(connect_status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(connect_status.message()), HasSubstr("TOKEN_UNKNOWN"));
}

// A client of the data-plane listener, driven directly on the fake rdma_cm (not through rdmad).
struct Client {
  std::unique_ptr<fabric::CmChannel> channel;
  std::unique_ptr<fabric::CmId> id;
  // Connects with `data` and returns the event that answers (ESTABLISHED, REJECTED, ...).
  fabric::CmEvent Dial(fake::FakeCm& cm, const std::string& data, uint32_t port) {
    channel = cm.CreateChannel().value();
    id = channel->CreateId(1).value();
    EXPECT_TRUE(id->ResolveAddr({kAddr, static_cast<uint16_t>(port)}, 1000).ok());
    for (const char* want : {"ADDR", "ROUTE"}) {
      std::vector<fabric::CmEvent> e = Wait();
      EXPECT_EQ(e.size(), 1u) << want;
      if (std::string(want) == "ADDR") {
        EXPECT_TRUE(id->ResolveRoute(1000).ok());
      }
    }
    EXPECT_TRUE(id->Connect(data).ok());
    std::vector<fabric::CmEvent> e = Wait();
    return e.empty() ? fabric::CmEvent{} : std::move(e.front());
  }
  std::vector<fabric::CmEvent> Wait() {
    std::vector<fabric::CmEvent> e;
    test::Eventually([&] { return !(e = channel->Drain()).empty(); });
    return e;
  }
};

TEST_F(CmManagerTest, DataPlaneListenerAcceptsAGoodTokenOnAWorkerAndRejectsBadOnesWithTheReason) {
  Build({{kAddr, 7471}});
  v1::IssueConnectTokenRequest issue;
  issue.set_pd(pd_);
  absl::StatusOr<v1::ConnectToken> token = listener_->IssueConnectToken(issue);
  ASSERT_TRUE(token.ok()) << token.status();
  ASSERT_EQ(token->endpoints_size(), 1);
  EXPECT_EQ(token->endpoints(0).port(), 7471u);
  // A token only for a PD that exists: none is issued for a malformed name, another kind's or a missing PD.
  const size_t outstanding = tokens_.Outstanding();
  for (const auto& [pd, code] : std::vector<std::pair<std::string, absl::StatusCode>>{
           {"pds/x", absl::StatusCode::kInvalidArgument},
           {"mrs/1", absl::StatusCode::kInvalidArgument},
           {"pds/999", absl::StatusCode::kNotFound}}) {
    v1::IssueConnectTokenRequest bad;
    bad.set_pd(pd);
    EXPECT_TRUE(IsError(listener_->IssueConnectToken(bad), code, "pd")) << pd;
  }
  EXPECT_EQ(tokens_.Outstanding(), outstanding);

  Client good;
  fabric::CmEvent answer = good.Dial(*fake_cm_, token->token(), 7471);
  EXPECT_EQ(answer.type, fabric::CmEventType::kConnectResponse);  // a client without a QP: it finishes itself
  ASSERT_TRUE(good.id->Accept("").ok());
  // The accepted id lives on a worker channel with a QP on the token's PD.
  const std::string accepted = ConnectedDataPlaneId();
  ASSERT_FALSE(accepted.empty());
  v1::CmId id = manager_->GetCmId(accepted).value();
  EXPECT_EQ(manager_->GetChannel(id.channel()).value().role(), v1::CHANNEL_WORKER);
  EXPECT_EQ(registry_->GetQp(id.qp()).value().pd(), pd_);
  ExpectUsageMatchesTheList("accepted");
  EXPECT_EQ(manager_->UsageOfPd(pd_).connections, 1u);  // the data-plane connection counts as a connection...
  EXPECT_EQ(manager_->UsageOfPd(pd_).ids, 0u);          // ...not as an id

  // Replayed, garbage, missing: rejected with the documented reason, and the listener keeps serving.
  struct Case {
    std::string data;
    RejectReason reason;
  };
  for (const Case& c : {Case{token->token(), RejectReason::kReplayed}, Case{std::string(32, 'x'), RejectReason::kMalformed},
                        Case{"", RejectReason::kMissing}}) {
    Client bad;
    fabric::CmEvent e = bad.Dial(*fake_cm_, c.data, 7471);
    ASSERT_EQ(e.type, fabric::CmEventType::kRejected);
    absl::StatusOr<Reject> why = DecodeReject(e.private_data);
    ASSERT_TRUE(why.ok()) << why.status();
    EXPECT_EQ(why->reason, c.reason) << RejectReasonName(why->reason);
  }
  // The client leaves: rdmad releases the connection (id and QP).
  good.id.reset();
  EXPECT_TRUE(test::Eventually([&] { return !manager_->GetCmId(accepted).ok(); }));
  EXPECT_TRUE(IsError(manager_->GetCmId(accepted), absl::StatusCode::kNotFound, "name"));
  EXPECT_TRUE(IsError(registry_->GetQp(id.qp()), absl::StatusCode::kNotFound, "name"));
  ExpectUsageMatchesTheList("after the client left");
  EXPECT_EQ(manager_->UsageOfPd(pd_).connections, 0u);
  good.channel.reset();
}

// DeletePd's steps on the CM side. While the PD is marked (BeginPdRemoval) a data-plane connect request for
// it is refused at its accept. ClosePdConnections closes a connect token's connection only when asked for
// untagged ones, and calls back once it is destroyed, its QP gone from the registry; the client hears it.
TEST_F(CmManagerTest, APdBeingDeletedTakesNoNewConnectionAndItsConnectionsAreClosedOnRequest) {
  Build({{kAddr, 7471}});
  auto token = [&] {
    v1::IssueConnectTokenRequest issue;
    issue.set_pd(pd_);
    return listener_->IssueConnectToken(issue).value().token();
  };
  ASSERT_TRUE(manager_->BeginPdRemoval(pd_).ok());
  {
    Client refused;
    EXPECT_EQ(refused.Dial(*fake_cm_, token(), 7471).type, fabric::CmEventType::kRejected);
  }
  manager_->EndPdRemoval(pd_);
  EXPECT_TRUE(test::Eventually([&] { return manager_->UsageOfPd(pd_).connections == 0; }));

  Client good;
  ASSERT_EQ(good.Dial(*fake_cm_, token(), 7471).type, fabric::CmEventType::kConnectResponse);
  ASSERT_TRUE(good.id->Accept("").ok());
  const std::string accepted = ConnectedDataPlaneId();
  ASSERT_FALSE(accepted.empty());
  const std::string qp = manager_->GetCmId(accepted).value().qp();
  Notification kept;
  manager_->ClosePdConnections(pd_, /*untagged=*/false, [&] { kept.Notify(); });
  EXPECT_TRUE(kept.HasBeenNotified());  // no grant's connection on it: at once, on this thread
  EXPECT_TRUE(manager_->GetCmId(accepted).ok());
  Notification closed;
  manager_->ClosePdConnections(pd_, /*untagged=*/true, [&] { closed.Notify(); });
  ASSERT_TRUE(closed.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(IsError(manager_->GetCmId(accepted), absl::StatusCode::kNotFound, "name"));
  EXPECT_TRUE(IsError(registry_->GetQp(qp), absl::StatusCode::kNotFound, "name"));
  EXPECT_TRUE(test::Eventually([&] {
    for (const fabric::CmEvent& e : good.channel->Drain()) {
      if (e.type == fabric::CmEventType::kDisconnected) return true;
    }
    return false;
  }));
  good.id.reset();
  good.channel.reset();
}

TEST_F(CmManagerTest, AWatcherThatDoesNotReadIsCutOffWithACountAndOthersKeepGettingEvents) {
  Build({}, /*watcher_capacity=*/8);  // one connection makes 5 events; three make 15
  auto sleeper = Watch();
  auto reader = Watch();
  int read = 0;
  for (int i = 0; i < 3; ++i) {
    v1::CmId a, p;
    std::tie(a, p) = Connected(7480 + i);
    while (reader->Next()) ++read;
  }
  EXPECT_GT(read, 3);
  std::optional<absl::Status> closed = sleeper->Closed();
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(closed->message()), HasSubstr("dropped"));
  EXPECT_THAT(std::string(closed->message()), HasSubstr("after_sequence = 0"));
  EXPECT_FALSE(reader->Closed().has_value());
}

TEST_F(CmManagerTest, DeletingAChannelRefusedWhileIdsLiveOnItAndEndsItsWatchersCleanly) {
  Build();
  const std::string ch = NewChannel();
  v1::CmId id = NewId(ch);
  absl::Status busy = manager_->DeleteChannel(ch);
  EXPECT_TRUE(IsError(busy, absl::StatusCode::kFailedPrecondition, "name"));
  EXPECT_EQ(ErrnoOf(busy), EBUSY);
  auto w = Watch(EventFilter{ch, "", {}});
  ASSERT_TRUE(Run([&](Done<v1::CmId> d) { manager_->DeleteCmId(id.name(), std::move(d)); }).ok());
  ASSERT_TRUE(manager_->DeleteChannel(ch).ok());
  std::optional<absl::Status> closed = w->Closed();
  ASSERT_TRUE(closed.has_value());
  EXPECT_TRUE(closed->ok());
  EXPECT_TRUE(IsError(manager_->GetChannel(ch), absl::StatusCode::kNotFound, "name"));
}

TEST_F(CmManagerTest, DestroyWithEventsPendingAndShutdownWithAConnectWaitingNeverHang) {
  Build();
  v1::CmId active, passive;
  std::tie(active, passive) = Connected(7490);
  fake_cm_->Hold();
  ASSERT_TRUE(Run([&](Done<v1::CmId> d) { manager_->Disconnect(active.name(), std::move(d)); }).ok());
  // Events are pending for both ids; deleting them does not wait for them.
  ASSERT_TRUE(Run([&](Done<v1::CmId> d) { manager_->DeleteCmId(passive.name(), std::move(d)); }).ok());
  ASSERT_TRUE(Run([&](Done<v1::CmId> d) { manager_->DeleteCmId(active.name(), std::move(d)); }).ok());
  fake_cm_->Release();
  // A connect that never completes (held), then shutdown: it fails, nothing waits forever.
  v1::CmId listener = NewId();
  ASSERT_TRUE(Listen(listener.name(), 7491).ok());
  fake_cm_->Hold();
  v1::CmId stuck = NewId();
  Notification answered;
  absl::Status answer;
  manager_->Connect(ConnectReq(stuck.name(), 7491), [&](absl::StatusOr<v1::CmId> r) {
    answer = r.status();
    answered.Notify();
  });
  manager_->Quiesce();
  ASSERT_TRUE(answered.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(answer.code(), absl::StatusCode::kUnavailable);
  fake_cm_->Release();
}

TEST_F(CmManagerTest, BadInputsNameTheField) {
  Build();
  v1::CreateCmIdRequest create;
  create.set_pd("pds/77");
  EXPECT_TRUE(IsError(AwaitResult<v1::CmId>([&](Done<v1::CmId> d) { manager_->CreateCmId(create, std::move(d)); }),
                      absl::StatusCode::kNotFound, "pd"));
  create.set_pd(pd_);
  create.set_channel("channels/x");
  EXPECT_TRUE(IsError(AwaitResult<v1::CmId>([&](Done<v1::CmId> d) { manager_->CreateCmId(create, std::move(d)); }),
                      absl::StatusCode::kInvalidArgument, "channel"));
  v1::CmId id = NewId();
  v1::ListenRequest listen;
  listen.set_name(id.name());
  EXPECT_TRUE(IsError(Run([&](Done<v1::CmId> d) { manager_->Listen(listen, std::move(d)); }),
                      absl::StatusCode::kInvalidArgument, "address.address"));
  EXPECT_TRUE(IsError(Run([&](Done<v1::CmId> d) { manager_->Connect(ConnectReq(id.name(), 7400, std::string(57, 'x')), std::move(d)); }),
                      absl::StatusCode::kInvalidArgument, "private_data"));
  v1::AcceptRequest accept;
  accept.set_name(id.name());
  EXPECT_TRUE(IsError(Run([&](Done<v1::CmId> d) { manager_->Accept(accept, std::move(d)); }),
                      absl::StatusCode::kFailedPrecondition, "name"));
  EXPECT_TRUE(IsError(manager_->GetCmId("cmids/0"), absl::StatusCode::kInvalidArgument, "name"));
  v1::IssueConnectTokenRequest issue;
  issue.set_pd(pd_);
  absl::StatusOr<v1::ConnectToken> no_listener = listener_->IssueConnectToken(issue);
  EXPECT_EQ(no_listener.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(no_listener.status().message()), HasSubstr("rdma_listen"));
}

// A listener on every address tells clients where the RDMA devices are reached, not "0.0.0.0"; asked again
// once the answer is older than wildcard_refresh; the wildcard itself when no interface has an address.
TEST_F(CmManagerTest, WildcardListenerToldAsTheRdmaInterfacesAddresses) {
  Build();
  int asked = 0;
  std::vector<std::string> addresses = {"10.0.2.15", "10.0.3.1"};
  dataplane::Listener::Options options;
  options.listen = {{"0.0.0.0", 7472}, {kAddr, 7473}};
  options.wildcard_addresses = [&](const std::string& wildcard) {
    EXPECT_EQ(wildcard, "0.0.0.0");
    ++asked;
    return addresses;
  };
  options.wildcard_refresh = absl::ZeroDuration();  // every call asks again
  dataplane::Listener listener(manager_.get(), registry_.get(), &tokens_, options);
  ASSERT_TRUE(listener.Start().ok());
  auto told = [&] {
    std::vector<std::string> out;
    absl::StatusOr<std::vector<v1::SocketAddress>> endpoints = listener.Endpoints();
    EXPECT_TRUE(endpoints.ok()) << endpoints.status();
    for (const v1::SocketAddress& e : endpoints.value_or(std::vector<v1::SocketAddress>{})) {
      out.push_back(absl::StrCat(e.address(), ":", e.port()));
    }
    return out;
  };
  EXPECT_THAT(told(), ::testing::ElementsAre("10.0.2.15:7472", "10.0.3.1:7472", "10.0.2.15:7473"));
  const int before = asked;
  addresses = {};
  EXPECT_THAT(told(), ::testing::ElementsAre("0.0.0.0:7472", "10.0.2.15:7473"));
  EXPECT_GT(asked, before);
  // A token names the same endpoints.
  addresses = {"10.0.3.1"};
  v1::IssueConnectTokenRequest issue;
  issue.set_pd(pd_);
  absl::StatusOr<v1::ConnectToken> token = listener.IssueConnectToken(issue);
  ASSERT_TRUE(token.ok()) << token.status();
  ASSERT_EQ(token->endpoints_size(), 2);
  EXPECT_EQ(token->endpoints(0).address(), "10.0.3.1");
  manager_->Quiesce();  // the listener's id goes before the Listener
}

TEST_F(CmManagerTest, WildcardAnswerIsCachedForItsRefresh) {
  Build();
  int asked = 0;
  dataplane::Listener::Options options;
  options.listen = {{"0.0.0.0", 7474}};
  options.wildcard_addresses = [&](const std::string&) {
    ++asked;
    return std::vector<std::string>{"10.0.2.15"};
  };
  options.wildcard_refresh = absl::Hours(1);
  dataplane::Listener listener(manager_.get(), registry_.get(), &tokens_, options);
  ASSERT_TRUE(listener.Start().ok());
  for (int i = 0; i < 5; ++i) ASSERT_EQ(listener.Endpoints().value().at(0).address(), "10.0.2.15");
  EXPECT_EQ(asked, 1);  // Start asked once; the Endpoints calls used its answer
  manager_->Quiesce();
}

TEST_F(CmManagerTest, WatchersReplayFromTheOldestAndLearnWhenRdmadStops) {
  Build();
  v1::CmId active, passive;
  std::tie(active, passive) = Connected(7495);
  auto replay = manager_->events().Subscribe(EventFilter{"", active.name(), {}}, 0, /*from_oldest=*/true);
  absl::StatusOr<v1::CmEvent> first = NextEvent(*replay);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->type(), "RDMA_CM_EVENT_ADDR_RESOLVED");  // the id's very first event
  auto live = Watch();
  manager_->Quiesce();
  // The passive side's ESTABLISHED may have come after the watch began (Connected waits for the active
  // side's only): a follower reads what it was given, then learns why the stream ended.
  while (live->Next()) {
  }
  std::optional<absl::Status> closed = live->Closed();
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->code(), absl::StatusCode::kUnavailable);  // not OK: a follower can tell rdmad went away
}

TEST_F(CmManagerTest, CmEventsFlowWhileABindIsHeldInsideTheFabric) {
  Build();
  // A type 2 bind on one PD, held inside the fabric (its completion not delivered)...
  v1::CreatePdRequest other;
  other.set_device("rxe0");
  const std::string pd_a = registry_->CreatePd(other).value().name();
  v1::RegisterMrRequest mr;
  mr.set_pd(pd_a);
  mr.mutable_source()->mutable_anonymous()->set_size(8192);
  for (v1::Access a : {v1::LOCAL_WRITE, v1::REMOTE_READ, v1::MW_BIND}) mr.add_access(a);
  const std::string mr_name = registry_->RegisterMr(mr).value().name();
  v1::CreateQpRequest cq;
  cq.set_pd(pd_a);
  const std::string qp = registry_->CreateQp(cq).value().name();
  v1::ConnectQpRequest cc;
  cc.set_name(qp);
  cc.mutable_remote()->set_qpn(0x4242);
  cc.mutable_remote()->set_gid("0000:0000:0000:0000:0000:ffff:0a00:0002");
  ASSERT_TRUE(registry_->ConnectQp(cc).ok());
  v1::AllocMwRequest mw;
  mw.set_pd(pd_a);
  mw.set_type(v1::TYPE_2);
  const std::string mw_name = registry_->AllocMw(mw).value().name();
  ledger_->HoldCompletions();
  Notification bound;
  v1::BindMwRequest bind;
  bind.set_name(mw_name);
  bind.set_mr(mr_name);
  bind.set_length(4096);
  bind.add_access(v1::REMOTE_READ);
  bind.set_qp(qp);
  registry_->BindMwAsync(bind, [&](absl::StatusOr<v1::MemoryWindow> r) {
    EXPECT_TRUE(r.ok()) << r.status();
    bound.Notify();
  });
  // ... while a whole connection is set up and torn down on the other PD, with its QPs registered.
  v1::CmId active, passive;
  std::tie(active, passive) = Connected(7496);
  EXPECT_EQ(active.state(), v1::CM_CONNECTED);
  ASSERT_TRUE(Run([&](Done<v1::CmId> d) { manager_->DeleteCmId(active.name(), std::move(d)); }).ok());
  ASSERT_TRUE(Run([&](Done<v1::CmId> d) { manager_->DeleteCmId(passive.name(), std::move(d)); }).ok());
  EXPECT_FALSE(bound.HasBeenNotified());
  ledger_->ReleaseCompletions();
  ASSERT_TRUE(bound.WaitForNotificationWithTimeout(absl::Seconds(10)));
  v1::DeletePdRequest del;
  del.set_name(pd_a);
  del.set_cascade(true);
  EXPECT_TRUE(registry_->DeletePd(del).ok());
}

TEST_F(CmManagerTest, AfterQuiesceAConnectIsRefusedRatherThanLeftWaiting) {
  Build();
  v1::CmId id = NewId();
  manager_->Quiesce();
  absl::StatusOr<v1::CmId> r = Run([&](Done<v1::CmId> d) { manager_->Connect(ConnectReq(id.name(), 7497), std::move(d)); });
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
}

TEST(CmManagerWithoutRdmaCm, AnswersUnavailableRatherThanEmpty) {
  auto ledger = std::make_shared<fake::FakeLedger>();
  Registry registry(std::make_unique<fake::FakeFabric>(std::vector<fabric::DeviceInfo>{fake::MakeDeviceInfo("rxe0")},
                                                       ledger),
                    Registry::Options());
  TokenStore tokens;
  CmManager manager(nullptr, &registry, CmManager::Options());
  ASSERT_TRUE(manager.Start().ok());
  EXPECT_EQ(manager.ListChannels().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(manager.ListCmIds(v1::ListCmIdsRequest()).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(manager.GetChannel("channels/1").status().code(), absl::StatusCode::kUnavailable);
  // The data-plane listener has nothing to open, and says why there are no endpoints and no tokens.
  dataplane::Listener::Options options;
  options.listen = {{kAddr, 7471}};
  dataplane::Listener listener(&manager, &registry, &tokens, options);
  ASSERT_TRUE(listener.Start().ok());
  EXPECT_EQ(listener.Endpoints().status().code(), absl::StatusCode::kUnavailable);
  v1::IssueConnectTokenRequest issue;
  issue.set_pd("pds/1");
  EXPECT_EQ(listener.IssueConnectToken(issue).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(tokens.Outstanding(), 0u);
}

}  // namespace
}  // namespace rdmad::cm

namespace rdmad::cm {
namespace {

TEST_F(CmManagerTest, AnIdNeedsAPdAndAPdWithIdsCannotBeRemoved) {
  Build();
  v1::CreateCmIdRequest bare;
  EXPECT_TRUE(IsError(AwaitResult<v1::CmId>([&](Done<v1::CmId> d) { manager_->CreateCmId(bare, std::move(d)); }),
                      absl::StatusCode::kInvalidArgument, "pd"));
  EXPECT_EQ(fake_cm_->live().ids, 0);  // nothing made, nothing counted
  v1::CmId a = NewId(), b = NewId();
  absl::Status refused = manager_->BeginPdRemoval(pd_);
  EXPECT_TRUE(IsError(refused, absl::StatusCode::kFailedPrecondition, "name"));
  EXPECT_THAT(std::string(refused.message()), HasSubstr(a.name()));
  EXPECT_THAT(std::string(refused.message()), HasSubstr(b.name()));
  for (const v1::CmId& id : {a, b}) {
    ASSERT_TRUE(Run([&](Done<v1::CmId> d) { manager_->DeleteCmId(id.name(), std::move(d)); }).ok());
  }
  // No id left: the removal may go on, and no id is made on the PD meanwhile.
  ASSERT_TRUE(manager_->BeginPdRemoval(pd_).ok());
  v1::CreateCmIdRequest on_pd;
  on_pd.set_pd(pd_);
  EXPECT_TRUE(IsError(AwaitResult<v1::CmId>([&](Done<v1::CmId> d) { manager_->CreateCmId(on_pd, std::move(d)); }),
                      absl::StatusCode::kAborted, "pd"));
  manager_->EndPdRemoval(pd_);
  EXPECT_TRUE(AwaitResult<v1::CmId>([&](Done<v1::CmId> d) { manager_->CreateCmId(on_pd, std::move(d)); }).ok());
}

TEST_F(CmManagerTest, ChannelsStopAtTheirLimitAndAFailedChannelLeavesNothing) {
  Build({}, 1024, [](CmManager::Options& o) { o.max_channels = 2; });
  const size_t own = manager_->ListChannels().value().size();
  // The OS refuses the event channel: the error says so, and neither a channel nor a slot is kept.
  fake_cm_->FailNextCmCall("rdma_create_event_channel", EMFILE);
  absl::StatusOr<v1::EventChannel> refused = manager_->CreateChannel(v1::CreateChannelRequest());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_EQ(manager_->ListChannels().value().size(), own);
  const std::string first = NewChannel();
  NewChannel();
  absl::StatusOr<v1::EventChannel> over = manager_->CreateChannel(v1::CreateChannelRequest());
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(over.status().message()), HasSubstr("limit channels of rdmad: limit 2, in use 2"));
  // Every listed channel is complete (has its thread): none is published before its loop exists.
  const std::vector<v1::EventChannel> listed = manager_->ListChannels().value();  // not a temporary's member
  for (const v1::EventChannel& ch : listed) EXPECT_GT(ch.thread_id(), 0) << ch.name();
  ASSERT_TRUE(manager_->DeleteChannel(first).ok());
  EXPECT_TRUE(manager_->CreateChannel(v1::CreateChannelRequest()).ok());
}

TEST_F(CmManagerTest, IdsAndConnectionsStopAtRdmadsLimits) {
  Build({}, 1024, [](CmManager::Options& o) {
    o.max_cm_ids = 3;
    o.max_connections = 2;
  });
  // A listener, the active id and the passive one it accepted: 3 ids, 2 connections.
  v1::CmId active, passive;
  std::tie(active, passive) = Connected(7600);
  v1::CreateCmIdRequest more;
  more.set_pd(pd_);
  absl::StatusOr<v1::CmId> over = AwaitResult<v1::CmId>([&](Done<v1::CmId> d) { manager_->CreateCmId(more, std::move(d)); });
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted) << over.status();
  EXPECT_THAT(std::string(over.status().message()), HasSubstr("limit cm_ids of rdmad: limit 3, in use 3"));
  // The listener goes: an id slot is free, but both connections still count.
  const std::string listener = passive.listener();
  ASSERT_TRUE(Run([&](Done<v1::CmId> d) { manager_->DeleteCmId(listener, std::move(d)); }).ok());
  v1::CmId idle = NewId();
  absl::StatusOr<v1::CmId> refused = Run([&](Done<v1::CmId> d) { manager_->Connect(ConnectReq(idle.name(), 7600), std::move(d)); });
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("limit connections of rdmad: limit 2, in use 2"));
  EXPECT_EQ(manager_->GetCmId(idle.name()).value().state(), v1::CM_IDLE);  // untouched
  ExpectUsageMatchesTheList("after the refusals");
}

TEST_F(CmManagerTest, TheDataPlaneConnectRequestEventCarriesTheTokenIdButNotItsSecret) {
  Build({{kAddr, 7471}});
  auto w = Watch(EventFilter{"", "", {"RDMA_CM_EVENT_CONNECT_REQUEST"}});
  v1::IssueConnectTokenRequest issue;
  issue.set_pd(pd_);
  absl::StatusOr<v1::ConnectToken> token = listener_->IssueConnectToken(issue);
  ASSERT_TRUE(token.ok()) << token.status();
  Client client;
  client.Dial(*fake_cm_, token->token(), 7471);
  absl::StatusOr<v1::CmEvent> request = NextEvent(*w);
  ASSERT_TRUE(request.ok()) << request.status();
  DecodedToken sent = DecodeToken(token->token());
  ASSERT_TRUE(sent.ok());
  const std::string secret(sent.token->secret.begin(), sent.token->secret.end());
  EXPECT_EQ(request->private_data().find(secret), std::string::npos);
  DecodedToken shown = DecodeToken(request->private_data());
  ASSERT_TRUE(shown.ok()) << shown.detail;
  EXPECT_EQ(shown.token->id, sent.token->id);
  for (uint8_t b : shown.token->secret) EXPECT_EQ(b, 0);
  client.id.reset();
  client.channel.reset();
}

TEST_F(CmManagerTest, TheGoneHookHearsOfEachDestroyedIdAfterItsLastEvent) {
  Build();
  Mutex mu;
  std::vector<std::string> gone;
  manager_->set_cm_id_gone([&](const std::string& name) {
    MutexLock lock(&mu);
    gone.push_back(name);
  });
  v1::CmId id = NewId();
  ASSERT_TRUE(Run([&](Done<v1::CmId> d) { manager_->DeleteCmId(id.name(), std::move(d)); }).ok());
  {
    MutexLock lock(&mu);
    EXPECT_EQ(gone, std::vector<std::string>{id.name()});
  }
  manager_->set_cm_id_gone(nullptr);
}

}  // namespace
}  // namespace rdmad::cm
