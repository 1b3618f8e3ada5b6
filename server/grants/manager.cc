// GrantManager: issuing, lookups, renewal, the guards of DeregisterMr / ReregisterMr / DeletePd, expiry
// and pool refill. The life of a grant's key (activation, revocation) is in lifecycle.cc. Threads: see
// manager.h.
#include "server/grants/manager.h"

#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/wire/grant_message.h"
#include "server/common/log.h"
#include "server/common/status.h"
#include "server/registry/rules.h"

namespace rdmad::grants {


GrantManager::GrantManager(Registry* registry, cm::CmManager* cm, dataplane::Listener* listener,
                           cm::TokenStore* tokens, Options options)
    : registry_(registry),
      cm_(cm),
      listener_(listener),
      tokens_(tokens),
      options_(std::move(options)),
      hub_(GrantHub::Options{options_.watch_buffer, 4096}) {
  timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (timer_fd_ < 0) RDMAD_LOG_ERROR("timerfd_create failed: %s: grants will not expire", ErrnoName(errno).c_str());
  loop_ = std::make_unique<dispatch::EventLoop>("grants");
  if (timer_fd_ >= 0) {
    loop_->RunSync([this] {
      loop_->AssertInLoop();
      absl::Status s = loop_->Watch(timer_fd_, [this] { OnTimer(); });
      if (!s.ok()) RDMAD_LOG_ERROR("grants: cannot watch the timer: %s", std::string(s.message()).c_str());
    });
  }
  if (listener_ != nullptr) listener_->set_grant_connections(this);
}

GrantManager::~GrantManager() {
  if (listener_ != nullptr) listener_->set_grant_connections(nullptr);  // no connection reports here from now
  Shutdown();
  lifeline_->Cut();  // from here no callback of ours runs; those that were running have returned
  loop_.reset();
  if (timer_fd_ >= 0) close(timer_fd_);
}

size_t GrantManager::Drain(absl::Time deadline) {
  std::vector<uint64_t> live;
  {
    MutexLock lock(&mu_);
    draining_ = true;
    for (const auto& [id, e] : grants_) {
      if (e->book.Get(mu_).info.state() != v1::GRANT_ENDED) live.push_back(id);
    }
  }
  // Each end answers once its key is dead; its goodbye (ENDED, then the disconnect) follows on the CM
  // dispatcher and is counted by farewells_.
  auto ending = std::make_shared<std::atomic<size_t>>(live.size());
  for (uint64_t id : live) {
    End(id, v1::END_SHUTDOWN, "rdmad is shutting down", [ending](absl::StatusOr<v1::Grant>) { --*ending; });
  }
  MutexLock lock(&mu_);
  auto done = [this, &ending]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return *ending == 0 && farewells_ == 0; };
  // The counter is not mu_'s: look again every 10 ms (a drain is rare and short).
  while (!done() && absl::Now() < deadline) {
    mu_.AwaitWithDeadline(done, std::min(deadline, absl::Now() + absl::Milliseconds(10)));
  }
  return *ending + farewells_;
}

void GrantManager::Shutdown() {
  std::vector<std::unique_ptr<Registry::PinnedBounds>> unpinned;  // released below, without mu_
  {
    MutexLock lock(&mu_);
    if (shutdown_) return;
    shutdown_ = true;
    const absl::Time now = options_.clock();
    unpinned.swap(unpinned_);
    for (auto& [id, e] : grants_) {
      Entry::Book& b = e->book.Get(mu_);
      if (b.bounds != nullptr) unpinned.push_back(std::move(b.bounds));
      b.pin = Entry::Book::Pin::kNone;  // a pin still running is released when it returns
      v1::Grant& info = b.info;
      if (info.state() == v1::GRANT_ENDED) continue;
      info.set_state(v1::GRANT_ENDED);
      info.set_end_reason(v1::END_SHUTDOWN);
      info.set_end_detail("rdmad stopped; its resources, and so the key, are released with it");
      info.set_end_time_unix_nanos(absl::ToUnixNanos(now));
    }
    live_ = 0;
  }
  unpinned.clear();
  loop_->Stop();
  hub_.CloseAll(absl::UnavailableError("rdmad is shutting down"));
}

// ---------------------------------------------------------------------------------------------------------
// Issue

