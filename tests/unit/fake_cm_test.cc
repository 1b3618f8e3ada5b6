// The rdma_cm fake (tests/unit/fake_cm.h): connection set-up on the right channels with private data,
// rejection, migration, destruction, the hold latch, bad inputs, fault and event injection, violations.
#include "tests/unit/fake_cm.h"

#include <poll.h>

#include <cerrno>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/common/status.h"
#include "tests/support/server_status.h"
#include "tests/support/status.h"
#include "tests/unit/fake_fabric.h"

namespace rdmad {
namespace {

using fabric::CmChannel;
using fabric::CmEvent;
using fabric::CmEventType;
using fabric::CmId;
using ::rdmad::test::IsError;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr uint16_t kPort = 7471;

bool Readable(int fd, int timeout_ms = 0) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, timeout_ms) == 1;
}
std::vector<CmEventType> Types(const std::vector<CmEvent>& events) {
  std::vector<CmEventType> out;
  for (const auto& e : events) out.push_back(e.type);
  return out;
}
std::string Padded(std::string s, size_t n) {
  s.resize(n, '\0');
  return s;
}
// EINVAL from the named rdma_* call.
::testing::AssertionResult IsEinval(const absl::Status& s, const std::string& call) {
  if (ErrnoOf(s) == EINVAL && CallOf(s) == call) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected EINVAL from " << call << ", got " << s;
}

class FakeCmTest : public ::testing::Test {
 protected:
  FakeCmTest()
      : ledger_(std::make_shared<fake::FakeLedger>()),
        fabric_({fake::MakeDeviceInfo("rxe0"), fake::MakeDeviceInfo("rxe1")}, ledger_),
        cm_(fabric_.devices(), {{"10.0.2.15", "rxe0"}, {"10.0.3.15", "rxe1"}}),
        pd_(fabric_.devices()[0]->AllocPd().value()) {
    fabric_.set_cm(&cm_);
  }
  ~FakeCmTest() override {
    pd_.reset();
    EXPECT_EQ(cm_.live().channels, 0);
    EXPECT_EQ(cm_.live().ids, 0);
    EXPECT_EQ(cm_.violations(), expected_violations_);
    EXPECT_THAT(ledger_->violations(), IsEmpty());
    EXPECT_EQ(ledger_->live().qps, 0);
  }

  std::unique_ptr<CmChannel> Channel() { return cm_.CreateChannel().value(); }
  static std::unique_ptr<CmId> Id(CmChannel& ch, uint64_t key) { return ch.CreateId(key).value(); }
  static std::unique_ptr<CmId> Listener(CmChannel& ch, uint64_t key, const std::string& host = "10.0.2.15",
                                        int backlog = 8) {
    auto id = Id(ch, key);
    EXPECT_OK(id->Bind({host, kPort}));
    EXPECT_OK(id->Listen(backlog));
    return id;
  }
  // Address and route resolved to host:kPort (both events drained), with a QP if `qp`.
  std::unique_ptr<CmId> Active(CmChannel& ch, uint64_t key, bool qp = true, const std::string& host = "10.0.2.15") {
    auto id = Id(ch, key);
    EXPECT_OK(id->ResolveAddr({host, kPort}, 1000));
    EXPECT_OK(id->ResolveRoute(1000));
    EXPECT_THAT(Types(ch.Drain()), ElementsAre(CmEventType::kAddrResolved, CmEventType::kRouteResolved));
    if (qp) EXPECT_OK(id->CreateQp(*pd_));
    return id;
  }
  // Connects `active` and takes the request's new id from the listener's channel (key set, with a QP).
  std::unique_ptr<CmId> Request(CmId& active, CmChannel& listener_channel, uint64_t key,
                                const std::string& data = "hello") {
    EXPECT_OK(active.Connect(data));
    std::vector<CmEvent> events = listener_channel.Drain();
    if (events.size() != 1 || events[0].new_id == nullptr) {
      ADD_FAILURE() << "expected one CONNECT_REQUEST, got " << events.size() << " event(s)";
      return nullptr;
    }
    std::unique_ptr<CmId> id = std::move(events[0].new_id);
    id->set_key(key);
    EXPECT_OK(id->CreateQp(*pd_));
    return id;
  }

