// A data-plane client over the fake rdma_cm (fake_cm.h), as RemoteRegion is over the real one: its own
// channel, id, PD and QP; it dials rdmad's listener with a token and reports the first event it gets, and
// sends rdmad messages on its connection (Send). What rdmad sends it: FakeLedger::Sent(rdmad's qpn).
// Threads: the test's own; the fake delivers events to the client's channel, drained here.
#ifndef RDMAD_TESTS_UNIT_FAKE_CLIENT_H_
#define RDMAD_TESTS_UNIT_FAKE_CLIENT_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/status.h"

#include "server/fabric/cm.h"
#include "server/fabric/fabric.h"
#include "tests/support/eventually.h"
#include "tests/unit/fake_cm.h"

namespace rdmad::test {

struct FakeClient {
  fabric::SockAddr listener{"10.0.2.15", 7471};
  std::unique_ptr<fabric::CmChannel> channel;
  std::unique_ptr<fabric::CmId> id;
  std::unique_ptr<fabric::Pd> pd;

  // Resolves, creates its QP and connects with `token` as private data: the first event that follows
  // (ESTABLISHED, REJECTED, ...), or an event of type kAddrError with no data if none came.
  fabric::CmEvent Dial(fake::FakeCm& cm, fabric::Device* device, const std::string& token) {
    channel = cm.CreateChannel().value();
    id = channel->CreateId(1).value();
    pd = device->AllocPd().value();
    EXPECT_TRUE(id->ResolveAddr(listener, 1000).ok());
    Wait();
    EXPECT_TRUE(id->ResolveRoute(1000).ok());
    Wait();
    EXPECT_TRUE(id->CreateQp(*pd).ok());
    EXPECT_TRUE(id->Connect(token).ok());
    std::vector<fabric::CmEvent> e = Wait();
    return e.empty() ? fabric::CmEvent{} : std::move(e.front());
  }
  // The next events on its channel, waiting up to 10 s for some.
  std::vector<fabric::CmEvent> Wait() {
    std::vector<fabric::CmEvent> e;
    Eventually([&] {
      e = channel->Drain();
      return !e.empty();
    });
    return e;
  }
  // A SEND of `bytes` to rdmad's QP on this connection (fake::FakeCmId::Send): OK once on the wire; the
  // message reaches rdmad's on_message when its QP has a receive posted (at once, or after an RNR wait).
  absl::Status Send(const std::string& bytes) {
    auto* fake = dynamic_cast<fake::FakeCmId*>(id.get());
    if (fake == nullptr) return absl::FailedPreconditionError("the client has no fake rdma_cm id (Dial first)");
    return fake->Send(bytes);
  }
  // Goes away (rdmad sees DISCONNECTED), releasing in order: the id (its QP), the PD, the channel.
  void Leave() {
    id.reset();
    pd.reset();
    channel.reset();
  }
};

}  // namespace rdmad::test

#endif  // RDMAD_TESTS_UNIT_FAKE_CLIENT_H_
