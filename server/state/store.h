// state::Store: rdmad's crash-safe record of what clients declared, so that a restart (clean or not) can
// re-create it under the same names and never hand out a name used before (docs/operations.md, "Restart
// recovery").
//
// What it holds, in one SQLite file (journal_mode=WAL, synchronous=FULL: a transaction is on disk when its
// COMMIT returns, and a kill -9 or power loss at any point leaves the last committed state):
//   - marks:  per name kind ("pds", "mrs", "grants", ...), a number no name handed out so far reaches
//             (NameCounter reserves names in blocks: one write per block, not per name);
//   - pds:    id, device, label, owning tenant;
//   - mrs:    id, PD id, source (file or anonymous), access bits; for a file, who registered it (the
//             caller's file rights: checked or not, uid, gid, groups, roots) and which file it was (its
//             real path, device and inode), which restart recovery checks again. Rows written by an
//             rdmad that did not record these have NULL there (FileRecord absent: the strictest case);
//   - grants: the v1::Grant as issued (renewals update its lease); removed when it ends.
//
// How rdmad writes it: every mutation is a Mutation, submitted (Submit) to the store's Journal
// (state/journal.h), whose one writer thread applies everything queued in ONE transaction (group commit:
// one fsync for the group) and marks the records durable; the Ticket Submit returns says when. Callers
// submit under their own lock (a queue push, no I/O), so the file holds the mutations in the order their
// bookkeeping changed, and wait for the ticket after they released it. Without a journal attached (tests,
// tools) Submit applies the mutation at once, in its own transaction. The Put*/Delete*/SetMark methods
// apply one mutation synchronously, in its own transaction (start-up, tests).
//
// Threads: every method may be called from any thread; mu_ serializes them over the one connection and is
// a leaf (the store calls nothing back); the journal's writer holds it for a group's transaction, so no
// caller may take it under a lock another request needs (Submit does not take it while a journal is
// attached). Load and Mark run at start-up, on main.
#ifndef RDMAD_SERVER_STATE_STORE_H_
#define RDMAD_SERVER_STATE_STORE_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/common/sync.h"
#include "rdmad/v1/rdmad.pb.h"
#include "server/memory/file_access.h"

struct sqlite3;

namespace rdmad::state {

struct PdRow {
  uint64_t id = 0;
  std::string device;  // "rxe0" (bare device name)
  std::string label;
  std::string owner;   // the tenant; empty: admins'
};

// Who registered a file region and which file it was, as rdmad opened it: what restart recovery checks
// again before it maps the file (docs/operations.md, "Restart recovery").
struct FileRecord {
  FileAccess files;  // the caller's rights on files, as given to the registration
  std::string real_path;   // the file's real path (symlinks resolved) when rdmad opened it
  uint64_t dev = 0;        // its device and inode then
  uint64_t ino = 0;
};

struct MrRow {
  uint64_t id = 0;
  uint64_t pd = 0;
  v1::MemorySource source;
  uint32_t access = 0;  // fabric access bits
  // File sources: who registered it and which file. Absent for anonymous memory, and for rows written by
  // an rdmad that did not record it (recovery then maps no file for the row: the strictest case).
  std::optional<FileRecord> file;
};

struct Snapshot {
  std::map<std::string, uint64_t> marks;
  std::vector<PdRow> pds;    // by id
  std::vector<MrRow> mrs;    // by id
  std::vector<v1::Grant> grants;
};

// One change to the store, as the journal queues it. `error_prefix` / `error_suffix`: what is logged if it
// cannot be recorded, around SQLite's message: "<prefix> (<message>)<suffix>".
struct Mutation {
  enum class Kind { kSetMark, kPutPd, kDeletePd, kPutMr, kDeleteMr, kPutGrant, kDeleteGrant };
  Kind kind = Kind::kSetMark;
  std::string mark;  // kSetMark: the name kind
  uint64_t id = 0;   // kSetMark: the next number; the others: the row's id
  PdRow pd;
  MrRow mr;
  v1::Grant grant;
  std::string error_prefix;
  std::string error_suffix;

  static Mutation SetMark(std::string kind, uint64_t next);
  static Mutation PutPd(PdRow row);
  static Mutation DeletePd(uint64_t id);
  static Mutation PutMr(MrRow row);
  static Mutation DeleteMr(uint64_t id);
  static Mutation PutGrant(uint64_t id, v1::Grant grant);
  static Mutation DeleteGrant(uint64_t id);
  // Sets what is logged if it fails; returns *this (moved).
  Mutation&& OnError(std::string prefix, std::string suffix) && {
    error_prefix = std::move(prefix);
    error_suffix = std::move(suffix);
    return std::move(*this);
  }
  // Logs `s` (not OK) with the prefix and suffix (a generic one without).
  void LogFailure(const absl::Status& s) const;
};

// The outcome of a submitted record: durable (OK) or not recorded (its error). Cheap to copy; any number
// of threads may wait on copies of one ticket. A default ticket is done and OK (nothing was submitted).
class Ticket {
 public:
  Ticket() = default;
  static Ticket Done(absl::Status status);

