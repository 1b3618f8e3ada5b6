// Limits under hostile load, on real rdmad (rxe0 in the Soft-RoCE guest): run by run-limits.sh, which writes
// rdmad's config (a tenant "t" for uid 1000 with small quotas, a tenant "u" for uid 1001 with none of its own,
// so default_quotas apply, small rdmad-wide limits), starts rdmad and runs this binary in phases:
//   TenantQuotas.*  as uid 1000 (tenant t): every kind it can make, up to its quota and one past it;
//   DefaultQuotas.* as uid 1001 (tenant u): the defaults cap a tenant that sets no quota;
//   GlobalLimits.*  as root (an admin): every rdmad-wide limit, one past it, and the unread-watch flood;
//   OsLimits.*      as root, while run-limits.sh has lowered rdmad's RLIMIT_NOFILE (prlimit --pid) close to
//                   its use: channels past the descriptors are refused, rdmad keeps answering.
// Each refusal must be RESOURCE_EXHAUSTED with a message naming the quota or limit, and must leave nothing
// behind (the lists unchanged). Every case deletes what it made; run-limits.sh checks rdmad's descriptors,
// threads, RSS and VmPin, and `rdma resource show`, against their start.
//
// Environment: RDMAD_TARGET (unix:PATH), RDMAD_DEVICE (rxe0), RDMAD_PID (rdmad's pid, for /proc: root only).
// Threads: the test's own, and one reader per watch stream in the flood.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "rdmad/v1/rdmad.grpc.pb.h"

