// session_bench: grants activated over a session (data-plane protocol version 2, docs/PROTOCOL.md#sessions)
// beside a plain server doing the same posts, and the connections and QPs a reader of many grants holds with
// and without sessions. Prints figures; judges nothing (exits non-zero only if it could not run). Run between
// two guests by run-grant-bench.sh: `--serve` in A (the baseline server), the measuring client in B.
//
// The client (B), against rdmad A's gRPC (--target) and its data-plane listener (the grants' endpoint):
//   1. issues --grants N grants (4 KiB each, one region, IssueGrants), connects to rdmad's listener with the
//      first token and a version 2 offer (wire::EncodeConnectRequest), and opens two connections to the
//      baseline server (--baseline, in A): one "plain", one "bounds";
//   2. activates the other N-1 grants one at a time: SEND a 64-byte ACTIVATE, wait for the answer (ACTIVE,
//      its tag echoed), each timed from the post of the SEND to the receive completion of the answer. The
//      same N-1 ACTIVATEs, with the same code, go to each baseline connection; the three connections take turns
//      in chunks of --chunk activations (which of them goes first rotates), so that a drift of the host's load
//      falls on all three alike;
//   3. reads 64 bytes through every key of every connection once (the keys work), closes the baseline
//      connections, and counts, with all N grants active on the session: the QPs this process holds (`rdma
//      resource show qp`, by its pid, and the QPs it made) and rdmad's data-plane connections on the grants' PD
//      (ListCmIds, data_plane set), and the distinct connections the grants are on (ListGrants);
//   4. "today", version 1: --v1-grants M grants, each on a connection of its own (the token alone, no offer;
//      the 48-byte ACTIVE awaited), all held at once, counted the same way; each connect -> ACTIVE timed.
// The baseline server (A, --serve ADDR:PORT) accepts connections (a 12-byte hello in the private data: "SBL1",
// the variant, the number of windows), registers a region of 4 KiB per window with MW_BIND, allocates the type 2
// windows (ibv_alloc_mw) before accepting, keeps 16 receives of 64 bytes posted on a completion channel (as
// rdmad's dispatcher waits), and for each request received, and once at ESTABLISHED (tag 0, as rdmad sends the
// first grant's key), posts exactly what rdmad posts for an ACTIVATE: in one ibv_post_send an IBV_WR_BIND_MW of a
// fresh window over the next 4 KiB of the region (ibv_inc_rkey) and a fenced, signaled, inline 64-byte SEND of
// the answer (wire::EncodeGrantMessage, ACTIVE, the request's tag echoed). Variant "bounds" first registers the
// 4 KiB range (ibv_reg_mr, LOCAL_WRITE | MW_BIND, as rdmad's bounds region on a device that does not enforce a
// window's bounds) and binds the window over that region. It ignores the request's other bytes.
//
// Usage: session_bench --serve 10.0.3.1:7490
//        session_bench --target 10.0.3.1:50051 --baseline 10.0.3.1:7490 [--grants 100] [--v1-grants 20]
//                      [--chunk 10] [--markdown FILE] [--times FILE]
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/client.h"
#include "proto/wire/grant_message.h"
#include "proto/wire/handshake.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace v1 = rdmad::v1;
namespace wire = rdmad::wire;

constexpr size_t kMsg = wire::kSessionMessageSize;  // 64: every message of a session, both ways
constexpr int kClientRecvs = 32;                    // receives the client keeps posted
constexpr int kServerRecvs = 16;                    // the baseline server's (rdmad's credits: 16)
constexpr uint64_t kWindowBytes = 4096;             // each grant's range, each baseline window's
constexpr char kHelloMagic[4] = {'S', 'B', 'L', '1'};
constexpr size_t kHelloSize = 12;  // magic, variant ('P' plain, 'B' bounds), 3 reserved, windows (u32, BE)

double Us(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }

std::string Errno(const char* what) { return absl::StrCat(what, ": ", std::strerror(errno)); }

bool SplitHostPort(const std::string& text, std::string* host, int* port) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) return false;
  *host = text.substr(0, colon);
  return absl::SimpleAtoi(text.substr(colon + 1), port) && *port > 0 && *port < 65536;
}

bool ToSockaddr(const std::string& host, int port, sockaddr_in* sin) {
  *sin = sockaddr_in{};
  sin->sin_family = AF_INET;
  sin->sin_port = htons(static_cast<uint16_t>(port));
  return inet_pton(AF_INET, host.c_str(), &sin->sin_addr) == 1;
}

// The next rdma_cm event on `ch` within `ms` (acknowledged; what is needed copied out).
bool NextCmEvent(rdma_event_channel* ch, int ms, rdma_cm_event_type* type, rdma_cm_id** id, std::string* data,
                 int* status = nullptr) {
  pollfd p{ch->fd, POLLIN, 0};
  if (poll(&p, 1, ms) <= 0) return false;
  rdma_cm_event* ev = nullptr;
  if (rdma_get_cm_event(ch, &ev) != 0) return false;
  *type = ev->event;
  if (id != nullptr) *id = ev->id;
  if (status != nullptr) *status = ev->status;
  if (data != nullptr) {
    data->clear();
    if (ev->param.conn.private_data != nullptr) {
      data->assign(static_cast<const char*>(ev->param.conn.private_data), ev->param.conn.private_data_len);
    }
  }
  rdma_ack_cm_event(ev);
  return true;
}

// ------------------------------------------------------------------------------------------------------------
// The client side: one connection (its own event channel, id, CQ and RC QP; its buffers registered in a PD this
// process shares between its connections). Busy-polls its CQ. One thread.

int g_qps_alive = 0;  // QPs this process made and holds

class Conn {
 public:
  Conn() = default;
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  ~Conn() { Close(); }

