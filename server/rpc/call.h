// One RPC as the tenancy rules see it (private to server/rpc/): who calls (admitted once, at the start),
// the resources it names (each must be visible to the caller, else NOT_FOUND), what it reserves against
// its tenant's quotas, and how it ends: the reply, the failure log and, for a mutating call, one audit
// record. A quick RPC ends with Reply (synchronous API); a call finishing later takes a Replier, which
// carries the caller and the reservation to the thread that finishes it.
//
// Threads: a Call lives on the handler's thread; a Replier may run on any thread, once.
#ifndef RDMAD_SERVER_RPC_CALL_H_
#define RDMAD_SERVER_RPC_CALL_H_

#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/auth/caller.h"
#include "server/common/log.h"
#include "server/dispatch/handoffs.h"
#include "server/registry/registry.h"
#include "server/rpc/services.h"
#include "server/rpc/status.h"
#include "server/tenancy/gate.h"

namespace rdmad::rpc_internal {

inline bool Mutating(const std::string& method) {
  if (method == "Listen") return true;  // not a List call
  return !(absl::StartsWith(method, "Get") || absl::StartsWith(method, "List") ||
           absl::StartsWith(method, "Watch") || method == "WhoAmI");
}

// The response's own "name" (what a creation made), if it has one.
inline std::string NameOf(const google::protobuf::Message& m) {
  const google::protobuf::FieldDescriptor* f = m.GetDescriptor()->FindFieldByName("name");
  if (f == nullptr || f->type() != google::protobuf::FieldDescriptor::TYPE_STRING || f->is_repeated()) return "";
  return m.GetReflection()->GetString(m, f);
}

// How a call ends, once: its metrics, the log of a failure, and the audit record of a mutating call. A watch
// stream that starts ends here only if refused: its metrics count the refusals, not the streams.
// The kind of name a request field holds ("mrs" for `mr`, or for the `name` of a region's method), or ""
// where that is not one kind (a device, which may be given bare). A name of another kind is left to the
// handler, whose parser refuses it (INVALID_ARGUMENT): the tenancy gate must not hide it, since it would
// answer NOT_FOUND for another tenant's resource of that kind and INVALID_ARGUMENT for a missing one,
// telling the two apart.
inline std::string ExpectedKind(const std::string& method, const std::string& field) {
  const std::string f = field.substr(field.rfind('.') + 1);  // "grants[3].mr" -> "mr"
  if (f == "mr") return "mrs";
  if (f == "pd") return "pds";
  if (f == "qp") return "qps";
  if (f == "channel") return "channels";
  if (f == "cm_id") return "cmids";
  if (f != "name") return "";
  static const std::pair<const char*, const char*> kBySuffix[] = {
      {"CmId", "cmids"}, {"Channel", "channels"}, {"Grant", "grants"}, {"Pd", "pds"},
      {"Mr", "mrs"},     {"Qp", "qps"},           {"Mw", "mws"}};
  for (const auto& [suffix, kind] : kBySuffix) {
    if (absl::EndsWith(method, suffix)) return kind;
  }
  return "";
}

struct Ending {
  const Env* env = nullptr;
  std::string method;
  auth::Caller caller;
  std::string resource;
  absl::Time start = absl::Now();
  bool validate_only = false;  // the audit record says "METHOD (validate_only)"

  // Runs where the answer leaves: the hand-offs on the path from the handler's thread to here
  // (server/dispatch/handoffs.h; the handler's thread starts it at 0).
  void operator()(const absl::Status& status, const std::string& created) const {
    const int handoffs = dispatch::Handoffs::Current();
    if (handoffs < 0) RDMAD_LOG_DEBUG("%s answered off any carried path: its hand-offs are not known", method.c_str());
    if (env->observe_rpc) env->observe_rpc(method, status.code(), absl::Now() - start, handoffs < 0 ? 0 : handoffs);
    const std::string& what = created.empty() ? resource : created;
    if (!status.ok()) {
      RDMAD_LOG_INFO("%s from %s (%s): %s", method.c_str(), caller.peer.c_str(), caller.principal.c_str(),
                     std::string(status.message()).c_str());
    } else if (!caller.authenticated) {
      RDMAD_LOG_INFO("unauthenticated call %s %s from %s", method.c_str(), what.c_str(), caller.peer.c_str());
    }
    if (env->audit && Mutating(method)) {
      env->audit(caller, validate_only ? method + " (validate_only)" : method, what, status);
    }
  }
};

class Call {
 public:
  Call(const Env& env, const grpc::ServerContextBase& ctx, const char* method) : env_(env) {
    ending_.env = &env;
    ending_.method = method;
    const auth::Peer peer = env.identify(ctx);
    absl::StatusOr<auth::Caller> caller = env.gate->Admit(peer);
    if (caller.ok()) {
      ending_.caller = std::move(caller).value();
    } else {  // refused (no tenant, or over its rate): still audited under the principal it presented
      status_ = caller.status();
      ending_.caller.peer = peer.address;
      ending_.caller.transport = peer.transport;
      ending_.caller.authenticated = peer.authenticated;
      ending_.caller.principal = env.gate->policy().PrincipalOf(peer);
    }
  }

