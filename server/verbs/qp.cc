#include "server/verbs/qp.h"

#include <rdma/rdma_cma.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <random>

#include "absl/strings/str_cat.h"
#include "server/common/log.h"
#include "server/common/status.h"
#include "server/verbs/device.h"
#include "server/verbs/gid.h"
#include "server/verbs/mr.h"
#include "server/verbs/mw.h"

namespace rdmad::verbs {
namespace {

constexpr int kCqDepth = 16;  // the least CQ: twice the default send depth
constexpr int kSendDepth = 8;  // a QP's from Create (CmQpOptions' default too)
constexpr int kPollBatch = 16;  // completions taken per ibv_poll_cq
// A receive's wr_id: this bit and the slot. Send wr_ids count up from 1 and never reach it.
constexpr uint64_t kReceiveWrId = 1ull << 63;
constexpr uint8_t kMinRnrTimer = 12;
constexpr uint8_t kTimeout = 14;  // 4.096 us * 2^14 = 67 ms
constexpr uint8_t kRetries = 7;

fabric::QpState FromIbv(ibv_qp_state s) {
  switch (s) {
    case IBV_QPS_RESET: return fabric::QpState::kReset;
    case IBV_QPS_INIT: return fabric::QpState::kInit;
    case IBV_QPS_RTR: return fabric::QpState::kRtr;
    case IBV_QPS_RTS: return fabric::QpState::kRts;
    case IBV_QPS_SQD: return fabric::QpState::kSqd;
    case IBV_QPS_SQE: return fabric::QpState::kSqe;
    case IBV_QPS_ERR: return fabric::QpState::kError;
    default: return fabric::QpState::kUnknown;
  }
}

uint32_t RandomPsn() {
  static thread_local std::mt19937 gen{std::random_device{}()};
  return gen() & 0xffffff;
}

// `receives`: at least 1 (rdma_create_qp and ibv_create_qp want a receive queue; a QP without receive
// slots posts none).
ibv_qp_init_attr InitAttr(ibv_cq* cq, uint32_t send_depth, uint32_t receives) {
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 0;
  init.cap.max_send_wr = send_depth;
  init.cap.max_recv_wr = std::max<uint32_t>(receives, 1);
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.cap.max_inline_data = fabric::kMaxInlineSend;
  return init;
}

// INVALID_ARGUMENT if `bytes` are too long to be sent inline (`what` says which SEND).
absl::Status CheckInline(const std::string& bytes, const char* what) {
  if (bytes.size() <= fabric::kMaxInlineSend) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("a SEND of ", bytes.size(), " bytes", what, "; at most ",
                                                 fabric::kMaxInlineSend, " are sent inline"));
}

// A SEND of `bytes` (checked by CheckInline) over `sge`, copied at post time (IBV_SEND_INLINE: no
// registered buffer needed; `bytes` must live until ibv_post_send returns).
ibv_send_wr InlineSend(const std::string& bytes, ibv_sge* sge) {
  sge->addr = reinterpret_cast<uintptr_t>(bytes.data());
  sge->length = static_cast<uint32_t>(bytes.size());
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_SEND;
  wr.sg_list = sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_INLINE;
  return wr;
}

constexpr char kSendWhat[] = "ibv_post_send(SEND)";
constexpr char kLocalInvWhat[] = "ibv_post_send(LOCAL_INV)";
constexpr char kBindWhat[] = "ibv_post_send(BIND_MW)";
constexpr char kThenWhat[] = "ibv_post_send(SEND after BIND_MW)";
constexpr char kBindType1What[] = "ibv_bind_mw";

}  // namespace

