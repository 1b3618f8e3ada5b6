#include "server/fabric/hw_counters.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace rdmad::fabric {

// Which counters count remote accesses refused by this NIC. Names are the drivers' own (the file names in
// sysfs); "source" says where each name and its meaning were taken from. Checked against Linux 6.1 (the
// Debian 12 kernel the guest runs): the names of mlx5, mlx4, hfi1 and rxe are in the strings of that
// kernel's modules; bnxt_re is not built there and comes from the upstream source.
//
// Drivers with no counter of refused remote accesses at all, so nothing of theirs is flagged:
//   rxe     drivers/infiniband/sw/rxe/rxe_hw_counters.c: sent_pkts, rcvd_pkts, duplicate_request,
//           out_of_seq_request, rcvd_rnr_err, send_rnr_err, rcvd_seq_err, ack_deferred, retry_exceeded_err,
//           retry_rnr_exceeded_err, completer_retry_err, send_err, link_downed, rdma_sends, rdma_recvs.
//           The responder's RESPST_ERR_RKEY_VIOLATION (rxe_resp.c) sends its NAK without counting it;
//           measured on rxe0: docs/security.md#keys.
//   irdma   drivers/infiniband/hw/irdma/verbs.c (irdma_hw_stat_descs): IP/TCP/UDP and RDMA operation
//           counts (ip4InDiscards, tcpRetransSegs, iwInRdmaReads, iwRdmaBnd, cnpHandled, RxECNMrkd, ...).
//   efa     drivers/infiniband/hw/efa/efa_verbs.c (EFA_DEFINE_PORT_STATS / EFA_DEFINE_DEVICE_STATS):
//           traffic and admin-command counters; rdma_read_wr_err / rdma_write_wr_err count this host's
//           failed work requests, whatever the cause.
//   hfi1    drivers/infiniband/hw/hfi1/chip.c (port_cntrs): the responder's remote access NAK (rc.c,
//           nack_acc) is not counted; only the requester's OtherNak below.
const HwCounterKind kHwCounterTable[] = {
    // --- mlx5 (ConnectX-4 and later): drivers/infiniband/hw/mlx5/counters.c, extended_err_cnts (Q counters,
    // present where the firmware has enhanced_error_q_counters). Meanings: NVIDIA, "Understanding mlx5
    // Linux Counters and Status Parameters".
    {"resp_remote_access_errors", "mlx5", true,
     "responder detected a remote access error: an inbound request with a bad rkey, range or rights",
     "drivers/infiniband/hw/mlx5/counters.c (extended_err_cnts)"},
    {"req_remote_access_errors", "mlx5", false,
     "requester received a remote access error NAK: this host's request was refused by the peer",
     "drivers/infiniband/hw/mlx5/counters.c (extended_err_cnts)"},
    {"req_remote_invalid_request", "mlx5", false,
     "requester received a remote invalid request NAK (opcode or length, not a key)",
     "drivers/infiniband/hw/mlx5/counters.c (extended_err_cnts)"},
    // --- mlx4 (ConnectX-3): device-level diagnostic counters, drivers/infiniband/hw/mlx4/main.c (diag_basic).
    // Meanings: Mellanox adapter diagnostics counters (WinOF manual, "Proprietary Mellanox Adapter
    // Diagnostics Counters": responder remote access errors = "received RDMA request with wrong rkey").
    {"rq_num_rae", "mlx4", true, "responder remote access errors: an inbound RDMA request with a wrong rkey",
     "drivers/infiniband/hw/mlx4/main.c (diag_basic)"},
    {"sq_num_rae", "mlx4", false, "requester remote access errors: a NAK from the peer for a wrong rkey",
     "drivers/infiniband/hw/mlx4/main.c (diag_basic)"},
    // --- bnxt_re (Broadcom NetXtreme-E): drivers/infiniband/hw/bnxt_re/hw_counters.c (bnxt_re_stat_descs),
    // the responder ("res_") error counts of the firmware's CREQ_QUERY_ROCE_STATS (roce_hsi.h); rx: on the
    // responder's receive path (inbound WRITE/atomic data), tx: on its transmit path (READ responses).
    {"res_rx_invalid_rkey", "bnxt_re", true, "responder: an inbound request with an invalid rkey (rx path)",
     "drivers/infiniband/hw/bnxt_re/hw_counters.c"},
    {"res_rx_domain_err", "bnxt_re", true, "responder: the rkey belongs to another PD than the QP's (rx path)",
     "drivers/infiniband/hw/bnxt_re/hw_counters.c"},
    {"res_rx_no_perm", "bnxt_re", true, "responder: the rkey lacks the access asked for (rx path)",
     "drivers/infiniband/hw/bnxt_re/hw_counters.c"},
    {"res_rx_range_err", "bnxt_re", true, "responder: the request is outside the key's range (rx path)",
     "drivers/infiniband/hw/bnxt_re/hw_counters.c"},
    {"res_tx_invalid_rkey", "bnxt_re", true, "responder: a request with an invalid rkey (tx path: reads)",
     "drivers/infiniband/hw/bnxt_re/hw_counters.c"},
    {"res_tx_domain_err", "bnxt_re", true, "responder: the rkey belongs to another PD (tx path: reads)",
     "drivers/infiniband/hw/bnxt_re/hw_counters.c"},
    {"res_tx_no_perm", "bnxt_re", true, "responder: the rkey lacks the access asked for (tx path: reads)",
     "drivers/infiniband/hw/bnxt_re/hw_counters.c"},
    {"res_tx_range_err", "bnxt_re", true, "responder: the request is outside the key's range (tx path: reads)",
     "drivers/infiniband/hw/bnxt_re/hw_counters.c"},
    {"res_invalid_dup_rkey", "bnxt_re", true, "responder: a duplicate (retried) request with an invalid rkey",
     "drivers/infiniband/hw/bnxt_re/hw_counters.c"},
    {"remote_access_err", "bnxt_re", false, "requester: the peer refused this host's request (access NAK)",
     "drivers/infiniband/hw/bnxt_re/hw_counters.c"},
    {"remote_invalid_req_err", "bnxt_re", false, "requester: the peer answered invalid request",
     "drivers/infiniband/hw/bnxt_re/hw_counters.c"},
    // --- hfi1 (Omni-Path): drivers/infiniband/hw/hfi1/chip.c (port_cntrs), counted in rc.c do_rc_ack.
    {"OtherNak", "hfi1", false,
     "requester: NAKs received other than RNR and sequence errors (remote access and invalid request)",
     "drivers/infiniband/hw/hfi1/chip.c (port_cntrs), rc.c (n_other_naks)"},
};
const size_t kHwCounterTableSize = sizeof kHwCounterTable / sizeof kHwCounterTable[0];

