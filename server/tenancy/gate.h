// The tenancy gate: what a caller may see and use, and how much (docs/security.md#tenants).
//
// Ownership. A PD belongs to the tenant that created it, a user channel likewise; every other resource
// (MR, window, QP, CM id, token, grant) lives in a PD and belongs to that PD's tenant. So no PD, and no
// key, is shared between tenants. rdmad's own channels (the default and worker channels) are shared:
// anyone may put ids on them, and a tenant's watch of them shows only its own ids' events.
// A resource of another tenant is NOT_FOUND, with the very message a missing one gets: never a hint.
// Admins see everything.
//
// Quotas (per tenant; config.h Quotas, 0: unlimited) are summed over the tenant's PDs from the running
// totals each owner keeps as its objects come and go (Registry, CmManager, GrantManager, TokenStore
// UsageOfPd and the like: O(log n) per PD, never a listing), not from a count of the gate's own, so
// nothing the gate misses can leak a count: pinned_bytes and mrs (the tenant's MRs), mws, qps (QPs made by CreateQp),
// cm_ids (its CM ids but data-plane connections), grants (not ended), tokens (outstanding), connections
// (its CM ids connected, connecting or waiting for Accept, data-plane ones included). A creation reserves
// what it will add; use + reserved must stay within the limit, else RESOURCE_EXHAUSTED names the quota,
// its limit and its use. Between a creation's commit and the release of its reservation a concurrent
// check counts it twice: a refusal can come one early under a race, never a creation past the limit.
// channels (its user event channels, from the ownership map) and watch_streams (its open Watch* streams,
// counted by the gate itself through OpenWatch's handles, which also keep the rdmad-wide watch_streams
// limit for every caller, admins included).
// rpc_per_second: a token bucket per gRPC connection (peer), burst rpc_burst.
//
// Which PD is whose is the registry's record (Registry::TenantOfPd), made with the PD: the gate keeps no
// copy of it. It keeps the user channels' owners and the CM ids' PDs (for the watch filters).
//
// Threads: any gRPC thread, and the data-plane listener (AdmitConnection). map_mu_ guards the channel and
// CM id maps and is a leaf lock (the watch filters take it under a hub's lock, the CM manager's id-gone
// hook under its mu_). Each tenant's quota book has its own lock: it serializes that tenant's reservations
// only, and is taken before the registry's, the CM manager's, the grant manager's and the token store's
// locks (it reads their per-PD totals), never under them. books_mu_ only finds or adds a book (a leaf).
#ifndef RDMAD_SERVER_TENANCY_GATE_H_
#define RDMAD_SERVER_TENANCY_GATE_H_

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "server/common/sync.h"
#include "absl/time/time.h"
#include "rdmad/v1/rdmad.pb.h"
#include "server/auth/caller.h"
#include "server/auth/policy.h"
#include "server/cm/manager.h"
#include "server/cm/token.h"
#include "server/grants/manager.h"
#include "server/registry/registry.h"

namespace rdmad::tenancy {

enum class Quota {
  kPinnedBytes, kMrs, kMws, kQps, kCmIds, kGrants, kTokens, kConnections, kChannels, kWatchStreams, kPds
};
inline constexpr int kQuotas = 11;
const char* QuotaName(Quota q);

class Gate {
 public:
  struct Deps {
    Registry* registry = nullptr;
    cm::CmManager* cm = nullptr;         // may be null (no rdma_cm)
    grants::GrantManager* grants = nullptr;  // may be null
    cm::TokenStore* tokens = nullptr;    // may be null
    // rdmad-wide: open Watch* streams of every caller (config limits.watch_streams; 0: none).
    uint64_t max_watch_streams = Limits().watch_streams;
    // Destroyed CM ids whose PD is still remembered for the watch filters (their events may be replayed
    // from the event hub's retained history, EventHub::Options::retained); older ones are forgotten.
    size_t remember_gone_cm_ids = 4096;
  };
  // Registers with deps.cm (if any) to forget each CM id once it is destroyed; the destructor unregisters.
  Gate(const auth::Policy* policy, Deps deps);
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;

