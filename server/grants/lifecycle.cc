// GrantManager: the life of a grant's key. Activation (the client connected: take a window, bind it over
// the granted range, send the key once the bind's completion succeeded) and its end (kill the key at the
// NIC, answer the revokers, say goodbye to the client, release its connection). Every step is a callback
// of the one before, on a CM dispatcher or a device dispatcher; none waits and none holds mu_ across a
// call out. Threads: see manager.h.
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/log.h"
#include "server/common/status.h"
#include "server/grants/manager.h"
#include "server/registry/rules.h"

namespace rdmad::grants {
namespace {

wire::GrantKeyScope WireScope(v1::GrantScope scope) {
  switch (scope) {
    case v1::SCOPE_PD: return wire::GrantKeyScope::kPd;
    case v1::SCOPE_MR: return wire::GrantKeyScope::kMr;
    default: return wire::GrantKeyScope::kQp;
  }
}

constexpr int kMaxActivationAttempts = 4;

}  // namespace

std::string GrantManager::Message(const Entry& e, wire::GrantMessageType type) const {
  wire::GrantMessage m;
  m.type = type;
  m.scope = WireScope(e.info.scope());
  m.grant_id = e.id;
  m.expiry_unix_nanos = absl::ToUnixNanos(e.expiry);
  if (type == wire::GrantMessageType::kActive) {
    m.remote_addr = e.remote_addr;
    m.length = e.info.length();
    m.rkey = e.rkey;
    m.access = e.access_bits;
  } else {
    m.reason = static_cast<uint8_t>(e.info.end_reason() != v1::GRANT_END_UNSPECIFIED ? e.info.end_reason()
                                                                                        : v1::END_ACTIVATION_FAILED);
  }
  return wire::EncodeGrantMessage(m);
}

// ---------------------------------------------------------------------------------------------------------
// Activation

void GrantManager::OnConnected(const std::string& grant, const std::string& cm_id, const std::string& qp) {
  uint64_t id = 0;
  std::string refusal;
  {
    MutexLock lock(&mu_);
    absl::StatusOr<Entry*> found = Find(grant, "grant");
    if (!found.ok() || shutdown_ || (*found)->info.state() != v1::GRANT_ISSUED) {
      // Ended before its client got here (revoked, expired, the MR went): no key, and goodbye.
      wire::GrantMessage m;
      m.type = wire::GrantMessageType::kFailed;
      m.reason = static_cast<uint8_t>(found.ok() ? (*found)->info.end_reason() : v1::END_ACTIVATION_FAILED);
      absl::StatusOr<uint64_t> n = ParseName(grant, "grants", "grant");
      m.grant_id = n.ok() ? *n : 0;
      refusal = wire::EncodeGrantMessage(m);
    } else {
      Entry& e = **found;
      id = e.id;
      e.info.set_state(v1::GRANT_ACTIVATING);
      e.info.set_cm_id(cm_id);
      e.info.set_qp(qp);
      e.busy = true;
    }
  }
  if (id == 0) {
    RDMAD_LOG_INFO("%s: %s connected, but the grant is no longer live", cm_id.c_str(), grant.c_str());
    return Farewell(cm_id, std::move(refusal), nullptr);
  }
  Activate(id);
}

void GrantManager::Activate(uint64_t id) {
  std::string window, pd, mr, qp, name;
  v1::GrantScope scope;
  fabric::MwType type = fabric::MwType::kType2;
  v1::BindMwRequest bind;
  {
    MutexLock lock(&mu_);
    auto it = grants_.find(id);
    if (it == grants_.end()) return;
    Entry& e = *it->second;
    name = e.info.name();
    scope = e.info.scope();
    pd = e.info.pd();
    mr = e.info.mr();
    bind.set_mr(mr);
    bind.set_offset(e.info.offset());
    bind.set_length(e.info.length());
    *bind.mutable_access() = e.info.access();
    if (scope == v1::SCOPE_QP) bind.set_qp(e.info.qp());
    if (scope != v1::SCOPE_MR) {
      auto pool = pools_.find(pd);
      if (pool == pools_.end()) {
        pool = pools_.emplace(pd, WindowPool(scope == v1::SCOPE_QP ? fabric::MwType::kType2 : fabric::MwType::kType1,
                                             options_.quarantine)).first;
      }
      type = pool->second.type();
      if (std::optional<std::string> w = pool->second.Take(options_.clock())) window = std::move(*w);
    }
  }
  if (scope == v1::SCOPE_MR) {
    absl::StatusOr<v1::MemoryRegion> region = registry_->GetMr(mr);
    if (!region.ok()) return OnBound(id, "", region.status());
    return OnBound(id, "", Key{region->rkey(), region->addr() + bind.offset()});
  }
  RefillSoon(pd);
  if (window.empty()) {
    // The pool ran dry: allocate on this thread (the CM dispatcher); the refill catches up.
    v1::AllocMwRequest alloc;
    alloc.set_pd(pd);
    alloc.set_type(type == fabric::MwType::kType1 ? v1::TYPE_1 : v1::TYPE_2);
    absl::StatusOr<v1::MemoryWindow> mw = registry_->AllocMw(alloc, "grants");
    if (!mw.ok()) return OnBound(id, "", WithContext(mw.status(), "allocating a window"));
    window = mw->name();
  }
  bind.set_name(window);
  std::shared_ptr<void> hold;  // the tenant's pinned_bytes for the bounds region, until the bind commits
  if (admit_pinned_) {
    if (const uint64_t pinned = registry_->BoundsRegionBytes(bind); pinned > 0) {
      absl::StatusOr<std::shared_ptr<void>> admitted = admit_pinned_(pd, pinned);
      if (!admitted.ok()) {
        return OnBound(id, window, WithContext(admitted.status(), "pinning the window's bounds region"));
      }
      hold = std::move(admitted).value();
    }
  }
  registry_->BindMwAsync(
      bind,
      Guarded([this, id, window, hold = std::move(hold)](absl::StatusOr<v1::MemoryWindow> bound) mutable {
        hold.reset();  // committed (or failed): the registry's totals count the pages from here
        if (!bound.ok()) return OnBound(id, window, bound.status());
        OnBound(id, window, Key{bound->rkey(), bound->binding().remote_addr()});
      }),
      "grants");
}

void GrantManager::OnBound(uint64_t id, std::string window, absl::StatusOr<Key> key) {
  Waiters waiters;
  absl::AnyInvocable<void() &&> release;
  std::string cm_id, message;
  v1::Grant info;
  bool retry = false, kill = false, failed = false;
  {
    MutexLock lock(&mu_);
    auto it = grants_.find(id);
    if (it == grants_.end()) return;
    Entry& e = *it->second;
    const absl::Time now = options_.clock();
    auto pool = pools_.find(e.info.pd());
    if (!key.ok()) {
      // A failed bind leaves the window unbound: it rests in quarantine with the revoked ones.
      if (!window.empty() && pool != pools_.end()) pool->second.Quarantine(window, now);
      FinishEndLocked(e, v1::END_ACTIVATION_FAILED, std::string(key.status().message()), &waiters, &release);
      message = Message(e, wire::GrantMessageType::kFailed);
      failed = true;
    } else if (!window.empty() && pool != pools_.end() && pool->second.KeyQuarantined(key->rkey, now)) {
      // This key value was revoked in the PD a moment ago: never hand it out again so soon. The window
      // goes back (unbound, quarantined) and another is tried; after a few, the grant fails rather than
      // give out a quarantined key.
      if (++e.activation_attempts < kMaxActivationAttempts) {
        retry = true;
      } else {
        kill = true;
        e.rkey = key->rkey;
        e.info.set_window(window);
        e.ending = true;
        e.pending_end = v1::END_ACTIVATION_FAILED;
        e.pending_detail = "every window tried came back with a key value still in quarantine";
      }
    } else {
      e.rkey = key->rkey;
      e.remote_addr = key->remote_addr;
      e.info.set_window(window);
      if (e.pending_end != v1::GRANT_END_UNSPECIFIED) {
        e.ending = true;  // ended while it was being bound: kill the key at once
        kill = true;
      } else {
        e.busy = false;
        e.info.set_state(v1::GRANT_ACTIVE);
        e.info.set_activate_time_unix_nanos(absl::ToUnixNanos(now));
        Publish(v1::GRANT_ACTIVATED, e);
        message = Message(e, wire::GrantMessageType::kActive);
        RDMAD_LOG_INFO("%s active on %s (%s, %s)", e.info.name().c_str(), e.info.qp().c_str(),
                       v1::GrantScope_Name(e.info.scope()).c_str(), window.empty() ? e.info.mr().c_str() : window.c_str());
      }
    }
    cm_id = e.info.cm_id();
    info = e.info;
  }
  if (retry) {
    registry_->InvalidateMwAsync(
        window,
        Guarded([this, id, window](absl::StatusOr<v1::MemoryWindow>) {
          {
            MutexLock lock(&mu_);
            auto g = grants_.find(id);
            if (g != grants_.end()) {
              auto pool = pools_.find(g->second->info.pd());
              if (pool != pools_.end()) pool->second.Quarantine(window, options_.clock());
            }
          }
          Activate(id);
        }),
        "grants");
    return;
  }
  if (kill) return KillKey(id);
  if (failed) {
    FlushAudit();
    RDMAD_LOG_WARN("%s: activation failed: %s", info.name().c_str(), info.end_detail().c_str());
    for (auto& w : waiters) std::move(w)(info);
    return Farewell(cm_id, std::move(message), std::move(release));
  }
  // The key, now that its bind completed. Sent inline; the client posted its receives before connecting.
  cm_->Send(cm_id, std::move(message), [name = info.name()](absl::Status s) {
    if (!s.ok()) RDMAD_LOG_WARN("%s: sending the key failed: %s", name.c_str(), std::string(s.message()).c_str());
  });
}

// ---------------------------------------------------------------------------------------------------------
// The end

void GrantManager::Revoke(const std::string& name, Done<v1::Grant> done) {
  uint64_t id = 0;
  {
    MutexLock lock(&mu_);
    absl::StatusOr<Entry*> e = Find(name, "name");
    if (!e.ok()) return std::move(done)(e.status());
    id = (*e)->id;
  }
  End(id, v1::END_REVOKED, "revoked by RevokeGrant", std::move(done));
}

void GrantManager::End(uint64_t id, v1::GrantEndReason reason, std::string detail, Done<v1::Grant> done) {
  Waiters waiters;
  absl::AnyInvocable<void() &&> release;
  v1::Grant info;
  bool kill = false, ended_before = false;
  {
    MutexLock lock(&mu_);
    auto it = grants_.find(id);
    if (it == grants_.end()) {
      if (done) std::move(done)(NotFound("name", absl::StrCat(Name("grants", id), " does not exist")));
      return;
    }
    Entry& e = *it->second;
    if (e.info.state() == v1::GRANT_ENDED) {
      info = e.info;  // ended already: its first end stands
      ended_before = true;
    } else {
      if (done) e.waiters.push_back(std::move(done));
      if (e.busy) {
        // Activating, or ending already: the operation in flight finishes the end.
        if (!e.ending && e.pending_end == v1::GRANT_END_UNSPECIFIED) {
          e.pending_end = reason;
          e.pending_detail = std::move(detail);
        }
        return;
      }
      if (e.info.state() == v1::GRANT_ISSUED) {
        // No key exists: the token dies, and the grant with it.
        (void)tokens_->Revoke(e.info.token());
        FinishEndLocked(e, reason, detail, &waiters, &release);
        info = e.info;
      } else {
        e.busy = e.ending = true;
        e.pending_end = reason;
        e.pending_detail = std::move(detail);
        kill = true;
      }
    }
  }
  if (kill) return KillKey(id);
  FlushAudit();
  if (ended_before && done) std::move(done)(info);
  for (auto& w : waiters) std::move(w)(info);
  if (release) std::move(release)();
}

void GrantManager::KillKey(uint64_t id) {
  std::string window, mr;
  v1::GrantScope scope;
  {
    MutexLock lock(&mu_);
    auto it = grants_.find(id);
    if (it == grants_.end()) return;
    window = it->second->info.window();
    mr = it->second->info.mr();
    scope = it->second->info.scope();
    // A type 2 window's LOCAL_INV queues behind the client's connection's work: bounded (OnTimer).
    if (scope == v1::SCOPE_QP && !it->second->info.cm_id().empty()) WatchKillLocked(*it->second);
  }
  if (scope != v1::SCOPE_MR) {
    // Returns once the invalidation's completion was polled; on a QP in the error state (the client's bad
    // read, or its disconnection) the registry deallocates and replaces the window, which kills the key too.
    return registry_->InvalidateMwAsync(
        window, Guarded([this, id](absl::StatusOr<v1::MemoryWindow> r) { OnKeyKilled(id, r.status()); }), "grants");
  }
  // SCOPE_MR: new keys for the MR (the emulated rereg registers the same memory again, then deregisters
  // the old registration, and with it the old rkey).
  absl::StatusOr<v1::MemoryRegion> region = registry_->GetMr(mr);
  if (!region.ok()) return OnKeyKilled(id, region.status());
  v1::ReregisterMrRequest rereg;
  rereg.set_name(mr);
  rereg.add_flags(v1::CHANGE_ACCESS);
  *rereg.mutable_access() = region->access();
  registry_->ReregisterMrAsync(rereg, Guarded([this, id, mr](absl::StatusOr<v1::ReregisterMrResponse> r) {
    if (r.ok() && !r->keys_changed()) {
      return OnKeyKilled(id, absl::FailedPreconditionError(absl::StrCat(
                                 "re-registering ", mr, " kept its keys: the MR-scope key cannot be revoked on this "
                                 "device")));
    }
    OnKeyKilled(id, r.status());
  }));
}

void GrantManager::OnKeyKilled(uint64_t id, absl::Status status) {
  struct Goodbye {
    std::string cm_id, message;
    absl::AnyInvocable<void() &&> release;
  };
  std::vector<Goodbye> goodbyes;
  Waiters waiters;
  v1::Grant info;
  {
    MutexLock lock(&mu_);
    auto it = grants_.find(id);
    if (it == grants_.end()) return;
    Entry& e = *it->second;
    UnwatchKillLocked(e);
    if (!status.ok()) {
      // The key may still be live: the grant stays ACTIVE and whoever asked hears why.
      e.busy = e.ending = false;
      e.pending_end = v1::GRANT_END_UNSPECIFIED;
      waiters = std::move(e.waiters);
      e.waiters.clear();
      info = e.info;
      Goodbye g;
      g.release = std::move(e.release);  // the client left: its connection goes (kept if the window is bound)
      e.release = nullptr;
      if (g.release) goodbyes.push_back(std::move(g));
      RDMAD_LOG_ERROR("%s: revoking its key failed: %s", e.info.name().c_str(), std::string(status.message()).c_str());
    } else {
      const absl::Time now = options_.clock();
      if (auto pool = pools_.find(e.info.pd()); pool != pools_.end()) {
        if (!e.info.window().empty()) pool->second.Quarantine(e.info.window(), now);
        pool->second.RevokedKey(e.rkey, now);
      }
      const v1::GrantEndReason reason = e.pending_end;
      const std::string detail = e.pending_detail;
      Goodbye g;
      FinishEndLocked(e, reason, detail, &waiters, &g.release);
      g.cm_id = e.info.cm_id();
      g.message = Message(e, wire::GrantMessageType::kEnded);
      goodbyes.push_back(std::move(g));
      info = e.info;
      if (e.info.scope() == v1::SCOPE_MR) {
        // The MR's keys rotated: every other MR-scope key of this MR died with it.
        std::vector<uint64_t> siblings(by_mr_[e.info.mr()].begin(), by_mr_[e.info.mr()].end());
        for (uint64_t sid : siblings) {
          Entry& s = *grants_.at(sid);
          if (s.info.scope() != v1::SCOPE_MR) continue;
          if (s.busy && !s.ending && s.pending_end == v1::GRANT_END_UNSPECIFIED) {
            // Being activated: it may hold the old key; it ends as soon as its activation finishes.
            s.pending_end = reason;
            s.pending_detail = absl::StrCat("the keys of ", s.info.mr(), " were rotated to end ", e.info.name());
            continue;
          }
          if (s.info.state() != v1::GRANT_ACTIVE || s.busy) continue;
          Waiters none;
          Goodbye sg;
          FinishEndLocked(s, reason, absl::StrCat("the keys of ", s.info.mr(), " were rotated to end ", e.info.name()),
                          &none, &sg.release);
          sg.cm_id = s.info.cm_id();
          sg.message = Message(s, wire::GrantMessageType::kEnded);
          goodbyes.push_back(std::move(sg));
        }
      }
    }
  }
  FlushAudit();
  for (auto& w : waiters) {
    if (status.ok()) std::move(w)(info);
    else std::move(w)(WithContext(status, absl::StrCat("revoking ", info.name())));
  }
  for (Goodbye& g : goodbyes) {
    if (status.ok()) Farewell(g.cm_id, std::move(g.message), std::move(g.release));
    else std::move(g.release)();
  }
}

void GrantManager::FinishEndLocked(Entry& e, v1::GrantEndReason reason, const std::string& detail, Waiters* waiters,
                                   absl::AnyInvocable<void() &&>* release) {
  const absl::Time now = options_.clock();
  e.busy = e.ending = false;
  e.pending_end = v1::GRANT_END_UNSPECIFIED;
  if (e.info.state() != v1::GRANT_ENDED) --live_;
  e.info.set_state(v1::GRANT_ENDED);
  e.info.set_end_reason(reason);
  e.info.set_end_detail(detail);
  e.info.set_end_time_unix_nanos(absl::ToUnixNanos(now));
  expiries_.erase({e.expiry, e.id});
  UnwatchKillLocked(e);
  for (auto* index : {&by_mr_, &by_pd_}) {
    const std::string& key = index == &by_mr_ ? e.info.mr() : e.info.pd();
    auto it = index->find(key);
    if (it == index->end()) continue;
    it->second.erase(e.id);
    if (it->second.empty()) index->erase(it);
  }
  *waiters = std::move(e.waiters);
  e.waiters.clear();
  *release = std::move(e.release);
  e.release = nullptr;
  Publish(reason == v1::END_EXPIRED ? v1::GRANT_EXPIRED : v1::GRANT_REVOKED, e);
  if (audit_ != nullptr) {
    audit::Event a;
    a.principal = e.info.principal();
    a.method = "grant ended";
    a.resource = e.info.name();
    a.detail = absl::StrCat(v1::GrantEndReason_Name(reason), ": ", detail, " (", e.info.mr(),
                            e.info.cm_id().empty() ? "" : ", ", e.info.cm_id(), ")");
    audit_pending_.push_back(std::move(a));
  }
  RDMAD_LOG_INFO("%s ended: %s (%s)", e.info.name().c_str(), v1::GrantEndReason_Name(reason).c_str(), detail.c_str());
  UnpersistLocked(e.id);
  ended_.push_back(e.id);
  ForgetEndedLocked();  // drops the oldest ended grants, never this one
}

void GrantManager::FlushAudit() {
  if (audit_ == nullptr) return;
  std::vector<audit::Event> records;
  {
    MutexLock lock(&mu_);
    records.swap(audit_pending_);
  }
  for (const audit::Event& a : records) audit_->Record(a);
}

void GrantManager::Farewell(const std::string& cm_id, std::string message, absl::AnyInvocable<void() &&> release) {
  if (release) return std::move(release)();  // the client left: nothing to say, its connection goes
  if (cm_id.empty() || cm_ == nullptr) return;
  // Best effort: on a QP in the error state the SEND is flushed. Then the connection is closed; its
  // DISCONNECTED brings OnGone, which releases it.
  {
    MutexLock lock(&mu_);
    ++farewells_;  // a drain waits for it
  }
  cm_->Send(cm_id, std::move(message), Guarded([this, cm_id](absl::Status) {
    cm_->Disconnect(cm_id, Guarded([this, cm_id](absl::StatusOr<v1::CmId> r) {
      if (!r.ok()) RDMAD_LOG_DEBUG("%s: disconnect: %s", cm_id.c_str(), std::string(r.status().message()).c_str());
      MutexLock lock(&mu_);
      --farewells_;
    }));
  }));
}

// ---------------------------------------------------------------------------------------------------------
// The client's connection went

void GrantManager::OnGone(const std::string& grant, const std::string& cm_id, absl::AnyInvocable<void() &&> release) {
  uint64_t id = 0;
  {
    MutexLock lock(&mu_);
    absl::StatusOr<Entry*> found = Find(grant, "grant");
    if (found.ok() && (*found)->info.state() != v1::GRANT_ENDED && !shutdown_) {
      id = (*found)->id;
      (*found)->release = std::move(release);
    }
  }
  if (id == 0) {
    if (release) std::move(release)();  // nothing of the grant's is on the QP any more
    return;
  }
  End(id, v1::END_DISCONNECTED, absl::StrCat(cm_id, " went away"), nullptr);
}

}  // namespace rdmad::grants
