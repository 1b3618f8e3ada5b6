#include "server/verbs/restrack.h"

#include <libmnl/libmnl.h>
#include <netinet/in.h>
#include <rdma/rdma_netlink.h>

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

// Each entry of the nest `list` (of entry type `entry_type`) that `owners` keeps: calls take(entry table).
template <typename Take>
absl::Status ForEachEntry(const nlattr* list, int entry_type, const Owners& owners, absl::string_view what,
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
    if (t.at[RDMA_NLDEV_ATTR_RES_KERN_NAME] != nullptr) continue;  // the kernel's own
    if (owner.has_value() ? owners.tids.count(*owner) == 0 : !owners.orphans) continue;
    if (absl::Status s = take(t); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Missing(absl::string_view what, absl::string_view attr) {
  return absl::InvalidArgumentError(absl::StrCat("RDMA netlink ", what, " entry without ", attr));
}

}  // namespace

absl::Status ParseResMessage(const nlmsghdr* nlh, uint32_t pid, DeviceDump* dump) {
  return ParseResMessage(nlh, Owners{{pid}, false}, dump);
}

absl::Status ParseResMessage(const nlmsghdr* nlh, const Owners& owners, DeviceDump* dump) {
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
      return ForEachEntry(top.at[RDMA_NLDEV_ATTR_RES_PD], RDMA_NLDEV_ATTR_RES_PD_ENTRY, owners, "PD",
                          [&](const Table& t) {
                            std::optional<uint32_t> pdn = U32(t, RDMA_NLDEV_ATTR_RES_PDN);
                            if (!pdn) return Missing("PD", "pdn");
                            dump->pds.push_back(KernelPd{*pdn});
                            return absl::OkStatus();
                          });
    }
    case RDMA_NLDEV_CMD_RES_MR_GET: {
      if (top.at[RDMA_NLDEV_ATTR_RES_MR] == nullptr) return absl::OkStatus();
      return ForEachEntry(top.at[RDMA_NLDEV_ATTR_RES_MR], RDMA_NLDEV_ATTR_RES_MR_ENTRY, owners, "MR",
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
      return ForEachEntry(top.at[RDMA_NLDEV_ATTR_RES_QP], RDMA_NLDEV_ATTR_RES_QP_ENTRY, owners, "QP",
                          [&](const Table& t) {
                            std::optional<uint32_t> qpn = U32(t, RDMA_NLDEV_ATTR_RES_LQPN);
                            if (!qpn) return Missing("QP", "lqpn");
                            dump->qps.push_back(KernelQp{*qpn, U32(t, RDMA_NLDEV_ATTR_RES_PDN)});
                            return absl::OkStatus();
                          });
    }
    case RDMA_NLDEV_CMD_RES_CM_ID_GET: {
      if (top.at[RDMA_NLDEV_ATTR_RES_CM_ID] == nullptr) return absl::OkStatus();
      return ForEachEntry(top.at[RDMA_NLDEV_ATTR_RES_CM_ID], RDMA_NLDEV_ATTR_RES_CM_ID_ENTRY, owners, "CM id",
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

}  // namespace rdmad::verbs::restrack
