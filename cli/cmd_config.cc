// rdmactl config get-contexts | current-context | use-context NAME: the config file's contexts
// (cli/config_file.h). No server needed.
#include "absl/strings/str_cat.h"
#include "cli/command.h"
#include "cli/config_file.h"

namespace rdmad::cli {
namespace {

absl::StatusOr<ConfigFile> Load(Context& ctx) {
  if (ctx.config_path().empty()) {
    return absl::FailedPreconditionError("no config file: set RDMACTL_CONFIG, or HOME for ~/.config/rdmactl/config");
  }
  return LoadConfig(ctx.config_path());
}

int GetContexts(Context& ctx) {
  absl::StatusOr<ConfigFile> config = Load(ctx);
  if (!config.ok()) return ctx.Fail(config.status());
  json::ConfigContextList list;
  Table table({"CURRENT", "NAME", "SERVER", "TLS"});
  for (const ContextEntry& c : config->contexts) {
    json::ConfigContext* item = list.add_items();
    item->set_name(c.name);
    item->set_current(c.name == config->current);
    item->set_server(c.server);
    item->set_tls_ca(c.tls_ca);
    item->set_tls_cert(c.tls_cert);
    item->set_tls_key(c.tls_key);
    item->set_tls_server_name(c.tls_server_name);
    table.AddRow({item->current() ? "*" : " ", c.name, c.server, c.tls_ca.empty() ? "no" : "yes"});
  }
  if (ctx.structured()) {
    ctx.out() << ToStructured(list, ctx.format());
  } else if (ctx.format() == Format::kName) {
    for (const ContextEntry& c : config->contexts) ctx.out() << c.name << "\n";
  } else if (!config->contexts.empty()) {
    ctx.out() << table.Render();
  }
  if (config->contexts.empty() && !ctx.structured()) ctx.err() << "No contexts in " << ctx.config_path() << ".\n";
  return kExitOk;
}

int CurrentContext(Context& ctx) {
  absl::StatusOr<ConfigFile> config = Load(ctx);
  if (!config.ok()) return ctx.Fail(config.status());
  if (config->current.empty()) return ctx.Fail(absl::NotFoundError("current-context is not set in " + ctx.config_path()));
  ctx.out() << config->current << "\n";
  return kExitOk;
}

struct UseContextOptions {
  std::string name;
  void Flags(CLI::App* sub) { sub->add_option("NAME", name, "a context of the config file")->required(); }
  int Run(Context& ctx) const {
    if (ctx.config_path().empty()) return ctx.Fail(Load(ctx).status());
    if (absl::Status s = UseContext(ctx.config_path(), name); !s.ok()) return ctx.Fail(s);
    ctx.out() << "Switched to context \"" << name << "\".\n";
    return kExitOk;
  }
};

}  // namespace

void RegisterConfigCommands(Registry& r) {
  CLI::App* config = r.Verb("config");
  r.OnRun(config->add_subcommand("get-contexts", "List the contexts (* marks the current one)"), GetContexts);
  r.OnRun(config->add_subcommand("current-context", "Print the current context's name"), CurrentContext);
  r.Add<UseContextOptions>(config->add_subcommand("use-context", "Make NAME the current context (written to the file)"));
}

}  // namespace rdmad::cli
