// The client's rdma_cm calls: event channels, CM ids (WatchEvents) and connection tokens; and ReadStream, the
// stream reader every watch shares (WatchEvents here, WatchGrants in client_grants.cc).
#include <condition_variable>
#include <mutex>
#include <thread>

#include "client/client.h"

namespace rdmad::client {

absl::StatusOr<v1::EventChannel> Client::CreateChannel(const v1::CreateChannelRequest& request) {
  return Call(channels_.get(), &v1::EventChannels::Stub::CreateChannel, request);
}
absl::StatusOr<v1::EventChannel> Client::GetChannel(const std::string& name) {
  v1::GetChannelRequest r;
  r.set_name(name);
  return Call(channels_.get(), &v1::EventChannels::Stub::GetChannel, r);
}
absl::StatusOr<v1::ListChannelsResponse> Client::ListChannels() {
  return ListAll(channels_.get(), &v1::EventChannels::Stub::ListChannels, v1::ListChannelsRequest(),
                 &v1::ListChannelsResponse::mutable_channels);
}
absl::StatusOr<v1::ListChannelsResponse> Client::ListChannelsPage(const v1::ListChannelsRequest& request) {
  return Call(channels_.get(), &v1::EventChannels::Stub::ListChannels, request);
}
absl::Status Client::DeleteChannel(const std::string& name) {
  v1::DeleteChannelRequest r;
  r.set_name(name);
  return Call(channels_.get(), &v1::EventChannels::Stub::DeleteChannel, r).status();
}

absl::StatusOr<v1::CmId> Client::CreateCmId(const v1::CreateCmIdRequest& request) {
  return Call(cm_ids_.get(), &v1::CmIds::Stub::CreateCmId, request);
}
absl::StatusOr<v1::CmId> Client::GetCmId(const std::string& name) {
  v1::GetCmIdRequest r;
  r.set_name(name);
  return Call(cm_ids_.get(), &v1::CmIds::Stub::GetCmId, r);
}
absl::StatusOr<v1::ListCmIdsResponse> Client::ListCmIds(const std::string& channel) {
  v1::ListCmIdsRequest r;
  r.set_channel(channel);
  return ListAll(cm_ids_.get(), &v1::CmIds::Stub::ListCmIds, r, &v1::ListCmIdsResponse::mutable_cm_ids);
}
absl::StatusOr<v1::ListCmIdsResponse> Client::ListCmIdsPage(const v1::ListCmIdsRequest& request) {
  return Call(cm_ids_.get(), &v1::CmIds::Stub::ListCmIds, request);
}
absl::StatusOr<v1::CmId> Client::Listen(const v1::ListenRequest& request) {
  return Call(cm_ids_.get(), &v1::CmIds::Stub::Listen, request);
}
absl::StatusOr<v1::CmId> Client::Connect(const v1::ConnectRequest& request, std::chrono::milliseconds timeout) {
  return Call(cm_ids_.get(), &v1::CmIds::Stub::Connect, request, timeout);
}
absl::StatusOr<v1::CmId> Client::Accept(const v1::AcceptRequest& request) {
  return Call(cm_ids_.get(), &v1::CmIds::Stub::Accept, request);
}
absl::StatusOr<v1::CmId> Client::Reject(const v1::RejectRequest& request) {
  return Call(cm_ids_.get(), &v1::CmIds::Stub::Reject, request);
}
absl::StatusOr<v1::CmId> Client::Disconnect(const std::string& name) {
  v1::DisconnectRequest r;
  r.set_name(name);
  return Call(cm_ids_.get(), &v1::CmIds::Stub::Disconnect, r);
}
absl::Status Client::DeleteCmId(const std::string& name) {
  v1::DeleteCmIdRequest r;
  r.set_name(name);
  return Call(cm_ids_.get(), &v1::CmIds::Stub::DeleteCmId, r).status();
}
absl::StatusOr<v1::CmId> Client::MigrateCmId(const v1::MigrateCmIdRequest& request) {
  return Call(cm_ids_.get(), &v1::CmIds::Stub::MigrateCmId, request);
}

absl::Status Client::WatchEvents(const v1::WatchEventsRequest& request,
                                 const std::function<bool(const v1::CmEvent&)>& on_event, WatchOptions options) {
  return Watch<v1::CmEvent>([&](grpc::ClientContext* ctx) { return cm_ids_->WatchEvents(ctx, request); }, on_event,
                            options);
}

absl::Status Client::ReadStream(grpc::ClientContext& ctx, const WatchOptions& options,
                                const std::function<bool()>& read, const std::function<bool()>& deliver,
                                const std::function<grpc::Status()>& finish) {
  using Clock = std::chrono::steady_clock;

  // The idle watchdog: cancels the call once Read has waited idle_timeout for an event. Time spent in
  // on_event does not count (a slow consumer is not an idle stream).
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false, in_callback = false, idle = false;
  Clock::time_point waiting_since = Clock::now();
  std::thread watchdog;
  if (options.idle_timeout.count() > 0) {
    watchdog = std::thread([&] {
      std::unique_lock<std::mutex> lock(mu);
      while (!finished) {
        if (in_callback) {
          cv.wait(lock);
          continue;
        }
        const Clock::time_point until = waiting_since + options.idle_timeout;
        if (Clock::now() >= until) {
          idle = true;
          ctx.TryCancel();
          return;
        }
        cv.wait_until(lock, until);
      }
    });
  }
  auto set_in_callback = [&](bool busy) {
    {
      std::lock_guard<std::mutex> lock(mu);
      in_callback = busy;
      if (!busy) waiting_since = Clock::now();
    }
    cv.notify_all();
  };

  bool stopped = false;
  while (read()) {
    set_in_callback(true);
    const bool more = deliver();
    set_in_callback(false);
    if (!more) {
      stopped = true;
      ctx.TryCancel();
      break;
    }
  }
  grpc::Status status = finish();
  {
    std::lock_guard<std::mutex> lock(mu);
    finished = true;
  }
  cv.notify_all();
  if (watchdog.joinable()) watchdog.join();
  // Ended on our side: the CANCELLED it produced is not a failure. Any other status is the stream's own.
  if ((stopped || idle) && status.error_code() == grpc::StatusCode::CANCELLED) return absl::OkStatus();
  return FromGrpc(status);
}

absl::StatusOr<v1::ConnectToken> Client::IssueConnectToken(const v1::IssueConnectTokenRequest& request) {
  return Call(tokens_.get(), &v1::ConnectTokens::Stub::IssueConnectToken, request);
}

}  // namespace rdmad::client
