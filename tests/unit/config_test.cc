// Unit tests of rdmad's configuration file parser (server/config.h, docs/config.md): every documented key
// is accepted; unknown keys, wrong types, relative roots, bad log levels, an empty listen list and invalid
// JSON are INVALID_ARGUMENT naming the key, never a silent default.
#include "server/config.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/common/status.h"
#include "tests/support/server_status.h"
#include "tests/support/temp_dir.h"

namespace rdmad {
namespace {

using ::rdmad::test::IsError;
using ::rdmad::test::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParseConfigTest, AnEmptyObjectGivesTheDocumentedDefaults) {
  absl::StatusOr<Config> c = ParseConfig("{}");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->listen, ElementsAre("unix:/run/rdmad/rdmad.sock"));
  EXPECT_THAT(c->allowed_file_roots, ElementsAre("/dev/shm", "/dev/hugepages", "/run/rdmad"));
  EXPECT_EQ(c->max_mr_bytes, 0u);
  EXPECT_EQ(c->log_level, "info");
}

TEST(ParseConfigTest, AcceptsEveryDocumentedKey) {
  absl::StatusOr<Config> c = ParseConfig(R"({
    "listen": ["unix:/tmp/r.sock", "127.0.0.1:7070"],
    "allowed_file_roots": ["/dev/shm", "/srv/share/"],
    "max_mr_bytes": 1073741824,
    "log_level": "debug"
  })");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->listen, ElementsAre("unix:/tmp/r.sock", "127.0.0.1:7070"));
  EXPECT_THAT(c->allowed_file_roots, ElementsAre("/dev/shm", "/srv/share/"));
  EXPECT_EQ(c->max_mr_bytes, 1073741824u);
  EXPECT_EQ(c->log_level, "debug");
}

TEST(ParseConfigTest, AKeyThatIsAbsentKeepsItsDefault) {
  absl::StatusOr<Config> c = ParseConfig(R"({"max_mr_bytes": 4096})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_mr_bytes, 4096u);
  EXPECT_THAT(c->listen, ElementsAre("unix:/run/rdmad/rdmad.sock"));
  EXPECT_EQ(c->log_level, "info");
}

TEST(ParseConfigTest, AcceptsEveryLogLevel) {
  for (const char* level : {"debug", "info", "warning", "error"}) {
    absl::StatusOr<Config> c = ParseConfig(std::string(R"({"log_level": ")") + level + "\"}");
    ASSERT_TRUE(c.ok()) << level << ": " << c.status();
    EXPECT_EQ(c->log_level, level);
  }
}

TEST(ParseConfigTest, AcceptsTheLargestByteCount) {
  absl::StatusOr<Config> c = ParseConfig(R"({"max_mr_bytes": 18446744073709551615})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_mr_bytes, UINT64_MAX);
}

TEST(ParseConfigTest, AcceptsComments) {  // docs/config.md: "JSON (comments allowed)"
  absl::StatusOr<Config> c = ParseConfig(R"({
    // rdmad's settings
    "log_level": "warning" /* quiet */
  })");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->log_level, "warning");
}

TEST(ParseConfigTest, RejectsUnknownKeysNamingThem) {
  for (const char* text : {R"({"listen_addr": ["unix:/x"]})", R"({"Listen": ["unix:/x"]})",
                           R"({"log_level": "info", "max_mr_size": 1})", R"({"": 1})"}) {
    SCOPED_TRACE(text);
    absl::StatusOr<Config> c = ParseConfig(text);
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(c.status().message()), HasSubstr("unknown setting"));
  }
  EXPECT_TRUE(IsError(ParseConfig(R"({"listen_addr": []})"), absl::StatusCode::kInvalidArgument, "listen_addr"));
  EXPECT_TRUE(IsError(ParseConfig(R"({"max_mr_size": 1})"), absl::StatusCode::kInvalidArgument, "max_mr_size"));
}

TEST(ParseConfigTest, RejectsWrongTypesNamingTheKey) {
  struct Case {
    const char* text;
    const char* field;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"listen": "unix:/x"})", "listen"},
           {R"({"listen": [1]})", "listen"},
           {R"({"listen": ["unix:/x", null]})", "listen"},
           {R"({"listen": {"a": "unix:/x"}})", "listen"},
           {R"({"allowed_file_roots": "/dev/shm"})", "allowed_file_roots"},
           {R"({"allowed_file_roots": [true]})", "allowed_file_roots"},
           {R"({"max_mr_bytes": "4096"})", "max_mr_bytes"},
           {R"({"max_mr_bytes": -1})", "max_mr_bytes"},
           {R"({"max_mr_bytes": 1.5})", "max_mr_bytes"},
           {R"({"max_mr_bytes": true})", "max_mr_bytes"},
           {R"({"max_mr_bytes": null})", "max_mr_bytes"},
           {R"({"max_mr_bytes": 18446744073709551616})", "max_mr_bytes"},  // 2^64: a float to JSON
           {R"({"log_level": 1})", "log_level"},
           {R"({"log_level": ["info"]})", "log_level"},
       }) {
    SCOPED_TRACE(c.text);
    EXPECT_TRUE(IsError(ParseConfig(c.text), absl::StatusCode::kInvalidArgument, c.field));
  }
}

