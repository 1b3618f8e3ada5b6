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
#include <type_traits>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/output.h"
#include "cli/parse.h"
#include "cli/rdmactl_json.pb.h"
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
  std::chrono::milliseconds timeout() const { return timeout_; }
  const std::string& server() const { return server_; }
  std::ostream& out() { return out_; }
  std::ostream& err() { return err_; }
  void set_command(std::string command) { command_ = std::move(command); }

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

// ---- printing

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
// of cli/rdmactl_json.proto), or the item itself for one. An empty list: "No resources found<scope>." on stderr,
// except with json.
//
// FilterBy adds `--FLAG VALUE` (a name of another kind, or free text), which narrows the list to the items
// `preposition` that one ("get mrs --pd pds/1": those in pds/1); the List* call takes the filters' values in
// order, then, with WithAll, whether --all (the recently ended items too) was given. Then prints more after
// the table (-o table and wide).
template <typename List, typename T>
struct GetOptions {
  using Items = google::protobuf::RepeatedPtrField<T>;
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

  Kind kind;
  std::function<Columns<T>()> columns;
  std::function<absl::StatusOr<Items>(client::Client&, const GetOptions&)> list;
  std::function<absl::StatusOr<Items>(client::Client&, const std::string& name)> get;
  std::vector<Filter> filters;
  bool with_all = false, all = false;
  std::function<void(Context&, const Items&, bool one)> then;
  std::string name;

  void Flags(CLI::App* sub) {
    AddName(sub, &name, kind, false);
    for (Filter& f : filters) {
      CLI::Option* o = sub->add_option(f.flag, f.value, "only those " + f.preposition + " this " + f.what +
                                                            (f.by ? std::string(" (") + Info(*f.by).plural + "/N)" : ""));
      if (f.by) o->transform(NameFlag(*f.by));
    }
    if (with_all) sub->add_flag("--all", all, "also the recently ended ones rdmad remembers (revoked, expired, ...)");
  }
  absl::Status Validate() const {
    std::vector<std::string> flags;
    bool filtered = all;
    for (const Filter& f : filters) flags.push_back(f.flag), filtered = filtered || !f.value.empty();
    if (with_all) flags.push_back("--all");
    if (name.empty() || !filtered) return absl::OkStatus();
    if (flags.size() == 1) return UsageError(flags[0] + " filters a list: give either NAME or " + flags[0]);
    const std::string last = flags.back();
    flags.pop_back();
    return UsageError(absl::StrJoin(flags, ", ") + " and " + last + " filter a list: give either NAME or filters");
  }
  int Run(Context& ctx) const {
    const bool one = !name.empty();
    absl::StatusOr<Items> items = one ? get(ctx.client(), name) : list(ctx.client(), *this);
    if (!items.ok()) return ctx.Fail(items.status());
    if (ctx.format() == Format::kJson) {
      List list;
      *list.mutable_items() = *items;
      ctx.out() << (one ? ToJson(items->Get(0)) : ToJson(list));
      return kExitOk;
    }
    if (ctx.format() == Format::kName) {
      for (const T& item : *items) ctx.out() << item.name() << "\n";
    } else if (!items->empty()) {
      ctx.out() << MakeTable(columns(), *items, ctx.wide()).Render();
      if (then) then(ctx, *items, one);
    }
    if (!items->empty()) return kExitOk;
    std::string scope;
    for (const Filter& f : filters) scope += f.value.empty() ? "" : " " + f.preposition + " " + f.value;
    ctx.err() << "No resources found" << scope << (with_all && !all ? " (--all shows the recently ended ones too)" : "")
              << ".\n";
    return kExitOk;
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
    } else if (count_ == 0 && ctx_.format() != Format::kJson) {
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
