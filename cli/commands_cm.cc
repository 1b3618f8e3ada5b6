// rdmactl's rdma_cm commands: event channels, CM ids (listen, connect, accept, reject, disconnect, migrate),
// connection tokens and the event stream. As commands.cc: Validate builds the request (usage errors), Run
// calls client/ and prints.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <optional>
#include <ostream>
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
using internal::FlagUint;
using internal::PrintResult;
using internal::UsageError;

// Larger than any private data rdma_cm carries (196 bytes in an accept): a bigger file is a mistake.
constexpr size_t kMaxDataFile = 4096;

absl::StatusOr<uint32_t> FlagMillis(absl::string_view flag, const std::string& text) {
  absl::StatusOr<std::chrono::milliseconds> d = ParseTimeout(text);
  if (!d.ok()) return FlagError(flag, d.status());
  if (d->count() > UINT32_MAX) return UsageError(absl::StrCat(flag, ": '", text, "' is too long"));
  return static_cast<uint32_t>(d->count());
}

// After a failed Connect whose deadline passed on our side: rdmad keeps connecting.
void ConnectTimeoutNote(Context& ctx, const absl::Status& status, const std::string& name) {
  if (status.code() == absl::StatusCode::kDeadlineExceeded && !client::HasDetail(status)) {
    ctx.err() << "note: rdmad may still complete the connect; see 'rdmactl get " << name << " -o wide'\n";
  }
}

}  // namespace

// ---- event channels

absl::StatusOr<v1::CreateChannelRequest> Validate(const CreateChannelOptions& o) {
  v1::CreateChannelRequest r;
  r.set_label(o.label);
  return r;
}

int Run(const v1::CreateChannelRequest& request, Context& ctx) {
  auto ch = ctx.client().CreateChannel(request);
  if (!ch.ok()) return ctx.Fail(ch.status());
  return PrintResult(ctx, *ch, {ch->name()},
                     absl::StrCat(ch->name(), " created (thread ", ch->thread().empty() ? "<none>" : ch->thread(),
                                  ")"));
}

// ---- CM ids

absl::StatusOr<v1::CreateCmIdRequest> Validate(const CreateCmIdOptions& o) {
  v1::CreateCmIdRequest r;
  RDMACTL_ASSIGN_OR_RETURN(std::string pd, FlagName("--pd", Kind::kPd, o.pd));
  r.set_pd(pd);
  if (!o.channel.empty()) {
    RDMACTL_ASSIGN_OR_RETURN(std::string channel, FlagName("--channel", Kind::kChannel, o.channel));
    r.set_channel(channel);
  }
  return r;
}

int Run(const v1::CreateCmIdRequest& request, Context& ctx) {
  auto id = ctx.client().CreateCmId(request);
  if (!id.ok()) return ctx.Fail(id.status());
  return PrintResult(ctx, *id, {id->name()},
                     absl::StrCat(id->name(), " created (on ", id->channel(), ", for ", id->pd(), ")"));
}

absl::StatusOr<v1::ListenRequest> Validate(const ListenOptions& o) {
  v1::ListenRequest r;
  RDMACTL_ASSIGN_OR_RETURN(std::string name, NormalizeName(Kind::kCmId, o.name));
  r.set_name(name);
  absl::StatusOr<v1::SocketAddress> address = ParseSocketAddress(o.address);
  if (!address.ok()) return FlagError("--address", address.status());
  *r.mutable_address() = *address;
  if (!o.backlog.empty()) {
    RDMACTL_ASSIGN_OR_RETURN(uint64_t backlog, FlagUint("--backlog", o.backlog, INT32_MAX));
    if (backlog == 0) return UsageError("--backlog: must be greater than 0 (omit it for rdmad's default)");
    r.set_backlog(static_cast<int32_t>(backlog));
  }
  return r;
}

int Run(const v1::ListenRequest& request, Context& ctx) {
  auto id = ctx.client().Listen(request);
  if (!id.ok()) return ctx.Fail(id.status());
  const std::string on = id->local().address().empty() ? SocketAddressString(request.address())
                                                       : SocketAddressString(id->local());
  return PrintResult(ctx, *id, {id->name()},
                     absl::StrCat(id->name(), " listening on ", on, " (",
                                  id->device().empty() ? "any device" : id->device(), ")"));
}

