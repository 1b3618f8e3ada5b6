// RemoteRegion (remote_region.h): rdma_cm connect with a grant token, then RDMA reads into registered slots
// (and writes from them).
//
// Ownership: a RemoteRegion's Impl owns every rdma-core object of the connection, created in this order:
// the rdma_addrinfo, the event channel, the rdma_cm id, the PD, the completion channel (Wait::kEvents
// only), the send and receive CQs, the QP
// (rdma_create_qp: the id holds it), the slot buffer and its MR, the receive buffer and its MR. ~Impl
// releases whatever exists, children before parents, on every failed Open as on destruction: disconnect,
// QP, CQs (their completion events acknowledged first), the completion channel, MRs (then their buffers), PD,
// id, event channel, addrinfo. Nothing is shared with another
// RemoteRegion.
//
// Threads: none of its own. Everything runs on the thread that calls the region (one at a time, see the
// header); the event channel's fd is non-blocking and only read by that thread, so a check for
// DISCONNECTED never blocks, and every event is acknowledged as soon as it is read (rdma_destroy_id then
// never waits). Wait::kPoll: completions are busy-polled (ibv_poll_cq), the CQs have no completion channel.
// Wait::kEvents: both CQs are on one non-blocking completion channel. A wait that finds the send CQ empty
// calls Idle: it takes the channel's pending events (acknowledged in batches of kAckBatch, the rest before
// the CQs are destroyed), re-arms each CQ whose event it took and returns so that the caller polls once more
// (a completion that arrived before the arm raised no event); only with both CQs armed and the send CQ
// empty after that does it sleep, in poll(2) on the completion channel and the rdma_cm event channel. So
// each CQ is at every moment either armed or has an event pending, and completion_fd() wakes for the next
// completion.
//
// Writes use the same slots and in_flight entries as reads (is_write by slot): a copying write copies the
// caller's bytes into its slot when it is posted, a zero-copy write sends from the caller's LocalBuffer.
//
// Work requests: at most queue_depth reads in flight, each in an entry of `in_flight` (wr_id = its index).
// A copying read lands in the entry's slot (queue_depth slots of max_read_bytes in one MR) and is copied to
// the caller's destination when its completion is polled; a zero-copy read (ReadOp::registered) lands in
// the caller's LocalBuffer and its entry's slot is unused. Completions polled while waiting for one read
// (Read, ReadBatch) but belonging to other reads wait in `ready` for Poll. A long Read is split and kept in
// flight by internal::RunChunks (read_plan.h) with ReadOps of its own.
//
// The PD is shared (std::shared_ptr) with the LocalBuffers registered on it, so that it is deallocated only
// after their MRs: a LocalBuffer may be destroyed after a Reconnect released its connection.
#include "client/remote_region.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/read_plan.h"
#include "client/read_status.h"
#include "proto/wire/handshake.h"
#include "proto/wire/wall_clock.h"

namespace rdmad::client {
namespace {

using Clock = std::chrono::steady_clock;
using internal::ErrnoStatus;

constexpr size_t kRecvSlots = 2;        // rdmad sends at most two grant messages
constexpr int kPollBatch = 16;          // completions taken per ibv_poll_cq
constexpr size_t kSpinsPerCheck = 4096; // empty polls between two looks at the recv CQ and the channel
constexpr size_t kMaxReadBytes = size_t{1} << 31;  // an IB message is at most 2^31 bytes
constexpr uint8_t kMaxRdAtomic = 16;
// After DISCONNECTED, how long Check lets the reads in flight complete on their own (a refusal by rdmad's NIC
// may arrive just behind the disconnect), and then, after its own disconnect, waits for them to be flushed:
// so that an error one of them carries (a refused key) is the region's first error, not "connection lost".
constexpr auto kFlushWait = std::chrono::milliseconds(100);
// The CM event channel (a syscall) is looked at once every this many posts, not on each: a disconnect
// also shows in the completions (flushed reads), and the receive CQ (ENDED) is polled on every post.
constexpr uint32_t kEventCheckEvery = 64;
// Completion events taken from the channel before they are acknowledged (ibv_ack_cq_events takes a mutex).
constexpr unsigned int kAckBatch = 32;

// The deadline `timeout` from now; time_point::max() for an infinite (or very long) one.
Clock::time_point DeadlineAfter(absl::Duration timeout) {
  if (timeout >= absl::Hours(24 * 365)) return Clock::time_point::max();
  return Clock::now() + std::chrono::nanoseconds(absl::ToInt64Nanoseconds(std::max(timeout, absl::ZeroDuration())));
}

// Milliseconds left until `deadline`, rounded up (so a wait does not spin at the end), at least 0.
int RemainingMs(Clock::time_point deadline) {
  const auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<decltype(ms)>(ms, 1 << 30));
}

std::string HostPort(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

std::string EventStatusText(int status) {
  if (status < 0) return absl::StrCat("status ", status, ": ", std::strerror(-status));
  return absl::StrCat("status ", status);
}

// The parts of an rdma_cm event the region needs, copied before the event is acknowledged.
struct CmEvent {
  rdma_cm_event_type type = RDMA_CM_EVENT_ADDR_ERROR;
  int status = 0;
  std::string private_data;
};

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

// Tells connections apart for LocalBuffer (an Impl's address may be reused).
std::atomic<uint64_t> next_connection{1};

}  // namespace

struct RemoteRegion::Impl {
  Options options;
  std::string label;  // what errors name: "grants/9", or "rdmad at host:port" until the key arrives

  // Owned; see the top of the file for the order.
  rdma_addrinfo* addrinfo = nullptr;
  rdma_event_channel* channel = nullptr;
  rdma_cm_id* id = nullptr;
  const uint64_t connection = next_connection.fetch_add(1, std::memory_order_relaxed);
  ibv_pd* pd = nullptr;
  std::shared_ptr<ibv_pd> pd_shared;  // owns `pd`; LocalBuffers hold it too
  uint64_t max_message = 0;           // the largest zero-copy work request (MessageLimit of the port)
  ibv_comp_channel* comp_channel = nullptr;  // Wait::kEvents only
  ibv_cq* send_cq = nullptr;
  ibv_cq* recv_cq = nullptr;
  // Wait::kEvents: whether each CQ is armed (or has an event pending), and its events not yet acknowledged.
  bool send_armed = false, recv_armed = false;
  unsigned int send_unacked = 0, recv_unacked = 0;
  bool has_qp = false;
  std::unique_ptr<void, FreeDeleter> slot_buffer;
  ibv_mr* slot_mr = nullptr;
  std::unique_ptr<void, FreeDeleter> recv_buffer;
  ibv_mr* recv_mr = nullptr;
  bool connect_called = false;  // rdma_connect was called: rdma_disconnect on release
  ibv_device_attr device{};     // of id->verbs, queried once the route is resolved

