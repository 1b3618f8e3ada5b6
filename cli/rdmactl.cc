// rdmactl: the operators' command line for rdmad (kubectl-like: VERB NOUN [NAME] [flags]). See docs/cli.md.
//
// This file holds the root: the global flags, the verbs (in the order of the help), the command groups'
// registration (cli/cmd_*.cc), and parsing: kubectl's TYPE/NAME form, an unknown verb or noun said plainly,
// usage errors with where to find help. Exit status: 0 success, 1 rdmad failed the request, 2 usage error.
#include "cli/rdmactl.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "cli/config_file.h"
#include "client/channel.h"

namespace rdmad::cli {
namespace {

// Every verb: name, description. A verb without nouns is a command itself (registered by its group).
constexpr const char* kVerbs[][2] = {
    {"get", "List resources, or show one"},
    {"create", "Create a protection domain, memory window, queue pair, event channel, CM id or connection token"},
    {"register", "Register a memory region"},
    {"rereg", "Reregister a memory region (ibv_rereg_mr)"},
    {"bind", "Bind a memory window to a memory region"},
    {"invalidate", "Invalidate a memory window (its rkey stops working)"},
    {"connect", "Connect a queue pair or a CM id to a remote one"},
    {"listen", "Listen for rdma_cm connections on a CM id"},
    {"accept", "Accept an incoming rdma_cm connection request"},
    {"reject", "Reject an incoming rdma_cm connection request"},
    {"disconnect", "Disconnect an rdma_cm connection"},
    {"migrate", "Move a CM id to another event channel (rdma_migrate_id)"},
    {"events", "Print rdma_cm events: the retained ones (stops after 1s without events), or --follow new ones"},
    {"audit", "Print rdmad's audit records (admins only): the retained ones (stops after 1s without records), or "
              "--follow new ones"},
    {"grant", "Issue a grant: a remote key to a range of a memory region, for one client, for a lease. Prints the "
              "grant and its token: a SECRET that lets its holder connect once and read the range (give it only to "
              "that client; --token-file keeps it off the terminal)"},
    {"renew", "Extend a grant's lease"},
    {"revoke", "Revoke a grant (returns once its key is dead at the NIC)"},
    {"watch", "Stream changes as they happen"},
    {"read", "Read a range of a memory region through a grant (RDMA reads from this process, in chunks of up to "
             "1MiB) to stdout or --out-file"},
    {"bench", "Measure the data plane"},
    {"delete", "Delete a protection domain, memory region, window, queue pair, channel or CM id"},
    {"describe", "Show everything about one resource, for people"},
    {"whoami", "Who rdmad takes you to be: principal, tenant, role, transport"},
    {"health", "Check that rdmad is serving (gRPC health)"},
    {"version", "Print rdmactl's version, and whether rdmad answers (--client: rdmactl's alone)"},
    {"config", "Show the config file's contexts (rdmad addresses and TLS files) and choose the current one"},
    {"completion", "Print a shell completion script (bash, zsh): source <(rdmactl completion bash)"},
};

// The global flags. Each setting comes from its flag, else the environment (RDMAD_SERVER, RDMAD_TLS_*), else the
// context (--context, else the config file's current-context; cli/config_file.h), else its default.
struct GlobalOptions {
  std::string server, output = "table", context;
  int64_t timeout_ms = 30000;
  client::TlsOptions tls;
  bool ignore_not_found = false;  // get NAME, describe, delete
  std::vector<std::pair<CLI::Option*, std::string*>> settings;  // flag, value

  void Flags(CLI::App* app) {
    auto setting = [&](const std::string& flag, std::string* value, const std::string& help) {
      settings.emplace_back(app->add_option(flag, *value, help), value);
    };
    setting("--server", &server,
            std::string("rdmad address: unix:/path or host:port (env RDMAD_SERVER; default ") + client::kDefaultTarget + ")");
    app->add_option("-o,--output", output, "output format: table, wide, json, yaml or name")
        ->transform(FormatFlag())
        ->capture_default_str();
    app->add_option("--timeout", timeout_ms, "per-request timeout: 30s, 500ms, 2m or seconds (default 30s)")
        ->transform(DurationFlag(INT64_MAX));
    app->add_option("--context", context, "the config file's context to use (default: its current-context)");
    // Mutual TLS to rdmad on TCP (docs/security.md); not used for unix:/path.
    setting("--tls-ca", &tls.ca_file, "TCP with mutual TLS: the CA (PEM) that signs rdmad's certificate");
    setting("--tls-cert", &tls.cert_file, "TCP with mutual TLS: this client's certificate (PEM)");
    setting("--tls-key", &tls.key_file, "TCP with mutual TLS: the certificate's private key (PEM)");
    setting("--tls-server-name", &tls.server_name, "check rdmad's certificate for this name instead of the --server host");
  }

