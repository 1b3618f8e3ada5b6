// FakeFabric: an in-memory implementation of the fabric seam (server/fabric/fabric.h) for host-side unit
// tests of the registry. No RDMA device is needed.
//
// Every fake object reports to a FakeLedger that the test keeps (shared_ptr), so it outlives the Registry
// that owns the fabric. The ledger
//   - counts live PDs, MRs, MWs and QPs (and open devices);
//   - keeps an ordered event log: "alloc_pd 1", "reg_mr 2", "dereg_mr 2", "dealloc_mw 3", "destroy_qp 4",
//     "dealloc_pd 1", "close_device rxe0", ... (ids are the fake's own, per kind, starting at 1);
//   - counts calls per verb (failed ones included): "reg_mr", "rereg_mr", "dereg_mr", "alloc_mw",
//     "create_qp", "connect", "bind", "invalidate", "alloc_pd", "send";
//   - records *violations* of the verbs rules the real device would enforce or crash on: a PD destroyed
//     while it holds children, an MR destroyed while a window is bound to it, a QP destroyed while a type 2
//     window is bound on it, a device closed while it has PDs, a bind on a QP that is not in RTS, ...
//     Tests assert violations() is empty.
//   - delivers bind and invalidate completions through a per-device eventfd, and can hold them (a latch
//     for tests of what the registry does while a bind is "inside the fabric");
//   - reports hardware counters (Device::ReadCounters) that a test sets, per device, and counts the reads
//     ("read_counters"), so a test can tell a fresh read from a cached one;
//   - injects faults: the next RegMr / Mr::Release / Qp::Bind / Qp::Invalidate / Qp::Connect / AllocPd /
//     AllocMw / CreateQp fails; Mr::Rereg returns scripted codes.
//
// Key model: every registration (RegMr, and a successful native Rereg) takes a fresh, strictly increasing
// lkey and rkey. A window starts with rkey (id << 8); every successful bind returns ibv_inc_rkey(rkey) (the
// low 8 bits incremented), published in the fake Mw only on success.
//
// Window model: a bind names an MR (in the registry: the window's private bounds MR); the fake checks the
// rules of ibv_bind_mw(3) against that MR (same PD, range inside it, MW_BIND, LOCAL_WRITE for remote write
// or atomic, no zero-based type 1, a type 2 window not bound twice) and refuses to deregister an MR while a
// window is bound to it (EBUSY), like ibv_dereg_mr(3). Type 1 invalidation is a zero-length bind naming
// the MR the window is bound to (as the verbs backend does); type 2 is LOCAL_INV on the QP it is bound on.
//
// SEND model: PostSend on a QP in RTS succeeds and is recorded (Sent); elsewhere its completion fails
// (flushed) and the QP goes to ERROR. A SEND posted with a bind (fabric::SendAfterBind) is posted right
// after it on the same QP: recorded if the bind took effect, flushed if it failed.
//
// Receive model (a QP made on a fake rdma_cm id with fabric::ReceiveOptions, ConfigureCmQp): the QP keeps
// `slots` receives posted. A SEND from its peer (DeliverSend; FakeCmId::Send, FakeClient::Send) takes a
// posted slot and queues a receive completion, delivered as the other completions are (through the
// device's completion fd, to Device::DrainCompletions or PollFor), which posts the slot again and then runs
// on_message with the bytes. With no slot posted the SEND waits (the peer's RNR retries) until one is,
// in order. A SEND to a QP that is not in RTS fails at the peer; one over kMaxReceive bytes fails too and
// moves the receiving QP to ERROR (its local length error). Messages still waiting when the QP goes to
// ERROR are dropped (the peer's SEND fails), and so are receive completions of a QP destroyed before they
// were drained (as a destroyed CQ's).
//
// QP model: created in INIT (as the verbs backend does); Connect moves it to RTS; a failed bind or
// invalidate completion moves it to ERROR (as a real completion error does), and so does ModifyQpToError
// (what rdma_disconnect does to its id's QP); Connect from any state goes back to RTS. A stalled QP
// (StallQp) holds its work until it goes to ERROR, which flushes it.
//
// Send queue model (fabric.h, Qp): a work request is in flight from its post until its completion is
// drained (Device::DrainCompletions, PollFor; a held or stalled one stays in flight). At most the send
// depth is (8, or CmQpOptions::send_depth; a bind with its SEND is two): a post beyond it, or behind one
// already waiting, waits in the QP's backlog (event "backlog <qp>") and returns OK; it takes effect (the
// bind, the SEND recorded) only when it is posted, in order, as drained completions make room. A waiting
// post that is refused then (the fake's post errors) gets its callbacks run with the error, as
// completions; one that finds the QP in ERROR completes flushed. A QP destroyed with a backlog drops it
// unrun (event "drop_backlog <qp> <posts>").
//
// Thread-safety: every fake object and the ledger may be used from any thread (one ledger mutex). Hooks
// run without the mutex held, so they may call back into the registry.
#ifndef RDMAD_TESTS_UNIT_FAKE_FABRIC_H_
#define RDMAD_TESTS_UNIT_FAKE_FABRIC_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "server/fabric/fabric.h"

