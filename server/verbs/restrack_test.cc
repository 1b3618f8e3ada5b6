// restrack: RDMA netlink dump messages (built here with libmnl, as the kernel lays them out) parsed and
// joined to rdmad's objects, including the ambiguous and the no-keys (no CAP_NET_ADMIN) cases.
#include "server/verbs/restrack.h"

#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <netinet/in.h>
#include <rdma/rdma_netlink.h>
#include <rdma/rdma_user_cm.h>

#include <cstring>
#include <optional>
#include <vector>

#include "gtest/gtest.h"

namespace rdmad::verbs::restrack {
namespace {

constexpr uint32_t kPid = 4242;
constexpr uint32_t kOther = 777;

// One reply message of an nldev dump: the device's index and name, then a nest of entries.
class Message {
 public:
  Message(int cmd, int list, int entry) : entry_type_(entry) {
    nlh_ = mnl_nlmsg_put_header(buf_.data());
    nlh_->nlmsg_type = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, cmd);
    nlh_->nlmsg_flags = NLM_F_MULTI;
    mnl_attr_put_u32(nlh_, RDMA_NLDEV_ATTR_DEV_INDEX, 3);
    mnl_attr_put_strz(nlh_, RDMA_NLDEV_ATTR_DEV_NAME, "rxe0");
    list_ = mnl_attr_nest_start(nlh_, list);
  }
  // Starts an entry owned by pid (none: a kernel object, no pid attribute).
  Message& Entry(std::optional<uint32_t> pid) {
    if (entry_ != nullptr) mnl_attr_nest_end(nlh_, entry_);
    entry_ = mnl_attr_nest_start(nlh_, entry_type_);
    if (pid.has_value()) mnl_attr_put_u32(nlh_, RDMA_NLDEV_ATTR_RES_PID, *pid);
    return *this;
  }
  Message& Str(int type, const char* v) {
    mnl_attr_put_strz(nlh_, type, v);
    return *this;
  }
  Message& U32(int type, uint32_t v) {
    mnl_attr_put_u32(nlh_, type, v);
    return *this;
  }
  Message& U64(int type, uint64_t v) {
    mnl_attr_put_u64(nlh_, type, v);
    return *this;
  }
  Message& Addr(int type, const char* ip, uint16_t port) {
    sockaddr_storage ss{};  // the kernel sends a whole __kernel_sockaddr_storage
    auto* in = reinterpret_cast<sockaddr_in*>(&ss);
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    inet_pton(AF_INET, ip, &in->sin_addr);
    mnl_attr_put(nlh_, type, sizeof(ss), &ss);
    return *this;
  }
  const nlmsghdr* Done() {
    if (entry_ != nullptr) mnl_attr_nest_end(nlh_, entry_);
    entry_ = nullptr;
    mnl_attr_nest_end(nlh_, list_);
    return nlh_;
  }

