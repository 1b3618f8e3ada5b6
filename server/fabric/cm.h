// The rdma_cm part of the fabric seam: event channels and communication ids (RDMA_PS_TCP, RC).
//
// Implementations: server/verbs/cm.* (librdmacm), tests/unit/fake_cm.* (in memory, for unit tests).
//
// Ownership: a CmChannel is owned by rdmad's dispatcher for it (server/cm/); a CmId by rdmad's entry for
// it. An id must be destroyed before the channel it is on, its QP (if any) before the id (~CmId does both
// in that order), and every event reported for it must have been acknowledged first (rdma_destroy_id and
// rdma_migrate_id wait for that): CmChannel::Drain acknowledges each event as soon as it is copied out, so
// the thread that drains a channel can destroy or migrate its ids without ever waiting.
// Threads: every call on a channel and on the ids it carries is made on that channel's dispatcher thread,
// except Migrate's destination, which only receives the id's future events.
#ifndef RDMAD_SERVER_FABRIC_CM_H_
#define RDMAD_SERVER_FABRIC_CM_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/fabric/fabric.h"

namespace rdmad::fabric {

// Private data limits of RDMA_PS_TCP on IB/RoCE (what rdma_cm leaves after its own header).
inline constexpr size_t kConnectPrivateDataMax = 56;
inline constexpr size_t kAcceptPrivateDataMax = 196;
inline constexpr size_t kRejectPrivateDataMax = 148;

// RDMA_CM_EVENT_*, numerically equal (static_assert in the verbs backend).
enum class CmEventType : int {
  kAddrResolved = 0,
  kAddrError = 1,
  kRouteResolved = 2,
  kRouteError = 3,
  kConnectRequest = 4,
  kConnectResponse = 5,
  kConnectError = 6,
  kUnreachable = 7,
  kRejected = 8,
  kEstablished = 9,
  kDisconnected = 10,
  kDeviceRemoval = 11,
  kMulticastJoin = 12,
  kMulticastError = 13,
  kAddrChange = 14,
  kTimewaitExit = 15,
};
// "RDMA_CM_EVENT_ESTABLISHED"; "RDMA_CM_EVENT_UNKNOWN" for values outside the enum.
const char* CmEventName(CmEventType type);

class CmId;

// One event, copied out of the rdma_cm_event before it was acknowledged.
struct CmEvent {
  CmEventType type = CmEventType::kAddrError;
  int status = 0;            // the event's status (an errno, negative, or a reject reason for REJECTED)
  uint64_t key = 0;          // the key of the id the event is for (for CONNECT_REQUEST: the listener's)
  std::string private_data;  // as delivered (zero-padded to the transport's size on IB/RoCE)
  // CONNECT_REQUEST only: the new id for the incoming connection, owned by whoever takes the event. Its
  // key is 0 until set_key; it is on the listener's channel.
  std::unique_ptr<CmId> new_id;
};

struct SockAddr {
  std::string host;  // numeric IPv4 or IPv6
  uint16_t port = 0;
};

class CmChannel;

class CmId {
 public:
  virtual ~CmId() = default;  // destroys the QP (if any), then the id
  virtual uint64_t key() const = 0;
  virtual void set_key(uint64_t key) = 0;

  virtual absl::Status Bind(const SockAddr& local) = 0;                          // rdma_bind_addr
  virtual absl::Status Listen(int backlog) = 0;                                  // rdma_listen
  virtual absl::Status ResolveAddr(const SockAddr& remote, int timeout_ms) = 0;  // rdma_resolve_addr
  virtual absl::Status ResolveRoute(int timeout_ms) = 0;                         // rdma_resolve_route
  // The device the id is bound to (after Bind on a device address, address resolution, or a connect
  // request), as one of the fabric's devices; nullptr before.
  virtual Device* device() const = 0;
  // rdma_create_qp: an RC QP on `pd` (which must be on device()), its CQ on the device's completion
  // channel, with `options`' send depth and receives (the receive buffers posted before the QP leaves INIT,
  // so the peer's first SEND finds one). The id owns it; qp() is usable for posting binds once the
  // connection is established. INVALID_ARGUMENT (field "send_depth") below kMinSendDepth.
  virtual absl::Status CreateQp(Pd& pd, const CmQpOptions& options) = 0;
  // A QP of the default shape: send depth 8, no receives. (An overload, not a default argument: those do not
  // work on virtual functions. An implementation says `using fabric::CmId::CreateQp;`.)
  absl::Status CreateQp(Pd& pd) { return CreateQp(pd, CmQpOptions{}); }
  virtual Qp* qp() const = 0;
  virtual absl::Status Connect(const std::string& private_data) = 0;  // rdma_connect
  virtual absl::Status Accept(const std::string& private_data) = 0;   // rdma_accept
  virtual absl::Status Reject(const std::string& private_data) = 0;   // rdma_reject
  virtual absl::Status Disconnect() = 0;                              // rdma_disconnect
  // rdma_migrate_id(3): future events, and those pending now, arrive on `to` instead.
  virtual absl::Status Migrate(CmChannel& to) = 0;
  virtual SockAddr local() const = 0;   // rdma_get_local_addr / rdma_get_src_port
  virtual SockAddr remote() const = 0;  // rdma_get_peer_addr / rdma_get_dst_port
};

class CmChannel {
 public:
  virtual ~CmChannel() = default;  // rdma_destroy_event_channel; no id may remain on it
  // Readable when an event is waiting.
  virtual int fd() const = 0;
  // Takes every waiting event without blocking, copies each out and acknowledges it at once.
  virtual std::vector<CmEvent> Drain() = 0;
  // rdma_create_id(RDMA_PS_TCP) on this channel.
  virtual absl::StatusOr<std::unique_ptr<CmId>> CreateId(uint64_t key) = 0;
};

// Creates event channels (rdma_create_event_channel). Implemented next to the Fabric.
class CmFabric {
 public:
  virtual ~CmFabric() = default;
  virtual absl::StatusOr<std::unique_ptr<CmChannel>> CreateChannel() = 0;
};

}  // namespace rdmad::fabric

#endif  // RDMAD_SERVER_FABRIC_CM_H_
