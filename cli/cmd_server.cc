// rdmactl health (is rdmad serving?) and version (rdmactl's, and whether rdmad answers; --client: no server).
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

// kubectl's version: rdmactl's, then rdmad's answer. rdmad.v1 has no call that returns rdmad's version
// (`rdmad --version` prints it on the server's host), so the server line says whether rdmad serves the API.
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
    }
    if (ctx.structured()) {
      ctx.out() << ToStructured(version, ctx.format());
    } else {
      ctx.out() << "Client Version: rdmactl " << kRdmactlVersion << " (API " << kApiVersion << ")\n";
      if (!client_only && health.ok()) {
        ctx.out() << "Server: rdmad at " << ctx.server() << " serves " << kApiVersion
                  << " (rdmad's own version is not in the API: 'rdmad --version' on its host)\n";
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
