#include "tests/unit/fake_fabric.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/status.h"
#include "server/fabric/hw_counters.h"

namespace rdmad::fake {

fabric::DeviceInfo MakeDeviceInfo(const std::string& name, bool native_rereg, bool mw_bounds_enforced) {
  fabric::DeviceInfo info;
  info.name = name;
  info.node_guid = "0011:2233:4455:6677";
  info.transport = "InfiniBand";
  info.node_type = "CA";
  info.firmware = "fake-1.0";
  fabric::PortInfo port;
  port.number = 1;
  port.state = "ACTIVE";
  port.max_mtu = 4096;
  port.active_mtu = 1024;
  port.link_layer = "Ethernet";
  port.gids.push_back({0, "fe80:0000:0000:0000:0011:22ff:fe33:4455", "RoCEv2"});
  port.gids.push_back({1, "0000:0000:0000:0000:0000:ffff:0a00:0001", "RoCEv2"});
  info.ports.push_back(port);
  info.max_mr_size = 1ull << 40;
  info.max_mr = 1024;
  info.max_mw = 1024;
  info.max_pd = 64;
  info.max_qp = 64;
  info.max_qp_rd_atom = 16;
  info.mw_type1 = true;
  info.mw_type2a = false;
  info.mw_type2b = true;
  info.native_rereg = native_rereg;
  info.native_rereg_probe = native_rereg ? "OK" : "IBV_REREG_MR_ERR_CMD, errno 95 (EOPNOTSUPP)";
  // Both answers of the window-bounds probe (server/verbs/mw_probe.h), in its words.
  info.mw_bounds_enforced = mw_bounds_enforced;
  info.mw_bounds_probe = mw_bounds_enforced
                             ? "a read past the window (inside its MR) was refused (remote access error): "
                               "window bounds enforced"
                             : "a read past the window (inside its MR) succeeded: window bounds not enforced";
  return info;
}

// ---------------------------------------------------------------------------------------------------------
// Ledger

FakeLedger::Counts FakeLedger::live() const {
  std::lock_guard<std::mutex> lock(mu_);
  Counts c;
  c.devices = devices_;
  c.pds = static_cast<int>(pds_.size());
  c.mrs = static_cast<int>(mrs_.size());
  c.mws = static_cast<int>(mws_.size());
  c.qps = static_cast<int>(qps_.size());
  return c;
}

std::vector<std::string> FakeLedger::events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

std::vector<std::string> FakeLedger::events_of(const std::vector<std::string>& verbs) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& e : events_) {
    const std::string verb = e.substr(0, e.find(' '));
    if (std::find(verbs.begin(), verbs.end(), verb) != verbs.end()) out.push_back(e);
  }
  return out;
}

void FakeLedger::ClearEvents() {
  std::lock_guard<std::mutex> lock(mu_);
  events_.clear();
}

int FakeLedger::calls(const std::string& verb) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = calls_.find(verb);
  return it == calls_.end() ? 0 : it->second;
}

std::vector<std::string> FakeLedger::violations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return violations_;
}

uint64_t FakeLedger::MrIdByLkey(uint32_t lkey) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, m] : mrs_) {
    if (m.lkey == lkey) return id;
  }
  return 0;
}

uint64_t FakeLedger::MwIdByRkey(uint32_t rkey) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, w] : mws_) {
    if (w.rkey == rkey) return id;
  }
  return 0;
}

uint64_t FakeLedger::QpIdByQpn(uint32_t qpn) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, q] : qps_) {
    if (q.qpn == qpn) return id;
  }
  return 0;
}

uint64_t FakeLedger::MwBoundMr(uint64_t mw_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = mws_.find(mw_id);
  return it == mws_.end() ? 0 : it->second.bound_mr;
}

int FakeLedger::MrBoundWindows(uint64_t mr_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return BoundWindowsLocked(mr_id);
}

FakeLedger::MrView FakeLedger::Mr(uint64_t mr_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  MrView v;
  auto it = mrs_.find(mr_id);
  if (it == mrs_.end()) return v;
  v.id = mr_id;
  v.pd = it->second.pd;
  v.addr = it->second.addr;
  v.length = it->second.length;
  v.access = it->second.access;
  v.lkey = it->second.lkey;
  v.rkey = it->second.rkey;
  v.unusable = it->second.unusable;
  return v;
}

int FakeLedger::BoundWindowsLocked(uint64_t mr_id) const {
  int n = 0;
  for (const auto& [id, w] : mws_) n += w.bound_mr == mr_id ? 1 : 0;
  return n;
}

void FakeLedger::FailNextRegMr(int err) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_reg_mr_.push_back(err);
}
void FakeLedger::FailNextRelease(int err) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_release_.push_back(err);
}
void FakeLedger::ScriptRereg(fabric::ReregCode code, int err) {
  std::lock_guard<std::mutex> lock(mu_);
  rereg_script_.push_back({code, err});
}
void FakeLedger::FailNextBind() {
  std::lock_guard<std::mutex> lock(mu_);
  fail_bind_++;
}
void FakeLedger::FailNextInvalidate() {
  std::lock_guard<std::mutex> lock(mu_);
  fail_invalidate_++;
}
void FakeLedger::FailNextConnect(int err) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_connect_.push_back(err);
}
void FakeLedger::FailNextAllocPd(int err) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_alloc_pd_.push_back(err);
}
void FakeLedger::FailNextAllocMw(int err) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_alloc_mw_.push_back(err);
}
void FakeLedger::FailNextCreateQp(int err) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_create_qp_.push_back(err);
}
void FakeLedger::SetRegMrHook(std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(mu_);
  reg_mr_hook_ = std::move(hook);
}

std::vector<std::string> FakeLedger::Sent(uint32_t qpn) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [q, bytes] : sent_) {
    if (q == qpn) out.push_back(bytes);
  }
  return out;
}

void FakeLedger::ForceQpError(uint32_t qpn) {
  std::lock_guard<std::mutex> lock(mu_);
  forced_error_qpns_.insert(qpn);
  FlushStalledLocked(qpn);
}

void FakeLedger::StallQp(uint32_t qpn) {
  std::lock_guard<std::mutex> lock(mu_);
  stalled_qpns_.insert(qpn);
}

int FakeLedger::Stalled(uint32_t qpn) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = stalled_.find(qpn);
  return it == stalled_.end() ? 0 : static_cast<int>(it->second.size());
}

