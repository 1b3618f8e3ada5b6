// rdmad::Mutex, MutexLock and Notification (server/common/sync.h): Await wakes on the release that makes its
// condition true, AwaitWithDeadline gives up at its deadline, a Notification wakes every waiter once.
#include "server/common/sync.h"

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace rdmad {
namespace {

TEST(Mutex, GuardsACounterAcrossThreads) {
  Mutex mu;
  int n = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        MutexLock lock(&mu);
        ++n;
      }
    });
  }
  for (auto& t : threads) t.join();
  MutexLock lock(&mu);
  EXPECT_EQ(n, 40000);
}

TEST(Mutex, AwaitReturnsOnceAnotherThreadMakesTheConditionTrue) {
  Mutex mu;
  int stage = 0;
  std::thread setter([&] {
    for (int i = 1; i <= 3; ++i) {
      MutexLock lock(&mu);
      stage = i;
    }
  });
  {
    MutexLock lock(&mu);
    mu.Await([&] { return stage == 3; });
    EXPECT_EQ(stage, 3);
  }
  setter.join();
}

TEST(Mutex, AwaitWithDeadlineGivesUpAtTheDeadlineWithTheConditionFalse) {
  Mutex mu;
  bool never = false;
  MutexLock lock(&mu);
  const absl::Time start = absl::Now();
  EXPECT_FALSE(mu.AwaitWithDeadline([&] { return never; }, start + absl::Milliseconds(50)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(50));
  EXPECT_TRUE(mu.AwaitWithTimeout([] { return true; }, absl::ZeroDuration()));
}

TEST(Notification, WakesEveryWaiterAndStaysNotified) {
  Notification n;
  EXPECT_FALSE(n.HasBeenNotified());
  EXPECT_FALSE(n.WaitForNotificationWithTimeout(absl::Milliseconds(10)));
  std::atomic<int> woken{0};
  std::vector<std::thread> waiters;
  for (int t = 0; t < 3; ++t) {
    waiters.emplace_back([&] {
      n.WaitForNotification();
      ++woken;
    });
  }
  n.Notify();
  for (auto& t : waiters) t.join();
  EXPECT_EQ(woken.load(), 3);
  EXPECT_TRUE(n.HasBeenNotified());
  EXPECT_TRUE(n.WaitForNotificationWithDeadline(absl::InfinitePast()));
}

// A waiter may destroy the Notification as soon as it returns: the notifier touches nothing after that.
TEST(Notification, TheWaiterMayDestroyItAtOnce) {
  for (int i = 0; i < 200; ++i) {
    auto* n = new Notification;
    std::thread notifier([n] { n->Notify(); });
    n->WaitForNotification();
    delete n;
    notifier.join();
  }
}

}  // namespace
}  // namespace rdmad
