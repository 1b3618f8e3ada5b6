// The kernel's resource tracking (restrack) as RDMA netlink dumps it (NETLINK_RDMA, RDMA_NLDEV_CMD_RES_*_GET,
// what `rdma resource show` prints): the parser of its reply messages. Pure code: it parses messages it is
// given; it opens no socket, so the tests feed it canned messages. The socket that fetches the dumps is
// restrack_socket.h; the values and the join to rdmad's objects are the fabric seam's
// (server/fabric/restrack.h), named here too.
//
// Thread-safety: none needed; values only.
#ifndef RDMAD_SERVER_VERBS_RESTRACK_H_
#define RDMAD_SERVER_VERBS_RESTRACK_H_

#include <linux/netlink.h>

#include <cstdint>
#include <set>

#include "absl/status/status.h"
#include "server/fabric/restrack.h"

namespace rdmad::verbs::restrack {

using fabric::restrack::DeviceDump;
using fabric::restrack::Endpoint;
using fabric::restrack::EndpointOf;
using fabric::restrack::Join;
using fabric::restrack::KernelCmId;
using fabric::restrack::KernelMr;
using fabric::restrack::KernelPd;
using fabric::restrack::KernelQp;
using fabric::restrack::Numbers;
using fabric::restrack::OurCmId;
using fabric::restrack::OurMr;
using fabric::restrack::OurPd;
using fabric::restrack::OurQp;
using fabric::restrack::Ours;

// Whose entries a dump keeps. The kernel records the *thread* that made a user object and reports its id
// (RDMA_NLDEV_ATTR_RES_PID) while that thread lives; once it exited, the entry has no pid at all. So a
// process's objects are those whose pid is one of its threads' ids, plus, with `orphans`, the user entries
// without a pid (whose they are the kernel no longer tells: kept, they can only make a by-length or
// by-address match ambiguous, never wrong, since keys, qpns and pdns are unique per device). Entries with a
// kernel name (the kernel's own) are never kept.
struct Owners {
  std::set<uint32_t> tids;
  bool orphans = false;
};

// Adds to `dump` the entries of one RDMA_NLDEV_CMD_RES_{PD,MR,QP,CM_ID}_GET reply message that `owners`
// keeps (the `pid` form: that one id, no orphans). Other message types (NLMSG_DONE, NLMSG_ERROR) are not
// for this function: the caller handles them. A malformed message is INVALID_ARGUMENT naming what is wrong;
// `dump` then keeps what came before it.
absl::Status ParseResMessage(const nlmsghdr* nlh, const Owners& owners, DeviceDump* dump);
absl::Status ParseResMessage(const nlmsghdr* nlh, uint32_t pid, DeviceDump* dump);

}  // namespace rdmad::verbs::restrack

#endif  // RDMAD_SERVER_VERBS_RESTRACK_H_