  // A request with validate_only set: checked as for real, nothing made; its audit record says so.
  Call& ValidateOnly(bool on) {
    ending_.validate_only = on;
    return *this;
  }

  bool ok() const { return status_.ok(); }
  const absl::Status& status() const { return status_; }
  const auth::Caller& caller() const { return ending_.caller; }
  tenancy::Gate& gate() const { return *env_.gate; }

  // The caller must see `name` (request field `field`, holding names of `kind`: ExpectedKind by default);
  // the first one named is the call's resource. A name of another kind is the handler's to refuse.
  Call& See(const std::string& name, const std::string& field, std::string kind = "") {
    if (ending_.resource.empty()) ending_.resource = name;
    if (kind.empty()) kind = ExpectedKind(ending_.method, field);
    if (!kind.empty() && !name.empty() && !absl::StartsWith(name, kind + "/")) return *this;
    if (status_.ok()) status_ = env_.gate->See(caller(), name, field);
    if (!name.empty()) seen_.emplace_back(name, field);
    return *this;
  }
  // Before reserving, every name the call named must exist (NOT_FOUND otherwise): a quota refusal must not
  // tell a name of nothing (which would pass See) from another tenant's (which does not).
  Call& Reserve(std::vector<std::pair<tenancy::Quota, uint64_t>> wants) {
    for (const auto& [name, field] : seen_) {
      if (!status_.ok()) return *this;
      status_ = env_.gate->See(caller(), name, field, /*must_exist=*/true);
    }
    if (!status_.ok()) return *this;
    auto r = env_.gate->Reserve(caller(), std::move(wants));
    if (r.ok()) reservation_ = std::move(r).value(); else status_ = r.status();
    return *this;
  }
  Call& Fail(absl::Status s) {
    if (status_.ok()) status_ = std::move(s);
    return *this;
  }

  // Quick RPCs: ends the call with `result` (an absl::Status or absl::StatusOr<T>), or with the call's own
  // failure if a check failed.
  template <typename Result, typename Response>
  grpc::Status Reply(Result result, Response* response) {
    absl::Status status;
    if constexpr (std::is_same_v<Result, absl::Status>) {
      status = result;
    } else {
      status = result.status();
      if (status.ok()) *response = std::move(result).value();
    }
    return End(status, response);
  }
  // Ends the call with its own failure (after a failed check).
  template <typename Response>
  grpc::Status Refuse(Response* response) {
    return End(status_, response);
  }

  // A Done<T> that finishes the reactor from any thread; `on_ok` runs first on a success (bookkeeping).
  template <typename T, typename Response>
  Done<T> Replier(grpc::ServerUnaryReactor* reactor, Response* response,
                  std::function<void(const T&)> on_ok = nullptr) {
    return [ending = ending_, reservation = std::move(reservation_), reactor, response,
            on_ok = std::move(on_ok)](absl::StatusOr<T> result) mutable {
      if (result.ok() && on_ok) on_ok(*result);
      if (result.ok()) *response = std::move(result).value();
      reservation = tenancy::Gate::Reservation();  // committed (or failed): released before the client hears
      ending(result.status(), result.ok() ? NameOf(*response) : "");
      reactor->Finish(ToGrpc(result.status()));
    };
  }
  // Finishes a callback RPC with the call's own failure.
  void RefuseAsync(grpc::ServerUnaryReactor* reactor) {
    ending_(status_, "");
    reactor->Finish(ToGrpc(status_));
  }

 private:
  template <typename Response>
  grpc::Status End(const absl::Status& status, Response* response) {
    reservation_ = tenancy::Gate::Reservation();
    ending_(status, status.ok() ? NameOf(*response) : "");
    return ToGrpc(status);
  }

  const Env& env_;
  Ending ending_;
  dispatch::Handoffs::Scope path_{0};  // the handler's thread starts the call's path (handoffs.h)
  absl::Status status_;
  std::vector<std::pair<std::string, std::string>> seen_;  // (name, field) of each See
  tenancy::Gate::Reservation reservation_;
};

// Appends `items` to a response's repeated field.
template <typename T, typename Repeated>
void Fill(std::vector<T> items, Repeated* out) {
  for (auto& i : items) *out->Add() = std::move(i);
}

}  // namespace rdmad::rpc_internal

#endif  // RDMAD_SERVER_RPC_CALL_H_