absl::Status Qp::CreateCq(int depth) {
  cq_ = ibv_create_cq(device_->context(), depth, nullptr, device_->comp_channel(), 0);
  if (cq_ == nullptr) return FromErrno("ibv_create_cq");
  if (int ret = ibv_req_notify_cq(cq_, 0); ret != 0) return FromReturn("ibv_req_notify_cq", ret);
  cq_id_ = device_->HookCq(this);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Qp>> Qp::Create(Device* device, ibv_pd* pd, const fabric::QpOptions& options) {
  const fabric::PortInfo* port = device->port(options.port);
  if (port == nullptr) {
    return InvalidArgument("port", absl::StrCat("device ", device->info().name, " has no port ", options.port));
  }
  std::unique_ptr<Qp> qp(new Qp(device, options, kSendDepth));
  RDMAD_RETURN_IF_ERROR(qp->CreateCq(kCqDepth));

  ibv_qp_init_attr init = InitAttr(qp->cq_, kSendDepth, 0);
  qp->qp_ = ibv_create_qp(pd, &init);
  if (qp->qp_ == nullptr) return FromErrno("ibv_create_qp");  // ~Qp unhooks and destroys the CQ

  qp->local_.qpn = qp->qp_->qp_num;
  qp->local_.psn = RandomPsn();
  qp->local_.lid = port->lid;
  ibv_gid gid{};
  if (int ret = ibv_query_gid(device->context(), static_cast<uint8_t>(options.port),
                              static_cast<int>(options.gid_index), &gid);
      ret != 0) {
    return ErrnoError("ibv_query_gid", errno ? errno : ret, {}, "gid_index");
  }
  if (!GidIsZero(gid)) qp->local_.gid = GidToString(gid);
  RDMAD_RETURN_IF_ERROR(qp->ToInit());
  return qp;
}

absl::StatusOr<std::unique_ptr<Qp>> Qp::CreateOnCmId(Device* device, ibv_pd* pd, rdma_cm_id* id,
                                                     const fabric::CmQpOptions& cm_options) {
  const uint32_t slots = cm_options.receive.slots;
  if (cm_options.send_depth < fabric::kMinSendDepth) {
    return InvalidArgument("send_depth", absl::StrCat(cm_options.send_depth, "; a QP sends at least ",
                                                      fabric::kMinSendDepth, " work requests at once (a bind "
                                                      "and its SEND)"));
  }
  // Every send in flight and every posted receive may have its completion waiting in the CQ at once.
  const uint64_t completions = uint64_t{cm_options.send_depth} + slots;
  if (completions > INT_MAX) {
    return InvalidArgument("receive.slots", absl::StrCat(cm_options.send_depth, " sends and ", slots,
                                                         " receives are more completions than a CQ holds"));
  }
  fabric::QpOptions options;
  options.port = id->port_num;
  std::unique_ptr<Qp> qp(new Qp(device, options, cm_options.send_depth));
  RDMAD_RETURN_IF_ERROR(qp->CreateCq(std::max(kCqDepth, static_cast<int>(completions))));
  if (slots > 0) RDMAD_RETURN_IF_ERROR(qp->CreateReceiveBuffer(pd, cm_options.receive));

  ibv_qp_init_attr init = InitAttr(qp->cq_, cm_options.send_depth, slots);
  if (int ret = rdma_create_qp(id, pd, &init); ret != 0) return FromRdmaCm("rdma_create_qp", ret);
  qp->cm_id_ = id;
  qp->qp_ = id->qp;

  qp->local_.qpn = qp->qp_->qp_num;
  if (const fabric::PortInfo* port = device->port(options.port); port != nullptr) qp->local_.lid = port->lid;
  // The source GID rdma_cm resolved for the id (on RoCE, the one of the id's IP address).
  const ibv_gid& sgid = id->route.addr.addr.ibaddr.sgid;
  if (!GidIsZero(sgid)) qp->local_.gid = GidToString(sgid);
  // In INIT now, which takes receives: all are posted before the peer can send (RTR comes with the
  // connection).
  for (uint32_t slot = 0; slot < slots; ++slot) RDMAD_RETURN_IF_ERROR(qp->PostReceive(slot));
  return qp;
}

Qp::~Qp() {
  // The dispatcher stops seeing this CQ first; outstanding callbacks are dropped unrun.
  if (cq_id_ != 0) device_->UnhookCq(cq_id_);
  // Reverse order of creation: the QP, then its CQ (rping's teardown order). A CM QP goes through
  // librdmacm, which also clears id->qp (it reports no failure).
  if (cm_id_ != nullptr) {
    rdma_destroy_qp(cm_id_);
  } else if (qp_ != nullptr) {
    if (int ret = ibv_destroy_qp(qp_); ret != 0) {
      RDMAD_LOG_ERROR("ibv_destroy_qp(%u) failed: errno %d (%s)", local_.qpn, ret, ErrnoName(ret).c_str());
    }
  }
  if (cq_ != nullptr) {
    if (int ret = ibv_destroy_cq(cq_); ret != 0) {
      RDMAD_LOG_ERROR("ibv_destroy_cq failed: errno %d (%s)", ret, ErrnoName(ret).c_str());
    }
  }
  // The receive buffer last: no QP can write into it any more.
  if (receive_mr_ != nullptr) {
    if (int ret = ibv_dereg_mr(receive_mr_); ret != 0) {
      // Still registered: the memory is left allocated rather than handed back to malloc.
      RDMAD_LOG_ERROR("qp %u: ibv_dereg_mr of its receive buffer failed: errno %d (%s); the buffer is leaked",
                      local_.qpn, ret, ErrnoName(ret).c_str());
      return;
    }
  }
  std::free(receive_buffer_);
}

absl::Status Qp::CreateReceiveBuffer(ibv_pd* pd, const fabric::ReceiveOptions& receive) {
  const long page_size = sysconf(_SC_PAGESIZE);
  const size_t page = page_size > 0 ? static_cast<size_t>(page_size) : 4096;
  // Whole pages: the registration (and its MADV_DONTFORK, where fork support is on) covers nothing else.
  const size_t length = (size_t{receive.slots} * fabric::kMaxReceive + page - 1) / page * page;
  void* buffer = nullptr;
  if (int ret = posix_memalign(&buffer, page, length); ret != 0) {
    return ErrnoError("posix_memalign", ret, "the QP's receive buffers");
  }
  receive_buffer_ = static_cast<char*>(buffer);
  receive_mr_ = ibv_reg_mr(pd, buffer, length, IBV_ACCESS_LOCAL_WRITE);
  if (receive_mr_ == nullptr) return FromErrno("ibv_reg_mr", "the QP's receive buffers");
  receive_slots_ = receive.slots;
  on_message_ = std::make_shared<const std::function<void(std::string)>>(receive.on_message);
  return absl::OkStatus();
}

absl::Status Qp::PostReceive(uint32_t slot) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(receive_buffer_ + size_t{slot} * fabric::kMaxReceive);
  sge.length = fabric::kMaxReceive;
  sge.lkey = receive_mr_->lkey;
  ibv_recv_wr wr{};
  wr.wr_id = kReceiveWrId | slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  return FromReturn("ibv_post_recv", ibv_post_recv(qp_, &wr, &bad));
}

