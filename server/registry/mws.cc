// Memory windows: allocate, get, list, bind, invalidate, deallocate. A bind or an invalidation is posted
// and finishes on the device's dispatcher when its completion arrives; nothing waits for it. Type 1
// operations of a PD take its lane (they share the PD's bind QP); type 2 ones run on the caller's QP.
// Threads: see registry.h. No fabric call is made with mu_ held. A bind that needs a bounds region is
// posted by a pin worker, which pins the region first, unless the region was pinned ahead (PinBoundsAsync,
// on a pin worker too): no other thread pins.
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/log.h"
#include "server/common/status.h"
#include "server/dispatch/handoffs.h"
#include "server/registry/internal.h"
#include "server/registry/registry.h"

namespace rdmad {


namespace {

// The bytes of the whole pages [addr, addr + length) touches: what registering a bounds region over it pins.
uint64_t PagesBytes(uint64_t addr, uint64_t length) {
  static const uint64_t page = [] {
    const long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? static_cast<uint64_t>(p) : uint64_t{4096};
  }();
  if (length == 0) return 0;
  const uint64_t start = addr / page * page;
  const uint64_t end = (addr + length + page - 1) / page * page;
  return end - start;
}

// Only the owner of a window rdmad manages itself may use it.
absl::Status CheckOwner(const registry_internal::MwEntry& w, const std::string& name, const std::string& owner) {
  if (w.owner == owner) return absl::OkStatus();
  if (w.owner.empty()) return FailedPrecondition("name", absl::StrCat(name, " is not owned by ", owner));
  return FailedPrecondition("name", absl::StrCat(name, " belongs to rdmad's ", w.owner,
                                                 " (use the grant's RevokeGrant, not the window)"));
}

}  // namespace

void Registry::FillBinding(const ReservedBind& r, v1::MwBinding* b) {
  b->Clear();
  b->set_mr(Name("mrs", r.mr->id));
  b->set_offset(r.offset);
  b->set_length(r.length);
  *b->mutable_access() = r.access_list;
  b->set_zero_based(r.zero_based);
  b->set_addr(r.addr);
  b->set_remote_addr(r.zero_based ? 0 : r.addr);
  if (r.user_qp != nullptr) b->set_qp(Name("qps", r.user_qp->id));
}

v1::MemoryWindow Registry::ToProto(const MwEntry& e) const {
  const MwEntry::Book& b = e.book.Get(mu_);
  v1::MemoryWindow mw;
  mw.set_name(Name("mws", e.id));
  mw.set_pd(Name("pds", e.pd->id));
  mw.set_type(e.type == fabric::MwType::kType1 ? v1::TYPE_1 : v1::TYPE_2);
  mw.set_rkey(b.rkey);
  mw.set_bound(b.mr != nullptr);
  mw.set_owner(e.owner);
  if (b.mr != nullptr) *mw.mutable_binding() = b.binding;
  return mw;
}

std::unique_ptr<fabric::Mr> Registry::Unbind(MwEntry& mw) {
  MwEntry::Book& b = mw.book.Get(mu_);
  if (b.mr == nullptr) return nullptr;
  b.mr->book.Get(mu_).windows.erase(mw.id);
  if (b.qp != nullptr) {
    b.qp->book.Get(mu_).windows.erase(mw.id);
    if (mw.type == fabric::MwType::kType2) b.qp->book.Get(mu_).type2_windows--;
  }
  b.mr = nullptr;
  b.qp = nullptr;
  b.binding.Clear();
  mw.pd->book.Get(mu_).bounds_bytes -= b.bounds_bytes;  // released by the caller once the window no longer uses it
  b.bounds_bytes = 0;
  return std::move(mw.bounds_mr);
}

absl::StatusOr<v1::MemoryWindow> Registry::AllocMw(const v1::AllocMwRequest& request, const std::string& owner) {
  PdEntry* pd = nullptr;
  fabric::MwType type;
  {
    MutexLock lock(&mu_);
    RDMAD_ASSIGN_OR_RETURN(pd, FindPd(request.pd(), "pd"));
    if (pd->book.Get(mu_).busy) return InProgress("pd", request.pd(), pd->book.Get(mu_).busy);
    const fabric::DeviceInfo& info = pd->device->info();
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
    if (owner.empty()) {
      RDMAD_RETURN_IF_ERROR(WithinLimit("mws", options_.limits.mws, totals_.Get(mu_).user_mws, creating_.mws));
      creating_.mws++;
    }
    pd->book.Get(mu_).pending++;
  }
  absl::StatusOr<std::unique_ptr<fabric::Mw>> mw = pd->pd->AllocMw(type);
  MutexLock lock(&mu_);
  pd->book.Get(mu_).pending--;
  if (owner.empty()) creating_.mws--;
  if (!mw.ok()) return mw.status();
  auto e = std::make_unique<MwEntry>();
  e->id = next_mw_.Next();
  e->pd = pd;
  e->type = type;
  e->mw = std::move(mw).value();
  e->book.Get(mu_).rkey = e->mw->rkey();
  e->owner = owner;
  Attach(mu_, pd, e.get());
  v1::MemoryWindow out = ToProto(*e);
  mws_.emplace(e->id, std::move(e));
  return out;
}

absl::StatusOr<v1::MemoryWindow> Registry::GetMw(const std::string& name) const {
  MutexLock lock(&mu_);
  RDMAD_ASSIGN_OR_RETURN(MwEntry * e, FindMw(name, "name"));
  return ToProto(*e);
}

absl::StatusOr<std::vector<v1::MemoryWindow>> Registry::ListMws(const v1::ListMwsRequest& request, uint64_t after,
                                                                size_t limit) const {
  MutexLock lock(&mu_);
  std::vector<v1::MemoryWindow> out;
  auto full = [&] { return limit != 0 && out.size() >= limit; };
  if (!request.pd().empty()) {
    RDMAD_ASSIGN_OR_RETURN(PdEntry * pd, FindPd(request.pd(), "pd"));
    const auto& mws = pd->book.Get(mu_).mws;
    for (auto it = mws.upper_bound(after); it != mws.end() && !full(); ++it) out.push_back(ToProto(*it->second));
    return out;
  }
  for (auto it = mws_.upper_bound(after); it != mws_.end() && !full(); ++it) out.push_back(ToProto(*it->second));
  return out;
}

uint64_t Registry::BoundsRegionBytes(const v1::BindMwRequest& request) const {
  absl::StatusOr<uint64_t> mr = ParseName(request.mr(), "mrs", "mr");
  return mr.ok() ? BoundsRegionBytes(*mr, request.offset(), request.length()) : 0;
}

uint64_t Registry::BoundsRegionBytes(uint64_t mr_id, uint64_t offset, uint64_t length) const {
  MutexLock lock(&mu_);
  absl::StatusOr<MrEntry*> mr = FindMrId(mr_id, "mr");
  if (!mr.ok()) return 0;
  const MrEntry::Book& b = (*mr)->book.Get(mu_);
  // A window binds only in its region's PD, so the region's device is the window's.
  if (!UsesBoundsRegion(options_.mw_bounds_region, b.pd->device->info())) return 0;
  if (offset > b.length || length > b.length - offset) return 0;
  return PagesBytes(b.addr + offset, length);
}

absl::StatusOr<Registry::Key> Registry::RegionKey(uint64_t mr_id, uint64_t offset) const {
  MutexLock lock(&mu_);
  RDMAD_ASSIGN_OR_RETURN(MrEntry * mr, FindMrId(mr_id, "mr"));
  const MrEntry::Book& b = mr->book.Get(mu_);
  if (b.unusable) {
    return FailedPrecondition("mr", absl::StrCat(Name("mrs", mr_id), " is unusable (", b.unusable_reason, ")"));
  }
  return Key{b.rkey, b.addr + offset};
}

Registry::PinnedBounds::~PinnedBounds() {
  region_.reset();  // ibv_dereg_mr, without the lock
  if (registry_ == nullptr) return;
  MutexLock lock(&registry_->mu_);
  PdEntry::Book& b = pd_->book.Get(registry_->mu_);
  b.bounds_bytes -= bytes_;
  b.pending--;
}

void Registry::PinBoundsAsync(uint64_t mr_id, uint64_t offset, uint64_t length,
                              Done<std::unique_ptr<PinnedBounds>> done) {
  std::unique_ptr<PinnedBounds> pinned(new PinnedBounds());
  fabric::Pd* pd = nullptr;
  bool needed = true;
  absl::Status refused = [&]() -> absl::Status {
    MutexLock lock(&mu_);
    RDMAD_ASSIGN_OR_RETURN(MrEntry * mr, FindMrId(mr_id, "mr"));
    MrEntry::Book& mb = mr->book.Get(mu_);
    const std::string name = Name("mrs", mr_id);
    if (!UsesBoundsRegion(options_.mw_bounds_region, mb.pd->device->info())) {
      needed = false;
      return absl::OkStatus();
    }
    if (mb.busy) return InProgress("mr", name, mb.busy);
    if (mb.unusable) {
      return FailedPrecondition("mr", absl::StrCat(name, " is unusable (", mb.unusable_reason, ")"));
    }
    if (length == 0 || offset > mb.length || length > mb.length - offset) {
      return OutOfRange("length", absl::StrCat("[+", offset, ", ", length, " bytes] is not within ", name, " (",
                                               mb.length, " bytes)"));
    }
    // Counted, and the PD kept, from here: ~PinnedBounds gives both back.
    pinned->registry_ = this;
    pinned->pd_ = mb.pd;
    pinned->mr_id_ = mr->id;
    pinned->generation_ = mb.generation;
    pinned->addr_ = mb.addr + offset;
    pinned->length_ = length;
    pinned->bytes_ = PagesBytes(pinned->addr_, pinned->length_);
    pinned->access_ = mb.access & (fabric::kLocalWrite | fabric::kMwBind);
    PdEntry::Book& pb = mb.pd->book.Get(mu_);
    pb.pending++;
    pb.bounds_bytes += pinned->bytes_;
    pd = mb.pd->pd.get();
    return absl::OkStatus();
  }();
  if (!refused.ok()) return std::move(done)(refused);
  if (!needed) return std::move(done)(std::unique_ptr<PinnedBounds>());
  auto work = std::make_shared<std::pair<std::unique_ptr<PinnedBounds>, Done<std::unique_ptr<PinnedBounds>>>>(
      std::move(pinned), std::move(done));
  const bool posted = workers_->Post([this, pd, work] {
    PinnedBounds& p = *work->first;
    if (absl::Status room = options_.memlock.Check(reinterpret_cast<void*>(p.addr_), p.length_, "length");
        !room.ok()) {
      return std::move(work->second)(WithContext(room, "its bounds region"));
    }
    absl::StatusOr<std::unique_ptr<fabric::Mr>> region =
        pd->RegMr(reinterpret_cast<void*>(p.addr_), p.length_, p.access_);
    if (!region.ok()) {
      return std::move(work->second)(WithContext(options_.memlock.Explain(region.status(), p.length_, "length"),
                                                 "pinning a bounds region"));
    }
    p.region_ = std::move(region).value();
    std::move(work->second)(std::move(work->first));
  });
  // Shutting down: the task was dropped unrun, and with it the reservation.
  if (!posted) return std::move(work->second)(absl::UnavailableError("rdmad is shutting down"));
}

void Registry::BindMwAsync(const v1::BindMwRequest& request, Done<v1::MemoryWindow> done, const std::string& owner,
                           std::unique_ptr<KeyMessage> then, std::unique_ptr<PinnedBounds> pinned) {
  auto work = std::make_shared<ReservedBind>();
  std::optional<v1::MemoryWindow> validated;  // validate_only: the window as the bind would leave it
  bool queued = false;
  absl::Status refused = [&]() -> absl::Status {
    MutexLock lock(&mu_);
    RDMAD_ASSIGN_OR_RETURN(MwEntry * w, FindMw(request.name(), "name"));
    RDMAD_ASSIGN_OR_RETURN(MrEntry * mr, FindMr(request.mr(), "mr"));
    RDMAD_RETURN_IF_ERROR(CheckOwner(*w, request.name(), owner));
    // Named: a FunctionRef must not outlive what it refers to.
    auto find_qp = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return FindQp(request.qp(), "qp"); };
    auto check_access = [&](const BindCheck& check) { return CheckBind(check, request.access()); };
    BindAsk ask{request.offset(),     request.length(), request.zero_based(), request.validate_only(),
                !request.qp().empty(), find_qp,          check_access,          &request.access()};
    bool lane = true;
    RDMAD_RETURN_IF_ERROR(ReserveBindLocked(w, mr, ask, then != nullptr, pinned, work.get(), &validated, &lane));
    if (!lane) {
      // Runs again, re-validated, when the PD's type 1 lane is free.
      w->pd->book.Get(mu_).lane.push_back(dispatch::Carry([this, request, owner, done = std::move(done)]() mutable {
        BindMwAsync(request, std::move(done), owner);
      }));
      queued = true;
    }
    return absl::OkStatus();
  }();
  pinned.reset();  // one that was not this bind's: released, without the lock
  if (queued) return;
  if (!refused.ok()) return std::move(done)(refused);
  work->then = std::move(then);
  work->done = std::move(done);
  StartReservedBind(std::move(work), std::move(validated));
}

