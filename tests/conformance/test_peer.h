// TestPeer: a small test-only RC QP that plays the remote side of RDMA reads against rdmad's memory.
// Written directly on libibverbs, independently of server/verbs, so the suite checks rdmad against code
// that does not share its mistakes. Owns (and releases in reverse order) its QP, CQ, MR, buffer and PD.
// Thread-safety: single-threaded use by one test.
#ifndef RDMAD_TESTS_CONFORMANCE_TEST_PEER_H_
#define RDMAD_TESTS_CONFORMANCE_TEST_PEER_H_

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rdmad/v1/rdmad.pb.h"

namespace rdmad::testing {

class TestPeer {
 public:
  // ctx: an open device context (kept open by the caller for the whole test binary).
  static std::unique_ptr<TestPeer> Create(ibv_context* ctx, size_t buffer_bytes, std::string* error);
  ~TestPeer();

  v1::QpEndpoint local() const;
  // RESET -> INIT -> RTR -> RTS against rdmad's QP endpoint. Empty string on success.
  std::string Connect(const v1::QpEndpoint& remote);
  // One RDMA read of `length` bytes from (remote_addr, rkey) into the buffer at 0; waits for the completion
  // and returns its status (IBV_WC_SUCCESS, IBV_WC_REM_ACCESS_ERR, ...). Returns IBV_WC_GENERAL_ERR and sets
  // *error if posting failed or no completion came within 10 s.
  ibv_wc_status Read(uint64_t remote_addr, uint32_t rkey, uint32_t length, std::string* error);
  const uint8_t* buffer() const { return buffer_.data(); }

 private:
  TestPeer() = default;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  std::vector<uint8_t> buffer_;
  ibv_mr* mr_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  uint32_t psn_ = 0;
  int gid_index_ = 0;
  ibv_gid gid_{};
  uint64_t next_wr_ = 1;
};

// The GID index the peer uses on port 1: the first IPv4-mapped RoCEv2 GID, like rdmad's default.
int PickGidIndex(ibv_context* ctx);

}  // namespace rdmad::testing

#endif  // RDMAD_TESTS_CONFORMANCE_TEST_PEER_H_