 private:
  alignas(nlmsghdr) std::array<char, 8192> buf_{};
  nlmsghdr* nlh_;
  nlattr* list_;
  nlattr* entry_ = nullptr;
  int entry_type_;
};

Message Mrs() { return Message(RDMA_NLDEV_CMD_RES_MR_GET, RDMA_NLDEV_ATTR_RES_MR, RDMA_NLDEV_ATTR_RES_MR_ENTRY); }
Message Qps() { return Message(RDMA_NLDEV_CMD_RES_QP_GET, RDMA_NLDEV_ATTR_RES_QP, RDMA_NLDEV_ATTR_RES_QP_ENTRY); }
Message Pds() { return Message(RDMA_NLDEV_CMD_RES_PD_GET, RDMA_NLDEV_ATTR_RES_PD, RDMA_NLDEV_ATTR_RES_PD_ENTRY); }
Message CmIds() {
  return Message(RDMA_NLDEV_CMD_RES_CM_ID_GET, RDMA_NLDEV_ATTR_RES_CM_ID, RDMA_NLDEV_ATTR_RES_CM_ID_ENTRY);
}

Endpoint Ep(const char* ip, uint16_t port) {
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_port = htons(port);
  inet_pton(AF_INET, ip, &in.sin_addr);
  return EndpointOf(reinterpret_cast<const sockaddr*>(&in), sizeof(in));
}

// The kernel reports the thread that made an object while it lives, and no pid once it exited: a process's
// entries are its threads' and (with orphans) those without a pid, never the kernel's own (a kernel name).
TEST(RestrackParse, KeepsEveryThreadsEntriesAndTheOrphansButNotTheKernels) {
  auto mrs = [](DeviceDump* dump, const Owners& owners) {
    Message m = Mrs();
    m.Entry(kPid).U32(RDMA_NLDEV_ATTR_RES_MRN, 1).U64(RDMA_NLDEV_ATTR_RES_MRLEN, 8);
    m.Entry(kPid + 1).U32(RDMA_NLDEV_ATTR_RES_MRN, 2).U64(RDMA_NLDEV_ATTR_RES_MRLEN, 8);  // another thread
    m.Entry(kOther).U32(RDMA_NLDEV_ATTR_RES_MRN, 3).U64(RDMA_NLDEV_ATTR_RES_MRLEN, 8);
    m.Entry(std::nullopt).U32(RDMA_NLDEV_ATTR_RES_MRN, 4).U64(RDMA_NLDEV_ATTR_RES_MRLEN, 8);  // its thread exited
    m.Entry(std::nullopt).Str(RDMA_NLDEV_ATTR_RES_KERN_NAME, "ib_core").U32(RDMA_NLDEV_ATTR_RES_MRN, 5)
        .U64(RDMA_NLDEV_ATTR_RES_MRLEN, 8);
    return ParseResMessage(m.Done(), owners, dump);
  };
  auto mrns = [](const DeviceDump& d) {
    std::vector<uint32_t> out;
    for (const KernelMr& m : d.mrs) out.push_back(m.mrn);
    return out;
  };
  DeviceDump with_orphans, without;
  ASSERT_TRUE(mrs(&with_orphans, Owners{{kPid, kPid + 1}, true}).ok());
  EXPECT_EQ(mrns(with_orphans), (std::vector<uint32_t>{1, 2, 4}));
  ASSERT_TRUE(mrs(&without, Owners{{kPid, kPid + 1}, false}).ok());
  EXPECT_EQ(mrns(without), (std::vector<uint32_t>{1, 2}));
}

TEST(RestrackParse, KeepsOnlyThePidsEntriesWithTheirAttributes) {
  DeviceDump dump;
  Message m = Mrs();
  m.Entry(kPid).U32(RDMA_NLDEV_ATTR_RES_MRN, 5).U32(RDMA_NLDEV_ATTR_RES_PDN, 2).U64(RDMA_NLDEV_ATTR_RES_MRLEN, 4096)
      .U32(RDMA_NLDEV_ATTR_RES_LKEY, 0x1234).U32(RDMA_NLDEV_ATTR_RES_RKEY, 0x1234);
  m.Entry(kOther).U32(RDMA_NLDEV_ATTR_RES_MRN, 6).U32(RDMA_NLDEV_ATTR_RES_PDN, 9).U64(RDMA_NLDEV_ATTR_RES_MRLEN, 8);
  m.Entry(std::nullopt).U32(RDMA_NLDEV_ATTR_RES_MRN, 7).U64(RDMA_NLDEV_ATTR_RES_MRLEN, 8);
  ASSERT_TRUE(ParseResMessage(m.Done(), kPid, &dump).ok());
  EXPECT_EQ(dump.index, 3u);
  EXPECT_EQ(dump.name, "rxe0");
  ASSERT_EQ(dump.mrs.size(), 1u);
  EXPECT_EQ(dump.mrs[0].mrn, 5u);
  EXPECT_EQ(dump.mrs[0].pdn, 2u);
  EXPECT_EQ(dump.mrs[0].length, 4096u);
  EXPECT_EQ(dump.mrs[0].lkey, 0x1234u);

  Message q = Qps();
  q.Entry(kPid).U32(RDMA_NLDEV_ATTR_RES_LQPN, 17).U32(RDMA_NLDEV_ATTR_RES_PDN, 2);
  ASSERT_TRUE(ParseResMessage(q.Done(), kPid, &dump).ok());
  ASSERT_EQ(dump.qps.size(), 1u);
  EXPECT_EQ(dump.qps[0].qpn, 17u);
  EXPECT_EQ(dump.qps[0].pdn, 2u);

  Message p = Pds();
  p.Entry(kPid).U32(RDMA_NLDEV_ATTR_RES_PDN, 2);
  p.Entry(kPid).U32(RDMA_NLDEV_ATTR_RES_PDN, 4);
  ASSERT_TRUE(ParseResMessage(p.Done(), kPid, &dump).ok());
  ASSERT_EQ(dump.pds.size(), 2u);
  EXPECT_EQ(dump.pds[1].pdn, 4u);

  Message c = CmIds();
  c.Entry(kPid).U32(RDMA_NLDEV_ATTR_RES_CM_IDN, 1).U32(RDMA_NLDEV_ATTR_RES_PS, RDMA_PS_TCP)
      .Addr(RDMA_NLDEV_ATTR_RES_SRC_ADDR, "10.0.0.1", 7471).Addr(RDMA_NLDEV_ATTR_RES_DST_ADDR, "0.0.0.0", 0);
  ASSERT_TRUE(ParseResMessage(c.Done(), kPid, &dump).ok());
  ASSERT_EQ(dump.cm_ids.size(), 1u);
  EXPECT_EQ(dump.cm_ids[0].cm_idn, 1u);
  EXPECT_FALSE(dump.cm_ids[0].qpn.has_value());
  EXPECT_TRUE(dump.cm_ids[0].src == Ep("10.0.0.1", 7471));
  EXPECT_EQ(dump.cm_ids[0].src.port, 7471);
}

TEST(RestrackParse, RefusesMalformedAndForeignMessages) {
  DeviceDump dump;
  Message m = Mrs();
  m.Entry(kPid).U32(RDMA_NLDEV_ATTR_RES_PDN, 2).U64(RDMA_NLDEV_ATTR_RES_MRLEN, 1);  // no mrn
  absl::Status s = ParseResMessage(m.Done(), kPid, &dump);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("mrn"), absl::string_view::npos) << s;

