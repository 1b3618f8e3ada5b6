#include "server/dispatch/event_loop.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"

#include "server/common/sync.h"
#include "server/common/log.h"
#include "server/common/status.h"
#include "server/dispatch/handoffs.h"

namespace rdmad::dispatch {

namespace {

// Every refusal of the OS to make a loop is a resource running out (descriptors, threads, memory): the
// caller may retry once some are released.
absl::Status Exhausted(const char* call, int err, const std::string& name) {
  return ErrnoError(absl::StatusCode::kResourceExhausted, call, err, absl::StrCat("event loop ", name), "");
}

}  // namespace

absl::StatusOr<std::unique_ptr<EventLoop>> EventLoop::Create(std::string name) {
  const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd < 0) return Exhausted("epoll_create1", errno, name);
  const int wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) {
    const int err = errno;
    close(epoll_fd);
    return Exhausted("eventfd", err, name);
  }
  // The loop owns both descriptors from here: a failed start closes them in its destructor.
  std::unique_ptr<EventLoop> loop(new EventLoop(std::move(name), epoll_fd, wake_fd));
  RDMAD_RETURN_IF_ERROR(loop->Start());
  return loop;
}

EventLoop::EventLoop(std::string name, int epoll_fd, int wake_fd)
    : name_(std::move(name)), epoll_fd_(epoll_fd), wake_fd_(wake_fd) {}

EventLoop::EventLoop(std::string name)
    : EventLoop(std::move(name), epoll_create1(EPOLL_CLOEXEC), eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  absl::Status started = epoll_fd_ < 0   ? Exhausted("epoll_create1", errno, name_)
                         : wake_fd_ < 0 ? Exhausted("eventfd", errno, name_)
                                        : Start();
  if (!started.ok()) {
    // A start-up loop (a device's, the grants'): rdmad cannot work without it.
    RDMAD_LOG_ERROR("%s", std::string(started.message()).c_str());
    std::abort();
  }
}

absl::Status EventLoop::Start() {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_fd_;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) != 0) return Exhausted("epoll_ctl(ADD)", errno, name_);
  try {
    thread_ = std::thread([this] { Run(); });
  } catch (const std::system_error& e) {
    // std::thread reports pthread_create's error (EAGAIN: no thread or stack memory left) as the code.
    return Exhausted("pthread_create", e.code().value(), name_);
  }
  return absl::OkStatus();
}

EventLoop::~EventLoop() {
  Stop();
  if (thread_.joinable()) thread_.join();
  {
    MutexLock lock(&mu_);
    tasks_.clear();  // destroyed, not run: whatever they own is released here, on the caller's thread
  }
  if (wake_fd_ >= 0) close(wake_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
}

bool EventLoop::Post(Task task) {
  {
    MutexLock lock(&mu_);
    if (stopping_) return false;
    tasks_.push_back(Carry(std::move(task)));  // on its maker's path, one hand-off further (handoffs.h)
  }
  Wake();
  return true;
}

bool EventLoop::RunSync(Task task) {
  // Notifies when the posted task is destroyed: after it ran, or unrun because the loop stopped.
  struct State {
    Notification done;
    bool ran = false;
  };
  struct NotifyOnDestroy {
    std::shared_ptr<State> state;
    NotifyOnDestroy(std::shared_ptr<State> s) : state(std::move(s)) {}
    NotifyOnDestroy(NotifyOnDestroy&& o) noexcept : state(std::move(o.state)) {}
    ~NotifyOnDestroy() {
      if (state) state->done.Notify();
    }
  };
  auto state = std::make_shared<State>();
  Post([task = std::move(task), guard = NotifyOnDestroy(state)]() mutable {
    std::move(task)();
    guard.state->ran = true;
  });
  state->done.WaitForNotification();
  return state->ran;
}

absl::Status EventLoop::Watch(int fd, std::function<void()> on_ready) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) return FromErrno("epoll_ctl(ADD)", name_);
  handlers_[fd] = std::move(on_ready);
  return absl::OkStatus();
}

void EventLoop::Unwatch(int fd) {
  if (handlers_.erase(fd) == 0) return;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
}

void EventLoop::Stop() {
  {
    MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  Wake();
}

void EventLoop::Wake() {
  uint64_t one = 1;
  ssize_t n = write(wake_fd_, &one, sizeof one);
  (void)n;  // EAGAIN: the counter is already non-zero, the loop will wake anyway
}

void EventLoop::AssertInLoop() const {
  if (InLoop()) return;
  RDMAD_LOG_ERROR("event loop %s: called off its thread (a loop-only method or state): aborting", name_.c_str());
  std::abort();
}

void EventLoop::Run() {
  thread_id_ = std::this_thread::get_id();
  AssertInLoop();
  tid_ = static_cast<pid_t>(syscall(SYS_gettid));
  pthread_setname_np(pthread_self(), name_.substr(0, 15).c_str());
  epoll_event events[16];
  for (;;) {
    int n = epoll_wait(epoll_fd_, events, 16, -1);
    if (n < 0 && errno != EINTR) {
      RDMAD_LOG_ERROR("event loop %s: epoll_wait: %s", name_.c_str(), std::strerror(errno));
      return;
    }
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == wake_fd_) {
        uint64_t count;
        ssize_t r = read(wake_fd_, &count, sizeof count);
        (void)r;
        continue;
      }
      auto it = handlers_.find(fd);
      if (it == handlers_.end()) continue;  // unwatched by an earlier handler in this batch
      std::function<void()> handler = it->second;  // a copy: the handler may unwatch itself
      handler();
    }
    std::deque<Task> batch;
    {
      MutexLock lock(&mu_);
      if (stopping_) return;
      batch.swap(tasks_);
    }
    for (Task& t : batch) {
      std::move(t)();
      tasks_run_++;
    }
  }
}

}  // namespace rdmad::dispatch
