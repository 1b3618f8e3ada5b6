// ListKernelIds (docs/api.md#kernel-object-numbers) through a whole rdmad in-process
// (tests/support/daemon_fixture.h) over the fake fabric, whose Device::KernelObjects lists its live objects
// with the fake's ids as the kernel's numbers: regions matched by key when the dump has keys, by (pdn,
// length) when it has not and only where that pair is unique, PDs through their QPs and keyed regions;
// nothing ambiguous is given a number; a tenant sees only its own objects; bad device names get the usual
// errors. The real kernel's dump is checked in the Soft-RoCE guest (tests/conformance/kernel_ids.sh).
#include <map>
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "rdmad/v1/rdmad.grpc.pb.h"
#include "server/config.h"
#include "tests/support/daemon_fixture.h"
#include "tests/unit/fake_fabric.h"

namespace rdmad {
namespace {

using ::testing::IsEmpty;
using ::testing::Not;

class KernelIdsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Config> c = ParseConfig(R"({
      "admins": ["ops"],
      "tenants": [{"name": "a", "principals": ["spiffe://t/a"]},
                  {"name": "b", "principals": ["spiffe://t/b"]}]})");
    ASSERT_TRUE(c.ok()) << c.status();
    rdmad_.config().admins = c->admins;
    rdmad_.config().tenants = c->tenants;
    ASSERT_TRUE(rdmad_.Start().ok());
  }

  client::Client As(const std::string& who) { return rdmad_.ClientAs(who); }
  static v1::ProtectionDomain Pd(client::Client& c) {
    v1::CreatePdRequest r;
    r.set_device("rxe0");
    absl::StatusOr<v1::ProtectionDomain> pd = c.CreatePd(r);
    EXPECT_TRUE(pd.ok()) << pd.status();
    return pd.value_or(v1::ProtectionDomain());
  }
  static v1::MemoryRegion Mr(client::Client& c, const std::string& pd, uint64_t size) {
    v1::RegisterMrRequest r;
    r.set_pd(pd);
    r.mutable_source()->mutable_anonymous()->set_size(size);
    r.add_access(v1::LOCAL_WRITE);
    absl::StatusOr<v1::MemoryRegion> mr = c.RegisterMr(r);
    EXPECT_TRUE(mr.ok()) << mr.status();
    return mr.value_or(v1::MemoryRegion());
  }
  static v1::QueuePair Qp(client::Client& c, const std::string& pd) {
    v1::CreateQpRequest r;
    r.set_pd(pd);
    absl::StatusOr<v1::QueuePair> qp = c.CreateQp(r);
    EXPECT_TRUE(qp.ok()) << qp.status();
    return qp.value_or(v1::QueuePair());
  }
  // name -> number, of one ListKernelIds.
  static std::map<std::string, uint32_t> Ids(const v1::ListKernelIdsResponse& r) {
    std::map<std::string, uint32_t> out;
    for (const v1::KernelId& id : r.ids()) out[id.name()] = id.number();
    return out;
  }
  // The fake's id of a live region, and of its PD: what its KernelObjects reports as mrn and pdn.
  uint32_t FakeMrn(const v1::MemoryRegion& mr) const {
    return static_cast<uint32_t>(rdmad_.ledger()->MrIdByLkey(mr.lkey()));
  }
  uint32_t FakePdn(const v1::MemoryRegion& mr) const {
    return static_cast<uint32_t>(rdmad_.ledger()->Mr(rdmad_.ledger()->MrIdByLkey(mr.lkey())).pd);
  }

  test::DaemonFixture rdmad_;
};

TEST_F(KernelIdsTest, WithKeysEveryRegionQpAndPdGetsItsNumber) {
  client::Client ops = As("ops");
  v1::ProtectionDomain pd = Pd(ops), pd2 = Pd(ops);
  v1::MemoryRegion a = Mr(ops, pd.name(), 4096), b = Mr(ops, pd.name(), 4096), c = Mr(ops, pd2.name(), 8192);
  v1::QueuePair qp = Qp(ops, pd.name());
  absl::StatusOr<v1::ListKernelIdsResponse> r = ops.ListKernelIds("devices/rxe0");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->keyed());
  std::map<std::string, uint32_t> ids = Ids(*r);
  // Two regions of one length in one PD: keys tell them apart.
  EXPECT_EQ(ids[a.name()], FakeMrn(a));
  EXPECT_EQ(ids[b.name()], FakeMrn(b));
  EXPECT_NE(ids[a.name()], ids[b.name()]);
  EXPECT_EQ(ids[c.name()], FakeMrn(c));
  EXPECT_EQ(ids[pd.name()], FakePdn(a));
  EXPECT_EQ(ids[pd2.name()], FakePdn(c));
  EXPECT_NE(ids[pd.name()], ids[pd2.name()]);
  EXPECT_EQ(ids[qp.name()], qp.local().qpn());
  EXPECT_EQ(r->unknown(), 0u) << r->DebugString();
  // In the order of their names: kind, then number.
  std::vector<std::string> names;
  for (const v1::KernelId& id : r->ids()) names.push_back(id.name());
  EXPECT_EQ(names, (std::vector<std::string>{pd.name(), pd2.name(), a.name(), b.name(), c.name(), qp.name()}));
  // "rxe0" names the same device.
  absl::StatusOr<v1::ListKernelIdsResponse> bare = ops.ListKernelIds("rxe0");
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ(Ids(*bare), ids);
}

