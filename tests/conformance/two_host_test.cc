// rdma_cm between two machines (two Soft-RoCE guests on one private wire, tests/guest/run-two-guests.sh):
// this binary runs in guest B next to its own rdmad, and talks to the rdmad of guest A over gRPC/TCP.
//   - rdmad B connects to rdmad A's data-plane listener, with a token rdmad A issued: rdmad to rdmad;
//   - a plain librdmacm peer in B does the same (a client on another machine);
//   - both connections are released on both sides when B lets go.
// Environment: RDMAD_TARGET (local rdmad), RDMAD_REMOTE_TARGET (rdmad A, host:port), RDMAD_REMOTE_ADDR
// (A's address), RDMAD_REMOTE_PORT (A's data-plane listener port).
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "rdmad/v1/rdmad.grpc.pb.h"
#include "tests/conformance/cm_peer.h"

namespace rdmad::testing {
namespace {

std::string Env(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

struct Rdmad {
  explicit Rdmad(const std::string& target)
      : channel(grpc::CreateChannel(target, grpc::InsecureChannelCredentials())),
        pds(v1::ProtectionDomains::NewStub(channel)),
        ids(v1::CmIds::NewStub(channel)),
        tokens(v1::ConnectTokens::NewStub(channel)) {}
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::ProtectionDomains::Stub> pds;
  std::unique_ptr<v1::CmIds::Stub> ids;
  std::unique_ptr<v1::ConnectTokens::Stub> tokens;
};
Rdmad& Local() {
  static Rdmad* r = new Rdmad(Env("RDMAD_TARGET", "unix:/run/rdmad/rdmad.sock"));
  return *r;
}
Rdmad& Remote() {
  static Rdmad* r = new Rdmad(Env("RDMAD_REMOTE_TARGET", "10.0.3.1:50051"));
  return *r;
}
std::string RemoteAddr() { return Env("RDMAD_REMOTE_ADDR", "10.0.3.1"); }
int RemotePort() { return std::atoi(Env("RDMAD_REMOTE_PORT", "7471").c_str()); }

template <typename Stub, typename Req, typename Resp>
grpc::Status Call(Stub* stub, grpc::Status (Stub::*m)(grpc::ClientContext*, const Req&, Resp*), const Req& req,
                  Resp* out) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  ctx.set_wait_for_ready(true);  // the other machine's rdmad may still be starting
  return (stub->*m)(&ctx, req, out);
}

std::string NewPd(Rdmad& r) {
  v1::CreatePdRequest req;
  req.set_device("rxe0");
  v1::ProtectionDomain pd;
  grpc::Status s = Call(r.pds.get(), &v1::ProtectionDomains::Stub::CreatePd, req, &pd);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return pd.name();
}
std::string RemoteToken(const std::string& pd) {
  v1::IssueConnectTokenRequest req;
  req.set_pd(pd);
  v1::ConnectToken t;
  grpc::Status s = Call(Remote().tokens.get(), &v1::ConnectTokens::Stub::IssueConnectToken, req, &t);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return t.token();
}
// rdmad A's accepted data-plane connections from `peer_addr`, CONNECTED.
int RemoteConnectionsFrom(const std::string& peer_addr) {
  v1::ListCmIdsResponse resp;
  EXPECT_TRUE(Call(Remote().ids.get(), &v1::CmIds::Stub::ListCmIds, v1::ListCmIdsRequest(), &resp).ok());
  int n = 0;
  for (const auto& id : resp.cm_ids()) {
    n += id.data_plane() && id.state() == v1::CM_CONNECTED && id.remote().address() == peer_addr;
  }
  return n;
}
int WaitRemoteConnections(const std::string& peer_addr, int want) {
  int n = -1;
  for (int i = 0; i < 3000 && n != want; ++i) {
    n = RemoteConnectionsFrom(peer_addr);
    if (n != want) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return n;
}

TEST(TwoHosts, RdmadConnectsToTheOtherMachinesRdmadWithAToken) {
  const std::string remote_pd = NewPd(Remote()), local_pd = NewPd(Local());
  v1::CreateCmIdRequest create;
  create.set_pd(local_pd);
  v1::CmId id;
  ASSERT_TRUE(Call(Local().ids.get(), &v1::CmIds::Stub::CreateCmId, create, &id).ok());
  v1::ConnectRequest c;
  c.set_name(id.name());
  c.mutable_remote()->set_address(RemoteAddr());
  c.mutable_remote()->set_port(RemotePort());
  c.set_private_data(RemoteToken(remote_pd));
  c.set_timeout_ms(5000);
  v1::CmId connected;
  grpc::Status s = Call(Local().ids.get(), &v1::CmIds::Stub::Connect, c, &connected);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(connected.state(), v1::CM_CONNECTED);
  EXPECT_EQ(connected.remote().address(), RemoteAddr());
  const std::string self = connected.local().address();
  EXPECT_EQ(WaitRemoteConnections(self, 1), 1);
  v1::DeleteCmIdRequest del;
  del.set_name(id.name());
  v1::DeleteCmIdResponse dr;
  ASSERT_TRUE(Call(Local().ids.get(), &v1::CmIds::Stub::DeleteCmId, del, &dr).ok());
  EXPECT_EQ(WaitRemoteConnections(self, 0), 0) << "rdmad A kept the connection after rdmad B let go";
}

TEST(TwoHosts, APlainRdmaCmClientOnAnotherMachineUsesAToken) {
  const std::string remote_pd = NewPd(Remote());
  std::string self;
  {
    CmPeer peer;
    CmPeer::Result r = peer.Dial(RemoteAddr(), RemotePort(), RemoteToken(remote_pd));
    ASSERT_EQ(r.outcome, CmPeer::Outcome::kEstablished) << r.event << " " << r.error;
    self = Env("RDMAD_GUEST_ADDR", "10.0.3.2");
    EXPECT_EQ(WaitRemoteConnections(self, 1), 1);
    EXPECT_EQ(peer.Disconnect(), "");
  }
  EXPECT_EQ(WaitRemoteConnections(self, 0), 0);
  CmPeer bad;
  EXPECT_EQ(bad.Dial(RemoteAddr(), RemotePort(), "not a token").outcome, CmPeer::Outcome::kRejected);
}

}  // namespace
}  // namespace rdmad::testing
