// RejectSummary and RejectLimiter: see reject_summary.h (threads there).
#include "server/audit/reject_summary.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/log.h"

namespace rdmad::audit {

bool RejectSummary::Note(const std::string& peer, const std::string& reason, const std::string& code,
                         absl::Time now, std::vector<Summary>* due) {
  std::vector<Summary> ended = Roll(now);
  due->insert(due->end(), std::make_move_iterator(ended.begin()), std::make_move_iterator(ended.end()));
  if (!open_) {
    open_ = true;
    start_ = now;
  }
  auto key = std::make_pair(peer, reason);
  auto it = counts_.find(key);
  if (it == counts_.end()) {
    if (counts_.size() >= options_.max_keys) {
      other_.rejects++;
      other_.code = code;
      return false;
    }
    counts_.emplace(std::move(key), Count{1, code});
    return true;
  }
  it->second.rejects++;
  it->second.code = code;
  return false;
}

std::vector<RejectSummary::Summary> RejectSummary::Roll(absl::Time now, bool force) {
  std::vector<Summary> out;
  if (!open_ || (!force && now < start_ + options_.interval)) return out;
  const absl::Time end = force ? std::min(now, start_ + options_.interval) : start_ + options_.interval;
  for (const auto& [key, count] : counts_) {
    if (count.rejects <= 1) continue;  // its only reject was recorded at once
    out.push_back(Summary{key.first, key.second, count.code, count.rejects - 1, start_, end});
  }
  if (other_.rejects > 0) out.push_back(Summary{kOther, kOther, other_.code, other_.rejects, start_, end});
  counts_.clear();
  other_ = Count();
  open_ = false;
  return out;
}

std::string PeerAddress(const std::string& peer) {
  const size_t colon = peer.rfind(':');
  if (colon == std::string::npos || colon + 1 == peer.size()) return peer;
  for (size_t i = colon + 1; i < peer.size(); ++i) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(peer[i]))) return peer;
  }
  // A bare IPv6 address (two colons or more, no brackets) has no port to strip.
  if (peer.front() != '[' && peer.find(':') != colon) return peer;
  return peer.substr(0, colon);
}

RejectLimiter::RejectLimiter(AuditSink* inner, Options options)
    : inner_(inner), options_(std::move(options)), summary_(options_.summary) {
  if (options_.flush_thread) thread_ = std::thread([this] { FlushLoop(); });
}

RejectLimiter::~RejectLimiter() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
  Flush(/*force=*/true);
}

absl::Time RejectLimiter::Now() const { return options_.clock ? options_.clock() : absl::Now(); }

void RejectLimiter::Record(const Event& event) {
  if (event.method != "data-plane reject" || event.reason.empty()) {
    if (inner_ != nullptr) inner_->Record(event);
    return;
  }
  std::vector<RejectSummary::Summary> due;
  bool first = false;
  {
    MutexLock lock(&mu_);
    first = summary_.Note(PeerAddress(event.peer), event.reason, event.code, Now(), &due);
  }
  Write(due);
  if (!first) return;
  RDMAD_LOG_INFO("%s: data-plane connect from %s rejected: %s (more from this address and reason within %s are "
                 "counted and summarized)",
                 event.resource.c_str(), event.peer.c_str(), event.detail.c_str(),
                 absl::FormatDuration(options_.summary.interval).c_str());
  if (inner_ != nullptr) inner_->Record(event);
}

void RejectLimiter::Flush(bool force) {
  std::vector<RejectSummary::Summary> due;
  {
    MutexLock lock(&mu_);
    due = summary_.Roll(Now(), force);
  }
  Write(due);
}

void RejectLimiter::Write(const std::vector<RejectSummary::Summary>& due) {
  for (const RejectSummary::Summary& s : due) {
    const bool other = s.reason == RejectSummary::kOther;
    const std::string detail =
        other ? absl::StrCat(s.suppressed, " reject(s) from addresses and reasons past the first ",
                             options_.summary.max_keys, " of the interval, not recorded one by one")
              : absl::StrCat(s.reason, ": ", s.suppressed, " more reject(s) from ", s.peer,
                             " after the first, not recorded one by one");
    RDMAD_LOG_INFO("data-plane rejects from %s between %s and %s: %s", s.peer.c_str(),
                   absl::FormatTime(s.from).c_str(), absl::FormatTime(s.to).c_str(), detail.c_str());
    if (inner_ == nullptr) continue;
    Event e;
    e.method = "data-plane reject summary";
    e.code = s.code;
    e.detail = absl::StrCat(detail, " (", absl::FormatTime(absl::RFC3339_full, s.from, absl::UTCTimeZone()), " to ",
                            absl::FormatTime(absl::RFC3339_full, s.to, absl::UTCTimeZone()), ")");
    e.peer = s.peer;
    e.reason = s.reason;
    inner_->Record(e);
  }
}

void RejectLimiter::FlushLoop() {
  for (;;) {
    {
      MutexLock lock(&mu_);
      // Wakes at the end of the open interval (or every interval when none is open) or at stop.
      const absl::Time end = summary_.interval_end();
      const absl::Time deadline =
          end == absl::InfiniteFuture() ? absl::Now() + options_.summary.interval : end + absl::Milliseconds(1);
      mu_.AwaitWithDeadline([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; }, deadline);
      if (stop_) return;
    }
    Flush();
  }
}

}  // namespace rdmad::audit
