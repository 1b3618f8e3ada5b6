// dataplane::Listener: rdmad's data-plane listener, the one door through which clients reach registered
// memory. It opens a listening CM id per "rdma_listen" address and decides each connect request by the token
// in its private data: a bad, spent, expired or revoked token is rejected with its reason; a tenant past its
// connections quota, or rdmad past its connections limit, is refused with the token left unused; a good
// token is redeemed and the connection accepted on the token's PD. A token that names a grant makes the
// connection that grant's: the grant layer hears when it is established and when it goes. A grant's client
// that offers data-plane protocol version 2 (proto/wire/handshake.h) gets a session: its connection's QP
// receives ACTIVATE messages, each with a further grant's token, checked here as a connect request's is and
// handed to the grant layer, which binds that grant's key on the same QP; a refused one is answered REFUSED.
// It also issues the plain connect tokens of IssueConnectToken and revokes those of a deleted PD.
//
// Layers: the CmManager (server/cm/) owns the listener ids and every connection, as rdma_cm ids like any
// other; this unit holds the policy, through cm::DataPlaneHandler. The grant layer (server/grants/) sits
// above and is called back through GrantConnections.
//
// Threads: Start on the daemon's start-up thread, after CmManager::Start and before the gRPC server
// serves. The DataPlaneHandler methods run on the CM dispatchers (the listener's channels/1 for requests,
// the connection's worker channel after), with no lock of the CmManager held, but OnMessage, which runs on
// the thread that polled the receive (the device's dispatcher, or a thread polling for its own
// completion); they take no lock of their own beyond sessions_mu_ (a leaf), the token store's and the
// audit sink's. Endpoints, IssueConnectToken and RevokeTokensOn run on
// gRPC threads. The setters are called before Start (set_grant_connections also with nullptr, at any time,
// by tests).
#ifndef RDMAD_SERVER_DATAPLANE_LISTENER_H_
#define RDMAD_SERVER_DATAPLANE_LISTENER_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rdmad/v1/rdmad.pb.h"
#include "server/audit/sink.h"
#include "server/cm/manager.h"
#include "server/cm/token.h"
#include "server/common/sync.h"
#include "server/fabric/cm.h"
#include "server/registry/registry.h"

namespace rdmad::dataplane {

// What the grant layer (server/grants/) hears about connections whose token named a grant. Called on the
// connection's dispatcher: must not block.
class GrantConnections {
 public:
  virtual ~GrantConnections() = default;
  // The connect request is being accepted (on the listener's dispatcher, before rdma_accept): what the
  // grant's activation will need may be prepared meanwhile, off this thread.
  virtual void OnAccepting(const std::string& grant) = 0;
  // ESTABLISHED: `qp` is the connection's QueuePair in the registry, in RTS. `version`: the data-plane
  // protocol version agreed with the client (2: a session, on which more grants may be activated).
  virtual void OnConnected(const std::string& grant, const std::string& cm_id, const std::string& qp,
                           uint8_t version) = 0;
  // A session's ACTIVATE (version 2), before its token is redeemed: may a grant on `pd` join the connection?
  // FAILED_PRECONDITION saying why not (the connection is no session, or is ending; the grant is on another
  // PD than the connection's QP, where its window could not be bound).
  virtual absl::Status CheckJoin(const std::string& cm_id, const std::string& pd) = 0;
  // The ACTIVATE's token was redeemed for `grant`: bind its key on the session's QP and answer the client,
  // echoing `tag`. On the thread that received the message (a device dispatcher): must not block.
  virtual void OnActivate(const std::string& grant, const std::string& cm_id, uint64_t tag) = 0;
  // A session's RELEASE: its client is done with grant `grant_id` (grants/N) on the connection `cm_id`, which
  // ends it (END_RELEASED). FAILED_PRECONDITION if no such grant is live on that connection.
  virtual absl::Status OnRelease(const std::string& cm_id, uint64_t grant_id) = 0;
  // The connection is gone or failed (DISCONNECTED, a connect error, or rdmad could not accept it). The
  // id and its QP are destroyed once `release` was called (from any thread, exactly once): the grant
  // layer first takes back whatever it bound on the QP.
  virtual void OnGone(const std::string& grant, const std::string& cm_id, absl::AnyInvocable<void() &&> release) = 0;
};

// What the metrics (server/metrics/) hear: each connect request accepted (rdma_accept done) or rejected, with
// the reason sent. Called on the listener's or the worker's dispatcher: must not block.
class Observer {
 public:
  virtual ~Observer() = default;
  virtual void OnDataPlaneAccepted() = 0;
  virtual void OnDataPlaneRejected(cm::RejectReason reason) = 0;
};

class Listener final : public cm::DataPlaneHandler {
 public:
  struct Options {
    std::vector<fabric::SockAddr> listen;  // "rdma_listen"; none: no listener, grants and tokens refused
    int backlog = 128;
    absl::Duration default_token_ttl = absl::Seconds(30);  // IssueConnectToken's, for ttl_ms 0
    // For a listener on "0.0.0.0" or "::": the addresses clients are told instead (interfaces.h's
    // RdmaInterfaceAddresses when unset; tests set their own). Asked again after wildcard_refresh.
    std::function<std::vector<std::string>(const std::string& wildcard)> wildcard_addresses;
    absl::Duration wildcard_refresh = absl::Seconds(10);
    // A session's (protocol version 2): the ACTIVATE requests its client may have outstanding (rdmad's
    // receive buffers on its QP, told in the accept), and the work requests its QP keeps in flight (more
    // wait in the QP, in order).
    uint32_t session_credits = 16;
    uint32_t session_send_depth = 32;
    // REFUSED answers a session may have unsent (its client takes no messages, and sends on): past it the
    // client is disconnected, so that a flood of bad requests cannot pile answers up in rdmad.
    uint32_t session_max_refusals = 64;
  };