  // Reads.
  std::vector<ReadOp*> in_flight;    // by slot; null when the slot is free
  std::vector<uint8_t> zero_copy;    // by slot: its read lands in a LocalBuffer (no copy)
  std::vector<uint8_t> is_write;     // by slot: an RDMA WRITE (nothing to copy when it completes)
  std::vector<uint32_t> free_slots;  // a stack of free slot indexes
  std::vector<ReadOp*> ready;        // completed, not yet returned by Poll
  internal::StickyError sticky;
  uint64_t granted_length = 0;
  uint32_t granted_access = 0;       // the key's access bits (ACTIVE)
  std::optional<wire::GrantMessage> ended;
  bool disconnect_seen = false;
  uint32_t posts_since_event_check = 0;
  Counters counters;

  ~Impl();

  char* Slot(uint32_t i) const { return static_cast<char*>(slot_buffer.get()) + size_t{i} * options.max_read_bytes; }
  char* RecvSlot(uint64_t i) const { return static_cast<char*>(recv_buffer.get()) + i * wire::kGrantMessageSize; }
  size_t InFlight() const { return in_flight.size() - free_slots.size(); }

  absl::Status Errno(absl::StatusCode code, absl::string_view call, int err) const {
    return ErrnoStatus(code, label, call, err);
  }

  // The next event, without waiting: nullopt if there is none.
  absl::StatusOr<std::optional<CmEvent>> TryEvent();
  // The next event, waiting until `deadline` (DEADLINE_EXCEEDED naming `waiting_for`).
  absl::StatusOr<CmEvent> NextEvent(Clock::time_point deadline, absl::string_view waiting_for);
  // Waits for `expected`; any other event is UNAVAILABLE (REJECTED: see ConnectRefused).
  absl::Status Expect(rdma_cm_event_type expected, Clock::time_point deadline);
  absl::Status ConnectRefused(const CmEvent& event) const;

  // Creates the PD, CQs, QP and MRs and posts the receives (after the route is resolved).
  absl::Status CreateResources();
  // The first grant message: ACTIVE (returned), or FAILED / ENDED / an error.
  absl::StatusOr<wire::GrantMessage> WaitForKey(Clock::time_point deadline);
  // One receive completion, decoded. nullopt when the CQ is empty.
  absl::StatusOr<std::optional<wire::GrantMessage>> PollRecv();

  // Whether an ENDED message has arrived (polls the recv CQ once); records its status as the first error.
  bool CheckEnded();
  // A cheap look, without waiting, for an ENDED message and a DISCONNECTED event; returns the region's
  // first error (OK if none). On DISCONNECTED it disconnects too, which flushes the reads in flight.
  // `on_post`: from the read path, where the CM event channel is looked at only every kEventCheckEvery calls.
  absl::Status Check(absl::Time expiry, bool on_post = false);
  // One ibv_poll_cq on the send CQ: completes the reads it returns (into `ready`). Returns how many.
  absl::StatusOr<int> DrainSendCq(absl::Time expiry);
  // What the region knows of its grant, for classifying a failure.
  internal::GrantView View(absl::Time expiry) const;
  // Posts one read (or write, `kind`) into a free slot; sets op->status when it fails. `count_ready` (Post):
  // completions not yet returned by Poll count as outstanding. Read and ReadBatch need only a free slot.
  absl::Status PostRead(ReadOp* op, const wire::GrantMessage& key, absl::Time expiry, bool count_ready,
                        internal::OpKind kind = internal::OpKind::kRead);
  // Why `buffer` cannot take [destination, destination + length): "" when it can.
  std::string BufferProblem(const LocalBuffer& buffer, const void* destination, uint64_t length) const;
  // A whole-buffer Read or Write's argument: `what` ("destination", "source") is this connection's
  // LocalBuffer and `at` is inside it; INVALID_ARGUMENT naming the argument otherwise.
  absl::Status CheckBuffer(const LocalBuffer& buffer, size_t at, const char* what) const;
  // Read (both forms): [offset, offset + length) into `destination` (inside `registered` if set), split into
  // work requests and kept in flight (RunChunks); returns when none is outstanding.
  // A write (`kind`) takes its bytes from `destination`.
  absl::Status ReadWhole(uint64_t offset, uint64_t length, char* destination, const LocalBuffer* registered,
                         const wire::GrantMessage& key, absl::Time expiry,
                         internal::OpKind kind = internal::OpKind::kRead);
  // A poll of the send CQ found nothing. kPoll: every kSpinsPerCheck calls (counted in `spins`), Check.
  // kEvents: takes the channel's events and re-arms (then returns: the caller polls again), or, with both CQs
  // armed, sleeps until a completion event, a CM event or `deadline`.
  void Idle(absl::Time expiry, Clock::time_point deadline, size_t& spins);
  // kEvents: takes the completion channel's pending events and re-arms the CQs they came from. Returns
  // whether it armed a CQ (a completion may then be in it that raised no event: poll it again).
  bool Rearm();
  // Acknowledges the events taken (all of them with `all`, else once kAckBatch are due).
  void AckEvents(bool all);
  // Removes from `ready` the ops `mine` selects; returns how many.
  template <typename Pred>
  size_t TakeReady(Pred mine);
};

RemoteRegion::Impl::~Impl() {
  if (connect_called && id != nullptr) {
    (void)rdma_disconnect(id);  // fails if never connected or already disconnected: nothing to do then
    for (int i = 0; i < 16; ++i) {  // acknowledge what has already arrived, without waiting for more
      absl::StatusOr<std::optional<CmEvent>> e = TryEvent();
      if (!e.ok() || !e->has_value()) break;
    }
  }
  if (has_qp) rdma_destroy_qp(id);
  AckEvents(/*all=*/true);  // ibv_destroy_cq waits for every event of its CQ to be acknowledged
  if (send_cq != nullptr) (void)ibv_destroy_cq(send_cq);
  if (recv_cq != nullptr) (void)ibv_destroy_cq(recv_cq);
  if (comp_channel != nullptr) (void)ibv_destroy_comp_channel(comp_channel);
  if (slot_mr != nullptr) (void)ibv_dereg_mr(slot_mr);
  if (recv_mr != nullptr) (void)ibv_dereg_mr(recv_mr);
  slot_buffer.reset();
  recv_buffer.reset();
  pd_shared.reset();  // ibv_dealloc_pd now, or after the last LocalBuffer
  if (id != nullptr) (void)rdma_destroy_id(id);
  if (channel != nullptr) rdma_destroy_event_channel(channel);
  if (addrinfo != nullptr) rdma_freeaddrinfo(addrinfo);
}

absl::StatusOr<std::optional<CmEvent>> RemoteRegion::Impl::TryEvent() {
  rdma_cm_event* event = nullptr;
  if (rdma_get_cm_event(channel, &event) != 0) {
    const int err = errno;
    if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR) return std::optional<CmEvent>();
    return Errno(absl::StatusCode::kUnavailable, "rdma_get_cm_event", err);
  }
  CmEvent copy;
  copy.type = event->event;
  copy.status = event->status;
  if (event->param.conn.private_data != nullptr && event->param.conn.private_data_len > 0) {
    copy.private_data.assign(static_cast<const char*>(event->param.conn.private_data),
                             event->param.conn.private_data_len);
  }
  (void)rdma_ack_cm_event(event);
  return std::optional<CmEvent>(std::move(copy));
}

