// rdmactl health (is rdmad serving?) and version (rdmactl's and rdmad's; --client: no server).
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
  ctx.out() << (ctx.structured() ? ToStructured(health, ctx.format()) : "rdmad at " + ctx.server() + " is serving\n");
  return kExitOk;
}

// kubectl's version: rdmactl's, then rdmad's (WhoAmI's server_version; an rdmad too old to report it is
// shown as serving the API, its version unknown).
struct VersionOptions {
  bool client_only = false;

  void Flags(CLI::App* sub) { sub->add_flag("--client", client_only, "rdmactl's version only (no server needed)"); }
  int Run(Context& ctx) const {
    json::Version version;
    version.set_rdmactl(kRdmactlVersion);
    version.set_api(kApiVersion);
    absl::Status health;
    if (!client_only) {
      version.set_server(ctx.server());
      health = ctx.client().Health();
      version.set_server_status(health.ok() ? "SERVING" : std::string(health.message()));
      if (health.ok()) {
        absl::StatusOr<v1::Caller> who = ctx.client().WhoAmI();
        if (who.ok()) version.set_server_version(who->server_version());
      }
    }
    if (ctx.structured()) {
      ctx.out() << ToStructured(version, ctx.format());
    } else {
      ctx.out() << "Client Version: rdmactl " << kRdmactlVersion << " (API " << kApiVersion << ")\n";
      if (!client_only && health.ok()) {
        if (!version.server_version().empty()) {
          ctx.out() << "Server Version: rdmad " << version.server_version() << " (API " << kApiVersion << ") at "
                    << ctx.server() << "\n";
        } else {
          ctx.out() << "Server: rdmad at " << ctx.server() << " serves " << kApiVersion
                    << " (it does not report its version: 'rdmad --version' on its host)\n";
        }
      }
    }
    return health.ok() ? kExitOk : ctx.Fail(health);
  }
};

}  // namespace

void RegisterServerCommands(Registry& r) {
  r.OnRun(r.Verb("health"), Health);
  r.Add<VersionOptions>(r.Verb("version"));
}

}  // namespace rdmad::cli
