// state::NameCounter: the numbers of one name kind ("pds" -> pds/1, pds/2, ...), never reused, across
// restarts too. With a Store it reserves blocks of kBlock numbers: no number at or past the durable mark is
// handed out, so a restart (even after kill -9) starts at the mark, past every number the previous process
// could have handed out. Without a Store it simply counts from `first`.
//
// The mark is written ahead through the store's journal (store.h Submit): when half of the current block
// is handed out, the next block's mark is submitted (a queue push, no I/O, no wait), so by the time the
// block is used up it is normally durable already. Next() waits for it only if it is not: the first name
// of each kind after start-up, or a block used up faster than one group commit. That wait is the one disk
// wait left under the owner's lock, at most once per kBlock names.
//
// Threads: not synchronized itself; the owner calls it under its own lock (ABSL_GUARDED_BY the owner's
// mutex).
#ifndef RDMAD_SERVER_STATE_NAMES_H_
#define RDMAD_SERVER_STATE_NAMES_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "server/common/log.h"
#include "server/state/store.h"

namespace rdmad::state {

class NameCounter {
 public:
  static constexpr uint64_t kBlock = 1024;

  // `first`: the smallest number handed out (names below it are the owner's, e.g. rdmad's own channels).
  NameCounter(Store* store, std::string kind, uint64_t first = 1)
      : store_(store), kind_(std::move(kind)), next_(first) {
    if (store_ != nullptr) {
      next_ = std::max(next_, store_->Mark(kind_));
      limit_ = next_;  // nothing reserved by this process yet
    }
  }

  uint64_t Next() {
    if (store_ == nullptr) return next_++;
    if (next_ >= limit_) {
      // The block is used up: the next one's mark must be durable before its first number goes out.
      if (!ahead_.has_value()) Ahead(next_ + kBlock);
      const uint64_t limit = *ahead_;
      ahead_.reset();
      if (absl::Status s = ahead_ticket_.Wait(); s.ok()) {
        limit_ = limit;
      } else {
        // The number is still handed out (the caller's operation succeeded at the fabric already); after a
        // restart it may be handed out again. Loud, since the promise is broken.
        RDMAD_LOG_ERROR("%s: cannot persist the name mark (%s): names may be reused after a restart",
                        kind_.c_str(), std::string(s.message()).c_str());
      }
    }
    if (!ahead_.has_value() && next_ + kBlock / 2 >= limit_ && next_ < limit_) Ahead(limit_ + kBlock);
    return next_++;
  }
  // The next number Next() returns (peeking; e.g. to name what is about to be created).
  uint64_t Peek() const { return next_; }

 private:
  Store* const store_;
  const std::string kind_;
  uint64_t next_;
  uint64_t limit_ = 0;                // numbers below it are durably reserved
  std::optional<uint64_t> ahead_;     // the next block's mark, submitted, not yet taken into limit_
  Ticket ahead_ticket_;               // its record

  void Ahead(uint64_t mark) {
    ahead_ = mark;
    ahead_ticket_ = store_->Submit(Mutation::SetMark(kind_, mark));
  }
};

}  // namespace rdmad::state

#endif  // RDMAD_SERVER_STATE_NAMES_H_
