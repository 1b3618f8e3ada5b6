// verbs::Device: one opened ibv_context and what rdmad knows about it; VerbsFabric owns all of them.
//
// Ownership: VerbsFabric owns its Devices; a Device owns its ibv_context (ibv_close_device in the
// destructor) and must outlive every Pd allocated on it (the registry releases PDs first).
// Thread-safety: info() is immutable after Open(); AllocPd may be called from any thread (libibverbs
// serializes on the context).
#ifndef RDMAD_SERVER_VERBS_DEVICE_H_
#define RDMAD_SERVER_VERBS_DEVICE_H_

#include <infiniband/verbs.h>

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "server/fabric/fabric.h"

namespace rdmad::verbs {

class Device final : public fabric::Device {
 public:
  // Opens the device, queries ports, GID table and caps, and probes native ibv_rereg_mr once on a
  // throwaway MR in a throwaway PD.
  static absl::StatusOr<std::unique_ptr<Device>> Open(ibv_device* device);
  ~Device() override;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const fabric::DeviceInfo& info() const override { return info_; }
  absl::StatusOr<std::unique_ptr<fabric::Pd>> AllocPd() override;

  ibv_context* context() const { return context_; }
  const fabric::PortInfo* port(uint32_t number) const;
  ibv_mtu active_mtu_enum(uint32_t port) const;

 private:
  explicit Device(ibv_context* context) : context_(context) {}
  absl::Status Query(ibv_device* device);
  void ProbeRereg();

  ibv_context* const context_;
  fabric::DeviceInfo info_;
  std::vector<ibv_mtu> active_mtu_;  // indexed by port number - 1
};

class VerbsFabric final : public fabric::Fabric {
 public:
  // Opens every verbs device. Zero devices is not an error (the list is then empty); a device that fails
  // to open is logged and skipped.
  static absl::StatusOr<std::unique_ptr<VerbsFabric>> Open();
  const std::vector<fabric::Device*>& devices() const override { return views_; }

 private:
  std::vector<std::unique_ptr<Device>> devices_;
  std::vector<fabric::Device*> views_;
};

}  // namespace rdmad::verbs

#endif  // RDMAD_SERVER_VERBS_DEVICE_H_
