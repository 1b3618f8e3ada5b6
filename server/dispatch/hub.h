// Hub<Event, Filter>: an event stream that is published, numbered and fanned out to watchers, with a
// retained history to resume from. The rdma_cm events (server/cm/events.h), the grant events
// (server/grants/events.h) and the audit records (server/audit/audit_log.h) are instances.
//
// Requirements: Event is a protobuf message with sequence(), set_sequence(uint64_t) and
// set_time_unix_nanos(int64_t); Filter has `bool Matches(const Event&) const`.
//
// Memory is bounded per watcher: each event is stored once (shared, immutable) and a watcher's buffer holds
// at most `watcher_capacity` references to live events. Publishing never waits for a watcher: Publish pushes
// one reference to each matching watcher's buffer and returns. A watcher whose buffer is full is cut off with
// RESOURCE_EXHAUSTED, the count of events it lost and the last sequence it was given, so it can resume
// (after_sequence) from the retained history, a bounded ring of the most recent events; what it had not
// taken is freed after the hub's lock is released. A replay (from_oldest, after_sequence) is not copied
// into the buffer: the watcher reads it from the retained history as its stream sends, so it costs no
// memory per watcher, and a watcher whose replay falls out of the history is cut off the same way.
//
// Threads: Publish on the publishers' threads (for rdma_cm, the channel dispatchers); Subscribe,
// Unsubscribe, Close* and Next from any thread (Next from one thread at a time: the watcher's stream).
// One mutex (Hub::mu_) guards the hub; each HubWatcher has its own (the stream reads from it on gRPC's
// threads). Lock order: hub, then watcher; Next takes them one at a time, never nested. A watcher's `wake`
// callback runs without any lock held, on the publisher's (or closer's) thread: it must not block.
#ifndef RDMAD_SERVER_DISPATCH_HUB_H_
#define RDMAD_SERVER_DISPATCH_HUB_H_