absl::StatusOr<CmEvent> RemoteRegion::Impl::NextEvent(Clock::time_point deadline, absl::string_view waiting_for) {
  while (true) {
    absl::StatusOr<std::optional<CmEvent>> event = TryEvent();
    if (!event.ok()) return event.status();
    if (event->has_value()) return std::move(**event);
    const int ms = RemainingMs(deadline);
    if (ms == 0) {
      return absl::DeadlineExceededError(absl::StrCat(label, ": no ", waiting_for, " within ",
                                                      absl::FormatDuration(options.connect_timeout)));
    }
    pollfd pfd{channel->fd, POLLIN, 0};
    if (poll(&pfd, 1, ms) < 0 && errno != EINTR) return Errno(absl::StatusCode::kInternal, "poll", errno);
  }
}

absl::Status RemoteRegion::Impl::ConnectRefused(const CmEvent& event) const {
  if (event.type == RDMA_CM_EVENT_REJECTED) {
    absl::StatusOr<wire::Reject> reject = wire::DecodeReject(event.private_data);
    if (reject.ok()) {
      std::string message = absl::StrCat(label, ": rejected by rdmad: ", wire::RejectReasonName(reject->reason));
      if (reject->token_id != 0) absl::StrAppend(&message, " (", wire::TokenName(reject->token_id), ")");
      return absl::FailedPreconditionError(message);
    }
    return absl::UnavailableError(
        absl::StrCat(label, ": rejected, not by rdmad (", EventStatusText(event.status), ")"));
  }
  return absl::UnavailableError(
      absl::StrCat(label, ": ", rdma_event_str(event.type), " (", EventStatusText(event.status), ")"));
}

absl::Status RemoteRegion::Impl::Expect(rdma_cm_event_type expected, Clock::time_point deadline) {
  absl::StatusOr<CmEvent> event = NextEvent(deadline, rdma_event_str(expected));
  if (!event.ok()) return event.status();
  if (event->type == expected && event->status == 0) return absl::OkStatus();
  return ConnectRefused(*event);
}

absl::Status RemoteRegion::Impl::CreateResources() {
  ibv_context* verbs = id->verbs;
  if (int ret = ibv_query_device(verbs, &device); ret != 0) {
    return Errno(absl::ErrnoToStatusCode(ret), "ibv_query_device", ret);
  }
  const ibv_device_attr& attr = device;
  if (options.queue_depth > static_cast<size_t>(attr.max_qp_wr) ||
      options.queue_depth + 1 > static_cast<size_t>(attr.max_cqe)) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": queue_depth ", options.queue_depth,
                                                   " is more than the device allows (max_qp_wr ", attr.max_qp_wr,
                                                   ", max_cqe ", attr.max_cqe, ")"));
  }
  ibv_port_attr port{};
  if (int ret = ibv_query_port(verbs, id->port_num, &port); ret != 0) {
    return Errno(absl::ErrnoToStatusCode(ret), "ibv_query_port", ret);
  }
  max_message = internal::MessageLimit(port.max_msg_sz, options.max_message_bytes);
  pd = ibv_alloc_pd(verbs);
  if (pd == nullptr) return Errno(absl::ErrnoToStatusCode(errno), "ibv_alloc_pd", errno);
  pd_shared.reset(pd, [](ibv_pd* p) { (void)ibv_dealloc_pd(p); });
  if (options.wait == Options::Wait::kEvents) {
    comp_channel = ibv_create_comp_channel(verbs);
    if (comp_channel == nullptr) return Errno(absl::ErrnoToStatusCode(errno), "ibv_create_comp_channel", errno);
    const int flags = fcntl(comp_channel->fd, F_GETFL);
    if (flags < 0 || fcntl(comp_channel->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
      return Errno(absl::StatusCode::kInternal, "fcntl (O_NONBLOCK on the completion channel)", errno);
    }
  }
  send_cq = ibv_create_cq(verbs, static_cast<int>(options.queue_depth + 1), nullptr, comp_channel, 0);
  if (send_cq == nullptr) return Errno(absl::ErrnoToStatusCode(errno), "ibv_create_cq (send)", errno);
  recv_cq = ibv_create_cq(verbs, static_cast<int>(kRecvSlots), nullptr, comp_channel, 0);
  if (recv_cq == nullptr) return Errno(absl::ErrnoToStatusCode(errno), "ibv_create_cq (recv)", errno);
  if (comp_channel != nullptr) {
    for (ibv_cq* cq : {send_cq, recv_cq}) {
      if (int ret = ibv_req_notify_cq(cq, 0); ret != 0) {
        return Errno(absl::ErrnoToStatusCode(ret), "ibv_req_notify_cq", ret);
      }
    }
    send_armed = recv_armed = true;
  }

  ibv_qp_init_attr qp_attr{};
  qp_attr.send_cq = send_cq;
  qp_attr.recv_cq = recv_cq;
  qp_attr.qp_type = IBV_QPT_RC;
  qp_attr.sq_sig_all = 0;
  qp_attr.cap.max_send_wr = static_cast<uint32_t>(options.queue_depth);
  qp_attr.cap.max_recv_wr = kRecvSlots;
  qp_attr.cap.max_send_sge = 1;
  qp_attr.cap.max_recv_sge = 1;
  if (rdma_create_qp(id, pd, &qp_attr) != 0) {
    return Errno(absl::ErrnoToStatusCode(errno), "rdma_create_qp", errno);
  }
  has_qp = true;

  const size_t slot_bytes = options.queue_depth * options.max_read_bytes;
  void* buffer = nullptr;
  if (int ret = posix_memalign(&buffer, 4096, slot_bytes); ret != 0) {
    return Errno(absl::StatusCode::kResourceExhausted, "posix_memalign", ret);
  }
  slot_buffer.reset(buffer);
  slot_mr = ibv_reg_mr(pd, buffer, slot_bytes, IBV_ACCESS_LOCAL_WRITE);
  if (slot_mr == nullptr) return Errno(absl::ErrnoToStatusCode(errno), "ibv_reg_mr (read slots)", errno);
  buffer = nullptr;
  const size_t recv_bytes = kRecvSlots * wire::kGrantMessageSize;
  if (int ret = posix_memalign(&buffer, 64, recv_bytes); ret != 0) {
    return Errno(absl::StatusCode::kResourceExhausted, "posix_memalign", ret);
  }
  recv_buffer.reset(buffer);
  std::memset(buffer, 0, recv_bytes);
  recv_mr = ibv_reg_mr(pd, buffer, recv_bytes, IBV_ACCESS_LOCAL_WRITE);
  if (recv_mr == nullptr) return Errno(absl::ErrnoToStatusCode(errno), "ibv_reg_mr (receives)", errno);
  for (uint64_t i = 0; i < kRecvSlots; ++i) {
    if (rdma_post_recv(id, reinterpret_cast<void*>(i), RecvSlot(i), wire::kGrantMessageSize, recv_mr) != 0) {
      return Errno(absl::ErrnoToStatusCode(errno), "rdma_post_recv", errno);
    }
  }

  in_flight.assign(options.queue_depth, nullptr);
  zero_copy.assign(options.queue_depth, 0);
  is_write.assign(options.queue_depth, 0);
  free_slots.clear();
  for (size_t i = options.queue_depth; i > 0; --i) free_slots.push_back(static_cast<uint32_t>(i - 1));
  return absl::OkStatus();
}

