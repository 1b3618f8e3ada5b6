// CmManager: what a channel's dispatcher does with each event, the steps of a connect, carrying out a
// data-plane handler's decision, and destroying an id. Everything here runs on the loop that owns the id
// (or, in ~CmManager, after every loop stopped). Threads: see manager.h.
#include <algorithm>
#include <cctype>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/cm/manager.h"
#include "server/dispatch/handoffs.h"
#include "server/cm/token.h"
#include "server/common/log.h"
#include "server/common/status.h"
#include "server/registry/rules.h"

namespace rdmad::cm {
namespace {

using fabric::CmEventType;

// The private data of a REJECTED event, for people: rdmad's reject reason if it is one, else hex.
std::string DescribeReject(const std::string& data) {
  absl::StatusOr<Reject> r = DecodeReject(data);
  if (r.ok()) return absl::StrCat("rdmad rejected it: ", RejectReasonName(r->reason));
  const size_t used = data.find_last_not_of('\0');
  if (used == std::string::npos) return "no private data";
  return absl::StrCat("private data 0x", absl::BytesToHexString(data.substr(0, std::min<size_t>(used + 1, 32))));
}

}  // namespace

void CmManager::OnChannelReadable(Channel* ch) {
  ch->loop->AssertInLoop();
  std::vector<fabric::CmEvent> events = ch->cm->Drain();  // each already acknowledged
  ch->pending += events.size();
  for (fabric::CmEvent& e : events) {
    Dispatch(ch, std::move(e));
    ch->pending--;
    ch->dispatched++;
  }
}

void CmManager::Publish(Channel* ch, const Id* id, const fabric::CmEvent& event, const std::string& listener,
                        bool data_plane_request) {
  v1::CmEvent out;
  out.set_cm_id(id ? Name("cmids", id->id) : "");
  out.set_type(fabric::CmEventName(event.type));
  out.set_status(event.status);
  if (!data_plane_request) {
    out.set_private_data(event.private_data);
  } else if (DataPlaneHandler* handler = data_plane_.load()) {
    out.set_private_data(handler->Shown(event.private_data));
  }
  out.set_channel(Name("channels", ch->id));
  out.set_listener(listener);
  events_.Publish(std::move(out));
}

void CmManager::Dispatch(Channel* ch, fabric::CmEvent event) {
  ch->loop->AssertInLoop();
  if (event.type == CmEventType::kConnectRequest) return OnConnectRequest(ch, std::move(event));
  // The device an active id resolved to (read before the lock: no rdma_* call under mu_).
  std::string device;
  if (event.type == CmEventType::kAddrResolved) {
    fabric::CmId* cm = nullptr;  // only this loop destroys the ids on its channel: safe after the lock
    {
      MutexLock lock(&mu_);
      auto it = ids_.find(event.key);
      if (it != ids_.end() && it->second->channel == ch) cm = it->second->cm.get();
    }
    if (cm && cm->device()) device = absl::StrCat("devices/", cm->device()->info().name);
  }
  Id* id = nullptr;
  bool data_plane = false;
  {
    MutexLock lock(&mu_);
    auto it = ids_.find(event.key);
    if (it != ids_.end() && it->second->channel == ch) id = it->second.get();
    if (id == nullptr) {
      RDMAD_LOG_DEBUG("%s for an id rdmad no longer has (key %llu)", fabric::CmEventName(event.type),
                      static_cast<unsigned long long>(event.key));
      return;
    }
    id->book.Get(mu_).events++;
    id->book.Get(mu_).last_event = fabric::CmEventName(event.type);
    data_plane = id->book.Get(mu_).data_plane;
    switch (event.type) {
      case CmEventType::kAddrResolved:
        SetStateLocked(id, v1::CM_ADDR_RESOLVED);
        id->book.Get(mu_).device = device;
        break;
      case CmEventType::kRouteResolved:
        SetStateLocked(id, v1::CM_ROUTE_RESOLVED);
        break;
      case CmEventType::kEstablished:
        SetStateLocked(id, v1::CM_CONNECTED);
        break;
      case CmEventType::kDisconnected:
        SetStateLocked(id, v1::CM_DISCONNECTED);
        break;
      case CmEventType::kRejected:
        SetStateLocked(id, v1::CM_REJECTED);
        id->book.Get(mu_).error = absl::StrCat("rejected by the peer (status ", event.status, "): ", DescribeReject(event.private_data));
        break;
      case CmEventType::kAddrError:
      case CmEventType::kRouteError:
      case CmEventType::kConnectError:
      case CmEventType::kUnreachable:
      case CmEventType::kDeviceRemoval:
        SetStateLocked(id, v1::CM_ERROR);
        id->book.Get(mu_).error = absl::StrCat(fabric::CmEventName(event.type), " (status ", event.status, ")");
        break;
      default:
        break;  // CONNECT_RESPONSE, TIMEWAIT_EXIT, ADDR_CHANGE, multicast: counted and published only
    }
  }
  Publish(ch, id, event, "");

  switch (event.type) {
    case CmEventType::kAddrResolved:
      if (id->connect_done) {
        if (absl::Status s = id->cm->ResolveRoute(id->timeout_ms); !s.ok()) FinishConnect(id, s);
      }
      break;
    case CmEventType::kRouteResolved:
      if (id->connect_done) {
        absl::Status s = CreateIdQp(id);
        if (s.ok()) s = id->cm->Connect(id->connect_data);
        if (!s.ok()) return FinishConnect(id, s);
        MutexLock lock(&mu_);
        SetStateLocked(id, v1::CM_CONNECTING);
      }
      break;
    case CmEventType::kEstablished: {
      const fabric::SockAddr local = id->cm->local(), remote = id->cm->remote();
      std::string qp;
      {
        MutexLock lock(&mu_);
        qp = id->book.Get(mu_).qp;
        id->book.Get(mu_).local = local;
        id->book.Get(mu_).remote = remote;
      }
      // rdma_cm chose the PSN on the way to RTS: the endpoint shown is read now.
      if (!qp.empty() && id->cm->qp() != nullptr) {
        const fabric::QpEndpoint endpoint = id->cm->qp()->local();
        registry_->SetCmQpState(qp, fabric::QpState::kRts, nullptr, &endpoint);
      }
      if (id->connect_done) FinishConnect(id, absl::OkStatus());
      if (data_plane) {
        std::string tag;
        {
          MutexLock lock(&mu_);
          tag = id->book.Get(mu_).tag;
        }
        RDMAD_LOG_INFO("cmids/%llu: data-plane connection established%s%s", static_cast<unsigned long long>(id->id),
                       tag.empty() ? "" : " for ", tag.c_str());
        dispatch::Handoffs::Scope path(id->path_handoffs);  // the connect request's path, on its accept's thread
        if (DataPlaneHandler* handler = data_plane_.load()) handler->OnEstablished(Name("cmids", id->id), tag, qp);
      }
      break;
    }
    case CmEventType::kDisconnected: {
      // Completes the disconnection: the peer that called rdma_disconnect gets its own DISCONNECTED only
      // once this side calls it too (otherwise after a timeout of about 100 s, measured on rxe). On an id
      // that disconnected first this is a no-op.
      (void)id->cm->Disconnect();
      std::string qp;
      {
        MutexLock lock(&mu_);
        qp = id->book.Get(mu_).qp;
      }
      if (!qp.empty()) registry_->SetCmQpState(qp, fabric::QpState::kError, nullptr, nullptr);
      if (id->connect_done) FinishConnect(id, absl::UnavailableError("disconnected before the connection was established"));
      // rdmad's own data-plane connections go when the peer leaves.
      if (data_plane) EndDataPlane(id, "disconnected");
      break;
    }
    case CmEventType::kRejected:
    case CmEventType::kAddrError:
    case CmEventType::kRouteError:
    case CmEventType::kConnectError:
    case CmEventType::kUnreachable:
    case CmEventType::kDeviceRemoval:
      if (id->connect_done) {
        std::string error;
        {
          MutexLock lock(&mu_);
          error = id->book.Get(mu_).error;
        }
        FinishConnect(id, event.type == CmEventType::kRejected ? absl::FailedPreconditionError(error)
                                                               : absl::UnavailableError(error));
      }
      if (data_plane) EndDataPlane(id, "failed");  // the client's connect did not complete
      break;
    default:
      break;
  }
}

void CmManager::OnConnectRequest(Channel* ch, fabric::CmEvent event) {
  ch->loop->AssertInLoop();
  Id* id = nullptr;
  std::string listener;
  bool data_plane = false;
  // Read from the new id before taking the lock (no rdma_* call under mu_).
  fabric::SockAddr local, remote;
  std::string device;
  if (event.new_id) {
    local = event.new_id->local();
    remote = event.new_id->remote();
    if (event.new_id->device()) device = absl::StrCat("devices/", event.new_id->device()->info().name);
  }
  {
    MutexLock lock(&mu_);
    auto it = ids_.find(event.key);
    const bool over_limit = options_.max_connections > 0 && total_connections_ >= options_.max_connections &&
                            it != ids_.end() && !it->second->book.Get(mu_).data_plane;
    if (it == ids_.end() || it->second->book.Get(mu_).state != v1::CM_LISTENING || quiescing_ || !event.new_id || over_limit) {
      // No listener any more, or a user listener's request past the connections limit (rdmad's data-plane
      // requests are refused with a reason, below): handled below, without the lock.
      id = nullptr;
    } else {
      Id* l = it->second.get();
      l->book.Get(mu_).events++;
      l->book.Get(mu_).last_event = fabric::CmEventName(event.type);
      listener = Name("cmids", l->id);
      data_plane = l->book.Get(mu_).data_plane;
      auto e = std::make_unique<Id>();
      e->id = next_id_.Next();
      e->channel = ch;
      e->pd = l->pd;
      e->cm = std::move(event.new_id);
      Id::Book& book = e->book.Get(mu_);
      book.state = v1::CM_CONNECT_REQUEST;
      book.listener = listener;
      book.data_plane = data_plane;
      book.local = local;
      book.remote = remote;
      book.device = device;
      book.events = 1;
      book.last_event = fabric::CmEventName(event.type);
      id = e.get();
      ch->ids.Get(mu_).insert(e->id);
      AccountLocked(*e, +1);
      ids_.emplace(e->id, std::move(e));
    }
  }
  if (id == nullptr) {
    // The new id is rejected and destroyed at once (its event was acknowledged already).
    if (event.new_id) (void)event.new_id->Reject("");
    return;
  }
  id->cm->set_key(id->id);  // its later events name it
  Publish(ch, id, event, listener, data_plane);
  if (data_plane) OnDataPlaneRequest(id, event.private_data);
}

// On the listener's loop: the handler decides. A rejected request's id is destroyed; an accepted one moves
// to the least loaded worker channel, whose loop creates the QP on the decided PD and accepts.
void CmManager::OnDataPlaneRequest(Id* id, const std::string& private_data) {
  // The request starts a path whose hand-offs are counted up to the grant's key (dispatch/handoffs.h).
  dispatch::Handoffs::Scope path(0);
  DataPlaneHandler* handler = data_plane_.load();
  DataPlaneRequest request;
  request.cm_id = Name("cmids", id->id);
  request.private_data = private_data;
  {
    MutexLock lock(&mu_);
    request.remote = id->book.Get(mu_).remote;
  }
  DataPlaneDecision decision;
  if (handler != nullptr) {
    decision = handler->OnRequest(request);
  } else {
    decision.error = "no handler for rdmad's data-plane listener";
  }
  if (!decision.accept) {
    if (absl::Status s = id->cm->Reject(decision.reject_data); !s.ok()) {
      RDMAD_LOG_WARN("rdma_reject failed: %s", std::string(s.message()).c_str());
    }
    {
      MutexLock lock(&mu_);
      id->book.Get(mu_).error = std::move(decision.error);
    }
    (void)Destroy(id, false);
    return;
  }
  Channel* worker = nullptr;
  Channel* from = nullptr;
  {
    MutexLock lock(&mu_);
    worker = LeastLoadedWorker();
    from = id->channel;
  }
  if (worker != nullptr && worker != from) {
    // Before accepting: ESTABLISHED and every later event of the connection arrive on the worker.
    if (absl::Status s = id->cm->Migrate(*worker->cm); !s.ok()) {
      RDMAD_LOG_WARN("cmids/%llu: migration to a worker channel failed, served on the listener's: %s",
                     static_cast<unsigned long long>(id->id), std::string(s.message()).c_str());
    } else {
      MutexLock lock(&mu_);
      from->ids.Get(mu_).erase(id->id);
      worker->ids.Get(mu_).insert(id->id);
      id->channel = worker;
      id->book.Get(mu_).migrations++;
    }
  }
  Channel* owner;
  {
    MutexLock lock(&mu_);
    owner = id->channel;
    AccountLocked(*id, -1);
    id->pd = decision.pd;
    AccountLocked(*id, +1);
    id->book.Get(mu_).tag = decision.tag;
  }
  fabric::CmQpOptions qp_options = std::move(decision.qp);
  if (qp_options.receive.slots > 0) {
    // What the client sends goes to the handler, named by the connection's id.
    qp_options.receive.on_message = [this, name = Name("cmids", id->id)](std::string bytes) {
      dispatch::Handoffs::Scope path(0);  // a message starts the path of what it asks for
      if (DataPlaneHandler* handler = data_plane_.load()) handler->OnMessage(name, bytes);
    };
  }
  RunOnIdLoop(id->id, owner,
              [this, accepted = std::move(decision.accepted), failed = std::move(decision.reject_data),
               accept_data = std::move(decision.accept_data),
               qp_options = std::move(qp_options)](absl::StatusOr<Id*> found) mutable {
                if (!found.ok()) return;
                Id* id = *found;
                absl::Status s;
                {
                  // A PD being deleted gets no new connection (BeginPdRemoval): one decided before is seen by
                  // ClosePdConnections, whose snapshot comes after the mark, and closed with the others.
                  MutexLock lock(&mu_);
                  if (removing_pds_.count(id->pd) > 0) {
                    s = FailedPrecondition("pd", absl::StrCat(id->pd, " is being deleted"));
                  }
                }
                id->path_handoffs = dispatch::Handoffs::Current();
                if (s.ok()) s = CreateIdQp(id, qp_options);
                if (s.ok()) s = id->cm->Accept(accept_data);
                if (s.ok()) {
                  MutexLock lock(&mu_);
                  SetStateLocked(id, v1::CM_CONNECTING);
                } else {
                  RDMAD_LOG_WARN("cmids/%llu: data-plane accept failed: %s", static_cast<unsigned long long>(id->id),
                                 std::string(s.message()).c_str());
                  (void)id->cm->Reject(failed);
                }
                if (accepted) std::move(accepted)(s);
                if (!s.ok()) EndDataPlane(id, "not accepted");
              });
}

void CmManager::EndDataPlane(Id* id, const char* why) {
  std::string tag;
  {
    MutexLock lock(&mu_);
    tag = id->book.Get(mu_).tag;
  }
  const std::string name = Name("cmids", id->id);
  DataPlaneHandler* handler = data_plane_.load();
  if (tag.empty() || handler == nullptr) {
    absl::StatusOr<v1::CmId> gone = Destroy(id, false);
    if (!gone.ok()) {
      RDMAD_LOG_WARN("%s: data-plane connection %s but kept: %s", name.c_str(), why,
                     std::string(gone.status().message()).c_str());
    }
    return;
  }
  if (id->gone_told) return;  // DISCONNECTED after an error, or twice: the handler knows already
  id->gone_told = true;
  RDMAD_LOG_INFO("%s: data-plane connection of %s %s", name.c_str(), tag.c_str(), why);
  handler->OnGone(name, tag, [this, name]() {
    RunOnId(name, [this, name](absl::StatusOr<Id*> found) {
      if (!found.ok()) return;
      absl::StatusOr<v1::CmId> gone = Destroy(*found, false);
      if (!gone.ok()) RDMAD_LOG_WARN("%s kept: %s", name.c_str(), std::string(gone.status().message()).c_str());
    });
  });
}

CmManager::Channel* CmManager::LeastLoadedWorker() {
  Channel* best = nullptr;
  for (auto& [n, ch] : channels_) {
    if (ch->role != v1::CHANNEL_WORKER) continue;
    if (best == nullptr || ch->ids.Get(mu_).size() < best->ids.Get(mu_).size()) best = ch.get();
  }
  return best;
}

absl::Status CmManager::CreateIdQp(Id* id, const fabric::CmQpOptions& options) {
  std::string pd, name;
  {
    MutexLock lock(&mu_);
    pd = id->pd;
    name = Name("cmids", id->id);
    if (!id->book.Get(mu_).qp.empty()) return absl::OkStatus();
  }
  fabric::CmId* cm = id->cm.get();
  absl::StatusOr<v1::QueuePair> qp =
      registry_->AdoptCmQp(pd, name, [cm, &options](fabric::Pd& p, fabric::Device*) -> absl::StatusOr<fabric::Qp*> {
        RDMAD_RETURN_IF_ERROR(cm->CreateQp(p, options));
        return cm->qp();
      });
  if (!qp.ok()) {
    // The PD is the id's, not a field of the request that got here (Connect, Accept): the error names the id
    // (docs/api.md: the message starts with the request field at fault). A PD
    // deleted since the id was created leaves the id unable to get a QP: a precondition, not a missing id.
    if (qp.status().code() == absl::StatusCode::kNotFound) {
      return FailedPrecondition("name", absl::StrCat(name, ": its PD ", pd, " was deleted: it cannot get a QP"));
    }
    const std::string old = FieldOf(qp.status());
    absl::string_view message = qp.status().message();
    if (!old.empty() && absl::StartsWith(message, old + ": ")) message.remove_prefix(old.size() + 2);
    absl::Status out(qp.status().code(), absl::StrCat("name: ", name, ": creating its QP on ", pd, ": ", message));
    qp.status().ForEachPayload([&out](absl::string_view key, const absl::Cord& value) { out.SetPayload(key, value); });
    out.SetPayload(kFieldPayload, absl::Cord("name"));
    return out;
  }
  MutexLock lock(&mu_);
  id->book.Get(mu_).qp = qp->name();
  return absl::OkStatus();
}

void CmManager::FinishConnect(Id* id, absl::Status status) {
  Done<v1::CmId> done = std::move(id->connect_done);
  id->connect_done = nullptr;
  id->connect_data.clear();
  {
    MutexLock lock(&mu_);
    AccountLocked(*id, -1);
    id->book.Get(mu_).connecting = false;  // CONNECTED or CONNECTING count it from here, or it failed
    AccountLocked(*id, +1);
    if (!status.ok()) {
      if (id->book.Get(mu_).state != v1::CM_REJECTED) SetStateLocked(id, v1::CM_ERROR);
      if (id->book.Get(mu_).error.empty()) id->book.Get(mu_).error = std::string(status.message());
    }
  }
  if (!done) return;
  if (status.ok()) return std::move(done)(Snapshot(id));
  // A failure that names a request field starts with it; the others say which id they are about.
  std::move(done)(FieldOf(status).empty() ? WithContext(status, Name("cmids", id->id)) : status);
}

absl::StatusOr<v1::CmId> CmManager::Destroy(Id* id, bool force) {
  std::string qp, name = Name("cmids", id->id);
  {
    MutexLock lock(&mu_);
    qp = id->book.Get(mu_).qp;
  }
  if (!qp.empty()) {
    // The QP leaves the registry first (refused while type 2 windows are bound on it, unless forced).
    RDMAD_RETURN_IF_ERROR(registry_->ReleaseCmQp(qp, force, "name"));
  }
  if (id->connect_done) FinishConnect(id, absl::AbortedError("the id was deleted"));
  std::unique_ptr<Id> owned;
  v1::CmId last;
  std::vector<absl::AnyInvocable<void() &&>> closed;  // ClosePdConnections waiting for this id last
  {
    MutexLock lock(&mu_);
    id->book.Get(mu_).qp.clear();
    last = ToProto(*id);
    id->channel->ids.Get(mu_).erase(id->id);
    AccountLocked(*id, -1);
    owned = std::move(ids_[id->id]);
    ids_.erase(id->id);
    for (auto it = closings_.begin(); it != closings_.end();) {
      if ((*it)->ids.erase(id->id) > 0 && (*it)->ids.empty()) {
        closed.push_back(std::move((*it)->done));
        it = closings_.erase(it);
      } else {
        ++it;
      }
    }
  }
  owned.reset();  // ~CmId: its QP (rdma_destroy_qp), then rdma_destroy_id; its events were all acknowledged
  events_.CloseCmId(name);
  {
    // This loop published every event of the id, and publishes none from here.
    MutexLock lock(&mu_);
    if (cm_id_gone_) cm_id_gone_(name);
  }
  RDMAD_LOG_INFO("%s destroyed", name.c_str());
  for (auto& done : closed) std::move(done)();  // the QP is destroyed: its PD can go
  return last;
}

}  // namespace rdmad::cm
