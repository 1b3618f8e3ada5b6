// rdmactl: the operators' command line for rdmad (kubectl-like: VERB NOUN [NAME] [flags]). See docs/cli.md.
//
// This file only wires the grammar with CLI11: every NOUN subcommand fills an options struct and, once
// chosen, names the command to run; the commands themselves (validate, call client/, print) live in
// commands*.cc. Exit status: 0 success, 1 rdmad failed the request, 2 usage error (nothing was sent).
#include "cli/rdmactl.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/commands.h"

namespace rdmad::cli {
namespace {

// The command chosen on the command line, set by its subcommand's callback.
struct Action {
  std::function<int(Context&)> run;
};

// "Run 'rdmactl register mr --help' for usage." for a usage error found after parsing.
int UsageError(Context& ctx, const absl::Status& status, const std::string& command) {
  ctx.err() << "error: " << status.message() << "\n"
            << "Run 'rdmactl " << command << " --help' for usage.\n";
  return kExitUsage;
}

// Options -> validate (builds the request) -> run. For commands whose Validate builds a request.
template <typename Options>
void Bind(CLI::App* sub, std::shared_ptr<Options> o, Action* action, std::function<void()> complete = nullptr) {
  const std::string command = sub->get_parent()->get_name() + " " + sub->get_name();
  sub->callback([o, action, command, complete] {
    if (complete) complete();
    action->run = [o, command](Context& ctx) {
      auto request = Validate(*o);
      if (!request.ok()) return UsageError(ctx, request.status(), command);
      return Run(*request, ctx);
    };
  });
}

// For commands whose Validate normalizes the options in place.
template <typename Options>
void BindInPlace(CLI::App* sub, std::shared_ptr<Options> o, Action* action,
                 std::function<int(const Options&, Context&)> run) {
  const std::string command = sub->get_parent()->get_name() + " " + sub->get_name();
  sub->callback([o, action, command, run] {
    action->run = [o, command, run](Context& ctx) {
      Options options = *o;
      absl::Status valid = Validate(options);
      if (!valid.ok()) return UsageError(ctx, valid, command);
      return run(options, ctx);
    };
  });
}

// A NOUN subcommand of `verb`, named by the noun's singular or plural (the other is an alias).
CLI::App* Noun(CLI::App* verb, Kind kind, bool plural, const std::string& description) {
  const KindInfo& k = Info(kind);
  CLI::App* sub = verb->add_subcommand(plural ? k.plural : k.singular, description);
  sub->alias(plural ? k.singular : k.plural);
  return sub;
}

std::string NameHelp(Kind kind) {
  const KindInfo& k = Info(kind);
  if (kind == Kind::kTenant) return "tenant name: app, tenants/app";
  if (!k.numeric) return std::string(k.singular) + " name: rxe0, " + k.plural + "/rxe0";
  return std::string(k.title) + ": " + k.plural + "/N, " + k.singular + "/N or N";
}

void AddSourceOptions(CLI::App* sub, SourceOptions* s, bool for_rereg) {
  const std::string what = for_rereg ? "new source: " : "";
  auto* size = sub->add_option(
      "--size", s->size, what + "anonymous memory rdmad allocates, in bytes or with a unit: 4096, 4KiB, 1MiB, 2GiB");
  sub->add_flag("--huge-pages", s->huge_pages, "with --size: back the memory with huge pages (MAP_HUGETLB)");
  auto* file =
      sub->add_option("--file", s->file, what + "a file to map shared (under rdmad's allowed roots, e.g. /dev/shm)");
  sub->add_option("--offset", s->offset, "with --file: byte offset in the file (default 0)");
  sub->add_option("--length", s->length, "with --file: bytes to register");
  size->excludes(file);
}

void CountSource(CLI::App* sub, SourceOptions* s) {
  s->size_given = sub->count("--size") > 0;
  s->file_given = sub->count("--file") > 0;
  s->offset_given = sub->count("--offset") > 0;
  s->length_given = sub->count("--length") > 0;
}

// --data TEXT | --data-hex HEX | --data-file PATH: the private data of a connect, accept or reject.
void AddPrivateDataOptions(CLI::App* sub, PrivateDataOptions* d, int max_bytes) {
  const std::string limit = " (at most " + std::to_string(max_bytes) + " bytes)";
  auto* text = sub->add_option("--data", d->text, "private data: this text's bytes, as typed" + limit);
  auto* hex = sub->add_option("--data-hex", d->hex, "private data in hex: 0a0b0c or 0a:0b:0c" + limit);
  auto* file = sub->add_option("--data-file", d->file, "private data: the bytes of this file" + limit);
  text->excludes(hex)->excludes(file);
  hex->excludes(file);
}

void CountPrivateData(CLI::App* sub, PrivateDataOptions* d) {
  d->text_given = sub->count("--data") > 0;
  d->hex_given = sub->count("--data-hex") > 0;
  d->file_given = sub->count("--data-file") > 0;
}

// The subcommand of `parent` called `name` (or an alias of it), or nullptr.
CLI::App* FindSubcommand(CLI::App* parent, const std::string& name) {
  for (CLI::App* sub : parent->get_subcommands([](CLI::App*) { return true; })) {
    if (sub->check_name(name)) return sub;
  }
  return nullptr;
}

std::string SubcommandNames(CLI::App* parent) {
  std::string names;
  for (CLI::App* sub : parent->get_subcommands([](CLI::App*) { return true; })) {
    names += (names.empty() ? "" : ", ") + sub->get_name();
  }
  return names;
}

// CLI11 reports an unknown verb or noun as "A subcommand is required"; say what is wrong instead.
bool CheckVerbAndNoun(CLI::App* app, const std::vector<std::string>& args, const std::set<std::string>& valued,
                      std::ostream& err) {
  std::vector<size_t> words = BareWords(args, valued, 2);
  if (words.empty()) return true;
  const std::string& verb = args[words[0]];
  CLI::App* v = FindSubcommand(app, verb);
  if (v == nullptr) {
    err << "error: unknown command '" << verb << "' (commands: " << SubcommandNames(app) << ")\n"
        << "Run 'rdmactl --help' for usage.\n";
    return false;
  }
  if (words.size() < 2 || v->get_subcommands([](CLI::App*) { return true; }).empty()) return true;
  const std::string& noun = args[words[1]];
  if (FindSubcommand(v, noun) == nullptr) {
    err << "error: '" << verb << "' does not apply to '" << noun << "' (" << SubcommandNames(v) << ")\n"
        << "Run 'rdmactl " << verb << " --help' for usage.\n";
    return false;
  }
  return true;
}

std::string FailureMessage(const CLI::App*, const CLI::Error& e) {
  return std::string("error: ") + e.what() + "\nRun 'rdmactl --help' (or 'rdmactl VERB NOUN --help') for usage.\n";
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
      "Global flags: --server ADDR (env RDMAD_SERVER), -o table|wide|json|name, --timeout DURATION,\n"
      "  --tls-ca FILE --tls-cert FILE --tls-key FILE [--tls-server-name NAME] (env RDMAD_TLS_CA, ...).\n"
      "See 'rdmactl --help' and docs/cli.md.");
  app.failure_message(FailureMessage);
  app.fallthrough();  // global flags may follow the verb and noun; inherited by every subcommand
  app.require_subcommand(1);

