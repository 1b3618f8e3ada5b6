#include "server/verbs/mr.h"

#include <cerrno>

#include "server/common/log.h"
#include "server/common/status.h"
#include "server/verbs/pd.h"

namespace rdmad::verbs {

Mr::~Mr() {
  if (mr_ == nullptr) return;
  if (int ret = ibv_dereg_mr(mr_); ret != 0) {
    RDMAD_LOG_ERROR("ibv_dereg_mr failed at teardown: errno %d (%s)", ret, ErrnoName(ret).c_str());
  }
}

absl::Status Mr::Release() {
  if (mr_ == nullptr) return absl::OkStatus();
  if (int ret = ibv_dereg_mr(mr_); ret != 0) return FromReturn("ibv_dereg_mr", ret);
  mr_ = nullptr;
  return absl::OkStatus();
}

fabric::ReregCode Mr::Rereg(int flags, fabric::Pd* new_pd, void* addr, size_t length, uint32_t access,
                            int* err) {
  ibv_pd* pd = (flags & IBV_REREG_MR_CHANGE_PD) ? static_cast<Pd*>(new_pd)->raw() : nullptr;
  errno = 0;
  int ret = ibv_rereg_mr(mr_, flags, pd, addr, length, static_cast<int>(access));
  *err = ret == 0 ? 0 : errno;
  auto code = static_cast<fabric::ReregCode>(ret);
  if (code == fabric::ReregCode::kOk || code == fabric::ReregCode::kErrDoForkOld) {
    if (flags & IBV_REREG_MR_CHANGE_ACCESS) access_ = access;
  }
  return code;
}

}  // namespace rdmad::verbs
