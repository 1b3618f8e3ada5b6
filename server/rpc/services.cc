#include "server/rpc/services.h"

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/rpc/call.h"
#include "server/rpc/page.h"
#include "server/registry/rules.h"
#include "server/common/version.h"

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

template <typename T>
const std::string& ItemName(const T& item) {
  return item.name();
}

// Keeps the items the caller may see.
template <typename T, typename Pred>
std::vector<T> Visible(std::vector<T> items, Pred visible) {
  std::vector<T> out;
  for (auto& i : items) {
    if (visible(i)) out.push_back(std::move(i));
  }
  return out;
}

class DevicesService final : public v1::Devices::Service {
 public:
  explicit DevicesService(const Env* e) : e_(e) {}
  Status ListDevices(ServerContext* ctx, const v1::ListDevicesRequest* req, v1::ListDevicesResponse* resp) override {
    Call c(*e_, *ctx, "ListDevices");
    absl::StatusOr<Pager> page = Pager::Start(*req, "ListDevices");
    if (!c.Fail(page.status()).ok()) return c.Refuse(resp);
    Fill(page->Cut(Visible(e_->registry->ListDevices(),
                           [&](const v1::Device& d) { return c.gate().SeesDevice(c.caller(), d.name()); }),
                   ItemName<v1::Device>, resp->mutable_next_page_token()),
         resp->mutable_devices());
    return c.Reply(absl::OkStatus(), resp);
  }
  Status GetDevice(ServerContext* ctx, const v1::GetDeviceRequest* req, v1::Device* resp) override {
    Call c(*e_, *ctx, "GetDevice");
    // "rxe0" and "devices/rxe0" alike: a device the caller may not use is NOT_FOUND either way.
    if (!c.See(req->name(), "name").ok()) return c.Refuse(resp);
    if (!c.Fail(c.gate().SeeDevice(c.caller(), req->name(), "name")).ok()) return c.Refuse(resp);
    return c.Reply(e_->registry->GetDevice(req->name()), resp);
  }
  // The registry's and the CM manager's objects first, the kernel's dump second (Registry::KernelObjects
  // says why), then the join (server/fabric/restrack.h); no lock is held across the dump.
  Status ListKernelIds(ServerContext* ctx, const v1::ListKernelIdsRequest* req,
                       v1::ListKernelIdsResponse* resp) override {
    Call c(*e_, *ctx, "ListKernelIds");
    if (!c.See(req->device(), "device").ok()) return c.Refuse(resp);
    if (!c.Fail(c.gate().SeeDevice(c.caller(), req->device(), "device")).ok()) return c.Refuse(resp);
    absl::StatusOr<fabric::restrack::Ours> ours = e_->registry->KernelJoinInput(req->device(), "device");
    if (!ours.ok()) return c.Reply(ours.status(), resp);
    std::map<uint64_t, uint32_t> qpn;  // our QPs' numbers, by id
    for (const fabric::restrack::OurQp& q : ours->qps) qpn[q.id] = q.qpn;
    std::vector<cm::CmManager::KernelCmId> ids;
    if (e_->cm != nullptr) ids = e_->cm->KernelJoinInput(req->device());
    for (cm::CmManager::KernelCmId& id : ids) {
      if (absl::StatusOr<uint64_t> n = ParseName(id.qp, "qps", "qp"); n.ok() && qpn.count(*n)) id.ours.qpn = qpn[*n];
      ours->cm_ids.push_back(id.ours);
    }
    absl::StatusOr<fabric::restrack::DeviceDump> dump = e_->registry->KernelObjects(req->device(), "device");
    if (!dump.ok()) return c.Reply(dump.status(), resp);
    const fabric::restrack::Numbers numbers = fabric::restrack::Join(*ours, *dump);
    resp->set_keyed(!dump->mrs.empty() && dump->mrs.front().lkey.has_value());

    // Per kind, by number: what the caller may see, known or counted unknown.
    uint32_t unknown = 0;
    auto add = [&](std::map<uint64_t, std::optional<uint32_t>>& kind, const char* prefix) {
      for (const auto& [id, number] : kind) {
        if (!number.has_value()) {
          ++unknown;
          continue;
        }
        v1::KernelId* k = resp->add_ids();
        k->set_name(absl::StrCat(prefix, id));
        k->set_number(*number);
      }
    };
    std::map<uint64_t, std::optional<uint32_t>> pds, mrs, qps, cm_ids;
    for (size_t i = 0; i < ours->pds.size(); ++i) {
      const std::string pd = absl::StrCat("pds/", ours->pds[i].id);
      if (c.gate().SeesPd(c.caller(), pd)) pds[ours->pds[i].id] = numbers.pdn[i];
    }
    for (size_t i = 0; i < ours->mrs.size(); ++i) {
      if (c.gate().SeesPd(c.caller(), absl::StrCat("pds/", ours->mrs[i].pd_id))) mrs[ours->mrs[i].id] = numbers.mrn[i];
    }
    for (size_t i = 0; i < ours->qps.size(); ++i) {
      if (!c.gate().SeesPd(c.caller(), absl::StrCat("pds/", ours->qps[i].pd_id))) continue;
      qps[ours->qps[i].id] = numbers.qp_seen[i] ? std::optional<uint32_t>(ours->qps[i].qpn) : std::nullopt;
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i].ours.internal || !c.gate().SeesPd(c.caller(), ids[i].pd)) continue;  // rdmad's own: not listed
      cm_ids[ids[i].ours.id] = numbers.cm_idn[i];
    }
    add(pds, "pds/");
    add(mrs, "mrs/");
    add(qps, "qps/");
    add(cm_ids, "cmids/");
    resp->set_unknown(unknown);
    return c.Reply(absl::OkStatus(), resp);
  }

 private:
  const Env* const e_;
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
  explicit PdsService(const Env* e) : e_(e) {}
  Status CreatePd(ServerContext* ctx, const v1::CreatePdRequest* req, v1::ProtectionDomain* resp) override {
    Call c(*e_, *ctx, "CreatePd");
    if (!c.See(req->device(), "device").Reserve({{Quota::kPds, 1}}).ok()) return c.Refuse(resp);
    absl::StatusOr<v1::ProtectionDomain> pd = e_->registry->CreatePd(*req, c.caller().tenant);
    return c.Reply(std::move(pd), resp);
  }
  Status GetPd(ServerContext* ctx, const v1::GetPdRequest* req, v1::ProtectionDomain* resp) override {
    Call c(*e_, *ctx, "GetPd");
    if (!c.See(req->name(), "name").ok()) return c.Refuse(resp);
    return c.Reply(e_->registry->GetPd(req->name()), resp);
  }
  Status ListPds(ServerContext* ctx, const v1::ListPdsRequest* req, v1::ListPdsResponse* resp) override {
    Call c(*e_, *ctx, "ListPds");
    absl::StatusOr<Pager> page = Pager::Start(*req, "ListPds");
    if (!c.Fail(page.status()).ok()) return c.Refuse(resp);
    auto pds = page->Fetch<v1::ProtectionDomain>(
        [&](uint64_t after, size_t limit) {
          return absl::StatusOr<std::vector<v1::ProtectionDomain>>(e_->registry->ListPds(after, limit));
        },
        [&](const v1::ProtectionDomain& p) { return c.gate().SeesPd(c.caller(), p.name()); },
        ItemName<v1::ProtectionDomain>, resp->mutable_next_page_token());
    if (pds.ok()) Fill(std::move(*pds), resp->mutable_pds());
    return c.Reply(pds.status(), resp);
  }
  ServerUnaryReactor* DeletePd(CallbackServerContext* ctx, const v1::DeletePdRequest* req,
                               v1::DeletePdResponse* resp) override {
    ServerUnaryReactor* reactor = ctx->DefaultReactor();
    Call c(*e_, *ctx, "DeletePd");
    if (!c.See(req->name(), "name").ok()) {
      c.RefuseAsync(reactor);
      return reactor;
    }
    Registry* r = e_->registry;
    cm::CmManager* cm = e_->cm;
    dataplane::Listener* data_plane = e_->data_plane;
    Done<v1::DeletePdResponse> reply =
        c.Replier<v1::DeletePdResponse>(reactor, resp, [data_plane, name = req->name()](const v1::DeletePdResponse&) {
          if (data_plane != nullptr) data_plane->RevokeTokensOn(name);  // they could never connect
        });
    // CM ids live in the PD too (the CM manager keeps them, above the registry): none may be left, and
    // none is created until the PD is gone or stays.
    if (cm != nullptr) {
      if (absl::Status s = cm->BeginPdRemoval(req->name()); !s.ok()) {
        std::move(reply)(s);
        return reactor;
      }
      reply = [cm, name = req->name(), reply = std::move(reply)](absl::StatusOr<v1::DeletePdResponse> r) mutable {
        cm->EndPdRemoval(name);
        std::move(reply)(std::move(r));
      };
    }
    if (req->revoke_grants()) {
      // A request the registry would refuse anyway must not cost the grants it asked to revoke.
      if (absl::Status s = r->CheckDeletePd(*req); !s.ok()) {
        std::move(reply)(s);
        return reactor;
      }
    }
    // Once no grant on it is live, its data-plane connections (the ended grants' in their end grace; with
    // cascade, the connect tokens' too) are closed: their QPs are in the PD.
    AfterGrants<v1::DeletePdResponse>(
        e_->grants, "", req->name(), req->revoke_grants(), v1::END_PD_DELETED,
        [r, cm, req = *req](Done<v1::DeletePdResponse> d) mutable {
          if (cm == nullptr) return std::move(d)(r->DeletePd(req));
          const std::string pd = req.name();
          // A name that is no PD (malformed, or none) is refused here, before the CM layer looks for the
          // connections "in" it.
          if (absl::Status s = r->CheckPd(pd, "name"); !s.ok()) return std::move(d)(s);
          const bool cascade = req.cascade();
          if (!cascade) {
            if (absl::Status open = cm->CheckNoTokenConnections(pd); !open.ok()) return std::move(d)(open);
          }
          cm->ClosePdConnections(pd, cascade, [r, req = std::move(req), d = std::move(d)]() mutable {
            std::move(d)(r->DeletePd(req));
          });
        },
        std::move(reply));
    return reactor;
  }

 private:
  const Env* const e_;
};

