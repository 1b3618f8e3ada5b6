// rdmactl's kubectl habits, whole command lines against an in-process fake of rdmad: --no-headers, --sort-by,
// -l/--selector, -o yaml, --ignore-not-found, describe mr, get -w (polled, and through WatchGrants with no change
// lost between the list and the stream), version,
// completion, the config file's contexts and the settings' precedence, the create-mr hint.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <gtest/gtest.h>

#include "cli/rdmactl.h"
#include "rdmad/v1/rdmad.grpc.pb.h"

namespace rdmad::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

grpc::Status RdmadError(grpc::StatusCode code, const std::string& message) {
  v1::ErrorDetail detail;
  detail.set_field("name");
  v1::RpcStatus rpc;
  rpc.set_code(code);
  rpc.set_message(message);
  rpc.add_details()->PackFrom(detail);
  return grpc::Status(code, message, rpc.SerializeAsString());
}

v1::ProtectionDomain Pd(int n, const std::string& label, int mrs) {
  v1::ProtectionDomain pd;
  pd.set_name("pds/" + std::to_string(n));
  pd.set_device("devices/rxe0");
  pd.set_label(label);
  pd.set_mr_count(mrs);
  return pd;
}

// One device, rxe0, whose kernel numbers are pdn 17 for pds/2, pdn 5 for pds/10 and mrn 33 for mrs/1 (pds/3
// unknown);
// with `unavailable`, ListKernelIds fails as an rdmad without RDMA netlink answers.
class FakeDevices final : public v1::Devices::Service {
 public:
  grpc::Status ListDevices(grpc::ServerContext*, const v1::ListDevicesRequest*, v1::ListDevicesResponse* resp) override {
    resp->add_devices()->set_name("devices/rxe0");
    return grpc::Status::OK;
  }
  grpc::Status ListKernelIds(grpc::ServerContext*, const v1::ListKernelIdsRequest* req,
                             v1::ListKernelIdsResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu);
    asked.push_back(req->device());
    if (unavailable) return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no RDMA netlink");
    if (req->device() != "devices/rxe0") return RdmadError(grpc::StatusCode::NOT_FOUND, "device: no such device");
    v1::KernelId* pd = resp->add_ids();
    pd->set_name("pds/2");
    pd->set_number(17);
    v1::KernelId* pd10 = resp->add_ids();
    pd10->set_name("pds/10");
    pd10->set_number(5);
    v1::KernelId* mr = resp->add_ids();
    mr->set_name("mrs/1");
    mr->set_number(33);
    resp->set_unknown(1);
    return grpc::Status::OK;
  }
  std::mutex mu;
  std::vector<std::string> asked;
  bool unavailable = false;
};

// PDs: pds/2 (app=web, 5 MRs), pds/10 (app=db,tier=x, 1 MR), pds/3 (demo, 3 MRs); pds/9 does not exist. With
// `script` set, each ListPds answers the next list of it, and fails once it is used up.
class FakePds final : public v1::ProtectionDomains::Service {
 public:
  grpc::Status ListPds(grpc::ServerContext*, const v1::ListPdsRequest*, v1::ListPdsResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu);
    if (script.empty()) {
      *resp->add_pds() = Pd(2, "app=web", 5);
      *resp->add_pds() = Pd(10, "app=db,tier=x", 1);
      *resp->add_pds() = Pd(3, "demo", 3);
      return grpc::Status::OK;
    }
    if (calls >= script.size()) return RdmadError(grpc::StatusCode::INTERNAL, "the script ended");
    for (const auto& pd : script[calls]) *resp->add_pds() = pd;
    calls++;
    return grpc::Status::OK;
  }
  grpc::Status GetPd(grpc::ServerContext*, const v1::GetPdRequest* req, v1::ProtectionDomain* resp) override {
    if (req->name() == "pds/9") return RdmadError(grpc::StatusCode::NOT_FOUND, "name: no pds/9");
    *resp = Pd(2, "app=web", 5);
    return grpc::Status::OK;
  }
  grpc::Status DeletePd(grpc::ServerContext*, const v1::DeletePdRequest* req, v1::DeletePdResponse*) override {
    if (req->name() == "pds/9") return RdmadError(grpc::StatusCode::NOT_FOUND, "name: no pds/9");
    return grpc::Status::OK;
  }
  std::mutex mu;
  std::vector<std::vector<v1::ProtectionDomain>> script;
  size_t calls = 0;
};

