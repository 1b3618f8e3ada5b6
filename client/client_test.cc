// The client's rdma_cm calls against an in-process fake of rdmad's services: requests reach the server as
// given, WatchEvents ends as it should (stream end, server error intact, on_event stop, idle, deadline) and
// the deadlines are the right ones (Connect's from the caller, none on a watch). Then the grant calls
// (requests and results, WatchGrants through the same stream reader) and revoke_grants on DeregisterMr and
// DeletePd.
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "client/client.h"

namespace rdmad::client {
namespace {

using ::testing::ElementsAre;
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

// Sleeps `d`, returning early (false) if the call was cancelled.
bool SleepUnlessCancelled(grpc::ServerContext* ctx, std::chrono::milliseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
    if (ctx->IsCancelled()) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

v1::CmEvent Event(uint64_t seq) {
  v1::CmEvent e;
  e.set_sequence(seq);
  e.set_cm_id("cmids/1");
  e.set_type("RDMA_CM_EVENT_ESTABLISHED");
  return e;
}

// What WatchEvents does is chosen by the request's channel (the test's script).
class FakeCmIds final : public v1::CmIds::Service {
 public:
  grpc::Status ListCmIds(grpc::ServerContext*, const v1::ListCmIdsRequest* req, v1::ListCmIdsResponse* resp) override {
    resp->add_cm_ids()->set_channel(req->channel());  // echo the filter
    return grpc::Status::OK;
  }
  grpc::Status Connect(grpc::ServerContext* ctx, const v1::ConnectRequest* req, v1::CmId* resp) override {
    // Takes 400 ms, as a connect that waits for the peer.
    if (!SleepUnlessCancelled(ctx, 400ms)) return grpc::Status::CANCELLED;
    resp->set_name(req->name());
    resp->set_state(v1::CM_CONNECTED);
    return grpc::Status::OK;
  }
  grpc::Status WatchEvents(grpc::ServerContext* ctx, const v1::WatchEventsRequest* req,
                           grpc::ServerWriter<v1::CmEvent>* writer) override {
    last_request = *req;
    const std::string& script = req->channel();
    if (script == "three") {
      for (uint64_t s = 1; s <= 3; s++) writer->Write(Event(s));
      return grpc::Status::OK;
    }
    if (script == "overflow") {
      writer->Write(Event(7));
      writer->Write(Event(8));
      return RdmadError(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "this watcher fell 1024 events behind and was cut off: 1025 event(s) dropped; resume with "
                        "after_sequence = 8",
                        "");
    }
    if (script == "endless") {
      for (uint64_t s = 1; !ctx->IsCancelled(); s++) {
        if (!writer->Write(Event(s))) break;
        std::this_thread::sleep_for(1ms);
      }
      endless_cancelled = ctx->IsCancelled();
      return grpc::Status::CANCELLED;
    }
    if (script == "one-then-quiet") {
      writer->Write(Event(1));
      while (SleepUnlessCancelled(ctx, 100ms)) {
      }
      return grpc::Status::CANCELLED;
    }
    if (script == "late") {  // the first event only after the client's per-call timeout
      if (!SleepUnlessCancelled(ctx, 400ms)) return grpc::Status::CANCELLED;
      writer->Write(Event(1));
      return grpc::Status::OK;
    }
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "unknown script");
  }

  v1::WatchEventsRequest last_request;
  std::atomic<bool> endless_cancelled{false};
};

class FakeChannels final : public v1::EventChannels::Service {
 public:
  grpc::Status GetChannel(grpc::ServerContext*, const v1::GetChannelRequest* req, v1::EventChannel* resp) override {
    resp->set_name(req->name());
    resp->set_role(v1::CHANNEL_USER);
    return grpc::Status::OK;
  }
  grpc::Status DeleteChannel(grpc::ServerContext*, const v1::DeleteChannelRequest* req,
                             v1::DeleteChannelResponse*) override {
    return RdmadError(grpc::StatusCode::FAILED_PRECONDITION, "name: " + req->name() + " still has 2 CM id(s)", "name");
  }
};

class FakeTokens final : public v1::ConnectTokens::Service {
 public:
  grpc::Status IssueConnectToken(grpc::ServerContext*, const v1::IssueConnectTokenRequest* req,
                                 v1::ConnectToken* resp) override {
    resp->set_name("tokens/3");
    resp->set_token(std::string("\x00\x01\xfe\xff", 4));  // binary, with a NUL
    resp->set_expire_time_unix_nanos(req->ttl_ms());
    return grpc::Status::OK;
  }
};

class ClientCmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.RegisterService(&cm_ids_);
    builder.RegisterService(&channels_);
    builder.RegisterService(&tokens_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override { server_->Shutdown(std::chrono::system_clock::now() + 1s); }

  // A client whose per-call timeout is short: 100 ms.
  std::unique_ptr<Client> MakeClient() {
    return std::make_unique<Client>(server_->InProcessChannel(grpc::ChannelArguments()), 100ms);
  }

  FakeCmIds cm_ids_;
  FakeChannels channels_;
  FakeTokens tokens_;
  std::unique_ptr<grpc::Server> server_;
};

std::vector<uint64_t> Watch(Client& c, const std::string& script, absl::Status* status, WatchOptions options = {},
                            size_t stop_after = 0) {
  std::vector<uint64_t> seen;
  v1::WatchEventsRequest r;
  r.set_channel(script);
  *status = c.WatchEvents(
      r,
      [&](const v1::CmEvent& e) {
        seen.push_back(e.sequence());
        return stop_after == 0 || seen.size() < stop_after;
      },
      options);
  return seen;
}

TEST_F(ClientCmTest, WatchEventsDeliversInOrderAndEndsWithTheStream) {
  auto c = MakeClient();
  absl::Status s;
  EXPECT_THAT(Watch(*c, "three", &s), ElementsAre(1u, 2u, 3u));
  EXPECT_TRUE(s.ok()) << s;
}

TEST_F(ClientCmTest, WatchEventsReturnsTheServersFinalStatusIntact) {
  auto c = MakeClient();
  absl::Status s;
  EXPECT_THAT(Watch(*c, "overflow", &s), ElementsAre(7u, 8u));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(),
            "this watcher fell 1024 events behind and was cut off: 1025 event(s) dropped; resume with "
            "after_sequence = 8");
  EXPECT_TRUE(HasDetail(s));
}

TEST_F(ClientCmTest, WatchEventsStopsAndCancelsWhenOnEventSaysSo) {
  auto c = MakeClient();
  absl::Status s;
  EXPECT_THAT(Watch(*c, "endless", &s, {}, 3), ElementsAre(1u, 2u, 3u));
  EXPECT_TRUE(s.ok()) << s;
  // The server saw the cancellation (its loop ends only then).
  for (int i = 0; i < 200 && !cm_ids_.endless_cancelled; i++) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(cm_ids_.endless_cancelled);
}

TEST_F(ClientCmTest, WatchEventsEndsOkAfterTheIdleTimeout) {
  auto c = MakeClient();
  absl::Status s;
  WatchOptions o;
  o.idle_timeout = 300ms;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THAT(Watch(*c, "one-then-quiet", &s, o), ElementsAre(1u));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 5s);
}

