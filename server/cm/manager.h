// CmManager: rdma_cm as managed resources. Event channels (each a dispatcher thread), communication ids
// (RDMA_PS_TCP, RC), migration between channels, and the event stream. It also owns the ids of rdmad's own
// data-plane listeners and their connections, whose connect requests a DataPlaneHandler decides
// (server/dataplane/: tokens, admission, the audit trail and grants live there, not here).
//
// Threads and ownership (docs/dev/architecture.md#rdma_cm):
//   - Each channel is a dispatch::EventLoop ("cm-N") that owns its fabric::CmChannel and every fabric::CmId
//     on it. Every rdma_* call on an id runs on the loop of the channel the id is on *at that moment*: an
//     operation is posted there, and if the id migrated meanwhile it is re-posted to the new channel's
//     loop. Operations on one id are therefore serialized, with migration too (the man page forbids other
//     calls while an id migrates; rdmad makes them wait instead of failing them).
//   - The loop drains its channel (each event acknowledged as soon as it is copied out, so rdma_destroy_id
//     and rdma_migrate_id, which run on the same loop, never wait), updates the id, publishes the event
//     to the EventHub, and takes the next step of a connect in progress (route, QP, rdma_connect).
//   - mu_ guards the name index and the ids' bookkeeping (state, names, counters) and the rdmad-wide totals
//     its limits are checked against: short sections, never across an rdma_* or verbs call.
//   - A channel enters the index only once complete (its rdma_event_channel, its loop, the watch on its fd):
//     a lookup never sees a channel without a loop.
//   - The QP of an id is created on the id's PD through the Registry (AdoptCmQp): a QueuePair like any
//     other, removed from the Registry (ReleaseCmQp) before the id is destroyed.
// Life cycle: Start() creates the default channel (channels/1) and the worker channels; ListenDataPlane
// opens rdmad's own listeners after it. Quiesce() ends every watch stream and fails connects still waiting
// (so the gRPC server can stop); the destructor stops the loops, then destroys ids (their QPs first) and
// channels.
#ifndef RDMAD_SERVER_CM_MANAGER_H_
#define RDMAD_SERVER_CM_MANAGER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "server/common/sync.h"
#include "absl/time/time.h"
#include "rdmad/v1/rdmad.pb.h"
#include "server/cm/events.h"
#include "server/dispatch/event_loop.h"
#include "server/fabric/cm.h"
#include "server/registry/registry.h"
#include "server/state/names.h"

namespace rdmad::cm {

// A connect request on one of rdmad's own data-plane listeners.
struct DataPlaneRequest {
  std::string cm_id;         // the request's new id ("cmids/N")
  fabric::SockAddr remote;   // the client
  std::string private_data;  // what the client sent with its request
};

// What the handler decided about a DataPlaneRequest.
struct DataPlaneDecision {
  bool accept = false;
  // Accept: the PD the connection's QP is made on, the tag its later reports carry (a grant's name, or
  // empty), and `accepted`, called on the connection's dispatcher with the outcome of creating its QP and
  // rdma_accept (may be null).
  std::string pd, tag;
  absl::AnyInvocable<void(absl::Status) &&> accepted;
  // Accept: the accept's private data (empty: none), and the shape of the connection's QP (its receive
  // slots make the handler's OnMessage hear what the client sends; on_message is set by the CmManager).
  std::string accept_data;
  fabric::CmQpOptions qp;
  // The reject's private data: sent at once if the request is not accepted, or if its accept fails.
  std::string reject_data;
  // Not accepted: the error the id shows until it is destroyed.
  std::string error;
};

// The policy of rdmad's data-plane listeners (server/dataplane/). The CmManager owns their ids like any
// other and calls these on the dispatchers, with no lock of the CmManager held: they must not block, and
// may call this manager's public methods (not Start, Quiesce or its destruction).
class DataPlaneHandler {
 public:
  virtual ~DataPlaneHandler() = default;
  // What watchers are shown of a request's private data (a token with its secret zeroed, say).
  virtual std::string Shown(const std::string& private_data) const = 0;
  // On the listener's dispatcher. A rejected request's id is destroyed; an accepted one moves to the least
  // loaded worker channel, whose loop creates its QP on `pd` and accepts.
  virtual DataPlaneDecision OnRequest(const DataPlaneRequest& request) = 0;
  // ESTABLISHED, on the connection's dispatcher: `qp` is its QueuePair in the registry, in RTS.
  virtual void OnEstablished(const std::string& cm_id, const std::string& tag, const std::string& qp) = 0;
  // A message the client sent on a connection accepted with receive slots (DataPlaneDecision::qp), on the
  // thread that polled its receive (the device's dispatcher, or one polling for its own completion), not a
  // CM dispatcher: must not block. Only while the connection's QP exists.
  virtual void OnMessage(const std::string& cm_id, const std::string& bytes) = 0;
  // A tagged connection is gone or failed (DISCONNECTED, a connect error, or its accept failed), once. It
  // is destroyed (QP from the registry, then the id) when `release` is called, from any thread, exactly
  // once. A connection with no tag is destroyed at once and not reported.
  virtual void OnGone(const std::string& cm_id, const std::string& tag, absl::AnyInvocable<void() &&> release) = 0;
};

class CmManager {
 public:
  struct Options {
    int workers = 2;  // worker channels for accepted data-plane connections
    EventHub::Options events;
    // The crash-safe state store (not owned; may be null): CM id and user channel names are never reused
    // across restarts. rdmad's own channels keep their names (channels/1, then the workers').
    state::Store* state = nullptr;
    // rdmad-wide limits (config "limits"; 0: none), for every caller, admins included. Past one, the call
    // is RESOURCE_EXHAUSTED naming it ("limit channels of rdmad: limit 128, in use 128; this call needs 1")
    // and a data-plane connect request is refused (CheckDataPlaneConnections).
    uint64_t max_channels = 128;      // user event channels (CreateChannel)
    uint64_t max_cm_ids = 16384;      // CM ids made by CreateCmId
    uint64_t max_connections = 16384;  // ids connected, connecting or waiting for Accept, data-plane included
  };

