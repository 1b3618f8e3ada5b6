// rdmactl audit / watch audit, whole command lines against an in-process fake Audit service: what is sent
// (from_oldest, after_sequence), the table and wide lines, -o json as rdmad's own line, -o name, the idle end
// without --follow, and the errors with their hints.
#include <chrono>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "cli/output.h"
#include "cli/rdmactl.h"
#include "rdmad/v1/rdmad.grpc.pb.h"

namespace rdmad::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;
using namespace std::chrono_literals;

v1::AuditRecord Record(uint64_t seq, const std::string& method, const std::string& resource) {
  v1::AuditRecord r;
  r.set_sequence(seq);
  r.set_time_unix_nanos(1795000000123456789);  // 2026-11-18T...
  r.set_principal("CN=admin");
  r.set_tenant("blue");
  r.set_method(method);
  r.set_resource(resource);
  r.set_code("OK");
  r.set_peer("ipv4:10.0.2.2:40000");
  r.set_json("{\"sequence\":" + std::to_string(seq) + ",\"as\":\"rdmad wrote it\"}");
  return r;
}

// Sends `records`, then ends with `end` (OK: the stream just ends, as at shutdown).
class FakeAudit final : public v1::Audit::Service {
 public:
  grpc::Status WatchAudit(grpc::ServerContext*, const v1::WatchAuditRequest* req,
                          grpc::ServerWriter<v1::AuditRecord>* writer) override {
    {
      std::lock_guard<std::mutex> lock(mu);
      requests.push_back(*req);
    }
    for (const v1::AuditRecord& r : records) {
      if (req->after_sequence() != 0 && r.sequence() <= req->after_sequence()) continue;
      writer->Write(r);
    }
    return end;
  }
  std::mutex mu;
  std::vector<v1::WatchAuditRequest> requests;
  std::vector<v1::AuditRecord> records;
  grpc::Status end = grpc::Status::OK;
};

struct Result {
  int rc = -1;
  std::string out, err;
};

