#include "server/fabric/restrack.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>
#include <map>
#include <tuple>
#include <utility>

namespace rdmad::fabric::restrack {

Endpoint EndpointOf(const sockaddr* sa, size_t len) {
  Endpoint e;
  if (sa == nullptr || len < sizeof(sa_family_t)) return e;
  e.family = sa->sa_family;
  if (e.family == AF_INET && len >= sizeof(sockaddr_in)) {
    sockaddr_in in;
    std::memcpy(&in, sa, sizeof(in));
    std::memcpy(e.addr.data(), &in.sin_addr, 4);
    e.port = ntohs(in.sin_port);
  } else if (e.family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
    sockaddr_in6 in6;
    std::memcpy(&in6, sa, sizeof(in6));
    std::memcpy(e.addr.data(), &in6.sin6_addr, 16);
    e.port = ntohs(in6.sin6_port);
  }
  return e;
}

Endpoint EndpointOf(const std::string& host, uint16_t port) {
  Endpoint e;
  e.port = port;
  if (inet_pton(AF_INET, host.c_str(), e.addr.data()) == 1) {
    e.family = AF_INET;
  } else if (inet_pton(AF_INET6, host.c_str(), e.addr.data()) == 1) {
    e.family = AF_INET6;
  } else {
    e.addr = {};
  }
  return e;
}

namespace {

// Sets *slot to n, or marks it conflicting (two sources disagree: unknown).
void Agree(std::optional<uint32_t> n, std::optional<uint32_t>* slot, bool* conflict) {
  if (!n.has_value()) return;
  if (slot->has_value() && **slot != *n) *conflict = true;
  *slot = n;
}

}  // namespace

Numbers Join(const Ours& ours, const DeviceDump& kernel) {
  Numbers out;
  out.pdn.assign(ours.pds.size(), std::nullopt);
  out.mrn.assign(ours.mrs.size(), std::nullopt);
  out.qp_pdn.assign(ours.qps.size(), std::nullopt);
  out.qp_seen.assign(ours.qps.size(), false);
  out.cm_idn.assign(ours.cm_ids.size(), std::nullopt);

  // The pdn of each of our PDs (by id), from sources that are exact: QPs by qpn, MRs by lkey.
  std::map<uint64_t, std::optional<uint32_t>> pd_pdn;
  std::map<uint64_t, bool> pd_conflict;

  std::map<uint32_t, const KernelQp*> kqp_by_qpn;
  for (const KernelQp& q : kernel.qps) kqp_by_qpn[q.qpn] = &q;
  for (size_t i = 0; i < ours.qps.size(); ++i) {
    auto it = kqp_by_qpn.find(ours.qps[i].qpn);
    if (it == kqp_by_qpn.end()) continue;
    out.qp_seen[i] = true;
    out.qp_pdn[i] = it->second->pdn;
    Agree(it->second->pdn, &pd_pdn[ours.qps[i].pd_id], &pd_conflict[ours.qps[i].pd_id]);
  }

  const bool keyed = !kernel.mrs.empty() && kernel.mrs.front().lkey.has_value();
  if (keyed) {
    std::map<uint32_t, int> lkey_count;
    for (const KernelMr& m : kernel.mrs) {
      if (m.lkey.has_value()) ++lkey_count[*m.lkey];
    }
    for (size_t i = 0; i < ours.mrs.size(); ++i) {
      for (const KernelMr& m : kernel.mrs) {
        if (!m.lkey.has_value() || *m.lkey != ours.mrs[i].lkey || lkey_count[*m.lkey] != 1) continue;
        out.mrn[i] = m.mrn;
        Agree(m.pdn, &pd_pdn[ours.mrs[i].pd_id], &pd_conflict[ours.mrs[i].pd_id]);
      }
    }
  }
  auto known_pdn = [&](uint64_t pd_id) -> std::optional<uint32_t> {
    auto it = pd_pdn.find(pd_id);
    if (it == pd_pdn.end() || pd_conflict[pd_id]) return std::nullopt;
    return it->second;
  };
  if (!keyed) {
    // By (pdn, length): unique among our MRs of that PD and among the kernel's MRs of that pdn.
    std::map<std::pair<uint64_t, uint64_t>, int> ours_count;  // (pd id, length)
    for (const OurMr& m : ours.mrs) ++ours_count[{m.pd_id, m.length}];
    std::map<std::pair<uint32_t, uint64_t>, int> kernel_count;  // (pdn, length)
    for (const KernelMr& m : kernel.mrs) {
      if (m.pdn.has_value()) ++kernel_count[{*m.pdn, m.length}];
    }
    for (size_t i = 0; i < ours.mrs.size(); ++i) {
      std::optional<uint32_t> pdn = known_pdn(ours.mrs[i].pd_id);
      if (!pdn.has_value() || ours_count[{ours.mrs[i].pd_id, ours.mrs[i].length}] != 1 ||
          kernel_count[{*pdn, ours.mrs[i].length}] != 1) {
        continue;
      }
      for (const KernelMr& m : kernel.mrs) {
        if (m.pdn == pdn && m.length == ours.mrs[i].length) out.mrn[i] = m.mrn;
      }
    }
  }
  for (size_t i = 0; i < ours.pds.size(); ++i) out.pdn[i] = known_pdn(ours.pds[i].id);

  // CM ids: by qpn; else by (ps, src, dst) unique on both sides.
  auto key = [](uint32_t ps, const Endpoint& s, const Endpoint& d) {
    return std::make_tuple(ps, s.family, s.addr, s.port, d.family, d.addr, d.port);
  };
  using Key = decltype(key(0, Endpoint{}, Endpoint{}));
  std::map<Key, int> ours_key_count;
  for (const OurCmId& c : ours.cm_ids) {
    if (!c.qpn.has_value()) ++ours_key_count[key(c.ps, c.src, c.dst)];
  }
  std::map<Key, int> kernel_key_count;
  std::map<uint32_t, int> kernel_qpn_count;
  for (const KernelCmId& c : kernel.cm_ids) {
    if (c.qpn.has_value()) {
      ++kernel_qpn_count[*c.qpn];
    } else {
      ++kernel_key_count[key(c.ps, c.src, c.dst)];
    }
  }
  for (size_t i = 0; i < ours.cm_ids.size(); ++i) {
    const OurCmId& c = ours.cm_ids[i];
    for (const KernelCmId& k : kernel.cm_ids) {
      if (c.qpn.has_value()) {
        if (k.qpn == c.qpn && kernel_qpn_count[*c.qpn] == 1) out.cm_idn[i] = k.cm_idn;
      } else if (!k.qpn.has_value() && key(k.ps, k.src, k.dst) == key(c.ps, c.src, c.dst) &&
                 ours_key_count[key(c.ps, c.src, c.dst)] == 1 &&
                 kernel_key_count[key(c.ps, c.src, c.dst)] == 1) {
        out.cm_idn[i] = k.cm_idn;
      }
    }
  }

  // Internal objects get no number (they took part in every count above).
  for (size_t i = 0; i < ours.pds.size(); ++i) {
    if (ours.pds[i].internal) out.pdn[i].reset();
  }
  for (size_t i = 0; i < ours.mrs.size(); ++i) {
    if (ours.mrs[i].internal) out.mrn[i].reset();
  }
  for (size_t i = 0; i < ours.qps.size(); ++i) {
    if (ours.qps[i].internal) out.qp_pdn[i].reset();
  }
  for (size_t i = 0; i < ours.cm_ids.size(); ++i) {
    if (ours.cm_ids[i].internal) out.cm_idn[i].reset();
  }
  return out;
}

}  // namespace rdmad::fabric::restrack
