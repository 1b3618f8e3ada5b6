// state::NameCounter: the numbers of one name kind ("pds" -> pds/1, pds/2, ...), never reused, across
// restarts too. With a Store it reserves blocks: before handing out a number at or past the persisted
// mark it persists mark = number + kBlock, so a restart (even after kill -9) starts at the mark, past
// every number the previous process could have handed out. Without a Store it simply counts from `first`.
//
// Threads: not synchronized itself; the owner calls it under its own lock (ABSL_GUARDED_BY the owner's
// mutex). Next() may write the store (one fsync per kBlock names).
#ifndef RDMAD_SERVER_STATE_NAMES_H_
#define RDMAD_SERVER_STATE_NAMES_H_

#include <algorithm>
#include <cstdint>
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
    if (store_ != nullptr && next_ >= limit_) {
      const uint64_t limit = next_ + kBlock;
      if (absl::Status s = store_->SetMark(kind_, limit); s.ok()) {
        limit_ = limit;
      } else {
        // The number is still handed out (the caller's operation succeeded at the fabric already); after a
        // restart it may be handed out again. Loud, since the promise is broken.
        RDMAD_LOG_ERROR("%s: cannot persist the name mark (%s): names may be reused after a restart",
                        kind_.c_str(), std::string(s.message()).c_str());
      }
    }
    return next_++;
  }
  // The next number Next() returns (peeking; e.g. to name what is about to be created).
  uint64_t Peek() const { return next_; }

 private:
  Store* const store_;
  const std::string kind_;
  uint64_t next_;
  uint64_t limit_ = 0;
};

}  // namespace rdmad::state

#endif  // RDMAD_SERVER_STATE_NAMES_H_