  Message bad = Qps();
  bad.Entry(kPid).U64(RDMA_NLDEV_ATTR_RES_LQPN, 1);  // a u32 sent as 8 bytes
  s = ParseResMessage(bad.Done(), kPid, &dump);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("wrong size"), absl::string_view::npos) << s;

  Message other = Qps();
  nlmsghdr* nlh = const_cast<nlmsghdr*>(other.Done());
  nlh->nlmsg_type = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_RES_CQ_GET);
  EXPECT_EQ(ParseResMessage(nlh, kPid, &dump).code(), absl::StatusCode::kInvalidArgument);
  nlh->nlmsg_type = NLMSG_DONE;
  EXPECT_EQ(ParseResMessage(nlh, kPid, &dump).code(), absl::StatusCode::kInvalidArgument);
}

// A device with two PDs of ours: PD 1 has a QP, PD 2 none. rdmad's bounds region (internal) sits on PD 1.
Ours TwoPds() {
  Ours o;
  o.pds = {{1, false}, {2, false}};
  o.qps = {{10, 1, 17, false}};
  o.mrs = {{20, 1, 0x100, 4096, false}, {21, 2, 0x200, 4096, false}, {22, 1, 0x300, 64, true}};
  return o;
}

TEST(RestrackJoin, ByLkeyWhenTheDumpHasKeys) {
  DeviceDump k;
  k.qps = {{17, 5}};
  k.mrs = {{30, 5, 4096, 0x100, 0x100}, {31, 6, 4096, 0x200, 0x200}, {32, 5, 64, 0x300, 0x300}};
  const Numbers n = Join(TwoPds(), k);
  EXPECT_EQ(n.mrn[0], 30u);
  EXPECT_EQ(n.mrn[1], 31u);
  EXPECT_FALSE(n.mrn[2].has_value());  // internal: never a number
  EXPECT_EQ(n.pdn[0], 5u);             // from the QP and the MR, which agree
  EXPECT_EQ(n.pdn[1], 6u);             // from the keyed MR alone
  EXPECT_TRUE(n.qp_seen[0]);
  EXPECT_EQ(n.qp_pdn[0], 5u);
}