TEST_F(ClientCmTest, WatchEventsHasNoPerCallDeadline) {
  auto c = MakeClient();  // 100 ms per call; the first event comes after 400 ms
  absl::Status s;
  EXPECT_THAT(Watch(*c, "late", &s), ElementsAre(1u));
  EXPECT_TRUE(s.ok()) << s;
}

TEST_F(ClientCmTest, WatchEventsDeadlineWhenAsked) {
  auto c = MakeClient();
  absl::Status s;
  WatchOptions o;
  o.deadline = 200ms;
  EXPECT_THAT(Watch(*c, "one-then-quiet", &s, o), ElementsAre(1u));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_FALSE(HasDetail(s));  // the channel's, not rdmad's
}

TEST_F(ClientCmTest, WatchEventsSendsTheFilters) {
  auto c = MakeClient();
  v1::WatchEventsRequest r;
  r.set_channel("three");
  r.set_cm_id("cmids/4");
  r.add_types("ESTABLISHED");
  r.add_types("RDMA_CM_EVENT_DISCONNECTED");
  r.set_after_sequence(41);
  ASSERT_TRUE(c->WatchEvents(r, [](const v1::CmEvent&) { return true; }).ok());
  EXPECT_EQ(cm_ids_.last_request.cm_id(), "cmids/4");
  EXPECT_THAT(cm_ids_.last_request.types(), ElementsAre("ESTABLISHED", "RDMA_CM_EVENT_DISCONNECTED"));
  EXPECT_EQ(cm_ids_.last_request.after_sequence(), 41u);
}

