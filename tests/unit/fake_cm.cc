#include "tests/unit/fake_cm.h"
#include "tests/unit/fake_fabric.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <deque>
#include <iterator>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/status.h"

namespace rdmad::fake {

using fabric::CmEventType;
using fabric::SockAddr;

namespace {

// kConnecting .. kConnectResponse: between a connect and its answer. kAccepting: the passive side inside
// Accept (its QPs are connected without the mutex). kAwaitRtu / kConnectResponse: accepted, and the active
// side (without a QP) got CONNECT_RESPONSE and must Accept too.
enum class Phase {
  kIdle, kBound, kListening, kAddrResolved, kRouteResolved, kConnecting, kConnectRequest, kAccepting,
  kAwaitRtu, kConnectResponse, kConnected, kDisconnected, kClosed,
};

bool Pending(Phase p) { return p >= Phase::kConnecting && p <= Phase::kConnectResponse; }
bool Wildcard(const std::string& host) { return host == "0.0.0.0" || host == "::"; }
std::string Addr(const SockAddr& a) {
  return a.host.find(':') == std::string::npos ? absl::StrCat(a.host, ":", a.port)
                                               : absl::StrCat("[", a.host, "]:", a.port);
}
std::string Name(CmEventType type) {
  std::string name = fabric::CmEventName(type);
  return name.substr(std::string("RDMA_CM_EVENT_").size());
}
std::string Pad(std::string data, size_t size) {
  data.resize(size, '\0');
  return data;
}
absl::Status Einval(const char* call) { return ErrnoError(call, EINVAL); }
// As the verbs backend (server/verbs/cm.cc) words it.
absl::Status TooLong(size_t max, const char* what, const std::string& data) {
  return InvalidArgument("private_data", absl::StrCat(data.size(), " bytes; ", what, " carries at most ", max));
}

const char* const kCalls[] = {"rdma_create_event_channel", "rdma_create_id", "rdma_bind_addr", "rdma_listen",
                              "rdma_resolve_addr", "rdma_resolve_route", "rdma_create_qp", "rdma_connect",
                              "rdma_accept", "rdma_reject", "rdma_disconnect", "rdma_migrate_id"};

}  // namespace

struct QueuedEvent {
  uint64_t id = 0;  // the id the event is for (CONNECT_REQUEST: the listener)
  fabric::CmEvent event;
};

struct ChannelState {
  int fd = -1;
  bool signalled = false;  // the eventfd's counter is non-zero
  std::deque<QueuedEvent> queue;
};

struct IdState {
  uint64_t key = 0, peer = 0;  // peer: the other end of a connection (attempt)
  int channel = 0, backlog = 0;
  Phase phase = Phase::kIdle;
  SockAddr local, remote;
  bool holds_port = false;  // bound (explicitly or by address resolution): local's port is taken
  fabric::Device* device = nullptr;
  std::shared_ptr<fabric::Qp> qp;  // shared only so that Accept can connect the peer's QP without the mutex
};

struct FakeCmState {
  std::mutex mu;
  std::map<std::string, fabric::Device*> routes;
  bool held = false;
  int next_channel = 1;
  uint64_t next_id = 1;
  uint16_t next_port = 49152;
  std::map<int, ChannelState> channels;
  std::map<uint64_t, IdState> ids;
  std::vector<std::string> log, violations;
  std::map<std::string, std::deque<int>> faults;
  // Dropped events, destroyed by Guard after the mutex is released (a new id's destructor takes it).
  std::vector<QueuedEvent> dropped;

