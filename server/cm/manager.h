// CmManager: rdma_cm as managed resources. Event channels (each a dispatcher thread), communication ids
// (RDMA_PS_TCP, RC), migration between channels, the event stream, and rdmad's token-checked data-plane
// listener.
//
// Threads and ownership (docs/architecture.md#rdma_cm):
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
// Life cycle: Start() creates the default channel (channels/1), the worker channels and the data-plane
// listeners. Quiesce() ends every watch stream and fails connects still waiting (so the gRPC server can
// stop); the destructor stops the loops, then destroys ids (their QPs first) and channels.
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
#include "server/audit/sink.h"
#include "server/cm/events.h"
#include "server/cm/token.h"
#include "server/dispatch/event_loop.h"
#include "server/fabric/cm.h"
#include "server/registry/registry.h"
#include "server/state/names.h"

namespace rdmad::cm {

// What the grant layer (server/grants/) hears from the data-plane listener about connections whose token
// named a grant. Called on the connection's dispatcher: must not block.
class GrantConnections {
 public:
  virtual ~GrantConnections() = default;
  // ESTABLISHED: `qp` is the connection's QueuePair in the registry, in RTS.
  virtual void OnConnected(const std::string& grant, const std::string& cm_id, const std::string& qp) = 0;
  // The connection is gone or failed (DISCONNECTED, a connect error, or rdmad could not accept it). The
  // id and its QP are destroyed once `release` was called (from any thread, exactly once): the grant
  // layer first takes back whatever it bound on the QP.
  virtual void OnGone(const std::string& grant, const std::string& cm_id, absl::AnyInvocable<void() &&> release) = 0;
};

// What the metrics (server/metrics/) hear from the data-plane listener: each connect request it accepted
// (rdma_accept done) or rejected, with the reason sent. Called on the listener's or the worker's
// dispatcher with no lock of the CmManager held: must not block.
class DataPlaneObserver {
 public:
  virtual ~DataPlaneObserver() = default;
  virtual void OnDataPlaneAccepted() = 0;
  virtual void OnDataPlaneRejected(RejectReason reason) = 0;
};

class CmManager {
 public:
  struct Options {
    int workers = 2;                       // worker channels for accepted data-plane connections
    std::vector<fabric::SockAddr> listen;  // the data-plane listener's addresses ("rdma_listen")
    int backlog = 128;
    absl::Duration default_token_ttl = absl::Seconds(30);
    EventHub::Options events;
    // The crash-safe state store (not owned; may be null): CM id and user channel names are never reused
    // across restarts. rdmad's own channels keep their names (channels/1, then the workers').
    state::Store* state = nullptr;
    // rdmad-wide limits (config "limits"; 0: none), for every caller, admins included. Past one, the call
    // is RESOURCE_EXHAUSTED naming it ("limit channels of rdmad: limit 128, in use 128; this call needs 1")
    // and a data-plane connect request is rejected with reason QUOTA.
    uint64_t max_channels = 128;      // user event channels (CreateChannel)
    uint64_t max_cm_ids = 16384;      // CM ids made by CreateCmId
    uint64_t max_connections = 16384;  // ids connected, connecting or waiting for Accept, data-plane included
  };

  // `cm` may be null (no rdma_cm on this host): every call then answers UNAVAILABLE.
  CmManager(fabric::CmFabric* cm, Registry* registry, TokenStore* tokens, Options options);
  ~CmManager();
  CmManager(const CmManager&) = delete;
  CmManager& operator=(const CmManager&) = delete;

  absl::Status Start();
  void Quiesce();
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
  // retry), so none can appear between this check and the PD's removal. Pair every OK with EndPdRemoval.
  absl::Status BeginPdRemoval(const std::string& pd);
  void EndPdRemoval(const std::string& pd);
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

  absl::StatusOr<v1::ConnectToken> IssueConnectToken(const v1::IssueConnectTokenRequest& request);
  // After DeletePd: the outstanding tokens on that PD can never connect; revoke them, so that a client
  // presenting one is told TOKEN_REVOKED instead of INTERNAL. Returns how many.
  size_t RevokeTokensOn(const std::string& pd);

  // The grant layer; set before Start, not owned.
  void set_grant_connections(GrantConnections* grants) { grants_ = grants; }
  // The audit trail: one record per data-plane accept and reject, made on the listener's (or the worker's)
  // dispatcher with no lock of the CmManager held. Set before Start; not owned.
  void set_audit(audit::AuditSink* sink) { audit_ = sink; }
  // The metrics' counts of accepts and rejects. Set before Start; not owned.
  void set_data_plane_observer(DataPlaneObserver* observer) { observer_ = observer; }
  // Asked, on the listener's dispatcher with no lock of the CmManager held, before a good token is redeemed:
  // a refusal (the tenant's connections quota) rejects the request with OVER_QUOTA and leaves the token
  // unused. Set before any token is issued (before the gRPC server starts); it may call this manager's const
  // methods (ListCmIds).
  void set_admit_connection(std::function<absl::Status(const Claims&)> admit) { admit_ = std::move(admit); }
  // Called with an id's name once it is destroyed, after its last event was published (on the id's
  // dispatcher, with mu_ held: it may take only a leaf lock and must not call this manager). Any thread;
  // null clears it.
  void set_cm_id_gone(std::function<void(const std::string& cm_id)> gone) {
    MutexLock lock(&mu_);
    cm_id_gone_ = std::move(gone);
  }
  // The data-plane listener's addresses; FAILED_PRECONDITION if there is none (no "rdma_listen").
  absl::StatusOr<std::vector<v1::SocketAddress>> DataPlaneEndpoints() const;
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
      std::string grant;  // a data-plane connection whose token named this grant
      uint64_t events = 0, migrations = 0;
    };
    LockedBy<Book> book;
    bool gone_told = false;  // GrantConnections::OnGone was called (owning loop only)
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
  // A data-plane connection ended (or never got going): destroyed now, or, for a grant's, once the grant
  // layer released it.
  void EndDataPlane(Id* id, const char* why);
  absl::Status CreateIdQp(Id* id);
  void FinishConnect(Id* id, absl::Status status);
  // Removes the id from the registry and the index and destroys it (QP first). The id must not be used after.
  absl::StatusOr<v1::CmId> Destroy(Id* id, bool force);
  Channel* LeastLoadedWorker() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `data_plane_request`: a CONNECT_REQUEST on rdmad's data-plane listener, whose private data (a token)
  // is published with its secret zeroed, or not at all if it is no token.
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
  GrantConnections* grants_ = nullptr;
  audit::AuditSink* audit_ = nullptr;
  DataPlaneObserver* observer_ = nullptr;
  std::function<absl::Status(const Claims&)> admit_;
  Registry* const registry_;
  TokenStore* const tokens_;
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
  std::function<void(const std::string&)> cm_id_gone_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> listeners_ ABSL_GUARDED_BY(mu_);  // the data-plane listener ids
  bool quiescing_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace rdmad::cm

#endif  // RDMAD_SERVER_CM_MANAGER_H_
