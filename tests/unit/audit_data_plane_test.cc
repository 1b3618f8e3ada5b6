// The data plane's audit records, over the fake fabric and the fake rdma_cm: the CmManager's
// listener records each accept and reject, the GrantManager each grant's end, through the AuditSink they
// are given, into a real AuditLog file. The sink used here calls back into both managers from Record: it
// would deadlock if either recorded with its own lock held.
#include <fcntl.h>
#include <unistd.h>

#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "server/audit/audit_log.h"
#include "server/cm/manager.h"
#include "server/cm/token.h"
#include "server/common/status.h"
#include "server/common/sync.h"
#include "server/dataplane/listener.h"
#include "server/grants/manager.h"
#include "tests/support/eventually.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/fake_client.h"
#include "tests/unit/fake_cm.h"
#include "tests/unit/fake_fabric.h"

namespace rdmad {
namespace {

using ::rdmad::test::Eventually;

using ::rdmad::test::TempDir;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

constexpr char kAddr[] = "10.0.2.15";
constexpr uint16_t kPort = 7471;

// Forwards to the AuditLog, after looking into both managers (which take their locks).
class ProbingSink final : public audit::AuditSink {
 public:
  void Record(const audit::Event& e) override {
    if (cm != nullptr) (void)cm->ListCmIds(v1::ListCmIdsRequest());
    if (grants != nullptr) (void)grants->List(v1::ListGrantsRequest());
    {
      MutexLock lock(&mu);
      count++;
    }
    log->Record(e);
  }
  int Count() {
    MutexLock lock(&mu);
    return count;
  }
  audit::AuditLog* log = nullptr;
  cm::CmManager* cm = nullptr;
  grants::GrantManager* grants = nullptr;
  Mutex mu;
  int count = 0;
};

class AuditDataPlaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log_ = audit::AuditLog::Open(dir_.Sub("audit.log"), {}).value();
    sink_.log = log_.get();
    ledger_ = std::make_shared<fake::FakeLedger>();
    auto fabric = std::make_unique<fake::FakeFabric>(std::vector<fabric::DeviceInfo>{fake::MakeDeviceInfo("rxe0")},
                                                     ledger_);
    fake_cm_ = std::make_unique<fake::FakeCm>(fabric->devices(), std::map<std::string, std::string>{{kAddr, "rxe0"}});
    fabric->set_cm(fake_cm_.get());
    device_ = fabric->devices()[0];
    registry_ = std::make_unique<Registry>(std::move(fabric), Registry::Options());
    cm_ = std::make_unique<cm::CmManager>(fake_cm_.get(), registry_.get(), cm::CmManager::Options());
    ASSERT_TRUE(cm_->Start().ok());
    dataplane::Listener::Options data_plane;
    data_plane.listen = {{kAddr, kPort}};
    listener_ = std::make_unique<dataplane::Listener>(cm_.get(), registry_.get(), &tokens_, data_plane);
    listener_->set_audit(&sink_);
    ASSERT_TRUE(listener_->Start().ok());
    grants::GrantManager::Options options;
    options.pool_size = 2;
    grants_ = std::make_unique<grants::GrantManager>(registry_.get(), cm_.get(), listener_.get(), &tokens_, options);
    grants_->set_audit(&sink_);
    sink_.cm = cm_.get();
    sink_.grants = grants_.get();
    v1::CreatePdRequest pd;
    pd.set_device("rxe0");
    pd_ = registry_->CreatePd(pd).value().name();
    v1::RegisterMrRequest r;
    r.set_pd(pd_);
    r.mutable_source()->mutable_anonymous()->set_size(1 << 20);
    for (v1::Access a : {v1::LOCAL_WRITE, v1::REMOTE_READ, v1::MW_BIND}) r.add_access(a);
    mr_ = registry_->RegisterMr(r).value().name();
  }
  void TearDown() override {
    for (test::FakeClient& c : clients_) c.Leave();
    grants_->Shutdown();
    cm_->Quiesce();
    sink_.cm = nullptr;
    sink_.grants = nullptr;
    grants_.reset();
    cm_.reset();
    registry_.reset();
    EXPECT_THAT(fake_cm_->violations(), IsEmpty());
    EXPECT_THAT(ledger_->violations(), IsEmpty());
  }

