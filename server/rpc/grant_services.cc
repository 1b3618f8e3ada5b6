// The gRPC service of rdmad.v1's grants, over the GrantManager.
// Threads: quick RPCs (issue, lookups, renew) on gRPC's synchronous pool. RevokeGrant finishes when the
// key is dead at the NIC, from the device dispatcher that polled the invalidation's completion (callback
// API: no gRPC thread waits). WatchGrants is a WatchWriter fed by the GrantHub.
#include <memory>
#include <utility>

#include "server/common/status.h"
#include "server/grants/manager.h"
#include "server/rpc/reply.h"
#include "server/rpc/services.h"
#include "server/rpc/watch_writer.h"

namespace rdmad {
namespace {

using grpc::CallbackServerContext;
using grpc::ServerContext;
using grpc::ServerUnaryReactor;
using grpc::Status;
using rpc_internal::Fill;
using rpc_internal::Replier;
using rpc_internal::Reply;

class GrantsService final
    : public v1::Grants::WithCallbackMethod_RevokeGrant<v1::Grants::WithCallbackMethod_WatchGrants<v1::Grants::Service>> {
 public:
  explicit GrantsService(grants::GrantManager* g) : g_(g) {}
  Status IssueGrant(ServerContext* ctx, const v1::IssueGrantRequest* req, v1::IssuedGrant* resp) override {
    return Reply(ctx, "IssueGrant", g_->Issue(*req), resp);
  }
  Status IssueGrants(ServerContext* ctx, const v1::IssueGrantsRequest* req, v1::IssueGrantsResponse* resp) override {
    return Reply(ctx, "IssueGrants", g_->IssueBatch(*req), resp);
  }
  Status GetGrant(ServerContext* ctx, const v1::GetGrantRequest* req, v1::Grant* resp) override {
    return Reply(ctx, "GetGrant", g_->Get(req->name()), resp);
  }
  Status ListGrants(ServerContext* ctx, const v1::ListGrantsRequest* req, v1::ListGrantsResponse* resp) override {
    auto grants = g_->List(*req);
    if (grants.ok()) Fill(std::move(*grants), resp->mutable_grants());
    return Reply(ctx, "ListGrants", grants.status(), resp);
  }
  Status RenewGrant(ServerContext* ctx, const v1::RenewGrantRequest* req, v1::Grant* resp) override {
    return Reply(ctx, "RenewGrant", g_->Renew(*req), resp);
  }
  ServerUnaryReactor* RevokeGrant(CallbackServerContext* ctx, const v1::RevokeGrantRequest* req,
                                  v1::Grant* resp) override {
    ServerUnaryReactor* reactor = ctx->DefaultReactor();
    g_->Revoke(req->name(), Replier<v1::Grant>(ctx, "RevokeGrant", reactor, resp));
    return reactor;
  }
  grpc::ServerWriteReactor<v1::GrantEvent>* WatchGrants(CallbackServerContext* ctx,
                                                        const v1::WatchGrantsRequest* req) override {
    (void)ctx;
    grants::GrantFilter filter;
    filter.mr = req->mr();
    filter.principal = req->principal();
    return rpc_internal::WatchWriter<v1::GrantEvent, grants::GrantFilter>::Start(
        &g_->events(), g_->events().Subscribe(std::move(filter), req->after_sequence()));
  }

 private:
  grants::GrantManager* const g_;
};

}  // namespace

std::vector<std::unique_ptr<grpc::Service>> MakeGrantServices(grants::GrantManager* grants) {
  std::vector<std::unique_ptr<grpc::Service>> out;
  out.push_back(std::make_unique<GrantsService>(grants));
  return out;
}

}  // namespace rdmad