void FakeLedger::FlushStalledLocked(uint32_t qpn) {
  stalled_qpns_.erase(qpn);
  auto it = stalled_.find(qpn);
  if (it == stalled_.end()) return;
  std::deque<Completion> flushed = std::move(it->second);
  stalled_.erase(it);
  for (Completion& c : flushed) Complete(std::move(c));
}

void FakeLedger::SetCounter(const std::string& device, uint32_t port, const std::string& name, uint64_t value) {
  std::lock_guard<std::mutex> lock(mu_);
  counters_[device][{port, name}] = value;
}

void FakeLedger::HideKernelKeys(bool hide) {
  std::lock_guard<std::mutex> lock(mu_);
  hide_kernel_keys_ = hide;
}

void FakeLedger::ClearCounters(const std::string& device) {
  std::lock_guard<std::mutex> lock(mu_);
  counters_.erase(device);
}

void FakeLedger::HoldCompletions() {
  std::lock_guard<std::mutex> lock(mu_);
  held_ = true;
}
void FakeLedger::ReleaseCompletions() {
  std::lock_guard<std::mutex> lock(mu_);
  held_ = false;
  if (defer_signals_) return;  // left to a poller's Device::PollFor (and signaled when deferring ends)
  for (const auto& c : completions_) Signal(c.device);
}
int FakeLedger::QueuedCompletions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(completions_.size());
}
void FakeLedger::Complete(const std::string& device, absl::AnyInvocable<void() &&> run) {
  Complete(Completion{device, std::move(run)});
}
void FakeLedger::Complete(Completion completion) {
  const std::string device = completion.device;
  completions_.push_back(std::move(completion));
  if (!held_ && !defer_signals_) Signal(device);
}
void FakeLedger::PollersFindNothing(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  pollers_find_nothing_ = on;
}
bool FakeLedger::pollers_find_nothing() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pollers_find_nothing_;
}
void FakeLedger::DeferSignals(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  defer_signals_ = on;
  if (!on && !held_) {
    for (const auto& c : completions_) Signal(c.device);
  }
}
void FakeLedger::Signal(const std::string& device) {
  auto it = completion_fds_.find(device);
  if (it == completion_fds_.end()) return;
  uint64_t one = 1;
  ssize_t n = write(it->second, &one, sizeof one);
  (void)n;
}

void FakeLedger::Event(const std::string& verb, const std::string& what) {
  events_.push_back(absl::StrCat(verb, " ", what));
}

void FakeLedger::Violation(const std::string& what) {
  std::fprintf(stderr, "fake fabric: VIOLATION: %s\n", what.c_str());
  violations_.push_back(what);
}

int FakeLedger::TakeErr(std::deque<int>& q) {
  if (q.empty()) return 0;
  int err = q.front();
  q.pop_front();
  return err;
}

// ---------------------------------------------------------------------------------------------------------
// Objects

class FakeMr final : public fabric::Mr {
 public:
  FakeMr(std::shared_ptr<FakeLedger> ledger, uint64_t id) : ledger_(std::move(ledger)), id_(id) {}

  ~FakeMr() override {
    std::lock_guard<std::mutex> lock(ledger_->mu_);
    if (released_) return;
    if (int n = ledger_->BoundWindowsLocked(id_); n > 0) {
      ledger_->Violation(absl::StrCat("mr ", id_, " destroyed while ", n, " window(s) are bound to it"));
      for (auto& [wid, w] : ledger_->mws_) {
        if (w.bound_mr == id_) w.bound_mr = 0;
      }
    }
    ledger_->Event("dereg_mr", absl::StrCat(id_));
    ledger_->mrs_.erase(id_);
  }

  uint64_t id() const { return id_; }
  // The ledger's state of this MR; callers hold the ledger mutex. Null once released.
  FakeLedger::MrState* state_locked() {
    auto it = ledger_->mrs_.find(id_);
    return released_ || it == ledger_->mrs_.end() ? nullptr : &it->second;
  }

  uint64_t addr() const override { return Get().addr; }
  uint64_t length() const override { return Get().length; }
  uint32_t lkey() const override { return Get().lkey; }
  uint32_t rkey() const override { return Get().rkey; }
  uint32_t access() const override { return Get().access; }

  fabric::ReregCode Rereg(int flags, fabric::Pd* new_pd, void* addr, size_t length, uint32_t access,
                          int* err) override;

  absl::Status Release() override {
    std::lock_guard<std::mutex> lock(ledger_->mu_);
    ledger_->Call("dereg_mr");
    if (released_) {
      ledger_->Violation(absl::StrCat("mr ", id_, " released twice"));
      return absl::OkStatus();
    }
    if (int e = ledger_->TakeErr(ledger_->fail_release_); e != 0) return ErrnoError("ibv_dereg_mr", e);
    // ibv_dereg_mr(3) NOTES: fails while a window is bound.
    if (ledger_->BoundWindowsLocked(id_) > 0) return ErrnoError("ibv_dereg_mr", EBUSY);
    released_ = true;
    ledger_->Event("dereg_mr", absl::StrCat(id_));
    ledger_->mrs_.erase(id_);
    return absl::OkStatus();
  }

 private:
  FakeLedger::MrState Get() const {
    std::lock_guard<std::mutex> lock(ledger_->mu_);
    auto it = ledger_->mrs_.find(id_);
    if (released_ || it == ledger_->mrs_.end()) {
      ledger_->Violation(absl::StrCat("mr ", id_, " used after it was released"));
      return FakeLedger::MrState();
    }
    return it->second;
  }

  std::shared_ptr<FakeLedger> ledger_;
  const uint64_t id_;
  bool released_ = false;
};

class FakeMw final : public fabric::Mw {
 public:
  FakeMw(std::shared_ptr<FakeLedger> ledger, uint64_t id, fabric::MwType type)
      : ledger_(std::move(ledger)), id_(id), type_(type) {}
  ~FakeMw() override {
    std::lock_guard<std::mutex> lock(ledger_->mu_);
    ledger_->Event("dealloc_mw", absl::StrCat(id_));
    ledger_->mws_.erase(id_);
  }
  uint64_t id() const { return id_; }
  fabric::MwType type() const override { return type_; }
  uint32_t rkey() const override {
    std::lock_guard<std::mutex> lock(ledger_->mu_);
    auto it = ledger_->mws_.find(id_);
    return it == ledger_->mws_.end() ? 0 : it->second.rkey;
  }