void Qp::Received(const ibv_wc& wc, std::vector<absl::AnyInvocable<void() &&>>* ready) {
  const uint64_t slot = wc.wr_id & ~kReceiveWrId;
  if (wc.status != IBV_WC_SUCCESS) return;  // flushed (the QP is in the error state): not posted again
  if (slot >= receive_slots_) {
    RDMAD_LOG_ERROR("qp %u: a receive completion for slot %llu, of %u", local_.qpn,
                    static_cast<unsigned long long>(slot), receive_slots_);
    return;
  }
  std::string bytes;
  // A WRITE with immediate data consumes a receive too, and carries no message.
  if (wc.opcode == IBV_WC_RECV) {
    bytes.assign(receive_buffer_ + slot * fabric::kMaxReceive, std::min<size_t>(wc.byte_len, fabric::kMaxReceive));
  }
  if (absl::Status s = PostReceive(static_cast<uint32_t>(slot)); !s.ok()) {
    RDMAD_LOG_ERROR("qp %u: receive slot %llu not posted again: %s", local_.qpn,
                    static_cast<unsigned long long>(slot), std::string(s.message()).c_str());
  }
  if (wc.opcode != IBV_WC_RECV || !*on_message_) return;
  ready->push_back([on_message = on_message_, bytes = std::move(bytes)]() mutable { (*on_message)(std::move(bytes)); });
}

fabric::QpEndpoint Qp::local() const {
  fabric::QpEndpoint local = local_;
  if (cm_id_ != nullptr) {
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    local.psn = ibv_query_qp(qp_, &attr, IBV_QP_SQ_PSN, &init) == 0 ? attr.sq_psn : 0;
  }
  return local;
}

fabric::QpState Qp::state() const {
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  if (ibv_query_qp(qp_, &attr, IBV_QP_STATE, &init) != 0) return fabric::QpState::kUnknown;
  return FromIbv(attr.qp_state);
}

