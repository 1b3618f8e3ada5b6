// SIGTERM's drain on real rdmad (rxe0 in the Soft-RoCE guest; docs/operations.md#drain-and-shutdown). Each
// case starts its own rdmad (RDMAD_BIN, a config in a scratch directory: a unix socket, the data-plane
// listener on RDMAD_GUEST_ADDR:7471, the case's shutdown_deadline_s), makes a grant with a connected client,
// sends SIGTERM and watches what the client, a caller and rdmad's exit status and log show:
// - a clean drain: the client gets ENDED with reason SHUTDOWN, rdmad exits 0 having released everything;
// - a client that would hold the goodbye up (it took its key and posts no further receive, so rdmad's ENDED
//   SEND waits on RNR retries) holds it no longer than grant_end_grace_ms: rdmad exits 0 soon after;
// - goodbyes longer than half the deadline (grant_end_grace_ms 10000): new calls are UNAVAILABLE during the
//   drain; goodbyes get half the deadline, then rdmad releases everything in order anyway and exits 0;
// - the same, with a second SIGTERM: exit 1 at once.
// run-operations.sh compares `rdma resource show` before and after the whole binary.
// Threads: the test's main thread only; rdmad is a child process.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/client.h"
#include "client/remote_region.h"
#include "tests/conformance/rdmad_process.h"
#include "tests/fuzz/dp_peer.h"
#include "tests/support/temp_dir.h"