 private:
  std::shared_ptr<FakeLedger> ledger_;
  const uint64_t id_;
  const fabric::MwType type_;
};

class FakeQp final : public fabric::Qp {
 public:
  FakeQp(std::shared_ptr<FakeLedger> ledger, uint64_t id, uint64_t pd, fabric::QpEndpoint local)
      : ledger_(std::move(ledger)), id_(id), pd_(pd), local_(std::move(local)) {}
  ~FakeQp() override {
    std::lock_guard<std::mutex> lock(ledger_->mu_);
    for (auto& [wid, w] : ledger_->mws_) {
      if (w.type == fabric::MwType::kType2 && w.bound_qp == id_ && w.bound_mr != 0) {
        ledger_->Violation(absl::StrCat("qp ", id_, " destroyed while type 2 mw ", wid, " is bound on it"));
      }
    }
    if (auto it = ledger_->stalled_.find(local_.qpn); it != ledger_->stalled_.end()) {
      ledger_->Violation(absl::StrCat("qp ", id_, " destroyed with ", it->second.size(), " stalled work requests"));
      stalled_dropped_ = std::move(it->second);  // destroyed after the mutex is released: they own callbacks
      ledger_->stalled_.erase(it);
    }
    ledger_->stalled_qpns_.erase(local_.qpn);
    // Its backlog is dropped unrun (with the members, after the mutex is released: they own callbacks).
    if (!backlog_.empty()) ledger_->Event("drop_backlog", absl::StrCat(id_, " ", backlog_.size()));
    ledger_->Event("destroy_qp", absl::StrCat(id_));
    ledger_->qps_.erase(id_);
  }

  fabric::QpEndpoint local() const override { return local_; }
  fabric::QpState state() const override {
    std::lock_guard<std::mutex> lock(ledger_->mu_);
    return ledger_->forced_error_qpns_.count(local_.qpn) ? fabric::QpState::kError : state_;
  }

  absl::Status Connect(const fabric::QpEndpoint& remote) override {
    std::lock_guard<std::mutex> lock(ledger_->mu_);
    ledger_->Call("connect");
    if (int e = ledger_->TakeErr(ledger_->fail_connect_); e != 0) {
      state_ = fabric::QpState::kError;
      return ErrnoError("ibv_modify_qp", e, "INIT->RTR");
    }
    if (remote.qpn == 0 || remote.qpn > 0xffffff) return ErrnoError("ibv_modify_qp", EINVAL, "INIT->RTR");
    state_ = fabric::QpState::kRts;
    ledger_->Event("connect_qp", absl::StrCat(id_));
    return absl::OkStatus();
  }

  absl::Status PostBind(fabric::Mw& mw, const fabric::BindSpec& spec, fabric::BindDone done) override {
    Work work;
    work.op = Work::Op::kBind;
    work.mw = &mw;
    work.spec = spec;
    work.spec.then = nullptr;  // its bytes and callback are the Work's own
    work.bound = std::move(done);
    if (spec.then != nullptr && spec.then->message) {
      // The bytes are asked for at the post, even if the bind then waits in the backlog, without the ledger's
      // mutex (the key is the one the bind will give: the fake's windows step their key as ibv_inc_rkey does).
      uint32_t next = 0;
      {
        std::lock_guard<std::mutex> lock(ledger_->mu_);
        auto* fmw = dynamic_cast<FakeMw*>(&mw);
        auto it = fmw ? ledger_->mws_.find(fmw->id()) : ledger_->mws_.end();
        if (it != ledger_->mws_.end()) next = IncRkey(it->second.rkey);
      }
      work.bytes = std::move(spec.then->message)(next);
      if (!work.bytes.empty()) work.done = std::move(spec.then->done);
    }
    std::lock_guard<std::mutex> lock(ledger_->mu_);
    ledger_->Call("bind");
    if (work.bytes.size() > fabric::kMaxInlineSend) return ErrnoError("ibv_post_send", EINVAL);
    return SubmitLocked(std::move(work));
  }
  absl::Status PostInvalidate(fabric::Mw& mw, fabric::Mr& bound_to, fabric::WorkDone done) override {
    std::lock_guard<std::mutex> lock(ledger_->mu_);
    ledger_->Call("invalidate");
    Work work;
    work.op = Work::Op::kInvalidate;
    work.mw = &mw;
    work.bound_to = &bound_to;
    work.done = std::move(done);
    return SubmitLocked(std::move(work));
  }

  uint64_t completion_key() const override { return id_; }

  absl::Status PostSend(const std::string& bytes, fabric::WorkDone done) override {
    std::lock_guard<std::mutex> lock(ledger_->mu_);
    ledger_->Call("send");
    if (bytes.size() > fabric::kMaxInlineSend) return ErrnoError("ibv_post_send", EINVAL);
    Work work;
    work.op = Work::Op::kSend;
    work.bytes = bytes;
    work.done = std::move(done);
    return SubmitLocked(std::move(work));
  }

  // Callers hold the ledger mutex. A completion of one of this QP's work requests is being drained: its
  // room on the send queue is free, and the backlog goes on.
  void SendDrainedLocked() {
    in_flight_--;
    DrainLocked();
  }
  int BacklogLocked() const { return static_cast<int>(backlog_.size()); }

  // ModifyQpToError's.
  void ToError() {
    std::lock_guard<std::mutex> lock(ledger_->mu_);
    state_ = fabric::QpState::kError;
    ledger_->FlushStalledLocked(local_.qpn);
  }

  // ConfigureCmQp's.
  void Configure(const fabric::CmQpOptions& options) {
    std::lock_guard<std::mutex> lock(ledger_->mu_);
    send_depth_ = options.send_depth;
    posted_receives_ = options.receive.slots;
    on_message_ = std::make_shared<const std::function<void(std::string)>>(options.receive.on_message);
  }

  // DeliverSend's: a SEND from the peer.
  absl::Status Receive(const std::string& bytes) {
    std::lock_guard<std::mutex> lock(ledger_->mu_);
    if (ErrorLocked() || state_ != fabric::QpState::kRts) {
      return absl::AbortedError(absl::StrCat("the peer's SEND failed: qp ", id_, " is not in RTS"));
    }
    if (bytes.size() > fabric::kMaxReceive) {
      state_ = fabric::QpState::kError;  // its receive's local length error
      ledger_->FlushStalledLocked(local_.qpn);
      waiting_.clear();
      return absl::AbortedError(absl::StrCat("the peer's SEND of ", bytes.size(), " bytes failed: qp ", id_,
                                             " receives at most ", fabric::kMaxReceive,
                                             " (a local length error there; it is now in the error state)"));
    }
    waiting_.push_back(bytes);
    DeliverLocked();
    return absl::OkStatus();
  }

