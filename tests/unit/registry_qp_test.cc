// Unit tests of rdmad::Registry over the fake fabric (registry_fixture.h): queue pairs (created in INIT,
// connected to RTS, the remote's QPN, PSN and LID range-checked, port and GID index), names' one canonical
// form, and deleting the QP a type 1 window was bound through.
//
// Threads: the test's own; the registry's dispatchers run the bind completions its calls wait for.
#include <cerrno>
#include <string>

#include <gtest/gtest.h>

#include "server/common/status.h"
#include "tests/support/server_status.h"
#include "tests/support/status.h"
#include "tests/unit/registry_fixture.h"

namespace rdmad::registry_test {
namespace {

using ::rdmad::test::IsError;

// ---------------------------------------------------------------------------------------------------------
// Queue pairs

TEST_F(RegistryTest, QueuePairsAreCreatedInInitAndConnectToRts) {
  const std::string pd = NewPd();
  v1::QueuePair qp = NewQp(pd, false);
  EXPECT_EQ(qp.name(), "qps/1");
  EXPECT_EQ(qp.pd(), pd);
  EXPECT_EQ(qp.state(), v1::QP_INIT);
  EXPECT_EQ(qp.port(), 1u);
  EXPECT_EQ(qp.gid_index(), 1u);  // the IPv4-mapped RoCEv2 GID
  EXPECT_EQ(qp.local().gid(), "0000:0000:0000:0000:0000:ffff:0a00:0001");
  EXPECT_FALSE(qp.has_remote());
  EXPECT_EQ(Pd(pd).qp_count(), 1u);

  EXPECT_TRUE(IsError(registry_->ConnectQp(ConnectReq(qp.name(), 0)), absl::StatusCode::kInvalidArgument,
                      "remote.qpn"));
  EXPECT_TRUE(IsError(registry_->ConnectQp(ConnectReq(qp.name(), 0x1000000)), absl::StatusCode::kInvalidArgument,
                      "remote.qpn"));
  EXPECT_TRUE(IsError(registry_->ConnectQp(ConnectReq(qp.name(), 5, 0x1000000)),
                      absl::StatusCode::kInvalidArgument, "remote.psn"));
  EXPECT_EQ(ledger_->calls("connect"), 0);

  ledger_->FailNextConnect(ETIMEDOUT);
  absl::StatusOr<v1::QueuePair> failed = registry_->ConnectQp(ConnectReq(qp.name()));
  EXPECT_EQ(ErrnoOf(failed.status()), ETIMEDOUT);
  EXPECT_FALSE(Qp(qp.name()).has_remote());

  v1::QueuePair connected = OK(registry_->ConnectQp(ConnectReq(qp.name(), 0x4242, 9)));
  EXPECT_EQ(connected.state(), v1::QP_RTS);
  EXPECT_EQ(connected.remote().qpn(), 0x4242u);
  EXPECT_EQ(connected.remote().psn(), 9u);

  v1::CreateQpRequest r;
  r.set_pd(pd);
  r.set_port(2);
  EXPECT_TRUE(IsError(registry_->CreateQp(r), absl::StatusCode::kInvalidArgument, "port"));
  r.set_port(1);
  r.set_gid_index(5);
  EXPECT_TRUE(IsError(registry_->CreateQp(r), absl::StatusCode::kInvalidArgument, "gid_index"));
  r.set_gid_index(0);
  EXPECT_EQ(OK(registry_->CreateQp(r)).gid_index(), 0u);
  EXPECT_EQ(registry_->ListQps().size(), 2u);
}

// BUG (server/registry/registry.cc, Registry::ConnectQp): remote.qpn and remote.psn are range-checked, but
// remote.lid (a uint32 on the wire, a 16-bit LID in verbs) is narrowed with static_cast<uint16_t> without
// a check: lid 0x10001 silently becomes LID 1, so the QP is connected to a different port than the one
// asked for, the call succeeds, and GetQp then reports remote.lid 1. Expected: INVALID_ARGUMENT naming
// "remote.lid", and nothing reaches the fabric.
TEST_F(RegistryTest, ConnectQpRejectsALidWiderThan16Bits) {
  v1::QueuePair qp = NewQp(NewPd(), /*connect=*/false);
  v1::ConnectQpRequest req = ConnectReq(qp.name());
  req.mutable_remote()->set_lid(0x10001);
  absl::StatusOr<v1::QueuePair> r = registry_->ConnectQp(req);
  EXPECT_TRUE(IsError(r, absl::StatusCode::kInvalidArgument, "remote.lid"));
  EXPECT_EQ(ledger_->calls("connect"), 0);
  EXPECT_EQ(Qp(qp.name()).state(), v1::QP_INIT);
}

TEST_F(RegistryTest, NamesHaveOneCanonicalForm) {
  const std::string pd = NewPd();
  ASSERT_EQ(pd, "pds/1");
  for (const char* alias : {"pds/01", "pds/+1", "pds/ 1", "pds/1 ", "pds/", "pds/0x1"}) {
    EXPECT_TRUE(IsError(registry_->GetPd(alias), absl::StatusCode::kInvalidArgument, "name")) << alias;
  }
}

TEST_F(RegistryTest, DeletingTheQpAType1WindowWasBoundThroughClearsItFromTheBinding) {
  const std::string pd = NewPd();
  v1::QueuePair qp = NewQp(pd, /*connect=*/true);
  v1::RegisterMrRequest r;
  r.set_pd(pd);
  r.mutable_source()->mutable_anonymous()->set_size(8192);
  r.add_access(v1::LOCAL_WRITE);
  r.add_access(v1::MW_BIND);
  ASSERT_OK_AND_ASSIGN(v1::MemoryRegion mr, registry_->RegisterMr(r));
  v1::AllocMwRequest a;
  a.set_pd(pd);
  a.set_type(v1::TYPE_1);
  ASSERT_OK_AND_ASSIGN(v1::MemoryWindow mw, registry_->AllocMw(a));
  v1::BindMwRequest b;
  b.set_name(mw.name());
  b.set_mr(mr.name());
  b.set_length(4096);
  b.add_access(v1::REMOTE_READ);
  b.set_qp(qp.name());
  ASSERT_OK_AND_ASSIGN(v1::MemoryWindow bound, registry_->BindMw(b));
  EXPECT_EQ(bound.binding().qp(), qp.name());
  ASSERT_TRUE(registry_->DeleteQp(qp.name()).ok());
  ASSERT_OK_AND_ASSIGN(v1::MemoryWindow after, registry_->GetMw(mw.name()));
  EXPECT_TRUE(after.bound());
  EXPECT_EQ(after.binding().qp(), "");
}

}  // namespace
}  // namespace rdmad::registry_test