  // Callers hold mu.
  void Log(std::string entry) { log.push_back(std::move(entry)); }
  void Violation(const std::string& what) {
    std::fprintf(stderr, "fake cm: VIOLATION: %s\n", what.c_str());
    violations.push_back(what);
  }
  absl::Status Fault(const char* call) {
    auto it = faults.find(call);
    if (it == faults.end() || it->second.empty()) return absl::OkStatus();
    const int err = it->second.front();
    it->second.pop_front();
    return ErrnoError(call, err);
  }
  IdState* Find(uint64_t id) {
    auto it = ids.find(id);
    return it == ids.end() ? nullptr : &it->second;
  }
  void SetHeld(bool on) {
    held = on;
    for (auto& [n, c] : channels) Sync(c);
  }
  // The eventfd is readable exactly while events wait and the latch is open.
  void Sync(ChannelState& c) {
    const bool want = !held && !c.queue.empty();
    if (want == c.signalled) return;
    uint64_t v = 1;
    ssize_t n = want ? write(c.fd, &v, sizeof v) : read(c.fd, &v, sizeof v);
    (void)n;
    c.signalled = want;
  }
  void Post(uint64_t id, CmEventType type, int status, std::string data,
            std::unique_ptr<fabric::CmId> new_id = nullptr) {
    const int channel = ids.at(id).channel;
    QueuedEvent q{id, fabric::CmEvent{type, status, 0, std::move(data), std::move(new_id)}};
    auto ch = channels.find(channel);
    if (ch == channels.end()) {  // the channel is gone (a violation already)
      Log(absl::StrCat("drop ", Name(type), " ", id, " on channel ", channel));
      dropped.push_back(std::move(q));
      return;
    }
    Log(absl::StrCat("event ", Name(type), " ", id, " on channel ", channel));
    ch->second.queue.push_back(std::move(q));
    Sync(ch->second);
  }
  void Reject(uint64_t id, int status, const std::string& data = {}) {
    Post(id, CmEventType::kRejected, status, Pad(data, kRejectDataSize));
  }
  // Removes the events queued for `id` on `channel`, in order; appends them to `to` (or drops them).
  void Move(uint64_t id, int channel, ChannelState* to) {
    auto ch = channels.find(channel);
    if (ch == channels.end()) return;
    auto& queue = ch->second.queue;
    for (auto it = queue.begin(); it != queue.end();) {
      if (it->id != id) {
        ++it;
        continue;
      }
      if (to == nullptr) {
        Log(absl::StrCat("drop ", Name(it->event.type), " ", id, " on channel ", channel));
        dropped.push_back(std::move(*it));
      } else {
        to->queue.push_back(std::move(*it));
      }
      it = queue.erase(it);
    }
    Sync(ch->second);
    if (to) Sync(*to);
  }
  bool PortTaken(const SockAddr& a) const {
    for (const auto& [n, s] : ids) {
      if (s.holds_port && s.local.port == a.port &&
          (s.local.host == a.host || Wildcard(s.local.host) || Wildcard(a.host))) {
        return true;
      }
    }
    return false;
  }
  uint16_t Ephemeral(const std::string& host) {
    for (;;) {
      const uint16_t port = next_port;
      next_port = next_port == 65535 ? 49152 : next_port + 1;
      if (!PortTaken({host, port})) return port;
    }
  }
  uint64_t Listener(const SockAddr& to) const {
    uint64_t any = 0;
    for (const auto& [n, s] : ids) {
      if (s.phase != Phase::kListening || s.local.port != to.port || !channels.count(s.channel)) continue;
      if (s.local.host == to.host) return n;
      if (Wildcard(s.local.host)) any = n;
    }
    return any;
  }
  int PendingRequests(uint64_t listener) const {
    const auto& queue = channels.at(ids.at(listener).channel).queue;
    return static_cast<int>(std::count_if(queue.begin(), queue.end(), [&](const QueuedEvent& q) {
      return q.id == listener && q.event.type == CmEventType::kConnectRequest;
    }));
  }
};

namespace {

// Holds the mutex; on scope exit releases it, then destroys the events dropped meanwhile.
class Guard {
 public:
  explicit Guard(FakeCmState& s) : s_(s), lock_(s.mu) {}
  ~Guard() {
    std::vector<QueuedEvent> dead = std::move(s_.dropped);
    s_.dropped.clear();
    lock_.unlock();
  }