absl::StatusOr<GrantManager::Plan> GrantManager::Check(const v1::IssueGrantRequest& r, const std::string& prefix) const {
  auto field = [&](const char* f) { return absl::StrCat(prefix, f); };
  if (r.principal().empty()) return InvalidArgument(field("principal"), "is required: who the grant is for");
  if (r.principal().size() > 256) return InvalidArgument(field("principal"), "is longer than 256 bytes");
  absl::StatusOr<v1::MemoryRegion> mr = registry_->GetMr(r.mr());
  if (!mr.ok()) return RenameField(mr.status(), field("mr"));
  if (mr->state() != v1::MR_READY) {
    return FailedPrecondition(field("mr"), absl::StrCat(r.mr(), " is unusable (", mr->unusable_reason(), ")"));
  }
  if (r.length() == 0) return InvalidArgument(field("length"), "must be > 0");
  if (r.offset() > mr->length() || r.length() > mr->length() - r.offset()) {
    return OutOfRange(field("length"), absl::StrCat("[", r.offset(), ", ", r.offset(), " + ", r.length(),
                                                    ") is not inside ", r.mr(), " (", mr->length(), " bytes)"));
  }
  Plan plan;
  RDMAD_ASSIGN_OR_RETURN(plan.mr_id, ParseName(mr->name(), "mrs", field("mr")));
  plan.access_bits = wire::kGrantRead;
  for (int a : r.access()) {
    if (a == v1::REMOTE_READ) continue;
    if (a == v1::REMOTE_WRITE) {
      plan.access_bits |= wire::kGrantWrite;
      continue;
    }
    return InvalidArgument(field("access"), absl::StrCat("a grant gives REMOTE_READ and optionally REMOTE_WRITE, not ",
                                                         v1::Access_Name(static_cast<v1::Access>(a))));
  }
  auto has = [&](v1::Access a) { return std::find(mr->access().begin(), mr->access().end(), a) != mr->access().end(); };
  if ((plan.access_bits & wire::kGrantWrite) && !has(v1::LOCAL_WRITE)) {
    return FailedPrecondition(field("access"), absl::StrCat("REMOTE_WRITE needs ", r.mr(),
                                                            " to have LOCAL_WRITE (ibv_bind_mw(3))"));
  }
  plan.ttl = r.ttl_ms() ? absl::Milliseconds(r.ttl_ms()) : options_.default_ttl;
  if (plan.ttl > options_.max_ttl) {
    return InvalidArgument(field("ttl_ms"), absl::StrCat("is more than max_grant_ttl (", absl::FormatDuration(options_.max_ttl), ")"));
  }
  // The scope: the narrowest key the device can give.
  absl::StatusOr<v1::ProtectionDomain> pd = registry_->GetPd(mr->pd());
  if (!pd.ok()) return RenameField(pd.status(), field("mr"));
  absl::StatusOr<v1::Device> device = registry_->GetDevice(pd->device(), /*with_counters=*/false);
  if (!device.ok()) return RenameField(device.status(), field("mr"));
  v1::GrantScope scope = v1::SCOPE_MR;
  if (device->caps().mw_type2a() || device->caps().mw_type2b()) {
    scope = v1::SCOPE_QP;
    plan.window_type = fabric::MwType::kType2;
  } else if (device->caps().mw_type1()) {
    scope = v1::SCOPE_PD;
    plan.window_type = fabric::MwType::kType1;
  }
  // The enum's numbers grow with the key's reach: SCOPE_QP (1) < SCOPE_PD (2) < SCOPE_MR (3).
  if (options_.max_scope != v1::GRANT_SCOPE_UNSPECIFIED && scope > options_.max_scope) {
    return FailedPrecondition(
        field("mr"), absl::StrCat(pd->device(), " can give only a ", v1::GrantScope_Name(scope), " key (",
                                  scope == v1::SCOPE_MR ? "no memory windows: the MR's own rkey, the whole region"
                                                        : "type 1 windows only: a key any QP of the PD can use",
                                  "), wider than grant_max_scope allows (",
                                  v1::GrantScope_Name(options_.max_scope), ")"));
  }
  if (scope != v1::SCOPE_MR && !has(v1::MW_BIND)) {
    return FailedPrecondition(field("mr"), absl::StrCat(r.mr(), " was registered without MW_BIND: a grant binds a "
                                                        "window to it (register it with MW_BIND)"));
  }
  if (scope == v1::SCOPE_MR) {
    if (!has(v1::REMOTE_READ) || ((plan.access_bits & wire::kGrantWrite) && !has(v1::REMOTE_WRITE))) {
      return FailedPrecondition(field("mr"), absl::StrCat(pd->device(), " has no memory windows, so the grant "
                                                          "would use the MR's own rkey, and ", r.mr(),
                                                          " lacks the remote access asked for"));
    }
    // The MR's own rkey allows whatever the MR allows remotely; a grant never gives more than it was asked.
    const char* more = has(v1::REMOTE_ATOMIC)                                                 ? "REMOTE_ATOMIC"
                       : has(v1::REMOTE_WRITE) && !(plan.access_bits & wire::kGrantWrite) ? "REMOTE_WRITE"
                                                                                           : nullptr;
    if (more != nullptr) {
      return FailedPrecondition(
          field("access"), absl::StrCat(pd->device(), " has no memory windows, so the grant would use ", r.mr(),
                                        "'s own rkey, which also allows ", more, ": ask for the region's own "
                                        "remote access, or grant from a region registered with only what the "
                                        "grant gives"));
    }
  }
  v1::Grant& g = plan.info;
  g.set_mr(r.mr());
  g.set_pd(mr->pd());
  g.set_offset(r.offset());
  g.set_length(r.length());
  g.add_access(v1::REMOTE_READ);
  if (plan.access_bits & wire::kGrantWrite) g.add_access(v1::REMOTE_WRITE);
  g.set_principal(r.principal());
  g.set_scope(scope);
  return plan;
}