  // None is owned; all outlive the Listener. The registry checks the PD a connect token names.
  Listener(cm::CmManager* cm, const Registry* registry, cm::TokenStore* tokens, Options options);
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // Opens a listener per address (after CmManager::Start). Without rdma_cm there is nothing to open: OK.
  absl::Status Start();

  // The addresses clients connect to: UNAVAILABLE without rdma_cm, FAILED_PRECONDITION without a listener
  // (no "rdma_listen"). A wildcard listener's are its RDMA interfaces' addresses (Options::wildcard_addresses),
  // at most wildcard_refresh old; the wildcard itself if there is none.
  absl::StatusOr<std::vector<v1::SocketAddress>> Endpoints() const;
  // A plain connect token for the request's PD (no grant): connections it admits get a QP on that PD.
  absl::StatusOr<v1::ConnectToken> IssueConnectToken(const v1::IssueConnectTokenRequest& request);
  // After DeletePd: the outstanding tokens on that PD can never connect; revoke them, so that a client
  // presenting one is told TOKEN_REVOKED instead of INTERNAL. Returns how many.
  size_t RevokeTokensOn(const std::string& pd);

  // The grant layer (not owned; null: connections for a grant are released at once).
  void set_grant_connections(GrantConnections* grants) { grants_.store(grants); }
  // The audit trail: one record per accept and reject (not owned).
  void set_audit(audit::AuditSink* sink) { audit_ = sink; }
  // The metrics' counts of accepts and rejects (not owned).
  void set_observer(Observer* observer) { observer_ = observer; }
  // Asked before a good token is redeemed: a refusal (the tenant's connections quota) rejects the request
  // with OVER_QUOTA and leaves the token unused. It may call the CmManager's const methods.
  void set_admit_connection(std::function<absl::Status(const cm::Claims&)> admit) { admit_ = std::move(admit); }

  // cm::DataPlaneHandler.
  std::string Shown(const std::string& private_data) const override;
  cm::DataPlaneDecision OnRequest(const cm::DataPlaneRequest& request) override;
  void OnEstablished(const std::string& cm_id, const std::string& tag, const std::string& qp) override;
  void OnMessage(const std::string& cm_id, const std::string& bytes) override;
  void OnGone(const std::string& cm_id, const std::string& tag, absl::AnyInvocable<void() &&> release) override;

 private:
  // The addresses clients are told for a wildcard listener (cached wildcard_refresh).
  std::vector<std::string> Expand(const std::string& wildcard) const;
  // An ACTIVATE refused: the audit trail and the metrics as for a connect request's reject, and REFUSED.
  void Refuse(const std::string& cm_id, uint64_t tag, const cm::Redemption& r);

  cm::CmManager* const cm_;
  const Registry* const registry_;
  cm::TokenStore* const tokens_;
  const Options options_;
  std::atomic<GrantConnections*> grants_{nullptr};
  audit::AuditSink* audit_ = nullptr;
  Observer* observer_ = nullptr;
  std::function<absl::Status(const cm::Claims&)> admit_;
  std::atomic<bool> listening_{false};  // Start opened every listener
  // The last answer of wildcard_addresses per wildcard, for Endpoints (gRPC threads).
  struct Expanded {
    std::vector<std::string> addresses;
    absl::Time at;
  };
  // The sessions (connections that agreed on version 2), from their accept until OnGone: the client's address,
  // for the audit trail of their messages, and the REFUSED answers not yet sent (Options::session_max_refusals).
  struct Session {
    std::string peer;
    uint32_t refusals = 0;
    bool cut = false;  // disconnected for too many
  };
  // Shared with the REFUSED sends' callbacks, which may run after the Listener is gone (on a dispatcher).
  struct Sessions {
    Mutex mu;
    std::map<std::string, Session> by_cm_id ABSL_GUARDED_BY(mu);
  };
  const std::shared_ptr<Sessions> sessions_ = std::make_shared<Sessions>();
  mutable Mutex expanded_mu_;
  mutable std::map<std::string, Expanded> expanded_ ABSL_GUARDED_BY(expanded_mu_);
};

}  // namespace rdmad::dataplane

#endif  // RDMAD_SERVER_DATAPLANE_LISTENER_H_