  std::shared_ptr<fake::FakeLedger> ledger_;
  fake::FakeFabric fabric_;
  fake::FakeCm cm_;
  std::unique_ptr<fabric::Pd> pd_;
  std::vector<std::string> expected_violations_;
};

TEST_F(FakeCmTest, ConnectAcceptEstablishedOnTheRightChannelsWithPrivateData) {
  EXPECT_EQ(fabric_.cm(), &cm_);
  auto server = Channel(), client = Channel();
  auto listener = Listener(*server, 100);
  auto active = Active(*client, 200);
  EXPECT_EQ(active->device(), fabric_.devices()[0]);
  EXPECT_EQ(active->local().host, "10.0.2.15");
  EXPECT_NE(active->local().port, 0);
  ASSERT_OK(active->Connect("hello"));
  EXPECT_FALSE(Readable(client->fd()));
  ASSERT_TRUE(Readable(server->fd()));
  EXPECT_EQ(cm_.Queued(*server), 1);
  std::vector<CmEvent> request = server->Drain();
  EXPECT_FALSE(Readable(server->fd()));
  ASSERT_EQ(request.size(), 1u);
  EXPECT_EQ(request[0].type, CmEventType::kConnectRequest);
  EXPECT_EQ(request[0].key, 100u);
  EXPECT_EQ(request[0].status, 0);
  EXPECT_EQ(request[0].private_data, Padded("hello", 56));
  ASSERT_NE(request[0].new_id, nullptr);
  std::unique_ptr<CmId> passive = std::move(request[0].new_id);
  EXPECT_EQ(passive->key(), 0u);
  EXPECT_EQ(passive->device(), fabric_.devices()[0]);
  EXPECT_EQ(passive->remote().host, active->local().host);
  EXPECT_EQ(passive->remote().port, active->local().port);
  EXPECT_EQ(passive->local().port, kPort);
  passive->set_key(300);
  ASSERT_OK(passive->CreateQp(*pd_));
  EXPECT_EQ(passive->qp()->state(), fabric::QpState::kInit);
  ASSERT_OK(passive->Accept("welcome"));

  std::vector<CmEvent> a = client->Drain(), p = server->Drain();
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].type, CmEventType::kEstablished);
  EXPECT_EQ(a[0].key, 200u);
  EXPECT_EQ(a[0].private_data, Padded("welcome", 196));
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].type, CmEventType::kEstablished);
  EXPECT_EQ(p[0].key, 300u);
  EXPECT_EQ(p[0].private_data, "");
  EXPECT_EQ(active->qp()->state(), fabric::QpState::kRts);
  EXPECT_EQ(passive->qp()->state(), fabric::QpState::kRts);
  EXPECT_THAT(cm_.log_of({"create_channel", "create_id", "listen", "connect", "accept", "event"}),
              ElementsAre("create_channel 1", "create_channel 2", "create_id 1", "listen 1 10.0.2.15:7471",
                          "create_id 2", "event ADDR_RESOLVED 2 on channel 2", "event ROUTE_RESOLVED 2 on channel 2",
                          "connect 2 -> 10.0.2.15:7471", "create_id 3", "event CONNECT_REQUEST 1 on channel 1",
                          "accept 3", "event ESTABLISHED 2 on channel 2", "event ESTABLISHED 3 on channel 1"));
}

TEST_F(FakeCmTest, RejectCarriesPrivateDataToTheActiveSideOnly) {
  auto server = Channel(), client = Channel();
  auto listener = Listener(*server, 1);
  auto active = Active(*client, 2);
  auto passive = Request(*active, *server, 3);
  ASSERT_NE(passive, nullptr);
  ASSERT_OK(passive->Reject("no"));
  std::vector<CmEvent> a = client->Drain();
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].type, CmEventType::kRejected);
  EXPECT_EQ(a[0].status, 28);
  EXPECT_EQ(a[0].key, 2u);
  EXPECT_EQ(a[0].private_data, Padded("no", 148));
  EXPECT_EQ(cm_.Queued(*server), 0);
  EXPECT_TRUE(IsEinval(passive->Accept(""), "rdma_accept"));
  EXPECT_TRUE(IsEinval(passive->Reject(""), "rdma_reject"));
  EXPECT_TRUE(IsEinval(active->Connect(""), "rdma_connect"));
}

