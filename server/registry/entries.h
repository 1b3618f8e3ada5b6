// The registry's entries (private to server/registry/): one per managed object, owning its fabric object.
//
// Three kinds of field, three rules:
//   - identity (id, and the links and attributes fixed when the entry is made: a PD's device and label, a
//     window's PD, type and owner, a QP's PD, options and CM id) is set before the entry is published in
//     the registry's index (under Registry::mu_) and never changed after: any thread that reaches the
//     entry reads it without the lock;
//   - bookkeeping (names, links between entries, cached attributes, reservations) is each entry's `book`,
//     a LockedBy<Book> guarded by Registry::mu_: read and written only as book.Get(mu_), with it held,
//     which clang's -Wthread-safety checks;
//   - a fabric object (the unique_ptr members) is used without the lock, and only by the operation that
//     holds the entry's reservation (`busy`, or a PD's type 1 lane for bind_qp), or at teardown. So
//     nothing reads a fabric object to answer Get/List: what they show is cached in the book, under mu_.
// Parents keep their children (by id, so a cascade releases them in creation order): a PD its regions,
// windows and QPs; a region the windows bound to it; a QP the windows bound through it.
#ifndef RDMAD_SERVER_REGISTRY_ENTRIES_H_
#define RDMAD_SERVER_REGISTRY_ENTRIES_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "rdmad/v1/rdmad.pb.h"
#include "server/common/sync.h"
#include "server/fabric/fabric.h"
#include "server/memory/mapping.h"

namespace rdmad::registry_internal {

struct MrEntry;
struct MwEntry;
struct QpEntry;

// The registry's totals over every PD, kept by Attach/Detach below with each PD's own: what its rdmad-wide
// limits count. The registry's totals_, a LockedBy<Totals> guarded by Registry::mu_ like the entries' books.
struct Totals {
  uint64_t mrs = 0;
  uint64_t user_mws = 0;  // windows but rdmad's own (owner empty)
  uint64_t user_qps = 0;  // QPs but those of rdma_cm ids
};

struct PdEntry {
  // Identity.
  uint64_t id = 0;
  LockedBy<Totals>* totals = nullptr;  // the registry's totals_
  fabric::Device* device = nullptr;
  std::string label;
  // Fabric objects.
  std::unique_ptr<fabric::Pd> pd;
  // rdmad's own loopback-connected QP in this PD, for type 1 binds and invalidations. Used only by the
  // holder of the type 1 lane. Declared after `pd`, so it is destroyed first.
  std::unique_ptr<fabric::Qp> bind_qp;
  fabric::QpState bind_qp_state = fabric::QpState::kReset;  // lane holder only
  struct Book {
    // Type 1 operations of this PD run one at a time (they share bind_qp): the lane's holder, and those
    // waiting for it (each re-validated when its turn comes).
    bool lane_busy = false;
    std::deque<absl::AnyInvocable<void() &&>> lane;