TEST(ParseConfigTest, RejectsRelativeOrEmptyRoots) {
  for (const char* text : {R"({"allowed_file_roots": ["dev/shm"]})", R"({"allowed_file_roots": [""]})",
                           R"({"allowed_file_roots": ["/dev/shm", "./share"]})",
                           R"({"allowed_file_roots": ["~/share"]})"}) {
    SCOPED_TRACE(text);
    EXPECT_TRUE(IsError(ParseConfig(text), absl::StatusCode::kInvalidArgument, "allowed_file_roots"));
  }
  // No roots at all is valid: then no file can be registered.
  absl::StatusOr<Config> none = ParseConfig(R"({"allowed_file_roots": []})");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->allowed_file_roots.empty());
}

TEST(ParseConfigTest, RejectsBadLogLevels) {
  for (const char* level : {"verbose", "INFO", "Info", "warn", "", "info "}) {
    SCOPED_TRACE(level);
    EXPECT_TRUE(IsError(ParseConfig(std::string(R"({"log_level": ")") + level + "\"}"),
                        absl::StatusCode::kInvalidArgument, "log_level"));
  }
}

TEST(ParseConfigTest, RejectsAnEmptyListenList) {
  absl::StatusOr<Config> c = ParseConfig(R"({"listen": []})");
  EXPECT_TRUE(IsError(c, absl::StatusCode::kInvalidArgument, "listen"));
}

TEST(ParseConfigTest, RejectsInvalidJsonAndNonObjects) {
  for (const char* text : {"", "{", "{\"listen\": [}", "{\"listen\": [\"unix:/x\",]}", "nul", "{'listen': []}",
                           "{} {}"}) {
    SCOPED_TRACE(text);
    EXPECT_TRUE(IsError(ParseConfig(text), absl::StatusCode::kInvalidArgument, ""));
  }
  for (const char* text : {"[]", "\"listen\"", "42", "null"}) {
    SCOPED_TRACE(text);
    absl::StatusOr<Config> c = ParseConfig(text);
    EXPECT_TRUE(IsError(c, absl::StatusCode::kInvalidArgument, ""));
    EXPECT_THAT(std::string(c.status().message()), HasSubstr("object"));
  }
}

TEST(LoadConfigTest, ReadsAFile) {
  TempDir dir;
  const std::string path = dir.Sub("rdmad.json");
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("{\n  // comment\n  \"listen\": [\"unix:/run/x.sock\"],\n  \"log_level\": \"error\"\n}\n", f);
  std::fclose(f);
  absl::StatusOr<Config> c = LoadConfig(path);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->listen, ElementsAre("unix:/run/x.sock"));
  EXPECT_EQ(c->log_level, "error");
}

TEST(LoadConfigTest, AnInvalidFileIsReportedWithItsPathAndTheKey) {
  TempDir dir;
  const std::string path = dir.Sub("bad.json");
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("{\"log_level\": \"loud\"}", f);
  std::fclose(f);
  absl::StatusOr<Config> c = LoadConfig(path);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FieldOf(c.status()), "log_level");
  EXPECT_THAT(std::string(c.status().message()), HasSubstr(path));
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("log_level"));
}