namespace rdmad::fake {

// ibv_inc_rkey(3): the low 8 bits (the key) are incremented, the index bits kept.
inline uint32_t IncRkey(uint32_t rkey) { return (rkey & 0xffffff00u) | ((rkey + 1) & 0xffu); }

// A device description with sensible defaults: one active Ethernet port with a link-local RoCEv2 GID at
// index 0 and an IPv4-mapped RoCEv2 GID at index 1, type 1 and type 2B windows, no native rereg, and
// window bounds not enforced (rxe's answer to the start-up probe; `mw_bounds_enforced` models the other).
fabric::DeviceInfo MakeDeviceInfo(const std::string& name, bool native_rereg = false,
                                  bool mw_bounds_enforced = false);

class FakeQp;

class FakeLedger {
 public:
  struct Counts {
    int devices = 0, pds = 0, mrs = 0, mws = 0, qps = 0;
    bool operator==(const Counts& o) const {
      return devices == o.devices && pds == o.pds && mrs == o.mrs && mws == o.mws && qps == o.qps;
    }
  };
  struct ReregScript {
    fabric::ReregCode code = fabric::ReregCode::kOk;
    int err = 0;
  };

  // --- observation
  Counts live() const;
  std::vector<std::string> events() const;
  // Only the events whose verb (the part before the space) is one of `verbs`, in order.
  std::vector<std::string> events_of(const std::vector<std::string>& verbs) const;
  void ClearEvents();
  int calls(const std::string& verb) const;
  std::vector<std::string> violations() const;
  // Fake ids of live objects, from what the registry exposes.
  uint64_t MrIdByLkey(uint32_t lkey) const;   // 0 if no live MR has it
  uint64_t MwIdByRkey(uint32_t rkey) const;   // 0 if no live MW has it
  uint64_t QpIdByQpn(uint32_t qpn) const;     // 0 if none
  // The fake's view of a live window's binding: the fake MR id it is bound to (0 if unbound).
  uint64_t MwBoundMr(uint64_t mw_id) const;
  // How many windows the fake believes are bound to a live MR.
  int MrBoundWindows(uint64_t mr_id) const;
  // What the fake knows about a live MR (all zero if there is none with that id).
  struct MrView {
    uint64_t id = 0, pd = 0, addr = 0, length = 0;
    uint32_t access = 0, lkey = 0, rkey = 0;
    bool unusable = false;
  };
  MrView Mr(uint64_t mr_id) const;

