// Sessions (data-plane protocol version 2, docs/PROTOCOL.md#sessions) through a whole rdmad in-process
// (tests/support/daemon_fixture.h) over the fake fabric and the fake rdma_cm: a client that offers version 2
// with its first grant's token gets a connection on which it activates further grants with ACTIVATE
// messages, each answered on that one QP; bad tokens are refused with the connect request's reasons; one
// grant's end leaves the others; the connection goes after its last grant, or with its client. A client that
// offers nothing still speaks version 1.
#include <deque>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "client/client.h"
#include "proto/wire/grant_message.h"
#include "proto/wire/handshake.h"
#include "rdmad/v1/rdmad.grpc.pb.h"
#include "server/grants/manager.h"
#include "tests/support/daemon_fixture.h"
#include "tests/support/eventually.h"
#include "tests/unit/fake_client.h"
#include "tests/unit/fake_fabric.h"

namespace rdmad {
namespace {

using ::rdmad::test::Eventually;
using ::testing::HasSubstr;

class SessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rdmad_.config().grant_end_grace_ms = 200;
    ASSERT_TRUE(rdmad_.Start().ok());
    pd_ = NewPd();
    mr_ = NewMr(pd_);
  }
  void TearDown() override {
    for (test::FakeClient& c : clients_) c.Leave();
  }

  std::string NewPd() {
    v1::CreatePdRequest pd;
    pd.set_device("rxe0");
    absl::StatusOr<v1::ProtectionDomain> made = root_.CreatePd(pd);
    EXPECT_TRUE(made.ok()) << made.status();
    return made.ok() ? made->name() : "";
  }
  std::string NewMr(const std::string& pd) {
    v1::RegisterMrRequest mr;
    mr.set_pd(pd);
    mr.mutable_source()->mutable_anonymous()->set_size(1 << 20);
    for (v1::Access a : {v1::LOCAL_WRITE, v1::REMOTE_READ, v1::MW_BIND}) mr.add_access(a);
    absl::StatusOr<v1::MemoryRegion> region = root_.RegisterMr(mr);
    EXPECT_TRUE(region.ok()) << region.status();
    return region.ok() ? region->name() : "";
  }
  v1::IssuedGrant Issue(const std::string& mr, uint64_t offset = 0, uint64_t length = 4096) {
    v1::IssueGrantRequest r;
    r.set_mr(mr);
    r.set_offset(offset);
    r.set_length(length);
    r.set_principal("app");
    absl::StatusOr<v1::IssuedGrant> issued = root_.IssueGrant(r);
    EXPECT_TRUE(issued.ok()) << issued.status();
    return issued.ok() ? *issued : v1::IssuedGrant();
  }
  // Connects with `token`, offering `version` (1: the token alone); the ESTABLISHED event is returned.
  fabric::CmEvent Dial(const std::string& token, uint8_t version) {
    clients_.emplace_back();
    const std::string data = version >= 2 ? wire::EncodeConnectRequest(token, version) : token;
    return clients_.back().Dial(*rdmad_.cm(), rdmad_.device(), data);
  }
  // The QP number of rdmad's side of a grant's connection.
  uint32_t ServerQpn(const std::string& grant) {
    const std::string qp = root_.GetGrant(grant).value().qp();
    return root_.GetQp(qp).value().local().qpn();
  }
  // The messages rdmad sent on that QP, decoded; waits until there are at least `n`.
  std::vector<wire::GrantMessage> Messages(uint32_t qpn, size_t n) {
    std::vector<wire::GrantMessage> out;
    Eventually([&] {
      out.clear();
      for (const std::string& bytes : rdmad_.ledger()->Sent(qpn)) {
        absl::StatusOr<wire::GrantMessage> m = wire::DecodeGrantMessage(bytes);
        EXPECT_TRUE(m.ok()) << m.status();
        if (m.ok()) out.push_back(*m);
      }
      return out.size() >= n;
    });
    return out;
  }
  static std::string Release(uint64_t grant_id, uint64_t tag) {
    wire::GrantMessage m;
    m.version = wire::kSessionMessageVersion;
    m.type = wire::GrantMessageType::kRelease;
    m.grant_id = grant_id;
    m.tag = tag;
    return wire::EncodeGrantMessage(m);
  }
  static uint64_t IdOf(const std::string& grant) { return std::stoull(grant.substr(grant.find('/') + 1)); }
  // A session opened with `grant`'s token, the grant ACTIVE; null (a test failure) otherwise.
  test::FakeClient* OpenSession(const v1::IssuedGrant& grant) {
    if (Dial(grant.token(), 2).type != fabric::CmEventType::kEstablished) {
      ADD_FAILURE() << "no session for " << grant.grant().name();
      return nullptr;
    }
    if (!Eventually([&] { return State(grant.grant().name()) == v1::GRANT_ACTIVE; })) {
      ADD_FAILURE() << grant.grant().name() << " never became ACTIVE";
      return nullptr;
    }
    return &clients_.back();
  }
  // `grant` activated on `session` with `tag`, and ACTIVE.
  bool Join(test::FakeClient& session, const v1::IssuedGrant& grant, uint64_t tag) {
    return session.Send(Activate(grant.token(), tag)).ok() &&
           Eventually([&] { return State(grant.grant().name()) == v1::GRANT_ACTIVE; });
  }
  static std::string Activate(const std::string& token, uint64_t tag) {
    wire::GrantMessage m;
    m.version = wire::kSessionMessageVersion;
    m.type = wire::GrantMessageType::kActivate;
    m.tag = tag;
    m.token = token;
    return wire::EncodeGrantMessage(m);
  }
  v1::GrantState State(const std::string& grant) { return root_.GetGrant(grant).value().state(); }
  size_t Connections() {
    size_t n = 0;
    const v1::ListCmIdsResponse ids = root_.ListCmIds().value();
    for (const v1::CmId& id : ids.cm_ids()) n += id.pd() == pd_ ? 1 : 0;
    return n;
  }
  static bool Disconnected(test::FakeClient& c, absl::Duration within = absl::Seconds(10)) {
    return Eventually(
        [&] {
          for (const fabric::CmEvent& e : c.channel->Drain()) {
            if (e.type == fabric::CmEventType::kDisconnected) return true;
          }
          return false;
        },
        within);
  }