TEST_F(KernelIdsTest, WithoutKeysOnlyUniqueLengthsInAPdWithAKnownPdnAreMatched) {
  rdmad_.ledger()->HideKernelKeys(true);  // a caller without CAP_NET_ADMIN
  client::Client ops = As("ops");
  v1::ProtectionDomain with_qp = Pd(ops), without_qp = Pd(ops);
  v1::QueuePair qp = Qp(ops, with_qp.name());
  v1::MemoryRegion twin1 = Mr(ops, with_qp.name(), 4096), twin2 = Mr(ops, with_qp.name(), 4096);
  v1::MemoryRegion single = Mr(ops, with_qp.name(), 8192);
  v1::MemoryRegion elsewhere = Mr(ops, without_qp.name(), 16384);
  absl::StatusOr<v1::ListKernelIdsResponse> r = ops.ListKernelIds("rxe0");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->keyed());
  std::map<std::string, uint32_t> ids = Ids(*r);
  EXPECT_EQ(ids.count(twin1.name()), 0u);  // two of that length in that PD: ambiguous
  EXPECT_EQ(ids.count(twin2.name()), 0u);
  EXPECT_EQ(ids[single.name()], FakeMrn(single));
  EXPECT_EQ(ids[with_qp.name()], FakePdn(single));  // through its QP
  EXPECT_EQ(ids.count(without_qp.name()), 0u);      // no QP, no keys: nothing tells its pdn
  EXPECT_EQ(ids.count(elsewhere.name()), 0u);       // and so not its region's either
  EXPECT_EQ(ids[qp.name()], qp.local().qpn());
  EXPECT_EQ(r->unknown(), 4u) << r->DebugString();
}

TEST_F(KernelIdsTest, ATenantSeesOnlyItsOwnObjects) {
  client::Client a = As("spiffe://t/a"), b = As("spiffe://t/b"), ops = As("ops");
  v1::ProtectionDomain pd_a = Pd(a), pd_b = Pd(b);
  v1::MemoryRegion mr_a = Mr(a, pd_a.name(), 4096), mr_b = Mr(b, pd_b.name(), 4096);
  absl::StatusOr<v1::ListKernelIdsResponse> seen_by_a = a.ListKernelIds("rxe0");
  ASSERT_TRUE(seen_by_a.ok()) << seen_by_a.status();
  std::map<std::string, uint32_t> ids = Ids(*seen_by_a);
  EXPECT_EQ(ids[mr_a.name()], FakeMrn(mr_a));
  EXPECT_EQ(ids[pd_a.name()], FakePdn(mr_a));
  EXPECT_EQ(ids.count(mr_b.name()), 0u);
  EXPECT_EQ(ids.count(pd_b.name()), 0u);
  EXPECT_EQ(seen_by_a->unknown(), 0u);  // b's objects are not counted either
  absl::StatusOr<v1::ListKernelIdsResponse> all = ops.ListKernelIds("rxe0");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(Ids(*all).count(mr_b.name()), 1u);
}

TEST_F(KernelIdsTest, BadDeviceNamesGetTheUsualErrors) {
  client::Client ops = As("ops");
  absl::StatusOr<v1::ListKernelIdsResponse> none = ops.ListKernelIds("");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument) << none.status();
  EXPECT_EQ(client::Detail(none.status()).field(), "device");
  absl::StatusOr<v1::ListKernelIdsResponse> missing = ops.ListKernelIds("mlx5_9");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  EXPECT_EQ(client::Detail(missing.status()).field(), "device");
  absl::StatusOr<v1::ListKernelIdsResponse> bad = ops.ListKernelIds("pds/1");
  EXPECT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), Not(IsEmpty()));
}

}  // namespace
}  // namespace rdmad