  // Resolves, makes the QP, posts the receives, connects with `private_data`; `accept`: the ESTABLISHED
  // private data. `pd`: the process's PD, made on the first connection's device if null.
  std::string Dial(const std::string& host, int port, const std::string& private_data, ibv_pd** pd,
                   std::string* accept) {
    sockaddr_in dst;
    if (!ToSockaddr(host, port, &dst)) return "bad address " + host;
    if ((ch_ = rdma_create_event_channel()) == nullptr) return Errno("rdma_create_event_channel");
    if (rdma_create_id(ch_, &id_, nullptr, RDMA_PS_TCP) != 0) return Errno("rdma_create_id");
    rdma_cm_event_type type;
    int status = 0;
    std::string data;
    if (rdma_resolve_addr(id_, nullptr, reinterpret_cast<sockaddr*>(&dst), 5000) != 0)
      return Errno("rdma_resolve_addr");
    if (!NextCmEvent(ch_, 10000, &type, nullptr, nullptr) || type != RDMA_CM_EVENT_ADDR_RESOLVED) return "resolve addr";
    if (rdma_resolve_route(id_, 5000) != 0) return Errno("rdma_resolve_route");
    if (!NextCmEvent(ch_, 10000, &type, nullptr, nullptr) || type != RDMA_CM_EVENT_ROUTE_RESOLVED)
      return "resolve route";
    if (*pd == nullptr && (*pd = ibv_alloc_pd(id_->verbs)) == nullptr) return Errno("ibv_alloc_pd");
    if ((cq_ = ibv_create_cq(id_->verbs, kClientRecvs + 16, nullptr, nullptr, 0)) == nullptr)
      return Errno("ibv_create_cq");
    if ((mr_ = ibv_reg_mr(*pd, buf_.data(), buf_.size(), IBV_ACCESS_LOCAL_WRITE)) == nullptr)
      return Errno("ibv_reg_mr");
    ibv_qp_init_attr attr{};
    attr.qp_type = IBV_QPT_RC;
    attr.send_cq = attr.recv_cq = cq_;
    attr.cap.max_send_wr = 8;
    attr.cap.max_recv_wr = kClientRecvs;
    attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
    if (rdma_create_qp(id_, *pd, &attr) != 0) return Errno("rdma_create_qp");
    ++g_qps_alive;
    for (int slot = 0; slot < kClientRecvs; ++slot) {
      if (std::string e = PostRecv(slot); !e.empty()) return e;
    }
    rdma_conn_param p{};
    p.private_data = private_data.data();
    p.private_data_len = static_cast<uint8_t>(private_data.size());
    p.responder_resources = 1;
    p.initiator_depth = 1;
    p.retry_count = 6;
    p.rnr_retry_count = 7;
    if (rdma_connect(id_, &p) != 0) return Errno("rdma_connect");
    if (!NextCmEvent(ch_, 30000, &type, nullptr, &data, &status)) return "no answer to the connect request";
    if (type == RDMA_CM_EVENT_REJECTED) {
      absl::StatusOr<wire::Reject> r = wire::DecodeReject(data);
      return r.ok() ? absl::StrCat("rejected: ", wire::RejectReasonName(r->reason), " (", wire::TokenName(r->token_id),
                                   ")")
                    : absl::StrCat("rejected (status ", status, "), not by rdmad");
    }
    if (type != RDMA_CM_EVENT_ESTABLISHED) return absl::StrCat("connect: ", rdma_event_str(type));
    connected_ = true;
    *accept = data;
    return "";
  }

  // Posts a signaled SEND of `bytes` (at most 64) from the send buffer.
  std::string Send(const std::string& bytes) {
    if (std::string e = Room(); !e.empty()) return e;
    std::memcpy(buf_.data() + kSendOffset, bytes.data(), std::min(bytes.size(), kMsg));
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf_.data() + kSendOffset), static_cast<uint32_t>(bytes.size()), mr_->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = kSendWrId;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (int r = ibv_post_send(id_->qp, &wr, &bad); r != 0)
      return absl::StrCat("ibv_post_send(SEND): ", std::strerror(r));
    ++outstanding_;
    return "";
  }

  // The next message received within `ms` (its bytes; the receive posted again); `at`: when its completion was
  // polled.
  std::string Next(int ms, std::string* bytes, Clock::time_point* at = nullptr) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
    while (messages_.empty()) {
      if (std::string e = PollOnce(); !e.empty()) return e;
      if (messages_.empty() && Clock::now() > deadline) return "no message in time";
    }
    *bytes = std::move(messages_.front().first);
    if (at != nullptr) *at = messages_.front().second;
    messages_.pop_front();
    return "";
  }

  // One 64-byte RDMA read through (addr, rkey), waited for.
  std::string Read(uint64_t addr, uint32_t rkey) {
    if (std::string e = Room(); !e.empty()) return e;
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf_.data() + kReadOffset), 64, mr_->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = kReadWrId;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_READ;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = addr;
    wr.wr.rdma.rkey = rkey;
    if (int r = ibv_post_send(id_->qp, &wr, &bad); r != 0)
      return absl::StrCat("ibv_post_send(READ): ", std::strerror(r));
    ++outstanding_;
    read_done_ = false;
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (!read_done_) {
      if (std::string e = PollOnce(); !e.empty()) return e;
      if (!read_done_ && Clock::now() > deadline) return "the read did not complete in time";
    }
    return "";
  }

  void Close() {
    if (id_ != nullptr && connected_) {
      rdma_disconnect(id_);
      rdma_cm_event_type type;
      for (int i = 0; i < 4 && NextCmEvent(ch_, 5000, &type, nullptr, nullptr); ++i) {
        if (type == RDMA_CM_EVENT_DISCONNECTED) break;
      }
      connected_ = false;
    }
    if (id_ != nullptr && id_->qp != nullptr) {
      rdma_destroy_qp(id_);
      --g_qps_alive;
    }
    if (mr_ != nullptr) ibv_dereg_mr(mr_);
    if (cq_ != nullptr) ibv_destroy_cq(cq_);
    if (id_ != nullptr) rdma_destroy_id(id_);
    if (ch_ != nullptr) rdma_destroy_event_channel(ch_);
    mr_ = nullptr;
    cq_ = nullptr;
    id_ = nullptr;
    ch_ = nullptr;
  }

 private:
  static constexpr uint64_t kSendWrId = 1ull << 32, kReadWrId = (1ull << 32) + 1;
  static constexpr size_t kSendOffset = kClientRecvs * kMsg, kReadOffset = kSendOffset + kMsg;

  std::string PostRecv(int slot) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf_.data() + slot * kMsg), static_cast<uint32_t>(kMsg), mr_->lkey};
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = static_cast<uint64_t>(slot);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    if (int r = ibv_post_recv(id_->qp, &wr, &bad); r != 0) return absl::StrCat("ibv_post_recv: ", std::strerror(r));
    return "";
  }

  // Keeps at most 4 of the 8 send slots in use: polls until one is free.
  std::string Room() {
    while (outstanding_ >= 4) {
      if (std::string e = PollOnce(); !e.empty()) return e;
    }
    return "";
  }

  std::string PollOnce() {
    ibv_wc wcs[16];
    const int n = ibv_poll_cq(cq_, 16, wcs);
    if (n < 0) return "ibv_poll_cq failed";
    const auto now = Clock::now();
    for (int i = 0; i < n; ++i) {
      const ibv_wc& wc = wcs[i];
      if (wc.status != IBV_WC_SUCCESS) {
        return absl::StrCat(wc.wr_id == kReadWrId   ? "read"
                            : wc.wr_id == kSendWrId ? "send"
                                                    : "receive",
                            " completion: ", ibv_wc_status_str(wc.status));
      }
      if (wc.wr_id == kSendWrId || wc.wr_id == kReadWrId) {
        --outstanding_;
        if (wc.wr_id == kReadWrId) read_done_ = true;
        continue;
      }
      const int slot = static_cast<int>(wc.wr_id);
      messages_.emplace_back(std::string(buf_.data() + slot * kMsg, std::min<size_t>(wc.byte_len, kMsg)), now);
      if (std::string e = PostRecv(slot); !e.empty()) return e;
    }
    return "";
  }

  rdma_event_channel* ch_ = nullptr;
  rdma_cm_id* id_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_mr* mr_ = nullptr;
  bool connected_ = false;
  int outstanding_ = 0;
  bool read_done_ = false;
  std::array<char, (kClientRecvs + 2) * kMsg> buf_{};
  std::deque<std::pair<std::string, Clock::time_point>> messages_;
};