  const auth::Policy& policy() const { return *policy_; }

  // The caller of this call, or why it may not call at all (PERMISSION_DENIED), or RESOURCE_EXHAUSTED
  // when its connection exceeds the tenant's rpc_per_second, or UNAVAILABLE once rdmad is draining.
  absl::StatusOr<auth::Caller> Admit(const auth::Peer& peer);
  // SIGTERM's drain: from now on every new call is UNAVAILABLE ("rdmad is shutting down"); calls already
  // admitted finish. Any thread; once.
  void StartDraining() { draining_.store(true, std::memory_order_relaxed); }

  // OK if `caller` may see the resource `name` (any kind: "pds/3", "mrs/4", "channels/2", "devices/rxe0",
  // ...; empty: OK). Otherwise NOT_FOUND on `field` with the message a missing resource gets. A name
  // that does not resolve is OK here (the call itself then reports it, as for anyone), unless
  // `must_exist` (a creation's parent, checked before its quota): then a well-formed name of nothing is
  // NOT_FOUND here too.
  absl::Status See(const auth::Caller& caller, const std::string& name, const std::string& field,
                   bool must_exist = false);
  // A device, named "devices/rxe0" or bare "rxe0": OK if the caller may use it, else NOT_FOUND on `field`
  // with the message a missing device gets. Both spellings get the same answer.
  absl::Status SeeDevice(const auth::Caller& caller, const std::string& device, const std::string& field) const;
  bool SeesPd(const auth::Caller& caller, const std::string& pd) const;
  bool SeesDevice(const auth::Caller& caller, const std::string& device) const;
  // A channel in a list: rdmad's shared channels and the caller's own.
  bool SeesChannel(const auth::Caller& caller, const v1::EventChannel& channel) const;

  // Ownership bookkeeping, after a successful creation or deletion (a PD's is the registry's: CreatePd).
  void OwnChannel(const std::string& channel, const std::string& tenant);
  void ForgetChannel(const std::string& channel);
  void NoteCmId(const std::string& cm_id, const std::string& pd);
  // Once the id is destroyed (the CM manager's hook, set_cm_id_gone, wired by whoever owns both and keeps the
  // gate alive until the CM manager is gone): its last event was published. Its PD stays known while it is
  // among the last Deps::remember_gone_cm_ids destroyed (a watch may replay its events).
  void ForgetCmId(const std::string& cm_id);
  // CM ids whose PD the gate knows now (bounded by the live ids and remember_gone_cm_ids).
  size_t KnownCmIds() const;
  std::string TenantOfPd(const std::string& pd) const { return deps_.registry->TenantOfPd(pd); }
  std::vector<std::string> PdsOf(const std::string& tenant) const { return deps_.registry->PdsOfTenant(tenant); }

  // Watch filters (null for admins): run under a hub's lock; they take map_mu_ only.
  std::function<bool(const v1::CmEvent&)> CmEventsFor(const auth::Caller& caller);
  std::function<bool(const v1::GrantEvent&)> GrantEventsFor(const auth::Caller& caller);

  // A reservation against the caller's tenant's quotas; released when destroyed (after the creation
  // committed or failed). Admins and callers outside tenants reserve nothing.
  class Reservation {
   public:
    Reservation() = default;
    Reservation(Reservation&& o) noexcept { *this = std::move(o); }
    Reservation& operator=(Reservation&& o) noexcept;
    ~Reservation();

   private:
    friend class Gate;
    Gate* gate_ = nullptr;
    std::string tenant_;
    std::array<uint64_t, kQuotas> amounts_{};
  };
  absl::StatusOr<Reservation> Reserve(const auth::Caller& caller, std::vector<std::pair<Quota, uint64_t>> wants);

  // One open Watch* stream: counted against the caller's tenant's watch_streams quota and the rdmad-wide
  // limit from OpenWatch until the handle is destroyed (when the stream ends). Move-only; any thread.
  class WatchSlot {
   public:
    WatchSlot() = default;
    WatchSlot(WatchSlot&& o) noexcept { *this = std::move(o); }
    WatchSlot& operator=(WatchSlot&& o) noexcept;
    ~WatchSlot();

