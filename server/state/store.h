// state::Store: rdmad's crash-safe record of what clients declared, so that a restart (clean or not) can
// re-create it under the same names and never hand out a name used before (docs/operations.md, "Restart
// recovery").
//
// What it holds, in one SQLite file (journal_mode=WAL, synchronous=FULL: a write is on disk when the call
// returns, and a kill -9 or power loss at any point leaves the last committed state):
//   - marks:  per name kind ("pds", "mrs", "grants", ...), a number no name handed out so far reaches
//             (NameCounter reserves names in blocks: one write per block, not per name);
//   - pds:    id, device, label, owning tenant;
//   - mrs:    id, PD id, source (file or anonymous), access bits; for a file, who registered it (the
//             caller's file rights: checked or not, uid, gid, groups, roots) and which file it was (its
//             real path, device and inode), which restart recovery checks again. Rows written by an
//             rdmad that did not record these have NULL there (FileRecord absent: the strictest case);
//   - grants: the v1::Grant as issued (renewals update its lease); removed when it ends.
// Each mutation is one transaction (one fsync of the WAL): a control plane's rate of change, not a data
// path's.
//
// Threads: every method may be called from any thread (gRPC threads, pin workers, dispatchers, the
// "grants" loop); mu_ serializes them over the one connection. Callers call it under their own lock
// (the registry's mu_, the grant manager's), so their writes reach the file in the order their
// bookkeeping changed; mu_ is a leaf lock (the store calls nothing back).
#ifndef RDMAD_SERVER_STATE_STORE_H_
#define RDMAD_SERVER_STATE_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
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

 private:
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
  absl::Status Error(const char* what) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  Mutex mu_;
  sqlite3* db_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint64_t> marks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rdmad::state

#endif  // RDMAD_SERVER_STATE_STORE_H_