    // Changed only through Attach/Detach below, which keep the running totals a tenant's quotas read.
    std::map<uint64_t, MrEntry*> mrs;
    std::map<uint64_t, MwEntry*> mws;
    std::map<uint64_t, QpEntry*> qps;
    uint64_t mr_bytes = 0;  // sum of the MRs' cached lengths
    // Whole pages pinned by the bounds regions of its windows, bound or being bound (MwEntry's bounds_bytes
    // and binding_bounds_bytes, kept by mws.cc with the regions themselves).
    uint64_t bounds_bytes = 0;
    uint64_t own_mws = 0;   // windows but rdmad's own (owner empty)
    uint64_t user_qps = 0;  // QPs but those of rdma_cm ids (cm_id empty)
    uint32_t pending = 0;        // registrations and re-registrations in flight that target this PD
    const char* busy = nullptr;  // the operation that holds the PD (DeletePd)
  };
  LockedBy<Book> book;  // Registry::mu_
};

struct MrEntry {
  // Identity.
  uint64_t id = 0;
  struct Book {
    PdEntry* pd = nullptr;  // a re-registration may move the region to another PD
    v1::MemorySource source;
    std::shared_ptr<Mapping> mapping;
    // After a native rereg left the MR unusable: every mapping it may still reference, kept until dereg.
    std::vector<std::shared_ptr<Mapping>> retained;
    // Cached attributes of `mr`, copied by CacheAttributes after each (re-)registration.
    uint64_t addr = 0, length = 0;
    uint32_t lkey = 0, rkey = 0, access = 0;
    bool unusable = false;
    std::string unusable_reason;
    // Restart recovery could not bring it back (its memory died with the old process, its file is gone):
    // no `mr`, no mapping; also `unusable`, so only DeregisterMr is accepted. Shown as MR_LOST.
    bool lost = false;
    uint32_t generation = 0;
    std::map<uint64_t, MwEntry*> windows;  // bound to it, or being bound
    const char* busy = nullptr;            // ReregisterMr, DeregisterMr, DeletePd
  };
  LockedBy<Book> book;  // Registry::mu_
  std::unique_ptr<fabric::Mr> mr;  // declared after the book's mappings: deregistered before they are unmapped
  // Copies `mr`'s attributes into the book: by the holder of the reservation (or the maker of the entry),
  // which may read `mr`, with `mu` (Registry::mu_) held.
  void CacheAttributes(const Mutex& mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    Book& b = book.Get(mu);
    b.addr = mr->addr();
    b.length = mr->length();
    b.lkey = mr->lkey();
    b.rkey = mr->rkey();
    b.access = mr->access();
  }
};

struct QpEntry {
  // Identity.
  uint64_t id = 0;
  PdEntry* pd = nullptr;
  fabric::QpOptions options;
  // Its fabric object.
  std::unique_ptr<fabric::Qp> qp;  // a QP created through the API: owned here
  // A QP that belongs to an rdma_cm id (created by rdma_create_qp, destroyed with the id): borrowed; the
  // CM layer removes the entry (Registry::ReleaseCmQp) before it destroys the id.
  fabric::Qp* borrowed = nullptr;
  std::string cm_id;  // "cmids/4" for a borrowed QP
  fabric::Qp* get() const { return qp ? qp.get() : borrowed; }
  struct Book {
    fabric::QpEndpoint local;
    // As of the last query of the device (GetQp, ListQps), rdmad's last operation on the QP, or the last
    // completion on it.
    fabric::QpState state = fabric::QpState::kInit;
    // GetQp/ListQps querying the device without mu_: the QP is not destroyed while any is (deletion waits).
    int readers = 0;
    bool has_remote = false;
    fabric::QpEndpoint remote;
    std::map<uint64_t, MwEntry*> windows;  // bound (or being bound) through it, type 1 and type 2
    uint32_t type2_windows = 0;            // of those, type 2: they work only on this QP
    const char* busy = nullptr;            // ConnectQp, DeleteQp, DeletePd
  };
  LockedBy<Book> book;  // Registry::mu_
};

struct MwEntry {
  // Identity.
  uint64_t id = 0;
  PdEntry* pd = nullptr;
  fabric::MwType type = fabric::MwType::kType1;
  std::string owner;  // "grants" for the grant pool's windows: only that owner may use them
  // Fabric objects.
  // While bound, on a device that needs it (UsesBoundsRegion, registry.h): an MR registered over exactly
  // the window's range (access: the parent MR's LOCAL_WRITE and MW_BIND, no remote access of its own),
  // which the window is bound to instead of the parent MR. Some devices check a window access against the
  // bounds of the window's MR only (rxe in Linux 6.1: rxe_resp.c check_rkey calls mr_check_range(mw->mr,
  // ...)); this makes the window's own range the enforced one there. Null where the device enforces window
  // bounds itself (start-up probe, server/verbs/mw_probe.h): the window is bound to the parent MR.
  // Declared before `mw`, so the window is deallocated before it is deregistered (ibv_dereg_mr fails while
  // a window is bound). Moved in and out under Registry::mu_, with the binding in the book.
  std::unique_ptr<fabric::Mr> bounds_mr;
  // The bounds region of a bind in flight, held here (not by the completion callback) so that teardown
  // releases it in order even if the completion never arrives. Owned by the bind's reservation.
  std::unique_ptr<fabric::Mr> binding_bounds_mr;
  std::unique_ptr<fabric::Mw> mw;
  struct Book {
    uint32_t rkey = 0;  // published only after a bind's completion succeeded
    // The whole pages each of the two bounds regions pins, counted in the PD's bounds_bytes from the bind's
    // reservation (before the region is registered) until the region is released.
    uint64_t bounds_bytes = 0, binding_bounds_bytes = 0;
    MrEntry* mr = nullptr;  // set while bound
    QpEntry* qp = nullptr;  // the user QP the bind was posted on (type 2: the only QP it works on)
    v1::MwBinding binding;  // valid while mr != nullptr
    const char* busy = nullptr;  // BindMw, InvalidateMw, DeallocMw, DeletePd
  };
  LockedBy<Book> book;  // Registry::mu_
};

// A PD's members come and go only through these (with `mu`, Registry::mu_, held), so PdEntry's totals are
// always those of its maps: Registry::UsageOfPd reads a tenant's use per PD in O(1), never by listing.
// An MR's length may change only while it is detached (a re-registration detaches, caches, re-attaches).
inline void Attach(const Mutex& mu, PdEntry* pd, MrEntry* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
  PdEntry::Book& b = pd->book.Get(mu);
  if (b.mrs.emplace(e->id, e).second) {
    b.mr_bytes += e->book.Get(mu).length;
    pd->totals->Get(mu).mrs++;
  }
}
inline void Detach(const Mutex& mu, PdEntry* pd, MrEntry* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
  PdEntry::Book& b = pd->book.Get(mu);
  if (b.mrs.erase(e->id)) {
    b.mr_bytes -= e->book.Get(mu).length;
    pd->totals->Get(mu).mrs--;
  }
}
inline void Attach(const Mutex& mu, PdEntry* pd, MwEntry* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
  PdEntry::Book& b = pd->book.Get(mu);
  if (b.mws.emplace(e->id, e).second && e->owner.empty()) {
    b.own_mws++;
    pd->totals->Get(mu).user_mws++;
  }
}
inline void Detach(const Mutex& mu, PdEntry* pd, MwEntry* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
  PdEntry::Book& b = pd->book.Get(mu);
  if (b.mws.erase(e->id) && e->owner.empty()) {
    b.own_mws--;
    pd->totals->Get(mu).user_mws--;
  }
}
inline void Attach(const Mutex& mu, PdEntry* pd, QpEntry* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
  PdEntry::Book& b = pd->book.Get(mu);
  if (b.qps.emplace(e->id, e).second && e->cm_id.empty()) {
    b.user_qps++;
    pd->totals->Get(mu).user_qps++;
  }
}
inline void Detach(const Mutex& mu, PdEntry* pd, QpEntry* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
  PdEntry::Book& b = pd->book.Get(mu);
  if (b.qps.erase(e->id) && e->cm_id.empty()) {
    b.user_qps--;
    pd->totals->Get(mu).user_qps--;
  }
}

}  // namespace rdmad::registry_internal

#endif  // RDMAD_SERVER_REGISTRY_ENTRIES_H_
