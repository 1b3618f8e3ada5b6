// rdmactl's rdma_cm commands: event channels (get, create, delete), CM ids (get, create, listen, connect,
// accept, reject, disconnect, migrate, delete), connection tokens (create token) and the event stream
// (events).
#include "absl/strings/str_cat.h"
#include "cli/command.h"
#include "proto/wire/wall_clock.h"

namespace rdmad::cli {
namespace {

using absl::StrCat;

// `events` without --follow ends once no event came for this long.
constexpr std::chrono::milliseconds kEventsIdle{1000};

std::string OrNone(const std::string& s) { return s.empty() ? "<none>" : s; }

struct CreateChannelOptions {
  v1::CreateChannelRequest request;

  void Flags(CLI::App* sub) { sub->add_option("--label", *request.mutable_label(), "free text"); }
  int Run(Context& ctx) const {
    return Done(ctx, ctx.client().CreateChannel(request),
                [](const v1::EventChannel& ch) { return StrCat(ch.name(), " created (thread ", OrNone(ch.thread()), ")"); });
  }
};

struct CreateCmIdOptions {
  v1::CreateCmIdRequest request;

  void Flags(CLI::App* sub) {
    sub->add_option("--pd", *request.mutable_pd(), "protection domain its QP will use (pds/N)")
        ->transform(NameFlag(Kind::kPd))
        ->required();
    sub->add_option("--channel", *request.mutable_channel(), "event channel that dispatches it (channels/N; default channels/1)")
        ->transform(NameFlag(Kind::kChannel));
  }
  int Run(Context& ctx) const {
    return Done(ctx, ctx.client().CreateCmId(request), [](const v1::CmId& id) {
      return StrCat(id.name(), " created (on ", id.channel(), ", for ", id.pd(), ")");
    });
  }
};

struct ListenOptions {
  v1::ListenRequest request;
  std::string address;

  void Flags(CLI::App* sub) {
    AddName(sub, request.mutable_name(), Kind::kCmId);
    sub->add_option("--address", address, "address:port: 10.0.2.15:7471, [::]:7471, 0.0.0.0:7471 (all)")
        ->transform(AddressFlag())
        ->required();
    sub->add_option_function<int32_t>("--backlog", [this](int32_t n) { request.set_backlog(n); },
                                      "pending connection requests (default: rdmad's, 64)")
        ->transform(UintFlag(INT32_MAX))
        ->check(CLI::PositiveNumber);
  }
  absl::Status Validate() {
    *request.mutable_address() = *ParseSocketAddress(address);
    return absl::OkStatus();
  }
  int Run(Context& ctx) const {
    return Done(ctx, ctx.client().Listen(request), [this](const v1::CmId& id) {
      return StrCat(id.name(), " listening on ", SocketAddressString(id.local().address().empty() ? request.address() : id.local()),
                    " (", id.device().empty() ? "any device" : id.device(), ")");
    });
  }
};

// Private data: at most one of --data TEXT (its bytes as typed), --data-hex HEX, --data-file PATH (read while
// validating: a missing or large file is a usage error).
struct PrivateData {
  std::string text, hex, file;

  void Flags(CLI::App* sub, int max_bytes) {
    const std::string limit = StrCat(" (at most ", max_bytes, " bytes)");
    auto* t = sub->add_option("--data", text, "private data: this text's bytes, as typed" + limit);
    auto* h = sub->add_option("--data-hex", hex, "private data in hex: 0a0b0c or 0a:0b:0c" + limit)
                  ->transform(TextFlag("HEX", ParseHexBytes));
    auto* f = sub->add_option("--data-file", file, "private data: the bytes of this file" + limit)->check(CLI::ExistingFile);
    t->excludes(h)->excludes(f);
    h->excludes(f);
    text_flag = t;
  }
  // Sets the request's private_data (a usage error when it cannot be had).
  template <typename Request>
  absl::Status Into(Request& request) const {
    if (text_flag->count() > 0 && text.empty()) return UsageError("--data: empty text (omit it to send no private data)");
    absl::StatusOr<std::string> bytes = text.empty() ? hex : text;
    if (!file.empty()) bytes = ReadFlagFile("--data-file", file, "; private data is at most 196 bytes");
    if (bytes.ok()) request.set_private_data(*bytes);
    return bytes.status();
  }
  CLI::Option* text_flag = nullptr;
};

struct ConnectCmIdOptions {
  v1::ConnectRequest request;
  std::string to;
  PrivateData data;