  GlobalOptions global;
  app.add_option("--server", global.server, "rdmad address: unix:/path or host:port")
      ->envname("RDMAD_SERVER")
      ->capture_default_str();
  app.add_option("-o,--output", global.output, "output format: table, wide, json or name")->capture_default_str();
  app.add_option("--timeout", global.timeout, "per-request timeout: 30s, 500ms, 2m or seconds")->capture_default_str();
  // Mutual TLS to rdmad on TCP (docs/security.md); not used for unix:/path.
  app.add_option("--tls-ca", global.tls.ca_file, "TCP with mutual TLS: the CA (PEM) that signs rdmad's certificate")
      ->envname("RDMAD_TLS_CA");
  app.add_option("--tls-cert", global.tls.cert_file, "TCP with mutual TLS: this client's certificate (PEM)")
      ->envname("RDMAD_TLS_CERT");
  app.add_option("--tls-key", global.tls.key_file, "TCP with mutual TLS: the certificate's private key (PEM)")
      ->envname("RDMAD_TLS_KEY");
  app.add_option("--tls-server-name", global.tls.server_name,
                 "check rdmad's certificate for this name instead of the --server host")
      ->envname("RDMAD_TLS_SERVER_NAME");

  Action action;

  // ---- get
  CLI::App* get = app.add_subcommand("get", "List resources, or show one");
  get->require_subcommand(1);
  const struct {
    Kind kind;
    const char* description;
  } kGettable[] = {
      {Kind::kDevice, "RDMA devices, their ports and capabilities"},
      {Kind::kPd, "protection domains"},
      {Kind::kMr, "memory regions"},
      {Kind::kMw, "memory windows"},
      {Kind::kQp, "queue pairs"},
      {Kind::kChannel, "rdma_cm event channels (each a dispatcher thread in rdmad)"},
      {Kind::kCmId, "rdma_cm communication ids"},
      {Kind::kGrant, "grants: a remote key to a range of a memory region, for one client, for a lease"},
      {Kind::kTenant, "tenants: their principals, PDs and quotas (used/limit); a tenant caller sees only its own"},
  };
  for (const auto& g : kGettable) {
    auto o = std::make_shared<GetOptions>();
    o->kind = g.kind;
    CLI::App* sub = Noun(get, g.kind, true, g.description);
    sub->add_option("NAME", o->name, NameHelp(g.kind) + " (optional: all if omitted)");
    if (g.kind == Kind::kMr || g.kind == Kind::kMw) {
      sub->add_option("--pd", o->pd, "only those in this protection domain (pds/N)");
    }
    if (g.kind == Kind::kCmId) sub->add_option("--channel", o->channel, "only those on this event channel (channels/N)");
    if (g.kind == Kind::kGrant) {
      sub->add_option("--mr", o->mr, "only those on this memory region (mrs/N)");
      sub->add_option("--for", o->principal, "only those for this principal");
      sub->add_flag("--all", o->all, "also the recently ended ones rdmad remembers (revoked, expired, ...)");
    }
    BindInPlace<GetOptions>(sub, o, &action, [](const GetOptions& opts, Context& ctx) { return Run(opts, ctx); });
  }

