// A whole rdmad in-process (server/daemon.h) over the fake fabric, on a unix socket in a TempDir, called through
// the client library: it serves, its grant leases follow the injected clock, its drain goes through its
// stages in order and releases every object, and configuration errors are said to be the configuration's.
//
// Threads: the test's thread starts and drains the daemon; the daemon's own threads serve.
#include "server/daemon.h"

#include <sys/stat.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/client.h"
#include "server/config.h"
#include "tests/support/daemon_fixture.h"
#include "tests/unit/fake_fabric.h"

namespace rdmad {
namespace {

// The tests start and drain the Daemon themselves: the fixture gives the options (the fake fabric on a unix
// socket in a TempDir, its fake clock) and the client, and keeps the fakes alive past the daemon.
class DaemonTest : public ::testing::Test {
 protected:
  Daemon::Options Options() { return rdmad_.Options(); }
  client::Client Connect() { return rdmad_.Client(); }
  int64_t NowNs() { return absl::ToUnixNanos(rdmad_.clock().Now()); }

  test::DaemonFixture rdmad_;
  const std::string socket_ = rdmad_.socket();
  std::shared_ptr<fake::FakeLedger> ledger_ = rdmad_.ledger();
};

TEST_F(DaemonTest, ServesDrainsInOrderAndReleasesEverything) {
  absl::StatusOr<std::unique_ptr<Daemon>> daemon = Daemon::Start(Options());
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  client::Client rdmad = Connect();

  absl::StatusOr<v1::ListDevicesResponse> devices = rdmad.ListDevices();
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->devices_size(), 1);
  EXPECT_EQ(devices->devices(0).name(), "devices/rxe0");
  const fake::FakeLedger::Counts before = ledger_->live();  // rdmad's own objects (the listener's)
  v1::CreatePdRequest pd_req;
  pd_req.set_device("rxe0");
  absl::StatusOr<v1::ProtectionDomain> pd = rdmad.CreatePd(pd_req);
  ASSERT_TRUE(pd.ok()) << pd.status();
  v1::RegisterMrRequest mr_req;
  mr_req.set_pd(pd->name());
  mr_req.mutable_source()->mutable_anonymous()->set_size(1 << 16);
  for (v1::Access a : {v1::LOCAL_WRITE, v1::REMOTE_READ, v1::MW_BIND}) mr_req.add_access(a);
  absl::StatusOr<v1::MemoryRegion> mr = rdmad.RegisterMr(mr_req);
  ASSERT_TRUE(mr.ok()) << mr.status();
  EXPECT_EQ(ledger_->live().pds, before.pds + 1);
  EXPECT_EQ(ledger_->live().mrs, before.mrs + 1);

  // The lease is decided by the injected clock, not the wall's.
  v1::IssueGrantRequest grant_req;
  grant_req.set_mr(mr->name());
  grant_req.set_length(4096);
  grant_req.set_ttl_ms(5000);
  grant_req.set_principal("reader");
  absl::StatusOr<v1::IssuedGrant> grant = rdmad.IssueGrant(grant_req);
  ASSERT_TRUE(grant.ok()) << grant.status();
  EXPECT_EQ(grant->grant().expire_time_unix_nanos(), NowNs() + absl::ToInt64Nanoseconds(absl::Seconds(5)));

  std::vector<std::string> stages;
  (*daemon)->Drain(absl::Now() + absl::Seconds(10), [&](const char* stage) { stages.push_back(stage); });
  EXPECT_EQ(stages, (std::vector<std::string>{"refusing new calls", "ending grants (SHUTDOWN)",
                                              "closing streams and connections", "finishing calls in flight",
                                              "releasing resources"}));
  struct stat st {};
  EXPECT_NE(stat(socket_.c_str(), &st), 0) << socket_ << " is still there after the drain";
  const fake::FakeLedger::Counts live = ledger_->live();
  EXPECT_EQ(live.pds + live.mrs + live.mws + live.qps, 0) << "pds " << live.pds << ", mrs " << live.mrs << ", mws "
                                                          << live.mws << ", qps " << live.qps;
  EXPECT_TRUE(ledger_->violations().empty());
  // A second drain, and the destructor's, do nothing.
  (*daemon)->Drain(absl::Now(), [&](const char* stage) { stages.push_back(stage); });
  EXPECT_EQ(stages.size(), 5u);
  daemon->reset();
}

TEST_F(DaemonTest, TheDestructorDrainsAStartedDaemon) {
  {
    absl::StatusOr<std::unique_ptr<Daemon>> daemon = Daemon::Start(Options());
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    v1::CreatePdRequest pd_req;
    pd_req.set_device("rxe0");
    ASSERT_TRUE(Connect().CreatePd(pd_req).ok());
  }
  const fake::FakeLedger::Counts live = ledger_->live();
  EXPECT_EQ(live.pds + live.mrs + live.mws + live.qps, 0);
  struct stat st {};
  EXPECT_NE(stat(socket_.c_str(), &st), 0);
}

TEST_F(DaemonTest, ConfigurationErrorsAreSaidToBeTheConfigurations) {
  Daemon::Options bad_address = Options();
  bad_address.config.rdma_listen = {"no-port-here"};
  bool config_error = false;
  absl::StatusOr<std::unique_ptr<Daemon>> daemon = Daemon::Start(std::move(bad_address), &config_error);
  ASSERT_FALSE(daemon.ok());
  EXPECT_TRUE(config_error) << daemon.status();
  EXPECT_NE(daemon.status().message().find("rdma_listen"), absl::string_view::npos) << daemon.status();
  // Nothing is left of the failed start: no socket, no object.
  struct stat st {};
  EXPECT_NE(stat(socket_.c_str(), &st), 0);
  EXPECT_EQ(ledger_->live().pds + ledger_->live().mrs, 0);

  // A fabric that cannot be opened is not the configuration's.
  Daemon::Options no_devices = Options();
  no_devices.open_fabric = []() -> absl::StatusOr<std::unique_ptr<fabric::Fabric>> {
    return absl::UnavailableError("no RDMA here");
  };
  config_error = true;
  daemon = Daemon::Start(std::move(no_devices), &config_error);
  ASSERT_FALSE(daemon.ok());
  EXPECT_FALSE(config_error);
  EXPECT_EQ(daemon.status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace rdmad