  // --- fault injection (each applies to the next call of that kind, FIFO)
  void FailNextRegMr(int err);
  void FailNextRelease(int err);            // Mr::Release (ibv_dereg_mr)
  void ScriptRereg(fabric::ReregCode code, int err);  // Mr::Rereg; unscripted calls return kOk
  void FailNextBind();                       // a bind whose completion fails (QP -> ERROR)
  void FailNextInvalidate();                 // completion error too
  void FailNextConnect(int err);
  void FailNextAllocPd(int err);
  void FailNextAllocMw(int err);
  void FailNextCreateQp(int err);
  // Runs inside every Pd::RegMr, before the registration, without any lock held.
  void SetRegMrHook(std::function<void()> hook);
  // The SENDs posted on the QP with this qpn that completed successfully, in order.
  std::vector<std::string> Sent(uint32_t qpn) const;
  // Moves a live QP to the error state behind the registry's back, as a peer's bad RDMA access does.
  void ForceQpError(uint32_t qpn);
  // A peer that never takes what is sent to it (no receive posted, and RNR retried without end): from now
  // on, work posted on the QP with this qpn (binds, invalidations, SENDs) neither takes effect nor
  // completes, as work queued behind a SEND that is retried for ever, until the QP goes to the error state
  // (ForceQpError, or ModifyQpToError: its rdma_cm id's Disconnect). Then each completes flushed, in order.
  void StallQp(uint32_t qpn);
  int Stalled(uint32_t qpn) const;  // work held on it
  // Posts waiting in the backlog of the QP with this qpn (beyond its send depth: see the QP model); 0 if none.
  int Backlog(uint32_t qpn) const;

  // --- hardware counters: Device::ReadCounters of `device` returns what is set here at the time of the
  // call, ordered by port and name, classified with fabric::IsRemoteAccessErrorCounter (hw_counters.h).
  void SetCounter(const std::string& device, uint32_t port, const std::string& name, uint64_t value);
  void ClearCounters(const std::string& device);

  // --- the kernel's resource tracking: Device::KernelObjects of a device lists its live PDs (pdn: the fake
  // PD id), MRs (mrn: the fake MR id, with the PD's pdn, the length and, unless hidden here, the keys: a
  // caller without CAP_NET_ADMIN gets none) and QPs (qpn, pdn); no CM ids.
  void HideKernelKeys(bool hide);

  // --- completions. A posted bind or invalidation takes effect in the fake at once, but its completion
  // is delivered like the verbs backend's: through the device's completion fd, to whoever calls
  // Device::DrainCompletions (the registry's device dispatcher). While held, completions queue up: the
  // work is "inside the fabric", and the RPC that posted it has not finished.
  void HoldCompletions();
  void ReleaseCompletions();
  int QueuedCompletions() const;
  // A NIC whose completions are there before the dispatcher wakes: while on, a completion is not signaled
  // to the dispatcher when it is queued (nor when released), so the poster's Device::PollFor finds it; what
  // a PollFor leaves, and everything queued when this is turned off, is signaled then.
  void DeferSignals(bool on);
  // The opposite NIC: the dispatcher, woken by the completion's signal, always takes it off the queue; a
  // poster's Device::PollFor finds nothing of its own (it only waits, up to its budget, for `done`).
  void PollersFindNothing(bool on);
  bool pollers_find_nothing() const;

 private:
  friend class FakeDevice;
  friend class FakePd;
  friend class FakeMr;
  friend class FakeMw;
  friend class FakeQp;

  struct PdState { std::string device; };
  struct MrState {
    uint64_t pd = 0, addr = 0, length = 0;
    uint32_t access = 0, lkey = 0, rkey = 0;
    bool unusable = false;
  };
  struct MwState {
    uint64_t pd = 0;
    fabric::MwType type = fabric::MwType::kType1;
    uint32_t rkey = 0;
    uint64_t bound_mr = 0;  // 0: unbound
    uint64_t bound_qp = 0;  // type 2: the QP it was bound on
  };
  struct QpState {
    uint64_t pd = 0;
    uint32_t qpn = 0;
    FakeQp* qp = nullptr;  // alive while this entry is (~FakeQp erases it under mu_)
  };

  // Callers hold mu_.
  void Event(const std::string& verb, const std::string& what);
  void Violation(const std::string& what);
  void Call(const std::string& verb) { calls_[verb]++; }
  int TakeErr(std::deque<int>& q);  // 0 if none scripted
  int BoundWindowsLocked(uint64_t mr_id) const;

