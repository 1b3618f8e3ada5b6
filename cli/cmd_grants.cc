// rdmactl's grant commands: grant (IssueGrant), renew grant, revoke grant, get grants and watch grants. The
// commands that read through a grant (read, bench read) are in cmd_read.cc.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cli/command.h"
#include "proto/wire/wall_clock.h"

namespace rdmad::cli {
namespace {

using absl::StrCat;

// Writes `bytes` to `path`, created or truncated, mode 0600 (also when it existed with another mode).
absl::Status WriteSecretFile(const std::string& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError(StrCat("cannot open '", path, "': ", std::strerror(errno)));
  absl::Status status;
  if (::fchmod(fd, 0600) != 0) status = absl::InternalError(StrCat("cannot make '", path, "' mode 0600: ", std::strerror(errno)));
  for (size_t done = 0; status.ok() && done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) status = absl::InternalError(StrCat("cannot write '", path, "': ", std::strerror(errno)));
    if (n > 0) done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0 && status.ok()) status = absl::InternalError(StrCat("cannot write '", path, "': ", std::strerror(errno)));
  return status;
}

// `grant MR --length N --for PRINCIPAL [--offset N] [--ttl D] [--write] [--token-file F]`.
struct GrantOptions {
  v1::IssueGrantRequest request;
  bool write = false;
  std::string token_file;  // empty: print the token (hex) instead
  DryRun dry_run = DryRun::kNone;

  void Flags(CLI::App* sub) {
    AddDryRun(sub, &dry_run);
    sub->add_option("MR", *request.mutable_mr(), NameHelp(Kind::kMr))->transform(NameFlag(Kind::kMr))->required();
    sub->add_option_function<uint64_t>("--offset", [this](uint64_t n) { request.set_offset(n); },
                                       "bytes from the start of the region (default 0)")
        ->transform(SizeFlag());
    sub->add_option_function<uint64_t>("--length", [this](uint64_t n) { request.set_length(n); },
                                       "bytes the grant covers: 4096, 64KiB, 1MiB")
        ->transform(SizeFlag())
        ->required();
    sub->add_option("--for", *request.mutable_principal(), "the client the grant is for (its principal): app-7")->required();
    AddMillis(sub, "--ttl", [this](uint32_t ms) { request.set_ttl_ms(ms); }, "the lease: 60s, 5m (default: rdmad's, 60s); 'rdmactl renew' extends it");
    sub->add_flag("--write", write, "remote-write as well as remote-read (the region needs local-write)");
    sub->add_option("--token-file", token_file,
                    "write the token's raw bytes to this file (created or truncated, mode 0600) instead of printing it");
  }
  absl::Status Validate() {
    if (request.length() == 0) return UsageError("--length: must be greater than 0");
    if (request.principal().empty()) return UsageError("--for is required: the client the grant is for (e.g. app-7)");
    request.clear_access();
    request.add_access(v1::REMOTE_READ);
    if (write) request.add_access(v1::REMOTE_WRITE);
    return absl::OkStatus();
  }
  // With a token file: the token's raw bytes go there and not on stdout (nor in -o json); if writing fails, the
  // grant just issued is revoked.
  int Run(Context& ctx) const {
    if (dry_run == DryRun::kClient) return PrintDryRunRequest(ctx, request, "IssueGrant");
    if (dry_run == DryRun::kServer) {  // no grant, no token: nothing to write or keep secret
      auto checked = ctx.client().IssueGrant(request, Mutate(dry_run));
      if (!checked.ok()) return ctx.Fail(checked.status());
      return PrintResult(ctx, *checked, {},
                         StrCat("a grant on ", request.mr(), " offset ", FormatSize(request.offset()), " length ",
                                FormatSize(request.length()), " for ", request.principal(),
                                " would be issued (server dry run: rdmad checked it; nothing was issued)"));
    }
    auto issued = ctx.client().IssueGrant(request);
    if (!issued.ok()) return ctx.Fail(issued.status());
    const v1::Grant& g = issued->grant();
    if (!token_file.empty()) {
      if (absl::Status written = WriteSecretFile(token_file, issued->token()); !written.ok()) {
        ctx.err() << "error: --token-file: " << written.message() << "\n";
        auto revoked = ctx.client().RevokeGrant(g.name());
        if (revoked.ok()) {
          ctx.err() << "note: " << g.name() << " was revoked: nobody holds its token\n";
        } else {
          ctx.err() << "warning: " << g.name() << " could not be revoked (" << revoked.status().message()
                    << "); its token was never shown: it ends when its lease runs out\n";
        }
        return kExitServerError;
      }
    }
    ctx.err() << "note: the token is a secret: it lets whoever holds it connect once, until it expires, and read"
              << (write ? " and write " : " ") << g.mr() << " offset " << FormatSize(g.offset()) << " length "
              << FormatSize(g.length()) << "; give it only to " << request.principal() << "\n";
    if (token_file.empty() && ctx.format() == Format::kName) {
      ctx.err() << "warning: -o name prints no token, and only IssueGrant returns it: " << g.name()
                << " is of no use without it; revoke it ('rdmactl revoke " << g.name() << "') and use --token-file or -o json\n";
    }
    v1::IssuedGrant shown = *issued;
    if (!token_file.empty()) shown.clear_token();  // in the file only
    return PrintResult(ctx, shown, {g.name()}, IssuedGrantText(*issued, wire::WallNow(), token_file));
  }
};

struct RenewOptions {
  std::string name;
  uint32_t ttl_ms = 0;

