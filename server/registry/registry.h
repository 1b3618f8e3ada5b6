// Registry: the one owner of every fabric object rdmad manages, by name, and of the threads that serve
// them.
//
// Names are "pds/N", "mrs/N", "mws/N", "qps/N" with per-kind counters that never reuse a number while
// rdmad runs, and "devices/<ibv device name>". Every rule of the verbs man pages that rdmad promises is
// enforced here, before the fabric is called (the rules themselves are pure functions: rules.h):
//   - ibv_reg_mr(3): REMOTE_WRITE or REMOTE_ATOMIC requires LOCAL_WRITE;
//   - ibv_dereg_mr(3) NOTES: deregistration is refused (FAILED_PRECONDITION, EBUSY) while a window is bound;
//   - ibv_rereg_mr(3): flags and their arguments; the outcome of each error code (which MR survives);
//     the emulated path (register the new, then deregister the old) where the device has no native rereg;
//   - ibv_bind_mw(3): window access flags, REMOTE_WRITE/ATOMIC need the MR's LOCAL_WRITE, the MR needs
//     MW_BIND, the rkey is published only after the bind completion was polled successfully.
//
// Threads and locks (docs/dev/architecture.md):
//   - mu_ guards the name index and every entry's bookkeeping (entries.h: each entry's `book`, read as
//     book.Get(mu_), which clang's -Wthread-safety checks as it does the ABSL_GUARDED_BY members). It is
//     held only for short bookkeeping and never across a verbs call: an operation reserves what it needs
//     under mu_ (marks the entries busy, counts a pending registration), calls the fabric without it, and
//     commits under mu_.
//     A second operation on a reserved object gets ABORTED ("... in progress; retry"); removal of a parent
//     with a reserved child is refused the same way. GetQp/ListQps query a QP's state without mu_, the
//     entry pinned by a reader count that deletion waits for (AwaitNoReaders).
//   - One dispatcher (dispatch::EventLoop "dev-NAME") per device drains its completion channel: bind and
//     invalidate completions run their commit there, unless the thread that posted the work still polls
//     for it (Options::completion_poll): then the commit is handed back to that thread (Polled), a leaf
//     mutex held only for the hand-over. No gRPC thread waits for a completion beyond that poll.
//   - A worker pool maps and pins memory (RegisterMr, ReregisterMr, the bounds regions of binds), then
//     commits; a pin worker that posted a bind polls for its completion (Options::pin_worker_poll).
//   - The *Async methods call `done` exactly once, on whichever thread finished the work (the caller's, a
//     dispatcher, a worker), never with mu_ held. The plain forms wait for it: for tests and tools only,
//     never on a dispatcher or a worker.
// Ownership and release order: entries own their fabric objects; parents outlive children by rule (a PD
// cannot be deleted while it holds anything, unless cascaded, and a cascade releases children first). The
// destructor stops the workers and dispatchers, then releases windows, regions, QPs, PDs, and finally the
// fabric (device contexts).
#ifndef RDMAD_SERVER_REGISTRY_REGISTRY_H_
#define RDMAD_SERVER_REGISTRY_REGISTRY_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/common/sync.h"
#include "rdmad/v1/rdmad.pb.h"
#include "server/memory/file_access.h"
#include "server/dispatch/event_loop.h"
#include "server/dispatch/worker_pool.h"
#include "server/fabric/fabric.h"
#include "server/memory/descriptors.h"
#include "server/memory/mapping.h"
#include "server/registry/entries.h"
#include "server/registry/rules.h"
#include "server/memory/memlock.h"
#include "server/state/names.h"
#include "server/state/store.h"

