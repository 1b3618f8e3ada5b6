#include "server/verbs/cm.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/log.h"
#include "server/common/status.h"
#include "server/verbs/device.h"
#include "server/verbs/pd.h"
#include "server/verbs/qp.h"

namespace rdmad::verbs {
namespace {

using fabric::CmEventType;

static_assert(fabric::restrack::kPortSpaceTcp == RDMA_PS_TCP);  // every id rdmad makes
static_assert(static_cast<int>(CmEventType::kAddrResolved) == RDMA_CM_EVENT_ADDR_RESOLVED);
static_assert(static_cast<int>(CmEventType::kAddrError) == RDMA_CM_EVENT_ADDR_ERROR);
static_assert(static_cast<int>(CmEventType::kRouteResolved) == RDMA_CM_EVENT_ROUTE_RESOLVED);
static_assert(static_cast<int>(CmEventType::kRouteError) == RDMA_CM_EVENT_ROUTE_ERROR);
static_assert(static_cast<int>(CmEventType::kConnectRequest) == RDMA_CM_EVENT_CONNECT_REQUEST);
static_assert(static_cast<int>(CmEventType::kConnectResponse) == RDMA_CM_EVENT_CONNECT_RESPONSE);
static_assert(static_cast<int>(CmEventType::kConnectError) == RDMA_CM_EVENT_CONNECT_ERROR);
static_assert(static_cast<int>(CmEventType::kUnreachable) == RDMA_CM_EVENT_UNREACHABLE);
static_assert(static_cast<int>(CmEventType::kRejected) == RDMA_CM_EVENT_REJECTED);
static_assert(static_cast<int>(CmEventType::kEstablished) == RDMA_CM_EVENT_ESTABLISHED);
static_assert(static_cast<int>(CmEventType::kDisconnected) == RDMA_CM_EVENT_DISCONNECTED);
static_assert(static_cast<int>(CmEventType::kDeviceRemoval) == RDMA_CM_EVENT_DEVICE_REMOVAL);
static_assert(static_cast<int>(CmEventType::kMulticastJoin) == RDMA_CM_EVENT_MULTICAST_JOIN);
static_assert(static_cast<int>(CmEventType::kMulticastError) == RDMA_CM_EVENT_MULTICAST_ERROR);
static_assert(static_cast<int>(CmEventType::kAddrChange) == RDMA_CM_EVENT_ADDR_CHANGE);
static_assert(static_cast<int>(CmEventType::kTimewaitExit) == RDMA_CM_EVENT_TIMEWAIT_EXIT);

constexpr uint8_t kRetryCount = 7;
// Not 7 (retry for ever): a peer that never posts a receive would hold rdmad's SEND in RNR retries for as
// long as it stays connected, and every work request behind it too. With 6 retries the SEND fails after at
// most 6 times the peer's RNR timer (at most 655 ms each) and the QP goes to the error state. This holds
// for the connections rdmad makes (rdma_connect). In an accept the value goes into the REP, for the peer's
// QP: rdmad's own QP takes the connect request's count, the client's choice, which may be 7. The grants
// bound that case themselves (GrantManager::Options::key_kill_timeout).
constexpr uint8_t kRnrRetryCount = 6;
// The local ACK timeout of rdmad's connections (4.096 us * 2^17 = 537 ms per try, so a peer that vanished
// without a disconnect fails a SEND after about 8 tries, 4.3 s). rdma_cm's default on rxe gave about 40 s:
// a grant whose client was destroyed while its key's SEND was out held a RevokeGrant (and a DeregisterMr
// or ReregisterMr with revoke_grants) that long.
constexpr uint8_t kAckTimeout = 17;

void* KeyToContext(uint64_t key) { return reinterpret_cast<void*>(static_cast<uintptr_t>(key)); }
uint64_t ContextToKey(const void* context) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(context)); }

// A numeric IPv4 or IPv6 host and a port, as a sockaddr for rdma_bind_addr / rdma_resolve_addr.
absl::StatusOr<sockaddr_storage> ToSockaddr(const fabric::SockAddr& addr) {
  sockaddr_storage ss{};
  auto* in4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET, addr.host.c_str(), &in4->sin_addr) == 1) {
    in4->sin_family = AF_INET;
    in4->sin_port = htons(addr.port);
  } else if (inet_pton(AF_INET6, addr.host.c_str(), &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(addr.port);
  } else {
    return InvalidArgument("address", absl::StrCat("'", addr.host, "' is not a numeric IPv4 or IPv6 address"));
  }
  return ss;
}

fabric::SockAddr FromSockaddr(const sockaddr* sa, uint16_t port_be) {
  fabric::SockAddr out;
  char text[INET6_ADDRSTRLEN] = "";
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, text, sizeof text);
  } else if (sa->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, text, sizeof text);
  }
  out.host = text;  // empty before the id is bound or resolved
  out.port = ntohs(port_be);
  return out;
}

