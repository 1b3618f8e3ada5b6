// Registry: the one owner of every fabric object rdmad manages, by name.
//
// Names are "pds/N", "mrs/N", "mws/N", "qps/N" with per-kind counters that never reuse a number while
// rdmad runs, and "devices/<ibv device name>". Every rule of the verbs man pages that rdmad promises is
// enforced here, before the fabric is called:
//   - ibv_reg_mr(3): REMOTE_WRITE or REMOTE_ATOMIC requires LOCAL_WRITE;
//   - ibv_dereg_mr(3) NOTES: deregistration is refused (FAILED_PRECONDITION, EBUSY) while a window is bound;
//   - ibv_rereg_mr(3): flags and their arguments; the outcome of each error code (which MR survives);
//     the emulated path (register the new, then deregister the old) where the device has no native rereg;
//   - ibv_bind_mw(3): window access flags, REMOTE_WRITE/ATOMIC need the MR's LOCAL_WRITE, the MR needs
//     MW_BIND, the rkey is published only after the bind completion was polled successfully.
//
// Ownership and release order. Entries own their fabric objects through unique_ptr. Parents outlive
// children by rule (a PD cannot be deleted while it holds anything, unless cascaded, and a cascade
// releases children first). The destructor releases everything in the order windows, regions, QPs, PDs,
// and finally the fabric (device contexts).
//
// Threads. Any gRPC worker thread may call any method. One mutex (mu_) guards all state and is held for
// the whole of each operation, verbs calls included, with one exception: RegisterMr maps memory and calls
// ibv_reg_mr without the lock (pinning a large region can take seconds), holding the PD by a `pending`
// count that makes DeletePd refuse until the registration is inserted. ibv_reg_mr is thread-safe against
// other verbs calls on the same PD, so this does not break the fabric's single-caller rule for the objects
// it touches (the new MR is not visible to anyone until inserted).
#ifndef RDMAD_SERVER_REGISTRY_REGISTRY_H_
#define RDMAD_SERVER_REGISTRY_REGISTRY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rdmad/v1/rdmad.pb.h"
#include "server/fabric/fabric.h"
#include "server/memory/mapping.h"

namespace rdmad {

class Registry {
 public:
  struct Options {
    // A shared file may be registered only if its real path lies under one of these.
    std::vector<std::string> allowed_file_roots = {"/dev/shm", "/dev/hugepages", "/run/rdmad"};
    // Largest MR in bytes; 0: no limit beyond the device's max_mr_size and physical memory.
    uint64_t max_mr_bytes = 0;
  };

  Registry(std::unique_ptr<fabric::Fabric> fabric, Options options);
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  std::vector<v1::Device> ListDevices() const;
  absl::StatusOr<v1::Device> GetDevice(const std::string& name) const;

  absl::StatusOr<v1::ProtectionDomain> CreatePd(const v1::CreatePdRequest& request);
  absl::StatusOr<v1::ProtectionDomain> GetPd(const std::string& name) const;
  std::vector<v1::ProtectionDomain> ListPds() const;
  absl::StatusOr<v1::DeletePdResponse> DeletePd(const v1::DeletePdRequest& request);

  absl::StatusOr<v1::MemoryRegion> RegisterMr(const v1::RegisterMrRequest& request);
  absl::StatusOr<v1::MemoryRegion> GetMr(const std::string& name) const;
  absl::StatusOr<std::vector<v1::MemoryRegion>> ListMrs(const v1::ListMrsRequest& request) const;
  absl::StatusOr<v1::ReregisterMrResponse> ReregisterMr(const v1::ReregisterMrRequest& request);
  absl::Status DeregisterMr(const std::string& name);

  absl::StatusOr<v1::QueuePair> CreateQp(const v1::CreateQpRequest& request);
  absl::StatusOr<v1::QueuePair> GetQp(const std::string& name) const;
  std::vector<v1::QueuePair> ListQps() const;
  absl::StatusOr<v1::QueuePair> ConnectQp(const v1::ConnectQpRequest& request);
  absl::Status DeleteQp(const std::string& name);

  absl::StatusOr<v1::MemoryWindow> AllocMw(const v1::AllocMwRequest& request);
  absl::StatusOr<v1::MemoryWindow> GetMw(const std::string& name) const;
  absl::StatusOr<std::vector<v1::MemoryWindow>> ListMws(const v1::ListMwsRequest& request) const;
  absl::StatusOr<v1::MemoryWindow> BindMw(const v1::BindMwRequest& request);
  absl::StatusOr<v1::MemoryWindow> InvalidateMw(const std::string& name);
  absl::Status DeallocMw(const std::string& name);

