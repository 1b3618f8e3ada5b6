// GrantManager: remote keys to ranges of registered memory, for one client each, with leases and revocation
// that is real at the NIC (docs/grants.md).
//
// A grant is issued with a single-use token (TokenStore, kind "grant"). The client connects to the
// data-plane listener with it; on ESTABLISHED the CM layer calls OnConnected, and the grant binds a window
// over exactly the granted range:
//   SCOPE_QP  a type 2 window bound on the client's own QP (devices with type 2 windows);
//   SCOPE_PD  a type 1 window (devices with type 1 windows only);
//   SCOPE_MR  no window: the MR's own rkey (devices without windows). Revoked by rotating the MR's keys,
//             which ends every SCOPE_MR grant of that MR.
// Only after the bind's completion succeeded is the key sent to the client (the ACTIVE grant message,
// proto/wire/grant_message.h). A grant ends (revoked, expired, disconnected, MR/PD gone) by invalidating
// the window and waiting for the invalidation's completion (on a QP in the error state the registry
// replaces the window instead, which also kills the key); then RevokeGrant returns, the ENDED message is
// sent (best effort) and, Options::end_grace later, the connection is closed.
//
// Windows come from a per-PD pool (WindowPool), refilled on the "grants" thread, so ibv_alloc_mw is off
// the request path. A window whose key was revoked is quarantined before it is bound again, and a key
// value revoked in a PD is never handed out again in that PD during the quarantine (ReDMArk).
//
// Threads and locks:
//   - mu_ guards every grant (its Entry's book, read as book.Get(mu_), which clang's -Wthread-safety checks),
//     the indexes, the pools and the timers' index. It is never held across a call into the Registry, the
//     CmManager or the TokenStore... except TokenStore::Issue/Revoke, which take only the store's own lock
//     and never call back.
//   - The "grants" EventLoop owns the timer (a timerfd) and refills pools. Expiry fires there, and so does
//     the deadline of a key's invalidation stuck on its client's QP (Options::key_kill_timeout), and the
//     end of an ended grant's connection's grace (Options::end_grace).
//   - Activation and revocation are chains of callbacks: they start on a CM dispatcher (OnConnected,
//     OnGone) or a gRPC thread (RevokeGrant, Retire), continue on the device dispatcher (bind and
//     invalidate completions) and never wait. A grant with an operation in flight is `busy`; an end
//     requested meanwhile is remembered and done when the operation finishes.
//   - Nothing scans every grant: grants are indexed by MR, PD and principal; expiry uses an ordered index.
#ifndef RDMAD_SERVER_GRANTS_MANAGER_H_
#define RDMAD_SERVER_GRANTS_MANAGER_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "server/common/sync.h"
#include "absl/time/time.h"
#include "proto/wire/wall_clock.h"
#include "rdmad/v1/rdmad.pb.h"
#include "server/audit/sink.h"
#include "server/cm/manager.h"
#include "server/cm/token.h"
#include "proto/wire/grant_message.h"
#include "server/dataplane/listener.h"
#include "server/dispatch/event_loop.h"
#include "server/grants/events.h"
#include "server/grants/pool.h"
#include "server/registry/registry.h"
#include "server/state/names.h"
#include "server/state/store.h"

