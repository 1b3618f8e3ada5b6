#include "tests/bench/first_byte.h"

#include <arpa/inet.h>
#include <poll.h>
#include <rdma/rdma_cma.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>

#include "client/remote_region.h"
#include "tests/bench/stats.h"

namespace rdmad::bench {
namespace {

using Clock = std::chrono::steady_clock;
namespace v1 = rdmad::v1;

constexpr int kBaselinePort = 7472;

double UsSince(Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count(); }

struct Key {
  uint64_t addr;
  uint32_t rkey;
} __attribute__((packed));

// The next event on `ch` within `ms` (acknowledged; its type, status and private data copied out).
bool NextEvent(rdma_event_channel* ch, int ms, rdma_cm_event_type* type, rdma_cm_id** id, std::string* data) {
  pollfd p{ch->fd, POLLIN, 0};
  if (poll(&p, 1, ms) <= 0) return false;
  rdma_cm_event* ev = nullptr;
  if (rdma_get_cm_event(ch, &ev) != 0) return false;
  *type = ev->event;
  if (id) *id = ev->id;
  if (data && ev->param.conn.private_data) {
    data->assign(static_cast<const char*>(ev->param.conn.private_data), ev->param.conn.private_data_len);
  }
  rdma_ack_cm_event(ev);
  return true;
}

// The plain librdmacm server: accepts every connection with the key of its 4 KiB region, tears each down on
// DISCONNECTED. Its thread owns every id it accepts.
class PlainServer {
 public:
  std::string Start(const std::string& addr) {
    if (!(ch_ = rdma_create_event_channel())) return "rdma_create_event_channel failed";
    if (rdma_create_id(ch_, &listen_, nullptr, RDMA_PS_TCP) != 0) return "rdma_create_id failed";
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_port = htons(kBaselinePort);
    if (inet_pton(AF_INET, addr.c_str(), &sin.sin_addr) != 1) return "bad --baseline-addr " + addr;
    if (rdma_bind_addr(listen_, reinterpret_cast<sockaddr*>(&sin)) != 0) return "rdma_bind_addr: " + addr;
    if (rdma_listen(listen_, 16) != 0) return "rdma_listen failed";
    if (!listen_->verbs || !(pd_ = ibv_alloc_pd(listen_->verbs))) return "ibv_alloc_pd failed";
    if (!(mr_ = ibv_reg_mr(pd_, buf_, sizeof buf_, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ))) {
      return "ibv_reg_mr failed";
    }
    thread_ = std::thread([this] { Loop(); });
    return "";
  }
  ~PlainServer() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (mr_) ibv_dereg_mr(mr_);
    if (pd_) ibv_dealloc_pd(pd_);
    if (listen_) rdma_destroy_id(listen_);
    if (ch_) rdma_destroy_event_channel(ch_);
  }

 private:
  void Loop() {
    while (!stop_) {
      rdma_cm_event_type type;
      rdma_cm_id* id = nullptr;
      if (!NextEvent(ch_, 100, &type, &id, nullptr)) continue;
      if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
        ibv_qp_init_attr attr{};
        attr.qp_type = IBV_QPT_RC;
        attr.cap.max_send_wr = attr.cap.max_recv_wr = 1;
        attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
        Key key{reinterpret_cast<uint64_t>(buf_), mr_->rkey};
        rdma_conn_param p{};
        p.private_data = &key;
        p.private_data_len = sizeof key;
        p.responder_resources = 1;
        p.initiator_depth = 1;
        if (rdma_create_qp(id, pd_, &attr) != 0 || rdma_accept(id, &p) != 0) {
          if (id->qp) rdma_destroy_qp(id);
          rdma_destroy_id(id);
        }
      } else if (type == RDMA_CM_EVENT_DISCONNECTED) {
        rdma_destroy_qp(id);
        rdma_destroy_id(id);
      }
    }
  }

