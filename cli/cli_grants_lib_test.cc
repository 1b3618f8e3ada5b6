// rdmactl's library for grants and the data plane: grant names, token files, the grant outputs (table, event
// lines, the issued grant) and the bench's output (cli/parse.h, cli/output.h).
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "client/transfer.h"
#include "cli/command.h"
#include "cli/output.h"
#include "cli/parse.h"

namespace rdmad::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using V = std::vector<std::string>;

const std::set<std::string> kValued = {"--server", "-o", "--output", "--timeout"};
const absl::Time kNow = absl::FromUnixSeconds(1795321906);  // 2026-11-22T04:31:46Z

// ---- names, token files

TEST(GrantNamesTest, NormalizeShortAndSplit) {
  EXPECT_EQ(NormalizeName(Kind::kGrant, "9").value(), "grants/9");
  EXPECT_EQ(NormalizeName(Kind::kGrant, "grant/09").value(), "grants/9");
  EXPECT_EQ(NormalizeName(Kind::kGrant, "grants/9").value(), "grants/9");
  EXPECT_THAT(std::string(NormalizeName(Kind::kGrant, "mrs/3").status().message()),
              HasSubstr("'mrs/3' names a memory region, not a grant"));
  EXPECT_THAT(std::string(NormalizeName(Kind::kMr, "grants/3").status().message()),
              HasSubstr("'grants/3' names a grant, not a memory region"));
  EXPECT_FALSE(NormalizeName(Kind::kGrant, "grants/0").ok());
  EXPECT_EQ(NormalizeName(Kind::kGrant, "grant/9").value(), "grants/9");
  EXPECT_EQ(KindFromNoun("GRANTS"), Kind::kGrant);
  EXPECT_EQ(SplitTypeSlashName(V{"get", "grants/9"}, kValued), (V{"get", "grants", "grants/9"}));
  EXPECT_EQ(SplitTypeSlashName(V{"revoke", "grants/9"}, kValued), (V{"revoke", "grants", "grants/9"}));
  EXPECT_EQ(SplitTypeSlashName(V{"-o", "json", "renew", "grant/9", "--ttl", "1m"}, kValued),
            (V{"-o", "json", "renew", "grant", "grant/9", "--ttl", "1m"}));
}

TEST(TokenFromFileTest, RawBytes) {
  const std::string raw = std::string("RDTK\x01\x02\0\0", 8) + std::string(24, '\xee');
  EXPECT_EQ(TokenFromFile(raw).value(), raw);
  // Raw bytes are not trimmed, even when they end in whitespace bytes.
  const std::string spaced = std::string("RDTK") + std::string(27, '\x01') + "\n";
  EXPECT_EQ(TokenFromFile(spaced).value(), spaced);
}

TEST(TokenFromFileTest, HexTextAsPrinted) {
  EXPECT_EQ(TokenFromFile("5244544b0102\n").value(), std::string("RDTK\x01\x02"));
  EXPECT_EQ(TokenFromFile("  0x52:44:54:4b  ").value(), "RDTK");
}

TEST(TokenFromFileTest, Rejects) {
  EXPECT_THAT(std::string(TokenFromFile("").status().message()), HasSubstr("empty"));
  EXPECT_THAT(std::string(TokenFromFile(" \n").status().message()), HasSubstr("empty"));
  EXPECT_THAT(std::string(TokenFromFile("5244544").status().message()), HasSubstr("odd number"));
  EXPECT_THAT(std::string(TokenFromFile(std::string(57, 'R')).status().message()),
              HasSubstr("57 bytes: a token is at most 56"));
  EXPECT_FALSE(TokenFromFile(std::string(114, 'a')).ok());  // 57 bytes in hex
}

// ---- outputs

