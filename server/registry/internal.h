// Helpers shared by the registry's .cc files and the CM layer (server/cm/): refusal statuses, the
// conversions to API messages, and Await for the synchronous forms of asynchronous calls.
// Threads: stateless; callable from any thread.
#ifndef RDMAD_SERVER_REGISTRY_INTERNAL_H_
#define RDMAD_SERVER_REGISTRY_INTERNAL_H_

#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "server/common/sync.h"
#include "rdmad/v1/rdmad.pb.h"
#include "server/fabric/fabric.h"

namespace rdmad {
enum class MwBoundsRegion;  // registry.h
}  // namespace rdmad

namespace rdmad::registry_internal {

inline constexpr size_t kMaxLabel = 128;

// A refusal rdmad makes itself because an object is in use: FAILED_PRECONDITION with errno EBUSY.
absl::Status Busy(const std::string& field, const std::string& message);
// Another operation holds the object: ABORTED, retry.
absl::Status InProgress(const std::string& field, const std::string& name, const char* operation);
absl::Status WithOutcome(absl::Status s, v1::ReregOutcome outcome);

v1::QpState ToProto(fabric::QpState s);
v1::QpEndpoint ToProto(const fabric::QpEndpoint& e);
v1::Device ToProto(const fabric::DeviceInfo& info);
// The device's info, and with `counters` its hardware counters read now (Device::ReadCounters); `bounds`:
// the configured mw_bounds_region, which decides caps.mw_bounds_region.
v1::Device ToProto(const fabric::Device& device, bool counters, MwBoundsRegion bounds);

// Runs an asynchronous operation (a function taking its Done callback) and waits for its result.
template <typename T, typename Start>
absl::StatusOr<T> Await(Start&& start) {
  Notification finished;
  absl::StatusOr<T> result = absl::UnknownError("not finished");
  std::forward<Start>(start)([&](absl::StatusOr<T> r) {
    result = std::move(r);
    finished.Notify();
  });
  finished.WaitForNotification();
  return result;
}

}  // namespace rdmad::registry_internal

#endif  // RDMAD_SERVER_REGISTRY_INTERNAL_H_