TEST_F(FakeCmTest, NoListenerIsRejectedAndAWildcardListenerMatchesAnyAddress) {
  auto server = Channel(), client = Channel();
  auto elsewhere = Listener(*server, 1, "10.0.3.15");  // same port, another address
  auto active = Active(*client, 2);
  ASSERT_OK(active->Connect("x"));
  std::vector<CmEvent> a = client->Drain();
  ASSERT_THAT(Types(a), ElementsAre(CmEventType::kRejected));
  EXPECT_EQ(a[0].status, 28);
  EXPECT_EQ(a[0].private_data, std::string(148, '\0'));
  EXPECT_EQ(cm_.Queued(*server), 0);

  auto any = Id(*server, 5);
  ASSERT_OK(any->Bind({"0.0.0.0", kPort + 1}));
  EXPECT_EQ(any->device(), nullptr);
  ASSERT_OK(any->Listen(0));
  auto second = Id(*client, 6);
  ASSERT_OK(second->ResolveAddr({"10.0.3.15", kPort + 1}, 1000));
  ASSERT_OK(second->ResolveRoute(1000));
  ASSERT_OK(second->Connect(""));
  std::vector<CmEvent> req = server->Drain();
  ASSERT_THAT(Types(req), ElementsAre(CmEventType::kConnectRequest));
  EXPECT_EQ(req[0].key, 5u);
  EXPECT_EQ(req[0].new_id->device(), fabric_.devices()[1]);
  EXPECT_EQ(req[0].new_id->local().host, "10.0.3.15");
}

TEST_F(FakeCmTest, UnroutableAddressIsAnAddrErrorAndCanBeRetried) {
  auto ch = Channel();
  auto id = Id(*ch, 4);
  ASSERT_OK(id->ResolveAddr({"192.0.2.1", kPort}, 1000));
  std::vector<CmEvent> e = ch->Drain();
  ASSERT_THAT(Types(e), ElementsAre(CmEventType::kAddrError));
  EXPECT_EQ(e[0].status, -ENETUNREACH);
  EXPECT_EQ(id->device(), nullptr);
  EXPECT_TRUE(IsEinval(id->ResolveRoute(1000), "rdma_resolve_route"));
  EXPECT_TRUE(IsError(id->CreateQp(*pd_), absl::StatusCode::kFailedPrecondition, ""));
  ASSERT_OK(id->ResolveAddr({"10.0.3.15", kPort}, 1000));
  EXPECT_THAT(Types(ch->Drain()), ElementsAre(CmEventType::kAddrResolved));
  EXPECT_EQ(id->device(), fabric_.devices()[1]);
}

TEST_F(FakeCmTest, MigrateMovesPendingEventsExactlyOnceAndFutureOnes) {
  auto from = Channel(), to = Channel();
  auto other = Id(*from, 9);
  auto id = Id(*from, 7);
  ASSERT_OK(other->ResolveAddr({"10.0.2.15", kPort}, 1000));
  ASSERT_OK(id->ResolveAddr({"10.0.2.15", kPort}, 1000));
  ASSERT_OK(id->ResolveRoute(1000));
  EXPECT_EQ(cm_.Queued(*from), 3);
  ASSERT_OK(id->Migrate(*to));
  EXPECT_EQ(cm_.Queued(*from), 1);
  EXPECT_EQ(cm_.Queued(*to), 2);
  EXPECT_TRUE(Readable(from->fd()));
  EXPECT_TRUE(Readable(to->fd()));
  std::vector<CmEvent> moved = to->Drain();
  ASSERT_THAT(Types(moved), ElementsAre(CmEventType::kAddrResolved, CmEventType::kRouteResolved));
  EXPECT_EQ(moved[0].key, 7u);
  EXPECT_THAT(to->Drain(), IsEmpty());
  std::vector<CmEvent> left = from->Drain();
  ASSERT_THAT(Types(left), ElementsAre(CmEventType::kAddrResolved));
  EXPECT_EQ(left[0].key, 9u);
  ASSERT_OK(id->Connect(""));  // no listener: REJECTED, on the new channel
  EXPECT_THAT(Types(to->Drain()), ElementsAre(CmEventType::kRejected));
  EXPECT_FALSE(Readable(from->fd()));
  EXPECT_THAT(cm_.log_of({"migrate"}), ElementsAre("migrate 2 -> channel 2"));
}

