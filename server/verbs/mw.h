// verbs::Mw: one ibv_mw (type 1 or 2). Owns it (ibv_dealloc_mw in the destructor). Its rkey is the
// ibv_mw's rkey field, which Qp::Bind updates only after a successful bind completion.
// Thread-safety: none of its own; the registry serializes calls.
#ifndef RDMAD_SERVER_VERBS_MW_H_
#define RDMAD_SERVER_VERBS_MW_H_

#include <infiniband/verbs.h>

#include "server/fabric/fabric.h"

namespace rdmad::verbs {

class Mw final : public fabric::Mw {
 public:
  explicit Mw(ibv_mw* mw) : mw_(mw) {}
  ~Mw() override;
  Mw(const Mw&) = delete;
  Mw& operator=(const Mw&) = delete;

  fabric::MwType type() const override {
    return mw_->type == IBV_MW_TYPE_1 ? fabric::MwType::kType1 : fabric::MwType::kType2;
  }
  uint32_t rkey() const override { return mw_->rkey; }
  ibv_mw* raw() const { return mw_; }

 private:
  ibv_mw* const mw_;
};

}  // namespace rdmad::verbs

#endif  // RDMAD_SERVER_VERBS_MW_H_
