// The client's core: status conversion, the channel and stubs, and the calls on devices, PDs, MRs, QPs and
// MWs. The rdma_cm calls (and the stream reader every watch shares) are in client_cm.cc, grants in
// client_grants.cc.
#include "client/client.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace rdmad::client {
namespace {
constexpr char kDetailPayload[] = "type.googleapis.com/rdmad.v1.ErrorDetail";
}

absl::Status FromGrpc(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  absl::Status out(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  v1::RpcStatus rpc;
  if (!status.error_details().empty() && rpc.ParseFromString(status.error_details())) {
    for (const auto& any : rpc.details()) {
      v1::ErrorDetail detail;
      if (any.UnpackTo(&detail)) out.SetPayload(kDetailPayload, absl::Cord(detail.SerializeAsString()));
    }
  }
  return out;
}

bool HasDetail(const absl::Status& status) { return status.GetPayload(kDetailPayload).has_value(); }

v1::ErrorDetail Detail(const absl::Status& status) {
  v1::ErrorDetail detail;
  if (auto p = status.GetPayload(kDetailPayload)) detail.ParseFromString(std::string(*p));
  return detail;
}

namespace {

// The channel Client(Options) uses: Dial's, or on a bad option a lame channel (gRPC fails every call on it
// with INVALID_ARGUMENT) with the error.
std::pair<std::shared_ptr<grpc::Channel>, absl::Status> ChannelFor(const Client::Options& options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Dial(options.target, options.tls, args);
  if (channel.ok()) return {*std::move(channel), absl::OkStatus()};
  return {grpc::CreateCustomChannel(options.target, nullptr, args), channel.status()};  // null credentials: lame
}

}  // namespace

absl::StatusOr<std::unique_ptr<Client>> Client::Create(Options options) {
  auto client = std::make_unique<Client>(std::move(options));
  if (!client->dial_status_.ok()) return client->dial_status_;
  return client;
}

Client::Client(Options options) : Client(ChannelFor(options), options) {}

Client::Client(std::pair<std::shared_ptr<grpc::Channel>, absl::Status> dialed, const Options& options)
    : Client(std::move(dialed.first), options.timeout, options.retry) {
  dial_status_ = std::move(dialed.second);
  list_page_size_ = options.list_page_size;
  descriptor_socket_ = options.descriptor_socket;
  if (descriptor_socket_.empty()) {
    if (absl::StartsWith(options.target, "unix://")) descriptor_socket_ = options.target.substr(7) + ".fd";
    else if (absl::StartsWith(options.target, "unix:")) descriptor_socket_ = options.target.substr(5) + ".fd";
  }
}

absl::Status Client::RepeatedToken(const std::string& request) {
  return absl::InternalError(
      absl::StrCat("page_token: rdmad answered a ", request, " with the token it was given: the list would not end"));
}

bool Client::IsRead(const google::protobuf::Message& request) {
  const std::string& name = request.GetDescriptor()->name();
  if (absl::StartsWith(name, "Get") || absl::StartsWith(name, "List") || name == "WhoAmIRequest") return true;
  // A validation changes nothing: retried like a read.
  const google::protobuf::FieldDescriptor* f = request.GetDescriptor()->FindFieldByName("validate_only");
  return f != nullptr && f->type() == google::protobuf::FieldDescriptor::TYPE_BOOL &&
         request.GetReflection()->GetBool(request, f);
}

absl::Status Client::NotValidated(const std::string& made) {
  return absl::FailedPreconditionError(
      absl::StrCat("validate_only: rdmad does not support it and really created ", made,
                   " (an older rdmad): remove it if it is not wanted"));
}

bool Client::BackOff(const absl::Status& failed, int attempt, std::chrono::system_clock::time_point deadline) const {
  // Only the channel's UNAVAILABLE: rdmad's own (with an ErrorDetail) means it refuses, and will again.
  if (failed.code() != absl::StatusCode::kUnavailable || HasDetail(failed)) return false;
  if (attempt >= retry_.max_attempts) return false;
  const double ms = std::min<double>(static_cast<double>(retry_.initial_backoff.count()) *
                                         std::pow(std::max(retry_.multiplier, 1.0), attempt - 1),
                                     static_cast<double>(retry_.max_backoff.count()));
  const auto wait = std::chrono::milliseconds(static_cast<int64_t>(ms));
  if (std::chrono::system_clock::now() + wait >= deadline) return false;
  std::this_thread::sleep_for(wait);
  return true;
}

Client::Client(std::shared_ptr<grpc::Channel> channel, std::chrono::milliseconds timeout, RetryOptions retry)
    : channel_(std::move(channel)),
      timeout_(timeout),
      retry_(retry),
      devices_(v1::Devices::NewStub(channel_)),
      pds_(v1::ProtectionDomains::NewStub(channel_)),
      mrs_(v1::MemoryRegions::NewStub(channel_)),
      qps_(v1::QueuePairs::NewStub(channel_)),
      mws_(v1::MemoryWindows::NewStub(channel_)),
      channels_(v1::EventChannels::NewStub(channel_)),
      cm_ids_(v1::CmIds::NewStub(channel_)),
      tokens_(v1::ConnectTokens::NewStub(channel_)),
      grants_(v1::Grants::NewStub(channel_)) {}

absl::StatusOr<v1::ListDevicesResponse> Client::ListDevices() {
  return ListAll(devices_.get(), &v1::Devices::Stub::ListDevices, v1::ListDevicesRequest(),
                 &v1::ListDevicesResponse::mutable_devices);
}
absl::StatusOr<v1::ListDevicesResponse> Client::ListDevicesPage(const v1::ListDevicesRequest& request) {
  return Call(devices_.get(), &v1::Devices::Stub::ListDevices, request);
}
absl::StatusOr<v1::Device> Client::GetDevice(const std::string& name) {
  v1::GetDeviceRequest r;
  r.set_name(name);
  return Call(devices_.get(), &v1::Devices::Stub::GetDevice, r);
}
absl::StatusOr<v1::ListKernelIdsResponse> Client::ListKernelIds(const std::string& device) {
  v1::ListKernelIdsRequest r;
  r.set_device(device);
  return Call(devices_.get(), &v1::Devices::Stub::ListKernelIds, r);
}

absl::StatusOr<v1::ProtectionDomain> Client::CreatePd(const v1::CreatePdRequest& request) {
  return Call(pds_.get(), &v1::ProtectionDomains::Stub::CreatePd, request);
}
absl::StatusOr<v1::ProtectionDomain> Client::GetPd(const std::string& name) {
  v1::GetPdRequest r;
  r.set_name(name);
  return Call(pds_.get(), &v1::ProtectionDomains::Stub::GetPd, r);
}
absl::StatusOr<v1::ListPdsResponse> Client::ListPds() {
  return ListAll(pds_.get(), &v1::ProtectionDomains::Stub::ListPds, v1::ListPdsRequest(),
                 &v1::ListPdsResponse::mutable_pds);
}
absl::StatusOr<v1::ListPdsResponse> Client::ListPdsPage(const v1::ListPdsRequest& request) {
  return Call(pds_.get(), &v1::ProtectionDomains::Stub::ListPds, request);
}
absl::StatusOr<v1::DeletePdResponse> Client::DeletePd(const std::string& name, bool cascade, bool revoke_grants) {
  v1::DeletePdRequest r;
  r.set_name(name);
  r.set_cascade(cascade);
  r.set_revoke_grants(revoke_grants);
  return Call(pds_.get(), &v1::ProtectionDomains::Stub::DeletePd, r);
}

absl::StatusOr<v1::MemoryRegion> Client::RegisterMr(const v1::RegisterMrRequest& request,
                                                    const MutateOptions& options) {
  return Mutate(mrs_.get(), &v1::MemoryRegions::Stub::RegisterMr, request, options,
                +[](const v1::MemoryRegion& mr) -> const std::string& { return mr.name(); });
}
absl::StatusOr<v1::MemoryRegion> Client::GetMr(const std::string& name) {
  v1::GetMrRequest r;
  r.set_name(name);
  return Call(mrs_.get(), &v1::MemoryRegions::Stub::GetMr, r);
}
absl::StatusOr<v1::ListMrsResponse> Client::ListMrs(const std::string& pd) {
  v1::ListMrsRequest r;
  r.set_pd(pd);
  return ListAll(mrs_.get(), &v1::MemoryRegions::Stub::ListMrs, r, &v1::ListMrsResponse::mutable_mrs);
}
absl::StatusOr<v1::ListMrsResponse> Client::ListMrsPage(const v1::ListMrsRequest& request) {
  return Call(mrs_.get(), &v1::MemoryRegions::Stub::ListMrs, request);
}
absl::StatusOr<v1::ReregisterMrResponse> Client::ReregisterMr(const v1::ReregisterMrRequest& request) {
  return Call(mrs_.get(), &v1::MemoryRegions::Stub::ReregisterMr, request);
}
absl::Status Client::DeregisterMr(const std::string& name, bool revoke_grants) {
  v1::DeregisterMrRequest r;
  r.set_name(name);
  r.set_revoke_grants(revoke_grants);
  return Call(mrs_.get(), &v1::MemoryRegions::Stub::DeregisterMr, r).status();
}

absl::StatusOr<v1::QueuePair> Client::CreateQp(const v1::CreateQpRequest& request) {
  return Call(qps_.get(), &v1::QueuePairs::Stub::CreateQp, request);
}
absl::StatusOr<v1::QueuePair> Client::GetQp(const std::string& name) {
  v1::GetQpRequest r;
  r.set_name(name);
  return Call(qps_.get(), &v1::QueuePairs::Stub::GetQp, r);
}
absl::StatusOr<v1::ListQpsResponse> Client::ListQps() {
  return ListAll(qps_.get(), &v1::QueuePairs::Stub::ListQps, v1::ListQpsRequest(), &v1::ListQpsResponse::mutable_qps);
}
absl::StatusOr<v1::ListQpsResponse> Client::ListQpsPage(const v1::ListQpsRequest& request) {
  return Call(qps_.get(), &v1::QueuePairs::Stub::ListQps, request);
}
absl::StatusOr<v1::QueuePair> Client::ConnectQp(const v1::ConnectQpRequest& request) {
  return Call(qps_.get(), &v1::QueuePairs::Stub::ConnectQp, request);
}
absl::Status Client::DeleteQp(const std::string& name) {
  v1::DeleteQpRequest r;
  r.set_name(name);
  return Call(qps_.get(), &v1::QueuePairs::Stub::DeleteQp, r).status();
}

absl::StatusOr<v1::MemoryWindow> Client::AllocMw(const v1::AllocMwRequest& request) {
  return Call(mws_.get(), &v1::MemoryWindows::Stub::AllocMw, request);
}
absl::StatusOr<v1::MemoryWindow> Client::GetMw(const std::string& name) {
  v1::GetMwRequest r;
  r.set_name(name);
  return Call(mws_.get(), &v1::MemoryWindows::Stub::GetMw, r);
}
absl::StatusOr<v1::ListMwsResponse> Client::ListMws(const std::string& pd) {
  v1::ListMwsRequest r;
  r.set_pd(pd);
  return ListAll(mws_.get(), &v1::MemoryWindows::Stub::ListMws, r, &v1::ListMwsResponse::mutable_mws);
}
absl::StatusOr<v1::ListMwsResponse> Client::ListMwsPage(const v1::ListMwsRequest& request) {
  return Call(mws_.get(), &v1::MemoryWindows::Stub::ListMws, request);
}
absl::StatusOr<v1::MemoryWindow> Client::BindMw(const v1::BindMwRequest& request, const MutateOptions& options) {
  // The window exists already: a validation answers it with no rkey (0), a real bind with its new one.
  static const std::string kNone;
  return Mutate(mws_.get(), &v1::MemoryWindows::Stub::BindMw, request, options,
                +[](const v1::MemoryWindow& mw) -> const std::string& { return mw.rkey() != 0 ? mw.name() : kNone; });
}
absl::StatusOr<v1::MemoryWindow> Client::InvalidateMw(const std::string& name) {
  v1::InvalidateMwRequest r;
  r.set_name(name);
  return Call(mws_.get(), &v1::MemoryWindows::Stub::InvalidateMw, r);
}
absl::Status Client::DeallocMw(const std::string& name) {
  v1::DeallocMwRequest r;
  r.set_name(name);
  return Call(mws_.get(), &v1::MemoryWindows::Stub::DeallocMw, r).status();
}

absl::Status Client::Health() {
  auto stub = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout_);
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  absl::Status s = FromGrpc(stub->Check(&ctx, request, &response));
  if (!s.ok()) return s;
  if (response.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    return absl::UnavailableError("rdmad reports NOT_SERVING");
  }
  return absl::OkStatus();
}

}  // namespace rdmad::client