uint64_t SourceBytes(const v1::MemorySource& s) {
  return s.has_anonymous() ? s.anonymous().size()
         : s.has_file()    ? s.file().length()
         : s.has_fd()      ? s.fd().length()
                           : 0;
}

// A failed ReregisterMr without a rereg_outcome (refused before the fabric was called) gets
// OUTCOME_OLD_MR_VALID: the region, if there is one, is as it was.
Done<v1::ReregisterMrResponse> OldMrValidIfRefused(Done<v1::ReregisterMrResponse> done) {
  return [done = std::move(done)](absl::StatusOr<v1::ReregisterMrResponse> result) mutable {
    if (!result.ok() && !result.status().GetPayload(kReregOutcomePayload)) {
      absl::Status s = result.status();
      s.SetPayload(kReregOutcomePayload, absl::Cord(std::to_string(static_cast<int>(v1::OUTCOME_OLD_MR_VALID))));
      result = std::move(s);
    }
    std::move(done)(std::move(result));
  };
}

// RegisterMr and ReregisterMr pin memory on a worker: callback API. The rest answer at once.
class MrsService final
    : public v1::MemoryRegions::WithCallbackMethod_RegisterMr<v1::MemoryRegions::WithCallbackMethod_ReregisterMr<
          v1::MemoryRegions::WithCallbackMethod_DeregisterMr<v1::MemoryRegions::Service>>> {
 public:
  explicit MrsService(const Env* e) : e_(e) {}
  ServerUnaryReactor* RegisterMr(CallbackServerContext* ctx, const v1::RegisterMrRequest* req,
                                 v1::MemoryRegion* resp) override {
    ServerUnaryReactor* reactor = ctx->DefaultReactor();
    Call c(*e_, *ctx, "RegisterMr");
    c.ValidateOnly(req->validate_only());  // quotas checked (Reserve) and given back when it answers
    if (!c.See(req->pd(), "pd").Reserve({{Quota::kMrs, 1}, {Quota::kPinnedBytes, SourceBytes(req->source())}}).ok()) {
      c.RefuseAsync(reactor);
      return reactor;
    }
    e_->registry->RegisterMrAsync(*req, c.Replier<v1::MemoryRegion>(reactor, resp), c.caller().files);
    return reactor;
  }
  Status GetMr(ServerContext* ctx, const v1::GetMrRequest* req, v1::MemoryRegion* resp) override {
    Call c(*e_, *ctx, "GetMr");
    if (!c.See(req->name(), "name").ok()) return c.Refuse(resp);
    return c.Reply(e_->registry->GetMr(req->name()), resp);
  }
  Status ListMrs(ServerContext* ctx, const v1::ListMrsRequest* req, v1::ListMrsResponse* resp) override {
    Call c(*e_, *ctx, "ListMrs");
    absl::StatusOr<Pager> page = Pager::Start(*req, "ListMrs");
    if (!c.See(req->pd(), "pd").Fail(page.status()).ok()) return c.Refuse(resp);
    auto mrs = page->Fetch<v1::MemoryRegion>(
        [&](uint64_t after, size_t limit) { return e_->registry->ListMrs(*req, after, limit); },
        [&](const v1::MemoryRegion& m) { return c.gate().SeesPd(c.caller(), m.pd()); }, ItemName<v1::MemoryRegion>,
        resp->mutable_next_page_token());
    if (mrs.ok()) Fill(std::move(*mrs), resp->mutable_mrs());
    return c.Reply(mrs.status(), resp);
  }
  ServerUnaryReactor* ReregisterMr(CallbackServerContext* ctx, const v1::ReregisterMrRequest* req,
                                   v1::ReregisterMrResponse* resp) override {
    ServerUnaryReactor* reactor = ctx->DefaultReactor();
    Call c(*e_, *ctx, "ReregisterMr");
    c.See(req->name(), "name").See(req->pd(), "pd");
    if (c.ok() && req->has_source()) {
      // A new translation may grow the region: reserve the difference.
      absl::StatusOr<v1::MemoryRegion> now = e_->registry->GetMr(req->name());
      const uint64_t before = now.ok() ? now->length() : 0, after = SourceBytes(req->source());
      if (after > before) c.Reserve({{Quota::kPinnedBytes, after - before}});
    }
    // Every refusal says what survived (docs/api.md): the gate's and the grants guard's, made before the
    // registry is asked, leave the region as it was, like the registry's own.
    Done<v1::ReregisterMrResponse> reply = OldMrValidIfRefused(c.Replier<v1::ReregisterMrResponse>(reactor, resp));
    if (!c.ok()) {
      std::move(reply)(c.status());
      return reactor;
    }
    Registry* r = e_->registry;
    if (req->revoke_grants()) {
      // A request the registry would refuse must not cost the grants it asked to revoke.
      if (absl::Status s = r->CheckReregister(*req); !s.ok()) {
        std::move(reply)(s);
        return reactor;
      }
    }
    AfterGrants<v1::ReregisterMrResponse>(
        e_->grants, req->name(), "", req->revoke_grants(), v1::END_MR_REREGISTERED,
        [r, req = *req, files = c.caller().files](Done<v1::ReregisterMrResponse> d) mutable {
          r->ReregisterMrAsync(req, std::move(d), files);
        },
        std::move(reply));
    return reactor;
  }
  ServerUnaryReactor* DeregisterMr(CallbackServerContext* ctx, const v1::DeregisterMrRequest* req,
                                   v1::DeregisterMrResponse* resp) override {
    ServerUnaryReactor* reactor = ctx->DefaultReactor();
    Call c(*e_, *ctx, "DeregisterMr");
    if (!c.See(req->name(), "name").ok()) {
      c.RefuseAsync(reactor);
      return reactor;
    }
    Registry* r = e_->registry;
    if (req->revoke_grants()) {
      // A request the registry would refuse anyway must not cost the grants it asked to revoke.
      if (absl::Status s = r->CheckDeregister(req->name()); !s.ok()) {
        c.Replier<v1::DeregisterMrResponse>(reactor, resp)(s);
        return reactor;
      }
    }
    AfterGrants<v1::DeregisterMrResponse>(
        e_->grants, req->name(), "", req->revoke_grants(), v1::END_MR_DEREGISTERED,
        [r, name = req->name()](Done<v1::DeregisterMrResponse> d) mutable {
          absl::Status s = r->DeregisterMr(name);
          if (!s.ok()) return std::move(d)(s);
          std::move(d)(v1::DeregisterMrResponse());
        },
        c.Replier<v1::DeregisterMrResponse>(reactor, resp));
    return reactor;
  }

 private:
  const Env* const e_;
};