absl::StatusOr<uint64_t> GrantManager::OpenTicket(std::set<std::string> mrs, size_t grants) {
  MutexLock lock(&mu_);
  // In use counts the places other issues under way hold, so concurrent issues never pass the limit together.
  if (options_.max_grants > 0 && live_ + reserved_ + grants > options_.max_grants) {
    return OverLimit("grants", options_.max_grants, live_ + reserved_, grants, "grants not yet ended");
  }
  const uint64_t ticket = ++next_ticket_;
  Ticket& t = tickets_[ticket];
  t.mrs = std::move(mrs);
  t.reserved = grants;
  reserved_ += grants;
  return ticket;
}

void GrantManager::CloseTicket(uint64_t ticket) {
  MutexLock lock(&mu_);
  auto t = tickets_.find(ticket);
  if (t == tickets_.end()) return;
  reserved_ -= t->second.reserved;
  tickets_.erase(t);
}

absl::StatusOr<v1::IssuedGrant> GrantManager::Commit(Plan plan, const std::vector<v1::SocketAddress>& endpoints,
                                                     uint64_t ticket, bool* stale) {
  v1::IssuedGrant out;
  bool refill = false;
  std::string pd = plan.info.pd();
  state::Ticket recorded;  // the grant's record: the reply waits for it, without mu_
  {
    MutexLock lock(&mu_);
    if (shutdown_ || draining_) return absl::UnavailableError("rdmad is shutting down");
    auto t = tickets_.find(ticket);
    if (t == tickets_.end() || t->second.stale) {
      *stale = true;
      return absl::AbortedError("the region or PD changed after the request was checked");
    }
    if (t->second.reserved == 0) {  // OpenTicket reserved one place per request it covers
      return absl::InternalError("grant issued beyond its ticket's reservation");
    }
    for (const std::string* what : {&plan.info.mr(), &plan.info.pd()}) {
      if (retiring_.count(*what)) {
        return FailedPrecondition("mr", absl::StrCat(*what, " is being deregistered or deleted: no new grants on it"));
      }
    }
    const uint64_t id = next_id_.Next();
    const std::string name = Name("grants", id);
    const absl::Time now = options_.clock();
    cm::Claims claims;
    claims.pd = plan.info.pd();
    claims.grant = name;
    claims.principal = plan.info.principal();
    // The client must connect within the lease (and within the token store's limit).
    absl::StatusOr<cm::Issued> token = tokens_->Issue(claims, std::min(plan.ttl, options_.max_token_ttl));
    if (!token.ok()) return WithField(token.status(), "");
    auto e = std::make_unique<Entry>();
    e->id = id;
    Entry::Book& b = e->book.Get(mu_);
    b.info = std::move(plan.info);
    b.info.set_name(name);
    b.info.set_state(v1::GRANT_ISSUED);
    b.info.set_issue_time_unix_nanos(absl::ToUnixNanos(now));
    b.info.set_token(token->id);
    b.access_bits = plan.access_bits;
    b.mr_id = plan.mr_id;
    b.expiry = now + plan.ttl;
    b.info.set_expire_time_unix_nanos(absl::ToUnixNanos(b.expiry));
    by_mr_[b.info.mr()].insert(id);
    by_pd_[b.info.pd()].insert(id);
    by_principal_[b.info.principal()].insert(id);
    ScheduleLocked(*e);
    Publish(v1::GRANT_ISSUED_EVENT, *e);
    *out.mutable_grant() = b.info;
    out.set_token(token->bytes);
    if (b.info.scope() != v1::SCOPE_MR) {
      auto pool = pools_.find(pd);
      if (pool == pools_.end()) {
        pools_.emplace(pd, WindowPool(plan.window_type, options_.quarantine));
        refill = true;
      } else {
        refill = pool->second.ready() < options_.pool_size / 2 + 1;
      }
    }
    RDMAD_LOG_INFO("%s issued on %s [%llu, +%llu) for '%s' (scope %s, %s)", name.c_str(), b.info.mr().c_str(),
                   static_cast<unsigned long long>(b.info.offset()),
                   static_cast<unsigned long long>(b.info.length()),
                   b.info.principal().c_str(), v1::GrantScope_Name(b.info.scope()).c_str(), token->id.c_str());
    recorded = PersistLocked(*e);
    grants_.emplace(id, std::move(e));
    --t->second.reserved;  // the place reserved for it is now a live grant's
    --reserved_;
    ++live_;
  }
  recorded.Wait().IgnoreError();  // a failure is logged by the journal
  for (const v1::SocketAddress& a : endpoints) *out.add_endpoints() = a;
  if (refill) RefillSoon(pd);
  return out;
}