  // ---- create
  CLI::App* create = app.add_subcommand(
      "create", "Create a protection domain, memory window, queue pair, event channel, CM id or connection token");
  create->require_subcommand(1);
  {
    auto o = std::make_shared<CreatePdOptions>();
    CLI::App* sub = Noun(create, Kind::kPd, false, "Create a protection domain on a device");
    sub->add_option("--device", o->device, "device: rxe0 or devices/rxe0")->required();
    sub->add_option("--label", o->label, "free text, at most 128 bytes");
    Bind(sub, o, &action);
  }
  {
    auto o = std::make_shared<CreateMwOptions>();
    CLI::App* sub = Noun(create, Kind::kMw, false, "Allocate a memory window");
    sub->add_option("--pd", o->pd, "protection domain (pds/N)")->required();
    sub->add_option("--type", o->type, "window type: 1 (any QP of the PD) or 2 (one QP, set at bind)")->required();
    Bind(sub, o, &action);
  }
  {
    auto o = std::make_shared<CreateQpOptions>();
    CLI::App* sub = Noun(create, Kind::kQp, false, "Create an RC queue pair owned by rdmad");
    sub->add_option("--pd", o->pd, "protection domain (pds/N)")->required();
    sub->add_option("--port", o->port, "device port")->capture_default_str();
    sub->add_option("--gid-index", o->gid_index, "GID table index (default: the port's IPv4 RoCEv2 GID, or 0 on IB)");
    Bind(sub, o, &action);
  }
  {
    auto o = std::make_shared<CreateChannelOptions>();
    CLI::App* sub = Noun(create, Kind::kChannel, false, "Create an rdma_cm event channel (a dispatcher thread)");
    sub->add_option("--label", o->label, "free text");
    Bind(sub, o, &action);
  }
  {
    auto o = std::make_shared<CreateCmIdOptions>();
    CLI::App* sub = Noun(create, Kind::kCmId, false, "Create an rdma_cm id (RDMA_PS_TCP)");
    sub->add_option("--pd", o->pd, "protection domain its QP will use (pds/N)")->required();
    sub->add_option("--channel", o->channel, "event channel that dispatches it (channels/N; default channels/1)");
    Bind(sub, o, &action);
  }
  {
    auto o = std::make_shared<CreateTokenOptions>();
    CLI::App* sub = Noun(create, Kind::kToken, false,
                         "Issue a single-use connection token for rdmad's data-plane listener (a secret)");
    sub->add_option("--pd", o->pd, "protection domain the accepted connection's QP is created on (pds/N)")->required();
    sub->add_option("--ttl", o->ttl, "lifetime: 30s, 500ms, 2m (default: rdmad's, 30s)");
    Bind(sub, o, &action);
  }

