// DaemonFixture (daemon_fixture.h) on itself: a call without a name is this process over the unix socket; a
// named one is that principal, with the Config's tenants applied; grant leases follow the FakeClock; Stop
// drains (the socket goes, every object is released).
#include "tests/support/daemon_fixture.h"

#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/time/time.h"
#include "client/client.h"
#include "server/config.h"
#include "tests/support/status.h"

namespace rdmad::test {
namespace {

TEST(FakeClockTest, MovesOnlyWhenTold) {
  FakeClock clock(absl::FromUnixSeconds(100));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(100));
  clock.Advance(absl::Milliseconds(1500));
  EXPECT_EQ(clock.Function()(), absl::FromUnixSeconds(100) + absl::Milliseconds(1500));
  clock.Set(absl::FromUnixSeconds(7));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(7));
}

TEST(DaemonFixtureTest, CallsAreFromThisProcessUnlessNamed) {
  DaemonFixture rdmad;
  TenantConfig t;
  t.name = "a";
  t.principals = {"spiffe://t/a"};
  rdmad.config().tenants = {t};
  rdmad.config().admins = {"unix:uid:" + std::to_string(geteuid())};
  ASSERT_OK(rdmad.Start());

  ASSERT_OK_AND_ASSIGN(v1::Caller root, rdmad.Client().WhoAmI());
  EXPECT_EQ(root.principal(), "unix:uid:" + std::to_string(geteuid()));
  EXPECT_EQ(root.role(), v1::ROLE_ADMIN);
  ASSERT_OK_AND_ASSIGN(v1::Caller a, rdmad.ClientAs("spiffe://t/a").WhoAmI());
  EXPECT_EQ(a.principal(), "spiffe://t/a");
  EXPECT_EQ(a.tenant(), "a");
  EXPECT_EQ(a.role(), v1::ROLE_TENANT);

  v1::Caller named;
  auto tenants = v1::Tenants::NewStub(rdmad.Channel());
  grpc::Status s = tenants->WhoAmI(DaemonFixture::As("spiffe://t/a").get(), v1::WhoAmIRequest(), &named);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(named.tenant(), "a");
  s = tenants->WhoAmI(DaemonFixture::As("spiffe://t/nobody").get(), v1::WhoAmIRequest(), &named);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  ASSERT_NE(rdmad.layers().gate, nullptr);
}

TEST(DaemonFixtureTest, GrantLeasesFollowTheFakeClockAndStopReleasesEverything) {
  DaemonFixture rdmad;
  ASSERT_OK(rdmad.Start());
  client::Client root = rdmad.Client();
  v1::CreatePdRequest pd_req;
  pd_req.set_device("rxe0");
  ASSERT_OK_AND_ASSIGN(v1::ProtectionDomain pd, root.CreatePd(pd_req));
  v1::RegisterMrRequest mr_req;
  mr_req.set_pd(pd.name());
  mr_req.mutable_source()->mutable_anonymous()->set_size(1 << 16);
  for (v1::Access a : {v1::LOCAL_WRITE, v1::REMOTE_READ, v1::MW_BIND}) mr_req.add_access(a);
  ASSERT_OK_AND_ASSIGN(v1::MemoryRegion mr, root.RegisterMr(mr_req));
  v1::IssueGrantRequest grant_req;
  grant_req.set_mr(mr.name());
  grant_req.set_length(4096);
  grant_req.set_ttl_ms(5000);
  grant_req.set_principal("reader");
  rdmad.clock().Advance(absl::Hours(1));
  ASSERT_OK_AND_ASSIGN(v1::IssuedGrant grant, root.IssueGrant(grant_req));
  EXPECT_EQ(grant.grant().expire_time_unix_nanos(), absl::ToUnixNanos(rdmad.clock().Now() + absl::Seconds(5)));

  rdmad.Stop();
  struct stat st {};
  EXPECT_NE(stat(rdmad.socket().c_str(), &st), 0) << rdmad.socket() << " is still there after Stop";
  const fake::FakeLedger::Counts live = rdmad.ledger()->live();
  EXPECT_EQ(live.pds + live.mrs + live.mws + live.qps, 0);
  EXPECT_TRUE(rdmad.ledger()->violations().empty());
  EXPECT_EQ(rdmad.layers().registry, nullptr);
}

}  // namespace
}  // namespace rdmad::test