absl::StatusOr<v1::IssuedGrant> GrantManager::CheckCommit(Plan plan, const std::vector<v1::SocketAddress>& endpoints,
                                                          uint64_t ticket, bool* stale) {
  v1::IssuedGrant out;
  MutexLock lock(&mu_);
  if (shutdown_ || draining_) return absl::UnavailableError("rdmad is shutting down");
  auto t = tickets_.find(ticket);
  if (t == tickets_.end() || t->second.stale) {
    *stale = true;
    return absl::AbortedError("the region or PD changed after the request was checked");
  }
  for (const std::string* what : {&plan.info.mr(), &plan.info.pd()}) {
    if (retiring_.count(*what)) {
      return FailedPrecondition("mr", absl::StrCat(*what, " is being deregistered or deleted: no new grants on it"));
    }
  }
  cm::Claims claims;
  claims.pd = plan.info.pd();
  claims.principal = plan.info.principal();
  claims.grant = "grants/0";  // a grant's token (the name only a real issue gives)
  if (absl::Status room = tokens_->CheckIssue(claims, std::min(plan.ttl, options_.max_token_ttl)); !room.ok()) {
    return WithField(room, "");
  }
  const absl::Time now = options_.clock();
  v1::Grant& g = *out.mutable_grant();
  g = std::move(plan.info);
  g.set_state(v1::GRANT_ISSUED);
  g.set_issue_time_unix_nanos(absl::ToUnixNanos(now));
  g.set_expire_time_unix_nanos(absl::ToUnixNanos(now + plan.ttl));
  for (const v1::SocketAddress& a : endpoints) *out.add_endpoints() = a;
  return out;
}

absl::StatusOr<v1::IssuedGrant> GrantManager::Issue(const v1::IssueGrantRequest& request) {
  return IssueChecked(request, nullptr);
}

namespace {
// Checks of one issue, each after a Retire of its region or PD came between the previous check and its
// commit; then the caller is told to retry.
constexpr int kMaxIssueChecks = 4;

absl::Status RetiredTooOften(const std::string& field) {
  return FieldError(absl::StatusCode::kAborted, field,
                    "the region or its PD was being removed or re-registered each time the grant was checked; retry");
}
}  // namespace

absl::StatusOr<std::vector<v1::SocketAddress>> GrantManager::Endpoints() const {
  if (listener_ == nullptr || cm_ == nullptr) return absl::UnavailableError("rdma_cm is unavailable on this host");
  return listener_->Endpoints();
}

absl::StatusOr<v1::IssuedGrant> GrantManager::IssueChecked(const v1::IssueGrantRequest& request,
                                                           const std::function<void()>& between) {
  RDMAD_ASSIGN_OR_RETURN(std::vector<v1::SocketAddress> endpoints, Endpoints());
  for (int check = 0; check < kMaxIssueChecks; ++check) {
    RDMAD_ASSIGN_OR_RETURN(const uint64_t ticket, OpenTicket({request.mr()}, 1));
    absl::StatusOr<Plan> plan = Check(request, "");
    if (plan.ok() && between && check == 0) between();
    bool stale = false;
    absl::StatusOr<v1::IssuedGrant> out =
        !plan.ok()                 ? plan.status()
        : request.validate_only() ? CheckCommit(std::move(plan).value(), endpoints, ticket, &stale)
                                  : Commit(std::move(plan).value(), endpoints, ticket, &stale);
    CloseTicket(ticket);
    if (!stale) return out;  // else checked again: the region may be gone (NOT_FOUND on mr), or changed
  }
  return RetiredTooOften("mr");
}

absl::StatusOr<v1::IssueGrantsResponse> GrantManager::IssueBatch(const v1::IssueGrantsRequest& request) {
  if (request.grants_size() == 0) return InvalidArgument("grants", "is empty");
  if (static_cast<size_t>(request.grants_size()) > options_.max_batch) {
    return InvalidArgument("grants", absl::StrCat("holds ", request.grants_size(), " requests; at most ",
                                                  options_.max_batch, " per call"));
  }
  for (int i = 0; i < request.grants_size(); ++i) {
    if (request.grants(i).validate_only()) {
      return InvalidArgument(absl::StrCat("grants[", i, "].validate_only"),
                             "is for IssueGrant alone: IssueGrants issues every grant of its batch or none");
    }
  }
  RDMAD_ASSIGN_OR_RETURN(std::vector<v1::SocketAddress> endpoints, Endpoints());
  std::set<std::string> mrs;
  for (const v1::IssueGrantRequest& g : request.grants()) mrs.insert(g.mr());
  for (int check = 0; check < kMaxIssueChecks; ++check) {
    bool stale = false;
    RDMAD_ASSIGN_OR_RETURN(const uint64_t ticket, OpenTicket(mrs, request.grants_size()));
    absl::StatusOr<v1::IssueGrantsResponse> out = IssueBatchChecked(request, endpoints, ticket, &stale);
    CloseTicket(ticket);
    if (!stale) return out;  // else checked again, as a whole
  }
  return RetiredTooOften("grants");
}