  // ---- register mr
  CLI::App* reg = app.add_subcommand("register", "Register a memory region");
  reg->require_subcommand(1);
  {
    auto o = std::make_shared<RegisterMrOptions>();
    CLI::App* sub = Noun(reg, Kind::kMr, false, "Register a memory region");
    sub->add_option("--pd", o->pd, "protection domain (pds/N)")->required();
    AddSourceOptions(sub, &o->source, false);
    sub->add_option("--access", o->access,
                    "access flags, comma-separated: local-write, remote-write, remote-read, remote-atomic, "
                    "mw-bind, or none")
        ->required();
    Bind(sub, o, &action, [sub, o] { CountSource(sub, &o->source); });
  }

  // ---- rereg mr
  CLI::App* rereg = app.add_subcommand("rereg", "Reregister a memory region (ibv_rereg_mr)");
  rereg->require_subcommand(1);
  {
    auto o = std::make_shared<ReregMrOptions>();
    CLI::App* sub = Noun(rereg, Kind::kMr, false,
                         "Change a region's access, PD or memory; the flags follow from the options given");
    sub->add_option("NAME", o->name, NameHelp(Kind::kMr))->required();
    sub->add_option("--access", o->access, "new access flags (CHANGE_ACCESS), or none");
    sub->add_option("--pd", o->pd, "new protection domain on the same device (CHANGE_PD)");
    AddSourceOptions(sub, &o->source, true);
    sub->add_flag("--revoke-grants", o->revoke_grants,
                  "revoke the region's live grants first (without it rdmad refuses while any is live)");
    Bind(sub, o, &action, [sub, o] {
      o->access_given = sub->count("--access") > 0;
      o->pd_given = sub->count("--pd") > 0;
      CountSource(sub, &o->source);
    });
  }

  // ---- bind / invalidate mw
  CLI::App* bind = app.add_subcommand("bind", "Bind a memory window to a memory region");
  bind->require_subcommand(1);
  {
    auto o = std::make_shared<BindMwOptions>();
    CLI::App* sub = Noun(bind, Kind::kMw, false, "Bind a memory window; prints the new rkey");
    sub->add_option("NAME", o->name, NameHelp(Kind::kMw))->required();
    sub->add_option("--mr", o->mr, "memory region (mrs/N); needs mw-bind access")->required();
    sub->add_option("--offset", o->offset, "bytes from the start of the region")->capture_default_str();
    sub->add_option("--length", o->length, "bytes: 4096, 64KiB, ...")->required();
    sub->add_option("--access", o->access, "remote-read, remote-write, remote-atomic (comma-separated)")->required();
    sub->add_flag("--zero-based", o->zero_based, "remote addresses start at 0 (type 2 only)");
    sub->add_option("--qp", o->qp, "queue pair to bind on (qps/N): required for type 2");
    Bind(sub, o, &action);
  }
  CLI::App* invalidate = app.add_subcommand("invalidate", "Invalidate a memory window (its rkey stops working)");
  invalidate->require_subcommand(1);
  {
    auto o = std::make_shared<NamedOptions>();
    o->kind = Kind::kMw;
    CLI::App* sub = Noun(invalidate, Kind::kMw, false, "Invalidate a memory window");
    sub->add_option("NAME", o->name, NameHelp(Kind::kMw))->required();
    BindInPlace<NamedOptions>(sub, o, &action, RunInvalidateMw);
  }

  // ---- connect qp
  CLI::App* connect = app.add_subcommand("connect", "Connect a queue pair or a CM id to a remote one");
  connect->require_subcommand(1);
  {
    auto o = std::make_shared<ConnectQpOptions>();
    CLI::App* sub = Noun(connect, Kind::kQp, false, "Move a queue pair to RTS against a remote endpoint");
    sub->add_option("NAME", o->name, NameHelp(Kind::kQp))->required();
    sub->add_option("--remote-qpn", o->remote_qpn, "remote QP number (decimal or 0x hex)")->required();
    sub->add_option("--remote-psn", o->remote_psn, "remote packet sequence number (24 bits)")->required();
    sub->add_option("--remote-gid", o->remote_gid, "remote GID: fe80::1, the full 8-group form, or IPv4 (RoCEv2)");
    sub->add_option("--remote-lid", o->remote_lid, "remote LID (InfiniBand)");
    Bind(sub, o, &action);
  }
  {
    auto o = std::make_shared<ConnectCmIdOptions>();
    CLI::App* sub = Noun(connect, Kind::kCmId, false,
                         "Resolve, create the id's QP and connect; returns once ESTABLISHED (bounded by --timeout)");
    sub->add_option("NAME", o->name, NameHelp(Kind::kCmId))->required();
    sub->add_option("--to", o->to, "remote address:port: 10.0.2.15:7471 or [fe80::1]:7471")->required();
    AddPrivateDataOptions(sub, &o->data, 56);
    sub->add_option("--resolve-timeout", o->resolve_timeout,
                    "address and route resolution, each: 2s, 500ms (default: rdmad's, 2s)");
    Bind(sub, o, &action, [sub, o] { CountPrivateData(sub, &o->data); });
  }