// ------------------------------------------------------------------------------------------------------------
// The baseline server (guest A). One thread: the rdma_cm channel and one completion channel, in poll(2).

class BaselineServer {
 public:
  int Run(const std::string& host, int port) {
    sockaddr_in sin;
    if (!ToSockaddr(host, port, &sin)) return Fail("bad --serve address " + host);
    if ((ch_ = rdma_create_event_channel()) == nullptr) return Fail(Errno("rdma_create_event_channel"));
    if (rdma_create_id(ch_, &listen_, nullptr, RDMA_PS_TCP) != 0) return Fail(Errno("rdma_create_id"));
    if (rdma_bind_addr(listen_, reinterpret_cast<sockaddr*>(&sin)) != 0) return Fail(Errno("rdma_bind_addr"));
    if (rdma_listen(listen_, 8) != 0) return Fail(Errno("rdma_listen"));
    if (listen_->verbs == nullptr) return Fail("the listening id has no device (is the address on rxe0's netdev?)");
    if ((pd_ = ibv_alloc_pd(listen_->verbs)) == nullptr) return Fail(Errno("ibv_alloc_pd"));
    if ((comp_ = ibv_create_comp_channel(listen_->verbs)) == nullptr) return Fail(Errno("ibv_create_comp_channel"));
    // Async events (a QP's COMM_EST, say) are taken and acknowledged as they come: ibv_destroy_qp waits until
    // every event of its QP has been acknowledged.
    const int flags = fcntl(listen_->verbs->async_fd, F_GETFL);
    if (flags < 0 || fcntl(listen_->verbs->async_fd, F_SETFL, flags | O_NONBLOCK) != 0) return Fail(Errno("fcntl"));
    std::fprintf(stderr, "session_bench: baseline server listening on %s:%d\n", host.c_str(), port);
    for (;;) {
      pollfd p[3] = {{ch_->fd, POLLIN, 0}, {comp_->fd, POLLIN, 0}, {listen_->verbs->async_fd, POLLIN, 0}};
      if (poll(p, 3, -1) < 0) {
        if (errno == EINTR) continue;
        return Fail(Errno("poll"));
      }
      if (p[2].revents & POLLIN) DrainAsyncEvents();
      if (p[0].revents & POLLIN) OnCmEvent();
      if (p[1].revents & POLLIN) OnCompletion();
    }
  }

 private:
  struct Connection {
    rdma_cm_id* id = nullptr;
    bool bounds = false;
    ibv_cq* cq = nullptr;
    std::vector<char> region;  // kWindowBytes per window
    ibv_mr* region_mr = nullptr;
    std::array<char, kServerRecvs * kMsg> recv{};
    ibv_mr* recv_mr = nullptr;
    std::vector<ibv_mw*> windows;
    std::vector<ibv_mr*> bounds_mrs;
    size_t next = 0;  // the next window to bind
    uint64_t errors = 0;
  };

  static int Fail(const std::string& what) {
    std::fprintf(stderr, "session_bench --serve: %s\n", what.c_str());
    return 1;
  }

