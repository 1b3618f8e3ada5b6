#include "server/cm/events.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/common/status.h"
#include "server/fabric/cm.h"

namespace rdmad::cm {

bool EventFilter::Matches(const v1::CmEvent& e) const {
  if (!channel.empty() && e.channel() != channel) return false;
  if (!cm_id.empty() && e.cm_id() != cm_id && e.listener() != cm_id) return false;
  return types.empty() || types.count(e.type()) > 0;
}

void Watcher::set_wake(std::function<void()> wake) {
  absl::MutexLock lock(&mu_);
  wake_ = std::move(wake);
}

std::optional<v1::CmEvent> Watcher::Next() {
  absl::MutexLock lock(&mu_);
  if (queue_.empty()) return std::nullopt;
  v1::CmEvent e = std::move(queue_.front());
  queue_.pop_front();
  last_taken_ = e.sequence();
  return e;
}

std::optional<absl::Status> Watcher::Closed() {
  absl::MutexLock lock(&mu_);
  if (!closed_ || !queue_.empty()) return std::nullopt;
  return close_status_;
}

bool Watcher::Offer(const v1::CmEvent& e) {
  absl::MutexLock lock(&mu_);
  if (closed_) return false;
  if (queue_.size() >= capacity_) {
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

bool Watcher::Close(absl::Status status) {
  absl::MutexLock lock(&mu_);
  if (closed_) return false;
  closed_ = true;
  close_status_ = std::move(status);
  return static_cast<bool>(wake_);
}

void EventHub::Publish(v1::CmEvent event) {
  std::vector<std::shared_ptr<Watcher>> to_wake;
  {
    absl::MutexLock lock(&mu_);
    event.set_sequence(next_sequence_++);
    event.set_time_unix_nanos(absl::ToUnixNanos(absl::Now()));
    retained_.push_back(event);
    if (retained_.size() > options_.retained) retained_.pop_front();
    for (const auto& w : watchers_) {
      if (w->filter().Matches(event) && w->Offer(event)) to_wake.push_back(w);
    }
  }
  for (const auto& w : to_wake) WakeUp(*w);
}

std::shared_ptr<Watcher> EventHub::Subscribe(EventFilter filter, uint64_t after_sequence, bool from_oldest) {
  auto w = std::make_shared<Watcher>(std::move(filter), options_.watcher_capacity);
  absl::MutexLock lock(&mu_);
  if (from_oldest) {
    for (const auto& e : retained_) {
      if (w->filter().Matches(e)) w->Offer(e);
    }
  } else if (after_sequence > 0) {
    const uint64_t oldest = retained_.empty() ? next_sequence_ : retained_.front().sequence();
    if (after_sequence + 1 < oldest) {
      w->Close(OutOfRange("after_sequence", absl::StrCat("events up to ", oldest - 1,
                                                         " are no longer retained (the history holds the last ",
                                                         options_.retained, ")")));
      return w;
    }
    for (const auto& e : retained_) {
      if (e.sequence() > after_sequence && w->filter().Matches(e)) w->Offer(e);
    }
  }
  watchers_.push_back(w);
  return w;
}

void EventHub::Unsubscribe(const std::shared_ptr<Watcher>& watcher) {
  absl::MutexLock lock(&mu_);
  for (auto it = watchers_.begin(); it != watchers_.end(); ++it) {
    if (*it == watcher) {
      watchers_.erase(it);
      return;
    }
  }
}

void EventHub::CloseWhere(const std::function<bool(const Watcher&)>& pred, const absl::Status& status) {
  std::vector<std::shared_ptr<Watcher>> closed;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = watchers_.begin(); it != watchers_.end();) {
      if (!pred(**it)) {
        ++it;
        continue;
      }
      // The stream ends cleanly (OK) once what it holds is sent.
      if ((*it)->Close(status)) closed.push_back(*it);
      it = watchers_.erase(it);
    }
  }
  for (const auto& w : closed) WakeUp(*w);
}

void EventHub::CloseChannel(const std::string& channel) {
  CloseWhere([&](const Watcher& w) { return w.filter().channel == channel; }, absl::OkStatus());
}

void EventHub::CloseCmId(const std::string& cm_id) {
  CloseWhere([&](const Watcher& w) { return w.filter().cm_id == cm_id; }, absl::OkStatus());
}

void EventHub::CloseAll(absl::Status status) {
  CloseWhere([](const Watcher&) { return true; }, status);
}

void EventHub::WakeUp(Watcher& w) {
  std::function<void()> wake;
  {
    absl::MutexLock lock(&w.mu_);
    wake = w.wake_;
  }
  if (wake) wake();
}


absl::StatusOr<std::string> CanonicalEventName(const std::string& name) {
  const std::string full = absl::StartsWith(name, "RDMA_CM_EVENT_") ? name : absl::StrCat("RDMA_CM_EVENT_", name);
  for (int t = 0; t <= static_cast<int>(fabric::CmEventType::kTimewaitExit); ++t) {
    if (full == fabric::CmEventName(static_cast<fabric::CmEventType>(t))) return full;
  }
  return InvalidArgument("types", absl::StrCat("unknown event type '", name, "'"));
}

}  // namespace rdmad::cm
