// rdmad client library: the control-plane stubs of rdmad.v1 behind absl::StatusOr.
//
// Errors come back as absl::Status with the server's code and message; the structured ErrorDetail (field,
// verbs call, errno, rereg outcome) is decoded from the status details and available via Detail().
//
// Every unary call is bounded by Options::timeout (its retries included), except Connect, whose deadline the
// caller gives (a connect waits for the peer). The watches (WatchEvents, WatchGrants) have no deadline unless
// WatchOptions sets one.
//
// Retries: the reads (every Get* and List* call, and WhoAmI) are retried, with exponential backoff, when the
// channel fails them with UNAVAILABLE (rdmad not reachable yet, the connection lost): such a failure carries
// no ErrorDetail. rdmad's own UNAVAILABLE (it is shutting down, rdma_cm is missing) is final, and nothing that
// changes state is ever retried.
//
// Lists: rdmad answers a List call a page at a time (at most 1000 items, docs/api.md#paging). Each List*
// method here follows next_page_token to the last page and returns every item in one response (whose
// next_page_token is empty), in the order of their names' numbers: one call per page, each bounded by
// Options::timeout; a failed page fails the whole list. Items made or removed meanwhile may or may not show,
// but none shows twice. The List*Page methods make one call for one page: the request's page_size and
// page_token as given, the response's next_page_token where the next page starts ("" after the last).
//
// Thread-safety: a Client may be used from many threads at once (gRPC channels and stubs are).
#ifndef RDMAD_CLIENT_CLIENT_H_
#define RDMAD_CLIENT_CLIENT_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "client/channel.h"
#include "rdmad/v1/rdmad.grpc.pb.h"

namespace rdmad::client {

inline constexpr char kDefaultTarget[] = "unix:/run/rdmad/rdmad.sock";

// grpc::Status -> absl::Status; the ErrorDetail, if any, rides along as a payload.
absl::Status FromGrpc(const grpc::Status& status);
// The ErrorDetail carried by a status returned from this library (empty if none).
v1::ErrorDetail Detail(const absl::Status& status);
// Whether the status carries an ErrorDetail: rdmad attaches one to every failure it reports, so a failure
// without one comes from the channel (rdmad unreachable, deadline passed before it answered).
bool HasDetail(const absl::Status& status);

// How a watch (WatchEvents, WatchGrants) ends besides the stream's own end.
struct WatchOptions {
  // End the watch (OK) once no event arrived for this long; zero: wait for events forever.
  std::chrono::milliseconds idle_timeout{0};
  // Bound the whole watch (it then ends with DEADLINE_EXCEEDED); zero: no deadline.
  std::chrono::milliseconds deadline{0};
  // If set, called once the stream's initial metadata arrived, before the first event: rdmad subscribes a
  // watch before it sends them (docs/api.md#watchevents), so whatever changes from then on comes as an
  // event, and a list taken here misses nothing between itself and the watch. Also called, at once, for a
  // stream rdmad refused (the watch then returns its status). Returning false ends the watch (OK).
  std::function<bool()> on_open;
};

// How the reads are retried when the channel fails them with UNAVAILABLE (see the top of this file). Attempt
// n + 1 starts initial_backoff * multiplier^(n - 1) (at most max_backoff) after attempt n failed, and only if
// that is before the call's deadline.
struct RetryOptions {
  int max_attempts = 4;  // attempts in all; 1: no retries
  std::chrono::milliseconds initial_backoff{250};
  std::chrono::milliseconds max_backoff{2000};
  double multiplier = 2.0;
};

// How a call that creates or binds runs (RegisterMr, BindMw, IssueGrant).
struct MutateOptions {
  // Only validate (the request's validate_only; either one sets it): rdmad checks the request exactly as for
  // real (the same errors, codes and ErrorDetail field; quotas: would it fit?) and answers what the call would
  // have returned, minus what exists only once made (names, addresses, keys, the grant's token: empty or 0,
  // docs/api.md#validate-only); nothing is pinned, registered, bound, issued or recorded. Such a call is
  // retried like a read. An rdmad too old to know validate_only would really create the object: its answer
  // then has a name, and the call fails with FAILED_PRECONDITION on validate_only, naming what was made.
  bool validate_only = false;
};

class Client {
 public:
  struct Options {
    std::string target = kDefaultTarget;    // "unix:/path" or "host:port"
    std::chrono::milliseconds timeout{30000};  // the default deadline of each call, its retries included
    // Mutual TLS on TCP (channel.h): CA, client certificate and key, server name override. Not used on a
    // unix socket, where rdmad identifies the caller by its uid.
    TlsOptions tls{};
    // The largest answer accepted, in bytes (gRPC's own default is 4 MiB; a List answers a page of at most
    // 1000 items, far less); -1: no limit. A larger answer fails with RESOURCE_EXHAUSTED.
    int max_receive_message_bytes = 64 << 20;
    RetryOptions retry{};
    // The page_size the List* methods ask for on each page; 0: rdmad's default (1000, also its maximum).
    int32_t list_page_size = 0;
    // rdmad's descriptor socket (ShareFd): "" for the unix target's path with ".fd" appended (rdmad's
    // default, config descriptor_socket "auto").
    std::string descriptor_socket;
  };
  // Checks the options (the TLS files are read here: INVALID_ARGUMENT naming the file) and makes the
  // channel; it connects on the first call.
  static absl::StatusOr<std::unique_ptr<Client>> Create(Options options);
  // As Create, but a bad option shows on every call instead (the unary calls return Create's error; the
  // watches fail with INVALID_ARGUMENT).
  explicit Client(Options options);
  // On a channel of the caller's (e.g. from Dial); the reads are not retried unless `retry` says so.
  explicit Client(std::shared_ptr<grpc::Channel> channel,
                  std::chrono::milliseconds timeout = std::chrono::milliseconds(30000),
                  RetryOptions retry = RetryOptions{1});

