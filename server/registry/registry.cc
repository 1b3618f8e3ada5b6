#include "server/registry/registry.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cinttypes>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "server/common/log.h"
#include "server/common/status.h"

namespace rdmad {
namespace {

constexpr size_t kMaxLabel = 128;

std::string Name(const char* kind, uint64_t id) { return absl::StrCat(kind, "/", id); }

// "pds/3" -> 3. A malformed name is INVALID_ARGUMENT; the caller turns a well-formed unknown id into
// NOT_FOUND.
absl::StatusOr<uint64_t> ParseName(const std::string& name, const char* kind, const std::string& field) {
  if (name.empty()) return InvalidArgument(field, absl::StrCat("is required (", kind, "/N)"));
  const std::string prefix = absl::StrCat(kind, "/");
  uint64_t id = 0;
  const std::string digits = name.substr(std::min(prefix.size(), name.size()));
  // Exactly the canonical form: digits only, no sign, no leading zero ("pds/01" is not "pds/1").
  if (!absl::StartsWith(name, prefix) || digits.empty() || digits[0] == '0' ||
      digits.find_first_not_of("0123456789") != std::string::npos || !absl::SimpleAtoi(digits, &id)) {
    return InvalidArgument(field, absl::StrCat("'", name, "' is not a name of the form ", kind, "/N"));
  }
  return id;
}

// A refusal rdmad makes itself because an object is in use: FAILED_PRECONDITION with errno EBUSY.
absl::Status Busy(const std::string& field, const std::string& message) {
  absl::Status s = FailedPrecondition(field, message);
  s.SetPayload(kErrnoPayload, absl::Cord(absl::StrCat(EBUSY)));
  return s;
}

absl::Status WithOutcome(absl::Status s, v1::ReregOutcome outcome) {
  s.SetPayload(kReregOutcomePayload, absl::Cord(absl::StrCat(static_cast<int>(outcome))));
  return s;
}

const char* AccessName(uint32_t bit) {
  switch (bit) {
    case fabric::kLocalWrite: return "LOCAL_WRITE";
    case fabric::kRemoteWrite: return "REMOTE_WRITE";
    case fabric::kRemoteRead: return "REMOTE_READ";
    case fabric::kRemoteAtomic: return "REMOTE_ATOMIC";
    case fabric::kMwBind: return "MW_BIND";
    default: return "?";
  }
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
  return d;
}

// The GID a QP uses by default: on Ethernet the first RoCEv2 GID that is an IPv4-mapped address (what
// peers on an IPv4 network reach), else the first RoCEv2 GID, else index 0.
uint32_t DefaultGidIndex(const fabric::PortInfo& port) {
  const fabric::GidEntry* v2 = nullptr;
  for (const auto& g : port.gids) {
    if (g.type != "RoCEv2") continue;
    if (absl::StartsWith(g.gid, "0000:0000:0000:0000:0000:ffff:")) return g.index;
    if (v2 == nullptr) v2 = &g;
  }
  return v2 ? v2->index : 0;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// Access flags

absl::StatusOr<uint32_t> AccessBits(const google::protobuf::RepeatedField<int>& access, const std::string& field) {
  uint32_t bits = 0;
  for (int a : access) {
    switch (a) {
      case v1::LOCAL_WRITE: bits |= fabric::kLocalWrite; break;
      case v1::REMOTE_WRITE: bits |= fabric::kRemoteWrite; break;
      case v1::REMOTE_READ: bits |= fabric::kRemoteRead; break;
      case v1::REMOTE_ATOMIC: bits |= fabric::kRemoteAtomic; break;
      case v1::MW_BIND: bits |= fabric::kMwBind; break;
      default: return InvalidArgument(field, absl::StrCat("unknown access flag ", a));
    }
  }
  return bits;
}

void AccessList(uint32_t bits, google::protobuf::RepeatedField<int>* out) {
  if (bits & fabric::kLocalWrite) out->Add(v1::LOCAL_WRITE);
  if (bits & fabric::kRemoteWrite) out->Add(v1::REMOTE_WRITE);
  if (bits & fabric::kRemoteRead) out->Add(v1::REMOTE_READ);
  if (bits & fabric::kRemoteAtomic) out->Add(v1::REMOTE_ATOMIC);
  if (bits & fabric::kMwBind) out->Add(v1::MW_BIND);
}

absl::Status CheckMrAccessRule(uint32_t bits, const std::string& field) {
  for (uint32_t needs_write : {static_cast<uint32_t>(fabric::kRemoteWrite), static_cast<uint32_t>(fabric::kRemoteAtomic)}) {
    if ((bits & needs_write) && !(bits & fabric::kLocalWrite)) {
      return InvalidArgument(field, absl::StrCat(AccessName(needs_write),
                                                 " requires LOCAL_WRITE (ibv_reg_mr(3))"));
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------------------
// Life cycle

Registry::Registry(std::unique_ptr<fabric::Fabric> fabric, Options options)
    : fabric_(std::move(fabric)), options_(std::move(options)) {}

Registry::~Registry() {
  std::lock_guard<std::mutex> lock(mu_);
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

// ---------------------------------------------------------------------------------------------------------
// Devices

std::vector<v1::Device> Registry::ListDevices() const {
  std::vector<v1::Device> out;
  for (fabric::Device* d : fabric_->devices()) out.push_back(rdmad::ToProto(d->info()));
  return out;
}

absl::StatusOr<v1::Device> Registry::GetDevice(const std::string& name) const {
  RDMAD_ASSIGN_OR_RETURN(fabric::Device * d, FindDevice(name, "name"));
  return rdmad::ToProto(d->info());
}

// ---------------------------------------------------------------------------------------------------------
// Protection domains

v1::ProtectionDomain Registry::ToProto(const PdEntry& e) const {
  v1::ProtectionDomain pd;
  pd.set_name(Name("pds", e.id));
  pd.set_device(absl::StrCat("devices/", e.device->info().name));
  pd.set_label(e.label);
  pd.set_mr_count(e.mrs);
  pd.set_mw_count(e.mws);
  pd.set_qp_count(e.qps);
  return pd;
}

absl::StatusOr<v1::ProtectionDomain> Registry::CreatePd(const v1::CreatePdRequest& request) {
  if (request.label().size() > kMaxLabel) {
    return InvalidArgument("label", absl::StrCat("at most ", kMaxLabel, " bytes"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  RDMAD_ASSIGN_OR_RETURN(fabric::Device * device, FindDevice(request.device(), "device"));
  RDMAD_ASSIGN_OR_RETURN(std::unique_ptr<fabric::Pd> pd, device->AllocPd());
  auto e = std::make_unique<PdEntry>();
  e->id = next_pd_++;
  e->device = device;
  e->label = request.label();
  e->pd = std::move(pd);
  v1::ProtectionDomain out = ToProto(*e);
  pds_.emplace(e->id, std::move(e));
  RDMAD_LOG_INFO("%s created on %s", out.name().c_str(), out.device().c_str());
  return out;
}

absl::StatusOr<v1::ProtectionDomain> Registry::GetPd(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  RDMAD_ASSIGN_OR_RETURN(PdEntry * e, FindPd(name, "name"));
  return ToProto(*e);
}

std::vector<v1::ProtectionDomain> Registry::ListPds() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::ProtectionDomain> out;
  for (const auto& [id, e] : pds_) out.push_back(ToProto(*e));
  return out;
}

absl::StatusOr<v1::DeletePdResponse> Registry::DeletePd(const v1::DeletePdRequest& request) {
  std::lock_guard<std::mutex> lock(mu_);
  RDMAD_ASSIGN_OR_RETURN(PdEntry * pd, FindPd(request.name(), "name"));
  if (pd->pending > 0) {
    return Busy("name", absl::StrCat(request.name(), " has a memory registration in progress; retry"));
  }
  if (!request.cascade() && (pd->mrs || pd->mws || pd->qps)) {
    return Busy("name", absl::StrCat(request.name(), " still holds ", pd->mrs, " memory region(s), ", pd->mws,
                                     " memory window(s) and ", pd->qps,
                                     " queue pair(s): delete them first or ask for a cascade"));
  }
  v1::DeletePdResponse response;
  // Cascade: windows, then regions, then QPs, then the PD.
  for (auto it = mws_.begin(); it != mws_.end();) {
    if (it->second->pd != pd) { ++it; continue; }
    Unbind(*it->second);
    response.add_deleted(Name("mws", it->first));
    pd->mws--;
    it = mws_.erase(it);
  }
  for (auto it = mrs_.begin(); it != mrs_.end();) {
    if (it->second->pd != pd) { ++it; continue; }
    if (absl::Status s = it->second->mr->Release(); !s.ok()) {
      return WithContext(s, absl::StrCat("cascade stopped at ", Name("mrs", it->first), " (released so far: ",
                                         absl::StrJoin(response.deleted(), ", "), ")"));
    }
    response.add_deleted(Name("mrs", it->first));
    pd->mrs--;
    it = mrs_.erase(it);
  }
  for (auto it = qps_.begin(); it != qps_.end();) {
    if (it->second->pd != pd) { ++it; continue; }
    response.add_deleted(Name("qps", it->first));
    pd->qps--;
    it = qps_.erase(it);
  }
  response.add_deleted(request.name());
  pds_.erase(pd->id);
  RDMAD_LOG_INFO("deleted %s", absl::StrJoin(response.deleted(), ", ").c_str());
  return response;
}

// ---------------------------------------------------------------------------------------------------------
// Memory regions

uint64_t Registry::MaxMrBytes(const fabric::Device& device) const {
  // The smallest of: the device's max_mr_size (rxe reports 2^64-1), this host's physical memory (more can
  // never be pinned), and the configured max_mr_bytes.
  uint64_t max = device.info().max_mr_size ? device.info().max_mr_size : UINT64_MAX;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) max = std::min<uint64_t>(max, static_cast<uint64_t>(pages) * static_cast<uint64_t>(page));
  if (options_.max_mr_bytes) max = std::min(max, options_.max_mr_bytes);
  return max;
}

absl::StatusOr<std::unique_ptr<Mapping>> Registry::MapSource(const v1::MemorySource& source,
                                                             const fabric::Device& device,
                                                             const std::string& field) const {
  const uint64_t max = MaxMrBytes(device);
  switch (source.kind_case()) {
    case v1::MemorySource::kAnonymous: {
      const auto& a = source.anonymous();
      if (max && a.size() > max) {
        return OutOfRange(field + ".anonymous.size",
                          absl::StrCat(a.size(), " bytes exceeds the largest region allowed (", max, " bytes)"));
      }
      return Mapping::Anonymous(a.size(), a.huge_pages(), field + ".anonymous");
    }
    case v1::MemorySource::kFile: {
      const auto& f = source.file();
      if (max && f.length() > max) {
        return OutOfRange(field + ".file.length",
                          absl::StrCat(f.length(), " bytes exceeds the largest region allowed (", max, " bytes)"));
      }
      return Mapping::File(f.path(), f.offset(), f.length(), options_.allowed_file_roots, field + ".file");
    }
    default:
      return InvalidArgument(field, "is required: anonymous {size} or file {path, offset, length}");
  }
}

v1::MemoryRegion Registry::ToProto(const MrEntry& e) const {
  v1::MemoryRegion mr;
  mr.set_name(Name("mrs", e.id));
  mr.set_pd(Name("pds", e.pd->id));
  *mr.mutable_source() = e.source;
  mr.set_addr(e.mr->addr());
  mr.set_length(e.mr->length());
  mr.set_lkey(e.mr->lkey());
  mr.set_rkey(e.mr->rkey());
  AccessList(e.mr->access(), mr.mutable_access());
  mr.set_state(e.unusable ? v1::MR_UNUSABLE : v1::MR_READY);
  mr.set_unusable_reason(e.unusable_reason);
  mr.set_bound_windows(e.bound_windows);
  mr.set_generation(e.generation);
  return mr;
}

absl::StatusOr<v1::MemoryRegion> Registry::RegisterMr(const v1::RegisterMrRequest& request) {
  RDMAD_ASSIGN_OR_RETURN(uint32_t access, AccessBits(request.access(), "access"));
  RDMAD_RETURN_IF_ERROR(CheckMrAccessRule(access, "access"));
  PdEntry* pd = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    RDMAD_ASSIGN_OR_RETURN(pd, FindPd(request.pd(), "pd"));
    pd->pending++;  // the PD cannot be deleted until this registration is inserted or abandoned
  }
  // Without the lock: mapping and pinning can take long for large regions.
  absl::StatusOr<std::unique_ptr<Mapping>> mapping = MapSource(request.source(), *pd->device, "source");
  absl::StatusOr<std::unique_ptr<fabric::Mr>> mr =
      mapping.ok() ? pd->pd->RegMr((*mapping)->data(), (*mapping)->length(), access) : mapping.status();

  std::lock_guard<std::mutex> lock(mu_);
  pd->pending--;
  if (!mr.ok()) return mr.status();  // the mapping, if any, is unmapped on return
  auto e = std::make_unique<MrEntry>();
  e->id = next_mr_++;
  e->pd = pd;
  e->source = request.source();
  e->mapping = std::move(mapping).value();
  e->mr = std::move(mr).value();
  pd->mrs++;
  v1::MemoryRegion out = ToProto(*e);
  mrs_.emplace(e->id, std::move(e));
  RDMAD_LOG_INFO("%s registered in %s: %" PRIu64 " bytes, rkey 0x%x", out.name().c_str(), out.pd().c_str(),
                 out.length(), out.rkey());
  return out;
}

absl::StatusOr<v1::MemoryRegion> Registry::GetMr(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  RDMAD_ASSIGN_OR_RETURN(MrEntry * e, FindMr(name, "name"));
  return ToProto(*e);
}

absl::StatusOr<std::vector<v1::MemoryRegion>> Registry::ListMrs(const v1::ListMrsRequest& request) const {
  std::lock_guard<std::mutex> lock(mu_);
  PdEntry* filter = nullptr;
  if (!request.pd().empty()) {
    RDMAD_ASSIGN_OR_RETURN(filter, FindPd(request.pd(), "pd"));
  }
  std::vector<v1::MemoryRegion> out;
  for (const auto& [id, e] : mrs_) {
    if (filter == nullptr || e->pd == filter) out.push_back(ToProto(*e));
  }
  return out;
}

absl::Status Registry::DeregisterMr(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  RDMAD_ASSIGN_OR_RETURN(MrEntry * e, FindMr(name, "name"));
  if (e->bound_windows > 0) {
    std::vector<std::string> bound;
    for (const auto& [id, w] : mws_) {
      if (w->mr == e) bound.push_back(Name("mws", id));
    }
    return Busy("name", absl::StrCat(name, " has ", e->bound_windows, " bound memory window(s) (",
                                     absl::StrJoin(bound, ", "),
                                     "): invalidate or deallocate them first (ibv_dereg_mr(3) NOTES)"));
  }
  RDMAD_RETURN_IF_ERROR(WithContext(e->mr->Release(), name));
  e->pd->mrs--;
  mrs_.erase(e->id);
  RDMAD_LOG_INFO("%s deregistered", name.c_str());
  return absl::OkStatus();
}

absl::StatusOr<v1::ReregisterMrResponse> Registry::ReregisterMr(const v1::ReregisterMrRequest& request) {
  // Rereg is rare; the whole operation runs under the lock so no one sees a half state.
  std::lock_guard<std::mutex> lock(mu_);
  RDMAD_ASSIGN_OR_RETURN(MrEntry * e, FindMr(request.name(), "name"));
  auto refuse = [](absl::Status s) { return WithOutcome(std::move(s), v1::OUTCOME_OLD_MR_VALID); };
  if (e->unusable) {
    return WithOutcome(FailedPrecondition("name", absl::StrCat(request.name(), " is unusable (", e->unusable_reason,
                                                               "): only deregister is accepted")),
                       v1::OUTCOME_MR_UNUSABLE);
  }
  int flags = 0;
  for (int f : request.flags()) {
    switch (f) {
      case v1::CHANGE_TRANSLATION: flags |= fabric::kChangeTranslation; break;
      case v1::CHANGE_PD: flags |= fabric::kChangePd; break;
      case v1::CHANGE_ACCESS: flags |= fabric::kChangeAccess; break;
      default: return refuse(InvalidArgument("flags", absl::StrCat("unknown flag ", f)));
    }
  }
  if (flags == 0) {
    return refuse(InvalidArgument("flags", "at least one of CHANGE_TRANSLATION, CHANGE_PD, CHANGE_ACCESS"));
  }
  const bool has_source = request.source().kind_case() != v1::MemorySource::KIND_NOT_SET;
  if (has_source != bool(flags & fabric::kChangeTranslation)) {
    return refuse(InvalidArgument(has_source ? "source" : "flags",
                                  "source must be given exactly when flags has CHANGE_TRANSLATION"));
  }
  if (!request.pd().empty() != bool(flags & fabric::kChangePd)) {
    return refuse(InvalidArgument(request.pd().empty() ? "flags" : "pd",
                                  "pd must be given exactly when flags has CHANGE_PD"));
  }
  if (!request.access().empty() && !(flags & fabric::kChangeAccess)) {
    return refuse(InvalidArgument("access", "access is given but flags lacks CHANGE_ACCESS"));
  }
  if (e->bound_windows > 0) {
    return refuse(Busy("name", absl::StrCat(request.name(), " has ", e->bound_windows,
                                            " bound memory window(s): a rereg deregisters the region "
                                            "(ibv_rereg_mr(3)), which ibv_dereg_mr(3) refuses while windows "
                                            "are bound; invalidate them first")));
  }
  PdEntry* new_pd = e->pd;
  if (flags & fabric::kChangePd) {
    absl::StatusOr<PdEntry*> pd = FindPd(request.pd(), "pd");
    if (!pd.ok()) return refuse(pd.status());
    new_pd = *pd;
    if (new_pd->device != e->pd->device) {
      return refuse(InvalidArgument("pd", absl::StrCat(request.pd(), " is on devices/", new_pd->device->info().name,
                                                       ", the region on devices/", e->pd->device->info().name)));
    }
  }
  uint32_t access = e->mr->access();
  if (flags & fabric::kChangeAccess) {
    absl::StatusOr<uint32_t> bits = AccessBits(request.access(), "access");
    if (!bits.ok()) return refuse(bits.status());
    access = *bits;
    if (absl::Status s = CheckMrAccessRule(access, "access"); !s.ok()) return refuse(s);
  }
  std::shared_ptr<Mapping> new_mapping = e->mapping;
  v1::MemorySource new_source = e->source;
  if (flags & fabric::kChangeTranslation) {
    absl::StatusOr<std::unique_ptr<Mapping>> m = MapSource(request.source(), *e->pd->device, "source");
    if (!m.ok()) return refuse(m.status());
    new_mapping = std::move(m).value();
    new_source = request.source();
  }
  return e->pd->device->info().native_rereg
             ? ReregNative(*e, flags, new_pd, std::move(new_mapping), new_source, access)
             : ReregEmulated(*e, flags, new_pd, std::move(new_mapping), new_source, access);
}

void Registry::ApplyRereg(MrEntry& e, int flags, PdEntry* new_pd, std::shared_ptr<Mapping> new_mapping,
                          const v1::MemorySource& new_source) {
  if (new_pd != e.pd) {
    e.pd->mrs--;
    new_pd->mrs++;
    e.pd = new_pd;
  }
  if (flags & fabric::kChangeTranslation) {
    e.mapping = std::move(new_mapping);  // the old mapping is unmapped here if nothing else holds it
    e.source = new_source;
  }
  e.generation++;
}

absl::StatusOr<v1::ReregisterMrResponse> Registry::ReregEmulated(MrEntry& e, int flags, PdEntry* new_pd,
                                                                 std::shared_ptr<Mapping> new_mapping,
                                                                 const v1::MemorySource& new_source,
                                                                 uint32_t access) {
  const std::string name = Name("mrs", e.id);
  v1::ReregisterMrResponse response;
  response.set_method(v1::EMULATED);
  response.set_old_lkey(e.mr->lkey());
  response.set_old_rkey(e.mr->rkey());
  // Register the new region first: if that fails, the old one is untouched and still valid.
  absl::StatusOr<std::unique_ptr<fabric::Mr>> fresh =
      new_pd->pd->RegMr(new_mapping->data(), new_mapping->length(), access);
  if (!fresh.ok()) {
    return WithOutcome(WithContext(fresh.status(), absl::StrCat("rereg ", name, " (emulated): registering the new "
                                                               "region failed; ", name, " is unchanged")),
                       v1::OUTCOME_OLD_MR_VALID);
  }
  if (absl::Status s = e.mr->Release(); !s.ok()) {
    // The old registration is still in place: undo the new one so exactly one MR remains.
    if (absl::Status undo = (*fresh)->Release(); !undo.ok()) {
      RDMAD_LOG_ERROR("rereg %s: undoing the new registration failed too: %s", name.c_str(),
                      std::string(undo.message()).c_str());
    }
    return WithOutcome(WithContext(s, absl::StrCat("rereg ", name, " (emulated): deregistering the old region "
                                                   "failed; the new one was undone and ", name, " is unchanged")),
                       v1::OUTCOME_OLD_MR_VALID);
  }
  e.mr = std::move(fresh).value();
  ApplyRereg(e, flags, new_pd, std::move(new_mapping), new_source);
  *response.mutable_mr() = ToProto(e);
  response.set_keys_changed(e.mr->lkey() != response.old_lkey() || e.mr->rkey() != response.old_rkey());
  RDMAD_LOG_INFO("%s reregistered (emulated), rkey 0x%x -> 0x%x", name.c_str(), response.old_rkey(), e.mr->rkey());
  return response;
}

absl::StatusOr<v1::ReregisterMrResponse> Registry::ReregNative(MrEntry& e, int flags, PdEntry* new_pd,
                                                               std::shared_ptr<Mapping> new_mapping,
                                                               const v1::MemorySource& new_source,
                                                               uint32_t access) {
  const std::string name = Name("mrs", e.id);
  v1::ReregisterMrResponse response;
  response.set_method(v1::NATIVE);
  response.set_old_lkey(e.mr->lkey());
  response.set_old_rkey(e.mr->rkey());
  int err = 0;
  const bool translate = flags & fabric::kChangeTranslation;
  fabric::ReregCode code = e.mr->Rereg(flags, new_pd->pd.get(), translate ? new_mapping->data() : nullptr,
                                       translate ? new_mapping->length() : 0, access, &err);
  const std::string what = absl::StrCat("ibv_rereg_mr returned ", fabric::ReregCodeName(code));
  switch (code) {
    case fabric::ReregCode::kOk:
    case fabric::ReregCode::kErrDoForkOld:
      // ERR_DO_FORK_OLD: the new MR is valid; only madvise on the old range failed.
      ApplyRereg(e, flags, new_pd, std::move(new_mapping), new_source);
      if (code == fabric::ReregCode::kErrDoForkOld) {
        response.set_warning(absl::StrCat(what, " (errno ", err, ", ", ErrnoName(err),
                                          "): the region has the new attributes; fork protection of the old "
                                          "range could not be restored"));
      }
      break;
    case fabric::ReregCode::kErrInput:
    case fabric::ReregCode::kErrDontForkNew:
      return WithOutcome(ErrnoError("ibv_rereg_mr", err, absl::StrCat(what, "; ", name, " is valid and unchanged")),
                         v1::OUTCOME_OLD_MR_VALID);
    default:
      // ERR_CMD, ERR_CMD_AND_DO_FORK_NEW: the MR must not be used. Keep both mappings until deregistration,
      // since the device may reference either.
      e.unusable = true;
      e.unusable_reason = absl::StrCat(what, ", errno ", err, " (", ErrnoName(err), ")");
      if (new_mapping != e.mapping) e.retained.push_back(std::move(new_mapping));
      return WithOutcome(ErrnoError("ibv_rereg_mr", err, absl::StrCat(what, "; ", name,
                                                                      " is now unusable: only deregister is "
                                                                      "accepted")),
                         v1::OUTCOME_MR_UNUSABLE);
  }
  *response.mutable_mr() = ToProto(e);
  response.set_keys_changed(e.mr->lkey() != response.old_lkey() || e.mr->rkey() != response.old_rkey());
  return response;
}

// ---------------------------------------------------------------------------------------------------------
// Queue pairs

v1::QueuePair Registry::ToProto(const QpEntry& e) const {
  v1::QueuePair qp;
  qp.set_name(Name("qps", e.id));
  qp.set_pd(Name("pds", e.pd->id));
  *qp.mutable_local() = rdmad::ToProto(e.qp->local());
  if (e.has_remote) *qp.mutable_remote() = rdmad::ToProto(e.remote);
  qp.set_state(rdmad::ToProto(e.qp->state()));
  qp.set_port(e.options.port);
  qp.set_gid_index(e.options.gid_index);
  qp.set_bound_windows(e.bound_windows);
  return qp;
}

absl::StatusOr<v1::QueuePair> Registry::CreateQp(const v1::CreateQpRequest& request) {
  std::lock_guard<std::mutex> lock(mu_);
  RDMAD_ASSIGN_OR_RETURN(PdEntry * pd, FindPd(request.pd(), "pd"));
  fabric::QpOptions options;
  options.port = request.port() ? request.port() : 1;
  const auto& ports = pd->device->info().ports;
  if (options.port > ports.size()) {
    return InvalidArgument("port", absl::StrCat("devices/", pd->device->info().name, " has ", ports.size(),
                                                " port(s); got ", options.port));
  }
  const fabric::PortInfo& port = ports[options.port - 1];
  options.gid_index = request.has_gid_index() ? request.gid_index() : DefaultGidIndex(port);
  if (port.link_layer == "Ethernet") {
    bool found = false;
    for (const auto& g : port.gids) found = found || g.index == options.gid_index;
    if (!found) {
      return InvalidArgument("gid_index", absl::StrCat("port ", options.port, " has no GID at index ",
                                                       options.gid_index));
    }
  }
  RDMAD_ASSIGN_OR_RETURN(std::unique_ptr<fabric::Qp> qp, pd->pd->CreateQp(options));
  auto e = std::make_unique<QpEntry>();
  e->id = next_qp_++;
  e->pd = pd;
  e->options = options;
  e->qp = std::move(qp);
  pd->qps++;
  v1::QueuePair out = ToProto(*e);
  qps_.emplace(e->id, std::move(e));
  return out;
}

absl::StatusOr<v1::QueuePair> Registry::GetQp(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  RDMAD_ASSIGN_OR_RETURN(QpEntry * e, FindQp(name, "name"));
  return ToProto(*e);
}

std::vector<v1::QueuePair> Registry::ListQps() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::QueuePair> out;
  for (const auto& [id, e] : qps_) out.push_back(ToProto(*e));
  return out;
}

absl::StatusOr<v1::QueuePair> Registry::ConnectQp(const v1::ConnectQpRequest& request) {
  std::lock_guard<std::mutex> lock(mu_);
  RDMAD_ASSIGN_OR_RETURN(QpEntry * e, FindQp(request.name(), "name"));
  if (request.remote().qpn() == 0 || request.remote().qpn() > 0xffffff) {
    return InvalidArgument("remote.qpn", "must be a 24-bit QP number other than 0");
  }
  if (request.remote().psn() > 0xffffff) return InvalidArgument("remote.psn", "must fit in 24 bits");
  if (request.remote().lid() > 0xffff) return InvalidArgument("remote.lid", "must fit in 16 bits");
  if (e->bound_windows > 0) {
    return Busy("name", absl::StrCat(request.name(), " has ", e->bound_windows,
                                     " type 2 window(s) bound on it; reconnecting would reset it"));
  }
  fabric::QpEndpoint remote{request.remote().qpn(), request.remote().psn(), request.remote().gid(),
                            static_cast<uint16_t>(request.remote().lid())};
  RDMAD_RETURN_IF_ERROR(e->qp->Connect(remote));
  e->has_remote = true;
  e->remote = remote;
  return ToProto(*e);
}

absl::Status Registry::DeleteQp(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  RDMAD_ASSIGN_OR_RETURN(QpEntry * e, FindQp(name, "name"));
  if (e->bound_windows > 0) {
    return Busy("name", absl::StrCat(name, " has ", e->bound_windows,
                                     " type 2 window(s) bound on it: invalidate or deallocate them first"));
  }
  for (auto& [id, w] : mws_) {
    if (w->qp == e) {  // a type 1 window bound through this QP does not depend on it
      w->qp = nullptr;
      w->binding.clear_qp();
    }
  }
  e->pd->qps--;
  qps_.erase(e->id);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------------------
// Memory windows

v1::MemoryWindow Registry::ToProto(const MwEntry& e) const {
  v1::MemoryWindow mw;
  mw.set_name(Name("mws", e.id));
  mw.set_pd(Name("pds", e.pd->id));
  mw.set_type(e.mw->type() == fabric::MwType::kType1 ? v1::TYPE_1 : v1::TYPE_2);
  mw.set_rkey(e.mw->rkey());
  mw.set_bound(e.mr != nullptr);
  if (e.mr != nullptr) *mw.mutable_binding() = e.binding;
  return mw;
}

absl::StatusOr<fabric::Qp*> Registry::BindQp(PdEntry& pd) {
  if (pd.bind_qp && pd.bind_qp->state() == fabric::QpState::kRts) return pd.bind_qp.get();
  if (!pd.bind_qp) {
    const auto& ports = pd.device->info().ports;
    if (ports.empty()) return absl::FailedPreconditionError("the device has no port to bind windows on");
    fabric::QpOptions options;
    options.port = 1;
    options.gid_index = DefaultGidIndex(ports[0]);
    RDMAD_ASSIGN_OR_RETURN(pd.bind_qp, pd.pd->CreateQp(options));
  }
  // Connected to itself: a bind is a local operation, but the QP must be in RTS to execute it. Also the
  // way back after a failed bind completion left it in the error state.
  RDMAD_RETURN_IF_ERROR(WithContext(pd.bind_qp->Connect(pd.bind_qp->local()), "preparing the bind QP"));
  return pd.bind_qp.get();
}

void Registry::Unbind(MwEntry& mw) {
  if (mw.mr == nullptr) return;
  mw.mr->bound_windows--;
  if (mw.mw->type() == fabric::MwType::kType2 && mw.qp != nullptr) mw.qp->bound_windows--;
  mw.mr = nullptr;
  mw.qp = nullptr;
  mw.binding.Clear();
}

absl::StatusOr<v1::MemoryWindow> Registry::AllocMw(const v1::AllocMwRequest& request) {
  std::lock_guard<std::mutex> lock(mu_);
  RDMAD_ASSIGN_OR_RETURN(PdEntry * pd, FindPd(request.pd(), "pd"));
  const fabric::DeviceInfo& info = pd->device->info();
  fabric::MwType type;
  if (request.type() == v1::TYPE_1) {
    if (!info.mw_type1) {
      return FailedPrecondition("type", absl::StrCat("devices/", info.name, " does not support memory windows"));
    }
    type = fabric::MwType::kType1;
  } else if (request.type() == v1::TYPE_2) {
    if (!info.mw_type2a && !info.mw_type2b) {
      return FailedPrecondition("type", absl::StrCat("devices/", info.name,
                                                     " does not support type 2 memory windows"));
    }
    type = fabric::MwType::kType2;
  } else {
    return InvalidArgument("type", "must be TYPE_1 or TYPE_2");
  }
  RDMAD_ASSIGN_OR_RETURN(std::unique_ptr<fabric::Mw> mw, pd->pd->AllocMw(type));
  auto e = std::make_unique<MwEntry>();
  e->id = next_mw_++;
  e->pd = pd;
  e->mw = std::move(mw);
  pd->mws++;
  v1::MemoryWindow out = ToProto(*e);
  mws_.emplace(e->id, std::move(e));
  return out;
}

absl::StatusOr<v1::MemoryWindow> Registry::GetMw(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  RDMAD_ASSIGN_OR_RETURN(MwEntry * e, FindMw(name, "name"));
  return ToProto(*e);
}

absl::StatusOr<std::vector<v1::MemoryWindow>> Registry::ListMws(const v1::ListMwsRequest& request) const {
  std::lock_guard<std::mutex> lock(mu_);
  PdEntry* filter = nullptr;
  if (!request.pd().empty()) {
    RDMAD_ASSIGN_OR_RETURN(filter, FindPd(request.pd(), "pd"));
  }
  std::vector<v1::MemoryWindow> out;
  for (const auto& [id, e] : mws_) {
    if (filter == nullptr || e->pd == filter) out.push_back(ToProto(*e));
  }
  return out;
}

absl::StatusOr<v1::MemoryWindow> Registry::BindMw(const v1::BindMwRequest& request) {
  std::lock_guard<std::mutex> lock(mu_);
  RDMAD_ASSIGN_OR_RETURN(MwEntry * w, FindMw(request.name(), "name"));
  RDMAD_ASSIGN_OR_RETURN(MrEntry * mr, FindMr(request.mr(), "mr"));
  const bool type1 = w->mw->type() == fabric::MwType::kType1;
  if (mr->unusable) return FailedPrecondition("mr", absl::StrCat(request.mr(), " is unusable (", mr->unusable_reason, ")"));
  if (mr->pd != w->pd) {
    return InvalidArgument("mr", absl::StrCat(request.mr(), " is in ", Name("pds", mr->pd->id), ", the window in ",
                                              Name("pds", w->pd->id), " (ibv_bind_mw(3): same PD)"));
  }
  if (request.length() == 0) return InvalidArgument("length", "must be > 0 (InvalidateMw unbinds a window)");
  const uint64_t mr_len = mr->mr->length();
  if (request.offset() >= mr_len) {
    return OutOfRange("offset", absl::StrCat("offset ", request.offset(), " is at or past the end of ", request.mr(),
                                             " (", mr_len, " bytes)"));
  }
  if (request.length() > mr_len - request.offset()) {
    return OutOfRange("length", absl::StrCat("offset ", request.offset(), " + length ", request.length(),
                                             " passes the end of ", request.mr(), " (", mr_len, " bytes)"));
  }
  RDMAD_ASSIGN_OR_RETURN(uint32_t access, AccessBits(request.access(), "access"));
  if (access & (fabric::kLocalWrite | fabric::kMwBind)) {
    return InvalidArgument("access", "a window takes only REMOTE_READ, REMOTE_WRITE and REMOTE_ATOMIC "
                                     "(ibv_bind_mw(3))");
  }
  const uint32_t mr_access = mr->mr->access();
  if (!(mr_access & fabric::kMwBind)) {
    return FailedPrecondition("mr", absl::StrCat(request.mr(), " was registered without MW_BIND"));
  }
  for (uint32_t needs_write : {static_cast<uint32_t>(fabric::kRemoteWrite), static_cast<uint32_t>(fabric::kRemoteAtomic)}) {
    if ((access & needs_write) && !(mr_access & fabric::kLocalWrite)) {
      return FailedPrecondition("access", absl::StrCat(AccessName(needs_write), " on a window requires LOCAL_WRITE on ",
                                                       request.mr(), " (ibv_bind_mw(3))"));
    }
  }
  if (request.zero_based()) {
    if (type1) return InvalidArgument("zero_based", "type 1 windows cannot be zero-based (IBA o10-36.2.2)");
    access |= fabric::kZeroBased;
  }
  if (!type1 && w->mr != nullptr) {
    return FailedPrecondition("name", absl::StrCat(request.name(), " is bound; a type 2 window must be "
                                                   "invalidated before it is bound again"));
  }

  QpEntry* user_qp = nullptr;
  if (!request.qp().empty()) {
    RDMAD_ASSIGN_OR_RETURN(user_qp, FindQp(request.qp(), "qp"));
    if (user_qp->pd != w->pd) {
      return InvalidArgument("qp", absl::StrCat(request.qp(), " is in ", Name("pds", user_qp->pd->id),
                                                ", the window in ", Name("pds", w->pd->id)));
    }
    if (user_qp->qp->state() != fabric::QpState::kRts) {
      return FailedPrecondition("qp", absl::StrCat(request.qp(), " is not connected (ConnectQp first)"));
    }
  } else if (!type1) {
    return InvalidArgument("qp", "is required for a type 2 window: it will be usable only on that QP");
  }
  fabric::Qp* qp = nullptr;
  if (user_qp != nullptr) {
    qp = user_qp->qp.get();
  } else {
    RDMAD_ASSIGN_OR_RETURN(qp, BindQp(*w->pd));
  }

  const uint64_t addr = mr->mr->addr() + request.offset();
  // The bounds MR: exactly the window's range, so the device's MR range check is the window's range.
  absl::StatusOr<std::unique_ptr<fabric::Mr>> bounds = w->pd->pd->RegMr(
      reinterpret_cast<void*>(addr), request.length(), mr_access & (fabric::kLocalWrite | fabric::kMwBind));
  if (!bounds.ok()) return WithContext(bounds.status(), absl::StrCat("binding ", request.name(), ": bounds region"));
  fabric::BindSpec spec;
  spec.mr = bounds->get();
  spec.addr = addr;
  spec.length = request.length();
  spec.access = access;
  // Returns only after the bind's completion was polled successfully; on failure the window keeps its
  // previous rkey and binding, and the new bounds MR is released on return.
  absl::StatusOr<uint32_t> rkey = qp->Bind(*w->mw, spec);
  if (!rkey.ok()) return WithContext(rkey.status(), absl::StrCat("binding ", request.name()));
  Unbind(*w);  // a type 1 window bound again: its previous binding is gone
  w->bounds_mr = std::move(bounds).value();  // the previous bounds MR (type 1 rebind) is released here
  w->mr = mr;
  w->qp = user_qp;
  mr->bound_windows++;
  if (!type1) user_qp->bound_windows++;
  v1::MwBinding& b = w->binding;
  b.set_mr(request.mr());
  b.set_offset(request.offset());
  b.set_length(request.length());
  *b.mutable_access() = request.access();
  b.set_zero_based(request.zero_based());
  b.set_addr(spec.addr);
  b.set_remote_addr(request.zero_based() ? 0 : spec.addr);
  b.set_qp(request.qp());
  RDMAD_LOG_INFO("%s bound to %s [+%" PRIu64 ", %" PRIu64 " bytes], rkey 0x%x", request.name().c_str(),
                 request.mr().c_str(), request.offset(), request.length(), *rkey);
  return ToProto(*w);
}

absl::StatusOr<v1::MemoryWindow> Registry::InvalidateMw(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  RDMAD_ASSIGN_OR_RETURN(MwEntry * w, FindMw(name, "name"));
  if (w->mr == nullptr) return ToProto(*w);  // already unbound: invalidation is idempotent
  fabric::Qp* qp = nullptr;
  if (w->mw->type() == fabric::MwType::kType1) {
    RDMAD_ASSIGN_OR_RETURN(qp, BindQp(*w->pd));
  } else {
    qp = w->qp->qp.get();  // a type 2 window is invalidated on the QP it is bound on
  }
  RDMAD_RETURN_IF_ERROR(WithContext(qp->Invalidate(*w->mw, *w->bounds_mr), name));
  Unbind(*w);
  w->bounds_mr.reset();  // the window no longer references it
  RDMAD_LOG_INFO("%s invalidated", name.c_str());
  return ToProto(*w);
}

absl::Status Registry::DeallocMw(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  RDMAD_ASSIGN_OR_RETURN(MwEntry * w, FindMw(name, "name"));
  Unbind(*w);  // deallocation invalidates a bound window
  w->pd->mws--;
  mws_.erase(w->id);
  return absl::OkStatus();
}

}  // namespace rdmad
