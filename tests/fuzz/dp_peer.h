// DpPeer: a hostile (or well-behaved) rdma_cm client for the API fuzzer: dials an rdma_cm listener (rdmad's
// token-checked data-plane listener, or an id rdmad listens with through the API) with arbitrary private
// data, optionally with receives posted (a grant's key message needs them; a hostile client may not post
// any), and ends politely (rdma_disconnect) or abruptly (destroyed while connected). Written directly on
// librdmacm, independently of rdmad's backend. Every wait is bounded.
// Thread-safety: one thread at a time per DpPeer (it may be handed from one thread to another).
#ifndef RDMAD_TESTS_FUZZ_DP_PEER_H_
#define RDMAD_TESTS_FUZZ_DP_PEER_H_

#include <rdma/rdma_cma.h>

#include <string>

namespace rdmad::fuzz {

class DpPeer {
 public:
  enum class Outcome { kEstablished, kRejected, kError };
  struct Result {
    Outcome outcome = Outcome::kError;
    std::string event;         // the rdma_cm event that decided it
    int status = 0;
    std::string private_data;  // the reject's (or accept's) private data
    std::string error;         // kError: what failed
  };

  DpPeer() = default;
  ~DpPeer();  // destroys QP, MR, id and channel; a connected peer goes without rdma_disconnect (abrupt)
  DpPeer(const DpPeer&) = delete;
  DpPeer& operator=(const DpPeer&) = delete;

  // Resolves, creates an RC QP, posts `receives` receives of 64 bytes (0..2), connects with
  // `private_data` (its length is sent as is, 0..255; librdmacm refuses more than the CM carries). Each step
  // waits at most timeout_ms.
  Result Dial(const std::string& address, int port, const std::string& private_data, int receives,
              int timeout_ms);
  // The first receive completion (a grant message from rdmad), waiting at most timeout_ms. Empty string and
  // *error set if none (or it failed).
  std::string FirstMessage(int timeout_ms, std::string* error);
  // rdma_disconnect, and a bounded wait for DISCONNECTED. Empty string on success.
  std::string Disconnect(int timeout_ms);
  bool connected() const { return connected_; }

 private:
  bool Next(int timeout_ms, rdma_cm_event_type* type, int* status, std::string* data, std::string* error);

  rdma_event_channel* channel_ = nullptr;
  rdma_cm_id* id_ = nullptr;
  ibv_mr* mr_ = nullptr;
  char buf_[2 * 64] = {};
  bool connected_ = false;
};

}  // namespace rdmad::fuzz

#endif  // RDMAD_TESTS_FUZZ_DP_PEER_H_
