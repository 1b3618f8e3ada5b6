// verbs::Mr: one ibv_mr. Owns it: Release() (or the destructor) calls ibv_dereg_mr. The memory it covers
// is owned by the caller and must outlive it.
// Thread-safety: none of its own; the registry serializes calls.
#ifndef RDMAD_SERVER_VERBS_MR_H_
#define RDMAD_SERVER_VERBS_MR_H_

#include <infiniband/verbs.h>

#include "server/fabric/fabric.h"

namespace rdmad::verbs {

class Mr final : public fabric::Mr {
 public:
  explicit Mr(ibv_mr* mr, uint32_t access) : mr_(mr), access_(access) {}
  ~Mr() override;
  Mr(const Mr&) = delete;
  Mr& operator=(const Mr&) = delete;

  uint64_t addr() const override { return reinterpret_cast<uintptr_t>(mr_->addr); }
  uint64_t length() const override { return mr_->length; }
  uint32_t lkey() const override { return mr_->lkey; }
  uint32_t rkey() const override { return mr_->rkey; }
  uint32_t access() const override { return access_; }
  fabric::ReregCode Rereg(int flags, fabric::Pd* new_pd, void* addr, size_t length, uint32_t access,
                          int* err) override;
  absl::Status Release() override;

  ibv_mr* raw() const { return mr_; }

 private:
  ibv_mr* mr_;  // null once released
  uint32_t access_;
};

}  // namespace rdmad::verbs

#endif  // RDMAD_SERVER_VERBS_MR_H_
