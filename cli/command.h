// What every rdmactl command is built from: the Context it runs with (global flags, streams, the client), the
// Registry each command group (cli/cmd_*.cc) adds its subcommands to, typed flags (CLI11 validators that turn
// sizes, names, durations and numbers into values while parsing, so a bad one is a usage error before
// anything is sent), and printing a result, a list or a stream in the chosen format. Private to cli/.
//
// A command is kubectl's shape: an options struct whose Flags() binds CLI11 options to its fields (complete),
// whose Validate(), where it has one, checks what no single flag can (validate), and whose Run() calls client/ and
// prints (run).
//
// Thread-safety: single-threaded (one command per process).
#ifndef RDMAD_CLI_COMMAND_H_
#define RDMAD_CLI_COMMAND_H_

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "cli/output.h"
#include "cli/parse.h"
#include "cli/rdmactl_json.pb.h"
#include "cli/selector.h"
#include "cli/sort.h"
#include "cli/yaml.h"
#include "client/client.h"

namespace rdmad::client {
struct BenchResult;
}  // namespace rdmad::client

namespace rdmad::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitServerError = 1;  // rdmad (or the connection to it) failed the request
inline constexpr int kExitUsage = 2;        // the command line is wrong; nothing was sent

class Context {
 public:
  Context(std::string server, Format format, std::chrono::milliseconds timeout, std::ostream& out, std::ostream& err);
  client::Client& client();  // dialed on first use
  // client() then talks over `channel` (TLS, or the tests' in-process fake) instead of dialing server().
  void UseChannel(std::shared_ptr<grpc::Channel> channel);

  Format format() const { return format_; }
  bool wide() const { return format_ == Format::kWide; }
  bool structured() const { return format_ == Format::kJson || format_ == Format::kYaml; }  // -o json, -o yaml
  std::chrono::milliseconds timeout() const { return timeout_; }
  const std::string& server() const { return server_; }
  std::ostream& out() { return out_; }
  std::ostream& err() { return err_; }
  void set_command(std::string command) { command_ = std::move(command); }
  // --ignore-not-found (get NAME, describe, delete): Fail() of a NOT_FOUND prints nothing and returns kExitOk.
  void set_ignore_not_found(bool ignore) { ignore_not_found_ = ignore; }
  // The config file's path (cli/config_file.h) and the context in use ("" for none).
  void set_config(std::string path, std::string context) { config_path_ = std::move(path), context_ = std::move(context); }
  const std::string& config_path() const { return config_path_; }
  const std::string& context() const { return context_; }

  // "error: ..." (with rdmad's ErrorDetail and hints) on err; returns kExitServerError.
  int Fail(const absl::Status& status);
  // "error: ...\nRun 'rdmactl VERB NOUN --help' for usage." on err; returns kExitUsage.
  int Usage(const absl::Status& status);

 private:
  std::string server_;
  Format format_;
  std::chrono::milliseconds timeout_;
  std::ostream& out_;
  std::ostream& err_;
  std::string command_;
  bool ignore_not_found_ = false;
  std::string config_path_, context_;
  std::unique_ptr<client::Client> client_;
};

inline absl::Status UsageError(absl::string_view message) { return absl::InvalidArgumentError(message); }

// ---- the registry

// Whether an options struct has a Validate() (without one, there is nothing to check beyond the flags).
template <typename Options, typename = void>
struct HasValidate : std::false_type {};
template <typename Options>
struct HasValidate<Options, std::void_t<decltype(std::declval<Options&>().Validate())>> : std::true_type {};

// What `VERB KIND NAME` with nothing else to give runs: calls client/ for NAME and prints.
using NamedRunFn = std::function<int(Context&, const std::string& name)>;

class Registry {
 public:
  using RunFn = std::function<int(Context&)>;
  explicit Registry(CLI::App* root) : root_(root) {}