  test::DaemonFixture rdmad_;
  client::Client root_ = rdmad_.Client();
  std::deque<test::FakeClient> clients_;
  std::string pd_, mr_;
};

TEST_F(SessionTest, VersionTwoIsAgreedInTheAcceptAndTheFirstKeyComesInASessionMessage) {
  v1::IssuedGrant a = Issue(mr_);
  fabric::CmEvent e = Dial(a.token(), 2);
  ASSERT_EQ(e.type, fabric::CmEventType::kEstablished);
  wire::AcceptData accept = wire::DecodeAcceptData(e.private_data);
  EXPECT_EQ(accept.version, 2);
  EXPECT_EQ(accept.credits, 16);
  ASSERT_TRUE(Eventually([&] { return State(a.grant().name()) == v1::GRANT_ACTIVE; }));
  std::vector<wire::GrantMessage> m = Messages(ServerQpn(a.grant().name()), 1);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].version, wire::kSessionMessageVersion);
  EXPECT_EQ(m[0].type, wire::GrantMessageType::kActive);
  EXPECT_EQ(m[0].tag, 0u);
  uint64_t token_id = 0;
  ASSERT_TRUE(wire::ParseTokenName(a.grant().token(), &token_id)) << a.grant().token();
  EXPECT_EQ(m[0].token_id, token_id);
}