  absl::StatusOr<v1::ListDevicesResponse> ListDevices();
  absl::StatusOr<v1::ListDevicesResponse> ListDevicesPage(const v1::ListDevicesRequest& request);
  absl::StatusOr<v1::Device> GetDevice(const std::string& name);
  // The kernel's numbers (pdn, mrn, qpn, cm-idn) of the objects on `device` that the caller may see.
  absl::StatusOr<v1::ListKernelIdsResponse> ListKernelIds(const std::string& device);

  absl::StatusOr<v1::ProtectionDomain> CreatePd(const v1::CreatePdRequest& request);
  absl::StatusOr<v1::ProtectionDomain> GetPd(const std::string& name);
  absl::StatusOr<v1::ListPdsResponse> ListPds();
  absl::StatusOr<v1::ListPdsResponse> ListPdsPage(const v1::ListPdsRequest& request);
  // revoke_grants: revoke the live grants on the PD's regions first (without it rdmad refuses while any live).
  absl::StatusOr<v1::DeletePdResponse> DeletePd(const std::string& name, bool cascade = false,
                                                bool revoke_grants = false);

  absl::StatusOr<v1::MemoryRegion> RegisterMr(const v1::RegisterMrRequest& request, const MutateOptions& options = {});
  absl::StatusOr<v1::MemoryRegion> GetMr(const std::string& name);
  absl::StatusOr<v1::ListMrsResponse> ListMrs(const std::string& pd = "");
  absl::StatusOr<v1::ListMrsResponse> ListMrsPage(const v1::ListMrsRequest& request);
  absl::StatusOr<v1::ReregisterMrResponse> ReregisterMr(const v1::ReregisterMrRequest& request);
  // revoke_grants: revoke the live grants on the MR first (without it rdmad refuses while any live).
  // ReregisterMr takes it in its request.
  absl::Status DeregisterMr(const std::string& name, bool revoke_grants = false);

  absl::StatusOr<v1::QueuePair> CreateQp(const v1::CreateQpRequest& request);
  absl::StatusOr<v1::QueuePair> GetQp(const std::string& name);
  absl::StatusOr<v1::ListQpsResponse> ListQps();
  absl::StatusOr<v1::ListQpsResponse> ListQpsPage(const v1::ListQpsRequest& request);
  absl::StatusOr<v1::QueuePair> ConnectQp(const v1::ConnectQpRequest& request);
  absl::Status DeleteQp(const std::string& name);

  absl::StatusOr<v1::MemoryWindow> AllocMw(const v1::AllocMwRequest& request);
  absl::StatusOr<v1::MemoryWindow> GetMw(const std::string& name);
  absl::StatusOr<v1::ListMwsResponse> ListMws(const std::string& pd = "");
  absl::StatusOr<v1::ListMwsResponse> ListMwsPage(const v1::ListMwsRequest& request);
  absl::StatusOr<v1::MemoryWindow> BindMw(const v1::BindMwRequest& request, const MutateOptions& options = {});
  absl::StatusOr<v1::MemoryWindow> InvalidateMw(const std::string& name);
  absl::Status DeallocMw(const std::string& name);

