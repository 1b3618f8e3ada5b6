// verbs::Pd: one ibv_pd. Owns it (ibv_dealloc_pd in the destructor); every Mr, Mw and Qp made from it
// must be destroyed first (the registry guarantees the order).
// Thread-safety: none of its own; the registry serializes calls.
#ifndef RDMAD_SERVER_VERBS_PD_H_
#define RDMAD_SERVER_VERBS_PD_H_

#include <infiniband/verbs.h>

#include "server/fabric/fabric.h"

namespace rdmad::verbs {

class Device;

class Pd final : public fabric::Pd {
 public:
  Pd(Device* device, ibv_pd* pd) : device_(device), pd_(pd) {}
  ~Pd() override;
  Pd(const Pd&) = delete;
  Pd& operator=(const Pd&) = delete;

  absl::StatusOr<std::unique_ptr<fabric::Mr>> RegMr(void* addr, size_t length, uint32_t access) override;
  absl::StatusOr<std::unique_ptr<fabric::Mw>> AllocMw(fabric::MwType type) override;
  absl::StatusOr<std::unique_ptr<fabric::Qp>> CreateQp(const fabric::QpOptions& options) override;

  ibv_pd* raw() const { return pd_; }

 private:
  Device* const device_;
  ibv_pd* const pd_;
};

}  // namespace rdmad::verbs

#endif  // RDMAD_SERVER_VERBS_PD_H_
