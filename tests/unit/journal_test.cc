// Unit tests of the state journal (server/state/journal.h), the one ordered writer of the state store's
// records and the audit trail's lines: submission order is file order across threads; records queued while
// the writer is busy go in one group commit; a waiter's record is durable when its wait returns (another
// SQLite connection sees it); a failed record is reported to its waiter alone; Close writes everything
// queued; the audit log's lines through a shared journal are in sequence order; a group whose transaction
// fails for real (the file cannot grow: RLIMIT_FSIZE) is counted in rdmad_state_commit_errors_total. No sleeps: a sink that
// holds the writer inside a group makes the batching deterministic.
#include "server/state/journal.h"

#include <signal.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/audit/audit_log.h"
#include "server/common/sync.h"
#include "server/metrics/rdmad_metrics.h"
#include "server/state/names.h"
#include "server/state/store.h"
#include "tests/support/temp_dir.h"

namespace rdmad::state {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<Store> OpenOrDie(const std::string& path) {
  auto s = Store::Open(path);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(s).value() : nullptr;
}

// The label of pds/`id` as another connection to the file sees it ("" if there is no such row).
std::string LabelFromAnotherConnection(const std::string& path, uint64_t id) {
  sqlite3* db = nullptr;
  std::string label;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT label FROM pds WHERE id = ?", -1, &st, nullptr) == SQLITE_OK) {
      sqlite3_bind_int64(st, 1, static_cast<int64_t>(id));
      if (sqlite3_step(st) == SQLITE_ROW) label = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return label;
}

// A LineSink that keeps what it was given and can hold the writer inside AppendLines until released.
class RecordingSink : public LineSink {
 public:
  absl::Status AppendLines(const std::string& lines, uint64_t first, uint64_t last) override {
    bool hold = false;
    {
      MutexLock lock(&mu_);
      text_ += lines;
      ++writes_;
      hold = hold_next_;
      hold_next_ = false;
    }
    if (hold) {
      entered_.Notify();
      release_.WaitForNotification();
    }
    return absl::OkStatus();
  }
  void HoldNext() {
    MutexLock lock(&mu_);
    hold_next_ = true;
  }
  std::string text() const {
    MutexLock lock(&mu_);
    return text_;
  }
  int writes() const {
    MutexLock lock(&mu_);
    return writes_;
  }
  Notification entered_;  // the writer is inside a held AppendLines
  Notification release_;  // lets it go on

 private:
  mutable Mutex mu_;
  std::string text_ ABSL_GUARDED_BY(mu_);
  int writes_ ABSL_GUARDED_BY(mu_) = 0;
  bool hold_next_ ABSL_GUARDED_BY(mu_) = false;
};

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t nl = text.find('\n', at);
    if (nl == std::string::npos) break;
    out.push_back(text.substr(at, nl - at));
    at = nl + 1;
  }
  return out;
}

