// rdmactl, whole command lines (cli/rdmactl.h), against an in-process fake of rdmad: what each grant
// command sends (grant, renew, revoke, get grants, watch grants), what it prints and how it fails; the
// --revoke-grants flags of delete mr, delete pd and rereg mr; and read / bench read up to the data plane
// (their usage errors, the grant they issue, and its revocation when the data plane fails: there is no
// RDMA device here); get devices' counters; get tenants, describe tenant and whoami against a fake Tenants
// service.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "cli/rdmactl.h"
#include "rdmad/v1/rdmad.grpc.pb.h"

namespace rdmad::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;
using namespace std::chrono_literals;

// A failure as rdmad sends it: code, message, and an RpcStatus with one ErrorDetail in the details.
grpc::Status RdmadError(grpc::StatusCode code, const std::string& message, const std::string& field) {
  v1::ErrorDetail detail;
  detail.set_field(field);
  v1::RpcStatus rpc;
  rpc.set_code(code);
  rpc.set_message(message);
  rpc.add_details()->PackFrom(detail);
  return grpc::Status(code, message, rpc.SerializeAsString());
}

const std::string kToken = std::string("RDTK\x01\x02\x00\x00", 8) + std::string(24, '\xa5');

v1::Grant Grant(const std::string& name) {
  v1::Grant g;
  g.set_name(name);
  g.set_mr("mrs/3");
  g.set_pd("pds/1");
  g.set_offset(4096);
  g.set_length(1 << 20);
  g.add_access(v1::REMOTE_READ);
  g.set_principal("app-7");
  g.set_state(v1::GRANT_ACTIVE);
  g.set_scope(v1::SCOPE_QP);
  g.set_expire_time_unix_nanos(absl::ToUnixNanos(absl::Now() + absl::Seconds(60)));
  return g;
}

// Grants: records the last request of each call. Behaviour by name: "mrs/99" and "grants/404" fail;
// "grants/12" had already expired; WatchGrants' script is the request's principal.
class FakeGrants final : public v1::Grants::Service {
 public:
  grpc::Status IssueGrant(grpc::ServerContext*, const v1::IssueGrantRequest* req, v1::IssuedGrant* resp) override {
    std::lock_guard<std::mutex> lock(mu);
    issued.push_back(*req);
    if (req->mr() == "mrs/99") {
      return RdmadError(grpc::StatusCode::FAILED_PRECONDITION, "mr: mrs/99 has no remote-read access", "mr");
    }
    v1::Grant* g = resp->mutable_grant();
    *g = Grant("grants/9");
    g->set_mr(req->mr());
    g->set_offset(req->offset());
    g->set_length(req->length());
    g->set_principal(req->principal());
    g->set_state(v1::GRANT_ISSUED);
    *g->mutable_access() = req->access();
    resp->set_token(kToken);
    v1::SocketAddress* a = resp->add_endpoints();
    a->set_address("127.0.0.1");  // nobody serves RDMA there: RemoteRegion::Open fails
    a->set_port(7471);
    return grpc::Status::OK;
  }
  grpc::Status GetGrant(grpc::ServerContext*, const v1::GetGrantRequest* req, v1::Grant* resp) override {
    std::lock_guard<std::mutex> lock(mu);
    got = *req;
    if (req->name() == "grants/404") return RdmadError(grpc::StatusCode::NOT_FOUND, "name: no grants/404", "name");
    *resp = Grant(req->name());
    return grpc::Status::OK;
  }
  grpc::Status ListGrants(grpc::ServerContext*, const v1::ListGrantsRequest* req,
                          v1::ListGrantsResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu);
    listed = *req;
    if (req->principal() == "nobody") return grpc::Status::OK;
    *resp->add_grants() = Grant("grants/9");
    v1::Grant* ended = resp->add_grants();
    *ended = Grant("grants/10");
    ended->set_state(v1::GRANT_ENDED);
    ended->set_end_reason(v1::END_EXPIRED);
    return grpc::Status::OK;
  }
  grpc::Status RenewGrant(grpc::ServerContext*, const v1::RenewGrantRequest* req, v1::Grant* resp) override {
    std::lock_guard<std::mutex> lock(mu);
    renewed = *req;
    if (req->name() == "grants/404") return RdmadError(grpc::StatusCode::NOT_FOUND, "name: no grants/404", "name");
    *resp = Grant(req->name());
    resp->set_renewals(3);
    resp->set_expire_time_unix_nanos(absl::ToUnixNanos(absl::Now()) + int64_t{req->ttl_ms()} * 1000000);
    return grpc::Status::OK;
  }
  grpc::Status RevokeGrant(grpc::ServerContext*, const v1::RevokeGrantRequest* req, v1::Grant* resp) override {
    std::lock_guard<std::mutex> lock(mu);
    revoked.push_back(req->name());
    if (req->name() == "grants/404") return RdmadError(grpc::StatusCode::NOT_FOUND, "name: no grants/404", "name");
    *resp = Grant(req->name());
    resp->set_state(v1::GRANT_ENDED);
    resp->set_end_reason(req->name() == "grants/12" ? v1::END_EXPIRED : v1::END_REVOKED);
    return grpc::Status::OK;
  }
  grpc::Status WatchGrants(grpc::ServerContext*, const v1::WatchGrantsRequest* req,
                           grpc::ServerWriter<v1::GrantEvent>* writer) override {
    {
      std::lock_guard<std::mutex> lock(mu);
      watched = *req;
    }
    v1::GrantEvent e;
    e.set_sequence(1);
    e.set_type(v1::GRANT_ISSUED_EVENT);
    e.set_time_unix_nanos(1795321906000000000);
    *e.mutable_grant() = Grant("grants/9");
    writer->Write(e);
    e.set_sequence(2);
    e.set_type(v1::GRANT_REVOKED);
    e.mutable_grant()->set_state(v1::GRANT_ENDED);
    e.mutable_grant()->set_end_reason(v1::END_REVOKED);
    writer->Write(e);
    if (req->principal() == "slow") {
      return RdmadError(grpc::StatusCode::RESOURCE_EXHAUSTED, "this watcher fell 1024 events behind", "");
    }
    return grpc::Status::OK;
  }

  std::mutex mu;
  std::vector<v1::IssueGrantRequest> issued;
  v1::GetGrantRequest got;
  v1::ListGrantsRequest listed;
  v1::RenewGrantRequest renewed;
  std::vector<std::string> revoked;
  v1::WatchGrantsRequest watched;
};

