// ibv_rereg_mr(3) semantics for ReregisterMr: validate and reserve under mu_, re-register on a worker
// (native where the device has it, else emulated: register the new, then deregister the old), commit
// under mu_. Which MR survives each failure is the man page's (docs/api.md). Threads: see registry.h.
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/log.h"
#include "server/common/status.h"
#include "server/memory/file_rights.h"
#include "server/registry/internal.h"
#include "server/registry/registry.h"

namespace rdmad {

using registry_internal::WithOutcome;

struct Registry::ReregPlan {
  int flags = 0;
  PdEntry* new_pd = nullptr;
  uint32_t access = 0;
  v1::MemorySource new_source;
  FileAccess files;  // whose rights a file source (new, or the region's with new flags) is checked with
};

absl::Status Registry::PlanReregLocked(const v1::ReregisterMrRequest& request, bool windows_allowed, MrEntry** out,
                                       ReregPlan* plan) const {
  auto refuse = [](absl::Status s) { return WithOutcome(std::move(s), v1::OUTCOME_OLD_MR_VALID); };
  RDMAD_ASSIGN_OR_RETURN(MrEntry * e, FindMr(request.name(), "name"));
  *out = e;
  const MrEntry::Book& b = e->book.Get(mu_);
  if (b.busy) return refuse(InProgress("name", request.name(), b.busy));
  if (b.unusable) {
    return WithOutcome(FailedPrecondition("name", absl::StrCat(request.name(), " is unusable (", b.unusable_reason,
                                                               "): only deregister is accepted")),
                       v1::OUTCOME_MR_UNUSABLE);
  }
  absl::StatusOr<int> flags = ReregFlags(request);
  if (!flags.ok()) return refuse(flags.status());
  plan->flags = *flags;
  if (!windows_allowed && !b.windows.empty()) {
    return refuse(Busy("name", absl::StrCat(request.name(), " has ", b.windows.size(),
                                            " bound memory window(s): a rereg deregisters the region "
                                            "(ibv_rereg_mr(3)), which ibv_dereg_mr(3) refuses while windows "
                                            "are bound; invalidate them first")));
  }
  plan->new_pd = b.pd;
  if (plan->flags & fabric::kChangePd) {
    absl::StatusOr<PdEntry*> pd = FindPd(request.pd(), "pd");
    if (!pd.ok()) return refuse(pd.status());
    if ((*pd)->book.Get(mu_).busy) return refuse(InProgress("pd", request.pd(), (*pd)->book.Get(mu_).busy));
    plan->new_pd = *pd;
    if (plan->new_pd->device != b.pd->device) {
      return refuse(InvalidArgument("pd", absl::StrCat(request.pd(), " is on devices/",
                                                       plan->new_pd->device->info().name, ", the region on devices/",
                                                       b.pd->device->info().name)));
    }
  }
  plan->access = b.access;
  if (plan->flags & fabric::kChangeAccess) {
    absl::StatusOr<uint32_t> bits = AccessBits(request.access(), "access");
    if (!bits.ok()) return refuse(bits.status());
    plan->access = *bits;
    if (absl::Status s = CheckMrAccessRule(plan->access, "access"); !s.ok()) return refuse(s);
  }
  plan->new_source = (plan->flags & fabric::kChangeTranslation) ? request.source() : b.source;
  return absl::OkStatus();
}

absl::Status Registry::CheckReregister(const v1::ReregisterMrRequest& request) const {
  MutexLock lock(&mu_);
  MrEntry* e = nullptr;
  ReregPlan plan;
  return PlanReregLocked(request, /*windows_allowed=*/true, &e, &plan);
}

void Registry::ReregisterMrAsync(const v1::ReregisterMrRequest& request, Done<v1::ReregisterMrResponse> done,
                                 const FileAccess& files) {
  MrEntry* e = nullptr;
  ReregPlan plan;
  absl::Status refused = [&]() -> absl::Status {
    MutexLock lock(&mu_);
    RDMAD_RETURN_IF_ERROR(PlanReregLocked(request, /*windows_allowed=*/false, &e, &plan));
    plan.files = files;
    e->book.Get(mu_).busy = "ReregisterMr";
    plan.new_pd->book.Get(mu_).pending++;  // neither PD can go while the region may move between them
    return absl::OkStatus();
  }();
  if (!refused.ok()) return std::move(done)(refused);
  auto work = [this, e, plan = std::move(plan), done = std::move(done)]() mutable {
    PdEntry* new_pd = plan.new_pd;
    absl::StatusOr<v1::ReregisterMrResponse> out = ReregWorkAndCommit(e, std::move(plan));
    {
      MutexLock lock(&mu_);
      e->book.Get(mu_).busy = nullptr;
      new_pd->book.Get(mu_).pending--;
    }
    std::move(done)(std::move(out));
  };
  if (!workers_->Post(std::move(work))) RDMAD_LOG_WARN("ReregisterMr dropped: shutting down");
}

absl::StatusOr<v1::ReregisterMrResponse> Registry::ReregisterMr(const v1::ReregisterMrRequest& request,
                                                                const FileAccess& files) {
  return AwaitResult<v1::ReregisterMrResponse>(
      [&](Done<v1::ReregisterMrResponse> d) { ReregisterMrAsync(request, std::move(d), files); });
}

// On a worker, holding e's reservation: the fabric calls without mu_, then the commit with it.
absl::StatusOr<v1::ReregisterMrResponse> Registry::ReregWorkAndCommit(MrEntry* e, ReregPlan plan) {
  const std::string name = Name("mrs", e->id);
  const bool translate = plan.flags & fabric::kChangeTranslation;
  // The reservation keeps the region's PD and mapping as they are until the commit; read under mu_, as all
  // of its bookkeeping.
  std::shared_ptr<Mapping> new_mapping;
  fabric::Device* device = nullptr;
  {
    MutexLock lock(&mu_);
    new_mapping = e->book.Get(mu_).mapping;
    device = e->book.Get(mu_).pd->device;
  }
  if (translate) {
    // A new source: opened and checked as for RegisterMr, with the new access flags.
    absl::StatusOr<std::unique_ptr<Mapping>> m =
        MapSource(plan.new_source, *device, "source", plan.files, plan.access);
    if (!m.ok()) return WithOutcome(m.status(), v1::OUTCOME_OLD_MR_VALID);
    new_mapping = std::move(m).value();
  } else if ((plan.flags & fabric::kChangeAccess) && new_mapping->is_descriptor() && !new_mapping->writable() &&
             (plan.access & kWritableAccess) != 0) {
    // The caller's rights over a descriptor's memory were its descriptor's, which allowed no writing.
    return WithOutcome(FieldError(absl::StatusCode::kPermissionDenied, "access",
                                  absl::StrCat(name, " maps memory passed as a descriptor that allows no writing: it "
                                                     "cannot have local-write, remote-write, remote-atomic or mw-bind")),
                       v1::OUTCOME_OLD_MR_VALID);
  } else if ((plan.flags & fabric::kChangeAccess) && new_mapping->is_file()) {
    // New flags over the same file: the caller's rights and roots again, on the inode the region maps (its
    // owner and mode as they were when rdmad opened it; no new lookup of the path). Refusals name
    // "access", the request field that asks for more.
    if (!plan.files.roots.empty()) {
      bool narrowed = false;
      for (const auto& root : plan.files.roots) narrowed = narrowed || UnderRoot(new_mapping->real_path(), root);
      if (!narrowed) {
        return WithOutcome(FieldError(absl::StatusCode::kPermissionDenied, "access",
                                      absl::StrCat(name, " maps ", new_mapping->real_path(),
                                                   ", which is not under one of this caller's file roots (the "
                                                   "tenant's file_roots)")),
                           v1::OUTCOME_OLD_MR_VALID);
      }
    }
    if (absl::Status s = CheckFileRights(plan.files, new_mapping->ownership(), FileRightsFor(plan.access),
                                         new_mapping->real_path(), "access");
        !s.ok()) {
      return WithOutcome(s, v1::OUTCOME_OLD_MR_VALID);
    }
  }
  v1::ReregisterMrResponse response;
  const bool native = device->info().native_rereg;
  response.set_method(native ? v1::NATIVE : v1::EMULATED);
  response.set_old_lkey(e->mr->lkey());
  response.set_old_rkey(e->mr->rkey());
  // What the commit applies: the new PD, mapping and source, and the registration's (new) attributes.
  // The commit's record is submitted under mu_ and waited for after it (on the pin worker): the reply
  // follows its record.
  auto commit = [&]() {
    state::Ticket recorded;
    {
      MutexLock lock(&mu_);
      Detach(mu_, e->book.Get(mu_).pd, e);  // its PD and length may change
      e->book.Get(mu_).pd = plan.new_pd;
      if (translate) {
        e->book.Get(mu_).mapping = new_mapping;
        e->book.Get(mu_).source = plan.new_source;
      }
      e->CacheAttributes(mu_);
      Attach(mu_, e->book.Get(mu_).pd, e);
      e->book.Get(mu_).generation++;
      recorded = PersistMr(*e);  // its PD, source or access may have changed
      *response.mutable_mr() = ToProto(*e);
      response.set_keys_changed(e->book.Get(mu_).lkey != response.old_lkey() ||
                                e->book.Get(mu_).rkey != response.old_rkey());
    }
    recorded.Wait().IgnoreError();  // a failure is logged by the journal
  };

  if (!native) {
    // Register the new region first: if that fails, the old one is untouched and still valid.
    // Both are pinned for a moment: the new region must fit under RLIMIT_MEMLOCK beside the old one.
    absl::Status room = options_.memlock.Check(new_mapping->data(), new_mapping->length(), "source");
    absl::StatusOr<std::unique_ptr<fabric::Mr>> fresh =
        room.ok() ? plan.new_pd->pd->RegMr(new_mapping->data(), new_mapping->length(), plan.access) : room;
    if (!fresh.ok() && room.ok()) fresh = options_.memlock.Explain(fresh.status(), new_mapping->length(), "source");
    if (!fresh.ok() && room.ok()) fresh = ExplainReadOnlyPin(fresh.status(), *new_mapping);
    if (!fresh.ok()) {
      return WithOutcome(WithContext(fresh.status(), absl::StrCat("rereg ", name, " (emulated): registering the "
                                                                 "new region failed; ", name, " is unchanged")),
                         v1::OUTCOME_OLD_MR_VALID);
    }
    if (absl::Status s = e->mr->Release(); !s.ok()) {
      // The old registration is still in place: undo the new one so exactly one MR remains.
      if (absl::Status undo = (*fresh)->Release(); !undo.ok()) {
        RDMAD_LOG_ERROR("rereg %s: undoing the new registration failed too: %s", name.c_str(),
                        std::string(undo.message()).c_str());
      }
      return WithOutcome(WithContext(s, absl::StrCat("rereg ", name, " (emulated): deregistering the old region "
                                                     "failed; the new one was undone and ", name, " is unchanged")),
                         v1::OUTCOME_OLD_MR_VALID);
    }
    std::unique_ptr<fabric::Mr> old = std::exchange(e->mr, std::move(fresh).value());
    commit();  // the old mapping is unmapped when the last reference (old MR's, commit's) goes
    RDMAD_LOG_INFO("%s reregistered (emulated), rkey 0x%x -> 0x%x", name.c_str(), response.old_rkey(),
                   response.mr().rkey());
    return response;
  }

  int err = 0;
  fabric::ReregCode code = e->mr->Rereg(plan.flags, plan.new_pd->pd.get(), translate ? new_mapping->data() : nullptr,
                                        translate ? new_mapping->length() : 0, plan.access, &err);
  const std::string what = absl::StrCat("ibv_rereg_mr returned ", fabric::ReregCodeName(code));
  switch (code) {
    case fabric::ReregCode::kOk:
    case fabric::ReregCode::kErrDoForkOld:
      // ERR_DO_FORK_OLD: the new MR is valid; only madvise on the old range failed.
      commit();
      if (code == fabric::ReregCode::kErrDoForkOld) {
        response.set_warning(absl::StrCat(what, " (errno ", err, ", ", ErrnoName(err),
                                          "): the region has the new attributes; fork protection of the old "
                                          "range could not be restored"));
      }
      return response;
    case fabric::ReregCode::kErrInput:
    case fabric::ReregCode::kErrDontForkNew:
      return WithOutcome(ErrnoError("ibv_rereg_mr", err, absl::StrCat(what, "; ", name, " is valid and unchanged")),
                         v1::OUTCOME_OLD_MR_VALID);
    default: {
      // ERR_CMD, ERR_CMD_AND_DO_FORK_NEW: the MR must not be used. Keep both mappings until deregistration,
      // since the device may reference either.
      MutexLock lock(&mu_);
      e->book.Get(mu_).unusable = true;
      e->book.Get(mu_).unusable_reason = absl::StrCat(what, ", errno ", err, " (", ErrnoName(err), ")");
      if (new_mapping != e->book.Get(mu_).mapping) e->book.Get(mu_).retained.push_back(std::move(new_mapping));
      return WithOutcome(ErrnoError("ibv_rereg_mr", err, absl::StrCat(what, "; ", name,
                                                                      " is now unusable: only deregister is "
                                                                      "accepted")),
                         v1::OUTCOME_MR_UNUSABLE);
    }
  }
}

}  // namespace rdmad