  // The verb `name`, made by rdmactl.cc (every verb, in the order of its help).
  CLI::App* Verb(const std::string& name);
  // `verb NOUN`: called by the kind's singular (plural: by its plural), the other an alias.
  CLI::App* Noun(const std::string& verb, Kind kind, const std::string& description, bool plural = false);
  CLI::App* root() const { return root_; }
  // What runs when `sub` is the command chosen (a command without flags: health, version, whoami).
  void OnRun(CLI::App* sub, RunFn run);
  // Binds a new Options to `sub`: Flags(sub) now; Validate() then Run(ctx) when it is chosen.
  template <typename Options>
  std::shared_ptr<Options> Add(CLI::App* sub, Options initial = Options()) {
    auto o = std::make_shared<Options>(std::move(initial));
    o->Flags(sub);
    OnRun(sub, [o](Context& ctx) {
      absl::Status valid;
      if constexpr (HasValidate<Options>::value) valid = o->Validate();
      return valid.ok() ? o->Run(ctx) : ctx.Usage(valid);
    });
    return o;
  }
  // `verb KIND NAME` with nothing else to give: run(ctx, name) once NAME is parsed.
  void Named(const std::string& verb, Kind kind, const std::string& description, NamedRunFn run);
  const RunFn& chosen() const { return chosen_; }

 private:
  CLI::App* root_;
  RunFn chosen_;
};

// Each command group registers its subcommands (in the order of their help).
void RegisterDeviceCommands(Registry& r);
void RegisterPdCommands(Registry& r);
void RegisterMrCommands(Registry& r);
void RegisterMwCommands(Registry& r);
void RegisterQpCommands(Registry& r);
void RegisterCmCommands(Registry& r);
void RegisterGrantCommands(Registry& r);
void RegisterTenantCommands(Registry& r);
void RegisterAuditCommands(Registry& r);
void RegisterReadCommands(Registry& r);
void RegisterServerCommands(Registry& r);
void RegisterConfigCommands(Registry& r);
void RegisterCompletionCommands(Registry& r);

// ---- typed flags: CLI11 validators that check a flag's text with a parser of cli/parse.h (its error is the
// flag's error) and, where the command uses the value's canonical text, replace the text with it

// `parse` checks the text; with `show`, the text becomes show(value).
template <typename Parse, typename Show = std::nullptr_t>
CLI::Validator Transform(const std::string& what, Parse parse, Show show = nullptr) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {  // `show` captured only where used
        auto value = parse(text);
        if (!value.ok()) return std::string(value.status().message());
        if constexpr (!std::is_null_pointer_v<Show>) text = show(*value);
        return "";
      },
      what);
}
inline std::string Decimal(uint64_t n) { return absl::StrCat(n); }
inline std::string Same(std::string text) { return text; }

// The text becomes what `parse` makes of it: "0a:0b" -> its bytes (ParseHexBytes), "fe80::1" -> the full GID.
inline CLI::Validator TextFlag(const std::string& what, absl::StatusOr<std::string> (*parse)(absl::string_view)) {
  return Transform(what, parse, Same);
}
inline CLI::Validator SizeFlag() { return Transform("SIZE", ParseSize, Decimal); }  // "4KiB" -> "4096"
inline CLI::Validator NameFlag(Kind kind) {                                          // "17", "mr/17" -> "mrs/17"
  return Transform("NAME", [kind](const std::string& t) { return NormalizeName(kind, t); }, Same);
}
inline CLI::Validator UintFlag(uint64_t max) {  // "0x11" -> "17" (decimal or 0x hex, never octal)
  return Transform("N", [max](const std::string& t) { return ParseUint(t, max); }, Decimal);
}
CLI::Validator DurationFlag(int64_t max_ms);  // "1m30s" -> "90000" (milliseconds, positive, at most max_ms)
// Checked only: the command parses the text again (AccessList, ParseSocketAddress, ParseFormat).
inline CLI::Validator AccessFlag() { return Transform("ACCESS", ParseAccess); }  // "local-write,remote-read"
inline CLI::Validator AddressFlag() { return Transform("ADDRESS:PORT", ParseSocketAddress); }  // "[fe80::1]:7471"
inline CLI::Validator FormatFlag() { return Transform("FORMAT", ParseFormat); }  // table, wide, json or name
// The NAME positional of a kind (normalized).
CLI::Option* AddName(CLI::App* sub, std::string* name, Kind kind, bool required = true);
// --revoke-grants (delete mr, delete pd, rereg mr): revoke `which` first; without it rdmad refuses while any is live.
inline CLI::Option* AddRevokeGrants(CLI::App* sub, bool* revoke, const std::string& which) {
  return sub->add_flag("--revoke-grants", *revoke, "revoke " + which + " first (without it rdmad refuses while any is live)");
}
// A duration flag into milliseconds (0: not given) that fits a request's uint32 field.
CLI::Option* AddMillis(CLI::App* sub, const std::string& flag, std::function<void(uint32_t)> set, const std::string& help);
std::vector<v1::Access> AccessList(const std::string& text);  // of a text AccessFlag() accepted
std::string NameHelp(Kind kind);
// The bytes of a small file a flag names (--data-file, --token-file); one that cannot be read, or is larger than
// any such file should be, is a usage error ("FLAG: 'PATH' is larger than 4096 bytes" and `why`).
absl::StatusOr<std::string> ReadFlagFile(const std::string& flag, const std::string& path, const std::string& why);

