// The Audit service of rdmad.v1: WatchAudit streams the audit log's records (server/audit/audit_log.h) to
// admins, live and, on request, from the retained history (after_sequence, from_oldest).
// Threads: as every watch (watch_writer.h): a callback-API write reactor, woken by the audit hub on the
// thread that recorded the event. The AuditLog must outlive the grpc::Server.
#ifndef RDMAD_SERVER_RPC_AUDIT_SERVICE_H_
#define RDMAD_SERVER_RPC_AUDIT_SERVICE_H_

#include <functional>
#include <memory>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/audit/audit_log.h"

namespace rdmad {

// A slot among rdmad's open watch streams, held (type-erased) for a WatchAudit stream's life, or why not
// (RESOURCE_EXHAUSTED naming the limit watch_streams).
using OpenWatchSlot = std::function<absl::StatusOr<std::shared_ptr<void>>(const grpc::ServerContextBase&)>;

// `log` may be null (config "audit": ""): WatchAudit then answers FAILED_PRECONDITION. `require_admin`
// decides first: OK to serve, or the status the call ends with (PERMISSION_DENIED, UNAUTHENTICATED). Then
// `open_watch` (may be null: no limit) gives the stream its slot.
std::vector<std::unique_ptr<grpc::Service>> MakeAuditServices(
    audit::AuditLog* log, std::function<absl::Status(const grpc::ServerContextBase&)> require_admin,
    OpenWatchSlot open_watch = nullptr);

}  // namespace rdmad

#endif  // RDMAD_SERVER_RPC_AUDIT_SERVICE_H_