  void OnCmEvent() {
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(ch_, &ev) != 0) return;
    rdma_cm_id* id = ev->id;
    const rdma_cm_event_type type = ev->event;
    std::string data;
    if (ev->param.conn.private_data != nullptr) {
      data.assign(static_cast<const char*>(ev->param.conn.private_data), ev->param.conn.private_data_len);
    }
    rdma_ack_cm_event(ev);
    if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
      std::string error = Accept(id, data);
      if (!error.empty()) {
        std::fprintf(stderr, "session_bench --serve: refusing a connection: %s\n", error.c_str());
        Teardown(id, /*reject=*/true);
      }
    } else if (type == RDMA_CM_EVENT_ESTABLISHED) {
      auto it = conns_.find(id);
      if (it != conns_.end()) Activate(*it->second, 0);  // the connect request's grant: tag 0
    } else if (type == RDMA_CM_EVENT_DISCONNECTED) {
      auto it = conns_.find(id);
      if (it != conns_.end()) {
        std::fprintf(stderr, "session_bench --serve: a %s connection ended after %zu binds (%llu errors)\n",
                     it->second->bounds ? "bounds" : "plain", it->second->next,
                     static_cast<unsigned long long>(it->second->errors));
      }
      Teardown(id, false);
    }
  }

  std::string Accept(rdma_cm_id* id, const std::string& hello) {
    if (hello.size() < kHelloSize || std::memcmp(hello.data(), kHelloMagic, 4) != 0) return "no hello";
    uint32_t windows_be = 0;
    std::memcpy(&windows_be, hello.data() + 8, 4);
    const uint32_t windows = ntohl(windows_be);
    if (windows == 0 || windows > 100000) return absl::StrCat("bad window count ", windows);
    auto c = std::make_unique<Connection>();
    Connection& conn = *c;
    conns_[id] = std::move(c);
    conn.id = id;
    conn.bounds = hello[4] == 'B';
    if ((conn.cq = ibv_create_cq(id->verbs, 4 * kServerRecvs, &conn, comp_, 0)) == nullptr)
      return Errno("ibv_create_cq");
    if (ibv_req_notify_cq(conn.cq, 0) != 0) return Errno("ibv_req_notify_cq");
    conn.region.assign(windows * kWindowBytes, 'b');
    conn.region_mr = ibv_reg_mr(pd_, conn.region.data(), conn.region.size(),
                                IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND);
    if (conn.region_mr == nullptr) return Errno("ibv_reg_mr (region)");
    if ((conn.recv_mr = ibv_reg_mr(pd_, conn.recv.data(), conn.recv.size(), IBV_ACCESS_LOCAL_WRITE)) == nullptr) {
      return Errno("ibv_reg_mr (receives)");
    }
    for (uint32_t i = 0; i < windows; ++i) {
      ibv_mw* mw = ibv_alloc_mw(pd_, IBV_MW_TYPE_2);
      if (mw == nullptr) return Errno("ibv_alloc_mw");
      conn.windows.push_back(mw);
    }
    ibv_qp_init_attr attr{};
    attr.qp_type = IBV_QPT_RC;
    attr.send_cq = attr.recv_cq = conn.cq;
    attr.cap.max_send_wr = 2 * kServerRecvs;
    attr.cap.max_recv_wr = kServerRecvs;
    attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
    attr.cap.max_inline_data = kMsg;
    if (rdma_create_qp(id, pd_, &attr) != 0) return Errno("rdma_create_qp");
    for (int slot = 0; slot < kServerRecvs; ++slot) {
      if (std::string e = PostRecv(conn, slot); !e.empty()) return e;
    }
    const std::string accept = wire::EncodeAcceptData({wire::kProtocolVersion, kServerRecvs});
    rdma_conn_param p{};
    p.private_data = accept.data();
    p.private_data_len = static_cast<uint8_t>(accept.size());
    p.responder_resources = 1;
    p.initiator_depth = 1;
    p.rnr_retry_count = 7;
    if (rdma_accept(id, &p) != 0) return Errno("rdma_accept");
    std::fprintf(stderr, "session_bench --serve: accepted a %s connection, %u windows\n",
                 conn.bounds ? "bounds" : "plain", windows);
    return "";
  }

  std::string PostRecv(Connection& conn, int slot) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(conn.recv.data() + slot * kMsg), static_cast<uint32_t>(kMsg),
                conn.recv_mr->lkey};
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = kRecvWrId | static_cast<uint64_t>(slot);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    if (int r = ibv_post_recv(conn.id->qp, &wr, &bad); r != 0) return absl::StrCat("ibv_post_recv: ", std::strerror(r));
    return "";
  }

  // What rdmad posts for an ACTIVATE (server/verbs/qp.cc PostBind with a KeyMessage): the bind of a fresh type 2
  // window and, in the same ibv_post_send, the answer's SEND fenced behind it; both signaled.
  void Activate(Connection& conn, uint64_t tag) {
    if (conn.next >= conn.windows.size()) {
      ++conn.errors;
      std::fprintf(stderr, "session_bench --serve: out of windows (%zu)\n", conn.windows.size());
      return;
    }
    const size_t i = conn.next++;
    ibv_mw* mw = conn.windows[i];
    char* addr = conn.region.data() + i * kWindowBytes;
    ibv_mr* mr = conn.region_mr;
    if (conn.bounds) {  // rdmad's bounds region: the window's range registered on its own
      ibv_mr* b = ibv_reg_mr(pd_, addr, kWindowBytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
      if (b == nullptr) {
        ++conn.errors;
        std::fprintf(stderr, "session_bench --serve: %s\n", Errno("ibv_reg_mr (bounds)").c_str());
        return;
      }
      conn.bounds_mrs.push_back(b);
      mr = b;
    }
    const uint32_t rkey = ibv_inc_rkey(mw->rkey);
    ibv_send_wr bind{};
    bind.wr_id = kBindWrId;
    bind.opcode = IBV_WR_BIND_MW;
    bind.send_flags = IBV_SEND_SIGNALED;
    bind.bind_mw.mw = mw;
    bind.bind_mw.rkey = rkey;
    bind.bind_mw.bind_info.mr = mr;
    bind.bind_mw.bind_info.addr = reinterpret_cast<uint64_t>(addr);
    bind.bind_mw.bind_info.length = kWindowBytes;
    bind.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ;
    wire::GrantMessage m;
    m.version = wire::kSessionMessageVersion;
    m.type = wire::GrantMessageType::kActive;
    m.scope = wire::GrantKeyScope::kQp;
    m.grant_id = i + 1;
    m.remote_addr = reinterpret_cast<uint64_t>(addr);
    m.length = kWindowBytes;
    m.rkey = rkey;
    m.access = wire::kGrantRead;
    m.tag = tag;
    const std::string bytes = wire::EncodeGrantMessage(m);
    ibv_sge sge{reinterpret_cast<uintptr_t>(bytes.data()), static_cast<uint32_t>(bytes.size()), 0};
    ibv_send_wr send{};
    send.wr_id = kSendWrId;
    send.opcode = IBV_WR_SEND;
    send.sg_list = &sge;
    send.num_sge = 1;
    send.send_flags = IBV_SEND_INLINE | IBV_SEND_FENCE | IBV_SEND_SIGNALED;
    bind.next = &send;
    ibv_send_wr* bad = nullptr;
    if (int r = ibv_post_send(conn.id->qp, &bind, &bad); r != 0) {
      ++conn.errors;
      std::fprintf(stderr, "session_bench --serve: ibv_post_send(BIND_MW + SEND): %s\n", std::strerror(r));
      return;
    }
    mw->rkey = rkey;
  }

  void OnCompletion() {
    ibv_cq* cq = nullptr;
    void* context = nullptr;
    if (ibv_get_cq_event(comp_, &cq, &context) != 0) return;
    ibv_ack_cq_events(cq, 1);
    Connection& conn = *static_cast<Connection*>(context);
    if (conn.id == nullptr) return;  // torn down: its CQ is not armed again
    ibv_req_notify_cq(cq, 0);
    ibv_wc wcs[16];
    for (;;) {
      const int n = ibv_poll_cq(cq, 16, wcs);
      if (n <= 0) break;
      for (int i = 0; i < n; ++i) {
        const ibv_wc& wc = wcs[i];
        if (wc.status != IBV_WC_SUCCESS) {
          if (wc.status != IBV_WC_WR_FLUSH_ERR) {
            ++conn.errors;
            std::fprintf(stderr, "session_bench --serve: completion %llx: %s\n",
                         static_cast<unsigned long long>(wc.wr_id), ibv_wc_status_str(wc.status));
          }
          continue;
        }
        if ((wc.wr_id & kRecvWrId) == 0) continue;  // a bind's or a SEND's
        const int slot = static_cast<int>(wc.wr_id & ~kRecvWrId);
        uint64_t tag = 0;  // bytes 48-55, big-endian: the only bytes of the request read
        for (int b = 0; b < 8; ++b) tag = tag << 8 | static_cast<uint8_t>(conn.recv[slot * kMsg + 48 + b]);
        if (std::string e = PostRecv(conn, slot); !e.empty()) {
          ++conn.errors;
          std::fprintf(stderr, "session_bench --serve: %s\n", e.c_str());
        }
        Activate(conn, tag);
      }
    }
  }

  void DrainAsyncEvents() {
    ibv_async_event ev;
    while (ibv_get_async_event(listen_->verbs, &ev) == 0) ibv_ack_async_event(&ev);
  }

  void Teardown(rdma_cm_id* id, bool reject) {
    if (reject) rdma_reject(id, nullptr, 0);
    DrainAsyncEvents();
    auto it = conns_.find(id);
    Connection* c = it == conns_.end() ? nullptr : it->second.get();
    // The windows first: on rxe a type 2 window bound on a QP holds that QP, whose destruction waits for it.
    if (c != nullptr) {
      for (ibv_mw* mw : c->windows) ibv_dealloc_mw(mw);
      for (ibv_mr* mr : c->bounds_mrs) ibv_dereg_mr(mr);
      c->windows.clear();
      c->bounds_mrs.clear();
    }
    if (id->qp != nullptr) rdma_destroy_qp(id);
    if (c != nullptr) {
      if (c->region_mr != nullptr) ibv_dereg_mr(c->region_mr);
      if (c->recv_mr != nullptr) ibv_dereg_mr(c->recv_mr);
      c->region_mr = c->recv_mr = nullptr;
      c->id = nullptr;
      // The CQ stays until the process ends: the flushed receives of the dead QP raise a completion event that
      // may still be on its way to the channel, and ibv_destroy_cq waits for every event to be acknowledged.
      // OnCompletion acknowledges it (and polls nothing more from a connection without its id).
      graveyard_.push_back(std::move(it->second));
      conns_.erase(it);
    }
    rdma_destroy_id(id);
  }

  static constexpr uint64_t kRecvWrId = 1ull << 63, kBindWrId = 1, kSendWrId = 2;
  rdma_event_channel* ch_ = nullptr;
  rdma_cm_id* listen_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* comp_ = nullptr;
  std::map<rdma_cm_id*, std::unique_ptr<Connection>> conns_;
  std::vector<std::unique_ptr<Connection>> graveyard_;  // torn down, their CQs kept (Teardown)
};