// --dry-run=none|client|server (register mr, grant, bind mw; kubectl's): client prints the request and sends
// nothing; server sends it with validate_only, so rdmad checks it exactly as for real and makes nothing.
enum class DryRun { kNone, kClient, kServer };
CLI::Option* AddDryRun(CLI::App* sub, DryRun* dry_run);
// --dry-run=client: `request` (-o json or yaml: as such; table and wide: "dry run (client): rdmactl would call
// CALL with:" and the request as YAML; name: nothing). kExitOk.
int PrintDryRunRequest(Context& ctx, const google::protobuf::Message& request, const std::string& call);
inline client::MutateOptions Mutate(DryRun dry_run) {
  client::MutateOptions o;
  o.validate_only = dry_run == DryRun::kServer;
  return o;
}

// ---- printing

// The kernel's numbers (pdn, mrn, qpn, cm-idn) of what the caller sees, by name ("mrs/3" -> "7"), from
// ListKernelIds on every device ListDevices shows. On a failure, what is known so far and *note says why
// the rest is missing ("" when nothing failed).
std::map<std::string, std::string> KernelIdsByName(client::Client& client, std::string* note);
// Its cell: the number, or "<unknown>" (no exact match, or the numbers could not be read).
std::string KernelIdCell(const std::map<std::string, std::string>& ids, const std::string& name);

// One result of a change: -o json the message, -o name `names`, else `message` (and a newline, unless it ends in
// one: the texts of output.h do).
int PrintResult(Context& ctx, const google::protobuf::Message& result, const std::vector<std::string>& names,
                const std::string& message);
// A change's result named by its own name(): rdmad's error, or PrintResult with message(result).
template <typename T, typename MessageFn>
int Done(Context& ctx, const absl::StatusOr<T>& result, MessageFn message) {
  if (!result.ok()) return ctx.Fail(result.status());
  return PrintResult(ctx, *result, {result->name()}, message(*result));
}
// The run of Registry::Named for a call on the NAME alone: its result's name and `what` ("mws/1 invalidated").
template <typename T>
NamedRunFn Says(absl::StatusOr<T> (client::Client::*call)(const std::string&), std::string what) {
  return [call, what](Context& ctx, const std::string& name) {
    return Done(ctx, (ctx.client().*call)(name), [&what](const T& result) { return result.name() + what; });
  };
}
// The same for a deletion rdmad answers with an empty Response: "NAME deleted".
template <typename Response>
NamedRunFn Deletes(absl::Status (client::Client::*call)(const std::string&)) {
  return [call](Context& ctx, const std::string& name) {
    absl::Status status = (ctx.client().*call)(name);
    return status.ok() ? PrintResult(ctx, Response(), {name}, name + " deleted") : ctx.Fail(status);
  };
}

