#include "server/tenancy/gate.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/common/status.h"

namespace rdmad::tenancy {
namespace {

constexpr char kShared[] = "*";  // a resource every tenant may use (rdmad's own channels)

std::string Bare(const std::string& device) {
  return absl::StartsWith(device, "devices/") ? device.substr(8) : device;
}

}  // namespace

const char* QuotaName(Quota q) {
  static const char* const kNames[kQuotas] = {"pinned_bytes", "mrs",         "mws",      "qps",
                                              "cm_ids",       "grants",      "tokens",   "connections",
                                              "channels",     "watch_streams", "pds"};
  return kNames[static_cast<int>(q)];
}

Gate::Gate(const auth::Policy* policy, Deps deps) : policy_(policy), deps_(deps) {}

// ---------------------------------------------------------------------------------------------------------
// Callers

absl::StatusOr<auth::Caller> Gate::Admit(const auth::Peer& peer) {
  if (draining_.load(std::memory_order_relaxed)) {
    return absl::UnavailableError("rdmad is shutting down: it takes no new calls; retry on another instance or "
                                  "after its restart");
  }
  RDMAD_ASSIGN_OR_RETURN(auth::Caller caller, policy_->Resolve(peer));
  const TenantConfig* t = caller.tenant.empty() ? nullptr : policy_->FindTenant(caller.tenant);
  if (t == nullptr || t->quotas.rpc_per_second == 0) return caller;
  const double rate = static_cast<double>(t->quotas.rpc_per_second);
  const double burst = static_cast<double>(t->quotas.rpc_burst ? t->quotas.rpc_burst : t->quotas.rpc_per_second);
  const absl::Time now = absl::Now();
  MutexLock lock(&rate_mu_);
  if (buckets_.size() > 4096) {  // forget connections idle for a minute
    for (auto it = buckets_.begin(); it != buckets_.end();) {
      it = now - it->second.last > absl::Minutes(1) ? buckets_.erase(it) : std::next(it);
    }
  }
  auto [it, fresh] = buckets_.try_emplace(peer.address);
  Bucket& b = it->second;
  b.tokens = fresh ? burst : std::min(burst, b.tokens + absl::ToDoubleSeconds(now - b.last) * rate);
  b.last = now;
  if (b.tokens < 1) {
    return FieldError(absl::StatusCode::kResourceExhausted, "",
                      absl::StrCat("quota rpc_per_second of tenant ", t->name, ": limit ", t->quotas.rpc_per_second,
                                   " calls per second per connection (burst ", static_cast<uint64_t>(burst),
                                   ") exceeded; retry later"));
  }
  b.tokens -= 1;
  return caller;
}

// ---------------------------------------------------------------------------------------------------------
// Visibility

absl::Status Gate::Hidden(const std::string& name, const std::string& field) const {
  if (absl::StartsWith(name, "grants/")) return NotFound(field, absl::StrCat(name, " does not exist (or ended long ago)"));
  return NotFound(field, absl::StrCat(name, " does not exist"));
}

std::string Gate::CmIdPd(const std::string& cm_id, absl::Status* miss) {
  // Asked of the CM manager, not remembered here: a note made now could outlive the id.
  absl::StatusOr<v1::CmId> id = deps_.cm ? deps_.cm->GetCmId(cm_id) : absl::NotFoundError("");
  if (!id.ok()) {
    *miss = id.status();
    return "";
  }
  return id->pd();
}

std::string Gate::TenantOf(const std::string& name, absl::Status* miss) {
  *miss = absl::OkStatus();
  std::string pd;
  auto take = [&](const auto& lookup, auto pd_of) {
    if (lookup.ok()) pd = pd_of(*lookup); else *miss = lookup.status();
  };
  if (absl::StartsWith(name, "pds/") || absl::StartsWith(name, "mrs/") || absl::StartsWith(name, "mws/") ||
      absl::StartsWith(name, "qps/")) {
    take(deps_.registry->PdOf(name), [](const std::string& p) { return p; });  // bookkeeping, no device query
  } else if (absl::StartsWith(name, "cmids/")) {
    pd = CmIdPd(name, miss);
  } else if (absl::StartsWith(name, "grants/")) {
    if (deps_.grants == nullptr) *miss = absl::NotFoundError(""); else take(deps_.grants->Get(name), [](const v1::Grant& g) { return g.pd(); });
  } else if (absl::StartsWith(name, "channels/")) {
    {
      MutexLock lock(&map_mu_);
      auto it = channel_tenant_.find(name);
      if (it != channel_tenant_.end()) return it->second;
    }
    auto ch = deps_.cm ? deps_.cm->GetChannel(name) : absl::NotFoundError("");
    if (!ch.ok()) *miss = ch.status();
    return ch.ok() && ch->role() != v1::CHANNEL_USER ? kShared : "";
  } else {
    *miss = absl::InvalidArgumentError("not a resource name");
  }
  return miss->ok() ? TenantOfPd(pd) : "";
}

absl::Status Gate::See(const auth::Caller& caller, const std::string& name, const std::string& field,
                       bool must_exist) {
  if (caller.admin || name.empty()) return absl::OkStatus();
  if (field == "device" || absl::StartsWith(name, "devices/")) return SeeDevice(caller, name, field);
  absl::Status miss;
  const std::string tenant = TenantOf(name, &miss);
  if (!miss.ok()) {
    // A well-formed name of nothing: a creation in it answers NOT_FOUND now, before its quota is looked at,
    // exactly as for another tenant's (else a tenant at its quota could tell the two apart).
    return must_exist && miss.code() == absl::StatusCode::kNotFound ? Hidden(name, field) : absl::OkStatus();
  }
  if (tenant == kShared || tenant == caller.tenant) return absl::OkStatus();
  return Hidden(name, field);
}

absl::Status Gate::SeeDevice(const auth::Caller& caller, const std::string& device, const std::string& field) const {
  if (device.empty() || SeesDevice(caller, device)) return absl::OkStatus();
  return NotFound(field, absl::StrCat("no device '", device, "'"));  // the registry's words for a missing one
}

bool Gate::SeesPd(const auth::Caller& caller, const std::string& pd) const {
  return caller.admin || TenantOfPd(pd) == caller.tenant;
}

bool Gate::SeesDevice(const auth::Caller& caller, const std::string& device) const {
  if (caller.admin) return true;
  const TenantConfig* t = policy_->FindTenant(caller.tenant);
  if (t == nullptr || t->devices.empty()) return true;
  const std::string bare = Bare(device);
  for (const auto& d : t->devices) {
    if (Bare(d) == bare) return true;
  }
  return false;
}

bool Gate::SeesChannel(const auth::Caller& caller, const v1::EventChannel& channel) const {
  if (caller.admin || channel.role() != v1::CHANNEL_USER) return true;
  MutexLock lock(&map_mu_);
  auto it = channel_tenant_.find(channel.name());
  return it != channel_tenant_.end() && it->second == caller.tenant;
}

// ---------------------------------------------------------------------------------------------------------
// Ownership

void Gate::OwnChannel(const std::string& channel, const std::string& tenant) {
  MutexLock lock(&map_mu_);
  channel_tenant_[channel] = tenant;
}

void Gate::ForgetChannel(const std::string& channel) {
  MutexLock lock(&map_mu_);
  channel_tenant_.erase(channel);
}

void Gate::NoteCmId(const std::string& cm_id, const std::string& pd) {
  MutexLock lock(&map_mu_);
  cm_id_pd_[cm_id] = pd;
}

void Gate::ForgetCmId(const std::string& cm_id) {
  MutexLock lock(&map_mu_);
  if (!gone_.insert(cm_id).second) return;
  gone_order_.push_back(cm_id);
  while (gone_order_.size() > deps_.remember_gone_cm_ids) {
    cm_id_pd_.erase(gone_order_.front());
    gone_.erase(gone_order_.front());
    gone_order_.pop_front();
  }
}

size_t Gate::KnownCmIds() const {
  MutexLock lock(&map_mu_);
  return cm_id_pd_.size();
}

std::function<bool(const v1::CmEvent&)> Gate::CmEventsFor(const auth::Caller& caller) {
  if (caller.admin) return nullptr;
  return [this, tenant = caller.tenant](const v1::CmEvent& e) {
    std::string pd_of_id;
    {
      MutexLock lock(&map_mu_);
      auto it = cm_id_pd_.find(e.cm_id());
      if (it != cm_id_pd_.end()) {
        pd_of_id = it->second;
      } else if (!e.listener().empty()) {
        // A connect request on a tenant's listener: the new id takes the listener's PD (remembered for its
        // later events, unless it is already destroyed and this is a replay).
        auto l = cm_id_pd_.find(e.listener());
        if (l == cm_id_pd_.end()) return false;
        pd_of_id = l->second;
        if (gone_.count(e.cm_id()) == 0) cm_id_pd_.emplace(e.cm_id(), pd_of_id);
      } else {
        return false;
      }
    }
    return !pd_of_id.empty() && TenantOfPd(pd_of_id) == tenant;
  };
}

std::function<bool(const v1::GrantEvent&)> Gate::GrantEventsFor(const auth::Caller& caller) {
  if (caller.admin) return nullptr;
  return [this, tenant = caller.tenant](const v1::GrantEvent& e) {
    return !e.grant().pd().empty() && TenantOfPd(e.grant().pd()) == tenant;
  };
}

// ---------------------------------------------------------------------------------------------------------
// Quotas

// The sum over the tenant's PDs of each owner's running totals: O(PDs of the tenant x log n), however many
// objects they hold (never a listing, which would make every quota check grow with them).
Gate::Book& Gate::BookOf(const std::string& tenant) {
  MutexLock lock(&books_mu_);
  std::unique_ptr<Book>& b = books_[tenant];
  if (b == nullptr) b = std::make_unique<Book>();
  return *b;
}

Gate::Book* Gate::FindBook(const std::string& tenant) const {
  MutexLock lock(&books_mu_);
  auto it = books_.find(tenant);
  return it == books_.end() ? nullptr : it->second.get();
}

Gate::Counts Gate::CountUse(const std::string& tenant, const Book& book) {
  Counts use{};
  auto add = [&](Quota q, uint64_t n) { use[static_cast<int>(q)] += n; };
  const std::vector<std::string> pds = PdsOf(tenant);
  add(Quota::kPds, pds.size());
  for (const std::string& pd : pds) {
    if (absl::StatusOr<Registry::PdUsage> u = deps_.registry->UsageOfPd(pd); u.ok()) {
      add(Quota::kMrs, u->mrs);
      add(Quota::kPinnedBytes, u->mr_bytes);
      add(Quota::kMws, u->mws);  // rdmad's grant windows: not the tenant's
      add(Quota::kQps, u->qps);
    }
    if (deps_.cm != nullptr) {
      const cm::CmManager::PdUsage c = deps_.cm->UsageOfPd(pd);
      add(Quota::kCmIds, c.ids);
      add(Quota::kConnections, c.connections);
    }
    if (deps_.grants != nullptr) add(Quota::kGrants, deps_.grants->LiveOnPd(pd));
    if (deps_.tokens != nullptr) add(Quota::kTokens, deps_.tokens->OutstandingOnPd(pd));
  }
  {
    MutexLock lock(&map_mu_);
    for (const auto& [channel, owner] : channel_tenant_) add(Quota::kChannels, owner == tenant ? 1 : 0);
  }
  add(Quota::kWatchStreams, book.watches);
  return use;
}

Gate::Counts Gate::LimitsOf(const Quotas& q) {
  return {q.pinned_bytes, q.mrs, q.mws, q.qps, q.cm_ids, q.grants, q.tokens, q.connections, q.channels,
          q.watch_streams, q.pds};
}

absl::StatusOr<Gate::Reservation> Gate::Reserve(const auth::Caller& caller,
                                                std::vector<std::pair<Quota, uint64_t>> wants) {
  Reservation r;
  const TenantConfig* t = caller.admin || caller.tenant.empty() ? nullptr : policy_->FindTenant(caller.tenant);
  if (t == nullptr) return r;
  const Counts limits = LimitsOf(t->quotas);
  bool limited = false;
  for (const auto& [quota, n] : wants) limited |= limits[static_cast<int>(quota)] > 0;
  if (!limited) return r;
  Book& book = BookOf(t->name);
  MutexLock lock(&book.mu);
  const Counts use = CountUse(t->name, book);
  Counts& reserved = book.reserved;
  for (const auto& [quota, n] : wants) {
    const int i = static_cast<int>(quota);
    if (limits[i] == 0) continue;
    if (use[i] + reserved[i] + n > limits[i]) {
      std::string pending = reserved[i] ? absl::StrCat(" (", reserved[i], " more being created)") : "";
      return FieldError(absl::StatusCode::kResourceExhausted, "",
                        absl::StrCat("quota ", QuotaName(quota), " of tenant ", t->name, ": limit ", limits[i],
                                     ", in use ", use[i], pending, "; this call needs ", n));
    }
  }
  r.gate_ = this;
  r.tenant_ = t->name;
  for (const auto& [quota, n] : wants) {
    r.amounts_[static_cast<int>(quota)] += n;
    reserved[static_cast<int>(quota)] += n;
  }
  return r;
}

absl::Status Gate::AdmitConnection(const std::string& pd) {
  const std::string tenant = TenantOfPd(pd);
  const TenantConfig* t = tenant.empty() ? nullptr : policy_->FindTenant(tenant);
  if (t == nullptr || t->quotas.connections == 0) return absl::OkStatus();
  Book& book = BookOf(tenant);
  MutexLock lock(&book.mu);
  const Counts use = CountUse(tenant, book);
  const int i = static_cast<int>(Quota::kConnections);
  const uint64_t in_use = use[i] + book.reserved[i];
  if (in_use + 1 > t->quotas.connections) {
    return FieldError(absl::StatusCode::kResourceExhausted, "",
                      absl::StrCat("quota connections of tenant ", tenant, ": limit ", t->quotas.connections,
                                   ", in use ", in_use, "; this connection needs 1"));
  }
  return absl::OkStatus();
}

void Gate::Release(const std::string& tenant, const Counts& amounts) {
  Book& book = BookOf(tenant);
  MutexLock lock(&book.mu);
  for (int i = 0; i < kQuotas; ++i) book.reserved[i] -= amounts[i];
}

Gate::Reservation& Gate::Reservation::operator=(Reservation&& o) noexcept {
  if (this != &o) {
    if (gate_ != nullptr) gate_->Release(tenant_, amounts_);
    gate_ = std::exchange(o.gate_, nullptr);
    tenant_ = std::move(o.tenant_);
    amounts_ = o.amounts_;
  }
  return *this;
}

Gate::Reservation::~Reservation() {
  if (gate_ != nullptr) gate_->Release(tenant_, amounts_);
}

absl::StatusOr<Gate::WatchSlot> Gate::OpenWatch(const auth::Caller& caller) {
  const TenantConfig* t = caller.admin || caller.tenant.empty() ? nullptr : policy_->FindTenant(caller.tenant);
  const std::string tenant = t == nullptr ? "" : t->name;
  // The rdmad-wide limit first, taken without a lock; given back if the tenant's quota refuses.
  uint64_t open = watches_.load(std::memory_order_relaxed);
  do {
    if (deps_.max_watch_streams > 0 && open >= deps_.max_watch_streams) {
      return OverLimit("watch_streams", deps_.max_watch_streams, open);
    }
  } while (!watches_.compare_exchange_weak(open, open + 1, std::memory_order_relaxed));
  if (t != nullptr) {
    Book& book = BookOf(tenant);
    MutexLock lock(&book.mu);
    const uint64_t used = book.watches + book.reserved[static_cast<int>(Quota::kWatchStreams)];
    if (t->quotas.watch_streams > 0 && used >= t->quotas.watch_streams) {
      watches_.fetch_sub(1, std::memory_order_relaxed);
      return FieldError(absl::StatusCode::kResourceExhausted, "",
                        absl::StrCat("quota watch_streams of tenant ", tenant, ": limit ", t->quotas.watch_streams,
                                     ", in use ", used, "; this call needs 1"));
    }
    ++book.watches;
  }
  WatchSlot slot;
  slot.gate_ = this;
  slot.tenant_ = tenant;
  return slot;
}

void Gate::CloseWatch(const std::string& tenant) {
  watches_.fetch_sub(1, std::memory_order_relaxed);
  if (tenant.empty()) return;
  Book& book = BookOf(tenant);
  MutexLock lock(&book.mu);
  --book.watches;
}

uint64_t Gate::OpenWatches() const { return watches_.load(std::memory_order_relaxed); }

uint64_t Gate::OpenWatches(const std::string& tenant) const {
  Book* book = FindBook(tenant);
  if (book == nullptr) return 0;
  MutexLock lock(&book->mu);
  return book->watches;
}

Gate::WatchSlot& Gate::WatchSlot::operator=(WatchSlot&& o) noexcept {
  if (this != &o) {
    if (gate_ != nullptr) gate_->CloseWatch(tenant_);
    gate_ = std::exchange(o.gate_, nullptr);
    tenant_ = std::move(o.tenant_);
  }
  return *this;
}

Gate::WatchSlot::~WatchSlot() {
  if (gate_ != nullptr) gate_->CloseWatch(tenant_);
}

std::vector<v1::QuotaUsage> Gate::Usage(const TenantConfig& t) {
  Counts use;
  {
    Book& book = BookOf(t.name);
    MutexLock lock(&book.mu);
    use = CountUse(t.name, book);
  }
  const Quotas& q = t.quotas;
  const Counts limits = LimitsOf(q);
  std::vector<v1::QuotaUsage> out;
  for (int i = 0; i < kQuotas; ++i) {
    v1::QuotaUsage u;
    u.set_quota(QuotaName(static_cast<Quota>(i)));
    u.set_limit(limits[i]);
    u.set_used(use[i]);
    out.push_back(u);
  }
  v1::QuotaUsage rate;
  rate.set_quota("rpc_per_second");
  rate.set_limit(q.rpc_per_second);
  out.push_back(rate);
  return out;
}

v1::Tenant Gate::TenantProto(const TenantConfig& t) {
  v1::Tenant out;
  out.set_name("tenants/" + t.name);
  for (const auto& p : t.principals) out.add_principals(p);
  for (const auto& r : t.file_roots) out.add_file_roots(r);
  for (const auto& d : t.devices) out.add_devices(d);
  for (auto& u : Usage(t)) *out.add_quotas() = std::move(u);
  for (const auto& pd : PdsOf(t.name)) out.add_pds(pd);
  return out;
}

}  // namespace rdmad::tenancy