void Registry::BindGrantAsync(const GrantBind& bind, Done<Key> done, std::unique_ptr<KeyMessage> then,
                              std::unique_ptr<PinnedBounds> pinned) {
  auto work = std::make_shared<ReservedBind>();
  bool queued = false;
  absl::Status refused = [&]() -> absl::Status {
    MutexLock lock(&mu_);
    RDMAD_ASSIGN_OR_RETURN(MwEntry * w, FindMwId(bind.window, "name"));
    RDMAD_ASSIGN_OR_RETURN(MrEntry * mr, FindMrId(bind.mr, "mr"));
    RDMAD_RETURN_IF_ERROR(CheckOwner(*w, Name("mws", w->id), "grants"));
    auto find_qp = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return FindQpId(bind.qp, "qp"); };
    auto check_access = [&](const BindCheck& check) { return CheckBind(check, bind.access); };
    BindAsk ask{bind.offset, bind.length, /*zero_based=*/false, /*validate_only=*/false, bind.qp != 0, find_qp,
                check_access};
    std::optional<v1::MemoryWindow> unused;
    bool lane = true;
    RDMAD_RETURN_IF_ERROR(ReserveBindLocked(w, mr, ask, then != nullptr, pinned, work.get(), &unused, &lane));
    if (!lane) {
      w->pd->book.Get(mu_).lane.push_back(dispatch::Carry([this, bind, done = std::move(done)]() mutable {
        BindGrantAsync(bind, std::move(done));
      }));
      queued = true;
    }
    return absl::OkStatus();
  }();
  pinned.reset();
  if (queued) return;
  if (!refused.ok()) return std::move(done)(refused);
  work->then = std::move(then);
  work->done = [done = std::move(done)](absl::StatusOr<v1::MemoryWindow> bound) mutable {
    if (!bound.ok()) return std::move(done)(bound.status());
    std::move(done)(Key{bound->rkey(), bound->binding().remote_addr()});
  };
  StartReservedBind(std::move(work), std::nullopt);
}