class RdmactlAuditTest : public ::testing::Test {
 protected:
  void SetUp() override {
    v1::AuditRecord refused = Record(2, "RegisterMr", "");
    refused.set_code("PERMISSION_DENIED");
    refused.set_errno_value(13);
    refused.set_errno_name("EACCES");
    refused.set_detail("source.file.path: the caller (uid 1000, gid 1000) may not write /dev/shm/x\nsecond line");
    audit_.records = {Record(1, "CreatePd", "pds/1"), refused, Record(3, "data-plane accept", "cmids/4")};
    grpc::ServerBuilder builder;
    builder.RegisterService(&audit_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override { server_->Shutdown(std::chrono::system_clock::now() + 1s); }
  Result Run(std::vector<std::string> args) {
    std::ostringstream out, err;
    Result r;
    r.rc = Rdmactl(args, out, err, server_->InProcessChannel(grpc::ChannelArguments()));
    r.out = out.str();
    r.err = err.str();
    return r;
  }
  v1::WatchAuditRequest LastRequest() {
    std::lock_guard<std::mutex> lock(audit_.mu);
    return audit_.requests.empty() ? v1::WatchAuditRequest() : audit_.requests.back();
  }

  FakeAudit audit_;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(RdmactlAuditTest, AuditPrintsTheRetainedRecordsOneLineEach) {
  Result r = Run({"audit"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(LastRequest().from_oldest());
  EXPECT_EQ(LastRequest().after_sequence(), 0u);
  std::vector<std::string> lines;
  std::istringstream in(r.out);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 4u) << r.out;
  EXPECT_THAT(lines[0], StartsWith("SEQ"));
  EXPECT_THAT(lines[0], HasSubstr("PRINCIPAL"));
  EXPECT_THAT(lines[0], Not(HasSubstr("PEER")));
  EXPECT_THAT(lines[1], StartsWith("1 "));
  EXPECT_THAT(lines[1], HasSubstr("CN=admin"));
  EXPECT_THAT(lines[1], HasSubstr("CreatePd"));
  EXPECT_THAT(lines[1], HasSubstr("pds/1"));
  // The refusal: its code and errno, the detail folded onto the line.
  EXPECT_THAT(lines[2], HasSubstr("PERMISSION_DENIED (EACCES)"));
  EXPECT_THAT(lines[2], HasSubstr("<none>"));  // no resource
  EXPECT_THAT(lines[2], HasSubstr("/dev/shm/x second line"));
  EXPECT_THAT(lines[3], HasSubstr("data-plane accept"));
}

TEST_F(RdmactlAuditTest, WideAddsTenantAndPeer) {
  Result r = Run({"audit", "-o", "wide"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("TENANT"));
  EXPECT_THAT(r.out, HasSubstr("PEER"));
  EXPECT_THAT(r.out, HasSubstr("blue"));
  EXPECT_THAT(r.out, HasSubstr("ipv4:10.0.2.2:40000"));
}

TEST_F(RdmactlAuditTest, JsonIsTheLineRdmadWroteAndNameTheResource) {
  Result r = Run({"audit", "-o", "json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out,
            "{\"sequence\":1,\"as\":\"rdmad wrote it\"}\n{\"sequence\":2,\"as\":\"rdmad wrote it\"}\n"
            "{\"sequence\":3,\"as\":\"rdmad wrote it\"}\n");
  r = Run({"audit", "-o", "name"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "pds/1\n<none>\ncmids/4\n");
}

TEST_F(RdmactlAuditTest, FollowAndAfterAndWatchAudit) {
  Result r = Run({"audit", "--follow"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_FALSE(LastRequest().from_oldest());  // new records only
  EXPECT_THAT(r.err, HasSubstr("The audit stream ended"));

  r = Run({"audit", "-f", "--from-oldest"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(LastRequest().from_oldest());

  r = Run({"watch", "audit", "--after", "2"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(LastRequest().after_sequence(), 2u);
  EXPECT_FALSE(LastRequest().from_oldest());
  EXPECT_THAT(r.out, HasSubstr("cmids/4"));
  EXPECT_THAT(r.out, Not(HasSubstr("pds/1")));
  EXPECT_THAT(r.err, HasSubstr("The audit stream ended"));

  r = Run({"audit", "--after", "1", "--from-oldest"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.err, HasSubstr("--after and --from-oldest"));
  r = Run({"audit", "--after", "x"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.err, HasSubstr("--after"));
}

TEST_F(RdmactlAuditTest, ErrorsCarryTheirHints) {
  audit_.end = grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "WatchAudit is for admins only");
  audit_.records.clear();
  Result r = Run({"audit"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, HasSubstr("admins only"));
  EXPECT_THAT(r.err, HasSubstr("hint: the audit trail is for rdmad's admins"));

  audit_.end = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "this watcher fell 1024 events behind");
  audit_.records = {Record(7, "CreatePd", "pds/7")};
  r = Run({"watch", "audit"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, HasSubstr("'rdmactl watch audit --after 7'"));
}

TEST_F(RdmactlAuditTest, NoRecordsSaysSo) {
  audit_.records.clear();
  Result r = Run({"audit"});
  EXPECT_EQ(r.rc, 0);
  EXPECT_THAT(r.out, IsEmpty());
  EXPECT_THAT(r.err, HasSubstr("No audit records found."));
}

TEST(AuditLineTest, AnErrnoWithoutItsNameShowsTheNumber) {
  EXPECT_THAT(StreamHeader(AuditStream(), false), StartsWith("SEQ"));
  v1::AuditRecord r;
  r.set_sequence(5);
  r.set_errno_value(9999);
  EXPECT_THAT(StreamLine(AuditStream(), r, false), HasSubstr("OK (9999)"));
}

}  // namespace
}  // namespace rdmad::cli
