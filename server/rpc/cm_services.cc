// The gRPC services of rdmad.v1's rdma_cm part: EventChannels, CmIds, ConnectTokens.
// Threads: quick RPCs on gRPC's synchronous pool. The CmIds calls that act on an id run on the id's
// channel dispatcher and finish their reactor from there (callback API): no gRPC thread waits for a
// dispatcher. WatchEvents is a callback write reactor fed by the EventHub (rpc_internal::WatchWriter,
// watch_writer.h): one write in flight, the next started from OnWriteDone or, when the watcher was empty,
// from the hub's wake-up. Tenancy (call.h): ids and tokens belong to their PD's tenant, user channels to
// their creator; rdmad's own channels are shared, and a tenant's watch shows only its own ids' events.
#include <memory>
#include <utility>

#include "absl/time/time.h"
#include "server/cm/events.h"
#include "server/common/status.h"
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
using rpc_internal::Fill;
using rpc_internal::Pager;
using tenancy::Quota;

class ChannelsService final : public v1::EventChannels::Service {
 public:
  explicit ChannelsService(const Env* e) : e_(e), m_(e->cm) {}
  Status CreateChannel(ServerContext* ctx, const v1::CreateChannelRequest* req, v1::EventChannel* resp) override {
    Call c(*e_, *ctx, "CreateChannel");
    if (!c.Reserve({{Quota::kChannels, 1}}).ok()) return c.Refuse(resp);
    auto ch = m_->CreateChannel(*req);
    if (ch.ok()) e_->gate->OwnChannel(ch->name(), c.caller().tenant);
    return c.Reply(std::move(ch), resp);
  }
  Status GetChannel(ServerContext* ctx, const v1::GetChannelRequest* req, v1::EventChannel* resp) override {
    Call c(*e_, *ctx, "GetChannel");
    if (!c.See(req->name(), "name").ok()) return c.Refuse(resp);
    return c.Reply(m_->GetChannel(req->name()), resp);
  }
  Status ListChannels(ServerContext* ctx, const v1::ListChannelsRequest* req, v1::ListChannelsResponse* resp) override {
    Call c(*e_, *ctx, "ListChannels");
    absl::StatusOr<Pager> page = Pager::Start(*req, "ListChannels");
    if (!c.Fail(page.status()).ok()) return c.Refuse(resp);
    auto channels = m_->ListChannels();
    if (channels.ok()) {
      std::vector<v1::EventChannel> visible;
      for (auto& ch : *channels) {
        if (c.gate().SeesChannel(c.caller(), ch)) visible.push_back(std::move(ch));
      }
      for (auto& ch : page->Cut(std::move(visible), [](const v1::EventChannel& ch) -> const std::string& { return ch.name(); },
                                resp->mutable_next_page_token())) {
        if (!c.caller().admin) {  // ids of other tenants on a shared channel are not named
          std::vector<std::string> ids(ch.cm_ids().begin(), ch.cm_ids().end());
          ch.clear_cm_ids();
          for (const auto& id : ids) {
            if (c.gate().See(c.caller(), id, "").ok()) ch.add_cm_ids(id);
          }
        }
        *resp->add_channels() = std::move(ch);
      }
    }
    return c.Reply(channels.status(), resp);
  }
  Status DeleteChannel(ServerContext* ctx, const v1::DeleteChannelRequest* req,
                       v1::DeleteChannelResponse* resp) override {
    Call c(*e_, *ctx, "DeleteChannel");
    if (!c.See(req->name(), "name").ok()) return c.Refuse(resp);
    absl::Status s = m_->DeleteChannel(req->name());
    if (s.ok()) e_->gate->ForgetChannel(req->name());
    return c.Reply(s, resp);
  }

 private:
  const Env* const e_;
  cm::CmManager* const m_;
};