absl::Status Registry::ReserveBindLocked(MwEntry* w, MrEntry* mr, const BindAsk& ask, bool has_then,
                                         std::unique_ptr<PinnedBounds>& pinned, ReservedBind* out,
                                         std::optional<v1::MemoryWindow>* validated, bool* lane) {
  MwEntry::Book& wb = w->book.Get(mu_);
  MrEntry::Book& mb = mr->book.Get(mu_);
  const std::string mr_name = Name("mrs", mr->id);
  if (wb.busy) return InProgress("name", Name("mws", w->id), wb.busy);
  if (mb.busy) return InProgress("mr", mr_name, mb.busy);
  const bool type1 = w->type == fabric::MwType::kType1;
  if (mb.unusable) {
    return FailedPrecondition("mr", absl::StrCat(mr_name, " is unusable (", mb.unusable_reason, ")"));
  }
  if (mb.pd != w->pd) {
    return InvalidArgument("mr", absl::StrCat(mr_name, " is in ", Name("pds", mb.pd->id), ", the window in ",
                                              Name("pds", w->pd->id), " (ibv_bind_mw(3): same PD)"));
  }
  BindCheck check{mr_name, mb.length, mb.access, type1, wb.mr != nullptr, ask.offset, ask.length, ask.zero_based};
  RDMAD_ASSIGN_OR_RETURN(const uint32_t access, ask.check_access(check));
  if (!type1 && wb.mr != nullptr) {
    return FailedPrecondition("name", absl::StrCat(Name("mws", w->id), " is bound; a type 2 window must be "
                                                   "invalidated before it is bound again"));
  }
  QpEntry* user_qp = nullptr;
  if (ask.qp_named) {
    RDMAD_ASSIGN_OR_RETURN(user_qp, ask.find_qp());
    const std::string qp_name = Name("qps", user_qp->id);
    if (user_qp->book.Get(mu_).busy) return InProgress("qp", qp_name, user_qp->book.Get(mu_).busy);
    if (user_qp->pd != w->pd) {
      return InvalidArgument("qp", absl::StrCat(qp_name, " is in ", Name("pds", user_qp->pd->id), ", the window in ",
                                                Name("pds", w->pd->id)));
    }
    if (user_qp->book.Get(mu_).state != fabric::QpState::kRts) {
      return FailedPrecondition("qp", absl::StrCat(qp_name, " is not connected (ConnectQp first)"));
    }
  } else if (!type1) {
    return InvalidArgument("qp", "is required for a type 2 window: it will be usable only on that QP");
  }
  if (has_then && (type1 || user_qp == nullptr)) {
    return InvalidArgument("qp", "a key's SEND goes with the bind only for a type 2 window bound on that QP");
  }
  ReservedBind& r = *out;
  r.w = w;
  r.mr = mr;
  r.user_qp = user_qp;
  r.offset = ask.offset;
  r.length = ask.length;
  r.zero_based = ask.zero_based;
  r.addr = mb.addr + ask.offset;
  r.access = access;
  if (ask.access_list != nullptr) {
    r.access_list = *ask.access_list;
  } else {
    AccessList(access & ~fabric::kZeroBased, &r.access_list);
  }
  r.bounds_region = UsesBoundsRegion(options_.mw_bounds_region, w->pd->device->info());
  if (ask.validate_only) {
    // Checked as a bind is (the bounds region's room is checked by StartReservedBind): the window as it
    // would be, without the rkey only the bind's completion gives. Neither the PD's lane nor anything else
    // is taken.
    *validated = ToProto(*w);
    (*validated)->set_rkey(0);
    (*validated)->set_bound(true);
    FillBinding(r, (*validated)->mutable_binding());
    return absl::OkStatus();
  }
  if (user_qp == nullptr && !TakeLane(*w->pd)) {
    *lane = false;
    return absl::OkStatus();
  }
  // Reserve: the window, and links that keep the region and the QP from going while the bind is out.
  wb.busy = "BindMw";
  mb.windows.emplace(w->id, w);
  if (user_qp) user_qp->book.Get(mu_).windows.emplace(w->id, w);
  if (user_qp && !type1) user_qp->book.Get(mu_).type2_windows++;
  r.mr_access = mb.access;
  r.parent = mr->mr.get();
  // The bounds region's pages count as pinned in the PD from now until the region is released (a tenant's
  // pinned_bytes quota: the RPC layer reserved them before this call).
  wb.binding_bounds_bytes = r.bounds_region ? PagesBytes(r.addr, ask.length) : 0;
  w->pd->book.Get(mu_).bounds_bytes += wb.binding_bounds_bytes;
  if (r.bounds_region && pinned != nullptr && pinned->registry_ == this && pinned->pd_ == w->pd &&
      pinned->mr_id_ == mr->id && pinned->generation_ == mb.generation && pinned->addr_ == r.addr &&
      pinned->length_ == ask.length && pinned->access_ == (mb.access & (fabric::kLocalWrite | fabric::kMwBind))) {
    // The region pinned ahead is this bind's: its pages move to the binding's count, and the PD's hold
    // passes to the reservation.
    r.premade = std::move(pinned->region_);
    w->pd->book.Get(mu_).bounds_bytes -= pinned->bytes_;
    w->pd->book.Get(mu_).pending--;
    pinned->registry_ = nullptr;
  }
  return absl::OkStatus();
}

