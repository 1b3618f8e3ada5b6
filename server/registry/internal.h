// Helpers shared by the registry's own .cc files (private to server/registry/): the conversions to API
// messages and the re-registration outcome payload.
// Threads: stateless; callable from any thread.
#ifndef RDMAD_SERVER_REGISTRY_INTERNAL_H_
#define RDMAD_SERVER_REGISTRY_INTERNAL_H_

#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "rdmad/v1/rdmad.pb.h"
#include "server/fabric/fabric.h"

namespace rdmad {
enum class MwBoundsRegion;  // registry.h
}  // namespace rdmad

namespace rdmad::registry_internal {

inline constexpr size_t kMaxLabel = 128;

absl::Status WithOutcome(absl::Status s, v1::ReregOutcome outcome);

v1::QpState ToProto(fabric::QpState s);
v1::QpEndpoint ToProto(const fabric::QpEndpoint& e);
v1::Device ToProto(const fabric::DeviceInfo& info);
// The device's info, and with `counters` its hardware counters read now (Device::ReadCounters); `bounds`:
// the configured mw_bounds_region, which decides caps.mw_bounds_region.
v1::Device ToProto(const fabric::Device& device, bool counters, MwBoundsRegion bounds);

}  // namespace rdmad::registry_internal

#endif  // RDMAD_SERVER_REGISTRY_INTERNAL_H_
