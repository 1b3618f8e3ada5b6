// dispatch::Hub instantiated for grant events (server/grants/events.h): filtering by mr and principal,
// numbering, cutting off a watcher that falls behind, resuming after a sequence, the history's limit, and
// closing. Single-threaded: the test publishes and drains itself.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "rdmad/v1/rdmad.pb.h"
#include "server/grants/events.h"
#include "tests/support/server_status.h"

namespace rdmad::grants {
namespace {

using ::testing::HasSubstr;
using test::IsError;

v1::GrantEvent Event(const std::string& mr, const std::string& principal,
                     v1::GrantEventType type = v1::GRANT_ISSUED_EVENT) {
  v1::GrantEvent e;
  e.set_type(type);
  e.mutable_grant()->set_mr(mr);
  e.mutable_grant()->set_principal(principal);
  return e;
}

std::vector<v1::GrantEvent> Drain(GrantWatcher& w) {
  std::vector<v1::GrantEvent> out;
  while (std::optional<v1::GrantEvent> e = w.Next()) out.push_back(*e);
  return out;
}

std::vector<uint64_t> Sequences(const std::vector<v1::GrantEvent>& events) {
  std::vector<uint64_t> out;
  for (const auto& e : events) out.push_back(e.sequence());
  return out;
}

TEST(GrantFilter, EmptyFieldsMatchAnythingAndSetOnesMatchTheGrant) {
  const v1::GrantEvent e = Event("mrs/1", "alice");
  EXPECT_TRUE(GrantFilter{}.Matches(e));
  EXPECT_TRUE((GrantFilter{"mrs/1", ""}.Matches(e)));
  EXPECT_TRUE((GrantFilter{"", "alice"}.Matches(e)));
  EXPECT_TRUE((GrantFilter{"mrs/1", "alice"}.Matches(e)));
  EXPECT_FALSE((GrantFilter{"mrs/2", ""}.Matches(e)));
  EXPECT_FALSE((GrantFilter{"", "bob"}.Matches(e)));
  EXPECT_FALSE((GrantFilter{"mrs/1", "bob"}.Matches(e)));
}

TEST(GrantHub, NumbersEventsAndStampsTheirTime) {
  GrantHub hub(GrantHub::Options{});
  auto w = hub.Subscribe(GrantFilter{}, 0);
  for (int i = 0; i < 3; ++i) hub.Publish(Event("mrs/1", "alice"));
  std::vector<v1::GrantEvent> got = Drain(*w);
  EXPECT_THAT(Sequences(got), ::testing::ElementsAre(1, 2, 3));
  for (const auto& e : got) EXPECT_GT(e.time_unix_nanos(), 0);
  EXPECT_FALSE(w->Closed().has_value());
}

TEST(GrantHub, WatchersGetOnlyTheirMrAndPrincipal) {
  GrantHub hub(GrantHub::Options{});
  auto by_mr = hub.Subscribe(GrantFilter{"mrs/1", ""}, 0);
  auto by_principal = hub.Subscribe(GrantFilter{"", "bob"}, 0);
  auto both = hub.Subscribe(GrantFilter{"mrs/2", "bob"}, 0);
  auto all = hub.Subscribe(GrantFilter{}, 0);
  hub.Publish(Event("mrs/1", "alice"));  // 1
  hub.Publish(Event("mrs/1", "bob"));    // 2
  hub.Publish(Event("mrs/2", "alice"));  // 3
  hub.Publish(Event("mrs/2", "bob"));    // 4
  EXPECT_THAT(Sequences(Drain(*by_mr)), ::testing::ElementsAre(1, 2));
  EXPECT_THAT(Sequences(Drain(*by_principal)), ::testing::ElementsAre(2, 4));
  EXPECT_THAT(Sequences(Drain(*both)), ::testing::ElementsAre(4));
  EXPECT_THAT(Sequences(Drain(*all)), ::testing::ElementsAre(1, 2, 3, 4));
}

TEST(GrantHub, AWatcherThatFallsBehindIsCutOffWithTheCountAndWhereToResume) {
  GrantHub::Options options;
  options.watcher_capacity = 4;
  GrantHub hub(options);
  auto slow = hub.Subscribe(GrantFilter{}, 0);
  auto other = hub.Subscribe(GrantFilter{"mrs/9", ""}, 0);  // matches nothing: never fills
  hub.Publish(Event("mrs/1", "alice"));                      // 1
  hub.Publish(Event("mrs/1", "alice"));                      // 2
  ASSERT_THAT(Sequences({*slow->Next(), *slow->Next()}), ::testing::ElementsAre(1, 2));
  for (int i = 0; i < 5; ++i) hub.Publish(Event("mrs/1", "alice"));  // 3..7: the 5th overflows

  // Cut off: what it held is lost too, and it is told so at once.
  EXPECT_FALSE(slow->Next().has_value());
  std::optional<absl::Status> closed = slow->Closed();
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(closed->message(),
            "this watcher fell 4 events behind and was cut off: 5 event(s) dropped; resume with after_sequence = 2");
  // Later events do not reopen it; others are untouched.
  hub.Publish(Event("mrs/1", "alice"));  // 8
  EXPECT_FALSE(slow->Next().has_value());
  EXPECT_FALSE(other->Closed().has_value());

  // Resuming where it was told gets all it lost (more than its buffer holds: a replay is not cut off),
  // and a later cut-off names the last event it was given, not 0.
  auto resumed = hub.Subscribe(GrantFilter{}, 2);
  EXPECT_THAT(Sequences(Drain(*resumed)), ::testing::ElementsAre(3, 4, 5, 6, 7, 8));
  EXPECT_FALSE(resumed->Closed().has_value());
  auto lagging = hub.Subscribe(GrantFilter{}, 7);
  for (int i = 0; i < 5; ++i) hub.Publish(Event("mrs/1", "alice"));  // 9..13
  for (int i = 0; i < 6; ++i) (void)lagging->Next();
  ASSERT_TRUE(lagging->Closed().has_value());
  EXPECT_THAT(std::string(lagging->Closed()->message()), ::testing::HasSubstr("resume with after_sequence = 7"));
}

// A replay is read from the history as the stream sends it, never copied into the watcher's buffer: a
// watcher that replays far more than its buffer holds is served in full, and what bounds it is the live
// events it has not taken (its buffer), and the history (a replay that falls out of it is cut off).
TEST(GrantHub, AReplayIsReadFromTheHistoryAndTheWatchersBufferBoundsOnlyLiveEvents) {
  GrantHub::Options options;
  options.watcher_capacity = 4;
  options.retained = 64;
  GrantHub hub(options);
  for (int i = 0; i < 50; ++i) hub.Publish(Event("mrs/1", "alice"));  // 1..50
  auto replaying = hub.Subscribe(GrantFilter{}, 0, /*from_oldest=*/true);
  hub.Publish(Event("mrs/1", "alice"));  // 51, live: queued behind the replay
  std::vector<uint64_t> want;
  for (uint64_t s = 1; s <= 51; ++s) want.push_back(s);
  EXPECT_EQ(Sequences(Drain(*replaying)), want);
  EXPECT_FALSE(replaying->Closed().has_value());

  // Unread, with its replay pending: live events past its buffer cut it off at once, replay and all.
  auto idle = hub.Subscribe(GrantFilter{}, 0, /*from_oldest=*/true);
  for (int i = 0; i < 5; ++i) hub.Publish(Event("mrs/1", "alice"));  // 52..56: the 5th overflows
  EXPECT_FALSE(idle->Next().has_value());
  ASSERT_TRUE(idle->Closed().has_value());
  EXPECT_EQ(idle->Closed()->code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(idle->Closed()->message()), HasSubstr("resume with after_sequence = 0"));
  EXPECT_EQ(hub.watchers(), 2u);  // until its stream unsubscribes it

  // A replay read too slowly for the history: cut off where it was, not silently skipped.
  auto slow = hub.Subscribe(GrantFilter{"mrs/9", ""}, 0, /*from_oldest=*/true);  // matches nothing live
  auto reader = hub.Subscribe(GrantFilter{"mrs/1", ""}, 40);
  EXPECT_EQ(reader->Next()->sequence(), 41u);
  for (int i = 0; i < 64; ++i) hub.Publish(Event("mrs/2", "alice"));  // 57..120: 41.. fall out
  EXPECT_FALSE(reader->Next().has_value());
  ASSERT_TRUE(reader->Closed().has_value());
  EXPECT_EQ(reader->Closed()->code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(reader->Closed()->message()),
              HasSubstr("fell out of the retained history (the last 64 events)"));
  EXPECT_THAT(std::string(reader->Closed()->message()), HasSubstr("resume with after_sequence = 41"));
  EXPECT_FALSE(slow->Closed().has_value());
}

TEST(GrantHub, AStreamResumesAfterTheLastSequenceItTookThenGoesLive) {
  GrantHub::Options options;
  options.watcher_capacity = 4;
  GrantHub hub(options);
  auto first = hub.Subscribe(GrantFilter{}, 0);
  hub.Publish(Event("mrs/1", "alice"));  // 1
  hub.Publish(Event("mrs/1", "alice"));  // 2
  ASSERT_THAT(Sequences(Drain(*first)), ::testing::ElementsAre(1, 2));
  hub.Unsubscribe(first);  // the stream went away
  for (int i = 0; i < 3; ++i) hub.Publish(Event("mrs/1", "alice"));  // 3..5, missed
  auto resumed = hub.Subscribe(GrantFilter{}, 2);
  hub.Publish(Event("mrs/1", "alice"));  // 6, live
  EXPECT_THAT(Sequences(Drain(*resumed)), ::testing::ElementsAre(3, 4, 5, 6));
  EXPECT_FALSE(resumed->Closed().has_value());
}

TEST(GrantHub, ResumingHonoursTheFilterAndFromOldestReplaysTheWholeHistory) {
  GrantHub hub(GrantHub::Options{});
  hub.Publish(Event("mrs/1", "alice"));  // 1
  hub.Publish(Event("mrs/2", "alice"));  // 2
  hub.Publish(Event("mrs/1", "bob"));    // 3
  hub.Publish(Event("mrs/1", "alice"));  // 4
  EXPECT_THAT(Sequences(Drain(*hub.Subscribe(GrantFilter{"mrs/1", ""}, 1))), ::testing::ElementsAre(3, 4));
  EXPECT_THAT(Sequences(Drain(*hub.Subscribe(GrantFilter{"", "alice"}, 0, /*from_oldest=*/true))),
              ::testing::ElementsAre(1, 2, 4));
  // after_sequence 0 without from_oldest: live events only.
  auto live = hub.Subscribe(GrantFilter{}, 0);
  EXPECT_TRUE(Drain(*live).empty());
  // An after_sequence past the newest is not an error: it waits for what comes.
  auto ahead = hub.Subscribe(GrantFilter{}, 4);
  hub.Publish(Event("mrs/1", "alice"));  // 5
  EXPECT_THAT(Sequences(Drain(*ahead)), ::testing::ElementsAre(5));
}

TEST(GrantHub, ResumingBeforeTheRetainedHistoryIsOutOfRange) {
  GrantHub::Options options;
  options.retained = 3;
  GrantHub hub(options);
  for (int i = 0; i < 6; ++i) hub.Publish(Event("mrs/1", "alice"));  // 1..6; 4..6 retained
  // After 3: the next is 4, still held.
  EXPECT_THAT(Sequences(Drain(*hub.Subscribe(GrantFilter{}, 3))), ::testing::ElementsAre(4, 5, 6));
  // After 2: 3 is gone.
  auto late = hub.Subscribe(GrantFilter{}, 2);
  EXPECT_FALSE(late->Next().has_value());
  std::optional<absl::Status> closed = late->Closed();
  ASSERT_TRUE(closed.has_value());
  EXPECT_TRUE(IsError(*closed, absl::StatusCode::kOutOfRange, "after_sequence"));
  EXPECT_THAT(std::string(closed->message()),
              HasSubstr("events up to 3 are no longer retained (the history holds the last 3)"));
  // It was never registered: publishing does not touch it.
  hub.Publish(Event("mrs/1", "alice"));
  EXPECT_FALSE(late->Next().has_value());
}

TEST(GrantHub, CloseWhereEndsThePickedStreamsAfterWhatTheyHoldAndWakesThem) {
  GrantHub hub(GrantHub::Options{});
  auto mr1 = hub.Subscribe(GrantFilter{"mrs/1", ""}, 0);
  auto mr2 = hub.Subscribe(GrantFilter{"mrs/2", ""}, 0);
  int woken = 0;
  mr1->set_wake([&] { ++woken; });
  hub.Publish(Event("mrs/1", "alice"));  // 1
  EXPECT_EQ(woken, 1);
  hub.CloseWhere([](const GrantWatcher& w) { return w.filter().mr == "mrs/1"; }, absl::OkStatus());
  EXPECT_EQ(woken, 2);
  // Still drains what it held, then ends OK.
  EXPECT_FALSE(mr1->Closed().has_value());
  EXPECT_THAT(Sequences(Drain(*mr1)), ::testing::ElementsAre(1));
  ASSERT_TRUE(mr1->Closed().has_value());
  EXPECT_TRUE(mr1->Closed()->ok());
  hub.Publish(Event("mrs/1", "alice"));  // 2: not delivered to a closed watcher
  EXPECT_FALSE(mr1->Next().has_value());
  EXPECT_EQ(woken, 2);
  EXPECT_FALSE(mr2->Closed().has_value());

  hub.CloseAll(absl::UnavailableError("rdmad is shutting down"));
  ASSERT_TRUE(mr2->Closed().has_value());
  EXPECT_EQ(mr2->Closed()->code(), absl::StatusCode::kUnavailable);
}

TEST(GrantHub, AnUnsubscribedWatcherGetsNothingMore) {
  GrantHub hub(GrantHub::Options{});
  auto w = hub.Subscribe(GrantFilter{}, 0);
  hub.Publish(Event("mrs/1", "alice"));
  hub.Unsubscribe(w);
  hub.Publish(Event("mrs/1", "alice"));
  EXPECT_THAT(Sequences(Drain(*w)), ::testing::ElementsAre(1));
  EXPECT_FALSE(w->Closed().has_value());
}

}  // namespace
}  // namespace rdmad::grants
