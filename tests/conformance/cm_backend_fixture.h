// The fixture and helpers of cm_backend_test.cc (the librdmacm backend on real rdma_cm in the guest): a
// VerbsFabric per test, channels driven synchronously with bounded waits, a watchdog for destroys, and the
// device resource check at TearDown. Included by that one test file only.
// Threads: everything runs on the test thread, except the Watchdog's own thread.
#ifndef RDMAD_TESTS_CONFORMANCE_CM_BACKEND_FIXTURE_H_
#define RDMAD_TESTS_CONFORMANCE_CM_BACKEND_FIXTURE_H_

#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "server/common/status.h"
#include "server/fabric/cm.h"
#include "server/verbs/cm.h"
#include "server/verbs/device.h"
#include "server/verbs/qp.h"

namespace rdmad::verbs::cmtest {

using fabric::CmEvent;
using fabric::CmEventType;
using fabric::CmId;
using ::testing::AssertionFailure;
using ::testing::AssertionResult;
using ::testing::AssertionSuccess;
using Clock = std::chrono::steady_clock;

inline constexpr int kWaitMs = 10000;  // every wait for an event is bounded by this
inline constexpr int kQuietMs = 400;   // how long "nothing arrives" is watched
inline constexpr int kBacklog = 8;

inline std::string Env(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}
inline std::string Addr() { return Env("RDMAD_CM_ADDR", "10.0.2.15"); }

inline std::string Resources() {
  std::string out;
  if (FILE* p = popen("rdma resource show 2>&1", "r")) {
    char buf[512];
    while (fgets(buf, sizeof buf, p)) out += buf;
    pclose(p);
  }
  return out;
}

inline std::string Describe(const CmEvent& e) {
  return std::string(fabric::CmEventName(e.type)) + " (key " + std::to_string(e.key) + ", status " +
         std::to_string(e.status) + ", " + std::to_string(e.private_data.size()) + " bytes of private data)";
}

// `got` is `want` followed only by zero bytes (rdma_cm pads to the transport's size on IB/RoCE).
inline AssertionResult Padded(const std::string& got, const std::string& want) {
  if (got.compare(0, want.size(), want) != 0) return AssertionFailure() << "private data does not start with it";
  for (size_t i = want.size(); i < got.size(); ++i) {
    if (got[i] != 0) return AssertionFailure() << "byte " << i << " after the data is not zero";
  }
  return AssertionSuccess();
}

inline bool Readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, timeout_ms) > 0;
}

// A channel and the events drained from it but not yet looked at.
struct Chan {
  std::unique_ptr<fabric::CmChannel> ch;
  std::deque<CmEvent> queue;

  std::optional<CmEvent> Next(int timeout_ms) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (queue.empty()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left < 0) break;
      if (Readable(ch->fd(), static_cast<int>(left))) {
        for (CmEvent& e : ch->Drain()) queue.push_back(std::move(e));
      }
    }
    if (queue.empty()) return std::nullopt;
    CmEvent e = std::move(queue.front());
    queue.pop_front();
    return e;
  }
};

inline AssertionResult NextIs(Chan& chan, CmEventType type, uint64_t key, CmEvent* out = nullptr) {
  std::optional<CmEvent> e = chan.Next(kWaitMs);
  if (!e) return AssertionFailure() << "no event in " << kWaitMs << " ms; wanted " << fabric::CmEventName(type);
  if (e->type != type || e->key != key) {
    return AssertionFailure() << "got " << Describe(*e) << "; wanted " << fabric::CmEventName(type) << " for key "
                              << key;
  }
  if (out != nullptr) *out = std::move(*e);
  return AssertionSuccess();
}

inline AssertionResult Quiet(Chan& chan, int ms = kQuietMs) {
  if (std::optional<CmEvent> e = chan.Next(ms)) return AssertionFailure() << "unexpected " << Describe(*e);
  return AssertionSuccess();
}

// Fails the test and ends the process if it is not destroyed within 10 s (a blocked rdma_destroy_id).
class Watchdog {
 public:
  explicit Watchdog(std::string what) : what_(std::move(what)), thread_([this] { Watch(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  void Watch() {
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, std::chrono::seconds(10), [this] { return done_; })) return;
    ADD_FAILURE() << what_ << " blocked for 10 s";
    std::cerr << "watchdog: " << what_ << " blocked for 10 s; ending the test binary" << std::endl;
    std::_Exit(3);
  }
  std::string what_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

inline void Destroy(std::unique_ptr<CmId>& id, const std::string& what) {
  Watchdog watchdog("destroying " + what);
  id.reset();
}

// One side of a connection: the id (and its QP) is destroyed before its PD.
struct End {
  std::unique_ptr<fabric::Pd> pd;
  std::unique_ptr<CmId> id;
  Qp* qp() const { return static_cast<Qp*>(id->qp()); }
};

inline fabric::QpState State(const End& e) { return e.id->qp()->state(); }

class CmBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto fabric = VerbsFabric::Open();
    ASSERT_TRUE(fabric.ok()) << fabric.status();
    fabric_ = std::move(fabric).value();
    ASSERT_NE(fabric_->cm(), nullptr) << "rdma_cm is unavailable";
    for (fabric::Device* d : fabric_->devices()) {
      if (d->info().name == Env("RDMAD_DEVICE", "rxe0")) device_ = d;
    }
    ASSERT_NE(device_, nullptr) << "no device " << Env("RDMAD_DEVICE", "rxe0");
    resources_ = Resources();
  }