absl::StatusOr<std::optional<wire::GrantMessage>> RemoteRegion::Impl::PollRecv() {
  ibv_wc wc{};
  const int n = ibv_poll_cq(recv_cq, 1, &wc);
  if (n < 0) return absl::InternalError(absl::StrCat(label, ": ibv_poll_cq (recv) returned ", n));
  if (n == 0) return std::optional<wire::GrantMessage>();
  if (wc.status != IBV_WC_SUCCESS) {
    return absl::UnavailableError(absl::StrCat(label, ": receiving a grant message: ", ibv_wc_status_str(wc.status)));
  }
  const size_t len = std::min<size_t>(wc.byte_len, wire::kGrantMessageSize);
  absl::StatusOr<wire::GrantMessage> m =
      wire::DecodeGrantMessage(absl::string_view(RecvSlot(wc.wr_id < kRecvSlots ? wc.wr_id : 0), len));
  if (!m.ok()) return absl::InternalError(absl::StrCat(label, ": ", m.status().message()));
  return std::optional<wire::GrantMessage>(*m);
}

absl::StatusOr<wire::GrantMessage> RemoteRegion::Impl::WaitForKey(Clock::time_point deadline) {
  absl::Duration nap = absl::Microseconds(10);
  bool disconnected = false;
  while (true) {
    absl::StatusOr<std::optional<wire::GrantMessage>> m = PollRecv();
    if (!m.ok()) return m.status();
    if (m->has_value()) {
      const wire::GrantMessage& message = **m;
      const std::string grant = absl::StrCat("grants/", message.grant_id);
      switch (message.type) {
        case wire::GrantMessageType::kActive:
          return message;
        case wire::GrantMessageType::kFailed:
          return absl::FailedPreconditionError(absl::StrCat(label, ": rdmad could not activate ", grant, ": ",
                                                            wire::GrantEndReasonName(message.reason)));
        case wire::GrantMessageType::kEnded:
          return internal::EndedStatus(grant, message.reason);
        case wire::GrantMessageType::kRefused:
        case wire::GrantMessageType::kActivate:
        case wire::GrantMessageType::kRelease:
          // Messages of a session (protocol version 2), which this connection (version 1) never asked for.
          return absl::InternalError(absl::StrCat(label, ": rdmad sent a ", wire::GrantMessageTypeName(message.type),
                                                  " message on a version 1 connection"));
      }
    }
    if (disconnected) {
      return absl::UnavailableError(absl::StrCat(label, ": rdmad disconnected before sending the key"));
    }
    absl::StatusOr<std::optional<CmEvent>> event = TryEvent();
    if (!event.ok()) return event.status();
    if (event->has_value() && ((*event)->type == RDMA_CM_EVENT_DISCONNECTED ||
                               (*event)->type == RDMA_CM_EVENT_DEVICE_REMOVAL)) {
      disconnected = true;  // look at the recv CQ once more: a FAILED message may be there
      continue;
    }
    if (RemainingMs(deadline) == 0) {
      return absl::DeadlineExceededError(absl::StrCat(label, ": connected, but no grant message within ",
                                                      absl::FormatDuration(options.connect_timeout)));
    }
    absl::SleepFor(nap);
    nap = std::min(nap * 2, absl::Milliseconds(1));
  }
}

bool RemoteRegion::Impl::CheckEnded() {
  if (ended) return true;
  absl::StatusOr<std::optional<wire::GrantMessage>> m = PollRecv();
  // A failed receive is a flush: the QP is in the error state, and the send CQ says why.
  if (!m.ok() || !m->has_value() || (*m)->type != wire::GrantMessageType::kEnded) return false;
  ended = **m;
  (void)sticky.Record(internal::EndedStatus(label, ended->reason));
  return true;
}

absl::Status RemoteRegion::Impl::Check(absl::Time expiry, bool on_post) {
  if (sticky.broken()) return sticky.first();
  if (CheckEnded()) return sticky.first();
  if (!disconnect_seen) {
    if (on_post && ++posts_since_event_check < kEventCheckEvery) return absl::OkStatus();
    posts_since_event_check = 0;
    absl::StatusOr<std::optional<CmEvent>> event = TryEvent();
    if (!event.ok()) return sticky.Record(event.status());
    if (!event->has_value() || ((*event)->type != RDMA_CM_EVENT_DISCONNECTED &&
                                (*event)->type != RDMA_CM_EVENT_DEVICE_REMOVAL)) {
      return absl::OkStatus();
    }
    disconnect_seen = true;
    if (CheckEnded()) return sticky.first();  // rdmad sends ENDED before it disconnects
    // Before our side goes too, the reads in flight get a while to complete on their own: a refusal by
    // rdmad's NIC (its NAK) may be on the wire behind the disconnect's request, and it, not the flush,
    // says why the connection ended.
    const Clock::time_point settle = Clock::now() + kFlushWait;
    while (InFlight() > 0 && !sticky.broken() && Clock::now() < settle) (void)DrainSendCq(expiry);
    (void)rdma_disconnect(id);  // our side too (rdma_disconnect(3)): the QP's reads in flight are flushed
    if (sticky.broken() || CheckEnded()) return sticky.first();
  }
  const Clock::time_point until = Clock::now() + kFlushWait;
  while (InFlight() > 0 && !sticky.broken() && Clock::now() < until) (void)DrainSendCq(expiry);
  return sticky.Record(internal::ConnectionEnded(View(expiry), "rdmad disconnected", wire::WallNow()));
}

internal::GrantView RemoteRegion::Impl::View(absl::Time expiry) const {
  internal::GrantView view;
  view.grant = label;
  view.length = granted_length;
  view.expiry = expiry;
  view.clock_tolerance = options.clock_tolerance;
  view.access = granted_access;
  if (ended) view.ended_reason = ended->reason;
  return view;
}