class FakeMrs final : public v1::MemoryRegions::Service {
 public:
  grpc::Status GetMr(grpc::ServerContext*, const v1::GetMrRequest* req, v1::MemoryRegion* resp) override {
    std::lock_guard<std::mutex> lock(mu);
    got.push_back(req->name());
    resp->set_name(req->name());
    resp->set_length(64 << 10);
    return grpc::Status::OK;
  }
  grpc::Status DeregisterMr(grpc::ServerContext*, const v1::DeregisterMrRequest* req,
                            v1::DeregisterMrResponse*) override {
    std::lock_guard<std::mutex> lock(mu);
    deregistered = *req;
    if (!req->revoke_grants()) {
      return RdmadError(grpc::StatusCode::FAILED_PRECONDITION,
                        "name: mrs/3 has 1 live grant(s) (grants/9): revoke them first or ask for revoke_grants",
                        "name");
    }
    return grpc::Status::OK;
  }
  grpc::Status ReregisterMr(grpc::ServerContext*, const v1::ReregisterMrRequest* req,
                            v1::ReregisterMrResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu);
    reregistered = *req;
    resp->mutable_mr()->set_name(req->name());
    return grpc::Status::OK;
  }
  std::mutex mu;
  std::vector<std::string> got;
  v1::DeregisterMrRequest deregistered;
  v1::ReregisterMrRequest reregistered;
};

class FakePds final : public v1::ProtectionDomains::Service {
 public:
  grpc::Status DeletePd(grpc::ServerContext*, const v1::DeletePdRequest* req, v1::DeletePdResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu);
    deleted = *req;
    resp->add_deleted("mrs/3");
    resp->add_deleted(req->name());
    return grpc::Status::OK;
  }
  std::mutex mu;
  v1::DeletePdRequest deleted;
};

// Devices: rxe0 with two of rxe's counters (none flagged), mlx5_0 with a flagged one.
class FakeDevices final : public v1::Devices::Service {
 public:
  static v1::Device Device(const std::string& name) {
    v1::Device d;
    d.set_name("devices/" + name);
    d.set_transport("InfiniBand");
    auto add = [&d](uint32_t port, const std::string& counter, uint64_t value, bool flagged) {
      v1::HwCounter* c = d.add_hw_counters();
      c->set_port(port);
      c->set_name(counter);
      c->set_value(value);
      c->set_remote_access_error(flagged);
    };
    if (name == "rxe0") {
      add(1, "rcvd_pkts", 42, false);
      add(1, "sent_pkts", 40, false);
    } else {
      add(1, "resp_remote_access_errors", 3, true);
    }
    return d;
  }
  grpc::Status ListDevices(grpc::ServerContext*, const v1::ListDevicesRequest*,
                           v1::ListDevicesResponse* resp) override {
    *resp->add_devices() = Device("mlx5_0");
    *resp->add_devices() = Device("rxe0");
    return grpc::Status::OK;
  }
  grpc::Status GetDevice(grpc::ServerContext*, const v1::GetDeviceRequest* req, v1::Device* resp) override {
    if (req->name() != "devices/rxe0" && req->name() != "devices/mlx5_0") {
      return RdmadError(grpc::StatusCode::NOT_FOUND, "name: no device '" + req->name() + "'", "name");
    }
    *resp = Device(req->name().substr(8));
    return grpc::Status::OK;
  }
};

