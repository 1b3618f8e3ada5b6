#include "tests/fuzz/dp_peer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rdma_verbs.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace rdmad::fuzz {

DpPeer::~DpPeer() {
  if (id_ != nullptr) {
    if (id_->qp != nullptr) rdma_destroy_qp(id_);
    if (mr_ != nullptr) rdma_dereg_mr(mr_);
    rdma_destroy_id(id_);
  }
  if (channel_ != nullptr) rdma_destroy_event_channel(channel_);
}

bool DpPeer::Next(int timeout_ms, rdma_cm_event_type* type, int* status, std::string* data, std::string* error) {
  pollfd p{channel_->fd, POLLIN, 0};
  int n = poll(&p, 1, timeout_ms);
  if (n <= 0) {
    *error = n == 0 ? "no rdma_cm event in time" : std::string("poll: ") + std::strerror(errno);
    return false;
  }
  rdma_cm_event* e = nullptr;
  if (rdma_get_cm_event(channel_, &e) != 0) {
    *error = std::string("rdma_get_cm_event: ") + std::strerror(errno);
    return false;
  }
  *type = e->event;
  *status = e->status;
  const auto* bytes = static_cast<const char*>(e->param.conn.private_data);
  if (bytes != nullptr) {
    data->assign(bytes, e->param.conn.private_data_len);
  } else {
    data->clear();
  }
  rdma_ack_cm_event(e);
  return true;
}

DpPeer::Result DpPeer::Dial(const std::string& address, int port, const std::string& private_data, int receives,
                            int timeout_ms) {
  Result r;
  channel_ = rdma_create_event_channel();
  if (channel_ == nullptr || rdma_create_id(channel_, &id_, nullptr, RDMA_PS_TCP) != 0) {
    r.error = std::string("rdma_create_event_channel/id: ") + std::strerror(errno);
    return r;
  }
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, address.c_str(), &dst.sin_addr);
  rdma_cm_event_type type;
  if (rdma_resolve_addr(id_, nullptr, reinterpret_cast<sockaddr*>(&dst), timeout_ms) != 0) {
    r.error = std::string("rdma_resolve_addr: ") + std::strerror(errno);
    return r;
  }
  if (!Next(timeout_ms, &type, &r.status, &r.private_data, &r.error)) return r;
  if (type != RDMA_CM_EVENT_ADDR_RESOLVED) {
    r.event = rdma_event_str(type);
    r.error = "address resolution failed";
    return r;
  }
  if (rdma_resolve_route(id_, timeout_ms) != 0) {
    r.error = std::string("rdma_resolve_route: ") + std::strerror(errno);
    return r;
  }
  if (!Next(timeout_ms, &type, &r.status, &r.private_data, &r.error)) return r;
  if (type != RDMA_CM_EVENT_ROUTE_RESOLVED) {
    r.event = rdma_event_str(type);
    r.error = "route resolution failed";
    return r;
  }
  ibv_qp_init_attr init{};
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = init.cap.max_recv_wr = 4;
  init.cap.max_send_sge = init.cap.max_recv_sge = 1;
  if (rdma_create_qp(id_, nullptr, &init) != 0) {
    r.error = std::string("rdma_create_qp: ") + std::strerror(errno);
    return r;
  }
  if (receives > 0) {
    mr_ = rdma_reg_msgs(id_, buf_, sizeof buf_);
    if (mr_ == nullptr) {
      r.error = std::string("rdma_reg_msgs: ") + std::strerror(errno);
      return r;
    }
    for (int i = 0; i < receives && i < 2; ++i) {
      if (rdma_post_recv(id_, nullptr, buf_ + 64 * i, 64, mr_) != 0) {
        r.error = std::string("rdma_post_recv: ") + std::strerror(errno);
        return r;
      }
    }
  }
  rdma_conn_param param{};
  param.private_data = private_data.empty() ? nullptr : private_data.data();
  param.private_data_len = static_cast<uint8_t>(private_data.size());
  param.responder_resources = 1;
  param.initiator_depth = 1;
  param.retry_count = 7;
  param.rnr_retry_count = 7;
  if (rdma_connect(id_, &param) != 0) {
    r.error = std::string("rdma_connect: ") + std::strerror(errno);
    return r;
  }
  if (!Next(timeout_ms, &type, &r.status, &r.private_data, &r.error)) return r;
  r.event = rdma_event_str(type);
  if (type == RDMA_CM_EVENT_ESTABLISHED) {
    connected_ = true;
    r.outcome = Outcome::kEstablished;
  } else if (type == RDMA_CM_EVENT_REJECTED) {
    r.outcome = Outcome::kRejected;
  } else {
    r.error = "the connection failed";
  }
  return r;
}

std::string DpPeer::FirstMessage(int timeout_ms, std::string* error) {
  if (id_ == nullptr || id_->qp == nullptr || mr_ == nullptr) {
    *error = "no receives posted";
    return "";
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < until) {
    ibv_wc wc{};
    int n = ibv_poll_cq(id_->recv_cq, 1, &wc);
    if (n < 0) {
      *error = "ibv_poll_cq failed";
      return "";
    }
    if (n == 1) {
      if (wc.status != IBV_WC_SUCCESS) {
        *error = std::string("receive completion: ") + ibv_wc_status_str(wc.status);
        return "";
      }
      // Receives complete in the order they were posted: the first one is buf_.
      return std::string(buf_, wc.byte_len > 64 ? 64 : wc.byte_len);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  *error = "no message in time";
  return "";
}

std::string DpPeer::Disconnect(int timeout_ms) {
  if (!connected_) return "not connected";
  connected_ = false;
  if (rdma_disconnect(id_) != 0) return std::string("rdma_disconnect: ") + std::strerror(errno);
  rdma_cm_event_type type;
  int status;
  std::string data, error;
  while (Next(timeout_ms, &type, &status, &data, &error)) {
    if (type == RDMA_CM_EVENT_DISCONNECTED) return "";
  }
  return error;
}

}  // namespace rdmad::fuzz