absl::StatusOr<int> RemoteRegion::Impl::DrainSendCq(absl::Time expiry) {
  ibv_wc wcs[kPollBatch];
  const int n = ibv_poll_cq(send_cq, kPollBatch, wcs);
  if (n < 0) {
    // Not expected from any provider: fail everything in flight, and the region.
    absl::Status s = sticky.Record(absl::InternalError(absl::StrCat(label, ": ibv_poll_cq returned ", n)));
    for (uint32_t slot = 0; slot < in_flight.size(); ++slot) {
      if (in_flight[slot] == nullptr) continue;
      in_flight[slot]->status = s;
      ready.push_back(in_flight[slot]);
      in_flight[slot] = nullptr;
      free_slots.push_back(slot);
    }
    return s;
  }
  for (int i = 0; i < n; ++i) {
    const ibv_wc& wc = wcs[i];
    const uint32_t slot = static_cast<uint32_t>(wc.wr_id);
    ReadOp* op = slot < in_flight.size() ? in_flight[slot] : nullptr;
    if (op == nullptr) continue;  // not ours: cannot happen, every send is a read of ours
    in_flight[slot] = nullptr;
    free_slots.push_back(slot);
    const internal::OpKind kind = is_write[slot] ? internal::OpKind::kWrite : internal::OpKind::kRead;
    if (wc.status == IBV_WC_SUCCESS) {
      if (zero_copy[slot] == 0 && kind == internal::OpKind::kRead) {
        std::memcpy(op->destination, Slot(slot), op->length);
        counters.bytes_copied += op->length;
      }
      op->status = absl::OkStatus();
    } else {
      if (!sticky.broken()) (void)CheckEnded();  // an ENDED message that arrived first is the cause
      op->status =
          internal::CompleteRead(sticky, wc.status, op->offset, op->length, View(expiry), wire::WallNow(), kind);
    }
    ready.push_back(op);
  }
  return n;
}

void RemoteRegion::Impl::AckEvents(bool all) {
  if (send_unacked > 0 && (all || send_unacked >= kAckBatch)) {
    ibv_ack_cq_events(send_cq, send_unacked);
    send_unacked = 0;
  }
  if (recv_unacked > 0 && (all || recv_unacked >= kAckBatch)) {
    ibv_ack_cq_events(recv_cq, recv_unacked);
    recv_unacked = 0;
  }
}

bool RemoteRegion::Impl::Rearm() {
  if (comp_channel == nullptr) return false;
  while (true) {
    ibv_cq* cq = nullptr;
    void* context = nullptr;
    if (ibv_get_cq_event(comp_channel, &cq, &context) != 0) break;  // EAGAIN: none pending
    if (cq == send_cq) {
      send_armed = false;
      ++send_unacked;
    } else if (cq == recv_cq) {
      recv_armed = false;
      ++recv_unacked;
    }
  }
  AckEvents(/*all=*/false);
  bool armed = false;
  // A failed arm (not expected) leaves the flag clear: the next wait tries again instead of sleeping.
  if (!send_armed && ibv_req_notify_cq(send_cq, 0) == 0) send_armed = armed = true;
  if (!recv_armed && ibv_req_notify_cq(recv_cq, 0) == 0) recv_armed = armed = true;
  return armed;
}

void RemoteRegion::Impl::Idle(absl::Time expiry, Clock::time_point deadline, size_t& spins) {
  if (comp_channel == nullptr) {
    if (++spins % kSpinsPerCheck == 0) (void)Check(expiry);
    return;
  }
  if (Rearm()) {  // the caller polls again: what came before the arm raised no event
    (void)CheckEnded();
    return;
  }
  if (!send_armed || !recv_armed) return;  // could not arm: poll, do not sleep
  if (CheckEnded() || sticky.broken()) return;
  const int ms = deadline == Clock::time_point::max() ? -1 : RemainingMs(deadline);
  if (ms == 0) return;
  pollfd fds[2] = {{comp_channel->fd, POLLIN, 0}, {channel->fd, POLLIN, 0}};
  const int n = poll(fds, disconnect_seen ? 1 : 2, ms);
  if (n > 0 && (fds[1].revents & POLLIN) != 0) (void)Check(expiry);
}

template <typename Pred>
size_t RemoteRegion::Impl::TakeReady(Pred mine) {
  const auto keep = std::stable_partition(ready.begin(), ready.end(), [&](ReadOp* op) { return !mine(op); });
  const size_t taken = static_cast<size_t>(ready.end() - keep);
  ready.erase(keep, ready.end());
  return taken;
}

RemoteRegion::RemoteRegion() : impl_(std::make_unique<Impl>()) {}

RemoteRegion::~RemoteRegion() = default;

absl::StatusOr<std::unique_ptr<RemoteRegion>> RemoteRegion::Open(const std::string& host, uint16_t port,
                                                                  const std::string& token, Options options) {
  return Connect(host, port, token, options, "");
}

absl::StatusOr<std::unique_ptr<RemoteRegion>> RemoteRegion::Open(const v1::IssuedGrant& grant, Options options) {
  const std::string name = grant.grant().name().empty() ? "grant" : grant.grant().name();
  if (grant.endpoints().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": the grant names no endpoint"));
  }
  // Only an endpoint that did not answer (UNAVAILABLE, DEADLINE_EXCEEDED) is passed over: a reject or a
  // FAILED message is rdmad's answer, and a local error would repeat.
  std::string tried;
  absl::Status last;
  for (const v1::SocketAddress& endpoint : grant.endpoints()) {
    if (endpoint.port() == 0 || endpoint.port() > 65535) {
      last = absl::InvalidArgumentError(absl::StrCat(name, ": endpoint ", endpoint.address(), " has port ",
                                                     endpoint.port()));
    } else {
      absl::StatusOr<std::unique_ptr<RemoteRegion>> region =
          Connect(endpoint.address(), static_cast<uint16_t>(endpoint.port()), grant.token(), options, name);
      if (region.ok()) return region;
      last = region.status();
      if (last.code() != absl::StatusCode::kUnavailable && last.code() != absl::StatusCode::kDeadlineExceeded) {
        return last;
      }
    }
    absl::StrAppend(&tried, tried.empty() ? "" : "; ", last.message());
  }
  if (grant.endpoints().size() == 1) return last;
  return absl::Status(last.code(), absl::StrCat("no endpoint answered: ", tried));
}

