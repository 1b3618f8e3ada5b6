// AuditSink: where rdmad's layers below the RPC layer (the data-plane listener in server/cm/, the grants
// in server/grants/) hand their audit events (docs/security.md#audit-trail). Header-only and without
// dependencies, so those layers need nothing of the audit log itself; server/audit/audit_log.h is the
// implementation.
//
// Threads: Record is called from any thread (gRPC handlers, rdma_cm dispatchers, device dispatchers, the
// grants loop). An implementation takes only its own locks, does not call back into its callers and never
// blocks on the disk: AuditLog numbers the event and queues its line on the state journal's writer
// (server/state/journal.h), which writes it in order with the next group. Callers do not hold their own
// locks across Record (see each caller's file).
#ifndef RDMAD_SERVER_AUDIT_SINK_H_
#define RDMAD_SERVER_AUDIT_SINK_H_

#include <string>

namespace rdmad::audit {

// One audited event. The sink adds the sequence, the time and the errno's name.
struct Event {
  std::string principal;  // who: the caller's principal, or a grant's for data-plane events
  std::string tenant;     // its tenant; empty if none (an admin, or not known)
  std::string method;     // "RegisterMr", "data-plane accept", "data-plane reject", "grant ended"
  std::string resource;   // what it acted on or created: "mrs/17", "cmids/4", "grants/9"
  std::string code = "OK";  // the result, as a google.rpc code name: "OK", "PERMISSION_DENIED", ...
  int errno_value = 0;    // 0: none
  std::string detail;     // the error message, or what happened
  std::string peer;       // the caller's address: the gRPC peer, or the data-plane client's host:port
  // Data-plane rejects only: the reject reason ("TOKEN_INVALID"), by which they are counted and summarized
  // (reject_summary.h). Not a field of the line: the detail starts with it.
  std::string reason;
};

class AuditSink {
 public:
  virtual ~AuditSink() = default;
  virtual void Record(const Event& event) = 0;
};

}  // namespace rdmad::audit

#endif  // RDMAD_SERVER_AUDIT_SINK_H_