  // ---- rdma_cm (client_cm.cc)

  absl::StatusOr<v1::EventChannel> CreateChannel(const v1::CreateChannelRequest& request);
  absl::StatusOr<v1::EventChannel> GetChannel(const std::string& name);
  absl::StatusOr<v1::ListChannelsResponse> ListChannels();
  absl::StatusOr<v1::ListChannelsResponse> ListChannelsPage(const v1::ListChannelsRequest& request);
  absl::Status DeleteChannel(const std::string& name);

  absl::StatusOr<v1::CmId> CreateCmId(const v1::CreateCmIdRequest& request);
  absl::StatusOr<v1::CmId> GetCmId(const std::string& name);
  absl::StatusOr<v1::ListCmIdsResponse> ListCmIds(const std::string& channel = "");
  absl::StatusOr<v1::ListCmIdsResponse> ListCmIdsPage(const v1::ListCmIdsRequest& request);
  absl::StatusOr<v1::CmId> Listen(const v1::ListenRequest& request);
  // Returns once the connection is established or failed, or when `timeout` (the call's deadline, not
  // Options::timeout) passes: then DEADLINE_EXCEEDED, and rdmad may still complete the connect.
  absl::StatusOr<v1::CmId> Connect(const v1::ConnectRequest& request, std::chrono::milliseconds timeout);
  absl::StatusOr<v1::CmId> Accept(const v1::AcceptRequest& request);
  absl::StatusOr<v1::CmId> Reject(const v1::RejectRequest& request);
  absl::StatusOr<v1::CmId> Disconnect(const std::string& name);
  absl::Status DeleteCmId(const std::string& name);
  absl::StatusOr<v1::CmId> MigrateCmId(const v1::MigrateCmIdRequest& request);

  // Reads the event stream, calling on_event (on the calling thread) for each event in order, until the
  // stream ends, on_event returns false, or `options` end it. Returns the stream's final status as rdmad
  // sent it (e.g. RESOURCE_EXHAUSTED, with its message, when this watcher fell behind), or OK when on_event
  // or the idle timeout ended it (the call is then cancelled).
  absl::Status WatchEvents(const v1::WatchEventsRequest& request,
                           const std::function<bool(const v1::CmEvent&)>& on_event, WatchOptions options = {});

  absl::StatusOr<v1::ConnectToken> IssueConnectToken(const v1::IssueConnectTokenRequest& request);

  // ---- grants (client_grants.cc)

  // The IssuedGrant carries the token (a secret, single use: only this call returns it) and the endpoints
  // of rdmad's data-plane listener; RemoteRegion::Open (client/remote_region.h) takes it as it is.
  // With options.validate_only: the grant it would issue, with no name, token name or token.
  absl::StatusOr<v1::IssuedGrant> IssueGrant(const v1::IssueGrantRequest& request, const MutateOptions& options = {});
  // All or nothing (an error names "grants[i].field").
  absl::StatusOr<v1::IssueGrantsResponse> IssueGrants(const v1::IssueGrantsRequest& request);
  absl::StatusOr<v1::Grant> GetGrant(const std::string& name);
  // Filters are optional ("" for all); include_ended adds the recently ended grants rdmad remembers.
  absl::StatusOr<v1::ListGrantsResponse> ListGrants(const std::string& mr = "", const std::string& principal = "",
                                                    bool include_ended = false);
  absl::StatusOr<v1::ListGrantsResponse> ListGrantsPage(const v1::ListGrantsRequest& request);
  // The lease then ends `ttl` after rdmad handles the call. INVALID_ARGUMENT (nothing sent) when `ttl` is
  // not 1 ms .. 2^32-1 ms.
  absl::StatusOr<v1::Grant> RenewGrant(const std::string& name, std::chrono::milliseconds ttl);
  // Returns once the key is dead at the NIC (the grant as it then is: ENDED, with its end_reason).
  absl::StatusOr<v1::Grant> RevokeGrant(const std::string& name);
  // As WatchEvents, for grant events (issued, activated, renewed, revoked, expired) as they happen.
  absl::Status WatchGrants(const v1::WatchGrantsRequest& request,
                           const std::function<bool(const v1::GrantEvent&)>& on_event, WatchOptions options = {});