TEST_F(ClientCmTest, ConnectUsesTheCallersDeadline) {
  auto c = MakeClient();  // 100 ms per call; the connect takes 400 ms
  v1::ConnectRequest r;
  r.set_name("cmids/2");
  absl::StatusOr<v1::CmId> id = c->Connect(r, 5s);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->name(), "cmids/2");
  EXPECT_EQ(id->state(), v1::CM_CONNECTED);
  absl::StatusOr<v1::CmId> late = c->Connect(r, 50ms);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST_F(ClientCmTest, UnaryCallsCarryRequestsAndResults) {
  auto c = MakeClient();
  absl::StatusOr<v1::ListCmIdsResponse> ids = c->ListCmIds("channels/2");
  ASSERT_TRUE(ids.ok()) << ids.status();
  ASSERT_EQ(ids->cm_ids_size(), 1);
  EXPECT_EQ(ids->cm_ids(0).channel(), "channels/2");
  absl::StatusOr<v1::EventChannel> ch = c->GetChannel("channels/5");
  ASSERT_TRUE(ch.ok()) << ch.status();
  EXPECT_EQ(ch->name(), "channels/5");
  v1::IssueConnectTokenRequest t;
  t.set_pd("pds/1");
  t.set_ttl_ms(1234);
  absl::StatusOr<v1::ConnectToken> token = c->IssueConnectToken(t);
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(token->token(), std::string("\x00\x01\xfe\xff", 4));
  EXPECT_EQ(token->expire_time_unix_nanos(), 1234);
}

TEST_F(ClientCmTest, ErrorsKeepTheirDetail) {
  auto c = MakeClient();
  absl::Status s = c->DeleteChannel("channels/3");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "name: channels/3 still has 2 CM id(s)");
  EXPECT_TRUE(HasDetail(s));
  EXPECT_EQ(Detail(s).field(), "name");
  // Not implemented by the fake: gRPC's UNIMPLEMENTED, no detail.
  absl::Status unimplemented = c->Disconnect("cmids/1").status();
  EXPECT_EQ(unimplemented.code(), absl::StatusCode::kUnimplemented);
  EXPECT_FALSE(HasDetail(unimplemented));
}

// ---- grants

v1::GrantEvent GrantEvent(uint64_t seq, v1::GrantEventType type) {
  v1::GrantEvent e;
  e.set_sequence(seq);
  e.set_type(type);
  e.mutable_grant()->set_name("grants/9");
  return e;
}