  v1::IssuedGrant Issue(const std::string& principal) {
    v1::IssueGrantRequest r;
    r.set_mr(mr_);
    r.set_length(4096);
    r.set_principal(principal);
    return grants_->Issue(r).value();
  }
  // The grant, once its client connected and it became ACTIVE.
  v1::Grant Connect(const v1::IssuedGrant& issued) {
    clients_.emplace_back();
    fabric::CmEvent e = clients_.back().Dial(*fake_cm_, device_, issued.token());
    EXPECT_EQ(e.type, fabric::CmEventType::kEstablished);
    const std::string name = issued.grant().name();
    EXPECT_TRUE(Eventually([&] { return grants_->Get(name).value().state() == v1::GRANT_ACTIVE; }));
    return grants_->Get(name).value();
  }
  // The audit file's records, parsed.
  std::vector<nlohmann::json> Records() {
    std::vector<nlohmann::json> out;
    std::ifstream in(log_->path());
    for (std::string line; std::getline(in, line);) {
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      EXPECT_FALSE(j.is_discarded()) << line;
      out.push_back(j);
    }
    return out;
  }
  std::vector<nlohmann::json> RecordsOf(const std::string& method) {
    std::vector<nlohmann::json> out;
    for (nlohmann::json& j : Records()) {
      if (j["method"] == method) out.push_back(std::move(j));
    }
    return out;
  }

  TempDir dir_;
  std::unique_ptr<audit::AuditLog> log_;
  ProbingSink sink_;
  cm::TokenStore tokens_;
  std::unique_ptr<dataplane::Listener> listener_;  // outlives cm_, whose dispatchers call it
  std::shared_ptr<fake::FakeLedger> ledger_;
  std::unique_ptr<fake::FakeCm> fake_cm_;
  fabric::Device* device_ = nullptr;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<cm::CmManager> cm_;
  std::unique_ptr<grants::GrantManager> grants_;
  std::deque<test::FakeClient> clients_;
  std::string pd_, mr_;
};

