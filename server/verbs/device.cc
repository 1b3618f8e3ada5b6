#include "server/verbs/device.h"

#include <endian.h>
#include <fcntl.h>
#include <rdma/rdma_cma.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/common/log.h"
#include "server/common/status.h"
#include "server/verbs/cm.h"
#include "server/verbs/gid.h"
#include "server/verbs/mw_probe.h"
#include "server/verbs/pd.h"
#include "server/verbs/qp.h"
#include "server/verbs/restrack_socket.h"

namespace rdmad::verbs {
namespace {

static_assert(static_cast<int>(fabric::kLocalWrite) == static_cast<int>(IBV_ACCESS_LOCAL_WRITE));
static_assert(static_cast<int>(fabric::kRemoteWrite) == static_cast<int>(IBV_ACCESS_REMOTE_WRITE));
static_assert(static_cast<int>(fabric::kRemoteRead) == static_cast<int>(IBV_ACCESS_REMOTE_READ));
static_assert(static_cast<int>(fabric::kRemoteAtomic) == static_cast<int>(IBV_ACCESS_REMOTE_ATOMIC));
static_assert(static_cast<int>(fabric::kMwBind) == static_cast<int>(IBV_ACCESS_MW_BIND));
static_assert(static_cast<int>(fabric::kZeroBased) == static_cast<int>(IBV_ACCESS_ZERO_BASED));
static_assert(static_cast<int>(fabric::kChangeTranslation) == static_cast<int>(IBV_REREG_MR_CHANGE_TRANSLATION));
static_assert(static_cast<int>(fabric::kChangePd) == static_cast<int>(IBV_REREG_MR_CHANGE_PD));
static_assert(static_cast<int>(fabric::kChangeAccess) == static_cast<int>(IBV_REREG_MR_CHANGE_ACCESS));
static_assert(static_cast<int>(fabric::ReregCode::kErrInput) == IBV_REREG_MR_ERR_INPUT);
static_assert(static_cast<int>(fabric::ReregCode::kErrDontForkNew) == IBV_REREG_MR_ERR_DONT_FORK_NEW);
static_assert(static_cast<int>(fabric::ReregCode::kErrDoForkOld) == IBV_REREG_MR_ERR_DO_FORK_OLD);
static_assert(static_cast<int>(fabric::ReregCode::kErrCmd) == IBV_REREG_MR_ERR_CMD);
static_assert(static_cast<int>(fabric::ReregCode::kErrCmdAndDoForkNew) ==
              IBV_REREG_MR_ERR_CMD_AND_DO_FORK_NEW);

uint32_t MtuBytes(ibv_mtu mtu) { return mtu >= IBV_MTU_256 ? 128u << mtu : 0; }

const char* TransportName(ibv_transport_type t) {
  switch (t) {
    case IBV_TRANSPORT_IB: return "InfiniBand";
    case IBV_TRANSPORT_IWARP: return "iWARP";
    case IBV_TRANSPORT_USNIC: return "usNIC";
    case IBV_TRANSPORT_USNIC_UDP: return "usNIC/UDP";
    case IBV_TRANSPORT_UNSPECIFIED: return "unspecified";
    default: return "unknown";
  }
}

const char* LinkLayerName(uint8_t ll) {
  switch (ll) {
    case IBV_LINK_LAYER_INFINIBAND: return "InfiniBand";
    case IBV_LINK_LAYER_ETHERNET: return "Ethernet";
    default: return "unspecified";
  }
}

const char* PortStateName(ibv_port_state s) {
  switch (s) {
    case IBV_PORT_NOP: return "NOP";
    case IBV_PORT_DOWN: return "DOWN";
    case IBV_PORT_INIT: return "INIT";
    case IBV_PORT_ARMED: return "ARMED";
    case IBV_PORT_ACTIVE: return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
    default: return "UNKNOWN";
  }
}

const char* GidTypeName(uint32_t type) {
  switch (type) {
    case IBV_GID_TYPE_IB: return "IB";
    case IBV_GID_TYPE_ROCE_V1: return "RoCEv1";
    case IBV_GID_TYPE_ROCE_V2: return "RoCEv2";
    default: return "unknown";
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Device>> Device::Open(ibv_context* context, bool owned, std::string sysfs_root) {
  std::unique_ptr<Device> d(new Device(context, owned, std::move(sysfs_root)));
  RDMAD_RETURN_IF_ERROR(d->Query());
  d->channel_ = ibv_create_comp_channel(context);
  if (d->channel_ == nullptr) return FromErrno("ibv_create_comp_channel", d->info_.name);
  // Non-blocking: the dispatcher drains it until EAGAIN and goes back to epoll.
  int flags = fcntl(d->channel_->fd, F_GETFL);
  if (fcntl(d->channel_->fd, F_SETFL, flags | O_NONBLOCK) != 0) return FromErrno("fcntl(O_NONBLOCK)", d->info_.name);
  d->ProbeRereg();
  MwBoundsProbe bounds = ProbeMwBounds(context, d->info_);
  d->info_.mw_bounds_enforced = bounds.enforced;
  d->info_.mw_bounds_probe = std::move(bounds.what);
  RDMAD_LOG_INFO("%s: window bounds %s (%s)", d->info_.name.c_str(),
                 d->info_.mw_bounds_enforced ? "enforced by the device" : "not known to be enforced",
                 d->info_.mw_bounds_probe.c_str());
  return d;
}

Device::~Device() {
  if (channel_ != nullptr) {
    if (int ret = ibv_destroy_comp_channel(channel_); ret != 0) {
      RDMAD_LOG_ERROR("ibv_destroy_comp_channel(%s) failed: errno %d", info_.name.c_str(), ret);
    }
  }
  if (owned_) {
    if (int ret = ibv_close_device(context_); ret != 0) {
      RDMAD_LOG_ERROR("ibv_close_device(%s) failed: errno %d", info_.name.c_str(), ret);
    }
  }
}

uint64_t Device::HookCq(Qp* qp) {
  MutexLock lock(&cq_mu_);
  const uint64_t id = next_cq_id_++;
  cqs_.emplace(id, qp);
  qp->cq()->cq_context = reinterpret_cast<void*>(static_cast<uintptr_t>(id));
  return id;
}

void Device::UnhookCq(uint64_t id) {
  MutexLock lock(&cq_mu_);
  cqs_.erase(id);
}

void Device::DrainCompletions() {
  for (;;) {
    ibv_cq* cq = nullptr;
    void* context = nullptr;
    if (ibv_get_cq_event(channel_, &cq, &context) != 0) return;  // EAGAIN: drained
    std::vector<absl::AnyInvocable<void() &&>> ready;
    {
      MutexLock lock(&cq_mu_);
      auto it = cqs_.find(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(context)));
      if (it != cqs_.end()) ready = it->second->PollCompletions();
      // Acknowledged at once (a QP being destroyed waits in ibv_destroy_cq for exactly this).
      ibv_ack_cq_events(cq, 1);
    }
    for (auto& r : ready) std::move(r)();
  }
}

void Device::PollFor(uint64_t key, absl::Duration budget, const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(budget);
  while (!done()) {
    std::vector<absl::AnyInvocable<void() &&>> ready;
    {
      MutexLock lock(&cq_mu_);
      auto it = cqs_.find(key);
      if (it == cqs_.end()) return;  // the QP is gone
      ready = it->second->PollCompletions(/*rearm=*/false);
    }
    for (auto& r : ready) std::move(r)();
    if (done() || std::chrono::steady_clock::now() >= deadline) return;
    if (ready.empty()) std::this_thread::yield();  // the provider (rxe: the kernel) may need this CPU
  }
}

std::vector<fabric::HwCounterValue> Device::ReadCounters() const {
  return fabric::ReadSysfsHwCounters(sysfs_root_, info_.name);
}

absl::StatusOr<fabric::restrack::DeviceDump> Device::KernelObjects() const {
  const int index = ibv_get_device_index(context_->device);
  if (index < 0) return absl::UnimplementedError(absl::StrCat(info_.name, ": the kernel gave no device index"));
  return restrack::DumpDeviceOfThisProcess(static_cast<uint32_t>(index));
}

absl::Status Device::Query() {
  info_.name = ibv_get_device_name(context_->device);
  ibv_device* device = context_->device;
  info_.transport = TransportName(device->transport_type);
  info_.node_type = ibv_node_type_str(device->node_type);

  ibv_device_attr attr{};
  if (int ret = ibv_query_device(context_, &attr); ret != 0) {
    return FromReturn("ibv_query_device", ret, info_.name);
  }
  uint64_t guid = be64toh(attr.node_guid);
  char guid_text[24];
  std::snprintf(guid_text, sizeof guid_text, "%04x:%04x:%04x:%04x", static_cast<unsigned>(guid >> 48),
                static_cast<unsigned>((guid >> 32) & 0xffff), static_cast<unsigned>((guid >> 16) & 0xffff),
                static_cast<unsigned>(guid & 0xffff));
  info_.node_guid = guid_text;
  info_.firmware = attr.fw_ver;
  info_.max_mr_size = attr.max_mr_size;
  info_.max_mr = attr.max_mr;
  info_.max_mw = attr.max_mw;
  info_.max_pd = attr.max_pd;
  info_.max_qp = attr.max_qp;
  info_.max_qp_rd_atom = attr.max_qp_rd_atom;
  info_.mw_type1 = attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW;
  info_.mw_type2a = attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2A;
  info_.mw_type2b = attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B;

  for (uint32_t p = 1; p <= attr.phys_port_cnt; ++p) {
    ibv_port_attr pa{};
    if (int ret = ibv_query_port(context_, static_cast<uint8_t>(p), &pa); ret != 0) {
      return FromReturn("ibv_query_port", ret, absl::StrCat(info_.name, " port ", p));
    }
    fabric::PortInfo port;
    port.number = p;
    port.state = PortStateName(pa.state);
    port.max_mtu = MtuBytes(pa.max_mtu);
    port.active_mtu = MtuBytes(pa.active_mtu);
    port.link_layer = LinkLayerName(pa.link_layer);
    port.lid = pa.lid;
    active_mtu_.push_back(pa.active_mtu);
    // Each entry with its type; unpopulated (zero) entries are not listed.
    for (int i = 0; i < pa.gid_tbl_len; ++i) {
      ibv_gid_entry e{};
      if (ibv_query_gid_ex(context_, p, static_cast<uint32_t>(i), &e, 0) != 0) continue;
      if (GidIsZero(e.gid)) continue;
      port.gids.push_back({static_cast<uint32_t>(i), GidToString(e.gid), GidTypeName(e.gid_type)});
    }
    info_.ports.push_back(std::move(port));
  }
  return absl::OkStatus();
}

void Device::ProbeRereg() {
  // A throwaway PD and page, never a user's MR. CHANGE_ACCESS is the least intrusive flag.
  ibv_pd* pd = ibv_alloc_pd(context_);
  if (pd == nullptr) {
    info_.native_rereg_probe = absl::StrCat("probe skipped: ibv_alloc_pd: errno ", errno);
    return;
  }
  long page = sysconf(_SC_PAGESIZE);
  void* buf = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (buf == MAP_FAILED) {
    info_.native_rereg_probe = absl::StrCat("probe skipped: mmap: errno ", errno);
    ibv_dealloc_pd(pd);
    return;
  }
  ibv_mr* mr = ibv_reg_mr(pd, buf, page, IBV_ACCESS_LOCAL_WRITE);
  if (mr == nullptr) {
    info_.native_rereg_probe = absl::StrCat("probe skipped: ibv_reg_mr: errno ", errno);
  } else {
    errno = 0;
    int ret = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                           IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
    int err = errno;
    info_.native_rereg = ret == 0;
    info_.native_rereg_probe =
        ret == 0 ? "ibv_rereg_mr(CHANGE_ACCESS) succeeded"
                 : absl::StrCat("ibv_rereg_mr(CHANGE_ACCESS) returned ",
                                fabric::ReregCodeName(static_cast<fabric::ReregCode>(ret)), ", errno ", err,
                                " (", ErrnoName(err), ")");
    // ibv_rereg_mr(3): even on failure the MR must still be deregistered.
    if (int d = ibv_dereg_mr(mr); d != 0) {
      RDMAD_LOG_ERROR("%s: rereg probe: ibv_dereg_mr failed: errno %d", info_.name.c_str(), d);
    }
  }
  munmap(buf, page);
  ibv_dealloc_pd(pd);
  RDMAD_LOG_INFO("%s: native rereg %s (%s)", info_.name.c_str(), info_.native_rereg ? "available" : "unavailable",
                 info_.native_rereg_probe.c_str());
}

const fabric::PortInfo* Device::port(uint32_t number) const {
  if (number == 0 || number > info_.ports.size()) return nullptr;
  return &info_.ports[number - 1];
}

ibv_mtu Device::active_mtu_enum(uint32_t port) const {
  return port >= 1 && port <= active_mtu_.size() ? active_mtu_[port - 1] : IBV_MTU_1024;
}

absl::StatusOr<std::unique_ptr<fabric::Pd>> Device::AllocPd() {
  ibv_pd* pd = ibv_alloc_pd(context_);
  if (pd == nullptr) return FromErrno("ibv_alloc_pd", info_.name);
  return std::unique_ptr<fabric::Pd>(new Pd(this, pd));
}

void VerbsFabric::Add(ibv_context* context, bool owned, const std::string& sysfs_root) {
  auto d = Device::Open(context, owned, sysfs_root);
  if (!d.ok()) {
    RDMAD_LOG_ERROR("skipping device %s: %s", ibv_get_device_name(context->device),
                    std::string(d.status().message()).c_str());
    return;  // an owned context was closed with the half-opened Device
  }
  devices_.push_back(std::move(d).value());
}

Device* VerbsFabric::ByContext(const ibv_context* context) const {
  for (const auto& d : devices_) {
    if (d->context() == context) return d.get();
  }
  return nullptr;
}

absl::StatusOr<std::unique_ptr<VerbsFabric>> VerbsFabric::Open(std::string sysfs_root) {
  auto fabric = std::make_unique<VerbsFabric>();
  int n = 0;
  if (ibv_context** contexts = rdma_get_devices(&n); contexts != nullptr) {
    for (int i = 0; i < n; ++i) fabric->Add(contexts[i], /*owned=*/false, sysfs_root);
    rdma_free_devices(contexts);
    // The contexts are librdmacm's own, so an id's id->verbs is one of them (ByContext).
    fabric->cm_ = std::make_unique<VerbsCmFabric>(fabric.get());
  } else {
    RDMAD_LOG_WARN("rdma_get_devices: errno %d (%s): rdma_cm is unavailable; opening verbs devices directly",
                   errno, ErrnoName(errno).c_str());
    ibv_device** list = ibv_get_device_list(&n);
    if (list == nullptr) {
      // No uverbs support in the kernel at all (ENOSYS) is the same as no devices for rdmad.
      RDMAD_LOG_WARN("ibv_get_device_list: errno %d (%s): no RDMA devices", errno, ErrnoName(errno).c_str());
      return fabric;
    }
    for (int i = 0; i < n; ++i) {
      if (ibv_context* ctx = ibv_open_device(list[i]); ctx != nullptr) {
        fabric->Add(ctx, /*owned=*/true, sysfs_root);
      } else {
        RDMAD_LOG_ERROR("skipping device %s: %s", ibv_get_device_name(list[i]),
                        std::string(FromErrno("ibv_open_device").message()).c_str());
      }
    }
    ibv_free_device_list(list);
  }
  std::sort(fabric->devices_.begin(), fabric->devices_.end(),
            [](const auto& a, const auto& b) { return a->info().name < b->info().name; });
  for (auto& d : fabric->devices_) fabric->views_.push_back(d.get());
  return fabric;
}

}  // namespace rdmad::verbs