namespace rdmad::grants {

class GrantManagerTestPeer;

class GrantManager final : public dataplane::GrantConnections {
 public:
  struct Options {
    absl::Duration default_ttl = absl::Seconds(60);
    absl::Duration max_ttl = absl::Hours(24);
    absl::Duration max_token_ttl = absl::Hours(1);  // the TokenStore's: a client connects within it
    absl::Duration quarantine = absl::Seconds(60);  // before a revoked window or key value is used again
      // How long a key's invalidation may wait on the client's QP (behind a SEND the client never receives,
    // retried without end if its connection asked for unlimited RNR retry) before rdmad disconnects it: the
    // QP's error state flushes the queue, and the window is deallocated and replaced, killing the key.
    absl::Duration key_kill_timeout = absl::Seconds(5);
    // After a grant's key is dead and its ENDED message sent, how long its client's connection stays before
    // rdmad disconnects it: meanwhile a read through the dead key gets a remote access error from rdmad's NIC
    // within one round trip (any rdma-core client), and a NAK already on the wire reaches the client before
    // the disconnect flushes its queue. 0: disconnect as soon as the message's completion is seen.
    absl::Duration end_grace = absl::Milliseconds(250);
  size_t pool_size = 8;                           // ready windows kept per PD
    size_t max_ended = 1024;                        // ended grants remembered for Get/List
    size_t max_batch = 1024;                        // IssueGrants
    // rdmad-wide: grants not ended, of every caller, admins included (config limits.grants; 0: none). An
    // issue past it is refused before anything is made: RESOURCE_EXHAUSTED naming "grants", its value and
    // its use; IssueGrants reserves its whole batch at once, so it is refused as a whole or issued as one.
    uint64_t max_grants = 65536;
    // The widest key an issue may give (config grant_max_scope): SCOPE_QP refuses a grant on a device
    // without type 2 windows, SCOPE_PD one on a device without windows (whose key would be the MR's own
    // rkey), with FAILED_PRECONDITION naming the setting and the device. SCOPE_MR (or unspecified): any.
    v1::GrantScope max_scope = v1::SCOPE_MR;
    size_t watch_buffer = 1024;
    std::function<absl::Time()> clock = [] { return wire::WallNow(); };  // not absl::Now(): see wall_clock.h
    // The crash-safe state store (not owned; may be null): grant names are never reused across restarts,
    // and each live grant is recorded (issued, renewed; removed when it ends) so a restart can report it.
    state::Store* state = nullptr;
  };

  // `cm` (the connections' ids: SENDs, disconnects) and `listener` (the endpoints, and whose connections
  // report here) may be null (no rdma_cm): no grant is issued then. None is owned.
  GrantManager(Registry* registry, cm::CmManager* cm, dataplane::Listener* listener, cm::TokenStore* tokens,
               Options options);
  ~GrantManager() override;
  GrantManager(const GrantManager&) = delete;
  GrantManager& operator=(const GrantManager&) = delete;

  absl::StatusOr<v1::IssuedGrant> Issue(const v1::IssueGrantRequest& request);
  absl::StatusOr<v1::IssueGrantsResponse> IssueBatch(const v1::IssueGrantsRequest& request);
  absl::StatusOr<v1::Grant> Get(const std::string& name) const;
  // INVALID_ARGUMENT or NOT_FOUND on "mr" unless `mr` (a List or WatchGrants filter) is empty or a region.
  absl::Status CheckMrFilter(const std::string& mr) const;
  // In number order, those numbered past `after`, at most `limit` of them (0: all): ListGrants' pages, each
  // costing what it returns (plus the filter's skips), not the whole list.
  absl::StatusOr<std::vector<v1::Grant>> List(const v1::ListGrantsRequest& request, uint64_t after = 0,
                                              size_t limit = 0) const;
  // Grants on a PD not yet ended (a tenant's grants quota), from the live index: O(log n).
  size_t LiveOnPd(const std::string& pd) const;
  // Grants not yet ended, of every caller (the rdmad-wide limit's use).
  size_t Live() const;
  absl::StatusOr<v1::Grant> Renew(const v1::RenewGrantRequest& request);
  // `done` runs once the key is dead at the NIC, or with why it could not be killed.
  void Revoke(const std::string& name, Done<v1::Grant> done);
  GrantHub& events() { return hub_; }
  // The audit trail: one "grant ended" record per end (resource grants/N, principal the grant's, detail the
  // reason). Set before the first grant is issued; not owned. Records are made under mu_ and written after
  // it is released (FlushAudit), never with mu_ held.
  void set_audit(audit::AuditSink* sink) { audit_ = sink; }
  // Before a grant's bind pins a bounds region (registry.h BoundsRegionBytes), the PD's tenant's pinned_bytes
  // quota: `admit(pd, bytes)` returns a hold, kept until the bind has committed (the registry then counts
  // the pages), or why not, which fails the activation (END_ACTIVATION_FAILED, nothing pinned). Set before
  // the first grant is issued; none: no quota applies.
  using AdmitPinned = std::function<absl::StatusOr<std::shared_ptr<void>>(const std::string& pd, uint64_t bytes)>;
  void set_admit_pinned(AdmitPinned admit) { admit_pinned_ = std::move(admit); }

  // Before DeregisterMr / ReregisterMr (`mr` set) or DeletePd (`pd` set): with live grants on it, refuses
  // (FAILED_PRECONDITION, EBUSY, naming them) unless `revoke`, in which case it ends them with `reason`
  // first. For a PD it also deallocates the pool's windows. Until Unretire, no grant is issued on it.
  // `done` gets OK or the refusal; call Unretire after the registry operation, whatever its outcome.
  void Retire(const std::string& mr, const std::string& pd, bool revoke, v1::GrantEndReason reason,
              const std::string& field, absl::AnyInvocable<void(absl::Status) &&> done);
  void Unretire(const std::string& mr, const std::string& pd);

