// The fabric seam: what rdmad needs from an RDMA implementation, and nothing more.
//
// rdmad's registry and services talk only to these interfaces. Implementations:
//   - server/verbs/   rdma-core (libibverbs): real devices, including Soft-RoCE (rxe).
//   - (planned)       a software fabric with the same semantics, reads over TCP, for hosts without RDMA.
//   - tests/unit/fake_fabric.*  an in-memory fake that lets the registry be unit-tested without a device.
//
// Ownership: a Fabric owns its Devices. Every other object is returned as a unique_ptr whose owner (the
// registry) must destroy children before parents: Mw -> Mr -> Qp -> Pd -> Device. An object's destructor
// releases the underlying resource; explicit Release() exists where the caller must see a failure (an MR
// that cannot be deregistered stays registered and owned).
//
// Thread-safety: objects are not internally synchronized; the registry never runs two calls on one object
// at once (see server/registry/registry.h). Device::info() is immutable after creation. Posting on a QP
// may happen on any thread; its completions arrive on the device's dispatcher thread only. A QP may be
// destroyed on any thread that holds no registry lock (ibv_destroy_cq waits, briefly, for the dispatcher
// to acknowledge an event it already took for that CQ).
#ifndef RDMAD_SERVER_FABRIC_FABRIC_H_
#define RDMAD_SERVER_FABRIC_FABRIC_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/fabric/restrack.h"

namespace rdmad::fabric {

// Access bits, numerically equal to IBV_ACCESS_* (checked by static_assert in the verbs backend).
enum Access : uint32_t {
  kLocalWrite = 1u << 0,
  kRemoteWrite = 1u << 1,
  kRemoteRead = 1u << 2,
  kRemoteAtomic = 1u << 3,
  kMwBind = 1u << 4,
  kZeroBased = 1u << 5,
};

enum class MwType { kType1 = 1, kType2 = 2 };

// ibv_rereg_mr flags and result codes, numerically equal to IBV_REREG_MR_* (static_assert in verbs).
enum ReregFlags : int {
  kChangeTranslation = 1 << 0,
  kChangePd = 1 << 1,
  kChangeAccess = 1 << 2,
};
enum class ReregCode : int {
  kOk = 0,
  kErrInput = -1,
  kErrDontForkNew = -2,
  kErrDoForkOld = -3,
  kErrCmd = -4,
  kErrCmdAndDoForkNew = -5,
};
const char* ReregCodeName(ReregCode code);

struct GidEntry {
  uint32_t index = 0;
  std::string gid;   // 8 groups of 4 hex digits, colon separated
  std::string type;  // "IB", "RoCEv1", "RoCEv2"
};

struct PortInfo {
  uint32_t number = 0;
  std::string state;       // "ACTIVE", "DOWN", ...
  uint32_t max_mtu = 0;    // bytes
  uint32_t active_mtu = 0; // bytes
  std::string link_layer;  // "InfiniBand", "Ethernet"
  uint16_t lid = 0;
  std::vector<GidEntry> gids;
};

struct DeviceInfo {
  std::string name;  // "rxe0"
  std::string node_guid;
  std::string transport;
  std::string node_type;
  std::string firmware;
  std::vector<PortInfo> ports;
  uint64_t max_mr_size = 0;
  uint32_t max_mr = 0;
  uint32_t max_mw = 0;
  uint32_t max_pd = 0;
  uint32_t max_qp = 0;
  uint32_t max_qp_rd_atom = 0;
  bool mw_type1 = false;
  bool mw_type2a = false;
  bool mw_type2b = false;
  bool native_rereg = false;
  std::string native_rereg_probe;
  // The device checks an access through a window against the window's own range (not only the bounds of
  // the MR it is bound to). Probed once at start-up (server/verbs/mw_probe.h); false where the probe could
  // not run: the safe answer, which keeps the registry's bounds region (server/registry/entries.h).
  bool mw_bounds_enforced = false;
  std::string mw_bounds_probe;  // what the probe saw, e.g. "read past the window succeeded"
};

// One counter of the NIC's own, as the driver exposes it in sysfs (server/fabric/hw_counters.h).
struct HwCounterValue {
  uint32_t port = 0;  // 0: a device-level counter (/sys/class/infiniband/DEV/hw_counters)
  std::string name;   // the driver's name, e.g. "resp_remote_access_errors"
  uint64_t value = 0;
  // It counts remote accesses this NIC refused (bad key, range, rights): see kHwCounterTable.
  bool remote_access_error = false;
};

class Pd;

class Mr {
 public:
  virtual ~Mr() = default;
  virtual uint64_t addr() const = 0;
  virtual uint64_t length() const = 0;
  virtual uint32_t lkey() const = 0;
  virtual uint32_t rkey() const = 0;
  virtual uint32_t access() const = 0;

