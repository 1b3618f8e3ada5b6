// RemoteRegion: the client's data plane. Opens a grant (docs/PROTOCOL.md#grants) and reads the granted
// memory with rdma_post_read (and, if the grant gives write access, writes it with rdma_post_write),
// directly from the client's process: no call to rdmad per read or write.
//
// Open: rdma_cm connect (RDMA_PS_TCP, RC) to rdmad's data-plane listener with the grant's token as the
// connect request's private data; two receive buffers posted before connecting; waits for the ACTIVE
// grant message (the key), or FAILED / a reject.
//
// Two ways to read:
//   zero-copy  Register the destination once with RegisterDestination (ibv_reg_mr on this connection's PD,
//              local write): a LocalBuffer. Reads into it land there directly, nothing is copied. Register
//              large buffers once and reuse them: registration pins the pages and costs far more than a read.
//   copying    Any destination: reads land in the region's own registered slots (queue_depth slots of
//              max_read_bytes each, registered at Open) and are copied to the destination when they complete.
// Read takes any length up to the whole grant, on either path: the library splits it into work requests of
// at most the port's maximum message size (ibv_query_port's max_msg_sz; lowered by max_message_bytes) for
// zero-copy, of at most max_read_bytes for copying, and keeps up to queue_depth of them outstanding. A read
// that fails in one part fails as a whole with the first error, and returns only once none of its parts is
// outstanding. Post/Poll/ReadBatch post one work request per ReadOp: a ReadOp is at most max_read_bytes
// (copying) or the maximum message size (zero-copy).
//
// Writes: a grant issued with REMOTE_WRITE (the key's access has wire::kGrantWrite) can be written, with
// Write(offset, length, source): from any memory (copied into the slots, then sent) or zero-copy from a
// LocalBuffer, any length, split and kept in flight like a read; it returns once rdmad's NIC acknowledged
// every part. A write on a grant without write access is refused here (PERMISSION_DENIED, before posting).
//
// Waiting (Options::wait): kPoll (the default) busy-polls the CQ while a call waits: the lowest latency,
// and a core kept busy for as long as the wait lasts. kEvents creates the CQs on a completion channel and
// sleeps in the kernel until a completion (or a CM event) comes: a wait costs no CPU, each completion that
// finds the thread asleep costs a wake-up. completion_fd() is that channel's fd, for the application's own
// epoll; Poll(min, timeout) waits with a timeout in either mode.
//
// Errors (absl::Status, the message names the grant and what happened):
//   OUT_OF_RANGE        the read is outside the granted range (checked in the library, or, with
//                       check_bounds off, refused by rdmad's NIC)
//   PERMISSION_DENIED   the grant was revoked (the key was refused at the NIC within the lease, or an ENDED
//                       message said so: its reason is in the message); or a write on a grant that gives no
//                       write access ("no write access": refused by the library, or, with check_bounds off,
//                       by rdmad's NIC)
//   DEADLINE_EXCEEDED   the grant expired (the key was refused, or the connection ended, at or after the
//                       lease's end as known here; or an ENDED message said EXPIRED)
//   UNAVAILABLE         the connection is lost before the lease's end (disconnected, transport retries
//                       exceeded, flushed)
//   INVALID_ARGUMENT    a bad argument (zero length, a null destination or source; a destination or source
//                       not inside its LocalBuffer, or a LocalBuffer too small or of another connection; a
//                       ReadOp longer than one work request)
//   RESOURCE_EXHAUSTED  RegisterDestination: the memory could not be pinned (RLIMIT_MEMLOCK, ENOMEM)
//   Open: the reject's reason (TOKEN_EXPIRED, ...), or the FAILED message's.
// After a completion error the QP is in the error state: every later read fails with the first error.
//
// Threads: one RemoteRegion is used by one thread at a time (it has no lock); use one per thread, or
// serialize. Different RemoteRegions are independent. A LocalBuffer belongs to its RemoteRegion's thread too.
#ifndef RDMAD_CLIENT_REMOTE_REGION_H_
#define RDMAD_CLIENT_REMOTE_REGION_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "proto/wire/grant_message.h"
#include "rdmad/v1/rdmad.pb.h"

struct ibv_mr;
struct ibv_pd;

namespace rdmad::client {

// Caller memory registered for zero-copy reads on one RemoteRegion's connection (RegisterDestination).
// Move-only; deregisters (ibv_dereg_mr) when destroyed. It must not outlive the RemoteRegion that made it,
// and is refused (INVALID_ARGUMENT) after that region's Reconnect: register the memory again then. The memory
// itself stays the caller's, and must stay mapped while the LocalBuffer exists.
class LocalBuffer {
 public:
  LocalBuffer() = default;  // empty: refused by every read
  ~LocalBuffer();
  LocalBuffer(LocalBuffer&& other) noexcept;
  LocalBuffer& operator=(LocalBuffer&& other) noexcept;
  LocalBuffer(const LocalBuffer&) = delete;
  LocalBuffer& operator=(const LocalBuffer&) = delete;

