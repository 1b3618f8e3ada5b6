// The NIC's own counters, as Linux exposes them in sysfs, and which of them count refused remote accesses.
//
//   /sys/class/infiniband/DEV/hw_counters/NAME          device-level counters (port 0), few drivers (mlx4)
//   /sys/class/infiniband/DEV/ports/N/hw_counters/NAME  per-port counters (mlx5, rxe, irdma, bnxt_re, efa, ...)
//
// Each file holds one decimal number; `lifespan` in the same directory is the driver's refresh period (ms),
// not a counter, and is left out. Reading a file makes the kernel refresh the counters at most once per
// lifespan (drivers/infiniband/core/sysfs.c), so a read is current to within that.
//
// kHwCounterTable is the one place that knows what a counter means for key hygiene: the names, per driver,
// of the counters of remote accesses refused by *this* NIC (a request that arrived with a bad or dead
// rkey, outside the key's range, without the rights, or for another PD), i.e. the responder side. A peer
// probing for keys moves these. Their requester-side counterparts (this host's QPs were refused by a peer)
// are listed too, marked false. Names in no entry are reported with remote_access_error false.
//
// Thread-safety: stateless; callable from any thread.
#ifndef RDMAD_SERVER_FABRIC_HW_COUNTERS_H_
#define RDMAD_SERVER_FABRIC_HW_COUNTERS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "server/fabric/fabric.h"

namespace rdmad::fabric {

inline constexpr char kInfinibandSysfs[] = "/sys/class/infiniband";

struct HwCounterKind {
  const char* name;     // the counter's file name
  const char* driver;   // the kernel driver that exposes it
  bool remote_access_error;  // a remote access refused by this NIC (responder side)
  const char* meaning;
  const char* source;   // where the name and its meaning come from
};

// The classification (see hw_counters.cc for the entries and their sources).
extern const HwCounterKind kHwCounterTable[];
extern const size_t kHwCounterTableSize;

// The table's entry for a counter name, or nullptr.
const HwCounterKind* FindHwCounterKind(absl::string_view name);
bool IsRemoteAccessErrorCounter(absl::string_view name);

// Reads every counter of `device` under `sysfs_root` (kInfinibandSysfs, or a test's directory): the
// device-level directory as port 0, then ports/N/hw_counters for each numeric N in ascending order, names
// sorted within each. A directory that is missing yields nothing; a file that cannot be opened or read, or
// does not hold an unsigned decimal number, is skipped (drivers return EOPNOTSUPP or EIO for counters the
// firmware lacks).
std::vector<HwCounterValue> ReadSysfsHwCounters(const std::string& sysfs_root, const std::string& device);

}  // namespace rdmad::fabric

#endif  // RDMAD_SERVER_FABRIC_HW_COUNTERS_H_