absl::StatusOr<std::string> BuildPrivateData(const PrivateDataOptions& o) {
  if (int{o.text_given} + int{o.hex_given} + int{o.file_given} > 1) {
    return UsageError("give at most one of --data, --data-hex and --data-file");
  }
  if (o.text_given) {
    if (o.text.empty()) return UsageError("--data: empty text (omit it to send no private data)");
    return o.text;
  }
  if (o.hex_given) {
    absl::StatusOr<std::string> bytes = ParseHexBytes(o.hex);
    if (!bytes.ok()) return FlagError("--data-hex", bytes.status());
    return bytes;
  }
  if (o.file_given) {
    std::ifstream in(o.file, std::ios::binary);
    if (!in) return UsageError(absl::StrCat("--data-file: cannot read '", o.file, "'"));
    std::string bytes;
    char buf[1024];
    while (in.read(buf, sizeof(buf)) || in.gcount() > 0) {
      bytes.append(buf, static_cast<size_t>(in.gcount()));
      if (bytes.size() > kMaxDataFile) {
        return UsageError(absl::StrCat("--data-file: '", o.file, "' is larger than ", kMaxDataFile,
                                       " bytes; private data is at most 196 bytes"));
      }
    }
    if (in.bad()) return UsageError(absl::StrCat("--data-file: error reading '", o.file, "'"));
    return bytes;
  }
  return std::string();
}

absl::StatusOr<v1::ConnectRequest> Validate(const ConnectCmIdOptions& o) {
  v1::ConnectRequest r;
  RDMACTL_ASSIGN_OR_RETURN(std::string name, NormalizeName(Kind::kCmId, o.name));
  r.set_name(name);
  absl::StatusOr<v1::SocketAddress> to = ParseSocketAddress(o.to);
  if (!to.ok()) return FlagError("--to", to.status());
  *r.mutable_remote() = *to;
  RDMACTL_ASSIGN_OR_RETURN(*r.mutable_private_data(), BuildPrivateData(o.data));
  if (!o.resolve_timeout.empty()) {
    RDMACTL_ASSIGN_OR_RETURN(uint32_t ms, FlagMillis("--resolve-timeout", o.resolve_timeout));
    r.set_timeout_ms(ms);
  }
  return r;
}

int Run(const v1::ConnectRequest& request, Context& ctx) {
  auto id = ctx.client().Connect(request, ctx.timeout());
  if (!id.ok()) {
    const int rc = ctx.Fail(id.status());
    ConnectTimeoutNote(ctx, id.status(), request.name());
    return rc;
  }
  return PrintResult(ctx, *id, {id->name()},
                     absl::StrCat(id->name(), " connected to ", SocketAddressString(id->remote()),
                                  " (qp ", id->qp().empty() ? "<none>" : id->qp(), ", state ",
                                  CmIdStateString(id->state()), ")"));
}

absl::StatusOr<v1::AcceptRequest> Validate(const AcceptOptions& o) {
  v1::AcceptRequest r;
  RDMACTL_ASSIGN_OR_RETURN(std::string name, NormalizeName(Kind::kCmId, o.name));
  r.set_name(name);
  RDMACTL_ASSIGN_OR_RETURN(*r.mutable_private_data(), BuildPrivateData(o.data));
  return r;
}

int Run(const v1::AcceptRequest& request, Context& ctx) {
  auto id = ctx.client().Accept(request);
  if (!id.ok()) return ctx.Fail(id.status());
  return PrintResult(ctx, *id, {id->name()},
                     absl::StrCat(id->name(), " accepted (qp ", id->qp().empty() ? "<none>" : id->qp(),
                                  ", state ", CmIdStateString(id->state()), "; ESTABLISHED follows as an event)"));
}

absl::StatusOr<v1::RejectRequest> Validate(const RejectOptions& o) {
  v1::RejectRequest r;
  RDMACTL_ASSIGN_OR_RETURN(std::string name, NormalizeName(Kind::kCmId, o.name));
  r.set_name(name);
  RDMACTL_ASSIGN_OR_RETURN(*r.mutable_private_data(), BuildPrivateData(o.data));
  return r;
}

int Run(const v1::RejectRequest& request, Context& ctx) {
  auto id = ctx.client().Reject(request);
  if (!id.ok()) return ctx.Fail(id.status());
  return PrintResult(ctx, *id, {id->name()}, absl::StrCat(id->name(), " rejected (and deleted)"));
}

int RunDisconnect(const NamedOptions& o, Context& ctx) {
  auto id = ctx.client().Disconnect(o.name);
  if (!id.ok()) return ctx.Fail(id.status());
  return PrintResult(ctx, *id, {id->name()},
                     absl::StrCat(id->name(), " disconnecting (DISCONNECTED follows as an event)"));
}

absl::StatusOr<v1::MigrateCmIdRequest> Validate(const MigrateCmIdOptions& o) {
  v1::MigrateCmIdRequest r;
  RDMACTL_ASSIGN_OR_RETURN(std::string name, NormalizeName(Kind::kCmId, o.name));
  r.set_name(name);
  RDMACTL_ASSIGN_OR_RETURN(std::string channel, FlagName("--to", Kind::kChannel, o.to));
  r.set_channel(channel);
  return r;
}