  // Callers hold the ledger mutex. One of this QP's receive completions is being drained: its slot is
  // posted again (so a waiting message may take it).
  void ReceiveDrainedLocked() {
    posted_receives_++;
    DeliverLocked();
  }

 private:
  // One post, as it waits in the backlog. The objects it names outlive its completion (fabric.h, Qp).
  struct Work {
    enum class Op { kSend, kInvalidate, kBind };
    Op op = Op::kSend;
    fabric::Mw* mw = nullptr;        // kBind, kInvalidate
    fabric::Mr* bound_to = nullptr;  // kInvalidate
    fabric::BindSpec spec;           // kBind (without `then`)
    std::string bytes;               // kSend: the SEND's; kBind: the fenced SEND's (empty: none)
    fabric::BindDone bound;          // kBind
    fabric::WorkDone done;           // kSend, kInvalidate; kBind: the fenced SEND's
    int wrs() const { return op == Op::kBind && !bytes.empty() ? 2 : 1; }
  };

  // Callers hold the ledger mutex. Posts `work`, or queues it (OK) behind the backlog or beyond the send
  // depth, as the verbs backend does.
  absl::Status SubmitLocked(Work work) {
    if (!backlog_.empty() || in_flight_ + work.wrs() > static_cast<int>(send_depth_)) {
      ledger_->Event("backlog", absl::StrCat(id_));
      backlog_.push_back(std::move(work));
      return absl::OkStatus();
    }
    return PostLocked(work, /*queued=*/false);
  }
  // Callers hold the ledger mutex. Posts `work` now. A refused post returns the error, and `work` keeps its
  // callbacks. One that waited in the backlog and finds the QP in the error state is flushed.
  absl::Status PostLocked(Work& work, bool queued) {
    const char* call = work.op == Work::Op::kSend         ? "ibv_post_send(SEND)"
                       : work.op == Work::Op::kInvalidate ? "ibv_post_send(LOCAL_INV)"
                                                          : "ibv_post_send(BIND_MW)";
    const bool flush = queued && ErrorLocked();
    if (flush || StalledLocked()) {
      auto hold = [&](const std::string& what, auto& done) {
        if (flush) {
          FlushedLocked(what, std::move(done));
        } else {
          StallLocked(what, std::move(done));
        }
      };
      if (work.op == Work::Op::kBind) {
        hold(call, work.bound);
        if (!work.bytes.empty()) hold("ibv_post_send(SEND after BIND_MW)", work.done);
      } else {
        hold(call, work.done);
      }
      return absl::OkStatus();
    }
    switch (work.op) {
      case Work::Op::kSend:
        SendLocked(work.bytes, std::move(work.done));
        return absl::OkStatus();
      case Work::Op::kInvalidate: {
        absl::Status s = InvalidateLocked(*work.mw, *work.bound_to);
        if (!s.ok() && s.code() != absl::StatusCode::kAborted) return s;  // the post failed
        CompleteLocked([done = std::move(work.done), s]() mutable { std::move(done)(s); });
        return absl::OkStatus();
      }
      case Work::Op::kBind: {
        absl::StatusOr<uint32_t> r = BindLocked(dynamic_cast<FakeMw*>(work.mw), work.spec);
        if (!r.ok() && r.status().code() != absl::StatusCode::kAborted) return r.status();  // the post failed
        CompleteLocked([done = std::move(work.bound), r]() mutable { std::move(done)(r); });
        if (work.bytes.empty()) return absl::OkStatus();
        // Behind the bind on the same send queue: flushed if the bind failed (the QP went to ERROR).
        ledger_->Call("send");
        SendLocked(work.bytes, std::move(work.done));
        return absl::OkStatus();
      }
    }
    return absl::OkStatus();
  }
  // Callers hold the ledger mutex. Posts from the backlog's head while the send queue has room. A post
  // refused now gets the error through completions (its post returned OK), each callback once.
  void DrainLocked() {
    while (!backlog_.empty() && in_flight_ + backlog_.front().wrs() <= static_cast<int>(send_depth_)) {
      Work work = std::move(backlog_.front());
      backlog_.pop_front();
      absl::Status s = PostLocked(work, /*queued=*/true);
      if (s.ok()) continue;
      if (work.bound) ledger_->Complete(DeviceLocked(), [b = std::move(work.bound), s]() mutable { std::move(b)(s); });
      if (work.done) ledger_->Complete(DeviceLocked(), [d = std::move(work.done), s]() mutable { std::move(d)(s); });
    }
  }
  // Callers hold the ledger mutex. Queues the completion of one work request of this QP (in flight until
  // it is drained).
  void CompleteLocked(absl::AnyInvocable<void() &&> run) {
    in_flight_++;
    FakeLedger::Completion c;
    c.device = DeviceLocked();
    c.run = std::move(run);
    c.qp = id_;
    ledger_->Complete(std::move(c));
  }
  void SendLocked(const std::string& bytes, fabric::WorkDone done) {
    absl::Status s;
    const bool error = state_ == fabric::QpState::kError || ledger_->forced_error_qpns_.count(local_.qpn) > 0;
    if (error || state_ != fabric::QpState::kRts) {
      s = CompletionError("ibv_post_send(SEND)");  // flushed, as on a QP in the error state
    } else {
      ledger_->sent_.push_back({local_.qpn, bytes});
      ledger_->Event("send", absl::StrCat(id_));
    }
    CompleteLocked([done = std::move(done), s]() mutable { std::move(done)(s); });
  }

