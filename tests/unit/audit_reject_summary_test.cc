// The data-plane listener's rejects in the audit trail and the log (server/audit/reject_summary.h): the
// first reject of a (peer address, reason) in an interval is recorded at once, the rest counted and written
// as one summary at the interval's end; at most max_keys pairs per interval, the rest under "other". A fake
// clock drives the intervals; a recording sink stands for the audit log.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/time/time.h"
#include "server/audit/reject_summary.h"
#include "server/audit/sink.h"
#include "server/common/sync.h"

namespace rdmad::audit {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

class Recorder final : public AuditSink {
 public:
  void Record(const Event& e) override {
    MutexLock lock(&mu_);
    events_.push_back(e);
  }
  std::vector<Event> Take() {
    MutexLock lock(&mu_);
    return std::move(events_);
  }

 private:
  Mutex mu_;
  std::vector<Event> events_ ABSL_GUARDED_BY(mu_);
};

Event Reject(const std::string& peer, const std::string& reason) {
  Event e;
  e.method = "data-plane reject";
  e.resource = "cmids/7";
  e.code = "PERMISSION_DENIED";
  e.detail = reason + ": a bad token";
  e.peer = peer;
  e.reason = reason;
  return e;
}

TEST(RejectSummaryTest, TheFirstOfAPairIsRecordedTheRestCountedAndSummarizedWhenTheIntervalEnds) {
  RejectSummary s({absl::Seconds(10), 4});
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  std::vector<RejectSummary::Summary> due;
  EXPECT_TRUE(s.Note("10.0.0.1", "TOKEN_INVALID", "PERMISSION_DENIED", t0, &due));
  for (int i = 1; i < 1000; ++i) {
    EXPECT_FALSE(s.Note("10.0.0.1", "TOKEN_INVALID", "PERMISSION_DENIED", t0 + absl::Milliseconds(i), &due));
  }
  EXPECT_TRUE(s.Note("10.0.0.1", "TOKEN_REPLAYED", "PERMISSION_DENIED", t0 + absl::Seconds(2), &due));
  EXPECT_TRUE(s.Note("10.0.0.2", "TOKEN_INVALID", "PERMISSION_DENIED", t0 + absl::Seconds(3), &due));
  EXPECT_THAT(due, IsEmpty());
  EXPECT_THAT(s.Roll(t0 + absl::Seconds(9)), IsEmpty());  // not over yet
  std::vector<RejectSummary::Summary> out = s.Roll(t0 + absl::Seconds(10));
  ASSERT_THAT(out, SizeIs(1));  // the pairs with a single reject were recorded in full already
  EXPECT_EQ(out[0].peer, "10.0.0.1");
  EXPECT_EQ(out[0].reason, "TOKEN_INVALID");
  EXPECT_EQ(out[0].suppressed, 999u);
  EXPECT_EQ(out[0].code, "PERMISSION_DENIED");
  EXPECT_EQ(out[0].from, t0);
  EXPECT_EQ(out[0].to, t0 + absl::Seconds(10));
  EXPECT_EQ(s.keys(), 0u);
  // A new interval: recorded at once again.
  EXPECT_TRUE(s.Note("10.0.0.1", "TOKEN_INVALID", "PERMISSION_DENIED", t0 + absl::Seconds(11), &due));
}

TEST(RejectSummaryTest, ARejectAfterTheIntervalEndedBringsItsSummaryFirst) {
  RejectSummary s({absl::Seconds(10), 4});
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  std::vector<RejectSummary::Summary> due;
  for (int i = 0; i < 3; ++i) s.Note("10.0.0.1", "TOKEN_EXPIRED", "PERMISSION_DENIED", t0, &due);
  EXPECT_TRUE(s.Note("10.0.0.1", "TOKEN_EXPIRED", "PERMISSION_DENIED", t0 + absl::Seconds(30), &due));
  ASSERT_THAT(due, SizeIs(1));
  EXPECT_EQ(due[0].suppressed, 2u);
  EXPECT_EQ(s.interval_end(), t0 + absl::Seconds(40));
}

TEST(RejectSummaryTest, PairsPastTheBoundAreCountedAsOtherAndNeverRecordedOneByOne) {
  RejectSummary s({absl::Seconds(10), 3});
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  std::vector<RejectSummary::Summary> due;
  int recorded = 0;
  for (int i = 0; i < 100; ++i) {
    recorded += s.Note("10.0.1." + std::to_string(i), "TOKEN_INVALID", "PERMISSION_DENIED", t0, &due);
  }
  EXPECT_EQ(recorded, 3);
  EXPECT_EQ(s.keys(), 3u);  // the state stays bounded
  std::vector<RejectSummary::Summary> out = s.Roll(t0, /*force=*/true);
  ASSERT_THAT(out, SizeIs(1));
  EXPECT_EQ(out[0].peer, RejectSummary::kOther);
  EXPECT_EQ(out[0].suppressed, 97u);
}

TEST(RejectSummaryTest, ThePortIsNotPartOfThePeersAddress) {
  EXPECT_EQ(PeerAddress("10.0.2.2:41752"), "10.0.2.2");
  EXPECT_EQ(PeerAddress("[fe80::1]:7471"), "[fe80::1]");
  EXPECT_EQ(PeerAddress("fe80::1"), "fe80::1");
  EXPECT_EQ(PeerAddress("10.0.2.2"), "10.0.2.2");
}

TEST(RejectLimiterTest, TheAuditTrailGetsTheFirstRejectOfEachPairAndOneSummaryOtherRecordsPassUnchanged) {
  Recorder sink;
  Mutex mu;
  absl::Time now = absl::FromUnixSeconds(5000);
  RejectLimiter::Options options;
  options.summary = {absl::Seconds(10), 16};
  options.clock = [&] {
    MutexLock lock(&mu);
    return now;
  };
  options.flush_thread = false;
  RejectLimiter limiter(&sink, options);
  for (int i = 0; i < 5000; ++i) limiter.Record(Reject("10.0.0.9:" + std::to_string(30000 + i), "TOKEN_INVALID"));
  Event accept;
  accept.method = "data-plane accept";
  accept.resource = "cmids/8";
  limiter.Record(accept);
  std::vector<Event> got = sink.Take();
  ASSERT_THAT(got, SizeIs(2));
  EXPECT_EQ(got[0].method, "data-plane reject");
  EXPECT_EQ(got[0].peer, "10.0.0.9:30000");
  EXPECT_EQ(got[1].method, "data-plane accept");
  limiter.Flush();
  EXPECT_THAT(sink.Take(), IsEmpty());  // the interval is still open
  {
    MutexLock lock(&mu);
    now += absl::Seconds(10);
  }
  limiter.Flush();
  got = sink.Take();
  ASSERT_THAT(got, SizeIs(1));
  EXPECT_EQ(got[0].method, "data-plane reject summary");
  EXPECT_EQ(got[0].code, "PERMISSION_DENIED");
  EXPECT_EQ(got[0].peer, "10.0.0.9");
  EXPECT_THAT(got[0].detail, HasSubstr("TOKEN_INVALID: 4999 more reject(s) from 10.0.0.9"));
}

TEST(RejectLimiterTest, WhatIsPendingIsWrittenWhenTheLimiterGoes) {
  Recorder sink;
  {
    RejectLimiter::Options options;
    options.summary = {absl::Hours(1), 16};
    RejectLimiter limiter(&sink, options);  // with its thread: it must stop promptly
    for (int i = 0; i < 3; ++i) limiter.Record(Reject("10.0.0.9:1", "QUOTA"));
  }
  std::vector<Event> got = sink.Take();
  ASSERT_THAT(got, SizeIs(2));
  EXPECT_EQ(got[1].method, "data-plane reject summary");
  EXPECT_THAT(got[1].detail, HasSubstr("2 more"));
}

}  // namespace
}  // namespace rdmad::audit
