#include "server/fabric/fabric.h"

namespace rdmad::fabric {

const char* ReregCodeName(ReregCode code) {
  switch (code) {
    case ReregCode::kOk: return "OK";
    case ReregCode::kErrInput: return "IBV_REREG_MR_ERR_INPUT";
    case ReregCode::kErrDontForkNew: return "IBV_REREG_MR_ERR_DONT_FORK_NEW";
    case ReregCode::kErrDoForkOld: return "IBV_REREG_MR_ERR_DO_FORK_OLD";
    case ReregCode::kErrCmd: return "IBV_REREG_MR_ERR_CMD";
    case ReregCode::kErrCmdAndDoForkNew: return "IBV_REREG_MR_ERR_CMD_AND_DO_FORK_NEW";
  }
  return "IBV_REREG_MR_ERR_UNKNOWN";
}

}  // namespace rdmad::fabric
