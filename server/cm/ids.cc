// CmManager: operations on CM ids. Each runs on the loop of the channel that owns the id (RunOnId), so it
// never races another call on the same id, a migration included. Threads: see manager.h.
#include <cerrno>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/cm/manager.h"
#include "server/common/log.h"
#include "server/common/status.h"
#include "server/dispatch/handoffs.h"
#include "server/registry/rules.h"

namespace rdmad::cm {
namespace {

fabric::SockAddr FromProto(const v1::SocketAddress& a) { return fabric::SockAddr{a.address(), static_cast<uint16_t>(a.port())}; }

absl::Status CheckAddress(const v1::SocketAddress& a, const std::string& field, bool port_required) {
  if (a.address().empty()) return InvalidArgument(field + ".address", "is required");
  if (a.port() > 65535) return InvalidArgument(field + ".port", "must be at most 65535");
  if (port_required && a.port() == 0) return InvalidArgument(field + ".port", "is required");
  return absl::OkStatus();
}

absl::Status WrongState(const std::string& name, v1::CmIdState state, const char* wanted) {
  return FailedPrecondition("name", absl::StrCat(name, " is ", v1::CmIdState_Name(state), "; ", wanted));
}

absl::Status CheckPrivateData(const std::string& data, size_t max, const char* where) {
  if (data.size() <= max) return absl::OkStatus();
  return InvalidArgument("private_data", absl::StrCat("at most ", max, " bytes in ", where));
}

}  // namespace

bool CmManager::Quiescing() const {
  MutexLock lock(&mu_);
  return quiescing_;
}

v1::CmIdState CmManager::StateOf(const Id* id) const {
  MutexLock lock(&mu_);
  return id->book.Get(mu_).state;
}

void CmManager::AccountLocked(const Id& id, int sign) {
  const bool connection = id.book.Get(mu_).connecting || id.book.Get(mu_).state == v1::CM_CONNECTED || id.book.Get(mu_).state == v1::CM_CONNECTING ||
                          id.book.Get(mu_).state == v1::CM_CONNECT_REQUEST;
  // rdmad-wide: ids made by CreateCmId (they have a PD; the data-plane listener has none), and every
  // connection, a data-plane request not yet redeemed included (it holds an rdma_cm id all the same).
  if (!id.book.Get(mu_).data_plane && !id.pd.empty()) total_ids_ += sign;
  if (connection) total_connections_ += sign;
  if (id.pd.empty()) return;  // rdmad's own listener, or a data-plane id not yet redeemed
  if (id.book.Get(mu_).data_plane && !connection) return;
  PdUsage& u = usage_[id.pd];
  if (!id.book.Get(mu_).data_plane) u.ids += sign;
  if (connection) u.connections += sign;
  if (u.ids == 0 && u.connections == 0) usage_.erase(id.pd);
}

void CmManager::SetStateLocked(Id* id, v1::CmIdState state) {
  AccountLocked(*id, -1);
  id->book.Get(mu_).state = state;
  AccountLocked(*id, +1);
}

CmManager::PdUsage CmManager::UsageOfPd(const std::string& pd) const {
  MutexLock lock(&mu_);
  auto it = usage_.find(pd);
  return it == usage_.end() ? PdUsage{} : it->second;
}

void CmManager::CreateCmId(const v1::CreateCmIdRequest& request, Done<v1::CmId> done) {
  if (cm_ == nullptr) return std::move(done)(absl::UnavailableError("rdma_cm is unavailable on this host"));
  if (request.pd().empty()) {
    return std::move(done)(InvalidArgument("pd", "is required: the PD an id's QP is created on, whose tenant owns it"));
  }
  NewId(request.channel(), request.pd(), std::move(done));
}

void CmManager::NewId(const std::string& channel_name, const std::string& pd, Done<v1::CmId> done) {
  if (cm_ == nullptr) return std::move(done)(absl::UnavailableError("rdma_cm is unavailable on this host"));
  if (!pd.empty()) {
    if (absl::Status s = registry_->CheckPd(pd, "pd"); !s.ok()) return std::move(done)(s);
  }
  const std::string channel = channel_name.empty() ? "channels/1" : channel_name;
  uint64_t n = 0;
  Channel* ch = nullptr;
  absl::Status refused = [&]() -> absl::Status {
    MutexLock lock(&mu_);
    if (quiescing_) return absl::UnavailableError("rdmad is shutting down");
    RDMAD_ASSIGN_OR_RETURN(ch, FindChannel(channel, "channel"));
    if (!pd.empty() && removing_pds_.count(pd) > 0) return InProgress("pd", pd, "DeletePd");
    if (!pd.empty() && options_.max_cm_ids > 0 && total_ids_ >= options_.max_cm_ids) {
      return OverLimit("cm_ids", options_.max_cm_ids, total_ids_);
    }
    auto id = std::make_unique<Id>();
    n = id->id = next_id_.Next();
    id->channel = ch;
    id->pd = pd;
    ch->ids.Get(mu_).insert(n);
    AccountLocked(*id, +1);
    ids_.emplace(n, std::move(id));
    return absl::OkStatus();
  }();
  if (!refused.ok()) return std::move(done)(refused);
  RunOnIdLoop(n, ch, [this, pd, done = std::move(done)](absl::StatusOr<Id*> id) mutable {
    if (!id.ok()) return std::move(done)(id.status());
    // The PD is looked at again now that the id counts in its totals: a DeletePd that checked them before
    // has removed the PD by now, or is still marked (BeginPdRemoval), so no id outlives its PD.
    if (!pd.empty()) {
      if (absl::Status s = registry_->CheckPd(pd, "pd"); !s.ok()) {
        (void)Destroy(*id, false);
        return std::move(done)(s);
      }
    }
    absl::StatusOr<std::unique_ptr<fabric::CmId>> created = (*id)->channel->cm->CreateId((*id)->id);
    if (!created.ok()) {
      (void)Destroy(*id, false);
      return std::move(done)(created.status());
    }
    (*id)->cm = std::move(created).value();
    std::move(done)(Snapshot(*id));
  });
}

absl::Status CmManager::BeginPdRemoval(const std::string& pd) {
  MutexLock lock(&mu_);
  auto it = usage_.find(pd);
  if (it != usage_.end() && it->second.ids > 0) {
    std::vector<std::string> names;
    for (const auto& [n, id] : ids_) {
      if (id->pd != pd || id->book.Get(mu_).data_plane) continue;
      if (names.size() == 8) {
        names.push_back("...");
        break;
      }
      names.push_back(Name("cmids", n));
    }
    return Busy("name", absl::StrCat(pd, " still has ", it->second.ids, " CM id(s) (",
                                                        absl::StrJoin(names, ", "), "): delete them first"));
  }
  removing_pds_[pd]++;
  return absl::OkStatus();
}

void CmManager::ClosePdConnections(const std::string& pd, bool untagged, absl::AnyInvocable<void() &&> done) {
  std::vector<std::string> names;
  if (pd.empty()) return std::move(done)();  // rdmad's own listeners have no PD: never theirs to close
  {
    MutexLock lock(&mu_);
    auto closing = std::make_unique<Closing>();
    for (const auto& [n, id] : ids_) {
      const Id::Book& b = id->book.Get(mu_);
      if (id->pd != pd || !b.data_plane || (b.tag.empty() && !untagged)) continue;
      closing->ids.insert(n);
      names.push_back(Name("cmids", n));
    }
    if (!closing->ids.empty() && !quiescing_) {
      closing->done = std::move(done);
      closings_.push_back(std::move(closing));
    }
  }
  if (done) return std::move(done)();  // nothing to close (or shutting down: the registry decides)
  RDMAD_LOG_INFO("%s: closing %zu data-plane connection(s) before its removal", pd.c_str(), names.size());
  for (const std::string& name : names) {
    RunOnId(name, [this](absl::StatusOr<Id*> found) {
      if (found.ok()) EndDataPlane(*found, "closed: its PD is being deleted");  // else: destroyed already
    });
  }
}

absl::Status CmManager::CheckNoTokenConnections(const std::string& pd) const {
  if (pd.empty()) return absl::OkStatus();  // rdmad's own listeners have no PD
  MutexLock lock(&mu_);
  std::vector<std::string> names;
  size_t open = 0;
  for (const auto& [n, id] : ids_) {
    const Id::Book& b = id->book.Get(mu_);
    if (id->pd != pd || !b.data_plane || !b.tag.empty()) continue;
    if (++open <= 5) names.push_back(Name("cmids", n));
  }
  if (open == 0) return absl::OkStatus();
  if (open > 5) names.push_back("...");
  return Busy("name", absl::StrCat(pd, " has ", open, " open data-plane connection(s) of connect tokens (",
                                   absl::StrJoin(names, ", "), "): ask for a cascade, which closes them"));
}

void CmManager::EndPdRemoval(const std::string& pd) {
  MutexLock lock(&mu_);
  auto it = removing_pds_.find(pd);
  if (it != removing_pds_.end() && --it->second == 0) removing_pds_.erase(it);
}

absl::StatusOr<v1::CmId> CmManager::GetCmId(const std::string& name, const std::string& field) const {
  if (cm_ == nullptr) return absl::UnavailableError("rdma_cm is unavailable on this host");
  MutexLock lock(&mu_);
  RDMAD_ASSIGN_OR_RETURN(Id * id, FindId(name, field));
  return ToProto(*id);
}

absl::StatusOr<std::vector<v1::CmId>> CmManager::ListCmIds(const v1::ListCmIdsRequest& request) const {
  if (cm_ == nullptr) return absl::UnavailableError("rdma_cm is unavailable on this host");
  MutexLock lock(&mu_);
  std::vector<v1::CmId> out;
  if (!request.channel().empty()) {
    RDMAD_ASSIGN_OR_RETURN(Channel * ch, FindChannel(request.channel(), "channel"));
    for (uint64_t n : ch->ids.Get(mu_)) out.push_back(ToProto(*ids_.at(n)));
    return out;
  }
  for (const auto& [n, id] : ids_) out.push_back(ToProto(*id));
  return out;
}

void CmManager::Listen(const v1::ListenRequest& request, Done<v1::CmId> done,
                       std::function<bool(const std::string& device)> may_use) {
  if (absl::Status s = CheckAddress(request.address(), "address", true); !s.ok()) return std::move(done)(s);
  if (request.backlog() < 0) return std::move(done)(InvalidArgument("backlog", "must be >= 0"));
  RunOnId(request.name(), [this, request, may_use = std::move(may_use),
                            done = std::move(done)](absl::StatusOr<Id*> found) mutable {
    if (!found.ok()) return std::move(done)(found.status());
    Id* id = *found;
    const v1::CmIdState state = StateOf(id);
    if (state != v1::CM_IDLE || id->cm == nullptr) {
      return std::move(done)(WrongState(request.name(), state, "only an idle id can listen"));
    }
    if (absl::Status s = id->cm->Bind(FromProto(request.address())); !s.ok()) return std::move(done)(s);
    const std::string device = id->cm->device() ? absl::StrCat("devices/", id->cm->device()->info().name) : "";
    if (may_use && !may_use(device)) {
      // The bound address is given back: the id is replaced by a fresh, unbound one under the same key.
      absl::StatusOr<std::unique_ptr<fabric::CmId>> fresh = id->channel->cm->CreateId(id->id);
      if (fresh.ok()) id->cm = std::move(fresh).value();  // the bound one is destroyed
      if (device.empty()) {
        return std::move(done)(FieldError(absl::StatusCode::kPermissionDenied, "address",
                                          absl::StrCat(request.address().address(),
                                                       " is a wildcard: a tenant limited to some devices listens "
                                                       "on an address of one of them")));
      }
      // As for an address of no RDMA device: a device the caller may not use does not exist for it.
      return std::move(done)(WithField(ErrnoError("rdma_bind_addr", ENODEV), "address"));
    }
    absl::Status s = id->cm->Listen(request.backlog() ? request.backlog() : 64);
    if (!s.ok()) return std::move(done)(s);
    const fabric::SockAddr local = id->cm->local();
    {
      MutexLock lock(&mu_);
      SetStateLocked(id, v1::CM_LISTENING);
      id->book.Get(mu_).local = local;
      id->book.Get(mu_).device = device;
    }
    RDMAD_LOG_INFO("%s listening on %s:%u", request.name().c_str(), request.address().address().c_str(),
                   request.address().port());
    std::move(done)(Snapshot(id));
  });
}

void CmManager::Connect(const v1::ConnectRequest& request, Done<v1::CmId> done) {
  if (absl::Status s = CheckAddress(request.remote(), "remote", true); !s.ok()) return std::move(done)(s);
  if (absl::Status s = CheckPrivateData(request.private_data(), fabric::kConnectPrivateDataMax, "a connect request");
      !s.ok()) {
    return std::move(done)(s);
  }
  RunOnId(request.name(), [this, request, done = std::move(done)](absl::StatusOr<Id*> found) mutable {
    if (!found.ok()) return std::move(done)(found.status());
    Id* id = *found;
    const v1::CmIdState state = StateOf(id);
    std::string pd;
    {
      MutexLock lock(&mu_);
      pd = id->pd;
    }
    if (state != v1::CM_IDLE || id->cm == nullptr || id->connect_done) {
      return std::move(done)(WrongState(request.name(), state, "only an idle id can connect"));
    }
    // After Quiesce nothing may wait for an event: the server is about to stop.
    if (Quiescing()) return std::move(done)(absl::UnavailableError("rdmad is shutting down"));
    if (pd.empty()) return std::move(done)(FailedPrecondition("name", absl::StrCat(request.name(), " has no PD for its QP")));
    {
      MutexLock lock(&mu_);
      if (options_.max_connections > 0 && total_connections_ >= options_.max_connections) {
        return std::move(done)(OverLimit("connections", options_.max_connections, total_connections_));
      }
      AccountLocked(*id, -1);
      id->book.Get(mu_).connecting = true;  // a connection from now on, for the limit and the tenant's quota
      AccountLocked(*id, +1);
    }
    id->connect_done = std::move(done);
    id->connect_data = request.private_data();
    id->timeout_ms = request.timeout_ms() ? static_cast<int>(request.timeout_ms()) : 2000;
    {
      MutexLock lock(&mu_);
      id->book.Get(mu_).remote = FromProto(request.remote());
    }
    // ADDR_RESOLVED -> rdma_resolve_route; ROUTE_RESOLVED -> QP, rdma_connect; ESTABLISHED finishes it.
    if (absl::Status s = id->cm->ResolveAddr(FromProto(request.remote()), id->timeout_ms); !s.ok()) {
      FinishConnect(id, s);
    }
  });
}

void CmManager::Accept(const v1::AcceptRequest& request, Done<v1::CmId> done) {
  if (absl::Status s = CheckPrivateData(request.private_data(), fabric::kAcceptPrivateDataMax, "an accept"); !s.ok()) {
    return std::move(done)(s);
  }
  RunOnId(request.name(), [this, request, done = std::move(done)](absl::StatusOr<Id*> found) mutable {
    if (!found.ok()) return std::move(done)(found.status());
    Id* id = *found;
    const v1::CmIdState state = StateOf(id);
    bool data_plane;
    {
      MutexLock lock(&mu_);
      data_plane = id->book.Get(mu_).data_plane;
    }
    if (state != v1::CM_CONNECT_REQUEST) return std::move(done)(WrongState(request.name(), state, "nothing to accept"));
    if (data_plane) {
      return std::move(done)(FailedPrecondition("name", absl::StrCat(request.name(), " is handled by rdmad's data-plane listener")));
    }
    absl::Status s = CreateIdQp(id);
    if (s.ok()) s = id->cm->Accept(request.private_data());
    if (!s.ok()) return std::move(done)(s);
    {
      MutexLock lock(&mu_);
      SetStateLocked(id, v1::CM_CONNECTING);
    }
    std::move(done)(Snapshot(id));
  });
}

void CmManager::Reject(const v1::RejectRequest& request, Done<v1::CmId> done) {
  if (absl::Status s = CheckPrivateData(request.private_data(), fabric::kRejectPrivateDataMax, "a reject"); !s.ok()) {
    return std::move(done)(s);
  }
  RunOnId(request.name(), [this, request, done = std::move(done)](absl::StatusOr<Id*> found) mutable {
    if (!found.ok()) return std::move(done)(found.status());
    Id* id = *found;
    const v1::CmIdState state = StateOf(id);
    if (state != v1::CM_CONNECT_REQUEST) return std::move(done)(WrongState(request.name(), state, "nothing to reject"));
    if (absl::Status s = id->cm->Reject(request.private_data()); !s.ok()) return std::move(done)(s);
    // A rejected request's id has no further use: it is destroyed, and its last state returned.
    std::move(done)(Destroy(id, false));
  });
}

void CmManager::Disconnect(const std::string& name, Done<v1::CmId> done) {
  RunOnId(name, [this, name, done = std::move(done)](absl::StatusOr<Id*> found) mutable {
    if (!found.ok()) return std::move(done)(found.status());
    Id* id = *found;
    const v1::CmIdState state = StateOf(id);
    if (state != v1::CM_CONNECTED && state != v1::CM_CONNECTING) {
      return std::move(done)(WrongState(name, state, "only a connected id can disconnect"));
    }
    if (absl::Status s = id->cm->Disconnect(); !s.ok()) return std::move(done)(s);
    std::move(done)(Snapshot(id));  // DISCONNECTED arrives as an event
  });
}

void CmManager::DeleteCmId(const std::string& name, Done<v1::CmId> done) {
  bool listener = false;
  {
    MutexLock lock(&mu_);
    for (const std::string& l : listeners_) listener = listener || l == name;
  }
  if (listener) return std::move(done)(FailedPrecondition("name", absl::StrCat(name, " is rdmad's data-plane listener")));
  RunOnId(name, [this, done = std::move(done)](absl::StatusOr<Id*> found) mutable {
    if (!found.ok()) return std::move(done)(found.status());
    std::move(done)(Destroy(*found, false));
  });
}

void CmManager::Migrate(const v1::MigrateCmIdRequest& request, absl::Time deadline, Done<v1::CmId> done) {
  if (request.channel().empty()) {
    return std::move(done)(InvalidArgument("channel", "is required: migrating to no channel (rdma_migrate_id's "
                                                      "synchronous mode) would leave the id without a dispatcher, "
                                                      "and every rdmad id is served by one"));
  }
  absl::StatusOr<uint64_t> to_number = ParseName(request.channel(), "channels", "channel");
  if (!to_number.ok()) return std::move(done)(to_number.status());
  RunOnId(request.name(), [this, request, deadline, to_n = *to_number, done = std::move(done)](
                              absl::StatusOr<Id*> found) mutable {
    if (!found.ok()) return std::move(done)(found.status());
    Id* id = *found;
    if (absl::Now() > deadline) {
      return std::move(done)(absl::DeadlineExceededError(absl::StrCat(
          "migration of ", request.name(), " did not start before the deadline; nothing changed")));
    }
    Channel* to = nullptr;
    absl::StatusOr<v1::CmId> settled = absl::UnknownError("");  // set when there is nothing to do
    bool nothing_to_do = false;
    {
      MutexLock lock(&mu_);
      auto it = channels_.find(to_n);
      if (it == channels_.end()) {
        settled = NotFound("channel", absl::StrCat(request.channel(), " does not exist"));
        nothing_to_do = true;
      } else if (it->second.get() == id->channel) {
        settled = ToProto(*id);
        nothing_to_do = true;
      } else {
        to = it->second.get();
        // Counted on the target first, so DeleteChannel refuses it while the migration runs.
        to->ids.Get(mu_).insert(id->id);
      }
    }
    if (nothing_to_do) return std::move(done)(std::move(settled));
    std::string from;
    // On the source loop, between events: every event it read was acknowledged, so rdma_migrate_id does
    // not wait; events the kernel still holds for the id move to the new channel.
    if (absl::Status s = id->cm->Migrate(*to->cm); !s.ok()) {
      MutexLock lock(&mu_);
      to->ids.Get(mu_).erase(id->id);
      return std::move(done)(s);
    }
    v1::CmId after;
    {
      MutexLock lock(&mu_);
      from = Name("channels", id->channel->id);
      id->channel->ids.Get(mu_).erase(id->id);
      id->channel = to;  // from now on, work for the id goes to `to`'s loop
      id->book.Get(mu_).migrations++;
      // Read now: once mu_ is released, `to`'s loop may run a DeleteCmId and destroy the id while this one
      // still runs.
      after = ToProto(*id);
    }
    RDMAD_LOG_INFO("%s migrated from %s to %s", request.name().c_str(), from.c_str(), request.channel().c_str());
    std::move(done)(std::move(after));
  });
}

absl::StatusOr<std::string> CmManager::ListenDataPlane(const fabric::SockAddr& addr, int backlog,
                                                       DataPlaneHandler* handler) {
  if (cm_ == nullptr) return absl::UnavailableError("rdma_cm is unavailable on this host");
  DataPlaneHandler* expected = nullptr;
  if (!data_plane_.compare_exchange_strong(expected, handler) && expected != handler) {
    return absl::InternalError("every data-plane listener has the same handler");
  }
  absl::StatusOr<v1::CmId> made = AwaitResult<v1::CmId>([&](Done<v1::CmId> done) {
    NewId("channels/1", "", std::move(done));
  });
  absl::Status listening = made.status();
  if (listening.ok()) {
    listening = AwaitResult<v1::CmId>([&](Done<v1::CmId> done) {
                  v1::ListenRequest listen;
                  listen.set_name(made->name());
                  listen.mutable_address()->set_address(addr.host);
                  listen.mutable_address()->set_port(addr.port);
                  listen.set_backlog(backlog);
                  Listen(listen, std::move(done));
                }).status();
  }
  if (!listening.ok()) return WithContext(listening, absl::StrCat("data-plane listener on ", addr.host, ":", addr.port));
  MutexLock lock(&mu_);
  RDMAD_ASSIGN_OR_RETURN(Id * listener, FindId(made->name(), "name"));
  AccountLocked(*listener, -1);
  listener->book.Get(mu_).data_plane = true;
  AccountLocked(*listener, +1);
  listeners_.push_back(made->name());
  RDMAD_LOG_INFO("data-plane listener %s on %s:%u", made->name().c_str(), addr.host.c_str(), addr.port);
  return made->name();
}

absl::Status CmManager::CheckDataPlaneConnections() const {
  if (options_.max_connections == 0) return absl::OkStatus();
  MutexLock lock(&mu_);
  if (total_connections_ <= options_.max_connections) return absl::OkStatus();
  return OverLimit("connections", options_.max_connections, total_connections_ - 1);
}

void CmManager::Send(const std::string& cm_id, std::string bytes, absl::AnyInvocable<void(absl::Status) &&> done) {
  RunOnId(cm_id, [bytes = std::move(bytes), done = std::move(done)](absl::StatusOr<Id*> found) mutable {
    if (!found.ok()) return std::move(done)(found.status());
    fabric::Qp* qp = (*found)->cm->qp();
    if (qp == nullptr) return std::move(done)(absl::FailedPreconditionError("the id has no QP"));
    auto shared = std::make_shared<absl::AnyInvocable<void(absl::Status) &&>>(std::move(done));
    absl::Status posted =
        qp->PostSend(bytes, dispatch::Carry([shared](absl::Status s) mutable { std::move(*shared)(std::move(s)); }));
    if (!posted.ok()) std::move(*shared)(posted);
  });
}

}  // namespace rdmad::cm
