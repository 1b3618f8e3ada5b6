// CmManager's side of the join with the kernel's resource tracking (server/fabric/restrack.h): its ids on
// one device, from the bookkeeping alone.
// Threads: any; mu_ is held only to copy the ids' bookkeeping out.
#include <sys/socket.h>

#include "absl/strings/match.h"
#include "server/cm/manager.h"

namespace rdmad::cm {

std::vector<CmManager::KernelCmId> CmManager::KernelJoinInput(const std::string& device) const {
  const std::string name = absl::StartsWith(device, "devices/") ? device : "devices/" + device;
  std::vector<KernelCmId> out;
  MutexLock lock(&mu_);
  for (const auto& [id, entry] : ids_) {
    const Id::Book& b = entry->book.Get(mu_);
    if (b.device != name) continue;  // not bound to this device (yet)
    KernelCmId k;
    k.ours.id = id;
    k.ours.ps = fabric::restrack::kPortSpaceTcp;
    k.ours.src = fabric::restrack::EndpointOf(b.local.host, b.local.port);
    k.ours.dst = fabric::restrack::EndpointOf(b.remote.host, b.remote.port);
    // No peer yet (a listener): the kernel reports the bound address's family, all zeros (rdma_bind_addr
    // gives the destination the source's family).
    if (k.ours.dst.family == AF_UNSPEC) k.ours.dst.family = k.ours.src.family;
    // rdmad's own listeners and their connections: they count, and get no number.
    k.ours.internal = b.data_plane;
    k.qp = b.qp;
    k.pd = entry->pd;
    out.push_back(std::move(k));
  }
  return out;
}

}  // namespace rdmad::cm