class CmIdsService final
    : public v1::CmIds::WithCallbackMethod_CreateCmId<v1::CmIds::WithCallbackMethod_Listen<
          v1::CmIds::WithCallbackMethod_Connect<v1::CmIds::WithCallbackMethod_Accept<
              v1::CmIds::WithCallbackMethod_Reject<v1::CmIds::WithCallbackMethod_Disconnect<
                  v1::CmIds::WithCallbackMethod_DeleteCmId<v1::CmIds::WithCallbackMethod_MigrateCmId<
                      v1::CmIds::WithCallbackMethod_WatchEvents<v1::CmIds::Service>>>>>>>>> {
 public:
  explicit CmIdsService(const Env* e) : e_(e), m_(e->cm) {}
  Status GetCmId(ServerContext* ctx, const v1::GetCmIdRequest* req, v1::CmId* resp) override {
    Call c(*e_, *ctx, "GetCmId");
    if (!c.See(req->name(), "name").ok()) return c.Refuse(resp);
    return c.Reply(m_->GetCmId(req->name()), resp);
  }
  Status ListCmIds(ServerContext* ctx, const v1::ListCmIdsRequest* req, v1::ListCmIdsResponse* resp) override {
    Call c(*e_, *ctx, "ListCmIds");
    absl::StatusOr<Pager> page = Pager::Start(*req, "ListCmIds");
    if (!c.See(req->channel(), "channel").Fail(page.status()).ok()) return c.Refuse(resp);
    auto ids = m_->ListCmIds(*req);
    if (ids.ok()) {
      std::vector<v1::CmId> visible;
      for (auto& id : *ids) {
        if (c.gate().SeesPd(c.caller(), id.pd())) visible.push_back(std::move(id));
      }
      Fill(page->Cut(std::move(visible), [](const v1::CmId& id) -> const std::string& { return id.name(); },
                     resp->mutable_next_page_token()),
           resp->mutable_cm_ids());
    }
    return c.Reply(ids.status(), resp);
  }
  ServerUnaryReactor* CreateCmId(CallbackServerContext* ctx, const v1::CreateCmIdRequest* req,
                                 v1::CmId* resp) override {
    ServerUnaryReactor* reactor = ctx->DefaultReactor();
    Call c(*e_, *ctx, "CreateCmId");
    if (!c.See(req->channel(), "channel").See(req->pd(), "pd").Reserve({{Quota::kCmIds, 1}}).ok()) {
      c.RefuseAsync(reactor);
      return reactor;
    }
    tenancy::Gate* gate = e_->gate;
    m_->CreateCmId(*req, c.Replier<v1::CmId>(reactor, resp, [gate](const v1::CmId& id) { gate->NoteCmId(id.name(), id.pd()); }));
    return reactor;
  }
  ServerUnaryReactor* Listen(CallbackServerContext* ctx, const v1::ListenRequest* req, v1::CmId* resp) override {
    ServerUnaryReactor* reactor = ctx->DefaultReactor();
    Call c(*e_, *ctx, "Listen");
    if (!c.See(req->name(), "name", "cmids").ok()) {
      c.RefuseAsync(reactor);
      return reactor;
    }
    // The device the address is bound to must be one the caller may use (its tenant's devices).
    std::function<bool(const std::string&)> may_use;
    if (!c.caller().admin) {
      may_use = [gate = e_->gate, caller = c.caller()](const std::string& device) {
        const TenantConfig* t = gate->policy().FindTenant(caller.tenant);
        if (t == nullptr || t->devices.empty()) return true;  // every device, a wildcard included
        return !device.empty() && gate->SeesDevice(caller, device);
      };
    }
    m_->Listen(*req, c.Replier<v1::CmId>(reactor, resp), std::move(may_use));
    return reactor;
  }
  ServerUnaryReactor* Connect(CallbackServerContext* ctx, const v1::ConnectRequest* req, v1::CmId* resp) override {
    return Forward(ctx, "Connect", req->name(), {{Quota::kConnections, 1}}, *req, resp, &cm::CmManager::Connect);
  }
  ServerUnaryReactor* Accept(CallbackServerContext* ctx, const v1::AcceptRequest* req, v1::CmId* resp) override {
    // The id waiting for Accept already counts as a connection.
    return Forward(ctx, "Accept", req->name(), {}, *req, resp, &cm::CmManager::Accept);
  }
  ServerUnaryReactor* Reject(CallbackServerContext* ctx, const v1::RejectRequest* req, v1::CmId* resp) override {
    return Forward(ctx, "Reject", req->name(), {}, *req, resp, &cm::CmManager::Reject);
  }
  ServerUnaryReactor* Disconnect(CallbackServerContext* ctx, const v1::DisconnectRequest* req,
                                 v1::CmId* resp) override {
    return Forward(ctx, "Disconnect", req->name(), {}, req->name(), resp, &cm::CmManager::Disconnect);
  }
  ServerUnaryReactor* DeleteCmId(CallbackServerContext* ctx, const v1::DeleteCmIdRequest* req,
                                 v1::DeleteCmIdResponse* resp) override {
    ServerUnaryReactor* reactor = ctx->DefaultReactor();
    Call c(*e_, *ctx, "DeleteCmId");
    if (!c.See(req->name(), "name").ok()) {
      c.RefuseAsync(reactor);
      return reactor;
    }
    Done<v1::DeleteCmIdResponse> done = c.Replier<v1::DeleteCmIdResponse>(reactor, resp);
    m_->DeleteCmId(req->name(), [done = std::move(done)](absl::StatusOr<v1::CmId> r) mutable {
      if (!r.ok()) return std::move(done)(r.status());
      std::move(done)(v1::DeleteCmIdResponse());
    });
    return reactor;
  }
  ServerUnaryReactor* MigrateCmId(CallbackServerContext* ctx, const v1::MigrateCmIdRequest* req,
                                  v1::CmId* resp) override {
    ServerUnaryReactor* reactor = ctx->DefaultReactor();
    Call c(*e_, *ctx, "MigrateCmId");
    if (!c.See(req->name(), "name").See(req->channel(), "channel").ok()) {
      c.RefuseAsync(reactor);
      return reactor;
    }
    // The call's deadline bounds the wait for the id's dispatcher; past it, nothing is changed.
    const absl::Time deadline = absl::FromChrono(ctx->deadline());
    m_->Migrate(*req, deadline, c.Replier<v1::CmId>(reactor, resp));
    return reactor;
  }
  grpc::ServerWriteReactor<v1::CmEvent>* WatchEvents(CallbackServerContext* ctx,
                                                     const v1::WatchEventsRequest* req) override {
    Call c(*e_, *ctx, "WatchEvents");
    c.See(req->channel(), "channel").See(req->cm_id(), "cm_id");
    cm::EventFilter filter;
    absl::Status bad = c.status();
    if (bad.ok()) bad = m_->ListChannels().status();  // UNAVAILABLE without rdma_cm
    if (bad.ok() && !req->channel().empty()) {
      bad = m_->GetChannel(req->channel(), "channel").status();
      filter.channel = req->channel();
    }
    if (bad.ok() && !req->cm_id().empty()) {
      bad = m_->GetCmId(req->cm_id(), "cm_id").status();
      filter.cm_id = req->cm_id();
    }
    for (const std::string& t : req->types()) {
      if (!bad.ok()) break;
      absl::StatusOr<std::string> name = cm::CanonicalEventName(t);
      if (name.ok()) filter.types.insert(*name); else bad = name.status();
    }
    // The stream holds a slot of the watch_streams quota (the tenant's, and rdmad's) for its life.
    absl::StatusOr<tenancy::Gate::WatchSlot> slot = absl::UnknownError("not admitted");
    if (bad.ok()) {
      slot = e_->gate->OpenWatch(c.caller());
      bad = slot.status();
    }
    if (!bad.ok()) {
      c.Fail(bad);
      v1::CmEvent unused;
      (void)c.Refuse(&unused);
      auto* failed = new rpc_internal::FailedWatch<v1::CmEvent>();
      failed->Fail(ToGrpc(bad));
      return failed;
    }
    filter.visible = e_->gate->CmEventsFor(c.caller());
    return rpc_internal::WatchWriter<v1::CmEvent, cm::EventFilter>::Start(
        ctx, &m_->events(), m_->events().Subscribe(std::move(filter), req->after_sequence(), req->from_oldest()),
        rpc_internal::HoldSlot(std::move(slot).value()));
  }

 private:
  // An id operation: the manager runs it on the id's dispatcher, which finishes the RPC.
  template <typename Request>
  ServerUnaryReactor* Forward(CallbackServerContext* ctx, const char* method, const std::string& name,
                              std::vector<std::pair<Quota, uint64_t>> wants, const Request& request,
                              v1::CmId* resp, void (cm::CmManager::*op)(const Request&, Done<v1::CmId>)) {
    ServerUnaryReactor* reactor = ctx->DefaultReactor();
    Call c(*e_, *ctx, method);
    if (!c.See(name, "name", "cmids").Reserve(std::move(wants)).ok()) {
      c.RefuseAsync(reactor);
      return reactor;
    }
    (m_->*op)(request, c.Replier<v1::CmId>(reactor, resp));
    return reactor;
  }
  const Env* const e_;
  cm::CmManager* const m_;
};

class TokensService final : public v1::ConnectTokens::Service {
 public:
  explicit TokensService(const Env* e) : e_(e) {}
  Status IssueConnectToken(ServerContext* ctx, const v1::IssueConnectTokenRequest* req,
                           v1::ConnectToken* resp) override {
    Call c(*e_, *ctx, "IssueConnectToken");
    if (!c.See(req->pd(), "pd").Reserve({{Quota::kTokens, 1}}).ok()) return c.Refuse(resp);
    if (e_->data_plane == nullptr) return c.Reply(absl::UnavailableError("rdma_cm is unavailable on this host"), resp);
    return c.Reply(e_->data_plane->IssueConnectToken(*req), resp);
  }

 private:
  const Env* const e_;
};

}  // namespace

std::vector<std::unique_ptr<grpc::Service>> MakeCmServices(const Env* env) {
  std::vector<std::unique_ptr<grpc::Service>> out;
  out.push_back(std::make_unique<ChannelsService>(env));
  out.push_back(std::make_unique<CmIdsService>(env));
  out.push_back(std::make_unique<TokensService>(env));
  return out;
}

}  // namespace rdmad