void Registry::StartReservedBind(std::shared_ptr<ReservedBind> work, std::optional<v1::MemoryWindow> validated) {
  if (validated.has_value()) {
    if (work->bounds_region) {
      if (absl::Status room = options_.memlock.Check(reinterpret_cast<void*>(work->addr), work->length, "length");
          !room.ok()) {
        return std::move(work->done)(WithContext(room, "its bounds region"));
      }
    }
    return std::move(work->done)(*std::move(validated));
  }
  if (!work->bounds_region || work->premade != nullptr) return PostReservedBind(work);
  // A bounds region is a pin (ibv_reg_mr over the range): on the pin workers, like every registration, so
  // no gRPC thread or CM dispatcher waits on one. The bind is posted (and its completion polled) there.
  if (workers_->Post([this, work] { PostReservedBind(work); })) return;
  // Shutting down: the task was dropped unrun; the reservation is undone and the caller answered.
  FinishBind(*work, absl::UnavailableError("rdmad is shutting down"), std::move(work->done));
}

void Registry::PostReservedBind(const std::shared_ptr<ReservedBind>& work) {
  ReservedBind& b = *work;
  MwEntry* const w = b.w;
  // The bind did not get posted: the reservation is undone and the caller answered.
  auto unposted = [this, &b](absl::Status s) { FinishBind(b, std::move(s), std::move(b.done)); };
  absl::StatusOr<fabric::Qp*> qp = b.user_qp ? b.user_qp->get() : PrepareBindQp(*w->pd);
  if (!qp.ok()) return unposted(qp.status());
  fabric::BindSpec spec;
  spec.mr = b.parent;
  // How long this thread polls for the bind's completion (Options::completion_poll; none if that is zero).
  // A pin worker that pinned the bounds region itself is no gRPC thread, and a completion it misses costs
  // the RPC a second hand-off: where the QP carries only rdmad's local work (a QP of the API, or the PD's
  // bind QP: binds and invalidations, which the device completes without waiting for any peer) it polls
  // until the bind completes, up to Options::pin_worker_poll; on a data-plane connection's QP, whose SENDs wait for
  // the client, four times completion_poll.
  absl::Duration poll = options_.completion_poll;
  if (b.bounds_region && b.premade == nullptr && poll > absl::ZeroDuration()) {
    const bool local_work_only = b.user_qp == nullptr || b.user_qp->cm_id.empty();
    poll = local_work_only ? std::max(options_.pin_worker_poll, 4 * poll) : 4 * poll;
  }
  if (b.bounds_region && b.premade != nullptr) {
    spec.mr = b.premade.get();
    w->binding_bounds_mr = std::move(b.premade);  // the reservation holds it until FinishBind
  } else if (b.bounds_region) {
    // The bounds region pins the range again, charged to RLIMIT_MEMLOCK like any registration: checked
    // before anything is pinned, as RegisterMr does.
    if (absl::Status room = options_.memlock.Check(reinterpret_cast<void*>(b.addr), b.length, "length"); !room.ok()) {
      return unposted(WithContext(room, "its bounds region"));
    }
    absl::StatusOr<std::unique_ptr<fabric::Mr>> bounds = w->pd->pd->RegMr(
        reinterpret_cast<void*>(b.addr), b.length, b.mr_access & (fabric::kLocalWrite | fabric::kMwBind));
    if (!bounds.ok()) {
      absl::Status s = WithContext(options_.memlock.Explain(bounds.status(), b.length, "length"),
                                   absl::StrCat("binding ", Name("mws", w->id), ": bounds region"));
      return unposted(s);
    }
    spec.mr = bounds->get();
    w->binding_bounds_mr = std::move(bounds).value();  // the reservation holds it until FinishBind
  }
  spec.addr = b.addr;
  spec.length = b.length;
  spec.access = b.access;
  fabric::SendAfterBind send;
  if (b.then != nullptr) {
    send.message = [message = std::move(b.then->message), remote_addr = b.zero_based ? 0 : b.addr](uint32_t rkey) mutable {
      return std::move(message)(rkey, remote_addr);
    };
    send.done = dispatch::Carry(std::move(b.then->done));
    spec.then = &send;
  }
  auto shared_done = std::make_shared<Done<v1::MemoryWindow>>(std::move(b.done));
  auto polled = std::make_shared<Polled>(WillPoll(poll));
  fabric::Device& device = *w->pd->device;
  const uint64_t key = (*qp)->completion_key();  // read while the post keeps the QP
  absl::Status posted = (*qp)->PostBind(
      *w->mw, spec, dispatch::Carry([this, work, shared_done, polled](absl::StatusOr<uint32_t> rkey) mutable {
        Completed(*polled, [this, work, shared_done, rkey = std::move(rkey)]() mutable {
          FinishBind(*work, std::move(rkey), std::move(*shared_done));
        });
      }));
  if (!posted.ok()) return FinishBind(b, posted, std::move(*shared_done));
  PollBriefly(device, key, polled, poll);
}

