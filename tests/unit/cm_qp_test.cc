// A QP made on an rdma_cm id with fabric::CmQpOptions, on the fake fabric (tests/unit/fake_fabric.h,
// fake_cm.h): the messages its peer sends arrive at on_message (ReceiveOptions). rdmad's side is an id
// accepted here; the peer is a FakeClient. Completions are drained by the test itself, as the device's
// dispatcher would.
#include <memory>
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

}  // namespace
}  // namespace rdmad