  // ---- listen, accept, reject, disconnect, migrate cmid
  CLI::App* listen = app.add_subcommand("listen", "Listen for rdma_cm connections on a CM id");
  listen->require_subcommand(1);
  {
    auto o = std::make_shared<ListenOptions>();
    CLI::App* sub = Noun(listen, Kind::kCmId, false, "Bind an idle CM id to an address of this host and listen");
    sub->add_option("NAME", o->name, NameHelp(Kind::kCmId))->required();
    sub->add_option("--address", o->address, "address:port: 10.0.2.15:7471, [::]:7471, 0.0.0.0:7471 (all)")
        ->required();
    sub->add_option("--backlog", o->backlog, "pending connection requests (default: rdmad's, 64)");
    Bind(sub, o, &action);
  }
  CLI::App* accept = app.add_subcommand("accept", "Accept an incoming rdma_cm connection request");
  accept->require_subcommand(1);
  {
    auto o = std::make_shared<AcceptOptions>();
    CLI::App* sub = Noun(accept, Kind::kCmId, false,
                         "Accept a CM id in CONNECT_REQUEST: creates its QP on the listener's PD");
    sub->add_option("NAME", o->name, NameHelp(Kind::kCmId))->required();
    AddPrivateDataOptions(sub, &o->data, 196);
    Bind(sub, o, &action, [sub, o] { CountPrivateData(sub, &o->data); });
  }
  CLI::App* reject = app.add_subcommand("reject", "Reject an incoming rdma_cm connection request");
  reject->require_subcommand(1);
  {
    auto o = std::make_shared<RejectOptions>();
    CLI::App* sub = Noun(reject, Kind::kCmId, false, "Reject a CM id in CONNECT_REQUEST (the id is then deleted)");
    sub->add_option("NAME", o->name, NameHelp(Kind::kCmId))->required();
    AddPrivateDataOptions(sub, &o->data, 148);
    Bind(sub, o, &action, [sub, o] { CountPrivateData(sub, &o->data); });
  }
  CLI::App* disconnect = app.add_subcommand("disconnect", "Disconnect an rdma_cm connection");
  disconnect->require_subcommand(1);
  {
    auto o = std::make_shared<NamedOptions>();
    o->kind = Kind::kCmId;
    CLI::App* sub = Noun(disconnect, Kind::kCmId, false, "rdma_disconnect a connected CM id");
    sub->add_option("NAME", o->name, NameHelp(Kind::kCmId))->required();
    BindInPlace<NamedOptions>(sub, o, &action, RunDisconnect);
  }
  CLI::App* migrate = app.add_subcommand("migrate", "Move a CM id to another event channel (rdma_migrate_id)");
  migrate->require_subcommand(1);
  {
    auto o = std::make_shared<MigrateCmIdOptions>();
    CLI::App* sub = Noun(migrate, Kind::kCmId, false, "Move a CM id (and its events) to another event channel");
    sub->add_option("NAME", o->name, NameHelp(Kind::kCmId))->required();
    sub->add_option("--to", o->to, "event channel (channels/N)")->required();
    Bind(sub, o, &action);
  }

  // ---- events (a verb without a noun)
  {
    auto o = std::make_shared<EventsOptions>();
    CLI::App* sub = app.add_subcommand(
        "events", "Print rdma_cm events: the retained ones (stops after 1s without events), or --follow new ones");
    sub->add_option("--channel", o->channel, "only events delivered on this channel (channels/N)");
    sub->add_option("--cmid", o->cm_id, "only events of this CM id (and connect requests on it, if it listens)");
    sub->add_option("--type", o->types,
                    "only these types (repeat or comma-separate): established, disconnected, connect-request, ...")
        ->delimiter(',');
    sub->add_flag("-f,--follow", o->follow, "keep streaming new events until rdmad ends the stream (Ctrl-C to stop)");
    sub->add_option("--after", o->after,
                    "replay the retained events after this sequence first (default: 1, or 0 = none with --follow)");
    sub->callback([o, &action] {
      action.run = [o](Context& ctx) {
        auto plan = Validate(*o);
        if (!plan.ok()) return UsageError(ctx, plan.status(), "events");
        return Run(*plan, ctx);
      };
    });
  }

