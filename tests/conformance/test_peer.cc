#include "tests/conformance/test_peer.h"

#include <arpa/inet.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>

namespace rdmad::testing {
namespace {

std::string GidText(const ibv_gid& g) {
  char out[40];
  const uint8_t* b = g.raw;
  std::snprintf(out, sizeof out, "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return out;
}

std::string Errno(const char* call, int err) { return std::string(call) + ": " + std::strerror(err); }

}  // namespace

int PickGidIndex(ibv_context* ctx) {
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

std::unique_ptr<TestPeer> TestPeer::Create(ibv_context* ctx, size_t buffer_bytes, std::string* error) {
  std::unique_ptr<TestPeer> p(new TestPeer());
  p->ctx_ = ctx;
  p->buffer_.assign(buffer_bytes, 0);
  p->psn_ = std::random_device{}() & 0xffffff;
  if (!(p->pd_ = ibv_alloc_pd(ctx))) return *error = Errno("ibv_alloc_pd", errno), nullptr;
  p->mr_ = ibv_reg_mr(p->pd_, p->buffer_.data(), buffer_bytes, IBV_ACCESS_LOCAL_WRITE);
  if (!p->mr_) return *error = Errno("ibv_reg_mr", errno), nullptr;
  if (!(p->cq_ = ibv_create_cq(ctx, 8, nullptr, nullptr, 0))) return *error = Errno("ibv_create_cq", errno), nullptr;
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = p->cq_;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = 4;
  init.cap.max_recv_wr = 1;
  init.cap.max_send_sge = init.cap.max_recv_sge = 1;
  if (!(p->qp_ = ibv_create_qp(p->pd_, &init))) return *error = Errno("ibv_create_qp", errno), nullptr;
  p->gid_index_ = PickGidIndex(ctx);
  if (ibv_query_gid(ctx, 1, p->gid_index_, &p->gid_) != 0) return *error = Errno("ibv_query_gid", errno), nullptr;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = 0;
  if (int r = ibv_modify_qp(p->qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
    return *error = Errno("ibv_modify_qp(INIT)", r), nullptr;
  }
  return p;
}

TestPeer::~TestPeer() {
  if (qp_) ibv_destroy_qp(qp_);
  if (cq_) ibv_destroy_cq(cq_);
  if (mr_) ibv_dereg_mr(mr_);
  if (pd_) ibv_dealloc_pd(pd_);
}

v1::QpEndpoint TestPeer::local() const {
  v1::QpEndpoint e;
  e.set_qpn(qp_->qp_num);
  e.set_psn(psn_);
  e.set_gid(GidText(gid_));
  return e;
}

std::string TestPeer::Connect(const v1::QpEndpoint& remote) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = remote.qpn();
  a.rq_psn = remote.psn();
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = 1;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid_index_);
  a.ah_attr.grh.hop_limit = 64;
  if (inet_pton(AF_INET6, remote.gid().c_str(), a.ah_attr.grh.dgid.raw) != 1) return "bad remote gid " + remote.gid();
  if (int r = ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
    return Errno("ibv_modify_qp(RTR)", r);
  }
  ibv_qp_attr s{};
  s.qp_state = IBV_QPS_RTS;
  s.timeout = 14;
  s.retry_cnt = 7;
  s.rnr_retry = 7;
  s.sq_psn = psn_;
  s.max_rd_atomic = 1;
  if (int r = ibv_modify_qp(qp_, &s, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                       IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)) {
    return Errno("ibv_modify_qp(RTS)", r);
  }
  return "";
}

ibv_wc_status TestPeer::Read(uint64_t remote_addr, uint32_t rkey, uint32_t length, std::string* error) {
  std::memset(buffer_.data(), 0, buffer_.size());
  ibv_sge sge{reinterpret_cast<uintptr_t>(buffer_.data()), length, mr_->lkey};
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = next_wr_++;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = remote_addr;
  wr.wr.rdma.rkey = rkey;
  if (int r = ibv_post_send(qp_, &wr, &bad)) {
    *error = Errno("ibv_post_send(RDMA_READ)", r);
    return IBV_WC_GENERAL_ERR;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    ibv_wc wc{};
    int n = ibv_poll_cq(cq_, 1, &wc);
    if (n < 0) break;
    if (n == 1 && wc.wr_id == wr.wr_id) return wc.status;
  }
  *error = "no completion for the RDMA read within 10 s";
  return IBV_WC_GENERAL_ERR;
}

}  // namespace rdmad::testing
