// The registry's side of the join with the kernel's resource tracking (server/fabric/restrack.h): its PDs,
// regions and QPs on one device, from the bookkeeping alone, and the device's dump.
// Threads: see registry.h. The listing holds mu_ only to copy numbers out; the dump is a fabric call made
// without any lock.
#include "absl/strings/str_cat.h"
#include "server/common/status.h"
#include "server/registry/registry.h"

namespace rdmad {

absl::StatusOr<fabric::restrack::Ours> Registry::KernelJoinInput(const std::string& device,
                                                                 const std::string& field) const {
  RDMAD_ASSIGN_OR_RETURN(fabric::Device * d, FindDevice(device, field));
  fabric::restrack::Ours ours;
  MutexLock lock(&mu_);
  for (const auto& [id, pd] : pds_) {
    if (pd->device != d) continue;
    ours.pds.push_back({id, false});
    for (const auto& [mr_id, mr] : pd->book.Get(mu_).mrs) {
      const MrEntry::Book& b = mr->book.Get(mu_);
      if (b.lost) continue;  // nothing registered (MR_LOST)
      ours.mrs.push_back({mr_id, id, b.lkey, b.length, false});
    }
    for (const auto& [qp_id, qp] : pd->book.Get(mu_).qps) {
      ours.qps.push_back({qp_id, id, qp->book.Get(mu_).local.qpn, false});
    }
  }
  return ours;
}

absl::StatusOr<fabric::restrack::DeviceDump> Registry::KernelObjects(const std::string& device,
                                                                     const std::string& field) const {
  RDMAD_ASSIGN_OR_RETURN(fabric::Device * d, FindDevice(device, field));
  absl::StatusOr<fabric::restrack::DeviceDump> dump = d->KernelObjects();
  if (!dump.ok()) {
    return absl::Status(dump.status().code(),
                        absl::StrCat(field, ": the kernel's objects of ", d->info().name, ": ", dump.status().message()));
  }
  return dump;
}

}  // namespace rdmad