// Thread hand-offs on a key's path, counted where its SEND is posted with its bind: from the connect
// request on rdmad's listener (cm-1) to the worker channel that accepts it, where ESTABLISHED posts the
// bind and the key, or to the pin worker that pinned the bounds region meanwhile and posts them (this fake
// device needs one): one either way. A session's ACTIVATE starts its own path on the thread that received
// it, from which the grant's bind and key go to a pin worker for the bounds region: one again.
TEST_F(SessionTest, EachKeyLeavesAfterOneThreadHandOff) {
  grants::GrantManager* grants = rdmad_.layers().grants;
  ASSERT_NE(grants, nullptr);
  const grants::GrantManager::KeyHandoffs before = grants->key_handoffs();
  v1::IssuedGrant first = Issue(mr_);
  ASSERT_EQ(Dial(first.token(), 2).type, fabric::CmEventType::kEstablished);
  ASSERT_TRUE(Eventually([&] { return State(first.grant().name()) == v1::GRANT_ACTIVE; }));
  constexpr int kMore = 5;
  for (int i = 0; i < kMore; ++i) {
    v1::IssuedGrant g = Issue(mr_, 4096 * (i + 1));
    ASSERT_TRUE(clients_.back().Send(Activate(g.token(), 100 + i)).ok());
    ASSERT_TRUE(Eventually([&] { return State(g.grant().name()) == v1::GRANT_ACTIVE; })) << g.grant().name();
  }
  const grants::GrantManager::KeyHandoffs after = grants->key_handoffs();
  EXPECT_EQ(after.keys[0] - before.keys[0], 0u);
  EXPECT_EQ(after.keys[1] - before.keys[1], 1u + kMore);
  EXPECT_EQ(after.keys[2] - before.keys[2], 0u);
  EXPECT_EQ(after.keys[3] - before.keys[3], 0u);
}

TEST_F(SessionTest, AVersionOneClientIsAnsweredAsBefore) {
  v1::IssuedGrant a = Issue(mr_);
  fabric::CmEvent e = Dial(a.token(), 1);
  ASSERT_EQ(e.type, fabric::CmEventType::kEstablished);
  EXPECT_EQ(wire::DecodeAcceptData(e.private_data).version, 1);
  ASSERT_TRUE(Eventually([&] { return State(a.grant().name()) == v1::GRANT_ACTIVE; }));
  const std::vector<std::string> sent = rdmad_.ledger()->Sent(ServerQpn(a.grant().name()));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].size(), wire::kGrantMessageSize);
}

TEST_F(SessionTest, GrantsActivatedOverOneConnectionEachGetTheirOwnKeyOnItsQp) {
  v1::IssuedGrant first = Issue(mr_);
  ASSERT_EQ(Dial(first.token(), 2).type, fabric::CmEventType::kEstablished);
  ASSERT_TRUE(Eventually([&] { return State(first.grant().name()) == v1::GRANT_ACTIVE; }));
  const uint32_t qpn = ServerQpn(first.grant().name());
  constexpr int kMore = 40;
  std::vector<v1::IssuedGrant> more;
  for (int i = 0; i < kMore; ++i) {
    more.push_back(Issue(mr_, 4096 * (i + 1)));
    ASSERT_TRUE(clients_.back().Send(Activate(more.back().token(), 100 + i)).ok());
  }
  std::vector<wire::GrantMessage> m = Messages(qpn, 1 + kMore);
  ASSERT_EQ(m.size(), 1u + kMore);
  std::set<uint32_t> keys;
  std::set<uint64_t> tags;
  for (const wire::GrantMessage& one : m) {
    EXPECT_EQ(one.type, wire::GrantMessageType::kActive);
    keys.insert(one.rkey);
    tags.insert(one.tag);
  }
  EXPECT_EQ(keys.size(), 1u + kMore) << "every grant has its own window";
  EXPECT_EQ(tags.size(), 1u + kMore) << "every answer echoes its request's tag";
  for (const v1::IssuedGrant& g : more) {
    ASSERT_TRUE(Eventually([&] { return State(g.grant().name()) == v1::GRANT_ACTIVE; })) << g.grant().name();
    const v1::Grant now = root_.GetGrant(g.grant().name()).value();
    EXPECT_EQ(now.qp(), root_.GetGrant(first.grant().name()).value().qp());
    EXPECT_EQ(now.scope(), v1::SCOPE_QP);
  }
  EXPECT_EQ(Connections(), 1u);
}

