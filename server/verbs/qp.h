// verbs::Qp: one RC ibv_qp with its own ibv_cq (send and receive) on its device's completion channel.
// Owns both: the destructor unhooks the CQ from the device's dispatcher, then destroys the QP, then the
// CQ. Binds, invalidations and SENDs are posted signaled; their completions are polled by the device's
// dispatcher (Device::DrainCompletions -> Qp::PollCompletions), which runs the posted callbacks.
// The send queue: at most send_depth_ work requests in flight (pending_: every one is signaled, so each
// leaves when its completion is polled). A post that would pass that, or that finds work already waiting,
// waits in `backlog_`, in order, and Post* returns OK; PollCompletions posts from its head as completions
// make room, and a waiting post that ibv_post_send (or ibv_bind_mw) refuses then gets its callbacks run with
// that error, through PollCompletions' returned callbacks. ~Qp drops the backlog unrun, as it drops pending_.
// Two kinds: Create makes a QP that rdmad connects itself (Connect: INIT -> RTR -> RTS); CreateOnCmId
// makes one with rdma_create_qp on an rdma_cm id, whose states rdma_cm drives (Connect is refused), and
// which is destroyed with rdma_destroy_qp. The id (server/verbs/cm.h, VerbsCmId) owns such a QP and
// outlives it. A CM QP may receive (fabric::ReceiveOptions): it owns one buffer of slots * kMaxReceive bytes,
// registered on its PD, whose slots it keeps posted (posted at creation, posted again as each completes);
// the buffer is deregistered and freed after the QP and its CQ are destroyed.
// Threads: Post* on any thread, concurrently too (each posts or queues under `mu_`); Connect on any thread,
// never with a post (the registry's reservations); PollCompletions on the dispatcher, or on a
// Device::PollFor caller, under the device's cq_mu_ (so one at a time). `pending_`, `backlog_` and the wr_id
// counter are shared by all of them, behind `mu_`, which is held across each ibv_post_send/ibv_bind_mw (so
// work reaches the send queue in the order it was queued); no callback runs under it, and a bind's SEND
// message is made before it is taken (PostBind). The receive buffer's slots: a posted slot belongs to
// the device; the poller that takes its completion copies the bytes out and posts it again. on_message runs
// from PollCompletions' returned callbacks, outside every lock. A CM QP's local() and state() query the device
// and may be called on any thread.
#ifndef RDMAD_SERVER_VERBS_QP_H_
#define RDMAD_SERVER_VERBS_QP_H_

#include <infiniband/verbs.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "server/common/sync.h"
#include "server/fabric/fabric.h"

struct rdma_cm_id;  // <rdma/rdma_cma.h>

namespace rdmad::verbs {

class Device;

class Qp final : public fabric::Qp {
 public:
  static absl::StatusOr<std::unique_ptr<Qp>> Create(Device* device, ibv_pd* pd,
                                                    const fabric::QpOptions& options);
  // rdma_create_qp on `id` (whose device is `device`, and `pd` on it): a send queue of options.send_depth,
  // max(1, slots) receives, a CQ for both (Create's caps otherwise), and the receive slots posted; rdma_cm
  // moves it to INIT now and to RTR/RTS when the connection is accepted or established.
  static absl::StatusOr<std::unique_ptr<Qp>> CreateOnCmId(Device* device, ibv_pd* pd, rdma_cm_id* id,
                                                          const fabric::CmQpOptions& options);
  ~Qp() override;
  Qp(const Qp&) = delete;
  Qp& operator=(const Qp&) = delete;

  // For a CM QP the PSN is the device's current send PSN (rdma_cm chooses the initial one at RTS).
  fabric::QpEndpoint local() const override;
  fabric::QpState state() const override;
  absl::Status Connect(const fabric::QpEndpoint& remote) override;
  absl::Status PostBind(fabric::Mw& mw, const fabric::BindSpec& spec, fabric::BindDone done) override;
  absl::Status PostSend(const std::string& bytes, fabric::WorkDone done) override;
  absl::Status PostInvalidate(fabric::Mw& mw, fabric::Mr& bound_to, fabric::WorkDone done) override;

  uint64_t completion_key() const override { return cq_id_; }

  // Polls the CQ empty and returns the callbacks to run (outside any lock). The dispatcher re-arms the CQ
  // first (`rearm`); Device::PollFor, on the poster's thread, leaves the arming to it. Under the device's
  // cq_mu_ (the QP is hooked, so alive).
  std::vector<absl::AnyInvocable<void() &&>> PollCompletions(bool rearm = true);
  ibv_cq* cq() const { return cq_; }
  ibv_qp* raw() const { return qp_; }

