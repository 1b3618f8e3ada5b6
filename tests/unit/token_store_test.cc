// Unit tests of TokenStore (server/cm/token.h): issue and redeem, every reason Redeem gives (unknown,
// expired, replayed, revoked, and the decoding ones), ttl and claims validation, the outstanding limit,
// expiry and purging on a fake clock (no sleeps), the bound on remembered tokens, revocation, counters,
// and concurrent issuing and redeeming (each token accepted exactly once).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "server/cm/token.h"
#include "server/common/sync.h"
#include "tests/support/server_status.h"
#include "tests/support/status.h"

namespace rdmad::cm {
namespace {

using ::rdmad::test::IsError;

// Time that moves only when told to.
class FakeClock {
 public:
  std::function<absl::Time()> Fn() {
    return [this] { return now_; };
  }
  void Advance(absl::Duration d) { now_ += d; }

 private:
  absl::Time now_ = absl::FromUnixSeconds(1700000000);
};

Claims PdClaims(const std::string& pd = "pds/1") { return Claims{pd, "", "alice"}; }

class TokenStoreTest : public ::testing::Test {
 protected:
  TokenStore::Options Opts() {
    TokenStore::Options o;
    o.clock = clock_.Fn();
    o.grace = absl::Minutes(5);
    return o;
  }
  RejectReason RedeemFailure(TokenStore& store, const std::string& bytes) {
    Redemption r = store.Redeem(bytes);
    EXPECT_FALSE(r.accepted());
    return r.reason;
  }

