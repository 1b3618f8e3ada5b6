// WatchAudit: admins only; a WatchWriter over the audit log's hub. See audit_service.h.
#include "server/rpc/audit_service.h"

#include <utility>

#include "rdmad/v1/rdmad.grpc.pb.h"
#include "server/common/status.h"
#include "server/rpc/status.h"
#include "server/rpc/watch_writer.h"

namespace rdmad {
namespace {

class AuditService final : public v1::Audit::CallbackService {
 public:
  AuditService(audit::AuditLog* log, std::function<absl::Status(const grpc::ServerContextBase&)> require_admin,
               OpenWatchSlot open_watch)
      : log_(log), require_admin_(std::move(require_admin)), open_watch_(std::move(open_watch)) {}

  grpc::ServerWriteReactor<v1::AuditRecord>* WatchAudit(grpc::CallbackServerContext* ctx,
                                                        const v1::WatchAuditRequest* req) override {
    absl::Status refused = require_admin_ ? require_admin_(*ctx)
                                          : absl::PermissionDeniedError("WatchAudit: no admin check configured");
    if (refused.ok() && log_ == nullptr) {
      refused = FailedPrecondition("audit", "the audit log is off in this rdmad (config \"audit\": \"\")");
    }
    // The stream holds a slot among rdmad's open watch streams for its life.
    absl::StatusOr<std::shared_ptr<void>> slot = std::shared_ptr<void>();
    if (refused.ok() && open_watch_) {
      slot = open_watch_(*ctx);
      refused = slot.status();
    }
    if (!refused.ok()) {
      auto* failed = new rpc_internal::FailedWatch<v1::AuditRecord>();
      failed->Fail(ToGrpc(refused));
      return failed;
    }
    audit::AuditHub& hub = log_->hub();
    return rpc_internal::WatchWriter<v1::AuditRecord, audit::AuditFilter>::Start(
        ctx, &hub, hub.Subscribe(audit::AuditFilter{}, req->after_sequence(), req->from_oldest()),
        std::move(slot).value());
  }

 private:
  audit::AuditLog* const log_;
  const std::function<absl::Status(const grpc::ServerContextBase&)> require_admin_;
  const OpenWatchSlot open_watch_;
};

}  // namespace

std::vector<std::unique_ptr<grpc::Service>> MakeAuditServices(
    audit::AuditLog* log, std::function<absl::Status(const grpc::ServerContextBase&)> require_admin,
    OpenWatchSlot open_watch) {
  std::vector<std::unique_ptr<grpc::Service>> out;
  out.push_back(std::make_unique<AuditService>(log, std::move(require_admin), std::move(open_watch)));
  return out;
}

}  // namespace rdmad
