// Queue pairs created through the API: create, get, list, connect (manual endpoint exchange), delete.
// Threads: see registry.h. No fabric call is made with mu_ held; states shown are cached (entries.h).
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/common/log.h"
#include "server/common/status.h"
#include "server/registry/internal.h"
#include "server/registry/registry.h"

namespace rdmad {


v1::QueuePair Registry::ToProto(const QpEntry& e) const {
  const QpEntry::Book& b = e.book.Get(mu_);
  v1::QueuePair qp;
  qp.set_name(Name("qps", e.id));
  qp.set_pd(Name("pds", e.pd->id));
  *qp.mutable_local() = registry_internal::ToProto(b.local);
  if (b.has_remote) *qp.mutable_remote() = registry_internal::ToProto(b.remote);
  qp.set_state(registry_internal::ToProto(b.state));
  qp.set_port(e.options.port);
  qp.set_gid_index(e.options.gid_index);
  qp.set_bound_windows(b.type2_windows);
  qp.set_cm_id(e.cm_id);
  return qp;
}

absl::StatusOr<v1::QueuePair> Registry::CreateQp(const v1::CreateQpRequest& request) {
  PdEntry* pd = nullptr;
  fabric::QpOptions options;
  {
    MutexLock lock(&mu_);
    RDMAD_ASSIGN_OR_RETURN(pd, FindPd(request.pd(), "pd"));
    if (pd->book.Get(mu_).busy) return InProgress("pd", request.pd(), pd->book.Get(mu_).busy);
    options.port = request.port() ? request.port() : 1;
    const auto& ports = pd->device->info().ports;
    if (options.port > ports.size()) {
      return InvalidArgument("port", absl::StrCat("devices/", pd->device->info().name, " has ", ports.size(),
                                                  " port(s); got ", options.port));
    }
    const fabric::PortInfo& port = ports[options.port - 1];
    options.gid_index = request.has_gid_index() ? request.gid_index() : DefaultGidIndex(port);
    if (port.link_layer == "Ethernet") {
      bool found = false;
      for (const auto& g : port.gids) found = found || g.index == options.gid_index;
      if (!found) {
        return InvalidArgument("gid_index", absl::StrCat("port ", options.port, " has no GID at index ",
                                                         options.gid_index));
      }
    }
    RDMAD_RETURN_IF_ERROR(WithinLimit("qps", options_.limits.qps, totals_.Get(mu_).user_qps, creating_.qps));
    creating_.qps++;
    pd->book.Get(mu_).pending++;
  }
  absl::StatusOr<std::unique_ptr<fabric::Qp>> qp = pd->pd->CreateQp(options);
  MutexLock lock(&mu_);
  pd->book.Get(mu_).pending--;
  creating_.qps--;
  if (!qp.ok()) return qp.status();
  auto e = std::make_unique<QpEntry>();
  e->id = next_qp_.Next();
  e->pd = pd;
  e->options = options;
  e->qp = std::move(qp).value();
  e->book.Get(mu_).local = e->qp->local();
  e->book.Get(mu_).state = fabric::QpState::kInit;
  Attach(mu_, pd, e.get());
  v1::QueuePair out = ToProto(*e);
  qps_.emplace(e->id, std::move(e));
  return out;
}

std::vector<v1::QueuePair> Registry::QueryAndConvert(const std::vector<QpEntry*>& pinned) const {
  // Pinned by the caller (`readers`: deletion waits), queried without mu_: a remote access error moves a
  // QP to ERROR without any completion of rdmad's, and this is where it shows.
  std::vector<fabric::QpState> states;
  for (QpEntry* e : pinned) states.push_back(e->get()->state());
  MutexLock lock(&mu_);
  std::vector<v1::QueuePair> out;
  for (size_t i = 0; i < pinned.size(); ++i) {
    QpEntry* e = pinned[i];
    if (states[i] != fabric::QpState::kUnknown) e->book.Get(mu_).state = states[i];
    e->book.Get(mu_).readers--;
    out.push_back(ToProto(*e));
  }
  return out;
}

void Registry::AwaitNoReaders(QpEntry& e) const {
  mu_.Await([this, &e]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return e.book.Get(mu_).readers == 0; });
}

absl::StatusOr<v1::QueuePair> Registry::GetQp(const std::string& name) const {
  QpEntry* e = nullptr;
  {
    MutexLock lock(&mu_);
    RDMAD_ASSIGN_OR_RETURN(e, FindQp(name, "name"));
    e->book.Get(mu_).readers++;
  }
  return QueryAndConvert({e}).front();
}

