#include "server/verbs/mw.h"

#include "server/common/log.h"
#include "server/common/status.h"

namespace rdmad::verbs {

Mw::~Mw() {
  if (int ret = ibv_dealloc_mw(mw_); ret != 0) {
    RDMAD_LOG_ERROR("ibv_dealloc_mw failed: errno %d (%s)", ret, ErrnoName(ret).c_str());
  }
}

}  // namespace rdmad::verbs