 private:
  struct PdEntry {
    uint64_t id = 0;
    fabric::Device* device = nullptr;
    std::string label;
    std::unique_ptr<fabric::Pd> pd;
    // rdmad's own loopback-connected QP in this PD, used to post type 1 binds and invalidations.
    // Declared after `pd`, so it is destroyed first.
    std::unique_ptr<fabric::Qp> bind_qp;
    uint32_t mrs = 0, mws = 0, qps = 0;
    uint32_t pending = 0;  // registrations in flight outside the lock
  };
  struct MrEntry {
    uint64_t id = 0;
    PdEntry* pd = nullptr;
    v1::MemorySource source;
    std::shared_ptr<Mapping> mapping;
    // After a native rereg left the MR unusable: every mapping it may still reference, kept until dereg.
    std::vector<std::shared_ptr<Mapping>> retained;
    std::unique_ptr<fabric::Mr> mr;  // declared after the mappings: deregistered before they are unmapped
    bool unusable = false;
    std::string unusable_reason;
    uint32_t generation = 0;
    uint32_t bound_windows = 0;
  };
  struct QpEntry {
    uint64_t id = 0;
    PdEntry* pd = nullptr;
    fabric::QpOptions options;
    std::unique_ptr<fabric::Qp> qp;
    bool has_remote = false;
    fabric::QpEndpoint remote;
    uint32_t bound_windows = 0;  // type 2 windows bound on it
  };
  struct MwEntry {
    uint64_t id = 0;
    PdEntry* pd = nullptr;
    // While bound: an MR registered over exactly the window's range (access: the parent MR's LOCAL_WRITE
    // and MW_BIND, no remote access of its own), which the window is bound to instead of the parent MR.
    // Some devices check a window access against the bounds of the window's MR only (rxe in Linux 6.1:
    // rxe_resp.c check_rkey calls mr_check_range(mw->mr, ...)); this makes the window's own range the
    // enforced one everywhere. Declared before `mw`, so the window is deallocated before it is
    // deregistered (ibv_dereg_mr fails while a window is bound).
    std::unique_ptr<fabric::Mr> bounds_mr;
    std::unique_ptr<fabric::Mw> mw;
    MrEntry* mr = nullptr;  // set while bound
    QpEntry* qp = nullptr;  // the user QP the bind was posted on (type 2: the only QP it works on)
    v1::MwBinding binding;  // valid while mr != nullptr
  };

  // Lookups; `field` names the request field in errors. Callers hold mu_.
  absl::StatusOr<fabric::Device*> FindDevice(const std::string& name, const std::string& field) const;
  absl::StatusOr<PdEntry*> FindPd(const std::string& name, const std::string& field) const;
  absl::StatusOr<MrEntry*> FindMr(const std::string& name, const std::string& field) const;
  absl::StatusOr<QpEntry*> FindQp(const std::string& name, const std::string& field) const;
  absl::StatusOr<MwEntry*> FindMw(const std::string& name, const std::string& field) const;

  uint64_t MaxMrBytes(const fabric::Device& device) const;
  absl::StatusOr<std::unique_ptr<Mapping>> MapSource(const v1::MemorySource& source, const fabric::Device& device,
                                                     const std::string& field) const;
  // The PD's loopback bind QP, created and (re)connected on demand.
  absl::StatusOr<fabric::Qp*> BindQp(PdEntry& pd);
  void Unbind(MwEntry& mw);
  absl::StatusOr<v1::ReregisterMrResponse> ReregEmulated(MrEntry& e, int flags, PdEntry* new_pd,
                                                         std::shared_ptr<Mapping> new_mapping,
                                                         const v1::MemorySource& new_source, uint32_t access);
  absl::StatusOr<v1::ReregisterMrResponse> ReregNative(MrEntry& e, int flags, PdEntry* new_pd,
                                                       std::shared_ptr<Mapping> new_mapping,
                                                       const v1::MemorySource& new_source, uint32_t access);
  void ApplyRereg(MrEntry& e, int flags, PdEntry* new_pd, std::shared_ptr<Mapping> new_mapping,
                  const v1::MemorySource& new_source);

  v1::ProtectionDomain ToProto(const PdEntry& e) const;
  v1::MemoryRegion ToProto(const MrEntry& e) const;
  v1::QueuePair ToProto(const QpEntry& e) const;
  v1::MemoryWindow ToProto(const MwEntry& e) const;

  // Fabric first: destroyed last, after every entry (members are destroyed in reverse order).
  std::unique_ptr<fabric::Fabric> fabric_;
  const Options options_;

  mutable std::mutex mu_;
  uint64_t next_pd_ = 1, next_mr_ = 1, next_qp_ = 1, next_mw_ = 1;
  std::map<uint64_t, std::unique_ptr<PdEntry>> pds_;
  std::map<uint64_t, std::unique_ptr<QpEntry>> qps_;
  std::map<uint64_t, std::unique_ptr<MrEntry>> mrs_;
  std::map<uint64_t, std::unique_ptr<MwEntry>> mws_;
};

// Access flags: proto list <-> fabric bits. Unknown values are an INVALID_ARGUMENT naming `field`.
absl::StatusOr<uint32_t> AccessBits(const google::protobuf::RepeatedField<int>& access, const std::string& field);
void AccessList(uint32_t bits, google::protobuf::RepeatedField<int>* out);
// ibv_reg_mr(3): REMOTE_WRITE or REMOTE_ATOMIC requires LOCAL_WRITE.
absl::Status CheckMrAccessRule(uint32_t bits, const std::string& field);

}  // namespace rdmad

#endif  // RDMAD_SERVER_REGISTRY_REGISTRY_H_