std::vector<v1::QueuePair> Registry::ListQps(uint64_t after, size_t limit) const {
  std::vector<QpEntry*> pinned;
  {
    MutexLock lock(&mu_);
    for (auto it = qps_.upper_bound(after); it != qps_.end() && (limit == 0 || pinned.size() < limit); ++it) {
      it->second->book.Get(mu_).readers++;
      pinned.push_back(it->second.get());
    }
  }
  return QueryAndConvert(pinned);
}

absl::StatusOr<Registry::PdUsage> Registry::UsageOfPd(const std::string& name) const {
  MutexLock lock(&mu_);
  RDMAD_ASSIGN_OR_RETURN(const PdEntry* pd, FindPd(name, "pd"));
  PdUsage u;
  u.mrs = pd->book.Get(mu_).mrs.size();
  u.mr_bytes = pd->book.Get(mu_).mr_bytes + pd->book.Get(mu_).bounds_bytes;
  u.mws = pd->book.Get(mu_).own_mws;
  u.qps = pd->book.Get(mu_).user_qps;
  return u;
}

absl::StatusOr<std::string> Registry::PdOf(const std::string& name) const {
  MutexLock lock(&mu_);
  const PdEntry* pd = nullptr;
  if (absl::StartsWith(name, "pds/")) {
    RDMAD_ASSIGN_OR_RETURN(pd, FindPd(name, "name"));
  } else if (absl::StartsWith(name, "mrs/")) {
    RDMAD_ASSIGN_OR_RETURN(MrEntry * e, FindMr(name, "name"));
    pd = e->book.Get(mu_).pd;
  } else if (absl::StartsWith(name, "mws/")) {
    RDMAD_ASSIGN_OR_RETURN(MwEntry * e, FindMw(name, "name"));
    pd = e->pd;
  } else {
    RDMAD_ASSIGN_OR_RETURN(QpEntry * e, FindQp(name, "name"));
    pd = e->pd;
  }
  return Name("pds", pd->id);
}

absl::StatusOr<v1::QueuePair> Registry::ConnectQp(const v1::ConnectQpRequest& request) {
  if (request.remote().qpn() == 0 || request.remote().qpn() > 0xffffff) {
    return InvalidArgument("remote.qpn", "must be a 24-bit QP number other than 0");
  }
  if (request.remote().psn() > 0xffffff) return InvalidArgument("remote.psn", "must fit in 24 bits");
  if (request.remote().lid() > 0xffff) return InvalidArgument("remote.lid", "must fit in 16 bits");
  QpEntry* e = nullptr;
  {
    MutexLock lock(&mu_);
    RDMAD_ASSIGN_OR_RETURN(e, FindQp(request.name(), "name"));
    if (e->book.Get(mu_).busy) return InProgress("name", request.name(), e->book.Get(mu_).busy);
    if (!e->cm_id.empty()) {
      return FailedPrecondition("name", absl::StrCat(request.name(), " belongs to ", e->cm_id,
                                                     ": rdma_cm connects it (CmIds.Connect / Accept)"));
    }
    if (e->book.Get(mu_).type2_windows > 0) {
      return Busy("name", absl::StrCat(request.name(), " has ", e->book.Get(mu_).type2_windows,
                                       " type 2 window(s) bound on it; reconnecting would reset it"));
    }
    e->book.Get(mu_).busy = "ConnectQp";
  }
  fabric::QpEndpoint remote{request.remote().qpn(), request.remote().psn(), request.remote().gid(),
                            static_cast<uint16_t>(request.remote().lid())};
  absl::Status connected = e->qp->Connect(remote);
  const fabric::QpState state = e->qp->state();
  const fabric::QpEndpoint local = e->qp->local();  // a reconnect draws a new PSN
  MutexLock lock(&mu_);
  e->book.Get(mu_).busy = nullptr;
  e->book.Get(mu_).state = state;
  e->book.Get(mu_).local = local;
  if (!connected.ok()) return connected;
  e->book.Get(mu_).has_remote = true;
  e->book.Get(mu_).remote = remote;
  return ToProto(*e);
}