// ------------------------------------------------------------------------------------------------------------
// The measuring client (guest B).

struct Key {
  uint64_t addr = 0;
  uint32_t rkey = 0;
};

// One connection carrying grants one after the other: rdmad's session, or a baseline connection.
struct Session {
  std::string name;
  Conn conn;
  std::vector<Key> keys;   // by tag
  std::vector<double> us;  // per activation after the first
  std::string error;
};

// Waits for the answer to tag `tag` (version 2, ACTIVE), records its key. `sent`: the SEND's post time.
std::string AwaitActive(Session& s, uint64_t tag, Clock::time_point sent, bool timed) {
  std::string bytes;
  Clock::time_point at;
  for (;;) {
    if (std::string e = s.conn.Next(30000, &bytes, &at); !e.empty()) return absl::StrCat("tag ", tag, ": ", e);
    absl::StatusOr<wire::GrantMessage> m = wire::DecodeGrantMessage(bytes);
    if (!m.ok()) return absl::StrCat("tag ", tag, ": ", m.status().message());
    if (m->version < wire::kSessionMessageVersion)
      return absl::StrCat("tag ", tag, ": a version ", m->version, " message");
    if (m->type == wire::GrantMessageType::kEnded && m->tag != tag) continue;  // another grant's end: not expected
    if (m->tag != tag) return absl::StrCat("tag ", tag, ": an answer with tag ", m->tag);
    if (m->type != wire::GrantMessageType::kActive) {
      return absl::StrCat("tag ", tag, ": ", wire::GrantMessageTypeName(m->type), " reason ",
                          m->type == wire::GrantMessageType::kRefused
                              ? wire::RejectReasonName(static_cast<wire::RejectReason>(m->reason))
                              : wire::GrantEndReasonName(m->reason));
    }
    if (timed) s.us.push_back(Us(sent, at));
    if (s.keys.size() <= tag) s.keys.resize(tag + 1);
    s.keys[tag] = Key{m->remote_addr, m->rkey};
    return "";
  }
}