TEST_F(FakeCmTest, MigrateBeforeConnectGetsEstablishedOnTheNewChannel) {
  auto server = Channel(), client = Channel(), worker = Channel();
  auto listener = Listener(*server, 1);
  auto active = Active(*client, 2);
  ASSERT_OK(active->Migrate(*worker));
  auto passive = Request(*active, *server, 3);
  ASSERT_NE(passive, nullptr);
  ASSERT_OK(passive->Accept(""));
  EXPECT_FALSE(Readable(client->fd()));
  EXPECT_EQ(cm_.Queued(*client), 0);
  EXPECT_THAT(Types(worker->Drain()), ElementsAre(CmEventType::kEstablished));
  EXPECT_THAT(Types(server->Drain()), ElementsAre(CmEventType::kEstablished));
}

// A PD whose QPs note, when destroyed, how many ids the FakeCm still has.
class WatchPd : public fabric::Pd {
 public:
  WatchPd(fabric::Pd* pd, fake::FakeCm* cm, int* ids_at_qp_death) : pd_(pd), cm_(cm), seen_(ids_at_qp_death) {}
  absl::StatusOr<std::unique_ptr<fabric::Mr>> RegMr(void* a, size_t n, uint32_t x) override {
    return pd_->RegMr(a, n, x);
  }
  absl::StatusOr<std::unique_ptr<fabric::Mw>> AllocMw(fabric::MwType type) override { return pd_->AllocMw(type); }
  absl::StatusOr<std::unique_ptr<fabric::Qp>> CreateQp(const fabric::QpOptions& options) override {
    EXPECT_EQ(options.port, 1u);
    EXPECT_EQ(options.gid_index, 1u);
    RDMAD_ASSIGN_OR_RETURN(std::unique_ptr<fabric::Qp> qp, pd_->CreateQp(options));
    return std::unique_ptr<fabric::Qp>(new Watch(std::move(qp), cm_, seen_));
  }

 private:
  struct Watch : fabric::Qp {
    Watch(std::unique_ptr<fabric::Qp> qp, fake::FakeCm* cm, int* seen) : qp(std::move(qp)), cm(cm), seen(seen) {}
    ~Watch() override { *seen = cm->live().ids; }  // the FakeCm's mutex must not be held here
    fabric::QpEndpoint local() const override { return qp->local(); }
    fabric::QpState state() const override { return qp->state(); }
    absl::Status Connect(const fabric::QpEndpoint& r) override { return qp->Connect(r); }
    absl::Status PostBind(fabric::Mw& mw, const fabric::BindSpec& s, fabric::BindDone d) override {
      return qp->PostBind(mw, s, std::move(d));
    }
    absl::Status PostInvalidate(fabric::Mw& mw, fabric::Mr& m, fabric::WorkDone d) override {
      return qp->PostInvalidate(mw, m, std::move(d));
    }
    absl::Status PostSend(const std::string& bytes, fabric::WorkDone d) override {
      return qp->PostSend(bytes, std::move(d));
    }
    uint64_t completion_key() const override { return qp->completion_key(); }
    std::unique_ptr<fabric::Qp> qp;
    fake::FakeCm* cm;
    int* seen;
  };
  fabric::Pd* pd_;
  fake::FakeCm* cm_;
  int* seen_;
};