  rdma_event_channel* ch_ = nullptr;
  rdma_cm_id* listen_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_mr* mr_ = nullptr;
  char buf_[4096] = {};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// One baseline sample: connect, read 64 bytes, (untimed) disconnect and free. Returns us, or < 0 with *error.
double PlainFirstByte(const std::string& addr, std::string* error) {
  rdma_event_channel* ch = rdma_create_event_channel();
  rdma_cm_id* id = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_mr* mr = nullptr;
  char buf[64];
  double us = -1;
  const auto t = Clock::now();
  auto step = [&](bool ok, const char* what) {
    if (!ok) *error = std::string("baseline: ") + what;
    return ok;
  };
  auto expect = [&](rdma_cm_event_type want, std::string* data) {
    rdma_cm_event_type type;
    return NextEvent(ch, 10000, &type, nullptr, data) && type == want;
  };
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(kBaselinePort);
  inet_pton(AF_INET, addr.c_str(), &dst.sin_addr);
  std::string data;
  bool ok = step(ch && rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP) == 0, "rdma_create_id") &&
            step(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 5000) == 0 &&
                     expect(RDMA_CM_EVENT_ADDR_RESOLVED, nullptr), "resolve addr") &&
            step(rdma_resolve_route(id, 5000) == 0 && expect(RDMA_CM_EVENT_ROUTE_RESOLVED, nullptr), "resolve route") &&
            step((pd = ibv_alloc_pd(id->verbs)) != nullptr, "ibv_alloc_pd") &&
            step((cq = ibv_create_cq(id->verbs, 4, nullptr, nullptr, 0)) != nullptr, "ibv_create_cq") &&
            step((mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE)) != nullptr, "ibv_reg_mr");
  if (ok) {
    ibv_qp_init_attr attr{};
    attr.qp_type = IBV_QPT_RC;
    attr.send_cq = attr.recv_cq = cq;
    attr.cap.max_send_wr = attr.cap.max_recv_wr = 1;
    attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
    rdma_conn_param p{};
    p.responder_resources = 1;
    p.initiator_depth = 1;
    p.retry_count = 7;
    ok = step(rdma_create_qp(id, pd, &attr) == 0, "rdma_create_qp") &&
         step(rdma_connect(id, &p) == 0 && expect(RDMA_CM_EVENT_ESTABLISHED, &data) && data.size() >= sizeof(Key),
              "connect (ESTABLISHED with the key)");
  }
  if (ok) {
    Key key;
    std::memcpy(&key, data.data(), sizeof key);
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf), sizeof buf, mr->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = 1;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_READ;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = key.addr;
    wr.wr.rdma.rkey = key.rkey;
    ok = step(ibv_post_send(id->qp, &wr, &bad) == 0, "ibv_post_send(RDMA_READ)");
    ibv_wc wc{};
    int n = 0;
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (ok && n == 0 && Clock::now() < deadline) n = ibv_poll_cq(cq, 1, &wc);
    ok = ok && step(n == 1 && wc.status == IBV_WC_SUCCESS, "the read's completion");
    if (ok) us = UsSince(t);
    rdma_disconnect(id);
    expect(RDMA_CM_EVENT_DISCONNECTED, nullptr);
  }
  if (id && id->qp) rdma_destroy_qp(id);
  if (mr) ibv_dereg_mr(mr);
  if (cq) ibv_destroy_cq(cq);
  if (pd) ibv_dealloc_pd(pd);
  if (id) rdma_destroy_id(id);
  if (ch) rdma_destroy_event_channel(ch);
  return us;
}

}  // namespace