std::string OpenSession(Session& s, const std::string& host, int port, const std::string& private_data, ibv_pd** pd) {
  std::string accept;
  if (std::string e = s.conn.Dial(host, port, private_data, pd, &accept); !e.empty()) return "connect: " + e;
  const wire::AcceptData a = wire::DecodeAcceptData(accept);
  if (a.version < wire::kSessionMessageVersion) {
    return absl::StrCat("the accept says protocol version ", a.version, ": no session");
  }
  return AwaitActive(s, 0, Clock::now(), false);
}

// ACTIVATE with `token` and `tag`, timed to its answer.
std::string ActivateOne(Session& s, const std::string& token, uint64_t tag) {
  wire::GrantMessage m;
  m.version = wire::kSessionMessageVersion;
  m.type = wire::GrantMessageType::kActivate;
  m.tag = tag;
  m.token = token;
  const std::string bytes = wire::EncodeGrantMessage(m);
  const auto sent = Clock::now();
  if (std::string e = s.conn.Send(bytes); !e.empty()) return absl::StrCat("tag ", tag, ": ", e);
  return AwaitActive(s, tag, sent, true);
}

struct Percentiles {
  size_t n = 0;
  double p50 = 0, p90 = 0, p99 = 0, mean = 0, min = 0, max = 0;
};
Percentiles Summarize(std::vector<double> v) {
  Percentiles p;
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto at = [&v](double q) {
    return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
  };
  p.n = v.size();
  p.p50 = at(0.5);
  p.p90 = at(0.9);
  p.p99 = at(0.99);
  p.min = v.front();
  p.max = v.back();
  double sum = 0;
  for (double x : v) sum += x;
  p.mean = sum / static_cast<double>(v.size());
  return p;
}

// The QPs of this process in the kernel's resource tracking (`rdma resource show qp`, the lines naming our
// pid); -1 if the tool did not answer.
int KernelQps() {
  std::FILE* f = popen("rdma resource show qp 2>/dev/null", "r");
  if (f == nullptr) return -1;
  const std::string mine = absl::StrCat(" pid ", getpid(), " ");
  int n = 0;
  bool any = false;
  char line[1024];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    any = true;
    std::string l(line);
    if (!l.empty() && l.back() == '\n') l.back() = ' ';
    if (l.find(mine) != std::string::npos) ++n;
  }
  const int rc = pclose(f);
  return rc == 0 || any ? n : -1;
}

struct Held {
  size_t grants_active = 0, grant_connections = 0;  // rdmad: active grants on the region, distinct cm ids they are on
  int rdmad_connections = -1;                       // rdmad's data-plane CM ids on the PD, connected
  int kernel_qps = -1, made_qps = 0;                // this process
};

Held Count(rdmad::client::Client& a, const std::string& pd, const std::string& mr) {
  Held h;
  h.kernel_qps = KernelQps();
  h.made_qps = g_qps_alive;
  if (absl::StatusOr<v1::ListCmIdsResponse> ids = a.ListCmIds(); ids.ok()) {
    h.rdmad_connections = 0;
    for (const v1::CmId& id : ids->cm_ids()) {
      if (id.data_plane() && id.pd() == pd && id.state() == v1::CM_CONNECTED) ++h.rdmad_connections;
    }
  } else {
    std::fprintf(stderr, "session_bench: ListCmIds: %s\n", ids.status().ToString().c_str());
  }
  if (absl::StatusOr<v1::ListGrantsResponse> gs = a.ListGrants(mr); gs.ok()) {
    std::set<std::string> cm_ids;
    for (const v1::Grant& g : gs->grants()) {
      if (g.state() != v1::GRANT_ACTIVE) continue;
      ++h.grants_active;
      cm_ids.insert(g.cm_id());
    }
    h.grant_connections = cm_ids.size();
  } else {
    std::fprintf(stderr, "session_bench: ListGrants: %s\n", gs.status().ToString().c_str());
  }
  return h;
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "session_bench: %s\n", what.c_str());
  std::exit(1);
}

std::vector<v1::IssuedGrant> Issue(rdmad::client::Client& a, const std::string& mr, int n) {
  std::vector<v1::IssuedGrant> out;
  for (int first = 0; first < n; first += 1000) {
    v1::IssueGrantsRequest req;
    for (int i = first; i < std::min(n, first + 1000); ++i) {
      v1::IssueGrantRequest* g = req.add_grants();
      g->set_mr(mr);
      g->set_offset(static_cast<uint64_t>(i) * kWindowBytes);
      g->set_length(kWindowBytes);
      g->add_access(v1::REMOTE_READ);
      g->set_ttl_ms(1800000);
      g->set_principal("session-bench");
    }
    absl::StatusOr<v1::IssueGrantsResponse> r = a.IssueGrants(req);
    if (!r.ok()) Die("IssueGrants: " + r.status().ToString());
    for (const v1::IssuedGrant& g : r->grants()) out.push_back(g);
  }
  return out;
}

std::string Hello(char variant, uint32_t windows) {
  std::string h(kHelloMagic, 4);
  h.push_back(variant);
  h.append(3, '\0');
  const uint32_t be = htonl(windows);
  h.append(reinterpret_cast<const char*>(&be), 4);
  return h;
}

std::string Cell(double v) { return absl::StrFormat("%.0f", v); }
std::string Ratio(double a, double b) { return b > 0 ? absl::StrFormat("%.2fx", a / b) : "n/a"; }
std::string CountCell(int v) { return v < 0 ? "n/a" : std::to_string(v); }