  void TearDown() override {
    if (resources_.empty()) return;
    std::string now = Resources();
    for (int i = 0; i < 20 && now != resources_; ++i) {  // let the kernel finish a release (2 s at most)
      usleep(100 * 1000);
      now = Resources();
    }
    EXPECT_EQ(now, resources_) << "device resources at the end of the test differ from its start";
  }

  std::unique_ptr<Chan> NewChannel() {
    auto ch = fabric_->cm()->CreateChannel();
    EXPECT_TRUE(ch.ok()) << ch.status();
    if (!ch.ok()) return nullptr;
    return std::unique_ptr<Chan>(new Chan{std::move(ch).value(), {}});
  }

  // A listener on `chan` at Addr():port.
  void Listen(Chan& chan, uint64_t key, uint16_t port, std::unique_ptr<CmId>* out) {
    auto id = chan.ch->CreateId(key);
    ASSERT_TRUE(id.ok()) << id.status();
    *out = std::move(id).value();
    ASSERT_TRUE((*out)->Bind({Addr(), port}).ok());
    ASSERT_TRUE((*out)->Listen(kBacklog).ok());
  }

  // An id on `chan` resolved (address and route events taken) to Addr():port, with a PD and a QP.
  void Resolve(Chan& chan, uint64_t key, uint16_t port, End* out) {
    auto id = chan.ch->CreateId(key);
    ASSERT_TRUE(id.ok()) << id.status();
    out->id = std::move(id).value();
    ASSERT_TRUE(out->id->ResolveAddr({Addr(), port}, 2000).ok());
    ASSERT_TRUE(NextIs(chan, CmEventType::kAddrResolved, key));
    ASSERT_TRUE(out->id->ResolveRoute(2000).ok());
    ASSERT_TRUE(NextIs(chan, CmEventType::kRouteResolved, key));
    ASSERT_EQ(out->id->device(), device_);
    auto pd = out->id->device()->AllocPd();
    ASSERT_TRUE(pd.ok()) << pd.status();
    out->pd = std::move(pd).value();
    absl::Status s = out->id->CreateQp(*out->pd);
    ASSERT_TRUE(s.ok()) << s;
  }

  // The CONNECT_REQUEST on `lchan` becomes `passive` (key `pkey`, a PD and a QP on its device).
  void TakeRequest(Chan& lchan, uint64_t lkey, uint64_t pkey, End* passive, std::string* data = nullptr) {
    CmEvent req;
    ASSERT_TRUE(NextIs(lchan, CmEventType::kConnectRequest, lkey, &req));
    ASSERT_NE(req.new_id, nullptr);
    EXPECT_EQ(req.new_id->key(), 0u);
    if (data != nullptr) *data = req.private_data;
    passive->id = std::move(req.new_id);
    passive->id->set_key(pkey);
    ASSERT_EQ(passive->id->device(), device_);
    auto pd = passive->id->device()->AllocPd();
    ASSERT_TRUE(pd.ok()) << pd.status();
    passive->pd = std::move(pd).value();
    absl::Status s = passive->id->CreateQp(*passive->pd);
    ASSERT_TRUE(s.ok()) << s;
  }

  // listener (key 1) on `lchan`, active (key 2) on `achan`, passive (key 3): ESTABLISHED on both sides.
  void Establish(Chan& lchan, Chan& achan, uint16_t port, std::unique_ptr<CmId>* listener, End* active,
                 End* passive) {
    ASSERT_NO_FATAL_FAILURE(Listen(lchan, 1, port, listener));
    ASSERT_NO_FATAL_FAILURE(Resolve(achan, 2, port, active));
    ASSERT_TRUE(active->id->Connect("hello").ok());
    ASSERT_NO_FATAL_FAILURE(TakeRequest(lchan, 1, 3, passive));
    ASSERT_TRUE(passive->id->Accept("welcome").ok());
    ASSERT_TRUE(NextIs(achan, CmEventType::kEstablished, 2));
    ASSERT_TRUE(NextIs(lchan, CmEventType::kEstablished, 3));
  }

  std::unique_ptr<VerbsFabric> fabric_;
  fabric::Device* device_ = nullptr;
  std::string resources_;
};

}  // namespace rdmad::verbs::cmtest

#endif  // RDMAD_TESTS_CONFORMANCE_CM_BACKEND_FIXTURE_H_
