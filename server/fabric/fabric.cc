#include "server/fabric/fabric.h"

#include "server/fabric/cm.h"

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

const char* CmEventName(CmEventType type) {
  switch (type) {
    case CmEventType::kAddrResolved: return "RDMA_CM_EVENT_ADDR_RESOLVED";
    case CmEventType::kAddrError: return "RDMA_CM_EVENT_ADDR_ERROR";
    case CmEventType::kRouteResolved: return "RDMA_CM_EVENT_ROUTE_RESOLVED";
    case CmEventType::kRouteError: return "RDMA_CM_EVENT_ROUTE_ERROR";
    case CmEventType::kConnectRequest: return "RDMA_CM_EVENT_CONNECT_REQUEST";
    case CmEventType::kConnectResponse: return "RDMA_CM_EVENT_CONNECT_RESPONSE";
    case CmEventType::kConnectError: return "RDMA_CM_EVENT_CONNECT_ERROR";
    case CmEventType::kUnreachable: return "RDMA_CM_EVENT_UNREACHABLE";
    case CmEventType::kRejected: return "RDMA_CM_EVENT_REJECTED";
    case CmEventType::kEstablished: return "RDMA_CM_EVENT_ESTABLISHED";
    case CmEventType::kDisconnected: return "RDMA_CM_EVENT_DISCONNECTED";
    case CmEventType::kDeviceRemoval: return "RDMA_CM_EVENT_DEVICE_REMOVAL";
    case CmEventType::kMulticastJoin: return "RDMA_CM_EVENT_MULTICAST_JOIN";
    case CmEventType::kMulticastError: return "RDMA_CM_EVENT_MULTICAST_ERROR";
    case CmEventType::kAddrChange: return "RDMA_CM_EVENT_ADDR_CHANGE";
    case CmEventType::kTimewaitExit: return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
  }
  return "RDMA_CM_EVENT_UNKNOWN";
}

}  // namespace rdmad::fabric
