#include "server/verbs/pd.h"

#include <cerrno>

#include "server/common/log.h"
#include "server/common/status.h"
#include "server/verbs/device.h"
#include "server/verbs/mr.h"
#include "server/verbs/mw.h"
#include "server/verbs/qp.h"

namespace rdmad::verbs {

Pd::~Pd() {
  if (int ret = ibv_dealloc_pd(pd_); ret != 0) {
    RDMAD_LOG_ERROR("ibv_dealloc_pd failed: errno %d (%s)", ret, ErrnoName(ret).c_str());
  }
}

absl::StatusOr<std::unique_ptr<fabric::Mr>> Pd::RegMr(void* addr, size_t length, uint32_t access) {
  ibv_mr* mr = ibv_reg_mr(pd_, addr, length, static_cast<int>(access));
  if (mr == nullptr) return FromErrno("ibv_reg_mr");
  return std::unique_ptr<fabric::Mr>(new Mr(mr, access));
}

absl::StatusOr<std::unique_ptr<fabric::Mw>> Pd::AllocMw(fabric::MwType type) {
  ibv_mw* mw = ibv_alloc_mw(pd_, type == fabric::MwType::kType1 ? IBV_MW_TYPE_1 : IBV_MW_TYPE_2);
  if (mw == nullptr) return FromErrno("ibv_alloc_mw");
  return std::unique_ptr<fabric::Mw>(new Mw(mw));
}

absl::StatusOr<std::unique_ptr<fabric::Qp>> Pd::CreateQp(const fabric::QpOptions& options) {
  RDMAD_ASSIGN_OR_RETURN(std::unique_ptr<Qp> qp, Qp::Create(device_, pd_, options));
  return std::unique_ptr<fabric::Qp>(std::move(qp));
}

}  // namespace rdmad::verbs