TEST_F(FakeCmTest, DestroyingAConnectedIdDisconnectsThePeerDropsItsEventsAndItsQpGoesFirst) {
  auto server = Channel(), client = Channel();
  auto listener = Listener(*server, 1);
  int ids_at_qp_death = -1;
  WatchPd watch(pd_.get(), &cm_, &ids_at_qp_death);
  auto active = Active(*client, 2, /*qp=*/false);
  ASSERT_OK(active->CreateQp(watch));
  auto passive = Request(*active, *server, 3);
  ASSERT_NE(passive, nullptr);
  ASSERT_OK(passive->Accept(""));
  ASSERT_EQ(cm_.Queued(*client), 1);  // its ESTABLISHED, not drained
  const int qps = ledger_->live().qps;
  active.reset();
  EXPECT_EQ(ids_at_qp_death, 3);  // the QP went while the id was still live
  EXPECT_EQ(ledger_->live().qps, qps - 1);
  EXPECT_EQ(cm_.Queued(*client), 0);
  EXPECT_FALSE(Readable(client->fd()));
  std::vector<CmEvent> p = server->Drain();
  ASSERT_THAT(Types(p), ElementsAre(CmEventType::kEstablished, CmEventType::kDisconnected));
  EXPECT_EQ(p[1].key, 3u);
  EXPECT_THAT(cm_.log_of({"drop", "destroy_id"}), ElementsAre("drop ESTABLISHED 2 on channel 2", "destroy_id 2"));
  EXPECT_OK(passive->Disconnect());  // the answer to the peer's disconnect: nothing more arrives
  EXPECT_THAT(server->Drain(), IsEmpty());
}

TEST_F(FakeCmTest, DestroyingAnIdBeforeTheAnswerRejectsThePeer) {
  auto server = Channel(), client = Channel();
  auto listener = Listener(*server, 1);
  {  // The active side goes away: the passive side is told (REJECTED, timeout), and can no longer accept.
    auto active = Active(*client, 2);
    auto passive = Request(*active, *server, 3);
    ASSERT_NE(passive, nullptr);
    active.reset();
    std::vector<CmEvent> p = server->Drain();
    ASSERT_THAT(Types(p), ElementsAre(CmEventType::kRejected));
    EXPECT_EQ(p[0].status, 1);
    EXPECT_TRUE(IsEinval(passive->Accept(""), "rdma_accept"));
  }
  {  // The new id is dropped unanswered: REJECTED, consumer defined.
    auto active = Active(*client, 4);
    auto passive = Request(*active, *server, 5);
    passive.reset();
    std::vector<CmEvent> a = client->Drain();
    ASSERT_THAT(Types(a), ElementsAre(CmEventType::kRejected));
    EXPECT_EQ(a[0].status, 28);
  }
  {  // The listener goes with a request still queued: the request and its new id are dropped.
    auto active = Active(*client, 6);
    ASSERT_OK(active->Connect(""));
    const int ids = cm_.live().ids;
    listener.reset();
    EXPECT_EQ(cm_.live().ids, ids - 2);
    EXPECT_EQ(cm_.Queued(*server), 0);
    std::vector<CmEvent> a = client->Drain();
    ASSERT_THAT(Types(a), ElementsAre(CmEventType::kRejected));
    EXPECT_EQ(a[0].status, 28);
  }
}

TEST_F(FakeCmTest, DisconnectReachesBothSidesOnce) {
  auto server = Channel(), client = Channel();
  auto listener = Listener(*server, 1);
  auto idle = Id(*client, 9);
  EXPECT_TRUE(IsEinval(idle->Disconnect(), "rdma_disconnect"));
  auto active = Active(*client, 2);
  auto passive = Request(*active, *server, 3);
  ASSERT_NE(passive, nullptr);
  ASSERT_OK(passive->Accept(""));
  client->Drain();
  server->Drain();
  ASSERT_OK(active->Disconnect());
  std::vector<CmEvent> a = client->Drain(), p = server->Drain();
  ASSERT_THAT(Types(a), ElementsAre(CmEventType::kDisconnected));
  EXPECT_EQ(a[0].key, 2u);
  ASSERT_THAT(Types(p), ElementsAre(CmEventType::kDisconnected));
  EXPECT_EQ(p[0].key, 3u);
  EXPECT_OK(active->Disconnect());
  EXPECT_OK(passive->Disconnect());
  EXPECT_THAT(client->Drain(), IsEmpty());
  EXPECT_THAT(server->Drain(), IsEmpty());
}

