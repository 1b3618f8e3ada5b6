#include "server/verbs/restrack.h"

#include <libmnl/libmnl.h>
#include <netinet/in.h>
#include <rdma/rdma_netlink.h>

#include <cstring>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"

namespace rdmad::verbs::restrack {
namespace {

// The attributes of one level (a message or one nest), by type; unknown types are ignored.
struct Table {
  const nlattr* at[RDMA_NLDEV_ATTR_MAX] = {};
  std::string error;  // the first malformed attribute
};

mnl_attr_data_type TypeOf(uint16_t type) {
  switch (type) {
    case RDMA_NLDEV_ATTR_DEV_INDEX:
    case RDMA_NLDEV_ATTR_RES_PID:
    case RDMA_NLDEV_ATTR_RES_PDN:
    case RDMA_NLDEV_ATTR_RES_MRN:
    case RDMA_NLDEV_ATTR_RES_LQPN:
    case RDMA_NLDEV_ATTR_RES_CM_IDN:
    case RDMA_NLDEV_ATTR_RES_LKEY:
    case RDMA_NLDEV_ATTR_RES_RKEY:
    case RDMA_NLDEV_ATTR_RES_PS:
      return MNL_TYPE_U32;
    case RDMA_NLDEV_ATTR_RES_MRLEN:
      return MNL_TYPE_U64;
    case RDMA_NLDEV_ATTR_DEV_NAME:
      return MNL_TYPE_NUL_STRING;
    case RDMA_NLDEV_ATTR_RES_PD:
    case RDMA_NLDEV_ATTR_RES_MR:
    case RDMA_NLDEV_ATTR_RES_QP:
    case RDMA_NLDEV_ATTR_RES_CM_ID:
    case RDMA_NLDEV_ATTR_RES_PD_ENTRY:
    case RDMA_NLDEV_ATTR_RES_MR_ENTRY:
    case RDMA_NLDEV_ATTR_RES_QP_ENTRY:
    case RDMA_NLDEV_ATTR_RES_CM_ID_ENTRY:
      return MNL_TYPE_NESTED;
    default:
      return MNL_TYPE_UNSPEC;
  }
}

int Collect(const nlattr* attr, void* data) {
  auto* table = static_cast<Table*>(data);
  const uint16_t type = mnl_attr_get_type(attr);
  if (type >= RDMA_NLDEV_ATTR_MAX) return MNL_CB_OK;  // newer than our header: not ours to read
  if (type == RDMA_NLDEV_ATTR_RES_SRC_ADDR || type == RDMA_NLDEV_ATTR_RES_DST_ADDR) {
    if (mnl_attr_get_payload_len(attr) < sizeof(sa_family_t)) {
      table->error = absl::StrCat("attribute ", type, ": shorter than a socket address");
      return MNL_CB_ERROR;
    }
  } else if (const mnl_attr_data_type t = TypeOf(type); t != MNL_TYPE_UNSPEC &&
                                                        mnl_attr_validate(attr, t) < 0) {
    table->error = absl::StrCat("attribute ", type, ": wrong size ", mnl_attr_get_payload_len(attr));
    return MNL_CB_ERROR;
  }
  table->at[type] = attr;
  return MNL_CB_OK;
}

std::optional<uint32_t> U32(const Table& t, int type) {
  if (t.at[type] == nullptr) return std::nullopt;
  return mnl_attr_get_u32(t.at[type]);
}

Endpoint EndpointAttr(const nlattr* attr) {
  if (attr == nullptr) return Endpoint{};
  return EndpointOf(static_cast<const sockaddr*>(mnl_attr_get_payload(attr)), mnl_attr_get_payload_len(attr));
}

absl::Status Malformed(absl::string_view what, const Table& t) {
  return absl::InvalidArgumentError(absl::StrCat("RDMA netlink ", what, ": ", t.error));
}

// Each entry of the nest `list` (of entry type `entry_type`) that carries pid `pid`: calls take(entry table).
template <typename Take>
absl::Status ForEachEntry(const nlattr* list, int entry_type, uint32_t pid, absl::string_view what,
                          Take take) {
  // mnl_attr_for_each_nested, written out: its first step assigns a void* (fine in C, not in C++).
  const char* end = static_cast<const char*>(mnl_attr_get_payload(list)) + mnl_attr_get_payload_len(list);
  for (auto* entry = static_cast<const nlattr*>(mnl_attr_get_payload(list));
       mnl_attr_ok(entry, static_cast<int>(end - reinterpret_cast<const char*>(entry)));
       entry = mnl_attr_next(entry)) {
    if (mnl_attr_get_type(entry) != entry_type) continue;
    Table t;
    if (mnl_attr_parse_nested(entry, Collect, &t) < 0) return Malformed(what, t);
    const std::optional<uint32_t> owner = U32(t, RDMA_NLDEV_ATTR_RES_PID);
    if (!owner.has_value() || *owner != pid) continue;
    if (absl::Status s = take(t); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Missing(absl::string_view what, absl::string_view attr) {
  return absl::InvalidArgumentError(absl::StrCat("RDMA netlink ", what, " entry without ", attr));
}

}  // namespace

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

absl::Status ParseResMessage(const nlmsghdr* nlh, uint32_t pid, DeviceDump* dump) {
  if (RDMA_NL_GET_CLIENT(nlh->nlmsg_type) != RDMA_NL_NLDEV) {
    return absl::InvalidArgumentError(
        absl::StrCat("RDMA netlink: message type ", nlh->nlmsg_type, " is not an nldev reply"));
  }
  const int op = RDMA_NL_GET_OP(nlh->nlmsg_type);
  Table top;
  if (mnl_attr_parse(nlh, 0, Collect, &top) < 0) return Malformed("message", top);
  if (std::optional<uint32_t> index = U32(top, RDMA_NLDEV_ATTR_DEV_INDEX)) {
    if (dump->index.has_value() && *dump->index != *index) {
      return absl::InvalidArgumentError(absl::StrCat("RDMA netlink: a message of device index ", *index,
                                                     " in the dump of device index ", *dump->index));
    }
    dump->index = index;
  }
  if (top.at[RDMA_NLDEV_ATTR_DEV_NAME] != nullptr && dump->name.empty()) {
    dump->name = mnl_attr_get_str(top.at[RDMA_NLDEV_ATTR_DEV_NAME]);
  }
  switch (op) {
    case RDMA_NLDEV_CMD_RES_PD_GET: {
      if (top.at[RDMA_NLDEV_ATTR_RES_PD] == nullptr) return absl::OkStatus();
      return ForEachEntry(top.at[RDMA_NLDEV_ATTR_RES_PD], RDMA_NLDEV_ATTR_RES_PD_ENTRY, pid, "PD",
                          [&](const Table& t) {
                            std::optional<uint32_t> pdn = U32(t, RDMA_NLDEV_ATTR_RES_PDN);
                            if (!pdn) return Missing("PD", "pdn");
                            dump->pds.push_back(KernelPd{*pdn});
                            return absl::OkStatus();
                          });
    }
    case RDMA_NLDEV_CMD_RES_MR_GET: {
      if (top.at[RDMA_NLDEV_ATTR_RES_MR] == nullptr) return absl::OkStatus();
      return ForEachEntry(top.at[RDMA_NLDEV_ATTR_RES_MR], RDMA_NLDEV_ATTR_RES_MR_ENTRY, pid, "MR",
                          [&](const Table& t) {
                            std::optional<uint32_t> mrn = U32(t, RDMA_NLDEV_ATTR_RES_MRN);
                            if (!mrn) return Missing("MR", "mrn");
                            if (t.at[RDMA_NLDEV_ATTR_RES_MRLEN] == nullptr) return Missing("MR", "mrlen");
                            KernelMr mr;
                            mr.mrn = *mrn;
                            mr.pdn = U32(t, RDMA_NLDEV_ATTR_RES_PDN);
                            mr.length = mnl_attr_get_u64(t.at[RDMA_NLDEV_ATTR_RES_MRLEN]);
                            mr.lkey = U32(t, RDMA_NLDEV_ATTR_RES_LKEY);
                            mr.rkey = U32(t, RDMA_NLDEV_ATTR_RES_RKEY);
                            dump->mrs.push_back(mr);
                            return absl::OkStatus();
                          });
    }
    case RDMA_NLDEV_CMD_RES_QP_GET: {
      if (top.at[RDMA_NLDEV_ATTR_RES_QP] == nullptr) return absl::OkStatus();
      return ForEachEntry(top.at[RDMA_NLDEV_ATTR_RES_QP], RDMA_NLDEV_ATTR_RES_QP_ENTRY, pid, "QP",
                          [&](const Table& t) {
                            std::optional<uint32_t> qpn = U32(t, RDMA_NLDEV_ATTR_RES_LQPN);
                            if (!qpn) return Missing("QP", "lqpn");
                            dump->qps.push_back(KernelQp{*qpn, U32(t, RDMA_NLDEV_ATTR_RES_PDN)});
                            return absl::OkStatus();
                          });
    }
    case RDMA_NLDEV_CMD_RES_CM_ID_GET: {
      if (top.at[RDMA_NLDEV_ATTR_RES_CM_ID] == nullptr) return absl::OkStatus();
      return ForEachEntry(top.at[RDMA_NLDEV_ATTR_RES_CM_ID], RDMA_NLDEV_ATTR_RES_CM_ID_ENTRY, pid, "CM id",
                          [&](const Table& t) {
                            std::optional<uint32_t> idn = U32(t, RDMA_NLDEV_ATTR_RES_CM_IDN);
                            std::optional<uint32_t> ps = U32(t, RDMA_NLDEV_ATTR_RES_PS);
                            if (!idn) return Missing("CM id", "cm-idn");
                            if (!ps) return Missing("CM id", "ps");
                            KernelCmId id;
                            id.cm_idn = *idn;
                            id.qpn = U32(t, RDMA_NLDEV_ATTR_RES_LQPN);
                            id.ps = *ps;
                            id.src = EndpointAttr(t.at[RDMA_NLDEV_ATTR_RES_SRC_ADDR]);
                            id.dst = EndpointAttr(t.at[RDMA_NLDEV_ATTR_RES_DST_ADDR]);
                            dump->cm_ids.push_back(id);
                            return absl::OkStatus();
                          });
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat("RDMA netlink: nldev command ", op,
                                                     " is not a PD, MR, QP or CM id dump"));
  }
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

}  // namespace rdmad::verbs::restrack