// A completion run by the poll (or handed back to it) may start more work whose post polls in turn (a
// queued type 1 operation taking the PD's lane, a grant's next step): those are left to the dispatcher, so
// the stack stays one poll deep however many operations are queued.
namespace {
thread_local bool t_polling = false;  // this thread is inside PollBriefly
}  // namespace

bool Registry::WillPoll(absl::Duration budget) { return !t_polling && budget > absl::ZeroDuration(); }

void Registry::PollBriefly(fabric::Device& device, uint64_t key, const std::shared_ptr<Polled>& polled,
                           absl::Duration budget) {
  {
    MutexLock lock(&polled->mu);
    if (!polled->waiting) return;  // not this thread's to poll (WillPoll said no)
  }
  t_polling = true;
  device.PollFor(key, budget, [polled] { return polled->done.load(std::memory_order_acquire); });
  absl::AnyInvocable<void() &&> handed;
  {
    MutexLock lock(&polled->mu);
    polled->waiting = false;
    handed = std::move(polled->handed);
  }
  if (handed) {
    completions_on_poster_.fetch_add(1, std::memory_order_relaxed);
    std::move(handed)();
  }
  t_polling = false;
}

void Registry::Completed(Polled& polled, absl::AnyInvocable<void() &&> finish) {
  const bool on_poster = std::this_thread::get_id() == polled.poster;
  if (!on_poster) {
    MutexLock lock(&polled.mu);
    if (polled.waiting) {  // the poster is polling for it: it finishes the request itself
      polled.handed = std::move(finish);
      polled.done.store(true, std::memory_order_release);
      return;
    }
  }
  (on_poster ? completions_on_poster_ : completions_on_dispatcher_).fetch_add(1, std::memory_order_relaxed);
  polled.done.store(true, std::memory_order_release);
  std::move(finish)();
}

