// The client's tenant calls: WhoAmI (who rdmad takes the caller to be), ListTenants and GetTenant (a
// tenant's principals, roots, devices, quotas with their use, and PDs). Their stub is made per call, from
// the client's channel.
#include "client/client.h"

namespace rdmad::client {

absl::StatusOr<v1::Caller> Client::WhoAmI() {
  std::unique_ptr<v1::Tenants::Stub> stub = v1::Tenants::NewStub(channel_);
  return Call(stub.get(), &v1::Tenants::Stub::WhoAmI, v1::WhoAmIRequest());
}
absl::StatusOr<v1::ListTenantsResponse> Client::ListTenants() {
  std::unique_ptr<v1::Tenants::Stub> stub = v1::Tenants::NewStub(channel_);
  return ListAll(stub.get(), &v1::Tenants::Stub::ListTenants, v1::ListTenantsRequest(),
                 &v1::ListTenantsResponse::mutable_tenants);
}
absl::StatusOr<v1::ListTenantsResponse> Client::ListTenantsPage(const v1::ListTenantsRequest& request) {
  std::unique_ptr<v1::Tenants::Stub> stub = v1::Tenants::NewStub(channel_);
  return Call(stub.get(), &v1::Tenants::Stub::ListTenants, request);
}
absl::StatusOr<v1::Tenant> Client::GetTenant(const std::string& name) {
  std::unique_ptr<v1::Tenants::Stub> stub = v1::Tenants::NewStub(channel_);
  v1::GetTenantRequest r;
  r.set_name(name);
  return Call(stub.get(), &v1::Tenants::Stub::GetTenant, r);
}

}  // namespace rdmad::client