int RunClient(const std::string& target, const std::string& baseline, int grants, int v1_grants, int chunk,
              const std::string& markdown, const std::string& times_file) {
  std::string base_host;
  int base_port = 0;
  if (!SplitHostPort(baseline, &base_host, &base_port)) Die("--baseline: HOST:PORT, not " + baseline);
  if (grants < 2) Die("--grants: at least 2");
  rdmad::client::Client::Options o;
  o.target = target;
  o.timeout = std::chrono::seconds(120);
  rdmad::client::Client a(o);
  v1::CreatePdRequest pd_req;
  pd_req.set_device("rxe0");
  pd_req.set_label("session-bench");
  // Whether rdmad binds each window over a bounds region of its own on this device (rxe: yes, unless its
  // mw_bounds_region is "never").
  std::string bounds_mode = "n/a";
  if (absl::StatusOr<v1::Device> dev = a.GetDevice("devices/rxe0"); dev.ok()) {
    bounds_mode = dev->caps().mw_bounds_region() ? "with" : "without";
  }
  absl::StatusOr<v1::ProtectionDomain> pd = a.CreatePd(pd_req);
  if (!pd.ok()) Die("CreatePd: " + pd.status().ToString());
  v1::RegisterMrRequest mr_req;
  mr_req.set_pd(pd->name());
  mr_req.mutable_source()->mutable_anonymous()->set_size(
      std::max<uint64_t>(static_cast<uint64_t>(std::max(grants, v1_grants)) * kWindowBytes, 65536));
  mr_req.add_access(v1::LOCAL_WRITE);
  mr_req.add_access(v1::REMOTE_READ);
  mr_req.add_access(v1::MW_BIND);
  absl::StatusOr<v1::MemoryRegion> mr = a.RegisterMr(mr_req);
  if (!mr.ok()) Die("RegisterMr: " + mr.status().ToString());
  auto cleanup = [&] {
    (void)a.DeregisterMr(mr->name(), /*revoke_grants=*/true);
    (void)a.DeletePd(pd->name(), true, true);
  };

  // 1. N grants; the session and the two baseline connections.
  const std::vector<v1::IssuedGrant> issued = Issue(a, mr->name(), grants);
  if (issued.empty() || issued[0].endpoints().empty()) Die("IssueGrants: no grants, or no data-plane endpoint");
  const std::string listener_host = issued[0].endpoints(0).address();
  const int listener_port = static_cast<int>(issued[0].endpoints(0).port());
  ibv_pd* local_pd = nullptr;
  Session rdmad_s, plain_s, bounds_s;
  rdmad_s.name = "rdmad";
  plain_s.name = "plain";
  bounds_s.name = "bounds";
  if (std::string e = OpenSession(rdmad_s, listener_host, listener_port,
                                  wire::EncodeConnectRequest(issued[0].token(), wire::kProtocolVersion), &local_pd);
      !e.empty()) {
    cleanup();
    Die(absl::StrCat("the session to rdmad's listener ", listener_host, ":", listener_port, ": ", e));
  }
  for (Session* s : {&plain_s, &bounds_s}) {
    std::string e = "not tried";
    for (int attempt = 0; attempt < 60 && !e.empty(); ++attempt) {  // the server may not be listening yet
      if (attempt > 0) {
        s->conn.Close();
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
      }
      e = OpenSession(*s, base_host, base_port, Hello(s == &plain_s ? 'P' : 'B', static_cast<uint32_t>(grants)),
                      &local_pd);
    }
    if (!e.empty()) {
      cleanup();
      Die(absl::StrCat("the baseline server at ", baseline, " (", s->name, "): ", e));
    }
  }
  std::printf("session_bench: %d grants on %s; a session to rdmad at %s:%d and two baseline connections to %s\n",
              grants, mr->name().c_str(), listener_host.c_str(), listener_port, baseline.c_str());
  std::fflush(stdout);

  // 2. The activations, the three connections taking turns by chunks.
  const std::string no_token(wire::kTokenSize, '\0');  // the baseline reads only the tag
  Session* order[3] = {&rdmad_s, &plain_s, &bounds_s};
  int round = 0;
  for (int first = 1; first < grants; first += chunk, ++round) {
    const int last = std::min(grants, first + chunk);
    for (int k = 0; k < 3; ++k) {
      Session& s = *order[(k + round) % 3];
      for (int tag = first; tag < last; ++tag) {
        const std::string& token = &s == &rdmad_s ? issued[tag].token() : no_token;
        if (std::string e = ActivateOne(s, token, static_cast<uint64_t>(tag)); !e.empty()) {
          cleanup();
          Die(absl::StrCat(s.name, ": activation: ", e));
        }
      }
    }
  }

  // 3. Every key read once; the baseline connections closed; what the session holds, counted.
  for (Session* s : {&rdmad_s, &plain_s, &bounds_s}) {
    for (size_t tag = 0; tag < s->keys.size(); ++tag) {
      if (std::string e = s->conn.Read(s->keys[tag].addr, s->keys[tag].rkey); !e.empty()) {
        cleanup();
        Die(absl::StrCat(s->name, ": reading 64 bytes through the key of tag ", tag, ": ", e));
      }
    }
  }
  std::printf("session_bench: read 64 bytes through each of the %zu keys of each connection\n", rdmad_s.keys.size());
  plain_s.conn.Close();
  bounds_s.conn.Close();
  const Held after = Count(a, pd->name(), mr->name());
  rdmad_s.conn.Close();  // rdmad ends every grant of the session (DISCONNECTED)

  // 4. Version 1: a connection per grant, all held at once.
  std::vector<double> v1_us;
  Held today;
  if (v1_grants > 0) {
    for (int i = 0; i < 200; ++i) {  // the session's grants ending (their windows invalidated) first
      absl::StatusOr<v1::ListGrantsResponse> gs = a.ListGrants(mr->name());
      if (!gs.ok() || std::none_of(gs->grants().begin(), gs->grants().end(),
                                   [](const v1::Grant& g) { return g.state() == v1::GRANT_ACTIVE; })) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    const std::vector<v1::IssuedGrant> v1_issued = Issue(a, mr->name(), v1_grants);
    std::vector<std::unique_ptr<Conn>> conns;
    for (const v1::IssuedGrant& g : v1_issued) {
      auto c = std::make_unique<Conn>();
      std::string accept, bytes;
      const auto t0 = Clock::now();
      std::string e = c->Dial(listener_host, listener_port, g.token(), &local_pd, &accept);
      Clock::time_point at;
      if (e.empty()) e = c->Next(30000, &bytes, &at);
      absl::StatusOr<wire::GrantMessage> m =
          e.empty() ? wire::DecodeGrantMessage(bytes) : absl::StatusOr<wire::GrantMessage>(absl::UnknownError(e));
      if (!m.ok() || m->type != wire::GrantMessageType::kActive || bytes.size() != wire::kGrantMessageSize) {
        cleanup();
        Die(absl::StrCat("version 1, ", g.grant().name(), ": ",
                         m.ok() ? absl::StrCat(wire::GrantMessageTypeName(m->type), ", ", bytes.size(), " bytes")
                                : std::string(m.status().message())));
      }
      v1_us.push_back(Us(t0, at));
      if (std::string r = c->Read(m->remote_addr, m->rkey); !r.empty()) {
        cleanup();
        Die(absl::StrCat("version 1, ", g.grant().name(), ": reading 64 bytes: ", r));
      }
      conns.push_back(std::move(c));
    }
    today = Count(a, pd->name(), mr->name());
    conns.clear();
  }
  cleanup();
  if (local_pd != nullptr) ibv_dealloc_pd(local_pd);

  // The figures.
  const Percentiles r = Summarize(rdmad_s.us), p = Summarize(plain_s.us), b = Summarize(bounds_s.us),
                    c1 = Summarize(v1_us);
  utsname uts{};
  uname(&uts);
  std::string md = absl::StrFormat(
      "Measured %s, %s, %ld vCPUs per guest, two guests on the harness's wire; %d grants of 4 KiB activated one at "
      "a time on each of three connections (rdmad's session, the baseline's two), %d timed on each (all but the "
      "connect request's), the connections taking turns by %d; rdmad binds %s a bounds region per window; %d grants "
      "the version 1 way\n\n",
      absl::FormatTime("%Y-%m-%d", absl::Now(), absl::UTCTimeZone()), uts.release, sysconf(_SC_NPROCESSORS_ONLN),
      grants, grants - 1, chunk, bounds_mode, v1_grants);
  absl::StrAppend(&md,
                  "| activating a grant on a connection (client: post of the ACTIVATE -> receive completion of its "
                  "answer) | n | p50 (us) | p90 (us) | p99 (us) | mean (us) | min (us) | max (us) |\n"
                  "| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  auto row = [&md](const std::string& what, const Percentiles& s) {
    absl::StrAppend(&md, "| ", what, " | ", s.n, " | ", Cell(s.p50), " | ", Cell(s.p90), " | ", Cell(s.p99), " | ",
                    Cell(s.mean), " | ", Cell(s.min), " | ", Cell(s.max), " |\n");
  };
  row("rdmad, a session (version 2): token check, grant, type 2 bind (over its bounds region), the ACTIVE fenced "
      "behind it",
      r);
  row("baseline: type 2 bind + fenced SEND", p);
  row("baseline: bounds `ibv_reg_mr` + type 2 bind + fenced SEND", b);
  if (v1_grants > 0) row("version 1, for comparison: a connection per grant, connect -> its ACTIVE", c1);
  absl::StrAppend(&md, "\n| ratio | p50 | p90 |\n| --- | --- | --- |\n");
  absl::StrAppend(&md, "| rdmad / baseline bind + SEND (goal <= 1.2) | ", Ratio(r.p50, p.p50), " | ",
                  Ratio(r.p90, p.p90), " |\n");
  absl::StrAppend(&md, "| rdmad / baseline bounds `ibv_reg_mr` + bind + SEND | ", Ratio(r.p50, b.p50), " | ",
                  Ratio(r.p90, b.p90), " |\n");
  absl::StrAppend(&md,
                  "\n| grants held at once | how | rdmad's data-plane connections | connections the grants are on | "
                  "QPs of the client (`rdma resource show qp`) | QPs the client made |\n"
                  "| --- | --- | --- | --- | --- | --- |\n");
  auto held = [&md](int n, const char* how, const Held& h) {
    absl::StrAppend(&md, "| ", n, " (", h.grants_active, " active) | ", how, " | ", CountCell(h.rdmad_connections),
                    " | ", h.grant_connections, " | ", CountCell(h.kernel_qps), " | ", h.made_qps, " |\n");
  };
  if (v1_grants > 0) held(v1_grants, "today: version 1, a connection per grant", today);
  held(grants, "after: version 2, one session", after);

  std::printf("\n%s", md.c_str());
  std::fflush(stdout);
  if (!markdown.empty()) {
    std::FILE* f = std::fopen(markdown.c_str(), "w");
    if (f == nullptr) Die("cannot write " + markdown);
    std::fputs(md.c_str(), f);
    std::fclose(f);
  }
  if (!times_file.empty()) {
    std::FILE* f = std::fopen(times_file.c_str(), "w");
    if (f == nullptr) Die("cannot write " + times_file);
    std::fprintf(f, "# activation tag, then us: rdmad session, baseline bind + SEND, baseline bounds + bind + SEND\n");
    for (size_t i = 0; i < rdmad_s.us.size(); ++i) {
      std::fprintf(f, "%zu %.1f %.1f %.1f\n", i + 1, rdmad_s.us[i], i < plain_s.us.size() ? plain_s.us[i] : -1.0,
                   i < bounds_s.us.size() ? bounds_s.us[i] : -1.0);
    }
    std::fclose(f);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"grants activated over a session beside a plain bind + SEND server (prints figures, judges nothing)"};
  std::string serve, target = "10.0.3.1:50051", baseline = "10.0.3.1:7490", markdown, times;
  int grants = 100, v1_grants = 20, chunk = 10;
  app.add_option("--serve", serve, "run the baseline server on ADDR:PORT (guest A) instead of measuring");
  app.add_option("--target", target, "rdmad A's gRPC address");
  app.add_option("--baseline", baseline, "the baseline server (session_bench --serve in A)");
  app.add_option("--grants", grants, "grants activated over one session (and baseline binds per connection)");
  app.add_option("--v1-grants", v1_grants, "grants opened the version 1 way, a connection each (0: none)");
  app.add_option("--chunk", chunk, "activations per connection before the next connection's turn");
  app.add_option("--markdown", markdown, "also write the tables to this file");
  app.add_option("--times", times, "write every activation's time to this file");
  CLI11_PARSE(app, argc, argv);
  if (!serve.empty()) {
    std::string host;
    int port = 0;
    if (!SplitHostPort(serve, &host, &port)) {
      std::fprintf(stderr, "session_bench: --serve: HOST:PORT, not %s\n", serve.c_str());
      return 2;
    }
    return BaselineServer().Run(host, port);
  }
  if (chunk < 1) chunk = 1;
  return RunClient(target, baseline, grants, v1_grants, chunk, markdown, times);
}
