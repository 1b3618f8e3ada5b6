// Protection domains: create, get, list, delete (with cascade), and the PD's type 1 lane and bind QP.
// Threads: see registry.h. No fabric call is made with mu_ held.
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/log.h"
#include "server/common/status.h"
#include "server/registry/internal.h"
#include "server/registry/registry.h"

namespace rdmad {

using registry_internal::kMaxLabel;

v1::ProtectionDomain Registry::ToProto(const PdEntry& e) const {
  const PdEntry::Book& b = e.book.Get(mu_);
  v1::ProtectionDomain pd;
  pd.set_name(Name("pds", e.id));
  pd.set_device(absl::StrCat("devices/", e.device->info().name));
  pd.set_label(e.label);
  pd.set_mr_count(static_cast<uint32_t>(b.mrs.size()));
  pd.set_mw_count(static_cast<uint32_t>(b.mws.size()));
  pd.set_qp_count(static_cast<uint32_t>(b.qps.size()));
  return pd;
}

absl::StatusOr<v1::ProtectionDomain> Registry::CreatePd(const v1::CreatePdRequest& request, const std::string& owner) {
  if (request.label().size() > kMaxLabel) {
    return InvalidArgument("label", absl::StrCat("at most ", kMaxLabel, " bytes"));
  }
  RDMAD_ASSIGN_OR_RETURN(fabric::Device * device, FindDevice(request.device(), "device"));
  {
    MutexLock lock(&mu_);
    RDMAD_RETURN_IF_ERROR(WithinLimit("pds", options_.limits.pds, pds_.size(), creating_.pds));
    creating_.pds++;
  }
  absl::StatusOr<std::unique_ptr<fabric::Pd>> pd = device->AllocPd();
  state::Ticket recorded;
  v1::ProtectionDomain out;
  {
    MutexLock lock(&mu_);
    creating_.pds--;
    if (!pd.ok()) return pd.status();
    auto e = std::make_unique<PdEntry>();
    e->totals = &totals_;
    e->device = device;
    e->label = request.label();
    e->pd = std::move(pd).value();
    e->id = next_pd_.Next();
    if (options_.state != nullptr) {
      // Submitted before anyone can see it (a queue push: the journal writes it); the reply waits for it
      // below, without mu_: a restart re-creates it under this name.
      state::PdRow row{e->id, device->info().name, e->label, owner};
      recorded = options_.state->Submit(
          state::Mutation::PutPd(std::move(row))
              .OnError(absl::StrCat(Name("pds", e->id), ": not recorded in the state store"),
                       ": it will not survive a restart"));
    }
    out = ToProto(*e);
    OwnPdLocked(out.name(), owner);  // the tenant's from the moment anyone can see it
    pds_.emplace(e->id, std::move(e));
  }
  recorded.Wait().IgnoreError();  // a failure is logged by the journal; the PD exists either way
  RDMAD_LOG_INFO("%s created on %s", out.name().c_str(), out.device().c_str());
  return out;
}

void Registry::OwnPdLocked(const std::string& pd, const std::string& tenant) {
  if (tenant.empty()) return;
  MutexLock lock(&owners_mu_);
  pd_tenant_[pd] = tenant;
  tenant_pds_[tenant].insert(pd);
}

void Registry::ForgetPdLocked(const std::string& pd) {
  MutexLock lock(&owners_mu_);
  auto it = pd_tenant_.find(pd);
  if (it == pd_tenant_.end()) return;
  auto pds = tenant_pds_.find(it->second);
  if (pds != tenant_pds_.end() && pds->second.erase(pd) > 0 && pds->second.empty()) tenant_pds_.erase(pds);
  pd_tenant_.erase(it);
}

std::string Registry::TenantOfPd(const std::string& pd) const {
  MutexLock lock(&owners_mu_);
  auto it = pd_tenant_.find(pd);
  return it == pd_tenant_.end() ? "" : it->second;
}

std::vector<std::string> Registry::PdsOfTenant(const std::string& tenant) const {
  MutexLock lock(&owners_mu_);
  auto it = tenant_pds_.find(tenant);
  if (it == tenant_pds_.end()) return {};
  return std::vector<std::string>(it->second.begin(), it->second.end());
}

absl::StatusOr<v1::ProtectionDomain> Registry::GetPd(const std::string& name) const {
  MutexLock lock(&mu_);
  RDMAD_ASSIGN_OR_RETURN(PdEntry * e, FindPd(name, "name"));
  return ToProto(*e);
}

absl::Status Registry::CheckPd(const std::string& name, const std::string& field) const {
  MutexLock lock(&mu_);
  return FindPd(name, field).status();
}

std::vector<v1::ProtectionDomain> Registry::ListPds(uint64_t after, size_t limit) const {
  MutexLock lock(&mu_);
  std::vector<v1::ProtectionDomain> out;
  for (auto it = pds_.upper_bound(after); it != pds_.end() && (limit == 0 || out.size() < limit); ++it) {
    out.push_back(ToProto(*it->second));
  }
  return out;
}

absl::Status Registry::CheckDeletePd(const v1::DeletePdRequest& request) const {
  MutexLock lock(&mu_);
  RDMAD_ASSIGN_OR_RETURN(const PdEntry* pd, FindPd(request.name(), "name"));
  const PdEntry::Book& b = pd->book.Get(mu_);
  if (b.busy) return InProgress("name", request.name(), b.busy);
  // What stays once the grants are gone: its regions, its own windows and QPs (not the grant pool's
  // windows nor the grants' connections, which DeletePd closes once their grants ended).
  if (!request.cascade() && (!b.mrs.empty() || b.own_mws > 0 || b.user_qps > 0)) {
    return Busy("name", absl::StrCat(request.name(), " still holds ", b.mrs.size(), " memory region(s), ",
                                     b.own_mws, " memory window(s) and ", b.user_qps,
                                     " queue pair(s): delete them first or ask for a cascade"));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::DeletePdResponse> Registry::DeletePd(const v1::DeletePdRequest& request) {
  PdEntry* pd = nullptr;
  // The children reserved below, as they were then: the reservation keeps the PD's maps as they are until the
  // commit, and the release walks these copies without the lock.
  std::map<uint64_t, MwEntry*> windows;
  std::map<uint64_t, MrEntry*> regions;
  {
    MutexLock lock(&mu_);
    RDMAD_ASSIGN_OR_RETURN(pd, FindPd(request.name(), "name"));
    PdEntry::Book& b = pd->book.Get(mu_);
    if (b.busy) return InProgress("name", request.name(), b.busy);
    if (b.pending > 0 || b.lane_busy) {
      return Busy("name", absl::StrCat(request.name(), " has a memory registration or a bind in progress; retry"));
    }
    if (!request.cascade() && (!b.mrs.empty() || !b.mws.empty() || !b.qps.empty())) {
      return Busy("name", absl::StrCat(request.name(), " still holds ", b.mrs.size(), " memory region(s), ",
                                       b.mws.size(), " memory window(s) and ", b.qps.size(),
                                       " queue pair(s): delete them first or ask for a cascade"));
    }
    for (const auto& [id, w] : b.mws) {
      if (const char* busy = w->book.Get(mu_).busy) return InProgress("name", Name("mws", id), busy);
    }
    for (const auto& [id, m] : b.mrs) {
      if (const char* busy = m->book.Get(mu_).busy) return InProgress("name", Name("mrs", id), busy);
    }
    for (const auto& [id, q] : b.qps) {
      if (q->book.Get(mu_).busy) return InProgress("name", Name("qps", id), q->book.Get(mu_).busy);
      if (!q->cm_id.empty()) {
        return Busy("name", absl::StrCat(Name("qps", id), " belongs to ", q->cm_id, ": delete the CM id first"));
      }
    }
    // Reserve the PD and every child: from here nothing else touches them.
    b.busy = "DeletePd";
    for (auto& [id, w] : b.mws) w->book.Get(mu_).busy = "DeletePd";
    for (auto& [id, m] : b.mrs) m->book.Get(mu_).busy = "DeletePd";
    for (auto& [id, q] : b.qps) q->book.Get(mu_).busy = "DeletePd";
    windows = b.mws;
    regions = b.mrs;
  }
  // Without the lock, children first: windows (with their bounds regions), regions, QPs, then the PD.
  // Only a region can refuse (ibv_dereg_mr); the cascade stops there and what is left stays, unreserved.
  v1::DeletePdResponse response;
  std::vector<uint64_t> released_mws, released_mrs;
  for (auto& [id, w] : windows) {
    w->mw.reset();
    w->bounds_mr.reset();
    released_mws.push_back(id);
  }
  absl::Status failed;
  for (auto& [id, m] : regions) {
    if (m->mr == nullptr) {  // lost at a restart: nothing registered
      released_mrs.push_back(id);
      continue;
    }
    if (failed = m->mr->Release(); !failed.ok()) {
      failed = WithContext(failed, absl::StrCat("cascade stopped at ", Name("mrs", id)));
      break;
    }
    released_mrs.push_back(id);
  }
  // Commit: the released entries leave the index; they, the QPs and the PD are destroyed after the lock.
  std::vector<std::unique_ptr<MrEntry>> mrs;  // their mappings are unmapped on destruction
  std::vector<std::unique_ptr<QpEntry>> qps;
  std::unique_ptr<PdEntry> owned;
  std::vector<state::Ticket> recorded;  // the removals' records, waited for without mu_
  {
    MutexLock lock(&mu_);
    for (uint64_t id : released_mws) {
      MwEntry* w = pd->book.Get(mu_).mws[id];
      if (w->book.Get(mu_).mr) w->book.Get(mu_).mr->book.Get(mu_).windows.erase(id);
      if (w->book.Get(mu_).qp) w->book.Get(mu_).qp->book.Get(mu_).windows.erase(id);
      Detach(mu_, pd, w);
      mws_.erase(id);
      response.add_deleted(Name("mws", id));
    }
    for (uint64_t id : released_mrs) {
      recorded.push_back(Unpersist("mrs", id));
      Detach(mu_, pd, mrs_[id].get());
      mrs.push_back(std::move(mrs_[id]));
      mrs_.erase(id);
      response.add_deleted(Name("mrs", id));
    }
    if (!failed.ok()) {
      pd->book.Get(mu_).busy = nullptr;
      for (auto& [id, m] : pd->book.Get(mu_).mrs) m->book.Get(mu_).busy = nullptr;
      for (auto& [id, q] : pd->book.Get(mu_).qps) q->book.Get(mu_).busy = nullptr;
      failed = WithContext(failed, absl::StrCat("released so far: ", absl::StrJoin(response.deleted(), ", ")));
    } else {
      for (auto& [id, q] : pd->book.Get(mu_).qps) {
        AwaitNoReaders(*q);  // a GetQp querying it finishes first
        qps.push_back(std::move(qps_[id]));
        qps_.erase(id);
        response.add_deleted(Name("qps", id));
      }
      recorded.push_back(Unpersist("pds", pd->id));
      ForgetPdLocked(Name("pds", pd->id));
      owned = std::move(pds_[pd->id]);
      pds_.erase(pd->id);
      response.add_deleted(request.name());
    }
  }
  mrs.clear();
  qps.clear();  // QPs (and their CQs), then the bind QP, then the PD
  owned.reset();
  // The reply after the removals' records (failures are logged by the journal). This may run on a device
  // dispatcher (the RPC layer's AfterGrants, once revoked grants' invalidations completed): it waits there
  // for one group commit, without mu_.
  for (const state::Ticket& t : recorded) t.Wait().IgnoreError();
  if (!failed.ok()) return failed;
  RDMAD_LOG_INFO("deleted %s", absl::StrJoin(response.deleted(), ", ").c_str());
  return response;
}

// ---------------------------------------------------------------------------------------------------------
// The type 1 lane and the bind QP

bool Registry::TakeLane(PdEntry& pd) {
  PdEntry::Book& b = pd.book.Get(mu_);
  if (b.lane_busy) return false;
  b.lane_busy = true;
  return true;
}

void Registry::ReleaseLane(PdEntry& pd) {
  absl::AnyInvocable<void() &&> next;
  {
    MutexLock lock(&mu_);
    PdEntry::Book& b = pd.book.Get(mu_);
    b.lane_busy = false;
    if (b.lane.empty()) return;
    next = std::move(b.lane.front());
    b.lane.pop_front();
  }
  std::move(next)();  // re-validates and takes the lane (or queues again behind a newcomer)
}

absl::StatusOr<fabric::Qp*> Registry::PrepareBindQp(PdEntry& pd) {
  if (pd.bind_qp && pd.bind_qp_state == fabric::QpState::kRts) return pd.bind_qp.get();
  if (!pd.bind_qp) {
    const auto& ports = pd.device->info().ports;
    if (ports.empty()) return absl::FailedPreconditionError("the device has no port to bind windows on");
    fabric::QpOptions options;
    options.port = 1;
    options.gid_index = DefaultGidIndex(ports[0]);
    RDMAD_ASSIGN_OR_RETURN(pd.bind_qp, pd.pd->CreateQp(options));
  }
  // Connected to itself: a bind is a local operation, but the QP must be in RTS to execute it. Also the
  // way back after a failed bind completion left it in the error state.
  RDMAD_RETURN_IF_ERROR(WithContext(pd.bind_qp->Connect(pd.bind_qp->local()), "preparing the bind QP"));
  pd.bind_qp_state = fabric::QpState::kRts;
  return pd.bind_qp.get();
}

}  // namespace rdmad
