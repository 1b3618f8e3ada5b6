// DirectVerbs: the baseline of control_bench, the verbs calls rdmad's control-plane RPCs wrap, made directly on
// libibverbs in the benchmark's own process (no gRPC, no registry, no dispatcher). It owns a device context, a
// PD, one CQ and a loopback pair of RC QPs on port 1 (QP a connected to QP b on the same device), on which the
// window binds and invalidations are posted; every completion is busy-polled on the calling thread.
// Each timed call returns its duration in microseconds, or a negative value with *error set.
// Threads: one thread uses a DirectVerbs; it holds no lock.
#ifndef RDMAD_TESTS_BENCH_DIRECT_VERBS_H_
#define RDMAD_TESTS_BENCH_DIRECT_VERBS_H_

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace rdmad::bench {

class DirectVerbs {
 public:
  // Opens `device` (e.g. "rxe0") and connects the loopback QP pair. nullptr with *error on failure.
  static std::unique_ptr<DirectVerbs> Open(const std::string& device, std::string* error);
  ~DirectVerbs();
  DirectVerbs(const DirectVerbs&) = delete;
  DirectVerbs& operator=(const DirectVerbs&) = delete;

  // What rdmad's RegisterMr of anonymous memory does: mmap(MAP_PRIVATE|MAP_ANONYMOUS) of `size` bytes (not
  // touched: ibv_reg_mr pins, which faults every page in), then ibv_reg_mr with `access`. *mr gets the region.
  double RegMr(size_t size, int access, ibv_mr** mr, std::string* error);
  // What rdmad's DeregisterMr of it does: ibv_dereg_mr, then munmap.
  double DeregMr(ibv_mr* mr, std::string* error);

  // The window operations, each with its completion polled. `mw` was allocated with AllocMw (untimed).
  ibv_mw* AllocMw(ibv_mw_type type, std::string* error);
  // Type 1: ibv_bind_mw on QP a. Type 2: IBV_WR_BIND_MW (rkey from ibv_inc_rkey) on QP a.
  double Bind(ibv_mw* mw, ibv_mr* mr, uint64_t addr, uint64_t length, std::string* error);
  // Type 1: a zero-length ibv_bind_mw. Type 2: IBV_WR_LOCAL_INV on QP a.
  double Invalidate(ibv_mw* mw, ibv_mr* mr, std::string* error);

  // A third RC QP (c, untimed) as the peer of a QP of rdmad's: its endpoint, then Connect to rdmad's one.
  // ConnectPeer returns an empty string on success.
  std::string PeerGid() const;  // "0000:...:ffff:0a00:020f", as rdmad's QpEndpoint.gid
  uint32_t PeerQpn() const { return c_->qp_num; }
  std::string ConnectPeer(uint32_t remote_qpn, uint32_t remote_psn, const std::string& remote_gid);

  ibv_context* context() const { return ctx_; }
  ibv_pd* pd() const { return pd_; }

 private:
  DirectVerbs() = default;
  // Posts `wr` signaled on QP a and polls its completion. Empty string on success.
  std::string PostAndWait(ibv_send_wr& wr, const char* what);
  std::string Wait(uint64_t wr_id, const char* what);

  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* a_ = nullptr;
  ibv_qp* b_ = nullptr;
  ibv_qp* c_ = nullptr;
  ibv_gid gid_{};
  int gid_index_ = 0;
  uint64_t next_wr_ = 1;
};

}  // namespace rdmad::bench

#endif  // RDMAD_TESTS_BENCH_DIRECT_VERBS_H_
