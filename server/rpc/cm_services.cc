// The gRPC services of rdmad.v1's rdma_cm part: EventChannels, CmIds, ConnectTokens.
// Threads: quick RPCs on gRPC's synchronous pool. The CmIds calls that act on an id run on the id's
// channel dispatcher and finish their reactor from there (callback API): no gRPC thread waits for a
// dispatcher. WatchEvents is a callback write reactor fed by the EventHub (rpc_internal::WatchWriter,
// watch_writer.h): one write in flight, the next started from OnWriteDone or, when the watcher was empty,
// from the hub's wake-up.
#include <memory>
#include <utility>

#include "absl/time/time.h"
#include "server/cm/events.h"
#include "server/common/status.h"
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

class ChannelsService final : public v1::EventChannels::Service {
 public:
  explicit ChannelsService(cm::CmManager* m) : m_(m) {}
  Status CreateChannel(ServerContext* ctx, const v1::CreateChannelRequest* req, v1::EventChannel* resp) override {
    return Reply(ctx, "CreateChannel", m_->CreateChannel(*req), resp);
  }
  Status GetChannel(ServerContext* ctx, const v1::GetChannelRequest* req, v1::EventChannel* resp) override {
    return Reply(ctx, "GetChannel", m_->GetChannel(req->name()), resp);
  }
  Status ListChannels(ServerContext* ctx, const v1::ListChannelsRequest*, v1::ListChannelsResponse* resp) override {
    auto channels = m_->ListChannels();
    if (channels.ok()) Fill(std::move(*channels), resp->mutable_channels());
    return Reply(ctx, "ListChannels", channels.status(), resp);
  }
  Status DeleteChannel(ServerContext* ctx, const v1::DeleteChannelRequest* req,
                       v1::DeleteChannelResponse* resp) override {
    return Reply(ctx, "DeleteChannel", m_->DeleteChannel(req->name()), resp);
  }

 private:
  cm::CmManager* const m_;
};

