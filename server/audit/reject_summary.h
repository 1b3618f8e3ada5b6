// Rate limiting of the data-plane listener's rejects in the audit trail and the log
// (docs/security.md#audit-trail). Anyone who can reach the listener can send connect requests with bad
// tokens at line rate; one audit line and one log line per reject would let them fill the disk and drown
// the records that matter. So rejects are counted per (peer address, reason) and interval:
//   - the first reject of a (peer, reason) in an interval is recorded at once, as before;
//   - the rest are counted, and written as one summary record (method "data-plane reject summary") per
//     (peer, reason) at the end of the interval;
//   - at most `max_keys` distinct (peer, reason) pairs are kept per interval: rejects of further pairs are
//     counted together under the peer "other" and summarized the same way, never recorded one by one.
// The metrics (server/metrics) count every reject; only the audit trail and the log are aggregated.
//
// RejectSummary is the bookkeeping alone, driven by the caller's clock (unit-tested with a fake one).
// RejectLimiter is the AuditSink the CM layer records into: it passes every other record through to the
// real sink unchanged, applies the summary to "data-plane reject" records, logs the first reject of each
// pair and each summary, and writes due summaries from its own thread ("reject-summary") once an interval
// has ended, so a burst that stops is still summarized.
//
// Threads: RejectSummary is not synchronized (its owner's lock). RejectLimiter: Record from any thread (the
// CM dispatchers); its mu_ guards the summary and is a leaf, never held across the inner sink's Record or a
// log write; the flush thread only waits on mu_ and writes what it took out.
#ifndef RDMAD_SERVER_AUDIT_REJECT_SUMMARY_H_
#define RDMAD_SERVER_AUDIT_REJECT_SUMMARY_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "server/audit/sink.h"
#include "server/common/sync.h"

namespace rdmad::audit {

class RejectSummary {
 public:
  struct Options {
    absl::Duration interval = absl::Seconds(10);
    size_t max_keys = 256;  // distinct (peer, reason) pairs per interval; beyond: "other"
  };
  // The rejects of one (peer, reason) in an interval that were not recorded one by one.
  struct Summary {
    std::string peer;    // the client's address (without its port), or "other"
    std::string reason;  // the reject reason ("TOKEN_INVALID"), or "other" for the overflow
    std::string code;    // the status code name the rejects were recorded with (the last one's)
    uint64_t suppressed = 0;
    absl::Time from, to;  // the interval
  };
  static constexpr char kOther[] = "other";

  explicit RejectSummary(Options options) : options_(options) {}

  // One reject at `now`. True if it is to be recorded at once (the first of its pair in the interval);
  // false if it was only counted. Summaries of an interval that ended before `now` are appended to *due.
  bool Note(const std::string& peer, const std::string& reason, const std::string& code, absl::Time now,
            std::vector<Summary>* due);
  // The summaries of the interval if it ended by `now` (all of them, whatever the time, if `force`).
  std::vector<Summary> Roll(absl::Time now, bool force = false);
  // When the current interval ends (InfiniteFuture if none is open).
  absl::Time interval_end() const { return open_ ? start_ + options_.interval : absl::InfiniteFuture(); }
  size_t keys() const { return counts_.size(); }

 private:
  const Options options_;
  bool open_ = false;
  absl::Time start_;
  struct Count {
    uint64_t rejects = 0;
    std::string code;
  };
  std::map<std::pair<std::string, std::string>, Count> counts_;  // rejects per pair in the interval
  Count other_;  // rejects of pairs past max_keys
};

// The peer's address without its port: "10.0.2.2:41752" -> "10.0.2.2", "[fe80::1]:7" -> "[fe80::1]".
std::string PeerAddress(const std::string& peer);

class RejectLimiter final : public AuditSink {
 public:
  struct Options {
    RejectSummary::Options summary;
    std::function<absl::Time()> clock;  // absl::Now if empty
    bool flush_thread = true;           // false: summaries only on Record and Flush (tests)
  };
  // `inner` (not owned; null: no audit trail, only the log) receives every record.
  RejectLimiter(AuditSink* inner, Options options);
  ~RejectLimiter() override;  // writes what is pending, stops the thread
  RejectLimiter(const RejectLimiter&) = delete;
  RejectLimiter& operator=(const RejectLimiter&) = delete;

  // A "data-plane reject" (with `reason` set) is aggregated; anything else is passed on as it is.
  void Record(const Event& event) override ABSL_LOCKS_EXCLUDED(mu_);
  // Writes the summaries of an interval that has ended (all of them if `force`).
  void Flush(bool force = false) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Write(const std::vector<RejectSummary::Summary>& due);
  void FlushLoop();
  absl::Time Now() const;

  AuditSink* const inner_;
  const Options options_;
  Mutex mu_;
  RejectSummary summary_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace rdmad::audit

#endif  // RDMAD_SERVER_AUDIT_REJECT_SUMMARY_H_
