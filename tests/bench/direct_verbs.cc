#include "tests/bench/direct_verbs.h"

#include <arpa/inet.h>
#include <sys/mman.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace rdmad::bench {
namespace {

using Clock = std::chrono::steady_clock;

double UsSince(Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count(); }

std::string Errno(const char* call, int err) { return std::string(call) + ": " + std::strerror(err); }

// The port's first IPv4-mapped RoCE v2 GID, as rdmad picks by default (any RoCE v2 one otherwise).
int GidIndex(ibv_context* ctx) {
  ibv_port_attr pa{};
  if (ibv_query_port(ctx, 1, &pa) != 0) return 0;
  int first_v2 = -1;
  for (int i = 0; i < pa.gid_tbl_len; ++i) {
    ibv_gid_entry e{};
    if (ibv_query_gid_ex(ctx, 1, i, &e, 0) != 0 || e.gid_type != IBV_GID_TYPE_ROCE_V2) continue;
    static const uint8_t kV4Mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(e.gid.raw, kV4Mapped, 12) == 0) return i;
    if (first_v2 < 0) first_v2 = i;
  }
  return first_v2 < 0 ? 0 : first_v2;
}

// INIT -> RTR -> RTS of `qp` towards `remote_qpn` at `gid` (loopback: this device's own GID).
std::string Connect(ibv_qp* qp, uint32_t remote_qpn, uint32_t remote_psn, const ibv_gid& gid, int gid_index) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
  if (int r = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
    return Errno("ibv_modify_qp(INIT)", r);
  }
  ibv_qp_attr r{};
  r.qp_state = IBV_QPS_RTR;
  r.path_mtu = IBV_MTU_1024;
  r.dest_qp_num = remote_qpn;
  r.rq_psn = remote_psn;
  r.max_dest_rd_atomic = 1;
  r.min_rnr_timer = 12;
  r.ah_attr.port_num = 1;
  r.ah_attr.is_global = 1;
  r.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid_index);
  r.ah_attr.grh.hop_limit = 64;
  r.ah_attr.grh.dgid = gid;
  if (int e = ibv_modify_qp(qp, &r, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
    return Errno("ibv_modify_qp(RTR)", e);
  }
  ibv_qp_attr s{};
  s.qp_state = IBV_QPS_RTS;
  s.timeout = 14;
  s.retry_cnt = 7;
  s.rnr_retry = 7;
  s.sq_psn = 0;
  s.max_rd_atomic = 1;
  if (int e = ibv_modify_qp(qp, &s, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                        IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)) {
    return Errno("ibv_modify_qp(RTS)", e);
  }
  return "";
}

}  // namespace

std::unique_ptr<DirectVerbs> DirectVerbs::Open(const std::string& device, std::string* error) {
  std::unique_ptr<DirectVerbs> d(new DirectVerbs());
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  for (int i = 0; list && i < n && !d->ctx_; ++i) {
    if (device == ibv_get_device_name(list[i])) d->ctx_ = ibv_open_device(list[i]);
  }
  if (list) ibv_free_device_list(list);
  if (!d->ctx_) return *error = "cannot open device " + device, nullptr;
  if (!(d->pd_ = ibv_alloc_pd(d->ctx_))) return *error = Errno("ibv_alloc_pd", errno), nullptr;
  d->cq_ = ibv_create_cq(d->ctx_, 64, nullptr, nullptr, 0);
  if (!d->cq_) return *error = Errno("ibv_create_cq", errno), nullptr;
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = d->cq_;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = 16;
  init.cap.max_recv_wr = 1;
  init.cap.max_send_sge = init.cap.max_recv_sge = 1;
  if (!(d->a_ = ibv_create_qp(d->pd_, &init))) return *error = Errno("ibv_create_qp", errno), nullptr;
  if (!(d->b_ = ibv_create_qp(d->pd_, &init))) return *error = Errno("ibv_create_qp", errno), nullptr;
  if (!(d->c_ = ibv_create_qp(d->pd_, &init))) return *error = Errno("ibv_create_qp", errno), nullptr;
  d->gid_index_ = GidIndex(d->ctx_);
  if (ibv_query_gid(d->ctx_, 1, d->gid_index_, &d->gid_) != 0) return *error = Errno("ibv_query_gid", errno), nullptr;
  if (std::string e = Connect(d->a_, d->b_->qp_num, 0, d->gid_, d->gid_index_); !e.empty()) return *error = e, nullptr;
  if (std::string e = Connect(d->b_, d->a_->qp_num, 0, d->gid_, d->gid_index_); !e.empty()) return *error = e, nullptr;
  return d;
}

std::string DirectVerbs::PeerGid() const {
  char out[INET6_ADDRSTRLEN];
  return inet_ntop(AF_INET6, gid_.raw, out, sizeof out) ? out : "";
}

