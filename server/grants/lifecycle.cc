// GrantManager: the life of a grant's key. Activation (the client connected: take a window, bind it over
// the granted range on the client's QP with the key's SEND fenced behind the bind, or, for a window bound
// elsewhere, send the key once the bind's completion succeeded) and its end (kill the key at the
// NIC, answer the revokers, say goodbye to the client, release its connection). Every step is a callback
// of the one before, on a CM dispatcher or a device dispatcher; none waits and none holds mu_ across a
// call out. Threads: see manager.h.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/log.h"
#include "server/common/status.h"
#include "server/dispatch/handoffs.h"
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

// The number of a grant's token ("tokens/17"), for its version 2 messages; 0 if it has none.
uint64_t TokenId(const std::string& token) {
  uint64_t id = 0;
  return wire::ParseTokenName(token, &id) ? id : 0;
}

}  // namespace

std::string GrantManager::Message(const Entry& e, wire::GrantMessageType type, const Key* key) const {
  const Entry::Book& b = e.book.Get(mu_);
  wire::GrantMessage m;
  m.type = type;
  m.scope = WireScope(b.info.scope());
  m.grant_id = e.id;
  m.expiry_unix_nanos = absl::ToUnixNanos(b.expiry);
  m.version = b.version;
  m.tag = b.tag;
  m.token_id = b.token_id;
  if (type == wire::GrantMessageType::kActive) {
    m.remote_addr = key ? key->remote_addr : b.remote_addr;
    m.length = b.info.length();
    m.rkey = key ? key->rkey : b.rkey;
    m.access = b.access_bits;
  } else {
    m.reason = static_cast<uint8_t>(b.info.end_reason() != v1::GRANT_END_UNSPECIFIED ? b.info.end_reason()
                                                                                        : v1::END_ACTIVATION_FAILED);
  }
  return wire::EncodeGrantMessage(m);
}

// ---------------------------------------------------------------------------------------------------------
// Activation

// A SCOPE_QP grant's window needs a bounds region where the device does not enforce a window's bounds
// (rxe): it is pinned now, on a pin worker, while the handshake goes on, so that at ESTABLISHED the
// connection's dispatcher posts the bind (and the key) itself, or, if the pin is still running then, the
// pin worker does as soon as it is done: one hand-off from the connect request to the key either way.
void GrantManager::OnAccepting(const std::string& grant) {
  uint64_t id = 0, mr = 0, offset = 0, length = 0;
  std::string pd;
  {
    MutexLock lock(&mu_);
    absl::StatusOr<Entry*> found = Find(grant, "grant");
    if (!found.ok() || shutdown_) return;
    Entry::Book& b = (*found)->book.Get(mu_);
    if (b.info.state() != v1::GRANT_ISSUED || b.info.scope() != v1::SCOPE_QP || b.pin != Entry::Book::Pin::kNone) {
      return;
    }
    id = (*found)->id;
    mr = b.mr_id;
    offset = b.info.offset();
    length = b.info.length();
    pd = b.info.pd();
    b.pin = Entry::Book::Pin::kPinning;
  }
  std::shared_ptr<void> hold;  // the tenant's pinned_bytes, until the registry counts the region's pages
  const uint64_t bytes = registry_->BoundsRegionBytes(mr, offset, length);
  absl::Status admitted = absl::OkStatus();
  if (bytes > 0 && admit_pinned_) {
    absl::StatusOr<std::shared_ptr<void>> h = admit_pinned_(pd, bytes);
    if (h.ok()) hold = std::move(h).value();
    else admitted = h.status();
  }
  // Nothing to pin, or not admitted: the activation goes the usual way (and fails there with the reason).
  if (bytes == 0 || !admitted.ok()) return OnPinned(id, std::unique_ptr<Registry::PinnedBounds>());
  registry_->PinBoundsAsync(
      mr, offset, length, Guarded([this, id, hold = std::move(hold)](
                         absl::StatusOr<std::unique_ptr<Registry::PinnedBounds>> pinned) mutable {
        hold.reset();
        OnPinned(id, std::move(pinned));
      }));
}

