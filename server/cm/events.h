// The rdma_cm event stream: every rdma_cm event rdmad dispatches is published to the EventHub, numbered
// and fanned out to watchers (the generic machinery, its cut-off and its resuming: server/dispatch/hub.h).
// This file adds what is specific to rdma_cm: the filter (channel, id, types), closing the watchers of a
// deleted channel or id, and event type names.
//
// Threads: as in Hub: Publish on the channel dispatchers; Subscribe/Close* from any thread; one mutex
// guards the hub, each Watcher has its own (the gRPC stream reads from it on gRPC's threads). A watcher's
// `wake` callback runs without any lock held, on the publisher's thread: it must not block.
#ifndef RDMAD_SERVER_CM_EVENTS_H_
#define RDMAD_SERVER_CM_EVENTS_H_

#include <functional>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "rdmad/v1/rdmad.pb.h"
#include "server/dispatch/hub.h"

namespace rdmad::cm {

struct EventFilter {
  std::string channel;          // empty: any
  std::string cm_id;            // empty: any (matches the event's id or, for CONNECT_REQUEST, its listener)
  std::set<std::string> types;  // full names ("RDMA_CM_EVENT_ESTABLISHED"); empty: any
  // Set by the RPC layer for a tenant's watch: events about other tenants' resources are not shown. It runs
  // with the hub's lock held, on the publisher's thread: it must take no lock but a leaf one.
  std::function<bool(const v1::CmEvent&)> visible;
  bool Matches(const v1::CmEvent& e) const;
};

using Watcher = dispatch::HubWatcher<v1::CmEvent, EventFilter>;

class EventHub : public dispatch::Hub<v1::CmEvent, EventFilter> {
 public:
  using Hub::Hub;
  // End with OK the streams of the watchers filtered on this channel or id (deleted).
  void CloseChannel(const std::string& channel);
  void CloseCmId(const std::string& cm_id);
};

// "DISCONNECTED" -> "RDMA_CM_EVENT_DISCONNECTED"; full names unchanged. Unknown names: INVALID_ARGUMENT.
absl::StatusOr<std::string> CanonicalEventName(const std::string& name);

}  // namespace rdmad::cm

#endif  // RDMAD_SERVER_CM_EVENTS_H_