TEST_F(FakeCmTest, HoldKeepsEventsQueuedButNotSignalled) {
  auto ch = Channel();
  auto id = Id(*ch, 1);
  cm_.Hold();
  ASSERT_OK(id->ResolveAddr({"10.0.2.15", kPort}, 1000));
  EXPECT_EQ(cm_.Queued(*ch), 1);
  EXPECT_FALSE(Readable(ch->fd()));
  EXPECT_THAT(ch->Drain(), IsEmpty());
  EXPECT_EQ(cm_.Queued(*ch), 1);
  cm_.Release();
  EXPECT_TRUE(Readable(ch->fd()));
  EXPECT_THAT(Types(ch->Drain()), ElementsAre(CmEventType::kAddrResolved));
  EXPECT_FALSE(Readable(ch->fd()));
  EXPECT_EQ(cm_.Queued(*ch), 0);
}

TEST_F(FakeCmTest, BadInputs) {
  auto server = Channel(), client = Channel();
  auto id = Id(*server, 1);
  EXPECT_TRUE(IsEinval(id->Listen(8), "rdma_listen"));
  absl::Status s = id->Bind({"192.0.2.1", kPort});
  EXPECT_EQ(ErrnoOf(s), EADDRNOTAVAIL) << s;
  EXPECT_EQ(FieldOf(s), "address");
  ASSERT_OK(id->Bind({"10.0.2.15", kPort}));
  ASSERT_OK(id->Listen(8));
  EXPECT_TRUE(IsEinval(id->Listen(8), "rdma_listen"));
  for (const char* host : {"10.0.2.15", "0.0.0.0"}) {
    auto dup = Id(*server, 2);
    s = dup->Bind({host, kPort});
    EXPECT_EQ(ErrnoOf(s), EADDRINUSE) << host << ": " << s;
    EXPECT_EQ(CallOf(s), "rdma_bind_addr");
  }
  auto active = Id(*client, 3);
  EXPECT_TRUE(IsEinval(active->Connect(""), "rdma_connect"));
  EXPECT_TRUE(IsEinval(active->Accept(""), "rdma_accept"));
  EXPECT_TRUE(IsEinval(active->Reject(""), "rdma_reject"));
  active = Active(*client, 3);
  EXPECT_TRUE(IsError(active->CreateQp(*pd_), absl::StatusCode::kFailedPrecondition, "qp"));
  EXPECT_TRUE(IsError(active->Connect(std::string(57, 'x')), absl::StatusCode::kInvalidArgument, "private_data"));
  auto passive = Request(*active, *server, 4, std::string(56, 'x'));
  ASSERT_NE(passive, nullptr);
  EXPECT_TRUE(IsError(passive->Accept(std::string(197, 'x')), absl::StatusCode::kInvalidArgument, "private_data"));
  EXPECT_TRUE(IsError(passive->Reject(std::string(149, 'x')), absl::StatusCode::kInvalidArgument, "private_data"));
  EXPECT_OK(passive->Reject(std::string(148, 'x')));
}

TEST_F(FakeCmTest, InjectedFaultsAndEvents) {
  cm_.FailNextCmCall("rdma_create_event_channel", EMFILE);
  EXPECT_EQ(ErrnoOf(cm_.CreateChannel().status()), EMFILE);
  auto server = Channel(), client = Channel();
  auto listener = Listener(*server, 1);
  auto active = Active(*client, 2);
  cm_.FailNextCmCall("rdma_connect", ENOMEM);
  absl::Status s = active->Connect("");
  EXPECT_EQ(ErrnoOf(s), ENOMEM) << s;
  EXPECT_EQ(CallOf(s), "rdma_connect");
  EXPECT_EQ(cm_.Queued(*server), 0);
  auto passive = Request(*active, *server, 3);  // the failed call had no effect
  ASSERT_NE(passive, nullptr);
  cm_.InjectEvent(*passive, CmEventType::kDeviceRemoval, 0);
  cm_.InjectEvent(*active, CmEventType::kConnectError, -ETIMEDOUT);
  std::vector<CmEvent> p = server->Drain(), a = client->Drain();
  ASSERT_THAT(Types(p), ElementsAre(CmEventType::kDeviceRemoval));
  EXPECT_EQ(p[0].key, 3u);
  ASSERT_THAT(Types(a), ElementsAre(CmEventType::kConnectError));
  EXPECT_EQ(a[0].status, -ETIMEDOUT);
  cm_.FailNextCmCall("rdma_frobnicate", EIO);
  expected_violations_ = {"FailNextCmCall of an unknown call rdma_frobnicate"};
}