absl::StatusOr<std::unique_ptr<RemoteRegion>> RemoteRegion::Connect(const std::string& host, uint16_t port,
                                                                    const std::string& token,
                                                                    const Options& options,
                                                                    const std::string& context) {
  // Clamped so that an infinite timeout does not overflow the clock.
  const Clock::time_point deadline =
      Clock::now() +
      std::chrono::nanoseconds(absl::ToInt64Nanoseconds(std::min(options.connect_timeout, absl::Hours(24 * 365))));
  const std::string endpoint = HostPort(host, port);
  std::unique_ptr<RemoteRegion> region(new RemoteRegion());
  Impl& impl = *region->impl_;
  impl.options = options;
  impl.label = absl::StrCat(context, context.empty() ? "" : ": ", "rdmad at ", endpoint);

  auto invalid = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(impl.label, ": ", what));
  };
  if (token.empty() || token.size() > wire::kConnectPrivateDataMax) {
    return invalid(absl::StrCat("token: ", token.size(), " bytes, a connect request carries 1 to ",
                                wire::kConnectPrivateDataMax));
  }
  if (options.queue_depth == 0) return invalid("queue_depth: must be > 0");
  if (options.max_read_bytes == 0 || options.max_read_bytes > kMaxReadBytes) {
    return invalid(absl::StrCat("max_read_bytes: must be in [1, ", kMaxReadBytes, "], got ", options.max_read_bytes));
  }
  if (options.queue_depth > SIZE_MAX / options.max_read_bytes) {
    return invalid("queue_depth * max_read_bytes overflows");
  }
  if (options.connect_timeout <= absl::ZeroDuration()) return invalid("connect_timeout: must be > 0");
  if (options.clock_tolerance < absl::ZeroDuration()) return invalid("clock_tolerance: must be >= 0");

  rdma_addrinfo hints{};
  hints.ai_port_space = RDMA_PS_TCP;
  hints.ai_qp_type = IBV_QPT_RC;
  const std::string service = absl::StrCat(port);
  if (int ret = rdma_getaddrinfo(host.c_str(), service.c_str(), &hints, &impl.addrinfo); ret != 0) {
    impl.addrinfo = nullptr;
    if (ret == -1 || ret == EAI_SYSTEM) return impl.Errno(absl::StatusCode::kUnavailable, "rdma_getaddrinfo", errno);
    return absl::UnavailableError(absl::StrCat(impl.label, ": rdma_getaddrinfo: ", gai_strerror(ret)));
  }
  if (impl.addrinfo == nullptr || impl.addrinfo->ai_dst_addr == nullptr) {
    return absl::UnavailableError(absl::StrCat(impl.label, ": rdma_getaddrinfo: no destination address"));
  }

  impl.channel = rdma_create_event_channel();
  if (impl.channel == nullptr) {
    return impl.Errno(absl::ErrnoToStatusCode(errno), "rdma_create_event_channel", errno);
  }
  const int flags = fcntl(impl.channel->fd, F_GETFL);
  if (flags < 0 || fcntl(impl.channel->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return impl.Errno(absl::StatusCode::kInternal, "fcntl (O_NONBLOCK on the event channel)", errno);
  }
  if (rdma_create_id(impl.channel, &impl.id, nullptr, RDMA_PS_TCP) != 0) {
    impl.id = nullptr;
    return impl.Errno(absl::ErrnoToStatusCode(errno), "rdma_create_id", errno);
  }

  if (rdma_resolve_addr(impl.id, impl.addrinfo->ai_src_addr, impl.addrinfo->ai_dst_addr,
                        std::max(1, RemainingMs(deadline))) != 0) {
    return impl.Errno(absl::StatusCode::kUnavailable, "rdma_resolve_addr", errno);
  }
  if (absl::Status s = impl.Expect(RDMA_CM_EVENT_ADDR_RESOLVED, deadline); !s.ok()) return s;
  if (rdma_resolve_route(impl.id, std::max(1, RemainingMs(deadline))) != 0) {
    return impl.Errno(absl::StatusCode::kUnavailable, "rdma_resolve_route", errno);
  }
  if (absl::Status s = impl.Expect(RDMA_CM_EVENT_ROUTE_RESOLVED, deadline); !s.ok()) return s;
  if (absl::Status s = impl.CreateResources(); !s.ok()) return s;

  auto depth = [](int device_max) {
    return static_cast<uint8_t>(std::clamp(device_max, 1, static_cast<int>(kMaxRdAtomic)));
  };
  rdma_conn_param param{};
  param.private_data = token.data();
  param.private_data_len = static_cast<uint8_t>(token.size());
  param.initiator_depth = depth(impl.device.max_qp_init_rd_atom);  // our reads in flight at once
  param.responder_resources = depth(impl.device.max_qp_rd_atom);
  // 6 transport retries, not 7: Soft-RoCE (rxe) takes 7 as "retry for ever", so a read whose answer was lost
  // (a NAK dropped on the wire, a peer whose QP went to the error state) would wait for ever instead of
  // failing with IBV_WC_RETRY_EXC_ERR. RNR retries stay unbounded (7), as the IB spec defines them.
  param.retry_count = 6;
  param.rnr_retry_count = 7;
  if (rdma_connect(impl.id, &param) != 0) return impl.Errno(absl::StatusCode::kUnavailable, "rdma_connect", errno);
  impl.connect_called = true;
  if (absl::Status s = impl.Expect(RDMA_CM_EVENT_ESTABLISHED, deadline); !s.ok()) return s;

  absl::StatusOr<wire::GrantMessage> key = impl.WaitForKey(deadline);
  if (!key.ok()) return key.status();
  region->key_ = *key;
  region->expiry_ = key->expiry_unix_nanos == 0 ? absl::InfiniteFuture() : absl::FromUnixNanos(key->expiry_unix_nanos);
  impl.granted_length = key->length;
  impl.granted_access = key->access;
  impl.label = region->grant_name();
  return region;
}

absl::Status RemoteRegion::Reconnect(const v1::IssuedGrant& grant) {
  absl::StatusOr<std::unique_ptr<RemoteRegion>> fresh = Open(grant, impl_->options);
  if (!fresh.ok()) return fresh.status();
  std::swap(impl_, (*fresh)->impl_);  // the old connection is released with `fresh`
  key_ = (*fresh)->key_;
  expiry_ = (*fresh)->expiry_;
  return absl::OkStatus();
}

std::string RemoteRegion::grant_name() const { return absl::StrCat("grants/", key_.grant_id); }

std::optional<wire::GrantMessage> RemoteRegion::ended() {
  if (!impl_->ended && !impl_->sticky.broken()) (void)impl_->Check(expiry_);
  return impl_->ended;
}

size_t RemoteRegion::outstanding() const { return impl_->InFlight() + impl_->ready.size(); }

