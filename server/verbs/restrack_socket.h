// The socket side of restrack (server/verbs/restrack.h): one RDMA netlink (NETLINK_RDMA) dump of a device's
// PDs, MRs, QPs and CM ids, keeping one process's entries (restrack.h: Owners). Each call opens its own
// socket and closes it.
// The kernel adds MR keys (lkey/rkey) only when the caller has CAP_NET_ADMIN; without it the dump still
// succeeds, without keys.
// Thread-safety: DumpDevice shares nothing; call it from any thread, with no lock held (it blocks in
// netlink syscalls).
#ifndef RDMAD_SERVER_VERBS_RESTRACK_SOCKET_H_
#define RDMAD_SERVER_VERBS_RESTRACK_SOCKET_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "server/verbs/restrack.h"

namespace rdmad::verbs::restrack {

// `dev_index` is the kernel's device index (ibv_get_device_index). Errors carry the failed call and errno
// (no RDMA netlink: socket fails with EPROTONOSUPPORT; a kernel refusal comes back as its errno).
absl::StatusOr<DeviceDump> DumpDevice(uint32_t dev_index, const Owners& owners);
// One process's: `pid`'s entries only (its main thread's, for a single-threaded process its all).
absl::StatusOr<DeviceDump> DumpDevice(uint32_t dev_index, uint32_t pid);
// This process's: every live thread's entries (/proc/self/task), and the orphans.
absl::StatusOr<DeviceDump> DumpDeviceOfThisProcess(uint32_t dev_index);

}  // namespace rdmad::verbs::restrack

#endif  // RDMAD_SERVER_VERBS_RESTRACK_SOCKET_H_
