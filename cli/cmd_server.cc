// rdmactl health (is rdmad serving?) and version (rdmactl's own, no server needed).
#include "cli/command.h"

namespace rdmad::cli {
namespace {

constexpr char kRdmactlVersion[] = "0.1.0";
constexpr char kApiVersion[] = "rdmad.v1";

int Health(Context& ctx) {
  if (absl::Status s = ctx.client().Health(); !s.ok()) return ctx.Fail(s);
  json::Health health;
  health.set_server(ctx.server());
  health.set_status("SERVING");
  ctx.out() << (ctx.format() == Format::kJson ? ToJson(health) : "rdmad at " + ctx.server() + " is serving\n");
  return kExitOk;
}

int Version(Context& ctx) {
  json::Version version;
  version.set_rdmactl(kRdmactlVersion);
  version.set_api(kApiVersion);
  ctx.out() << (ctx.format() == Format::kJson ? ToJson(version)
                                               : std::string("rdmactl ") + kRdmactlVersion + " (API " + kApiVersion + ")\n");
  return kExitOk;
}

}  // namespace

void RegisterServerCommands(Registry& r) {
  r.OnRun(r.Verb("health"), Health);
  r.OnRun(r.Verb("version"), Version);
}

}  // namespace rdmad::cli