  mutable std::mutex mu_;
  int devices_ = 0;
  uint64_t next_pd_ = 1, next_mr_ = 1, next_mw_ = 1, next_qp_ = 1;
  uint32_t next_key_ = 0x1000;
  std::map<uint64_t, PdState> pds_;
  std::map<uint64_t, MrState> mrs_;
  std::map<uint64_t, MwState> mws_;
  std::map<uint64_t, QpState> qps_;
  std::vector<std::string> events_;
  std::vector<std::string> violations_;
  std::map<std::string, int> calls_;
  bool hide_kernel_keys_ = false;

  std::deque<int> fail_reg_mr_, fail_release_, fail_connect_, fail_alloc_pd_, fail_alloc_mw_, fail_create_qp_;
  std::deque<ReregScript> rereg_script_;
  int fail_bind_ = 0, fail_invalidate_ = 0;
  std::function<void()> reg_mr_hook_;
  std::set<uint32_t> forced_error_qpns_;
  std::set<uint32_t> stalled_qpns_;
  std::vector<std::pair<uint32_t, std::string>> sent_;  // (qpn, bytes) of successful SENDs
  // device -> (port, name) -> value
  std::map<std::string, std::map<std::pair<uint32_t, std::string>, uint64_t>> counters_;

  struct Completion {
    std::string device;
    absl::AnyInvocable<void() &&> run;
    // The fake QP id whose work request (or, `receive`, whose receive) completed; 0: none.
    uint64_t qp = 0;
    bool receive = false;
  };
  // Callers hold mu_. Queues a completion and signals the device's fd unless held.
  void Complete(const std::string& device, absl::AnyInvocable<void() &&> run);
  void Complete(Completion completion);
  void Signal(const std::string& device);
  std::deque<Completion> completions_;
  std::map<uint32_t, std::deque<Completion>> stalled_;  // by qpn: StallQp's work, flushed on error
  // Callers hold mu_. The QP went to the error state: its stalled work completes (flushed).
  void FlushStalledLocked(uint32_t qpn);
  bool held_ = false;
  bool defer_signals_ = false;
  bool pollers_find_nothing_ = false;
  std::map<std::string, int> completion_fds_;  // device name -> eventfd
};

class FakeFabric final : public fabric::Fabric {
 public:
  // Devices are kept in name order (the seam's contract).
  FakeFabric(std::vector<fabric::DeviceInfo> devices, std::shared_ptr<FakeLedger> ledger);
  ~FakeFabric() override;
  const std::vector<fabric::Device*>& devices() const override { return view_; }
  fabric::CmFabric* cm() override { return cm_; }
  // Installs an rdma_cm implementation (tests/unit/fake_cm.h); none by default. Not owned.
  void set_cm(fabric::CmFabric* cm) { cm_ = cm; }

 private:
  fabric::CmFabric* cm_ = nullptr;
  std::vector<std::unique_ptr<fabric::Device>> owned_;
  std::vector<fabric::Device*> view_;
};

// Moves a fake QP to the error state, flushing its stalled work: what librdmacm's rdma_disconnect does to its
// id's QP on IB and RoCE (FakeCmId::Disconnect calls it). A QP of another implementation is left alone.
void ModifyQpToError(fabric::Qp& qp);

// Gives a fake QP made on an rdma_cm id its CmQpOptions (FakeCmId::CreateQp calls it on the QP its PD made,
// before the id takes it): the send depth, and the receive slots, posted at once. A QP of another
// implementation (a test's wrapper) takes only the default options: other ones are FAILED_PRECONDITION.
absl::Status ConfigureCmQp(fabric::Qp& qp, const fabric::CmQpOptions& options);

// A SEND of `bytes` from the peer of a fake QP arrives at it (the receive model above). ABORTED, as the
// peer's failed completion, if the QP is not in RTS or the message is longer than kMaxReceive (which
// moves the QP to ERROR); OK once the message is on the wire, delivered now or when a slot is posted.
// FAILED_PRECONDITION for a QP of another implementation.
absl::Status DeliverSend(fabric::Qp& qp, const std::string& bytes);

}  // namespace rdmad::fake

#endif  // RDMAD_TESTS_UNIT_FAKE_FABRIC_H_
