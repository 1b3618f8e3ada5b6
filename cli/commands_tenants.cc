// rdmactl's tenant commands: get tenants (ListTenants, GetTenant), describe tenant (GetTenant) and whoami
// (WhoAmI). As commands.cc: the names were normalized by Validate; Run calls client/ and prints (the tables and
// texts are in output_tenants.cc).
#include <string>

#include "cli/command_util.h"
#include "cli/commands.h"

namespace rdmad::cli {

using internal::PrintList;
using internal::PrintOne;
using internal::PrintResult;

int RunGetTenants(const GetOptions& o, Context& ctx) {
  if (!o.name.empty()) {
    auto t = ctx.client().GetTenant(o.name);
    return t.ok() ? PrintOne(ctx, *t, TenantsTable) : ctx.Fail(t.status());
  }
  auto list = ctx.client().ListTenants();
  return list.ok() ? PrintList(ctx, list->tenants(), TenantsTable, "") : ctx.Fail(list.status());
}

int RunDescribeTenant(const NamedOptions& o, Context& ctx) {
  auto t = ctx.client().GetTenant(o.name);
  if (!t.ok()) return ctx.Fail(t.status());
  std::string text = TenantText(*t);
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return PrintResult(ctx, *t, {t->name()}, text);
}

int RunWhoAmI(Context& ctx) {
  auto caller = ctx.client().WhoAmI();
  if (!caller.ok()) return ctx.Fail(caller.status());
  std::string text = CallerText(*caller);
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return PrintResult(ctx, *caller, {caller->principal()}, text);
}

}  // namespace rdmad::cli