TEST(LoadConfigTest, AMissingFileIsAnError) {
  TempDir dir;
  const std::string path = dir.Sub("missing.json");
  absl::StatusOr<Config> c = LoadConfig(path);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr(path));
  EXPECT_EQ(CallOf(c.status()), "open");
}

}  // namespace
TEST(ParseConfigTest, RdmaCmKeys) {
  absl::StatusOr<Config> c = ParseConfig(R"({"rdma_listen": ["10.0.2.15:7471", "[fe80::1]:7472"],
                                             "cm_workers": 3, "pin_workers": 4, "watch_buffer": 64})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rdma_listen.size(), 2u);
  EXPECT_EQ(c->cm_workers, 3);
  EXPECT_EQ(c->pin_workers, 4);
  EXPECT_EQ(c->watch_buffer, 64);
  std::string host;
  uint16_t port = 0;
  ASSERT_TRUE(SplitHostPort("[fe80::1]:7472", "rdma_listen", &host, &port).ok());
  EXPECT_EQ(host, "fe80::1");
  EXPECT_EQ(port, 7472);
  for (const char* bad : {R"({"rdma_listen": ["10.0.2.15"]})", R"({"rdma_listen": ["10.0.2.15:0"]})",
                          R"({"rdma_listen": [":7471"]})", R"({"rdma_listen": ["10.0.2.15:70000"]})"}) {
    EXPECT_TRUE(IsError(ParseConfig(bad), absl::StatusCode::kInvalidArgument, "rdma_listen")) << bad;
  }
  EXPECT_TRUE(IsError(ParseConfig(R"({"cm_workers": 0})"), absl::StatusCode::kInvalidArgument, "cm_workers"));
  EXPECT_TRUE(IsError(ParseConfig(R"({"pin_workers": 65})"), absl::StatusCode::kInvalidArgument, "pin_workers"));
  EXPECT_TRUE(IsError(ParseConfig(R"({"watch_buffer": 15})"), absl::StatusCode::kInvalidArgument, "watch_buffer"));
  EXPECT_EQ(ParseConfig("{}")->completion_poll_us, 300);
  EXPECT_EQ(ParseConfig(R"({"completion_poll_us": 0})")->completion_poll_us, 0);
  EXPECT_TRUE(IsError(ParseConfig(R"({"completion_poll_us": 100001})"), absl::StatusCode::kInvalidArgument,
                      "completion_poll_us"));
}

TEST(ParseConfigTest, GrantKeys) {
  absl::StatusOr<Config> c = ParseConfig(R"({"max_grant_ttl_s": 600, "grant_quarantine_ms": 0,
                                             "grant_window_pool": 4, "grant_key_kill_timeout_ms": 100})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_grant_ttl_s, 600);
  EXPECT_EQ(c->grant_quarantine_ms, 0);
  EXPECT_EQ(c->grant_window_pool, 4);
  EXPECT_EQ(c->grant_key_kill_timeout_ms, 100);
  EXPECT_EQ(ParseConfig("{}")->grant_key_kill_timeout_ms, 5000);
  EXPECT_EQ(ParseConfig("{}")->grant_end_grace_ms, 250);
  EXPECT_EQ(ParseConfig(R"({"grant_end_grace_ms": 0})")->grant_end_grace_ms, 0);
  EXPECT_EQ(ParseConfig(R"({"grant_end_grace_ms": 10000})")->grant_end_grace_ms, 10000);
  for (const char* bad : {R"({"grant_end_grace_ms": -1})", R"({"grant_end_grace_ms": 10001})",
                          R"({"grant_end_grace_ms": 0.5})"}) {
    EXPECT_TRUE(IsError(ParseConfig(bad), absl::StatusCode::kInvalidArgument, "grant_end_grace_ms")) << bad;
  }
  for (const char* bad : {R"({"grant_key_kill_timeout_ms": 99})", R"({"grant_key_kill_timeout_ms": 600001})",
                          R"({"grant_key_kill_timeout_ms": "5s"})"}) {
    EXPECT_TRUE(IsError(ParseConfig(bad), absl::StatusCode::kInvalidArgument, "grant_key_kill_timeout_ms")) << bad;
  }
  EXPECT_TRUE(IsError(ParseConfig(R"({"max_grant_ttl_s": 0})"), absl::StatusCode::kInvalidArgument, "max_grant_ttl_s"));
  EXPECT_TRUE(IsError(ParseConfig(R"({"grant_window_pool": 4097})"), absl::StatusCode::kInvalidArgument,
                      "grant_window_pool"));
}

TEST(ParseConfigTest, GrantMaxScopeIsOneOfTheScopesByName) {
  EXPECT_EQ(ParseConfig("{}")->grant_max_scope, 3);  // "mr": any key, as before the setting
  EXPECT_EQ(ParseConfig(R"({"grant_max_scope": "qp"})")->grant_max_scope, 1);
  EXPECT_EQ(ParseConfig(R"({"grant_max_scope": "pd"})")->grant_max_scope, 2);
  EXPECT_EQ(ParseConfig(R"({"grant_max_scope": "mr"})")->grant_max_scope, 3);
  for (const char* bad : {R"({"grant_max_scope": "QP"})", R"({"grant_max_scope": 1})",
                          R"({"grant_max_scope": ""})", R"({"grant_max_scope": "SCOPE_QP"})"}) {
    EXPECT_TRUE(IsError(ParseConfig(bad), absl::StatusCode::kInvalidArgument, "grant_max_scope")) << bad;
  }
}

}  // namespace rdmad