  // Native ibv_rereg_mr. On kOk and kErrDoForkOld the MR has the new attributes (the keys may change); on
  // kErrInput / kErrDontForkNew it is unchanged; on kErrCmd* it must not be used, only released.
  // `err` receives errno for any failure. `new_pd` is used with kChangePd only.
  virtual ReregCode Rereg(int flags, Pd* new_pd, void* addr, size_t length, uint32_t access, int* err) = 0;

  // ibv_dereg_mr. On failure the MR stays registered and owned by the caller.
  virtual absl::Status Release() = 0;
};

class Mw {
 public:
  virtual ~Mw() = default;
  virtual MwType type() const = 0;
  virtual uint32_t rkey() const = 0;
};

struct QpEndpoint {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  std::string gid;  // as GidEntry::gid; empty for LID-only InfiniBand
  uint16_t lid = 0;
};

enum class QpState { kReset, kInit, kRtr, kRts, kSqd, kSqe, kError, kUnknown };

// Completion callbacks of posted work. They run on the thread that calls Device::DrainCompletions (the
// device's dispatcher) or Device::PollFor (the poster's, briefly), exactly once for every post that returned OK, never for one that failed.
// A post that waited in the QP's backlog (Qp) and was then refused by the device gets that error, the same
// way.
using BindDone = absl::AnyInvocable<void(absl::StatusOr<uint32_t> rkey) &&>;
using WorkDone = absl::AnyInvocable<void(absl::Status status) &&>;

// A SEND posted with a type 2 bind, right behind it on the same send queue and fenced (IBV_SEND_FENCE):
// the responder executes work requests of one send queue in order, so the SEND leaves only once the bind
// has taken effect, and a bind that fails moves the QP to the error state, which flushes the SEND. So a
// message that carries the window's new key never reaches the peer before the key is valid, and never if
// the bind failed.
struct SendAfterBind {
  // The SEND's bytes (at most kMaxInlineSend) for the window's new rkey, called once at post time (inside
  // PostBind, even when the bind then waits in the QP's backlog: the bytes wait with it), on the posting
  // thread with no lock of the fabric held; empty: no SEND is posted (and `done` is not called).
  absl::AnyInvocable<std::string(uint32_t rkey) &&> message;
  // The SEND's completion; or, if the bind was posted but the SEND could not be, the post's error, once (a
  // bind that waited in the backlog and was refused: the bind's error, here too).
  WorkDone done;
};

struct BindSpec {
  Mr* mr = nullptr;       // the MR the window is bound to (with length 0: a type 1 unbind)
  uint64_t addr = 0;      // virtual address of the first byte, inside mr
  uint64_t length = 0;
  uint32_t access = 0;    // kRemoteRead | kRemoteWrite | kRemoteAtomic | kZeroBased
  // Type 2 only (may be null): a SEND posted behind the bind (see SendAfterBind). Its callbacks are moved
  // out by PostBind; if PostBind returns an error, neither is called.
  SendAfterBind* then = nullptr;
};

// An RC queue pair with its own completion queue, attached to its device's completion channel. Binds,
// invalidations and SENDs are posted signaled; nothing waits for them: their completion is delivered through
// Device::DrainCompletions (ibv_bind_mw(3) NOTES: the bind is done only when its completion says so).
// The send queue never refuses a post for being full: at most the QP's send depth of work requests is in
// flight (8, or CmQpOptions::send_depth; a bind with its fenced SEND is two, any other post one), and a
// post beyond it, or behind one already waiting, waits in the QP's ordered backlog and returns OK. The
// backlog is posted, in order, as completions make room, on the thread that polls them (the dispatcher,
// or a PollFor caller); a waiting post that the device then refuses gets its callbacks run with the error,
// as completions. What a post names (its window, the MR a bind names) must outlive its completion, as
// before: a waiting post keeps only pointers (an inline SEND's bytes are copied). Posts on one QP may come
// from several threads at once; its work requests reach the send queue in the order they were posted.
// A QP must not be destroyed while a post on it is outstanding (the registry guarantees it); destroying
// one drops outstanding callbacks unrun, and its backlog with them.
class Qp {
 public:
  virtual ~Qp() = default;
  virtual QpEndpoint local() const = 0;
  virtual QpState state() const = 0;  // queried from the device
  // RESET/INIT -> RTR -> RTS against `remote`.
  virtual absl::Status Connect(const QpEndpoint& remote) = 0;
  // Type 1: ibv_bind_mw. Type 2: IBV_WR_BIND_MW with ibv_inc_rkey. `done` receives the window's new rkey
  // after a successful completion; on a failed completion the window keeps its previous rkey (and the QP
  // is in the error state). A failed post returns the error and never calls `done`.
  virtual absl::Status PostBind(Mw& mw, const BindSpec& spec, BindDone done) = 0;
  // Type 1: a bind with zero length, naming the MR the window is bound to (providers such as rxe read the
  // MR's lkey even for a zero-length bind). Type 2: IBV_WR_LOCAL_INV of the window's rkey.
  virtual absl::Status PostInvalidate(Mw& mw, Mr& bound_to, WorkDone done) = 0;
  // A signaled SEND of `bytes` (at most kMaxInlineSend), posted inline: `bytes` need not outlive the call.
  // `done` gets the completion's status (a failed completion leaves the QP in the error state).
  virtual absl::Status PostSend(const std::string& bytes, WorkDone done) = 0;
  // Names this QP's completion queue to Device::PollFor; never reused while the device is open.
  virtual uint64_t completion_key() const = 0;
};

// The largest PostSend: every QP rdmad creates can send this much inline.
inline constexpr size_t kMaxInlineSend = 64;

struct QpOptions {
  uint32_t port = 1;
  uint32_t gid_index = 0;
};

// The largest message a QP receives (ReceiveOptions' buffers).
inline constexpr size_t kMaxReceive = 64;

// Receives on a QP whose peer sends rdmad messages (a session's requests).
struct ReceiveOptions {
  uint32_t slots = 0;  // receive buffers kept posted, kMaxReceive bytes each; 0: the QP receives nothing
  // Each message's bytes (as long as the peer sent, at most kMaxReceive; a longer SEND fails at the peer with a
  // local length error at rdmad, which puts the QP in the error state), on the thread that polled its completion
  // (the device's dispatcher, or a Device::PollFor caller), with no lock of the fabric held. A failed receive
  // (flushed when the QP goes to the error state) is not reported. Its buffer is posted again once the bytes
  // are copied out, before on_message runs. The messages one thread polls run in the order they arrived; a
  // PollFor caller and the dispatcher may each poll some, and then run them at the same time: a receiver that
  // needs them in order never calls PollFor on the QP (or orders them itself). A message polled before the QP
  // was destroyed may still reach on_message after it.
  std::function<void(std::string bytes)> on_message;
};

// A bind with its fenced SEND (SendAfterBind) is two work requests: the least send depth of a QP.
inline constexpr uint32_t kMinSendDepth = 2;

// The shape of a QP made on an rdma_cm id (CmId::CreateQp).
struct CmQpOptions {
  // Work requests in flight on the send queue (more wait in the QP: see Qp); at least kMinSendDepth.
  uint32_t send_depth = 8;
  ReceiveOptions receive;
};

class Pd {
 public:
  virtual ~Pd() = default;
  virtual absl::StatusOr<std::unique_ptr<Mr>> RegMr(void* addr, size_t length, uint32_t access) = 0;
  virtual absl::StatusOr<std::unique_ptr<Mw>> AllocMw(MwType type) = 0;
  virtual absl::StatusOr<std::unique_ptr<Qp>> CreateQp(const QpOptions& options) = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual const DeviceInfo& info() const = 0;
  virtual absl::StatusOr<std::unique_ptr<Pd>> AllocPd() = 0;
  // The completion channel: readable when a CQ of this device has a completion event. Its one reader is
  // the device's dispatcher, which then calls DrainCompletions: every CQ with an event is acknowledged,
  // re-armed and polled empty, and the callbacks of the completed work requests run, on that thread.
  virtual int completion_fd() const = 0;
  virtual void DrainCompletions() = 0;
  // Polls the completion queue `key` names (Qp::completion_key) on the calling thread until `done()` holds
  // or `budget` has passed, running the callbacks of what completed there (any work of that QP). Lets the
  // thread that just posted a request's work finish the request itself, without the hand-off to the
  // dispatcher, which still takes whatever completes later. Any thread, no lock held; a QP destroyed
  // meanwhile is skipped, so it is safe to call after the post whose completion `done` waits for.
  virtual void PollFor(uint64_t key, absl::Duration budget, const std::function<bool()>& done) = 0;
  // The NIC's counters, read now (never cached): the device-level ones first (port 0), then each port's,
  // by name. Empty if the driver has none. Counters that cannot be read are left out. Any thread.
  virtual std::vector<HwCounterValue> ReadCounters() const = 0;
  // What the kernel tracks of this process's objects on this device (server/fabric/restrack.h): PDs, MRs,
  // QPs and CM ids with their kernel numbers, read now. Blocks briefly (the verbs backend asks the kernel
  // over RDMA netlink): any thread, no lock held. UNIMPLEMENTED where the fabric cannot ask; the kernel's
  // refusals with their errno.
  virtual absl::StatusOr<restrack::DeviceDump> KernelObjects() const {
    return absl::UnimplementedError("this fabric cannot read the kernel's resource tracking");
  }
};

class CmFabric;  // server/fabric/cm.h

class Fabric {
 public:
  virtual ~Fabric() = default;
  // Stable for the fabric's lifetime, in device-name order.
  virtual const std::vector<Device*>& devices() const = 0;
  // rdma_cm, or nullptr where it is unavailable (no rdma_ucm in the kernel). Owned by the fabric.
  virtual CmFabric* cm() = 0;
};

}  // namespace rdmad::fabric

#endif  // RDMAD_SERVER_FABRIC_FABRIC_H_
