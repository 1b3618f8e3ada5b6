// CmManager: life cycle, channels, routing work to the owning loop, and the API messages. Id operations
// are in ids.cc, event dispatch and the data-plane listeners' connections in dispatch.cc. Threads: see manager.h.
#include "server/cm/manager.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/log.h"
#include "server/common/status.h"
#include "server/common/sync.h"
#include "server/registry/rules.h"

namespace rdmad::cm {
namespace {

constexpr size_t kMaxLabel = 128;

v1::SocketAddress ToProto(const fabric::SockAddr& a) {
  v1::SocketAddress out;
  out.set_address(a.host);
  out.set_port(a.port);
  return out;
}

}  // namespace

CmManager::CmManager(fabric::CmFabric* cm, Registry* registry, Options options)
    : cm_(cm), registry_(registry), options_(std::move(options)), events_(options_.events) {}

CmManager::~CmManager() {
  Quiesce();
  // Stop every dispatcher first: from here this thread is the only one touching ids and channels, and
  // every event they read was acknowledged.
  std::vector<Channel*> channels;
  {
    MutexLock lock(&mu_);
    for (auto& [n, ch] : channels_) channels.push_back(ch.get());
  }
  for (Channel* ch : channels) ch->loop.reset();
  std::vector<Id*> ids;
  {
    MutexLock lock(&mu_);
    for (auto& [n, id] : ids_) ids.push_back(id.get());
  }
  for (Id* id : ids) {
    if (id->connect_done) std::move(id->connect_done)(absl::UnavailableError("rdmad is shutting down"));
    (void)Destroy(id, /*force=*/true);
  }
  MutexLock lock(&mu_);
  channels_.clear();  // rdma_destroy_event_channel, no id left on any
}

absl::Status CmManager::Start() {
  if (cm_ == nullptr) {
    RDMAD_LOG_WARN("rdma_cm is unavailable on this host: channels, CM ids and the data-plane listener are off");
    return absl::OkStatus();
  }
  RDMAD_RETURN_IF_ERROR(NewChannel("rdmad", v1::CHANNEL_DEFAULT).status());
  for (int i = 0; i < options_.workers; ++i) {
    RDMAD_RETURN_IF_ERROR(NewChannel(absl::StrCat("worker ", i + 1), v1::CHANNEL_WORKER).status());
  }
  return absl::OkStatus();
}

void CmManager::Quiesce() {
  std::vector<std::unique_ptr<Closing>> closings;
  {
    MutexLock lock(&mu_);
    quiescing_ = true;
    closings.swap(closings_);
  }
  for (auto& c : closings) std::move(c->done)();  // the removals go on (and fail if a connection is left)
  events_.CloseAll(absl::UnavailableError("rdmad is shutting down"));
  // Connects still waiting are failed on their own loops (the ids belong to them).
  std::vector<std::pair<uint64_t, Channel*>> waiting;
  {
    MutexLock lock(&mu_);
    for (auto& [n, id] : ids_) waiting.emplace_back(n, id->channel);
  }
  for (auto& [n, ch] : waiting) {
    if (ch->loop == nullptr) continue;
    ch->loop->RunSync([this, n = n] {
      Done<v1::CmId> done;
      {
        MutexLock lock(&mu_);
        auto it = ids_.find(n);
        if (it == ids_.end() || !it->second->connect_done) return;
        done = std::move(it->second->connect_done);
      }
      std::move(done)(absl::UnavailableError("rdmad is shutting down"));
    });
  }
}

// ---------------------------------------------------------------------------------------------------------
// Channels


absl::StatusOr<CmManager::Channel*> CmManager::NewChannel(const std::string& label, v1::ChannelRole role) {
  if (cm_ == nullptr) return absl::UnavailableError("rdma_cm is unavailable on this host");
  const bool user = role == v1::CHANNEL_USER;
  auto ch = std::make_unique<Channel>();
  ch->label = label;
  ch->role = role;
  {
    MutexLock lock(&mu_);
    if (user) {
      if (options_.max_channels > 0 && user_channels_ >= options_.max_channels) {
        return OverLimit("channels", options_.max_channels, user_channels_);
      }
      ++user_channels_;  // taken now, so that concurrent creations cannot pass the limit together
    }
    ch->id = user ? next_channel_.Next() : next_own_channel_++;
  }
  // Built completely before it enters the index: a lookup (ListChannels, a migration) never sees a channel
  // without its loop. On failure, what was made is released here and the slot given back.
  absl::Status made = [&]() -> absl::Status {
    RDMAD_ASSIGN_OR_RETURN(ch->cm, cm_->CreateChannel());
    RDMAD_ASSIGN_OR_RETURN(ch->loop, dispatch::EventLoop::Create(absl::StrCat("cm-", ch->id)));
    absl::Status watched;
    Channel* raw = ch.get();
    ch->loop->RunSync([&] {
      raw->loop->AssertInLoop();
      watched = raw->loop->Watch(raw->cm->fd(), [this, raw] { OnChannelReadable(raw); });
    });
    return watched;
  }();
  if (!made.ok()) {
    ch.reset();  // the loop stops first (declared after cm), then rdma_destroy_event_channel
    if (user) {
      MutexLock lock(&mu_);
      --user_channels_;
    }
    return made;
  }
  Channel* raw = ch.get();
  MutexLock lock(&mu_);
  channels_.emplace(raw->id, std::move(ch));
  return raw;
}

absl::StatusOr<CmManager::Channel*> CmManager::FindChannel(const std::string& name, const std::string& field) const {
  RDMAD_ASSIGN_OR_RETURN(uint64_t n, ParseName(name, "channels", field));
  auto it = channels_.find(n);
  if (it == channels_.end()) return NotFound(field, absl::StrCat(name, " does not exist"));
  return it->second.get();
}

absl::StatusOr<CmManager::Id*> CmManager::FindId(const std::string& name, const std::string& field) const {
  RDMAD_ASSIGN_OR_RETURN(uint64_t n, ParseName(name, "cmids", field));
  auto it = ids_.find(n);
  if (it == ids_.end()) return NotFound(field, absl::StrCat(name, " does not exist"));
  return it->second.get();
}

v1::EventChannel CmManager::ToProto(const Channel& ch) const {
  v1::EventChannel out;
  out.set_name(Name("channels", ch.id));
  out.set_label(ch.label);
  out.set_role(ch.role);
  for (uint64_t id : ch.ids.Get(mu_)) out.add_cm_ids(Name("cmids", id));
  out.set_events_dispatched(ch.dispatched.load());
  out.set_events_pending(ch.pending.load());
  if (ch.loop) {
    out.set_thread(ch.loop->name());
    out.set_thread_id(ch.loop->tid());
  }
  return out;
}

absl::StatusOr<v1::EventChannel> CmManager::CreateChannel(const v1::CreateChannelRequest& request) {
  if (request.label().size() > kMaxLabel) return InvalidArgument("label", absl::StrCat("at most ", kMaxLabel, " bytes"));
  RDMAD_ASSIGN_OR_RETURN(Channel * ch, NewChannel(request.label(), v1::CHANNEL_USER));
  MutexLock lock(&mu_);
  RDMAD_LOG_INFO("channels/%llu created (thread %s)", static_cast<unsigned long long>(ch->id),
                 ch->loop->name().c_str());
  return ToProto(*ch);
}

absl::StatusOr<v1::EventChannel> CmManager::GetChannel(const std::string& name, const std::string& field) const {
  if (cm_ == nullptr) return absl::UnavailableError("rdma_cm is unavailable on this host");
  MutexLock lock(&mu_);
  RDMAD_ASSIGN_OR_RETURN(Channel * ch, FindChannel(name, field));
  return ToProto(*ch);
}

absl::StatusOr<std::vector<v1::EventChannel>> CmManager::ListChannels() const {
  if (cm_ == nullptr) return absl::UnavailableError("rdma_cm is unavailable on this host");
  MutexLock lock(&mu_);
  std::vector<v1::EventChannel> out;
  for (const auto& [n, ch] : channels_) out.push_back(ToProto(*ch));
  return out;
}

absl::Status CmManager::DeleteChannel(const std::string& name) {
  std::unique_ptr<Channel> owned;
  {
    MutexLock lock(&mu_);
    RDMAD_ASSIGN_OR_RETURN(Channel * ch, FindChannel(name, "name"));
    if (ch->role != v1::CHANNEL_USER) {
      return FailedPrecondition("name", absl::StrCat(name, " is rdmad's own (", v1::ChannelRole_Name(ch->role),
                                                     ") and cannot be deleted"));
    }
    if (!ch->ids.Get(mu_).empty()) {
      return Busy("name", absl::StrCat(name, " still carries ", ch->ids.Get(mu_).size(),
                                                          " CM id(s): delete them or migrate them to another "
                                                          "channel first"));
    }
    owned = std::move(channels_[ch->id]);
    channels_.erase(ch->id);
    --user_channels_;
  }
  events_.CloseChannel(name);
  // Work queued on its loop before the channel left the index (an operation that followed a migrated id
  // there) runs first: it re-posts itself to the id's new channel. Nothing can be queued after.
  owned->loop->RunSync([] {});
  owned.reset();  // the loop stops and joins, then rdma_destroy_event_channel
  RDMAD_LOG_INFO("%s deleted", name.c_str());
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------------------
// Routing work to the owning loop

void CmManager::RunOnId(const std::string& name, IdTask task) {
  uint64_t n = 0;
  Channel* ch = nullptr;
  absl::Status missing;
  {
    MutexLock lock(&mu_);
    absl::StatusOr<Id*> id = FindId(name, "name");
    if (id.ok()) {
      n = (*id)->id;
      ch = (*id)->channel;
    } else {
      missing = id.status();
    }
  }
  if (!missing.ok()) return std::move(task)(missing);
  RunOnIdLoop(n, ch, std::move(task));
}

void CmManager::RunOnIdLoop(uint64_t n, Channel* expected, IdTask task) {
  auto run = [this, n, expected, task = std::move(task)]() mutable {
    Id* id = nullptr;
    Channel* now = nullptr;
    {
      MutexLock lock(&mu_);
      auto it = ids_.find(n);
      if (it != ids_.end()) {
        id = it->second.get();
        now = id->channel;
      }
    }
    if (id == nullptr) return std::move(task)(NotFound("name", absl::StrCat(Name("cmids", n), " does not exist")));
    if (now != expected) return RunOnIdLoop(n, now, std::move(task));  // migrated meanwhile: follow it
    std::move(task)(id);
  };
  if (!expected->loop || !expected->loop->Post(std::move(run))) {
    // Only at shutdown; the task (and the RPC's reply in it) is dropped with the stopped loop.
    RDMAD_LOG_WARN("cmids/%llu: operation dropped, its channel is stopping", static_cast<unsigned long long>(n));
  }
}

// ---------------------------------------------------------------------------------------------------------
// Messages

v1::CmId CmManager::ToProto(const Id& id) const {
  v1::CmId out;
  out.set_name(Name("cmids", id.id));
  out.set_channel(Name("channels", id.channel->id));
  out.set_pd(id.pd);
  out.set_state(id.book.Get(mu_).state);
  if (!id.book.Get(mu_).local.host.empty()) *out.mutable_local() = cm::ToProto(id.book.Get(mu_).local);
  if (!id.book.Get(mu_).remote.host.empty()) *out.mutable_remote() = cm::ToProto(id.book.Get(mu_).remote);
  out.set_qp(id.book.Get(mu_).qp);
  out.set_listener(id.book.Get(mu_).listener);
  out.mutable_counters()->set_events(id.book.Get(mu_).events);
  out.mutable_counters()->set_migrations(id.book.Get(mu_).migrations);
  out.set_last_event(id.book.Get(mu_).last_event);
  out.set_error(id.book.Get(mu_).error);
  out.set_device(id.book.Get(mu_).device);
  out.set_data_plane(id.book.Get(mu_).data_plane);
  return out;
}

v1::CmId CmManager::Snapshot(const Id* id) const {
  MutexLock lock(&mu_);
  return ToProto(*id);
}

}  // namespace rdmad::cm