void GrantManager::OnPinned(uint64_t id, absl::StatusOr<std::unique_ptr<Registry::PinnedBounds>> pinned) {
  if (!pinned.ok()) {
    // The activation's bind pins again on a pin worker, and fails there with the reason if it still holds.
    RDMAD_LOG_DEBUG("%s: pinning the bounds region ahead: %s", Name("grants", id).c_str(),
                    std::string(pinned.status().message()).c_str());
  }
  std::unique_ptr<Registry::PinnedBounds> bounds = pinned.ok() ? std::move(pinned).value() : nullptr;
  bool activate = false;
  {
    MutexLock lock(&mu_);
    auto it = grants_.find(id);
    if (it != grants_.end() && it->second->book.Get(mu_).pin == Entry::Book::Pin::kPinning) {
      Entry::Book& b = it->second->book.Get(mu_);
      activate = std::exchange(b.activate_after_pin, false);
      b.pin = Entry::Book::Pin::kNone;
      if (!activate && bounds != nullptr) {
        b.bounds = std::move(bounds);
        b.pin = Entry::Book::Pin::kReady;
      }
    }
  }
  // Activated here (ESTABLISHED came first), or released (nothing pinned, or the grant ended meanwhile).
  if (activate) return Activate(id, std::move(bounds));
}

void GrantManager::OnConnected(const std::string& grant, const std::string& cm_id, const std::string& qp,
                               uint8_t version) {
  uint64_t id = 0;
  std::string refusal;
  std::unique_ptr<Registry::PinnedBounds> bounds;
  bool after_pin = false;
  {
    MutexLock lock(&mu_);
    absl::StatusOr<Entry*> found = Find(grant, "grant");
    Session& session = sessions_[cm_id];
    session.qp = qp;
    absl::StatusOr<uint64_t> qp_id = ParseName(qp, "qps", "qp");  // once per connection
    session.qp_id = qp_id.ok() ? *qp_id : 0;
    session.version = version;
    if (found.ok()) session.pd = (*found)->book.Get(mu_).info.pd();  // the token's PD: the QP's
    if (!found.ok() || shutdown_ || (*found)->book.Get(mu_).info.state() != v1::GRANT_ISSUED) {
      // Ended before its client got here (revoked, expired, the MR went): no key, and goodbye.
      wire::GrantMessage m;
      m.type = wire::GrantMessageType::kFailed;
      m.reason =
          static_cast<uint8_t>(found.ok() ? (*found)->book.Get(mu_).info.end_reason() : v1::END_ACTIVATION_FAILED);
      absl::StatusOr<uint64_t> n = ParseName(grant, "grants", "grant");
      m.grant_id = n.ok() ? *n : 0;
      m.version = version;
      if (found.ok()) m.token_id = TokenId((*found)->book.Get(mu_).info.token());
      refusal = wire::EncodeGrantMessage(m);
    } else {
      Entry& e = **found;
      id = e.id;
      session.grants.insert(e.id);
      e.book.Get(mu_).version = version;
      e.book.Get(mu_).token_id = TokenId(e.book.Get(mu_).info.token());
      e.book.Get(mu_).info.set_state(v1::GRANT_ACTIVATING);
      e.book.Get(mu_).info.set_cm_id(cm_id);
      e.book.Get(mu_).info.set_qp(qp);
      e.book.Get(mu_).qp_id = session.qp_id;
      e.book.Get(mu_).busy = true;
      Entry::Book& b = e.book.Get(mu_);
      if (b.pin == Entry::Book::Pin::kPinning) {
        b.activate_after_pin = true;  // the pin's return activates (OnPinned)
        after_pin = true;
      } else if (b.pin == Entry::Book::Pin::kReady) {
        bounds = std::move(b.bounds);
        b.pin = Entry::Book::Pin::kNone;
      }
    }
  }
  if (id == 0) {
    RDMAD_LOG_INFO("%s: %s connected, but the grant is no longer live", cm_id.c_str(), grant.c_str());
    return Farewell(cm_id, std::move(refusal), nullptr);
  }
  if (after_pin) return;
  Activate(id, std::move(bounds));
}