absl::Status RemoteRegion::Impl::PostRead(ReadOp* op, const wire::GrantMessage& key, absl::Time expiry,
                                          bool count_ready, internal::OpKind kind) {
  if (op->write) kind = internal::OpKind::kWrite;
  const bool write = kind == internal::OpKind::kWrite;
  const char* const what = write ? "source" : "destination";
  auto fail = [op](absl::Status s) {
    op->status = s;
    return s;
  };
  const bool direct = op->registered != nullptr;
  const uint64_t most = direct ? max_message : options.max_read_bytes;
  if (op->length == 0 || op->length > most) {
    return fail(absl::InvalidArgumentError(absl::StrCat(label, ": length ", op->length, ": must be in [1, ",
                                                        direct ? "the maximum message size = " : "max_read_bytes = ",
                                                        most, "] for one ReadOp (Read takes any length)")));
  }
  if (op->destination == nullptr) return fail(absl::InvalidArgumentError(absl::StrCat(label, ": null ", what)));
  if (direct) {
    if (std::string problem = BufferProblem(*op->registered, op->destination, op->length); !problem.empty()) {
      return fail(absl::InvalidArgumentError(absl::StrCat(label, ": ", what, ": ", problem)));
    }
  }
  if (sticky.broken()) return fail(sticky.first());
  if (options.check_bounds && !internal::InGrantedRange(op->offset, op->length, key.length)) {
    return fail(internal::OutOfRangeRead(label, op->offset, op->length, key.length, kind));
  }
  if (write && options.check_bounds && (key.access & wire::kGrantWrite) == 0) {
    return fail(internal::NoWriteAccess(label, op->offset, op->length, key.access));
  }
  if (free_slots.empty() || (count_ready && InFlight() + ready.size() >= options.queue_depth)) {
    return fail(absl::ResourceExhaustedError(
        absl::StrCat(label, ": ", options.queue_depth, " reads outstanding (queue_depth); poll first")));
  }
  if (absl::Status s = Check(expiry, /*on_post=*/true); !s.ok()) return fail(s);

  const uint32_t slot = free_slots.back();
  // Wraps around past 2^64 only with check_bounds off: the NIC refuses it like any other bad address.
  const uint64_t remote_addr = key.remote_addr + op->offset;
  void* const context = reinterpret_cast<void*>(static_cast<uintptr_t>(slot));
  void* const local = direct ? op->destination : Slot(slot);
  ibv_mr* const mr = direct ? op->registered->mr_ : slot_mr;
  int ret;
  if (write) {
    if (!direct) std::memcpy(Slot(slot), op->destination, static_cast<size_t>(op->length));
    ret = rdma_post_write(id, context, local, static_cast<size_t>(op->length), mr, IBV_SEND_SIGNALED, remote_addr,
                          key.rkey);
  } else {
    ret = rdma_post_read(id, context, local, static_cast<size_t>(op->length), mr, IBV_SEND_SIGNALED, remote_addr,
                         key.rkey);
  }
  if (ret != 0) {
    const int err = errno;
    return fail(Errno(err == ENOMEM ? absl::StatusCode::kResourceExhausted : absl::StatusCode::kUnavailable,
                      write ? "rdma_post_write" : "rdma_post_read", err));
  }
  if (write && !direct) counters.bytes_copied += op->length;
  free_slots.pop_back();
  in_flight[slot] = op;
  zero_copy[slot] = direct ? 1 : 0;
  is_write[slot] = write ? 1 : 0;
  ++counters.work_requests;
  return absl::OkStatus();
}

absl::Status RemoteRegion::Impl::CheckBuffer(const LocalBuffer& buffer, size_t at, const char* what) const {
  if (std::string problem = BufferProblem(buffer, buffer.data(), 0); !problem.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": ", what, ": ", problem));
  }
  if (at > buffer.size()) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": ", what, "_offset ", at, " is past the registered ",
                                                   buffer.size(), " bytes"));
  }
  return absl::OkStatus();
}

std::string RemoteRegion::Impl::BufferProblem(const LocalBuffer& buffer, const void* destination,
                                              uint64_t length) const {
  if (buffer.empty()) return "an empty LocalBuffer (moved from, or never registered)";
  if (buffer.connection_ != connection) {
    return "a LocalBuffer of another connection (another RemoteRegion, or before Reconnect): register it here";
  }
  if (!buffer.Contains(destination, length)) {
    const uintptr_t at = reinterpret_cast<uintptr_t>(destination);
    const uintptr_t base = reinterpret_cast<uintptr_t>(buffer.data());
    if (at >= base && at - base <= buffer.size()) {
      return absl::StrCat(length, " bytes at byte ", at - base, " of the registered ", buffer.size(),
                          " do not fit");
    }
    return absl::StrCat("[", absl::Hex(at), ", +", length, ") is not inside the registered buffer [",
                        absl::Hex(base), ", +", buffer.size(), ")");
  }
  return "";
}

absl::Status RemoteRegion::Impl::ReadWhole(uint64_t offset, uint64_t length, char* destination,
                                           const LocalBuffer* registered, const wire::GrantMessage& key,
                                           absl::Time expiry, internal::OpKind kind) {
  const char* const what = kind == internal::OpKind::kWrite ? "source" : "destination";
  if (length == 0) return absl::InvalidArgumentError(absl::StrCat(label, ": length 0: must be at least 1"));
  if (destination == nullptr) return absl::InvalidArgumentError(absl::StrCat(label, ": null ", what));
  if (registered != nullptr) {
    if (std::string problem = BufferProblem(*registered, destination, length); !problem.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(label, ": ", what, ": ", problem));
    }
  }
  if (sticky.broken()) return sticky.first();
  if (options.check_bounds && !internal::InGrantedRange(offset, length, key.length)) {
    return internal::OutOfRangeRead(label, offset, length, key.length, kind);
  }
  if (kind == internal::OpKind::kWrite && options.check_bounds && (key.access & wire::kGrantWrite) == 0) {
    return internal::NoWriteAccess(label, offset, length, key.access);
  }
  const internal::ChunkPlan plan(offset, length, registered != nullptr ? max_message : options.max_read_bytes);
  // This read's own ReadOps: a pool of at most queue_depth (fewer for a short read).
  std::vector<ReadOp> ops(static_cast<size_t>(std::min<uint64_t>(options.queue_depth, plan.count())));
  std::vector<ReadOp*> free_ops;
  for (ReadOp& op : ops) free_ops.push_back(&op);
  ReadOp* const first = ops.data();
  ReadOp* const last = ops.data() + ops.size();
  auto mine = [first, last](ReadOp* p) { return !std::less<ReadOp*>()(p, first) && std::less<ReadOp*>()(p, last); };
  size_t spins = 0;
  auto post = [&](const internal::Chunk& chunk) -> absl::StatusOr<bool> {
    if (free_ops.empty() || free_slots.empty()) return false;  // a Post()ed read holds the slot: progress
    ReadOp* op = free_ops.back();
    *op = ReadOp();
    op->offset = chunk.offset;
    op->length = chunk.length;
    op->destination = destination + chunk.done;
    op->registered = registered;
    if (absl::Status s = PostRead(op, key, expiry, /*count_ready=*/false, kind); !s.ok()) return s;
    free_ops.pop_back();
    return true;
  };
  auto progress = [&]() {
    std::vector<absl::Status> finished;
    absl::StatusOr<int> n = DrainSendCq(expiry);
    const auto keep = std::stable_partition(ready.begin(), ready.end(), [&](ReadOp* op) { return !mine(op); });
    for (auto it = keep; it != ready.end(); ++it) {
      finished.push_back((*it)->status);
      free_ops.push_back(*it);
    }
    ready.erase(keep, ready.end());
    if (n.ok() && *n == 0 && finished.empty()) Idle(expiry, Clock::time_point::max(), spins);
    return finished;
  };
  return internal::RunChunks(plan, ops.size(), post, progress);
}