  // Restart recovery (recover.cc): at start-up, before serving. `live` are the grants the state store
  // held: live when the previous rdmad stopped without ending them (a crash, kill -9). Each is remembered
  // as ENDED with END_RESTARTED (their keys died with the old process), published as a GRANT_REVOKED
  // event (the first events of this run: WatchGrants with from_oldest sees them) and removed from the
  // store. Returns their names.
  std::vector<std::string> Recover(const std::vector<v1::Grant>& live);

  // SIGTERM's drain: no grant is issued from now on (UNAVAILABLE), and every live grant ends the normal
  // way with reason SHUTDOWN: its key killed at the NIC, the ENDED message sent to its client, then its
  // connection closed. Waits until all of that is done or `deadline` passes; returns how many grants, or
  // goodbyes, were still under way then (0: a clean drain). A gRPC or main thread; never a dispatcher.
  size_t Drain(absl::Time deadline);

  // The injected clock (Options::clock) moved: ends the grants whose lease is now over, as the expiry timer
  // would, and re-arms the timer. Returns once their ends have started. With a clock of its own (a test's
  // fake time) this is the timer's tick; the wall clock needs no call. Never on the grants' loop.
  void ClockMoved();

  // Ends every grant (SHUTDOWN) without touching the fabric, stops the timer, closes watchers. Call before
  // the CmManager quiesces; the registry and the CM layer then release the windows and connections.
  void Shutdown();

  // dataplane::GrantConnections (on a CM dispatcher).
  void OnAccepting(const std::string& grant) override;
  void OnConnected(const std::string& grant, const std::string& cm_id, const std::string& qp,
                   uint8_t version) override;
  absl::Status CheckJoin(const std::string& cm_id, const std::string& pd) override;
  void OnActivate(const std::string& grant, const std::string& cm_id, uint64_t tag) override;
  absl::Status OnRelease(const std::string& cm_id, uint64_t grant_id) override;
  void OnGone(const std::string& grant, const std::string& cm_id, absl::AnyInvocable<void() &&> release) override;
  // Sessions (connections of version 2) open now, and the grants on them not ended (a test's view).
  size_t Sessions() const;
  // Thread hand-offs on each SCOPE_QP key's path, counted where its SEND is posted with its bind: from the
  // connect request on the data-plane listener (or, for a session's grant, from the receive of its
  // ACTIVATE) to that post (dispatch/handoffs.h). keys[n]: keys sent after n hand-offs (the last: n or more).
  struct KeyHandoffs {
    std::array<uint64_t, 4> keys{};
  };
  KeyHandoffs key_handoffs() const;