  // ---- audit: the audit trail (WatchAudit, admins only); `watch audit` is `audit --follow`
  auto add_audit = [&action](CLI::App* sub, bool follow_flag) {
    auto o = std::make_shared<AuditOptions>();
    o->follow = !follow_flag;
    if (follow_flag) {
      sub->add_flag("-f,--follow", o->follow, "keep streaming new records until rdmad ends the stream (Ctrl-C to stop)");
    }
    sub->add_flag("--from-oldest", o->from_oldest, "every record rdmad retains first (the default without --follow)");
    sub->add_option("--after", o->after, "the retained records after this sequence first, then the new ones");
    sub->callback([o, &action] {
      action.run = [o](Context& ctx) {
        auto plan = Validate(*o);
        if (!plan.ok()) return UsageError(ctx, plan.status(), "audit");
        return Run(*plan, ctx);
      };
    });
  };
  add_audit(app.add_subcommand("audit",
                               "Print rdmad's audit records (admins only): the retained ones (stops after 1s without "
                               "records), or --follow new ones"),
            true);

  // ---- grants: grant (a verb without a noun), renew, revoke, watch
  {
    auto o = std::make_shared<GrantOptions>();
    CLI::App* sub = app.add_subcommand(
        "grant",
        "Issue a grant: a remote key to a range of a memory region, for one client, for a lease. Prints the grant "
        "and its token: a SECRET that lets its holder connect once and read the range (give it only to that "
        "client; --token-file keeps it off the terminal)");
    sub->add_option("MR", o->mr, NameHelp(Kind::kMr))->required();
    sub->add_option("--offset", o->offset, "bytes from the start of the region")->capture_default_str();
    sub->add_option("--length", o->length, "bytes the grant covers: 4096, 64KiB, 1MiB")->required();
    sub->add_option("--for", o->principal, "the client the grant is for (its principal): app-7")->required();
    sub->add_option("--ttl", o->ttl, "the lease: 60s, 5m (default: rdmad's, 60s); 'rdmactl renew' extends it");
    sub->add_flag("--write", o->write, "remote-write as well as remote-read (the region needs local-write)");
    sub->add_option("--token-file", o->token_file,
                    "write the token's raw bytes to this file (created or truncated, mode 0600) instead of printing "
                    "it");
    sub->callback([o, &action] {
      action.run = [o](Context& ctx) {
        auto plan = Validate(*o);
        if (!plan.ok()) return UsageError(ctx, plan.status(), "grant");
        return Run(*plan, ctx);
      };
    });
  }
  CLI::App* renew = app.add_subcommand("renew", "Extend a grant's lease");
  renew->require_subcommand(1);
  {
    auto o = std::make_shared<RenewGrantOptions>();
    CLI::App* sub = Noun(renew, Kind::kGrant, false, "Extend a grant's lease: it then ends --ttl from now");
    sub->add_option("NAME", o->name, NameHelp(Kind::kGrant))->required();
    sub->add_option("--ttl", o->ttl, "the new lease, from now: 60s, 5m (at most rdmad's max_grant_ttl)")->required();
    Bind(sub, o, &action);
  }
  CLI::App* revoke = app.add_subcommand("revoke", "Revoke a grant (returns once its key is dead at the NIC)");
  revoke->require_subcommand(1);
  {
    auto o = std::make_shared<NamedOptions>();
    o->kind = Kind::kGrant;
    CLI::App* sub = Noun(revoke, Kind::kGrant, false, "Revoke a grant: its key dies, its client is disconnected");
    sub->add_option("NAME", o->name, NameHelp(Kind::kGrant))->required();
    BindInPlace<NamedOptions>(sub, o, &action, RunRevokeGrant);
  }
  CLI::App* watch = app.add_subcommand("watch", "Stream changes as they happen");
  watch->require_subcommand(1);
  {
    auto o = std::make_shared<WatchGrantsOptions>();
    CLI::App* sub = Noun(watch, Kind::kGrant, true,
                         "Print grant events (issued, activated, renewed, revoked, expired) as they happen, until "
                         "rdmad ends the stream (Ctrl-C to stop)");
    sub->add_option("--mr", o->mr, "only grants on this memory region (mrs/N)");
    sub->add_option("--for", o->principal, "only grants for this principal");
    sub->add_flag("--from-oldest", o->from_oldest,
                  "every event rdmad retains from its start first (after a restart: the grants it ended, RESTARTED)");
    Bind(sub, o, &action);
  }
  add_audit(watch->add_subcommand("audit",
                                  "Print rdmad's audit records (admins only) as they are made, until rdmad ends the "
                                  "stream (Ctrl-C to stop)"),
            false);

