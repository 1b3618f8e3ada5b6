// CmPeer: a plain librdmacm client that dials a listener (rdmad's data-plane listener, or an rdma_cm id
// rdmad listens with), written directly on librdmacm, independently of server/verbs, so the suite checks
// rdmad against code that does not share its mistakes. One event channel, one id, one RC QP (on
// librdmacm's default PD); every wait is bounded.
// Thread-safety: one thread per CmPeer.
#ifndef RDMAD_TESTS_CONFORMANCE_CM_PEER_H_
#define RDMAD_TESTS_CONFORMANCE_CM_PEER_H_

#include <rdma/rdma_cma.h>

#include <string>

namespace rdmad::testing {

class CmPeer {
 public:
  enum class Outcome { kEstablished, kRejected, kError };
  struct Result {
    Outcome outcome = Outcome::kError;
    std::string event;         // the rdma_cm event that decided it ("RDMA_CM_EVENT_REJECTED")
    int status = 0;
    std::string private_data;  // the accept's or the reject's private data
    std::string error;         // for kError: what failed
  };

  CmPeer() = default;
  ~CmPeer();  // disconnects if connected, destroys QP, id, channel
  CmPeer(const CmPeer&) = delete;
  CmPeer& operator=(const CmPeer&) = delete;

  // Resolves, creates a QP and connects with `private_data` (at most 56 bytes); waits at most timeout_ms
  // for each step.
  Result Dial(const std::string& address, int port, const std::string& private_data, int timeout_ms = 10000);
  // rdma_disconnect, and waits (bounded) for DISCONNECTED. Empty string on success.
  std::string Disconnect(int timeout_ms = 10000);

 private:
  // Waits for the next event on the channel (bounded); acknowledges it after copying what is needed.
  bool Next(int timeout_ms, rdma_cm_event_type* type, int* status, std::string* data, std::string* error);

  rdma_event_channel* channel_ = nullptr;
  rdma_cm_id* id_ = nullptr;
  bool connected_ = false;
};

}  // namespace rdmad::testing

#endif  // RDMAD_TESTS_CONFORMANCE_CM_PEER_H_