  // Callers hold the ledger mutex. The QP is in the error state (its own, or ForceQpError's).
  bool ErrorLocked() const {
    return state_ == fabric::QpState::kError || ledger_->forced_error_qpns_.count(local_.qpn) > 0;
  }
  // Callers hold the ledger mutex. Messages from the peer take posted slots, in order, while the QP is in RTS;
  // in the error state the ones waiting are dropped (the peer's SENDs fail).
  void DeliverLocked() {
    if (ErrorLocked()) {
      waiting_.clear();
      return;
    }
    while (posted_receives_ > 0 && !waiting_.empty() && state_ == fabric::QpState::kRts) {
      posted_receives_--;
      ledger_->Event("receive", absl::StrCat(id_));
      FakeLedger::Completion c;
      c.device = DeviceLocked();
      c.qp = id_;
      c.receive = true;
      c.run = [on_message = on_message_, bytes = std::move(waiting_.front())]() mutable {
        if (*on_message) (*on_message)(std::move(bytes));
      };
      waiting_.pop_front();
      ledger_->Complete(std::move(c));
    }
  }

  // Callers hold the ledger mutex. StallQp's: work posted now waits until the QP goes to the error state.
  bool StalledLocked() const {
    return ledger_->stalled_qpns_.count(local_.qpn) > 0 && state_ != fabric::QpState::kError;
  }
  template <typename Done>
  void StallLocked(const std::string& call, Done done) {
    in_flight_++;
    FakeLedger::Completion c;
    c.device = DeviceLocked();
    c.run = [done = std::move(done), call]() mutable { std::move(done)(Flushed(call)); };
    c.qp = id_;
    ledger_->stalled_[local_.qpn].push_back(std::move(c));
  }
  // Posted on a QP in the error state: completes flushed.
  template <typename Done>
  void FlushedLocked(const std::string& call, Done done) {
    CompleteLocked([done = std::move(done), call]() mutable { std::move(done)(Flushed(call)); });
  }
  static absl::Status Flushed(const std::string& call) {
    return absl::AbortedError(absl::StrCat(call, ": completion failed: flushed, the QP is in the error state"));
  }
  std::string DeviceLocked() const {
    auto it = ledger_->pds_.find(pd_);
    return it == ledger_->pds_.end() ? std::string() : it->second.device;
  }
  // Callers hold the ledger mutex.
  absl::Status InvalidateLocked(fabric::Mw& mw, fabric::Mr& bound_to);
  // Callers hold the ledger mutex.
  absl::StatusOr<uint32_t> BindLocked(FakeMw* mw, const fabric::BindSpec& spec);

  // Callers hold the ledger mutex. A completion error: the QP goes to the error state.
  absl::Status CompletionError(const std::string& what) {
    state_ = fabric::QpState::kError;
    return absl::AbortedError(absl::StrCat(what, ": completion failed: fake completion error; the QP is now "
                                                 "in the error state"));
  }

  std::shared_ptr<FakeLedger> ledger_;
  const uint64_t id_;
  const uint64_t pd_;
  const fabric::QpEndpoint local_;
  fabric::QpState state_ = fabric::QpState::kInit;
  std::deque<FakeLedger::Completion> stalled_dropped_;
  // The send queue, under the ledger mutex: work requests posted whose completions are not drained yet
  // (stalled ones too), and the posts waiting for room.
  uint32_t send_depth_ = 8;  // CmQpOptions' default; the verbs backend's for every QP
  int in_flight_ = 0;
  std::deque<Work> backlog_;
  // Receives (Configure), under the ledger mutex.
  uint32_t posted_receives_ = 0;       // slots posted and free
  std::deque<std::string> waiting_;    // the peer's SENDs that found no slot (RNR), in order
  std::shared_ptr<const std::function<void(std::string)>> on_message_ =
      std::make_shared<const std::function<void(std::string)>>();
};

int FakeLedger::Backlog(uint32_t qpn) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, q] : qps_) {
    if (q.qpn == qpn) return q.qp->BacklogLocked();
  }
  return 0;
}

class FakePd final : public fabric::Pd {
 public:
  FakePd(std::shared_ptr<FakeLedger> ledger, uint64_t id, const fabric::DeviceInfo* info)
      : ledger_(std::move(ledger)), id_(id), info_(info) {}
  ~FakePd() override {
    std::lock_guard<std::mutex> lock(ledger_->mu_);
    int children = 0;
    for (const auto& [k, m] : ledger_->mrs_) children += m.pd == id_ ? 1 : 0;
    for (const auto& [k, w] : ledger_->mws_) children += w.pd == id_ ? 1 : 0;
    for (const auto& [k, q] : ledger_->qps_) children += q.pd == id_ ? 1 : 0;
    if (children > 0) {
      ledger_->Violation(absl::StrCat("pd ", id_, " deallocated while it holds ", children, " object(s)"));
    }
    ledger_->Event("dealloc_pd", absl::StrCat(id_));
    ledger_->pds_.erase(id_);
  }
  uint64_t id() const { return id_; }

  absl::StatusOr<std::unique_ptr<fabric::Mr>> RegMr(void* addr, size_t length, uint32_t access) override {
    std::function<void()> hook;
    {
      std::lock_guard<std::mutex> lock(ledger_->mu_);
      hook = ledger_->reg_mr_hook_;
    }
    if (hook) hook();  // without the lock: the hook may call back into the registry
    std::lock_guard<std::mutex> lock(ledger_->mu_);
    ledger_->Call("reg_mr");
    if (int e = ledger_->TakeErr(ledger_->fail_reg_mr_); e != 0) return ErrnoError("ibv_reg_mr", e);
    if (addr == nullptr || length == 0) return ErrnoError("ibv_reg_mr", EINVAL);
    if ((access & (fabric::kRemoteWrite | fabric::kRemoteAtomic)) && !(access & fabric::kLocalWrite)) {
      ledger_->Violation("ibv_reg_mr with REMOTE_WRITE/ATOMIC but no LOCAL_WRITE");
      return ErrnoError("ibv_reg_mr", EINVAL);
    }
    if (info_->max_mr_size && length > info_->max_mr_size) return ErrnoError("ibv_reg_mr", EINVAL);
    if (!ledger_->pds_.count(id_)) ledger_->Violation(absl::StrCat("reg_mr on dead pd ", id_));
    const uint64_t id = ledger_->next_mr_++;
    FakeLedger::MrState st;
    st.pd = id_;
    st.addr = reinterpret_cast<uint64_t>(addr);
    st.length = length;
    st.access = access;
    st.lkey = ledger_->next_key_++;
    st.rkey = ledger_->next_key_++;
    ledger_->mrs_[id] = st;
    ledger_->Event("reg_mr", absl::StrCat(id));
    return std::unique_ptr<fabric::Mr>(new FakeMr(ledger_, id));
  }

