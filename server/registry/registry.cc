// Registry life cycle, lookups, devices and the conversions to the API's messages. The resource families
// are in pds.cc, mrs.cc, rereg.cc, qps.cc, mws.cc; the rules in rules.cc. Threads: see registry.h.
#include "server/registry/registry.h"

#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/common/log.h"
#include "server/common/status.h"
#include "server/registry/internal.h"

namespace rdmad {
namespace registry_internal {

absl::Status WithOutcome(absl::Status s, v1::ReregOutcome outcome) {
  s.SetPayload(kReregOutcomePayload, absl::Cord(absl::StrCat(static_cast<int>(outcome))));
  return s;
}

v1::QpState ToProto(fabric::QpState s) {
  switch (s) {
    case fabric::QpState::kReset: return v1::QP_RESET;
    case fabric::QpState::kInit: return v1::QP_INIT;
    case fabric::QpState::kRtr: return v1::QP_RTR;
    case fabric::QpState::kRts: return v1::QP_RTS;
    case fabric::QpState::kSqd: return v1::QP_SQD;
    case fabric::QpState::kSqe: return v1::QP_SQE;
    case fabric::QpState::kError: return v1::QP_ERROR;
    default: return v1::QP_STATE_UNSPECIFIED;
  }
}

v1::QpEndpoint ToProto(const fabric::QpEndpoint& e) {
  v1::QpEndpoint out;
  out.set_qpn(e.qpn);
  out.set_psn(e.psn);
  out.set_gid(e.gid);
  out.set_lid(e.lid);
  return out;
}

v1::Device ToProto(const fabric::DeviceInfo& info) {
  v1::Device d;
  d.set_name(absl::StrCat("devices/", info.name));
  d.set_node_guid(info.node_guid);
  d.set_transport(info.transport);
  d.set_node_type(info.node_type);
  d.set_firmware(info.firmware);
  for (const auto& p : info.ports) {
    v1::Port* port = d.add_ports();
    port->set_number(p.number);
    port->set_state(p.state);
    port->set_max_mtu(p.max_mtu);
    port->set_active_mtu(p.active_mtu);
    port->set_link_layer(p.link_layer);
    for (const auto& g : p.gids) {
      v1::Gid* gid = port->add_gids();
      gid->set_index(g.index);
      gid->set_gid(g.gid);
      gid->set_type(g.type);
    }
  }
  v1::DeviceCaps* caps = d.mutable_caps();
  caps->set_max_mr_size(info.max_mr_size);
  caps->set_max_mr(info.max_mr);
  caps->set_max_mw(info.max_mw);
  caps->set_max_pd(info.max_pd);
  caps->set_max_qp(info.max_qp);
  caps->set_mw_type1(info.mw_type1);
  caps->set_mw_type2a(info.mw_type2a);
  caps->set_mw_type2b(info.mw_type2b);
  caps->set_native_rereg(info.native_rereg);
  caps->set_native_rereg_probe(info.native_rereg_probe);
  caps->set_mw_bounds_enforced(info.mw_bounds_enforced);
  caps->set_mw_bounds_probe(info.mw_bounds_probe);
  return d;
}

v1::Device ToProto(const fabric::Device& device, bool counters, MwBoundsRegion bounds) {
  v1::Device d = ToProto(device.info());
  d.mutable_caps()->set_mw_bounds_region(UsesBoundsRegion(bounds, device.info()));
  if (!counters) return d;
  for (const fabric::HwCounterValue& c : device.ReadCounters()) {
    v1::HwCounter* out = d.add_hw_counters();
    out->set_port(c.port);
    out->set_name(c.name);
    out->set_value(c.value);
    out->set_remote_access_error(c.remote_access_error);
  }
  return d;
}

}  // namespace registry_internal


// ---------------------------------------------------------------------------------------------------------
// Life cycle

Registry::Registry(std::unique_ptr<fabric::Fabric> fabric, Options options)
    : fabric_(std::move(fabric)), options_(std::move(options)) {
  for (fabric::Device* d : fabric_->devices()) {
    auto loop = std::make_unique<dispatch::EventLoop>(absl::StrCat("dev-", d->info().name));
    loop->RunSync([d, l = loop.get()] {
      l->AssertInLoop();
      if (absl::Status s = l->Watch(d->completion_fd(), [d] { d->DrainCompletions(); }); !s.ok()) {
        RDMAD_LOG_ERROR("%s: cannot watch the completion channel: %s", d->info().name.c_str(),
                        std::string(s.message()).c_str());
      }
    });
    dispatchers_.emplace(d, std::move(loop));
  }
  workers_ = std::make_unique<dispatch::WorkerPool>("pin", options_.workers);
}

absl::Status Registry::WithinLimit(const char* limit, uint64_t max, uint64_t in_use, uint64_t creating) {
  if (max == 0 || in_use + creating + 1 <= max) return absl::OkStatus();
  return OverLimit(limit, max, in_use + creating);
}

Registry::~Registry() {
  // Threads first: running work finishes and commits (a pinning worker), queued work is dropped, and no
  // completion runs after this point.
  workers_.reset();
  dispatchers_.clear();
  MutexLock lock(&mu_);
  // Children before parents: windows, regions (then their memory), QPs, PDs; the fabric's device
  // contexts go last with fabric_.
  mws_.clear();
  mrs_.clear();
  qps_.clear();
  pds_.clear();
}

// ---------------------------------------------------------------------------------------------------------
// Lookups

absl::StatusOr<fabric::Device*> Registry::FindDevice(const std::string& name, const std::string& field) const {
  if (name.empty()) return InvalidArgument(field, "is required (devices/NAME)");
  std::string bare = absl::StartsWith(name, "devices/") ? name.substr(8) : name;
  for (fabric::Device* d : fabric_->devices()) {
    if (d->info().name == bare) return d;
  }
  return NotFound(field, absl::StrCat("no device '", name, "'"));
}

#define RDMAD_DEFINE_FIND(Method, Entry, map, kind)                                                   \
  absl::StatusOr<Registry::Entry*> Registry::Method(const std::string& name, const std::string& field) \
      const {                                                                                         \
    RDMAD_ASSIGN_OR_RETURN(uint64_t id, ParseName(name, kind, field));                                \
    auto it = map.find(id);                                                                           \
    if (it == map.end()) return NotFound(field, absl::StrCat(name, " does not exist"));               \
    return it->second.get();                                                                          \
  }
RDMAD_DEFINE_FIND(FindPd, PdEntry, pds_, "pds")
RDMAD_DEFINE_FIND(FindMr, MrEntry, mrs_, "mrs")
RDMAD_DEFINE_FIND(FindQp, QpEntry, qps_, "qps")
RDMAD_DEFINE_FIND(FindMw, MwEntry, mws_, "mws")
#undef RDMAD_DEFINE_FIND

#define RDMAD_DEFINE_FIND_ID(Method, Entry, map, kind)                                      \
  absl::StatusOr<Registry::Entry*> Registry::Method(uint64_t id, const std::string& field) const { \
    auto it = map.find(id);                                                                  \
    if (it == map.end()) return NotFound(field, absl::StrCat(Name(kind, id), " does not exist")); \
    return it->second.get();                                                                 \
  }
RDMAD_DEFINE_FIND_ID(FindMrId, MrEntry, mrs_, "mrs")
RDMAD_DEFINE_FIND_ID(FindQpId, QpEntry, qps_, "qps")
RDMAD_DEFINE_FIND_ID(FindMwId, MwEntry, mws_, "mws")
#undef RDMAD_DEFINE_FIND_ID

// ---------------------------------------------------------------------------------------------------------
// Devices

// The device list never changes and counters are read from the fabric without mu_ (sysfs reads that may
// wait for the driver's refresh).
std::vector<v1::Device> Registry::ListDevices() const {
  std::vector<v1::Device> out;
  for (fabric::Device* d : fabric_->devices()) out.push_back(registry_internal::ToProto(*d, /*counters=*/true, options_.mw_bounds_region));
  return out;
}

absl::StatusOr<v1::Device> Registry::GetDevice(const std::string& name, bool with_counters) const {
  RDMAD_ASSIGN_OR_RETURN(fabric::Device * d, FindDevice(name, "name"));
  return registry_internal::ToProto(*d, with_counters, options_.mw_bounds_region);
}

bool UsesBoundsRegion(MwBoundsRegion mode, const fabric::DeviceInfo& info) {
  switch (mode) {
    case MwBoundsRegion::kAlways: return true;
    case MwBoundsRegion::kNever: return false;
    case MwBoundsRegion::kAuto: break;
  }
  return !info.mw_bounds_enforced;
}

}  // namespace rdmad