v1::Grant SampleGrant() {
  v1::Grant g;
  g.set_name("grants/9");
  g.set_mr("mrs/3");
  g.set_pd("pds/1");
  g.set_offset(4096);
  g.set_length(1 << 20);
  g.add_access(v1::REMOTE_READ);
  g.set_principal("app-7");
  g.set_state(v1::GRANT_ACTIVE);
  g.set_scope(v1::SCOPE_QP);
  g.set_expire_time_unix_nanos(absl::ToUnixNanos(kNow + absl::Seconds(60)));
  g.set_renewals(2);
  g.set_token("tokens/17");
  g.set_cm_id("cmids/5");
  g.set_qp("qps/7");
  g.set_window("mws/8");
  return g;
}

TEST(GrantOutputTest, RestartedEndReason) { EXPECT_EQ(GrantEndReasonString(v1::END_RESTARTED), "RESTARTED"); }

TEST(GrantOutputTest, EnumStrings) {
  EXPECT_EQ(GrantStateString(v1::GRANT_ACTIVATING), "ACTIVATING");
  EXPECT_EQ(GrantStateString(v1::GRANT_ENDED), "ENDED");
  EXPECT_EQ(GrantScopeString(v1::SCOPE_PD), "PD");
  EXPECT_EQ(GrantEndReasonString(v1::END_MR_REREGISTERED), "MR_REREGISTERED");
  EXPECT_EQ(GrantEventTypeString(v1::GRANT_ISSUED_EVENT), "ISSUED");
  EXPECT_EQ(GrantEventTypeString(v1::GRANT_EXPIRED), "EXPIRED");
  EXPECT_EQ(GrantEventTypeString(77), "77");
}