  // ---- the data plane: read, bench read
  // Both take an MR and issue (then revoke) their own grant: a token is single use and only IssueGrant
  // returns it. --token-file with --endpoint reads through a grant issued elsewhere instead.
  auto add_grant_source = [](CLI::App* sub, GrantSourceOptions* g, const std::string& ttl_default) {
    sub->add_option("MR", g->mr,
                    NameHelp(Kind::kMr) + ": rdmactl issues a grant over the range, and revokes it at the end");
    sub->add_option("--offset", g->offset,
                    "start of the range: bytes from the start of the region (with --token-file: of the granted "
                    "range); default 0");
    sub->add_option("--length", g->length, "bytes in the range (default: to the end of the region, or of the grant)");
    sub->add_option("--ttl", g->ttl, "the lease of the grant rdmactl issues (default: " + ttl_default + ")");
    sub->add_option("--for", g->principal, "the principal of the grant rdmactl issues")->capture_default_str();
    auto* token = sub->add_option(
        "--token-file", g->token_file,
        "instead of an MR: the token of a grant issued elsewhere (a secret: raw, as 'rdmactl grant --token-file' "
        "writes it, or hex); nothing is issued or revoked");
    auto* endpoint = sub->add_option("--endpoint", g->endpoint,
                                     "with --token-file: rdmad's data-plane listener, address:port (10.0.2.15:7471)");
    token->needs(endpoint);
    endpoint->needs(token);
  };
  auto count_grant_source = [](CLI::App* sub, GrantSourceOptions* g) {
    g->ttl_given = sub->count("--ttl") > 0;
    g->principal_given = sub->count("--for") > 0;
  };
  {
    auto o = std::make_shared<ReadOptions>();
    CLI::App* sub = app.add_subcommand(
        "read",
        "Read a range of a memory region through a grant (RDMA reads from this process, in chunks of up to 1MiB) to "
        "stdout or a file");
    add_grant_source(sub, &o->source, "rdmad's, 60s");
    sub->add_option("--out-file", o->output_file, "write the bytes to this file instead of stdout");
    sub->callback([sub, o, &action, count_grant_source] {
      count_grant_source(sub, &o->source);
      action.run = [o](Context& ctx) {
        auto plan = Validate(*o);
        if (!plan.ok()) return UsageError(ctx, plan.status(), "read");
        return Run(*plan, ctx);
      };
    });
  }
  CLI::App* bench = app.add_subcommand("bench", "Measure the data plane");
  bench->require_subcommand(1);
  {
    auto o = std::make_shared<BenchReadOptions>();
    CLI::App* sub = bench->add_subcommand(
        "read",
        "Keep --depth RDMA reads of --size outstanding through one grant for --duration; print p50/p99/p999 latency "
        "(us), IOPS and MiB/s");
    add_grant_source(sub, &o->source, "--duration + 60s");
    sub->add_option("--size", o->size, "bytes per read: 4KiB, 64KiB, 1MiB")->capture_default_str();
    sub->add_option("--depth", o->depth, "reads kept outstanding (the connection's queue depth)")
        ->capture_default_str();
    sub->add_option("--duration", o->duration, "how long to post reads: 10s, 1m")->capture_default_str();
    sub->callback([sub, o, &action, count_grant_source] {
      count_grant_source(sub, &o->source);
      action.run = [o](Context& ctx) {
        auto plan = Validate(*o);
        if (!plan.ok()) return UsageError(ctx, plan.status(), "bench read");
        return Run(*plan, ctx);
      };
    });
  }