  char* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return mr_ == nullptr; }
  // Whether [p, p + n) lies inside the registered memory.
  bool Contains(const void* p, uint64_t n) const;

 private:
  friend class RemoteRegion;
  void Release();
  ibv_mr* mr_ = nullptr;
  std::shared_ptr<ibv_pd> pd_;  // the PD is deallocated after its last registration
  char* data_ = nullptr;
  size_t size_ = 0;
  uint64_t connection_ = 0;     // which connection registered it (RemoteRegion's, changed by Reconnect)
};

class RemoteRegion {
 public:
  struct Options {
    size_t queue_depth = 16;                           // reads outstanding at most
    size_t max_read_bytes = 1 << 20;                   // one copying slot: copying reads go in parts of this
    // Zero-copy work requests are at most the port's max_msg_sz; a value other than 0 lowers that (to keep
    // single work requests short, or to exercise splitting in tests).
    uint64_t max_message_bytes = 0;
    absl::Duration connect_timeout = absl::Seconds(10);  // connect and wait for the key (per endpoint)
    // Refuse out-of-range reads and writes, and writes on a grant without write access, in the library.
    // Off: post them anyway and let rdmad's NIC refuse them (for tests that prove the NIC enforces them).
    bool check_bounds = true;
    // How far this host's clock may lag rdmad's. A key refused (or a connection ended) less than this before
    // the lease's end, by this host's clock, is reported as expired (DEADLINE_EXCEEDED), not as revoked or
    // lost: rdmad's clock may already have passed the end. Set it to the clocks' worst disagreement (0 for
    // none); a revocation in a lease's last moments is then also reported as its expiry.
    absl::Duration clock_tolerance = absl::Milliseconds(100);
    // How the region waits for completions (Read, Write, ReadBatch, Poll):
    //   kPoll    busy-polls the CQ: the lowest latency, and one core at 100% for as long as it waits.
    //   kEvents  the CQs are created on a completion channel (ibv_comp_channel): a wait arms them
    //            (ibv_req_notify_cq), polls once more (a completion that came before the arm), then sleeps
    //            in poll(2) on the channel and the rdma_cm event channel. Waiting costs no CPU; each wait
    //            that sleeps pays a wake-up. The channel's fd is completion_fd(), for the application's own
    //            epoll/poll loop.
    enum class Wait { kPoll, kEvents };
    Wait wait = Wait::kPoll;
  };

  // One asynchronous read (one work request): `offset` from the start of the granted range, into
  // `destination`. With `registered` set, `destination` must lie, with `length` bytes, inside that
  // LocalBuffer: the read lands there (zero-copy, up to the maximum message size); else through a slot
  // (up to max_read_bytes).
  // With `write` set it is a write instead (RDMA WRITE, on a grant with write access, refused as Write
  // refuses): its `length` bytes come *from* `destination` (copied into a slot when it is posted, or sent
  // straight from the LocalBuffer), and it finishes once rdmad's NIC acknowledged it.
  struct ReadOp {
    uint64_t offset = 0;
    uint64_t length = 0;
    void* destination = nullptr;
    const LocalBuffer* registered = nullptr;
    bool write = false;
    absl::Status status;  // set when the read (or write) finished
  };

  // Connects to the first endpoint of `grant` that answers.
  static absl::StatusOr<std::unique_ptr<RemoteRegion>> Open(const v1::IssuedGrant& grant, Options options);
  // Connects to host:port with the token's bytes.
  static absl::StatusOr<std::unique_ptr<RemoteRegion>> Open(const std::string& host, uint16_t port,
                                                            const std::string& token, Options options);
  // Disconnects (rdmad then releases the connection and ends the grant: DISCONNECTED) and frees
  // everything: QP, CQs, MRs, id, event channel.
  ~RemoteRegion();
  RemoteRegion(const RemoteRegion&) = delete;
  RemoteRegion& operator=(const RemoteRegion&) = delete;

  // Moves this object to a new grant (the control plane re-granted, e.g. after rdmad restarted and ended
  // the old one with END_RESTARTED): opens a connection with `grant` (as Open, with this object's options)
  // and, once it holds the new key, releases the old connection and takes the new one's place. Reads
  // outstanding on the old connection are abandoned (call it with none outstanding), and LocalBuffers of the
  // old connection are refused from then on (register again). On failure this object is unchanged (still
  // on its old grant, usable or not) and the error is Open's.
  absl::Status Reconnect(const v1::IssuedGrant& grant);

  // The key from the ACTIVE message.
  const wire::GrantMessage& key() const { return key_; }
  std::string grant_name() const;       // "grants/9"
  uint64_t length() const { return key_.length; }
  // The lease's end as this client knows it (from ACTIVE; a renewal learnt from the control plane is
  // passed in with set_expiry). Used to tell "expired" from "revoked".
  absl::Time expiry() const { return expiry_; }
  void set_expiry(absl::Time expiry) { expiry_ = expiry; }
  // The ENDED message, if rdmad sent one and it arrived (only while the QP is usable).
  std::optional<wire::GrantMessage> ended();

