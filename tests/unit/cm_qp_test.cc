// A QP made on an rdma_cm id with fabric::CmQpOptions, on the fake fabric (tests/unit/fake_fabric.h,
// fake_cm.h): the messages its peer sends arrive at on_message (ReceiveOptions), and work posted beyond its
// send depth waits in the QP's backlog, in order (fabric.h, Qp). rdmad's side is an id accepted here; the
// peer is a FakeClient. Completions are drained by the test itself, as the device's dispatcher would.
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/fabric/cm.h"
#include "server/fabric/fabric.h"
#include "tests/support/eventually.h"
#include "tests/support/server_status.h"
#include "tests/support/status.h"
#include "tests/unit/fake_cm.h"
#include "tests/unit/fake_client.h"
#include "tests/unit/fake_fabric.h"

namespace rdmad {
namespace {

using fabric::CmEvent;
using fabric::CmEventType;
using ::rdmad::test::Eventually;
using ::rdmad::test::IsError;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

class CmQpTest : public ::testing::Test {
 protected:
  CmQpTest()
      : ledger_(std::make_shared<fake::FakeLedger>()),
        fabric_({fake::MakeDeviceInfo("rxe0")}, ledger_),
        cm_(fabric_.devices(), {{"10.0.2.15", "rxe0"}}),
        device_(fabric_.devices()[0]),
        pd_(device_->AllocPd().value()),
        channel_(cm_.CreateChannel().value()),
        listener_(channel_->CreateId(1).value()) {
    fabric_.set_cm(&cm_);
    EXPECT_OK(listener_->Bind(client_.listener));
    EXPECT_OK(listener_->Listen(8));
  }
  ~CmQpTest() override {
    client_.Leave();
    id_.reset();
    listener_.reset();
    channel_.reset();
    pd_.reset();
    EXPECT_THAT(ledger_->violations(), IsEmpty());
    EXPECT_THAT(cm_.violations(), IsEmpty());
  }

  // client_ dials rdmad's listener; rdmad's side takes the request with a QP of `options` and accepts.
  void Connect(const fabric::CmQpOptions& options) {
    bool established = false;
    std::thread dial([&] { established = client_.Dial(cm_, device_, "token").type == CmEventType::kEstablished; });
    std::vector<CmEvent> request;
    const bool requested = Eventually([&] {
      request = channel_->Drain();
      return !request.empty();
    });
    if (requested && request[0].new_id != nullptr) {
      id_ = std::move(request[0].new_id);
      id_->set_key(2);
      EXPECT_OK(id_->CreateQp(*pd_, options));
      EXPECT_OK(id_->Accept(""));
    }
    dial.join();
    ASSERT_TRUE(requested);
    ASSERT_NE(id_, nullptr);
    ASSERT_TRUE(established);
    EXPECT_EQ(qp().state(), fabric::QpState::kRts);
  }
  fabric::Qp& qp() { return *id_->qp(); }
  uint32_t qpn() { return qp().local().qpn; }
  // One pass of the device's dispatcher: the completions queued now run, on this thread.
  void Drain() { device_->DrainCompletions(); }

