// AuditLog: rdmad's audit trail (docs/security.md#audit-trail). Every mutating RPC (recorded by the RPC
// layer through RecordCall) and every data-plane accept, reject and grant end (recorded by the CM layer and
// the grants through the AuditSink interface) becomes one JSON line, appended to a file or written to
// stdout, and a v1::AuditRecord published to the WatchAudit streams.
//
// Lines go through the state journal (server/state/journal.h: Options::journal, the daemon's, shared with
// the state store; a journal of its own if none is given), in sequence order and in order with the store's
// records. The journal's writer thread appends each group's lines with one write(2) on an O_APPEND
// descriptor, no user-space buffer, so `tail -f` sees them at once. What holds when a call returns:
//   - RecordCall (a mutating RPC's record), on the RPC handler's own thread (every call answered where it
//     was handled: dispatch/handoffs.h counts no hand-off), waits for its line: it is in the kernel when
//     RecordCall returns, before the answer leaves, so a crash of rdmad loses no record of an RPC it
//     answered (a crash of the host may lose what the page cache had not written back: no fsync per
//     line). A call answered from another thread (a pin worker, a device dispatcher) only queues it, as
//     Record does;
//   - Record (the CM layer's and the grants' events, from dispatchers and the grants' loop) only queues
//     its line and returns: it reaches the file with the writer's next group, in order, normally within
//     one store commit; a crash of rdmad in between loses it.
// WatchAudit streams get each record when it is numbered (at once, before its line is written).
//
// Threads: Record / RecordCall from any thread; Reopen from any (main, on SIGHUP); watchers subscribe
// through hub() from gRPC threads. mu_ guards the numbering and is held across the submission to the
// journal (a queue push) and the hub's Publish, so that the file and the streams carry the records in
// sequence order; it is never held across I/O. fd_mu_ guards the descriptor and the write errors: taken by
// the journal's writer thread for its write(2) (AppendLines), by Reopen and write_errors(); a leaf.
// Lock order: AuditLog::mu_, then the journal's and the hub's, then a watcher's (dispatch/hub.h). Record
// never calls back into its caller and never blocks on the disk: callers may hold leaf locks of their own,
// but the CM layer and the grants do not.
#ifndef RDMAD_SERVER_AUDIT_AUDIT_LOG_H_
#define RDMAD_SERVER_AUDIT_AUDIT_LOG_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/common/sync.h"
#include "absl/time/time.h"
#include "rdmad/v1/rdmad.pb.h"
#include "server/audit/sink.h"
#include "server/auth/caller.h"
#include "server/dispatch/hub.h"
#include "server/state/journal.h"

namespace rdmad::audit {

// WatchAudit has no filter: admins see every record.
struct AuditFilter {
  bool Matches(const v1::AuditRecord&) const { return true; }
};
using AuditHub = dispatch::Hub<v1::AuditRecord, AuditFilter>;
using AuditWatcher = dispatch::HubWatcher<v1::AuditRecord, AuditFilter>;

class AuditLog final : public AuditSink, private state::LineSink {
 public:
  struct Options {
    size_t watcher_capacity = 1024;  // records buffered per WatchAudit stream (config watch_buffer)
    size_t retained = 4096;          // most recent records kept for from_oldest / after_sequence
    // The journal its lines go through (not owned; outlives the log). Null: the log starts its own.
    state::Journal* journal = nullptr;
  };

  // `path`: a file (absolute; created with mode 0600 if absent, appended to) or "-" for stdout. An
  // existing file keeps its mode (a warning is logged if others may read it).
  static absl::StatusOr<std::unique_ptr<AuditLog>> Open(const std::string& path, Options options);
  ~AuditLog() override;
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  // Numbers the event, queues its line on the journal and publishes it; does not wait for the write. A
  // failed write is logged (once until writes work again) and counted; the record is still published.
  void Record(const Event& event) override ABSL_LOCKS_EXCLUDED(mu_);
  // A mutating RPC's record: principal, tenant and peer from the caller; code, errno and detail (the
  // message) from the status. On the handler's own thread, returns once its line is written (or its write
  // failed); elsewhere it only queues it (above). Not under a lock another request needs.
  void RecordCall(const auth::Caller& caller, const std::string& method, const std::string& resource,
                  const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);

  // For logrotate (call it on SIGHUP): opens the path again (creating it 0600) and writes there from now
  // on (every line recorded before the call goes to the old file: it waits for them); the old descriptor is
  // closed. On failure the log keeps writing to the old one. No-op for stdout.
  absl::Status Reopen() ABSL_LOCKS_EXCLUDED(mu_, fd_mu_);

  // Waits until every line recorded so far is written (or its write failed). Not under a lock another
  // request needs.
  void Flush() ABSL_LOCKS_EXCLUDED(mu_, fd_mu_);

  // Ends every WatchAudit stream with UNAVAILABLE (shutdown, before the gRPC server stops).
  void Shutdown();

  AuditHub& hub() { return hub_; }
  const std::string& path() const { return path_; }
  uint64_t write_errors() const ABSL_LOCKS_EXCLUDED(fd_mu_);

  // The record's line, without the newline: a JSON object with sequence, time (RFC 3339, UTC, ns),
  // time_unix_nanos, principal, tenant, method, resource, code, errno_value, errno_name, detail and peer,
  // in that order. Invalid UTF-8 is replaced (U+FFFD), never an error.
  static std::string ToJson(const v1::AuditRecord& record);

 private:
  AuditLog(std::string path, int fd, Options options);
  // Numbers, queues and publishes the record; its line's ticket.
  state::Ticket Submit(const Event& event) ABSL_LOCKS_EXCLUDED(mu_);
  // state::LineSink, on the journal's writer thread: one write(2) of a group's lines.
  absl::Status AppendLines(const std::string& lines, uint64_t first, uint64_t last) override
      ABSL_LOCKS_EXCLUDED(fd_mu_);

  const std::string path_;
  AuditHub hub_;
  std::unique_ptr<state::Journal> own_journal_;  // when Options::journal is null; set in the constructor
  state::Journal* const journal_;                 // Options::journal, or own_journal_
  mutable Mutex mu_;
  uint64_t next_sequence_ ABSL_GUARDED_BY(mu_) = 1;
  mutable Mutex fd_mu_;
  int fd_ ABSL_GUARDED_BY(fd_mu_);
  uint64_t write_errors_ ABSL_GUARDED_BY(fd_mu_) = 0;
  bool failing_ ABSL_GUARDED_BY(fd_mu_) = false;  // the last write failed (logged once)
};

}  // namespace rdmad::audit

#endif  // RDMAD_SERVER_AUDIT_AUDIT_LOG_H_