  // `cm` may be null (no rdma_cm on this host): every call then answers UNAVAILABLE.
  CmManager(fabric::CmFabric* cm, Registry* registry, Options options);
  ~CmManager();
  CmManager(const CmManager&) = delete;
  CmManager& operator=(const CmManager&) = delete;

  absl::Status Start();
  void Quiesce();
  bool available() const { return cm_ != nullptr; }  // false: no rdma_cm on this host
  EventHub& events() { return events_; }

  absl::StatusOr<v1::EventChannel> CreateChannel(const v1::CreateChannelRequest& request);
  // Lookups name `field` in their errors. Without rdma_cm, UNAVAILABLE (not an empty answer).
  absl::StatusOr<v1::EventChannel> GetChannel(const std::string& name, const std::string& field = "name") const;
  absl::StatusOr<std::vector<v1::EventChannel>> ListChannels() const;
  absl::Status DeleteChannel(const std::string& name);

  // `pd` is required (INVALID_ARGUMENT otherwise): an id's PD holds its QP and decides its tenant.
  void CreateCmId(const v1::CreateCmIdRequest& request, Done<v1::CmId> done);
  absl::StatusOr<v1::CmId> GetCmId(const std::string& name, const std::string& field = "name") const;
  absl::StatusOr<std::vector<v1::CmId>> ListCmIds(const v1::ListCmIdsRequest& request) const;
  // What a tenant's quotas count in one PD, from running totals (O(log n), never a listing): its ids but
  // data-plane connections (cm_ids), and its ids connected, connecting or waiting for Accept, data-plane
  // ones included (connections).
  struct PdUsage {
    uint64_t ids = 0, connections = 0;
  };
  PdUsage UsageOfPd(const std::string& pd) const;
  // DeletePd's guard, before the registry removes the PD: FAILED_PRECONDITION on "name" naming the PD's CM
  // ids if it has any; otherwise no id is created on the PD until EndPdRemoval (CreateCmId is ABORTED:
  // retry; a data-plane connect request for it is rejected as an accept that failed), so none can appear
  // between this check and the PD's removal. Pair every OK with EndPdRemoval.
  absl::Status BeginPdRemoval(const std::string& pd);
  void EndPdRemoval(const std::string& pd);
  // DeletePd's step once the grants on the PD have ended, before the registry removes it: closes the PD's
  // data-plane connections, those of grants (all ended by then, some in their end grace) and, with
  // `untagged`, those of plain connect tokens. Each ends as if its client had left: the grant layer releases
  // it, its QP leaves the registry, the id is destroyed (which disconnects the client). `done` runs once
  // every one of them is destroyed (on the dispatcher that destroyed the last, or on this thread if there is
  // none), or at Quiesce, whichever is first.
  void ClosePdConnections(const std::string& pd, bool untagged, absl::AnyInvocable<void() &&> done);
  // DeletePd without cascade: FAILED_PRECONDITION on "name" naming up to 5 of the PD's data-plane
  // connections of plain connect tokens (no grant), which only a cascade closes; OK if it has none.
  absl::Status CheckNoTokenConnections(const std::string& pd) const;
  // The CM manager's side of the join with the kernel's resource tracking (kernel.cc;
  // server/fabric/restrack.h): the ids on `device` ("devices/rxe0" or "rxe0") with their addresses as last
  // seen, their QP's name (its qpn is the registry's) and PD; rdmad's data-plane ids marked internal.
  struct KernelCmId {
    fabric::restrack::OurCmId ours;  // qpn left unset
    std::string qp, pd;
  };
  std::vector<KernelCmId> KernelJoinInput(const std::string& device) const;
  // `may_use(device)` ("devices/rxe0", or "" for an address of no single device, a wildcard) decides whether
  // the caller may listen through that device; null: any. A device it may not use is answered as an
  // address with no RDMA device (NOT_FOUND on "address"), a wildcard with PERMISSION_DENIED.
  void Listen(const v1::ListenRequest& request, Done<v1::CmId> done,
              std::function<bool(const std::string& device)> may_use = nullptr);
  void Connect(const v1::ConnectRequest& request, Done<v1::CmId> done);
  void Accept(const v1::AcceptRequest& request, Done<v1::CmId> done);
  void Reject(const v1::RejectRequest& request, Done<v1::CmId> done);
  void Disconnect(const std::string& name, Done<v1::CmId> done);
  void DeleteCmId(const std::string& name, Done<v1::CmId> done);
  // `deadline`: if the migration has not started by then, it is not done (DEADLINE_EXCEEDED).
  void Migrate(const v1::MigrateCmIdRequest& request, absl::Time deadline, Done<v1::CmId> done);