 private:
  // A grant. Its id is set when it is made, before it is in grants_, and never changed; the rest is its
  // book, guarded by mu_ (book.Get(mu_), checked by clang's analysis).
  struct Entry {
    uint64_t id = 0;
    struct Book {
      v1::Grant info;  // what Get shows; state, times, links
      // The registry's objects it binds over, by number, resolved once (its region at issue, its
      // connection's QP when established, its window when taken from the pool; 0: none yet): what its
      // activation passes the registry (Registry::GrantBind) and its pool takes back, while `info` shows
      // their names (its end invalidates the window by that name).
      uint64_t mr_id = 0, qp_id = 0, window_id = 0;
      uint32_t access_bits = 0;  // wire::kGrantRead | kGrantWrite
      absl::Time expiry;
      uint32_t rkey = 0;
      uint64_t remote_addr = 0;
      int activation_attempts = 0;
      bool key_sent = false;    // the ACTIVE message went out with the bind in flight (KeyMessage)
      bool busy = false;        // an activation or an end is in flight
      bool ending = false;      // the in-flight operation is the end
      v1::GrantEndReason pending_end = v1::GRANT_END_UNSPECIFIED;  // asked for while busy activating
      std::string pending_detail;
      std::vector<Done<v1::Grant>> waiters;       // RevokeGrant / Retire calls waiting for the end
      // From OnGone, for a grant whose client left before its connection was established (no session yet):
      // called once the grant ended. A connected grant's connection is released by its Session.
      absl::AnyInvocable<void() &&> release;
      // Its connection's data-plane protocol version (2: a session), the client's tag of the ACTIVATE that
      // activated it (0: the connect request's grant) and its token's number, for its messages.
      uint8_t version = 1;
      uint64_t tag = 0;
      uint64_t token_id = 0;
      absl::Time kill_deadline = absl::InfiniteFuture();  // of its LOCAL_INV in flight (kills_); none: infinite
      // The bounds region of its window's bind, pinned on a pin worker while its client's connection is
      // being accepted (OnAccepting): kPinning until the pin returns (OnPinned), then kReady with it in
      // `bounds` until the activation takes it. ESTABLISHED while kPinning sets activate_after_pin: the
      // pin's return then activates, on the pin worker.
      enum class Pin { kNone, kPinning, kReady } pin = Pin::kNone;
      std::unique_ptr<Registry::PinnedBounds> bounds;
      bool activate_after_pin = false;
    };
    LockedBy<Book> book;  // mu_
  };
  using Waiters = std::vector<Done<v1::Grant>>;
  // A data-plane connection that carried a grant's token, from its ESTABLISHED (OnConnected) until it is
  // released: its grants (one for version 1; any number for a session, version 2). Its connection stays
  // while a grant on it is not ended; after the last one, Options::end_grace (Farewell), unless an ACTIVATE
  // comes meanwhile. When the client leaves (OnGone), every grant on it ends and, once none holds a window
  // on its QP, `release` destroys the connection.
  struct Session {
    std::string qp, pd;  // the connection's QueuePair and its PD: every grant on it is on that PD
    uint64_t qp_id = 0;  // the QueuePair's number (qps/N)
    uint8_t version = 1;
    std::set<uint64_t> grants;  // activating or active on it
    bool gone = false;          // OnGone came: `release` is called when `grants` empties
    absl::AnyInvocable<void() &&> release;
  };

