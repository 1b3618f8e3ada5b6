// FakeCm: an in-memory implementation of the rdma_cm seam (server/fabric/cm.h) for host unit tests, next to
// FakeFabric (tests/unit/fake_fabric.h), whose devices, PDs and QPs it uses. Install it with
// FakeFabric::set_cm(&fake_cm). One FakeCm is one host: connections go from its ids to its own listeners.
//
// Addresses: a route map, host address -> device name ({"10.0.2.15", "rxe0"}). Binding to a mapped address
// or to the wildcard ("0.0.0.0", "::") works; any other address is EADDRNOTAVAIL. Port 0 takes an ephemeral
// port (49152 up). Two ids on one port conflict (EADDRINUSE) if their hosts are equal or one is a wildcard.
//
// The model follows librdmacm over the IB CM (RoCE), each step completing at once:
//   Bind -> Listen(backlog)                                          the passive side
//   ResolveAddr -> ADDR_RESOLVED (device() set) | ADDR_ERROR (-ENETUNREACH, address not in the route map)
//   ResolveRoute -> ROUTE_RESOLVED;  CreateQp(pd, options): pd.CreateQp({port 1, gid index 1}), QP in INIT,
//       given `options` (fake_fabric.h ConfigureCmQp: its send depth and receive slots)
//   Connect(pd<=56) -> CONNECT_REQUEST on the listener's channel (the listener's key, data padded to 56,
//       new_id: key 0, on the channel the listener is on now, device set, remote() = the active side's
//       local()) | REJECTED status 28 on the active side if no listener, or its backlog of undrained
//       requests is full
//   Accept(pd<=196) on the new id: each side's QP (if any) is connected (Qp::Connect with its own
//       endpoint, -> RTS); the active side gets ESTABLISHED (the accept's data padded to 196), the passive
//       ESTABLISHED (no data). As in librdmacm, an active id without a QP gets CONNECT_RESPONSE (the data)
//       instead and finishes with its own Accept, which sends the passive side its ESTABLISHED. A failing
//       active QP: CONNECT_ERROR (-errno) there, REJECTED 28 on the passive side.
//   Reject(pd<=148) on the new id -> REJECTED status 28 on the active side with the data padded to 148
//   Disconnect on a connected id -> DISCONNECTED on both sides, once, and its own QP (if any) to the error
//       state (fake_fabric.h ModifyQpToError, flushing its work); again, or on an id in any connection state,
//       a no-op (as rdma_disconnect); EINVAL on an id that never connected.
//   Migrate(to): the id's queued events move, in order, to the end of `to`'s queue; later ones go there.
//   Send(bytes) (a test's, not rdma_cm's): a SEND from the id's QP to the QP of the id at the other end
//       (fake_fabric.h DeliverSend: the peer's receive slots, RNR, the QP states).
//   ~CmId: its QP first, then the id: its queued events are dropped (a dropped CONNECT_REQUEST destroys
//       its new id), and a peer gets DISCONNECTED if connected, REJECTED otherwise (status 1, the IB CM's
//       timeout reject, if the active side went away before an answer; 28 if the passive side did).
// Wrong states are EINVAL from the rdma_* call (ErrnoError("rdma_listen", EINVAL)); private data over the
// limit is INVALID_ARGUMENT on field "private_data". As in the verbs backend (server/verbs/cm.cc), Bind and
// ResolveAddr errors carry field "address", and CreateQp on an id without a device, or with a QP already, is
// FAILED_PRECONDITION. Not modeled: checking that CreateQp's PD is on
// device(), timeouts, UD/multicast, IPv6 scope ids.
//
// Events: each channel has a queue and an eventfd that is readable exactly while the queue is non-empty and
// the Hold latch is open. Drain takes them all (the key read at drain time, as id->context is). While held,
// events queue up (Queued counts them) but the fd stays unreadable and Drain returns nothing.
//
// Checking: an ordered log ("create_channel 1", "create_id 3", "bind 3 10.0.2.15:7471", "listen 3
// 10.0.2.15:7471", "connect 4 -> 10.0.2.15:7471", "event ESTABLISHED 3 on channel 2", "drop ESTABLISHED 3
// on channel 2", "migrate 4 -> channel 3", "destroy_id 3", "destroy_channel 2"; ids and channels are
// numbered from 1), live counts, and violations (printed too): a channel destroyed while ids are on it, an
// id destroyed after its channel, objects of another implementation, an unknown call in FailNextCmCall, a
// route naming an unknown device, the FakeCm destroyed before its channels and ids.
//
// Thread-safety: every object may be used from any thread. One mutex, in the state the FakeCm, channels and
// ids share (so none dangles whatever the destruction order); it is never held across a call into a PD or
// QP, or while an object the user may own (a dropped event's new id) is destroyed, except in Send, which
// reads the QPs' states and delivers to the peer's QP under it (so neither QP can go meanwhile): those take
// the fake fabric's ledger mutex, which is never held while this one is taken, and run no callback.
#ifndef RDMAD_TESTS_UNIT_FAKE_CM_H_
#define RDMAD_TESTS_UNIT_FAKE_CM_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/fabric/cm.h"
#include "server/fabric/fabric.h"

