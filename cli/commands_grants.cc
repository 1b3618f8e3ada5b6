// rdmactl's grant commands: grant (IssueGrant), renew, revoke, get grants and watch grants. As commands.cc:
// Validate builds the request (usage errors), Run calls client/ and prints. The data-plane commands that
// read through a grant (read, bench read) are in commands_read.cc.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli/command_util.h"
#include "cli/commands.h"
#include "proto/wire/wall_clock.h"

namespace rdmad::cli {
namespace {

using internal::FlagError;
using internal::FlagName;
using internal::PrintList;
using internal::PrintOne;
using internal::PrintResult;
using internal::UsageError;

absl::StatusOr<uint32_t> FlagTtl(absl::string_view flag, const std::string& text) {
  absl::StatusOr<std::chrono::milliseconds> d = ParseTimeout(text);
  if (!d.ok()) return FlagError(flag, d.status());
  if (d->count() > UINT32_MAX) return UsageError(absl::StrCat(flag, ": '", text, "' is too long"));
  return static_cast<uint32_t>(d->count());
}

// Writes `bytes` to `path`, created or truncated, mode 0600 (also when it existed with another mode).
absl::Status WriteSecretFile(const std::string& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot open '", path, "': ", std::strerror(errno)));
  absl::Status status;
  if (::fchmod(fd, 0600) != 0) {
    status = absl::InternalError(absl::StrCat("cannot make '", path, "' mode 0600: ", std::strerror(errno)));
  }
  for (size_t done = 0; status.ok() && done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      status = absl::InternalError(absl::StrCat("cannot write '", path, "': ", std::strerror(errno)));
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0 && status.ok()) {
    status = absl::InternalError(absl::StrCat("cannot write '", path, "': ", std::strerror(errno)));
  }
  return status;
}

std::string Range(const v1::Grant& g) {
  return absl::StrCat(g.mr(), " offset ", FormatSize(g.offset()), " length ", FormatSize(g.length()));
}

}  // namespace

// ---- grant

absl::StatusOr<GrantPlan> Validate(const GrantOptions& o) {
  GrantPlan plan;
  v1::IssueGrantRequest& r = plan.request;
  RDMACTL_ASSIGN_OR_RETURN(std::string mr, NormalizeName(Kind::kMr, o.mr));
  r.set_mr(mr);
  absl::StatusOr<uint64_t> offset = ParseSize(o.offset.empty() ? "0" : o.offset);
  if (!offset.ok()) return FlagError("--offset", offset.status());
  r.set_offset(*offset);
  if (o.length.empty()) return UsageError("--length is required: the bytes the grant covers (4096, 64KiB, 1MiB)");
  absl::StatusOr<uint64_t> length = ParseSize(o.length);
  if (!length.ok()) return FlagError("--length", length.status());
  if (*length == 0) return UsageError("--length: must be greater than 0");
  r.set_length(*length);
  r.add_access(v1::REMOTE_READ);
  if (o.write) r.add_access(v1::REMOTE_WRITE);
  if (!o.ttl.empty()) {
    RDMACTL_ASSIGN_OR_RETURN(uint32_t ttl, FlagTtl("--ttl", o.ttl));
    r.set_ttl_ms(ttl);
  }
  if (o.principal.empty()) return UsageError("--for is required: the client the grant is for (e.g. app-7)");
  r.set_principal(o.principal);
  plan.token_file = o.token_file;
  return plan;
}

int Run(const GrantPlan& plan, Context& ctx) {
  auto issued = ctx.client().IssueGrant(plan.request);
  if (!issued.ok()) return ctx.Fail(issued.status());
  const std::string& name = issued->grant().name();
  if (!plan.token_file.empty()) {
    absl::Status written = WriteSecretFile(plan.token_file, issued->token());
    if (!written.ok()) {
      ctx.err() << "error: --token-file: " << written.message() << "\n";
      auto revoked = ctx.client().RevokeGrant(name);
      if (revoked.ok()) {
        ctx.err() << "note: " << name << " was revoked: nobody holds its token\n";
      } else {
        ctx.err() << "warning: " << name << " could not be revoked (" << revoked.status().message()
                  << "); its token was never shown: it ends when its lease runs out\n";
      }
      return kExitServerError;
    }
  }
  ctx.err() << "note: the token is a secret: it lets whoever holds it connect once, until it expires, and read"
            << (plan.request.access_size() > 1 ? " and write " : " ") << Range(issued->grant())
            << "; give it only to " << plan.request.principal() << "\n";
  if (plan.token_file.empty() && ctx.format() == Format::kName) {
    ctx.err() << "warning: -o name prints no token, and only IssueGrant returns it: " << name
              << " is of no use without it; revoke it ('rdmactl revoke " << name
              << "') and use --token-file or -o json\n";
  }
  v1::IssuedGrant shown = *issued;
  if (!plan.token_file.empty()) shown.clear_token();  // in the file only
  std::string text = IssuedGrantText(*issued, wire::WallNow(), plan.token_file);
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return PrintResult(ctx, shown, {name}, text);
}

// ---- renew, revoke

absl::StatusOr<v1::RenewGrantRequest> Validate(const RenewGrantOptions& o) {
  v1::RenewGrantRequest r;
  RDMACTL_ASSIGN_OR_RETURN(std::string name, NormalizeName(Kind::kGrant, o.name));
  r.set_name(name);
  if (o.ttl.empty()) return UsageError("--ttl is required: the lease then ends this long from now (60s, 5m)");
  RDMACTL_ASSIGN_OR_RETURN(uint32_t ttl, FlagTtl("--ttl", o.ttl));
  r.set_ttl_ms(ttl);
  return r;
}

int Run(const v1::RenewGrantRequest& request, Context& ctx) {
  auto g = ctx.client().RenewGrant(request.name(), std::chrono::milliseconds(request.ttl_ms()));
  if (!g.ok()) return ctx.Fail(g.status());
  return PrintResult(ctx, *g, {g->name()},
                     absl::StrCat(g->name(), " renewed (expires ", FormatExpiry(g->expire_time_unix_nanos()),
                                  ", ", ExpiresIn(g->expire_time_unix_nanos(), wire::WallNow()), "; ", g->renewals(),
                                  " renewal(s))"));
}

int RunRevokeGrant(const NamedOptions& o, Context& ctx) {
  auto g = ctx.client().RevokeGrant(o.name);
  if (!g.ok()) return ctx.Fail(g.status());
  std::string message;
  if (g->end_reason() == v1::END_REVOKED || g->end_reason() == v1::GRANT_END_UNSPECIFIED) {
    message = absl::StrCat(g->name(), " revoked (its key is dead)");
  } else {
    message = absl::StrCat(g->name(), " had already ended (", GrantEndReasonString(g->end_reason()), ")");
  }
  return PrintResult(ctx, *g, {g->name()}, message);
}

// ---- get grants

int RunGetGrants(const GetOptions& o, Context& ctx) {
  const absl::Time now = wire::WallNow();
  auto table = [now](const google::protobuf::RepeatedPtrField<v1::Grant>& grants, bool wide) {
    return GrantsTable(grants, wide, now);
  };
  if (!o.name.empty()) {
    auto g = ctx.client().GetGrant(o.name);
    return g.ok() ? PrintOne(ctx, *g, table) : ctx.Fail(g.status());
  }
  auto list = ctx.client().ListGrants(o.mr, o.principal, o.all);
  if (!list.ok()) return ctx.Fail(list.status());
  std::vector<std::string> scope;
  if (!o.mr.empty()) scope.push_back(absl::StrCat(" on ", o.mr));
  if (!o.principal.empty()) scope.push_back(absl::StrCat(" for ", o.principal));
  std::string where = absl::StrCat(scope.empty() ? "" : scope[0], scope.size() > 1 ? scope[1] : "");
  if (!o.all) absl::StrAppend(&where, " (--all shows the recently ended ones too)");
  return PrintList(ctx, list->grants(), table, where);
}

// ---- watch grants

absl::StatusOr<v1::WatchGrantsRequest> Validate(const WatchGrantsOptions& o) {
  v1::WatchGrantsRequest r;
  if (!o.mr.empty()) {
    RDMACTL_ASSIGN_OR_RETURN(std::string mr, FlagName("--mr", Kind::kMr, o.mr));
    r.set_mr(mr);
  }
  r.set_principal(o.principal);
  r.set_from_oldest(o.from_oldest);
  return r;
}

int Run(const v1::WatchGrantsRequest& request, Context& ctx) {
  uint64_t count = 0;
  absl::Status s = ctx.client().WatchGrants(request, [&](const v1::GrantEvent& e) {
    switch (ctx.format()) {
      case Format::kJson: ctx.out() << ToJsonLine(e); break;
      case Format::kName: ctx.out() << e.grant().name() << "\n"; break;
      case Format::kTable:
      case Format::kWide:
        if (count == 0) ctx.out() << GrantEventHeader() << "\n";
        ctx.out() << GrantEventLine(e) << "\n";
        break;
    }
    ctx.out().flush();  // a stream: each event as it comes
    count++;
    return true;
  });
  if (!s.ok()) {
    const int rc = ctx.Fail(s);
    if (s.code() == absl::StatusCode::kResourceExhausted) {
      ctx.err() << "hint: rdmactl fell behind the grant stream and missed events; 'rdmactl get grants --all' shows "
                   "where every grant is now\n";
    }
    return rc;
  }
  ctx.err() << "The grant stream ended: rdmad closed it.\n";
  return kExitOk;
}

}  // namespace rdmad::cli