int Run(const v1::MigrateCmIdRequest& request, Context& ctx) {
  auto id = ctx.client().MigrateCmId(request);
  if (!id.ok()) return ctx.Fail(id.status());
  return PrintResult(ctx, *id, {id->name()},
                     absl::StrCat(id->name(), " on ", id->channel(), " (", id->counters().migrations(),
                                  " migration(s) so far)"));
}

// ---- connection tokens

absl::StatusOr<v1::IssueConnectTokenRequest> Validate(const CreateTokenOptions& o) {
  v1::IssueConnectTokenRequest r;
  RDMACTL_ASSIGN_OR_RETURN(std::string pd, FlagName("--pd", Kind::kPd, o.pd));
  r.set_pd(pd);
  if (!o.ttl.empty()) {
    RDMACTL_ASSIGN_OR_RETURN(uint32_t ms, FlagMillis("--ttl", o.ttl));
    r.set_ttl_ms(ms);
  }
  return r;
}

int Run(const v1::IssueConnectTokenRequest& request, Context& ctx) {
  auto token = ctx.client().IssueConnectToken(request);
  if (!token.ok()) return ctx.Fail(token.status());
  ctx.err() << "note: the token is a secret: it admits one connection to " << request.pd()
            << " until it expires; give it only to that peer (the private data of its connect request)\n";
  std::string text = TokenText(*token, request.pd(), wire::WallNow());
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return PrintResult(ctx, *token, {token->name()}, text);
}

// ---- events

absl::StatusOr<EventsPlan> Validate(const EventsOptions& o) {
  EventsPlan plan;
  plan.follow = o.follow;
  v1::WatchEventsRequest& r = plan.request;
  if (!o.channel.empty()) {
    RDMACTL_ASSIGN_OR_RETURN(std::string channel, FlagName("--channel", Kind::kChannel, o.channel));
    r.set_channel(channel);
  }
  if (!o.cm_id.empty()) {
    RDMACTL_ASSIGN_OR_RETURN(std::string id, FlagName("--cmid", Kind::kCmId, o.cm_id));
    r.set_cm_id(id);
  }
  for (const std::string& t : o.types) {
    absl::StatusOr<std::vector<std::string>> types = ParseEventTypes(t);
    if (!types.ok()) return FlagError("--type", types.status());
    for (const std::string& name : *types) {
      if (std::find(r.types().begin(), r.types().end(), name) == r.types().end()) r.add_types(name);
    }
  }
  if (!o.after.empty()) {
    RDMACTL_ASSIGN_OR_RETURN(uint64_t after, FlagUint("--after", o.after, UINT64_MAX));
    r.set_after_sequence(after);
  } else if (!o.follow) {
    r.set_from_oldest(true);  // every retained event
  }
  return plan;
}

int Run(const EventsPlan& plan, Context& ctx) {
  client::WatchOptions options;
  if (!plan.follow) options.idle_timeout = kEventsIdle;
  uint64_t count = 0, last = 0;
  absl::Status s = ctx.client().WatchEvents(
      plan.request,
      [&](const v1::CmEvent& e) {
        switch (ctx.format()) {
          case Format::kJson: ctx.out() << ToJsonLine(e); break;
          case Format::kName: ctx.out() << e.cm_id() << "\n"; break;
          case Format::kTable:
          case Format::kWide:
            if (count == 0) ctx.out() << EventHeader() << "\n";
            ctx.out() << EventLine(e, ctx.format() == Format::kWide) << "\n";
            break;
        }
        ctx.out().flush();  // a stream: each event as it comes
        count++;
        last = e.sequence();
        return true;
      },
      options);
  if (!s.ok()) {
    const int rc = ctx.Fail(s);
    const uint64_t resume = count > 0 ? last : plan.request.after_sequence();
    if (s.code() == absl::StatusCode::kResourceExhausted) {
      ctx.err() << "hint: rdmactl fell behind the event stream; resume with 'rdmactl events --follow --after "
                << resume << "' (the last event it printed)\n";
    } else if (s.code() == absl::StatusCode::kOutOfRange) {
      ctx.err() << "hint: rdmad no longer holds the events after " << plan.request.after_sequence()
                << "; give a later --after (the message says up to where they are gone), or --follow alone for new "
                   "events only\n";
    }
    return rc;
  }
  if (plan.follow) {
    ctx.err() << "The event stream ended: rdmad closed it (the channel or CM id watched was deleted, or rdmad is "
                 "shutting down).\n";
  } else if (count == 0 && ctx.format() != Format::kJson) {
    ctx.err() << "No events found.\n";
  }
  return kExitOk;
}

}  // namespace rdmad::cli
