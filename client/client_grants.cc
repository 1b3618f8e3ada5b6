// The client's grant calls: issue, get, list, renew, revoke, and the WatchGrants stream (read by ReadStream,
// client_cm.cc). The data plane (opening a grant and reading) is RemoteRegion, client/remote_region.h.
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "client/client.h"

namespace rdmad::client {

absl::StatusOr<v1::IssuedGrant> Client::IssueGrant(const v1::IssueGrantRequest& request,
                                                   const MutateOptions& options) {
  return Mutate(grants_.get(), &v1::Grants::Stub::IssueGrant, request, options,
                +[](const v1::IssuedGrant& g) -> const std::string& { return g.grant().name(); });
}
absl::StatusOr<v1::IssueGrantsResponse> Client::IssueGrants(const v1::IssueGrantsRequest& request) {
  return Call(grants_.get(), &v1::Grants::Stub::IssueGrants, request);
}
absl::StatusOr<v1::Grant> Client::GetGrant(const std::string& name) {
  v1::GetGrantRequest r;
  r.set_name(name);
  return Call(grants_.get(), &v1::Grants::Stub::GetGrant, r);
}
absl::StatusOr<v1::ListGrantsResponse> Client::ListGrants(const std::string& mr, const std::string& principal,
                                                          bool include_ended) {
  v1::ListGrantsRequest r;
  r.set_mr(mr);
  r.set_principal(principal);
  r.set_include_ended(include_ended);
  return ListAll(grants_.get(), &v1::Grants::Stub::ListGrants, r, &v1::ListGrantsResponse::mutable_grants);
}
absl::StatusOr<v1::ListGrantsResponse> Client::ListGrantsPage(const v1::ListGrantsRequest& request) {
  return Call(grants_.get(), &v1::Grants::Stub::ListGrants, request);
}
absl::StatusOr<v1::Grant> Client::RenewGrant(const std::string& name, std::chrono::milliseconds ttl) {
  if (ttl.count() <= 0 || ttl.count() > UINT32_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("ttl: ", ttl.count(), " ms is not a lease (1 ms to ", UINT32_MAX, " ms)"));
  }
  v1::RenewGrantRequest r;
  r.set_name(name);
  r.set_ttl_ms(static_cast<uint32_t>(ttl.count()));
  return Call(grants_.get(), &v1::Grants::Stub::RenewGrant, r);
}
absl::StatusOr<v1::Grant> Client::RevokeGrant(const std::string& name) {
  v1::RevokeGrantRequest r;
  r.set_name(name);
  return Call(grants_.get(), &v1::Grants::Stub::RevokeGrant, r);
}

absl::Status Client::WatchGrants(const v1::WatchGrantsRequest& request,
                                 const std::function<bool(const v1::GrantEvent&)>& on_event, WatchOptions options) {
  return Watch<v1::GrantEvent>([&](grpc::ClientContext* ctx) { return grants_->WatchGrants(ctx, request); },
                               on_event, options);
}

}  // namespace rdmad::client
