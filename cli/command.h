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
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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
  // What runs when `sub` is the command chosen.
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

// ---- typed flags: CLI11 transforms that turn the text into the value's canonical form (or fail, naming it)

// A transform from what `parse` makes of the text: the text becomes `show(value)`, or the parse error is the
// flag's error.
template <typename T, typename Parse, typename Show>
CLI::Validator Transform(const std::string& what, Parse parse, Show show) {
  return CLI::Validator(
      [parse, show](std::string& text) -> std::string {
        absl::StatusOr<T> value = parse(text);
        if (!value.ok()) return std::string(value.status().message());
        text = show(*value);
        return "";
      },
      what);
}
// The text becomes what `parse` makes of it: "0a:0b" -> its bytes (ParseHexBytes), "fe80::1" -> the full GID.
CLI::Validator TextFlag(const std::string& what, absl::StatusOr<std::string> (*parse)(absl::string_view));
CLI::Validator SizeFlag();                   // "4KiB" -> "4096"
CLI::Validator NameFlag(Kind kind);          // "17", "mr/17" -> "mrs/17"
CLI::Validator DurationFlag(int64_t max_ms);  // "1m30s" -> "90000" (milliseconds, positive, at most max_ms)
CLI::Validator UintFlag(uint64_t max);       // "0x11" -> "17" (decimal or 0x hex, never octal)
CLI::Validator AccessFlag();                 // checks "local-write,remote-read" (ParseAccess)
CLI::Validator AddressFlag();                // checks "10.0.2.15:7471", "[fe80::1]:7471"
CLI::Validator FormatFlag();                 // "JSON" -> "json"
// The NAME positional of a kind (normalized).
CLI::Option* AddName(CLI::App* sub, std::string* name, Kind kind, bool required = true);
// A duration flag into milliseconds (0: not given) that fits a request's uint32 field.
CLI::Option* AddMillis(CLI::App* sub, const std::string& flag, std::function<void(uint32_t)> set, const std::string& help);
std::vector<v1::Access> AccessList(const std::string& text);  // of a text AccessFlag() accepted
std::string NameHelp(Kind kind);

// ---- printing

// One result of a change: -o json the message, -o name `names`, else `message`.
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
// Text for people with -o table and wide (describe, whoami): ends without a newline for PrintResult.
inline std::string Chomp(std::string text) {
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

// A list of `get`: the table (NAME first), -o name the names, -o json {"items": [...]} as List (a message of
// cli/rdmactl_json.proto). Empty: "No resources found<scope>." on stderr, except with json.
template <typename List, typename T>
int PrintList(Context& ctx, const Columns<T>& columns, const google::protobuf::RepeatedPtrField<T>& items,
              const std::string& scope) {
  if (ctx.format() == Format::kJson) {
    List list;
    *list.mutable_items() = items;
    ctx.out() << ToJson(list);
    return kExitOk;
  }
  if (ctx.format() == Format::kName) {
    for (const T& item : items) ctx.out() << item.name() << "\n";
  } else if (!items.empty()) {
    ctx.out() << MakeTable(columns, items, ctx.wide()).Render();
  }
  if (items.empty()) ctx.err() << "No resources found" << scope << ".\n";
  return kExitOk;
}

// `get KIND [NAME]`: one item (as a list of one; -o json the item itself) or the list rdmad returned.
template <typename List, typename T>
int PrintGet(Context& ctx, const Columns<T>& columns, const absl::StatusOr<google::protobuf::RepeatedPtrField<T>>& items,
             bool one, const std::string& scope = "") {
  if (!items.ok()) return ctx.Fail(items.status());
  if (one && ctx.format() == Format::kJson) {
    ctx.out() << ToJson(items->Get(0));
    return kExitOk;
  }
  return PrintList<List>(ctx, columns, *items, scope);
}
// Adapters for PrintGet: a Get* answer as a list of one, a List* answer's repeated field.
template <typename T>
absl::StatusOr<google::protobuf::RepeatedPtrField<T>> One(const absl::StatusOr<T>& item) {
  if (!item.ok()) return item.status();
  google::protobuf::RepeatedPtrField<T> items;
  *items.Add() = *item;
  return items;
}
template <typename Response, typename T>
absl::StatusOr<google::protobuf::RepeatedPtrField<T>> Items(
    const absl::StatusOr<Response>& response, const google::protobuf::RepeatedPtrField<T>& (Response::*field)() const) {
  if (!response.ok()) return response.status();
  return ((*response).*field)();
}

// `get KIND [NAME]`: the list (a List* call and its answer's repeated field; a call with a parameter gets the
// filter), or one item (a Get* call), with the kind's columns. With FilterBy, `--FLAG NAME` (of another
// kind) narrows the list to the items `preposition` that one ("get mrs --pd pds/1": those in pds/1).
template <typename List, typename T>
struct GetOptions {
  using ListFn =
      std::function<absl::StatusOr<google::protobuf::RepeatedPtrField<T>>(client::Client&, const std::string& filter)>;
  using GetFn = std::function<absl::StatusOr<T>(client::Client&, const std::string&)>;
  template <typename Response, typename... Args>
  GetOptions(Kind kind, const Columns<T>& (*columns)(), absl::StatusOr<Response> (client::Client::*call)(Args...),
             const google::protobuf::RepeatedPtrField<T>& (Response::*field)() const, GetFn get)
      : kind(kind), columns(columns), get(std::move(get)) {
    list = [call, field](client::Client& c, const std::string& filter) {
      if constexpr (sizeof...(Args) == 0) return Items((c.*call)(), field);
      else return Items((c.*call)(filter), field);
    };
  }
  GetOptions& FilterBy(std::string flag, Kind by, std::string preposition) {
    filter_flag = std::move(flag), filter_kind = by, filter_preposition = std::move(preposition);
    return *this;
  }
  Kind kind, filter_kind = Kind::kPd;
  const Columns<T>& (*columns)();
  ListFn list;
  GetFn get;
  std::string filter_flag, filter_preposition;  // no flag: no filter
  std::string name, filter;

  void Flags(CLI::App* sub) {
    AddName(sub, &name, kind, false);
    if (filter_flag.empty()) return;
    const KindInfo& by = Info(filter_kind);
    sub->add_option(filter_flag, filter,
                    std::string("only those ") + filter_preposition + " this " + by.title + " (" + by.plural + "/N)")
        ->transform(NameFlag(filter_kind));
  }
  absl::Status Validate() const {
    if (name.empty() || filter.empty()) return absl::OkStatus();
    return UsageError(filter_flag + " filters a list: give either NAME or " + filter_flag);
  }
  int Run(Context& ctx) const {
    return PrintGet<List>(ctx, columns(), name.empty() ? list(ctx.client(), filter) : One(get(ctx.client(), name)),
                          !name.empty(), filter.empty() ? "" : " " + filter_preposition + " " + filter);
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
