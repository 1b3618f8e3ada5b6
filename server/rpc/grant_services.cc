// The gRPC service of rdmad.v1's grants, over the GrantManager.
// Threads: quick RPCs (issue, lookups, renew) on gRPC's synchronous pool. RevokeGrant finishes when the
// key is dead at the NIC, from the device dispatcher that polled the invalidation's completion (callback
// API: no gRPC thread waits). WatchGrants is a WatchWriter fed by the GrantHub.
// Tenancy (call.h): a grant belongs to its MR's tenant; only that tenant (or an admin) issues, renews,
// revokes, lists or watches it. Each grant reserves a grant and a token against the tenant's quotas.
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/status.h"
#include "server/grants/manager.h"
#include "server/rpc/call.h"
#include "server/rpc/page.h"
#include "server/rpc/services.h"
#include "server/rpc/watch_writer.h"

namespace rdmad {
namespace {

using grpc::CallbackServerContext;
using grpc::ServerContext;
using grpc::ServerUnaryReactor;
using grpc::Status;
using rpc_internal::Call;
using tenancy::Quota;

class GrantsService final
    : public v1::Grants::WithCallbackMethod_RevokeGrant<v1::Grants::WithCallbackMethod_WatchGrants<v1::Grants::Service>> {
 public:
  explicit GrantsService(const Env* e) : e_(e), g_(e->grants) {}
  Status IssueGrant(ServerContext* ctx, const v1::IssueGrantRequest* req, v1::IssuedGrant* resp) override {
    Call c(*e_, *ctx, "IssueGrant");
    c.ValidateOnly(req->validate_only());
    if (!c.See(req->mr(), "mr").Reserve({{Quota::kGrants, 1}, {Quota::kTokens, 1}}).ok()) return c.Refuse(resp);
    return c.Reply(g_->Issue(*req), resp);
  }
  Status IssueGrants(ServerContext* ctx, const v1::IssueGrantsRequest* req, v1::IssueGrantsResponse* resp) override {
    Call c(*e_, *ctx, "IssueGrants");
    for (int i = 0; i < req->grants_size(); ++i) c.See(req->grants(i).mr(), absl::StrCat("grants[", i, "].mr"));
    const uint64_t n = req->grants_size();
    if (!c.Reserve({{Quota::kGrants, n}, {Quota::kTokens, n}}).ok()) return c.Refuse(resp);
    return c.Reply(g_->IssueBatch(*req), resp);
  }
  Status GetGrant(ServerContext* ctx, const v1::GetGrantRequest* req, v1::Grant* resp) override {
    Call c(*e_, *ctx, "GetGrant");
    if (!c.See(req->name(), "name").ok()) return c.Refuse(resp);
    return c.Reply(g_->Get(req->name()), resp);
  }
  Status ListGrants(ServerContext* ctx, const v1::ListGrantsRequest* req, v1::ListGrantsResponse* resp) override {
    Call c(*e_, *ctx, "ListGrants");
    absl::StatusOr<rpc_internal::Pager> page = rpc_internal::Pager::Start(*req, "ListGrants");
    if (!c.See(req->mr(), "mr").Fail(page.status()).ok()) return c.Refuse(resp);
    // Fetched page by page in number order: a page costs what it holds, not the whole list.
    auto grants = page->Fetch<v1::Grant>(
        [&](uint64_t after, size_t limit) { return g_->List(*req, after, limit); },
        [&](const v1::Grant& g) { return c.gate().SeesPd(c.caller(), g.pd()); },
        [](const v1::Grant& g) -> const std::string& { return g.name(); }, resp->mutable_next_page_token());
    if (grants.ok()) {
      const bool none = grants->empty();
      rpc_internal::Fill(std::move(*grants), resp->mutable_grants());
      // A filter naming no region lists only the remembered grants this caller sees on it; with none it is
      // a name of nothing (else another tenant's deregistered region would answer differently from one that
      // never existed). Asked of the first page only: a later one answers what is left.
      if (none && page->first() && !req->mr().empty()) {
        if (absl::Status region = g_->CheckMrFilter(req->mr()); !region.ok()) return c.Reply(region, resp);
      }
    }
    return c.Reply(grants.status(), resp);
  }
  Status RenewGrant(ServerContext* ctx, const v1::RenewGrantRequest* req, v1::Grant* resp) override {
    Call c(*e_, *ctx, "RenewGrant");
    if (!c.See(req->name(), "name").ok()) return c.Refuse(resp);
    return c.Reply(g_->Renew(*req), resp);
  }
  ServerUnaryReactor* RevokeGrant(CallbackServerContext* ctx, const v1::RevokeGrantRequest* req,
                                  v1::Grant* resp) override {
    ServerUnaryReactor* reactor = ctx->DefaultReactor();
    Call c(*e_, *ctx, "RevokeGrant");
    if (!c.See(req->name(), "name").ok()) {
      c.RefuseAsync(reactor);
      return reactor;
    }
    g_->Revoke(req->name(), c.Replier<v1::Grant>(reactor, resp));
    return reactor;
  }
  grpc::ServerWriteReactor<v1::GrantEvent>* WatchGrants(CallbackServerContext* ctx,
                                                        const v1::WatchGrantsRequest* req) override {
    Call c(*e_, *ctx, "WatchGrants");
    // A region filter names a region (a name of nothing is NOT_FOUND, like another tenant's). The stream
    // holds a slot of the watch_streams quota (the tenant's, and rdmad's) for its life.
    absl::StatusOr<tenancy::Gate::WatchSlot> slot = absl::UnknownError("not admitted");
    if (c.See(req->mr(), "mr").Fail(g_->CheckMrFilter(req->mr())).ok()) {
      slot = e_->gate->OpenWatch(c.caller());
      c.Fail(slot.status());
    }
    if (!c.ok()) {
      v1::GrantEvent unused;
      grpc::Status s = c.Refuse(&unused);
      auto* failed = new rpc_internal::FailedWatch<v1::GrantEvent>();
      failed->Fail(s);
      return failed;
    }
    grants::GrantFilter filter;
    filter.mr = req->mr();
    filter.principal = req->principal();
    filter.visible = e_->gate->GrantEventsFor(c.caller());
    return rpc_internal::WatchWriter<v1::GrantEvent, grants::GrantFilter>::Start(
        ctx, &g_->events(), g_->events().Subscribe(std::move(filter), req->after_sequence(), req->from_oldest()),
        rpc_internal::HoldSlot(std::move(slot).value()));
  }

 private:
  const Env* const e_;
  grants::GrantManager* const g_;
};

}  // namespace

std::vector<std::unique_ptr<grpc::Service>> MakeGrantServices(const Env* env) {
  std::vector<std::unique_ptr<grpc::Service>> out;
  out.push_back(std::make_unique<GrantsService>(env));
  return out;
}

}  // namespace rdmad