 private:
  Qp(Device* device, const fabric::QpOptions& options, uint32_t send_depth)
      : device_(device), options_(options), send_depth_(send_depth) {}
  // Creates the CQ of `depth` entries on the device's completion channel, arms it and hooks it to the
  // dispatcher.
  absl::Status CreateCq(int depth);
  absl::Status ToInit();
  // The receive buffer: slots * kMaxReceive bytes (whole pages) registered on `pd` for local write.
  absl::Status CreateReceiveBuffer(ibv_pd* pd, const fabric::ReceiveOptions& receive);
  // ibv_post_recv of the buffer's slot `slot` (its wr_id: kReceiveWrId | slot).
  absl::Status PostReceive(uint32_t slot);
  // A receive's completion (under mu_, from PollCompletions): the bytes copied out, the slot posted again,
  // and on_message's call added to `ready`.
  void Received(const ibv_wc& wc, std::vector<absl::AnyInvocable<void() &&>>* ready);
  // What a completion does: the status of the work completion (OK, or why it failed).
  using Finish = absl::AnyInvocable<void(absl::Status) &&>;
  using Callbacks = std::vector<absl::AnyInvocable<void() &&>>;
  // One post, as it waits in the backlog: what it needs to be posted later. The windows and MRs it names
  // are kept by the caller until its completion (fabric.h, Qp); an inline SEND's bytes are its own.
  struct Work {
    enum class Op { kSend, kLocalInv, kBindType1, kBindType2 };
    Op op = Op::kSend;
    ibv_mw* mw = nullptr;         // the binds' and LOCAL_INV's window
    ibv_mw_bind_info bind{};      // the binds'
    uint32_t rkey = 0;            // kBindType2: the window's new rkey; kLocalInv: the rkey invalidated
    std::string bytes;            // kSend: the SEND's; kBindType2: the fenced SEND's behind it (empty: none)
    Finish finish;                // the first work request's completion
    Finish then;                  // the fenced SEND's (kBindType2 with bytes)
    // Work requests it takes on the send queue (a type 1 bind is one).
    uint32_t wrs() const { return op == Op::kBindType2 && !bytes.empty() ? 2 : 1; }
  };
  // Posts `work` now, or queues it behind the backlog (then OK). A post refused now returns the error
  // and runs no callback, except a type 2 bind's SEND refused after its bind was posted: its `then` runs
  // with the error, on this thread, after mu_ is released.
  absl::Status Submit(Work work);
  // ibv_post_send (ibv_bind_mw for a type 1 bind) of `work`, each posted work request's callback in
  // pending_. If nothing was posted: the error, and `work` keeps its callbacks. If only a type 2 bind was
  // (its SEND refused): OK, and the SEND's `then` call with the error is added to `unsent`.
  absl::Status PostLocked(Work& work, Callbacks* unsent) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // PostLocked's type 1 bind: ibv_bind_mw.
  absl::Status PostBindType1Locked(Work& work) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Posts from the backlog's head while the send queue has room; a refused post's callbacks, with the
  // error, go to `ready`.
  void DrainBacklogLocked(Callbacks* ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Empties pending_ and the backlog (Connect's reset): their callbacks, each with ABORTED, to run
  // outside mu_.
  Callbacks TakeOutstanding() ABSL_LOCKS_EXCLUDED(mu_);

  Device* const device_;
  const fabric::QpOptions options_;
  const uint32_t send_depth_;  // work requests in flight at most (max_send_wr asked for)
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  rdma_cm_id* cm_id_ = nullptr;  // set for a CM QP once rdma_create_qp succeeded
  uint64_t cq_id_ = 0;  // the CQ's key in the device's dispatcher table (0: not hooked)
  fabric::QpEndpoint local_;

  // Receives (a CM QP with ReceiveOptions::slots > 0), fixed once CreateOnCmId returns.
  uint32_t receive_slots_ = 0;
  char* receive_buffer_ = nullptr;  // receive_slots_ * kMaxReceive bytes (whole pages), page aligned
  ibv_mr* receive_mr_ = nullptr;
  // Shared with the callbacks PollCompletions returns, which may run after the QP is gone.
  std::shared_ptr<const std::function<void(std::string)>> on_message_;

  Mutex mu_;
  uint64_t next_wr_id_ ABSL_GUARDED_BY(mu_) = 1;
  struct Pending {
    const char* what;
    Finish finish;
  };
  std::map<uint64_t, Pending> pending_ ABSL_GUARDED_BY(mu_);  // one per work request in flight
  std::deque<Work> backlog_ ABSL_GUARDED_BY(mu_);             // posts waiting for room, in order
};

}  // namespace rdmad::verbs

#endif  // RDMAD_SERVER_VERBS_QP_H_