// `get KIND [NAME]`: the list (a List* call and its answer's repeated field) or one item (a Get* call). Printed
// as the table of the kind's columns (NAME first), -o name the names, -o json {"items": [...]} as List (a message
// of cli/rdmactl_json.proto), or the item itself for one; -o yaml the same as YAML. An empty list: "No resources
// found<scope>." on stderr, except with json and yaml.
//
// FilterBy adds `--FLAG VALUE` (a name of another kind, or free text), which narrows the list to the items
// `preposition` that one ("get mrs --pd pds/1": those in pds/1); the List* call takes the filters' values in
// order, then, with WithAll, whether --all (the recently ended items too) was given. Then prints more after
// the table (-o table and wide). WithLabel adds -l/--selector (cli/selector.h) over the items' label. Every get
// has --no-headers, --sort-by (a column or a JSON field, cli/sort.h) and -w/--watch: with WatchWith, the kind's
// Watch RPC says what changed; without, the list is fetched again every --watch-interval and compared.
template <typename List, typename T>
struct GetOptions {
  using Items = google::protobuf::RepeatedPtrField<T>;
  // Calls opened() once the stream is open (before any event; false: stop), then on(item,
  // "ADDED"|"MODIFIED"|"DELETED") per change until the stream ends or `on` returns false.
  using OnChange = std::function<bool(const T&, const char* event)>;
  using WatchFn =
      std::function<absl::Status(client::Client&, const GetOptions&, const std::function<bool()>& opened, const OnChange&)>;
  // Whether `event` (an item as a change left it) is no newer than `shown` (the same item as printed last).
  using Stale = std::function<bool(const T& event, const T& shown)>;
  struct Filter {
    std::string flag, preposition, what;
    std::optional<Kind> by;  // a name of this kind, or (nullopt) free text
    std::string value;
  };
  template <typename Response, typename... Args>
  GetOptions(Kind kind, std::function<Columns<T>()> columns, absl::StatusOr<Response> (client::Client::*call)(Args...),
             const Items& (Response::*field)() const, absl::StatusOr<T> (client::Client::*get)(const std::string&))
      : kind(kind), columns(std::move(columns)) {
    list = [call, field](client::Client& c, const GetOptions& o) -> absl::StatusOr<Items> {
      absl::StatusOr<Response> response;
      if constexpr (sizeof...(Args) == 0) response = (c.*call)();
      if constexpr (sizeof...(Args) == 1) response = (c.*call)(o.filters[0].value);
      if constexpr (sizeof...(Args) == 3) response = (c.*call)(o.filters[0].value, o.filters[1].value, o.all);
      if (!response.ok()) return response.status();
      return ((*response).*field)();
    };
    this->get = [get](client::Client& c, const std::string& name) -> absl::StatusOr<Items> {
      absl::StatusOr<T> item = (c.*get)(name);
      if (!item.ok()) return item.status();
      Items items;
      *items.Add() = *std::move(item);
      return items;
    };
  }
  GetOptions& FilterBy(std::string flag, Kind by, std::string preposition) {
    filters.push_back({std::move(flag), std::move(preposition), Info(by).title, by, ""});
    return *this;
  }
  GetOptions& FilterBy(std::string flag, std::string what, std::string preposition) {
    filters.push_back({std::move(flag), std::move(preposition), std::move(what), std::nullopt, ""});
    return *this;
  }
  GetOptions& WithAll() { return with_all = true, *this; }
  GetOptions& Then(std::function<void(Context&, const Items&, bool one)> more) { return then = std::move(more), *this; }
  GetOptions& WithLabel(std::function<std::string(const T&)> of) { return label = std::move(of), *this; }
  // -o wide adds a column (`header`: PDN, MRN, CM-IDN) with each item's kernel number (KernelIdsByName).
  GetOptions& WithKernelIds(std::string header) { return kernel_header = std::move(header), *this; }
  // -w through the kind's Watch RPC: the stream is opened first and the list taken once it is open, so no
  // change falls between them; an event the list already shows (`stale`; without it: an event whose item is
  // exactly as shown) is not printed again.
  GetOptions& WatchWith(WatchFn fn, std::string ended, Stale stale = nullptr) {
    return watch_rpc = std::move(fn), watch_ended = std::move(ended), watch_stale = std::move(stale), *this;
  }