class QpsService final : public v1::QueuePairs::Service {
 public:
  explicit QpsService(const Env* e) : e_(e) {}
  Status CreateQp(ServerContext* ctx, const v1::CreateQpRequest* req, v1::QueuePair* resp) override {
    Call c(*e_, *ctx, "CreateQp");
    if (!c.See(req->pd(), "pd").Reserve({{Quota::kQps, 1}}).ok()) return c.Refuse(resp);
    return c.Reply(e_->registry->CreateQp(*req), resp);
  }
  Status GetQp(ServerContext* ctx, const v1::GetQpRequest* req, v1::QueuePair* resp) override {
    Call c(*e_, *ctx, "GetQp");
    if (!c.See(req->name(), "name").ok()) return c.Refuse(resp);
    return c.Reply(e_->registry->GetQp(req->name()), resp);
  }
  Status ListQps(ServerContext* ctx, const v1::ListQpsRequest* req, v1::ListQpsResponse* resp) override {
    Call c(*e_, *ctx, "ListQps");
    absl::StatusOr<Pager> page = Pager::Start(*req, "ListQps");
    if (!c.Fail(page.status()).ok()) return c.Refuse(resp);
    auto qps = page->Fetch<v1::QueuePair>(
        [&](uint64_t after, size_t limit) {
          return absl::StatusOr<std::vector<v1::QueuePair>>(e_->registry->ListQps(after, limit));
        },
        [&](const v1::QueuePair& q) { return c.gate().SeesPd(c.caller(), q.pd()); }, ItemName<v1::QueuePair>,
        resp->mutable_next_page_token());
    if (qps.ok()) Fill(std::move(*qps), resp->mutable_qps());
    return c.Reply(qps.status(), resp);
  }
  Status ConnectQp(ServerContext* ctx, const v1::ConnectQpRequest* req, v1::QueuePair* resp) override {
    Call c(*e_, *ctx, "ConnectQp");
    if (!c.See(req->name(), "name").ok()) return c.Refuse(resp);
    return c.Reply(e_->registry->ConnectQp(*req), resp);
  }
  Status DeleteQp(ServerContext* ctx, const v1::DeleteQpRequest* req, v1::DeleteQpResponse* resp) override {
    Call c(*e_, *ctx, "DeleteQp");
    if (!c.See(req->name(), "name").ok()) return c.Refuse(resp);
    return c.Reply(e_->registry->DeleteQp(req->name()), resp);
  }