#include <algorithm>
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
  using Shared = std::shared_ptr<const Event>;

  HubWatcher(Hub<Event, Filter>* hub, Filter filter, size_t capacity)
      : hub_(hub), filter_(std::move(filter)), capacity_(capacity) {}
  HubWatcher(const HubWatcher&) = delete;
  HubWatcher& operator=(const HubWatcher&) = delete;

  // Called (without locks) when an event was queued or the watcher was closed.
  void set_wake(std::function<void()> wake) {
    MutexLock lock(&mu_);
    wake_ = std::move(wake);
  }
  // The next event to send, if any: the rest of the replay first, then the live events queued.
  std::optional<Event> Next() ABSL_LOCKS_EXCLUDED(mu_) {
    uint64_t after = 0, until = 0;
    {
      MutexLock lock(&mu_);
      after = replay_after_;
      until = replay_until_;
    }
    if (after < until) {
      bool lost = false;
      Shared e = hub_->ReplayNext(filter_, after, until, &lost);  // the hub's lock, not ours
      MutexLock lock(&mu_);
      if (replay_after_ == after) {  // not cut off meanwhile
        if (e != nullptr) {
          replay_after_ = e->sequence();
          last_taken_ = e->sequence();
          return *e;
        }
        replay_after_ = replay_until_;  // the replay is done
        if (lost) CutOffLocked(absl::StrCat("its replay fell out of the retained history (the last ",
                                            hub_->retained_capacity(), " events)"));
      }
    }
    Shared e;
    {
      MutexLock lock(&mu_);
      if (queue_.empty()) return std::nullopt;
      e = std::move(queue_.front());
      queue_.pop_front();
      last_taken_ = e->sequence();
    }
    return *e;
  }
  // Once closed and drained: the status the stream ends with.
  std::optional<absl::Status> Closed() {
    MutexLock lock(&mu_);
    if (!closed_ || !queue_.empty() || replay_after_ < replay_until_) return std::nullopt;
    return close_status_;
  }
  const Filter& filter() const { return filter_; }

 private:
  friend class Hub<Event, Filter>;

  // Queues a live event; returns true if the wake callback must run. A full buffer cuts the watcher off:
  // the references it held move to *freed, for the caller to drop once the hub's lock is released.
  bool Offer(const Shared& e, std::deque<Shared>* freed) {
    MutexLock lock(&mu_);
    if (closed_) return false;
    if (queue_.size() >= capacity_) {
      dropped_ += queue_.size() + 1;
      freed->swap(queue_);
      CutOffLocked(absl::StrCat("this watcher fell ", capacity_, " events behind"));
      return static_cast<bool>(wake_);
    }
    queue_.push_back(e);
    return static_cast<bool>(wake_);
  }
  // What it has not taken is lost: the queue (already moved out by Offer, or cleared here) and the rest of
  // the replay. It resumes from the last event it was given.
  void CutOffLocked(const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    dropped_ += queue_.size();
    queue_.clear();
    replay_after_ = replay_until_;
    if (closed_) return;
    closed_ = true;
    close_status_ = absl::ResourceExhaustedError(absl::StrCat(why, " and was cut off: ", dropped_,
                                                              " event(s) dropped; resume with after_sequence = ",
                                                              last_taken_));
  }
  // Subscribe: the events in (after, until] of the history are this watcher's replay; a cut-off names
  // `after` as the last it was given until it takes one.
  void Replay(uint64_t after, uint64_t until) {
    MutexLock lock(&mu_);
    last_taken_ = after;
    replay_after_ = after;
    replay_until_ = until;
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

  Hub<Event, Filter>* const hub_;  // outlives its watchers' streams
  const Filter filter_;
  const size_t capacity_;
  Mutex mu_;
  std::deque<Shared> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t replay_after_ ABSL_GUARDED_BY(mu_) = 0;  // the replay's last event sent (or its start)
  uint64_t replay_until_ ABSL_GUARDED_BY(mu_) = 0;  // its end: the last event published before Subscribe
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
  using Shared = std::shared_ptr<const Event>;
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
  // watcher: one reference pushed to each, whatever their number or speed.
  void Publish(Event event) ABSL_LOCKS_EXCLUDED(mu_) {
    std::vector<std::shared_ptr<Watcher>> to_wake;
    std::vector<std::deque<Shared>> freed;  // the buffers of watchers cut off: dropped after the lock
    Shared evicted;
    {
      MutexLock lock(&mu_);
      if (options_.publisher_numbers) {
        next_sequence_ = event.sequence() + 1;
      } else {
        event.set_sequence(next_sequence_++);
        event.set_time_unix_nanos(absl::ToUnixNanos(wire::WallNow()));
      }
      auto shared = std::make_shared<const Event>(std::move(event));
      retained_.push_back(shared);
      if (retained_.size() > options_.retained) {
        evicted = std::move(retained_.front());
        retained_.pop_front();
      }
      for (const auto& w : watchers_) {
        if (!w->filter().Matches(*shared)) continue;
        std::deque<Shared> dropped;
        if (w->Offer(shared, &dropped)) to_wake.push_back(w);
        if (!dropped.empty()) freed.push_back(std::move(dropped));
      }
    }
    freed.clear();
    for (const auto& w : to_wake) w->WakeUp();
  }

  // A new watcher; retained events after `after_sequence` (if non-zero), or all of them (`from_oldest`),
  // are its replay, sent before the events published from now on. An after_sequence older than the
  // retained history closes it at once with OUT_OF_RANGE (field "after_sequence").
  std::shared_ptr<Watcher> Subscribe(Filter filter, uint64_t after_sequence, bool from_oldest = false)
      ABSL_LOCKS_EXCLUDED(mu_) {
    auto w = std::make_shared<Watcher>(this, std::move(filter), options_.watcher_capacity);
    MutexLock lock(&mu_);
    const uint64_t last = next_sequence_ - 1;
    if (from_oldest) {
      w->Replay(0, last);
    } else if (after_sequence > 0) {
      const uint64_t oldest = retained_.empty() ? next_sequence_ : retained_.front()->sequence();
      if (after_sequence + 1 < oldest) {
        w->Replay(after_sequence, after_sequence);  // nothing to replay; a cut-off would name it
        w->Close(OutOfRange("after_sequence", absl::StrCat("events up to ", oldest - 1,
                                                           " are no longer retained (the history holds the last ",
                                                           options_.retained, ")")));
        return w;
      }
      w->Replay(after_sequence, std::max(after_sequence, last));
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

  // Watchers subscribed and not yet unsubscribed or closed (tests, metrics).
  size_t watchers() const ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    return watchers_.size();
  }
  size_t retained_capacity() const { return options_.retained; }

 private:
  friend class HubWatcher<Event, Filter>;

  // A watcher's replay: the first retained event in (after, until] that `filter` matches, or null when
  // there is none (the replay is done; *lost if part of the range is no longer retained).
  Shared ReplayNext(const Filter& filter, uint64_t after, uint64_t until, bool* lost) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    *lost = retained_.empty() ? after < until : after + 1 < retained_.front()->sequence();
    if (*lost) return nullptr;
    auto it = std::upper_bound(retained_.begin(), retained_.end(), after,
                               [](uint64_t s, const Shared& e) { return s < e->sequence(); });
    for (; it != retained_.end() && (*it)->sequence() <= until; ++it) {
      if (filter.Matches(**it)) return *it;
    }
    return nullptr;
  }

  const Options options_;
  mutable Mutex mu_;
  uint64_t next_sequence_ ABSL_GUARDED_BY(mu_) = 1;
  std::deque<Shared> retained_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Watcher>> watchers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rdmad::dispatch

#endif  // RDMAD_SERVER_DISPATCH_HUB_H_