namespace rdmad {

template <typename T>
using Done = absl::AnyInvocable<void(absl::StatusOr<T>) &&>;

// Whether a window is bound to a private bounds region over exactly its range (entries.h MwEntry::bounds_mr)
// instead of to its MR directly: kAuto where the device's start-up probe did not see it enforce window
// bounds (DeviceInfo::mw_bounds_enforced), kAlways everywhere, kNever nowhere (unsafe on a device that does
// not enforce them: a window would expose its whole MR). Config key mw_bounds_region (docs/config.md).
enum class MwBoundsRegion { kAuto, kAlways, kNever };
bool UsesBoundsRegion(MwBoundsRegion mode, const fabric::DeviceInfo& info);

class Registry {
 public:
  struct Options {
    // A shared file may be registered only if its real path lies under one of these.
    std::vector<std::string> allowed_file_roots = {"/dev/shm", "/dev/hugepages", "/run/rdmad"};
    // Files on other filesystems than tmpfs, hugetlbfs and ramfs may be registered too (config
    // allow_disk_files): a region over one pins its page cache for as long as it lives. Default: refused,
    // FAILED_PRECONDITION on "source.file.path" naming the filesystem.
    bool allow_disk_files = false;
    // Descriptors clients passed over the descriptor socket (MemorySource.fd); nullptr: none are
    // accepted. Must outlive the registry.
    DescriptorStore* descriptors = nullptr;
    // Largest MR in bytes; 0: no limit beyond the device's max_mr_size and physical memory.
    uint64_t max_mr_bytes = 0;
    // Threads that map and pin memory.
    int workers = 2;
    // The crash-safe state store (docs/operations.md, "Restart recovery"); not owned, may be null (nothing
    // persisted, names counted from 1). With it: names are never reused across restarts, PDs and MRs are
    // recorded at each commit: submitted to the store's journal under mu_ (a queue push, after the fabric
    // call succeeded), and the operation answers once its record is durable, waiting without mu_.
    state::Store* state = nullptr;
    // rdmad's RLIMIT_MEMLOCK (server/memory/memlock.h): a registration that would pass it is refused before
    // anything is pinned (RESOURCE_EXHAUSTED on "source"). Default: no limit.
    Memlock memlock;
    MwBoundsRegion mw_bounds_region = MwBoundsRegion::kAuto;
    // Anonymous regions of at least kPrefaultMinBytes are faulted in by this many threads before
    // ibv_reg_mr pins them (server/memory/prefault.h); below 2: not at all. rdmad: PrefaultThreads().
    int prefault_threads = 0;
    // rdmad-wide limits (config "limits"; 0: none) on what callers make: PDs, regions, their own windows
    // (not grants' windows) and QPs made by CreateQp (not rdma_cm ids'). Past one: RESOURCE_EXHAUSTED naming it
    // (OverLimit), checked before the fabric is called. Recovered objects count but are never refused.
    struct Limits {
      uint64_t pds = 0, mrs = 0, mws = 0, qps = 0;
    } limits;
    // After posting a bind or an invalidation, the posting thread polls for its completion this long and,
    // if it comes, finishes the request itself (the answer leaves from that thread, without waking the
    // device's dispatcher); past it the dispatcher finishes it. Zero: always the dispatcher.
    absl::Duration completion_poll = absl::Microseconds(300);
    // A pin worker that has just pinned a bind's bounds region, on a QP that carries only rdmad's local
    // work, polls for the bind's completion until it comes, up to this long (never less than four times
    // completion_poll; none if completion_poll is zero): a miss would cost the RPC a second hand-off.
    absl::Duration pin_worker_poll = absl::Milliseconds(50);
  };

  // Binds and invalidations finished on the thread that posted them (Options::completion_poll) and on the
  // device's dispatcher (a thread hand-off), since start.
  struct CompletionCounts {
    uint64_t on_poster = 0, on_dispatcher = 0;
  };
  CompletionCounts completion_counts() const {
    return {completions_on_poster_.load(std::memory_order_relaxed),
            completions_on_dispatcher_.load(std::memory_order_relaxed)};
  }

  Registry(std::unique_ptr<fabric::Fabric> fabric, Options options);
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Both read the NICs' counters (hw_counters) at the call, without the lock; `with_counters` false leaves
  // them out, for internal callers that need only the capabilities.
  std::vector<v1::Device> ListDevices() const;
  absl::StatusOr<v1::Device> GetDevice(const std::string& name, bool with_counters = true) const;

