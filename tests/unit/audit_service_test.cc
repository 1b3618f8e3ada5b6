// The Audit service (server/rpc/audit_service.h) of a whole rdmad in-process (tests/support/daemon_fixture.h),
// read with the client library's WatchAudit: admins only (a tenant's caller is refused), the retained history
// first with from_oldest, live records after, FAILED_PRECONDITION when the log is off, UNAVAILABLE at
// shutdown.
#include "server/rpc/audit_service.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "server/audit/audit_log.h"
#include "server/common/sync.h"
#include "server/config.h"
#include "tests/support/daemon_fixture.h"
#include "tests/support/eventually.h"

namespace rdmad {
namespace {

using namespace std::chrono_literals;
using ::rdmad::test::Eventually;
using ::testing::HasSubstr;

audit::Event Sample(int i) {
  audit::Event e;
  e.principal = "CN=admin";
  e.method = "CreatePd";
  e.resource = absl::StrCat("pds/", i);
  return e;
}

constexpr char kAdmin[] = "ops";
constexpr char kTenant[] = "spiffe://t/user";  // in tenant t

class AuditServiceTest : public ::testing::Test {
 protected:
  // Starts rdmad with an audit log (`with_log`) or without, and a client calling as `caller`: the admin, or
  // a tenant's principal. The log, or null.
  audit::AuditLog* Start(bool with_log, const std::string& caller = kAdmin) {
    Config& config = rdmad_.config();
    config.admins = {kAdmin};
    TenantConfig t;
    t.name = "t";
    t.principals = {kTenant};
    config.tenants = {t};
    config.audit = with_log ? rdmad_.dir().Sub("audit.log") : "";  // rdmad's default is stdout
    absl::Status started = rdmad_.Start();
    EXPECT_TRUE(started.ok()) << started;
    client_ = std::make_unique<client::Client>(rdmad_.ChannelAs(caller), 2000ms);
    return rdmad_.layers().audit;
  }

  // The daemon owns the log, which outlives its server: a stream's OnDone runs on a gRPC thread after its
  // client saw the end, and still unsubscribes from the log's hub.
  test::DaemonFixture rdmad_;
  std::unique_ptr<client::Client> client_;
};

TEST_F(AuditServiceTest, OnlyAdminsMayWatch) {
  Start(/*with_log=*/true, kTenant);
  int got = 0;
  absl::Status s = client_->WatchAudit(v1::WatchAuditRequest(), [&](const v1::AuditRecord&) { return ++got, true; });
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("admins only"));
  EXPECT_EQ(got, 0);
}

TEST_F(AuditServiceTest, ReplaysFromOldestThenFollowsLive) {
  audit::AuditLog* log = Start(/*with_log=*/true);
  ASSERT_NE(log, nullptr);
  log->Record(Sample(1));
  log->Record(Sample(2));

  Mutex mu;
  std::vector<v1::AuditRecord> got;
  absl::Status end;
  v1::WatchAuditRequest req;
  req.set_from_oldest(true);
  std::thread watcher([&] {
    end = client_->WatchAudit(req, [&](const v1::AuditRecord& r) {
      MutexLock lock(&mu);
      got.push_back(r);
      return got.size() < 4;  // two replayed, two live
    });
  });
  // Live records once the replay arrived (the stream is subscribed by then).
  auto count = [&] {
    MutexLock lock(&mu);
    return got.size();
  };
  EXPECT_TRUE(Eventually([&] { return count() >= 2; })) << "the replay did not arrive";
  log->Record(Sample(3));
  log->Record(Sample(4));
  watcher.join();
  EXPECT_TRUE(end.ok()) << end;
  ASSERT_EQ(got.size(), 4u);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].sequence(), i + 1);
    EXPECT_EQ(got[i].resource(), absl::StrCat("pds/", i + 1));
    EXPECT_THAT(got[i].json(), HasSubstr(absl::StrCat("\"resource\":\"pds/", i + 1, "\"")));
    EXPECT_GT(got[i].time_unix_nanos(), 0);
  }

  // after_sequence: only what came after.
  v1::WatchAuditRequest after;
  after.set_after_sequence(3);
  std::vector<uint64_t> seqs;
  absl::Status s = client_->WatchAudit(
      after, [&](const v1::AuditRecord& r) { return seqs.push_back(r.sequence()), false; });
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(seqs, std::vector<uint64_t>{4});
}

TEST_F(AuditServiceTest, ShutdownEndsTheStreamUnavailable) {
  audit::AuditLog* log = Start(/*with_log=*/true);
  ASSERT_NE(log, nullptr);
  log->Record(Sample(1));
  std::atomic<int> got{0};
  absl::Status end;
  v1::WatchAuditRequest req;
  req.set_from_oldest(true);
  std::thread watcher([&] { end = client_->WatchAudit(req, [&](const v1::AuditRecord&) { return ++got, true; }); });
  EXPECT_TRUE(Eventually([&] { return got.load() >= 1; })) << "the replay did not arrive";
  log->Shutdown();
  watcher.join();
  EXPECT_EQ(got.load(), 1);
  EXPECT_EQ(end.code(), absl::StatusCode::kUnavailable) << end;
}

TEST_F(AuditServiceTest, LogOffIsFailedPrecondition) {
  Start(/*with_log=*/false);
  absl::Status s = client_->WatchAudit(v1::WatchAuditRequest(), [](const v1::AuditRecord&) { return true; });
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(client::Detail(s).field(), "audit");
}

}  // namespace
}  // namespace rdmad