  FakeClock clock_;
};

TEST_F(TokenStoreTest, IssueRedeemOnceThenReplayed) {
  TokenStore store(Opts());
  ASSERT_OK_AND_ASSIGN(Issued t, store.Issue(PdClaims("pds/3"), absl::Seconds(30)));
  EXPECT_EQ(t.bytes.size(), kTokenSize);
  EXPECT_EQ(t.id, "tokens/1");
  EXPECT_EQ(t.expiry, clock_.Fn()() + absl::Seconds(30));
  EXPECT_EQ(store.Outstanding(), 1u);

  // As the IB CM delivers it: padded with zeros to 56 bytes.
  Redemption r = store.Redeem(t.bytes + std::string(kConnectPrivateDataMax - kTokenSize, '\0'));
  ASSERT_TRUE(r.accepted()) << r.detail;
  EXPECT_EQ(r.claims->pd, "pds/3");
  EXPECT_EQ(r.claims->grant, "");
  EXPECT_EQ(r.claims->principal, "alice");
  EXPECT_EQ(TokenName(r.token_id), t.id);
  EXPECT_EQ(store.Outstanding(), 0u);

  Redemption again = store.Redeem(t.bytes);
  EXPECT_FALSE(again.accepted());
  EXPECT_EQ(again.reason, RejectReason::kReplayed);
  EXPECT_EQ(TokenName(again.reject().token_id), t.id);
}

TEST_F(TokenStoreTest, PeekDoesNotUseTheTokenAndRevokeWhereEndsAPdsTokens) {
  TokenStore store(Opts());
  ASSERT_OK_AND_ASSIGN(Issued a, store.Issue(PdClaims("pds/3"), absl::Seconds(30)));
  ASSERT_OK_AND_ASSIGN(Issued b, store.Issue(PdClaims("pds/4"), absl::Seconds(30)));
  Redemption peek = store.Peek(a.bytes);
  ASSERT_TRUE(peek.accepted());
  EXPECT_EQ(peek.claims->pd, "pds/3");
  EXPECT_EQ(store.Outstanding(), 2u);  // still usable
  EXPECT_EQ(store.Outstanding([](const Claims& c) { return c.pd == "pds/3"; }), 1u);
  EXPECT_EQ(store.OutstandingOnPd("pds/3"), 1u);
  EXPECT_EQ(store.OutstandingOnPd("pds/4"), 1u);
  EXPECT_EQ(store.RevokeWhere([](const Claims& c) { return c.pd == "pds/3"; }), 1u);
  EXPECT_EQ(store.OutstandingOnPd("pds/3"), 0u);
  EXPECT_EQ(RedeemFailure(store, a.bytes), RejectReason::kRevoked);
  EXPECT_TRUE(store.Redeem(b.bytes).accepted());
  EXPECT_EQ(store.OutstandingOnPd("pds/4"), 0u);  // redeemed: claims moved out, the count still drops
}

TEST_F(TokenStoreTest, GrantTokensCarryTheirKind) {
  TokenStore store(Opts());
  ASSERT_OK_AND_ASSIGN(Issued t, store.Issue(Claims{"pds/1", "grants/4", ""}, absl::Seconds(30)));
  EXPECT_EQ(DecodeToken(t.bytes).token->kind, TokenKind::kGrant);
  Redemption r = store.Redeem(t.bytes);
  ASSERT_TRUE(r.accepted());
  EXPECT_EQ(r.claims->grant, "grants/4");
}

TEST_F(TokenStoreTest, IdsAreDistinctAndSecretsRandom) {
  TokenStore store(Opts());
  std::set<std::string> ids, secrets;
  for (int i = 0; i < 100; ++i) {
    ASSERT_OK_AND_ASSIGN(Issued t, store.Issue(PdClaims(), absl::Seconds(30)));
    ids.insert(t.id);
    secrets.insert(t.bytes.substr(16));
    EXPECT_FALSE(absl::StrContains(t.id, t.bytes.substr(16)));
  }
  EXPECT_EQ(ids.size(), 100u);
  EXPECT_EQ(secrets.size(), 100u);
}

TEST_F(TokenStoreTest, DecodingReasons) {
  TokenStore store(Opts());
  ASSERT_OK_AND_ASSIGN(Issued t, store.Issue(PdClaims(), absl::Seconds(30)));
  EXPECT_EQ(RedeemFailure(store, ""), RejectReason::kMissing);
  EXPECT_EQ(RedeemFailure(store, std::string(kConnectPrivateDataMax, '\0')), RejectReason::kMissing);
  EXPECT_EQ(RedeemFailure(store, "garbage"), RejectReason::kMalformed);
  EXPECT_EQ(RedeemFailure(store, t.bytes.substr(0, kTokenSize - 1)), RejectReason::kMalformed);
  EXPECT_EQ(RedeemFailure(store, t.bytes + std::string(kConnectPrivateDataMax, '\0')), RejectReason::kMalformed);
  std::string v2 = t.bytes;
  v2[4] = 2;
  EXPECT_EQ(RedeemFailure(store, v2), RejectReason::kWrongVersion);
  // None of that used the token up.
  EXPECT_TRUE(store.Redeem(t.bytes).accepted());
}

TEST_F(TokenStoreTest, UnknownTokens) {
  TokenStore store(Opts());
  ASSERT_OK_AND_ASSIGN(Issued t, store.Issue(PdClaims(), absl::Seconds(30)));
  // A well-formed token rdmad never issued.
  Token never;
  never.id = 999;
  EXPECT_EQ(RedeemFailure(store, EncodeToken(never)), RejectReason::kUnknown);
  // The right id with one secret bit flipped, or the kind changed: unknown, and the token survives.
  std::string flipped = t.bytes;
  flipped[kTokenSize - 1] ^= 0x01;
  EXPECT_EQ(RedeemFailure(store, flipped), RejectReason::kUnknown);
  std::string rekinded = t.bytes;
  rekinded[5] = static_cast<char>(TokenKind::kGrant);
  EXPECT_EQ(RedeemFailure(store, rekinded), RejectReason::kUnknown);
  ASSERT_TRUE(store.Redeem(t.bytes).accepted());
  // Without the secret nobody learns that the token was used.
  EXPECT_EQ(RedeemFailure(store, flipped), RejectReason::kUnknown);
}

TEST_F(TokenStoreTest, ExpiryThenForgottenAfterGrace) {
  TokenStore store(Opts());
  ASSERT_OK_AND_ASSIGN(Issued unused, store.Issue(PdClaims(), absl::Seconds(10)));
  ASSERT_OK_AND_ASSIGN(Issued used, store.Issue(PdClaims(), absl::Seconds(10)));
  ASSERT_TRUE(store.Redeem(used.bytes).accepted());
  clock_.Advance(absl::Seconds(10) - absl::Nanoseconds(1));
  EXPECT_EQ(store.Outstanding(), 1u);
  EXPECT_EQ(store.OutstandingOnPd("pds/1"), 1u);
  EXPECT_EQ(RedeemFailure(store, used.bytes), RejectReason::kReplayed);

  clock_.Advance(absl::Nanoseconds(1));  // exactly at expiry
  EXPECT_EQ(store.Outstanding(), 0u);
  EXPECT_EQ(store.OutstandingOnPd("pds/1"), 0u);
  EXPECT_EQ(RedeemFailure(store, unused.bytes), RejectReason::kExpired);
  EXPECT_EQ(RedeemFailure(store, used.bytes), RejectReason::kExpired);
  EXPECT_EQ(store.GetCounters().expired, 1u);

  clock_.Advance(absl::Minutes(5) - absl::Nanoseconds(1));  // the end of the grace period
  EXPECT_EQ(RedeemFailure(store, unused.bytes), RejectReason::kExpired);
  clock_.Advance(absl::Nanoseconds(1));
  EXPECT_EQ(RedeemFailure(store, unused.bytes), RejectReason::kUnknown);
  EXPECT_EQ(RedeemFailure(store, used.bytes), RejectReason::kUnknown);
  EXPECT_TRUE(IsError(store.Revoke(unused.id), absl::StatusCode::kNotFound, "name"));
}

TEST_F(TokenStoreTest, PurgeFollowsExpiryOrderNotIssueOrder) {
  TokenStore store(Opts());
  ASSERT_OK_AND_ASSIGN(Issued long_lived, store.Issue(PdClaims(), absl::Minutes(30)));
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(store.Issue(PdClaims(), absl::Seconds(1 + i)).ok());
  clock_.Advance(absl::Seconds(25));
  EXPECT_EQ(store.Outstanding(), 1u + 25u);  // ttls 26..50 and the long one
  clock_.Advance(absl::Seconds(25));
  EXPECT_EQ(store.Outstanding(), 1u);
  EXPECT_EQ(store.GetCounters().expired, 50u);
  clock_.Advance(absl::Minutes(6));  // every short one is past its grace
  EXPECT_TRUE(store.Redeem(long_lived.bytes).accepted());
}

TEST_F(TokenStoreTest, RememberedTokensAreBounded) {
  TokenStore::Options o = Opts();
  o.max_finished = 2;
  TokenStore store(o);
  std::vector<Issued> tokens;
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(Issued t, store.Issue(PdClaims(), absl::Seconds(10 + i)));
    tokens.push_back(t);
  }
  for (const Issued& t : tokens) ASSERT_TRUE(store.Redeem(t.bytes).accepted());
  // The one due to be forgotten first was forgotten early: still rejected, as unknown.
  EXPECT_EQ(RedeemFailure(store, tokens[0].bytes), RejectReason::kUnknown);
  EXPECT_EQ(RedeemFailure(store, tokens[1].bytes), RejectReason::kReplayed);
  EXPECT_EQ(RedeemFailure(store, tokens[2].bytes), RejectReason::kReplayed);
}

TEST_F(TokenStoreTest, ValidatesClaimsAndTtl) {
  TokenStore store(Opts());
  EXPECT_TRUE(IsError(store.Issue(PdClaims(""), absl::Seconds(1)), absl::StatusCode::kInvalidArgument, "pd"));
  for (absl::Duration bad : {absl::ZeroDuration(), absl::Seconds(-1), absl::Hours(1) + absl::Nanoseconds(1),
                             absl::InfiniteDuration()}) {
    EXPECT_TRUE(IsError(store.Issue(PdClaims(), bad), absl::StatusCode::kInvalidArgument, "ttl"))
        << absl::FormatDuration(bad);
  }
  EXPECT_TRUE(store.Issue(PdClaims(), absl::Hours(1)).ok());
  EXPECT_TRUE(store.Issue(PdClaims(), absl::Nanoseconds(1)).ok());
  EXPECT_EQ(store.GetCounters().issued, 2u);
}

TEST_F(TokenStoreTest, OutstandingLimit) {
  TokenStore::Options o = Opts();
  o.max_outstanding = 3;
  TokenStore store(o);
  std::vector<Issued> tokens;
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(Issued t, store.Issue(PdClaims(), absl::Seconds(10)));
    tokens.push_back(t);
  }
  absl::StatusOr<Issued> over = store.Issue(PdClaims(), absl::Seconds(10));
  ASSERT_TRUE(IsError(over, absl::StatusCode::kResourceExhausted, ""));
  EXPECT_TRUE(absl::StrContains(over.status().message(), "outstanding tokens")) << over.status();
  EXPECT_TRUE(absl::StrContains(over.status().message(), "limit tokens of rdmad: limit 3, in use 3")) << over.status();
  // Redeeming, revoking and expiring each free a place.
  ASSERT_TRUE(store.Redeem(tokens[0].bytes).accepted());
  ASSERT_OK(store.Issue(PdClaims(), absl::Seconds(20)).status());
  ASSERT_OK(store.Revoke(tokens[1].id));
  ASSERT_OK(store.Issue(PdClaims(), absl::Seconds(20)).status());
  EXPECT_FALSE(store.Issue(PdClaims(), absl::Seconds(20)).ok());
  clock_.Advance(absl::Seconds(10));  // tokens[2] expires
  ASSERT_OK(store.Issue(PdClaims(), absl::Seconds(20)).status());
  EXPECT_EQ(store.Outstanding(), 3u);
}