  // `owner`: the tenant it is created for, recorded in the state store (restored with it after a restart).
  absl::StatusOr<v1::ProtectionDomain> CreatePd(const v1::CreatePdRequest& request, const std::string& owner = "");
  absl::StatusOr<v1::ProtectionDomain> GetPd(const std::string& name) const;
  // The lists go in number order. `after`, `limit` (the List calls' pages): only those numbered past `after`,
  // at most `limit` of them (0: all).
  std::vector<v1::ProtectionDomain> ListPds(uint64_t after = 0, size_t limit = 0) const;
  // OK if the PD exists; otherwise the lookup's error, naming `field`.
  absl::Status CheckPd(const std::string& name, const std::string& field) const;
  absl::StatusOr<v1::DeletePdResponse> DeletePd(const v1::DeletePdRequest& request);
  // DeletePd's refusals that revoking the PD's grants cannot lift (no such PD, busy, not a cascade and
  // holding regions or its own windows or QPs), without acting: the service calls it before it revokes
  // grants (revoke_grants).
  absl::Status CheckDeletePd(const v1::DeletePdRequest& request) const;

  // `files`: whose rights a file source is registered with (server/memory/file_access.h, docs/security.md). The
  // default is rdmad's own (allowed_file_roots only), for single-tenant mode and internal callers; an RPC
  // passes its Caller's `files`. A re-registration with a new source, or new access flags over a file, is
  // checked again (new flags against the owner and mode the file had when it was opened).
  void RegisterMrAsync(const v1::RegisterMrRequest& request, Done<v1::MemoryRegion> done,
                       const FileAccess& files = {});
  absl::StatusOr<v1::MemoryRegion> RegisterMr(const v1::RegisterMrRequest& request,
                                              const FileAccess& files = {});
  absl::StatusOr<v1::MemoryRegion> GetMr(const std::string& name) const;
  absl::StatusOr<std::vector<v1::MemoryRegion>> ListMrs(const v1::ListMrsRequest& request, uint64_t after = 0,
                                                        size_t limit = 0) const;
  // ReregisterMr's checks of the request alone, without acting: what ReregisterMrAsync would refuse at
  // once (name, flags, PD, access, an unusable or busy region), but bound windows, which revoking the grants
  // on the region removes. The service calls it before it revokes grants (revoke_grants), so that a bad
  // request costs no grant. Failures of the source itself (a file gone, memlock) still come after.
  absl::Status CheckReregister(const v1::ReregisterMrRequest& request) const;
  void ReregisterMrAsync(const v1::ReregisterMrRequest& request, Done<v1::ReregisterMrResponse> done,
                         const FileAccess& files = {});
  absl::StatusOr<v1::ReregisterMrResponse> ReregisterMr(const v1::ReregisterMrRequest& request,
                                                        const FileAccess& files = {});
  // DeregisterMr's checks alone, without acting, but for rdmad's own grant windows, which revoking the
  // grants on the region removes: the service calls it before it revokes grants (revoke_grants).
  absl::Status CheckDeregister(const std::string& name) const;
  absl::Status DeregisterMr(const std::string& name);

  absl::StatusOr<v1::QueuePair> CreateQp(const v1::CreateQpRequest& request);
  absl::StatusOr<v1::QueuePair> GetQp(const std::string& name) const;
  std::vector<v1::QueuePair> ListQps(uint64_t after = 0, size_t limit = 0) const;
  // What a tenant's quotas count in one PD, from running totals (O(log n), no listing, no device query):
  // its MRs, the bytes it pins (mr_bytes: its MRs' lengths, and the whole pages of its windows' bounds
  // regions, rdmad's grant windows' included), its windows but rdmad's own (grant pools), its QPs but rdma_cm
  // ids'.
  struct PdUsage {
    uint64_t mrs = 0, mr_bytes = 0, mws = 0, qps = 0;
  };
  // NOT_FOUND on "pd" if there is no such PD.
  absl::StatusOr<PdUsage> UsageOfPd(const std::string& pd) const;
  // The PD a PD, region, window or QP lives in ("pds/3" for "pds/3"), from the bookkeeping alone: the
  // lookup's error (INVALID_ARGUMENT, NOT_FOUND on "name") otherwise. Tenancy asks it on every call.
  absl::StatusOr<std::string> PdOf(const std::string& name) const;
  // The tenant each PD was created for (CreatePd's `owner`, restored by Recover; empty: admins'), and the
  // reverse, kept from the PD's creation to its deletion. The one record of that fact: the tenancy gate asks
  // it on every call and from its watch filters, under an event hub's lock, so it has a leaf lock of its own.
  std::string TenantOfPd(const std::string& pd) const;
  std::vector<std::string> PdsOfTenant(const std::string& tenant) const;
  absl::StatusOr<v1::QueuePair> ConnectQp(const v1::ConnectQpRequest& request);
  absl::Status DeleteQp(const std::string& name);