  // Flags > environment > context > defaults, for the settings CLI11 parsed.
  absl::Status Resolve(const std::string& config_path) {
    absl::StatusOr<ConfigFile> config = LoadConfig(config_path);
    if (!config.ok()) return config.status();
    const std::string name = context.empty() ? config->current : context;
    ContextEntry entry;
    if (!name.empty()) {
      const ContextEntry* found = config->Find(name);
      if (found == nullptr) {
        return UsageError((context.empty() ? "current-context" : "--context") + std::string(": no context '") + name +
                          "' in " + (config_path.empty() ? "(no config file)" : config_path));
      }
      entry = *found;
    }
    const std::string* from_context[] = {&entry.server, &entry.tls_ca, &entry.tls_cert, &entry.tls_key,
                                         &entry.tls_server_name};
    const char* env[] = {"RDMAD_SERVER", "RDMAD_TLS_CA", "RDMAD_TLS_CERT", "RDMAD_TLS_KEY", "RDMAD_TLS_SERVER_NAME"};
    const std::string fallback[] = {client::kDefaultTarget, "", "", "", ""};
    for (size_t i = 0; i < settings.size(); i++) {
      auto [flag, value] = settings[i];
      const std::optional<std::string> given = flag->count() > 0 ? std::optional<std::string>(*value) : std::nullopt;
      *value = Pick(given, std::getenv(env[i]), *from_context[i], fallback[i]);
    }
    context = name;
    return absl::OkStatus();
  }

