// Hub<Event, Filter>: an event stream that is published, numbered and fanned out to watchers, with a
// retained history to resume from. The rdma_cm events (server/cm/events.h) and the grant events
// (server/grants/events.h) are two instances.
//
// Requirements: Event is a protobuf message with sequence(), set_sequence(uint64_t) and
// set_time_unix_nanos(int64_t); Filter has `bool Matches(const Event&) const`.
//
// Publishing never waits for a watcher: Publish appends to each matching watcher's bounded buffer and
// returns. A watcher whose buffer is full is closed with RESOURCE_EXHAUSTED, the count of events it lost
// and the last sequence it was given, so it can resume (after_sequence) from the retained history, a
// bounded ring of the most recent events.
//
// Threads: Publish on the publishers' threads (for rdma_cm, the channel dispatchers); Subscribe,
// Unsubscribe and Close* from any thread. One mutex (Hub::mu_) guards the hub; each HubWatcher has its
// own (the stream reads from it on gRPC's threads). Lock order: hub, then watcher. A watcher's `wake`
// callback runs without any lock held, on the publisher's (or closer's) thread: it must not block.
#ifndef RDMAD_SERVER_DISPATCH_HUB_H_
#define RDMAD_SERVER_DISPATCH_HUB_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/common/sync.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "proto/wire/wall_clock.h"
#include "server/common/status.h"

namespace rdmad::dispatch {

template <typename Event, typename Filter>
class Hub;

// One subscriber's buffer: filled by the hub, drained by the stream.
template <typename Event, typename Filter>
class HubWatcher {
 public:
  HubWatcher(Filter filter, size_t capacity) : filter_(std::move(filter)), capacity_(capacity) {}
  HubWatcher(const HubWatcher&) = delete;
  HubWatcher& operator=(const HubWatcher&) = delete;

  // Called (without locks) when an event was queued or the watcher was closed.
  void set_wake(std::function<void()> wake) {
    MutexLock lock(&mu_);
    wake_ = std::move(wake);
  }
  // The next event to send, if any.
  std::optional<Event> Next() {
    MutexLock lock(&mu_);
    if (queue_.empty()) return std::nullopt;
    Event e = std::move(queue_.front());
    queue_.pop_front();
    last_taken_ = e.sequence();
    return e;
  }
  // Once closed and drained: the status the stream ends with.
  std::optional<absl::Status> Closed() {
    MutexLock lock(&mu_);
    if (!closed_ || !queue_.empty()) return std::nullopt;
    return close_status_;
  }
  const Filter& filter() const { return filter_; }

 private:
  friend class Hub<Event, Filter>;

  // Returns true if the wake callback must run. A replay (Subscribe's history, itself bounded by
  // Options::retained) is never cut off: only falling behind live events is.
  bool Offer(const Event& e, bool replay = false) {
    MutexLock lock(&mu_);
    if (closed_) return false;
    if (!replay && queue_.size() >= capacity_) {
      // Cut off: what it has not taken is lost too; it resumes from the last event it was given.
      dropped_ += queue_.size() + 1;
      queue_.clear();
      closed_ = true;
      close_status_ = absl::ResourceExhaustedError(absl::StrCat(
          "this watcher fell ", capacity_, " events behind and was cut off: ", dropped_,
          " event(s) dropped; resume with after_sequence = ", last_taken_));
      return static_cast<bool>(wake_);
    }
    queue_.push_back(e);
    return static_cast<bool>(wake_);
  }
  // A resumed watcher has been given everything up to `sequence`: a cut-off names it, not 0.
  void ResumeAfter(uint64_t sequence) {
    MutexLock lock(&mu_);
    last_taken_ = sequence;
  }
  bool Close(absl::Status status) {
    MutexLock lock(&mu_);
    if (closed_) return false;
    closed_ = true;
    close_status_ = std::move(status);
    return static_cast<bool>(wake_);
  }
  // Runs the wake callback (a copy: set_wake may replace it meanwhile) with no lock held.
  void WakeUp() ABSL_LOCKS_EXCLUDED(mu_) {
    std::function<void()> wake;
    {
      MutexLock lock(&mu_);
      wake = wake_;
    }
    if (wake) wake();
  }

