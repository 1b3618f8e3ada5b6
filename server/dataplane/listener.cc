// dataplane::Listener: opening the listeners, each connect request's token check, and the tokens of
// IssueConnectToken. Threads: see listener.h.
#include "server/dataplane/listener.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/wire/grant_message.h"
#include "proto/wire/handshake.h"
#include "server/dataplane/interfaces.h"
#include "server/common/log.h"
#include "server/common/status.h"

namespace rdmad::dataplane {
namespace {

// "10.0.2.2:40000", "[fe80::1]:40000": the client, for the audit trail.
std::string PeerOf(const fabric::SockAddr& a) {
  if (a.host.find(':') != std::string::npos) return absl::StrCat("[", a.host, "]:", a.port);
  return absl::StrCat(a.host, ":", a.port);
}

// The request is refused with `reason` (OVER_QUOTA, SESSION_MISMATCH), its token (if it was one) left unused.
cm::Redemption Refused(const cm::Redemption& r, cm::RejectReason reason, absl::string_view why) {
  cm::Redemption out;
  out.reason = reason;
  out.token_id = r.token_id;
  out.detail = std::string(why);
  return out;
}
cm::Redemption OverQuota(const cm::Redemption& r, const absl::Status& why) {
  return Refused(r, cm::RejectReason::kOverQuota, why.message());
}

using Options = Listener::Options;

Options WithDefaults(Options options) {
  if (!options.wildcard_addresses) {
    options.wildcard_addresses = [](const std::string& wildcard) { return RdmaInterfaceAddresses(wildcard); };
  }
  return options;
}

}  // namespace

Listener::Listener(cm::CmManager* cm, const Registry* registry, cm::TokenStore* tokens, Options options)
    : cm_(cm), registry_(registry), tokens_(tokens), options_(WithDefaults(std::move(options))) {}

absl::Status Listener::Start() {
  if (!cm_->available()) return absl::OkStatus();
  for (const fabric::SockAddr& addr : options_.listen) {
    RDMAD_RETURN_IF_ERROR(cm_->ListenDataPlane(addr, options_.backlog, this).status());
    if (!IsWildcard(addr.host)) continue;
    const std::vector<std::string> told = Expand(addr.host);
    if (told.empty()) {
      RDMAD_LOG_WARN("data-plane listener on %s:%u: no RDMA interface has an address; clients are told %s itself",
                     addr.host.c_str(), addr.port, addr.host.c_str());
    } else {
      RDMAD_LOG_INFO("data-plane listener on %s:%u: clients are told %s (the RDMA interfaces' addresses)",
                     addr.host.c_str(), addr.port, absl::StrJoin(told, ", ").c_str());
    }
  }
  listening_ = !options_.listen.empty();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::SocketAddress>> Listener::Endpoints() const {
  if (!cm_->available()) return absl::UnavailableError("rdma_cm is unavailable on this host");
  if (!listening_) {
    return absl::FailedPreconditionError("rdmad has no data-plane listener (set \"rdma_listen\" in its config)");
  }
  std::vector<v1::SocketAddress> out;
  for (const fabric::SockAddr& a : options_.listen) {
    std::vector<std::string> hosts = {a.host};
    if (IsWildcard(a.host)) {
      std::vector<std::string> expanded = Expand(a.host);
      if (!expanded.empty()) hosts = std::move(expanded);
    }
    for (std::string& host : hosts) {
      v1::SocketAddress e;
      e.set_address(std::move(host));
      e.set_port(a.port);
      out.push_back(std::move(e));
    }
  }
  return out;
}

std::vector<std::string> Listener::Expand(const std::string& wildcard) const {
  const absl::Time now = absl::Now();
  {
    MutexLock lock(&expanded_mu_);
    auto it = expanded_.find(wildcard);
    if (it != expanded_.end() && now - it->second.at < options_.wildcard_refresh) return it->second.addresses;
  }
  // Read without the lock (sysfs and getifaddrs): two callers at once may both ask; the later answer stays.
  std::vector<std::string> addresses = options_.wildcard_addresses(wildcard);
  MutexLock lock(&expanded_mu_);
  expanded_[wildcard] = Expanded{addresses, now};
  return addresses;
}

absl::StatusOr<v1::ConnectToken> Listener::IssueConnectToken(const v1::IssueConnectTokenRequest& request) {
  if (!cm_->available()) return absl::UnavailableError("rdma_cm is unavailable on this host");
  RDMAD_RETURN_IF_ERROR(registry_->CheckPd(request.pd(), "pd"));
  RDMAD_ASSIGN_OR_RETURN(std::vector<v1::SocketAddress> endpoints, Endpoints());
  cm::Claims claims;
  claims.pd = request.pd();
  const absl::Duration ttl = request.ttl_ms() ? absl::Milliseconds(request.ttl_ms()) : options_.default_token_ttl;
  absl::StatusOr<cm::Issued> issued = tokens_->Issue(claims, ttl);
  if (!issued.ok()) return WithField(issued.status(), FieldOf(issued.status()) == "ttl" ? "ttl_ms" : "");
  v1::ConnectToken out;
  out.set_name(issued->id);
  out.set_token(issued->bytes);
  out.set_expire_time_unix_nanos(absl::ToUnixNanos(issued->expiry));
  for (v1::SocketAddress& e : endpoints) *out.add_endpoints() = std::move(e);
  RDMAD_LOG_INFO("%s issued for %s", issued->id.c_str(), request.pd().c_str());
  return out;
}

size_t Listener::RevokeTokensOn(const std::string& pd) {
  return tokens_->RevokeWhere([&pd](const cm::Claims& c) { return c.pd == pd; });
}

std::string Listener::Shown(const std::string& private_data) const {
  // Watchers learn which token was presented, never its secret; private data that is no token, not at all.
  cm::DecodedToken t = cm::DecodeToken(wire::SplitConnectRequest(private_data).token);
  if (!t.ok()) return "";
  cm::Token shown = *t.token;
  shown.secret.fill(0);
  return cm::EncodeToken(shown);
}

cm::DataPlaneDecision Listener::OnRequest(const cm::DataPlaneRequest& request) {
  // Look before redeeming: a tenant at its connections quota, or rdmad at its limit, is refused with the
  // token left unused.
  // A version offer after the token is split off: the token is judged alone.
  const wire::ConnectRequest split = wire::SplitConnectRequest(request.private_data);
  cm::Redemption r = tokens_->Peek(split.token);
  if (r.accepted() && admit_) {
    if (absl::Status s = admit_(*r.claims); !s.ok()) r = OverQuota(r, s);
  }
  if (r.accepted()) {
    if (absl::Status s = cm_->CheckDataPlaneConnections(); !s.ok()) r = OverQuota(r, s);
  }
  if (r.accepted()) r = tokens_->Redeem(split.token);
  // The audit record: the id, the client's address, the token and what it named.
  audit::Event record;
  record.resource = request.cm_id;
  record.peer = PeerOf(request.remote);
  cm::DataPlaneDecision decision;
  if (!r.accepted()) {
    // Logged and audited by the sink (rdmad's RejectLimiter, server/audit/reject_summary.h): any peer can
    // send these at line rate, so they are counted per address and reason and summarized per interval.
    if (audit_ != nullptr) {
      record.method = "data-plane reject";
      record.reason = std::string(cm::RejectReasonName(r.reason));
      record.code = r.reason == cm::RejectReason::kOverQuota ? "RESOURCE_EXHAUSTED" : "PERMISSION_DENIED";
      record.detail = absl::StrCat(cm::RejectReasonName(r.reason), ": ", r.detail,
                                   r.token_id ? absl::StrCat(" (", cm::TokenName(r.token_id), ")") : std::string());
      audit_->Record(record);
    } else {
      RDMAD_LOG_INFO("%s: data-plane connect from %s rejected: %s (%s)", request.cm_id.c_str(), record.peer.c_str(),
                     std::string(cm::RejectReasonName(r.reason)).c_str(), r.detail.c_str());
    }
    if (observer_ != nullptr) observer_->OnDataPlaneRejected(r.reason);
    decision.reject_data = cm::EncodeReject(r.reject());
    decision.error = absl::StrCat("rejected: ", cm::RejectReasonName(r.reason));
    return decision;
  }
  decision.accept = true;
  decision.pd = r.claims->pd;
  decision.tag = r.claims->grant;
  if (!decision.tag.empty() && split.offered >= wire::kSessionMessageVersion) {
    // A session: the accept says so, and its QP receives the client's ACTIVATEs.
    const auto credits = static_cast<uint8_t>(std::min<uint32_t>(options_.session_credits, 255));
    decision.accept_data = wire::EncodeAcceptData({wire::kSessionMessageVersion, credits});
    decision.qp.send_depth = options_.session_send_depth;
    decision.qp.receive.slots = credits;
    MutexLock lock(&sessions_->mu);
    sessions_->by_cm_id[request.cm_id].peer = record.peer;
  }
  if (GrantConnections* grants = grants_.load(); grants != nullptr && !decision.tag.empty()) {
    grants->OnAccepting(decision.tag);
  }
  decision.reject_data = cm::EncodeReject(cm::Reject{cm::RejectReason::kInternal, 0});
  record.principal = r.claims->principal;
  record.detail = r.claims->grant.empty()
                      ? absl::StrCat(cm::TokenName(r.token_id), " for ", r.claims->pd)
                      : absl::StrCat(r.claims->grant, " (", cm::TokenName(r.token_id), ", ", r.claims->pd, ")");
  decision.accepted = [this, record = std::move(record)](absl::Status s) mutable {
    if (!s.ok()) {
      if (observer_ != nullptr) observer_->OnDataPlaneRejected(cm::RejectReason::kInternal);
      if (audit_ != nullptr) {
        record.method = "data-plane reject";
        record.code = absl::StatusCodeToString(s.code());
        record.errno_value = ErrnoOf(s);
        record.detail = absl::StrCat(cm::RejectReasonName(cm::RejectReason::kInternal), ": ", s.message(), " (",
                                     record.detail, ")");
        audit_->Record(record);
      }
      return;
    }
    if (observer_ != nullptr) observer_->OnDataPlaneAccepted();
    if (audit_ != nullptr) {
      record.method = "data-plane accept";
      audit_->Record(record);
    }
  };
  return decision;
}

void Listener::OnEstablished(const std::string& cm_id, const std::string& tag, const std::string& qp) {
  GrantConnections* grants = grants_.load();
  if (tag.empty() || grants == nullptr) return;
  uint8_t version = 1;
  {
    MutexLock lock(&sessions_->mu);
    if (sessions_->by_cm_id.count(cm_id) > 0) version = wire::kSessionMessageVersion;
  }
  grants->OnConnected(tag, cm_id, qp, version);
}

void Listener::OnMessage(const std::string& cm_id, const std::string& bytes) {
  absl::StatusOr<wire::GrantMessage> m = wire::DecodeGrantMessage(bytes);
  cm::Redemption r;
  r.reason = cm::RejectReason::kMalformed;
  if (!m.ok()) {
    r.detail = absl::StrCat("not an ACTIVATE: ", m.status().message());
    return Refuse(cm_id, 0, r);
  }
  GrantConnections* grants = grants_.load();
  if (m->version >= wire::kSessionMessageVersion && m->type == wire::GrantMessageType::kRelease) {
    absl::Status released = grants == nullptr ? absl::FailedPreconditionError("rdmad issues no grants")
                                              : grants->OnRelease(cm_id, m->grant_id);
    if (released.ok()) return;
    r.reason = cm::RejectReason::kSessionMismatch;
    r.detail = absl::StrCat("RELEASE: ", released.message());
    return Refuse(cm_id, m->tag, r);
  }
  if (m->version < wire::kSessionMessageVersion || m->type != wire::GrantMessageType::kActivate) {
    r.detail = absl::StrCat("not an ACTIVATE: a message of type ", wire::GrantMessageTypeName(m->type), ", version ",
                            m->version);
    return Refuse(cm_id, m->tag, r);
  }
  // As at a connect request: look first, so that a token that cannot join this connection stays unused.
  r = tokens_->Peek(m->token);
  if (r.accepted() && r.claims->grant.empty()) {
    r = Refused(r, cm::RejectReason::kSessionMismatch,
                "a connect token opens a connection of its own; only a grant's token joins a session");
  }
  if (r.accepted() && grants == nullptr) r = Refused(r, cm::RejectReason::kInternal, "rdmad issues no grants");
  if (r.accepted()) {
    if (absl::Status s = grants->CheckJoin(cm_id, r.claims->pd); !s.ok()) {
      r = Refused(r, cm::RejectReason::kSessionMismatch, s.message());
    }
  }
  if (r.accepted()) r = tokens_->Redeem(m->token);
  if (!r.accepted()) return Refuse(cm_id, m->tag, r);
  if (audit_ != nullptr) {
    audit::Event record;
    record.resource = cm_id;
    record.principal = r.claims->principal;
    record.method = "data-plane activate";
    record.detail = absl::StrCat(r.claims->grant, " (", cm::TokenName(r.token_id), ", ", r.claims->pd, ")");
    {
      MutexLock lock(&sessions_->mu);
      if (auto it = sessions_->by_cm_id.find(cm_id); it != sessions_->by_cm_id.end()) record.peer = it->second.peer;
    }
    audit_->Record(record);
  }
  grants->OnActivate(r.claims->grant, cm_id, m->tag);
}

void Listener::Refuse(const std::string& cm_id, uint64_t tag, const cm::Redemption& r) {
  if (observer_ != nullptr) observer_->OnDataPlaneRejected(r.reason);
  audit::Event record;
  record.resource = cm_id;
  record.method = "data-plane reject";
  record.reason = std::string(cm::RejectReasonName(r.reason));
  record.code = r.reason == cm::RejectReason::kOverQuota ? "RESOURCE_EXHAUSTED" : "PERMISSION_DENIED";
  record.detail = absl::StrCat("session message: ", cm::RejectReasonName(r.reason), ": ", r.detail,
                               r.token_id ? absl::StrCat(" (", cm::TokenName(r.token_id), ")") : std::string());
  bool cut = false;
  {
    MutexLock lock(&sessions_->mu);
    auto it = sessions_->by_cm_id.find(cm_id);
    if (it != sessions_->by_cm_id.end()) {
      record.peer = it->second.peer;
      if (it->second.cut) return;  // being disconnected: nothing more is answered
      if (++it->second.refusals > options_.session_max_refusals) cut = it->second.cut = true;
    }
  }
  if (audit_ != nullptr) {
    audit_->Record(record);
  } else {
    RDMAD_LOG_INFO("%s: %s", cm_id.c_str(), record.detail.c_str());
  }
  if (cut) {
    // The client sends refused requests faster than it takes their answers: it is cut off, which ends its
    // grants (DISCONNECTED), rather than let the answers pile up in rdmad.
    RDMAD_LOG_WARN("%s: %u refusals not yet delivered: disconnecting the client", cm_id.c_str(),
                   options_.session_max_refusals);
    return cm_->Disconnect(cm_id, [cm_id](absl::StatusOr<v1::CmId> r) {
      if (!r.ok()) RDMAD_LOG_DEBUG("%s: disconnect: %s", cm_id.c_str(), std::string(r.status().message()).c_str());
    });
  }
  wire::GrantMessage refused;
  refused.version = wire::kSessionMessageVersion;
  refused.type = wire::GrantMessageType::kRefused;
  refused.reason = static_cast<uint8_t>(r.reason);
  refused.tag = tag;
  refused.token_id = r.token_id;
  cm_->Send(cm_id, wire::EncodeGrantMessage(refused), [sessions = sessions_, cm_id](absl::Status s) {
    if (!s.ok()) RDMAD_LOG_DEBUG("%s: sending REFUSED: %s", cm_id.c_str(), std::string(s.message()).c_str());
    MutexLock lock(&sessions->mu);
    auto it = sessions->by_cm_id.find(cm_id);
    if (it != sessions->by_cm_id.end() && it->second.refusals > 0) --it->second.refusals;
  });
}

void Listener::OnGone(const std::string& cm_id, const std::string& tag, absl::AnyInvocable<void() &&> release) {
  {
    MutexLock lock(&sessions_->mu);
    sessions_->by_cm_id.erase(cm_id);
  }
  GrantConnections* grants = grants_.load();
  if (grants == nullptr) return std::move(release)();
  grants->OnGone(tag, cm_id, std::move(release));
}

}  // namespace rdmad::dataplane
