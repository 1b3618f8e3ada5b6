// GrantManager and the state store: recording live grants, and reporting them after a restart
// (manager.h, Recover; docs/operations.md, "Restart recovery"). Threads: PersistLocked/UnpersistLocked
// under mu_ (on whichever thread issues, renews or ends a grant): they only submit to the store's journal
// (state/journal.h: a queue push under its leaf lock), whose writer thread does the I/O and logs failures;
// Recover on main at start-up, before serving.
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/log.h"
#include "server/grants/manager.h"
#include "server/registry/rules.h"

namespace rdmad::grants {

state::Ticket GrantManager::PersistLocked(const Entry& e) {
  if (options_.state == nullptr) return state::Ticket();
  const v1::Grant& info = e.book.Get(mu_).info;
  return options_.state->Submit(state::Mutation::PutGrant(e.id, info).OnError(
      absl::StrCat(info.name(), ": not recorded in the state store"), ": a restart will not report it"));
}

void GrantManager::UnpersistLocked(uint64_t id) {
  if (options_.state == nullptr) return;
  // Not waited for: an end runs on dispatchers and the grants' loop too (OnKeyKilled, expiry), which must
  // not block on the disk. The record is still in order behind the grant's earlier ones.
  options_.state->Submit(state::Mutation::DeleteGrant(id).OnError(
      absl::StrCat(Name("grants", id), ": its end is not recorded in the state store"),
      ": a restart reports it as lost"));
}

std::vector<std::string> GrantManager::Recover(const std::vector<v1::Grant>& live) {
  std::vector<std::string> out;
  MutexLock lock(&mu_);
  const absl::Time now = options_.clock();
  for (const v1::Grant& g : live) {
    absl::StatusOr<uint64_t> id = ParseName(g.name(), "grants", "name");
    if (!id.ok() || grants_.count(*id)) continue;
    auto e = std::make_unique<Entry>();
    e->id = *id;
    e->book.Get(mu_).info = g;
    // Its lease may have run out while rdmad was down: then it expired, as it would have anyway.
    const bool expired = absl::FromUnixNanos(g.expire_time_unix_nanos()) <= now;
    e->book.Get(mu_).info.set_state(v1::GRANT_ENDED);
    e->book.Get(mu_).info.set_end_reason(expired ? v1::END_EXPIRED : v1::END_RESTARTED);
    e->book.Get(mu_).info.set_end_detail(expired ? "its lease ran out while rdmad was down"
                                   : "rdmad restarted while it was live: its key died with the previous process; "
                                     "issue a new grant");
    e->book.Get(mu_).info.set_end_time_unix_nanos(absl::ToUnixNanos(now));
    e->book.Get(mu_).expiry = absl::FromUnixNanos(g.expire_time_unix_nanos());
    by_principal_[e->book.Get(mu_).info.principal()].insert(e->id);
    Publish(expired ? v1::GRANT_EXPIRED : v1::GRANT_REVOKED, *e);
    RDMAD_LOG_WARN("recovery: %s (on %s for '%s') %s", g.name().c_str(), g.mr().c_str(), g.principal().c_str(),
                   expired ? "expired while rdmad was down" : "is lost: ended with END_RESTARTED");
    out.push_back(g.name());
    UnpersistLocked(e->id);  // reported once; remembered like any ended grant (max_ended)
    grants_.emplace(e->id, std::move(e));
    ended_.push_back(*id);
    ForgetEndedLocked();
  }
  return out;
}

}  // namespace rdmad::grants
