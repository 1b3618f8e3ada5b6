// rdmactl config get-contexts | current-context | use-context NAME | set-context NAME [--server ADDR]
// [--tls-ca F] [--tls-cert F] [--tls-key F] [--tls-server-name N] [--current] | delete-context NAME: the
// config file's contexts (cli/config_file.h). No server needed.
#include <unistd.h>

#include <climits>

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

// A TLS file as given, made absolute from the current directory: in the file, a relative path would be
// read from the file's directory.
std::string Absolute(const std::string& file) {
  if (file.empty() || file[0] == '/') return file;
  char cwd[PATH_MAX];
  return getcwd(cwd, sizeof cwd) != nullptr ? absl::StrCat(cwd, "/", file) : file;
}

struct SetContextOptions {
  std::string name;
  ContextChange change;
  bool current = false;
  void Flags(CLI::App* sub) {
    sub->add_option("NAME", name, "the context to create or change")->required();
    auto field = [sub](const char* flag, std::optional<std::string>* to, const char* help) {
      sub->add_option_function<std::string>(flag, [to](const std::string& v) { *to = v; }, help);
    };
    field("--server", &change.server, "rdmad's address (unix:PATH, HOST:PORT)");
    field("--tls-ca", &change.tls_ca, "CA bundle that verifies rdmad (stored as an absolute path)");
    field("--tls-cert", &change.tls_cert, "client certificate (stored as an absolute path)");
    field("--tls-key", &change.tls_key, "client key (stored as an absolute path)");
    field("--tls-server-name", &change.tls_server_name, "name to verify in rdmad's certificate");
    sub->add_flag("--current", current, "also make it the current context");
  }
  int Run(Context& ctx) const {
    if (ctx.config_path().empty()) return ctx.Fail(Load(ctx).status());
    ContextChange c = change;
    for (std::optional<std::string>* f : {&c.tls_ca, &c.tls_cert, &c.tls_key}) {
      if (*f) **f = Absolute(**f);
    }
    bool created = false;
    if (absl::Status s = SetContext(ctx.config_path(), name, c, current, &created); !s.ok()) return ctx.Fail(s);
    ctx.out() << "Context \"" << name << "\" " << (created ? "created" : "modified") << ".\n";
    if (current) ctx.out() << "Switched to context \"" << name << "\".\n";
    return kExitOk;
  }
};

struct DeleteContextOptions {
  std::string name;
  void Flags(CLI::App* sub) { sub->add_option("NAME", name, "a context of the config file")->required(); }
  int Run(Context& ctx) const {
    if (ctx.config_path().empty()) return ctx.Fail(Load(ctx).status());
    bool was_current = false;
    if (absl::Status s = DeleteContext(ctx.config_path(), name, &was_current); !s.ok()) return ctx.Fail(s);
    ctx.out() << "deleted context " << name << " from " << ctx.config_path() << "\n";
    if (was_current) {
      ctx.err() << "warning: it was the current context: current-context is now unset (rdmactl config use-context "
                   "NAME picks another)\n";
    }
    return kExitOk;
  }
};

}  // namespace

void RegisterConfigCommands(Registry& r) {
  CLI::App* config = r.Verb("config");
  r.OnRun(config->add_subcommand("get-contexts", "List the contexts (* marks the current one)"), GetContexts);
  r.OnRun(config->add_subcommand("current-context", "Print the current context's name"), CurrentContext);
  r.Add<UseContextOptions>(config->add_subcommand("use-context", "Make NAME the current context (written to the file)"));
  r.Add<SetContextOptions>(config->add_subcommand(
      "set-context", "Create context NAME, or change only the given fields of it (written to the file)"));
  r.Add<DeleteContextOptions>(config->add_subcommand("delete-context", "Remove context NAME from the file"));
}

}  // namespace rdmad::cli