  // QPs that belong to rdma_cm ids (server/cm/): created by the CM layer on a PD rdmad manages, shown as
  // QueuePairs (with cm_id set) on which windows can be bound, and removed before the id is destroyed.
  // `create` runs without mu_, with the PD reserved, and returns the QP the id owns.
  using CmQpFactory = std::function<absl::StatusOr<fabric::Qp*>(fabric::Pd& pd, fabric::Device* device)>;
  absl::StatusOr<v1::QueuePair> AdoptCmQp(const std::string& pd, const std::string& cm_id,
                                          const CmQpFactory& create);
  // rdma_cm moved the QP (ESTABLISHED: RTS; DISCONNECTED: ERROR). `remote`, `local` where known (rdma_cm
  // picks the PSN on the way to RTS).
  void SetCmQpState(const std::string& qp, fabric::QpState state, const fabric::QpEndpoint* remote,
                    const fabric::QpEndpoint* local);
  // Refused while type 2 windows are bound on it, unless `force` (shutdown): then they are deallocated.
  // Errors name `field` (the caller's request field).
  absl::Status ReleaseCmQp(const std::string& qp, bool force, const std::string& field);

  // Windows with an `owner` (rdmad's own, e.g. "grants") are bound, invalidated and deallocated only by
  // calls that pass the same `owner`; any other caller gets FAILED_PRECONDITION on "name".
  absl::StatusOr<v1::MemoryWindow> AllocMw(const v1::AllocMwRequest& request, const std::string& owner = "");
  absl::StatusOr<v1::MemoryWindow> GetMw(const std::string& name) const;
  absl::StatusOr<std::vector<v1::MemoryWindow>> ListMws(const v1::ListMwsRequest& request, uint64_t after = 0,
                                                        size_t limit = 0) const;
  // A SEND that carries a type 2 window's new key, posted with its bind on the bind's QP and fenced behind
  // it (fabric::SendAfterBind): it leaves only once the bind took effect, and never if the bind failed.
  struct KeyMessage {
    // The SEND's bytes for the window's new rkey and the address a peer reads it at (0 for a zero-based
    // window). Called once, at post time, with no lock of the registry or the fabric held; empty: no SEND.
    absl::AnyInvocable<std::string(uint32_t rkey, uint64_t remote_addr) &&> message;
    // The SEND's completion, or why it was not posted; called only if `message` was.
    fabric::WorkDone done;
  };
  // A bounds region pinned ahead of its bind (PinBoundsAsync): a grant's, pinned while its client's
  // connection is being accepted, so that the thread that sees the connection established posts the bind
  // itself, with no pin there. From the pin until it is bound or destroyed, its pages count as pinned bytes
  // of its PD and the PD cannot be deleted (DeletePd answers "retry"). Destroying it deregisters it: never
  // with a lock of the registry's held, nor one a registry call may wait for.
  class PinnedBounds {
   public:
    ~PinnedBounds();
    PinnedBounds(const PinnedBounds&) = delete;
    PinnedBounds& operator=(const PinnedBounds&) = delete;