TEST_F(AuditDataPlaneTest, AGrantsAcceptAndRevocationAndAReplayedTokensReject) {
  const v1::IssuedGrant issued = Issue("app-7");
  const v1::Grant g = Connect(issued);
  ASSERT_TRUE(Eventually([&] { return RecordsOf("data-plane accept").size() == 1; }));
  nlohmann::json accept = RecordsOf("data-plane accept")[0];
  EXPECT_EQ(accept["resource"], g.cm_id());
  EXPECT_EQ(accept["principal"], "app-7");
  EXPECT_EQ(accept["code"], "OK");
  EXPECT_THAT(accept["detail"].get<std::string>(), HasSubstr(g.name()));
  EXPECT_THAT(accept["detail"].get<std::string>(), HasSubstr(g.token()));
  EXPECT_THAT(accept["peer"].get<std::string>(), HasSubstr(":"));

  absl::StatusOr<v1::Grant> revoked =
      AwaitResult<v1::Grant>([&](Done<v1::Grant> d) { grants_->Revoke(g.name(), std::move(d)); });
  ASSERT_TRUE(revoked.ok()) << revoked.status();
  // Queued before Revoke's answer (the dispatcher does not wait for the disk), written by the state journal.
  ASSERT_TRUE(Eventually([&] { return RecordsOf("grant ended").size() == 1; }));
  std::vector<nlohmann::json> ended = RecordsOf("grant ended");
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0]["resource"], g.name());
  EXPECT_EQ(ended[0]["principal"], "app-7");
  EXPECT_THAT(ended[0]["detail"].get<std::string>(), StartsWith("END_REVOKED: "));
  EXPECT_THAT(ended[0]["detail"].get<std::string>(), HasSubstr(g.cm_id()));

  // The same token again: rejected, and recorded with the reason and the token's name (never its secret).
  test::FakeClient replay;
  fabric::CmEvent e = replay.Dial(*fake_cm_, device_, issued.token());
  EXPECT_EQ(e.type, fabric::CmEventType::kRejected);
  ASSERT_TRUE(Eventually([&] { return RecordsOf("data-plane reject").size() == 1; }));
  nlohmann::json reject = RecordsOf("data-plane reject")[0];
  EXPECT_EQ(reject["code"], "PERMISSION_DENIED");
  EXPECT_THAT(reject["detail"].get<std::string>(), HasSubstr("REPLAYED"));
  EXPECT_THAT(reject["detail"].get<std::string>(), HasSubstr(g.token()));
  EXPECT_THAT(reject["resource"].get<std::string>(), StartsWith("cmids/"));
  replay.Leave();

  // Garbage: rejected, with no token to name.
  test::FakeClient garbage;
  EXPECT_EQ(garbage.Dial(*fake_cm_, device_, std::string(32, 'x')).type, fabric::CmEventType::kRejected);
  ASSERT_TRUE(Eventually([&] { return RecordsOf("data-plane reject").size() == 2; }));
  EXPECT_THAT(RecordsOf("data-plane reject")[1]["detail"].get<std::string>(), HasSubstr("MALFORMED"));
  garbage.Leave();

  // Sequence numbers are the file's order.
  std::vector<nlohmann::json> all = Records();
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i]["sequence"], i + 1);
}

TEST_F(AuditDataPlaneTest, EveryWayAGrantEndsIsRecordedOnce) {
  // Disconnected by its client.
  const v1::Grant left = Connect(Issue("app-1"));
  clients_.back().Leave();
  // Revoked before its client ever connected (no key existed).
  const v1::IssuedGrant unused = Issue("app-2");
  ASSERT_TRUE(AwaitResult<v1::Grant>([&](Done<v1::Grant> d) { grants_->Revoke(unused.grant().name(), std::move(d)); }).ok());
  ASSERT_TRUE(Eventually([&] { return RecordsOf("grant ended").size() == 2; }));
  std::vector<nlohmann::json> ended = RecordsOf("grant ended");
  std::map<std::string, std::string> detail;
  for (const nlohmann::json& j : ended) detail[j["resource"]] = j["detail"];
  EXPECT_THAT(detail[left.name()], StartsWith("END_DISCONNECTED: "));
  EXPECT_THAT(detail[unused.grant().name()], StartsWith("END_REVOKED: "));
  // Revoking an ended grant again records nothing more.
  ASSERT_TRUE(AwaitResult<v1::Grant>([&](Done<v1::Grant> d) { grants_->Revoke(unused.grant().name(), std::move(d)); }).ok());
  EXPECT_EQ(RecordsOf("grant ended").size(), 2u);
}

TEST_F(AuditDataPlaneTest, APlainConnectTokensAccept) {
  v1::IssueConnectTokenRequest issue;
  issue.set_pd(pd_);
  absl::StatusOr<v1::ConnectToken> token = listener_->IssueConnectToken(issue);
  ASSERT_TRUE(token.ok()) << token.status();
  clients_.emplace_back();
  (void)clients_.back().Dial(*fake_cm_, device_, token->token());
  ASSERT_TRUE(Eventually([&] { return RecordsOf("data-plane accept").size() == 1; }));
  nlohmann::json accept = RecordsOf("data-plane accept")[0];
  EXPECT_THAT(accept["detail"].get<std::string>(), HasSubstr(token->name()));
  EXPECT_THAT(accept["detail"].get<std::string>(), HasSubstr(pd_));
  EXPECT_THAT(accept["resource"].get<std::string>(), StartsWith("cmids/"));
}

}  // namespace
}  // namespace rdmad