// Commits (or undoes) a bind's reservation. On the dispatcher when the completion arrived, or on the
// caller's thread when nothing was posted.
void Registry::FinishBind(const ReservedBind& r, absl::StatusOr<uint32_t> rkey, Done<v1::MemoryWindow> done) {
  MwEntry* const w = r.w;
  MrEntry* const mr = r.mr;
  QpEntry* const user_qp = r.user_qp;
  const std::string name = Name("mws", w->id);
  const bool type1 = w->type == fabric::MwType::kType1;
  // Once busy is cleared and mu_ released, DeallocMw may free the window at once: what is needed after
  // that is read before (the PD stays, its lane being held).
  PdEntry* const pd = w->pd;
  std::unique_ptr<fabric::Mr> released;  // whichever bounds region is no longer referenced
  absl::StatusOr<v1::MemoryWindow> out = absl::UnknownError("unset");
  {
    MutexLock lock(&mu_);
    MwEntry::Book& wb = w->book.Get(mu_);
    wb.busy = nullptr;
    std::unique_ptr<fabric::Mr> bounds = std::move(w->binding_bounds_mr);
    const uint64_t bounds_bytes = std::exchange(wb.binding_bounds_bytes, 0);
    const bool rebound_same = wb.mr == mr && (wb.qp == user_qp);
    if (!rkey.ok()) {
      pd->book.Get(mu_).bounds_bytes -= bounds_bytes;  // the bind's bounds region (if it was made) is released below
      // Undo the reservation's links unless they belong to the binding the window keeps.
      if (wb.mr != mr) mr->book.Get(mu_).windows.erase(w->id);
      if (user_qp && wb.qp != user_qp) {
        user_qp->book.Get(mu_).windows.erase(w->id);
        if (!type1) user_qp->book.Get(mu_).type2_windows--;
      }
      if (user_qp && ErrnoOf(rkey.status()) == 0 && rkey.status().code() == absl::StatusCode::kAborted) {
        user_qp->book.Get(mu_).state = fabric::QpState::kError;  // a failed completion moved it to the error state
      }
      if (!user_qp && rkey.status().code() == absl::StatusCode::kAborted) w->pd->bind_qp_state = fabric::QpState::kError;
      released = std::move(bounds);
      out = WithContext(rkey.status(), absl::StrCat("binding ", name));
    } else {
      if (!rebound_same) {
        // A type 1 window bound again: its previous binding's links go (the new ones are in place).
        if (wb.mr && wb.mr != mr) wb.mr->book.Get(mu_).windows.erase(w->id);
        if (wb.qp && wb.qp != user_qp) wb.qp->book.Get(mu_).windows.erase(w->id);
      }
      released = std::exchange(w->bounds_mr, std::move(bounds));
      pd->book.Get(mu_).bounds_bytes -= wb.bounds_bytes;  // the previous binding's region, released below
      wb.bounds_bytes = bounds_bytes;
      wb.mr = mr;
      wb.qp = user_qp;
      wb.rkey = *rkey;
      FillBinding(r, &wb.binding);
      out = ToProto(*w);
    }
  }
  released.reset();  // ibv_dereg_mr of the bounds region no window uses any more, without the lock
  if (out.ok()) {
    RDMAD_LOG_INFO("%s bound to %s [+%" PRIu64 ", %" PRIu64 " bytes], rkey 0x%x", name.c_str(),
                   out->binding().mr().c_str(), r.offset, r.length, out->rkey());
  }
  if (user_qp == nullptr) ReleaseLane(*pd);
  std::move(done)(std::move(out));
}

