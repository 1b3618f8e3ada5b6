// Restart recovery: re-creating the PDs and memory regions the state store holds, under their names, with
// new keys (registry.h, Recover; docs/operations.md, "Restart recovery"). Threads: main, at start-up, before
// the server serves and before any other call on the registry; mu_ is taken for the commits only, never
// across a fabric call.
#include <cinttypes>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/log.h"
#include "server/common/status.h"
#include "server/memory/file_rights.h"
#include "server/memory/mapping.h"
#include "server/registry/internal.h"
#include "server/registry/registry.h"

namespace rdmad {

absl::StatusOr<std::unique_ptr<Mapping>> Registry::MapRecorded(const state::MrRow& row, const fabric::Device& device,
                                                                const std::string& tenant,
                                                                const RecoveryRights& rights) const {
  if (row.source.has_anonymous()) {
    return absl::DataLossError("anonymous memory: its contents died with the previous rdmad process");
  }
  if (row.source.has_fd()) {
    return absl::DataLossError("memory passed as a descriptor: rdmad held it only while it ran");
  }
  if (!row.source.has_file()) return InvalidArgument("source", "the recorded source is neither anonymous nor a file");
  // Who registered it, recorded with it: without that record (a row from an rdmad that did not keep it),
  // no caller is known whose rights could be checked, so the strictest case applies: no file is mapped.
  if (!row.file.has_value()) {
    return FailedPrecondition("source.file.path",
                              "recorded without who registered it (by an older rdmad), so no caller's rights can be "
                              "checked again: the strictest case applies and the file is not mapped; deregister the "
                              "region and register the file again");
  }
  const state::FileRecord& rec = *row.file;
  const auto& f = row.source.file();
  if (const uint64_t max = MaxMrBytes(device); max && f.length() > max) {
    return OutOfRange("source.file.length",
                      absl::StrCat(f.length(), " bytes exceeds the largest region allowed (", max, " bytes)"));
  }
  // The caller's rights now: as recorded, narrowed by what its tenant may do in the current config.
  absl::StatusOr<FileAccess> now = rights ? rights(tenant, rec.files) : absl::StatusOr<FileAccess>(rec.files);
  if (!now.ok()) return now.status();
  // The real path the caller's name led to at registration, with no symlink on the way now (a link there
  // was not there then), and the same inode; the roots and rights checked on it as for a live registration.
  FileRules rules;
  rules.allow_disk = options_.allow_disk_files;
  rules.no_symlinks = true;
  rules.expect = FileId{rec.dev, rec.ino};
  return Mapping::File(rec.real_path, f.offset(), f.length(), options_.allowed_file_roots, "source.file", *now,
                       FileRightsFor(row.access), rules);
}

absl::StatusOr<Registry::Recovered> Registry::Recover(const state::Snapshot& snapshot, const RecoveryRights& rights) {
  Recovered out;
  std::map<uint64_t, PdEntry*> pds;  // re-created, by id
  std::map<uint64_t, std::string> tenants;  // their tenants, by id
  for (const state::PdRow& row : snapshot.pds) {
    const std::string name = Name("pds", row.id);
    absl::StatusOr<fabric::Device*> device = FindDevice(row.device, "device");
    absl::StatusOr<std::unique_ptr<fabric::Pd>> pd =
        device.ok() ? (*device)->AllocPd() : absl::StatusOr<std::unique_ptr<fabric::Pd>>(device.status());
    if (!pd.ok()) {
      out.lost.push_back(absl::StrCat(name, ": not re-created on devices/", row.device, ": ", pd.status().message()));
      RDMAD_LOG_ERROR("recovery: %s", out.lost.back().c_str());
      continue;
    }
    auto e = std::make_unique<PdEntry>();
    e->totals = &totals_;
    e->id = row.id;
    e->device = *device;
    e->label = row.label;
    e->pd = std::move(pd).value();
    pds[row.id] = e.get();
    tenants[row.id] = row.owner;
    MutexLock lock(&mu_);
    OwnPdLocked(name, row.owner);  // restored PDs stay their tenant's
    pds_.emplace(row.id, std::move(e));
    out.owners[name] = row.owner;
    out.pds.push_back(name);
  }
  for (const state::MrRow& row : snapshot.mrs) {
    const std::string name = Name("mrs", row.id);
    auto pd = pds.find(row.pd);
    if (pd == pds.end()) {
      out.lost.push_back(absl::StrCat(name, ": its PD ", Name("pds", row.pd), " was not re-created"));
      RDMAD_LOG_ERROR("recovery: %s", out.lost.back().c_str());
      continue;  // its record stays, with the PD's, for a start that finds the device again
    }
    // Anonymous memory died with the old process; a file is mapped and registered again only as its
    // registering caller could now (MapRecorded).
    absl::StatusOr<std::unique_ptr<Mapping>> mapping =
        MapRecorded(row, *pd->second->device, tenants[row.pd], rights);
    // Within RLIMIT_MEMLOCK, as any registration: past it the MR is lost, saying which limit.
    absl::Status room = mapping.ok() ? options_.memlock.Check((*mapping)->data(), (*mapping)->length(), "source")
                                     : mapping.status();
    absl::StatusOr<std::unique_ptr<fabric::Mr>> mr =
        room.ok() ? pd->second->pd->RegMr((*mapping)->data(), (*mapping)->length(), row.access) : room;
    if (!mr.ok() && room.ok()) mr = options_.memlock.Explain(mr.status(), (*mapping)->length(), "source");
    auto e = std::make_unique<MrEntry>();
    e->id = row.id;
    MutexLock lock(&mu_);
    MrEntry::Book& b = e->book.Get(mu_);
    b.pd = pd->second;
    b.source = row.source;
    b.access = row.access;
    if (mr.ok()) {
      b.mapping = std::move(mapping).value();
      e->mr = std::move(mr).value();
      e->CacheAttributes(mu_);
      out.mrs.push_back(name);
      RDMAD_LOG_INFO("recovery: %s registered again in %s: %" PRIu64 " bytes, rkey 0x%x", name.c_str(),
                     Name("pds", row.pd).c_str(), b.length, b.rkey);
    } else {
      b.lost = true;
      b.unusable = true;
      b.unusable_reason = absl::StrCat("lost at rdmad's restart: ", mr.status().message());
      b.length = row.source.has_file()         ? row.source.file().length()
                 : row.source.has_fd() ? row.source.fd().length()
                                               : row.source.anonymous().size();
      out.lost.push_back(absl::StrCat(name, ": ", mr.status().message()));
      RDMAD_LOG_WARN("recovery: %s is lost: %s", name.c_str(), std::string(mr.status().message()).c_str());
    }
    Attach(mu_, pd->second, e.get());
    mrs_.emplace(row.id, std::move(e));
  }
  RDMAD_LOG_INFO("recovery: %zu PD(s) and %zu memory region(s) re-created, %zu lost", out.pds.size(),
                 out.mrs.size(), out.lost.size());
  return out;
}

}  // namespace rdmad