 private:
  FakeCmState& s_;
  std::unique_lock<std::mutex> lock_;
};

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// FakeCm

FakeCm::FakeCm(std::vector<fabric::Device*> devices, std::map<std::string, std::string> routes)
    : state_(std::make_shared<FakeCmState>()) {
  for (const auto& [host, device] : routes) {
    const std::string& name = device;  // a lambda may not capture a structured binding before C++20 (clang)
    auto it = std::find_if(devices.begin(), devices.end(), [&](fabric::Device* d) { return d->info().name == name; });
    if (it == devices.end()) {
      state_->Violation(absl::StrCat("route ", host, " -> ", name, ": no such device"));
    } else {
      state_->routes[host] = *it;
    }
  }
}

FakeCm::~FakeCm() {
  Guard g(*state_);
  if (!state_->channels.empty() || !state_->ids.empty()) {
    state_->Violation(absl::StrCat("FakeCm destroyed while ", state_->channels.size(), " channel(s) and ",
                                   state_->ids.size(), " id(s) are live"));
  }
}

absl::StatusOr<std::unique_ptr<fabric::CmChannel>> FakeCm::CreateChannel() {
  FakeCmState& s = *state_;
  Guard g(s);
  RDMAD_RETURN_IF_ERROR(s.Fault("rdma_create_event_channel"));
  const int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) return ErrnoError("eventfd", errno);
  const int n = s.next_channel++;
  s.channels[n].fd = fd;
  s.Log(absl::StrCat("create_channel ", n));
  return std::unique_ptr<fabric::CmChannel>(new FakeCmChannel(state_, n, fd));
}

FakeCm::Counts FakeCm::live() const {
  Guard g(*state_);
  return Counts{static_cast<int>(state_->channels.size()), static_cast<int>(state_->ids.size())};
}

std::vector<std::string> FakeCm::log() const { Guard g(*state_); return state_->log; }

std::vector<std::string> FakeCm::log_of(const std::vector<std::string>& verbs) const {
  Guard g(*state_);
  std::vector<std::string> out;
  for (const auto& e : state_->log) {
    if (std::find(verbs.begin(), verbs.end(), e.substr(0, e.find(' '))) != verbs.end()) out.push_back(e);
  }
  return out;
}

void FakeCm::ClearLog() { Guard g(*state_); state_->log.clear(); }
std::vector<std::string> FakeCm::violations() const { Guard g(*state_); return state_->violations; }

int FakeCm::Queued(const fabric::CmChannel& channel) const {
  Guard g(*state_);
  auto* ch = dynamic_cast<const FakeCmChannel*>(&channel);
  if (ch == nullptr || ch->state_ != state_) return 0;
  auto it = state_->channels.find(ch->number());
  return it == state_->channels.end() ? 0 : static_cast<int>(it->second.queue.size());
}

void FakeCm::FailNextCmCall(const std::string& call, int err) {
  Guard g(*state_);
  if (std::find(std::begin(kCalls), std::end(kCalls), call) == std::end(kCalls)) {
    state_->Violation(absl::StrCat("FailNextCmCall of an unknown call ", call));
  }
  state_->faults[call].push_back(err);
}

void FakeCm::InjectEvent(fabric::CmId& id, CmEventType type, int status) {
  Guard g(*state_);
  auto* fid = dynamic_cast<FakeCmId*>(&id);
  if (fid == nullptr || fid->state_ != state_ || !state_->ids.count(fid->number())) {
    state_->Violation("InjectEvent on an id that is not this FakeCm's");
    return;
  }
  state_->Post(fid->number(), type, status, "");
}

void FakeCm::Hold() { Guard g(*state_); state_->SetHeld(true); }
void FakeCm::Release() { Guard g(*state_); state_->SetHeld(false); }

// ---------------------------------------------------------------------------------------------------------
// FakeCmChannel

FakeCmChannel::FakeCmChannel(std::shared_ptr<FakeCmState> state, int number, int fd)
    : state_(std::move(state)), number_(number), fd_(fd) {}

FakeCmChannel::~FakeCmChannel() {
  FakeCmState& s = *state_;
  Guard g(s);
  std::vector<uint64_t> on;
  for (const auto& [n, id] : s.ids) {
    if (id.channel == number_) on.push_back(n);
  }
  if (!on.empty()) {
    s.Violation(absl::StrCat("channel ", number_, " destroyed while id(s) ", absl::StrJoin(on, ", "), " are on it"));
  }
  ChannelState& c = s.channels.at(number_);
  for (auto& q : c.queue) {
    s.Log(absl::StrCat("drop ", Name(q.event.type), " ", q.id, " on channel ", number_));
    s.dropped.push_back(std::move(q));
  }
  close(c.fd);
  s.channels.erase(number_);
  s.Log(absl::StrCat("destroy_channel ", number_));
}

std::vector<fabric::CmEvent> FakeCmChannel::Drain() {
  FakeCmState& s = *state_;
  Guard g(s);
  std::vector<fabric::CmEvent> out;
  ChannelState& c = s.channels.at(number_);
  if (s.held) return out;
  for (auto& q : c.queue) {
    q.event.key = s.ids.at(q.id).key;  // as id->context, read when the event is taken
    out.push_back(std::move(q.event));
  }
  c.queue.clear();
  s.Sync(c);
  return out;
}

absl::StatusOr<std::unique_ptr<fabric::CmId>> FakeCmChannel::CreateId(uint64_t key) {
  FakeCmState& s = *state_;
  Guard g(s);
  RDMAD_RETURN_IF_ERROR(s.Fault("rdma_create_id"));
  const uint64_t n = s.next_id++;
  IdState& id = s.ids[n];
  id.key = key;
  id.channel = number_;
  s.Log(absl::StrCat("create_id ", n));
  return std::unique_ptr<fabric::CmId>(new FakeCmId(state_, n));
}

// ---------------------------------------------------------------------------------------------------------
// FakeCmId

FakeCmId::FakeCmId(std::shared_ptr<FakeCmState> state, uint64_t number) : state_(std::move(state)), number_(number) {}

FakeCmId::~FakeCmId() {
  FakeCmState& s = *state_;
  std::shared_ptr<fabric::Qp> qp;
  {
    Guard g(s);
    qp = std::move(s.ids.at(number_).qp);
  }
  qp.reset();  // the QP first, without the mutex
  Guard g(s);
  IdState me = std::move(s.ids.at(number_));
  s.ids.erase(number_);
  s.Move(number_, me.channel, nullptr);  // its queued events are dropped
  s.Log(absl::StrCat("destroy_id ", number_));
  if (!s.channels.count(me.channel)) {
    s.Violation(absl::StrCat("id ", number_, " destroyed after its channel ", me.channel));
  }
  IdState* p = s.Find(me.peer);
  if (p == nullptr || p->peer != number_) return;
  p->peer = 0;
  if (me.phase == Phase::kConnected && p->phase == Phase::kConnected) {
    p->phase = Phase::kDisconnected;
    s.Post(me.peer, CmEventType::kDisconnected, 0, "");
  } else if (Pending(me.phase) && Pending(p->phase)) {
    p->phase = Phase::kClosed;
    s.Reject(me.peer, me.phase == Phase::kConnecting ? kRejectTimeout : kRejectConsumer);
  }
}

uint64_t FakeCmId::key() const { Guard g(*state_); return state_->ids.at(number_).key; }
void FakeCmId::set_key(uint64_t key) { Guard g(*state_); state_->ids.at(number_).key = key; }

absl::Status FakeCmId::Bind(const SockAddr& local) {
  FakeCmState& s = *state_;
  Guard g(s);
  RDMAD_RETURN_IF_ERROR(WithField(s.Fault("rdma_bind_addr"), "address"));  // as the verbs backend
  IdState& me = s.ids.at(number_);
  if (me.phase != Phase::kIdle) return WithField(Einval("rdma_bind_addr"), "address");
  fabric::Device* device = nullptr;
  if (!Wildcard(local.host)) {
    auto route = s.routes.find(local.host);
    if (route == s.routes.end()) return ErrnoError("rdma_bind_addr", EADDRNOTAVAIL, {}, "address");
    device = route->second;
  }
  SockAddr addr = local;
  if (addr.port == 0) {
    addr.port = s.Ephemeral(addr.host);
  } else if (s.PortTaken(addr)) {
    return ErrnoError("rdma_bind_addr", EADDRINUSE, {}, "address");
  }
  me.local = addr;
  me.holds_port = true;
  me.device = device;
  me.phase = Phase::kBound;
  s.Log(absl::StrCat("bind ", number_, " ", Addr(addr)));
  return absl::OkStatus();
}

absl::Status FakeCmId::Listen(int backlog) {
  FakeCmState& s = *state_;
  Guard g(s);
  RDMAD_RETURN_IF_ERROR(s.Fault("rdma_listen"));
  IdState& me = s.ids.at(number_);
  if (me.phase != Phase::kBound) return Einval("rdma_listen");
  me.backlog = backlog > 0 && backlog < 1024 ? backlog : 1024;  // as ucma_listen
  me.phase = Phase::kListening;
  s.Log(absl::StrCat("listen ", number_, " ", Addr(me.local)));
  return absl::OkStatus();
}

absl::Status FakeCmId::ResolveAddr(const SockAddr& remote, int /*timeout_ms*/) {
  FakeCmState& s = *state_;
  Guard g(s);
  RDMAD_RETURN_IF_ERROR(WithField(s.Fault("rdma_resolve_addr"), "address"));
  IdState& me = s.ids.at(number_);
  if (me.phase != Phase::kIdle && me.phase != Phase::kBound) return WithField(Einval("rdma_resolve_addr"), "address");
  s.Log(absl::StrCat("resolve_addr ", number_, " ", Addr(remote)));
  me.remote = remote;
  auto route = s.routes.find(remote.host);
  if (route == s.routes.end()) {  // the id stays as it was: resolving again is allowed
    s.Post(number_, CmEventType::kAddrError, -ENETUNREACH, "");
    return absl::OkStatus();
  }
  if (!me.holds_port) {
    me.local = {remote.host, s.Ephemeral(remote.host)};  // a local address: the source is the address itself
    me.holds_port = true;
  } else if (Wildcard(me.local.host)) {
    me.local.host = remote.host;
  }
  if (me.device == nullptr) me.device = route->second;
  me.phase = Phase::kAddrResolved;
  s.Post(number_, CmEventType::kAddrResolved, 0, "");
  return absl::OkStatus();
}

absl::Status FakeCmId::ResolveRoute(int /*timeout_ms*/) {
  FakeCmState& s = *state_;
  Guard g(s);
  RDMAD_RETURN_IF_ERROR(s.Fault("rdma_resolve_route"));
  IdState& me = s.ids.at(number_);
  if (me.phase != Phase::kAddrResolved) return Einval("rdma_resolve_route");
  me.phase = Phase::kRouteResolved;
  s.Log(absl::StrCat("resolve_route ", number_));
  s.Post(number_, CmEventType::kRouteResolved, 0, "");
  return absl::OkStatus();
}

fabric::Device* FakeCmId::device() const { Guard g(*state_); return state_->ids.at(number_).device; }

absl::Status FakeCmId::CreateQp(fabric::Pd& pd, const fabric::CmQpOptions& options) {
  FakeCmState& s = *state_;
  // As the verbs backend (server/verbs/qp.cc) words it.
  if (options.send_depth < fabric::kMinSendDepth) {
    return InvalidArgument("send_depth", absl::StrCat(options.send_depth, "; a QP sends at least ",
                                                      fabric::kMinSendDepth, " work requests at once (a bind "
                                                      "and its SEND)"));
  }
  {
    Guard g(s);
    RDMAD_RETURN_IF_ERROR(s.Fault("rdma_create_qp"));
    const IdState& me = s.ids.at(number_);
    // As the verbs backend refuses these itself.
    if (me.qp) return FailedPrecondition("qp", "the id already has a QP");
    if (me.device == nullptr) return FailedPrecondition({}, "the id is on no device yet");
  }
  absl::StatusOr<std::unique_ptr<fabric::Qp>> made = pd.CreateQp(fabric::QpOptions{1, 1});  // without the mutex
  if (!made.ok()) return made.status();
  RDMAD_RETURN_IF_ERROR(ConfigureCmQp(**made, options));  // the receive slots are posted in INIT
  std::shared_ptr<fabric::Qp> qp = std::move(*made);  // declared before the guard: released after it
  Guard g(s);
  IdState& me = s.ids.at(number_);
  if (me.qp) return FailedPrecondition("qp", "the id already has a QP");  // a concurrent CreateQp won
  me.qp = std::move(qp);
  s.Log(absl::StrCat("create_qp ", number_));
  return absl::OkStatus();
}

fabric::Qp* FakeCmId::qp() const { Guard g(*state_); return state_->ids.at(number_).qp.get(); }

absl::Status FakeCmId::Connect(const std::string& private_data) {
  FakeCmState& s = *state_;
  Guard g(s);
  RDMAD_RETURN_IF_ERROR(s.Fault("rdma_connect"));
  if (private_data.size() > kConnectDataSize) return TooLong(kConnectDataSize, "a connect request", private_data);
  IdState& me = s.ids.at(number_);
  if (me.phase != Phase::kRouteResolved) return Einval("rdma_connect");
  s.Log(absl::StrCat("connect ", number_, " -> ", Addr(me.remote)));
  const uint64_t listener = s.Listener(me.remote);
  if (listener == 0 || s.PendingRequests(listener) >= s.ids.at(listener).backlog) {
    me.phase = Phase::kClosed;
    s.Reject(number_, listener == 0 ? kRejectNoListener : kRejectConsumer);
    return absl::OkStatus();
  }
  me.phase = Phase::kConnecting;
  const uint64_t n = s.next_id++;
  IdState& passive = s.ids[n];  // std::map: `me` stays valid
  passive.channel = s.ids.at(listener).channel;
  passive.phase = Phase::kConnectRequest;
  passive.device = s.routes.at(me.remote.host);
  passive.local = {me.remote.host, me.remote.port};
  passive.remote = me.local;
  passive.peer = number_;
  me.peer = n;
  s.Log(absl::StrCat("create_id ", n));
  s.Post(listener, CmEventType::kConnectRequest, 0, Pad(private_data, kConnectDataSize),
         std::unique_ptr<fabric::CmId>(new FakeCmId(state_, n)));
  return absl::OkStatus();
}

absl::Status FakeCmId::Accept(const std::string& private_data) {
  FakeCmState& s = *state_;
  std::shared_ptr<fabric::Qp> mine, theirs;
  {
    Guard g(s);
    RDMAD_RETURN_IF_ERROR(s.Fault("rdma_accept"));
    if (private_data.size() > kAcceptDataSize) return TooLong(kAcceptDataSize, "an accept", private_data);
    IdState& me = s.ids.at(number_);
    IdState* p = s.Find(me.peer);
    if (me.phase == Phase::kConnectResponse && p != nullptr && p->phase == Phase::kAwaitRtu) {
      // The active side without a QP finishing (librdmacm: rdma_accept after CONNECT_RESPONSE sends the RTU).
      s.Log(absl::StrCat("accept ", number_));
      me.phase = p->phase = Phase::kConnected;
      s.Post(me.peer, CmEventType::kEstablished, 0, "");
      return absl::OkStatus();
    }
    if (me.phase != Phase::kConnectRequest || p == nullptr || p->phase != Phase::kConnecting) {
      return Einval("rdma_accept");
    }
    s.Log(absl::StrCat("accept ", number_));
    me.phase = Phase::kAccepting;
    mine = me.qp;
    theirs = p->qp;
  }
  // The QPs are connected without the mutex (they are the fabric's objects).
  if (mine) {
    absl::Status st = mine->Connect(mine->local());
    if (!st.ok()) {
      Guard g(s);
      IdState& me = s.ids.at(number_);
      if (me.phase == Phase::kAccepting) me.phase = Phase::kConnectRequest;
      return st;
    }
  }
  const absl::Status active = theirs ? theirs->Connect(theirs->local()) : absl::OkStatus();
  // Let go of the QPs before the events below: a peer that leaves as soon as it is ESTABLISHED destroys its
  // id, then its PD, and its QP must be gone by then (a copy held here made that "pd deallocated while it
  // holds 1 object(s)" in tenancy_test, seen under ASan's slower timing).
  const bool active_has_qp = theirs != nullptr;
  mine.reset();
  theirs.reset();
  Guard g(s);
  IdState& me = s.ids.at(number_);
  IdState* p = s.Find(me.peer);
  if (me.phase != Phase::kAccepting || p == nullptr || p->phase != Phase::kConnecting) {
    if (me.phase == Phase::kAccepting) me.phase = Phase::kClosed;
    return absl::OkStatus();  // the active side went away meanwhile (and this side was told so)
  }
  if (!active_has_qp) {
    me.phase = Phase::kAwaitRtu;
    p->phase = Phase::kConnectResponse;
    s.Post(me.peer, CmEventType::kConnectResponse, 0, Pad(private_data, kAcceptDataSize));
  } else if (!active.ok()) {
    me.phase = p->phase = Phase::kClosed;
    const int err = ErrnoOf(active);
    s.Post(me.peer, CmEventType::kConnectError, -(err != 0 ? err : EIO), "");
    s.Reject(number_, kRejectConsumer);
  } else {
    me.phase = p->phase = Phase::kConnected;
    s.Post(me.peer, CmEventType::kEstablished, 0, Pad(private_data, kAcceptDataSize));
    s.Post(number_, CmEventType::kEstablished, 0, "");
  }
  return absl::OkStatus();
}

absl::Status FakeCmId::Reject(const std::string& private_data) {
  FakeCmState& s = *state_;
  Guard g(s);
  RDMAD_RETURN_IF_ERROR(s.Fault("rdma_reject"));
  if (private_data.size() > kRejectDataSize) return TooLong(kRejectDataSize, "a reject", private_data);
  IdState& me = s.ids.at(number_);
  IdState* p = s.Find(me.peer);
  if (me.phase != Phase::kConnectRequest || p == nullptr || p->phase != Phase::kConnecting) {
    return Einval("rdma_reject");
  }
  s.Log(absl::StrCat("reject ", number_));
  me.phase = p->phase = Phase::kClosed;
  s.Reject(me.peer, kRejectConsumer, private_data);
  return absl::OkStatus();
}

absl::Status FakeCmId::Disconnect() {
  FakeCmState& s = *state_;
  std::shared_ptr<fabric::Qp> qp;
  {
    Guard g(s);
    RDMAD_RETURN_IF_ERROR(s.Fault("rdma_disconnect"));
    IdState& me = s.ids.at(number_);
    if (me.phase < Phase::kConnecting) return Einval("rdma_disconnect");  // never connected: no IB CM id
    s.Log(absl::StrCat("disconnect ", number_));
    if (me.phase != Phase::kConnected) return absl::OkStatus();  // rdma_disconnect: a no-op then
    me.phase = Phase::kDisconnected;
    if (IdState* p = s.Find(me.peer); p != nullptr && p->phase == Phase::kConnected) {
      p->phase = Phase::kDisconnected;
      s.Post(me.peer, CmEventType::kDisconnected, 0, "");
    }
    s.Post(number_, CmEventType::kDisconnected, 0, "");
    qp = me.qp;
  }
  // As librdmacm on IB and RoCE: the id's QP goes to the error state, flushing its outstanding work.
  // Without the mutex, as Accept connects QPs.
  if (qp) ModifyQpToError(*qp);
  return absl::OkStatus();
}

absl::Status FakeCmId::Migrate(fabric::CmChannel& to) {
  FakeCmState& s = *state_;
  Guard g(s);
  RDMAD_RETURN_IF_ERROR(s.Fault("rdma_migrate_id"));
  auto* ch = dynamic_cast<FakeCmChannel*>(&to);
  if (ch == nullptr || ch->state_ != state_) {
    s.Violation(absl::StrCat("migrate of id ", number_, " to a channel that is not this FakeCm's"));
    return Einval("rdma_migrate_id");
  }
  auto dest = s.channels.find(ch->number());
  if (dest == s.channels.end()) return Einval("rdma_migrate_id");
  IdState& me = s.ids.at(number_);
  s.Log(absl::StrCat("migrate ", number_, " -> channel ", ch->number()));
  if (me.channel == ch->number()) return absl::OkStatus();
  s.Move(number_, me.channel, &dest->second);
  me.channel = ch->number();
  return absl::OkStatus();
}

absl::Status FakeCmId::Send(const std::string& bytes) {
  FakeCmState& s = *state_;
  Guard g(s);
  const IdState& me = s.ids.at(number_);
  const IdState* p = s.Find(me.peer);
  if (me.qp == nullptr) return FailedPrecondition({}, absl::StrCat("id ", number_, " has no QP"));
  if (p == nullptr || p->peer != number_) return FailedPrecondition({}, absl::StrCat("id ", number_, " has no peer"));
  if (p->qp == nullptr) return FailedPrecondition({}, absl::StrCat("id ", me.peer, ", the peer, has no QP"));
  // Under the mutex (see fake_cm.h): the ids hold their QPs while it is held.
  if (me.qp->state() != fabric::QpState::kRts) {
    return absl::AbortedError(absl::StrCat("ibv_post_send(SEND): id ", number_, "'s QP is not in RTS"));
  }
  return DeliverSend(*p->qp, bytes);
}

SockAddr FakeCmId::local() const { Guard g(*state_); return state_->ids.at(number_).local; }
SockAddr FakeCmId::remote() const { Guard g(*state_); return state_->ids.at(number_).remote; }

}  // namespace rdmad::fake