// mrs/1 in pds/2 (mrs/9 does not exist); in pds/2 mws/1 is bound to mrs/1, mws/2 to mrs/2, mws/3 unbound.
class FakeMrs final : public v1::MemoryRegions::Service {
 public:
  // A validation answers the region it would make, without a name (as rdmad does).
  grpc::Status RegisterMr(grpc::ServerContext*, const v1::RegisterMrRequest* req, v1::MemoryRegion* resp) override {
    std::lock_guard<std::mutex> lock(mu);
    registered.push_back(*req);
    if (!req->validate_only()) resp->set_name("mrs/7");
    resp->set_pd(req->pd());
    resp->set_length(req->source().anonymous().size());
    return grpc::Status::OK;
  }
  std::mutex mu;
  std::vector<v1::RegisterMrRequest> registered;
  grpc::Status GetMr(grpc::ServerContext*, const v1::GetMrRequest* req, v1::MemoryRegion* resp) override {
    if (req->name() != "mrs/1") return RdmadError(grpc::StatusCode::NOT_FOUND, "name: no " + req->name());
    resp->set_name("mrs/1");
    resp->set_pd("pds/2");
    resp->set_length(1 << 20);
    resp->set_lkey(0x30b);
    resp->set_rkey(0x4f0);
    resp->set_addr(0x7f0000001000);
    resp->add_access(v1::LOCAL_WRITE);
    resp->add_access(v1::MW_BIND);
    resp->set_state(v1::MR_READY);
    resp->set_generation(2);
    resp->mutable_source()->mutable_anonymous()->set_size(1 << 20);
    return grpc::Status::OK;
  }
};

class FakeMws final : public v1::MemoryWindows::Service {
 public:
  grpc::Status ListMws(grpc::ServerContext*, const v1::ListMwsRequest* req, v1::ListMwsResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu);
    listed_pd = req->pd();
    for (int i = 1; i <= 3; i++) {
      v1::MemoryWindow* mw = resp->add_mws();
      mw->set_name("mws/" + std::to_string(i));
      mw->set_pd("pds/2");
      mw->set_bound(i < 3);
      if (i < 3) mw->mutable_binding()->set_mr("mrs/" + std::to_string(i));
      if (i < 3) mw->mutable_binding()->set_length(4096 * i);
    }
    return grpc::Status::OK;
  }
  grpc::Status BindMw(grpc::ServerContext*, const v1::BindMwRequest* req, v1::MemoryWindow* resp) override {
    std::lock_guard<std::mutex> lock(mu);
    bound.push_back(*req);
    if (!req->validate_only()) resp->set_name(req->name());
    return grpc::Status::OK;
  }
  std::mutex mu;
  std::string listed_pd;
  std::vector<v1::BindMwRequest> bound;
};

v1::Grant Grant(const std::string& name, const std::string& mr) {
  v1::Grant g;
  g.set_name(name);
  g.set_mr(mr);
  g.set_length(4096);
  g.set_principal("app-7");
  g.set_state(v1::GRANT_ACTIVE);
  return g;
}

class FakeGrants final : public v1::Grants::Service {
 public:
  grpc::Status ListGrants(grpc::ServerContext*, const v1::ListGrantsRequest* req, v1::ListGrantsResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu);
    listed = *req;
    *resp->add_grants() = Grant("grants/4", req->mr().empty() ? "mrs/1" : req->mr());
    if (like_rdmad) {
      // As rdmad's hub: a change reaches the watches subscribed when it happens, and no other. grants/4 was
      // renewed just before this list (the list shows it renewed), grants/7 issued just after.
      v1::GrantEvent renewed;
      renewed.set_type(v1::GRANT_RENEWED);
      *renewed.mutable_grant() = resp->grants(0);
      renewed.mutable_grant()->set_renewals(1);
      resp->mutable_grants(0)->set_renewals(1);
      v1::GrantEvent issued;
      issued.set_type(v1::GRANT_ISSUED_EVENT);
      *issued.mutable_grant() = Grant("grants/7", "mrs/1");
      issued.mutable_grant()->set_state(v1::GRANT_ISSUED);
      if (subscribed) pending = {renewed, issued};
      list_done = true;
      cv.notify_all();
    }
    return grpc::Status::OK;
  }
  grpc::Status WatchGrants(grpc::ServerContext* ctx, const v1::WatchGrantsRequest* req,
                           grpc::ServerWriter<v1::GrantEvent>* writer) override {
    {
      std::lock_guard<std::mutex> lock(mu);
      watched = *req;
    }
    if (like_rdmad) {
      // As rdmad: subscribed first, then the handshake's metadata; the stream ends once a list was answered.
      {
        std::lock_guard<std::mutex> lock(mu);
        subscribed = true;
      }
      ctx->AddInitialMetadata("rdmad-watch", "open");
      writer->SendInitialMetadata();
      std::vector<v1::GrantEvent> events;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait_for(lock, std::chrono::seconds(10), [this] { return list_done; });
        events.swap(pending);
        subscribed = false;
      }
      for (const v1::GrantEvent& e : events) writer->Write(e);
      return grpc::Status::OK;
    }
    v1::GrantEvent e;
    e.set_type(v1::GRANT_ISSUED_EVENT);
    *e.mutable_grant() = Grant("grants/5", "mrs/1");
    writer->Write(e);
    e.set_type(v1::GRANT_REVOKED);
    *e.mutable_grant() = Grant("grants/4", "mrs/1");
    e.mutable_grant()->set_state(v1::GRANT_ENDED);
    writer->Write(e);
    return grpc::Status::OK;
  }
  grpc::Status IssueGrant(grpc::ServerContext*, const v1::IssueGrantRequest* req, v1::IssuedGrant* resp) override {
    std::lock_guard<std::mutex> lock(mu);
    issued.push_back(*req);
    *resp->mutable_grant() = Grant(req->validate_only() ? "" : "grants/6", req->mr());
    if (!req->validate_only()) resp->set_token("RDTKsecret");
    return grpc::Status::OK;
  }
  std::mutex mu;
  std::condition_variable cv;
  std::vector<v1::IssueGrantRequest> issued;
  v1::ListGrantsRequest listed;
  v1::WatchGrantsRequest watched;
  bool like_rdmad = false;  // a hub's live events, and changes on either side of the list
  bool subscribed = false, list_done = false;
  std::vector<v1::GrantEvent> pending;
};