  // Registers [addr, addr + length) of the caller's memory with this connection's PD (local write) for
  // zero-copy reads. INVALID_ARGUMENT for a null addr or a zero length; ibv_reg_mr's errno otherwise
  // (RESOURCE_EXHAUSTED when the pages cannot be pinned).
  absl::StatusOr<LocalBuffer> RegisterDestination(void* addr, size_t length);
  // The largest zero-copy work request: the port's max_msg_sz, lowered by Options::max_message_bytes.
  uint64_t max_message_bytes() const;

  // Reads [offset, offset + length) of the grant, any length up to the grant's, and waits for it (as
  // Options::wait says). Into any memory (copied through the slots):
  absl::Status Read(uint64_t offset, uint64_t length, void* destination);
  // Zero-copy into `destination` at `destination_offset`: INVALID_ARGUMENT ("destination: ...") unless
  // the LocalBuffer is this connection's and has `length` bytes from there.
  absl::Status Read(uint64_t offset, uint64_t length, const LocalBuffer& destination, size_t destination_offset = 0);

  // Writes `length` bytes to [offset, offset + length) of the grant (RDMA WRITE), any length up to the
  // grant's, split like a read, and waits until every part completed (rdmad's NIC acknowledged it: a read
  // after it sees the bytes). The grant must give write access (IssueGrantRequest.access REMOTE_WRITE: the
  // ACTIVE message's access bit kGrantWrite); otherwise PERMISSION_DENIED ("no write access"), refused here
  // before posting (with check_bounds off it is posted and rdmad's NIC refuses it, with the same code).
  // Other errors as reads. From any memory (copied into the slots first):
  absl::Status Write(uint64_t offset, uint64_t length, const void* source);
  // Zero-copy from `source` at `source_offset`: INVALID_ARGUMENT ("source: ...") unless the LocalBuffer is
  // this connection's and has `length` bytes from there.
  absl::Status Write(uint64_t offset, uint64_t length, const LocalBuffer& source, size_t source_offset = 0);

  // All of `ops` (reads, and writes where `write` is set), with up to queue_depth outstanding, completions
  // polled in batches. Each op's status is set; returns the first error (OK if all succeeded). The NIC may
  // run them in any order: a read of bytes a write of the same batch changes may see them before or after.
  absl::Status ReadBatch(absl::Span<ReadOp> ops);

  // Lower level, for pipelines: Post starts one read, or one write (ReadOp::write) (RESOURCE_EXHAUSTED when
  // queue_depth are outstanding);
  // Poll waits for at least `min` completions, or until `timeout` has passed, and returns the finished ops
  // (possibly fewer than `min` after the timeout; none is not an error), in completion order, with their
  // status set. min 0 does not wait. With an infinite timeout at most outstanding() are waited for; with a
  // finite one Poll waits the whole timeout for completions that cannot come (a way to wait for an ENDED
  // message or a disconnect), returning early, with the region's error, if the region breaks with nothing
  // outstanding. The ReadOp must stay alive until returned by Poll. outstanding(): posted and not yet
  // returned by Poll.
  absl::Status Post(ReadOp* op);
  absl::StatusOr<std::vector<ReadOp*>> Poll(size_t min, absl::Duration timeout = absl::InfiniteDuration());
  size_t outstanding() const;

  // Options::wait kEvents: the completion channel's fd (non-blocking), -1 with kPoll. It becomes readable
  // when a completion arrives on an armed CQ: a read or write finished (or failed, or was flushed after a
  // disconnect), or a grant message (ENDED) arrived. Put it in an epoll set (level- or edge-triggered) and
  // call Poll(0) when it is readable: Poll takes the channel's events, re-arms the CQs and returns what
  // finished. Every call returns with the CQs armed, so the fd wakes for the next completion; a wake-up may
  // find nothing (a completion already taken by an earlier call). Read it only through Poll. It belongs to
  // this connection: Reconnect replaces it (take the new one from completion_fd()).
  int completion_fd() const;

  // What this connection's reads did so far: work requests posted, and bytes copied from the slots (0 for
  // zero-copy reads). For tests and tuning.
  struct Counters {
    uint64_t work_requests = 0;
    uint64_t bytes_copied = 0;
  };
  Counters counters() const;

 private:
  RemoteRegion();
  // Open on one endpoint; `context` ("grants/9", or empty) prefixes every error.
  static absl::StatusOr<std::unique_ptr<RemoteRegion>> Connect(const std::string& host, uint16_t port,
                                                               const std::string& token, const Options& options,
                                                               const std::string& context);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  wire::GrantMessage key_;
  absl::Time expiry_ = absl::InfiniteFuture();
};

}  // namespace rdmad::client

#endif  // RDMAD_CLIENT_REMOTE_REGION_H_