   private:
    friend class Registry;
    PinnedBounds() = default;
    Registry* registry_ = nullptr;  // null once bound (or if nothing is counted)
    registry_internal::PdEntry* pd_ = nullptr;
    uint64_t mr_id_ = 0;
    uint32_t generation_ = 0;  // the region's, at the pin: a re-registration since makes it unusable
    uint64_t addr_ = 0, length_ = 0, bytes_ = 0;
    uint32_t access_ = 0;
    std::unique_ptr<fabric::Mr> region_;
  };
  // `then` (may be null): a KeyMessage, for a type 2 window bound on `request.qp` only (INVALID_ARGUMENT
  // on "qp" otherwise). `pinned` (may be null): the bounds region pinned ahead for exactly this bind (the
  // same region, generation and range); the bind then pins nothing and is posted on this thread. One that
  // does not match is released, and the bind pins its own on a pin worker.
  void BindMwAsync(const v1::BindMwRequest& request, Done<v1::MemoryWindow> done, const std::string& owner = "",
                   std::unique_ptr<KeyMessage> then = nullptr, std::unique_ptr<PinnedBounds> pinned = nullptr);
  absl::StatusOr<v1::MemoryWindow> BindMw(const v1::BindMwRequest& request);
  // A grant's bind (server/grants/), given the objects the grant layer resolved once, by number: its window
  // (taken from its pool, resolved when the pool got it), its region (at issue) and its connection's QP
  // (when the connection was established). Nothing is parsed and no API request is built or checked
  // again: the objects are found in the index by number under mu_ (one may have gone since: the bind then
  // fails as for a name that does not exist), and the man pages' rules are checked on their state now, as
  // BindMwAsync checks them. The window must be the grant layer's (owner "grants"). `qp` 0: a type 1
  // window, bound through its PD's bind QP. `then` and `pinned` as for BindMwAsync.
  struct GrantBind {
    uint64_t window = 0, mr = 0, qp = 0;  // mws/N, mrs/N, qps/N
    uint64_t offset = 0, length = 0;      // within the region
    uint32_t access = 0;                  // fabric::kRemoteRead | kRemoteWrite
  };
  struct Key {
    uint32_t rkey = 0;
    uint64_t remote_addr = 0;  // the address a peer reads the key's first byte at
  };
  void BindGrantAsync(const GrantBind& bind, Done<Key> done, std::unique_ptr<KeyMessage> then = nullptr,
                      std::unique_ptr<PinnedBounds> pinned = nullptr);
  // A region's own key and the address of its byte at `offset` (a grant that hands out the region's key).
  absl::StatusOr<Key> RegionKey(uint64_t mr, uint64_t offset) const;
  // The bytes a bind of `request` (its mr, offset and length) would pin for its bounds region (whole pages;
  // the tenant's pinned_bytes quota counts them): 0 where the region's device needs none, or where the
  // request names no region, or a range outside it (BindMw refuses those itself). The second: the same for
  // region number `mr`.
  uint64_t BoundsRegionBytes(const v1::BindMwRequest& request) const;
  uint64_t BoundsRegionBytes(uint64_t mr, uint64_t offset, uint64_t length) const;
  // Pins, on a pin worker, the bounds region a type 2 bind over region number `mr` [offset, +length) will
  // need (checked against RLIMIT_MEMLOCK first, as a bind's is), and gives it to `done` there. Where the
  // region's device needs none, `done` gets nullptr at once, on this thread. Errors name the fields of a
  // BindMwRequest.
  void PinBoundsAsync(uint64_t mr, uint64_t offset, uint64_t length, Done<std::unique_ptr<PinnedBounds>> done);
  void InvalidateMwAsync(const std::string& name, Done<v1::MemoryWindow> done, const std::string& owner = "");
  absl::StatusOr<v1::MemoryWindow> InvalidateMw(const std::string& name);
  absl::Status DeallocMw(const std::string& name, const std::string& owner = "");

  // The kernel's resource tracking (kernel.cc; server/fabric/restrack.h). KernelJoinInput: the registry's
  // side of the join for one device: its PDs, regions (not MR_LOST ones) and QPs (rdma_cm ids' included),
  // by number, from the bookkeeping. rdmad's private objects (bounds regions, the PDs' bind QPs) are left
  // out: the join rules that could mistake one for a user's object also count the kernel's side, which has
  // them all. KernelObjects: the device's dump, asked now, without any lock (errors name `field`). Take the
  // join input first and the dump second: an object made in between is then only in the dump, where it
  // can make a match ambiguous (unknown) but never wrong.
  absl::StatusOr<fabric::restrack::Ours> KernelJoinInput(const std::string& device, const std::string& field) const;
  absl::StatusOr<fabric::restrack::DeviceDump> KernelObjects(const std::string& device,
                                                             const std::string& field) const;