TEST_F(TokenStoreTest, Revoke) {
  TokenStore store(Opts());
  ASSERT_OK_AND_ASSIGN(Issued a, store.Issue(PdClaims(), absl::Seconds(10)));
  ASSERT_OK_AND_ASSIGN(Issued b, store.Issue(PdClaims(), absl::Seconds(10)));
  ASSERT_OK(store.Revoke(a.id));
  EXPECT_EQ(store.Outstanding(), 1u);
  EXPECT_EQ(RedeemFailure(store, a.bytes), RejectReason::kRevoked);
  EXPECT_TRUE(IsError(store.Revoke(a.id), absl::StatusCode::kFailedPrecondition, "name"));
  ASSERT_TRUE(store.Redeem(b.bytes).accepted());
  EXPECT_TRUE(IsError(store.Revoke(b.id), absl::StatusCode::kFailedPrecondition, "name"));
  EXPECT_TRUE(IsError(store.Revoke("tokens/99"), absl::StatusCode::kNotFound, "name"));
  EXPECT_TRUE(IsError(store.Revoke("pds/1"), absl::StatusCode::kInvalidArgument, "name"));
  clock_.Advance(absl::Seconds(10));
  EXPECT_EQ(RedeemFailure(store, a.bytes), RejectReason::kExpired);
  EXPECT_EQ(store.GetCounters().revoked, 1u);
}