absl::Status GrantManager::CheckJoin(const std::string& cm_id, const std::string& pd) {
  MutexLock lock(&mu_);
  auto s = sessions_.find(cm_id);
  if (s == sessions_.end() || s->second.version < wire::kSessionMessageVersion) {
    return absl::FailedPreconditionError(absl::StrCat(cm_id, " is not a session (data-plane protocol version 2)"));
  }
  if (s->second.gone || shutdown_) return absl::FailedPreconditionError(absl::StrCat(cm_id, " is closing"));
  if (s->second.pd != pd) {
    return absl::FailedPreconditionError(absl::StrCat("the grant is on ", pd, ", the connection's QP on ",
                                                      s->second.pd, ": a window is bound only in its QP's PD"));
  }
  return absl::OkStatus();
}

// A session's ACTIVATE, its token redeemed (on the thread that received it: a device dispatcher). The grant
// joins the session and is activated as at a connect, its window bound on the session's QP with the key's
// SEND fenced behind the bind; no bounds region was pinned ahead, so where one is needed the bind pins it
// on a pin worker first.
void GrantManager::OnActivate(const std::string& grant, const std::string& cm_id, uint64_t tag) {
  uint64_t id = 0;
  std::string refusal;
  bool gone = false;
  {
    MutexLock lock(&mu_);
    absl::StatusOr<Entry*> found = Find(grant, "grant");
    if (!found.ok()) return;
    Entry& e = **found;
    Entry::Book& b = e.book.Get(mu_);
    auto s = sessions_.find(cm_id);
    b.version = wire::kSessionMessageVersion;
    b.tag = tag;
    b.token_id = TokenId(b.info.token());
    id = e.id;
    if (s == sessions_.end() || s->second.gone || shutdown_) {
      gone = true;  // its token is used up and no one will read the key: the grant ends
    } else if (b.info.state() != v1::GRANT_ISSUED) {
      refusal = Message(e, wire::GrantMessageType::kFailed);  // ended since its token was checked
    } else {
      s->second.grants.insert(e.id);
      CancelPartingLocked(cm_id);
      b.info.set_state(v1::GRANT_ACTIVATING);
      b.info.set_cm_id(cm_id);
      b.info.set_qp(s->second.qp);
      b.qp_id = s->second.qp_id;
      b.busy = true;
    }
  }
  if (gone) return End(id, v1::END_DISCONNECTED, absl::StrCat(cm_id, " closed before the grant's activation"), nullptr);
  if (!refusal.empty()) {
    return cm_->Send(cm_id, std::move(refusal), [grant](absl::Status s) {
      if (!s.ok()) RDMAD_LOG_DEBUG("%s: sending FAILED: %s", grant.c_str(), std::string(s.message()).c_str());
    });
  }
  Activate(id);
}

absl::Status GrantManager::OnRelease(const std::string& cm_id, uint64_t grant_id) {
  {
    MutexLock lock(&mu_);
    auto s = sessions_.find(cm_id);
    if (s == sessions_.end() || s->second.grants.count(grant_id) == 0) {
      return absl::FailedPreconditionError(absl::StrCat(Name("grants", grant_id), " is not live on ", cm_id));
    }
  }
  // The client's own end: its key is killed at the NIC and its ENDED sent, as for any end.
  End(grant_id, v1::END_RELEASED, absl::StrCat("released by its client on ", cm_id), nullptr);
  return absl::OkStatus();
}

size_t GrantManager::Sessions() const {
  MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [cm_id, s] : sessions_) n += s.version >= wire::kSessionMessageVersion ? 1 : 0;
  return n;
}

void GrantManager::CancelPartingLocked(const std::string& cm_id) {
  auto p = parting_at_.find(cm_id);
  if (p == parting_at_.end()) return;
  partings_.erase({p->second, cm_id});
  parting_at_.erase(p);
  --farewells_;
}