TEST_F(SessionTest, BadTokensAreRefusedWithTheConnectReasonsAndUnusedOnesStayUsable) {
  v1::IssuedGrant first = Issue(mr_);
  ASSERT_EQ(Dial(first.token(), 2).type, fabric::CmEventType::kEstablished);
  ASSERT_TRUE(Eventually([&] { return State(first.grant().name()) == v1::GRANT_ACTIVE; }));
  test::FakeClient& session = clients_.back();
  const uint32_t qpn = ServerQpn(first.grant().name());

  // Replayed: the first grant's own token again.
  ASSERT_TRUE(session.Send(Activate(first.token(), 1)).ok());
  // Unknown: a well-formed token whose secret is wrong.
  std::string forged = first.token();
  forged[20] ^= 0x55;
  ASSERT_TRUE(session.Send(Activate(forged, 2)).ok());
  // A grant on another PD: its window could not be bound on this QP.
  const std::string other_pd = NewPd();
  v1::IssuedGrant elsewhere = Issue(NewMr(other_pd));
  ASSERT_TRUE(session.Send(Activate(elsewhere.token(), 3)).ok());
  // A plain connect token.
  v1::IssueConnectTokenRequest connect;
  connect.set_pd(pd_);
  absl::StatusOr<v1::ConnectToken> plain = root_.IssueConnectToken(connect);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(session.Send(Activate(plain->token(), 4)).ok());
  // Not an ACTIVATE at all.
  ASSERT_TRUE(session.Send(std::string(64, 'x')).ok());
  // A revoked grant's token.
  v1::IssuedGrant revoked = Issue(mr_, 8192);
  ASSERT_TRUE(root_.RevokeGrant(revoked.grant().name()).ok());
  ASSERT_TRUE(session.Send(Activate(revoked.token(), 6)).ok());

  std::vector<wire::GrantMessage> m = Messages(qpn, 7);
  ASSERT_EQ(m.size(), 7u);
  std::vector<std::pair<uint64_t, wire::RejectReason>> refused;
  for (size_t i = 1; i < m.size(); ++i) {
    EXPECT_EQ(m[i].type, wire::GrantMessageType::kRefused) << i;
    refused.emplace_back(m[i].tag, static_cast<wire::RejectReason>(m[i].reason));
  }
  EXPECT_THAT(refused, ::testing::ElementsAre(std::make_pair(1u, wire::RejectReason::kReplayed),
                                              std::make_pair(2u, wire::RejectReason::kUnknown),
                                              std::make_pair(3u, wire::RejectReason::kSessionMismatch),
                                              std::make_pair(4u, wire::RejectReason::kSessionMismatch),
                                              std::make_pair(0u, wire::RejectReason::kMalformed),
                                              std::make_pair(6u, wire::RejectReason::kRevoked)));
  // The session is unharmed, and the tokens it could not take are still good where they belong.
  EXPECT_EQ(State(first.grant().name()), v1::GRANT_ACTIVE);
  EXPECT_EQ(State(elsewhere.grant().name()), v1::GRANT_ISSUED);
  EXPECT_EQ(Dial(elsewhere.token(), 2).type, fabric::CmEventType::kEstablished);
  EXPECT_TRUE(Eventually([&] { return State(elsewhere.grant().name()) == v1::GRANT_ACTIVE; }));
  EXPECT_EQ(Dial(plain->token(), 1).type, fabric::CmEventType::kEstablished);
}

TEST_F(SessionTest, OneGrantsEndLeavesTheOthersAndTheLastOneEndsTheConnection) {
  v1::IssuedGrant a = Issue(mr_);
  test::FakeClient* opened = OpenSession(a);
  ASSERT_NE(opened, nullptr);
  test::FakeClient& session = *opened;
  v1::IssuedGrant b = Issue(mr_, 4096);
  ASSERT_TRUE(Join(session, b, 7));
  const uint32_t qpn = ServerQpn(a.grant().name());

  ASSERT_TRUE(root_.RevokeGrant(b.grant().name()).ok());
  std::vector<wire::GrantMessage> m = Messages(qpn, 3);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[2].type, wire::GrantMessageType::kEnded);
  EXPECT_EQ(m[2].tag, 7u);
  EXPECT_EQ(m[2].reason, v1::END_REVOKED);
  // Well past the end grace, the connection is still there for the other grant.
  EXPECT_FALSE(Disconnected(session, absl::Milliseconds(600)));
  EXPECT_EQ(State(a.grant().name()), v1::GRANT_ACTIVE);
  EXPECT_EQ(Connections(), 1u);

  ASSERT_TRUE(root_.RevokeGrant(a.grant().name()).ok());
  EXPECT_TRUE(Disconnected(session));
  EXPECT_TRUE(Eventually([&] { return Connections() == 0; }));
}

