// rdmad's locks: Mutex, MutexLock and Notification, used by every layer (server/, and the tests); ThreadRole
// and LockedBy, which let clang's analysis check a thread's own state and a mutex's guard from outside its
// structure; and AwaitResult, the synchronous form of an asynchronous call.
//
// Why not absl::Mutex: Debian's Abseil is built without ThreadSanitizer hooks, so a TSan build of rdmad cannot
// see an absl::Mutex being taken or released and reports every access it guards as a race. These are built on
// std::mutex and std::condition_variable (pthreads), which ThreadSanitizer intercepts, and carry Abseil's
// thread-safety annotations (ABSL_LOCKABLE and friends), so clang's -Wthread-safety checks ABSL_GUARDED_BY
// fields against them as it would against absl::Mutex.
//
// Mutex::Await(ready) waits, holding the mutex, until `ready()` is true: it is evaluated on the waiting
// thread, with the mutex held, each time another thread releases the mutex (absl::Mutex::Await's contract;
// the predicate may read what the mutex guards and must not block).
//
// Threads: any. A Mutex is not recursive; Await and AwaitWithDeadline require it held.
#ifndef RDMAD_SERVER_COMMON_SYNC_H_
#define RDMAD_SERVER_COMMON_SYNC_H_

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace rdmad {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  // Wakes the waiters before it releases the mutex, never after: a waiter that returns may destroy the
  // Mutex (a Notification on its stack) as soon as it can take it.
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    if (waiters_ > 0) cv_.notify_all();
    mu_.unlock();
  }
  // Tells the analysis (and nothing else) that the caller holds the mutex.
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

  // Waits until ready() holds; the mutex is held on entry and on return, and while ready() runs: annotate the
  // predicate ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) when it reads what the mutex guards. The predicate reaches
  // Await as an absl::FunctionRef (as absl::Mutex's Condition does): the analysis checks the predicate's body
  // against its annotation where it is written, and Await calls it through the reference, under this mutex.
  void Await(absl::FunctionRef<bool()> ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    ++waiters_;
    while (!ready()) cv_.wait(lock);
    --waiters_;
    lock.release();
  }
  // As Await, until `deadline` at the latest; returns ready()'s last value.
  bool AwaitWithDeadline(absl::FunctionRef<bool()> ready, absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    ++waiters_;
    bool done = ready();
    while (!done) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) break;
      cv_.wait_for(lock, absl::ToChronoNanoseconds(left));
      done = ready();
    }
    --waiters_;
    lock.release();
    return done;
  }
  bool AwaitWithTimeout(absl::FunctionRef<bool()> ready, absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    return AwaitWithDeadline(ready, absl::Now() + timeout);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int waiters_ = 0;  // threads in Await*, guarded by mu_
};

// Holds a Mutex for its scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A one-shot event: Notify once; any number of threads wait for it.
class Notification {
 public:
  void Notify() {
    MutexLock lock(&mu_);
    notified_ = true;
  }
  bool HasBeenNotified() const {
    MutexLock lock(&mu_);
    return notified_;
  }
  void WaitForNotification() const {
    MutexLock lock(&mu_);
    mu_.Await([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return notified_; });
  }
  bool WaitForNotificationWithTimeout(absl::Duration timeout) const {
    MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return notified_; }, timeout);
  }
  bool WaitForNotificationWithDeadline(absl::Time deadline) const {
    MutexLock lock(&mu_);
    return mu_.AwaitWithDeadline([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return notified_; }, deadline);
  }

 private:
  mutable Mutex mu_;
  bool notified_ ABSL_GUARDED_BY(mu_) = false;
};

// A thread's role as a capability for clang's -Wthread-safety: state that only one thread may touch (an event
// loop's own) is ABSL_GUARDED_BY(role), methods only that thread may call are
// ABSL_EXCLUSIVE_LOCKS_REQUIRED(role), and code that runs on the thread says so with an assertion that checks
// it at run time and that the analysis trusts from there on (dispatch::EventLoop::AssertInLoop). Nothing is
// locked: the role is held by being that thread.
class ABSL_LOCKABLE ThreadRole {};

// A value that a mutex guards from outside the structure holding it: the bookkeeping of an entry that its
// owner keeps by pointer (a CM id's), guarded by the owner's mutex, which ABSL_GUARDED_BY cannot name from
// inside the entry. Get(mu) requires `mu` held, so clang's analysis checks every access; the declaration
// says which mutex it is.
template <typename T>
class LockedBy {
 public:
  T& Get(const Mutex& mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return value_; }
  const T& Get(const Mutex& mu) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return value_; }

 private:
  T value_{};
};

// Runs an asynchronous operation (`start` takes its done callback, which receives an absl::StatusOr<T>) and
// waits for its result: the synchronous form of an asynchronous call. Never on the thread that runs the
// callback.
template <typename T, typename Start>
absl::StatusOr<T> AwaitResult(Start&& start) {
  Notification finished;
  absl::StatusOr<T> result = absl::UnknownError("not finished");
  std::forward<Start>(start)([&](absl::StatusOr<T> r) {
    result = std::move(r);
    finished.Notify();
  });
  finished.WaitForNotification();
  return result;
}

}  // namespace rdmad

#endif  // RDMAD_SERVER_COMMON_SYNC_H_