absl::Status RemoteRegion::Post(ReadOp* op) {
  if (op == nullptr) return absl::InvalidArgumentError(absl::StrCat(impl_->label, ": null ReadOp"));
  return impl_->PostRead(op, key_, expiry_, /*count_ready=*/true);
}

absl::StatusOr<std::vector<RemoteRegion::ReadOp*>> RemoteRegion::Poll(size_t min, absl::Duration timeout) {
  Impl& impl = *impl_;
  const Clock::time_point deadline = DeadlineAfter(timeout);
  // Without a deadline, never wait for more reads than there are.
  if (deadline == Clock::time_point::max()) min = std::min(min, impl.InFlight() + impl.ready.size());
  size_t spins = 0;
  while (true) {
    absl::StatusOr<int> n = impl.DrainSendCq(expiry_);
    if (!n.ok() && impl.ready.empty()) return n.status();
    if (impl.ready.size() >= min) break;
    if (impl.InFlight() == 0 && impl.sticky.broken()) {  // nothing more can come
      if (impl.ready.empty()) return impl.sticky.first();
      break;
    }
    if (deadline != Clock::time_point::max() && Clock::now() >= deadline) break;
    if (n.ok() && *n == 0) impl.Idle(expiry_, deadline, spins);
  }
  // kEvents: leave with the CQs armed (the fd then wakes for the next completion), and take what came
  // before the arm.
  if (impl.Rearm()) (void)impl.DrainSendCq(expiry_);
  std::vector<ReadOp*> done;
  done.swap(impl.ready);
  return done;
}

absl::Status RemoteRegion::Write(uint64_t offset, uint64_t length, const void* source) {
  // The bytes are only read (copied into a slot), never written.
  return impl_->ReadWhole(offset, length, const_cast<char*>(static_cast<const char*>(source)), nullptr, key_,
                          expiry_, internal::OpKind::kWrite);
}

absl::Status RemoteRegion::Write(uint64_t offset, uint64_t length, const LocalBuffer& source, size_t source_offset) {
  Impl& impl = *impl_;
  if (absl::Status s = impl.CheckBuffer(source, source_offset, "source"); !s.ok()) return s;
  return impl.ReadWhole(offset, length, source.data() + source_offset, &source, key_, expiry_,
                        internal::OpKind::kWrite);
}

int RemoteRegion::completion_fd() const {
  return impl_->comp_channel != nullptr ? impl_->comp_channel->fd : -1;
}

absl::Status RemoteRegion::Read(uint64_t offset, uint64_t length, void* destination) {
  return impl_->ReadWhole(offset, length, static_cast<char*>(destination), nullptr, key_, expiry_);
}

absl::Status RemoteRegion::Read(uint64_t offset, uint64_t length, const LocalBuffer& destination,
                                size_t destination_offset) {
  Impl& impl = *impl_;
  if (absl::Status s = impl.CheckBuffer(destination, destination_offset, "destination"); !s.ok()) return s;
  return impl.ReadWhole(offset, length, destination.data() + destination_offset, &destination, key_, expiry_);
}

absl::StatusOr<LocalBuffer> RemoteRegion::RegisterDestination(void* addr, size_t length) {
  Impl& impl = *impl_;
  if (addr == nullptr) return absl::InvalidArgumentError(absl::StrCat(impl.label, ": addr: null"));
  if (length == 0) return absl::InvalidArgumentError(absl::StrCat(impl.label, ": length: must be at least 1"));
  ibv_mr* mr = ibv_reg_mr(impl.pd, addr, length, IBV_ACCESS_LOCAL_WRITE);
  if (mr == nullptr) {
    const int err = errno;
    const absl::StatusCode code =
        err == ENOMEM || err == EAGAIN ? absl::StatusCode::kResourceExhausted : absl::ErrnoToStatusCode(err);
    return impl.Errno(code, absl::StrCat("ibv_reg_mr (destination, ", length, " bytes)"), err);
  }
  LocalBuffer buffer;
  buffer.mr_ = mr;
  buffer.pd_ = impl.pd_shared;
  buffer.data_ = static_cast<char*>(addr);
  buffer.size_ = length;
  buffer.connection_ = impl.connection;
  return buffer;
}

uint64_t RemoteRegion::max_message_bytes() const { return impl_->max_message; }

RemoteRegion::Counters RemoteRegion::counters() const { return impl_->counters; }

LocalBuffer::~LocalBuffer() { Release(); }

LocalBuffer::LocalBuffer(LocalBuffer&& other) noexcept { *this = std::move(other); }

LocalBuffer& LocalBuffer::operator=(LocalBuffer&& other) noexcept {
  if (this == &other) return *this;
  Release();
  mr_ = std::exchange(other.mr_, nullptr);
  pd_ = std::move(other.pd_);
  data_ = std::exchange(other.data_, nullptr);
  size_ = std::exchange(other.size_, 0);
  connection_ = std::exchange(other.connection_, 0);
  return *this;
}

void LocalBuffer::Release() {
  if (mr_ != nullptr) (void)ibv_dereg_mr(mr_);  // before pd_ lets the PD go
  mr_ = nullptr;
  pd_.reset();
  data_ = nullptr;
  size_ = 0;
  connection_ = 0;
}

bool LocalBuffer::Contains(const void* p, uint64_t n) const {
  if (mr_ == nullptr || p == nullptr) return false;
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  const uintptr_t base = reinterpret_cast<uintptr_t>(data_);
  return at >= base && at - base <= size_ && n <= size_ - (at - base);
}

absl::Status RemoteRegion::ReadBatch(absl::Span<ReadOp> ops) {
  Impl& impl = *impl_;
  ReadOp* const first = ops.data();
  ReadOp* const last = ops.data() + ops.size();
  auto mine = [first, last](ReadOp* p) { return !std::less<ReadOp*>()(p, first) && std::less<ReadOp*>()(p, last); };
  size_t pending = 0;
  size_t spins = 0;
  // Polls once and takes this batch's completions; now and then looks for ENDED / DISCONNECTED.
  auto progress = [&]() {
    absl::StatusOr<int> n = impl.DrainSendCq(expiry_);
    const size_t taken = impl.TakeReady(mine);
    pending -= taken;
    if (n.ok() && *n == 0 && taken == 0) impl.Idle(expiry_, Clock::time_point::max(), spins);
  };
  for (ReadOp& op : ops) {
    while (impl.free_slots.empty() && !impl.sticky.broken()) progress();
    if (impl.PostRead(&op, key_, expiry_, /*count_ready=*/false).ok()) ++pending;  // else op.status says why
  }
  while (pending > 0) progress();
  for (const ReadOp& op : ops) {
    if (!op.status.ok()) return op.status;
  }
  return absl::OkStatus();
}

}  // namespace rdmad::client
