#include "server/grants/pool.h"

namespace rdmad::grants {

void WindowPool::Mature(absl::Time now) {
  while (!waiting_.empty() && waiting_.front().first <= now) {
    ready_.push_back(waiting_.front().second);
    waiting_.pop_front();
  }
  while (!key_order_.empty() && key_order_.front().first <= now) {
    auto it = keys_.find(key_order_.front().second);
    // A key revoked again later has a later deadline: only the entry with this deadline is dropped.
    if (it != keys_.end() && it->second == key_order_.front().first) keys_.erase(it);
    key_order_.pop_front();
  }
}

std::optional<uint64_t> WindowPool::Take(absl::Time now) {
  Mature(now);
  if (ready_.empty()) return std::nullopt;
  const uint64_t w = ready_.front();
  ready_.pop_front();
  return w;
}

void WindowPool::Quarantine(uint64_t window, absl::Time now) { waiting_.emplace_back(now + quarantine_, window); }

std::vector<uint64_t> WindowPool::TakeAll() {
  std::vector<uint64_t> all(ready_.begin(), ready_.end());
  for (const auto& [t, w] : waiting_) all.push_back(w);
  ready_.clear();
  waiting_.clear();
  return all;
}

void WindowPool::RevokedKey(uint32_t rkey, absl::Time now) {
  const absl::Time until = now + quarantine_;
  keys_[rkey] = until;
  key_order_.emplace_back(until, rkey);
}

bool WindowPool::KeyQuarantined(uint32_t rkey, absl::Time now) {
  Mature(now);
  return keys_.count(rkey) > 0;
}

}  // namespace rdmad::grants
