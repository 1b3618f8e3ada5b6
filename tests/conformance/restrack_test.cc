// restrack on rxe0 (run in the Soft-RoCE guest by run-conformance.sh, or alone): this process makes a PD,
// an MR, a CQ, a QP and a listening rdma_cm id with plain verbs, dumps the device over RDMA netlink
// (server/verbs/restrack_socket) and checks that the dump and the join give the same numbers as
// `rdma -j resource show`. Run it as root (the dump carries MR keys) and with CAP_NET_ADMIN dropped
// (`setpriv --inh-caps=-net_admin --bounding-set=-net_admin`: no keys; the join falls back to (pdn, length)).
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/verbs/restrack.h"
#include "server/verbs/restrack_socket.h"

namespace rdmad::verbs::restrack {
namespace {

bool HasNetAdmin() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("CapEff:", 0) == 0) return (std::stoull(line.substr(7), nullptr, 16) >> 12) & 1;
  }
  return false;
}

std::string Shell(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  pclose(p);
  return out;
}

class RestrackOnRxe : public ::testing::Test {
 protected:
  void SetUp() override {
    int n = 0;
    list_ = ibv_get_device_list(&n);
    ASSERT_NE(list_, nullptr);
    for (int i = 0; i < n; ++i) {
      if (std::string(ibv_get_device_name(list_[i])) == "rxe0") dev_ = list_[i];
    }
    ASSERT_NE(dev_, nullptr) << "no rxe0";
    ctx_ = ibv_open_device(dev_);
    ASSERT_NE(ctx_, nullptr);
    pd_ = ibv_alloc_pd(ctx_);
    ASSERT_NE(pd_, nullptr);
    buf_ = std::aligned_alloc(4096, 3 * 4096);
    mr_ = ibv_reg_mr(pd_, buf_, 3 * 4096, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr_, nullptr);
    cq_ = ibv_create_cq(ctx_, 4, nullptr, nullptr, 0);
    ASSERT_NE(cq_, nullptr);
    ibv_qp_init_attr attr{};
    attr.send_cq = cq_;
    attr.recv_cq = cq_;
    attr.qp_type = IBV_QPT_RC;
    attr.cap = {1, 1, 1, 1, 0};
    qp_ = ibv_create_qp(pd_, &attr);
    ASSERT_NE(qp_, nullptr);
  }
  void TearDown() override {
    if (qp_ != nullptr) ibv_destroy_qp(qp_);
    if (cq_ != nullptr) ibv_destroy_cq(cq_);
    if (mr_ != nullptr) ibv_dereg_mr(mr_);
    std::free(buf_);
    if (pd_ != nullptr) ibv_dealloc_pd(pd_);
    if (ctx_ != nullptr) ibv_close_device(ctx_);
    if (list_ != nullptr) ibv_free_device_list(list_);
  }

  ibv_device** list_ = nullptr;
  ibv_device* dev_ = nullptr;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  void* buf_ = nullptr;
  ibv_mr* mr_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
};

TEST_F(RestrackOnRxe, DumpAndJoinMatchRdmaResourceShow) {
  const uint32_t pid = static_cast<uint32_t>(getpid());
  absl::StatusOr<DeviceDump> dump = DumpDevice(static_cast<uint32_t>(ibv_get_device_index(dev_)), pid);
  ASSERT_TRUE(dump.ok()) << dump.status();
  EXPECT_EQ(dump->name, "rxe0");
  ASSERT_EQ(dump->pds.size(), 1u);
  ASSERT_EQ(dump->mrs.size(), 1u);
  ASSERT_EQ(dump->qps.size(), 1u);
  EXPECT_EQ(dump->qps[0].qpn, qp_->qp_num);
  EXPECT_EQ(dump->qps[0].pdn, dump->pds[0].pdn);
  EXPECT_EQ(dump->mrs[0].pdn, dump->pds[0].pdn);
  EXPECT_EQ(dump->mrs[0].length, 3u * 4096);
  const bool admin = HasNetAdmin();
  EXPECT_EQ(dump->mrs[0].lkey.has_value(), admin) << "CAP_NET_ADMIN " << admin;
  if (dump->mrs[0].lkey.has_value()) {
    EXPECT_EQ(*dump->mrs[0].lkey, mr_->lkey);
  }

  Ours ours;
  ours.pds = {{1, false}};
  ours.mrs = {{2, 1, mr_->lkey, 3 * 4096, false}};
  ours.qps = {{3, 1, qp_->qp_num, false}};
  const Numbers n = Join(ours, *dump);
  ASSERT_TRUE(n.pdn[0].has_value());
  ASSERT_TRUE(n.mrn[0].has_value());  // by lkey as root, by (pdn, length) without the capability
  EXPECT_EQ(*n.mrn[0], dump->mrs[0].mrn);

  // The same numbers in iproute2's view of this pid.
  const std::string self = absl::StrCat("\"pid\":", pid);
  const std::string mrs = Shell("rdma -j resource show mr");
  EXPECT_NE(mrs.find(absl::StrCat("\"mrn\":", *n.mrn[0], ",")), std::string::npos) << mrs;
  EXPECT_NE(mrs.find(self), std::string::npos) << mrs;
  const std::string pds = Shell("rdma -j resource show pd");
  EXPECT_NE(pds.find(absl::StrCat("\"pdn\":", *n.pdn[0], ",")), std::string::npos) << pds;
  const std::string qps = Shell("rdma -j resource show qp");
  EXPECT_NE(qps.find(absl::StrCat("\"lqpn\":", qp_->qp_num, ",")), std::string::npos) << qps;
  EXPECT_NE(qps.find(absl::StrCat("\"pdn\":", *n.pdn[0])), std::string::npos) << qps;
}

TEST_F(RestrackOnRxe, ListeningCmIdJoinsByItsAddress) {
  rdma_event_channel* ch = rdma_create_event_channel();
  ASSERT_NE(ch, nullptr);
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in in{};
  in.sin_family = AF_INET;
  inet_pton(AF_INET, "10.0.2.15", &in.sin_addr);
  ASSERT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&in)), 0) << errno;
  ASSERT_EQ(rdma_listen(id, 1), 0);
  const uint16_t port = ntohs(rdma_get_src_port(id));

  const uint32_t pid = static_cast<uint32_t>(getpid());
  absl::StatusOr<DeviceDump> dump = DumpDevice(static_cast<uint32_t>(ibv_get_device_index(dev_)), pid);
  ASSERT_TRUE(dump.ok()) << dump.status();
  Ours ours;
  OurCmId c;
  c.id = 9;
  c.ps = RDMA_PS_TCP;
  c.src = EndpointOf(rdma_get_local_addr(id), sizeof(sockaddr_in));
  c.dst = EndpointOf(rdma_get_peer_addr(id), sizeof(sockaddr_in));
  ours.cm_ids = {c};
  const Numbers n = Join(ours, *dump);
  ASSERT_TRUE(n.cm_idn[0].has_value()) << "port " << port << ", " << dump->cm_ids.size() << " ids";
  const std::string ids = Shell("rdma -j resource show cm_id");
  EXPECT_NE(ids.find(absl::StrCat("\"cm-idn\":", *n.cm_idn[0])), std::string::npos) << ids;
  EXPECT_NE(ids.find(absl::StrCat("\"src-addr\":\"10.0.2.15:", port, "\"")), std::string::npos) << ids;
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
}

}  // namespace
}  // namespace rdmad::verbs::restrack