namespace rdmad {
namespace {

TEST(SecurityConfigTest, TenantsAdminsPrincipalsAndQuotasAreParsed) {
  absl::StatusOr<Config> c = ParseConfig(R"({
    "unix_principals": [{"uid": 0, "principal": "root"}, {"gid": 27, "principal": "ops"}],
    "admins": ["root"],
    "tenants": [{"name": "app", "principals": ["spiffe://c/app", "unix:uid:1000"], "file_roots": ["/dev/shm/app"],
                 "devices": ["rxe0"], "uid": 1000, "gid": 1000,
                 "quotas": {"pinned_bytes": 4096, "mrs": 1, "mws": 2, "qps": 3, "cm_ids": 4, "grants": 5,
                            "tokens": 6, "connections": 7, "rpc_per_second": 8, "rpc_burst": 9, "pds": 10}}],
    "audit": "-"
  })");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->tenants.size(), 1u);
  const TenantConfig& t = c->tenants[0];
  EXPECT_EQ(t.name, "app");
  EXPECT_THAT(t.principals, ElementsAre("spiffe://c/app", "unix:uid:1000"));
  EXPECT_EQ(t.uid, 1000);
  EXPECT_EQ(t.quotas.pinned_bytes, 4096u);
  EXPECT_EQ(t.quotas.connections, 7u);
  EXPECT_EQ(t.quotas.rpc_burst, 9u);
  EXPECT_EQ(t.quotas.pds, 10u);
  ASSERT_EQ(c->unix_principals.size(), 2u);
  EXPECT_EQ(c->unix_principals[1].gid, 27);
  EXPECT_EQ(c->audit, "-");
}

TEST(SecurityConfigTest, DefaultQuotasFillWhatATenantLeavesUnsetAndItsOwnValuesWin) {
  absl::StatusOr<Config> c = ParseConfig(R"({
    "tenants": [{"name": "own", "quotas": {"channels": 0, "tokens": 7}},
                {"name": "bare"}],
    "default_quotas": {"channels": 4, "tokens": 100, "watch_streams": 8, "cm_ids": 16}
  })");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->tenants.size(), 2u);
  const Quotas& own = c->tenants[0].quotas;
  EXPECT_EQ(own.channels, 0u);  // set explicitly: unlimited, not the default 4
  EXPECT_EQ(own.tokens, 7u);
  EXPECT_EQ(own.watch_streams, 8u);
  EXPECT_EQ(own.cm_ids, 16u);
  const Quotas& bare = c->tenants[1].quotas;
  EXPECT_EQ(bare.channels, 4u);
  EXPECT_EQ(bare.tokens, 100u);
  EXPECT_EQ(bare.mrs, 0u);  // neither sets it
  EXPECT_EQ(c->default_quotas.watch_streams, 8u);
}

TEST(SecurityConfigTest, LimitsAreParsedAndDefaultWhenAbsent) {
  absl::StatusOr<Config> c = ParseConfig(R"({"limits": {"channels": 3, "watch_streams": 4, "cm_ids": 5,
                                                         "tokens": 6, "connections": 7, "grants": 8,
                                                         "pds": 9, "mrs": 10, "mws": 11, "qps": 12}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->limits.channels, 3u);
  EXPECT_EQ(c->limits.watch_streams, 4u);
  EXPECT_EQ(c->limits.cm_ids, 5u);
  EXPECT_EQ(c->limits.tokens, 6u);
  EXPECT_EQ(c->limits.connections, 7u);
  EXPECT_EQ(c->limits.grants, 8u);
  EXPECT_EQ(c->limits.pds, 9u);
  EXPECT_EQ(c->limits.mrs, 10u);
  EXPECT_EQ(c->limits.mws, 11u);
  EXPECT_EQ(c->limits.qps, 12u);
  absl::StatusOr<Config> d = ParseConfig("{}");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->limits.channels, 128u);
  EXPECT_EQ(d->limits.tokens, 65536u);
  EXPECT_EQ(d->limits.pds, 4096u);
  EXPECT_EQ(d->limits.mrs, 1048576u);
}