  // Opens one of rdmad's own listeners on `addr` (an id on channels/1 with no PD; each connection gets the
  // PD its handler names), after Start and from Start's thread. `handler` is not owned and outlives every
  // dispatcher of this manager; every data-plane listener has the same one. The listener's name, or why not.
  absl::StatusOr<std::string> ListenDataPlane(const fabric::SockAddr& addr, int backlog, DataPlaneHandler* handler);
  // For a data-plane request (its own id counted already): OK, or RESOURCE_EXHAUSTED naming the rdmad-wide
  // connections limit.
  absl::Status CheckDataPlaneConnections() const;
  // Called with an id's name once it is destroyed, after its last event was published (on the id's
  // dispatcher, with mu_ held: it may take only a leaf lock and must not call this manager). Any thread;
  // null clears it.
  void set_cm_id_gone(std::function<void(const std::string& cm_id)> gone) {
    MutexLock lock(&mu_);
    cm_id_gone_ = std::move(gone);
  }
  // A signaled inline SEND of `bytes` on the id's QP, posted on the id's dispatcher; `done` gets the
  // completion's status (on the device's dispatcher) or why it was not posted.
  void Send(const std::string& cm_id, std::string bytes, absl::AnyInvocable<void(absl::Status) &&> done);

 private:
  struct Channel {
    uint64_t id = 0;
    std::string label;
    v1::ChannelRole role = v1::CHANNEL_USER;
    std::unique_ptr<fabric::CmChannel> cm;
    std::unique_ptr<dispatch::EventLoop> loop;  // declared after cm: stopped and destroyed first
    LockedBy<std::set<uint64_t>> ids;           // mu_
    std::atomic<uint64_t> dispatched{0}, pending{0};
  };
  struct Id {
    uint64_t id = 0;
    // Changed with mu_ held, and only on the old channel's loop (at migration): read with mu_ held, or on the
    // loop that owns the id.
    Channel* channel = nullptr;
    std::string pd;
    std::unique_ptr<fabric::CmId> cm;  // only on the owning channel's loop
    // Bookkeeping: read and written with mu_ held (book.Get(mu_), checked by clang's analysis).
    struct Book {
      v1::CmIdState state = v1::CM_IDLE;
      bool connecting = false;  // a Connect resolving its address or route: counted as a connection
      fabric::SockAddr local, remote;
      std::string qp, listener, last_event, error, device;
      bool data_plane = false;
      std::string tag;  // a data-plane connection's, from its handler's decision
      uint64_t events = 0, migrations = 0;
    };
    LockedBy<Book> book;
    bool gone_told = false;  // DataPlaneHandler::OnGone was called (owning loop only)
    // A data-plane connection's thread hand-offs since its CONNECT_REQUEST (dispatch/handoffs.h), as its
    // accept found them (owning loop only): its ESTABLISHED continues that path for the handler.
    int path_handoffs = -1;
    // A Connect in progress (owning loop only): finished by ESTABLISHED or by a failure.
    Done<v1::CmId> connect_done;
    std::string connect_data;
    int timeout_ms = 2000;
  };
  using IdTask = absl::AnyInvocable<void(absl::StatusOr<Id*>) &&>;