absl::AnyInvocable<void() &&> GrantManager::LeaveSessionLocked(Entry& e) {
  Entry::Book& b = e.book.Get(mu_);
  absl::AnyInvocable<void() &&> own = std::move(b.release);
  b.release = nullptr;
  auto s = sessions_.find(b.info.cm_id());
  if (b.info.cm_id().empty() || s == sessions_.end()) return own;
  s->second.grants.erase(e.id);
  if (!s->second.gone || !s->second.grants.empty()) return own;
  absl::AnyInvocable<void() &&> release = std::move(s->second.release);
  sessions_.erase(s);
  return release;
}

void GrantManager::Activate(uint64_t id, std::unique_ptr<Registry::PinnedBounds> bounds) {
  std::string pd, name;
  v1::GrantScope scope;
  fabric::MwType type = fabric::MwType::kType2;
  Registry::GrantBind bind;  // the objects, by number: nothing below parses a name
  std::optional<uint64_t> window;
  {
    MutexLock lock(&mu_);
    auto it = grants_.find(id);
    if (it == grants_.end()) return;
    const Entry::Book& b = it->second->book.Get(mu_);
    name = b.info.name();
    scope = b.info.scope();
    pd = b.info.pd();
    bind.mr = b.mr_id;
    bind.offset = b.info.offset();
    bind.length = b.info.length();
    bind.access = fabric::kRemoteRead | ((b.access_bits & wire::kGrantWrite) ? fabric::kRemoteWrite : 0);
    if (scope == v1::SCOPE_QP) bind.qp = b.qp_id;
    if (scope != v1::SCOPE_MR) {
      auto pool = pools_.find(pd);
      if (pool == pools_.end()) {
        pool = pools_.emplace(pd, WindowPool(scope == v1::SCOPE_QP ? fabric::MwType::kType2 : fabric::MwType::kType1,
                                             options_.quarantine)).first;
      }
      type = pool->second.type();
      window = pool->second.Take(options_.clock());
    }
  }
  if (scope == v1::SCOPE_MR) {
    return OnBound(id, 0, registry_->RegionKey(bind.mr, bind.offset));
  }
  RefillSoon(pd);
  if (!window.has_value()) {
    // The pool ran dry: allocate on this thread (the CM dispatcher); the refill catches up.
    v1::AllocMwRequest alloc;
    alloc.set_pd(pd);
    alloc.set_type(type == fabric::MwType::kType1 ? v1::TYPE_1 : v1::TYPE_2);
    absl::StatusOr<v1::MemoryWindow> mw = registry_->AllocMw(alloc, "grants");
    absl::StatusOr<uint64_t> made = mw.ok() ? ParseName(mw->name(), "mws", "name") : mw.status();
    if (!made.ok()) return OnBound(id, 0, WithContext(made.status(), "allocating a window"));
    window = *made;
  }
  bind.window = *window;
  std::shared_ptr<void> hold;  // the tenant's pinned_bytes for the bounds region, until the bind commits
  if (admit_pinned_ && bounds == nullptr) {  // a region pinned ahead was admitted, and is counted, already
    if (const uint64_t pinned = registry_->BoundsRegionBytes(bind.mr, bind.offset, bind.length); pinned > 0) {
      absl::StatusOr<std::shared_ptr<void>> admitted = admit_pinned_(pd, pinned);
      if (!admitted.ok()) {
        return OnBound(id, bind.window, WithContext(admitted.status(), "pinning the window's bounds region"));
      }
      hold = std::move(admitted).value();
    }
  }
  // A type 2 window is bound on the client's own QP: its key goes out in the same post, fenced behind the
  // bind (Registry::KeyMessage), so it never leaves before the bind took effect, nor if the bind fails.
  std::unique_ptr<Registry::KeyMessage> key_message;
  if (type == fabric::MwType::kType2) {
    key_message = std::make_unique<Registry::KeyMessage>();
    key_message->message = [this, id](uint32_t rkey, uint64_t remote_addr) {
      return KeyWithBind(id, Key{rkey, remote_addr});
    };
    key_message->done = [name](absl::Status s) {
      if (!s.ok()) RDMAD_LOG_WARN("%s: sending the key failed: %s", name.c_str(), std::string(s.message()).c_str());
    };
  }
  registry_->BindGrantAsync(
      bind,
      Guarded([this, id, window = bind.window, hold = std::move(hold)](absl::StatusOr<Registry::Key> bound) mutable {
        hold.reset();  // committed (or failed): the registry's totals count the pages from here
        OnBound(id, window, std::move(bound));
      }),
      std::move(key_message), std::move(bounds));
}

