// verbs::Device: one ibv_context, its completion channel, and what rdmad knows about it; VerbsFabric owns
// all of them.
//
// Ownership: VerbsFabric owns its Devices. The context comes from librdmacm (rdma_get_devices), so that
// rdma_cm ids resolved to this device use the very context rdmad's PDs live on (rdma_create_qp requires
// it); librdmacm keeps it open. Where rdma_cm is unavailable the context is opened with ibv_open_device and
// closed by the destructor. A Device owns its ibv_comp_channel and must outlive every Pd allocated on it.
// Threads: info() is immutable after Open(); AllocPd from any thread (libibverbs serializes on the
// context). The completion channel's one reader is the device's dispatcher (DrainCompletions); QPs hook
// and unhook their CQs from any thread, behind cq_mu_.
// VerbsFabric also owns its CmFabric (server/verbs/cm.h), made only where rdma_get_devices works; the
// device list never changes after Open, so devices() and ByContext may be called from any thread.
#ifndef RDMAD_SERVER_VERBS_DEVICE_H_
#define RDMAD_SERVER_VERBS_DEVICE_H_

#include <infiniband/verbs.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "server/common/sync.h"
#include "server/fabric/cm.h"
#include "server/fabric/fabric.h"
#include "server/fabric/hw_counters.h"

namespace rdmad::verbs {

class Device final : public fabric::Device {
 public:
  // Opens the device, queries ports, GID table and caps, and probes native ibv_rereg_mr once on a
  // throwaway MR in a throwaway PD, and whether it enforces window bounds (mw_probe.h).
  // `owned`: the context was opened by rdmad (ibv_open_device) and is closed by the destructor.
  // `sysfs_root`: where ReadCounters looks for the device's hw_counters (/sys/class/infiniband).
  static absl::StatusOr<std::unique_ptr<Device>> Open(ibv_context* context, bool owned,
                                                      std::string sysfs_root = fabric::kInfinibandSysfs);
  ~Device() override;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const fabric::DeviceInfo& info() const override { return info_; }
  absl::StatusOr<std::unique_ptr<fabric::Pd>> AllocPd() override;
  int completion_fd() const override { return channel_->fd; }
  void DrainCompletions() override;
  void PollFor(uint64_t key, absl::Duration budget, const std::function<bool()>& done) override;
  // sysfs_root/NAME/hw_counters and sysfs_root/NAME/ports/N/hw_counters (server/fabric/hw_counters.h).
  std::vector<fabric::HwCounterValue> ReadCounters() const override;
  // One RDMA netlink dump of this device, rdmad's pid's entries (restrack_socket.h).
  absl::StatusOr<fabric::restrack::DeviceDump> KernelObjects() const override;

  ibv_comp_channel* comp_channel() const { return channel_; }
  // A QP's CQ is known to the dispatcher between these two calls; UnhookCq returns once the dispatcher
  // can no longer reach the QP.
  uint64_t HookCq(class Qp* qp);
  void UnhookCq(uint64_t id);

  ibv_context* context() const { return context_; }
  const fabric::PortInfo* port(uint32_t number) const;
  ibv_mtu active_mtu_enum(uint32_t port) const;

 private:
  Device(ibv_context* context, bool owned, std::string sysfs_root)
      : context_(context), owned_(owned), sysfs_root_(std::move(sysfs_root)) {}
  absl::Status Query();
  void ProbeRereg();

  ibv_context* const context_;
  const bool owned_;
  const std::string sysfs_root_;
  ibv_comp_channel* channel_ = nullptr;
  Mutex cq_mu_;
  uint64_t next_cq_id_ ABSL_GUARDED_BY(cq_mu_) = 1;
  std::map<uint64_t, class Qp*> cqs_ ABSL_GUARDED_BY(cq_mu_);
  fabric::DeviceInfo info_;
  std::vector<ibv_mtu> active_mtu_;  // indexed by port number - 1
};

class VerbsFabric final : public fabric::Fabric {
 public:
  // Opens every verbs device (through librdmacm where it is available). Zero devices is not an error (the
  // list is then empty); a device that fails to open is logged and skipped.
  // `sysfs_root` is where the devices' counters are read (tests may point it elsewhere).
  static absl::StatusOr<std::unique_ptr<VerbsFabric>> Open(std::string sysfs_root = fabric::kInfinibandSysfs);
  const std::vector<fabric::Device*>& devices() const override { return views_; }
  fabric::CmFabric* cm() override { return cm_.get(); }
  // The Device whose context is `context` (an rdma_cm id's id->verbs), or nullptr.
  Device* ByContext(const ibv_context* context) const;

 private:
  void Add(ibv_context* context, bool owned, const std::string& sysfs_root);
  std::vector<std::unique_ptr<Device>> devices_;
  std::unique_ptr<fabric::CmFabric> cm_;  // set by Open where librdmacm is available (server/verbs/cm.h)
  std::vector<fabric::Device*> views_;
};

}  // namespace rdmad::verbs

#endif  // RDMAD_SERVER_VERBS_DEVICE_H_
