#include "server/rpc/services.h"

#include <utility>

#include "server/rpc/reply.h"

namespace rdmad {
namespace {

using grpc::CallbackServerContext;
using grpc::ServerContext;
using grpc::ServerUnaryReactor;
using grpc::Status;
using rpc_internal::Fill;
using rpc_internal::Replier;
using rpc_internal::Reply;

class DevicesService final : public v1::Devices::Service {
 public:
  explicit DevicesService(Registry* r) : r_(r) {}
  Status ListDevices(ServerContext* ctx, const v1::ListDevicesRequest*, v1::ListDevicesResponse* resp) override {
    Fill(r_->ListDevices(), resp->mutable_devices());
    return Reply(ctx, "ListDevices", absl::OkStatus(), resp);
  }
  Status GetDevice(ServerContext* ctx, const v1::GetDeviceRequest* req, v1::Device* resp) override {
    return Reply(ctx, "GetDevice", r_->GetDevice(req->name()), resp);
  }

 private:
  Registry* const r_;
};

// Runs `op` (the registry's removal of an MR or a PD, given its Done) once the grants on it allow it:
// none live, or all revoked because the caller asked for revoke_grants. No grant is issued on it meanwhile.
template <typename T>
void AfterGrants(grants::GrantManager* g, const std::string& mr, const std::string& pd, bool revoke,
                 v1::GrantEndReason reason, absl::AnyInvocable<void(Done<T>) &&> op, Done<T> done) {
  if (g == nullptr) return std::move(op)(std::move(done));
  g->Retire(mr, pd, revoke, reason, "name",
            [g, mr, pd, op = std::move(op), done = std::move(done)](absl::Status s) mutable {
              if (!s.ok()) {
                g->Unretire(mr, pd);
                return std::move(done)(s);
              }
              std::move(op)([g, mr, pd, done = std::move(done)](absl::StatusOr<T> r) mutable {
                g->Unretire(mr, pd);
                std::move(done)(std::move(r));
              });
            });
}

// DeletePd may first revoke grants (a wait for invalidations): callback API. The rest answer at once.
class PdsService final : public v1::ProtectionDomains::WithCallbackMethod_DeletePd<v1::ProtectionDomains::Service> {
 public:
  PdsService(Registry* r, grants::GrantManager* g) : r_(r), g_(g) {}
  Status CreatePd(ServerContext* ctx, const v1::CreatePdRequest* req, v1::ProtectionDomain* resp) override {
    return Reply(ctx, "CreatePd", r_->CreatePd(*req), resp);
  }
  Status GetPd(ServerContext* ctx, const v1::GetPdRequest* req, v1::ProtectionDomain* resp) override {
    return Reply(ctx, "GetPd", r_->GetPd(req->name()), resp);
  }
  Status ListPds(ServerContext* ctx, const v1::ListPdsRequest*, v1::ListPdsResponse* resp) override {
    Fill(r_->ListPds(), resp->mutable_pds());
    return Reply(ctx, "ListPds", absl::OkStatus(), resp);
  }
  ServerUnaryReactor* DeletePd(CallbackServerContext* ctx, const v1::DeletePdRequest* req,
                               v1::DeletePdResponse* resp) override {
    ServerUnaryReactor* reactor = ctx->DefaultReactor();
    AfterGrants<v1::DeletePdResponse>(
        g_, "", req->name(), req->revoke_grants(), v1::END_PD_DELETED,
        [r = r_, req = *req](Done<v1::DeletePdResponse> d) mutable { std::move(d)(r->DeletePd(req)); },
        Replier<v1::DeletePdResponse>(ctx, "DeletePd", reactor, resp));
    return reactor;
  }