TEST(GrantOutputTest, ExpiresIn) {
  const int64_t now = absl::ToUnixNanos(kNow);
  EXPECT_EQ(ExpiresIn(now + 59'300'000'000, kNow), "in 1m");  // rounded up to whole seconds
  EXPECT_EQ(ExpiresIn(now + 90'000'000'000, kNow), "in 1m30s");
  EXPECT_EQ(ExpiresIn(now + 1, kNow), "in 1s");
  EXPECT_EQ(ExpiresIn(now, kNow), "expired");
  EXPECT_EQ(ExpiresIn(now - 5'000'000'000, kNow), "expired");
  EXPECT_EQ(ExpiresIn(0, kNow), "");
  EXPECT_EQ(FormatExpiry(now), "2026-11-22T04:31:46Z");
  EXPECT_EQ(FormatExpiry(0), "");
}

TEST(GrantOutputTest, Table) {
  google::protobuf::RepeatedPtrField<v1::Grant> grants;
  *grants.Add() = SampleGrant();
  v1::Grant* ended = grants.Add();
  *ended = SampleGrant();
  ended->set_name("grants/10");
  ended->set_state(v1::GRANT_ENDED);
  ended->set_end_reason(v1::END_MR_DEREGISTERED);
  ended->set_end_detail("mrs/3 deregistered");
  EXPECT_EQ(MakeTable(GrantColumns(kNow), grants, false).Render(),
            "NAME        MR      OFFSET   LENGTH   SCOPE   STATE    PRINCIPAL   EXPIRES\n"
            "grants/9    mrs/3   4KiB     1MiB     QP      ACTIVE   app-7       in 1m\n"
            "grants/10   mrs/3   4KiB     1MiB     QP      ENDED    app-7       <none>\n");
  const std::string wide = MakeTable(GrantColumns(kNow), grants, true).Render();
  EXPECT_THAT(wide, HasSubstr("PD      ACCESS        RENEWALS   EXPIRY                 CM-ID     QP      WINDOW   "
                              "TOKEN       REASON"));
  EXPECT_THAT(wide, HasSubstr("pds/1   remote-read   2          2026-11-22T04:32:46Z   cmids/5   qps/7   mws/8    "
                              "tokens/17   <none>\n"));
  EXPECT_THAT(wide, HasSubstr("MR_DEREGISTERED: mrs/3 deregistered\n"));
}

TEST(GrantOutputTest, EventLines) {
  EXPECT_EQ(StreamHeader(GrantEventStream(), false),
            "SEQ      TIME                          TYPE        GRANT        MR         PRINCIPAL      DETAILS");
  v1::GrantEvent e;
  e.set_sequence(1);
  e.set_time_unix_nanos(absl::ToUnixNanos(kNow));
  e.set_type(v1::GRANT_ISSUED_EVENT);
  *e.mutable_grant() = SampleGrant();
  EXPECT_EQ(StreamLine(GrantEventStream(), e, false),
            "1        2026-11-22T04:31:46.000000Z   ISSUED      grants/9     mrs/3      app-7          offset 4KiB, "
            "length 1MiB, remote-read, scope QP, expires 2026-11-22T04:32:46Z");
  e.set_type(v1::GRANT_ACTIVATED);
  EXPECT_THAT(StreamLine(GrantEventStream(), e, false), HasSubstr("ACTIVATED   grants/9     mrs/3      app-7          cmid cmids/5, qp qps/7, "
                                           "window mws/8"));
  e.set_type(v1::GRANT_RENEWED);
  EXPECT_THAT(StreamLine(GrantEventStream(), e, false), HasSubstr("RENEWED     grants/9     mrs/3      app-7          expires "
                                           "2026-11-22T04:32:46Z, renewals 2"));
  e.set_type(v1::GRANT_REVOKED);
  e.mutable_grant()->set_end_reason(v1::END_REVOKED);
  EXPECT_THAT(StreamLine(GrantEventStream(), e, false), HasSubstr("REVOKED     grants/9     mrs/3      app-7          reason REVOKED"));
  e.set_type(v1::GRANT_EXPIRED);
  e.mutable_grant()->set_end_reason(v1::END_EXPIRED);
  e.mutable_grant()->set_principal("");
  EXPECT_THAT(StreamLine(GrantEventStream(), e, false), HasSubstr("EXPIRED     grants/9     mrs/3      <none>         reason EXPIRED"));
}

TEST(GrantOutputTest, IssuedGrantText) {
  v1::IssuedGrant issued;
  *issued.mutable_grant() = SampleGrant();
  issued.set_token(std::string("RDTK\x01\x02", 6));
  v1::SocketAddress* a = issued.add_endpoints();
  a->set_address("10.0.2.15");
  a->set_port(7471);
  EXPECT_EQ(IssuedGrantText(issued, kNow, ""),
            "grants/9 issued to app-7: mrs/3 offset 4KiB length 1MiB, remote-read, scope QP (expires "
            "2026-11-22T04:32:46Z, in 1m)\n"
            "endpoints: 10.0.2.15:7471\n"
            "token: 5244544b0102\n");
  const std::string to_file = IssuedGrantText(issued, kNow, "/tmp/t");
  EXPECT_THAT(to_file, HasSubstr("token: written to /tmp/t (6 bytes, mode 0600)\n"));
  EXPECT_THAT(to_file, Not(HasSubstr("5244544b")));
}

TEST(BenchOutputTest, TableAndJson) {
  std::vector<uint64_t> ns;
  for (uint64_t i = 1; i <= 1000; i++) ns.push_back(i * 1500);
  client::BenchResult r = client::Summarize(ns, 4096, 16, absl::Milliseconds(500));
  EXPECT_EQ(BenchTable(r),
            "READS   SIZE   DEPTH   SECONDS   IOPS   MIB/S   P50-US   P99-US   P999-US\n"
            "1000    4KiB   16      0.50      2000   7.8     750.0    1485.0   1498.5\n");
  EXPECT_EQ(ToJson(BenchJson(r, "grants/9")),
            "{\n \"grant\": \"grants/9\",\n \"reads\": \"1000\",\n \"bytes\": \"4096000\",\n \"size\": \"4096\",\n"
            " \"depth\": \"16\",\n \"seconds\": 0.5,\n \"iops\": 2000,\n \"mib_per_s\": 7.8125,\n \"latency_us\": {\n"
            "  \"p50\": 750,\n  \"p99\": 1485,\n  \"p999\": 1498.5\n }\n}\n");
}

}  // namespace
}  // namespace rdmad::cli