TEST(JournalTest, SubmissionOrderIsFileOrderAcrossThreads) {
  test::TempDir dir;
  const std::string path = dir.Sub("state.db");
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  RecordingSink sink;
  Journal journal(store.get());
  // Callers submit under their own lock, as the registry does: the order they changed their bookkeeping.
  Mutex caller_mu;
  uint64_t counter = 0;  // guarded by caller_mu
  constexpr int kThreads = 4, kEach = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        Ticket line, row;
        {
          MutexLock lock(&caller_mu);
          const uint64_t n = ++counter;
          // The same row rewritten each time: the last submitted must be the one left.
          row = store->Submit(Mutation::PutPd({1, "rxe0", absl::StrCat(n), ""}));
          line = journal.SubmitLine(&sink, absl::StrCat(n), n);
        }
        if (i % 50 == 0) {  // some wait, most do not
          EXPECT_TRUE(row.Wait().ok());
          EXPECT_TRUE(line.Wait().ok());
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  journal.Flush();
  const std::vector<std::string> lines = SplitLines(sink.text());
  ASSERT_EQ(lines.size(), static_cast<size_t>(kThreads * kEach));
  for (size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(lines[i], absl::StrCat(i + 1));
  EXPECT_EQ(LabelFromAnotherConnection(path, 1), absl::StrCat(kThreads * kEach));
  const Journal::Counts c = journal.counts();
  EXPECT_EQ(c.records, static_cast<uint64_t>(kThreads * kEach));
  EXPECT_EQ(c.lines, static_cast<uint64_t>(kThreads * kEach));
}

TEST(JournalTest, RecordsQueuedWhileTheWriterIsBusyGoInOneGroupCommit) {
  test::TempDir dir;
  const std::string path = dir.Sub("state.db");
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  RecordingSink sink;
  Journal journal(store.get());
  // The writer is held inside a group (its line's write) ...
  sink.HoldNext();
  Ticket first = journal.SubmitLine(&sink, "hold", 0);
  sink.entered_.WaitForNotification();
  const Journal::Counts before = journal.counts();
  // ... while many threads submit and wait for their own record.
  constexpr int kThreads = 8, kEach = 25;
  std::vector<Ticket> tickets(kThreads * kEach);
  std::vector<std::thread> threads;
  Notification all_submitted;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        const uint64_t id = static_cast<uint64_t>(t * kEach + i + 1);
        tickets[id - 1] = store->Submit(Mutation::PutPd({id, "rxe0", "x", ""}));
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const Ticket& t : tickets) EXPECT_FALSE(t.ready());  // nothing written while the writer is held
  sink.release_.Notify();
  std::vector<std::thread> waiters;
  for (int t = 0; t < kThreads; ++t) {
    waiters.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) EXPECT_TRUE(tickets[t * kEach + i].Wait().ok());
    });
  }
  for (auto& t : waiters) t.join();
  EXPECT_TRUE(first.Wait().ok());
  const Journal::Counts after = journal.counts();
  EXPECT_EQ(after.records - before.records, static_cast<uint64_t>(kThreads * kEach));
  EXPECT_EQ(after.commits - before.commits, 1u);  // 200 records, one transaction, one fsync
  EXPECT_EQ(store->Load().value().pds.size(), static_cast<size_t>(kThreads * kEach));
}