 private:
  Registry* const r_;
  grants::GrantManager* const g_;
};

// RegisterMr and ReregisterMr pin memory on a worker: callback API. The rest answer at once.
class MrsService final
    : public v1::MemoryRegions::WithCallbackMethod_RegisterMr<v1::MemoryRegions::WithCallbackMethod_ReregisterMr<
          v1::MemoryRegions::WithCallbackMethod_DeregisterMr<v1::MemoryRegions::Service>>> {
 public:
  MrsService(Registry* r, grants::GrantManager* g) : r_(r), g_(g) {}
  ServerUnaryReactor* RegisterMr(CallbackServerContext* ctx, const v1::RegisterMrRequest* req,
                                 v1::MemoryRegion* resp) override {
    ServerUnaryReactor* reactor = ctx->DefaultReactor();
    r_->RegisterMrAsync(*req, Replier<v1::MemoryRegion>(ctx, "RegisterMr", reactor, resp));
    return reactor;
  }
  Status GetMr(ServerContext* ctx, const v1::GetMrRequest* req, v1::MemoryRegion* resp) override {
    return Reply(ctx, "GetMr", r_->GetMr(req->name()), resp);
  }
  Status ListMrs(ServerContext* ctx, const v1::ListMrsRequest* req, v1::ListMrsResponse* resp) override {
    auto mrs = r_->ListMrs(*req);
    if (mrs.ok()) Fill(std::move(*mrs), resp->mutable_mrs());
    return Reply(ctx, "ListMrs", mrs.status(), resp);
  }
  ServerUnaryReactor* ReregisterMr(CallbackServerContext* ctx, const v1::ReregisterMrRequest* req,
                                   v1::ReregisterMrResponse* resp) override {
    ServerUnaryReactor* reactor = ctx->DefaultReactor();
    AfterGrants<v1::ReregisterMrResponse>(
        g_, req->name(), "", req->revoke_grants(), v1::END_MR_REREGISTERED,
        [r = r_, req = *req](Done<v1::ReregisterMrResponse> d) mutable { r->ReregisterMrAsync(req, std::move(d)); },
        Replier<v1::ReregisterMrResponse>(ctx, "ReregisterMr", reactor, resp));
    return reactor;
  }
  ServerUnaryReactor* DeregisterMr(CallbackServerContext* ctx, const v1::DeregisterMrRequest* req,
                                   v1::DeregisterMrResponse* resp) override {
    ServerUnaryReactor* reactor = ctx->DefaultReactor();
    AfterGrants<v1::DeregisterMrResponse>(
        g_, req->name(), "", req->revoke_grants(), v1::END_MR_DEREGISTERED,
        [r = r_, name = req->name()](Done<v1::DeregisterMrResponse> d) mutable {
          absl::Status s = r->DeregisterMr(name);
          if (!s.ok()) return std::move(d)(s);
          std::move(d)(v1::DeregisterMrResponse());
        },
        Replier<v1::DeregisterMrResponse>(ctx, "DeregisterMr", reactor, resp));
    return reactor;
  }

 private:
  Registry* const r_;
  grants::GrantManager* const g_;
};

class QpsService final : public v1::QueuePairs::Service {
 public:
  explicit QpsService(Registry* r) : r_(r) {}
  Status CreateQp(ServerContext* ctx, const v1::CreateQpRequest* req, v1::QueuePair* resp) override {
    return Reply(ctx, "CreateQp", r_->CreateQp(*req), resp);
  }
  Status GetQp(ServerContext* ctx, const v1::GetQpRequest* req, v1::QueuePair* resp) override {
    return Reply(ctx, "GetQp", r_->GetQp(req->name()), resp);
  }
  Status ListQps(ServerContext* ctx, const v1::ListQpsRequest*, v1::ListQpsResponse* resp) override {
    Fill(r_->ListQps(), resp->mutable_qps());
    return Reply(ctx, "ListQps", absl::OkStatus(), resp);
  }
  Status ConnectQp(ServerContext* ctx, const v1::ConnectQpRequest* req, v1::QueuePair* resp) override {
    return Reply(ctx, "ConnectQp", r_->ConnectQp(*req), resp);
  }
  Status DeleteQp(ServerContext* ctx, const v1::DeleteQpRequest* req, v1::DeleteQpResponse* resp) override {
    return Reply(ctx, "DeleteQp", r_->DeleteQp(req->name()), resp);
  }

 private:
  Registry* const r_;
};

// BindMw and InvalidateMw finish when their completion arrives: callback API. The rest answer at once.
class MwsService final
    : public v1::MemoryWindows::WithCallbackMethod_BindMw<
          v1::MemoryWindows::WithCallbackMethod_InvalidateMw<v1::MemoryWindows::Service>> {
 public:
  explicit MwsService(Registry* r) : r_(r) {}
  Status AllocMw(ServerContext* ctx, const v1::AllocMwRequest* req, v1::MemoryWindow* resp) override {
    return Reply(ctx, "AllocMw", r_->AllocMw(*req), resp);
  }
  Status GetMw(ServerContext* ctx, const v1::GetMwRequest* req, v1::MemoryWindow* resp) override {
    return Reply(ctx, "GetMw", r_->GetMw(req->name()), resp);
  }
  Status ListMws(ServerContext* ctx, const v1::ListMwsRequest* req, v1::ListMwsResponse* resp) override {
    auto mws = r_->ListMws(*req);
    if (mws.ok()) Fill(std::move(*mws), resp->mutable_mws());
    return Reply(ctx, "ListMws", mws.status(), resp);
  }
  ServerUnaryReactor* BindMw(CallbackServerContext* ctx, const v1::BindMwRequest* req,
                             v1::MemoryWindow* resp) override {
    ServerUnaryReactor* reactor = ctx->DefaultReactor();
    r_->BindMwAsync(*req, Replier<v1::MemoryWindow>(ctx, "BindMw", reactor, resp));
    return reactor;
  }
  ServerUnaryReactor* InvalidateMw(CallbackServerContext* ctx, const v1::InvalidateMwRequest* req,
                                   v1::MemoryWindow* resp) override {
    ServerUnaryReactor* reactor = ctx->DefaultReactor();
    r_->InvalidateMwAsync(req->name(), Replier<v1::MemoryWindow>(ctx, "InvalidateMw", reactor, resp));
    return reactor;
  }
  Status DeallocMw(ServerContext* ctx, const v1::DeallocMwRequest* req, v1::DeallocMwResponse* resp) override {
    return Reply(ctx, "DeallocMw", r_->DeallocMw(req->name()), resp);
  }

 private:
  Registry* const r_;
};

}  // namespace

std::vector<std::unique_ptr<grpc::Service>> MakeServices(Registry* registry, grants::GrantManager* grants) {
  std::vector<std::unique_ptr<grpc::Service>> out;
  out.push_back(std::make_unique<DevicesService>(registry));
  out.push_back(std::make_unique<PdsService>(registry, grants));
  out.push_back(std::make_unique<MrsService>(registry, grants));
  out.push_back(std::make_unique<QpsService>(registry));
  out.push_back(std::make_unique<MwsService>(registry));
  return out;
}

}  // namespace rdmad
