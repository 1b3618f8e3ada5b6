// RemoteRegion: the client's data plane. Opens a grant (docs/PROTOCOL.md#grants) and reads the granted
// memory with rdma_post_read, directly from the client's process: no call to rdmad per read.
//
// Open: rdma_cm connect (RDMA_PS_TCP, RC) to rdmad's data-plane listener with the grant's token as the
// connect request's private data; two receive buffers posted before connecting; waits for the ACTIVE
// grant message (the key), or FAILED / a reject. Local buffers are registered once, at Open:
// queue_depth slots of max_read_bytes each; reads land there and are copied to the caller's destination.
//
// Errors (absl::Status, the message names the grant and what happened):
//   OUT_OF_RANGE        the read is outside the granted range (checked in the library, or, with
//                       check_bounds off, refused by rdmad's NIC)
//   PERMISSION_DENIED   the grant was revoked (the key was refused at the NIC within the lease, or an ENDED
//                       message said so: its reason is in the message)
//   DEADLINE_EXCEEDED   the grant expired (the key was refused, or the connection ended, at or after the
//                       lease's end as known here; or an ENDED message said EXPIRED)
//   UNAVAILABLE         the connection is lost before the lease's end (disconnected, transport retries
//                       exceeded, flushed)
//   INVALID_ARGUMENT    a bad argument (zero length, larger than max_read_bytes, null destination)
//   Open: the reject's reason (TOKEN_EXPIRED, ...), or the FAILED message's.
// After a completion error the QP is in the error state: every later read fails with the first error.
//
// Threads: one RemoteRegion is used by one thread at a time (it has no lock); use one per thread, or
// serialize. Different RemoteRegions are independent.
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

namespace rdmad::client {

class RemoteRegion {
 public:
  struct Options {
    size_t queue_depth = 16;                           // reads outstanding at most
    size_t max_read_bytes = 1 << 20;                   // largest single read
    absl::Duration connect_timeout = absl::Seconds(10);  // connect and wait for the key (per endpoint)
    // Refuse out-of-range reads in the library. Off: post them anyway and let rdmad's NIC refuse them
    // (for tests that prove the NIC enforces the range).
    bool check_bounds = true;
    // How far this host's clock may lag rdmad's. A key refused (or a connection ended) less than this before
    // the lease's end, by this host's clock, is reported as expired (DEADLINE_EXCEEDED), not as revoked or
    // lost: rdmad's clock may already have passed the end. Set it to the clocks' worst disagreement (0 for
    // none); a revocation in a lease's last moments is then also reported as its expiry.
    absl::Duration clock_tolerance = absl::Milliseconds(100);
  };

  // One asynchronous read: `offset` from the start of the granted range, into `destination`.
  struct ReadOp {
    uint64_t offset = 0;
    uint64_t length = 0;
    void* destination = nullptr;
    absl::Status status;  // set when the read finished
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
  // outstanding on the old connection are abandoned (call it with none outstanding). On failure this
  // object is unchanged (still on its old grant, usable or not) and the error is Open's.
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

  // One read and its completion (busy-polls).
  absl::Status Read(uint64_t offset, uint64_t length, void* destination);
  // All of `ops`, with up to queue_depth outstanding, completions polled in batches. Each op's status is
  // set; returns the first error (OK if all succeeded).
  absl::Status ReadBatch(absl::Span<ReadOp> ops);

  // Lower level, for pipelines: Post starts one read (RESOURCE_EXHAUSTED when queue_depth are outstanding);
  // Poll waits for at least `min` completions (0: does not wait; at most outstanding() are waited for) and
  // returns the finished ops, in completion order, with their status set. The ReadOp must stay alive until
  // returned by Poll. outstanding(): posted and not yet returned by Poll.
  absl::Status Post(ReadOp* op);
  absl::StatusOr<std::vector<ReadOp*>> Poll(size_t min);
  size_t outstanding() const;

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