  Kind kind;
  std::function<Columns<T>()> columns;
  std::function<absl::StatusOr<Items>(client::Client&, const GetOptions&)> list;
  std::function<absl::StatusOr<Items>(client::Client&, const std::string& name)> get;
  std::vector<Filter> filters;
  bool with_all = false, all = false;
  std::function<void(Context&, const Items&, bool one)> then;
  std::function<std::string(const T&)> label;
  std::string kernel_header;
  WatchFn watch_rpc;
  std::string watch_ended;
  Stale watch_stale;
  std::string name, sort_by, selector_text;
  bool no_headers = false, watch = false, watch_events = false;
  int64_t watch_interval_ms = 1000;
  CLI::Option* interval_flag = nullptr;
  CLI::Option* events_flag = nullptr;
  // Validate()'s: the selector, and the column (index) or field to sort by; sort_kernel: by the kernel's
  // numbers (kernel_header), which Fetch then asks for and keeps for -o wide's column (one ListKernelIds).
  std::optional<Selector> selector;
  int sort_column = -1;
  FieldPath sort_field;
  bool sort_kernel = false;
  mutable std::optional<std::map<std::string, std::string>> kernel_ids;
  mutable std::string kernel_note;

  void Flags(CLI::App* sub) {
    AddName(sub, &name, kind, false);
    for (Filter& f : filters) {
      CLI::Option* o = sub->add_option(f.flag, f.value, "only those " + f.preposition + " this " + f.what +
                                                            (f.by ? std::string(" (") + Info(*f.by).plural + "/N)" : ""));
      if (f.by) o->transform(NameFlag(*f.by));
    }
    if (with_all) sub->add_flag("--all", all, "also the recently ended ones rdmad remembers (revoked, expired, ...)");
    if (label) {
      sub->add_option("-l,--selector", selector_text,
                      "only those whose label matches: key=value, key!=value, key, !key, 'key in (a,b)', 'key notin "
                      "(a,b)'; comma-separated, all must hold (docs/cli.md: Lists)")
          ->transform(Transform("SELECTOR", Selector::Parse));
    }
    sub->add_flag("--no-headers", no_headers, "table and wide: no header line");
    sub->add_option("--sort-by", sort_by,
                    "sort the list by a column (its header, any case: NAME, LENGTH; -o wide's too) or a field of -o "
                    "json (.length, {.binding.mr})");
    sub->add_flag("-w,--watch", watch,
                  watch_rpc ? "print the list, then each change as it happens (the kind's Watch RPC; Ctrl-C to stop)"
                            : "print the list, then each change (the list fetched again every --watch-interval; "
                              "Ctrl-C to stop)");
    interval_flag = sub->add_option("--watch-interval", watch_interval_ms,
                                    "with --watch: how often to fetch the list again (default 1s)")
                        ->transform(DurationFlag(INT64_MAX));
    events_flag = sub->add_flag("--output-watch-events", watch_events,
                                "with --watch: say what happened to each item (ADDED, MODIFIED, DELETED)");
  }
  absl::Status Validate() {
    std::vector<std::string> flags;
    bool filtered = all || !selector_text.empty();
    for (const Filter& f : filters) flags.push_back(f.flag), filtered = filtered || !f.value.empty();
    if (with_all) flags.push_back("--all");
    if (label) flags.push_back("-l/--selector");
    selector.reset();
    if (!selector_text.empty()) selector = *Selector::Parse(selector_text);  // checked by the flag
    if (!watch && (interval_flag->count() > 0 || events_flag->count() > 0)) {
      return UsageError(std::string(interval_flag->count() > 0 ? "--watch-interval" : "--output-watch-events") +
                        " goes with -w/--watch");
    }
    if (absl::Status s = ResolveSortBy(); !s.ok()) return s;
    if (name.empty() || !filtered) return absl::OkStatus();
    if (flags.size() == 1) return UsageError(flags[0] + " filters a list: give either NAME or " + flags[0]);
    const std::string last = flags.back();
    flags.pop_back();
    return UsageError(absl::StrJoin(flags, ", ") + " and " + last + " filter a list: give either NAME or filters");
  }
  absl::Status ResolveSortBy() {
    sort_column = -1;
    sort_field.clear();
    sort_kernel = false;
    if (sort_by.empty()) return absl::OkStatus();
    const Columns<T> cs = columns();
    std::vector<std::string> headers;
    for (size_t i = 0; i < cs.size(); i++) {
      headers.push_back(cs[i].header);
      if (sort_by[0] != '.' && sort_by[0] != '{' && absl::EqualsIgnoreCase(cs[i].header, sort_by)) sort_column = int(i);
    }
    if (sort_column >= 0) return absl::OkStatus();
    if (!kernel_header.empty()) {
      headers.push_back(kernel_header);
      if (absl::EqualsIgnoreCase(kernel_header, sort_by)) return sort_kernel = true, absl::OkStatus();
    }
    absl::StatusOr<FieldPath> path = ParseFieldPath(T::descriptor(), sort_by);
    if (!path.ok()) {
      return UsageError("--sort-by: " + std::string(path.status().message()) +
                        (sort_by[0] == '.' || sort_by[0] == '{' ? "" : "; nor is it a column (" + absl::StrJoin(headers, ", ") + ")"));
    }
    sort_field = *std::move(path);
    return absl::OkStatus();
  }
  // The list (or the one item), narrowed by the selector and sorted.
  absl::StatusOr<Items> Fetch(Context& ctx) const {
    absl::StatusOr<Items> items = name.empty() ? list(ctx.client(), *this) : get(ctx.client(), name);
    if (!items.ok()) return items;
    std::vector<T> kept;
    for (T& item : *items) {
      if (Wanted(item)) kept.push_back(std::move(item));
    }
    kernel_ids.reset();
    kernel_note.clear();
    if (sort_kernel) {
      kernel_ids = KernelIdsByName(ctx.client(), &kernel_note);
      std::stable_sort(kept.begin(), kept.end(), [this](const T& a, const T& b) {
        return CompareCells(KernelIdCell(*kernel_ids, a.name()), KernelIdCell(*kernel_ids, b.name())) < 0;
      });
    } else if (sort_column >= 0) {
      const Columns<T> cs = columns();
      const auto& cell = cs[static_cast<size_t>(sort_column)].cell;
      std::stable_sort(kept.begin(), kept.end(), [&cell](const T& a, const T& b) { return CompareCells(cell(a), cell(b)) < 0; });
    } else if (!sort_field.empty()) {
      std::stable_sort(kept.begin(), kept.end(),
                       [this](const T& a, const T& b) { return CompareByField(a, b, sort_field) < 0; });
    }
    Items out;
    for (T& item : kept) *out.Add() = std::move(item);
    return out;
  }
  bool Wanted(const T& item) const {
    if (!name.empty() && item.name() != name) return false;
    return !selector || selector->Matches(label(item));
  }
  int Run(Context& ctx) const {
    const bool one = !name.empty();
    if (!one) ctx.set_ignore_not_found(false);  // it is about NAME
    if (watch && watch_rpc) return WatchStream(ctx);
    absl::StatusOr<Items> items = Fetch(ctx);
    if (!items.ok()) return ctx.Fail(items.status());
    if (watch) return Watch(ctx, *std::move(items));
    if (ctx.structured()) {
      List list;
      *list.mutable_items() = *items;
      ctx.out() << (one ? ToStructured(items->Get(0), ctx.format()) : ToStructured(list, ctx.format()));
      return kExitOk;
    }
    if (ctx.format() == Format::kName) {
      for (const T& item : *items) ctx.out() << item.name() << "\n";
    } else if (!items->empty()) {
      Columns<T> cs = columns();
      if (ctx.wide() && !kernel_header.empty()) {
        if (!kernel_ids) kernel_ids = KernelIdsByName(ctx.client(), &kernel_note);  // unless the sort asked
        cs.push_back({kernel_header.c_str(),
                      [ids = *kernel_ids](const T& item) { return KernelIdCell(ids, item.name()); }, true});
      }
      ctx.out() << MakeTable(cs, *items, ctx.wide()).Render(!no_headers);
      if (then) then(ctx, *items, one);
    }
    // The kernel's numbers could not all be read (-o wide, or --sort-by their column): the list stands.
    if (!kernel_note.empty()) ctx.err() << "note: " << kernel_header << ": " << kernel_note << "\n";
    if (!items->empty()) return kExitOk;
    ctx.err() << "No resources found" << Scope() << (with_all && !all ? " (--all shows the recently ended ones too)" : "")
              << ".\n";
    return kExitOk;
  }
  std::string Scope() const {
    std::string scope;
    for (const Filter& f : filters) scope += f.value.empty() ? "" : " " + f.preposition + " " + f.value;
    if (!selector_text.empty()) scope += " matching " + selector_text;
    return scope;
  }