struct Result {
  int rc = -1;
  std::string out, err;
};

class KubectlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    builder.RegisterService(&devices_);
    builder.RegisterService(&pds_);
    builder.RegisterService(&mrs_);
    builder.RegisterService(&mws_);
    builder.RegisterService(&grants_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    unsetenv("RDMAD_SERVER");
    config_ = ::testing::TempDir() + "/rdmactl-config";
    std::remove(config_.c_str());
    setenv("RDMACTL_CONFIG", config_.c_str(), 1);
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
  void WriteConfig(const std::string& text) { std::ofstream(config_) << text; }

  FakeDevices devices_;
  FakePds pds_;
  FakeMrs mrs_;
  FakeMws mws_;
  FakeGrants grants_;
  std::unique_ptr<grpc::Server> server_;
  std::string config_;
};

TEST_F(KubectlTest, NoHeaders) {
  Result r = Run({"get", "pds", "--no-headers"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, Not(HasSubstr("NAME")));
  EXPECT_EQ(r.out.substr(0, 6), "pds/2 ");
  EXPECT_THAT(Run({"get", "pds"}).out, HasSubstr("NAME"));
}

TEST_F(KubectlTest, SortByColumnOrField) {
  EXPECT_EQ(Run({"get", "pds", "-o", "name", "--sort-by", "name"}).out, "pds/2\npds/3\npds/10\n");
  EXPECT_EQ(Run({"get", "pds", "-o", "name", "--sort-by=MRS"}).out, "pds/10\npds/3\npds/2\n");
  EXPECT_EQ(Run({"get", "pds", "-o", "name", "--sort-by", ".mr_count"}).out, "pds/10\npds/3\npds/2\n");
  EXPECT_EQ(Run({"get", "pds", "-o", "name", "--sort-by", "{.label}"}).out, "pds/10\npds/2\npds/3\n");
  Result bad = Run({"get", "pds", "--sort-by", "colour"});
  EXPECT_EQ(bad.rc, 2);
  EXPECT_THAT(bad.err, HasSubstr("--sort-by: "));
  EXPECT_THAT(bad.err, HasSubstr("no field 'colour'"));
  EXPECT_THAT(bad.err, HasSubstr("MRS"));
  EXPECT_THAT(bad.err, HasSubstr("PDN"));  // -o wide's kernel column is one too
}

// The kernel's numbers sort like any column, in any output (known numbers first, then <unknown>), with one
// ListKernelIds for the sort and the wide column together.
TEST_F(KubectlTest, SortByTheKernelNumbers) {
  EXPECT_EQ(Run({"get", "pds", "-o", "name", "--sort-by", "pdn"}).out, "pds/10\npds/2\npds/3\n");
  Result wide = Run({"get", "pds", "-o", "wide", "--sort-by", "PDN"});
  ASSERT_EQ(wide.rc, 0) << wide.err;
  EXPECT_LT(wide.out.find("pds/10 "), wide.out.find("pds/2 "));
  EXPECT_EQ(devices_.asked.size(), 2u);  // once per run
  devices_.unavailable = true;
  Result failed = Run({"get", "pds", "-o", "name", "--sort-by", "PDN"});
  ASSERT_EQ(failed.rc, 0) << failed.err;
  EXPECT_EQ(failed.out, "pds/2\npds/10\npds/3\n");  // as listed: every number unknown
  EXPECT_THAT(failed.err, HasSubstr("note: PDN: devices/rxe0: UNIMPLEMENTED: no RDMA netlink"));
}

TEST_F(KubectlTest, LabelSelector) {
  EXPECT_EQ(Run({"get", "pds", "-o", "name", "-l", "app=web"}).out, "pds/2\n");
  EXPECT_EQ(Run({"get", "pds", "-o", "name", "--selector", "app"}).out, "pds/2\npds/10\n");
  EXPECT_EQ(Run({"get", "pds", "-o", "name", "-l", "!app"}).out, "pds/3\n");
  EXPECT_EQ(Run({"get", "pds", "-o", "name", "-l", "demo"}).out, "pds/3\n");
  EXPECT_EQ(Run({"get", "pds", "-o", "name", "-l", "app in (db,cache),tier"}).out, "pds/10\n");
  Result none = Run({"get", "pds", "-l", "app=nope"});
  EXPECT_EQ(none.rc, 0);
  EXPECT_EQ(none.out, "");
  EXPECT_THAT(none.err, HasSubstr("No resources found matching app=nope."));
  Result bad = Run({"get", "pds", "-l", "app in (a"});
  EXPECT_EQ(bad.rc, 2);
  EXPECT_THAT(bad.err, HasSubstr("--selector"));
  EXPECT_EQ(Run({"get", "pds", "pds/2", "-l", "app"}).rc, 2);
  EXPECT_EQ(Run({"get", "mrs", "-l", "app"}).rc, 2);  // regions have no label
}

TEST_F(KubectlTest, Yaml) {
  Result list = Run({"get", "pds", "-o", "yaml", "-l", "app=web"});
  ASSERT_EQ(list.rc, 0) << list.err;
  EXPECT_THAT(list.out, HasSubstr("items:\n- name: pds/2\n  device: devices/rxe0\n"));
  EXPECT_THAT(list.out, HasSubstr("  label: app=web\n"));
  EXPECT_THAT(Run({"get", "pds", "pds/2", "-o", "yaml"}).out, HasSubstr("name: pds/2\n"));
  EXPECT_THAT(Run({"describe", "mr", "mrs/1", "-o", "yaml"}).out, HasSubstr("mr:\n  name: mrs/1\n"));
  EXPECT_THAT(Run({"version", "-o", "yaml"}).out, HasSubstr("api: rdmad.v1\n"));
}

TEST_F(KubectlTest, IgnoreNotFound) {
  for (std::vector<std::string> cmd : std::vector<std::vector<std::string>>{
           {"get", "pds", "pds/9"}, {"delete", "pd", "9"}, {"describe", "mr", "mrs/9"}}) {
    Result plain = Run(cmd);
    EXPECT_EQ(plain.rc, 1) << cmd[0];
    EXPECT_THAT(plain.err, HasSubstr("error:"));
    cmd.push_back("--ignore-not-found");
    Result ignored = Run(cmd);
    EXPECT_EQ(ignored.rc, 0) << cmd[0] << ": " << ignored.err;
    EXPECT_EQ(ignored.out + ignored.err, "") << cmd[0];
  }
  EXPECT_EQ(Run({"get", "pds", "pds/2", "--ignore-not-found", "-o", "name"}).out, "pds/2\n");
}

TEST_F(KubectlTest, WideShowsTheKernelNumbers) {
  Result plain = Run({"get", "pds"});
  ASSERT_EQ(plain.rc, 0) << plain.err;
  EXPECT_THAT(plain.out, Not(HasSubstr("PDN")));
  EXPECT_TRUE(devices_.asked.empty());  // only -o wide asks the kernel
  Result pds = Run({"get", "pds", "-o", "wide"});
  ASSERT_EQ(pds.rc, 0) << pds.err;
  EXPECT_THAT(pds.out, HasSubstr("LABEL"));
  EXPECT_THAT(pds.out, HasSubstr("PDN\n"));
  EXPECT_THAT(pds.out, HasSubstr("app=web         17\n"));
  EXPECT_THAT(pds.out, HasSubstr("demo            <unknown>\n"));
  EXPECT_EQ(devices_.asked, std::vector<std::string>{"devices/rxe0"});
  EXPECT_EQ(pds.err, "");
  Result mrs = Run({"get", "mrs", "mrs/1", "-o", "wide"});
  ASSERT_EQ(mrs.rc, 0) << mrs.err;
  EXPECT_THAT(mrs.out, HasSubstr("MRN\n"));
  EXPECT_THAT(mrs.out, HasSubstr("   33\n"));
  // Without the numbers the list still prints, with a note on stderr.
  devices_.unavailable = true;
  Result failed = Run({"get", "pds", "-o", "wide"});
  ASSERT_EQ(failed.rc, 0) << failed.err;
  EXPECT_THAT(failed.out, HasSubstr("app=web         <unknown>\n"));
  EXPECT_THAT(failed.err, HasSubstr("note: PDN: devices/rxe0: UNIMPLEMENTED: no RDMA netlink"));
}

TEST_F(KubectlTest, DescribeMrShowsTheKernelNumbers) {
  Result r = Run({"describe", "mr", "mrs/1"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Kernel:"));
  EXPECT_THAT(r.out, HasSubstr("mrn 33, pdn 17\n"));
  EXPECT_EQ(devices_.asked, std::vector<std::string>{"devices/rxe0"});  // the device of the region's PD
  Result json = Run({"describe", "mr", "mrs/1", "-o", "json"});
  EXPECT_THAT(json.out, HasSubstr("\"mrn\": 33"));
  EXPECT_THAT(json.out, HasSubstr("\"pdn\": 17"));
  devices_.unavailable = true;
  Result failed = Run({"describe", "mr", "mrs/1"});
  ASSERT_EQ(failed.rc, 0) << failed.err;
  EXPECT_THAT(failed.out, HasSubstr("<unavailable> (UNIMPLEMENTED: no RDMA netlink)"));
}

TEST_F(KubectlTest, DescribeMr) {
  Result r = Run({"describe", "mr", "1"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Name:"));
  EXPECT_THAT(r.out, HasSubstr("mrs/1\n"));
  EXPECT_THAT(r.out, HasSubstr("pds/2"));
  EXPECT_THAT(r.out, HasSubstr("local-write,mw-bind"));
  EXPECT_THAT(r.out, HasSubstr("READY"));
  EXPECT_THAT(r.out, HasSubstr("lkey 0x30b, rkey 0x4f0"));
  EXPECT_THAT(r.out, HasSubstr("Windows:\n  NAME "));
  EXPECT_THAT(r.out, HasSubstr("  mws/1 "));
  EXPECT_THAT(r.out, Not(HasSubstr("mws/2")));  // bound to another region
  EXPECT_THAT(r.out, Not(HasSubstr("mws/3")));  // unbound
  EXPECT_THAT(r.out, HasSubstr("Grants:\n  NAME "));
  EXPECT_THAT(r.out, HasSubstr("  grants/4 "));
  EXPECT_EQ(mws_.listed_pd, "pds/2");
  EXPECT_EQ(grants_.listed.mr(), "mrs/1");
  Result json = Run({"describe", "mr", "mrs/1", "-o", "json"});
  EXPECT_THAT(json.out, HasSubstr("\"windows\": ["));
  EXPECT_THAT(json.out, HasSubstr("\"grants\": ["));
}

TEST_F(KubectlTest, WatchPollsAndPrintsWhatChanged) {
  pds_.script = {{Pd(1, "a", 0), Pd(2, "b", 0)}, {Pd(1, "a", 1), Pd(3, "c", 0)}, {Pd(1, "a", 1), Pd(3, "c", 0)}};
  Result r = Run({"get", "pds", "-w", "--watch-interval", "20ms", "--output-watch-events"});
  EXPECT_EQ(r.rc, 1);  // the script ran out: the fetch failed
  EXPECT_THAT(r.err, HasSubstr("the script ended"));
  std::vector<std::string> lines;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) lines.push_back(line.substr(0, line.find("devices/")));
  ASSERT_EQ(lines.size(), 6u) << r.out;
  EXPECT_THAT(lines[0], HasSubstr("EVENT"));
  EXPECT_EQ(lines[1], "ADDED      pds/1   ");
  EXPECT_EQ(lines[2], "ADDED      pds/2   ");
  EXPECT_EQ(lines[3], "MODIFIED   pds/1   ");
  EXPECT_EQ(lines[4], "ADDED      pds/3   ");
  EXPECT_EQ(lines[5], "DELETED    pds/2   ");
}

TEST_F(KubectlTest, WatchJsonAndUsage) {
  pds_.script = {{Pd(1, "a", 0)}, {}};
  Result r = Run({"get", "pds", "--watch", "--watch-interval", "10ms", "-o", "json", "--output-watch-events"});
  EXPECT_THAT(r.out, HasSubstr("{\"type\":\"ADDED\",\"object\":{\"name\":\"pds/1\""));
  EXPECT_THAT(r.out, HasSubstr("{\"type\":\"DELETED\",\"object\":{\"name\":\"pds/1\""));
  EXPECT_EQ(Run({"get", "pds", "--watch-interval", "1s"}).rc, 2);
  EXPECT_EQ(Run({"get", "pds", "-w", "--watch-interval", "0s"}).rc, 2);
}

TEST_F(KubectlTest, WatchGrantsUsesWatchGrants) {
  Result r = Run({"get", "grants", "--mr", "mrs/1", "-w", "--output-watch-events", "--no-headers"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(grants_.watched.mr(), "mrs/1");
  std::istringstream in(r.out);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line.substr(0, line.find("mrs/")));
  ASSERT_EQ(lines.size(), 3u) << r.out;
  EXPECT_EQ(lines[0], "ADDED      grants/4   ");
  EXPECT_EQ(lines[1], "ADDED      grants/5   ");
  EXPECT_EQ(lines[2], "DELETED    grants/4   ");
  EXPECT_THAT(r.err, HasSubstr("The grant stream ended"));
}

// A grant issued after the list was taken but before a watch opened after it would be lost: -w opens the
// stream first and lists once rdmad admitted it. A change the list already shows (grants/4 renewed between the
// stream's start and the list) is not printed twice.
TEST_F(KubectlTest, WatchGrantsMissesNoChangeBetweenTheListAndTheStream) {
  grants_.like_rdmad = true;
  Result r = Run({"get", "grants", "-w", "--output-watch-events", "--no-headers", "-o", "json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  std::istringstream in(r.out);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  EXPECT_THAT(lines[0], HasSubstr("{\"type\":\"ADDED\",\"object\":{\"name\":\"grants/4\""));
  EXPECT_THAT(lines[0], HasSubstr("\"renewals\":1"));
  EXPECT_THAT(lines[1], HasSubstr("{\"type\":\"ADDED\",\"object\":{\"name\":\"grants/7\""));
  EXPECT_THAT(r.err, HasSubstr("The grant stream ended"));
}

TEST_F(KubectlTest, Version) {
  Result r = Run({"version"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Client Version: rdmactl "));
  EXPECT_THAT(r.out, HasSubstr("Server: rdmad at "));
  Result client = Run({"version", "--client", "-o", "json"});
  EXPECT_THAT(client.out, HasSubstr("\"rdmactl\": \""));
  EXPECT_THAT(client.out, HasSubstr("\"server\": \"\""));
}

TEST_F(KubectlTest, CompletionComesFromTheCommandTree) {
  Result r = Run({"completion", "bash"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("complete -F _rdmactl rdmactl"));
  EXPECT_THAT(r.out, HasSubstr("[\"rdmactl get mr\"]=\"rdmactl get mrs\""));  // an alias
  EXPECT_THAT(r.out, HasSubstr("[\"rdmactl describe\"]=\"mr tenant\""));
  EXPECT_THAT(r.out, HasSubstr("--sort-by"));
  EXPECT_THAT(Run({"completion", "zsh"}).out, HasSubstr("bashcompinit"));
}

TEST_F(KubectlTest, ConfigContexts) {
  EXPECT_EQ(Run({"config", "current-context"}).rc, 1);  // no file
  WriteConfig(R"({"current-context": "lab", "contexts": [{"name": "lab", "server": "lab:7470"},
                   {"name": "dev", "server": "dev:7470", "tls-server-name": "rdmad.dev"}]})");
  Result list = Run({"config", "get-contexts"});
  ASSERT_EQ(list.rc, 0) << list.err;
  EXPECT_THAT(list.out, HasSubstr("*         lab    lab:7470"));
  EXPECT_EQ(Run({"config", "get-contexts", "-o", "name"}).out, "lab\ndev\n");
  EXPECT_EQ(Run({"config", "current-context"}).out, "lab\n");
  EXPECT_EQ(Run({"config", "use-context", "dev"}).out, "Switched to context \"dev\".\n");
  EXPECT_EQ(Run({"config", "current-context"}).out, "dev\n");
  Result missing = Run({"config", "use-context", "prod"});
  EXPECT_EQ(missing.rc, 1);
  EXPECT_THAT(missing.err, HasSubstr("no context 'prod'"));
  Result bad = Run({"get", "pds", "--context", "prod"});
  EXPECT_EQ(bad.rc, 2);
  EXPECT_THAT(bad.err, HasSubstr("--context: no context 'prod'"));
  WriteConfig("{");
  EXPECT_EQ(Run({"get", "pds"}).rc, 2);
}

// Which server a command would use: version -o json says (the fake answers on the test's channel anyway).
std::string Server(const Result& r) {
  const size_t at = r.out.find("\"server\": \"");
  return at == std::string::npos ? "?" : r.out.substr(at + 11, r.out.find('"', at + 11) - at - 11);
}

// set-context creates the file (0600) and a context, then changes only the fields it is given; the file's
// mode is kept; delete-context removes one (and current-context with it); the errors exit 1.
TEST_F(KubectlTest, ConfigSetContextAndDeleteContext) {
  Result made = Run({"config", "set-context", "lab", "--server", "lab:7470"});
  ASSERT_EQ(made.rc, 0) << made.err;
  EXPECT_EQ(made.out, "Context \"lab\" created.\n");
  struct stat st{};
  ASSERT_EQ(stat(config_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(Run({"config", "current-context"}).rc, 1);  // not made current without --current
  Result changed = Run({"config", "set-context", "lab", "--current"});
  ASSERT_EQ(changed.rc, 0) << changed.err;
  EXPECT_EQ(changed.out, "Context \"lab\" modified.\nSwitched to context \"lab\".\n");
  EXPECT_EQ(Run({"config", "current-context"}).out, "lab\n");
  EXPECT_EQ(Server(Run({"version", "-o", "json"})), "lab:7470");  // the server was kept
  ASSERT_EQ(Run({"config", "set-context", "lab", "--server", "lab2:7470"}).rc, 0);
  EXPECT_EQ(Server(Run({"version", "-o", "json"})), "lab2:7470");

  // TLS files: a relative path is stored absolute (in the file it would be from the file's directory); the
  // file's mode is kept; only the fields given change.
  ASSERT_EQ(chmod(config_.c_str(), 0640), 0);
  Result dev = Run({"config", "set-context", "dev", "--server", "dev:7470", "--tls-ca", "/etc/ca.pem", "--tls-key",
                    "me.key", "--tls-server-name", "rdmad.dev"});
  ASSERT_EQ(dev.rc, 0) << dev.err;
  ASSERT_EQ(Run({"config", "set-context", "dev", "--tls-cert", "/etc/me.pem"}).rc, 0);
  ASSERT_EQ(stat(config_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);
  const std::string contexts = Run({"config", "get-contexts", "-o", "json"}).out;
  EXPECT_THAT(contexts, HasSubstr("\"server\": \"dev:7470\""));
  EXPECT_THAT(contexts, HasSubstr("\"tls_ca\": \"/etc/ca.pem\""));
  EXPECT_THAT(contexts, HasSubstr("\"tls_cert\": \"/etc/me.pem\""));
  EXPECT_THAT(contexts, HasSubstr("\"tls_key\": \"" + std::string(cwd) + "/me.key\""));
  EXPECT_THAT(contexts, HasSubstr("\"tls_server_name\": \"rdmad.dev\""));
  EXPECT_EQ(Run({"config", "get-contexts", "-o", "name"}).out, "lab\ndev\n");

  Result gone = Run({"config", "delete-context", "lab"});
  ASSERT_EQ(gone.rc, 0) << gone.err;
  EXPECT_EQ(gone.out, "deleted context lab from " + config_ + "\n");
  EXPECT_THAT(gone.err, HasSubstr("it was the current context"));
  EXPECT_EQ(Run({"config", "get-contexts", "-o", "name"}).out, "dev\n");
  EXPECT_EQ(Run({"config", "current-context"}).rc, 1);
  Result missing = Run({"config", "delete-context", "lab"});
  EXPECT_EQ(missing.rc, 1);
  EXPECT_THAT(missing.err, HasSubstr("no context 'lab'"));
  EXPECT_EQ(Run({"config", "set-context"}).rc, 2);  // NAME is required
  // A current context naming TLS files that are not there: a command that calls rdmad is refused, naming
  // them, but config (and completion) still work, so the context can be mended.
  ASSERT_EQ(Run({"config", "use-context", "dev"}).rc, 0);
  Result dial = Run({"get", "pds"});
  EXPECT_EQ(dial.rc, 2);
  EXPECT_THAT(dial.err, HasSubstr("--tls-ca"));
  EXPECT_EQ(Run({"config", "get-contexts", "-o", "name"}).out, "dev\n");
  EXPECT_EQ(Run({"completion", "bash"}).rc, 0);
  Result mended = Run({"config", "set-context", "dev", "--tls-ca", "/etc/other-ca.pem"});
  EXPECT_EQ(mended.rc, 0) << mended.err;
  WriteConfig("{");
  Result broken = Run({"config", "set-context", "x", "--server", "x:1"});
  EXPECT_NE(broken.rc, 0);
  EXPECT_EQ(broken.rc, Run({"config", "use-context", "x"}).rc);  // as the other config commands
  EXPECT_THAT(broken.err, HasSubstr("not a JSON object"));
}

TEST_F(KubectlTest, FlagsThenEnvironmentThenContextThenDefault) {
  EXPECT_EQ(Server(Run({"version", "-o", "json"})), "unix:/run/rdmad/rdmad.sock");
  WriteConfig(R"({"current-context": "lab", "contexts": [{"name": "lab", "server": "lab:7470"},
                   {"name": "dev", "server": "dev:7470"}]})");
  EXPECT_EQ(Server(Run({"version", "-o", "json"})), "lab:7470");
  EXPECT_EQ(Server(Run({"version", "-o", "json", "--context", "dev"})), "dev:7470");
  setenv("RDMAD_SERVER", "env:7470", 1);
  EXPECT_EQ(Server(Run({"version", "-o", "json", "--context", "dev"})), "env:7470");
  EXPECT_EQ(Server(Run({"version", "-o", "json", "--server", "flag:7470"})), "flag:7470");
  unsetenv("RDMAD_SERVER");
}

TEST_F(KubectlTest, DryRunServerSendsValidateOnly) {
  Result mr = Run({"register", "mr", "--pd", "pds/2", "--size", "4KiB", "--access", "local-write", "--dry-run=server"});
  ASSERT_EQ(mr.rc, 0) << mr.err;
  ASSERT_EQ(mrs_.registered.size(), 1u);
  EXPECT_TRUE(mrs_.registered[0].validate_only());
  EXPECT_THAT(mr.out, HasSubstr("would be registered (server dry run"));
  Result grant = Run({"grant", "mrs/1", "--length", "4KiB", "--for", "app-7", "--dry-run", "server"});
  ASSERT_EQ(grant.rc, 0) << grant.err;
  ASSERT_EQ(grants_.issued.size(), 1u);
  EXPECT_TRUE(grants_.issued[0].validate_only());
  EXPECT_THAT(grant.out, HasSubstr("would be issued (server dry run"));
  EXPECT_THAT(grant.err, Not(HasSubstr("secret")));
  Result bind = Run({"bind", "mw", "mws/3", "--mr", "mrs/1", "--length", "4KiB", "--access", "remote-read",
                     "--dry-run=server"});
  ASSERT_EQ(bind.rc, 0) << bind.err;
  ASSERT_EQ(mws_.bound.size(), 1u);
  EXPECT_TRUE(mws_.bound[0].validate_only());
  EXPECT_THAT(bind.out, HasSubstr("mws/3 would be bound to mrs/1 (server dry run"));
  Result real = Run({"register", "mr", "--pd", "pds/2", "--size", "4KiB", "--access", "local-write", "--dry-run=none"});
  EXPECT_THAT(real.out, HasSubstr("mrs/7 registered"));
  EXPECT_FALSE(mrs_.registered.back().validate_only());
}

TEST_F(KubectlTest, DryRunClientSendsNothing) {
  Result mr = Run({"register", "mr", "--pd", "2", "--size", "4KiB", "--access", "local-write", "--dry-run=client"});
  ASSERT_EQ(mr.rc, 0) << mr.err;
  EXPECT_THAT(mr.out, HasSubstr("would call RegisterMr with:\npd: pds/2\nsource:\n  anonymous:\n    size: \"4096\"\n"));
  Result grant = Run({"grant", "mrs/1", "--length", "4KiB", "--for", "app-7", "--dry-run=client", "-o", "json"});
  EXPECT_THAT(grant.out, HasSubstr("\"principal\": \"app-7\""));
  Result bind = Run({"bind", "mw", "mws/3", "--mr", "mrs/1", "--length", "4KiB", "--access", "remote-read",
                     "--dry-run=client"});
  EXPECT_THAT(bind.out, HasSubstr("would call BindMw"));
  EXPECT_TRUE(mrs_.registered.empty());
  EXPECT_TRUE(grants_.issued.empty());
  EXPECT_TRUE(mws_.bound.empty());
  Result bad = Run({"grant", "mrs/1", "--length", "4KiB", "--for", "app-7", "--dry-run=maybe"});
  EXPECT_EQ(bad.rc, 2);
  EXPECT_THAT(bad.err, HasSubstr("--dry-run"));
}

TEST_F(KubectlTest, CreateMrHintsAtRegister) {
  Result r = Run({"create", "mr", "--pd", "pds/1"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.err, HasSubstr("hint: did you mean `rdmactl register mr`?"));
  EXPECT_THAT(Run({"delete", "grant", "grants/1"}).err, HasSubstr("`rdmactl revoke grant`"));
}

}  // namespace
}  // namespace rdmad::cli