  std::shared_ptr<fake::FakeLedger> ledger_;
  fake::FakeFabric fabric_;
  fake::FakeCm cm_;
  fabric::Device* const device_;
  std::unique_ptr<fabric::Pd> pd_;
  std::unique_ptr<fabric::CmChannel> channel_;
  std::unique_ptr<fabric::CmId> listener_;
  std::unique_ptr<fabric::CmId> id_;  // rdmad's side of the connection
  test::FakeClient client_;
};

// ---- Receives

fabric::CmQpOptions Receiving(uint32_t slots, std::vector<std::string>* got) {
  fabric::CmQpOptions options;
  options.receive.slots = slots;
  options.receive.on_message = [got](std::string bytes) { got->push_back(std::move(bytes)); };
  return options;
}

TEST_F(CmQpTest, MessagesArriveInOrderWithTheirBytesOnTheThreadThatDrains) {
  std::vector<std::string> got;
  std::thread::id ran_on;
  fabric::CmQpOptions options = Receiving(4, &got);
  options.receive.on_message = [&](std::string bytes) {
    got.push_back(std::move(bytes));
    ran_on = std::this_thread::get_id();
  };
  ASSERT_NO_FATAL_FAILURE(Connect(options));
  const std::string longest(fabric::kMaxReceive, 'z');
  ASSERT_OK(client_.Send("a"));
  ASSERT_OK(client_.Send("bb"));
  ASSERT_OK(client_.Send(""));
  ASSERT_OK(client_.Send(longest));
  EXPECT_THAT(got, IsEmpty());  // delivered as completions: nothing runs before the dispatcher drains
  std::thread::id dispatcher;
  std::thread([&] {
    dispatcher = std::this_thread::get_id();
    Drain();
  }).join();
  EXPECT_THAT(got, ElementsAre("a", "bb", "", longest));
  EXPECT_EQ(ran_on, dispatcher);
  EXPECT_EQ(ledger_->events_of({"receive"}).size(), 4u);
  // The slots were posted again: as many messages once more.
  ASSERT_OK(client_.Send("c"));
  ASSERT_OK(client_.Send("d"));
  ASSERT_OK(client_.Send("e"));
  ASSERT_OK(client_.Send("f"));
  Drain();
  EXPECT_THAT(got, ElementsAre("a", "bb", "", longest, "c", "d", "e", "f"));
}

TEST_F(CmQpTest, MessagesBeyondThePostedSlotsWaitForOneThenArriveInOrder) {
  std::vector<std::string> got;
  ASSERT_NO_FATAL_FAILURE(Connect(Receiving(2, &got)));
  for (const char* m : {"m0", "m1", "m2", "m3", "m4"}) ASSERT_OK(client_.Send(m));
  EXPECT_EQ(ledger_->events_of({"receive"}).size(), 2u);  // two slots taken; three wait (RNR)
  Drain();  // the two run; their slots, posted again, take the next two
  EXPECT_THAT(got, ElementsAre("m0", "m1"));
  Drain();
  EXPECT_THAT(got, ElementsAre("m0", "m1", "m2", "m3"));
  Drain();
  EXPECT_THAT(got, ElementsAre("m0", "m1", "m2", "m3", "m4"));
  Drain();
  EXPECT_EQ(got.size(), 5u);
}

TEST_F(CmQpTest, PollForRunsTheMessagesOnThePollingThread) {
  std::vector<std::string> got;
  ASSERT_NO_FATAL_FAILURE(Connect(Receiving(2, &got)));
  ASSERT_OK(client_.Send("polled"));
  device_->PollFor(qp().completion_key(), absl::Seconds(1), [&] { return !got.empty(); });
  EXPECT_THAT(got, ElementsAre("polled"));
}

TEST_F(CmQpTest, AQpWithoutSlotsReceivesNothing) {
  std::vector<std::string> got;
  ASSERT_NO_FATAL_FAILURE(Connect(Receiving(0, &got)));
  ASSERT_OK(client_.Send("a"));  // on the wire; it waits for a receive that is never posted
  Drain();
  EXPECT_THAT(got, IsEmpty());
  EXPECT_THAT(ledger_->events_of({"receive"}), IsEmpty());
}

TEST_F(CmQpTest, ASendToAQpNotInRtsFailsAtThePeer) {
  std::vector<std::string> got;
  ASSERT_NO_FATAL_FAILURE(Connect(Receiving(2, &got)));
  ledger_->ForceQpError(qpn());
  EXPECT_EQ(client_.Send("a").code(), absl::StatusCode::kAborted);
  Drain();
  EXPECT_THAT(got, IsEmpty());
}

TEST_F(CmQpTest, AMessageLongerThanABufferFailsAndMovesTheQpToError) {
  std::vector<std::string> got;
  ASSERT_NO_FATAL_FAILURE(Connect(Receiving(2, &got)));
  EXPECT_EQ(client_.Send(std::string(fabric::kMaxReceive + 1, 'x')).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(qp().state(), fabric::QpState::kError);
  EXPECT_EQ(client_.Send("a").code(), absl::StatusCode::kAborted);
  Drain();
  EXPECT_THAT(got, IsEmpty());
}

TEST_F(CmQpTest, MessagesWaitingWhenTheQpGoesToErrorAreDropped) {
  std::vector<std::string> got;
  ASSERT_NO_FATAL_FAILURE(Connect(Receiving(1, &got)));
  ASSERT_OK(client_.Send("received"));  // takes the slot: its completion is queued, successful
  ASSERT_OK(client_.Send("waiting"));   // no slot: waits
  ledger_->ForceQpError(qpn());
  Drain();
  Drain();
  EXPECT_THAT(got, ElementsAre("received"));
}

TEST_F(CmQpTest, AReceiveOfADestroyedQpIsNotRun) {
  std::vector<std::string> got;
  ASSERT_NO_FATAL_FAILURE(Connect(Receiving(2, &got)));
  ASSERT_OK(client_.Send("late"));
  id_.reset();  // its QP, before the completion was drained
  Drain();
  EXPECT_THAT(got, IsEmpty());
}

TEST_F(CmQpTest, ASendDepthBelowTwoIsRefused) {
  fabric::CmQpOptions options;
  options.send_depth = 1;
  EXPECT_TRUE(IsError(listener_->CreateQp(*pd_, options), absl::StatusCode::kInvalidArgument, "send_depth"));
  EXPECT_EQ(listener_->qp(), nullptr);
}

// ---- The send queue's backlog

fabric::CmQpOptions Depth(uint32_t send_depth) {
  fabric::CmQpOptions options;
  options.send_depth = send_depth;
  return options;
}

// A callback that notes "<name> <status code>" in `log`.
fabric::WorkDone Note(std::vector<std::string>* log, std::string name) {
  return [log, name](absl::Status s) { log->push_back(name + " " + absl::StatusCodeToString(s.code())); };
}

TEST_F(CmQpTest, PostsBeyondTheSendDepthWaitAndArePostedInOrderAsCompletionsMakeRoom) {
  ASSERT_NO_FATAL_FAILURE(Connect(Depth(3)));
  std::vector<std::string> done;
  for (const char* m : {"s0", "s1", "s2", "s3", "s4"}) ASSERT_OK(qp().PostSend(m, Note(&done, m)));
  EXPECT_THAT(ledger_->Sent(qpn()), ElementsAre("s0", "s1", "s2"));  // three in flight
  EXPECT_EQ(ledger_->Backlog(qpn()), 2);
  EXPECT_EQ(ledger_->events_of({"backlog"}).size(), 2u);
  Drain();  // three completions: room for the two waiting, posted now
  EXPECT_THAT(done, ElementsAre("s0 OK", "s1 OK", "s2 OK"));
  EXPECT_THAT(ledger_->Sent(qpn()), ElementsAre("s0", "s1", "s2", "s3", "s4"));
  EXPECT_EQ(ledger_->Backlog(qpn()), 0);
  Drain();
  EXPECT_THAT(done, ElementsAre("s0 OK", "s1 OK", "s2 OK", "s3 OK", "s4 OK"));
  // Room again: the next post goes straight out.
  ASSERT_OK(qp().PostSend("s5", Note(&done, "s5")));
  EXPECT_EQ(ledger_->Backlog(qpn()), 0);
  EXPECT_EQ(ledger_->Sent(qpn()).size(), 6u);
}

TEST_F(CmQpTest, AWaitingBindKeepsItsFencedSendRightBehindIt) {
  ASSERT_NO_FATAL_FAILURE(Connect(Depth(2)));
  std::vector<char> memory(4096);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<fabric::Mr> mr,
                       pd_->RegMr(memory.data(), memory.size(),
                                  fabric::kLocalWrite | fabric::kRemoteRead | fabric::kMwBind));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<fabric::Mw> mw, pd_->AllocMw(fabric::MwType::kType2));

