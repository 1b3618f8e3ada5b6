// state::Store over SQLite (libsqlite3, Debian-packaged), Mutation and Ticket. Threads: see store.h.
#include "server/state/store.h"

#include "server/state/journal.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/common/log.h"
#include "server/common/status.h"

namespace rdmad::state {
namespace {

constexpr int kSchemaVersion = 1;

// The schema; every statement is idempotent.
constexpr const char* kSchema[] = {
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS marks (kind TEXT PRIMARY KEY, next INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS pds (id INTEGER PRIMARY KEY, device TEXT NOT NULL, label TEXT NOT NULL, "
    "owner TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS mrs (id INTEGER PRIMARY KEY, pd INTEGER NOT NULL, source BLOB NOT NULL, "
    "access INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS grants (id INTEGER PRIMARY KEY, info BLOB NOT NULL)",
};

// Columns of mrs added after the first schema: added to an older file when it is opened (ALTER TABLE), NULL
// in its existing rows. A file region's record (store.h FileRecord): real_path NULL means "not recorded".
// file_uid NULL: the caller had no file-system identity. file_groups: decimal gids, comma-separated;
// file_roots: paths separated by NUL bytes.
constexpr const char* kMrColumns[][2] = {
    {"file_check", "INTEGER"}, {"file_uid", "INTEGER"}, {"file_gid", "INTEGER"}, {"file_groups", "TEXT"},
    {"file_roots", "BLOB"},    {"real_path", "TEXT"},   {"file_dev", "INTEGER"}, {"file_ino", "INTEGER"},
};

absl::Status SqliteError(sqlite3* db, const std::string& path, const char* what) {
  return absl::InternalError(absl::StrCat("state store ", path, ": ", what, ": ",
                                          db ? sqlite3_errmsg(db) : "out of memory"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path) {
  // Its directory, if missing (one level: /var/lib/rdmad when systemd's StateDirectory did not make it).
  if (const size_t slash = path.rfind('/'); slash != std::string::npos && slash > 0) {
    const std::string dir = path.substr(0, slash);
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      return absl::FailedPreconditionError(
          absl::StrCat("state_file ", path, ": cannot create its directory: ", std::strerror(errno)));
    }
  }
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                                 nullptr);
  if (rc != SQLITE_OK) {
    absl::Status s = absl::FailedPreconditionError(
        absl::StrCat("state_file ", path, ": cannot open: ", db ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
    sqlite3_close(db);
    return s;
  }
  sqlite3_busy_timeout(db, 5000);
  std::unique_ptr<Store> store(new Store(path, db));
  MutexLock lock(&store->mu_);
  // WAL: a commit appends to the log and fsyncs it (synchronous=FULL), readers never block the writer,
  // and a crash at any point leaves the last committed transaction. The log is checkpointed into the
  // file automatically.
  for (const char* pragma : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL"}) {
    if (sqlite3_exec(db, pragma, nullptr, nullptr, nullptr) != SQLITE_OK) {
      return absl::FailedPreconditionError(
          absl::StrCat("state_file ", path, ": ", pragma, ": ", sqlite3_errmsg(db), " (not an rdmad state store?)"));
    }
  }
  for (const char* sql : kSchema) {
    if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) {
      return absl::FailedPreconditionError(
          absl::StrCat("state_file ", path, ": creating the schema: ", sqlite3_errmsg(db)));
    }
  }
  sqlite3_stmt* st = nullptr;
  // Columns added since the first schema, in a file made before them. Old rows keep NULL there, which Load
  // reports as "not recorded"; an older rdmad still reads and writes the file (its rows get NULL too).
  {
    std::vector<std::string> have;
    if (sqlite3_prepare_v2(db, "PRAGMA table_info(mrs)", -1, &st, nullptr) != SQLITE_OK) {
      return SqliteError(db, path, "reading the columns of mrs");
    }
    while (sqlite3_step(st) == SQLITE_ROW) {
      const unsigned char* name = sqlite3_column_text(st, 1);
      if (name != nullptr) have.emplace_back(reinterpret_cast<const char*>(name));
    }
    sqlite3_finalize(st);
    st = nullptr;
    for (const auto& column : kMrColumns) {
      if (std::find(have.begin(), have.end(), column[0]) != have.end()) continue;
      const std::string sql = absl::StrCat("ALTER TABLE mrs ADD COLUMN ", column[0], " ", column[1]);
      if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) {
        return absl::FailedPreconditionError(
            absl::StrCat("state_file ", path, ": adding column ", column[0], ": ", sqlite3_errmsg(db)));
      }
    }
  }
  // The schema's version: a newer file is refused (its rows may mean something this rdmad does not know).
  int64_t version = -1;
  if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = 'schema'", -1, &st, nullptr) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    version = sqlite3_column_int64(st, 0);
  }
  sqlite3_finalize(st);
  if (version > kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat("state_file ", path, ": schema version ", version,
                                                      " is newer than this rdmad's (", kSchemaVersion, ")"));
  }
  if (version < 0) {
    RDMAD_RETURN_IF_ERROR(store->Exec("INSERT INTO meta (key, value) VALUES ('schema', ?)", {Value::Int(kSchemaVersion)}));
  }
  // The marks, cached: NameCounter asks for them at start-up.
  if (sqlite3_prepare_v2(db, "SELECT kind, next FROM marks", -1, &st, nullptr) != SQLITE_OK) {
    return SqliteError(db, path, "reading the marks");
  }
  while (sqlite3_step(st) == SQLITE_ROW) {
    store->marks_[reinterpret_cast<const char*>(sqlite3_column_text(st, 0))] =
        static_cast<uint64_t>(sqlite3_column_int64(st, 1));
  }
  sqlite3_finalize(st);
  return store;
}

Store::~Store() {
  MutexLock lock(&mu_);
  sqlite3_close(db_);
}

absl::Status Store::Error(const char* what) const { return SqliteError(db_, path_, what); }

absl::Status Store::Exec(const char* sql, const std::vector<Value>& values) {
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db_, sql, -1, &st, nullptr) != SQLITE_OK) return Error(sql);
  for (size_t i = 0; i < values.size(); ++i) {
    const Value& v = values[i];
    const int at = static_cast<int>(i + 1);
    if (v.null) {
      sqlite3_bind_null(st, at);
    } else if (v.is_int) {
      sqlite3_bind_int64(st, at, v.i);
    } else if (v.blob) {
      sqlite3_bind_blob(st, at, v.s.data(), static_cast<int>(v.s.size()), SQLITE_TRANSIENT);
    } else {
      sqlite3_bind_text(st, at, v.s.data(), static_cast<int>(v.s.size()), SQLITE_TRANSIENT);
    }
  }
  const int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return Error(sql);
  return absl::OkStatus();
}


