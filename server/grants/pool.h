// WindowPool: the memory windows of one PD that grants bind, and the quarantine of revoked keys.
//
// A window is "ready" (allocated, unbound, never revoked or out of quarantine) or "quarantined" (its key was
// revoked less than `quarantine` ago: it is not bound again before then, so its next key cannot be guessed
// from a stale one in that time). Key values revoked in the PD are remembered for the same period, and a
// grant is never activated with one of them (ReDMArk: a key reused soon after revocation lets a stale
// client read new data). Both queues are in time order, so maturing is O(1) per entry, never a scan.
//
// Threads: none of its own; the GrantManager uses it under its mutex. Pure bookkeeping: no fabric calls.
#ifndef RDMAD_SERVER_GRANTS_POOL_H_
#define RDMAD_SERVER_GRANTS_POOL_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "server/fabric/fabric.h"

namespace rdmad::grants {

class WindowPool {
 public:
  WindowPool(fabric::MwType type, absl::Duration quarantine) : type_(type), quarantine_(quarantine) {}

  fabric::MwType type() const { return type_; }
  // Windows by number ("mws/8" is 8), resolved once when the pool gets them: the bind takes the number.
  // A window to bind, or nullopt if none is ready (the caller allocates one).
  std::optional<uint64_t> Take(absl::Time now);
  // A freshly allocated window.
  void Add(uint64_t window) { ready_.push_back(window); }
  // A window whose key was just revoked (or whose bind failed): ready again after the quarantine.
  void Quarantine(uint64_t window, absl::Time now);
  // Every window, ready or not (the PD is being deleted); the pool is then empty.
  std::vector<uint64_t> TakeAll();
  size_t ready() const { return ready_.size(); }
  size_t quarantined() const { return waiting_.size(); }

  void RevokedKey(uint32_t rkey, absl::Time now);
  bool KeyQuarantined(uint32_t rkey, absl::Time now);

 private:
  void Mature(absl::Time now);

  const fabric::MwType type_;
  const absl::Duration quarantine_;
  std::deque<uint64_t> ready_;
  std::deque<std::pair<absl::Time, uint64_t>> waiting_;  // (ready at, window), in time order
  std::map<uint32_t, absl::Time> keys_;                     // key value -> end of its quarantine
  std::deque<std::pair<absl::Time, uint32_t>> key_order_;   // the same, in time order
};

}  // namespace rdmad::grants

#endif  // RDMAD_SERVER_GRANTS_POOL_H_