  absl::StatusOr<Channel*> FindChannel(const std::string& name, const std::string& field) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Id*> FindId(const std::string& name, const std::string& field) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Channel*> NewChannel(const std::string& label, v1::ChannelRole role);
  // CreateCmId without its checks of the request: `pd` may be empty (rdmad's own data-plane listener).
  void NewId(const std::string& channel, const std::string& pd, Done<v1::CmId> done);
  // Runs `task` on the loop that owns the id now (following migrations), with the id, or with why not.
  void RunOnId(const std::string& name, IdTask task);
  void RunOnIdLoop(uint64_t id, Channel* expected, IdTask task);

  // Owning loop only. The three that take the channel assert it (EventLoop::AssertInLoop); the ones that take
  // an id run there too, except Destroy at shutdown, when every loop has already stopped.
  void OnChannelReadable(Channel* ch);
  void Dispatch(Channel* ch, fabric::CmEvent event);
  void OnConnectRequest(Channel* ch, fabric::CmEvent event);
  void OnDataPlaneRequest(Id* id, const std::string& private_data);
  // A data-plane connection ended (or never got going): destroyed now, or, for a tagged one, once its
  // handler released it.
  void EndDataPlane(Id* id, const char* why);
  absl::Status CreateIdQp(Id* id, const fabric::CmQpOptions& options = {});
  void FinishConnect(Id* id, absl::Status status);
  // Removes the id from the registry and the index and destroys it (QP first). The id must not be used after.
  absl::StatusOr<v1::CmId> Destroy(Id* id, bool force);
  Channel* LeastLoadedWorker() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `data_plane_request`: a CONNECT_REQUEST on rdmad's data-plane listener, whose private data is published
  // as its handler shows it.
  void Publish(Channel* ch, const Id* id, const fabric::CmEvent& event, const std::string& listener,
               bool data_plane_request = false);

  // Every change of an id's pd, state or data_plane, and its arrival and departure, goes through these so
  // that usage_ stays the sum over ids_.
  void AccountLocked(const Id& id, int sign) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetStateLocked(Id* id, v1::CmIdState state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::CmId ToProto(const Id& id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::EventChannel ToProto(const Channel& ch) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::CmId Snapshot(const Id* id) const;
  v1::CmIdState StateOf(const Id* id) const;
  bool Quiescing() const;

  fabric::CmFabric* const cm_;
  Registry* const registry_;
  const Options options_;
  EventHub events_;

  mutable Mutex mu_;
  uint64_t next_own_channel_ ABSL_GUARDED_BY(mu_) = 1;  // rdmad's own: channels/1 .. channels/(workers + 1)
  state::NameCounter next_channel_ ABSL_GUARDED_BY(mu_){options_.state, "channels",
                                                        static_cast<uint64_t>(options_.workers) + 2};
  state::NameCounter next_id_ ABSL_GUARDED_BY(mu_){options_.state, "cmids"};
  std::map<uint64_t, std::unique_ptr<Channel>> channels_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, std::unique_ptr<Id>> ids_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, PdUsage> usage_ ABSL_GUARDED_BY(mu_);  // by PD; PDs with nothing counted are absent
  // rdmad-wide totals for the limits, kept by AccountLocked (ids, connections) and NewChannel/DeleteChannel.
  uint64_t total_ids_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t total_connections_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t user_channels_ ABSL_GUARDED_BY(mu_) = 0;  // made or being made
  std::map<std::string, int> removing_pds_ ABSL_GUARDED_BY(mu_);  // BeginPdRemoval counts, by PD
  // ClosePdConnections waiting: the ids not yet destroyed, and what runs once none is left (Destroy).
  struct Closing {
    std::set<uint64_t> ids;
    absl::AnyInvocable<void() &&> done;
  };
  std::vector<std::unique_ptr<Closing>> closings_ ABSL_GUARDED_BY(mu_);
  std::function<void(const std::string&)> cm_id_gone_ ABSL_GUARDED_BY(mu_);
  // Set by the first ListenDataPlane, on Start's thread before any request can arrive; read on dispatchers.
  std::atomic<DataPlaneHandler*> data_plane_{nullptr};
  std::vector<std::string> listeners_ ABSL_GUARDED_BY(mu_);  // the data-plane listener ids (never deleted)
  bool quiescing_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace rdmad::cm

#endif  // RDMAD_SERVER_CM_MANAGER_H_
