// Memory regions: register (mapped and pinned on a worker), get, list, deregister. Re-registration is in
// rereg.cc. Threads: see registry.h. No fabric call is made with mu_ held.
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <cinttypes>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/memory/prefault.h"
#include "server/common/log.h"
#include "server/common/status.h"
#include "server/registry/internal.h"
#include "server/registry/registry.h"

namespace rdmad {


uint64_t Registry::MaxMrBytes(const fabric::Device& device) const {
  // The smallest of: the device's max_mr_size (rxe reports 2^64-1), this host's physical memory (more can
  // never be pinned), and the configured max_mr_bytes.
  uint64_t max = device.info().max_mr_size ? device.info().max_mr_size : UINT64_MAX;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) max = std::min<uint64_t>(max, static_cast<uint64_t>(pages) * static_cast<uint64_t>(page));
  if (options_.max_mr_bytes) max = std::min(max, options_.max_mr_bytes);
  return max;
}

absl::StatusOr<std::unique_ptr<Mapping>> Registry::MapSource(const v1::MemorySource& source,
                                                             const fabric::Device& device,
                                                             const std::string& field,
                                                             const FileAccess& files,
                                                             uint32_t access, bool keep_descriptor) const {
  const uint64_t max = MaxMrBytes(device);
  switch (source.kind_case()) {
    case v1::MemorySource::kAnonymous: {
      const auto& a = source.anonymous();
      if (max && a.size() > max) {
        return OutOfRange(field + ".anonymous.size",
                          absl::StrCat(a.size(), " bytes exceeds the largest region allowed (", max, " bytes)"));
      }
      return Mapping::Anonymous(a.size(), a.huge_pages(), field + ".anonymous");
    }
    case v1::MemorySource::kFile: {
      const auto& f = source.file();
      if (max && f.length() > max) {
        return OutOfRange(field + ".file.length",
                          absl::StrCat(f.length(), " bytes exceeds the largest region allowed (", max, " bytes)"));
      }
      FileRules rules;
      rules.allow_disk = options_.allow_disk_files;
      return Mapping::File(f.path(), f.offset(), f.length(), options_.allowed_file_roots, field + ".file", files,
                           FileRightsFor(access), rules);
    }
    case v1::MemorySource::kFd: {
      const auto& d = source.fd();
      if (max && d.length() > max) {
        return OutOfRange(field + ".fd.length",
                          absl::StrCat(d.length(), " bytes exceeds the largest region allowed (", max, " bytes)"));
      }
      if (options_.descriptors == nullptr) {
        return FailedPrecondition(field + ".fd",
                                  "this rdmad has no descriptor socket (config descriptor_socket), so holds none");
      }
      // Claimed for the caller's principal only (a validation keeps it waiting: it gets a duplicate).
      absl::StatusOr<UniqueFd> fd =
          options_.descriptors->Claim(d.handle(), files.principal, field + ".fd.handle", keep_descriptor);
      if (!fd.ok()) return fd.status();
      return Mapping::Descriptor(std::move(fd).value(), d.offset(), d.length(), (access & kWritableAccess) != 0,
                                 options_.allow_disk_files, field + ".fd");
    }
    default:
      return InvalidArgument(field, "is required: anonymous {size}, file {path, offset, length} or fd {handle, "
                                    "offset, length}");
  }
}

v1::MemoryRegion Registry::ToProto(const MrEntry& e) const {
  const MrEntry::Book& b = e.book.Get(mu_);
  v1::MemoryRegion mr;
  mr.set_name(Name("mrs", e.id));
  mr.set_pd(Name("pds", b.pd->id));
  *mr.mutable_source() = b.source;
  mr.set_addr(b.addr);
  mr.set_length(b.length);
  mr.set_lkey(b.lkey);
  mr.set_rkey(b.rkey);
  AccessList(b.access, mr.mutable_access());
  mr.set_state(b.lost ? v1::MR_LOST : b.unusable ? v1::MR_UNUSABLE : v1::MR_READY);
  mr.set_unusable_reason(b.unusable_reason);
  mr.set_bound_windows(static_cast<uint32_t>(b.windows.size()));
  mr.set_generation(b.generation);
  return mr;
}

state::Ticket Registry::PersistMr(const MrEntry& e) {
  const MrEntry::Book& b = e.book.Get(mu_);
  if (options_.state == nullptr) return state::Ticket();
  state::MrRow row{e.id, b.pd->id, b.source, b.access, std::nullopt};
  // A file region: whose rights opened it and which inode, for restart recovery to check again.
  if (b.source.has_file() && b.mapping != nullptr && b.mapping->is_file()) {
    row.file = state::FileRecord{b.mapping->files(), b.mapping->real_path(), b.mapping->file_id().dev,
                                 b.mapping->file_id().ino};
  }
  // A queue push: the journal's writer records it (and logs a failure).
  return options_.state->Submit(state::Mutation::PutMr(std::move(row))
                                    .OnError(absl::StrCat(Name("mrs", e.id), ": not recorded in the state store"),
                                             ": it will not survive a restart"));
}