  // ---- delete
  CLI::App* del =
      app.add_subcommand("delete", "Delete a protection domain, memory region, window, queue pair, channel or CM id");
  del->require_subcommand(1);
  const struct {
    Kind kind;
    const char* description;
  } kDeletable[] = {
      {Kind::kPd, "Delete a protection domain (refused while it holds resources unless --cascade, or while its "
                  "regions have live grants unless --revoke-grants)"},
      {Kind::kMr, "Deregister a memory region (refused while windows are bound to it, or while it has live grants "
                  "unless --revoke-grants)"},
      {Kind::kMw, "Deallocate a memory window"},
      {Kind::kQp, "Destroy a queue pair (refused while type 2 windows are bound on it)"},
      {Kind::kChannel, "Delete an event channel (refused while CM ids live on it)"},
      {Kind::kCmId, "Destroy a CM id and its QP (refused while type 2 windows are bound on its QP)"},
  };
  for (const auto& d : kDeletable) {
    auto o = std::make_shared<NamedOptions>();
    o->kind = d.kind;
    CLI::App* sub = Noun(del, d.kind, false, d.description);
    sub->add_option("NAME", o->name, NameHelp(d.kind))->required();
    if (d.kind == Kind::kPd) {
      sub->add_flag("--cascade", o->cascade, "release its windows, regions and queue pairs first");
    }
    if (d.kind == Kind::kPd || d.kind == Kind::kMr) {
      sub->add_flag("--revoke-grants", o->revoke_grants,
                    d.kind == Kind::kPd
                        ? "revoke the live grants on its regions first (without it rdmad refuses while any is live)"
                        : "revoke its live grants first (without it rdmad refuses while any is live)");
    }
    BindInPlace<NamedOptions>(sub, o, &action, RunDelete);
  }

  // ---- tenants: describe tenant (kubectl's describe: everything about one), whoami
  CLI::App* describe = app.add_subcommand("describe", "Show everything about one resource, for people");
  describe->require_subcommand(1);
  {
    auto o = std::make_shared<NamedOptions>();
    o->kind = Kind::kTenant;
    CLI::App* sub = Noun(describe, Kind::kTenant, false,
                         "A tenant: every quota (used, limit), its principals, file roots, devices and PDs");
    sub->add_option("NAME", o->name, NameHelp(Kind::kTenant))->required();
    BindInPlace<NamedOptions>(sub, o, &action, RunDescribeTenant);
  }
  app.add_subcommand("whoami", "Who rdmad takes you to be: principal, tenant, role, transport")->callback([&action] {
    action.run = RunWhoAmI;
  });

  // ---- health, version
  app.add_subcommand("health", "Check that rdmad is serving (gRPC health)")->callback([&action] {
    action.run = RunHealth;
  });
  app.add_subcommand("version", "Print rdmactl's version")->callback([&action] { action.run = RunVersion; });

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

  // Parse. No arguments at all: help, as kubectl does.
  if (arguments.empty()) {
    out << app.help();
    return kExitOk;
  }
  const std::set<std::string> valued = {"--server", "-o",         "--output",  "--timeout",
                                        "--tls-ca", "--tls-cert", "--tls-key", "--tls-server-name"};
  std::vector<std::string> args = arguments;
  if (args.front() == "help") {  // kubectl's "help [VERB [NOUN]]" is "[VERB [NOUN]] --help"
    args.erase(args.begin());
    args.push_back("--help");
  }
  // TYPE/NAME only where a noun follows the verb ("events --channel channels/2" has none).
  if (std::vector<size_t> verb = BareWords(args, valued, 1); !verb.empty()) {
    CLI::App* v = FindSubcommand(&app, args[verb[0]]);
    if (v == nullptr || !v->get_subcommands([](CLI::App*) { return true; }).empty()) {
      args = SplitTypeSlashName(std::move(args), valued);
    }
  }
  if (!CheckVerbAndNoun(&app, args, valued, err)) return kExitUsage;
  std::reverse(args.begin(), args.end());  // CLI11 takes them reversed
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e, out, err) == 0 ? kExitOk : kExitUsage;  // --help is a ParseError with exit code 0
  }
  if (!action.run) {  // unreachable: every leaf subcommand sets it
    err << "error: no command\n";
    return kExitUsage;
  }

  absl::StatusOr<std::unique_ptr<Context>> ctx = MakeContext(global, out, err);
  if (!ctx.ok()) {
    err << "error: " << ctx.status().message() << "\n";
    if (app.got_subcommand("read")) err << "hint: -o is the output format; 'read' writes to a file with --out-file FILE\n";
    return kExitUsage;
  }
  if (channel != nullptr) (*ctx)->UseChannel(std::move(channel));
  const int rc = action.run(**ctx);
  out.flush();
  return rc;
}

}  // namespace rdmad::cli