// Records what it was sent; WatchGrants' script is the request's principal.
class FakeGrants final : public v1::Grants::Service {
 public:
  grpc::Status IssueGrant(grpc::ServerContext*, const v1::IssueGrantRequest* req, v1::IssuedGrant* resp) override {
    issued = *req;
    v1::Grant* g = resp->mutable_grant();
    // A validation has no name, unless the principal plays an rdmad too old to know validate_only.
    if (!req->validate_only() || req->principal() == "old-rdmad") g->set_name("grants/9");
    g->set_mr(req->mr());
    g->set_offset(req->offset());
    g->set_length(req->length());
    g->set_principal(req->principal());
    g->set_state(v1::GRANT_ISSUED);
    resp->set_token(std::string(32, '\x5a'));
    v1::SocketAddress* a = resp->add_endpoints();
    a->set_address("10.0.2.15");
    a->set_port(7471);
    return grpc::Status::OK;
  }
  grpc::Status IssueGrants(grpc::ServerContext*, const v1::IssueGrantsRequest* req,
                           v1::IssueGrantsResponse*) override {
    return RdmadError(grpc::StatusCode::INVALID_ARGUMENT, "grants[1].length: must be greater than 0",
                      "grants[1].length");
  }
  grpc::Status GetGrant(grpc::ServerContext*, const v1::GetGrantRequest* req, v1::Grant*) override {
    return RdmadError(grpc::StatusCode::NOT_FOUND, "name: no grant '" + req->name() + "'", "name");
  }
  grpc::Status ListGrants(grpc::ServerContext*, const v1::ListGrantsRequest* req,
                          v1::ListGrantsResponse* resp) override {
    listed = *req;
    resp->add_grants()->set_name("grants/1");
    resp->add_grants()->set_name("grants/2");
    return grpc::Status::OK;
  }
  grpc::Status RenewGrant(grpc::ServerContext*, const v1::RenewGrantRequest* req, v1::Grant* resp) override {
    renewed = *req;
    resp->set_name(req->name());
    resp->set_renewals(1);
    return grpc::Status::OK;
  }
  grpc::Status RevokeGrant(grpc::ServerContext*, const v1::RevokeGrantRequest* req, v1::Grant* resp) override {
    resp->set_name(req->name());
    resp->set_state(v1::GRANT_ENDED);
    resp->set_end_reason(v1::END_REVOKED);
    return grpc::Status::OK;
  }
  grpc::Status WatchGrants(grpc::ServerContext* ctx, const v1::WatchGrantsRequest* req,
                           grpc::ServerWriter<v1::GrantEvent>* writer) override {
    watched = *req;
    const std::string& script = req->principal();
    if (script == "three") {
      writer->Write(GrantEvent(1, v1::GRANT_ISSUED_EVENT));
      writer->Write(GrantEvent(2, v1::GRANT_ACTIVATED));
      writer->Write(GrantEvent(3, v1::GRANT_REVOKED));
      return grpc::Status::OK;
    }
    if (script == "overflow") {
      writer->Write(GrantEvent(5, v1::GRANT_RENEWED));
      return RdmadError(grpc::StatusCode::RESOURCE_EXHAUSTED, "this watcher fell 1024 events behind", "");
    }
    if (script == "endless") {
      for (uint64_t s = 1; !ctx->IsCancelled(); s++) {
        if (!writer->Write(GrantEvent(s, v1::GRANT_RENEWED))) break;
        std::this_thread::sleep_for(1ms);
      }
      endless_cancelled = ctx->IsCancelled();
      return grpc::Status::CANCELLED;
    }
    if (script == "quiet") {
      while (SleepUnlessCancelled(ctx, 100ms)) {
      }
      return grpc::Status::CANCELLED;
    }
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "unknown script");
  }

  v1::IssueGrantRequest issued;
  v1::ListGrantsRequest listed;
  v1::RenewGrantRequest renewed;
  v1::WatchGrantsRequest watched;
  std::atomic<bool> endless_cancelled{false};
};

class FakeMrs final : public v1::MemoryRegions::Service {
 public:
  grpc::Status DeregisterMr(grpc::ServerContext*, const v1::DeregisterMrRequest* req,
                            v1::DeregisterMrResponse*) override {
    deregistered = *req;
    return grpc::Status::OK;
  }
  v1::DeregisterMrRequest deregistered;
};