  // Prints one watched item and its event, flushed; a table's columns as wide as `first` needs.
  std::function<bool(const T&, const char*)> Printer(Context& ctx, const Items& first) const {
    std::vector<size_t> widths = MakeTable(columns(), first, ctx.wide()).Widths();
    if (watch_events) widths.insert(widths.begin(), std::string("MODIFIED").size());
    return [this, &ctx, widths, header = !no_headers](const T& item, const char* event) mutable {
      std::string json = ToJsonLine(item);
      if (watch_events) json = absl::StrCat("{\"type\":\"", event, "\",\"object\":", absl::StripSuffix(json, "\n"), "}\n");
      switch (ctx.format()) {
        case Format::kJson: ctx.out() << json; break;
        case Format::kYaml: ctx.out() << "---\n" << JsonToYaml(json).value_or(json); break;
        case Format::kName: ctx.out() << item.name() << "\n"; break;
        case Format::kTable:
        case Format::kWide: {
          std::vector<std::string> head, row;
          if (watch_events) head.push_back("EVENT"), row.push_back(event);
          for (const Column<T>& c : columns()) {
            if (!ctx.wide() && c.wide) continue;
            head.push_back(c.header);
            row.push_back(c.cell(item));
            if (row.back().empty()) row.back() = "<none>";
          }
          if (header) ctx.out() << StreamColumns(head, widths) << "\n", header = false;
          ctx.out() << StreamColumns(row, widths) << "\n";
          break;
        }
      }
      ctx.out().flush();
      return true;
    };
  }

