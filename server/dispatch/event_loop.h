// EventLoop: one thread that owns a set of file descriptors and runs tasks, in the style of rping's
// cm_thread: it epoll()s the fds it watches plus a wake-up eventfd, runs each ready fd's handler, then the
// tasks posted to it, in FIFO order.
//
// rdmad's dispatchers are EventLoops: one per device (its completion channel: bind and invalidate
// completions) and one per rdma_cm event channel (the channel's fd: CM events, acknowledged as soon as
// they are copied out). Whatever a loop owns is touched only on its thread; other threads hand it work
// with Post().
//
// Creation: Create() answers RESOURCE_EXHAUSTED (naming the call and the errno) when the OS refuses the
// epoll instance, the wake-up eventfd or the thread; use it for every loop made on a caller's behalf (an
// event channel). The constructor is for rdmad's own start-up loops, which it cannot run without: there such
// a refusal is logged and aborts.
//
// Threads: the loop's own thread runs handlers and tasks. Post(), InLoop(), tid(), tasks_run() may be called
// from any thread. Watch()/Unwatch() only on the loop thread (or through Post), so a handler is never removed
// while it runs: they require the loop's ThreadRole, which code running on the loop takes with
// AssertInLoop() (checked at run time, and by clang's -Wthread-safety from there on). RunSync() blocks the caller until the task ran: only for set-up, tear-down and tests, never on a
// loop thread. The destructor stops the thread and joins it; tasks still queued are destroyed, not run.
#ifndef RDMAD_SERVER_DISPATCH_EVENT_LOOP_H_
#define RDMAD_SERVER_DISPATCH_EVENT_LOOP_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/common/sync.h"

namespace rdmad::dispatch {

class EventLoop {
 public:
  using Task = absl::AnyInvocable<void() &&>;

  // A started loop whose thread is named `name` (at most 15 characters are kept by the kernel), or
  // RESOURCE_EXHAUSTED: "event loop cm-7: epoll_create1: Too many open files (errno 24, EMFILE)", likewise
  // for eventfd and pthread_create. Nothing is left behind on failure.
  static absl::StatusOr<std::unique_ptr<EventLoop>> Create(std::string name);
  // Starts the thread as Create does; aborts if the OS refuses (start-up loops only, see above).
  explicit EventLoop(std::string name);
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Queues `task` to run on the loop thread. Returns false (and destroys the task) once the loop stops.
  bool Post(Task task);
  // Posts and waits until the task ran (or the loop stopped). Never call it on a loop thread.
  bool RunSync(Task task);

  // Loop thread only. `on_ready` runs on the loop thread whenever fd is readable (level-triggered).
  absl::Status Watch(int fd, std::function<void()> on_ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(role_);
  void Unwatch(int fd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(role_);

  bool InLoop() const { return std::this_thread::get_id() == thread_id_.load(); }
  // Aborts (with the loop's name in the log) unless called on the loop thread. From the call on, clang's
  // thread-safety analysis knows the caller holds the loop's role: what requires it may be called.
  void AssertInLoop() const ABSL_ASSERT_EXCLUSIVE_LOCK(role_);
  const std::string& name() const { return name_; }
  pid_t tid() const { return tid_.load(); }
  uint64_t tasks_run() const { return tasks_run_.load(); }

  // Stops the thread after the handler or task that runs now; idempotent. The destructor calls it.
  void Stop();

 private:
  // Takes the two descriptors (either may be -1: the loop is then not started).
  EventLoop(std::string name, int epoll_fd, int wake_fd);
  // Registers the wake-up fd and starts the thread; RESOURCE_EXHAUSTED naming the call otherwise.
  absl::Status Start();
  void Run();
  void Wake();

  const std::string name_;
  const int epoll_fd_;
  const int wake_fd_;
  std::atomic<pid_t> tid_{0};
  std::atomic<std::thread::id> thread_id_{};  // set first thing on the loop thread
  std::atomic<uint64_t> tasks_run_{0};
  ThreadRole role_;  // held by the loop thread only
  std::map<int, std::function<void()>> handlers_ ABSL_GUARDED_BY(role_);

  Mutex mu_;
  std::deque<Task> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  std::thread thread_;  // last: started after everything above exists
};

}  // namespace rdmad::dispatch

#endif  // RDMAD_SERVER_DISPATCH_EVENT_LOOP_H_