// Tenants: the caller is a tenant's (app); tenants/app exists, anything else is NOT_FOUND; ListTenants returns
// app and batch. Records the names asked for.
class FakeTenants final : public v1::Tenants::Service {
 public:
  static v1::Tenant Tenant(const std::string& name) {
    v1::Tenant t;
    t.set_name(name);
    t.add_principals("unix:uid:1000");
    t.add_pds("pds/1");
    auto quota = [&t](const std::string& q, uint64_t used, uint64_t limit) {
      v1::QuotaUsage* u = t.add_quotas();
      u->set_quota(q);
      u->set_used(used);
      u->set_limit(limit);
    };
    quota("pinned_bytes", 12 << 10, uint64_t{1} << 30);
    quota("mrs", 2, 8);
    quota("grants", 1, 0);
    quota("rpc_per_second", 0, 100);
    return t;
  }
  grpc::Status WhoAmI(grpc::ServerContext*, const v1::WhoAmIRequest*, v1::Caller* resp) override {
    resp->set_principal("unix:uid:1000");
    resp->set_tenant("app");
    resp->set_role(v1::ROLE_TENANT);
    resp->set_authenticated(true);
    resp->set_transport("unix");
    resp->set_uid(1000);
    resp->set_gid(1000);
    return grpc::Status::OK;
  }
  grpc::Status ListTenants(grpc::ServerContext*, const v1::ListTenantsRequest*,
                           v1::ListTenantsResponse* resp) override {
    *resp->add_tenants() = Tenant("tenants/app");
    *resp->add_tenants() = Tenant("tenants/batch");
    return grpc::Status::OK;
  }
  grpc::Status GetTenant(grpc::ServerContext*, const v1::GetTenantRequest* req, v1::Tenant* resp) override {
    std::lock_guard<std::mutex> lock(mu);
    got.push_back(req->name());
    if (req->name() != "tenants/app") {
      return RdmadError(grpc::StatusCode::NOT_FOUND, "name: " + req->name() + " does not exist", "name");
    }
    *resp = Tenant(req->name());
    return grpc::Status::OK;
  }
  std::mutex mu;
  std::vector<std::string> got;
};

struct Result {
  int rc = -1;
  std::string out, err;
};

class RdmactlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.RegisterService(&grants_);
    builder.RegisterService(&mrs_);
    builder.RegisterService(&pds_);
    builder.RegisterService(&devices_);
    builder.RegisterService(&tenants_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    dir_ = ::testing::TempDir();
  }
  void TearDown() override { server_->Shutdown(std::chrono::system_clock::now() + 1s); }

  Result Run(std::vector<std::string> args) {
    args.push_back("--timeout");
    args.push_back("3s");
    std::ostringstream out, err;
    Result r;
    r.rc = Rdmactl(args, out, err, server_->InProcessChannel(grpc::ChannelArguments()));
    r.out = out.str();
    r.err = err.str();
    return r;
  }
  std::string Path(const std::string& name) { return dir_ + "/" + name; }

  FakeGrants grants_;
  FakeMrs mrs_;
  FakePds pds_;
  FakeDevices devices_;
  FakeTenants tenants_;
  std::unique_ptr<grpc::Server> server_;
  std::string dir_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// ---- grant

TEST_F(RdmactlTest, GrantSendsTheRequestAndPrintsTheGrantAndToken) {
  Result r = Run({"grant", "mrs/3", "--offset", "4KiB", "--length", "1MiB", "--ttl", "90s", "--for", "app-7"});
  ASSERT_EQ(r.rc, 0) << r.err;
  ASSERT_EQ(grants_.issued.size(), 1u);
  const v1::IssueGrantRequest& req = grants_.issued[0];
  EXPECT_EQ(req.mr(), "mrs/3");
  EXPECT_EQ(req.offset(), 4096u);
  EXPECT_EQ(req.length(), 1u << 20);
  EXPECT_EQ(req.ttl_ms(), 90000u);
  EXPECT_EQ(req.principal(), "app-7");
  EXPECT_THAT(req.access(), ElementsAre(v1::REMOTE_READ));
  EXPECT_THAT(r.out, StartsWith("grants/9 issued to app-7: mrs/3 offset 4KiB length 1MiB, remote-read, scope QP "
                                "(expires "));
  EXPECT_THAT(r.out, HasSubstr("\nendpoints: 127.0.0.1:7471\n"));
  EXPECT_THAT(r.out, HasSubstr("\ntoken: 5244544b01020000a5a5"));
  EXPECT_THAT(r.err, HasSubstr("note: the token is a secret"));
  EXPECT_THAT(r.err, HasSubstr("give it only to app-7"));
}

