// dispatch::EventLoop and dispatch::WorkerPool: order, thread identity, fd readiness, stop semantics.
#include "server/dispatch/event_loop.h"

#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <string>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "server/common/sync.h"
#include "server/dispatch/handoffs.h"
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

// A request's path counts a hand-off each time its work moves to another thread (posted to a loop or a
// pool, or a callback carried there), none where it runs on its maker's thread; work outside a request has
// no path; a branch counts on its own.
TEST(HandoffsTest, ThePathCountsEveryMoveToAnotherThreadOfTheWorkThatCarriesIt) {
  EventLoop loop("path-loop");
  WorkerPool pool("path-pool", 1);
  Notification done;
  int at_answer = -2, on_branch = -2;
  {
    Handoffs::Scope request(0);
    // here -> loop (1) -> pool (2) -> loop (3); a callback made on the loop and run there stays at 3.
    loop.Post([&] {
      pool.Post([&] {
        loop.Post([&] {
          auto same_thread = Carry([&] {
            at_answer = Handoffs::Current();
            done.Notify();
          });
          std::move(same_thread)();
        });
      });
    });
    auto here = Carry([&] { on_branch = Handoffs::Current(); });
    std::move(here)();  // run where it was made: not a hand-off
    EXPECT_EQ(on_branch, 0);
  }
  done.WaitForNotification();
  EXPECT_EQ(at_answer, 3);
  EXPECT_EQ(Handoffs::Current(), -1);  // the request's scope ended
  int outside = 0;
  ASSERT_TRUE(loop.RunSync([&] { outside = Handoffs::Current(); }));
  EXPECT_EQ(outside, -1);
}

// Loop-only methods and state require the loop's role; AssertInLoop takes it on the loop thread and aborts
// anywhere else, naming the loop.
TEST(EventLoopDeathTest, AssertInLoopPassesOnTheLoopAndAbortsOffIt) {
  testing::FLAGS_gtest_death_test_style = "threadsafe";  // the loop's thread runs while the test forks
  EventLoop loop("role-loop");
  bool asserted = false;
  ASSERT_TRUE(loop.RunSync([&] {
    loop.AssertInLoop();
    asserted = true;
  }));
  EXPECT_TRUE(asserted);
  EXPECT_DEATH(loop.AssertInLoop(), "event loop role-loop: called off its thread");
}

TEST(EventLoopTest, WatchedFdRunsItsHandlerUntilUnwatched) {
  EventLoop loop("fd-loop");
  int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::atomic<int> calls{0};
  Notification fired;
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
  Notification blocked, release;
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

// Runs `child` in a forked process (whose limits it may lower without touching the test's) and returns its
// exit status; the child reports what went wrong on stderr.
int InChild(const std::function<int()>& child) {
  fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) _exit(child());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

// 0 if `made` is RESOURCE_EXHAUSTED with `want` in its message; else says why on stderr.
int ExpectExhausted(const absl::StatusOr<std::unique_ptr<EventLoop>>& made, const std::string& want) {
  if (made.ok()) {
    fprintf(stderr, "the loop was created\n");
    return 1;
  }
  const std::string message(made.status().message());
  fprintf(stderr, "status: %s\n", made.status().ToString().c_str());
  if (made.status().code() != absl::StatusCode::kResourceExhausted) return 2;
  return message.find(want) == std::string::npos ? 3 : 0;
}

TEST(EventLoopTest, CreateAnswersResourceExhaustedWhenOutOfDescriptors) {
  // No descriptor left: RLIMIT_NOFILE at the lowest free number. Without Create's status this aborts.
  EXPECT_EQ(InChild([] {
              const int lowest = dup(0);
              close(lowest);
              rlimit limit{static_cast<rlim_t>(lowest), static_cast<rlim_t>(lowest)};
              if (setrlimit(RLIMIT_NOFILE, &limit) != 0) return 10;
              return ExpectExhausted(EventLoop::Create("cm-78"),
                                     "event loop cm-78: epoll_create1: Too many open files (errno 24, EMFILE)");
            }),
            0);
  // One descriptor left: the epoll instance is made, the eventfd is refused, and the first is closed again.
  EXPECT_EQ(InChild([] {
              const int lowest = dup(0);
              close(lowest);
              rlimit limit{static_cast<rlim_t>(lowest + 1), static_cast<rlim_t>(lowest + 1)};
              if (setrlimit(RLIMIT_NOFILE, &limit) != 0) return 10;
              const int bad = ExpectExhausted(EventLoop::Create("cm-79"), "eventfd: Too many open files");
              if (bad != 0) return bad;
              const int again = dup(0);  // the epoll descriptor was released: its number is free
              return again == lowest ? 0 : 4;
            }),
            0);
}

TEST(EventLoopTest, CreateAnswersResourceExhaustedWhenNoThreadCanStart) {
  // Address space for the descriptors but not for a thread's stack: pthread_create fails (EAGAIN), which
  // std::thread throws as std::system_error. The stacks are made larger than any the process cached from
  // threads that ended, so a new one must be mapped.
  EXPECT_EQ(InChild([] {
              pthread_attr_t attr;
              pthread_attr_init(&attr);
              pthread_attr_setstacksize(&attr, 64 << 20);
              if (pthread_setattr_default_np(&attr) != 0) return 11;
              std::ifstream statm("/proc/self/statm");
              size_t pages = 0;
              statm >> pages;
              const rlim_t now = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE));
              rlimit limit{now + (1 << 20), now + (1 << 20)};
              if (setrlimit(RLIMIT_AS, &limit) != 0) return 10;
              return ExpectExhausted(EventLoop::Create("cm-80"), "event loop cm-80: pthread_create: ");
            }),
            0);
}

TEST(EventLoopTest, CreateMakesAWorkingLoop) {
  absl::StatusOr<std::unique_ptr<EventLoop>> loop = EventLoop::Create("made-loop");
  ASSERT_TRUE(loop.ok()) << loop.status();
  bool in_loop = false;
  ASSERT_TRUE((*loop)->RunSync([&] { in_loop = (*loop)->InLoop(); }));
  EXPECT_TRUE(in_loop);
}

TEST(WorkerPoolTest, RunsTasksOnSeveralThreads) {
  Notification both_running, release;  // before the pool: its threads are joined before these go
  WorkerPool pool("w", 2);
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
  Notification running, release;
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