  // `dial`: the command calls rdmad (every one but config and completion, which must work whatever the
  // context's TLS files are: a context that names missing files is mended with config set-context).
  absl::StatusOr<std::unique_ptr<Context>> MakeContext(std::ostream& out, std::ostream& err, bool dial = true) {
    const std::string config_path = ConfigPath();
    if (absl::Status s = Resolve(config_path); !s.ok()) return s;
    if (server.empty()) return UsageError("--server: an address is required (unix:/path or host:port)");
    auto ctx = std::make_unique<Context>(server, *ParseFormat(output), std::chrono::milliseconds(timeout_ms), out, err);
    ctx->set_ignore_not_found(ignore_not_found);
    ctx->set_config(config_path, context);
    if (dial && tls.enabled()) {  // mutual TLS to a TCP rdmad (on a unix socket rdmad knows the uid instead)
      absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = client::Dial(server, tls);
      if (!channel.ok()) return UsageError("--tls-ca/--tls-cert/--tls-key: " + std::string(channel.status().message()));
      ctx->UseChannel(*std::move(channel));
    }
    return ctx;
  }
};

std::vector<CLI::App*> Subcommands(CLI::App* parent) {
  return parent->get_subcommands([](CLI::App*) { return true; });
}

// kubectl habits that name another verb here: `create mr` is `register mr`, ... (verb, noun, what to run).
constexpr const char* kOtherVerb[][3] = {
    {"create", "mr", "rdmactl register mr"},   {"create", "mrs", "rdmactl register mr"},
    {"create", "grant", "rdmactl grant MR"},   {"create", "grants", "rdmactl grant MR"},
    {"delete", "grant", "rdmactl revoke grant"}, {"delete", "grants", "rdmactl revoke grant"},
};

// CLI11 reports an unknown verb or noun as "A subcommand is required"; say what is wrong instead. Where a noun
// follows the verb, kubectl's TYPE/NAME form is split first ("events --channel channels/2" has none).
bool CheckVerbAndNoun(CLI::App* app, std::vector<std::string>& args, const std::set<std::string>& valued,
                      std::ostream& err) {
  CLI::App* parent = app;
  for (size_t word : BareWords(args, valued, 2)) {
    std::string names;
    CLI::App* found = nullptr;
    for (CLI::App* sub : Subcommands(parent)) {
      if (sub->check_name(args[word])) found = sub;
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    const std::string verb = parent == app ? "" : parent->get_name() + " ";
    if (found == nullptr) {
      if (verb.empty()) err << "error: unknown command '" << args[word] << "' (commands: " << names << ")\n";
      else err << "error: '" << parent->get_name() << "' does not apply to '" << args[word] << "' (" << names << ")\n";
      for (const auto& other : kOtherVerb) {
        if (parent->get_name() == other[0] && args[word] == other[1]) err << "hint: did you mean `" << other[2] << "`?\n";
      }
      err << "Run 'rdmactl " << verb << "--help' for usage.\n";
      return false;
    }
    if (Subcommands(found).empty()) return true;  // a verb without nouns is a command itself
    if (verb.empty()) args = SplitTypeSlashName(std::move(args), valued);
    parent = found;
  }
  return true;
}

// "register mr ": the subcommands parsed so far, for "Run 'rdmactl register mr --help'".
std::string ParsedPath(CLI::App* app) {
  std::string path;
  for (std::vector<CLI::App*> subs = app->get_subcommands(); !subs.empty(); subs = subs[0]->get_subcommands()) {
    path += subs[0]->get_name() + " ";
  }
  return path;
}

}  // namespace

int Rdmactl(const std::vector<std::string>& arguments, std::ostream& out, std::ostream& err,
            std::shared_ptr<grpc::Channel> channel) {
  CLI::App app{
      "rdmactl: manage rdmad's RDMA resources (devices, protection domains, memory regions, memory "
      "windows, queue pairs, rdma_cm event channels and CM ids, connection tokens, grants), and read through a "
      "grant.",
      "rdmactl"};
  // Inherited by every subcommand created after this (their help does not list the root's options).
  app.footer(
      "Global flags: --server ADDR (env RDMAD_SERVER), -o table|wide|json|yaml|name, --timeout DURATION,\n"
      "  --context NAME (config file: $RDMACTL_CONFIG or ~/.config/rdmactl/config),\n"
      "  --tls-ca FILE --tls-cert FILE --tls-key FILE [--tls-server-name NAME] (env RDMAD_TLS_CA, ...).\n"
      "See 'rdmactl --help' and docs/cli.md.");
  app.fallthrough();  // global flags may follow the verb and noun; inherited by every subcommand
  app.require_subcommand(1);
  GlobalOptions global;
  global.Flags(&app);
  for (const auto& verb : kVerbs) app.add_subcommand(verb[0], verb[1]);
  Registry registry(&app);
  for (auto add : {RegisterDeviceCommands, RegisterPdCommands, RegisterMrCommands, RegisterMwCommands,
                   RegisterQpCommands, RegisterCmCommands, RegisterGrantCommands, RegisterTenantCommands,
                   RegisterAuditCommands, RegisterReadCommands, RegisterServerCommands,
                   RegisterConfigCommands, RegisterCompletionCommands}) {
    add(registry);
  }
  for (CLI::App* verb : Subcommands(&app)) {
    if (!Subcommands(verb).empty()) verb->require_subcommand(1);
  }
  // kubectl's --ignore-not-found on the commands about one named object.
  for (const char* verb : {"get", "describe", "delete"}) {
    for (CLI::App* noun : Subcommands(app.get_subcommand(verb))) {
      noun->add_flag("--ignore-not-found", global.ignore_not_found,
                     std::string("NAME does not exist: print nothing and exit 0") +
                         (std::string(verb) == "get" ? " (with NAME only)" : ""));
    }
  }
  app.footer(  // the root's own, set last: not inherited
      "Examples:\n"
      "  rdmactl get devices\n"
      "  rdmactl create pd --device rxe0 --label demo\n"
      "  rdmactl register mr --pd pds/1 --size 1MiB --access local-write,remote-read,mw-bind\n"
      "  rdmactl get mrs --pd pds/1 -o wide\n"
      "  rdmactl get mrs/1 -o json\n"
      "  rdmactl delete pd pds/1 --cascade\n"
      "  rdmactl create cmid --pd pds/1 && rdmactl listen cmid cmids/1 --address 0.0.0.0:7471\n"
      "  rdmactl events --follow --type connect-request,established\n"
      "  rdmactl grant mrs/1 --length 1MiB --for app-7 --ttl 60s --token-file app-7.token\n"
      "  rdmactl get grants --mr mrs/1 && rdmactl revoke grants/1\n"
      "  rdmactl whoami && rdmactl get tenants && rdmactl describe tenant app\n"
      "  rdmactl read mrs/1 --length 4KiB --out-file head.bin && rdmactl bench read mrs/1 --size 4KiB --depth 16\n"
      "See docs/cli.md.");

  if (arguments.empty()) {  // no arguments at all: help, as kubectl does
    out << app.help();
    return kExitOk;
  }
  const std::set<std::string> valued = {"--server",  "-o",       "--output", "--timeout",        "--context",
                                        "--tls-ca", "--tls-cert", "--tls-key", "--tls-server-name"};
  std::vector<std::string> args = arguments;
  if (args.front() == "help") {  // kubectl's "help [VERB [NOUN]]" is "[VERB [NOUN]] --help"
    args.erase(args.begin());
    args.push_back("--help");
  }
  if (!CheckVerbAndNoun(&app, args, valued, err)) return kExitUsage;
  std::reverse(args.begin(), args.end());  // CLI11 takes them reversed
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e, out, err);  // --help
    err << "error: " << e.what() << "\n";
    if (app.got_subcommand("read") && std::string(e.what()).find("output format") != std::string::npos) {
      err << "hint: -o is the output format; 'read' writes to a file with --out-file FILE\n";
    }
    err << "Run 'rdmactl " << ParsedPath(&app) << "--help' for usage.\n";
    return kExitUsage;
  }
  const bool local = app.got_subcommand("config") || app.got_subcommand("completion");  // rdmad not called
  absl::StatusOr<std::unique_ptr<Context>> ctx = global.MakeContext(out, err, /*dial=*/!local);
  if (!ctx.ok()) {
    err << "error: " << ctx.status().message() << "\n";
    return kExitUsage;
  }
  if (channel != nullptr) (*ctx)->UseChannel(std::move(channel));
  const int rc = registry.chosen()(**ctx);
  out.flush();
  return rc;
}

}  // namespace rdmad::cli