TEST_F(RdmactlTest, GrantWriteAndDefaults) {
  Result r = Run({"grant", "3", "--length", "64KiB", "--for", "app-8", "--write"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const v1::IssueGrantRequest& req = grants_.issued.back();
  EXPECT_EQ(req.mr(), "mrs/3");
  EXPECT_EQ(req.offset(), 0u);
  EXPECT_EQ(req.ttl_ms(), 0u);  // rdmad's default
  EXPECT_THAT(req.access(), ElementsAre(v1::REMOTE_READ, v1::REMOTE_WRITE));
  EXPECT_THAT(r.err, HasSubstr("read and write mrs/3"));
}

TEST_F(RdmactlTest, GrantTokenFileKeepsTheSecretOffStdout) {
  const std::string file = Path("app-7.token");
  std::ofstream(file) << "an older, readable file";
  ASSERT_EQ(::chmod(file.c_str(), 0644), 0);
  Result r = Run({"grant", "mrs/3", "--length", "1MiB", "--for", "app-7", "--token-file", file});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(ReadFile(file), kToken);
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_THAT(r.out, HasSubstr("token: written to " + file + " (32 bytes, mode 0600)"));
  EXPECT_THAT(r.out, Not(HasSubstr("5244544b")));
  // -o json: the IssuedGrant without its token.
  r = Run({"grant", "mrs/3", "--length", "1MiB", "--for", "app-7", "--token-file", file, "-o", "json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"name\": \"grants/9\""));
  EXPECT_THAT(r.out, HasSubstr("\"token\": \"\""));
  // Without a file, -o json carries it (protobuf's JSON: base64).
  r = Run({"grant", "mrs/3", "--length", "1MiB", "--for", "app-7", "-o", "json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"token\": \"UkRUSwECAAC"));
  r = Run({"grant", "mrs/3", "--length", "1MiB", "--for", "app-7", "-o", "name"});
  EXPECT_EQ(r.out, "grants/9\n");
  EXPECT_THAT(r.err, HasSubstr("warning: -o name prints no token"));
  r = Run({"grant", "mrs/3", "--length", "1MiB", "--for", "app-7", "-o", "name", "--token-file", file});
  EXPECT_EQ(r.out, "grants/9\n");
  EXPECT_THAT(r.err, Not(HasSubstr("warning")));
}

TEST_F(RdmactlTest, GrantRevokesWhatItIssuedWhenTheTokenFileCannotBeWritten) {
  Result r = Run({"grant", "mrs/3", "--length", "1MiB", "--for", "app-7", "--token-file", Path("no/such/dir/t")});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, HasSubstr("error: --token-file: cannot open"));
  EXPECT_THAT(r.err, HasSubstr("note: grants/9 was revoked"));
  EXPECT_THAT(grants_.revoked, ElementsAre("grants/9"));
  EXPECT_EQ(r.out, "");
}

TEST_F(RdmactlTest, GrantUsageErrorsSendNothing) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"grant", "mrs/3", "--length", "1MiB"},                          // no --for
           {"grant", "mrs/3", "--for", "app-7"},                            // no --length
           {"grant", "mrs/3", "--length", "0", "--for", "app-7"},           // empty
           {"grant", "pds/1", "--length", "1MiB", "--for", "app-7"},        // not an MR
           {"grant", "mrs/3", "--length", "1.5.2MB", "--for", "app-7"},     // not a size
           {"grant", "mrs/3", "--length", "1MiB", "--for", "a", "--ttl", "soon"},
       }) {
    Result r = Run(args);
    EXPECT_EQ(r.rc, 2) << args[2] << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr("error: ")) << args[2];
  }
  EXPECT_THAT(grants_.issued, IsEmpty());
  Result r = Run({"grant", "pds/1", "--length", "1MiB", "--for", "app-7"});
  EXPECT_THAT(r.err, HasSubstr("'pds/1' names a protection domain, not a memory region"));
  EXPECT_THAT(r.err, HasSubstr("Run 'rdmactl grant --help' for usage."));
}

