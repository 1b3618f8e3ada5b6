#include "server/verbs/mw_probe.h"

#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/common/log.h"
#include "server/common/status.h"
#include "server/verbs/gid.h"

namespace rdmad::verbs {
namespace {

constexpr int kPollMillis = 5000;  // per completion; TCG guests are slow, real devices answer in microseconds

std::string Err(const char* call, int err) { return absl::StrCat(call, ": errno ", err, " (", ErrnoName(err), ")"); }

// What the probe made, released in reverse order of creation: the window (bound to `target`) first, then
// the QP before its CQ, the MRs before their memory, the PD last.
struct Made {
  std::string device;
  ibv_pd* pd = nullptr;
  void* buf = MAP_FAILED;
  size_t buf_len = 0;
  ibv_mr* target = nullptr;  // pages 0 and 1: the window's MR
  ibv_mr* local = nullptr;   // page 2: where the reads land
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_mw* mw = nullptr;
  ~Made() {
    auto check = [this](const char* call, int ret) {
      if (ret != 0) RDMAD_LOG_WARN("%s: window-bounds probe: %s", device.c_str(), Err(call, ret).c_str());
    };
    if (mw) check("ibv_dealloc_mw", ibv_dealloc_mw(mw));
    if (qp) check("ibv_destroy_qp", ibv_destroy_qp(qp));
    if (cq) check("ibv_destroy_cq", ibv_destroy_cq(cq));
    if (local) check("ibv_dereg_mr", ibv_dereg_mr(local));
    if (target) check("ibv_dereg_mr", ibv_dereg_mr(target));
    if (buf != MAP_FAILED) munmap(buf, buf_len);
    if (pd) check("ibv_dealloc_pd", ibv_dealloc_pd(pd));
  }
};

// Waits for one completion on `cq`. Empty on success (with *wc filled), else why there is none.
std::string PollOne(ibv_cq* cq, ibv_wc* wc) {
  timespec start{}, now{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    int n = ibv_poll_cq(cq, 1, wc);
    if (n < 0) return absl::StrCat("ibv_poll_cq returned ", n);
    if (n == 1) return "";
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 > kPollMillis) {
      return absl::StrCat("no completion within ", kPollMillis, " ms");
    }
    usleep(100);
  }
}

ibv_mtu MtuEnum(uint32_t bytes) {
  switch (bytes) {
    case 256: return IBV_MTU_256;
    case 512: return IBV_MTU_512;
    case 2048: return IBV_MTU_2048;
    case 4096: return IBV_MTU_4096;
    default: return IBV_MTU_1024;
  }
}

// The GID the QP talks to itself through: an IPv4-mapped RoCEv2 one if there is one (as the conformance
// peers pick), else the first RoCEv2, else the first.
const fabric::GidEntry* PickGid(const fabric::PortInfo& port) {
  const fabric::GidEntry* first_v2 = nullptr;
  for (const auto& g : port.gids) {
    if (g.type != "RoCEv2") continue;
    if (absl::StartsWith(g.gid, "0000:0000:0000:0000:0000:ffff:")) return &g;
    if (first_v2 == nullptr) first_v2 = &g;
  }
  if (first_v2 != nullptr) return first_v2;
  return port.gids.empty() ? nullptr : &port.gids.front();
}

// RESET -> INIT -> RTR -> RTS, with the QP itself as the remote. Empty on success.
std::string ConnectToItself(ibv_qp* qp, const fabric::PortInfo& port) {
  ibv_qp_attr init{};
  init.qp_state = IBV_QPS_INIT;
  init.port_num = static_cast<uint8_t>(port.number);
  init.qp_access_flags = IBV_ACCESS_REMOTE_READ;
  if (int r = ibv_modify_qp(qp, &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
    return Err("ibv_modify_qp(INIT)", r);
  }
  ibv_qp_attr rtr{};
  rtr.qp_state = IBV_QPS_RTR;
  rtr.path_mtu = MtuEnum(port.active_mtu);
  rtr.dest_qp_num = qp->qp_num;
  rtr.rq_psn = 0;
  rtr.max_dest_rd_atomic = 1;
  rtr.min_rnr_timer = 12;
  rtr.ah_attr.port_num = static_cast<uint8_t>(port.number);
  rtr.ah_attr.dlid = port.lid;
  if (port.link_layer == "Ethernet" || !port.gids.empty()) {
    const fabric::GidEntry* g = PickGid(port);
    if (g == nullptr) return "the port has no GID to loop back through";
    absl::StatusOr<ibv_gid> gid = ParseGid(g->gid);
    if (!gid.ok()) return absl::StrCat("GID ", g->gid, ": ", gid.status().message());
    rtr.ah_attr.is_global = 1;
    rtr.ah_attr.grh.dgid = *gid;
    rtr.ah_attr.grh.sgid_index = static_cast<uint8_t>(g->index);
    rtr.ah_attr.grh.hop_limit = 64;
  }
  if (int r = ibv_modify_qp(qp, &rtr,
                            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
    return Err("ibv_modify_qp(RTR)", r);
  }
  ibv_qp_attr rts{};
  rts.qp_state = IBV_QPS_RTS;
  rts.timeout = 14;
  rts.retry_cnt = 7;
  rts.rnr_retry = 7;
  rts.sq_psn = 0;
  rts.max_rd_atomic = 1;
  if (int r = ibv_modify_qp(qp, &rts,
                            IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                IBV_QP_MAX_QP_RD_ATOMIC)) {
    return Err("ibv_modify_qp(RTS)", r);
  }
  return "";
}

// One signaled RDMA read of 64 bytes at `remote` through `rkey` into `m.local`. Empty on a posted read
// whose completion arrived (*status: its status).
std::string Read(Made& m, uint64_t remote, uint32_t rkey, uint64_t wr_id, ibv_wc_status* status) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uint64_t>(m.local->addr);
  sge.length = 64;
  sge.lkey = m.local->lkey;
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = wr_id;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.wr.rdma.remote_addr = remote;
  wr.wr.rdma.rkey = rkey;
  if (int r = ibv_post_send(m.qp, &wr, &bad)) return Err("ibv_post_send(RDMA_READ)", r);
  ibv_wc wc{};
  if (std::string e = PollOne(m.cq, &wc); !e.empty()) return absl::StrCat("RDMA read: ", e);
  *status = wc.status;
  return "";
}

std::string Skipped(const std::string& why) { return absl::StrCat("probe could not run (", why, ")"); }

}  // namespace

MwBoundsProbe ProbeMwBounds(ibv_context* context, const fabric::DeviceInfo& info) {
  MwBoundsProbe out;  // enforced = false: the safe answer until the device is seen refusing
  auto skip = [&out](const std::string& why) {
    out.what = Skipped(why);
    return out;
  };
  if (!info.mw_type1) return skip("no type 1 memory windows");
  const fabric::PortInfo* port = nullptr;
  for (const auto& p : info.ports) {
    if (p.state == "ACTIVE") {
      port = &p;
      break;
    }
  }
  if (port == nullptr) return skip("no ACTIVE port to loop back through");
  Made m;
  m.device = info.name;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (!(m.pd = ibv_alloc_pd(context))) return skip(Err("ibv_alloc_pd", errno));
  m.buf_len = 3 * page;
  m.buf = mmap(nullptr, m.buf_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m.buf == MAP_FAILED) return skip(Err("mmap", errno));
  std::memset(m.buf, 0x5a, m.buf_len);
  char* base = static_cast<char*>(m.buf);
  m.target = ibv_reg_mr(m.pd, base, 2 * page, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND);
  if (m.target == nullptr) return skip(Err("ibv_reg_mr", errno));
  m.local = ibv_reg_mr(m.pd, base + 2 * page, page, IBV_ACCESS_LOCAL_WRITE);
  if (m.local == nullptr) return skip(Err("ibv_reg_mr", errno));
  if (!(m.cq = ibv_create_cq(context, 4, nullptr, nullptr, 0))) return skip(Err("ibv_create_cq", errno));
  ibv_qp_init_attr qa{};
  qa.send_cq = qa.recv_cq = m.cq;
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = 2;
  qa.cap.max_recv_wr = 1;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  if (!(m.qp = ibv_create_qp(m.pd, &qa))) return skip(Err("ibv_create_qp", errno));
  if (std::string e = ConnectToItself(m.qp, *port); !e.empty()) return skip(e);
  if (!(m.mw = ibv_alloc_mw(m.pd, IBV_MW_TYPE_1))) return skip(Err("ibv_alloc_mw", errno));

  ibv_mw_bind bind{};
  bind.wr_id = 1;
  bind.send_flags = IBV_SEND_SIGNALED;
  bind.bind_info.mr = m.target;
  bind.bind_info.addr = reinterpret_cast<uint64_t>(base);
  bind.bind_info.length = page;  // the first page only
  bind.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ;
  if (int r = ibv_bind_mw(m.qp, m.mw, &bind)) return skip(Err("ibv_bind_mw", r));
  ibv_wc wc{};
  if (std::string e = PollOne(m.cq, &wc); !e.empty()) return skip("bind: " + e);
  if (wc.status != IBV_WC_SUCCESS) {
    return skip(absl::StrCat("bind completion: ", ibv_wc_status_str(wc.status)));
  }

  // Inside the window first: proves the loopback and the window work, so that a refusal below means bounds.
  ibv_wc_status inside = IBV_WC_SUCCESS, past = IBV_WC_SUCCESS;
  if (std::string e = Read(m, bind.bind_info.addr, m.mw->rkey, 2, &inside); !e.empty()) return skip(e);
  if (inside != IBV_WC_SUCCESS) {
    return skip(absl::StrCat("read inside the window: ", ibv_wc_status_str(inside)));
  }
  if (std::string e = Read(m, bind.bind_info.addr + page, m.mw->rkey, 3, &past); !e.empty()) {
    return skip(e);
  }
  if (past == IBV_WC_SUCCESS) {
    out.what = "a read past the window (inside its MR) succeeded: window bounds not enforced";
  } else if (past == IBV_WC_REM_ACCESS_ERR) {
    out.enforced = true;
    out.what = "a read past the window (inside its MR) was refused (remote access error): window bounds enforced";
  } else {
    out.what = Skipped(absl::StrCat("read past the window: ", ibv_wc_status_str(past), ", not an access error"));
  }
  return out;  // ~Made releases everything
}

}  // namespace rdmad::verbs