TEST_F(TokenStoreTest, Counters) {
  TokenStore store(Opts());
  ASSERT_OK_AND_ASSIGN(Issued t, store.Issue(PdClaims(), absl::Seconds(10)));
  ASSERT_TRUE(store.Redeem(t.bytes).accepted());
  store.Redeem(t.bytes);
  store.Redeem(t.bytes);
  store.Redeem("");
  TokenStore::Counters c = store.GetCounters();
  EXPECT_EQ(c.issued, 1u);
  EXPECT_EQ(c.redeemed, 1u);
  EXPECT_EQ(c.rejected[RejectReason::kReplayed], 2u);
  EXPECT_EQ(c.rejected[RejectReason::kMissing], 1u);
  EXPECT_EQ(c.rejected.count(RejectReason::kExpired), 0u);
}

// Issuers and redeemers run at once; every redeemer tries every token. Each is accepted exactly once.
TEST(TokenStoreConcurrency, EachTokenRedeemedExactlyOnce) {
  constexpr int kThreads = 4;
  constexpr int kPerIssuer = 300;
  TokenStore store;
  Mutex mu;
  std::vector<std::string> issued;  // guarded by mu
  std::atomic<int> issuers_left{kThreads};
  std::vector<std::atomic<int>> accepted(kThreads * kPerIssuer + 1);  // by token id
  for (std::atomic<int>& a : accepted) a.store(0);
  std::atomic<int> replayed{0}, other{0};

  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      for (int n = 0; n < kPerIssuer; ++n) {
        absl::StatusOr<Issued> t = store.Issue(PdClaims(), absl::Minutes(1));
        if (!t.ok()) {
          ADD_FAILURE() << t.status();
          continue;
        }
        MutexLock lock(&mu);
        issued.push_back(t->bytes);
      }
      --issuers_left;
    });
    threads.emplace_back([&, i] {
      size_t next = 0;
      while (true) {
        const bool done = issuers_left.load() == 0;
        std::vector<std::string> batch;
        {
          MutexLock lock(&mu);
          batch.assign(issued.begin() + next, issued.end());
        }
        next += batch.size();
        if (i % 2) std::reverse(batch.begin(), batch.end());
        for (const std::string& bytes : batch) {
          Redemption r = store.Redeem(bytes);
          if (r.accepted()) {
            ++accepted[r.token_id];
          } else if (r.reason == RejectReason::kReplayed) {
            ++replayed;
          } else {
            ++other;
          }
        }
        if (done && batch.empty()) break;
      }
    });
  }
  for (std::thread& t : threads) t.join();

  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(replayed.load(), (kThreads - 1) * kThreads * kPerIssuer);
  for (size_t id = 1; id < accepted.size(); ++id) EXPECT_EQ(accepted[id].load(), 1) << TokenName(id);
  EXPECT_EQ(store.Outstanding(), 0u);
  TokenStore::Counters c = store.GetCounters();
  EXPECT_EQ(c.issued, uint64_t{kThreads * kPerIssuer});
  EXPECT_EQ(c.redeemed, uint64_t{kThreads * kPerIssuer});
}

}  // namespace
}  // namespace rdmad::cm