  // -w with the kind's Watch RPC: the stream first; once it is open, the list (each item ADDED); then each
  // change the list does not already show, until the stream ends (or the list fails).
  int WatchStream(Context& ctx) const {
    std::function<bool(const T&, const char*)> print;
    std::map<std::string, T> shown;  // by name: each item as printed last
    absl::Status listed;
    const absl::Status s = watch_rpc(
        ctx.client(), *this,
        [&] {
          absl::StatusOr<Items> items = Fetch(ctx);
          if (!items.ok()) return listed = items.status(), false;
          print = Printer(ctx, *items);
          for (const T& item : *items) print(item, "ADDED"), shown[item.name()] = item;
          return true;
        },
        [&](const T& item, const char* event) {
          if (!print || !Wanted(item)) return true;
          const bool deleted = std::string(event) == "DELETED";
          auto was = shown.find(item.name());
          if (was == shown.end()) {
            if (deleted) return true;  // ended before the list, which left it out: never shown
          } else if (watch_stale ? watch_stale(item, was->second)
                                 : item.SerializeAsString() == was->second.SerializeAsString()) {
            return true;  // the list already shows this change (it came between the stream's start and the list)
          }
          if (deleted) {
            if (was != shown.end()) shown.erase(was);
          } else {
            shown[item.name()] = item;
          }
          return print(item, event);
        });
    if (!listed.ok()) return ctx.Fail(listed);
    if (!s.ok()) return ctx.Fail(s);
    ctx.err() << watch_ended << "\n";
    return kExitOk;
  }