std::string DirectVerbs::ConnectPeer(uint32_t remote_qpn, uint32_t remote_psn, const std::string& remote_gid) {
  ibv_gid gid{};
  if (inet_pton(AF_INET6, remote_gid.c_str(), gid.raw) != 1) return "bad remote gid " + remote_gid;
  return Connect(c_, remote_qpn, remote_psn, gid, gid_index_);
}

DirectVerbs::~DirectVerbs() {
  if (c_) ibv_destroy_qp(c_);
  if (b_) ibv_destroy_qp(b_);
  if (a_) ibv_destroy_qp(a_);
  if (cq_) ibv_destroy_cq(cq_);
  if (pd_) ibv_dealloc_pd(pd_);
  if (ctx_) ibv_close_device(ctx_);
}

double DirectVerbs::RegMr(size_t size, int access, ibv_mr** mr, std::string* error) {
  const auto t = Clock::now();
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return *error = Errno("mmap", errno), -1;
  *mr = ibv_reg_mr(pd_, p, size, access);
  if (*mr == nullptr) {
    *error = Errno("ibv_reg_mr", errno);
    munmap(p, size);
    return -1;
  }
  return UsSince(t);
}

double DirectVerbs::DeregMr(ibv_mr* mr, std::string* error) {
  const auto t = Clock::now();
  void* addr = mr->addr;
  const size_t length = mr->length;
  if (int r = ibv_dereg_mr(mr)) return *error = Errno("ibv_dereg_mr", r), -1;
  if (munmap(addr, length) != 0) return *error = Errno("munmap", errno), -1;
  return UsSince(t);
}

ibv_mw* DirectVerbs::AllocMw(ibv_mw_type type, std::string* error) {
  ibv_mw* mw = ibv_alloc_mw(pd_, type);
  if (mw == nullptr) *error = Errno("ibv_alloc_mw", errno);
  return mw;
}

std::string DirectVerbs::Wait(uint64_t wr_id, const char* what) {
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < deadline) {
    ibv_wc wc{};
    const int n = ibv_poll_cq(cq_, 1, &wc);
    if (n < 0) return std::string("ibv_poll_cq failed after ") + what;
    if (n == 1 && wc.wr_id == wr_id) {
      if (wc.status != IBV_WC_SUCCESS) return std::string(what) + ": completion " + ibv_wc_status_str(wc.status);
      return "";
    }
  }
  return std::string(what) + ": no completion within 30 s";
}

std::string DirectVerbs::PostAndWait(ibv_send_wr& wr, const char* what) {
  wr.wr_id = next_wr_++;
  wr.send_flags |= IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  if (int r = ibv_post_send(a_, &wr, &bad)) return Errno(what, r);
  return Wait(wr.wr_id, what);
}

double DirectVerbs::Bind(ibv_mw* mw, ibv_mr* mr, uint64_t addr, uint64_t length, std::string* error) {
  ibv_mw_bind_info info{};
  info.mr = mr;
  info.addr = addr;
  info.length = length;
  info.mw_access_flags = length ? IBV_ACCESS_REMOTE_READ : 0;
  const auto t = Clock::now();
  if (mw->type == IBV_MW_TYPE_1) {
    ibv_mw_bind bind{};
    bind.wr_id = next_wr_++;
    bind.send_flags = IBV_SEND_SIGNALED;
    bind.bind_info = info;
    if (int r = ibv_bind_mw(a_, mw, &bind)) return *error = Errno("ibv_bind_mw", r), -1;
    if (std::string e = Wait(bind.wr_id, "ibv_bind_mw"); !e.empty()) return *error = e, -1;
    return UsSince(t);
  }
  const uint32_t rkey = ibv_inc_rkey(mw->rkey);
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_BIND_MW;
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = rkey;
  wr.bind_mw.bind_info = info;
  if (std::string e = PostAndWait(wr, "ibv_post_send(BIND_MW)"); !e.empty()) return *error = e, -1;
  mw->rkey = rkey;  // the provider leaves a type 2 window's rkey to the caller
  return UsSince(t);
}

double DirectVerbs::Invalidate(ibv_mw* mw, ibv_mr* mr, std::string* error) {
  if (mw->type == IBV_MW_TYPE_1) return Bind(mw, mr, reinterpret_cast<uint64_t>(mr->addr), 0, error);
  const auto t = Clock::now();
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_LOCAL_INV;
  wr.invalidate_rkey = mw->rkey;
  if (std::string e = PostAndWait(wr, "ibv_post_send(LOCAL_INV)"); !e.empty()) return *error = e, -1;
  return UsSince(t);
}

}  // namespace rdmad::bench