  std::vector<std::string> done;
  ASSERT_OK(qp().PostSend("before", Note(&done, "before")));  // one of two in flight: the pair must wait
  // The key message is made inside PostBind, on this thread, with no lock of the fabric held (it may call
  // into the fake), although the bind waits.
  int made = 0;
  uint32_t sent_key = 0, bound_key = 0;
  fabric::SendAfterBind then;
  then.message = [&](uint32_t rkey) {
    made++;
    sent_key = rkey;
    EXPECT_EQ(ledger_->Backlog(qpn()), 0);
    return "key " + std::to_string(rkey);
  };
  then.done = Note(&done, "key");
  fabric::BindSpec spec;
  spec.mr = mr.get();
  spec.addr = reinterpret_cast<uint64_t>(memory.data());
  spec.length = memory.size();
  spec.access = fabric::kRemoteRead;
  spec.then = &then;
  ASSERT_OK(qp().PostBind(*mw, spec, [&](absl::StatusOr<uint32_t> rkey) {
    done.push_back(rkey.ok() ? "bind OK" : "bind " + rkey.status().ToString());
    if (rkey.ok()) bound_key = *rkey;
  }));
  EXPECT_EQ(made, 1);
  ASSERT_OK(qp().PostSend("after", Note(&done, "after")));  // behind the waiting bind, though there is room
  EXPECT_EQ(ledger_->Backlog(qpn()), 2);
  EXPECT_THAT(ledger_->Sent(qpn()), ElementsAre("before"));
  EXPECT_THAT(ledger_->events_of({"bind_mw"}), IsEmpty());  // not posted: no effect yet