TEST(SecurityConfigTest, MistakesNameTheirField) {
  const struct {
    const char* json;
    const char* field;
  } cases[] = {
      {R"({"tenants": [{"name": "a b"}]})", "tenants[0].name"},
      {R"({"tenants": [{"name": "a"}, {"name": "a"}]})", "tenants[1].name"},
      {R"({"tenants": [{"name": "a", "quotas": {"mrs": -1}}]})", "tenants[0].quotas.mrs"},
      {R"({"tenants": [{"name": "a", "quotas": {"bogus": 1}}]})", "tenants[0].quotas.bogus"},
      {R"({"tenants": [{"name": "a", "uid": 5}]})", "tenants[0]"},
      {R"({"tenants": [{"name": "a", "file_roots": ["rel"]}]})", "tenants[0].file_roots"},
      {R"({"admins": ["x"], "tenants": [{"name": "a", "principals": ["x"]}]})", "tenants[0].principals"},
      {R"({"unix_principals": [{"uid": 1, "gid": 2, "principal": "p"}]})", "unix_principals[0]"},
      {R"({"unix_socket": {"mode": "999"}})", "unix_socket.mode"},
      {R"({"audit": "relative.log"})", "audit"},
      {R"({"tls": {"cert": "/c"}})", "tls"},
      {R"({"insecure_tcp": "yes"})", "insecure_tcp"},
      {R"({"default_quotas": {"bogus": 1}})", "default_quotas.bogus"},
      {R"({"default_quotas": {"channels": -1}})", "default_quotas.channels"},
      {R"({"limits": {"channels": 0}})", "limits.channels"},
      {R"({"limits": {"tokens": 2000000}})", "limits.tokens"},
      {R"({"limits": {"bogus": 5}})", "limits.bogus"},
      {R"({"limits": 5})", "limits"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<Config> parsed = ParseConfig(c.json);
    EXPECT_FALSE(parsed.ok()) << c.json;
    EXPECT_EQ(FieldOf(parsed.status()), c.field) << c.json << ": " << parsed.status();
  }
}

TEST(SecurityConfigTest, TcpNeedsTlsOrInsecureTcp) {
  Config c;
  c.listen = {"unix:/tmp/x.sock", "127.0.0.1:7470"};
  absl::Status s = CheckListeners(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(FieldOf(s), "listen");
  c.insecure_tcp = true;
  EXPECT_TRUE(CheckListeners(c).ok());
  c.insecure_tcp = false;
  c.tls = {"/c", "/k", "/ca"};
  EXPECT_TRUE(CheckListeners(c).ok());
  c.listen = {"unix:/tmp/x.sock"};
  c.tls = {};
  EXPECT_TRUE(CheckListeners(c).ok());
}

TEST(SecurityConfigTest, TheExamplesAreValid) {
  absl::StatusOr<Config> c = LoadConfig("deploy/rdmad.tenants.example.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->tenants.size(), 1u);
  EXPECT_TRUE(CheckListeners(*c).ok());
  absl::StatusOr<Config> plain = LoadConfig("deploy/rdmad.example.json");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE(CheckListeners(*plain).ok());
}

}  // namespace
}  // namespace rdmad

namespace rdmad {
namespace {

TEST(ParseConfigTest, MetricsListen) {
  absl::StatusOr<Config> none = ParseConfig("{}");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->metrics_listen, "");  // off unless asked for
  absl::StatusOr<Config> c = ParseConfig(R"({"metrics_listen": "127.0.0.1:9470"})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->metrics_listen, "127.0.0.1:9470");
  ASSERT_TRUE(ParseConfig(R"({"metrics_listen": ""})").ok());
  for (const char* bad : {R"({"metrics_listen": "127.0.0.1"})", R"({"metrics_listen": "127.0.0.1:0"})",
                          R"({"metrics_listen": ":9470"})", R"({"metrics_listen": ["127.0.0.1:9470"]})",
                          R"({"metrics_listen": 9470})"}) {
    EXPECT_TRUE(IsError(ParseConfig(bad), absl::StatusCode::kInvalidArgument, "metrics_listen")) << bad;
  }
}

TEST(ParseConfigTest, MwBoundsRegion) {
  absl::StatusOr<Config> none = ParseConfig("{}");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->mw_bounds_region, "auto");  // the device's start-up probe decides
  for (const char* mode : {"auto", "always", "never"}) {
    absl::StatusOr<Config> c = ParseConfig(std::string(R"({"mw_bounds_region": ")") + mode + "\"}");
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->mw_bounds_region, mode);
  }
  for (const char* bad : {R"({"mw_bounds_region": "sometimes"})", R"({"mw_bounds_region": true})",
                          R"({"mw_bounds_region": ""})"}) {
    EXPECT_TRUE(IsError(ParseConfig(bad), absl::StatusCode::kInvalidArgument, "mw_bounds_region")) << bad;
  }
}

}  // namespace
}  // namespace rdmad