  // Restart recovery (recover.cc). At start-up, before serving and before any other call: re-creates the
  // PDs and memory regions the state store holds, under their names, with new keys. A region whose memory
  // cannot come back (anonymous memory died with the old process; a file that vanished or no longer
  // checks out; a device that is gone) stays in the registry as MR_LOST with the reason: only DeregisterMr
  // is accepted on it. A PD whose device is gone is not re-created (logged; its record stays for a later
  // start). Everything else (windows, QPs) is gone; its names are never handed out again.
  //
  // A file region is mapped again only with the rights its registering caller has now: the rights recorded
  // at registration, passed through `rights` with its PD's tenant (rdmad: the tenant's current file roots,
  // memory/mapping.h RightsAtRecovery; unset: as recorded), checked on the inode opened as a live
  // registration checks them; the file is opened at the real path recorded then, with no symlink on the
  // way (each component O_NOFOLLOW), and must be the same inode. A row without that record (written by an
  // older rdmad) maps no file: the strictest case. Each refusal makes the region MR_LOST with the reason.
  struct Recovered {
    std::map<std::string, std::string> owners;  // "pds/3" -> its tenant (empty: admins')
    std::vector<std::string> pds, mrs;          // re-created
    std::vector<std::string> lost;              // "mrs/4: why", "pds/2: why"
  };
  using RecoveryRights = std::function<absl::StatusOr<FileAccess>(const std::string& tenant,
                                                                         const FileAccess& recorded)>;
  absl::StatusOr<Recovered> Recover(const state::Snapshot& snapshot, const RecoveryRights& rights = nullptr);

 private:
  using PdEntry = registry_internal::PdEntry;
  using MrEntry = registry_internal::MrEntry;
  using MwEntry = registry_internal::MwEntry;
  using QpEntry = registry_internal::QpEntry;
  struct ReregPlan;
  struct ReregWork;

  // Lookups; `field` names the request field in errors.
  absl::StatusOr<fabric::Device*> FindDevice(const std::string& name, const std::string& field) const;
  absl::StatusOr<PdEntry*> FindPd(const std::string& name, const std::string& field) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<MrEntry*> FindMr(const std::string& name, const std::string& field) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<QpEntry*> FindQp(const std::string& name, const std::string& field) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<MwEntry*> FindMw(const std::string& name, const std::string& field) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // By number (a reference resolved once): NOT_FOUND on `field` naming the object if it is gone.
  absl::StatusOr<MrEntry*> FindMrId(uint64_t id, const std::string& field) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<QpEntry*> FindQpId(uint64_t id, const std::string& field) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<MwEntry*> FindMwId(uint64_t id, const std::string& field) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // OK if one more `limit` object fits beside `in_use` live and `creating` under way (limit 0: no limit).
  static absl::Status WithinLimit(const char* limit, uint64_t max, uint64_t in_use, uint64_t creating);

  uint64_t MaxMrBytes(const fabric::Device& device) const;
  // Maps a registration's memory; a file with the caller's `files` rights checked for `access` (fabric bits);
  // a descriptor claimed for `files.principal` (spent, unless `keep_descriptor`: a validation).
  absl::StatusOr<std::unique_ptr<Mapping>> MapSource(const v1::MemorySource& source, const fabric::Device& device,
                                                     const std::string& field, const FileAccess& files,
                                                     uint32_t access, bool keep_descriptor = false) const;

  // Restart recovery (recover.cc): a recorded region's memory, mapped again only as its registering caller
  // could map it now (see Recover); the reason otherwise.
  absl::StatusOr<std::unique_ptr<Mapping>> MapRecorded(const state::MrRow& row, const fabric::Device& device,
                                                       const std::string& tenant,
                                                       const RecoveryRights& rights) const;

