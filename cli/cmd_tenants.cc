// rdmactl's tenant commands: get tenants (an admin sees every tenant, a tenant caller its own), describe tenant
// (every quota, used and limit) and whoami (who rdmad takes this caller to be).
#include "cli/command.h"

namespace rdmad::cli {
namespace {

int Describe(Context& ctx, const std::string& name) {
  return Done(ctx, ctx.client().GetTenant(name), [](const v1::Tenant& t) { return TenantText(t); });
}

int WhoAmI(Context& ctx) {
  auto caller = ctx.client().WhoAmI();
  if (!caller.ok()) return ctx.Fail(caller.status());
  return PrintResult(ctx, *caller, {caller->principal()}, CallerText(*caller));
}

}  // namespace

void RegisterTenantCommands(Registry& r) {
  r.Add(r.Noun("get", Kind::kTenant,
               "tenants: their principals, PDs and quotas (used/limit); a tenant caller sees only its own", true),
        GetOptions<json::TenantList, v1::Tenant>{
            Kind::kTenant, TenantColumns, &client::Client::ListTenants, &v1::ListTenantsResponse::tenants,
            &client::Client::GetTenant});
  r.Named("describe", Kind::kTenant, "A tenant: every quota (used, limit), its principals, file roots, devices and PDs",
          Describe);
  r.OnRun(r.Verb("whoami"), WhoAmI);
}

}  // namespace rdmad::cli