class FakePds final : public v1::ProtectionDomains::Service {
 public:
  grpc::Status DeletePd(grpc::ServerContext*, const v1::DeletePdRequest* req, v1::DeletePdResponse* resp) override {
    deleted = *req;
    resp->add_deleted(req->name());
    return grpc::Status::OK;
  }
  v1::DeletePdRequest deleted;
};

class ClientGrantsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.RegisterService(&grants_);
    builder.RegisterService(&mrs_);
    builder.RegisterService(&pds_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override { server_->Shutdown(std::chrono::system_clock::now() + 1s); }
  std::unique_ptr<Client> MakeClient() {
    return std::make_unique<Client>(server_->InProcessChannel(grpc::ChannelArguments()), 1000ms);
  }

  FakeGrants grants_;
  FakeMrs mrs_;
  FakePds pds_;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(ClientGrantsTest, IssueGrantCarriesTheRequestAndTheSecret) {
  auto c = MakeClient();
  v1::IssueGrantRequest r;
  r.set_mr("mrs/3");
  r.set_offset(4096);
  r.set_length(1 << 20);
  r.add_access(v1::REMOTE_READ);
  r.set_ttl_ms(60000);
  r.set_principal("app-7");
  absl::StatusOr<v1::IssuedGrant> g = c->IssueGrant(r);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(grants_.issued.SerializeAsString(), r.SerializeAsString());
  EXPECT_EQ(g->grant().name(), "grants/9");
  EXPECT_EQ(g->token(), std::string(32, '\x5a'));
  ASSERT_EQ(g->endpoints_size(), 1);
  EXPECT_EQ(g->endpoints(0).port(), 7471u);
}

TEST_F(ClientGrantsTest, ValidateOnlyIsSentAndAnAnswerNamingAGrantIsRefused) {
  auto c = MakeClient();
  v1::IssueGrantRequest r;
  r.set_mr("mrs/3");
  r.set_length(4096);
  r.set_principal("app-7");
  MutateOptions validate;
  validate.validate_only = true;
  absl::StatusOr<v1::IssuedGrant> g = c->IssueGrant(r, validate);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(grants_.issued.validate_only());
  EXPECT_EQ(g->grant().name(), "");
  // The request's own validate_only does the same.
  r.set_validate_only(true);
  ASSERT_TRUE(c->IssueGrant(r).ok());
  EXPECT_TRUE(grants_.issued.validate_only());
  // Without either: a real issue.
  r.set_validate_only(false);
  ASSERT_TRUE(c->IssueGrant(r).ok());
  EXPECT_FALSE(grants_.issued.validate_only());
  // An rdmad that ignored validate_only answers the grant it made: the caller hears it.
  r.set_principal("old-rdmad");
  absl::Status s = c->IssueGrant(r, validate).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("grants/9"));
  EXPECT_THAT(std::string(s.message()), ::testing::StartsWith("validate_only:"));
}

TEST_F(ClientGrantsTest, IssueGrantsErrorNamesTheRequest) {
  auto c = MakeClient();
  absl::Status s = c->IssueGrants(v1::IssueGrantsRequest()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Detail(s).field(), "grants[1].length");
}

TEST_F(ClientGrantsTest, GetListRenewRevoke) {
  auto c = MakeClient();
  absl::Status missing = c->GetGrant("grants/4").status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.message(), "name: no grant 'grants/4'");

  absl::StatusOr<v1::ListGrantsResponse> list = c->ListGrants("mrs/3", "app-7", true);
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->grants_size(), 2);
  EXPECT_EQ(grants_.listed.mr(), "mrs/3");
  EXPECT_EQ(grants_.listed.principal(), "app-7");
  EXPECT_TRUE(grants_.listed.include_ended());
  ASSERT_TRUE(c->ListGrants().ok());
  EXPECT_EQ(grants_.listed.mr(), "");
  EXPECT_FALSE(grants_.listed.include_ended());

  absl::StatusOr<v1::Grant> renewed = c->RenewGrant("grants/9", 90s);
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  EXPECT_EQ(grants_.renewed.name(), "grants/9");
  EXPECT_EQ(grants_.renewed.ttl_ms(), 90000u);
  EXPECT_EQ(renewed->renewals(), 1u);

  absl::StatusOr<v1::Grant> revoked = c->RevokeGrant("grants/9");
  ASSERT_TRUE(revoked.ok()) << revoked.status();
  EXPECT_EQ(revoked->state(), v1::GRANT_ENDED);
  EXPECT_EQ(revoked->end_reason(), v1::END_REVOKED);
}