class CmIdsService final
    : public v1::CmIds::WithCallbackMethod_CreateCmId<v1::CmIds::WithCallbackMethod_Listen<
          v1::CmIds::WithCallbackMethod_Connect<v1::CmIds::WithCallbackMethod_Accept<
              v1::CmIds::WithCallbackMethod_Reject<v1::CmIds::WithCallbackMethod_Disconnect<
                  v1::CmIds::WithCallbackMethod_DeleteCmId<v1::CmIds::WithCallbackMethod_MigrateCmId<
                      v1::CmIds::WithCallbackMethod_WatchEvents<v1::CmIds::Service>>>>>>>>> {
 public:
  explicit CmIdsService(cm::CmManager* m) : m_(m) {}
  Status GetCmId(ServerContext* ctx, const v1::GetCmIdRequest* req, v1::CmId* resp) override {
    return Reply(ctx, "GetCmId", m_->GetCmId(req->name()), resp);
  }
  Status ListCmIds(ServerContext* ctx, const v1::ListCmIdsRequest* req, v1::ListCmIdsResponse* resp) override {
    auto ids = m_->ListCmIds(*req);
    if (ids.ok()) Fill(std::move(*ids), resp->mutable_cm_ids());
    return Reply(ctx, "ListCmIds", ids.status(), resp);
  }
  ServerUnaryReactor* CreateCmId(CallbackServerContext* ctx, const v1::CreateCmIdRequest* req,
                                 v1::CmId* resp) override {
    return Forward(ctx, "CreateCmId", *req, resp, &cm::CmManager::CreateCmId);
  }
  ServerUnaryReactor* Listen(CallbackServerContext* ctx, const v1::ListenRequest* req, v1::CmId* resp) override {
    return Forward(ctx, "Listen", *req, resp, &cm::CmManager::Listen);
  }
  ServerUnaryReactor* Connect(CallbackServerContext* ctx, const v1::ConnectRequest* req, v1::CmId* resp) override {
    return Forward(ctx, "Connect", *req, resp, &cm::CmManager::Connect);
  }
  ServerUnaryReactor* Accept(CallbackServerContext* ctx, const v1::AcceptRequest* req, v1::CmId* resp) override {
    return Forward(ctx, "Accept", *req, resp, &cm::CmManager::Accept);
  }
  ServerUnaryReactor* Reject(CallbackServerContext* ctx, const v1::RejectRequest* req, v1::CmId* resp) override {
    return Forward(ctx, "Reject", *req, resp, &cm::CmManager::Reject);
  }
  ServerUnaryReactor* Disconnect(CallbackServerContext* ctx, const v1::DisconnectRequest* req,
                                 v1::CmId* resp) override {
    return Forward(ctx, "Disconnect", req->name(), resp, &cm::CmManager::Disconnect);
  }
  ServerUnaryReactor* DeleteCmId(CallbackServerContext* ctx, const v1::DeleteCmIdRequest* req,
                                 v1::DeleteCmIdResponse* resp) override {
    ServerUnaryReactor* reactor = ctx->DefaultReactor();
    m_->DeleteCmId(req->name(), [reactor, peer = ctx->peer()](absl::StatusOr<v1::CmId> r) {
      rpc_internal::LogFailure("DeleteCmId", peer, r.status());
      reactor->Finish(ToGrpc(r.status()));
    });
    return reactor;
  }
  ServerUnaryReactor* MigrateCmId(CallbackServerContext* ctx, const v1::MigrateCmIdRequest* req,
                                  v1::CmId* resp) override {
    ServerUnaryReactor* reactor = ctx->DefaultReactor();
    // The call's deadline bounds the wait for the id's dispatcher; past it, nothing is changed.
    const absl::Time deadline = absl::FromChrono(ctx->deadline());
    m_->Migrate(*req, deadline, Replier<v1::CmId>(ctx, "MigrateCmId", reactor, resp));
    return reactor;
  }
  grpc::ServerWriteReactor<v1::CmEvent>* WatchEvents(CallbackServerContext* ctx,
                                                     const v1::WatchEventsRequest* req) override {
    cm::EventFilter filter;
    absl::Status bad;
    bad = m_->ListChannels().status();  // UNAVAILABLE without rdma_cm
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
    if (!bad.ok()) {
      rpc_internal::LogFailure("WatchEvents", ctx->peer(), bad);
      auto* failed = new rpc_internal::FailedWatch<v1::CmEvent>();
      failed->Fail(ToGrpc(bad));
      return failed;
    }
    return rpc_internal::WatchWriter<v1::CmEvent, cm::EventFilter>::Start(
        &m_->events(), m_->events().Subscribe(std::move(filter), req->after_sequence(), req->from_oldest()));
  }

 private:
  // An id operation: the manager runs it on the id's dispatcher, which finishes the RPC.
  template <typename Request>
  ServerUnaryReactor* Forward(CallbackServerContext* ctx, const char* method, const Request& request,
                              v1::CmId* resp, void (cm::CmManager::*op)(const Request&, Done<v1::CmId>)) {
    ServerUnaryReactor* reactor = ctx->DefaultReactor();
    (m_->*op)(request, Replier<v1::CmId>(ctx, method, reactor, resp));
    return reactor;
  }
  cm::CmManager* const m_;
};

class TokensService final : public v1::ConnectTokens::Service {
 public:
  explicit TokensService(cm::CmManager* m) : m_(m) {}
  Status IssueConnectToken(ServerContext* ctx, const v1::IssueConnectTokenRequest* req,
                           v1::ConnectToken* resp) override {
    return Reply(ctx, "IssueConnectToken", m_->IssueConnectToken(*req), resp);
  }

 private:
  cm::CmManager* const m_;
};

}  // namespace

std::vector<std::unique_ptr<grpc::Service>> MakeCmServices(cm::CmManager* manager) {
  std::vector<std::unique_ptr<grpc::Service>> out;
  out.push_back(std::make_unique<ChannelsService>(manager));
  out.push_back(std::make_unique<CmIdsService>(manager));
  out.push_back(std::make_unique<TokensService>(manager));
  return out;
}

}  // namespace rdmad