absl::StatusOr<v1::IssueGrantsResponse> GrantManager::IssueBatchChecked(
    const v1::IssueGrantsRequest& request, const std::vector<v1::SocketAddress>& endpoints, uint64_t ticket,
    bool* stale) {
  // Every request is checked before any is issued: all or nothing.
  std::vector<Plan> plans;
  plans.reserve(request.grants_size());
  for (int i = 0; i < request.grants_size(); ++i) {
    RDMAD_ASSIGN_OR_RETURN(Plan plan, Check(request.grants(i), absl::StrCat("grants[", i, "].")));
    plans.push_back(std::move(plan));
  }
  v1::IssueGrantsResponse out;
  for (size_t i = 0; i < plans.size(); ++i) {
    absl::StatusOr<v1::IssuedGrant> issued = Commit(std::move(plans[i]), endpoints, ticket, stale);
    if (!issued.ok()) {
      // Undo: those issued so far hold no key yet; they end at once.
      for (const v1::IssuedGrant& g : out.grants()) {
        absl::StatusOr<uint64_t> id = ParseName(g.grant().name(), "grants", "name");
        if (id.ok()) End(*id, v1::END_REVOKED, "the batch it was part of failed", nullptr);
      }
      // The field at fault is the request's in the batch (docs/api.md: the message starts with it).
      const std::string field = FieldOf(issued.status());
      return field.empty() ? WithContext(issued.status(), absl::StrCat("grants[", i, "]"))
                           : RenameField(issued.status(), absl::StrCat("grants[", i, "].", field));
    }
    *out.add_grants() = std::move(issued).value();
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// Lookups, renewal

absl::StatusOr<GrantManager::Entry*> GrantManager::Find(const std::string& name, const std::string& field) const {
  RDMAD_ASSIGN_OR_RETURN(uint64_t id, ParseName(name, "grants", field));
  auto it = grants_.find(id);
  if (it == grants_.end()) return NotFound(field, absl::StrCat(name, " does not exist (or ended long ago)"));
  return it->second.get();
}

absl::StatusOr<v1::Grant> GrantManager::Get(const std::string& name) const {
  MutexLock lock(&mu_);
  RDMAD_ASSIGN_OR_RETURN(Entry * e, Find(name, "name"));
  return e->book.Get(mu_).info;
}

absl::Status GrantManager::CheckMrFilter(const std::string& mr) const {
  if (mr.empty()) return absl::OkStatus();
  RDMAD_RETURN_IF_ERROR(ParseName(mr, "mrs", "mr").status());
  return RenameField(registry_->GetMr(mr).status(), "mr");  // (not under mu_: the registry is called)
}

size_t GrantManager::Live() const {
  MutexLock lock(&mu_);
  return live_;
}

size_t GrantManager::LiveOnPd(const std::string& pd) const {
  MutexLock lock(&mu_);
  auto it = by_pd_.find(pd);
  return it == by_pd_.end() ? 0 : it->second.size();
}

absl::StatusOr<std::vector<v1::Grant>> GrantManager::List(const v1::ListGrantsRequest& request, uint64_t after,
                                                          size_t limit) const {
  // A filter naming no region is refused like any name (docs/api.md), unless grants rdmad still remembers
  // name it (the ended grants of a deregistered region).
  absl::Status region = CheckMrFilter(request.mr());
  if (!region.ok() && region.code() != absl::StatusCode::kNotFound) return region;
  MutexLock lock(&mu_);
  if (!region.ok() &&
      std::none_of(grants_.begin(), grants_.end(), [&](const auto& g) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return g.second->book.Get(mu_).info.mr() == request.mr();
      })) {
    return region;
  }
  std::vector<v1::Grant> out;
  auto full = [&] { return limit != 0 && out.size() >= limit; };
  auto take = [&](const Entry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const v1::Grant& info = e.book.Get(mu_).info;
    if (!request.mr().empty() && info.mr() != request.mr()) return;
    if (!request.principal().empty() && info.principal() != request.principal()) return;
    if (info.state() == v1::GRANT_ENDED && !request.include_ended()) return;
    out.push_back(info);
  };
  if (!request.principal().empty() || (!request.mr().empty() && !request.include_ended())) {
    // An index: by principal (live and remembered) or by MR (live only).
    const auto& index = !request.principal().empty() ? by_principal_ : by_mr_;
    auto it = index.find(!request.principal().empty() ? request.principal() : request.mr());
    if (it != index.end()) {
      for (auto id = it->second.upper_bound(after); id != it->second.end() && !full(); ++id) take(*grants_.at(*id));
    }
    return out;
  }
  for (auto e = grants_.upper_bound(after); e != grants_.end() && !full(); ++e) take(*e->second);
  return out;
}

absl::StatusOr<v1::Grant> GrantManager::Renew(const v1::RenewGrantRequest& request) {
  // Declared before the lock: the reply waits for the renewal's record after mu_ is released.
  state::WaitAtScopeEnd recorded;
  MutexLock lock(&mu_);
  RDMAD_ASSIGN_OR_RETURN(Entry * e, Find(request.name(), "name"));
  Entry::Book& b = e->book.Get(mu_);
  if (b.info.state() == v1::GRANT_ENDED) {
    return FailedPrecondition("name", absl::StrCat(request.name(), " has ended (",
                                                   v1::GrantEndReason_Name(b.info.end_reason()),
                                                   "): issue a new grant"));
  }
  if (b.ending || b.pending_end != v1::GRANT_END_UNSPECIFIED) {
    // Its end has begun (the expiry took it, or a revocation waits for its activation): a renewal would
    // answer a lease end the grant will not see.
    return FailedPrecondition("name", absl::StrCat(request.name(), " is ending (",
                                                   v1::GrantEndReason_Name(b.pending_end), "): issue a new grant"));
  }
  const absl::Duration ttl = request.ttl_ms() ? absl::Milliseconds(request.ttl_ms()) : options_.default_ttl;
  if (ttl > options_.max_ttl) {
    return InvalidArgument("ttl_ms", absl::StrCat("is more than max_grant_ttl (", absl::FormatDuration(options_.max_ttl), ")"));
  }
  expiries_.erase({b.expiry, e->id});
  b.expiry = options_.clock() + ttl;
  b.info.set_expire_time_unix_nanos(absl::ToUnixNanos(b.expiry));
  b.info.set_renewals(b.info.renewals() + 1);
  ScheduleLocked(*e);
  recorded = PersistLocked(*e);
  Publish(v1::GRANT_RENEWED, *e);
  return b.info;
}

void GrantManager::Publish(v1::GrantEventType type, const Entry& e) {
  v1::GrantEvent event;
  event.set_type(type);
  *event.mutable_grant() = e.book.Get(mu_).info;
  hub_.Publish(std::move(event));
}

// ---------------------------------------------------------------------------------------------------------
// Guards of DeregisterMr, ReregisterMr, DeletePd

void GrantManager::Retire(const std::string& mr, const std::string& pd, bool revoke, v1::GrantEndReason reason,
                          const std::string& field, absl::AnyInvocable<void(absl::Status) &&> done) {
  const std::string& what = mr.empty() ? pd : mr;
  std::vector<uint64_t> live;
  std::vector<std::string> pool_windows;
  absl::Status busy;
  {
    MutexLock lock(&mu_);
    retiring_.insert(what);
    // Issues checked before this and not yet committed check again (a PD's: every one; its regions are
    // not named by the requests).
    for (auto& [n, t] : tickets_) {
      if (mr.empty() || t.mrs.count(mr)) t.stale = true;
    }
    const auto& index = mr.empty() ? by_pd_ : by_mr_;
    if (auto it = index.find(what); it != index.end()) live.assign(it->second.begin(), it->second.end());
    if (!live.empty() && !revoke) {
      std::vector<std::string> names;
      for (size_t i = 0; i < live.size() && i < 5; ++i) names.push_back(Name("grants", live[i]));
      if (live.size() > 5) names.push_back("...");
      busy = Busy(field, absl::StrCat(what, " has ", live.size(), " live grant(s) (", absl::StrJoin(names, ", "),
                                      "): revoke them first, or ask for revoke_grants"));
    }
  }
  // Not under mu_: done may call back into the manager (the RPC layer's Unretire takes mu_).
  if (!busy.ok()) return std::move(done)(busy);
  // Ends them all, then (for a PD) gives back the pool's windows.
  struct Join {
    Join(size_t n, absl::AnyInvocable<void(absl::Status) &&> d) : left(n), done(std::move(d)) {}
    Mutex mu;
    size_t left ABSL_GUARDED_BY(mu);  // ends still to come, and the caller's own
    absl::Status first ABSL_GUARDED_BY(mu);
    absl::AnyInvocable<void(absl::Status) &&> done;  // run by the last one
  };
  auto join = std::make_shared<Join>(live.size() + 1, std::move(done));
  auto finish_one = [this, join, pd](absl::Status s) {
    absl::Status first;
    {
      MutexLock lock(&join->mu);
      if (join->first.ok() && !s.ok()) join->first = s;
      if (--join->left > 0) return;
      first = join->first;
    }
    if (first.ok() && !pd.empty()) {
      std::vector<uint64_t> windows;
      {
        MutexLock lock(&mu_);
        if (auto it = pools_.find(pd); it != pools_.end()) {
          windows = it->second.TakeAll();
          pools_.erase(it);
        }
      }
      for (uint64_t w : windows) {
        if (absl::Status s = registry_->DeallocMw(Name("mws", w), "grants"); !s.ok()) {
          RDMAD_LOG_WARN("grants: %s of %s's pool: %s", Name("mws", w).c_str(), pd.c_str(),
                         std::string(s.message()).c_str());
        }
      }
    }
    std::move(join->done)(first);
  };
  for (uint64_t id : live) {
    End(id, reason, absl::StrCat(what, " is going away"), [finish_one](absl::StatusOr<v1::Grant> g) mutable {
      finish_one(g.status());
    });
  }
  finish_one(absl::OkStatus());
}

void GrantManager::Unretire(const std::string& mr, const std::string& pd) {
  MutexLock lock(&mu_);
  retiring_.erase(mr.empty() ? pd : mr);
}

// ---------------------------------------------------------------------------------------------------------
// Expiry: one timerfd armed for the earliest expiry of the ordered index.

void GrantManager::ScheduleLocked(Entry& e) {
  Entry::Book& b = e.book.Get(mu_);
  const bool earliest = expiries_.empty() || b.expiry < expiries_.begin()->first;
  expiries_.insert({b.expiry, e.id});
  if (earliest) loop_->Post([this] { ArmTimer(); });
}

void GrantManager::WatchKillLocked(Entry& e) {
  Entry::Book& b = e.book.Get(mu_);
  b.kill_deadline = options_.clock() + options_.key_kill_timeout;
  const bool earliest = kills_.empty() || b.kill_deadline < kills_.begin()->first;
  kills_.insert({b.kill_deadline, e.id});
  if (earliest && (expiries_.empty() || b.kill_deadline < expiries_.begin()->first)) {
    loop_->Post([this] { ArmTimer(); });
  }
}

void GrantManager::UnwatchKillLocked(Entry& e) {
  Entry::Book& b = e.book.Get(mu_);
  kills_.erase({b.kill_deadline, e.id});
  b.kill_deadline = absl::InfiniteFuture();
}

void GrantManager::ArmTimer() {
  if (timer_fd_ < 0) return;
  absl::Time next = absl::InfiniteFuture();    // by options_.clock (leases, kill deadlines)
  absl::Time parting = absl::InfiniteFuture();  // by absl::Now() (graces)
  {
    MutexLock lock(&mu_);
    if (!expiries_.empty()) next = expiries_.begin()->first;
    if (!kills_.empty()) next = std::min(next, kills_.begin()->first);
    if (!partings_.empty()) parting = partings_.begin()->first;
  }
  itimerspec spec{};
  absl::Duration in = absl::InfiniteDuration();
  if (next != absl::InfiniteFuture()) in = next - options_.clock();
  if (parting != absl::InfiniteFuture()) in = std::min(in, parting - absl::Now());
  if (in != absl::InfiniteDuration()) {
    // At least 1 ns: a zero it_value would disarm the timer.
    spec.it_value = absl::ToTimespec(std::max(in, absl::Nanoseconds(1)));
  }
  if (timerfd_settime(timer_fd_, 0, &spec, nullptr) != 0) {
    RDMAD_LOG_ERROR("grants: timerfd_settime: %s", ErrnoName(errno).c_str());
  }
}

void GrantManager::ClockMoved() {
  loop_->RunSync([this] { OnTimer(); });
}

// The timer's tick, or ClockMoved's: then the timer may not have fired, and the read (non-blocking) finds nothing.
void GrantManager::OnTimer() {
  uint64_t ticks = 0;
  (void)!read(timer_fd_, &ticks, sizeof ticks);
  EndDue(TakeDue());
  Disconnect(TakeStuckKills());
  Part(TakeDuePartings());
  ArmTimer();
}

std::vector<std::string> GrantManager::TakeDuePartings() {
  std::vector<std::string> due;
  MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  while (!partings_.empty() && partings_.begin()->first <= now) {
    due.push_back(partings_.begin()->second);
    parting_at_.erase(partings_.begin()->second);
    partings_.erase(partings_.begin());
  }
  return due;
}

void GrantManager::Part(const std::vector<std::string>& cm_ids) {
  for (const std::string& cm_id : cm_ids) {
    // The client may have gone meanwhile (its DISCONNECTED released the id): then NOT_FOUND, nothing to do.
    cm_->Disconnect(cm_id, Guarded([this, cm_id](absl::StatusOr<v1::CmId> r) {
      if (!r.ok()) RDMAD_LOG_DEBUG("%s: disconnect: %s", cm_id.c_str(), std::string(r.status().message()).c_str());
      MutexLock lock(&mu_);
      --farewells_;
    }));
  }
}

std::vector<uint64_t> GrantManager::TakeDue() {
  std::vector<uint64_t> due;
  MutexLock lock(&mu_);
  const absl::Time now = options_.clock();
  while (!expiries_.empty() && expiries_.begin()->first <= now) {
    const uint64_t id = expiries_.begin()->second;
    expiries_.erase(expiries_.begin());
    due.push_back(id);
    // In the same step, its end begins: from here a RenewGrant is refused (the grant is ending), never
    // answered OK with a lease end the end then ignores.
    auto it = grants_.find(id);
    if (it == grants_.end()) continue;
    Entry::Book& b = it->second->book.Get(mu_);
    if (b.info.state() != v1::GRANT_ENDED && !b.ending && b.pending_end == v1::GRANT_END_UNSPECIFIED) {
      b.pending_end = v1::END_EXPIRED;
      b.pending_detail = "its lease ran out";
    }
  }
  return due;
}

void GrantManager::EndDue(const std::vector<uint64_t>& due) {
  for (uint64_t id : due) End(id, v1::END_EXPIRED, "its lease ran out", nullptr);
}

std::vector<std::pair<std::string, std::string>> GrantManager::TakeStuckKills() {
  std::vector<std::pair<std::string, std::string>> stuck;
  MutexLock lock(&mu_);
  const absl::Time now = options_.clock();
  while (!kills_.empty() && kills_.begin()->first <= now) {
    auto it = grants_.find(kills_.begin()->second);
    kills_.erase(kills_.begin());
    if (it == grants_.end()) continue;
    Entry::Book& b = it->second->book.Get(mu_);
    b.kill_deadline = absl::InfiniteFuture();
    if (!b.info.cm_id().empty()) stuck.emplace_back(b.info.name(), b.info.cm_id());
  }
  return stuck;
}

// Work ahead of the LOCAL_INV on the client's QP is not completing: a SEND the client never receives, retried
// for as long as its connection allows (without end with an RNR retry count of 7). rdma_disconnect moves
// the QP to the error state, which flushes the queue; the invalidation's flushed completion then makes the
// registry deallocate and replace the window, which kills the key whatever the QP's state (KillKey).
void GrantManager::Disconnect(const std::vector<std::pair<std::string, std::string>>& stuck) {
  for (const auto& one : stuck) {
    const std::string& grant = one.first;  // named copies: a lambda cannot capture a structured binding
    const std::string& cm_id = one.second;
    RDMAD_LOG_WARN("%s: its key's invalidation waited %s on %s's queue: disconnecting the client", grant.c_str(),
                   absl::FormatDuration(options_.key_kill_timeout).c_str(), cm_id.c_str());
    cm_->Disconnect(cm_id, Guarded([grant, cm_id](absl::StatusOr<v1::CmId> r) {
      if (!r.ok()) {
        RDMAD_LOG_WARN("%s: disconnecting %s: %s", grant.c_str(), cm_id.c_str(), std::string(r.status().message()).c_str());
      }
    }));
  }
}

// ---------------------------------------------------------------------------------------------------------
// Pools: refilled on the grants loop, off the request path (ibv_alloc_mw is slow on real NICs).

void GrantManager::RefillSoon(const std::string& pd) {
  {
    MutexLock lock(&mu_);
    if (!refilling_.insert(pd).second) return;  // one queued refill per PD
  }
  loop_->Post([this, pd] { Refill(pd); });
}

void GrantManager::Refill(const std::string& pd) {
  for (;;) {
    fabric::MwType type;
    {
      MutexLock lock(&mu_);
      auto it = pools_.find(pd);
      if (shutdown_ || it == pools_.end() || retiring_.count(pd) || it->second.ready() >= options_.pool_size) {
        refilling_.erase(pd);
        return;
      }
      type = it->second.type();
    }
    v1::AllocMwRequest req;
    req.set_pd(pd);
    req.set_type(type == fabric::MwType::kType1 ? v1::TYPE_1 : v1::TYPE_2);
    absl::StatusOr<v1::MemoryWindow> mw = registry_->AllocMw(req, "grants");
    absl::StatusOr<uint64_t> window = mw.ok() ? ParseName(mw->name(), "mws", "name") : mw.status();
    if (!window.ok()) {
      RDMAD_LOG_WARN("grants: refilling %s's window pool: %s", pd.c_str(),
                     std::string(window.status().message()).c_str());
      MutexLock lock(&mu_);
      refilling_.erase(pd);
      return;
    }
    bool orphan = false;
    {
      MutexLock lock(&mu_);
      auto it = pools_.find(pd);
      if (it != pools_.end()) {
        it->second.Add(*window);  // if the PD is going, Retire deallocates it with the others
      } else {
        orphan = true;
        refilling_.erase(pd);
      }
    }
    if (orphan) {
      (void)registry_->DeallocMw(mw->name(), "grants");  // the pool went while it was allocated
      return;
    }
  }
}

void GrantManager::ForgetEndedLocked() {
  while (ended_.size() > options_.max_ended) {
    const uint64_t id = ended_.front();
    ended_.pop_front();
    auto it = grants_.find(id);
    if (it == grants_.end()) continue;
    auto p = by_principal_.find(it->second->book.Get(mu_).info.principal());
    if (p != by_principal_.end()) {
      p->second.erase(id);
      if (p->second.empty()) by_principal_.erase(p);
    }
    grants_.erase(it);
  }
}

}  // namespace rdmad::grants