absl::Status Registry::DeleteQp(const std::string& name) {
  std::unique_ptr<QpEntry> owned;
  {
    MutexLock lock(&mu_);
    RDMAD_ASSIGN_OR_RETURN(QpEntry * e, FindQp(name, "name"));
    if (e->book.Get(mu_).busy) return InProgress("name", name, e->book.Get(mu_).busy);
    if (!e->cm_id.empty()) {
      return FailedPrecondition("name", absl::StrCat(name, " belongs to ", e->cm_id, ": delete the CM id instead"));
    }
    if (e->book.Get(mu_).type2_windows > 0) {
      return Busy("name", absl::StrCat(name, " has ", e->book.Get(mu_).type2_windows,
                                       " type 2 window(s) bound on it: invalidate or deallocate them first"));
    }
    for (const auto& [id, w] : e->book.Get(mu_).windows) {
      if (w->book.Get(mu_).busy) return InProgress("name", Name("mws", id), w->book.Get(mu_).busy);
    }
    for (auto& [id, w] : e->book.Get(mu_).windows) {  // a type 1 window bound through this QP does not depend on it
      w->book.Get(mu_).qp = nullptr;
      w->book.Get(mu_).binding.clear_qp();
    }
    e->book.Get(mu_).busy = "DeleteQp";
    AwaitNoReaders(*e);  // a GetQp querying it finishes first
    Detach(mu_, e->pd, e);
    owned = std::move(qps_[e->id]);
    qps_.erase(e->id);
  }
  owned.reset();  // ibv_destroy_qp, ibv_destroy_cq, without the lock
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------------------
// QPs of rdma_cm ids

absl::StatusOr<v1::QueuePair> Registry::AdoptCmQp(const std::string& pd_name, const std::string& cm_id,
                                                  const CmQpFactory& create) {
  PdEntry* pd = nullptr;
  {
    MutexLock lock(&mu_);
    RDMAD_ASSIGN_OR_RETURN(pd, FindPd(pd_name, "pd"));
    if (pd->book.Get(mu_).busy) return InProgress("pd", pd_name, pd->book.Get(mu_).busy);
    pd->book.Get(mu_).pending++;  // the PD stays while the QP is created on it
  }
  absl::StatusOr<fabric::Qp*> qp = create(*pd->pd, pd->device);
  MutexLock lock(&mu_);
  pd->book.Get(mu_).pending--;
  if (!qp.ok()) return qp.status();
  auto e = std::make_unique<QpEntry>();
  e->id = next_qp_.Next();
  e->pd = pd;
  e->borrowed = *qp;
  e->cm_id = cm_id;
  e->book.Get(mu_).local = (*qp)->local();
  e->book.Get(mu_).state = fabric::QpState::kInit;
  Attach(mu_, pd, e.get());
  v1::QueuePair out = ToProto(*e);
  qps_.emplace(e->id, std::move(e));
  return out;
}

void Registry::SetCmQpState(const std::string& name, fabric::QpState state, const fabric::QpEndpoint* remote,
                            const fabric::QpEndpoint* local) {
  MutexLock lock(&mu_);
  absl::StatusOr<QpEntry*> e = FindQp(name, "qp");
  if (!e.ok() || (*e)->cm_id.empty()) return;
  (*e)->book.Get(mu_).state = state;
  if (local != nullptr) (*e)->book.Get(mu_).local = *local;
  if (remote != nullptr) {
    (*e)->book.Get(mu_).has_remote = true;
    (*e)->book.Get(mu_).remote = *remote;
  }
}

absl::Status Registry::ReleaseCmQp(const std::string& name, bool force, const std::string& field) {
  std::vector<std::unique_ptr<MwEntry>> windows;
  std::vector<std::unique_ptr<fabric::Mr>> bounds;
  {
    MutexLock lock(&mu_);
    RDMAD_ASSIGN_OR_RETURN(QpEntry * e, FindQp(name, field));
    if (e->cm_id.empty()) return FailedPrecondition(field, absl::StrCat(name, " does not belong to a CM id"));
    for (const auto& [id, w] : e->book.Get(mu_).windows) {
      if (w->book.Get(mu_).busy) return InProgress(field, Name("mws", id), w->book.Get(mu_).busy);
    }
    if (e->book.Get(mu_).type2_windows > 0 && !force) {
      return Busy(field, absl::StrCat(name, " (the QP of ", e->cm_id, ") has ", e->book.Get(mu_).type2_windows,
                                      " type 2 window(s) bound on it: invalidate or deallocate them first"));
    }
    // Type 1 windows bound through it do not depend on it; type 2 ones (force only: shutdown) go with it.
    for (auto it = e->book.Get(mu_).windows.begin(); it != e->book.Get(mu_).windows.end();) {
      MwEntry* w = it->second;
      ++it;
      if (w->type == fabric::MwType::kType1) {
        e->book.Get(mu_).windows.erase(w->id);
        w->book.Get(mu_).qp = nullptr;
        w->book.Get(mu_).binding.clear_qp();
        continue;
      }
      bounds.push_back(Unbind(*w));
      Detach(mu_, w->pd, w);
      windows.push_back(std::move(mws_[w->id]));
      mws_.erase(w->id);
    }
    e->book.Get(mu_).busy = "ReleaseCmQp";
    AwaitNoReaders(*e);  // a GetQp querying it finishes first
    Detach(mu_, e->pd, e);
    qps_.erase(e->id);  // borrowed: the QP itself is destroyed with its CM id
  }
  windows.clear();  // ibv_dealloc_mw, then the bounds regions
  bounds.clear();
  return absl::OkStatus();
}

}  // namespace rdmad