TEST_F(SessionTest, TheClientReleasesOneGrantAndThenTheLastOne) {
  v1::IssuedGrant a = Issue(mr_);
  test::FakeClient* opened = OpenSession(a);
  ASSERT_NE(opened, nullptr);
  test::FakeClient& session = *opened;
  v1::IssuedGrant b = Issue(mr_, 4096);
  ASSERT_TRUE(Join(session, b, 7));
  const uint32_t qpn = ServerQpn(a.grant().name());
  // A grant of another connection, and one that does not exist, are not this client's to release.
  v1::IssuedGrant other = Issue(mr_, 8192);
  ASSERT_EQ(Dial(other.token(), 2).type, fabric::CmEventType::kEstablished);
  ASSERT_TRUE(Eventually([&] { return State(other.grant().name()) == v1::GRANT_ACTIVE; }));
  ASSERT_TRUE(session.Send(Release(IdOf(other.grant().name()), 20)).ok());
  ASSERT_TRUE(session.Send(Release(999999, 21)).ok());
  ASSERT_TRUE(session.Send(Release(IdOf(b.grant().name()), 22)).ok());

  std::vector<wire::GrantMessage> m = Messages(qpn, 5);
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[2].type, wire::GrantMessageType::kRefused);
  EXPECT_EQ(m[2].tag, 20u);
  EXPECT_EQ(static_cast<wire::RejectReason>(m[2].reason), wire::RejectReason::kSessionMismatch);
  EXPECT_EQ(m[3].type, wire::GrantMessageType::kRefused);
  EXPECT_EQ(m[3].tag, 21u);
  EXPECT_EQ(m[4].type, wire::GrantMessageType::kEnded);
  EXPECT_EQ(m[4].tag, 7u);  // the grant's, from its ACTIVATE
  EXPECT_EQ(m[4].reason, v1::END_RELEASED);
  EXPECT_EQ(root_.GetGrant(b.grant().name()).value().end_reason(), v1::END_RELEASED);
  EXPECT_EQ(State(a.grant().name()), v1::GRANT_ACTIVE);
  EXPECT_EQ(State(other.grant().name()), v1::GRANT_ACTIVE);
  EXPECT_FALSE(Disconnected(session, absl::Milliseconds(600)));

  // The last one: the connection goes after the grace.
  ASSERT_TRUE(session.Send(Release(IdOf(a.grant().name()), 23)).ok());
  EXPECT_TRUE(Disconnected(session));
  EXPECT_EQ(root_.GetGrant(a.grant().name()).value().end_reason(), v1::END_RELEASED);
}

TEST_F(SessionTest, AnActivationDuringTheLastGrantsGraceKeepsTheConnection) {
  rdmad_.Stop();
  rdmad_.config().grant_end_grace_ms = 2000;
  ASSERT_TRUE(rdmad_.Start().ok());
  pd_ = NewPd();
  mr_ = NewMr(pd_);
  v1::IssuedGrant a = Issue(mr_);
  test::FakeClient* opened = OpenSession(a);
  ASSERT_NE(opened, nullptr);
  test::FakeClient& session = *opened;
  ASSERT_TRUE(root_.RevokeGrant(a.grant().name()).ok());
  v1::IssuedGrant b = Issue(mr_, 4096);
  ASSERT_TRUE(session.Send(Activate(b.token(), 9)).ok());
  ASSERT_TRUE(Eventually([&] { return State(b.grant().name()) == v1::GRANT_ACTIVE; }));
  EXPECT_FALSE(Disconnected(session, absl::Milliseconds(3000)));
  EXPECT_EQ(State(b.grant().name()), v1::GRANT_ACTIVE);
}

TEST_F(SessionTest, TheClientLeavingEndsEveryGrantOnItsConnection) {
  v1::IssuedGrant a = Issue(mr_);
  ASSERT_EQ(Dial(a.token(), 2).type, fabric::CmEventType::kEstablished);
  test::FakeClient& session = clients_.back();
  std::vector<v1::IssuedGrant> more;
  for (int i = 0; i < 5; ++i) {
    more.push_back(Issue(mr_, 4096 * (i + 1)));
    ASSERT_TRUE(session.Send(Activate(more.back().token(), i + 1)).ok());
  }
  for (const v1::IssuedGrant& g : more) {
    ASSERT_TRUE(Eventually([&] { return State(g.grant().name()) == v1::GRANT_ACTIVE; }));
  }
  session.Leave();
  more.push_back(a);
  for (const v1::IssuedGrant& g : more) {
    ASSERT_TRUE(Eventually([&] { return State(g.grant().name()) == v1::GRANT_ENDED; })) << g.grant().name();
    EXPECT_EQ(root_.GetGrant(g.grant().name()).value().end_reason(), v1::END_DISCONNECTED);
  }
  EXPECT_TRUE(Eventually([&] { return Connections() == 0; }));
  // Nothing of the session is left: the PD goes without a cascade once the region is gone.
  ASSERT_TRUE(root_.DeregisterMr(mr_).ok());
  EXPECT_TRUE(root_.DeletePd(pd_).ok());
}