  // Type 1 lane of a PD (entries.h). TakeLane: true if the caller now holds it; if not, the caller queues
  // its retry on pd.lane. ReleaseLane runs the next waiter, if any (call without mu_).
  bool TakeLane(PdEntry& pd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseLane(PdEntry& pd) ABSL_LOCKS_EXCLUDED(mu_);
  // Lane holder, without mu_: the PD's bind QP, created and (re)connected on demand.
  absl::StatusOr<fabric::Qp*> PrepareBindQp(PdEntry& pd);
  // Forgets a window's binding (links and cached binding); returns its bounds MR to release without mu_.
  std::unique_ptr<fabric::Mr> Unbind(MwEntry& mw) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // A bind's request once its window and region are found, whichever way they were named (BindMwAsync: an
  // API request's names; BindGrantAsync: a grant's numbers). `find_qp` finds the QP it names, if any
  // (`qp_named`); `check_access` applies ibv_bind_mw(3)'s rules with the request's access. Both are called
  // under mu_, in the order BindMw's errors have always come in. (FunctionRefs: the callables must outlive
  // the BindAsk, so name them; a lambda written in the initializer would be gone when it is called.)
  struct BindAsk {
    uint64_t offset = 0, length = 0;
    bool zero_based = false, validate_only = false;
    bool qp_named = false;
    absl::FunctionRef<absl::StatusOr<QpEntry*>()> find_qp;
    absl::FunctionRef<absl::StatusOr<uint32_t>(const BindCheck&)> check_access;
    // What the window's binding shows as its access: the API request's list as given (null: the bits').
    const google::protobuf::RepeatedField<int>* access_list = nullptr;
  };
  // A bind reserved under mu_, to be posted by the reservation's holder: on the caller's thread, or on a
  // pin worker when the bind pins a bounds region.
  struct ReservedBind {
    MwEntry* w = nullptr;
    MrEntry* mr = nullptr;
    QpEntry* user_qp = nullptr;  // null: the PD's bind QP (type 1)
    uint64_t offset = 0, length = 0;
    bool zero_based = false;
    uint64_t addr = 0;        // the window's first byte
    uint32_t access = 0;      // the window's access bits (kZeroBased included)
    google::protobuf::RepeatedField<int> access_list;  // as its binding shows them
    uint32_t mr_access = 0;   // the region's
    fabric::Mr* parent = nullptr;  // the region's registration (the reservation keeps it)
    bool bounds_region = false;
    std::unique_ptr<KeyMessage> then;
    Done<v1::MemoryWindow> done;
    std::unique_ptr<fabric::Mr> premade;  // the bounds region pinned ahead (PinnedBounds), if any
  };
  // Under mu_: the checks of a bind whose window and region were found, then its reservation in `out`
  // (whose then/done the caller fills). `validated` gets the window as a validate_only bind would leave it
  // (nothing reserved); `*lane` is false if a type 1 bind must wait for its PD's lane (nothing reserved:
  // the caller queues its retry on the lane). `pinned` is moved into the reservation if it is this bind's.
  absl::Status ReserveBindLocked(MwEntry* w, MrEntry* mr, const BindAsk& ask, bool has_then,
                                 std::unique_ptr<PinnedBounds>& pinned, ReservedBind* out,
                                 std::optional<v1::MemoryWindow>* validated, bool* lane)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Without mu_: answers a validate_only bind, or posts a reservation (here, or on a pin worker).
  void StartReservedBind(std::shared_ptr<ReservedBind> work, std::optional<v1::MemoryWindow> validated);
  void PostReservedBind(const std::shared_ptr<ReservedBind>& work) ABSL_LOCKS_EXCLUDED(mu_);
  // Commits (or undoes) a reservation.
  void FinishBind(const ReservedBind& bind, absl::StatusOr<uint32_t> rkey, Done<v1::MemoryWindow> done);
  // The binding a reservation gives its window.
  static void FillBinding(const ReservedBind& bind, v1::MwBinding* out);
  // Invalidation's commit. `replaced`: the window was revoked by ReplaceWindow (its QP in error).
  void FinishInvalidate(MwEntry* w, const std::string& name, absl::Status s, bool replaced,
                        Done<v1::MemoryWindow> done);
  // Reservation holder, without mu_: revokes a window by deallocating it, a new one taking its place.
  absl::Status ReplaceWindow(MwEntry& w);
  absl::StatusOr<v1::ReregisterMrResponse> ReregWorkAndCommit(MrEntry* e, ReregPlan plan);
  // The request's checks and the plan they give (no side effect); bound windows refused unless allowed.
  absl::Status PlanReregLocked(const v1::ReregisterMrRequest& request, bool windows_allowed, MrEntry** e,
                               ReregPlan* plan) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // GetQp/ListQps: the device's view of each QP's state, queried without mu_; the entries come pinned
  // (readers++ under mu_) and leave unpinned.
  std::vector<v1::QueuePair> QueryAndConvert(const std::vector<QpEntry*>& pinned) const ABSL_LOCKS_EXCLUDED(mu_);
  // Waits (releasing mu_) until no GetQp/ListQps is querying the entry's QP. Call before destroying it.
  void AwaitNoReaders(QpEntry& e) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The state store's record of a region (or its removal, or a PD's), submitted at its commit under mu_ (no
  // I/O: the store's journal writes it); the caller waits for the ticket after releasing mu_ (a done
  // ticket without a store). A failure is logged by the journal.
  state::Ticket PersistMr(const MrEntry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  state::Ticket Unpersist(const char* kind, uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::ProtectionDomain ToProto(const PdEntry& e) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::MemoryRegion ToProto(const MrEntry& e) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::QueuePair ToProto(const QpEntry& e) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::MemoryWindow ToProto(const MwEntry& e) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Fabric first: destroyed last, after every entry (members are destroyed in reverse order).
  std::unique_ptr<fabric::Fabric> fabric_;
  const Options options_;

  // TenantOfPd's record: a leaf lock, taken under mu_ (creation, deletion, recovery) and under event hubs'.
  void OwnPdLocked(const std::string& pd, const std::string& tenant) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ForgetPdLocked(const std::string& pd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A bind's or an invalidation's completion `key` (Qp::completion_key on `device`), polled on this thread
  // after its post (Options::completion_poll). Its completion callback calls Completed with the work that
  // finishes the request: run there, unless the poster is still polling on another thread, in which case
  // it is handed back to the poster, which runs it as soon as its poll sees `done`. Another thread may take
  // the completion off the queue meanwhile (the device's dispatcher, woken by the CQ event, polls the same
  // CQ): the request then still finishes on the thread that was waiting for it, with no hand-off.
  // Made before the post, with `budget`: whether this thread will poll (WillPoll) is decided then, so that
  // a completion that comes before the poll starts is handed back too.
  struct Polled {
    explicit Polled(bool will_poll) : waiting(will_poll) {}
    std::atomic<bool> done{false};
    const std::thread::id poster = std::this_thread::get_id();
    Mutex mu;  // a leaf: held only to hand the work over
    bool waiting ABSL_GUARDED_BY(mu);                          // the poster polls, or is about to
    absl::AnyInvocable<void() &&> handed ABSL_GUARDED_BY(mu);  // taken off the queue by another thread
  };
  // Whether this thread polls for work it posts now with `budget`: not if it is zero, nor inside a poll
  // (PollBriefly's note).
  static bool WillPoll(absl::Duration budget);
  // Polls for `polled`'s completion for up to `budget` (the one given to WillPoll), if it was to.
  void PollBriefly(fabric::Device& device, uint64_t key, const std::shared_ptr<Polled>& polled,
                   absl::Duration budget);
  void Completed(Polled& polled, absl::AnyInvocable<void() &&> finish);
  std::atomic<uint64_t> completions_on_poster_{0}, completions_on_dispatcher_{0};

  mutable Mutex owners_mu_;
  std::map<std::string, std::string> pd_tenant_ ABSL_GUARDED_BY(owners_mu_);               // tenants' PDs only
  std::map<std::string, std::set<std::string>> tenant_pds_ ABSL_GUARDED_BY(owners_mu_);   // the reverse

  mutable Mutex mu_;
  // Never reused, across restarts too (state/names.h).
  state::NameCounter next_pd_ ABSL_GUARDED_BY(mu_){options_.state, "pds"};
  state::NameCounter next_mr_ ABSL_GUARDED_BY(mu_){options_.state, "mrs"};
  state::NameCounter next_qp_ ABSL_GUARDED_BY(mu_){options_.state, "qps"};
  state::NameCounter next_mw_ ABSL_GUARDED_BY(mu_){options_.state, "mws"};
  std::map<uint64_t, std::unique_ptr<PdEntry>> pds_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, std::unique_ptr<QpEntry>> qps_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, std::unique_ptr<MrEntry>> mrs_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, std::unique_ptr<MwEntry>> mws_ ABSL_GUARDED_BY(mu_);
  // What the limits count: the objects (totals_, kept by Attach/Detach; PDs: pds_) and the creations under way
  // (reserved before the fabric call, released at its commit or failure).
  LockedBy<registry_internal::Totals> totals_;  // mu_
  struct Creating {
    uint64_t pds = 0, mrs = 0, mws = 0, qps = 0;
  } creating_ ABSL_GUARDED_BY(mu_);

  // Threads last: stopped first (explicitly, in the destructor, before any entry is released).
  std::map<const fabric::Device*, std::unique_ptr<dispatch::EventLoop>> dispatchers_;
  std::unique_ptr<dispatch::WorkerPool> workers_;
};

}  // namespace rdmad

#endif  // RDMAD_SERVER_REGISTRY_REGISTRY_H_