state::Ticket Registry::Unpersist(const char* kind, uint64_t id) {
  if (options_.state == nullptr) return state::Ticket();
  state::Mutation m = std::string(kind) == "pds" ? state::Mutation::DeletePd(id) : state::Mutation::DeleteMr(id);
  return options_.state->Submit(
      std::move(m).OnError(absl::StrCat(Name(kind, id), ": its removal is not recorded in the state store"),
                           ": a restart re-creates it"));
}

void Registry::RegisterMrAsync(const v1::RegisterMrRequest& request, Done<v1::MemoryRegion> done,
                               const FileAccess& files) {
  absl::StatusOr<uint32_t> access = AccessBits(request.access(), "access");
  if (access.ok()) {
    if (absl::Status s = CheckMrAccessRule(*access, "access"); !s.ok()) access = s;
  }
  if (!access.ok()) return std::move(done)(access.status());
  PdEntry* pd = nullptr;
  absl::Status refused;
  {
    MutexLock lock(&mu_);
    absl::StatusOr<PdEntry*> found = FindPd(request.pd(), "pd");
    if (found.ok() && (*found)->book.Get(mu_).busy) {
      found = InProgress("pd", request.pd(), (*found)->book.Get(mu_).busy);
    }
    if (found.ok()) {
      absl::Status s = WithinLimit("mrs", options_.limits.mrs, totals_.Get(mu_).mrs, creating_.mrs);
      if (!s.ok()) found = s;
    }
    if (found.ok()) {
      pd = *found;
      pd->book.Get(mu_).pending++;  // the PD cannot be deleted until this registration is inserted or abandoned
      creating_.mrs++;
    } else {
      refused = found.status();
    }
  }
  if (!refused.ok()) return std::move(done)(refused);
  // Reserve -> work (a worker maps and pins: seconds for a large region) -> commit.
  auto work = [this, pd, request, files, access = *access, done = std::move(done)]() mutable {
    absl::StatusOr<std::unique_ptr<Mapping>> mapping =
        MapSource(request.source(), *pd->device, "source", files, access, request.validate_only());
    // Within rdmad's RLIMIT_MEMLOCK (the kernel charges the pages to rdmad), said clearly either way.
    absl::Status room =
        mapping.ok() ? options_.memlock.Check((*mapping)->data(), (*mapping)->length(), "source") : mapping.status();
    if (request.validate_only()) {
      // Every check made (the source mapped and checked, then unmapped with the closure; nothing faulted in
      // or pinned): the region it would register, without what only a registration gives (name, address,
      // keys).
      absl::StatusOr<v1::MemoryRegion> out = absl::UnknownError("unset");
      if (!room.ok()) {
        out = room;
      } else {
        v1::MemoryRegion would;
        would.set_pd(Name("pds", pd->id));
        *would.mutable_source() = request.source();
        would.set_length((*mapping)->length());
        AccessList(access, would.mutable_access());
        would.set_state(v1::MR_READY);
        out = std::move(would);
      }
      {
        MutexLock lock(&mu_);
        pd->book.Get(mu_).pending--;
        creating_.mrs--;
      }
      return std::move(done)(std::move(out));
    }
    // A large anonymous region (4 KiB pages) is faulted in from several threads first: ibv_reg_mr alone
    // would fault and zero it on this one.
    if (room.ok() && request.source().has_anonymous() && !request.source().anonymous().huge_pages()) {
      Prefault((*mapping)->data(), (*mapping)->length(), static_cast<uint64_t>(sysconf(_SC_PAGESIZE)),
               options_.prefault_threads);
    }
    absl::StatusOr<std::unique_ptr<fabric::Mr>> mr =
        room.ok() ? pd->pd->RegMr((*mapping)->data(), (*mapping)->length(), access) : room;
    if (!mr.ok() && room.ok()) mr = options_.memlock.Explain(mr.status(), (*mapping)->length(), "source");
    if (!mr.ok() && room.ok()) mr = ExplainReadOnlyPin(mr.status(), **mapping);
    absl::StatusOr<v1::MemoryRegion> out = absl::UnknownError("unset");
    state::Ticket recorded;
    {
      MutexLock lock(&mu_);
      pd->book.Get(mu_).pending--;
      creating_.mrs--;
      if (!mr.ok()) {
        out = mr.status();
      } else {
        auto e = std::make_unique<MrEntry>();
        e->id = next_mr_.Next();
        e->book.Get(mu_).pd = pd;
        e->book.Get(mu_).source = request.source();
        e->book.Get(mu_).mapping = std::move(mapping).value();
        e->mr = std::move(mr).value();
        e->CacheAttributes(mu_);
        Attach(mu_, pd, e.get());
        recorded = PersistMr(*e);
        out = ToProto(*e);
        mrs_.emplace(e->id, std::move(e));
      }
    }
    // The reply waits for the region's record (on this pin worker, without mu_); a failure was logged and
    // the region stays registered, as before.
    recorded.Wait().IgnoreError();
    if (out.ok()) {
      RDMAD_LOG_INFO("%s registered in %s: %" PRIu64 " bytes, rkey 0x%x", out->name().c_str(), out->pd().c_str(),
                     out->length(), out->rkey());
    }
    std::move(done)(std::move(out));  // a failed mapping is unmapped when the closure ends
  };
  if (!workers_->Post(std::move(work))) {
    // Shutting down: the closure (and `done` in it) was destroyed unrun; nobody waits on a stopped pool.
    MutexLock lock(&mu_);
    pd->book.Get(mu_).pending--;
    creating_.mrs--;
  }
}

