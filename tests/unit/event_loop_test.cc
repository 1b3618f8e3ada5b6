// dispatch::EventLoop and dispatch::WorkerPool: order, thread identity, fd readiness, stop semantics.
#include "server/dispatch/event_loop.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"
#include "server/dispatch/worker_pool.h"

namespace rdmad::dispatch {
namespace {

TEST(EventLoopTest, RunsPostedTasksInOrderOnItsOwnNamedThread) {
  EventLoop loop("test-loop");
  std::vector<int> order;
  for (int i = 0; i < 5; ++i) loop.Post([&order, i] { order.push_back(i); });
  bool in_loop = false;
  ASSERT_TRUE(loop.RunSync([&] { in_loop = loop.InLoop(); }));
  EXPECT_TRUE(in_loop);
  EXPECT_FALSE(loop.InLoop());
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_GT(loop.tid(), 0);
  EXPECT_GE(loop.tasks_run(), 6u);
}

TEST(EventLoopTest, WatchedFdRunsItsHandlerUntilUnwatched) {
  EventLoop loop("fd-loop");
  int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::atomic<int> calls{0};
  absl::Notification fired;
  ASSERT_TRUE(loop.RunSync([&] {
    ASSERT_TRUE(loop.Watch(fd, [&] {
      uint64_t v;
      ASSERT_EQ(read(fd, &v, sizeof v), static_cast<ssize_t>(sizeof v));
      if (calls++ == 0) fired.Notify();
    }).ok());
  }));
  uint64_t one = 1;
  ASSERT_EQ(write(fd, &one, sizeof one), static_cast<ssize_t>(sizeof one));
  fired.WaitForNotification();
  ASSERT_TRUE(loop.RunSync([&] { loop.Unwatch(fd); }));
  ASSERT_EQ(write(fd, &one, sizeof one), static_cast<ssize_t>(sizeof one));
  ASSERT_TRUE(loop.RunSync([] {}));  // a full turn of the loop after the write
  EXPECT_EQ(calls.load(), 1);
  close(fd);
}

TEST(EventLoopTest, AfterStopPostsAreRefusedAndQueuedTasksAreDestroyedUnrun) {
  auto loop = std::make_unique<EventLoop>("stop-loop");
  absl::Notification blocked, release;
  loop->Post([&] {
    blocked.Notify();
    release.WaitForNotification();
  });
  blocked.WaitForNotification();
  auto token = std::make_shared<int>(0);
  bool ran = false;
  loop->Post([&ran, token] { ran = true; });
  loop->Stop();
  EXPECT_FALSE(loop->Post([] {}));
  release.Notify();
  loop.reset();
  EXPECT_FALSE(ran);
  EXPECT_EQ(token.use_count(), 1);  // the unrun task (and what it owned) was destroyed
}

TEST(WorkerPoolTest, RunsTasksOnSeveralThreads) {
  WorkerPool pool("w", 2);
  absl::Notification both_running, release;
  std::atomic<int> running{0};
  for (int i = 0; i < 2; ++i) {
    pool.Post([&] {
      if (++running == 2) both_running.Notify();
      release.WaitForNotification();
    });
  }
  both_running.WaitForNotification();  // two tasks at once: two threads (else this never returns)
  release.Notify();
}

TEST(WorkerPoolTest, DestructionLetsRunningTasksFinishAndDropsQueuedOnes) {
  auto pool = std::make_unique<WorkerPool>("w", 1);
  absl::Notification running, release;
  bool finished = false, queued_ran = false;
  pool->Post([&] {
    running.Notify();
    release.WaitForNotification();
    finished = true;
  });
  running.WaitForNotification();
  pool->Post([&] { queued_ran = true; });
  WorkerPool* raw = pool.get();
  std::thread destroyer([&] { pool.reset(); });
  // The destructor refuses new work before it joins; once it does, let the running task end.
  while (raw->Post([] {})) {
  }
  release.Notify();
  destroyer.join();
  EXPECT_TRUE(finished);
  EXPECT_FALSE(queued_ran);
}

}  // namespace
}  // namespace rdmad::dispatch