  absl::StatusOr<std::unique_ptr<fabric::Mw>> AllocMw(fabric::MwType type) override {
    std::lock_guard<std::mutex> lock(ledger_->mu_);
    ledger_->Call("alloc_mw");
    if (int e = ledger_->TakeErr(ledger_->fail_alloc_mw_); e != 0) return ErrnoError("ibv_alloc_mw", e);
    const bool supported =
        type == fabric::MwType::kType1 ? info_->mw_type1 : (info_->mw_type2a || info_->mw_type2b);
    if (!supported) {
      ledger_->Violation("ibv_alloc_mw of a window type the device does not support");
      return ErrnoError("ibv_alloc_mw", EOPNOTSUPP);
    }
    const uint64_t id = ledger_->next_mw_++;
    FakeLedger::MwState st;
    st.pd = id_;
    st.type = type;
    st.rkey = static_cast<uint32_t>(id << 8);
    ledger_->mws_[id] = st;
    ledger_->Event("alloc_mw", absl::StrCat(id));
    return std::unique_ptr<fabric::Mw>(new FakeMw(ledger_, id, type));
  }

  absl::StatusOr<std::unique_ptr<fabric::Qp>> CreateQp(const fabric::QpOptions& options) override {
    std::lock_guard<std::mutex> lock(ledger_->mu_);
    ledger_->Call("create_qp");
    if (int e = ledger_->TakeErr(ledger_->fail_create_qp_); e != 0) return ErrnoError("ibv_create_qp", e);
    if (options.port == 0 || options.port > info_->ports.size()) {
      return ErrnoError("ibv_modify_qp", EINVAL, "RESET->INIT");
    }
    const fabric::PortInfo& port = info_->ports[options.port - 1];
    const fabric::GidEntry* gid = nullptr;
    for (const auto& g : port.gids) {
      if (g.index == options.gid_index) gid = &g;
    }
    if (port.link_layer == "Ethernet" && gid == nullptr) return ErrnoError("ibv_query_gid", EINVAL, {}, "gid_index");
    const uint64_t id = ledger_->next_qp_++;
    fabric::QpEndpoint local;
    local.qpn = static_cast<uint32_t>(0x100 + id);
    local.psn = static_cast<uint32_t>((0x1000 + id * 7) & 0xffffff);
    local.gid = gid ? gid->gid : "";
    local.lid = port.lid;
    FakeLedger::QpState st;
    st.pd = id_;
    st.qpn = local.qpn;
    auto* qp = new FakeQp(ledger_, id, id_, local);
    st.qp = qp;
    ledger_->qps_[id] = st;
    ledger_->Event("create_qp", absl::StrCat(id));
    return std::unique_ptr<fabric::Qp>(qp);
  }

 private:
  std::shared_ptr<FakeLedger> ledger_;
  const uint64_t id_;
  const fabric::DeviceInfo* info_;
};

fabric::ReregCode FakeMr::Rereg(int flags, fabric::Pd* new_pd, void* addr, size_t length, uint32_t access,
                                int* err) {
  std::lock_guard<std::mutex> lock(ledger_->mu_);
  ledger_->Call("rereg_mr");
  FakeLedger::MrState* state = state_locked();
  if (state == nullptr) {
    ledger_->Violation(absl::StrCat("rereg of released mr ", id_));
    *err = EINVAL;
    return fabric::ReregCode::kErrInput;
  }
  FakeLedger::MrState& st = *state;
  if (st.unusable) ledger_->Violation(absl::StrCat("rereg of unusable mr ", id_));
  if (ledger_->BoundWindowsLocked(id_) > 0) {
    ledger_->Violation(absl::StrCat("rereg of mr ", id_, " while windows are bound"));
  }
  FakeLedger::ReregScript script;
  if (!ledger_->rereg_script_.empty()) {
    script = ledger_->rereg_script_.front();
    ledger_->rereg_script_.pop_front();
  }
  // libibverbs' own input checks come first (IBV_REREG_MR_ERR_INPUT).
  const int known = fabric::kChangeTranslation | fabric::kChangePd | fabric::kChangeAccess;
  auto* pd = dynamic_cast<FakePd*>(new_pd);
  if (flags == 0 || (flags & ~known) || ((flags & fabric::kChangePd) && pd == nullptr) ||
      ((flags & fabric::kChangeTranslation) && (addr == nullptr || length == 0))) {
    ledger_->Violation(absl::StrCat("rereg of mr ", id_, " with invalid input (flags ", flags, ")"));
    *err = EINVAL;
    return fabric::ReregCode::kErrInput;
  }
  *err = script.err;
  ledger_->Event("rereg_mr", absl::StrCat(id_, " ", fabric::ReregCodeName(script.code)));
  switch (script.code) {
    case fabric::ReregCode::kOk:
    case fabric::ReregCode::kErrDoForkOld:
      if (flags & fabric::kChangeTranslation) {
        st.addr = reinterpret_cast<uint64_t>(addr);
        st.length = length;
      }
      if (flags & fabric::kChangeAccess) st.access = access;
      if (flags & fabric::kChangePd) st.pd = pd->id();
      st.lkey = ledger_->next_key_++;
      st.rkey = ledger_->next_key_++;
      break;
    case fabric::ReregCode::kErrInput:
    case fabric::ReregCode::kErrDontForkNew:
      break;
    default:
      st.unusable = true;
      break;
  }
  return script.code;
}