uint64_t Store::Mark(const std::string& kind) {
  MutexLock lock(&mu_);
  auto it = marks_.find(kind);
  return it == marks_.end() ? 0 : it->second;
}

absl::Status Store::SetMark(const std::string& kind, uint64_t next) { return Apply(Mutation::SetMark(kind, next)); }
absl::Status Store::PutPd(const PdRow& row) { return Apply(Mutation::PutPd(row)); }
absl::Status Store::DeletePd(uint64_t id) { return Apply(Mutation::DeletePd(id)); }
absl::Status Store::PutMr(const MrRow& row) { return Apply(Mutation::PutMr(row)); }
absl::Status Store::DeleteMr(uint64_t id) { return Apply(Mutation::DeleteMr(id)); }
absl::Status Store::PutGrant(uint64_t id, const v1::Grant& grant) { return Apply(Mutation::PutGrant(id, grant)); }
absl::Status Store::DeleteGrant(uint64_t id) { return Apply(Mutation::DeleteGrant(id)); }

absl::Status Store::Apply(const Mutation& m) {
  MutexLock lock(&mu_);
  RDMAD_RETURN_IF_ERROR(ApplyLocked(m));  // autocommit: its own transaction
  if (m.kind == Mutation::Kind::kSetMark) marks_[m.mark] = m.id;
  return absl::OkStatus();
}