std::string GrantManager::KeyWithBind(uint64_t id, Key key) {
  MutexLock lock(&mu_);
  auto it = grants_.find(id);
  if (it == grants_.end()) return "";
  Entry& e = *it->second;
  Entry::Book& b = e.book.Get(mu_);
  if (b.pending_end != v1::GRANT_END_UNSPECIFIED || b.info.state() != v1::GRANT_ACTIVATING) return "";
  auto pool = pools_.find(b.info.pd());
  if (pool != pools_.end() && pool->second.KeyQuarantined(key.rkey, options_.clock())) return "";
  b.key_sent = true;
  // Posted on this thread right after: the key's path ends here (a path outside any request counts nothing).
  if (const int handoffs = dispatch::Handoffs::Current(); handoffs >= 0) {
    key_handoffs_[std::min<size_t>(handoffs, key_handoffs_.size() - 1)].fetch_add(1, std::memory_order_relaxed);
  }
  return Message(e, wire::GrantMessageType::kActive, &key);
}

GrantManager::KeyHandoffs GrantManager::key_handoffs() const {
  KeyHandoffs out;
  for (size_t i = 0; i < out.keys.size(); i++) out.keys[i] = key_handoffs_[i].load(std::memory_order_relaxed);
  return out;
}

void GrantManager::OnBound(uint64_t id, uint64_t window, absl::StatusOr<Key> key) {
  Waiters waiters;
  absl::AnyInvocable<void() &&> release;
  std::string cm_id, message;
  v1::Grant info;
  bool retry = false, kill = false, failed = false, sent_with_bind = false;
  {
    MutexLock lock(&mu_);
    auto it = grants_.find(id);
    if (it == grants_.end()) return;
    Entry& e = *it->second;
    const absl::Time now = options_.clock();
    auto pool = pools_.find(e.book.Get(mu_).info.pd());
    sent_with_bind = e.book.Get(mu_).key_sent;  // checked against the quarantine when it went out
    e.book.Get(mu_).key_sent = false;
    if (!key.ok()) {
      // A failed bind leaves the window unbound: it rests in quarantine with the revoked ones.
      if (window != 0 && pool != pools_.end()) pool->second.Quarantine(window, now);
      FinishEndLocked(e, v1::END_ACTIVATION_FAILED, std::string(key.status().message()), &waiters, &release);
      message = Message(e, wire::GrantMessageType::kFailed);
      failed = true;
    } else if (!sent_with_bind && window != 0 && pool != pools_.end() &&
               pool->second.KeyQuarantined(key->rkey, now)) {
      // This key value was revoked in the PD a moment ago: never hand it out again so soon. The window
      // goes back (unbound, quarantined) and another is tried; after a few, the grant fails rather than
      // give out a quarantined key.
      if (++e.book.Get(mu_).activation_attempts < kMaxActivationAttempts) {
        retry = true;
      } else {
        kill = true;
        e.book.Get(mu_).rkey = key->rkey;
        e.book.Get(mu_).window_id = window;
        e.book.Get(mu_).info.set_window(Name("mws", window));
        e.book.Get(mu_).ending = true;
        e.book.Get(mu_).pending_end = v1::END_ACTIVATION_FAILED;
        e.book.Get(mu_).pending_detail = "every window tried came back with a key value still in quarantine";
      }
    } else {
      e.book.Get(mu_).rkey = key->rkey;
      e.book.Get(mu_).remote_addr = key->remote_addr;
      e.book.Get(mu_).window_id = window;
      if (window != 0) e.book.Get(mu_).info.set_window(Name("mws", window));
      if (e.book.Get(mu_).pending_end != v1::GRANT_END_UNSPECIFIED) {
        e.book.Get(mu_).ending = true;  // ended while it was being bound: kill the key at once
        kill = true;
      } else {
        e.book.Get(mu_).busy = false;
        e.book.Get(mu_).info.set_state(v1::GRANT_ACTIVE);
        e.book.Get(mu_).info.set_activate_time_unix_nanos(absl::ToUnixNanos(now));
        Publish(v1::GRANT_ACTIVATED, e);
        message = Message(e, wire::GrantMessageType::kActive);
        RDMAD_LOG_INFO("%s active on %s (%s, %s)", e.book.Get(mu_).info.name().c_str(),
                       e.book.Get(mu_).info.qp().c_str(), v1::GrantScope_Name(e.book.Get(mu_).info.scope()).c_str(),
                       window == 0 ? e.book.Get(mu_).info.mr().c_str() : e.book.Get(mu_).info.window().c_str());
      }
    }
    cm_id = e.book.Get(mu_).info.cm_id();
    info = e.book.Get(mu_).info;
  }
  if (retry) {
    registry_->InvalidateMwAsync(
        Name("mws", window),
        Guarded([this, id, window](absl::StatusOr<v1::MemoryWindow>) {
          {
            MutexLock lock(&mu_);
            auto g = grants_.find(id);
            if (g != grants_.end()) {
              auto pool = pools_.find(g->second->book.Get(mu_).info.pd());
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
  // A type 2 window's key went out with its bind. Any other's is sent now that its bind completed (a type 1
  // window is bound on rdmad's own bind QP, a region's key needs no bind). Sent inline; the client posted
  // its receives before connecting.
  if (sent_with_bind) return;
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
    Entry::Book& b = e.book.Get(mu_);
    if (b.info.state() == v1::GRANT_ENDED) {
      info = b.info;  // ended already: its first end stands
      ended_before = true;
    } else {
      if (done) b.waiters.push_back(std::move(done));
      if (b.busy) {
        // Activating, or ending already: the operation in flight finishes the end.
        if (!b.ending && b.pending_end == v1::GRANT_END_UNSPECIFIED) {
          b.pending_end = reason;
          b.pending_detail = std::move(detail);
        }
        return;
      }
      if (b.info.state() == v1::GRANT_ISSUED) {
        // No key exists: the token dies, and the grant with it.
        (void)tokens_->Revoke(b.info.token());
        FinishEndLocked(e, reason, detail, &waiters, &release);
        info = b.info;
      } else {
        b.busy = b.ending = true;
        b.pending_end = reason;
        b.pending_detail = std::move(detail);
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
    const v1::Grant& info = it->second->book.Get(mu_).info;
    window = info.window();
    mr = info.mr();
    scope = info.scope();
    // A type 2 window's LOCAL_INV queues behind the client's connection's work: bounded (OnTimer).
    if (scope == v1::SCOPE_QP && !info.cm_id().empty()) WatchKillLocked(*it->second);
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
    Entry::Book& b = e.book.Get(mu_);
    if (!status.ok()) {
      // The key may still be live: the grant stays ACTIVE and whoever asked hears why.
      b.busy = b.ending = false;
      b.pending_end = v1::GRANT_END_UNSPECIFIED;
      waiters = std::move(b.waiters);
      b.waiters.clear();
      info = b.info;
      Goodbye g;
      // The client left: its connection goes (kept if the window is bound).
      auto session = sessions_.find(b.info.cm_id());
      if (b.release || (session != sessions_.end() && session->second.gone)) g.release = LeaveSessionLocked(e);
      if (g.release) goodbyes.push_back(std::move(g));
      RDMAD_LOG_ERROR("%s: revoking its key failed: %s", b.info.name().c_str(), std::string(status.message()).c_str());
    } else {
      const absl::Time now = options_.clock();
      if (auto pool = pools_.find(b.info.pd()); pool != pools_.end()) {
        if (b.window_id != 0) pool->second.Quarantine(b.window_id, now);
        pool->second.RevokedKey(b.rkey, now);
      }
      const v1::GrantEndReason reason = b.pending_end;
      const std::string detail = b.pending_detail;
      Goodbye g;
      FinishEndLocked(e, reason, detail, &waiters, &g.release);
      g.cm_id = b.info.cm_id();
      g.message = Message(e, wire::GrantMessageType::kEnded);
      goodbyes.push_back(std::move(g));
      info = b.info;
      if (b.info.scope() == v1::SCOPE_MR) {
        // The MR's keys rotated: every other MR-scope key of this MR died with it.
        std::vector<uint64_t> siblings(by_mr_[b.info.mr()].begin(), by_mr_[b.info.mr()].end());
        for (uint64_t sid : siblings) {
          Entry& s = *grants_.at(sid);
          Entry::Book& sb = s.book.Get(mu_);
          if (sb.info.scope() != v1::SCOPE_MR) continue;
          if (sb.busy && !sb.ending && sb.pending_end == v1::GRANT_END_UNSPECIFIED) {
            // Being activated: it may hold the old key; it ends as soon as its activation finishes.
            sb.pending_end = reason;
            sb.pending_detail = absl::StrCat("the keys of ", sb.info.mr(), " were rotated to end ", b.info.name());
            continue;
          }
          if (sb.info.state() != v1::GRANT_ACTIVE || sb.busy) continue;
          Waiters none;
          Goodbye sg;
          FinishEndLocked(s, reason, absl::StrCat("the keys of ", sb.info.mr(), " were rotated to end ", b.info.name()),
                          &none, &sg.release);
          sg.cm_id = sb.info.cm_id();
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
  Entry::Book& b = e.book.Get(mu_);
  const absl::Time now = options_.clock();
  if (b.bounds != nullptr) unpinned_.push_back(std::move(b.bounds));
  b.pin = Entry::Book::Pin::kNone;  // a pin still running is released when it returns (OnPinned)
  b.activate_after_pin = false;
  b.busy = b.ending = false;
  b.pending_end = v1::GRANT_END_UNSPECIFIED;
  if (b.info.state() != v1::GRANT_ENDED) --live_;
  b.info.set_state(v1::GRANT_ENDED);
  b.info.set_end_reason(reason);
  b.info.set_end_detail(detail);
  b.info.set_end_time_unix_nanos(absl::ToUnixNanos(now));
  expiries_.erase({b.expiry, e.id});
  UnwatchKillLocked(e);
  for (auto* index : {&by_mr_, &by_pd_}) {
    const std::string& key = index == &by_mr_ ? b.info.mr() : b.info.pd();
    auto it = index->find(key);
    if (it == index->end()) continue;
    it->second.erase(e.id);
    if (it->second.empty()) index->erase(it);
  }
  *waiters = std::move(b.waiters);
  b.waiters.clear();
  *release = LeaveSessionLocked(e);
  Publish(reason == v1::END_EXPIRED ? v1::GRANT_EXPIRED : v1::GRANT_REVOKED, e);
  if (audit_ != nullptr) {
    audit::Event a;
    a.principal = b.info.principal();
    a.method = "grant ended";
    a.resource = b.info.name();
    a.detail = absl::StrCat(v1::GrantEndReason_Name(reason), ": ", detail, " (", b.info.mr(),
                            b.info.cm_id().empty() ? "" : ", ", b.info.cm_id(), ")");
    audit_pending_.push_back(std::move(a));
  }
  RDMAD_LOG_INFO("%s ended: %s (%s)", b.info.name().c_str(), v1::GrantEndReason_Name(reason).c_str(), detail.c_str());
  UnpersistLocked(e.id);
  ended_.push_back(e.id);
  ForgetEndedLocked();  // drops the oldest ended grants, never this one
}

void GrantManager::FlushAudit() {
  std::vector<audit::Event> records;
  std::vector<std::unique_ptr<Registry::PinnedBounds>> unpinned;
  {
    MutexLock lock(&mu_);
    records.swap(audit_pending_);
    unpinned.swap(unpinned_);
  }
  unpinned.clear();  // ibv_dereg_mr, and the PD's count and hold given back, before the waiters hear
  if (audit_ == nullptr) return;
  for (const audit::Event& a : records) audit_->Record(a);
}

void GrantManager::Farewell(const std::string& cm_id, std::string message, absl::AnyInvocable<void() &&> release) {
  if (release) return std::move(release)();  // the client left: nothing to say, its connection goes
  if (cm_id.empty() || cm_ == nullptr) return;
  // Best effort: on a QP in the error state the SEND is flushed. After Options::end_grace from now the
  // connection is closed (Part, from the timer), whatever the SEND's fate: a SEND that has not completed by
  // then (the client's receive queue empty, RNR retries) must not hold the connection open; and on a QP that
  // went to the error state for a read through the dead key, the NAK that told the client so is on the wire
  // ahead of the disconnect, and has time to arrive first. Its DISCONNECTED brings OnGone, which releases it.
  bool now = options_.end_grace <= absl::ZeroDuration(), earliest = false, stays = false;
  {
    MutexLock lock(&mu_);
    // A session with grants still on it (or already parting): the message alone. Decided under
    // the same lock as the parting, so an ACTIVATE that joins meanwhile either comes first (the connection
    // stays) or finds the parting and calls it off.
    auto s = sessions_.find(cm_id);
    stays = (s != sessions_.end() && !s->second.grants.empty()) || parting_at_.count(cm_id) > 0;
    if (!stays) {
      ++farewells_;  // a drain waits for it
      now = now || shutdown_;  // the timer's loop is stopped: part once the SEND is done
      if (!now) {
        const absl::Time at = absl::Now() + options_.end_grace;  // real time, whatever the leases' clock
        earliest = partings_.empty() || at < partings_.begin()->first;
        partings_.insert({at, cm_id});
        parting_at_[cm_id] = at;
      }
    }
  }
  if (stays) {
    return cm_->Send(cm_id, std::move(message), [cm_id](absl::Status s) {
      if (!s.ok()) RDMAD_LOG_DEBUG("%s: sending a grant's last message: %s", cm_id.c_str(), std::string(s.message()).c_str());
    });
  }
  if (earliest) loop_->Post([this] { ArmTimer(); });
  cm_->Send(cm_id, std::move(message), Guarded([this, cm_id, now](absl::Status) {
    if (now) Part({cm_id});
  }));
}

// ---------------------------------------------------------------------------------------------------------
// The client's connection went

void GrantManager::OnGone(const std::string& grant, const std::string& cm_id, absl::AnyInvocable<void() &&> release) {
  uint64_t id = 0;
  std::vector<uint64_t> ending;
  {
    MutexLock lock(&mu_);
    absl::StatusOr<Entry*> found = Find(grant, "grant");
    if (auto s = sessions_.find(cm_id); s != sessions_.end()) {
      // Established: every grant on it ends; the last one's end releases the connection (LeaveSessionLocked).
      CancelPartingLocked(cm_id);  // gone within its end grace: a drain need not wait for the grace
      if (!s->second.grants.empty() && !shutdown_) {
        s->second.gone = true;
        s->second.release = std::move(release);
        ending.assign(s->second.grants.begin(), s->second.grants.end());
      }
      if (!s->second.gone) sessions_.erase(s);
    } else if (found.ok() && (*found)->book.Get(mu_).info.state() != v1::GRANT_ENDED && !shutdown_) {
      id = (*found)->id;
      (*found)->book.Get(mu_).release = std::move(release);
    } else if (auto p = parting_at_.find(cm_id); p != parting_at_.end()) {
      // Gone within its end grace (the client left, or DeletePd closed it): nothing is left to part, and a
      // drain need not wait for the grace to run out.
      partings_.erase({p->second, cm_id});
      parting_at_.erase(p);
      --farewells_;
    }
  }
  for (uint64_t g : ending) End(g, v1::END_DISCONNECTED, absl::StrCat(cm_id, " went away"), nullptr);
  if (!ending.empty()) return;
  if (id == 0) {
    if (release) std::move(release)();  // nothing of the grant's is on the QP any more
    return;
  }
  End(id, v1::END_DISCONNECTED, absl::StrCat(cm_id, " went away"), nullptr);
}

}  // namespace rdmad::grants