absl::StatusOr<uint32_t> FakeQp::BindLocked(FakeMw* mw, const fabric::BindSpec& spec) {
  auto wit = mw ? ledger_->mws_.find(mw->id()) : ledger_->mws_.end();
  if (wit == ledger_->mws_.end()) {
    ledger_->Violation("bind of an unknown window");
    return CompletionError("bind");
  }
  FakeLedger::MwState& w = wit->second;
  const bool type1 = w.type == fabric::MwType::kType1;
  const char* call = type1 ? "ibv_bind_mw" : "ibv_post_send(BIND_MW)";
  if (state_ != fabric::QpState::kRts) {
    ledger_->Violation(absl::StrCat("bind of mw ", mw->id(), " posted on qp ", id_, " not in RTS"));
    return ErrnoError(call, EINVAL);
  }
  if (w.pd != pd_) ledger_->Violation(absl::StrCat("bind of mw ", mw->id(), " on qp ", id_, " of another pd"));
  auto* mr = dynamic_cast<FakeMr*>(spec.mr);
  FakeLedger::MrState* m = mr ? mr->state_locked() : nullptr;
  if (spec.length == 0) {
    // Type 1 unbind: a zero-length bind (naming the MR the window is bound to, or none).
    if (!type1) {
      ledger_->Violation(absl::StrCat("zero-length bind of type 2 mw ", mw->id()));
      return CompletionError(call);
    }
    if (mr != nullptr && w.bound_mr != 0 && w.bound_mr != mr->id()) {
      ledger_->Violation(absl::StrCat("unbind of mw ", mw->id(), " names mr ", mr->id(), ", it is bound to mr ",
                                      w.bound_mr));
    }
    if (ledger_->fail_bind_ > 0) {
      ledger_->fail_bind_--;
      return CompletionError(call);
    }
    w.bound_mr = 0;
    w.bound_qp = 0;
    w.rkey = IncRkey(w.rkey);
    ledger_->Event("unbind_mw", absl::StrCat(mw->id()));
    return w.rkey;
  }
  std::string problem;
  if (m == nullptr) {
    problem = "the MR is not registered";
  } else if (m->unusable) {
    problem = "the MR is unusable";
  } else if (m->pd != w.pd) {
    problem = "the MR is in another PD";
  } else if (!(m->access & fabric::kMwBind)) {
    problem = "the MR lacks MW_BIND";
  } else if (spec.addr < m->addr || spec.length > m->length || spec.addr - m->addr > m->length - spec.length) {
    problem = "the window passes the MR's bounds";
  } else if (spec.access & (fabric::kLocalWrite | fabric::kMwBind)) {
    problem = "window access with LOCAL_WRITE or MW_BIND";
  } else if ((spec.access & (fabric::kRemoteWrite | fabric::kRemoteAtomic)) && !(m->access & fabric::kLocalWrite)) {
    problem = "REMOTE_WRITE/ATOMIC window on an MR without LOCAL_WRITE";
  } else if (type1 && (spec.access & fabric::kZeroBased)) {
    problem = "zero-based type 1 window";
  } else if (!type1 && w.bound_mr != 0) {
    problem = "type 2 window bound twice";
  }
  if (!problem.empty()) {
    ledger_->Violation(absl::StrCat("bind of mw ", mw->id(), ": ", problem));
    return CompletionError(call);
  }
  if (ledger_->fail_bind_ > 0) {
    ledger_->fail_bind_--;
    return CompletionError(call);
  }
  w.rkey = IncRkey(w.rkey);
  w.bound_mr = mr->id();
  w.bound_qp = type1 ? 0 : id_;
  ledger_->Event("bind_mw", absl::StrCat(mw->id()));
  return w.rkey;
}

absl::Status FakeQp::InvalidateLocked(fabric::Mw& fmw, fabric::Mr& bound_to) {
  auto* mw = dynamic_cast<FakeMw*>(&fmw);
  auto wit = mw ? ledger_->mws_.find(mw->id()) : ledger_->mws_.end();
  if (wit == ledger_->mws_.end()) {
    ledger_->Violation("invalidate of an unknown window");
    return CompletionError("invalidate");
  }
  FakeLedger::MwState& w = wit->second;
  auto* mr = dynamic_cast<FakeMr*>(&bound_to);
  if (mr == nullptr || mr->state_locked() == nullptr || w.bound_mr != mr->id()) {
    ledger_->Violation(absl::StrCat("invalidate of mw ", mw->id(), " names an MR it is not bound to"));
  }
  if (w.type == fabric::MwType::kType1) {
    if (ledger_->fail_invalidate_ > 0) {
      ledger_->fail_invalidate_--;
      return CompletionError("ibv_bind_mw");
    }
    // As the verbs backend: a zero-length bind naming the MR.
    fabric::BindSpec unbind;
    unbind.mr = &bound_to;
    unbind.addr = mr && mr->state_locked() ? mr->state_locked()->addr : 0;
    return BindLocked(mw, unbind).status();
  }
  if (state_ != fabric::QpState::kRts) {
    ledger_->Violation(absl::StrCat("invalidate of mw ", mw->id(), " posted on qp ", id_, " not in RTS"));
    return ErrnoError("ibv_post_send(LOCAL_INV)", EINVAL);
  }
  if (w.bound_qp != id_) {
    ledger_->Violation(absl::StrCat("LOCAL_INV of mw ", mw->id(), " on qp ", id_, ", not the QP it is bound on"));
  }
  if (ledger_->fail_invalidate_ > 0) {
    ledger_->fail_invalidate_--;
    return CompletionError("ibv_post_send(LOCAL_INV)");
  }
  w.bound_mr = 0;
  w.bound_qp = 0;
  ledger_->Event("invalidate_mw", absl::StrCat(mw->id()));
  return absl::OkStatus();
}

