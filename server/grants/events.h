// The grant event stream: issued, activated, renewed, revoked and expired grants are published to a
// GrantHub, numbered and fanned out to WatchGrants streams (the machinery, its cut-off with
// RESOURCE_EXHAUSTED and its resuming: server/dispatch/hub.h). This file adds the filter.
//
// Threads: as in Hub: Publish on whichever thread changed the grant; Subscribe/Close* from any thread; one
// mutex guards the hub, each watcher has its own. GrantFilter is immutable once subscribed.
#ifndef RDMAD_SERVER_GRANTS_EVENTS_H_
#define RDMAD_SERVER_GRANTS_EVENTS_H_

#include <functional>
#include <string>

#include "rdmad/v1/rdmad.pb.h"
#include "server/dispatch/hub.h"

namespace rdmad::grants {

struct GrantFilter {
  std::string mr;         // empty: any; else the grant's mr ("mrs/3")
  std::string principal;  // empty: any; else the grant's principal
  // Set by the RPC layer for a tenant's watch: events about other tenants' resources are not shown. It runs
  // with the hub's lock held, on the publisher's thread: it must take no lock but a leaf one.
  std::function<bool(const v1::GrantEvent&)> visible;
  bool Matches(const v1::GrantEvent& e) const;
};

using GrantHub = dispatch::Hub<v1::GrantEvent, GrantFilter>;
using GrantWatcher = dispatch::HubWatcher<v1::GrantEvent, GrantFilter>;

}  // namespace rdmad::grants

#endif  // RDMAD_SERVER_GRANTS_EVENTS_H_
