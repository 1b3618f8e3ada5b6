// The client's audit call: the WatchAudit stream (read by ReadStream, client_cm.cc). Its stub is made per
// call, from the client's channel.
#include "client/client.h"

namespace rdmad::client {

absl::Status Client::WatchAudit(const v1::WatchAuditRequest& request,
                                const std::function<bool(const v1::AuditRecord&)>& on_record, WatchOptions options) {
  std::unique_ptr<v1::Audit::Stub> stub = v1::Audit::NewStub(channel_);
  return Watch<v1::AuditRecord>([&](grpc::ClientContext* ctx) { return stub->WatchAudit(ctx, request); }, on_record,
                                options);
}

}  // namespace rdmad::client
