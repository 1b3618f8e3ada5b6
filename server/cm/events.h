// EventHub: where every rdma_cm event rdmad dispatches is published, numbered and fanned out to watchers.
//
// Dispatch never waits for a watcher: Publish appends to each matching watcher's bounded buffer and
// returns. A watcher whose buffer is full is closed with RESOURCE_EXHAUSTED, the count of events it lost
// and the last sequence it was given, so it can resume (after_sequence) from the retained history, a
// bounded ring of the most recent events.
//
// Threads: Publish on the channel dispatchers; Subscribe/Close from any thread. One mutex (mu_) guards
// the hub; each Watcher has its own (the gRPC stream reads from it on gRPC's threads). A watcher's
// `wake` callback runs without any lock held, on the publisher's thread: it must not block.
#ifndef RDMAD_SERVER_CM_EVENTS_H_
#define RDMAD_SERVER_CM_EVENTS_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "rdmad/v1/rdmad.pb.h"

namespace rdmad::cm {

struct EventFilter {
  std::string channel;          // empty: any
  std::string cm_id;            // empty: any (matches the event's id or, for CONNECT_REQUEST, its listener)
  std::set<std::string> types;  // full names ("RDMA_CM_EVENT_ESTABLISHED"); empty: any
  bool Matches(const v1::CmEvent& e) const;
};

class Watcher {
 public:
  Watcher(EventFilter filter, size_t capacity) : filter_(std::move(filter)), capacity_(capacity) {}
  // Called (without locks) when an event was queued or the watcher was closed.
  void set_wake(std::function<void()> wake);
  // The next event to send, if any.
  std::optional<v1::CmEvent> Next();
  // Once closed and drained: the status the stream ends with.
  std::optional<absl::Status> Closed();
  const EventFilter& filter() const { return filter_; }

 private:
  friend class EventHub;
  // Returns true if the wake callback must run.
  bool Offer(const v1::CmEvent& e);
  bool Close(absl::Status status);

  const EventFilter filter_;
  const size_t capacity_;
  absl::Mutex mu_;
  std::deque<v1::CmEvent> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t last_taken_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status close_status_ ABSL_GUARDED_BY(mu_);
  std::function<void()> wake_ ABSL_GUARDED_BY(mu_);
};

class EventHub {
 public:
  struct Options {
    size_t watcher_capacity = 1024;  // events buffered per watcher before it is cut off
    size_t retained = 4096;          // most recent events kept for resuming
  };
  explicit EventHub(Options options) : options_(options) {}

  // Numbers the event (sequence, time) and hands it to every matching watcher.
  void Publish(v1::CmEvent event);
  // A new watcher; retained events after `after_sequence` (if non-zero), or all of them (`from_oldest`),
  // are queued first. An after_sequence older than the retained history closes it at once with
  // OUT_OF_RANGE.
  std::shared_ptr<Watcher> Subscribe(EventFilter filter, uint64_t after_sequence, bool from_oldest = false);
  void Unsubscribe(const std::shared_ptr<Watcher>& watcher);
  // Ends the streams of watchers filtered on this channel or id (deleted) with OK, or of all with
  // `status` (shutdown: UNAVAILABLE, so a follower can tell rdmad went away).
  void CloseChannel(const std::string& channel);
  void CloseCmId(const std::string& cm_id);
  void CloseAll(absl::Status status);

 private:
  void CloseWhere(const std::function<bool(const Watcher&)>& pred, const absl::Status& status);
  static void WakeUp(Watcher& w);
  const Options options_;
  mutable absl::Mutex mu_;
  uint64_t next_sequence_ ABSL_GUARDED_BY(mu_) = 1;
  std::deque<v1::CmEvent> retained_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Watcher>> watchers_ ABSL_GUARDED_BY(mu_);
};

// "DISCONNECTED" -> "RDMA_CM_EVENT_DISCONNECTED"; full names unchanged. Unknown names: INVALID_ARGUMENT.
absl::StatusOr<std::string> CanonicalEventName(const std::string& name);

}  // namespace rdmad::cm

#endif  // RDMAD_SERVER_CM_EVENTS_H_