  // -w without a Watch RPC: the list (each item ADDED), then it again every --watch-interval, compared.
  int Watch(Context& ctx, Items current) const {
    auto print = Printer(ctx, current);
    for (const T& item : current) print(item, "ADDED");
    std::map<std::string, T> seen;
    for (T& item : current) seen.emplace(item.name(), std::move(item));
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(watch_interval_ms));
      absl::StatusOr<Items> next = Fetch(ctx);
      if (!next.ok() && !name.empty() && next.status().code() == absl::StatusCode::kNotFound) next = Items();
      if (!next.ok()) return ctx.Fail(next.status());
      std::map<std::string, T> now;
      for (T& item : *next) {
        auto was = seen.find(item.name());
        if (was == seen.end()) {
          print(item, "ADDED");
        } else if (was->second.SerializeAsString() != item.SerializeAsString()) {
          print(item, "MODIFIED");
        }
        now.emplace(item.name(), std::move(item));
      }
      for (const auto& [n, item] : seen) {
        if (now.count(n) == 0) print(item, "DELETED");
      }
      seen = std::move(now);
    }
  }
};

// A stream (events, watch grants, audit): a header and a line per event (table, wide), one JSON object per
// line (json; `json` overrides protobuf's), or the event's name. Flushed per event.
template <typename T>
class StreamPrinter {
 public:
  StreamPrinter(Context& ctx, const StreamSpec<T>& spec, std::function<std::string(const T&)> json = nullptr)
      : ctx_(ctx), spec_(spec), json_(std::move(json)) {}
  bool operator()(const T& item) {
    switch (ctx_.format()) {
      case Format::kJson: ctx_.out() << (json_ ? json_(item) : ToJsonLine(item)); break;
      case Format::kYaml: ctx_.out() << "---\n" << ToYaml(item); break;  // a document per event
      case Format::kName: ctx_.out() << spec_.name(item) << "\n"; break;
      case Format::kTable:
      case Format::kWide:
        if (count_ == 0) ctx_.out() << StreamHeader(spec_, ctx_.wide()) << "\n";
        ctx_.out() << StreamLine(spec_, item, ctx_.wide()) << "\n";
        break;
    }
    ctx_.out().flush();
    count_++;
    return true;
  }
  uint64_t count() const { return count_; }
  // The stream's end: a failure is rdmad's error and the hint for its code, if `hints` has one; else `ended`
  // when it was followed, or "No <what> found." when nothing was printed (except with -o json).
  int End(const absl::Status& status, const std::map<absl::StatusCode, std::string>& hints, bool follow,
          const std::string& ended, const std::string& what = "") const {
    if (!status.ok()) {
      const int rc = ctx_.Fail(status);
      if (auto hint = hints.find(status.code()); hint != hints.end()) ctx_.err() << "hint: " << hint->second << "\n";
      return rc;
    }
    if (follow) {
      ctx_.err() << ended << "\n";
    } else if (count_ == 0 && !ctx_.structured()) {
      ctx_.err() << "No " << what << " found.\n";
    }
    return kExitOk;
  }

 private:
  Context& ctx_;
  const StreamSpec<T>& spec_;
  std::function<std::string(const T&)> json_;
  uint64_t count_ = 0;
};

// bench read's output (cmd_read.cc): the table (READS SIZE DEPTH SECONDS IOPS MIB/S P50-US P99-US P999-US, one
// row) and the JSON message.
std::string BenchTable(const client::BenchResult& result);
json::Bench BenchJson(const client::BenchResult& result, const std::string& grant);

}  // namespace rdmad::cli

#endif  // RDMAD_CLI_COMMAND_H_