absl::Status Qp::ToInit() {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = static_cast<uint8_t>(options_.port);
  attr.qp_access_flags = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
  if (int ret = ibv_modify_qp(qp_, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
      ret != 0) {
    return FromReturn("ibv_modify_qp", ret, "RESET->INIT");
  }
  return absl::OkStatus();
}

absl::Status Qp::Connect(const fabric::QpEndpoint& remote) {
  if (cm_id_ != nullptr) {
    return FailedPrecondition({}, "the QP belongs to an rdma_cm id, which connects it (Connect / Accept on the id)");
  }
  if (state() != fabric::QpState::kInit) {
    // Reconnecting (or recovering from the error state) starts again from RESET.
    ibv_qp_attr reset{};
    reset.qp_state = IBV_QPS_RESET;
    if (int ret = ibv_modify_qp(qp_, &reset, IBV_QP_STATE); ret != 0) {
      return FromReturn("ibv_modify_qp", ret, "->RESET");
    }
    // The reset empties the send queue without completions (none is expected: Connect is never made with a
    // post outstanding). Work still counted in flight, or waiting, would hold the send depth for ever: its
    // callbacks learn of the reset here, on this thread, once.
    for (auto& lost : TakeOutstanding()) std::move(lost)();
    local_.psn = RandomPsn();
    RDMAD_RETURN_IF_ERROR(ToInit());
  }
  const fabric::PortInfo* port = device_->port(options_.port);
  const uint8_t rd_atomic =
      static_cast<uint8_t>(std::clamp<uint32_t>(device_->info().max_qp_rd_atom, 1, 16));

  ibv_qp_attr rtr{};
  rtr.qp_state = IBV_QPS_RTR;
  rtr.path_mtu = device_->active_mtu_enum(options_.port);
  rtr.dest_qp_num = remote.qpn;
  rtr.rq_psn = remote.psn & 0xffffff;
  rtr.max_dest_rd_atomic = rd_atomic;
  rtr.min_rnr_timer = kMinRnrTimer;
  rtr.ah_attr.port_num = static_cast<uint8_t>(options_.port);
  rtr.ah_attr.dlid = remote.lid;
  const bool ethernet = port != nullptr && port->link_layer == "Ethernet";
  if (!remote.gid.empty() || ethernet) {
    if (remote.gid.empty()) return InvalidArgument("remote.gid", "required on an Ethernet (RoCE) port");
    auto gid = ParseGid(remote.gid);
    if (!gid.ok()) return InvalidArgument("remote.gid", gid.status().message());
    rtr.ah_attr.is_global = 1;
    rtr.ah_attr.grh.dgid = *gid;
    rtr.ah_attr.grh.sgid_index = static_cast<uint8_t>(options_.gid_index);
    rtr.ah_attr.grh.hop_limit = 64;
  }
  if (int ret = ibv_modify_qp(qp_, &rtr,
                              IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
      ret != 0) {
    return FromReturn("ibv_modify_qp", ret, "INIT->RTR");
  }

  ibv_qp_attr rts{};
  rts.qp_state = IBV_QPS_RTS;
  rts.timeout = kTimeout;
  rts.retry_cnt = kRetries;
  rts.rnr_retry = kRetries;
  rts.sq_psn = local_.psn;
  rts.max_rd_atomic = rd_atomic;
  if (int ret = ibv_modify_qp(qp_, &rts,
                              IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                  IBV_QP_MAX_QP_RD_ATOMIC);
      ret != 0) {
    return FromReturn("ibv_modify_qp", ret, "RTR->RTS");
  }
  return absl::OkStatus();
}

absl::Status Qp::Submit(Work work) {
  Callbacks unsent;
  {
    MutexLock lock(&mu_);
    // Behind any waiting work (order is kept), or beyond the send queue's depth: it waits.
    if (!backlog_.empty() || pending_.size() + work.wrs() > send_depth_) {
      backlog_.push_back(std::move(work));
      return absl::OkStatus();
    }
    RDMAD_RETURN_IF_ERROR(PostLocked(work, &unsent));
  }
  for (auto& u : unsent) std::move(u)();
  return absl::OkStatus();
}

absl::Status Qp::PostBindType1Locked(Work& work) {
  // ibv_bind_mw posts by itself, and steps mw->rkey at once: a failed bind puts the old one back
  // (ibv_bind_mw(3) NOTES: fix the mw if the bind's CQE indicates a failure).
  ibv_mw* mw = work.mw;
  const uint32_t old_rkey = mw->rkey;
  ibv_mw_bind bind{};
  bind.wr_id = next_wr_id_++;
  bind.send_flags = IBV_SEND_SIGNALED;
  bind.bind_info = work.bind;
  if (int ret = ibv_bind_mw(qp_, mw, &bind); ret != 0) {
    mw->rkey = old_rkey;
    return FromReturn(kBindType1What, ret);
  }
  Finish finish = [mw, old_rkey, done = std::move(work.finish)](absl::Status s) mutable {
    if (!s.ok()) mw->rkey = old_rkey;
    std::move(done)(std::move(s));
  };
  pending_.emplace(bind.wr_id, Pending{kBindType1What, std::move(finish)});
  return absl::OkStatus();
}

absl::Status Qp::PostLocked(Work& work, Callbacks* unsent) {
  // Each callback goes into pending_ once its work request is posted: a completion the poller took
  // meanwhile waits for mu_ (held here) before it looks its wr_id up.
  ibv_sge sge{};
  ibv_send_wr wr{};
  const char* what = kSendWhat;
  switch (work.op) {
    case Work::Op::kBindType1:
      return PostBindType1Locked(work);
    case Work::Op::kSend:
      wr = InlineSend(work.bytes, &sge);
      break;
    case Work::Op::kLocalInv:
      what = kLocalInvWhat;
      wr.opcode = IBV_WR_LOCAL_INV;
      wr.invalidate_rkey = work.rkey;
      break;
    case Work::Op::kBindType2:
      what = kBindWhat;
      wr.opcode = IBV_WR_BIND_MW;
      wr.bind_mw.mw = work.mw;
      wr.bind_mw.rkey = work.rkey;
      wr.bind_mw.bind_info = work.bind;
      break;
  }
  wr.wr_id = next_wr_id_++;
  wr.send_flags |= IBV_SEND_SIGNALED;
  // A type 2 bind's SEND, in the same ibv_post_send: fenced behind the bind (fabric.h, SendAfterBind).
  ibv_sge then_sge{};
  ibv_send_wr then{};
  const bool with_then = work.op == Work::Op::kBindType2 && !work.bytes.empty();
  if (with_then) {
    then = InlineSend(work.bytes, &then_sge);
    then.wr_id = next_wr_id_++;
    then.send_flags |= IBV_SEND_FENCE | IBV_SEND_SIGNALED;
    wr.next = &then;
  }
  ibv_send_wr* bad = nullptr;
  const int ret = ibv_post_send(qp_, &wr, &bad);
  if (ret != 0 && !(with_then && bad == &then)) return FromReturn(what, ret);  // nothing was posted
  pending_.emplace(wr.wr_id, Pending{what, std::move(work.finish)});
  if (with_then) {
    if (ret == 0) {
      pending_.emplace(then.wr_id, Pending{kThenWhat, std::move(work.then)});
    } else {
      unsent->push_back([then = std::move(work.then), failed = FromReturn(kThenWhat, ret)]() mutable {
        std::move(then)(std::move(failed));
      });
    }
  }
  return absl::OkStatus();
}

Qp::Callbacks Qp::TakeOutstanding() {
  const absl::Status reset = absl::AbortedError("the QP was reset (Connect) before the work completed");
  Callbacks lost;
  MutexLock lock(&mu_);
  for (auto& [wr_id, p] : pending_) {
    lost.push_back([finish = std::move(p.finish), reset]() mutable { std::move(finish)(reset); });
  }
  pending_.clear();
  for (Work& work : backlog_) {
    lost.push_back([finish = std::move(work.finish), reset]() mutable { std::move(finish)(reset); });
    if (work.then) lost.push_back([then = std::move(work.then), reset]() mutable { std::move(then)(reset); });
  }
  backlog_.clear();
  return lost;
}

void Qp::DrainBacklogLocked(Callbacks* ready) {
  while (!backlog_.empty() && pending_.size() + backlog_.front().wrs() <= send_depth_) {
    Work work = std::move(backlog_.front());
    backlog_.pop_front();
    absl::Status posted = PostLocked(work, ready);
    if (posted.ok()) continue;
    // Its post returned OK long ago: its callbacks learn of the refusal now, each once.
    ready->push_back([finish = std::move(work.finish), posted]() mutable { std::move(finish)(posted); });
    if (work.then) {
      ready->push_back([then = std::move(work.then), posted]() mutable { std::move(then)(posted); });
    }
  }
}

std::vector<absl::AnyInvocable<void() &&>> Qp::PollCompletions(bool rearm) {
  std::vector<absl::AnyInvocable<void() &&>> ready;
  // Re-arm before polling, so a completion that arrives after the last poll raises a new event.
  if (int ret = rearm ? ibv_req_notify_cq(cq_, 0) : 0; ret != 0) {
    RDMAD_LOG_ERROR("qp %u: ibv_req_notify_cq: errno %d (%s)", local_.qpn, ret, ErrnoName(ret).c_str());
  }
  ibv_wc wcs[kPollBatch];
  for (;;) {
    int n = ibv_poll_cq(cq_, kPollBatch, wcs);
    if (n < 0) {
      RDMAD_LOG_ERROR("qp %u: ibv_poll_cq failed", local_.qpn);
      break;
    }
    if (n == 0) break;
    MutexLock lock(&mu_);
    for (int i = 0; i < n; ++i) {
      if (wcs[i].wr_id & kReceiveWrId) {
        Received(wcs[i], &ready);
        continue;
      }
      auto it = pending_.find(wcs[i].wr_id);
      if (it == pending_.end()) continue;  // not a work request posted here: nothing to report
      absl::Status status;
      if (wcs[i].status != IBV_WC_SUCCESS) {
        status = absl::AbortedError(absl::StrCat(it->second.what, ": completion failed: ",
                                                 ibv_wc_status_str(wcs[i].status), " (status ",
                                                 static_cast<int>(wcs[i].status), ", vendor error ",
                                                 wcs[i].vendor_err, "); the QP is now in the error state"));
      }
      ready.push_back([finish = std::move(it->second.finish), status]() mutable { std::move(finish)(status); });
      pending_.erase(it);
    }
    DrainBacklogLocked(&ready);  // the room these completions made
  }
  return ready;
}

absl::Status Qp::PostBind(fabric::Mw& fmw, const fabric::BindSpec& spec, fabric::BindDone done) {
  ibv_mw* mw = static_cast<Mw&>(fmw).raw();
  Work work;
  work.mw = mw;
  work.bind.mr = spec.mr ? static_cast<Mr*>(spec.mr)->raw() : nullptr;
  work.bind.addr = spec.addr;
  work.bind.length = spec.length;
  work.bind.mw_access_flags = spec.access;

  if (mw->type == IBV_MW_TYPE_1) {
    // The new rkey is ibv_bind_mw's, read once the completion succeeded (PostLocked restores the old one
    // on a failure).
    work.op = Work::Op::kBindType1;
    work.finish = [mw, done = std::move(done)](absl::Status s) mutable {
      if (!s.ok()) return std::move(done)(s);
      std::move(done)(mw->rkey);
    };
    return Submit(std::move(work));
  }

  // The window's next key, from the one it has now (the caller posts no other bind of this window before
  // this one completes).
  const uint32_t new_rkey = ibv_inc_rkey(mw->rkey);
  work.op = Work::Op::kBindType2;
  work.rkey = new_rkey;
  work.finish = [mw, new_rkey, done = std::move(done)](absl::Status s) mutable {
    if (!s.ok()) return std::move(done)(s);
    mw->rkey = new_rkey;  // published only after the completion succeeded
    std::move(done)(new_rkey);
  };
  // The SEND's bytes now, on the posting thread, before mu_ is taken (fabric.h, SendAfterBind), even if the
  // bind then waits in the backlog: they carry the key the bind will give.
  if (spec.then != nullptr && spec.then->message) work.bytes = std::move(spec.then->message)(new_rkey);
  if (!work.bytes.empty()) {
    RDMAD_RETURN_IF_ERROR(CheckInline(work.bytes, " after a bind"));
    work.then = spec.then->done ? std::move(spec.then->done) : Finish([](absl::Status) {});
  }
  return Submit(std::move(work));
}

absl::Status Qp::PostInvalidate(fabric::Mw& fmw, fabric::Mr& bound_to, fabric::WorkDone done) {
  ibv_mw* mw = static_cast<Mw&>(fmw).raw();
  if (mw->type == IBV_MW_TYPE_1) {
    // Zero length unbinds the window. The MR is named anyway: rxe's provider reads its lkey.
    fabric::BindSpec unbind;
    unbind.mr = &bound_to;
    unbind.addr = bound_to.addr();
    return PostBind(fmw, unbind, [done = std::move(done)](absl::StatusOr<uint32_t> r) mutable {
      std::move(done)(r.status());
    });
  }
  Work work;
  work.op = Work::Op::kLocalInv;
  work.mw = mw;
  work.rkey = mw->rkey;
  work.finish = std::move(done);
  return Submit(std::move(work));
}

absl::Status Qp::PostSend(const std::string& bytes, fabric::WorkDone done) {
  RDMAD_RETURN_IF_ERROR(CheckInline(bytes, ""));
  Work work;
  work.op = Work::Op::kSend;
  work.bytes = bytes;
  work.finish = std::move(done);
  return Submit(std::move(work));
}

}  // namespace rdmad::verbs