FirstByteFigures MeasureFirstByte(client::Client* rdmad, const std::function<double()>& noop,
                                  const std::string& noop_name, const std::string& pd,
                                  const std::string& baseline_addr, int iters) {
  FirstByteFigures f;
  f.noop_name = noop_name;
  PlainServer server;
  if (baseline_addr.empty()) return f.error = "--baseline-addr is required", f;
  if (std::string e = server.Start(baseline_addr); !e.empty()) return f.error = "baseline server: " + e, f;
  v1::RegisterMrRequest mreq;
  mreq.set_pd(pd);
  mreq.mutable_source()->mutable_anonymous()->set_size(64 * 1024);
  mreq.add_access(v1::LOCAL_WRITE);
  mreq.add_access(v1::REMOTE_READ);
  mreq.add_access(v1::MW_BIND);
  absl::StatusOr<v1::MemoryRegion> mr = rdmad->RegisterMr(mreq);
  if (!mr.ok()) return f.error = "RegisterMr: " + mr.status().ToString(), f;
  char buf[64];
  for (int i = -1; i < iters; ++i) {  // one warm-up sample
    const bool keep = i >= 0;
    const double noop_us = noop();  // exits the benchmark if the call fails
    if (keep) f.noop.push_back(noop_us);
    std::string error;
    const double plain = PlainFirstByte(baseline_addr, &error);
    if (plain < 0) return f.error = error, f;
    if (keep) f.baseline.push_back(plain);

    v1::IssueGrantRequest req;
    req.set_mr(mr->name());
    req.set_length(64);
    req.add_access(v1::REMOTE_READ);
    req.set_ttl_ms(60000);
    req.set_principal("control-bench");
    client::RemoteRegion::Options o;
    o.queue_depth = 1;
    o.max_read_bytes = 64;
    o.connect_timeout = absl::Seconds(30);
    const auto t0 = Clock::now();
    absl::StatusOr<v1::IssuedGrant> g = rdmad->IssueGrant(req);
    if (!g.ok()) return f.error = "IssueGrant: " + g.status().ToString(), f;
    const auto t1 = Clock::now();
    auto region = client::RemoteRegion::Open(*g, o);
    if (!region.ok()) return f.error = "RemoteRegion::Open: " + region.status().ToString(), f;
    const auto t2 = Clock::now();
    if (absl::Status s = (*region)->Read(0, 64, buf); !s.ok()) return f.error = "first read: " + s.ToString(), f;
    const auto t3 = Clock::now();
    auto us = [](Clock::time_point a, Clock::time_point b) {
      return std::chrono::duration<double, std::micro>(b - a).count();
    };
    if (keep) {
      f.issue.push_back(us(t0, t1));
      f.open.push_back(us(t1, t2));
      f.read.push_back(us(t2, t3));
      f.total.push_back(us(t0, t3));
    }
    (void)rdmad->RevokeGrant(g->grant().name());
    region->reset();
  }
  (void)rdmad->DeregisterMr(mr->name(), /*revoke_grants=*/true);
  return f;
}

void PrintFirstByte(const FirstByteFigures& f, std::FILE* out) {
  const Stats total = Summarize(f.total), base = Summarize(f.baseline);
  std::vector<double> extra;  // paired per sample, as in control_bench's table
  for (size_t i = 0; i < f.total.size() && i < f.noop.size(); ++i) extra.push_back(f.total[i] - f.noop[i]);
  const double median_extra = Summarize(extra).p50;
  std::fprintf(out, "\nIssueGrant -> first byte read (64 B), %zu samples:\n\n", total.n);
  std::fprintf(out, "| step | p50 | p99 |\n| --- | --- | --- |\n");
  auto line = [out](const char* what, const std::vector<double>& v) {
    const Stats s = Summarize(v);
    std::fprintf(out, "| %s | %.0f us | %.0f us |\n", what, s.p50, s.p99);
  };
  line("IssueGrant -> first byte, of which", f.total);
  line("&nbsp;&nbsp;the IssueGrant RPC", f.issue);
  line("&nbsp;&nbsp;RemoteRegion::Open (rdma_cm connect, token check, type 2 bind, the key's SEND)", f.open);
  line("&nbsp;&nbsp;the first read", f.read);
  line("baseline: plain librdmacm connect (key in the accept) + first read", f.baseline);
  line(("no-op RPC (" + f.noop_name + ")").c_str(), f.noop);
  std::fprintf(out, "\n(total - no-op) / baseline: %.0f us / %.0f us = %.2fx (goal <= 1.2)\n", median_extra, base.p50,
              base.p50 > 0 ? median_extra / base.p50 : 0);
  std::fflush(out);
}

}  // namespace rdmad::bench