  void Flags(CLI::App* sub) {
    AddName(sub, request.mutable_name(), Kind::kCmId);
    sub->add_option("--to", to, "remote address:port: 10.0.2.15:7471 or [fe80::1]:7471")->transform(AddressFlag())->required();
    data.Flags(sub, 56);
    AddMillis(sub, "--resolve-timeout", [this](uint32_t ms) { request.set_timeout_ms(ms); },
              "address and route resolution, each: 2s, 500ms (default: rdmad's, 2s)");
  }
  absl::Status Validate() {
    *request.mutable_remote() = *ParseSocketAddress(to);
    return data.Into(request);
  }
  // Bounded by the global --timeout (the whole connect: resolution, route, the peer's answer).
  int Run(Context& ctx) const {
    auto id = ctx.client().Connect(request, ctx.timeout());
    if (!id.ok() && id.status().code() == absl::StatusCode::kDeadlineExceeded && !client::HasDetail(id.status())) {
      ctx.Fail(id.status());  // our deadline passed: rdmad keeps connecting
      ctx.err() << "note: rdmad may still complete the connect; see 'rdmactl get " << request.name() << " -o wide'\n";
      return kExitServerError;
    }
    return Done(ctx, id, [](const v1::CmId& id) {
      return StrCat(id.name(), " connected to ", SocketAddressString(id.remote()), " (qp ", OrNone(id.qp()), ", state ",
                    CmIdStateString(id.state()), ")");
    });
  }
};

// accept and reject: a CM id in CONNECT_REQUEST and the private data of the answer.
template <typename Request, bool kAccept>
struct AnswerOptions {
  Request request;
  PrivateData data;

  void Flags(CLI::App* sub) {
    AddName(sub, request.mutable_name(), Kind::kCmId);
    data.Flags(sub, kAccept ? 196 : 148);
  }
  absl::Status Validate() { return data.Into(request); }
  int Run(Context& ctx) const {
    if constexpr (kAccept) {
      return Done(ctx, ctx.client().Accept(request), [](const v1::CmId& id) {
        return StrCat(id.name(), " accepted (qp ", OrNone(id.qp()), ", state ", CmIdStateString(id.state()),
                      "; ESTABLISHED follows as an event)");
      });
    } else {
      return Done(ctx, ctx.client().Reject(request), [](const v1::CmId& id) { return id.name() + " rejected (and deleted)"; });
    }
  }
};

struct MigrateOptions {
  v1::MigrateCmIdRequest request;

  void Flags(CLI::App* sub) {
    AddName(sub, request.mutable_name(), Kind::kCmId);
    sub->add_option("--to", *request.mutable_channel(), "event channel (channels/N)")
        ->transform(NameFlag(Kind::kChannel))
        ->required();
  }
  int Run(Context& ctx) const {
    return Done(ctx, ctx.client().MigrateCmId(request), [](const v1::CmId& id) {
      return StrCat(id.name(), " on ", id.channel(), " (", id.counters().migrations(), " migration(s) so far)");
    });
  }
};

struct CreateTokenOptions {
  v1::IssueConnectTokenRequest request;

  void Flags(CLI::App* sub) {
    sub->add_option("--pd", *request.mutable_pd(), "protection domain the accepted connection's QP is created on (pds/N)")
        ->transform(NameFlag(Kind::kPd))
        ->required();
    AddMillis(sub, "--ttl", [this](uint32_t ms) { request.set_ttl_ms(ms); }, "lifetime: 30s, 500ms, 2m (default: rdmad's, 30s)");
  }
  int Run(Context& ctx) const {
    auto token = ctx.client().IssueConnectToken(request);
    if (!token.ok()) return ctx.Fail(token.status());
    ctx.err() << "note: the token is a secret: it admits one connection to " << request.pd()
              << " until it expires; give it only to that peer (the private data of its connect request)\n";
    return PrintResult(ctx, *token, {token->name()}, TokenText(*token, request.pd(), wire::WallNow()));
  }
};

// Without --follow: the retained events after --after (default: all), until none came for kEventsIdle. With
// --follow: events after --after (default: new ones only), until rdmad ends the stream.
struct EventsOptions {
  v1::WatchEventsRequest request;
  bool follow = false;
  CLI::Option* after = nullptr;

