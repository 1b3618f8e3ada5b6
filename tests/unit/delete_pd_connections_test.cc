// DeletePd and the PD's data-plane connections, through a whole rdmad in-process
// (tests/support/daemon_fixture.h) over the fake fabric and the fake rdma_cm: a connection's QP lives in its
// token's PD, so the PD cannot go while one is open. An ended grant's connection stays for its end grace
// (grant_end_grace_ms, long here); DeletePd closes it then and there instead of refusing. A plain connect
// token's connection is closed by a cascade and refused without one.
#include <deque>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "client/client.h"
#include "rdmad/v1/rdmad.grpc.pb.h"
#include "tests/support/daemon_fixture.h"
#include "tests/support/eventually.h"
#include "tests/unit/fake_client.h"
#include "tests/unit/fake_fabric.h"

namespace rdmad {
namespace {

using ::rdmad::test::Eventually;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class DeletePdConnectionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rdmad_.config().grant_end_grace_ms = 10000;  // an ended grant's connection outlives every step below
    ASSERT_TRUE(rdmad_.Start().ok());
    v1::CreatePdRequest pd;
    pd.set_device("rxe0");
    absl::StatusOr<v1::ProtectionDomain> made = root_.CreatePd(pd);
    ASSERT_TRUE(made.ok()) << made.status();
    pd_ = made->name();
    v1::RegisterMrRequest mr;
    mr.set_pd(pd_);
    mr.mutable_source()->mutable_anonymous()->set_size(1 << 20);
    for (v1::Access a : {v1::LOCAL_WRITE, v1::REMOTE_READ, v1::MW_BIND}) mr.add_access(a);
    absl::StatusOr<v1::MemoryRegion> region = root_.RegisterMr(mr);
    ASSERT_TRUE(region.ok()) << region.status();
    mr_ = region->name();
  }
  void TearDown() override {
    for (test::FakeClient& c : clients_) c.Leave();
  }

  // A client connected with `token`; ESTABLISHED is checked.
  test::FakeClient& Dial(const std::string& token) {
    clients_.emplace_back();
    EXPECT_EQ(clients_.back().Dial(*rdmad_.cm(), rdmad_.device(), token).type, fabric::CmEventType::kEstablished);
    return clients_.back();
  }
  // A grant on the region, its client connected and the grant ACTIVE.
  v1::Grant Active() {
    v1::IssueGrantRequest r;
    r.set_mr(mr_);
    r.set_length(4096);
    r.set_principal("app");
    absl::StatusOr<v1::IssuedGrant> issued = root_.IssueGrant(r);
    EXPECT_TRUE(issued.ok()) << issued.status();
    if (!issued.ok()) return {};
    Dial(issued->token());
    const std::string name = issued->grant().name();
    EXPECT_TRUE(Eventually([&] { return root_.GetGrant(name).value().state() == v1::GRANT_ACTIVE; }));
    return root_.GetGrant(name).value();
  }
  // The data-plane connections on the PD, as ListCmIds shows them to an admin.
  size_t Connections() {
    size_t n = 0;
    const v1::ListCmIdsResponse ids = root_.ListCmIds().value();
    for (const v1::CmId& id : ids.cm_ids()) n += id.pd() == pd_ ? 1 : 0;
    return n;
  }
  // Whether the client heard its connection end (DISCONNECTED).
  static bool Disconnected(test::FakeClient& c) {
    return Eventually([&] {
      for (const fabric::CmEvent& e : c.channel->Drain()) {
        if (e.type == fabric::CmEventType::kDisconnected) return true;
      }
      return false;
    });
  }

  test::DaemonFixture rdmad_;
  client::Client root_ = rdmad_.Client();
  std::deque<test::FakeClient> clients_;
  std::string pd_, mr_;
};

// Revoked, its connection in the grace: DeletePd closes it and goes on.
TEST_F(DeletePdConnectionsTest, ARevokedGrantsConnectionInItsGraceDoesNotHoldThePd) {
  v1::Grant g = Active();
  test::FakeClient& client = clients_.back();
  ASSERT_TRUE(root_.RevokeGrant(g.name()).ok());
  ASSERT_EQ(Connections(), 1u);  // still there: the grace is 10 s
  absl::StatusOr<v1::DeletePdResponse> deleted = root_.DeletePd(pd_, /*cascade=*/true, /*revoke_grants=*/false);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_THAT(deleted->deleted(), ElementsAre(mr_, pd_));
  EXPECT_TRUE(Disconnected(client));
  EXPECT_EQ(Connections(), 0u);
}

// Live grants revoked by the deletion itself (revoke_grants): their connections go with the PD.
TEST_F(DeletePdConnectionsTest, RevokeGrantsAndCascadeTakeTheGrantsConnectionsWithThePd) {
  Active();
  Active();
  ASSERT_EQ(Connections(), 2u);
  absl::StatusOr<v1::DeletePdResponse> deleted = root_.DeletePd(pd_, /*cascade=*/true, /*revoke_grants=*/true);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_THAT(deleted->deleted(), ElementsAre(mr_, pd_));
  for (test::FakeClient& c : clients_) EXPECT_TRUE(Disconnected(c));
  EXPECT_EQ(Connections(), 0u);
}

// A plain connect token's connection is the application's: without cascade the PD stays, with it the
// connection is closed.
TEST_F(DeletePdConnectionsTest, AConnectTokensConnectionIsClosedByACascadeOnly) {
  ASSERT_TRUE(root_.DeregisterMr(mr_).ok());
  v1::IssueConnectTokenRequest issue;
  issue.set_pd(pd_);
  absl::StatusOr<v1::ConnectToken> token = root_.IssueConnectToken(issue);
  ASSERT_TRUE(token.ok()) << token.status();
  test::FakeClient& client = Dial(token->token());
  absl::StatusOr<v1::DeletePdResponse> kept = root_.DeletePd(pd_);
  EXPECT_EQ(kept.status().code(), absl::StatusCode::kFailedPrecondition) << kept.status();
  EXPECT_THAT(std::string(kept.status().message()),
              HasSubstr(" has 1 open data-plane connection(s) of connect tokens (cmids/"));
  EXPECT_THAT(std::string(kept.status().message()), HasSubstr("ask for a cascade, which closes them"));
  EXPECT_EQ(Connections(), 1u);
  absl::StatusOr<v1::DeletePdResponse> deleted = root_.DeletePd(pd_, /*cascade=*/true);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_THAT(deleted->deleted(), ElementsAre(pd_));
  EXPECT_TRUE(Disconnected(client));
  EXPECT_EQ(Connections(), 0u);
}

// A name that is no PD is refused as malformed, with or without cascade, and never reaches rdmad's own
// data-plane listener (whose id has no PD): a client still connects after.
TEST_F(DeletePdConnectionsTest, ANameThatIsNoPdIsRefusedAndTheListenerStays) {
  for (bool cascade : {false, true}) {
    for (const char* name : {"", "pds/", "mrs/1"}) {
      absl::StatusOr<v1::DeletePdResponse> r = root_.DeletePd(name, cascade);
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << "'" << name << "': " << r.status();
    }
  }
  v1::IssueConnectTokenRequest issue;
  issue.set_pd(pd_);
  absl::StatusOr<v1::ConnectToken> token = root_.IssueConnectToken(issue);
  ASSERT_TRUE(token.ok()) << token.status();
  Dial(token->token());
  EXPECT_EQ(Connections(), 1u);
}

}  // namespace
}  // namespace rdmad