  // Blocks until the record is durable or failed, and returns which. Never under a lock another request
  // needs (the writer's group commit is an fsync), and never on a device dispatcher or the grants' loop.
  absl::Status Wait() const;
  // Done (without blocking)?
  bool ready() const;

 private:
  friend class Journal;
  struct State {
    Notification done;
    absl::Status status;  // written once by the writer, before done's Notify; read after it
  };
  explicit Ticket(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;  // null: done, OK
};

// Holds a ticket and waits for it when it goes out of scope (its status ignored: a failure was logged by
// the journal). Declared before a MutexLock, it waits after the lock is released: the reply follows the
// record, and no lock is held across the wait.
class WaitAtScopeEnd {
 public:
  WaitAtScopeEnd() = default;
  ~WaitAtScopeEnd() { ticket_.Wait().IgnoreError(); }
  WaitAtScopeEnd(const WaitAtScopeEnd&) = delete;
  WaitAtScopeEnd& operator=(const WaitAtScopeEnd&) = delete;
  WaitAtScopeEnd& operator=(Ticket t) {
    ticket_ = std::move(t);
    return *this;
  }

 private:
  Ticket ticket_;
};

class Journal;

class Store {
 public:
  // Opens (creating it and its directory's file if missing) the store at `path`. Errors name the path
  // and SQLite's message; a file that is not a store of ours is refused rather than overwritten.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& path);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const std::string& path() const { return path_; }

  // Everything, as committed.
  absl::StatusOr<Snapshot> Load();
  // The mark of `kind` (0 if never set).
  uint64_t Mark(const std::string& kind);
  absl::Status SetMark(const std::string& kind, uint64_t next);

  absl::Status PutPd(const PdRow& row);
  absl::Status DeletePd(uint64_t id);
  absl::Status PutMr(const MrRow& row);
  absl::Status DeleteMr(uint64_t id);
  // `id` is the grant's number (grants/ID).
  absl::Status PutGrant(uint64_t id, const v1::Grant& grant);
  absl::Status DeleteGrant(uint64_t id);

  // Applies one mutation in its own transaction.
  absl::Status Apply(const Mutation& m) ABSL_LOCKS_EXCLUDED(mu_);
  // Group commit (the journal's writer): BEGIN IMMEDIATE, every mutation in order, COMMIT: one fsync.
  // `each` gets one status per mutation (a failed statement is undone alone; the others stay in the
  // transaction); if the transaction itself fails (BEGIN or COMMIT), every one gets that error, which is
  // also returned.
  absl::Status ApplyGroup(const std::vector<const Mutation*>& group, std::vector<absl::Status>* each)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Queues `m` on the attached journal (no I/O, no lock but the journal's leaf one: callers may hold their
  // own), or, without one, applies it at once. A failure is logged (Mutation::LogFailure) either way.
  Ticket Submit(Mutation m) ABSL_LOCKS_EXCLUDED(mu_);
  Journal* journal() const { return journal_.load(std::memory_order_acquire); }

 private:
  friend class Journal;  // attaches itself (set_journal) for its lifetime
  Store(std::string path, sqlite3* db) : path_(std::move(path)), db_(db) {}
  // Runs one statement with bound values (integers as int64, text/blobs as strings) in its own
  // transaction (autocommit).
  struct Value {
    bool is_int = false;
    int64_t i = 0;
    std::string s;
    bool blob = false;
    bool null = false;
    static Value Int(uint64_t v) { return Value{true, static_cast<int64_t>(v), {}, false, false}; }
    static Value Text(std::string v) { return Value{false, 0, std::move(v), false, false}; }
    static Value Blob(std::string v) { return Value{false, 0, std::move(v), true, false}; }
    static Value Null() { return Value{false, 0, {}, false, true}; }
  };
  absl::Status Exec(const char* sql, const std::vector<Value>& values) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ApplyLocked(const Mutation& m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status PutMrLocked(const MrRow& row) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void set_journal(Journal* j) { journal_.store(j, std::memory_order_release); }
  absl::Status Error(const char* what) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  Mutex mu_;
  sqlite3* db_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint64_t> marks_ ABSL_GUARDED_BY(mu_);
  // The journal Submit queues on; set by the Journal's constructor, cleared by its destructor (which runs
  // after every submitter stopped: daemon.cc). Atomic, not under mu_: Submit must not wait for a commit.
  std::atomic<Journal*> journal_{nullptr};
};

}  // namespace rdmad::state

#endif  // RDMAD_SERVER_STATE_STORE_H_