  void Flags(CLI::App* sub) {
    sub->add_option("--channel", *request.mutable_channel(), "only events delivered on this channel (channels/N)")
        ->transform(NameFlag(Kind::kChannel));
    sub->add_option("--cmid", *request.mutable_cm_id(), "only events of this CM id (and connect requests on it, if it listens)")
        ->transform(NameFlag(Kind::kCmId));
    sub->add_option_function<std::vector<std::string>>(
           "--type",
           [this](const std::vector<std::string>& types) {
             for (const std::string& t : types) {
               if (std::find(request.types().begin(), request.types().end(), t) == request.types().end()) request.add_types(t);
             }
           },
           "only these types (repeat or comma-separate): established, disconnected, connect-request, ...")
        ->delimiter(',')
        ->transform(Transform("TYPE", ParseEventTypes, [](const std::vector<std::string>& types) { return types.front(); }));
    sub->add_flag("-f,--follow", follow, "keep streaming new events until rdmad ends the stream (Ctrl-C to stop)");
    after = sub->add_option_function<uint64_t>("--after", [this](uint64_t n) { request.set_after_sequence(n); },
                                               "replay the retained events after this sequence first (default: 1, or 0 = "
                                               "none with --follow)")
                ->transform(UintFlag(UINT64_MAX));
  }
  absl::Status Validate() {
    request.set_from_oldest(after->count() == 0 && !follow);  // every retained event
    return absl::OkStatus();
  }
  int Run(Context& ctx) const {
    client::WatchOptions options;
    if (!follow) options.idle_timeout = kEventsIdle;
    StreamPrinter<v1::CmEvent> print(ctx, EventStream());
    uint64_t last = request.after_sequence();
    absl::Status s = ctx.client().WatchEvents(
        request, [&](const v1::CmEvent& e) { return last = e.sequence(), print(e); }, options);
    return print.End(s,
                     {{absl::StatusCode::kResourceExhausted,
                       StrCat("rdmactl fell behind the event stream; resume with 'rdmactl events --follow --after ", last,
                              "' (the last event it printed)")},
                      {absl::StatusCode::kOutOfRange,
                       StrCat("rdmad no longer holds the events after ", request.after_sequence(),
                              "; give a later --after (the message says up to where they are gone), or --follow alone "
                              "for new events only")}},
                     follow,
                     "The event stream ended: rdmad closed it (the channel or CM id watched was deleted, or rdmad is "
                     "shutting down).",
                     "events");
  }
};

}  // namespace

void RegisterCmCommands(Registry& r) {
  r.Add(r.Noun("get", Kind::kChannel, "rdma_cm event channels (each a dispatcher thread in rdmad)", true),
        GetOptions<json::ChannelList, v1::EventChannel>{
            Kind::kChannel, ChannelColumns, &client::Client::ListChannels, &v1::ListChannelsResponse::channels,
            &client::Client::GetChannel}
            .WithLabel(&v1::EventChannel::label));
  r.Add(r.Noun("get", Kind::kCmId, "rdma_cm communication ids", true),
        GetOptions<json::CmIdList, v1::CmId>{Kind::kCmId, CmIdColumns, &client::Client::ListCmIds,
                                             &v1::ListCmIdsResponse::cm_ids, &client::Client::GetCmId}
            .FilterBy("--channel", Kind::kChannel, "on")
            .WithKernelIds("CM-IDN"));
  r.Add<CreateChannelOptions>(r.Noun("create", Kind::kChannel, "Create an rdma_cm event channel (a dispatcher thread)"));
  r.Add<CreateCmIdOptions>(r.Noun("create", Kind::kCmId, "Create an rdma_cm id (RDMA_PS_TCP)"));
  r.Add<CreateTokenOptions>(r.Noun("create", Kind::kToken,
                                   "Issue a single-use connection token for rdmad's data-plane listener (a secret)"));
  r.Add<ConnectCmIdOptions>(r.Noun("connect", Kind::kCmId,
                                   "Resolve, create the id's QP and connect; returns once ESTABLISHED (bounded by --timeout)"));
  r.Add<ListenOptions>(r.Noun("listen", Kind::kCmId, "Bind an idle CM id to an address of this host and listen"));
  r.Add<AnswerOptions<v1::AcceptRequest, true>>(
      r.Noun("accept", Kind::kCmId, "Accept a CM id in CONNECT_REQUEST: creates its QP on the listener's PD"));
  r.Add<AnswerOptions<v1::RejectRequest, false>>(
      r.Noun("reject", Kind::kCmId, "Reject a CM id in CONNECT_REQUEST (the id is then deleted)"));
  r.Named("disconnect", Kind::kCmId, "rdma_disconnect a connected CM id",
          Says(&client::Client::Disconnect, " disconnecting (DISCONNECTED follows as an event)"));
  r.Add<MigrateOptions>(r.Noun("migrate", Kind::kCmId, "Move a CM id (and its events) to another event channel"));
  r.Named("delete", Kind::kChannel, "Delete an event channel (refused while CM ids live on it)",
          Deletes<v1::DeleteChannelResponse>(&client::Client::DeleteChannel));
  r.Named("delete", Kind::kCmId, "Destroy a CM id and its QP (refused while type 2 windows are bound on its QP)",
          Deletes<v1::DeleteCmIdResponse>(&client::Client::DeleteCmId));
  r.Add<EventsOptions>(r.Verb("events"));
}

}  // namespace rdmad::cli