  absl::StatusOr<Entry*> Find(const std::string& name, const std::string& field) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Checks a request and works out the grant's scope; no lock held (asks the registry).
  struct Plan {
    v1::Grant info;
    uint64_t mr_id = 0;
    uint32_t access_bits = 0;
    absl::Duration ttl;
    fabric::MwType window_type = fabric::MwType::kType2;
  };
  absl::StatusOr<Plan> Check(const v1::IssueGrantRequest& request, const std::string& prefix) const;
  // The data-plane listener's addresses, which a grant names; why not (no rdma_cm, no listener).
  absl::StatusOr<std::vector<v1::SocketAddress>> Endpoints() const;
  // Commits a checked plan, unless the ticket it was checked under went stale (*stale set, nothing done).
  absl::StatusOr<v1::IssuedGrant> Commit(Plan plan, const std::vector<v1::SocketAddress>& endpoints,
                                         uint64_t ticket, bool* stale);
  // Commit's checks alone (validate_only): the grant it would issue, without a name, a token or any record.
  absl::StatusOr<v1::IssuedGrant> CheckCommit(Plan plan, const std::vector<v1::SocketAddress>& endpoints,
                                              uint64_t ticket, bool* stale);
  // A ticket covers an issue from before its Check until its Commit: a Retire of one of its regions (or of
  // any PD) in between makes it stale, and the issue is checked again, so it never commits on a region or
  // PD removed or changed after its check.
  // Opening one also reserves `grants` places under Options::max_grants (or refuses, RESOURCE_EXHAUSTED):
  // each Commit under it turns one into a live grant, and CloseTicket gives back those left.
  absl::StatusOr<uint64_t> OpenTicket(std::set<std::string> mrs, size_t grants);
  void CloseTicket(uint64_t ticket);
  // Issue's steps; `between` (tests only, may be null) runs after the request was first checked and before
  // it commits.
  absl::StatusOr<v1::IssuedGrant> IssueChecked(const v1::IssueGrantRequest& request,
                                               const std::function<void()>& between);
  absl::StatusOr<v1::IssueGrantsResponse> IssueBatchChecked(const v1::IssueGrantsRequest& request,
                                                            const std::vector<v1::SocketAddress>& endpoints,
                                                            uint64_t ticket, bool* stale);
  void Publish(v1::GrantEventType type, const Entry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The state store's record of a live grant (issued, renewed), or its removal (ended), submitted to the
  // store's journal under mu_ (a queue push, no I/O; a failure is logged by the journal). Issue and Renew
  // wait for PersistLocked's ticket after releasing mu_; an end (on whichever thread: a dispatcher, the
  // grants' loop) does not wait. A done ticket without a store.
  state::Ticket PersistLocked(const Entry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UnpersistLocked(uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Lifecycle (lifecycle.cc). None is called with mu_ held.
  using Key = Registry::Key;  // a window's (or region's) rkey and the address a peer reads its first byte at
  // `bounds`: the bounds region pinned ahead for this activation's bind, if any.
  void Activate(uint64_t id, std::unique_ptr<Registry::PinnedBounds> bounds = nullptr);
  void OnPinned(uint64_t id, absl::StatusOr<std::unique_ptr<Registry::PinnedBounds>> pinned);
  void OnBound(uint64_t id, uint64_t window, absl::StatusOr<Key> key);  // window: mws/N (0: none)
  // Ends the grant: at once if it holds no key; otherwise kills the key first. `done` may be null.
  void End(uint64_t id, v1::GrantEndReason reason, std::string detail, Done<v1::Grant> done);
  void KillKey(uint64_t id);
  void OnKeyKilled(uint64_t id, absl::Status status);
  // The grant leaves its session: the session's release if it was the last grant of a connection that is
  // gone (else the grant's own, or nothing).
  absl::AnyInvocable<void() &&> LeaveSessionLocked(Entry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A session's grant became live again before its parting: the parting is called off.
  void CancelPartingLocked(const std::string& cm_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks it ENDED and forgets its links; returns the waiters to run and the release to call.
  void FinishEndLocked(Entry& e, v1::GrantEndReason reason, const std::string& detail, Waiters* waiters,
                       absl::AnyInvocable<void() &&>* release) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Releases the bounds regions and writes the audit records FinishEndLocked queued. Called after mu_ is
  // released by every path that ends a grant, before its waiters are answered.
  void FlushAudit() ABSL_LOCKS_EXCLUDED(mu_);
  // After an end: the ENDED (or FAILED) message, then rdma_disconnect; or the release, if the client left.
  void Farewell(const std::string& cm_id, std::string message, absl::AnyInvocable<void() &&> release);
  // `key` (ACTIVE only; null: the entry's own): the key the message carries.
  std::string Message(const Entry& e, wire::GrantMessageType type, const Key* key = nullptr) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The ACTIVE message for a type 2 bind in flight (Registry::KeyMessage), or empty if no key may go out:
  // the grant ended or is ending, or the key value is still in quarantine. Takes mu_.
  std::string KeyWithBind(uint64_t id, Key key) ABSL_LOCKS_EXCLUDED(mu_);

  // Expiry and stuck kills (the "grants" loop): one timer for the earliest of both indexes.
  void ScheduleLocked(Entry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A key's invalidation on the client's QP began: it must end by Options::key_kill_timeout.
  void WatchKillLocked(Entry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UnwatchKillLocked(Entry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ArmTimer();
  void OnTimer();
  // OnTimer's steps: take the grants whose lease has run out from the expiry index, then end them; take the
  // invalidations past their deadline, then disconnect their clients.
  std::vector<uint64_t> TakeDue();
  // The connections whose end_grace is over; then Part disconnects them (and counts their farewells done).
  std::vector<std::string> TakeDuePartings();
  void Part(const std::vector<std::string>& cm_ids);
  void EndDue(const std::vector<uint64_t>& due);
  std::vector<std::pair<std::string, std::string>> TakeStuckKills();  // (grant, cm id)
  void Disconnect(const std::vector<std::pair<std::string, std::string>>& stuck);
  // Pool refill (the "grants" loop).
  void RefillSoon(const std::string& pd);
  void Refill(const std::string& pd);
  void ForgetEndedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Registry* const registry_;
  cm::CmManager* const cm_;
  dataplane::Listener* const listener_;
  cm::TokenStore* const tokens_;
  const Options options_;
  GrantHub hub_;
  audit::AuditSink* audit_ = nullptr;
  AdmitPinned admit_pinned_;

  mutable Mutex mu_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  std::array<std::atomic<uint64_t>, 4> key_handoffs_{};  // KeyHandoffs, counted in KeyWithBind
  size_t farewells_ ABSL_GUARDED_BY(mu_) = 0;  // ENDED/FAILED messages sent, their disconnect not yet done
  state::NameCounter next_id_ ABSL_GUARDED_BY(mu_){options_.state, "grants"};  // never reused (state/names.h)
  std::map<uint64_t, std::unique_ptr<Entry>> grants_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::set<uint64_t>> by_mr_ ABSL_GUARDED_BY(mu_);         // live grants
  std::map<std::string, std::set<uint64_t>> by_pd_ ABSL_GUARDED_BY(mu_);         // live grants
  std::map<std::string, std::set<uint64_t>> by_principal_ ABSL_GUARDED_BY(mu_);  // live and remembered
  std::deque<uint64_t> ended_ ABSL_GUARDED_BY(mu_);                               // in end order
  std::set<std::pair<absl::Time, uint64_t>> expiries_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<absl::Time, uint64_t>> kills_ ABSL_GUARDED_BY(mu_);  // invalidations in flight, by deadline
  // Ended grants' connections in their end_grace, by when they are disconnected (absl::Now(), not
  // options_.clock: a grace is real time), counted in farewells_.
  std::set<std::pair<absl::Time, std::string>> partings_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, absl::Time> parting_at_ ABSL_GUARDED_BY(mu_);  // partings_ by CM id
  std::map<std::string, Session> sessions_ ABSL_GUARDED_BY(mu_);  // by CM id
  std::map<std::string, WindowPool> pools_ ABSL_GUARDED_BY(mu_);  // by PD
  std::set<std::string> retiring_ ABSL_GUARDED_BY(mu_);           // MRs and PDs being removed
  std::set<std::string> refilling_ ABSL_GUARDED_BY(mu_);          // PDs with a refill queued
  struct Ticket {
    std::set<std::string> mrs;  // the regions its requests name
    bool stale = false;         // a Retire that may concern it came after its check began
    size_t reserved = 0;        // places under max_grants not yet taken by a Commit
  };
  std::map<uint64_t, Ticket> tickets_ ABSL_GUARDED_BY(mu_);  // issues between their Check and Commit
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 0;
  size_t live_ ABSL_GUARDED_BY(mu_) = 0;      // grants not ended (Commit counts one, FinishEndLocked ends it)
  size_t reserved_ ABSL_GUARDED_BY(mu_) = 0;  // the tickets' reserved places, summed
  std::vector<audit::Event> audit_pending_ ABSL_GUARDED_BY(mu_);  // grant ends not yet written (FlushAudit)
  // Bounds regions pinned ahead for grants that ended first: released by FlushAudit, without mu_.
  std::vector<std::unique_ptr<Registry::PinnedBounds>> unpinned_ ABSL_GUARDED_BY(mu_);

  // The callbacks this manager hands to the registry and the CM layer (bind, invalidate and rereg
  // completions, a farewell's send) run on their threads, possibly while or after the manager is
  // destroyed: rdmad destroys it before the CM manager and the registry, and a callback may go on using
  // the manager after it answered the RevokeGrant that let the shutdown proceed. So they hold the lifeline, not just `this`: one runs only while the manager is
  // alive, and the destructor cuts the lifeline, waiting for those running.
  class Lifeline {
   public:
    bool Enter() {  // false once cut
      MutexLock lock(&mu_);
      if (cut_) return false;
      ++running_;
      return true;
    }
    void Leave() {
      MutexLock lock(&mu_);
      --running_;
    }
    void Cut() {
      MutexLock lock(&mu_);
      cut_ = true;
      mu_.Await([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return running_ == 0; });
    }

   private:
    Mutex mu_;
    bool cut_ ABSL_GUARDED_BY(mu_) = false;
    int running_ ABSL_GUARDED_BY(mu_) = 0;  // callbacks inside (nested ones count twice)
  };
  // `f` (a callback of the manager's, returning nothing), run only while the manager is alive.
  template <typename F>
  auto Guarded(F f) {
    return [lifeline = lifeline_, f = std::move(f)](auto&&... args) mutable {
      if (!lifeline->Enter()) return;
      f(std::forward<decltype(args)>(args)...);
      lifeline->Leave();
    };
  }
  const std::shared_ptr<Lifeline> lifeline_ = std::make_shared<Lifeline>();

  int timer_fd_ = -1;
  std::unique_ptr<dispatch::EventLoop> loop_;  // last: stopped first

  friend class GrantManagerTestPeer;  // runs the steps of Issue and OnTimer apart, to force their races
};

}  // namespace rdmad::grants

#endif  // RDMAD_SERVER_GRANTS_MANAGER_H_