absl::Status CheckPrivateData(const std::string& data, size_t limit, const char* what) {
  if (data.size() <= limit) return absl::OkStatus();
  return InvalidArgument("private_data", absl::StrCat(data.size(), " bytes; ", what, " carries at most ", limit));
}

}  // namespace

// ---- VerbsCmFabric ----

absl::StatusOr<std::unique_ptr<fabric::CmChannel>> VerbsCmFabric::CreateChannel() {
  RDMAD_ASSIGN_OR_RETURN(std::unique_ptr<VerbsCmChannel> channel, VerbsCmChannel::Create(fabric_));
  return std::unique_ptr<fabric::CmChannel>(std::move(channel));
}

// ---- VerbsCmChannel ----

absl::StatusOr<std::unique_ptr<VerbsCmChannel>> VerbsCmChannel::Create(VerbsFabric* fabric) {
  rdma_event_channel* raw = rdma_create_event_channel();
  if (raw == nullptr) return FromErrno("rdma_create_event_channel");
  std::unique_ptr<VerbsCmChannel> channel(new VerbsCmChannel(fabric, raw));
  // Non-blocking: Drain takes events until EAGAIN and the dispatcher goes back to epoll.
  int flags = fcntl(raw->fd, F_GETFL);
  if (flags < 0 || fcntl(raw->fd, F_SETFL, flags | O_NONBLOCK) != 0) return FromErrno("fcntl(O_NONBLOCK)");
  return channel;
}

VerbsCmChannel::~VerbsCmChannel() { rdma_destroy_event_channel(channel_); }

std::vector<fabric::CmEvent> VerbsCmChannel::Drain() {
  std::vector<fabric::CmEvent> events;
  for (;;) {
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(channel_, &ev) != 0) {
      if (errno != EAGAIN) {
        RDMAD_LOG_ERROR("rdma_get_cm_event(fd %d): errno %d (%s)", channel_->fd, errno, ErrnoName(errno).c_str());
      }
      break;
    }
    fabric::CmEvent out;
    out.type = static_cast<CmEventType>(ev->event);
    out.status = ev->status;
    const rdma_conn_param& conn = ev->param.conn;
    if (conn.private_data != nullptr && conn.private_data_len > 0) {
      out.private_data.assign(static_cast<const char*>(conn.private_data), conn.private_data_len);
    }
    if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
      // librdmacm made the new id on this channel with the listener's context; it is ours from now on.
      out.key = ContextToKey(ev->listen_id->context);
      out.new_id = std::make_unique<VerbsCmId>(fabric_, ev->id, 0);
    } else {
      out.key = ContextToKey(ev->id->context);
    }
    // Acknowledged at once: rdma_destroy_id and rdma_migrate_id wait for every event handed out.
    if (rdma_ack_cm_event(ev) != 0) {
      RDMAD_LOG_ERROR("rdma_ack_cm_event(%s): errno %d (%s)", fabric::CmEventName(out.type), errno,
                      ErrnoName(errno).c_str());
    }
    events.push_back(std::move(out));
  }
  return events;
}

absl::StatusOr<std::unique_ptr<fabric::CmId>> VerbsCmChannel::CreateId(uint64_t key) {
  rdma_cm_id* id = nullptr;
  if (int ret = rdma_create_id(channel_, &id, KeyToContext(key), RDMA_PS_TCP); ret != 0) {
    return FromRdmaCm("rdma_create_id", ret);
  }
  return std::unique_ptr<fabric::CmId>(new VerbsCmId(fabric_, id, key));
}

// ---- VerbsCmId ----

VerbsCmId::VerbsCmId(VerbsFabric* fabric, rdma_cm_id* id, uint64_t key) : fabric_(fabric), id_(id) {
  set_key(key);
}

VerbsCmId::~VerbsCmId() {
  qp_.reset();  // rdma_destroy_qp, then its CQ
  if (rdma_destroy_id(id_) != 0) {
    RDMAD_LOG_ERROR("rdma_destroy_id(key %llu): errno %d (%s)", static_cast<unsigned long long>(key_), errno,
                    ErrnoName(errno).c_str());
  }
}

void VerbsCmId::set_key(uint64_t key) {
  key_ = key;
  id_->context = KeyToContext(key);  // read by rdma_get_cm_event on this id's channel thread only
}

absl::Status VerbsCmId::Bind(const fabric::SockAddr& local) {
  RDMAD_ASSIGN_OR_RETURN(sockaddr_storage ss, ToSockaddr(local));
  if (int ret = rdma_bind_addr(id_, reinterpret_cast<sockaddr*>(&ss)); ret != 0) {
    const int err = errno;
    // Not an address of this host: the caller's mistake, not a conflict (errno maps to ALREADY_EXISTS).
    if (err == EADDRNOTAVAIL) {
      return ErrnoError(absl::StatusCode::kInvalidArgument, "rdma_bind_addr", err,
                        absl::StrCat(local.host, " is not an address of this host"), "address");
    }
    return WithField(ErrnoError("rdma_bind_addr", err), "address");
  }
  return absl::OkStatus();
}