absl::StatusOr<v1::MemoryWindow> Registry::BindMw(const v1::BindMwRequest& request) {
  return AwaitResult<v1::MemoryWindow>([&](Done<v1::MemoryWindow> d) { BindMwAsync(request, std::move(d)); });
}

void Registry::InvalidateMwAsync(const std::string& name, Done<v1::MemoryWindow> done, const std::string& owner) {
  MwEntry* w = nullptr;
  fabric::Mr* bound_to = nullptr;  // the bounds region, or the MR itself where the device needs none
  bool queued = false;
  bool qp_in_error = false;  // type 2: its QP is known to be in the error state
  QpEntry* bound_qp = nullptr;  // type 2: the QP it is bound on, linked to the window while it is reserved
  absl::StatusOr<v1::MemoryWindow> early = absl::UnknownError("");
  absl::Status refused = [&]() -> absl::Status {
    MutexLock lock(&mu_);
    RDMAD_ASSIGN_OR_RETURN(w, FindMw(name, "name"));
    MwEntry::Book& wb = w->book.Get(mu_);
    RDMAD_RETURN_IF_ERROR(CheckOwner(*w, name, owner));
    if (wb.busy) return InProgress("name", name, wb.busy);
    if (wb.mr == nullptr) {
      early = ToProto(*w);  // already unbound: invalidation is idempotent
      return absl::OkStatus();
    }
    if (w->type == fabric::MwType::kType1 && !TakeLane(*w->pd)) {
      w->pd->book.Get(mu_).lane.push_back(dispatch::Carry([this, name, owner, done = std::move(done)]() mutable {
        InvalidateMwAsync(name, std::move(done), owner);
      }));
      queued = true;
      return absl::OkStatus();
    }
    wb.busy = "InvalidateMw";
    bound_qp = wb.qp;
    bound_to = w->bounds_mr ? w->bounds_mr.get() : wb.mr->mr.get();
    qp_in_error = w->type == fabric::MwType::kType2 && wb.qp != nullptr &&
                  wb.qp->book.Get(mu_).state == fabric::QpState::kError;
    return absl::OkStatus();
  }();
  if (queued) return;
  if (!refused.ok()) return std::move(done)(refused);
  if (early.ok()) return std::move(done)(std::move(early));
  if (qp_in_error) {
    // A LOCAL_INV posted there would only be flushed: revoke by replacing the window instead.
    return FinishInvalidate(w, name, ReplaceWindow(*w), /*replaced=*/true, std::move(done));
  }

  const bool type1 = w->type == fabric::MwType::kType1;
  // Type 2: invalidated on the QP it is bound on (reserved through the window's link to it).
  absl::StatusOr<fabric::Qp*> qp = type1 ? PrepareBindQp(*w->pd) : bound_qp->get();
  auto finish = [this, w, name, type1](absl::Status s, Done<v1::MemoryWindow> done) {
    bool replaced = false;
    if (!type1 && s.code() == absl::StatusCode::kAborted) {
      // The LOCAL_INV's completion failed (a QP in the error state flushes it): the window is still
      // bound, so revoke it by replacing it.
      s = ReplaceWindow(*w);
      replaced = true;
    }
    FinishInvalidate(w, name, std::move(s), replaced, std::move(done));
  };
  if (!qp.ok()) return finish(qp.status(), std::move(done));
  auto shared = std::make_shared<Done<v1::MemoryWindow>>(std::move(done));
  auto polled = std::make_shared<Polled>(WillPoll(options_.completion_poll));
  fabric::Device& device = *w->pd->device;
  const uint64_t key = (*qp)->completion_key();  // read while the post keeps the QP
  absl::Status posted =
      (*qp)->PostInvalidate(*w->mw, *bound_to, dispatch::Carry([this, finish, shared, polled](absl::Status s) mutable {
        Completed(*polled, [finish, shared, s = std::move(s)]() mutable { finish(std::move(s), std::move(*shared)); });
      }));
  if (!posted.ok()) return finish(posted, std::move(*shared));
  PollBriefly(device, key, polled, options_.completion_poll);
}