TEST(JournalTest, ConcurrentSubmittersShareCommits) {
  test::TempDir dir;
  auto store = OpenOrDie(dir.Sub("state.db"));
  ASSERT_NE(store, nullptr);
  Journal journal(store.get());
  constexpr int kThreads = 8, kEach = 40;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        const uint64_t id = static_cast<uint64_t>(t * kEach + i + 1);
        EXPECT_TRUE(store->Submit(Mutation::PutPd({id, "rxe0", "", ""})).Wait().ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  const Journal::Counts c = journal.counts();
  EXPECT_EQ(c.records, static_cast<uint64_t>(kThreads * kEach));
  EXPECT_LE(c.commits, c.records);
  std::printf("journal: %llu records in %llu group commits (%.1f per commit)\n",
              static_cast<unsigned long long>(c.records), static_cast<unsigned long long>(c.commits),
              static_cast<double>(c.records) / static_cast<double>(c.commits));
}

TEST(JournalTest, AWaiterSeesItsRecordDurableFromAnotherConnection) {
  test::TempDir dir;
  const std::string path = dir.Sub("state.db");
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  Journal journal(store.get());
  for (uint64_t id = 1; id <= 5; ++id) {
    Ticket t = store->Submit(Mutation::PutPd({id, "rxe0", absl::StrCat("pd-", id), "blue"}));
    ASSERT_TRUE(t.Wait().ok());
    EXPECT_TRUE(t.ready());
    EXPECT_EQ(LabelFromAnotherConnection(path, id), absl::StrCat("pd-", id));  // committed, not just queued
  }
}

TEST(JournalTest, AFailedRecordIsReportedToItsWaiterAndTheOthersInItsGroupStay) {
  test::TempDir dir;
  const std::string path = dir.Sub("state.db");
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  {
    // Another connection makes one kind of row fail: a trigger refuses the label "refused".
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "CREATE TRIGGER refuse BEFORE INSERT ON pds WHEN NEW.label = 'refused' "
                           "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  RecordingSink sink;
  Journal journal(store.get());
  sink.HoldNext();
  Ticket held = journal.SubmitLine(&sink, "hold", 0);
  sink.entered_.WaitForNotification();
  // One group: good, bad, good.
  Ticket good1 = store->Submit(Mutation::PutPd({1, "rxe0", "ok", ""}));
  Ticket bad = store->Submit(
      Mutation::PutPd({2, "rxe0", "refused", ""}).OnError("pds/2: not recorded in the state store", ""));
  Ticket good2 = store->Submit(Mutation::PutPd({3, "rxe0", "ok", ""}));
  sink.release_.Notify();
  EXPECT_TRUE(good1.Wait().ok());
  const absl::Status s = bad.Wait();
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("refused by the test"));
  EXPECT_TRUE(good2.Wait().ok());
  EXPECT_EQ(LabelFromAnotherConnection(path, 1), "ok");
  EXPECT_EQ(LabelFromAnotherConnection(path, 2), "");
  EXPECT_EQ(LabelFromAnotherConnection(path, 3), "ok");
  EXPECT_TRUE(held.Wait().ok());
}

// The size of `path` in bytes (0 if it does not exist).
off_t FileSize(const std::string& path) {
  struct stat st{};
  return stat(path.c_str(), &st) == 0 ? st.st_size : 0;
}

// A group whose transaction fails as a whole: the process may not grow a file past its RLIMIT_FSIZE (as on a
// full disk, write(2) fails: EFBIG), so a record too big for the WAL as it is cannot be committed. The waiter
// gets the error, nothing is recorded, the failure is counted and shows in the metrics; once the limit is
// lifted the next group commits and the error count stays.
TEST(JournalTest, AFailedCommitIsCountedAndShownInTheMetrics) {
  test::TempDir dir;
  const std::string path = dir.Sub("state.db");
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  Journal journal(store.get());
  ASSERT_TRUE(store->Submit(Mutation::PutPd({1, "rxe0", "small", ""})).Wait().ok());
  metrics::RdmadMetrics m;
  metrics::RdmadMetrics::Sources sources;
  sources.writer = [&journal] {
    const Journal::Counts c = journal.counts();
    return metrics::RdmadMetrics::WriterCounts{c.commits, c.records, c.lines, c.commit_errors};
  };
  m.SetSources(sources);
  EXPECT_THAT(m.Render(), HasSubstr("\nrdmad_state_commit_errors_total 0\n"));

  // Files may grow to what they are now plus 64 KiB; the record is 1 MiB. SIGXFSZ ignored: write(2) fails.
  struct rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  struct sigaction ignore{}, old{};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGXFSZ, &ignore, &old), 0);
  struct rlimit small = saved;
  small.rlim_cur = static_cast<rlim_t>(std::max(FileSize(path), FileSize(path + "-wal")) + 64 * 1024);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const absl::Status failed = store->Submit(Mutation::PutPd({2, "rxe0", std::string(1 << 20, 'x'), ""})).Wait();
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &saved), 0);
  ASSERT_EQ(sigaction(SIGXFSZ, &old, nullptr), 0);

  EXPECT_FALSE(failed.ok());
  EXPECT_EQ(LabelFromAnotherConnection(path, 2), "");
  EXPECT_EQ(journal.counts().commit_errors, 1u);
  EXPECT_EQ(journal.counts().commits, 1u);  // the first group only
  EXPECT_THAT(m.Render(), HasSubstr("\nrdmad_state_commit_errors_total 1\n"));
  EXPECT_THAT(m.Render(), HasSubstr("\nrdmad_state_commits_total 1\n"));

  // The store works again once the file may grow: the next group commits, the error stays counted.
  ASSERT_TRUE(store->Submit(Mutation::PutPd({3, "rxe0", "after", ""})).Wait().ok());
  EXPECT_EQ(LabelFromAnotherConnection(path, 3), "after");
  EXPECT_THAT(m.Render(), HasSubstr("\nrdmad_state_commit_errors_total 1\n"));
  EXPECT_THAT(m.Render(), HasSubstr("\nrdmad_state_commits_total 2\n"));
}

