// The rdma_cm specifics of the event stream (events.h). Threads: stateless but for the hub (see hub.h).
#include "server/cm/events.h"

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/common/status.h"
#include "server/fabric/cm.h"

namespace rdmad::cm {

bool EventFilter::Matches(const v1::CmEvent& e) const {
  if (!channel.empty() && e.channel() != channel) return false;
  if (!cm_id.empty() && e.cm_id() != cm_id && e.listener() != cm_id) return false;
  if (!types.empty() && types.count(e.type()) == 0) return false;
  return !visible || visible(e);
}

void EventHub::CloseChannel(const std::string& channel) {
  CloseWhere([&](const Watcher& w) { return w.filter().channel == channel; }, absl::OkStatus());
}

void EventHub::CloseCmId(const std::string& cm_id) {
  CloseWhere([&](const Watcher& w) { return w.filter().cm_id == cm_id; }, absl::OkStatus());
}

absl::StatusOr<std::string> CanonicalEventName(const std::string& name) {
  const std::string full = absl::StartsWith(name, "RDMA_CM_EVENT_") ? name : absl::StrCat("RDMA_CM_EVENT_", name);
  for (int t = 0; t <= static_cast<int>(fabric::CmEventType::kTimewaitExit); ++t) {
    if (full == fabric::CmEventName(static_cast<fabric::CmEventType>(t))) return full;
  }
  return InvalidArgument("types", absl::StrCat("unknown event type '", name, "'"));
}

}  // namespace rdmad::cm