namespace rdmad::testing {
namespace {

namespace v1 = ::rdmad::v1;

std::string Env(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

// A plaintext channel on rdmad's unix socket whose receive windows stay small (16 KiB per stream, no BDP
// growth), so that a stream this client does not read backs up into rdmad quickly instead of into gRPC's
// buffers: what an unread watch costs rdmad is then visible.
std::shared_ptr<grpc::Channel> Connect() {
  grpc::ChannelArguments args;
  args.SetInt("grpc.http2.lookahead_bytes", 16 * 1024);
  args.SetInt("grpc.http2.bdp_probe", 0);
  return grpc::CreateCustomChannel(Env("RDMAD_TARGET", "unix:/tmp/rdmad-limits/rdmad.sock"),
                                   grpc::InsecureChannelCredentials(), args);
}

std::unique_ptr<grpc::ClientContext> Ctx(int seconds = 20) {
  auto c = std::make_unique<grpc::ClientContext>();
  c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  return c;
}

// The status of a refusal: RESOURCE_EXHAUSTED, naming `what` (the quota's or limit's name).
::testing::AssertionResult Exhausted(const grpc::Status& s, const std::string& what) {
  if (s.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) {
    return ::testing::AssertionFailure() << "want RESOURCE_EXHAUSTED naming '" << what << "', got code "
                                         << s.error_code() << ": " << s.error_message();
  }
  if (!absl::StrContains(s.error_message(), what)) {
    return ::testing::AssertionFailure() << "the refusal does not name '" << what << "': " << s.error_message();
  }
  return ::testing::AssertionSuccess();
}

class Rdmad {
 public:
  Rdmad()
      : ch_(Connect()),
        devices_(v1::Devices::NewStub(ch_)),
        pds_(v1::ProtectionDomains::NewStub(ch_)),
        mrs_(v1::MemoryRegions::NewStub(ch_)),
        channels_(v1::EventChannels::NewStub(ch_)),
        mws_(v1::MemoryWindows::NewStub(ch_)),
        cm_ids_(v1::CmIds::NewStub(ch_)),
        tokens_(v1::ConnectTokens::NewStub(ch_)),
        grants_(v1::Grants::NewStub(ch_)) {}

  // Answers at all (a cheap call every tenant may make).
  grpc::Status Ping() {
    v1::ListPdsResponse r;
    return pds_->ListPds(Ctx(10).get(), {}, &r);
  }
  std::string CreatePd() {
    v1::CreatePdRequest req;
    req.set_device(Env("RDMAD_DEVICE", "rxe0"));
    req.set_label("limits");
    v1::ProtectionDomain pd;
    grpc::Status s = pds_->CreatePd(Ctx().get(), req, &pd);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return pd.name();
  }
  void DeletePd(const std::string& name, bool cascade = false) {
    v1::DeletePdRequest req;
    req.set_name(name);
    req.set_cascade(cascade);
    v1::DeletePdResponse r;
    grpc::Status s = pds_->DeletePd(Ctx().get(), req, &r);
    EXPECT_TRUE(s.ok()) << name << ": " << s.error_message();
  }
  // A type 1 window on `pd` bound over [0, length) of `mr` for remote reads.
  grpc::Status AllocAndBindMw(const std::string& pd, const std::string& mr, uint64_t length) {
    v1::AllocMwRequest alloc;
    alloc.set_pd(pd);
    alloc.set_type(v1::TYPE_1);
    v1::MemoryWindow mw;
    if (grpc::Status s = mws_->AllocMw(Ctx().get(), alloc, &mw); !s.ok()) return s;
    v1::BindMwRequest bind;
    bind.set_name(mw.name());
    bind.set_mr(mr);
    bind.set_length(length);
    bind.add_access(v1::REMOTE_READ);
    return mws_->BindMw(Ctx().get(), bind, &mw);
  }
  grpc::Status CreateChannel(std::string* name) {
    v1::CreateChannelRequest req;
    req.set_label("limits");
    v1::EventChannel c;
    grpc::Status s = channels_->CreateChannel(Ctx().get(), req, &c);
    *name = c.name();
    return s;
  }
  void DeleteChannel(const std::string& name) {
    v1::DeleteChannelRequest req;
    req.set_name(name);
    v1::DeleteChannelResponse r;
    grpc::Status s = channels_->DeleteChannel(Ctx().get(), req, &r);
    EXPECT_TRUE(s.ok()) << name << ": " << s.error_message();
  }
  size_t ChannelCount() {
    v1::ListChannelsResponse r;
    EXPECT_TRUE(channels_->ListChannels(Ctx().get(), {}, &r).ok());
    return r.channels_size();
  }
  grpc::Status CreateCmId(const std::string& pd, std::string* name) {
    v1::CreateCmIdRequest req;
    req.set_pd(pd);
    v1::CmId id;
    grpc::Status s = cm_ids_->CreateCmId(Ctx().get(), req, &id);
    *name = id.name();
    return s;
  }
  void DeleteCmId(const std::string& name) {
    v1::DeleteCmIdRequest req;
    req.set_name(name);
    v1::DeleteCmIdResponse r;
    grpc::Status s = cm_ids_->DeleteCmId(Ctx().get(), req, &r);
    EXPECT_TRUE(s.ok()) << name << ": " << s.error_message();
  }
  size_t CmIdCount() {
    v1::ListCmIdsResponse r;
    EXPECT_TRUE(cm_ids_->ListCmIds(Ctx().get(), {}, &r).ok());
    return r.cm_ids_size();
  }
  grpc::Status IssueToken(const std::string& pd) {
    v1::IssueConnectTokenRequest req;
    req.set_pd(pd);
    req.set_ttl_ms(1000);  // they expire by themselves: nothing to delete
    v1::ConnectToken t;
    return tokens_->IssueConnectToken(Ctx().get(), req, &t);
  }
  std::string RegisterMr(const std::string& pd, uint64_t size) {
    v1::RegisterMrRequest req;
    req.set_pd(pd);
    req.mutable_source()->mutable_anonymous()->set_size(size);
    req.add_access(v1::LOCAL_WRITE);
    req.add_access(v1::REMOTE_READ);
    req.add_access(v1::MW_BIND);
    v1::MemoryRegion mr;
    grpc::Status s = mrs_->RegisterMr(Ctx().get(), req, &mr);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return mr.name();
  }
  void DeregisterMr(const std::string& name) {
    v1::DeregisterMrRequest req;
    req.set_name(name);
    req.set_revoke_grants(true);
    v1::DeregisterMrResponse r;
    grpc::Status s = mrs_->DeregisterMr(Ctx().get(), req, &r);
    EXPECT_TRUE(s.ok()) << name << ": " << s.error_message();
  }
  grpc::Status IssueGrant(const std::string& mr, std::string* name) {
    v1::IssueGrantRequest req;
    req.set_mr(mr);
    req.set_length(4096);
    req.set_principal("spiffe://cluster/limits/reader");
    req.set_ttl_ms(60000);
    v1::IssuedGrant g;
    grpc::Status s = grants_->IssueGrant(Ctx().get(), req, &g);
    *name = g.grant().name();
    return s;
  }
  void RevokeGrant(const std::string& name) {
    v1::RevokeGrantRequest req;
    req.set_name(name);
    v1::Grant g;
    grpc::Status s = grants_->RevokeGrant(Ctx().get(), req, &g);
    EXPECT_TRUE(s.ok()) << name << ": " << s.error_message();
  }
  // A WatchGrants stream that is never read: its first answer (refused or open) is awaited by a reader that
  // reads nothing more.
  struct Watch {
    // A bound on the whole stream: a stream rdmad never answers fails the case instead of hanging the suite.
    std::unique_ptr<grpc::ClientContext> ctx = Ctx(600);
    std::unique_ptr<grpc::ClientReader<v1::GrantEvent>> reader;
  };
  // Opens a stream and waits for rdmad's answer: an admitted stream sends its initial metadata at once, with
  // "rdmad-watch: open"; a refused one ends at once (trailers only). True if admitted.
  bool OpenWatch(Watch* w) {
    v1::WatchGrantsRequest req;
    w->reader = grants_->WatchGrants(w->ctx.get(), req);
    w->reader->WaitForInitialMetadata();
    return w->ctx->GetServerInitialMetadata().count("rdmad-watch") == 1;
  }

 private:
  std::shared_ptr<grpc::Channel> ch_;

 public:
  std::unique_ptr<v1::Devices::Stub> devices_;
  std::unique_ptr<v1::ProtectionDomains::Stub> pds_;
  std::unique_ptr<v1::MemoryRegions::Stub> mrs_;
  std::unique_ptr<v1::EventChannels::Stub> channels_;
  std::unique_ptr<v1::MemoryWindows::Stub> mws_;
  std::unique_ptr<v1::CmIds::Stub> cm_ids_;
  std::unique_ptr<v1::ConnectTokens::Stub> tokens_;
  std::unique_ptr<v1::Grants::Stub> grants_;
};

uint64_t EnvInt(const char* name, uint64_t fallback) {
  uint64_t v = 0;
  return absl::SimpleAtoi(Env(name, ""), &v) ? v : fallback;
}

// Makes objects with `make` until it is refused; returns how many were made and the refusal.
template <typename Make>
size_t FillUntilRefused(size_t at_most, Make make, grpc::Status* refusal) {
  for (size_t n = 0; n < at_most; ++n) {
    grpc::Status s = make();
    if (!s.ok()) {
      *refusal = s;
      return n;
    }
  }
  *refusal = grpc::Status::OK;
  return at_most;
}

// ---- a tenant's quotas (uid 1000, tenant t: channels, cm_ids, tokens, watch_streams from the environment)

TEST(TenantQuotas, ChannelsStopAtTheQuotaAndTheRefusalLeavesNothing) {
  Rdmad r;
  const uint64_t quota = EnvInt("RDMAD_QUOTA_CHANNELS", 3);
  std::vector<std::string> made;
  grpc::Status refusal;
  const size_t before = r.ChannelCount();
  const size_t n = FillUntilRefused(quota + 5, [&] {
    std::string name;
    grpc::Status s = r.CreateChannel(&name);
    if (s.ok()) made.push_back(name);
    return s;
  }, &refusal);
  EXPECT_EQ(n, quota);
  EXPECT_TRUE(Exhausted(refusal, "channels"));
  EXPECT_EQ(r.ChannelCount(), before + quota);
  for (const auto& c : made) r.DeleteChannel(c);
  EXPECT_EQ(r.ChannelCount(), before);
  EXPECT_TRUE(r.Ping().ok());
}

TEST(TenantQuotas, CmIdsStopAtTheQuota) {
  Rdmad r;
  const uint64_t quota = EnvInt("RDMAD_QUOTA_CM_IDS", 4);
  const std::string pd = r.CreatePd();
  std::vector<std::string> made;
  grpc::Status refusal;
  const size_t n = FillUntilRefused(quota + 5, [&] {
    std::string name;
    grpc::Status s = r.CreateCmId(pd, &name);
    if (s.ok()) made.push_back(name);
    return s;
  }, &refusal);
  EXPECT_EQ(n, quota);
  EXPECT_TRUE(Exhausted(refusal, "cm_ids"));
  EXPECT_EQ(r.CmIdCount(), quota);
  for (const auto& id : made) r.DeleteCmId(id);
  r.DeletePd(pd);
}

TEST(TenantQuotas, TokensStopAtTheQuota) {
  Rdmad r;
  const uint64_t quota = EnvInt("RDMAD_QUOTA_TOKENS", 4);
  const std::string pd = r.CreatePd();
  grpc::Status refusal;
  EXPECT_EQ(FillUntilRefused(quota + 5, [&] { return r.IssueToken(pd); }, &refusal), quota);
  EXPECT_TRUE(Exhausted(refusal, "tokens"));
  sleep(2);  // the tokens' 1 s lifetimes end; the PD then has nothing in it
  r.DeletePd(pd);
}

TEST(TenantQuotas, WatchStreamsStopAtTheQuota) {
  Rdmad r;
  const uint64_t quota = EnvInt("RDMAD_QUOTA_WATCH_STREAMS", 4);
  std::vector<std::unique_ptr<Rdmad::Watch>> open;
  for (uint64_t i = 0; i < quota; ++i) {
    open.push_back(std::make_unique<Rdmad::Watch>());
    ASSERT_TRUE(r.OpenWatch(open.back().get())) << "stream " << i << " was refused";
  }
  Rdmad::Watch past;
  EXPECT_FALSE(r.OpenWatch(&past));
  v1::GrantEvent e;
  EXPECT_FALSE(past.reader->Read(&e));  // refused: the stream ended at once
  EXPECT_TRUE(Exhausted(past.reader->Finish(), "watch_streams"));
  for (auto& w : open) w->ctx->TryCancel();
  for (auto& w : open) w->reader->Finish();
  // Closed streams free their slots: one opens again (rdmad frees a slot when gRPC tells it the stream is
  // done, which may come a little after the client's Finish: tries for up to 10 s).
  bool reopened = false;
  for (int i = 0; i < 100 && !reopened; ++i) {
    Rdmad::Watch again;
    reopened = r.OpenWatch(&again);
    if (reopened) {
      again.ctx->TryCancel();
      EXPECT_EQ(again.reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
    } else {
      again.reader->Finish();
      usleep(100 * 1000);
    }
  }
  EXPECT_TRUE(reopened) << "a closed stream's slot was not freed within 10 s";
}

// rxe does not enforce a window's bounds, so each bind pins a bounds region over the window's pages: those
// count as the tenant's pinned_bytes, and the bind that would pass the quota is refused before it pins
// (run-limits.sh checks VmPin back at its start once the PD is gone).
TEST(TenantQuotas, BoundsRegionsCountAsPinnedBytes) {
  Rdmad r;
  const uint64_t quota = EnvInt("RDMAD_QUOTA_PINNED_BYTES", 3 * 65536);
  const uint64_t region = 65536;
  const std::string pd = r.CreatePd();
  const std::string mr = r.RegisterMr(pd, region);
  grpc::Status refusal;
  EXPECT_EQ(FillUntilRefused(8, [&] { return r.AllocAndBindMw(pd, mr, region); }, &refusal),
            (quota - region) / region);
  EXPECT_TRUE(Exhausted(refusal, "pinned_bytes"));
  r.DeletePd(pd, /*cascade=*/true);
}

// ---- default quotas (uid 1001, tenant u: no quotas of its own)

TEST(DefaultQuotas, ATenantWithoutQuotasGetsTheDefaults) {
  Rdmad r;
  const uint64_t quota = EnvInt("RDMAD_DEFAULT_TOKENS", 8);
  const std::string pd = r.CreatePd();
  grpc::Status refusal;
  EXPECT_EQ(FillUntilRefused(quota + 5, [&] { return r.IssueToken(pd); }, &refusal), quota);
  EXPECT_TRUE(Exhausted(refusal, "tokens"));
  sleep(2);
  r.DeletePd(pd);
}

// ---- rdmad-wide limits (root, an admin: no tenant quota applies)

TEST(GlobalLimits, ChannelsStopAtTheLimitForAdminsToo) {
  Rdmad r;
  const uint64_t limit = EnvInt("RDMAD_LIMIT_CHANNELS", 8);
  std::vector<std::string> made;
  grpc::Status refusal;
  FillUntilRefused(limit + 5, [&] {
    std::string name;
    grpc::Status s = r.CreateChannel(&name);
    if (s.ok()) made.push_back(name);
    return s;
  }, &refusal);
  EXPECT_LE(made.size(), limit);
  EXPECT_TRUE(Exhausted(refusal, "channels"));
  for (const auto& c : made) r.DeleteChannel(c);
  EXPECT_TRUE(r.Ping().ok());
}

TEST(GlobalLimits, CmIdsStopAtTheLimit) {
  Rdmad r;
  const uint64_t limit = EnvInt("RDMAD_LIMIT_CM_IDS", 16);
  const std::string pd = r.CreatePd();
  std::vector<std::string> made;
  grpc::Status refusal;
  FillUntilRefused(limit + 5, [&] {
    std::string name;
    grpc::Status s = r.CreateCmId(pd, &name);
    if (s.ok()) made.push_back(name);
    return s;
  }, &refusal);
  EXPECT_LE(made.size(), limit);
  EXPECT_TRUE(Exhausted(refusal, "cm_ids"));
  for (const auto& id : made) r.DeleteCmId(id);
  r.DeletePd(pd);
}

TEST(GlobalLimits, TokensStopAtTheLimit) {
  Rdmad r;
  const uint64_t limit = EnvInt("RDMAD_LIMIT_TOKENS", 16);
  const std::string pd = r.CreatePd();
  grpc::Status refusal;
  EXPECT_EQ(FillUntilRefused(limit + 5, [&] { return r.IssueToken(pd); }, &refusal), limit);
  EXPECT_TRUE(Exhausted(refusal, "tokens"));
  sleep(2);
  r.DeletePd(pd);
}

TEST(GlobalLimits, GrantsStopAtTheLimit) {
  Rdmad r;
  const uint64_t limit = EnvInt("RDMAD_LIMIT_GRANTS", 8);
  const std::string pd = r.CreatePd();
  const std::string mr = r.RegisterMr(pd, 1 << 20);
  std::vector<std::string> made;
  grpc::Status refusal;
  EXPECT_EQ(FillUntilRefused(limit + 5, [&] {
    std::string name;
    grpc::Status s = r.IssueGrant(mr, &name);
    if (s.ok()) made.push_back(name);
    return s;
  }, &refusal), limit);
  EXPECT_TRUE(Exhausted(refusal, "grants"));
  for (const auto& g : made) r.RevokeGrant(g);
  r.DeregisterMr(mr);
  r.DeletePd(pd);
}

// Watch streams that never read, up to the limit, while grant events pour in: the next stream is refused, calls
// still answer, and each stream's backlog is bounded: read afterwards, a stream either delivers every event in
// order (its backlog fitted in rdmad's buffer and the transport's window) or ends RESOURCE_EXHAUSTED, cut off
// with where to resume. run-limits.sh checks rdmad's RSS before and after.
TEST(GlobalLimits, UnreadWatchStreamsAreBoundedAndCapped) {
  Rdmad r;
  const uint64_t limit = EnvInt("RDMAD_LIMIT_WATCH_STREAMS", 12);
  std::vector<std::unique_ptr<Rdmad::Watch>> open;
  for (uint64_t i = 0; i < limit; ++i) {
    open.push_back(std::make_unique<Rdmad::Watch>());
    ASSERT_TRUE(r.OpenWatch(open.back().get())) << "stream " << i << " was refused";
  }
  Rdmad::Watch past;
  EXPECT_FALSE(r.OpenWatch(&past));
  v1::GrantEvent e;
  EXPECT_FALSE(past.reader->Read(&e));
  EXPECT_TRUE(Exhausted(past.reader->Finish(), "watch_streams"));

  const std::string pd = r.CreatePd();
  const std::string mr = r.RegisterMr(pd, 1 << 20);
  const int rounds = static_cast<int>(EnvInt("RDMAD_FLOOD_ROUNDS", 300));
  for (int i = 0; i < rounds; ++i) {
    std::string g;
    grpc::Status s = r.IssueGrant(mr, &g);
    ASSERT_TRUE(s.ok()) << "round " << i << ": " << s.error_message();
    r.RevokeGrant(g);
  }
  EXPECT_TRUE(r.Ping().ok());
  const int events = 2 * rounds;  // each grant: issued, then ended
  int cut_off = 0;
  for (auto& w : open) {
    int got = 0;
    while (got < events && w->reader->Read(&e)) ++got;
    if (got == events) {
      w->ctx->TryCancel();
      w->reader->Finish();
      continue;
    }
    grpc::Status end = w->reader->Finish();
    EXPECT_EQ(end.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << end.error_message();
    EXPECT_TRUE(absl::StrContains(end.error_message(), "after_sequence")) << end.error_message();
    ++cut_off;
  }
  std::printf("unread watch streams: %d of %zu cut off after %d events\n", cut_off, open.size(), events);
  r.DeregisterMr(mr);
  r.DeletePd(pd);
}

// ---- OS limits (root, with rdmad's RLIMIT_NOFILE lowered to a few descriptors above its use)

TEST(OsLimits, ChannelsPastTheDescriptorsAreRefusedAndRdmadAnswers) {
  Rdmad r;
  std::vector<std::string> made;
  grpc::Status refusal;
  const size_t before = r.ChannelCount();
  FillUntilRefused(64, [&] {
    std::string name;
    grpc::Status s = r.CreateChannel(&name);
    if (s.ok()) made.push_back(name);
    return s;
  }, &refusal);
  EXPECT_EQ(refusal.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refusal.error_message();
  EXPECT_TRUE(absl::StrContains(refusal.error_message(), "Too many open files")) << refusal.error_message();
  EXPECT_EQ(r.ChannelCount(), before + made.size());  // nothing half made
  EXPECT_TRUE(r.Ping().ok());
  for (const auto& c : made) r.DeleteChannel(c);
  EXPECT_EQ(r.ChannelCount(), before);
}

}  // namespace
}  // namespace rdmad::testing
