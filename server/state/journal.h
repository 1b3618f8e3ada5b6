// state::Journal: the one ordered writer of rdmad's durable records: the state store's mutations
// (store.h) and the audit trail's lines (server/audit/audit_log.h), with group commit.
//
// Callers submit records in order (Submit, SubmitLine: a push on an in-memory queue under the journal's
// leaf mutex, no I/O, so they may do it under their own locks, and do: the queue's order is the order their
// bookkeeping changed). The writer thread ("state-writer") takes everything queued at once and:
//   1. applies the group's store mutations in ONE SQLite transaction (BEGIN IMMEDIATE ... COMMIT: one fsync
//      for the whole group, however many records it has);
//   2. appends the group's lines to their files, one write(2) per file (LineSink::AppendLines);
//   3. marks every record of the group done: its Ticket's status is OK (durable) or the error, which the
//      writer also logs for store records (Mutation::LogFailure; a line's sink logs its own write errors).
// So the store file and the audit file hold the records in submission order, and a record is durable once
// its ticket is done: a caller that promises durability (an RPC's reply) releases its lock, then waits for
// its ticket; a path that must not block (a device dispatcher, the grants' loop) submits and moves on.
//
// Threads: Submit/SubmitLine/Flush from any thread; the writer thread alone runs the store's group
// transactions and the sinks' AppendLines, and completes the tickets. mu_ guards the queue, the counters
// and the writer's stop flag; it is a leaf: held only for a queue push or swap, never across I/O. The
// writer takes the store's mutex (for a group's transaction) and each sink's own lock, never mu_ with them.
// Lock order for callers: any lock of theirs, then Journal::mu_.
//
// Lifetime: the journal outlives every submitter and every LineSink outlives the records it was given
// (AuditLog flushes the journal before it goes). Close (and the destructor) flushes everything queued, then
// stops the writer; a record submitted after Close is applied at once on the submitter's thread (shutdown
// only). The store, if any, outlives the journal; the journal attaches itself to it (Store::Submit) and
// detaches in its destructor.
#ifndef RDMAD_SERVER_STATE_JOURNAL_H_
#define RDMAD_SERVER_STATE_JOURNAL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "server/common/sync.h"
#include "server/state/store.h"

namespace rdmad::state {

// A file the journal appends lines to (the audit log's). Implementations take only their own lock.
class LineSink {
 public:
  virtual ~LineSink() = default;
  // On the writer thread (or a submitter's after Close): `lines` are whole lines, each ending in '\n', in
  // submission order; `first_tag`/`last_tag` the tags the first and last were submitted with. Returns OK
  // once they are written (in the kernel), or the write's error.
  virtual absl::Status AppendLines(const std::string& lines, uint64_t first_tag, uint64_t last_tag) = 0;
};

class Journal {
 public:
  // `store` may be null (a journal of lines only). Starts the writer thread.
  explicit Journal(Store* store);
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // Queues a store mutation after everything submitted before it.
  Ticket Submit(Mutation m) ABSL_LOCKS_EXCLUDED(mu_);
  // Queues `line` (without its newline) for `sink`, tagged `tag` (the audit record's sequence).
  Ticket SubmitLine(LineSink* sink, std::string line, uint64_t tag) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until everything submitted before the call is done. Not under a lock another request needs.
  void Flush() ABSL_LOCKS_EXCLUDED(mu_);
  // Flushes, then stops the writer thread. Idempotent.
  void Close() ABSL_LOCKS_EXCLUDED(mu_);

  // Group commits (store transactions committed) and store records applied so far; lines appended; group
  // transactions that failed as a whole (BEGIN or COMMIT refused, or rolled back by SQLite: disk full, I/O
  // error, read-only file, the file locked by another process): none of their records is durable.
  struct Counts {
    uint64_t commits = 0;
    uint64_t records = 0;
    uint64_t lines = 0;
    uint64_t commit_errors = 0;
  };
  Counts counts() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Record {
    enum class Kind { kMutation, kLine, kBarrier };
    Kind kind = Kind::kBarrier;
    Mutation mutation;       // kMutation
    LineSink* sink = nullptr;  // kLine
    std::string line;        // kLine: with its newline
    uint64_t tag = 0;        // kLine
    std::shared_ptr<Ticket::State> done;
  };
  Ticket Enqueue(Record r) ABSL_LOCKS_EXCLUDED(mu_);
  void Run();  // the writer thread
  // Writes one group (on the writer, or on a submitter after Close) and completes its tickets.
  void WriteGroup(std::vector<Record>& group);

  Store* const store_;  // not owned; null: lines only. Its transactions run on the writer thread alone.
  mutable Mutex mu_;
  std::vector<Record> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;  // Close: the writer ends once the queue is empty
  bool closed_ ABSL_GUARDED_BY(mu_) = false;    // the writer has ended: Enqueue writes inline
  Counts counts_ ABSL_GUARDED_BY(mu_);
  // Serializes inline groups after Close (the writer is gone; the store and sinks have their own locks, this
  // keeps one group's lines together). Taken without mu_.
  Mutex inline_mu_;
  std::thread writer_;  // started in the constructor, joined by Close
};

}  // namespace rdmad::state

#endif  // RDMAD_SERVER_STATE_JOURNAL_H_
