// The Audit service (server/rpc/audit_service.h) over an in-process gRPC server, read with the client
// library's WatchAudit: admins only (the check is the caller's lambda), the retained history first with
// from_oldest, live records after, FAILED_PRECONDITION when the log is off, UNAVAILABLE at shutdown.
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
#include "tests/support/temp_dir.h"

namespace rdmad {
namespace {

using namespace std::chrono_literals;
using ::rdmad::test::TempDir;
using ::testing::HasSubstr;

audit::Event Sample(int i) {
  audit::Event e;
  e.principal = "CN=admin";
  e.method = "CreatePd";
  e.resource = absl::StrCat("pds/", i);
  return e;
}

class AuditServiceTest : public ::testing::Test {
 protected:
  void Start(audit::AuditLog* log) {
    services_ = MakeAuditServices(log, [this](const grpc::ServerContextBase&) {
      return admin_.load() ? absl::OkStatus() : absl::PermissionDeniedError("WatchAudit is for admins only");
    });
    grpc::ServerBuilder builder;
    for (auto& s : services_) builder.RegisterService(s.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    client_ = std::make_unique<client::Client>(server_->InProcessChannel(grpc::ChannelArguments()), 2000ms);
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + 2s);
  }
  // The fixture owns the log so that it outlives the server (shut down in TearDown): a stream's OnDone runs
  // on a gRPC thread after its client saw the end, and still unsubscribes from the log's hub.
  audit::AuditLog* OpenLog() {
    absl::StatusOr<std::unique_ptr<audit::AuditLog>> log = audit::AuditLog::Open(dir_.Sub("audit.log"), {});
    EXPECT_TRUE(log.ok()) << log.status();
    if (log.ok()) log_ = std::move(*log);
    return log_.get();
  }

  TempDir dir_;
  std::unique_ptr<audit::AuditLog> log_;
  std::atomic<bool> admin_{true};
  std::vector<std::unique_ptr<grpc::Service>> services_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<client::Client> client_;
};

TEST_F(AuditServiceTest, OnlyAdminsMayWatch) {
  audit::AuditLog* log = OpenLog();
  Start(log);
  admin_ = false;
  int got = 0;
  absl::Status s = client_->WatchAudit(v1::WatchAuditRequest(), [&](const v1::AuditRecord&) { return ++got, true; });
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("admins only"));
  EXPECT_EQ(got, 0);
}

TEST_F(AuditServiceTest, ReplaysFromOldestThenFollowsLive) {
  audit::AuditLog* log = OpenLog();
  Start(log);
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
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  while (count() < 2 && std::chrono::steady_clock::now() < give_up) std::this_thread::sleep_for(5ms);
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
  audit::AuditLog* log = OpenLog();
  Start(log);
  log->Record(Sample(1));
  std::atomic<int> got{0};
  absl::Status end;
  v1::WatchAuditRequest req;
  req.set_from_oldest(true);
  std::thread watcher([&] { end = client_->WatchAudit(req, [&](const v1::AuditRecord&) { return ++got, true; }); });
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  while (got.load() < 1 && std::chrono::steady_clock::now() < give_up) std::this_thread::sleep_for(5ms);
  log->Shutdown();
  watcher.join();
  EXPECT_EQ(got.load(), 1);
  EXPECT_EQ(end.code(), absl::StatusCode::kUnavailable) << end;
}

TEST_F(AuditServiceTest, LogOffIsFailedPrecondition) {
  Start(nullptr);
  absl::Status s = client_->WatchAudit(v1::WatchAuditRequest(), [](const v1::AuditRecord&) { return true; });
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(client::Detail(s).field(), "audit");
}

}  // namespace
}  // namespace rdmad