 private:
  const Env* const e_;
};

// BindMw and InvalidateMw finish when their completion arrives: callback API. The rest answer at once.
class MwsService final
    : public v1::MemoryWindows::WithCallbackMethod_BindMw<
          v1::MemoryWindows::WithCallbackMethod_InvalidateMw<v1::MemoryWindows::Service>> {
 public:
  explicit MwsService(const Env* e) : e_(e) {}
  Status AllocMw(ServerContext* ctx, const v1::AllocMwRequest* req, v1::MemoryWindow* resp) override {
    Call c(*e_, *ctx, "AllocMw");
    if (!c.See(req->pd(), "pd").Reserve({{Quota::kMws, 1}}).ok()) return c.Refuse(resp);
    return c.Reply(e_->registry->AllocMw(*req), resp);
  }
  Status GetMw(ServerContext* ctx, const v1::GetMwRequest* req, v1::MemoryWindow* resp) override {
    Call c(*e_, *ctx, "GetMw");
    if (!c.See(req->name(), "name").ok()) return c.Refuse(resp);
    return c.Reply(e_->registry->GetMw(req->name()), resp);
  }
  Status ListMws(ServerContext* ctx, const v1::ListMwsRequest* req, v1::ListMwsResponse* resp) override {
    Call c(*e_, *ctx, "ListMws");
    absl::StatusOr<Pager> page = Pager::Start(*req, "ListMws");
    if (!c.See(req->pd(), "pd").Fail(page.status()).ok()) return c.Refuse(resp);
    auto mws = page->Fetch<v1::MemoryWindow>(
        [&](uint64_t after, size_t limit) { return e_->registry->ListMws(*req, after, limit); },
        [&](const v1::MemoryWindow& w) { return c.gate().SeesPd(c.caller(), w.pd()); }, ItemName<v1::MemoryWindow>,
        resp->mutable_next_page_token());
    if (mws.ok()) Fill(std::move(*mws), resp->mutable_mws());
    return c.Reply(mws.status(), resp);
  }
  ServerUnaryReactor* BindMw(CallbackServerContext* ctx, const v1::BindMwRequest* req,
                             v1::MemoryWindow* resp) override {
    ServerUnaryReactor* reactor = ctx->DefaultReactor();
    Call c(*e_, *ctx, "BindMw");
    c.ValidateOnly(req->validate_only());
    c.See(req->name(), "name").See(req->mr(), "mr").See(req->qp(), "qp");
    // Where the device needs a bounds region, the bind pins its pages: the tenant's pinned_bytes quota,
    // reserved until the bind has committed (or failed), before anything is pinned.
    if (c.ok()) {
      if (const uint64_t pinned = e_->registry->BoundsRegionBytes(*req); pinned > 0) {
        c.Reserve({{Quota::kPinnedBytes, pinned}});
      }
    }
    if (!c.ok()) {
      c.RefuseAsync(reactor);
      return reactor;
    }
    e_->registry->BindMwAsync(*req, c.Replier<v1::MemoryWindow>(reactor, resp));
    return reactor;
  }
  ServerUnaryReactor* InvalidateMw(CallbackServerContext* ctx, const v1::InvalidateMwRequest* req,
                                   v1::MemoryWindow* resp) override {
    ServerUnaryReactor* reactor = ctx->DefaultReactor();
    Call c(*e_, *ctx, "InvalidateMw");
    if (!c.See(req->name(), "name").ok()) {
      c.RefuseAsync(reactor);
      return reactor;
    }
    e_->registry->InvalidateMwAsync(req->name(), c.Replier<v1::MemoryWindow>(reactor, resp));
    return reactor;
  }
  Status DeallocMw(ServerContext* ctx, const v1::DeallocMwRequest* req, v1::DeallocMwResponse* resp) override {
    Call c(*e_, *ctx, "DeallocMw");
    if (!c.See(req->name(), "name").ok()) return c.Refuse(resp);
    return c.Reply(e_->registry->DeallocMw(req->name()), resp);
  }

 private:
  const Env* const e_;
};

