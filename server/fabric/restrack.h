// The kernel's resource tracking (restrack) of one device's objects, as `rdma resource show` prints it (pdn,
// mrn, qpn, cm-idn), and the exact join of rdmad's objects to those numbers. Pure code: values in, values out.
// The fabric that can ask the kernel fills a DeviceDump (fabric::Device::KernelObjects: the verbs backend by
// RDMA netlink, server/verbs/restrack_socket.h; the fake from its own objects); the services join it to the
// registry's and the CM manager's objects.
//
// Join rules (a number is given only when it is exact; anything ambiguous stays unknown, std::nullopt):
//   QP: by qpn (ibv_qp->qp_num is the kernel's lqpn); the kernel's entry gives the QP's pdn.
//   MR: by lkey when the dump carries keys (the kernel adds rkey/lkey only for a caller with CAP_NET_ADMIN);
//       without keys, by (pdn, length) when the MR's PD has a known pdn and that pair is unique both among
//       rdmad's MRs of that PD (internal ones counted) and among the kernel's MRs of rdmad's process.
//   PD: the pdn of its joined QPs and keyed MRs, when they agree.
//   CM id: by its QP's qpn when it has one; else by (port space, source, destination) when that triple is
//       unique among rdmad's ids (internal ones counted) and among the kernel's.
// Internal objects of rdmad (marked `internal`) take part in every uniqueness count, so they are never
// mistaken for a user's object, and get no number themselves.
// The dump and rdmad's lists are two snapshots: an object made or destroyed between them is simply not
// joined, but a by-length or by-address match can only be as exact as the two snapshots agree.
//
// Thread-safety: none needed; values only.
#ifndef RDMAD_SERVER_FABRIC_RESTRACK_H_
#define RDMAD_SERVER_FABRIC_RESTRACK_H_

#include <sys/socket.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rdmad::fabric::restrack {

// A socket address reduced to what identifies a CM id's end: family, address bytes (IPv4 in the first 4, IPv6
// in 16; IB's sockaddr_ib not handled: family only), port. A missing address is family AF_UNSPEC.
struct Endpoint {
  int family = AF_UNSPEC;
  std::array<uint8_t, 16> addr{};
  uint16_t port = 0;  // host order
  friend bool operator==(const Endpoint& a, const Endpoint& b) {
    return a.family == b.family && a.addr == b.addr && a.port == b.port;
  }
};
Endpoint EndpointOf(const sockaddr* sa, size_t len);
// From a numeric IPv4 or IPv6 host and a port (fabric::SockAddr's form); an empty or unparsable host is
// AF_UNSPEC, the port kept.
Endpoint EndpointOf(const std::string& host, uint16_t port);

// The port space of every rdma_cm id rdmad makes (RDMA_PS_TCP; static_assert in the verbs backend).
inline constexpr uint32_t kPortSpaceTcp = 0x0106;

struct KernelPd {
  uint32_t pdn = 0;
};
struct KernelMr {
  uint32_t mrn = 0;
  std::optional<uint32_t> pdn;
  uint64_t length = 0;
  std::optional<uint32_t> lkey;  // only for a caller with CAP_NET_ADMIN
  std::optional<uint32_t> rkey;
};
struct KernelQp {
  uint32_t qpn = 0;
  std::optional<uint32_t> pdn;
};
struct KernelCmId {
  uint32_t cm_idn = 0;
  std::optional<uint32_t> qpn;
  uint32_t ps = 0;  // RDMA_PS_*
  Endpoint src;
  Endpoint dst;
};

// One device's objects that belong to one process, as the kernel tracks them.
struct DeviceDump {
  std::optional<uint32_t> index;  // RDMA_NLDEV_ATTR_DEV_INDEX, as seen in the messages
  std::string name;
  std::vector<KernelPd> pds;
  std::vector<KernelMr> mrs;
  std::vector<KernelQp> qps;
  std::vector<KernelCmId> cm_ids;
};

// rdmad's side of the join, for one device. Ids are rdmad's (registry) ids; `internal` marks rdmad's own
// objects (the data plane's, bounds regions), which count in the uniqueness tests and get no number.
struct OurPd {
  uint64_t id = 0;
  bool internal = false;
};
struct OurMr {
  uint64_t id = 0;
  uint64_t pd_id = 0;
  uint32_t lkey = 0;
  uint64_t length = 0;
  bool internal = false;
};
struct OurQp {
  uint64_t id = 0;
  uint64_t pd_id = 0;
  uint32_t qpn = 0;
  bool internal = false;
};
struct OurCmId {
  uint64_t id = 0;
  std::optional<uint32_t> qpn;
  uint32_t ps = 0;
  Endpoint src;
  Endpoint dst;
  bool internal = false;
};
struct Ours {
  std::vector<OurPd> pds;
  std::vector<OurMr> mrs;
  std::vector<OurQp> qps;
  std::vector<OurCmId> cm_ids;
};

// The kernel's numbers of rdmad's user objects, parallel to Ours' vectors (same order); unknown (or
// internal) is std::nullopt.
struct Numbers {
  std::vector<std::optional<uint32_t>> pdn;  // per Ours::pds
  std::vector<std::optional<uint32_t>> mrn;  // per Ours::mrs
  std::vector<std::optional<uint32_t>> qp_pdn;  // per Ours::qps: the QP's pdn per the kernel
  std::vector<bool> qp_seen;                    // per Ours::qps: the kernel has this qpn for rdmad's pid
  std::vector<std::optional<uint32_t>> cm_idn;  // per Ours::cm_ids
};

Numbers Join(const Ours& ours, const DeviceDump& kernel);

}  // namespace rdmad::fabric::restrack

#endif  // RDMAD_SERVER_FABRIC_RESTRACK_H_