  Drain();  // "before" completes; the bind and its SEND (two) go out together; "after" still waits
  const std::string send = "send " + std::to_string(ledger_->QpIdByQpn(qpn()));
  EXPECT_THAT(ledger_->events_of({"bind_mw", "send"}), ElementsAre(send, "bind_mw 1", send));
  EXPECT_THAT(ledger_->Sent(qpn()), ElementsAre("before", "key " + std::to_string(sent_key)));
  EXPECT_EQ(ledger_->Backlog(qpn()), 1);
  Drain();
  EXPECT_THAT(ledger_->Sent(qpn()), ElementsAre("before", "key " + std::to_string(sent_key), "after"));
  Drain();
  EXPECT_THAT(done, ElementsAre("before OK", "bind OK", "key OK", "after OK"));
  EXPECT_EQ(bound_key, sent_key);
  EXPECT_EQ(mw->rkey(), sent_key);
  EXPECT_EQ(made, 1);

  // Unbound before the window, its MR and the QP go.
  ASSERT_OK(qp().PostInvalidate(*mw, *mr, Note(&done, "invalidate")));
  Drain();
  EXPECT_EQ(done.back(), "invalidate OK");
}

TEST_F(CmQpTest, WaitingPostsOfAQpThatWentToErrorCompleteFlushed) {
  ASSERT_NO_FATAL_FAILURE(Connect(Depth(2)));
  std::vector<std::string> done;
  for (const char* m : {"s0", "s1", "s2", "s3"}) ASSERT_OK(qp().PostSend(m, Note(&done, m)));
  ledger_->ForceQpError(qpn());
  Drain();  // the two in flight had completed; the two waiting are posted to a QP in the error state
  Drain();
  EXPECT_THAT(done, ElementsAre("s0 OK", "s1 OK", "s2 ABORTED", "s3 ABORTED"));
  EXPECT_THAT(ledger_->Sent(qpn()), ElementsAre("s0", "s1"));
}

TEST_F(CmQpTest, DestroyingAQpDropsItsBacklogUnrun) {
  ASSERT_NO_FATAL_FAILURE(Connect(Depth(2)));
  const uint32_t n = qpn();
  std::vector<std::string> done;
  for (const char* m : {"s0", "s1", "s2", "s3"}) ASSERT_OK(qp().PostSend(m, Note(&done, m)));
  ASSERT_EQ(ledger_->Backlog(n), 2);
  const uint64_t fake_id = ledger_->QpIdByQpn(n);
  id_.reset();  // rdmad's id and its QP, two posts still waiting
  EXPECT_THAT(ledger_->events_of({"drop_backlog"}), ElementsAre("drop_backlog " + std::to_string(fake_id) + " 2"));
  Drain();
  Drain();
  for (const std::string& d : done) EXPECT_TRUE(d.rfind("s0", 0) == 0 || d.rfind("s1", 0) == 0) << d;
  EXPECT_THAT(ledger_->Sent(n), ElementsAre("s0", "s1"));
}

TEST_F(CmQpTest, PostsFromSeveralThreadsKeepEachThreadsOrder) {
  ASSERT_NO_FATAL_FAILURE(Connect(Depth(4)));
  constexpr int kThreads = 4, kEach = 50;
  std::mutex mu;
  int completed = 0;
  std::vector<std::thread> posters;
  for (int t = 0; t < kThreads; ++t) {
    posters.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        EXPECT_OK(qp().PostSend(std::to_string(t) + " " + std::to_string(i), [&](absl::Status s) {
          EXPECT_OK(s);
          std::lock_guard<std::mutex> lock(mu);
          completed++;
        }));
      }
    });
  }
  // The test's thread is the dispatcher meanwhile.
  EXPECT_TRUE(Eventually([&] {
    Drain();
    std::lock_guard<std::mutex> lock(mu);
    return completed == kThreads * kEach;
  }));
  for (auto& p : posters) p.join();
  std::map<int, int> next;  // thread -> the number its next SEND must carry
  for (const std::string& m : ledger_->Sent(qpn())) {
    const int t = std::stoi(m.substr(0, m.find(' '))), i = std::stoi(m.substr(m.find(' ') + 1));
    EXPECT_EQ(i, next[t]) << m;
    next[t] = i + 1;
  }
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(next[t], kEach);
}

}  // namespace
}  // namespace rdmad