class FakeDevice final : public fabric::Device {
 public:
  FakeDevice(std::shared_ptr<FakeLedger> ledger, fabric::DeviceInfo info)
      : ledger_(std::move(ledger)), info_(std::move(info)), fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    std::lock_guard<std::mutex> lock(ledger_->mu_);
    ledger_->completion_fds_[info_.name] = fd_;
    ledger_->devices_++;
    ledger_->Event("open_device", info_.name);
  }
  ~FakeDevice() override {
    std::deque<FakeLedger::Completion> dropped;  // destroyed after the mutex is released: they own objects
    std::lock_guard<std::mutex> lock(ledger_->mu_);
    for (const auto& [id, p] : ledger_->pds_) {
      if (p.device == info_.name) {
        ledger_->Violation(absl::StrCat("device ", info_.name, " closed while pd ", id, " is allocated"));
      }
    }
    ledger_->devices_--;
    ledger_->Event("close_device", info_.name);
    ledger_->completion_fds_.erase(info_.name);
    // Completions never drained are dropped, as a destroyed CQ's are.
    for (auto it = ledger_->completions_.begin(); it != ledger_->completions_.end();) {
      if (it->device != info_.name) {
        ++it;
        continue;
      }
      dropped.push_back(std::move(*it));
      it = ledger_->completions_.erase(it);
    }
    close(fd_);
  }
  const fabric::DeviceInfo& info() const override { return info_; }
  int completion_fd() const override { return fd_; }
  // The fake's completions are queued at the post: each pass runs what there is of the device's (not only
  // that QP's), unless held; passes repeat until `done` or the budget is spent (a completion held now may
  // be released meanwhile).
  void PollFor(uint64_t, absl::Duration budget, const std::function<bool()>& done) override {
    const absl::Time deadline = absl::Now() + budget;
    const bool find_nothing = ledger_->pollers_find_nothing();
    for (;;) {
      if (!done() && !find_nothing) RunQueued();
      if (done() || absl::Now() >= deadline) break;
      std::this_thread::yield();
    }
    std::lock_guard<std::mutex> lock(ledger_->mu_);
    for (const auto& c : ledger_->completions_) {
      if (c.device == info_.name && !ledger_->held_) ledger_->Signal(c.device);  // left: the dispatcher's
    }
  }
  void DrainCompletions() override {
    uint64_t count;
    ssize_t n = read(fd_, &count, sizeof count);
    (void)n;
    RunQueued();
  }
  void RunQueued() {
    std::vector<absl::AnyInvocable<void() &&>> ready;
    {
      std::lock_guard<std::mutex> lock(ledger_->mu_);
      if (ledger_->held_) return;
      std::vector<FakeLedger::Completion> taken;
      for (auto it = ledger_->completions_.begin(); it != ledger_->completions_.end();) {
        if (it->device != info_.name) {
          ++it;
          continue;
        }
        taken.push_back(std::move(*it));
        it = ledger_->completions_.erase(it);
      }
      // Taken as a poll takes them: a receive's slot is posted again (which may queue the next message's
      // completion), a send's room on its QP goes to the QP's backlog (which may queue more), both for the
      // next pass; a destroyed QP's receives are dropped with its CQ.
      for (FakeLedger::Completion& c : taken) {
        auto q = c.qp != 0 ? ledger_->qps_.find(c.qp) : ledger_->qps_.end();
        if (q == ledger_->qps_.end()) {
          if (c.receive) continue;
        } else if (c.receive) {
          q->second.qp->ReceiveDrainedLocked();
        } else {
          q->second.qp->SendDrainedLocked();
        }
        ready.push_back(std::move(c.run));
      }
    }
    for (auto& r : ready) std::move(r)();  // without the mutex: they call back into the registry
  }
  std::vector<fabric::HwCounterValue> ReadCounters() const override {
    std::lock_guard<std::mutex> lock(ledger_->mu_);
    ledger_->Call("read_counters");
    std::vector<fabric::HwCounterValue> out;
    auto it = ledger_->counters_.find(info_.name);
    if (it == ledger_->counters_.end()) return out;
    for (const auto& [key, value] : it->second) {
      out.push_back({key.first, key.second, value, fabric::IsRemoteAccessErrorCounter(key.second)});
    }
    return out;
  }
  absl::StatusOr<fabric::restrack::DeviceDump> KernelObjects() const override {
    std::lock_guard<std::mutex> lock(ledger_->mu_);
    ledger_->Call("kernel_objects");
    fabric::restrack::DeviceDump dump;
    dump.name = info_.name;
    std::set<uint64_t> here;
    for (const auto& [id, pd] : ledger_->pds_) {
      if (pd.device != info_.name) continue;
      here.insert(id);
      dump.pds.push_back({static_cast<uint32_t>(id)});
    }
    for (const auto& [id, mr] : ledger_->mrs_) {
      if (!here.count(mr.pd)) continue;
      fabric::restrack::KernelMr k;
      k.mrn = static_cast<uint32_t>(id);
      k.pdn = static_cast<uint32_t>(mr.pd);
      k.length = mr.length;
      if (!ledger_->hide_kernel_keys_) k.lkey = mr.lkey, k.rkey = mr.rkey;
      dump.mrs.push_back(k);
    }
    for (const auto& [id, qp] : ledger_->qps_) {
      if (here.count(qp.pd)) dump.qps.push_back({qp.qpn, static_cast<uint32_t>(qp.pd)});
    }
    return dump;
  }
  absl::StatusOr<std::unique_ptr<fabric::Pd>> AllocPd() override {
    std::lock_guard<std::mutex> lock(ledger_->mu_);
    ledger_->Call("alloc_pd");
    if (int e = ledger_->TakeErr(ledger_->fail_alloc_pd_); e != 0) return ErrnoError("ibv_alloc_pd", e);
    const uint64_t id = ledger_->next_pd_++;
    ledger_->pds_[id] = FakeLedger::PdState{info_.name};
    ledger_->Event("alloc_pd", absl::StrCat(id));
    return std::unique_ptr<fabric::Pd>(new FakePd(ledger_, id, &info_));
  }

 private:
  std::shared_ptr<FakeLedger> ledger_;
  const fabric::DeviceInfo info_;
  const int fd_;
};

// ---------------------------------------------------------------------------------------------------------
// Fabric

FakeFabric::FakeFabric(std::vector<fabric::DeviceInfo> devices, std::shared_ptr<FakeLedger> ledger) {
  std::sort(devices.begin(), devices.end(),
            [](const fabric::DeviceInfo& a, const fabric::DeviceInfo& b) { return a.name < b.name; });
  for (auto& info : devices) {
    owned_.push_back(std::make_unique<FakeDevice>(ledger, std::move(info)));
    view_.push_back(owned_.back().get());
  }
}

FakeFabric::~FakeFabric() {
  view_.clear();
  owned_.clear();
}

void ModifyQpToError(fabric::Qp& qp) {
  if (auto* fake = dynamic_cast<FakeQp*>(&qp)) fake->ToError();
}

absl::Status ConfigureCmQp(fabric::Qp& qp, const fabric::CmQpOptions& options) {
  if (auto* fake = dynamic_cast<FakeQp*>(&qp)) {
    fake->Configure(options);
    return absl::OkStatus();
  }
  const fabric::CmQpOptions defaults;
  if (options.send_depth == defaults.send_depth && options.receive.slots == 0) return absl::OkStatus();
  return FailedPrecondition({}, "the QP is not the fake fabric's: it takes only the default CmQpOptions");
}

absl::Status DeliverSend(fabric::Qp& qp, const std::string& bytes) {
  auto* fake = dynamic_cast<FakeQp*>(&qp);
  if (fake == nullptr) return FailedPrecondition({}, "the QP is not the fake fabric's: nothing can be sent to it");
  return fake->Receive(bytes);
}

}  // namespace rdmad::fake