   private:
    friend class Gate;
    Gate* gate_ = nullptr;
    std::string tenant_;  // empty: an admin's or a single-tenant caller's (the global limit only)
  };
  // A slot for a new watch stream, or RESOURCE_EXHAUSTED naming the quota watch_streams of the tenant (or
  // the rdmad-wide limit watch_streams), its value and its use.
  absl::StatusOr<WatchSlot> OpenWatch(const auth::Caller& caller);
  // Open watch streams: of every caller, and of one tenant.
  uint64_t OpenWatches() const;
  uint64_t OpenWatches(const std::string& tenant) const;

  // The data-plane listener, before redeeming a good token on `pd` (dataplane::Listener::set_admit_connection):
  // RESOURCE_EXHAUSTED if the PD's tenant is at its connections quota. The request's own id is not counted
  // yet (its PD is set once the token is redeemed, on the same listener thread, so the next request counts it).
  absl::Status AdmitConnection(const std::string& pd);

  // A tenant's quotas with their use now.
  std::vector<v1::QuotaUsage> Usage(const TenantConfig& tenant);
  v1::Tenant TenantProto(const TenantConfig& tenant);

 private:
  using Counts = std::array<uint64_t, kQuotas>;
  // One tenant's quota book: its reservations and open watch streams.
  struct Book {
    Mutex mu;  // serializes the tenant's quota checks (see the top of this file)
    Counts reserved ABSL_GUARDED_BY(mu){};
    uint64_t watches ABSL_GUARDED_BY(mu) = 0;
  };
  // Made on first use and kept (tenants are named by the configuration: a bounded set).
  Book& BookOf(const std::string& tenant) ABSL_LOCKS_EXCLUDED(books_mu_);
  Book* FindBook(const std::string& tenant) const ABSL_LOCKS_EXCLUDED(books_mu_);
  // Resolves a name to its tenant; *miss: why the name does not resolve (malformed, missing), else OK.
  std::string TenantOf(const std::string& name, absl::Status* miss);
  std::string CmIdPd(const std::string& cm_id, absl::Status* miss);
  absl::Status Hidden(const std::string& name, const std::string& field) const;
  Counts CountUse(const std::string& tenant, const Book& book) ABSL_EXCLUSIVE_LOCKS_REQUIRED(book.mu);
  static Counts LimitsOf(const Quotas& q);
  void Release(const std::string& tenant, const Counts& amounts);
  void CloseWatch(const std::string& tenant);

  const auth::Policy* const policy_;
  const Deps deps_;

  mutable Mutex map_mu_;
  std::map<std::string, std::string> channel_tenant_ ABSL_GUARDED_BY(map_mu_);  // user channels
  // CM id -> its PD, for the watch filters: live ids, and the last destroyed ones (gone_order_, oldest
  // first), whose events a watch may still replay. Names are never reused, so an entry stays true.
  std::map<std::string, std::string> cm_id_pd_ ABSL_GUARDED_BY(map_mu_);
  std::set<std::string> gone_ ABSL_GUARDED_BY(map_mu_);
  std::deque<std::string> gone_order_ ABSL_GUARDED_BY(map_mu_);

  mutable Mutex books_mu_;
  std::map<std::string, std::unique_ptr<Book>> books_ ABSL_GUARDED_BY(books_mu_);
  std::atomic<uint64_t> watches_{0};  // every caller's open streams (the rdmad-wide limit)

  struct Bucket {
    double tokens = 0;
    absl::Time last;
  };
  std::atomic<bool> draining_{false};
  Mutex rate_mu_;
  std::map<std::string, Bucket> buckets_ ABSL_GUARDED_BY(rate_mu_);  // by gRPC peer (one per connection)

  friend class GateTestPeer;  // holds one tenant's book, to show the others never wait for it
};

}  // namespace rdmad::tenancy

#endif  // RDMAD_SERVER_TENANCY_GATE_H_