  void Flags(CLI::App* sub) {
    AddName(sub, &name, Kind::kGrant);
    AddMillis(sub, "--ttl", [this](uint32_t ms) { ttl_ms = ms; }, "the new lease, from now: 60s, 5m (at most rdmad's max_grant_ttl)")->required();
  }
  int Run(Context& ctx) const {
    return Done(ctx, ctx.client().RenewGrant(name, std::chrono::milliseconds(ttl_ms)), [](const v1::Grant& g) {
      return StrCat(g.name(), " renewed (expires ", FormatExpiry(g.expire_time_unix_nanos()), ", ",
                    ExpiresIn(g.expire_time_unix_nanos(), wire::WallNow()), "; ", g.renewals(), " renewal(s))");
    });
  }
};

int Revoke(Context& ctx, const std::string& name) {
  return Done(ctx, ctx.client().RevokeGrant(name), [](const v1::Grant& g) {
    if (g.end_reason() == v1::END_REVOKED || g.end_reason() == v1::GRANT_END_UNSPECIFIED) {
      return g.name() + " revoked (its key is dead)";
    }
    return StrCat(g.name(), " had already ended (", GrantEndReasonString(g.end_reason()), ")");
  });
}

// `watch grants [--mr MR] [--for PRINCIPAL] [--from-oldest]`: events as they happen, until rdmad ends the stream.
struct WatchGrantsOptions {
  v1::WatchGrantsRequest request;

  void Flags(CLI::App* sub) {
    sub->add_option("--mr", *request.mutable_mr(), "only grants on this memory region (mrs/N)")->transform(NameFlag(Kind::kMr));
    sub->add_option("--for", *request.mutable_principal(), "only grants for this principal");
    sub->add_flag_function("--from-oldest", [this](int64_t n) { request.set_from_oldest(n > 0); },
                           "every event rdmad retains from its start first (after a restart: the grants it ended, RESTARTED)");
  }
  int Run(Context& ctx) const {
    StreamPrinter<v1::GrantEvent> print(ctx, GrantEventStream());
    absl::Status s = ctx.client().WatchGrants(request, [&print](const v1::GrantEvent& e) { return print(e); });
    return print.End(s,
                     {{absl::StatusCode::kResourceExhausted,
                       "rdmactl fell behind the grant stream and missed events; 'rdmactl get grants --all' shows where "
                       "every grant is now"}},
                     true, "The grant stream ended: rdmad closed it.");
  }
};

// `get grants -w`: WatchGrants with the list's filters; the list is taken once the stream is open. An issued
// grant is ADDED; one that ended leaves the list (DELETED), unless --all keeps the ended ones in it
// (MODIFIED); any other change is MODIFIED.
absl::Status WatchGrantList(client::Client& c, const GetOptions<json::GrantList, v1::Grant>& o,
                            const std::function<bool()>& opened,
                            const GetOptions<json::GrantList, v1::Grant>::OnChange& on) {
  v1::WatchGrantsRequest request;
  request.set_mr(o.filters[0].value);
  request.set_principal(o.filters[1].value);
  client::WatchOptions options;
  options.on_open = opened;
  return c.WatchGrants(
      request,
      [&](const v1::GrantEvent& e) {
        const bool ended = e.type() == v1::GRANT_REVOKED || e.type() == v1::GRANT_EXPIRED;
        return on(e.grant(), e.type() == v1::GRANT_ISSUED_EVENT ? "ADDED" : (ended && !o.all ? "DELETED" : "MODIFIED"));
      },
      options);
}

// A grant only moves forward: its state (issued, activating, active, ended) never goes back, and each renewal
// counts. So an event whose grant is not past the one shown happened before the list was taken.
bool GrantEventStale(const v1::Grant& event, const v1::Grant& shown) {
  return std::make_pair(static_cast<int>(event.state()), event.renewals()) <=
         std::make_pair(static_cast<int>(shown.state()), shown.renewals());
}

}  // namespace

void RegisterGrantCommands(Registry& r) {
  r.Add(r.Noun("get", Kind::kGrant, "grants: a remote key to a range of a memory region, for one client, for a lease", true),
        GetOptions<json::GrantList, v1::Grant>{Kind::kGrant, [] { return GrantColumns(wire::WallNow()); },
                                               &client::Client::ListGrants, &v1::ListGrantsResponse::grants,
                                               &client::Client::GetGrant}
            .FilterBy("--mr", Kind::kMr, "on")
            .FilterBy("--for", "principal", "for")
            .WithAll()
            .WatchWith(WatchGrantList, "The grant stream ended: rdmad closed it.", GrantEventStale));
  r.Add<GrantOptions>(r.Verb("grant"));
  r.Add<RenewOptions>(r.Noun("renew", Kind::kGrant, "Extend a grant's lease: it then ends --ttl from now"));
  r.Named("revoke", Kind::kGrant, "Revoke a grant: its key dies, its client is disconnected", Revoke);
  r.Add<WatchGrantsOptions>(r.Noun("watch", Kind::kGrant,
                                   "Print grant events (issued, activated, renewed, revoked, expired) as they happen, "
                                   "until rdmad ends the stream (Ctrl-C to stop)",
                                   true));
}

}  // namespace rdmad::cli
