// cli/command.h: the Context, the Registry, the typed flags and the printers every command shares.
#include "cli/command.h"

#include <fstream>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace rdmad::cli {

// ---- Context

Context::Context(std::string server, Format format, std::chrono::milliseconds timeout, std::ostream& out,
                 std::ostream& err)
    : server_(std::move(server)), format_(format), timeout_(timeout), out_(out), err_(err) {}

client::Client& Context::client() {
  if (!client_) {
    client::Client::Options o;
    o.target = server_;
    o.timeout = timeout_;
    client_ = std::make_unique<client::Client>(o);
  }
  return *client_;
}

void Context::UseChannel(std::shared_ptr<grpc::Channel> channel) {
  client_ = std::make_unique<client::Client>(std::move(channel), timeout_);
}

int Context::Fail(const absl::Status& status) {
  if (ignore_not_found_ && status.code() == absl::StatusCode::kNotFound) return kExitOk;
  std::optional<v1::ErrorDetail> detail;
  if (client::HasDetail(status)) detail = client::Detail(status);
  err_ << FormatError(status, detail, server_) << "\n";
  return kExitServerError;
}

int Context::Usage(const absl::Status& status) {
  err_ << "error: " << status.message() << "\nRun 'rdmactl " << command_ << " --help' for usage.\n";
  return kExitUsage;
}

// ---- Registry

CLI::App* Registry::Verb(const std::string& name) { return root_->get_subcommand(name); }

CLI::App* Registry::Noun(const std::string& verb, Kind kind, const std::string& description, bool plural) {
  const KindInfo& k = Info(kind);
  CLI::App* sub = Verb(verb)->add_subcommand(plural ? k.plural : k.singular, description);
  sub->alias(plural ? k.singular : k.plural);
  return sub;
}

void Registry::OnRun(CLI::App* sub, RunFn run) {
  std::string command = sub->get_name();
  for (CLI::App* p = sub->get_parent(); p != nullptr && p != root_; p = p->get_parent()) {
    command = p->get_name() + " " + command;
  }
  sub->callback([this, command, run = std::move(run)] {
    chosen_ = [command, run](Context& ctx) {
      ctx.set_command(command);
      return run(ctx);
    };
  });
}

namespace {

struct NamedOptions {
  Kind kind;
  NamedRunFn run;
  std::string name;

  void Flags(CLI::App* sub) { AddName(sub, &name, kind); }
  int Run(Context& ctx) const { return run(ctx, name); }
};

}  // namespace

void Registry::Named(const std::string& verb, Kind kind, const std::string& description, NamedRunFn run) {
  Add(Noun(verb, kind, description), NamedOptions{kind, std::move(run), ""});
}

// ---- typed flags

std::map<std::string, std::string> KernelIdsByName(client::Client& client, std::string* note) {
  std::map<std::string, std::string> out;
  note->clear();
  absl::StatusOr<v1::ListDevicesResponse> devices = client.ListDevices();
  if (!devices.ok()) {
    *note = StatusNote(devices.status());
    return out;
  }
  for (const v1::Device& d : devices->devices()) {
    absl::StatusOr<v1::ListKernelIdsResponse> ids = client.ListKernelIds(d.name());
    if (!ids.ok()) {
      *note = absl::StrCat(d.name(), ": ", StatusNote(ids.status()));
      continue;
    }
    for (const v1::KernelId& id : ids->ids()) out[id.name()] = absl::StrCat(id.number());
  }
  return out;
}

std::string KernelIdCell(const std::map<std::string, std::string>& ids, const std::string& name) {
  auto it = ids.find(name);
  return it == ids.end() ? "<unknown>" : it->second;
}

CLI::Validator DurationFlag(int64_t max_ms) {
  return Transform(
      "DURATION",
      [max_ms](const std::string& t) -> absl::StatusOr<int64_t> {
        absl::StatusOr<std::chrono::milliseconds> d = ParseTimeout(t);
        if (!d.ok()) return d.status();
        if (d->count() > max_ms) return absl::InvalidArgumentError(absl::StrCat("'", t, "' is too long"));
        return d->count();
      },
      Decimal);
}

CLI::Option* AddName(CLI::App* sub, std::string* name, Kind kind, bool required) {
  CLI::Option* o = sub->add_option("NAME", *name, NameHelp(kind) + (required ? "" : " (optional: all if omitted)"))
                       ->transform(NameFlag(kind));
  return required ? o->required() : o;
}

CLI::Option* AddMillis(CLI::App* sub, const std::string& flag, std::function<void(uint32_t)> set,
                       const std::string& help) {
  return sub->add_option_function<uint32_t>(flag, std::move(set), help)->transform(DurationFlag(UINT32_MAX));
}

std::vector<v1::Access> AccessList(const std::string& text) { return ParseAccess(text).value_or(std::vector<v1::Access>()); }

std::string NameHelp(Kind kind) {
  const KindInfo& k = Info(kind);
  if (kind == Kind::kTenant) return "tenant name: app, tenants/app";
  if (!k.numeric) return std::string(k.singular) + " name: rxe0, " + k.plural + "/rxe0";
  return std::string(k.title) + ": " + k.plural + "/N, " + k.singular + "/N or N";
}

absl::StatusOr<std::string> ReadFlagFile(const std::string& flag, const std::string& path, const std::string& why) {
  constexpr size_t kMax = 4096;  // private data is at most 196 bytes, a token 56 (112 in hex)
  std::ifstream in(path, std::ios::binary);
  std::string bytes(kMax + 1, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (in.bad()) return UsageError(absl::StrCat(flag, ": error reading '", path, "'"));
  bytes.resize(static_cast<size_t>(in.gcount()));
  if (bytes.size() > kMax) return UsageError(absl::StrCat(flag, ": '", path, "' is larger than ", kMax, " bytes", why));
  return bytes;
}

CLI::Option* AddDryRun(CLI::App* sub, DryRun* dry_run) {
  return sub
      ->add_option_function<std::string>(
          "--dry-run",
          [dry_run](const std::string& v) {
            *dry_run = v == "server" ? DryRun::kServer : v == "client" ? DryRun::kClient : DryRun::kNone;
          },
          "server: rdmad checks the request (validate_only) and makes nothing; client: print the request, send "
          "nothing; none (default): do it")
      ->check(CLI::IsMember({"none", "client", "server"}));
}

int PrintDryRunRequest(Context& ctx, const google::protobuf::Message& request, const std::string& call) {
  switch (ctx.format()) {
    case Format::kJson:
    case Format::kYaml: ctx.out() << ToStructured(request, ctx.format()); break;
    case Format::kName: break;
    case Format::kTable:
    case Format::kWide: ctx.out() << "dry run (client): rdmactl would call " << call << " with:\n" << ToYaml(request); break;
  }
  return kExitOk;
}

// ---- printing

int PrintResult(Context& ctx, const google::protobuf::Message& result, const std::vector<std::string>& names,
                const std::string& message) {
  switch (ctx.format()) {
    case Format::kJson:
    case Format::kYaml: ctx.out() << ToStructured(result, ctx.format()); break;
    case Format::kName:
      for (const std::string& n : names) ctx.out() << n << "\n";
      break;
    case Format::kTable:
    case Format::kWide: ctx.out() << message << (absl::EndsWith(message, "\n") ? "" : "\n"); break;
  }
  return kExitOk;
}

}  // namespace rdmad::cli