TEST_F(ClientGrantsTest, RenewGrantRefusesATtlTheApiCannotCarry) {
  auto c = MakeClient();
  grants_.renewed.Clear();
  for (std::chrono::milliseconds ttl : {0ms, -5ms, std::chrono::milliseconds(uint64_t{UINT32_MAX} + 1)}) {
    absl::Status s = c->RenewGrant("grants/9", ttl).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << ttl.count();
    EXPECT_FALSE(HasDetail(s));
  }
  EXPECT_EQ(grants_.renewed.name(), "");  // nothing was sent
}

TEST_F(ClientGrantsTest, WatchGrantsDeliversInOrderWithTheFilters) {
  auto c = MakeClient();
  v1::WatchGrantsRequest r;
  r.set_mr("mrs/3");
  r.set_principal("three");
  std::vector<uint64_t> seen;
  absl::Status s = c->WatchGrants(r, [&](const v1::GrantEvent& e) {
    seen.push_back(e.sequence());
    return true;
  });
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_THAT(seen, ElementsAre(1u, 2u, 3u));
  EXPECT_EQ(grants_.watched.mr(), "mrs/3");
}

TEST_F(ClientGrantsTest, WatchGrantsEndsAsWatchEventsDoes) {
  auto c = MakeClient();
  v1::WatchGrantsRequest r;
  std::vector<uint64_t> seen;
  auto collect = [&](const v1::GrantEvent& e) {
    seen.push_back(e.sequence());
    return seen.size() < 3;
  };
  // rdmad's error, intact.
  r.set_principal("overflow");
  absl::Status s = c->WatchGrants(r, collect);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "this watcher fell 1024 events behind");
  EXPECT_THAT(seen, ElementsAre(5u));
  // A stop from on_event: OK, and the server sees the cancellation.
  seen.clear();
  r.set_principal("endless");
  s = c->WatchGrants(r, collect);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_THAT(seen, ElementsAre(1u, 2u, 3u));
  for (int i = 0; i < 200 && !grants_.endless_cancelled; i++) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(grants_.endless_cancelled);
  // The idle timeout: OK; the deadline: DEADLINE_EXCEEDED. No per-call deadline (1 s) otherwise.
  r.set_principal("quiet");
  WatchOptions idle;
  idle.idle_timeout = 200ms;
  EXPECT_TRUE(c->WatchGrants(r, collect, idle).ok());
  WatchOptions deadline;
  deadline.deadline = 200ms;
  EXPECT_EQ(c->WatchGrants(r, collect, deadline).code(), absl::StatusCode::kDeadlineExceeded);
}

TEST_F(ClientGrantsTest, RevokeGrantsOnDeregisterMrAndDeletePd) {
  auto c = MakeClient();
  ASSERT_TRUE(c->DeregisterMr("mrs/3").ok());
  EXPECT_EQ(mrs_.deregistered.name(), "mrs/3");
  EXPECT_FALSE(mrs_.deregistered.revoke_grants());
  ASSERT_TRUE(c->DeregisterMr("mrs/4", true).ok());
  EXPECT_TRUE(mrs_.deregistered.revoke_grants());

  ASSERT_TRUE(c->DeletePd("pds/1", true).ok());
  EXPECT_TRUE(pds_.deleted.cascade());
  EXPECT_FALSE(pds_.deleted.revoke_grants());
  ASSERT_TRUE(c->DeletePd("pds/2", false, true).ok());
  EXPECT_EQ(pds_.deleted.name(), "pds/2");
  EXPECT_FALSE(pds_.deleted.cascade());
  EXPECT_TRUE(pds_.deleted.revoke_grants());
}

