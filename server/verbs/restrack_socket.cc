#include "server/verbs/restrack_socket.h"

#include <dirent.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <rdma/rdma_netlink.h>

#include <memory>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/common/status.h"

namespace rdmad::verbs::restrack {
namespace {

struct SocketCloser {
  void operator()(mnl_socket* s) const { mnl_socket_close(s); }
};

struct Receive {
  const Owners* owners;
  DeviceDump* dump;
  absl::Status status;
};

int OnMessage(const nlmsghdr* nlh, void* data) {
  auto* r = static_cast<Receive*>(data);
  r->status = ParseResMessage(nlh, *r->owners, r->dump);
  return r->status.ok() ? MNL_CB_OK : MNL_CB_ERROR;
}

absl::Status DumpOne(mnl_socket* sock, int cmd, uint32_t dev_index, uint32_t seq, const Owners& owners,
                     DeviceDump* dump) {
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf.data());
  nlh->nlmsg_type = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, cmd);
  nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  nlh->nlmsg_seq = seq;
  mnl_attr_put_u32(nlh, RDMA_NLDEV_ATTR_DEV_INDEX, dev_index);
  const std::string what = absl::StrCat("RDMA netlink dump ", cmd, " of device index ", dev_index);
  if (mnl_socket_sendto(sock, nlh, nlh->nlmsg_len) < 0) return FromErrno("mnl_socket_sendto", what);
  const unsigned int portid = mnl_socket_get_portid(sock);
  Receive r{&owners, dump, absl::OkStatus()};
  for (;;) {
    const ssize_t n = mnl_socket_recvfrom(sock, buf.data(), buf.size());
    if (n < 0) return FromErrno("mnl_socket_recvfrom", what);
    const int ret = mnl_cb_run(buf.data(), static_cast<size_t>(n), seq, portid, OnMessage, &r);
    if (ret == MNL_CB_STOP) return absl::OkStatus();
    if (ret < 0) return r.status.ok() ? FromErrno("mnl_cb_run", what) : r.status;
  }
}

}  // namespace

absl::StatusOr<DeviceDump> DumpDevice(uint32_t dev_index, uint32_t pid) {
  return DumpDevice(dev_index, Owners{{pid}, false});
}

absl::StatusOr<DeviceDump> DumpDeviceOfThisProcess(uint32_t dev_index) {
  Owners owners;
  owners.orphans = true;
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir("/proc/self/task"), closedir);
  if (dir == nullptr) return FromErrno("opendir", "/proc/self/task");
  while (const dirent* e = readdir(dir.get())) {
    uint32_t tid = 0;
    if (absl::SimpleAtoi(e->d_name, &tid)) owners.tids.insert(tid);
  }
  return DumpDevice(dev_index, owners);
}

absl::StatusOr<DeviceDump> DumpDevice(uint32_t dev_index, const Owners& owners) {
  std::unique_ptr<mnl_socket, SocketCloser> sock(mnl_socket_open(NETLINK_RDMA));
  if (sock == nullptr) return FromErrno("mnl_socket_open", "NETLINK_RDMA");
  if (mnl_socket_bind(sock.get(), 0, MNL_SOCKET_AUTOPID) < 0) return FromErrno("mnl_socket_bind", "NETLINK_RDMA");
  DeviceDump dump;
  uint32_t seq = 1;
  for (int cmd : {RDMA_NLDEV_CMD_RES_PD_GET, RDMA_NLDEV_CMD_RES_MR_GET, RDMA_NLDEV_CMD_RES_QP_GET,
                  RDMA_NLDEV_CMD_RES_CM_ID_GET}) {
    if (absl::Status s = DumpOne(sock.get(), cmd, dev_index, seq++, owners, &dump); !s.ok()) return s;
  }
  return dump;
}

}  // namespace rdmad::verbs::restrack
