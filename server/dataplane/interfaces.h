// The addresses at which this host's RDMA devices are reached: what rdmad tells clients for a data-plane
// listener on a wildcard address ("0.0.0.0:7471", "[::]:7471"), where the configured address itself is no
// place to connect to.
//
// A device's network interfaces are those behind its RoCE GIDs (/sys/class/infiniband/DEV/ports/N/
// gid_attrs/ndevs/*: rxe, RoCE NICs) and those on its PCI function (/sys/class/infiniband/DEV/device/net/*:
// IPoIB, iWARP). Their addresses come from getifaddrs(3): IPv4 for an IPv4 wildcard; for an IPv6 one, the
// global IPv6 addresses, then the IPv4 ones (an IPv6 rdma_cm listener on "::" takes both). Loopback and
// link-local addresses are left out (a link-local one needs a scope a client cannot be told here).
//
// Threads: any; no state.
#ifndef RDMAD_SERVER_DATAPLANE_INTERFACES_H_
#define RDMAD_SERVER_DATAPLANE_INTERFACES_H_

#include <string>
#include <vector>

namespace rdmad::dataplane {

// True for "0.0.0.0" and "::" (the forms rdma_listen accepts for every address).
bool IsWildcard(const std::string& host);

// The network interfaces behind the RDMA devices under `sysfs_infiniband` (normally
// "/sys/class/infiniband"), sorted, without repeats.
std::vector<std::string> RdmaInterfaces(const std::string& sysfs_infiniband);

// The numeric addresses of those interfaces for a listener on `wildcard` ("0.0.0.0" or "::"), in the
// interfaces' order; empty if there is none.
std::vector<std::string> RdmaInterfaceAddresses(const std::string& wildcard,
                                                const std::string& sysfs_infiniband = "/sys/class/infiniband");

}  // namespace rdmad::dataplane

#endif  // RDMAD_SERVER_DATAPLANE_INTERFACES_H_