TEST_F(RdmactlTest, GrantShowsRdmadsError) {
  Result r = Run({"grant", "mrs/99", "--length", "1MiB", "--for", "app-7"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err, "error: mr: mrs/99 has no remote-read access\n");
  EXPECT_EQ(r.out, "");
}

// ---- renew, revoke

TEST_F(RdmactlTest, Renew) {
  Result r = Run({"renew", "grants/9", "--ttl", "2m"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(grants_.renewed.name(), "grants/9");
  EXPECT_EQ(grants_.renewed.ttl_ms(), 120000u);
  EXPECT_THAT(r.out, StartsWith("grants/9 renewed (expires "));
  EXPECT_THAT(r.out, HasSubstr(", in 2m; 3 renewal(s))\n"));
  r = Run({"renew", "grant", "7", "--ttl", "30", "-o", "json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(grants_.renewed.name(), "grants/7");
  EXPECT_EQ(grants_.renewed.ttl_ms(), 30000u);
  EXPECT_THAT(r.out, HasSubstr("\"renewals\": 3"));

  EXPECT_EQ(Run({"renew", "grants/9"}).rc, 2);  // --ttl is required
  EXPECT_EQ(Run({"renew", "grants/9", "--ttl", "0s"}).rc, 2);
  r = Run({"renew", "grants/404", "--ttl", "1m"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err, "error: name: no grants/404\n");
}

TEST_F(RdmactlTest, Revoke) {
  Result r = Run({"revoke", "grants/9"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "grants/9 revoked (its key is dead)\n");
  r = Run({"revoke", "grant", "12"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "grants/12 had already ended (EXPIRED)\n");
  EXPECT_THAT(grants_.revoked, ElementsAre("grants/9", "grants/12"));
  r = Run({"revoke", "grants/404"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err, "error: name: no grants/404\n");
  r = Run({"revoke", "mrs/3"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.err, HasSubstr("'revoke' does not apply to 'mrs'"));
}

// ---- get grants

TEST_F(RdmactlTest, GetGrantsSendsTheFiltersAndPrintsTheTable) {
  Result r = Run({"get", "grants", "--mr", "3", "--for", "app-7", "--all"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(grants_.listed.mr(), "mrs/3");
  EXPECT_EQ(grants_.listed.principal(), "app-7");
  EXPECT_TRUE(grants_.listed.include_ended());
  EXPECT_THAT(r.out, StartsWith("NAME        MR      OFFSET   LENGTH   SCOPE   STATE    PRINCIPAL   EXPIRES\n"
                                "grants/9    mrs/3   4KiB     1MiB     QP      ACTIVE   app-7       in "));
  EXPECT_THAT(r.out, HasSubstr("grants/10   mrs/3   4KiB     1MiB     QP      ENDED    app-7       <none>\n"));
  r = Run({"get", "grants", "-o", "wide"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_FALSE(grants_.listed.include_ended());
  EXPECT_EQ(grants_.listed.mr(), "");
  EXPECT_THAT(r.out, HasSubstr("EXPIRED\n"));  // REASON, in wide
  r = Run({"get", "grants", "-o", "name"});
  EXPECT_EQ(r.out, "grants/9\ngrants/10\n");
}

TEST_F(RdmactlTest, GetOneGrantAsOtherGetsDo) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"get", "grants/9"}, {"get", "grant", "9"}, {"get", "grants", "grant/9"}}) {
    Result r = Run(args);
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(grants_.got.name(), "grants/9");
    EXPECT_THAT(r.out, StartsWith("NAME       MR      OFFSET"));
    EXPECT_THAT(r.out, HasSubstr("\ngrants/9   mrs/3   4KiB"));
  }
  Result r = Run({"get", "grants/9", "-o", "json"});
  EXPECT_THAT(r.out, StartsWith("{\n \"name\": \"grants/9\""));
  EXPECT_THAT(r.out, HasSubstr("\"scope\": \"SCOPE_QP\""));
  r = Run({"get", "grants/404"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err, "error: name: no grants/404\n");
}

TEST_F(RdmactlTest, GetGrantsEmptyAndUsage) {
  Result r = Run({"get", "grants", "--for", "nobody"});
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "No resources found for nobody (--all shows the recently ended ones too).\n");
  r = Run({"get", "grants/9", "--mr", "mrs/3"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.err, HasSubstr("give either NAME or filters"));
  EXPECT_EQ(Run({"get", "mrs", "--all"}).rc, 2);  // grants only
  EXPECT_EQ(Run({"get", "grants", "--mr", "pds/1"}).rc, 2);
}

// ---- watch grants

TEST_F(RdmactlTest, WatchGrantsPrintsALinePerEvent) {
  Result r = Run({"watch", "grants", "--mr", "mrs/3", "--for", "app-7"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(grants_.watched.mr(), "mrs/3");
  EXPECT_EQ(grants_.watched.principal(), "app-7");
  std::vector<std::string> lines;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  EXPECT_THAT(lines[0], StartsWith("SEQ      TIME                          TYPE        GRANT"));
  EXPECT_THAT(lines[1], StartsWith("1        2026-11-22T04:31:46.000000Z   ISSUED      grants/9     mrs/3      app-7"));
  EXPECT_THAT(lines[2], HasSubstr("REVOKED     grants/9     mrs/3      app-7          reason REVOKED"));
  EXPECT_THAT(r.err, HasSubstr("The grant stream ended"));

  EXPECT_FALSE(grants_.watched.from_oldest());
  EXPECT_EQ(Run({"watch", "grants", "--from-oldest", "--mr", "3"}).rc, 0);
  EXPECT_TRUE(grants_.watched.from_oldest());  // --from-oldest reaches the request
  EXPECT_EQ(grants_.watched.mr(), "mrs/3");
  r = Run({"watch", "grant", "-o", "json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("{\"sequence\":\"1\",\"type\":\"GRANT_ISSUED_EVENT\""));
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 2);
  r = Run({"watch", "grants", "-o", "name"});
  EXPECT_EQ(r.out, "grants/9\ngrants/9\n");
}

TEST_F(RdmactlTest, WatchGrantsShowsWhyTheStreamFailed) {
  Result r = Run({"watch", "grants", "--for", "slow"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.out, HasSubstr("REVOKED"));  // what came before the error is printed
  EXPECT_THAT(r.err, HasSubstr("error: this watcher fell 1024 events behind"));
  EXPECT_THAT(r.err, HasSubstr("hint: rdmactl fell behind the grant stream"));
  EXPECT_EQ(Run({"watch", "grants", "--mr", "grants/1"}).rc, 2);
}

// ---- --revoke-grants

TEST_F(RdmactlTest, DeleteMrRevokeGrants) {
  Result r = Run({"delete", "mr", "mrs/3"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_FALSE(mrs_.deregistered.revoke_grants());
  EXPECT_THAT(r.err, HasSubstr("error: name: mrs/3 has 1 live grant(s) (grants/9)"));
  r = Run({"delete", "mrs/3", "--revoke-grants"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(mrs_.deregistered.name(), "mrs/3");
  EXPECT_TRUE(mrs_.deregistered.revoke_grants());
  EXPECT_EQ(r.out, "mrs/3 deleted\n");
}

TEST_F(RdmactlTest, DeletePdRevokeGrants) {
  Result r = Run({"delete", "pd", "pds/1", "--cascade", "--revoke-grants"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(pds_.deleted.cascade());
  EXPECT_TRUE(pds_.deleted.revoke_grants());
  EXPECT_EQ(r.out, "pds/1 deleted (cascade: mrs/3, pds/1)\n");
  r = Run({"delete", "pd", "pds/2", "--revoke-grants"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_FALSE(pds_.deleted.cascade());
  EXPECT_TRUE(pds_.deleted.revoke_grants());
  r = Run({"delete", "pd", "pds/2"});
  EXPECT_FALSE(pds_.deleted.revoke_grants());
  EXPECT_EQ(Run({"delete", "mw", "mws/1", "--revoke-grants"}).rc, 2);  // not a flag of delete mw
}

TEST_F(RdmactlTest, ReregMrRevokeGrants) {
  Result r = Run({"rereg", "mr", "mrs/3", "--access", "local-write", "--revoke-grants"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(mrs_.reregistered.revoke_grants());
  EXPECT_THAT(mrs_.reregistered.flags(), ElementsAre(v1::CHANGE_ACCESS));
  r = Run({"rereg", "mr", "mrs/3", "--access", "local-write"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_FALSE(mrs_.reregistered.revoke_grants());
  EXPECT_EQ(Run({"rereg", "mr", "mrs/3", "--revoke-grants"}).rc, 2);  // nothing to change
}

// ---- read, bench read (up to the data plane)

TEST_F(RdmactlTest, ReadAndBenchUsageErrorsSendNothing) {
  const std::string token = Path("read.token");
  std::ofstream(token) << "5244544b01020000\n";
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"read"},                                                          // neither an MR nor a token
           {"read", "pds/1"},                                                 // not an MR
           {"read", "mrs/3", "--token-file", token, "--endpoint", "10.0.2.15:7471"},  // both
           {"read", "--token-file", token},                                   // no endpoint
           {"read", "--token-file", token, "--endpoint", "rdma-host:7471"},   // not numeric
           {"read", "--token-file", Path("missing"), "--endpoint", "10.0.2.15:7471"},
           {"read", "--token-file", token, "--endpoint", "10.0.2.15:7471", "--for", "x"},
           {"read", "mrs/3", "--length", "0"},
           {"read", "mrs/3", "--for", ""},
           {"bench", "read", "mrs/3", "--ttl", "5s", "--duration", "10s"},    // ends mid-bench
           {"bench", "read", "mrs/3", "--size", "4KiB", "--length", "1KiB"},  // shorter than one read
           {"bench", "read", "mrs/3", "--depth", "0"},
           {"bench", "read", "mrs/3", "--depth", "100000"},
           {"bench", "read", "mrs/3", "--size", "0"},
           {"bench", "read", "mrs/3", "--duration", "forever"},
       }) {
    std::string line;
    for (const std::string& a : args) line += a + " ";
    Result r = Run(args);
    EXPECT_EQ(r.rc, 2) << line << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr("error: ")) << line;
  }
  EXPECT_THAT(grants_.issued, IsEmpty());
  EXPECT_THAT(mrs_.got, IsEmpty());
  // -o is the global output format on every command, read included (its file is --out-file).
  Result bench = Run({"bench", "read", "mrs/3", "-o", "xml"});
  EXPECT_EQ(bench.rc, 2);
  EXPECT_THAT(bench.err, HasSubstr("--output: unknown output format 'xml'"));
  Result old = Run({"read", "mrs/3", "-o", Path("out.bin")});
  EXPECT_EQ(old.rc, 2);
  EXPECT_THAT(old.err, HasSubstr("unknown output format"));
  EXPECT_THAT(old.err, HasSubstr("--out-file"));
  // An output file that cannot be written: nothing issued either.
  Result r = Run({"read", "mrs/3", "--out-file", Path("no/such/dir/out")});
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.err, HasSubstr("error: --out-file: cannot write"));
  EXPECT_THAT(grants_.issued, IsEmpty());
}

// There is no RDMA here: the grant is issued, opening it fails, and rdmactl revokes it.
TEST_F(RdmactlTest, ReadIssuesExactlyTheRangeAndRevokesItWhenTheDataPlaneFails) {
  Result r = Run({"read", "mrs/3", "--offset", "4KiB", "--length", "8KiB", "--ttl", "20s", "--for", "tester",
                  "--out-file", Path("out.bin")});
  EXPECT_EQ(r.rc, 1) << r.err;
  ASSERT_EQ(grants_.issued.size(), 1u);
  const v1::IssueGrantRequest& req = grants_.issued[0];
  EXPECT_EQ(req.mr(), "mrs/3");
  EXPECT_EQ(req.offset(), 4096u);
  EXPECT_EQ(req.length(), 8192u);
  EXPECT_EQ(req.ttl_ms(), 20000u);
  EXPECT_EQ(req.principal(), "tester");
  EXPECT_THAT(req.access(), ElementsAre(v1::REMOTE_READ));
  EXPECT_THAT(grants_.revoked, ElementsAre("grants/9"));
  EXPECT_THAT(r.err, HasSubstr("error: grants/9: "));  // RemoteRegion's message: the grant, the endpoint, why
  EXPECT_THAT(r.err, HasSubstr("127.0.0.1:7471"));
  EXPECT_THAT(mrs_.got, IsEmpty());  // --length given: no GetMr
}

TEST_F(RdmactlTest, ReadWithoutLengthReadsToTheEndOfTheMr) {
  Result r = Run({"read", "mrs/3", "--offset", "60KiB"});
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_THAT(mrs_.got, ElementsAre("mrs/3"));
  ASSERT_EQ(grants_.issued.size(), 1u);
  EXPECT_EQ(grants_.issued[0].offset(), 60u << 10);
  EXPECT_EQ(grants_.issued[0].length(), 4u << 10);  // the fake's MR is 64KiB
  EXPECT_EQ(grants_.issued[0].principal(), "rdmactl");
  EXPECT_EQ(grants_.issued[0].ttl_ms(), 0u);  // rdmad's default
  EXPECT_THAT(grants_.revoked, ElementsAre("grants/9"));
  // An offset past the end: refused before anything is issued.
  r = Run({"read", "mrs/3", "--offset", "64KiB"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.err, HasSubstr("error: --offset: 65536 is at or beyond the end of mrs/3 (65536 bytes)"));
  EXPECT_EQ(grants_.issued.size(), 1u);
}

TEST_F(RdmactlTest, BenchIssuesOneGrantWithALeaseLongerThanTheRun) {
  Result r = Run({"bench", "read", "mrs/3", "--size", "4KiB", "--depth", "8", "--duration", "10s"});
  EXPECT_EQ(r.rc, 1) << r.err;
  ASSERT_EQ(grants_.issued.size(), 1u);
  EXPECT_EQ(grants_.issued[0].length(), 64u << 10);  // the whole MR
  EXPECT_EQ(grants_.issued[0].ttl_ms(), 70000u);      // duration + 60s
  EXPECT_THAT(grants_.revoked, ElementsAre("grants/9"));
  r = Run({"bench", "read", "mrs/3", "--length", "8KiB", "--ttl", "30s", "--duration", "5s"});
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_EQ(grants_.issued.back().ttl_ms(), 30000u);
  EXPECT_EQ(grants_.issued.back().length(), 8192u);
}

TEST_F(RdmactlTest, ReadWithSomeoneElsesTokenIssuesAndRevokesNothing) {
  const std::string token = Path("other.token");
  std::ofstream(token, std::ios::binary) << kToken;
  Result r = Run({"read", "--token-file", token, "--endpoint", "127.0.0.1:7471", "--length", "4KiB"});
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("error: "));
  EXPECT_THAT(r.err, HasSubstr("127.0.0.1:7471"));
  EXPECT_THAT(grants_.issued, IsEmpty());
  EXPECT_THAT(grants_.revoked, IsEmpty());
}

TEST_F(RdmactlTest, HelpSaysTheTokenIsASecret) {
  Result r = Run({"grant", "--help"});
  EXPECT_EQ(r.rc, 0);
  EXPECT_THAT(r.out, HasSubstr("SECRET"));
  EXPECT_THAT(r.out, HasSubstr("--token-file"));
  r = Run({"bench", "read", "--help"});
  EXPECT_EQ(r.rc, 0);
  EXPECT_THAT(r.out, HasSubstr("--depth"));
}

// ---- get devices: the NIC's counters

TEST_F(RdmactlTest, GetOneDeviceShowsItsCountersMarkingRemoteAccessErrors) {
  Result r = Run({"get", "devices", "rxe0"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("DEVICE         PORT   COUNTER     VALUE   REMOTE-ACCESS-ERROR\n"
                               "devices/rxe0   1      rcvd_pkts   42      no\n"
                               "devices/rxe0   1      sent_pkts   40      no\n"));
  r = Run({"get", "device", "mlx5_0"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("devices/mlx5_0   1      resp_remote_access_errors   3       yes\n"));
  r = Run({"get", "devices", "nosuch0"});
  EXPECT_NE(r.rc, 0);
  EXPECT_THAT(r.err, HasSubstr("nosuch0"));
}

TEST_F(RdmactlTest, GetDevicesListsCountersOnlyInWide) {
  Result r = Run({"get", "devices"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, Not(HasSubstr("COUNTER")));
  r = Run({"get", "devices", "-o", "wide"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("devices/mlx5_0   1      resp_remote_access_errors   3       yes\n"));
  EXPECT_THAT(r.out, HasSubstr("devices/rxe0     1      rcvd_pkts                   42"));
}

TEST_F(RdmactlTest, GetDeviceJsonIncludesTheCounters) {
  Result r = Run({"get", "devices", "mlx5_0", "-o", "json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"hw_counters\": ["));
  EXPECT_THAT(r.out, HasSubstr("\"name\": \"resp_remote_access_errors\""));
  EXPECT_THAT(r.out, HasSubstr("\"remote_access_error\": true"));
  EXPECT_THAT(r.out, HasSubstr("\"value\": \"3\""));  // uint64 is a JSON string (proto3 JSON mapping)
  r = Run({"get", "devices", "rxe0", "-o", "json"});
  EXPECT_THAT(r.out, HasSubstr("\"remote_access_error\": false"));
  r = Run({"get", "devices", "rxe0", "-o", "name"});
  EXPECT_EQ(r.out, "devices/rxe0\n");
}

// ---- tenants: get tenants, describe tenant, whoami

TEST_F(RdmactlTest, GetTenantsListsUsedOverLimit) {
  Result r = Run({"get", "tenants"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out,
            "NAME            PRINCIPALS      PDS   MRS   PINNED       GRANTS        TOKENS   CONNS\n"
            "tenants/app     unix:uid:1000   1     2/8   12KiB/1GiB   1/unlimited   <none>   <none>\n"
            "tenants/batch   unix:uid:1000   1     2/8   12KiB/1GiB   1/unlimited   <none>   <none>\n");
  r = Run({"get", "tenants", "-o", "name"});
  EXPECT_EQ(r.out, "tenants/app\ntenants/batch\n");
  r = Run({"get", "tenants", "-o", "json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("{\n \"items\": [\n"));
  EXPECT_THAT(r.out, HasSubstr("\"quota\": \"pinned_bytes\""));
}

TEST_F(RdmactlTest, GetOneTenantByAnySpelling) {
  for (const char* name : {"app", "tenant/app", "tenants/app"}) {
    Result r = Run({"get", "tenants", name});
    ASSERT_EQ(r.rc, 0) << name << ": " << r.err;
    EXPECT_THAT(r.out, HasSubstr("\ntenants/app   unix:uid:1000"));
  }
  Result r = Run({"get", "tenants/app", "-o", "json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("{\n \"name\": \"tenants/app\""));
  EXPECT_THAT(tenants_.got, ElementsAre("tenants/app", "tenants/app", "tenants/app", "tenants/app"));
  r = Run({"get", "tenant", "nobody"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, HasSubstr("error: name: tenants/nobody does not exist"));
  r = Run({"get", "tenant", "bad name!"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.err, HasSubstr("is not a tenant name"));
  EXPECT_EQ(tenants_.got.size(), 5u);  // the usage error sent nothing
}

TEST_F(RdmactlTest, DescribeTenant) {
  Result r = Run({"describe", "tenant", "app"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out,
            "Name:           tenants/app\n"
            "Principals:     unix:uid:1000\n"
            "File roots:     <allowed_file_roots> (rdmad's own)\n"
            "Devices:        <all>\n"
            "PDs:            pds/1\n"
            "Quotas:\n"
            "  QUOTA            USED    LIMIT\n"
            "  pinned_bytes     12KiB   1GiB\n"
            "  mrs              2       8\n"
            "  grants           1       unlimited\n"
            "  rpc_per_second   -       100\n"
            "  (rpc_per_second is a limit per connection: no use is counted)\n");
  r = Run({"describe", "tenants/app", "-o", "json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("{\n \"name\": \"tenants/app\""));
  r = Run({"describe", "tenant", "batch"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, HasSubstr("tenants/batch does not exist"));
  r = Run({"describe", "tenant"});
  EXPECT_EQ(r.rc, 2);
  r = Run({"describe", "pds", "3"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.err, HasSubstr("'describe' does not apply to 'pds' (mr, tenant)"));
}

TEST_F(RdmactlTest, WhoAmI) {
  Result r = Run({"whoami"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out,
            "Principal:      unix:uid:1000\n"
            "Tenant:         app\n"
            "Role:           TENANT\n"
            "Authenticated:  yes\n"
            "Transport:      unix\n"
            "UID:            1000\n"
            "GID:            1000\n");
  r = Run({"whoami", "-o", "json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"role\": \"ROLE_TENANT\""));
  EXPECT_THAT(r.out, HasSubstr("\"uid\": \"1000\""));  // int64: a JSON string
  r = Run({"whoami", "-o", "name"});
  EXPECT_EQ(r.out, "unix:uid:1000\n");
}

}  // namespace
}  // namespace rdmad::cli