// Who am I, and the tenants (an admin sees all; a tenant only itself).
class TenantsService final : public v1::Tenants::Service {
 public:
  explicit TenantsService(const Env* e) : e_(e) {}
  Status WhoAmI(ServerContext* ctx, const v1::WhoAmIRequest*, v1::Caller* resp) override {
    Call c(*e_, *ctx, "WhoAmI");
    if (!c.ok()) return c.Refuse(resp);
    const auth::Caller& who = c.caller();
    resp->set_principal(who.principal);
    resp->set_tenant(who.tenant);
    resp->set_role(who.admin ? v1::ROLE_ADMIN : v1::ROLE_TENANT);
    resp->set_authenticated(who.authenticated);
    resp->set_transport(who.transport);
    resp->set_uid(who.uid);
    resp->set_gid(who.gid);
    resp->set_server_version(kRdmadVersion);
    return c.Reply(absl::OkStatus(), resp);
  }
  Status ListTenants(ServerContext* ctx, const v1::ListTenantsRequest* req, v1::ListTenantsResponse* resp) override {
    Call c(*e_, *ctx, "ListTenants");
    absl::StatusOr<Pager> page = Pager::Start(*req, "ListTenants");
    if (!c.Fail(page.status()).ok()) return c.Refuse(resp);
    std::vector<v1::Tenant> tenants;
    for (const auto& t : e_->gate->policy().tenants()) {
      if (!page->After(rpc_internal::KeyOf(t.name))) continue;  // the quotas' use is counted only for the page
      if (c.caller().admin || c.caller().tenant == t.name) tenants.push_back(e_->gate->TenantProto(t));
    }
    Fill(page->Cut(std::move(tenants), ItemName<v1::Tenant>, resp->mutable_next_page_token()), resp->mutable_tenants());
    return c.Reply(absl::OkStatus(), resp);
  }
  Status GetTenant(ServerContext* ctx, const v1::GetTenantRequest* req, v1::Tenant* resp) override {
    Call c(*e_, *ctx, "GetTenant");
    if (!c.ok()) return c.Refuse(resp);
    const TenantConfig* t = e_->gate->policy().FindTenant(req->name());
    if (req->name().empty()) return c.Reply(InvalidArgument("name", "is required (tenants/NAME)"), resp);
    if (t == nullptr || !(c.caller().admin || c.caller().tenant == t->name)) {
      return c.Reply(NotFound("name", absl::StrCat(req->name(), " does not exist")), resp);
    }
    return c.Reply(absl::StatusOr<v1::Tenant>(e_->gate->TenantProto(*t)), resp);
  }

 private:
  const Env* const e_;
};

}  // namespace

std::vector<std::unique_ptr<grpc::Service>> MakeServices(const Env* env) {
  std::vector<std::unique_ptr<grpc::Service>> out;
  out.push_back(std::make_unique<DevicesService>(env));
  out.push_back(std::make_unique<PdsService>(env));
  out.push_back(std::make_unique<MrsService>(env));
  out.push_back(std::make_unique<QpsService>(env));
  out.push_back(std::make_unique<MwsService>(env));
  out.push_back(std::make_unique<TenantsService>(env));
  return out;
}

}  // namespace rdmad