  const Filter filter_;
  const size_t capacity_;
  Mutex mu_;
  std::deque<Event> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t last_taken_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status close_status_ ABSL_GUARDED_BY(mu_);
  std::function<void()> wake_ ABSL_GUARDED_BY(mu_);
};

template <typename Event, typename Filter>
class Hub {
 public:
  using Watcher = HubWatcher<Event, Filter>;
  struct Options {
    size_t watcher_capacity = 1024;  // events buffered per watcher before it is cut off
    size_t retained = 4096;          // most recent events kept for resuming
    // The publisher numbers its events itself (sequence 1, 2, ... in publishing order, and the time): the
    // audit log, whose file has them. Publish then keeps both instead of setting them.
    bool publisher_numbers = false;
  };
  explicit Hub(Options options) : options_(options) {}
  Hub(const Hub&) = delete;
  Hub& operator=(const Hub&) = delete;

  // Numbers the event (sequence, time; unless Options::publisher_numbers) and hands it to every matching
  // watcher.
  void Publish(Event event) ABSL_LOCKS_EXCLUDED(mu_) {
    std::vector<std::shared_ptr<Watcher>> to_wake;
    {
      MutexLock lock(&mu_);
      if (options_.publisher_numbers) {
        next_sequence_ = event.sequence() + 1;
      } else {
        event.set_sequence(next_sequence_++);
        event.set_time_unix_nanos(absl::ToUnixNanos(wire::WallNow()));
      }
      retained_.push_back(event);
      if (retained_.size() > options_.retained) retained_.pop_front();
      for (const auto& w : watchers_) {
        if (w->filter().Matches(event) && w->Offer(event)) to_wake.push_back(w);
      }
    }
    for (const auto& w : to_wake) w->WakeUp();
  }

  // A new watcher; retained events after `after_sequence` (if non-zero), or all of them (`from_oldest`),
  // are queued first. An after_sequence older than the retained history closes it at once with
  // OUT_OF_RANGE (field "after_sequence").
  std::shared_ptr<Watcher> Subscribe(Filter filter, uint64_t after_sequence, bool from_oldest = false)
      ABSL_LOCKS_EXCLUDED(mu_) {
    auto w = std::make_shared<Watcher>(std::move(filter), options_.watcher_capacity);
    MutexLock lock(&mu_);
    if (from_oldest) {
      for (const auto& e : retained_) {
        if (w->filter().Matches(e)) w->Offer(e, /*replay=*/true);
      }
    } else if (after_sequence > 0) {
      w->ResumeAfter(after_sequence);
      const uint64_t oldest = retained_.empty() ? next_sequence_ : retained_.front().sequence();
      if (after_sequence + 1 < oldest) {
        w->Close(OutOfRange("after_sequence", absl::StrCat("events up to ", oldest - 1,
                                                           " are no longer retained (the history holds the last ",
                                                           options_.retained, ")")));
        return w;
      }
      for (const auto& e : retained_) {
        if (e.sequence() > after_sequence && w->filter().Matches(e)) w->Offer(e, /*replay=*/true);
      }
    }
    watchers_.push_back(w);
    return w;
  }

  void Unsubscribe(const std::shared_ptr<Watcher>& watcher) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    for (auto it = watchers_.begin(); it != watchers_.end(); ++it) {
      if (*it == watcher) {
        watchers_.erase(it);
        return;
      }
    }
  }

  // Ends the streams of the watchers `pred` picks with `status` (once what each holds is sent) and drops
  // them from the hub. OK for a clean end (the thing watched was deleted). `pred` runs under the hub's
  // lock: it must not call back into the hub.
  void CloseWhere(const std::function<bool(const Watcher&)>& pred, const absl::Status& status)
      ABSL_LOCKS_EXCLUDED(mu_) {
    std::vector<std::shared_ptr<Watcher>> closed;
    {
      MutexLock lock(&mu_);
      for (auto it = watchers_.begin(); it != watchers_.end();) {
        if (!pred(**it)) {
          ++it;
          continue;
        }
        if ((*it)->Close(status)) closed.push_back(*it);
        it = watchers_.erase(it);
      }
    }
    for (const auto& w : closed) w->WakeUp();
  }
  // All of them (shutdown: UNAVAILABLE, so a follower can tell rdmad went away).
  void CloseAll(absl::Status status) ABSL_LOCKS_EXCLUDED(mu_) {
    CloseWhere([](const Watcher&) { return true; }, status);
  }

 private:
  const Options options_;
  mutable Mutex mu_;
  uint64_t next_sequence_ ABSL_GUARDED_BY(mu_) = 1;
  std::deque<Event> retained_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Watcher>> watchers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rdmad::dispatch

#endif  // RDMAD_SERVER_DISPATCH_HUB_H_