// Hostile: a client that takes no messages (its answers stall, as behind an empty receive queue with RNR
// retried for ever) and sends bad requests on and on. rdmad answers each with REFUSED until 64 are undelivered,
// then disconnects it: the answers never pile up, and its grant ends.
TEST_F(SessionTest, AClientFloodingBadRequestsWhileTakingNoAnswersIsCutOff) {
  v1::IssuedGrant a = Issue(mr_);
  test::FakeClient* opened = OpenSession(a);
  ASSERT_NE(opened, nullptr);
  test::FakeClient& session = *opened;
  const uint32_t qpn = ServerQpn(a.grant().name());
  rdmad_.ledger()->StallQp(qpn);
  size_t sent = 0;
  for (int i = 0; i < 500; ++i) {
    if (!session.Send(std::string(64, 'x')).ok()) break;  // refused once rdmad's QP is in the error state
    ++sent;
  }
  EXPECT_TRUE(Disconnected(session));
  EXPECT_GT(sent, 64u);
  EXPECT_TRUE(Eventually([&] { return State(a.grant().name()) == v1::GRANT_ENDED; }));
  EXPECT_EQ(root_.GetGrant(a.grant().name()).value().end_reason(), v1::END_DISCONNECTED);
  EXPECT_TRUE(Eventually([&] { return Connections() == 0; }));
}

// Hostile: a client that floods ACTIVATEs and leaves while they are being bound. Every grant that joined ends
// (DISCONNECTED, or ACTIVATION_FAILED for a bind posted after the QP broke); an ACTIVATE that rdmad takes
// after the client left is refused with its token unused, so that grant stays ISSUED. Nothing of the session is left: no connection, and once the PD is deleted no QP and no
// window on the device.
TEST_F(SessionTest, LeavingWhileActivationsAreInFlightLeavesNothingBehind) {
  v1::IssuedGrant a = Issue(mr_);
  ASSERT_EQ(Dial(a.token(), 2).type, fabric::CmEventType::kEstablished);
  test::FakeClient& session = clients_.back();
  std::vector<v1::IssuedGrant> more;
  for (int i = 0; i < 30; ++i) {
    more.push_back(Issue(mr_, 4096 * (i + 1)));
    ASSERT_TRUE(session.Send(Activate(more.back().token(), i + 1)).ok());
  }
  session.Leave();
  more.push_back(a);
  EXPECT_TRUE(Eventually([&] { return Connections() == 0; }));
  size_t ended = 0;
  for (const v1::IssuedGrant& g : more) {
    // Settled: ended, or never joined (ISSUED); never left ACTIVATING or ACTIVE on a connection that is gone.
    ASSERT_TRUE(Eventually([&] {
      const v1::GrantState s = State(g.grant().name());
      return s == v1::GRANT_ENDED || s == v1::GRANT_ISSUED;
    })) << g.grant().name();
    const v1::Grant now = root_.GetGrant(g.grant().name()).value();
    if (now.state() != v1::GRANT_ENDED) continue;
    ++ended;
    // One whose bind came after the connection broke fails to bind (its QP is in the error state).
    EXPECT_THAT(now.end_reason(), ::testing::AnyOf(v1::END_DISCONNECTED, v1::END_ACTIVATION_FAILED)) << now.name();
  }
  EXPECT_GE(ended, 1u);  // the first grant at least
  absl::StatusOr<v1::DeletePdResponse> deleted = root_.DeletePd(pd_, /*cascade=*/true, /*revoke_grants=*/true);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(rdmad_.ledger()->live().qps, 0);
  EXPECT_EQ(rdmad_.ledger()->live().mws, 0);
}

}  // namespace
}  // namespace rdmad