TEST(ClientTest, UnreachableServerHasNoDetail) {
  Client::Options o;
  o.target = "unix:/nonexistent/rdmad-client-test.sock";
  o.timeout = 2000ms;
  Client c(o);
  absl::Status s = c.CreateChannel(v1::CreateChannelRequest()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(HasDetail(s));
  absl::Status w = c.WatchEvents(v1::WatchEventsRequest(), [](const v1::CmEvent&) { return true; });
  EXPECT_EQ(w.code(), absl::StatusCode::kUnavailable);
}


// ---- Client::Options against a real gRPC server on a unix socket: retries, message size, bad TLS options.

// Each call's answer is the next of `script` (then OK); counts the calls.
class ScriptedDevices final : public v1::Devices::Service {
 public:
  grpc::Status ListDevices(grpc::ServerContext*, const v1::ListDevicesRequest*, v1::ListDevicesResponse* resp) override {
    resp->add_devices()->set_name("rxe0");
    return Next();
  }
  grpc::Status GetDevice(grpc::ServerContext*, const v1::GetDeviceRequest* req, v1::Device* resp) override {
    resp->set_name(req->name());
    return Next();
  }
  grpc::Status Next() {
    const int n = calls++;
    return n < static_cast<int>(script.size()) ? script[n] : grpc::Status::OK;
  }
  std::vector<grpc::Status> script;
  std::atomic<int> calls{0};
};

// ListMrs answers `mrs` regions (100,000 of them make 5.5 MB); CreatePd answers UNAVAILABLE and counts.
class BigMrs final : public v1::MemoryRegions::Service {
 public:
  grpc::Status ListMrs(grpc::ServerContext*, const v1::ListMrsRequest*, v1::ListMrsResponse* resp) override {
    for (int i = 0; i < mrs; i++) {
      v1::MemoryRegion* mr = resp->add_mrs();
      mr->set_name("mrs/" + std::to_string(i + 1));
      mr->set_pd("pds/1");
      mr->mutable_source()->mutable_file()->set_path("/dev/shm/app-buffer-" + std::to_string(i));
      mr->mutable_source()->mutable_file()->set_length(1 << 20);
      mr->set_addr(0x7f0000000000 + (uint64_t{1} << 20) * i);
      mr->set_length(1 << 20);
      mr->set_lkey(0x1000 + i);
      mr->set_rkey(0x2000 + i);
    }
    return grpc::Status::OK;
  }
  int mrs = 0;
};
class UnavailablePds final : public v1::ProtectionDomains::Service {
 public:
  grpc::Status CreatePd(grpc::ServerContext*, const v1::CreatePdRequest*, v1::ProtectionDomain*) override {
    calls++;
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection reset");
  }
  std::atomic<int> calls{0};
};

class ClientOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/rdmad-client-test.XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    target_ = "unix:" + dir_ + "/rdmad.sock";
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + 1s);
    std::remove((dir_ + "/rdmad.sock").c_str());
    rmdir(dir_.c_str());
  }
  void Serve() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort(target_, grpc::InsecureServerCredentials());
    builder.RegisterService(&devices_);
    builder.RegisterService(&mrs_);
    builder.RegisterService(&pds_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  Client::Options Options() {
    Client::Options o;
    o.target = target_;
    o.timeout = 5000ms;
    o.retry.initial_backoff = 10ms;
    return o;
  }

  std::string dir_, target_;
  ScriptedDevices devices_;
  BigMrs mrs_;
  UnavailablePds pds_;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(ClientOptionsTest, ReadsAreRetriedOnTheChannelsUnavailable) {
  Serve();
  const grpc::Status unavailable(grpc::StatusCode::UNAVAILABLE, "connection reset");
  devices_.script = {unavailable, unavailable, unavailable};
  Client c(Options());  // 4 attempts
  absl::StatusOr<v1::ListDevicesResponse> r = c.ListDevices();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(devices_.calls, 4);

  devices_.calls = 0;
  devices_.script = {unavailable, unavailable, unavailable, unavailable};
  absl::StatusOr<v1::Device> d = c.GetDevice("rxe0");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(devices_.calls, 4);  // no fifth attempt
}

TEST_F(ClientOptionsTest, NotRetriedWhenOffOrRdmadSaidItOrTheCallChangesState) {
  Serve();
  Client::Options o = Options();
  o.retry.max_attempts = 1;
  devices_.script = {grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection reset")};
  EXPECT_EQ(Client(o).ListDevices().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(devices_.calls, 1);

  // rdmad's own UNAVAILABLE (an ErrorDetail): final.
  devices_.calls = 0;
  devices_.script = {RdmadError(grpc::StatusCode::UNAVAILABLE, "rdmad is shutting down", "")};
  Client c(Options());
  absl::Status s = c.ListDevices().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(HasDetail(s));
  EXPECT_EQ(devices_.calls, 1);

  // A call that changes state is never retried.
  EXPECT_EQ(c.CreatePd(v1::CreatePdRequest()).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(pds_.calls, 1);
}

TEST_F(ClientOptionsTest, RetriesStayWithinTheCallsDeadline) {
  Serve();
  devices_.script.assign(100, grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection reset"));
  Client::Options o = Options();
  o.timeout = 300ms;
  o.retry.max_attempts = 100;
  o.retry.initial_backoff = 1000ms;  // the first backoff passes the deadline: not slept
  Client c(o);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(c.ListDevices().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 900ms);
  EXPECT_EQ(devices_.calls, 1);
}

TEST_F(ClientOptionsTest, ARetriedReadReachesAServerThatStartsLate) {
  // Nothing listens yet: the first attempts fail to connect (gRPC then waits about a second before it
  // connects again); the server comes up 300 ms in; the default backoff (250, 500, 1000 ms) outlasts that.
  Client::Options o;
  o.target = target_;
  o.timeout = 10000ms;
  Client c(o);
  std::thread late([&] {
    std::this_thread::sleep_for(300ms);
    Serve();
  });
  absl::StatusOr<v1::ListDevicesResponse> r = c.ListDevices();
  late.join();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->devices(0).name(), "rxe0");
}

TEST_F(ClientOptionsTest, ALargeListFitsTheDefaultMaximumAndNotGrpcsFourMiB) {
  Serve();
  mrs_.mrs = 100000;
  Client c(Options());
  absl::StatusOr<v1::ListMrsResponse> all = c.ListMrs();
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->mrs_size(), 100000);
  EXPECT_GT(all->ByteSizeLong(), size_t{5} << 20);

  Client::Options o = Options();
  o.max_receive_message_bytes = 4 << 20;
  absl::Status s = Client(o).ListMrs().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
}

TEST_F(ClientOptionsTest, BadTlsOptionsAreRefusedByCreateAndAnsweredByEveryCall) {
  Client::Options o;
  o.target = "127.0.0.1:1";
  o.tls.ca_file = dir_ + "/no-such-ca.pem";
  o.tls.cert_file = dir_ + "/client.pem";
  o.tls.key_file = dir_ + "/client.key";
  absl::StatusOr<std::unique_ptr<Client>> created = Client::Create(o);
  EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(created.status().message()), ::testing::HasSubstr("no-such-ca.pem"));

  Client c(o);
  absl::Status s = c.ListDevices().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("no-such-ca.pem"));
  EXPECT_EQ(c.WatchEvents(v1::WatchEventsRequest(), [](const v1::CmEvent&) { return true; }).code(),
            absl::StatusCode::kInvalidArgument);

  // On a unix socket the TLS options are not used: no error.
  o.target = target_;
  EXPECT_TRUE(Client::Create(o).ok());
}

}  // namespace
}  // namespace rdmad::client