absl::Status Store::ApplyGroup(const std::vector<const Mutation*>& group, std::vector<absl::Status>* each) {
  each->assign(group.size(), absl::OkStatus());
  if (group.empty()) return absl::OkStatus();
  MutexLock lock(&mu_);
  absl::Status tx = Exec("BEGIN IMMEDIATE", {});
  if (tx.ok()) {
    for (size_t i = 0; i < group.size(); ++i) (*each)[i] = ApplyLocked(*group[i]);
    // Some errors (disk full, I/O) roll the whole transaction back: then nothing of the group is recorded.
    if (sqlite3_get_autocommit(db_)) {
      tx = Error("the group's transaction was rolled back");
    } else {
      tx = Exec("COMMIT", {});
      if (!tx.ok() && !sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    }
  }
  if (!tx.ok()) {
    for (absl::Status& s : *each) s = tx;
    return tx;
  }
  for (size_t i = 0; i < group.size(); ++i) {
    if ((*each)[i].ok() && group[i]->kind == Mutation::Kind::kSetMark) marks_[group[i]->mark] = group[i]->id;
  }
  return absl::OkStatus();
}

Ticket Store::Submit(Mutation m) {
  if (Journal* j = journal()) return j->Submit(std::move(m));
  absl::Status s = Apply(m);
  if (!s.ok()) m.LogFailure(s);
  return Ticket::Done(std::move(s));
}

absl::Status Store::ApplyLocked(const Mutation& m) {
  switch (m.kind) {
    case Mutation::Kind::kSetMark:
      return Exec("INSERT INTO marks (kind, next) VALUES (?, ?) ON CONFLICT(kind) DO UPDATE SET next = excluded.next",
                  {Value::Text(m.mark), Value::Int(m.id)});
    case Mutation::Kind::kPutPd:
      return Exec("INSERT OR REPLACE INTO pds (id, device, label, owner) VALUES (?, ?, ?, ?)",
                  {Value::Int(m.pd.id), Value::Text(m.pd.device), Value::Text(m.pd.label), Value::Text(m.pd.owner)});
    case Mutation::Kind::kDeletePd:
      return Exec("DELETE FROM pds WHERE id = ?", {Value::Int(m.id)});
    case Mutation::Kind::kPutMr:
      return PutMrLocked(m.mr);
    case Mutation::Kind::kDeleteMr:
      return Exec("DELETE FROM mrs WHERE id = ?", {Value::Int(m.id)});
    case Mutation::Kind::kPutGrant: {
      std::string info;
      if (!m.grant.SerializeToString(&info)) return absl::InternalError("state store: cannot serialize a grant");
      return Exec("INSERT OR REPLACE INTO grants (id, info) VALUES (?, ?)", {Value::Int(m.id), Value::Blob(info)});
    }
    case Mutation::Kind::kDeleteGrant:
      return Exec("DELETE FROM grants WHERE id = ?", {Value::Int(m.id)});
  }
  return absl::InternalError("state store: unknown mutation");
}

absl::Status Store::PutMrLocked(const MrRow& row) {
  std::string source;
  if (!row.source.SerializeToString(&source)) return absl::InternalError("state store: cannot serialize a source");
  std::vector<Value> values = {Value::Int(row.id), Value::Int(row.pd), Value::Blob(source), Value::Int(row.access)};
  if (row.file.has_value()) {
    const FileAccess& f = row.file->files;
    std::string groups, roots;
    if (f.identity.has_value()) {
      for (uint32_t g : f.identity->groups) absl::StrAppend(&groups, groups.empty() ? "" : ",", g);
    }
    for (size_t i = 0; i < f.roots.size(); ++i) {
      if (i > 0) roots.push_back('\0');
      roots += f.roots[i];
    }
    values.push_back(Value::Int(f.check ? 1 : 0));
    values.push_back(f.identity.has_value() ? Value::Int(f.identity->uid) : Value::Null());
    values.push_back(f.identity.has_value() ? Value::Int(f.identity->gid) : Value::Null());
    values.push_back(Value::Text(groups));
    values.push_back(Value::Blob(roots));
    values.push_back(Value::Text(row.file->real_path));
    values.push_back(Value::Int(row.file->dev));
    values.push_back(Value::Int(row.file->ino));
  } else {
    for (size_t i = 0; i < sizeof kMrColumns / sizeof kMrColumns[0]; ++i) values.push_back(Value::Null());
  }
  return Exec("INSERT OR REPLACE INTO mrs (id, pd, source, access, file_check, file_uid, file_gid, file_groups, "
              "file_roots, real_path, file_dev, file_ino) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
              values);
}

// ---------------------------------------------------------------------------------------------------------
// Mutation and Ticket

Mutation Mutation::SetMark(std::string kind, uint64_t next) {
  Mutation m;
  m.kind = Kind::kSetMark;
  m.mark = std::move(kind);
  m.id = next;
  return m;
}
Mutation Mutation::PutPd(PdRow row) {
  Mutation m;
  m.kind = Kind::kPutPd;
  m.id = row.id;
  m.pd = std::move(row);
  return m;
}
Mutation Mutation::DeletePd(uint64_t id) {
  Mutation m;
  m.kind = Kind::kDeletePd;
  m.id = id;
  return m;
}
Mutation Mutation::PutMr(MrRow row) {
  Mutation m;
  m.kind = Kind::kPutMr;
  m.id = row.id;
  m.mr = std::move(row);
  return m;
}
Mutation Mutation::DeleteMr(uint64_t id) {
  Mutation m;
  m.kind = Kind::kDeleteMr;
  m.id = id;
  return m;
}
Mutation Mutation::PutGrant(uint64_t id, v1::Grant grant) {
  Mutation m;
  m.kind = Kind::kPutGrant;
  m.id = id;
  m.grant = std::move(grant);
  return m;
}
Mutation Mutation::DeleteGrant(uint64_t id) {
  Mutation m;
  m.kind = Kind::kDeleteGrant;
  m.id = id;
  return m;
}

void Mutation::LogFailure(const absl::Status& s) const {
  if (error_prefix.empty()) {
    RDMAD_LOG_ERROR("state store: a mutation is not recorded (%s)", std::string(s.message()).c_str());
    return;
  }
  RDMAD_LOG_ERROR("%s (%s)%s", error_prefix.c_str(), std::string(s.message()).c_str(), error_suffix.c_str());
}

Ticket Ticket::Done(absl::Status status) {
  if (status.ok()) return Ticket();
  auto state = std::make_shared<State>();
  state->status = std::move(status);
  state->done.Notify();
  return Ticket(std::move(state));
}

absl::Status Ticket::Wait() const {
  if (state_ == nullptr) return absl::OkStatus();
  state_->done.WaitForNotification();
  return state_->status;
}

bool Ticket::ready() const { return state_ == nullptr || state_->done.HasBeenNotified(); }

absl::StatusOr<Snapshot> Store::Load() {
  MutexLock lock(&mu_);
  Snapshot out;
  out.marks = marks_;
  sqlite3_stmt* st = nullptr;
  auto text = [&](int col) {
    const unsigned char* t = sqlite3_column_text(st, col);
    return std::string(t ? reinterpret_cast<const char*>(t) : "", static_cast<size_t>(sqlite3_column_bytes(st, col)));
  };
  auto blob = [&](int col) {
    const void* b = sqlite3_column_blob(st, col);
    return std::string(b ? static_cast<const char*>(b) : "", static_cast<size_t>(sqlite3_column_bytes(st, col)));
  };
  if (sqlite3_prepare_v2(db_, "SELECT id, device, label, owner FROM pds ORDER BY id", -1, &st, nullptr) != SQLITE_OK) {
    return Error("reading pds");
  }
  while (sqlite3_step(st) == SQLITE_ROW) {
    PdRow r;
    r.id = static_cast<uint64_t>(sqlite3_column_int64(st, 0));
    r.device = text(1);
    r.label = text(2);
    r.owner = text(3);
    out.pds.push_back(std::move(r));
  }
  sqlite3_finalize(st);
  if (sqlite3_prepare_v2(db_,
                         "SELECT id, pd, source, access, file_check, file_uid, file_gid, file_groups, file_roots, "
                         "real_path, file_dev, file_ino FROM mrs ORDER BY id",
                         -1, &st, nullptr) != SQLITE_OK) {
    return Error("reading mrs");
  }
  while (sqlite3_step(st) == SQLITE_ROW) {
    MrRow r;
    r.id = static_cast<uint64_t>(sqlite3_column_int64(st, 0));
    r.pd = static_cast<uint64_t>(sqlite3_column_int64(st, 1));
    if (!r.source.ParseFromString(blob(2))) {
      sqlite3_finalize(st);
      return absl::DataLossError(absl::StrCat("state store ", path_, ": mrs/", r.id, ": its source does not parse"));
    }
    r.access = static_cast<uint32_t>(sqlite3_column_int64(st, 3));
    if (sqlite3_column_type(st, 9) != SQLITE_NULL) {  // the file's record (store.h FileRecord)
      FileRecord f;
      f.files.check = sqlite3_column_int64(st, 4) != 0;
      if (sqlite3_column_type(st, 5) != SQLITE_NULL) {
        FileIdentity who;
        who.uid = static_cast<uint32_t>(sqlite3_column_int64(st, 5));
        who.gid = static_cast<uint32_t>(sqlite3_column_int64(st, 6));
        for (absl::string_view g : absl::StrSplit(text(7), ',', absl::SkipEmpty())) {
          uint32_t gid = 0;
          if (!absl::SimpleAtoi(g, &gid)) {
            sqlite3_finalize(st);
            return absl::DataLossError(absl::StrCat("state store ", path_, ": mrs/", r.id, ": a group does not parse"));
          }
          who.groups.push_back(gid);
        }
        f.files.identity = std::move(who);
      }
      const std::string roots = blob(8);
      if (!roots.empty()) {
        for (absl::string_view root : absl::StrSplit(roots, absl::ByChar('\0'))) f.files.roots.emplace_back(root);
      }
      f.real_path = text(9);
      f.dev = static_cast<uint64_t>(sqlite3_column_int64(st, 10));
      f.ino = static_cast<uint64_t>(sqlite3_column_int64(st, 11));
      r.file = std::move(f);
    }
    out.mrs.push_back(std::move(r));
  }
  sqlite3_finalize(st);
  if (sqlite3_prepare_v2(db_, "SELECT id, info FROM grants ORDER BY id", -1, &st, nullptr) != SQLITE_OK) {
    return Error("reading grants");
  }
  while (sqlite3_step(st) == SQLITE_ROW) {
    v1::Grant g;
    if (!g.ParseFromString(blob(1))) {
      const int64_t id = sqlite3_column_int64(st, 0);
      sqlite3_finalize(st);
      return absl::DataLossError(absl::StrCat("state store ", path_, ": grants/", id, ": does not parse"));
    }
    out.grants.push_back(std::move(g));
  }
  sqlite3_finalize(st);
  return out;
}

}  // namespace rdmad::state