absl::StatusOr<v1::MemoryRegion> Registry::RegisterMr(const v1::RegisterMrRequest& request,
                                                     const FileAccess& files) {
  return AwaitResult<v1::MemoryRegion>(
      [&](Done<v1::MemoryRegion> d) { RegisterMrAsync(request, std::move(d), files); });
}

absl::StatusOr<v1::MemoryRegion> Registry::GetMr(const std::string& name) const {
  MutexLock lock(&mu_);
  RDMAD_ASSIGN_OR_RETURN(MrEntry * e, FindMr(name, "name"));
  return ToProto(*e);
}

absl::StatusOr<std::vector<v1::MemoryRegion>> Registry::ListMrs(const v1::ListMrsRequest& request, uint64_t after,
                                                                size_t limit) const {
  MutexLock lock(&mu_);
  std::vector<v1::MemoryRegion> out;
  auto full = [&] { return limit != 0 && out.size() >= limit; };
  if (!request.pd().empty()) {
    RDMAD_ASSIGN_OR_RETURN(PdEntry * pd, FindPd(request.pd(), "pd"));
    const auto& mrs = pd->book.Get(mu_).mrs;
    for (auto it = mrs.upper_bound(after); it != mrs.end() && !full(); ++it) out.push_back(ToProto(*it->second));
    return out;
  }
  for (auto it = mrs_.upper_bound(after); it != mrs_.end() && !full(); ++it) out.push_back(ToProto(*it->second));
  return out;
}

absl::Status Registry::CheckDeregister(const std::string& name) const {
  MutexLock lock(&mu_);
  RDMAD_ASSIGN_OR_RETURN(const MrEntry* e, FindMr(name, "name"));
  if (e->book.Get(mu_).busy) return InProgress("name", name, e->book.Get(mu_).busy);
  std::vector<std::string> bound;
  for (const auto& [id, w] : e->book.Get(mu_).windows) {
    if (w->owner.empty()) bound.push_back(Name("mws", id));  // rdmad's own grant windows go with the grants
  }
  if (!bound.empty()) {
    return Busy("name", absl::StrCat(name, " has ", bound.size(), " bound memory window(s) (", absl::StrJoin(bound, ", "),
                                     "): invalidate or deallocate them first (ibv_dereg_mr(3) NOTES)"));
  }
  return absl::OkStatus();
}

absl::Status Registry::DeregisterMr(const std::string& name) {
  MrEntry* e = nullptr;
  {
    MutexLock lock(&mu_);
    RDMAD_ASSIGN_OR_RETURN(e, FindMr(name, "name"));
    if (e->book.Get(mu_).busy) return InProgress("name", name, e->book.Get(mu_).busy);
    if (!e->book.Get(mu_).windows.empty()) {
      std::vector<std::string> bound;
      for (const auto& [id, w] : e->book.Get(mu_).windows) bound.push_back(Name("mws", id));
      return Busy("name", absl::StrCat(name, " has ", e->book.Get(mu_).windows.size(), " bound memory window(s) (",
                                       absl::StrJoin(bound, ", "),
                                       "): invalidate or deallocate them first (ibv_dereg_mr(3) NOTES)"));
    }
    e->book.Get(mu_).busy = "DeregisterMr";
  }
  absl::Status released = e->mr ? WithContext(e->mr->Release(), name) : absl::OkStatus();  // lost: nothing registered
  std::unique_ptr<MrEntry> owned;
  state::Ticket recorded;
  {
    MutexLock lock(&mu_);
    e->book.Get(mu_).busy = nullptr;
    if (!released.ok()) return released;  // still registered, still ours
    recorded = Unpersist("mrs", e->id);
    Detach(mu_, e->book.Get(mu_).pd, e);
    owned = std::move(mrs_[e->id]);
    mrs_.erase(e->id);
  }
  owned.reset();  // unmaps, without the lock
  recorded.Wait().IgnoreError();  // the reply after its record (a failure is logged by the journal)
  RDMAD_LOG_INFO("%s deregistered", name.c_str());
  return absl::OkStatus();
}

}  // namespace rdmad