TEST_F(FakeCmTest, BacklogOfUndrainedRequestsIsEnforced) {
  auto server = Channel(), client = Channel();
  auto listener = Listener(*server, 1, "10.0.2.15", /*backlog=*/1);
  auto first = Active(*client, 2), second = Active(*client, 3);
  ASSERT_OK(first->Connect(""));
  ASSERT_OK(second->Connect(""));
  std::vector<CmEvent> a = client->Drain();
  ASSERT_THAT(Types(a), ElementsAre(CmEventType::kRejected));
  EXPECT_EQ(a[0].key, 3u);
  EXPECT_THAT(Types(server->Drain()), ElementsAre(CmEventType::kConnectRequest));  // its new id dropped here
  EXPECT_THAT(Types(client->Drain()), ElementsAre(CmEventType::kRejected));
}

TEST_F(FakeCmTest, AnActiveIdWithoutAQpGetsConnectResponseAndFinishesWithAccept) {
  auto server = Channel(), client = Channel();
  auto listener = Listener(*server, 1);
  auto active = Active(*client, 2, /*qp=*/false);
  auto passive = Request(*active, *server, 3);
  ASSERT_NE(passive, nullptr);
  ASSERT_OK(passive->Accept("ok"));
  std::vector<CmEvent> a = client->Drain();
  ASSERT_THAT(Types(a), ElementsAre(CmEventType::kConnectResponse));
  EXPECT_EQ(a[0].private_data, Padded("ok", 196));
  EXPECT_THAT(server->Drain(), IsEmpty());
  ASSERT_OK(active->Accept(""));
  EXPECT_THAT(Types(server->Drain()), ElementsAre(CmEventType::kEstablished));
  EXPECT_THAT(client->Drain(), IsEmpty());
}

TEST_F(FakeCmTest, ViolationsForAChannelDestroyedBeforeItsIds) {
  auto ch = Channel();
  auto id = Id(*ch, 1);
  ch.reset();
  id.reset();
  expected_violations_ = {"channel 1 destroyed while id(s) 1 are on it", "id 1 destroyed after its channel 1"};
}

// Three threads, each draining its own channel: a server accepting, two clients connecting and disconnecting.
TEST_F(FakeCmTest, ThreadsDrivingTheirOwnChannels) {
  constexpr int kClients = 2, kRounds = 20;
  auto server = Channel();
  auto listener = Listener(*server, 1, "10.0.2.15", 64);
  std::thread accepter([&] {
    std::vector<std::unique_ptr<CmId>> passive;
    for (int disconnected = 0; disconnected < kClients * kRounds && Readable(server->fd(), 5000);) {
      for (CmEvent& e : server->Drain()) {
        if (e.type == CmEventType::kConnectRequest) {
          e.new_id->set_key(100);
          EXPECT_OK(e.new_id->CreateQp(*pd_));
          EXPECT_OK(e.new_id->Accept("hi"));
          passive.push_back(std::move(e.new_id));
        }
        disconnected += e.type == CmEventType::kDisconnected;
      }
    }
    passive.clear();
  });
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto ch = Channel();
      for (int r = 0; r < kRounds; ++r) {
        auto id = Active(*ch, 10 + c);
        ASSERT_OK(id->Connect(""));
        ASSERT_TRUE(Readable(ch->fd(), 5000));
        ASSERT_THAT(Types(ch->Drain()), ElementsAre(CmEventType::kEstablished));
        ASSERT_OK(id->Disconnect());
        EXPECT_THAT(Types(ch->Drain()), ElementsAre(CmEventType::kDisconnected));
      }
    });
  }
  for (auto& t : clients) t.join();
  accepter.join();
  EXPECT_EQ(cm_.live().ids, 1);
}

}  // namespace
}  // namespace rdmad