namespace rdmad::fake {

struct FakeCmState;  // fake_cm.cc

// Private data sizes of the IB CM (REQ, REP, REJ), and the reject reasons the fake reports.
inline constexpr size_t kConnectDataSize = 56;
inline constexpr size_t kAcceptDataSize = 196;
inline constexpr size_t kRejectDataSize = 148;
inline constexpr int kRejectConsumer = 28;  // IB_CM_REJ_CONSUMER_DEFINED: rdma_reject, a full backlog
inline constexpr int kRejectTimeout = 1;    // IB_CM_REJ_TIMEOUT: the active id was destroyed first
// No listener at the address: 28, to be confirmed on a real device (the IB CM code answers a REQ for a
// service id nobody listens on with IB_CM_REJ_INVALID_SERVICE_ID, 8).
inline constexpr int kRejectNoListener = 28;

class FakeCm final : public fabric::CmFabric {
 public:
  struct Counts {
    int channels = 0, ids = 0;
  };
  // `devices` as FakeFabric::devices(); `routes`: host address -> device name.
  FakeCm(std::vector<fabric::Device*> devices, std::map<std::string, std::string> routes);
  ~FakeCm() override;
  FakeCm(const FakeCm&) = delete;
  FakeCm& operator=(const FakeCm&) = delete;

  absl::StatusOr<std::unique_ptr<fabric::CmChannel>> CreateChannel() override;  // rdma_create_event_channel

  // --- observation
  Counts live() const;
  std::vector<std::string> log() const;
  // Only the entries whose first word is one of `verbs`, in order.
  std::vector<std::string> log_of(const std::vector<std::string>& verbs) const;
  void ClearLog();
  std::vector<std::string> violations() const;
  int Queued(const fabric::CmChannel& channel) const;  // events waiting on it, held or not; 0 if foreign

  // --- fault and event injection
  // The next call named `call` ("rdma_create_event_channel", "rdma_create_id", "rdma_bind_addr",
  // "rdma_listen", "rdma_resolve_addr", "rdma_resolve_route", "rdma_create_qp", "rdma_connect",
  // "rdma_accept", "rdma_reject", "rdma_disconnect", "rdma_migrate_id") fails with ErrnoError(call, err),
  // without effect. FIFO per call.
  void FailNextCmCall(const std::string& call, int err);
  // Queues an event for `id` on its channel (no private data, no state change): DEVICE_REMOVAL,
  // CONNECT_ERROR, TIMEWAIT_EXIT, ...
  void InjectEvent(fabric::CmId& id, fabric::CmEventType type, int status);

  // --- the hold latch: while held, events queue but no channel is readable and Drain returns nothing.
  void Hold();
  void Release();

 private:
  std::shared_ptr<FakeCmState> state_;
};

class FakeCmChannel final : public fabric::CmChannel {
 public:
  // Made by FakeCm::CreateChannel.
  FakeCmChannel(std::shared_ptr<FakeCmState> state, int number, int fd);
  ~FakeCmChannel() override;
  int number() const { return number_; }
  int fd() const override { return fd_; }
  std::vector<fabric::CmEvent> Drain() override;
  absl::StatusOr<std::unique_ptr<fabric::CmId>> CreateId(uint64_t key) override;

 private:
  friend class FakeCm;
  friend class FakeCmId;
  std::shared_ptr<FakeCmState> state_;
  const int number_;
  const int fd_;
};

class FakeCmId final : public fabric::CmId {
 public:
  // Made by FakeCmChannel::CreateId and by Connect (a connect request's new id).
  FakeCmId(std::shared_ptr<FakeCmState> state, uint64_t number);
  ~FakeCmId() override;
  uint64_t number() const { return number_; }

  uint64_t key() const override;
  void set_key(uint64_t key) override;
  absl::Status Bind(const fabric::SockAddr& local) override;
  absl::Status Listen(int backlog) override;
  absl::Status ResolveAddr(const fabric::SockAddr& remote, int timeout_ms) override;
  absl::Status ResolveRoute(int timeout_ms) override;
  fabric::Device* device() const override;
  using fabric::CmId::CreateQp;
  absl::Status CreateQp(fabric::Pd& pd, const fabric::CmQpOptions& options) override;
  fabric::Qp* qp() const override;
  absl::Status Connect(const std::string& private_data) override;
  absl::Status Accept(const std::string& private_data) override;
  absl::Status Reject(const std::string& private_data) override;
  absl::Status Disconnect() override;
  absl::Status Migrate(fabric::CmChannel& to) override;
  fabric::SockAddr local() const override;
  fabric::SockAddr remote() const override;

  // A SEND of `bytes` (a message of the client's) from this id's QP to the QP of the id at the other end of
  // its connection: OK once it is on the wire (fake_fabric.h DeliverSend); FAILED_PRECONDITION if either id
  // has no QP or this one has no peer; ABORTED (the SEND's completion failed) if this id's QP is not in RTS,
  // or as DeliverSend says for the peer's.
  absl::Status Send(const std::string& bytes);

 private:
  friend class FakeCm;
  std::shared_ptr<FakeCmState> state_;
  const uint64_t number_;
};

}  // namespace rdmad::fake

#endif  // RDMAD_TESTS_UNIT_FAKE_CM_H_