const HwCounterKind* FindHwCounterKind(absl::string_view name) {
  for (size_t i = 0; i < kHwCounterTableSize; ++i) {
    if (name == kHwCounterTable[i].name) return &kHwCounterTable[i];
  }
  return nullptr;
}

bool IsRemoteAccessErrorCounter(absl::string_view name) {
  const HwCounterKind* kind = FindHwCounterKind(name);
  return kind != nullptr && kind->remote_access_error;
}

namespace {

// Entry names of a directory (no "." entries); empty if it cannot be opened.
std::vector<std::string> ListDir(const std::string& path) {
  std::vector<std::string> names;
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) return names;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') names.emplace_back(e->d_name);
  }
  closedir(dir);
  return names;
}

bool ReadUint(const std::string& path, uint64_t* value) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[64];
  ssize_t n;
  do {
    n = read(fd, buf, sizeof buf - 1);
  } while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0) return false;
  absl::string_view text = absl::StripAsciiWhitespace(absl::string_view(buf, static_cast<size_t>(n)));
  if (text.empty() || !absl::ascii_isdigit(static_cast<unsigned char>(text[0]))) return false;
  return absl::SimpleAtoi(text, value);
}

void ReadDir(const std::string& dir, uint32_t port, std::vector<HwCounterValue>* out) {
  std::vector<std::string> names = ListDir(dir);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    if (name == "lifespan") continue;  // the refresh period, not a counter
    HwCounterValue c;
    if (!ReadUint(absl::StrCat(dir, "/", name), &c.value)) continue;
    c.port = port;
    c.name = name;
    c.remote_access_error = IsRemoteAccessErrorCounter(name);
    out->push_back(std::move(c));
  }
}

}  // namespace

std::vector<HwCounterValue> ReadSysfsHwCounters(const std::string& sysfs_root, const std::string& device) {
  std::vector<HwCounterValue> out;
  const std::string base = absl::StrCat(sysfs_root, "/", device);
  ReadDir(base + "/hw_counters", 0, &out);
  std::vector<uint32_t> ports;
  for (const std::string& p : ListDir(base + "/ports")) {
    uint32_t n = 0;
    if (absl::SimpleAtoi(p, &n) && n > 0 && absl::ascii_isdigit(static_cast<unsigned char>(p[0]))) {
      ports.push_back(n);
    }
  }
  std::sort(ports.begin(), ports.end());
  for (uint32_t p : ports) ReadDir(absl::StrCat(base, "/ports/", p, "/hw_counters"), p, &out);
  return out;
}

}  // namespace rdmad::fabric