namespace rdmad {
namespace {

using client::Client;
using client::RemoteRegion;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class Rdmad {
 public:
  // end_grace_ms: how long an ended grant's connection stays after ENDED (rdmad's default when negative).
  explicit Rdmad(int deadline_s, int end_grace_ms = -1) {
    sock_ = dir_.Sub("rdmad.sock");
    log_ = dir_.Sub("rdmad.log");
    std::ofstream(dir_.Sub("rdmad.json"))
        << "{ \"listen\": [\"unix:" << sock_ << "\"], \"rdma_listen\": [\""
        << test::EnvOr("RDMAD_GUEST_ADDR", "10.0.2.15") << ":7471\"], \"grant_quarantine_ms\": 0, "
        << (end_grace_ms >= 0 ? absl::StrCat("\"grant_end_grace_ms\": ", end_grace_ms, ", ") : "")
        << "\"shutdown_deadline_s\": " << deadline_s << " }\n";
    pid_ = test::StartRdmad(dir_.Sub("rdmad.json"), log_, sock_);
    Client::Options o;
    o.target = "unix:" + sock_;
    o.timeout = std::chrono::milliseconds(10000);
    client_ = std::make_unique<Client>(o);
  }
  ~Rdmad() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  Client& client() { return *client_; }
  pid_t pid() const { return pid_; }
  std::string log() const { return ReadFile(log_); }
  // rdmad's drain lines, with their times (printed by every case: where the drain spent its time).
  std::string DrainLines() const {
    std::stringstream in(log()), out;
    for (std::string line; std::getline(in, line);) {
      if (absl::StrContains(line, "drain") || absl::StrContains(line, "stopped;")) out << "  " << line << "\n";
    }
    return out.str();
  }

  // A PD, 1 MiB of rdmad's memory and a grant over 64 KiB of it.
  v1::IssuedGrant Grant() {
    v1::CreatePdRequest pd;
    pd.set_device(test::EnvOr("RDMAD_DEVICE", "rxe0"));
    absl::StatusOr<v1::ProtectionDomain> p = client_->CreatePd(pd);
    EXPECT_TRUE(p.ok()) << p.status();
    v1::RegisterMrRequest mr;
    mr.set_pd(p.ok() ? p->name() : "");
    mr.mutable_source()->mutable_anonymous()->set_size(1 << 20);
    for (v1::Access a : {v1::LOCAL_WRITE, v1::REMOTE_READ, v1::MW_BIND}) mr.add_access(a);
    absl::StatusOr<v1::MemoryRegion> m = client_->RegisterMr(mr);
    EXPECT_TRUE(m.ok()) << m.status();
    v1::IssueGrantRequest g;
    g.set_mr(m.ok() ? m->name() : "");
    g.set_length(64 << 10);
    g.set_principal("drain-test");
    g.set_ttl_ms(120000);
    absl::StatusOr<v1::IssuedGrant> issued = client_->IssueGrant(g);
    EXPECT_TRUE(issued.ok()) << issued.status();
    return issued.ok() ? *issued : v1::IssuedGrant();
  }

  // rdmad's exit status once it exited (-1: still running after `timeout`); how long it took.
  int WaitExit(absl::Duration timeout, absl::Duration* took) {
    const absl::Time start = absl::Now();
    while (absl::Now() - start < timeout) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        *took = absl::Now() - start;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    return -1;
  }

 private:
  // In /tmp: the socket's path stays short. Removed last, once rdmad is gone.
  test::TempDir dir_{test::TempDir::Options{.base = "/tmp", .prefix = "rdmad-drain."}};
  std::string sock_, log_;
  pid_t pid_ = -1;
  std::unique_ptr<Client> client_;
};

// A grant client that took its key and then posts no receive: rdmad's ENDED SEND waits on RNR retries.
std::unique_ptr<fuzz::DpPeer> Stubborn(const v1::IssuedGrant& grant) {
  auto peer = std::make_unique<fuzz::DpPeer>();
  EXPECT_GT(grant.endpoints_size(), 0);
  if (grant.endpoints_size() == 0) return peer;
  fuzz::DpPeer::Result r = peer->Dial(grant.endpoints(0).address(), static_cast<int>(grant.endpoints(0).port()),
                                      grant.token(), /*receives=*/1, 10000);
  EXPECT_EQ(r.outcome, fuzz::DpPeer::Outcome::kEstablished) << r.event << " " << r.error;
  std::string error;
  EXPECT_FALSE(peer->FirstMessage(10000, &error).empty()) << error;  // the ACTIVE message: its one receive
  return peer;
}

TEST(Drain, EndsEveryGrantWithReasonShutdownReleasesEverythingAndExitsZero) {
  Rdmad rdmad(30);
  v1::IssuedGrant grant = rdmad.Grant();
  absl::StatusOr<std::unique_ptr<RemoteRegion>> region = RemoteRegion::Open(grant, RemoteRegion::Options());
  ASSERT_TRUE(region.ok()) << region.status();
  std::vector<char> buf(4096);
  ASSERT_TRUE((*region)->Read(0, buf.size(), buf.data()).ok());

  ASSERT_EQ(kill(rdmad.pid(), SIGTERM), 0);
  absl::Duration took;
  EXPECT_EQ(rdmad.WaitExit(absl::Seconds(30), &took), 0) << rdmad.log();
  // The client was told why: ENDED, reason SHUTDOWN (8).
  std::optional<wire::GrantMessage> ended = (*region)->ended();
  ASSERT_TRUE(ended.has_value()) << rdmad.log();
  EXPECT_EQ(ended->reason, static_cast<uint8_t>(v1::END_SHUTDOWN));
  const std::string log = rdmad.log();
  EXPECT_TRUE(absl::StrContains(log, "drain: ending grants (SHUTDOWN)")) << log;
  EXPECT_FALSE(absl::StrContains(log, "still under way")) << log;
  EXPECT_TRUE(absl::StrContains(log, "stopped; every resource released")) << log;
  std::printf("clean drain with one connected grant client: %.0f ms\n%s", absl::ToDoubleMilliseconds(took),
              rdmad.DrainLines().c_str());
}

TEST(Drain, AClientThatPostsNoReceiveHoldsTheGoodbyeNoLongerThanTheEndGrace) {
  Rdmad rdmad(30);  // the default grace: 250 ms
  std::unique_ptr<fuzz::DpPeer> peer = Stubborn(rdmad.Grant());
  ASSERT_EQ(kill(rdmad.pid(), SIGTERM), 0);
  absl::Duration took;
  EXPECT_EQ(rdmad.WaitExit(absl::Seconds(20), &took), 0) << rdmad.log();
  EXPECT_LT(took, absl::Seconds(5)) << rdmad.log();  // half the deadline would be 15 s
  const std::string log = rdmad.log();
  EXPECT_FALSE(absl::StrContains(log, "still under way")) << log;
  EXPECT_TRUE(absl::StrContains(log, "stopped; every resource released")) << log;
  std::printf("drain with a client that posts no receive: %.0f ms\n%s", absl::ToDoubleMilliseconds(took),
              rdmad.DrainLines().c_str());
}

TEST(Drain, RefusesNewCallsAndGivesGoodbyesHalfTheDeadlineWhenTheGraceIsLonger) {
  Rdmad rdmad(4, /*end_grace_ms=*/10000);
  std::unique_ptr<fuzz::DpPeer> peer = Stubborn(rdmad.Grant());
  ASSERT_EQ(kill(rdmad.pid(), SIGTERM), 0);
  absl::SleepFor(absl::Milliseconds(300));
  // The connection the caller already has still answers, with UNAVAILABLE: rdmad takes no new calls.
  absl::StatusOr<v1::ListDevicesResponse> during = rdmad.client().ListDevices();
  EXPECT_EQ(during.status().code(), absl::StatusCode::kUnavailable) << during.status();
  EXPECT_TRUE(absl::StrContains(during.status().message(), "shutting down")) << during.status();
  // The goodbye is still under way at half the deadline (2 s): rdmad releases everything in order anyway and
  // exits 0 within the deadline.
  absl::Duration took;
  EXPECT_EQ(rdmad.WaitExit(absl::Seconds(20), &took), 0) << rdmad.log();
  EXPECT_GE(took, absl::Milliseconds(1500));  // 2 s from the SIGTERM, 0.3 s before this wait began
  EXPECT_LT(took, absl::Milliseconds(3700));
  const std::string log = rdmad.log();
  EXPECT_TRUE(absl::StrContains(log, "1 grant end(s) or goodbye(s) still under way after half the deadline")) << log;
  EXPECT_TRUE(absl::StrContains(log, "stopped; every resource released")) << log;
}

TEST(Drain, ASecondSigtermForcesTheExitAtOnce) {
  Rdmad rdmad(30, /*end_grace_ms=*/10000);
  std::unique_ptr<fuzz::DpPeer> peer = Stubborn(rdmad.Grant());
  ASSERT_EQ(kill(rdmad.pid(), SIGTERM), 0);
  absl::SleepFor(absl::Milliseconds(300));
  ASSERT_EQ(kill(rdmad.pid(), SIGTERM), 0);
  absl::Duration took;
  EXPECT_EQ(rdmad.WaitExit(absl::Seconds(10), &took), 1) << rdmad.log();
  EXPECT_LT(took, absl::Seconds(2));
  const std::string log = rdmad.log();
  EXPECT_TRUE(absl::StrContains(log, "drain: second Terminated while ending grants (SHUTDOWN)")) << log;
}

}  // namespace
}  // namespace rdmad