TEST(JournalTest, CloseWritesEverythingQueuedAndLaterRecordsAreWrittenInline) {
  test::TempDir dir;
  const std::string path = dir.Sub("state.db");
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  RecordingSink sink;
  std::vector<Ticket> tickets;
  {
    Journal journal(store.get());
    sink.HoldNext();  // everything below is queued behind the held group when Close starts
    tickets.push_back(journal.SubmitLine(&sink, "first", 1));
    sink.entered_.WaitForNotification();
    for (uint64_t id = 1; id <= 100; ++id) tickets.push_back(store->Submit(Mutation::PutPd({id, "rxe0", "", ""})));
    tickets.push_back(journal.SubmitLine(&sink, "last", 2));
    std::thread closer([&] { journal.Close(); });
    sink.release_.Notify();
    closer.join();
    for (const Ticket& t : tickets) EXPECT_TRUE(t.ready());  // nothing left queued
    // After Close: written at once, on this thread.
    Ticket late = store->Submit(Mutation::PutPd({101, "rxe0", "late", ""}));
    EXPECT_TRUE(late.ready());
    EXPECT_TRUE(late.Wait().ok());
    Ticket late_line = journal.SubmitLine(&sink, "late", 3);
    EXPECT_TRUE(late_line.ready());
  }  // the journal detaches from the store
  for (const Ticket& t : tickets) EXPECT_TRUE(t.Wait().ok());
  EXPECT_EQ(store->journal(), nullptr);
  store.reset();
  auto reopened = OpenOrDie(path);
  EXPECT_EQ(reopened->Load().value().pds.size(), 101u);
  EXPECT_EQ(sink.text(), "first\nlast\nlate\n");
}

TEST(JournalTest, NameMarksGoThroughTheJournalAhead) {
  test::TempDir dir;
  const std::string path = dir.Sub("state.db");
  {
    auto store = OpenOrDie(path);
    Journal journal(store.get());
    NameCounter names(store.get(), "pds");
    for (uint64_t i = 1; i <= NameCounter::kBlock + 10; ++i) EXPECT_EQ(names.Next(), i);
  }  // the journal (declared after the store) closes first
  auto store = OpenOrDie(path);
  // Every number handed out is below the durable mark: the next block's was written ahead.
  EXPECT_GE(store->Mark("pds"), NameCounter::kBlock + 11);
  NameCounter names(store.get(), "pds");
  EXPECT_GT(names.Next(), NameCounter::kBlock + 10);
}

TEST(JournalTest, AuditLinesThroughASharedJournalAreInSequenceOrder) {
  test::TempDir dir;
  auto store = OpenOrDie(dir.Sub("state.db"));
  ASSERT_NE(store, nullptr);
  Journal journal(store.get());
  audit::AuditLog::Options options;
  options.journal = &journal;
  const std::string path = dir.Sub("audit.log");
  auto log = audit::AuditLog::Open(path, options);
  ASSERT_TRUE(log.ok()) << log.status();
  constexpr int kThreads = 4, kEach = 100;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        const uint64_t id = static_cast<uint64_t>(t * kEach + i + 1);
        // A store record and an audit record, interleaved with other threads'.
        store->Submit(Mutation::PutPd({id, "rxe0", "", ""}));
        audit::Event e;
        e.method = "CreatePd";
        e.resource = absl::StrCat("pds/", id);
        if (i % 2 == 0) {
          (*log)->Record(e);
        } else {
          auth::Caller caller;
          caller.principal = "test";
          (*log)->RecordCall(caller, e.method, e.resource, absl::OkStatus());  // waits for its line
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  (*log)->Flush();
  std::ifstream in(path);
  uint64_t expected = 1;
  for (std::string line; std::getline(in, line); ++expected) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << line;
    EXPECT_EQ(j["sequence"].get<uint64_t>(), expected);
  }
  EXPECT_EQ(expected - 1, static_cast<uint64_t>(kThreads * kEach));
  const Journal::Counts c = journal.counts();
  EXPECT_EQ(c.lines, static_cast<uint64_t>(kThreads * kEach));
  log->reset();  // flushes its lines, before the journal goes
}

}  // namespace
}  // namespace rdmad::state