  // ---- audit (client_audit.cc)

  // As WatchEvents, for rdmad's audit records (admins only: PERMISSION_DENIED otherwise; FAILED_PRECONDITION
  // if rdmad's audit log is off). from_oldest / after_sequence replay the records rdmad still retains.
  absl::Status WatchAudit(const v1::WatchAuditRequest& request,
                          const std::function<bool(const v1::AuditRecord&)>& on_record, WatchOptions options = {});

  // ---- tenants (client_tenants.cc)

  // Who rdmad takes this caller to be: principal, tenant, role, how it was authenticated.
  absl::StatusOr<v1::Caller> WhoAmI();
  // An admin gets every tenant, a tenant caller only its own; each with its quotas' use and its PDs.
  absl::StatusOr<v1::ListTenantsResponse> ListTenants();
  absl::StatusOr<v1::ListTenantsResponse> ListTenantsPage(const v1::ListTenantsRequest& request);
  // "tenants/app" (or "app"); another tenant's is NOT_FOUND, as a missing one.
  absl::StatusOr<v1::Tenant> GetTenant(const std::string& name);

  // grpc.health.v1: OK when the server reports SERVING.
  absl::Status Health();

  // ---- memory passed as a file descriptor (client_fd.cc; docs/sdk.md#memory-passed-as-a-file-descriptor)

  // Passes `fd` (a memfd, or another tmpfs or hugetlbfs file) to rdmad over its descriptor socket, which
  // only a process on rdmad's host can reach: rdmad gets its own copy, the caller keeps `fd`. Answers the
  // handle that a RegisterMr names once, in source.fd, within rdmad's descriptor_ttl_s (60 s by default),
  // as the same principal. The socket is Options::descriptor_socket, else the unix target's path with
  // ".fd" appended; FAILED_PRECONDITION for a TCP target without it. rdmad's refusals keep their code and
  // message (PERMISSION_DENIED, RESOURCE_EXHAUSTED, ...); a socket that cannot be reached is UNAVAILABLE.
  // Bounded by Options::timeout.
  absl::StatusOr<std::string> ShareFd(int fd);

 private:
  // Client(Options) on what ChannelFor (client.cc) made of them: the channel and Dial's error, if any.
  Client(std::pair<std::shared_ptr<grpc::Channel>, absl::Status> dialed, const Options& options);