TEST(RestrackJoin, WithoutKeysOnlyUniquePdnAndLength) {
  DeviceDump k;  // no CAP_NET_ADMIN: no lkey/rkey
  k.qps = {{17, 5}};
  k.mrs = {{30, 5, 4096, {}, {}}, {31, 6, 4096, {}, {}}, {32, 5, 64, {}, {}}};
  Numbers n = Join(TwoPds(), k);
  EXPECT_EQ(n.pdn[0], 5u);
  EXPECT_EQ(n.mrn[0], 30u);             // PD 1's pdn is known from its QP; (5, 4096) is unique
  EXPECT_FALSE(n.mrn[1].has_value());   // PD 2 has no QP: its pdn is unknown, so is its MR's mrn
  EXPECT_FALSE(n.pdn[1].has_value());
  EXPECT_FALSE(n.mrn[2].has_value());

  // A second MR of 4096 bytes on PD 1: (pdn, length) is no longer unique: unknown, not a guess.
  Ours o = TwoPds();
  o.mrs.push_back({23, 1, 0x400, 4096, false});
  k.mrs.push_back({33, 5, 4096, {}, {}});
  n = Join(o, k);
  EXPECT_FALSE(n.mrn[0].has_value());
  EXPECT_FALSE(n.mrn[3].has_value());

  // An internal MR of the same length on the same PD makes the user's ambiguous too.
  o = TwoPds();
  o.mrs[2].length = 4096;
  k.mrs = {{30, 5, 4096, {}, {}}, {32, 5, 4096, {}, {}}};
  n = Join(o, k);
  EXPECT_FALSE(n.mrn[0].has_value());
}

TEST(RestrackJoin, ConflictingPdnsAndMissingQpsStayUnknown) {
  DeviceDump k;
  k.qps = {{17, 5}};
  k.mrs = {{30, 8, 4096, 0x100, 0x100}};  // says PD 1 is pdn 8, the QP says 5
  Numbers n = Join(TwoPds(), k);
  EXPECT_FALSE(n.pdn[0].has_value());

  k = DeviceDump{};  // the dump has nothing of ours (e.g. made after it)
  n = Join(TwoPds(), k);
  EXPECT_FALSE(n.qp_seen[0]);
  EXPECT_FALSE(n.pdn[0].has_value());
  EXPECT_FALSE(n.mrn[0].has_value());
}

TEST(RestrackJoin, CmIdsByQpnElseByUniqueAddresses) {
  Ours o;
  o.cm_ids = {
      {40, 17, RDMA_PS_TCP, Ep("10.0.0.1", 5000), Ep("10.0.0.2", 6000), false},  // connected, with a QP
      {41, {}, RDMA_PS_TCP, Ep("10.0.0.1", 7471), Ep("0.0.0.0", 0), false},      // a user's listener
      {42, {}, RDMA_PS_TCP, Ep("10.0.0.1", 7470), Ep("0.0.0.0", 0), true},       // the data plane's listener
      {43, {}, RDMA_PS_TCP, Ep("0.0.0.0", 0), Ep("0.0.0.0", 0), false},          // two fresh ids:
      {44, {}, RDMA_PS_TCP, Ep("0.0.0.0", 0), Ep("0.0.0.0", 0), false},          // indistinguishable
  };
  DeviceDump k;
  k.cm_ids = {
      {1, 17, RDMA_PS_TCP, Ep("10.0.0.1", 5000), Ep("10.0.0.2", 6000)},
      {2, {}, RDMA_PS_TCP, Ep("10.0.0.1", 7471), Ep("0.0.0.0", 0)},
      {3, {}, RDMA_PS_TCP, Ep("10.0.0.1", 7470), Ep("0.0.0.0", 0)},
      {4, {}, RDMA_PS_TCP, Ep("0.0.0.0", 0), Ep("0.0.0.0", 0)},
      {5, {}, RDMA_PS_TCP, Ep("0.0.0.0", 0), Ep("0.0.0.0", 0)},
  };
  const Numbers n = Join(o, k);
  EXPECT_EQ(n.cm_idn[0], 1u);
  EXPECT_EQ(n.cm_idn[1], 2u);
  EXPECT_FALSE(n.cm_idn[2].has_value());
  EXPECT_FALSE(n.cm_idn[3].has_value());
  EXPECT_FALSE(n.cm_idn[4].has_value());

  // Same listener address in another port space: not the same id.
  o.cm_ids[1].ps = RDMA_PS_UDP;
  EXPECT_FALSE(Join(o, k).cm_idn[1].has_value());
}

}  // namespace
}  // namespace rdmad::verbs::restrack