absl::Status Registry::ReplaceWindow(MwEntry& w) {
  // ibv_dealloc_mw invalidates a window whatever the state of the QP it is bound on; a new one takes the
  // name, unbound. The new window is allocated first, so a failure leaves the old one as it was.
  absl::StatusOr<std::unique_ptr<fabric::Mw>> fresh = w.pd->pd->AllocMw(w.type);
  if (!fresh.ok()) return WithContext(fresh.status(), "replacing the window to revoke it");
  w.mw = std::move(fresh).value();  // ibv_dealloc_mw of the old one
  return absl::OkStatus();
}

void Registry::FinishInvalidate(MwEntry* w, const std::string& name, absl::Status s, bool replaced,
                                Done<v1::MemoryWindow> done) {
  const bool type1 = w->type == fabric::MwType::kType1;
  PdEntry* const pd = w->pd;  // as in FinishBind: the window may be deallocated once mu_ is released
  const uint32_t rkey = replaced && s.ok() ? w->mw->rkey() : 0;  // read before the lock: the new window's
  std::unique_ptr<fabric::Mr> released;
  absl::StatusOr<v1::MemoryWindow> out = absl::UnknownError("unset");
  {
    MutexLock lock(&mu_);
    MwEntry::Book& wb = w->book.Get(mu_);
    wb.busy = nullptr;
    if (s.ok()) {
      QpEntry* const bound_qp = wb.qp;  // before Unbind forgets it
      released = Unbind(*w);
      if (replaced) {
        wb.rkey = rkey;
        if (bound_qp) bound_qp->book.Get(mu_).state = fabric::QpState::kError;
      }
      out = ToProto(*w);
    } else {
      if (s.code() == absl::StatusCode::kAborted) {
        if (type1) w->pd->bind_qp_state = fabric::QpState::kError;
        else if (wb.qp) wb.qp->book.Get(mu_).state = fabric::QpState::kError;
      }
      out = WithContext(s, name);
    }
  }
  released.reset();  // the window no longer references it
  if (out.ok()) {
    RDMAD_LOG_INFO("%s invalidated%s", name.c_str(),
                   replaced ? " (its QP is in the error state: the window was deallocated and replaced)" : "");
  }
  if (type1) ReleaseLane(*pd);
  std::move(done)(std::move(out));
}

absl::StatusOr<v1::MemoryWindow> Registry::InvalidateMw(const std::string& name) {
  return AwaitResult<v1::MemoryWindow>([&](Done<v1::MemoryWindow> d) { InvalidateMwAsync(name, std::move(d)); });
}

absl::Status Registry::DeallocMw(const std::string& name, const std::string& owner) {
  std::unique_ptr<MwEntry> owned;
  std::unique_ptr<fabric::Mr> bounds;
  {
    MutexLock lock(&mu_);
    RDMAD_ASSIGN_OR_RETURN(MwEntry * w, FindMw(name, "name"));
    RDMAD_RETURN_IF_ERROR(CheckOwner(*w, name, owner));
    if (w->book.Get(mu_).busy) return InProgress("name", name, w->book.Get(mu_).busy);
    bounds = Unbind(*w);  // deallocation invalidates a bound window
    Detach(mu_, w->pd, w);
    owned = std::move(mws_[w->id]);
    mws_.erase(w->id);
  }
  owned.reset();   // ibv_dealloc_mw first: the window stops referencing its bounds region
  bounds.reset();  // then ibv_dereg_mr of that region
  return absl::OkStatus();
}

}  // namespace rdmad