  // One unary call bounded by `timeout`, retries included (only reads are retried: IsRead).
  template <typename Stub, typename Request, typename Response>
  absl::StatusOr<Response> Call(Stub* stub,
                                grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Response*),
                                const Request& request, std::chrono::milliseconds timeout) {
    if (!dial_status_.ok()) return dial_status_;
    const auto deadline = std::chrono::system_clock::now() + timeout;
    const bool read = IsRead(request);
    for (int attempt = 1;; attempt++) {
      grpc::ClientContext ctx;
      ctx.set_deadline(deadline);
      Response response;
      grpc::Status status = (stub->*method)(&ctx, request, &response);
      if (status.ok()) return response;
      absl::Status failed = FromGrpc(status);
      if (!read || !BackOff(failed, attempt, deadline)) return failed;
    }
  }
  // One unary call bounded by Options::timeout.
  template <typename Stub, typename Request, typename Response>
  absl::StatusOr<Response> Call(Stub* stub,
                                grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Response*),
                                const Request& request) {
    return Call(stub, method, request, timeout_);
  }

  // Every page of a List call: `request` (its page_size Options::list_page_size unless set), then again
  // with each next_page_token until the last page; the items of all in one response.
  template <typename Stub, typename Request, typename Response, typename Items>
  absl::StatusOr<Response> ListAll(Stub* stub,
                                   grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Response*),
                                   Request request, Items* (Response::*items)()) {
    if (request.page_size() == 0) request.set_page_size(list_page_size_);
    Response all;
    for (bool first = true;; first = false) {
      absl::StatusOr<Response> page = Call(stub, method, request);
      if (!page.ok()) return page.status();
      std::string next = page->next_page_token();
      if (first) {
        all = *std::move(page);
      } else {
        Items* from = ((*page).*items)();
        Items* to = (all.*items)();
        to->Reserve(to->size() + from->size());
        for (auto& item : *from) *to->Add() = std::move(item);
      }
      if (next.empty()) break;
      if (next == request.page_token()) return RepeatedToken(Request::descriptor()->name());
      request.set_page_token(std::move(next));
    }
    all.clear_next_page_token();
    return all;
  }
  static absl::Status RepeatedToken(const std::string& request);

  // One server stream, read by ReadStream: `open` starts the call on the context it is given.
  template <typename Event, typename Open>
  static absl::Status Watch(Open open, const std::function<bool(const Event&)>& on_event, const WatchOptions& options) {
    grpc::ClientContext ctx;
    if (options.deadline.count() > 0) ctx.set_deadline(std::chrono::system_clock::now() + options.deadline);
    std::unique_ptr<grpc::ClientReader<Event>> reader = open(&ctx);
    if (options.on_open) {
      reader->WaitForInitialMetadata();
      if (!options.on_open()) {
        ctx.TryCancel();
        reader->Finish();  // cancelled by us: its status says only that
        return absl::OkStatus();
      }
    }
    Event event;
    return ReadStream(
        ctx, options, [&] { return reader->Read(&event); }, [&] { return on_event(event); },
        [&] { return reader->Finish(); });
  }
  // The loop every watch shares (client_cm.cc): `read` the next message (false: the stream is over),
  // `deliver` it (false: stop, cancelling the call), then `finish` for the stream's status. Runs the idle
  // watchdog of `options` meanwhile; OK when deliver or the idle timeout ended it.
  static absl::Status ReadStream(grpc::ClientContext& ctx, const WatchOptions& options,
                                 const std::function<bool()>& read, const std::function<bool()>& deliver,
                                 const std::function<grpc::Status()>& finish);

  // Whether `request` is a read's (Get*, List*, WhoAmI, or any with validate_only set): those alone are retried.
  static bool IsRead(const google::protobuf::Message& request);
  // A validate_only call (MutateOptions): `request` with validate_only set if `options` asks for it, then the
  // call; an answer naming what it made (an rdmad that ignored validate_only) is FAILED_PRECONDITION.
  template <typename Stub, typename Request, typename Response>
  absl::StatusOr<Response> Mutate(Stub* stub,
                                  grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Response*),
                                  const Request& request, const MutateOptions& options,
                                  const std::string& (*made)(const Response&)) {
    if (!options.validate_only || request.validate_only()) {
      absl::StatusOr<Response> out = Call(stub, method, request);
      if (request.validate_only()) return CheckValidated(std::move(out), made);
      return out;
    }
    Request validated = request;
    validated.set_validate_only(true);
    return CheckValidated(Call(stub, method, validated), made);
  }
  template <typename Response>
  static absl::StatusOr<Response> CheckValidated(absl::StatusOr<Response> out,
                                                 const std::string& (*made)(const Response&)) {
    if (!out.ok() || made(*out).empty()) return out;
    return NotValidated(made(*out));
  }
  static absl::Status NotValidated(const std::string& made);
  // After attempt `attempt` failed with `failed`: whether to try again (then it has slept the backoff first).
  bool BackOff(const absl::Status& failed, int attempt, std::chrono::system_clock::time_point deadline) const;

  absl::Status dial_status_;  // Client(Options) with a bad option: every call's answer
  std::shared_ptr<grpc::Channel> channel_;
  std::chrono::milliseconds timeout_;
  RetryOptions retry_;
  int32_t list_page_size_ = 0;
  std::string descriptor_socket_;  // ShareFd's socket path; "" if none is known (a TCP target, or a channel)
  std::unique_ptr<v1::Devices::Stub> devices_;
  std::unique_ptr<v1::ProtectionDomains::Stub> pds_;
  std::unique_ptr<v1::MemoryRegions::Stub> mrs_;
  std::unique_ptr<v1::QueuePairs::Stub> qps_;
  std::unique_ptr<v1::MemoryWindows::Stub> mws_;
  std::unique_ptr<v1::EventChannels::Stub> channels_;
  std::unique_ptr<v1::CmIds::Stub> cm_ids_;
  std::unique_ptr<v1::ConnectTokens::Stub> tokens_;
  std::unique_ptr<v1::Grants::Stub> grants_;
};

}  // namespace rdmad::client

#endif  // RDMAD_CLIENT_CLIENT_H_