absl::Status VerbsCmId::Listen(int backlog) {
  return FromRdmaCm("rdma_listen", rdma_listen(id_, backlog));
}

absl::Status VerbsCmId::ResolveAddr(const fabric::SockAddr& remote, int timeout_ms) {
  RDMAD_ASSIGN_OR_RETURN(sockaddr_storage ss, ToSockaddr(remote));
  if (int ret = rdma_resolve_addr(id_, nullptr, reinterpret_cast<sockaddr*>(&ss), timeout_ms); ret != 0) {
    return WithField(FromRdmaCm("rdma_resolve_addr", ret), "address");
  }
  return absl::OkStatus();
}

absl::Status VerbsCmId::ResolveRoute(int timeout_ms) {
  return FromRdmaCm("rdma_resolve_route", rdma_resolve_route(id_, timeout_ms));
}

Device* VerbsCmId::verbs_device() const {
  return id_->verbs != nullptr ? fabric_->ByContext(id_->verbs) : nullptr;
}

fabric::Device* VerbsCmId::device() const { return verbs_device(); }

fabric::Qp* VerbsCmId::qp() const { return qp_.get(); }

absl::Status VerbsCmId::CreateQp(fabric::Pd& fpd, const fabric::CmQpOptions& options) {
  if (qp_ != nullptr) return FailedPrecondition("qp", "the id already has a QP");
  Device* device = verbs_device();
  if (device == nullptr) {
    return FailedPrecondition({}, "the id is on no device yet (bind it to a device address, resolve an address, "
                                  "or take it from a connect request)");
  }
  ibv_pd* pd = static_cast<Pd&>(fpd).raw();
  if (pd->context != id_->verbs) {
    return InvalidArgument("pd", absl::StrCat("the PD is on device ", ibv_get_device_name(pd->context->device),
                                              ", the id on ", device->info().name));
  }
  RDMAD_ASSIGN_OR_RETURN(qp_, Qp::CreateOnCmId(device, pd, id_, options));
  return absl::OkStatus();
}

rdma_conn_param VerbsCmId::ConnParam(const std::string& private_data) const {
  const Device* device = verbs_device();
  const uint32_t rd_atom = device != nullptr ? device->info().max_qp_rd_atom : 1;
  const auto depth = static_cast<uint8_t>(std::clamp<uint32_t>(rd_atom, 1, 16));
  rdma_conn_param param{};
  param.private_data = private_data.empty() ? nullptr : private_data.data();
  param.private_data_len = static_cast<uint8_t>(private_data.size());
  param.responder_resources = depth;
  param.initiator_depth = depth;
  param.retry_count = kRetryCount;
  param.rnr_retry_count = kRnrRetryCount;
  return param;
}

void VerbsCmId::SetAckTimeout() {
  uint8_t timeout = kAckTimeout;
  if (rdma_set_option(id_, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout, sizeof timeout) != 0) {
    RDMAD_LOG_WARN("rdma_set_option(ACK_TIMEOUT): %s: the connection keeps rdma_cm's default timeout",
                   ErrnoName(errno).c_str());
  }
}

absl::Status VerbsCmId::Connect(const std::string& private_data) {
  RDMAD_RETURN_IF_ERROR(CheckPrivateData(private_data, fabric::kConnectPrivateDataMax, "a connect request"));
  SetAckTimeout();
  rdma_conn_param param = ConnParam(private_data);
  return FromRdmaCm("rdma_connect", rdma_connect(id_, &param));
}

absl::Status VerbsCmId::Accept(const std::string& private_data) {
  RDMAD_RETURN_IF_ERROR(CheckPrivateData(private_data, fabric::kAcceptPrivateDataMax, "an accept"));
  SetAckTimeout();
  rdma_conn_param param = ConnParam(private_data);
  return FromRdmaCm("rdma_accept", rdma_accept(id_, &param));
}

absl::Status VerbsCmId::Reject(const std::string& private_data) {
  RDMAD_RETURN_IF_ERROR(CheckPrivateData(private_data, fabric::kRejectPrivateDataMax, "a reject"));
  return FromRdmaCm("rdma_reject", rdma_reject(id_, private_data.empty() ? nullptr : private_data.data(),
                                               static_cast<uint8_t>(private_data.size())));
}

absl::Status VerbsCmId::Disconnect() { return FromRdmaCm("rdma_disconnect", rdma_disconnect(id_)); }

absl::Status VerbsCmId::Migrate(fabric::CmChannel& to) {
  return FromRdmaCm("rdma_migrate_id", rdma_migrate_id(id_, static_cast<VerbsCmChannel&>(to).raw()));
}

fabric::SockAddr VerbsCmId::local() const {
  return FromSockaddr(rdma_get_local_addr(id_), rdma_get_src_port(id_));
}

fabric::SockAddr VerbsCmId::remote() const {
  return FromSockaddr(rdma_get_peer_addr(id_), rdma_get_dst_port(id_));
}

}  // namespace rdmad::verbs
