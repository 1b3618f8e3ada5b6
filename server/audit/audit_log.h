// AuditLog: rdmad's audit trail (docs/security.md#audit-trail). Every mutating RPC (recorded by the RPC
// layer through RecordCall) and every data-plane accept, reject and grant end (recorded by the CM layer and
// the grants through the AuditSink interface) becomes one JSON line, appended to a file or written to
// stdout, and a v1::AuditRecord published to the WatchAudit streams.
//
// A line is in the kernel when Record returns: one write(2) per line on an O_APPEND descriptor, no user-space
// buffer, so `tail -f` sees it at once and a crash of rdmad loses no record it made (a crash of the host may
// lose what the page cache had not written back: no fsync per line).
//
// Threads: Record / RecordCall from any thread; Reopen from any (main, on SIGHUP); watchers subscribe
// through hub() from gRPC threads. mu_ guards the descriptor and the numbering and is held across the
// write(2) and the hub's Publish, so that the file and the streams carry the records in sequence order.
// Lock order: AuditLog::mu_, then the hub's, then a watcher's (dispatch/hub.h). Record never calls back
// into its caller: callers may hold leaf locks of their own, but the CM layer and the grants do not.
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

namespace rdmad::audit {

// WatchAudit has no filter: admins see every record.
struct AuditFilter {
  bool Matches(const v1::AuditRecord&) const { return true; }
};
using AuditHub = dispatch::Hub<v1::AuditRecord, AuditFilter>;
using AuditWatcher = dispatch::HubWatcher<v1::AuditRecord, AuditFilter>;

class AuditLog final : public AuditSink {
 public:
  struct Options {
    size_t watcher_capacity = 1024;  // records buffered per WatchAudit stream (config watch_buffer)
    size_t retained = 4096;          // most recent records kept for from_oldest / after_sequence
  };

  // `path`: a file (absolute; created with mode 0600 if absent, appended to) or "-" for stdout. An
  // existing file keeps its mode (a warning is logged if others may read it).
  static absl::StatusOr<std::unique_ptr<AuditLog>> Open(const std::string& path, Options options);
  ~AuditLog() override;
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  // Numbers the event, writes its line and publishes it. A failed write is logged (once until writes work
  // again) and counted; the record is still published.
  void Record(const Event& event) override ABSL_LOCKS_EXCLUDED(mu_);
  // A mutating RPC's record: principal, tenant and peer from the caller; code, errno and detail (the
  // message) from the status.
  void RecordCall(const auth::Caller& caller, const std::string& method, const std::string& resource,
                  const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);

  // For logrotate (call it on SIGHUP): opens the path again (creating it 0600) and writes there from now
  // on; the old descriptor is closed. On failure the log keeps writing to the old one. No-op for stdout.
  absl::Status Reopen() ABSL_LOCKS_EXCLUDED(mu_);

  // Ends every WatchAudit stream with UNAVAILABLE (shutdown, before the gRPC server stops).
  void Shutdown();

  AuditHub& hub() { return hub_; }
  const std::string& path() const { return path_; }
  uint64_t write_errors() const ABSL_LOCKS_EXCLUDED(mu_);

  // The record's line, without the newline: a JSON object with sequence, time (RFC 3339, UTC, ns),
  // time_unix_nanos, principal, tenant, method, resource, code, errno_value, errno_name, detail and peer,
  // in that order. Invalid UTF-8 is replaced (U+FFFD), never an error.
  static std::string ToJson(const v1::AuditRecord& record);

 private:
  AuditLog(std::string path, int fd, Options options);

  const std::string path_;
  AuditHub hub_;
  mutable Mutex mu_;
  int fd_ ABSL_GUARDED_BY(mu_);
  uint64_t next_sequence_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t write_errors_ ABSL_GUARDED_BY(mu_) = 0;
  bool failing_ ABSL_GUARDED_BY(mu_) = false;  // the last write failed (logged once)
};

}  // namespace rdmad::audit

#endif  // RDMAD_SERVER_AUDIT_AUDIT_LOG_H_
