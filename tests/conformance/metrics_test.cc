// The /metrics endpoint of real rdmad on rxe0 in the Soft-RoCE guest: run by run-metrics.sh, which starts
// rdmad with metrics_listen on loopback, a unix socket where root is the one member of tenant "ops", and the
// data-plane listener. Each case scrapes, acts through the API (client/) or on the data plane (CmPeer, plain
// librdmacm), scrapes again and checks that the series it should move moved by exactly what it did:
// objects and pinned bytes of the tenant, RPCs by method and code with their latency histogram, rdma_cm
// events, grant events, data-plane rejections and accepts, connections. And the text itself: every line is
// a comment or a sample, every family has its TYPE, the memlock limit and the NIC's counters are there.
//
// Environment: RDMAD_METRICS (host:port of the endpoint), RDMAD_UNIX_TARGET (unix:PATH), RDMAD_ADDR (the
// data-plane listener's address; port 7471), RDMAD_DEVICE (rxe0).
//
// Threads: single-threaded; the cases run in the order written (each checks differences, not totals).
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "tests/conformance/cm_peer.h"

namespace rdmad::testing {
namespace {

std::string Env(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}
std::string Device() { return Env("RDMAD_DEVICE", "rxe0"); }
std::string Addr() { return Env("RDMAD_ADDR", "10.0.2.15"); }

client::Client& Api() {
  static client::Client* c = [] {
    client::Client::Options o;
    o.target = Env("RDMAD_UNIX_TARGET", "unix:/run/rdmad/rdmad.sock");
    return new client::Client(o);
  }();
  return *c;
}

// One scrape: the raw text and its samples by series ("name{labels}" exactly as printed).
struct Scrape {
  std::string text;
  std::map<std::string, double> samples;
  double operator[](const std::string& series) const {
    auto it = samples.find(series);
    return it == samples.end() ? 0 : it->second;
  }
  bool Has(const std::string& series) const { return samples.count(series) > 0; }
  // The sum of every series of `name` whose labels contain all of `parts` (e.g. "type=\"REJECTED\"").
  double Sum(const std::string& name, std::vector<std::string> parts = {}) const {
    double sum = 0;
    for (const auto& [series, v] : samples) {
      if (series.rfind(name + "{", 0) != 0 && series != name) continue;
      bool all = true;
      for (const auto& p : parts) all = all && series.find(p) != std::string::npos;
      if (all) sum += v;
    }
    return sum;
  }
};

Scrape Get() {
  std::string hostport = Env("RDMAD_METRICS", "127.0.0.1:9470");
  const size_t colon = hostport.rfind(':');
  httplib::Client http(hostport.substr(0, colon), std::stoi(hostport.substr(colon + 1)));
  http.set_read_timeout(10, 0);
  auto res = http.Get("/metrics");
  Scrape s;
  EXPECT_TRUE(res) << "GET /metrics from " << hostport << ": " << (res ? "" : httplib::to_string(res.error()));
  if (!res) return s;
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  s.text = res->body;
  std::istringstream in(s.text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    double v = 0;
    const std::string value = line.substr(space + 1);
    if (value == "+Inf") v = INFINITY;
    else EXPECT_TRUE(absl::SimpleAtod(value, &v)) << line;
    s.samples[line.substr(0, space)] = v;
  }
  return s;
}

// Scrapes until `done` holds (rdma_cm events are counted on rdmad's dispatchers, a moment after the peer
// saw their effect), at most 10 s; returns the last scrape.
Scrape GetWhen(const std::function<bool(const Scrape&)>& done) {
  Scrape s;
  for (int i = 0; i < 100; ++i) {
    s = Get();
    if (done(s)) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return s;
}

std::string Objects(const std::string& kind) { return "rdmad_objects{kind=\"" + kind + "\",tenant=\"ops\"}"; }

TEST(Metrics, TheTextIsWellFormed) {
  const Scrape s = Get();
  ASSERT_FALSE(s.text.empty());
  const std::regex sample(R"(^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? (\+Inf|-Inf|NaN|-?[0-9.e+-]+)$)");
  std::set<std::string> typed;
  std::istringstream in(s.text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream t(line.substr(7));
      std::string name, type;
      t >> name >> type;
      EXPECT_TRUE(type == "counter" || type == "gauge" || type == "histogram") << line;
      EXPECT_TRUE(typed.insert(name).second) << "TYPE twice: " << line;
      EXPECT_EQ(name.rfind("rdmad_", 0), 0u) << line;
      if (type == "counter") {
        EXPECT_TRUE(absl::EndsWith(name, "_total")) << line;
      }
      continue;
    }
    if (line.rfind("# HELP ", 0) == 0) continue;
    EXPECT_TRUE(std::regex_match(line, sample)) << line;
    std::string name = line.substr(0, line.find_first_of("{ "));
    bool known = typed.count(name) > 0;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      if (absl::EndsWith(name, suffix)) known = known || typed.count(name.substr(0, name.size() - strlen(suffix)));
    }
    EXPECT_TRUE(known) << "a sample before its TYPE: " << line;
  }
  for (const char* family : {"rdmad_objects", "rdmad_pinned_bytes", "rdmad_rpc_total", "rdmad_rpc_duration_seconds",
                             "rdmad_cm_events_total", "rdmad_dataplane_rejections_total",
                             "rdmad_dataplane_accepted_total", "rdmad_dataplane_connections",
                             "rdmad_grant_events_total", "rdmad_nic_events_total",
                             "rdmad_nic_remote_access_errors_total", "rdmad_memlock_limit_bytes"}) {
    EXPECT_TRUE(typed.count(family)) << family << " missing from:\n" << s.text;
  }
  // rdmad runs as root and lifts RLIMIT_MEMLOCK at start-up.
  EXPECT_TRUE(std::isinf(s["rdmad_memlock_limit_bytes"])) << s["rdmad_memlock_limit_bytes"];
  // rxe has per-port counters (none of them counts refused remote accesses: server/fabric/hw_counters.cc),
  // and the sum of those that would is there, per device.
  int nic_series = 0;
  for (const auto& [series, v] : s.samples) {
    nic_series += series.rfind("rdmad_nic_events_total{device=\"" + Device() + "\"", 0) == 0;
  }
  EXPECT_GT(nic_series, 0) << s.text;
  EXPECT_TRUE(s.Has("rdmad_nic_remote_access_errors_total{device=\"" + Device() + "\"}")) << s.text;
  EXPECT_TRUE(s.Has(Objects("pds"))) << "the configured tenant is there before it has anything:\n" << s.text;
}

TEST(Metrics, ObjectsAndPinnedBytesFollowCreationsAndDeletions) {
  const Scrape before = Get();
  v1::CreatePdRequest pr;
  pr.set_device(Device());
  auto pd = Api().CreatePd(pr);
  ASSERT_TRUE(pd.ok()) << pd.status();
  v1::RegisterMrRequest mr;
  mr.set_pd(pd->name());
  mr.mutable_source()->mutable_anonymous()->set_size(3 * 4096);
  mr.add_access(v1::LOCAL_WRITE);
  auto region = Api().RegisterMr(mr);
  ASSERT_TRUE(region.ok()) << region.status();
  const Scrape during = Get();
  EXPECT_EQ(during[Objects("pds")], before[Objects("pds")] + 1);
  EXPECT_EQ(during[Objects("mrs")], before[Objects("mrs")] + 1);
  EXPECT_EQ(during["rdmad_pinned_bytes{tenant=\"ops\"}"], before["rdmad_pinned_bytes{tenant=\"ops\"}"] + 3 * 4096);
  ASSERT_TRUE(Api().DeregisterMr(region->name()).ok());
  ASSERT_TRUE(Api().DeletePd(pd->name()).ok());
  const Scrape after = Get();
  EXPECT_EQ(after[Objects("pds")], before[Objects("pds")]);
  EXPECT_EQ(after[Objects("mrs")], before[Objects("mrs")]);
  EXPECT_EQ(after["rdmad_pinned_bytes{tenant=\"ops\"}"], before["rdmad_pinned_bytes{tenant=\"ops\"}"]);
}

TEST(Metrics, RpcsAreCountedByMethodAndCodeWithTheirLatency) {
  const std::string not_found = "rdmad_rpc_total{method=\"GetPd\",code=\"NOT_FOUND\"}";
  const std::string ok = "rdmad_rpc_total{method=\"ListPds\",code=\"OK\"}";
  const std::string count = "rdmad_rpc_duration_seconds_count{method=\"GetPd\"}";
  const std::string inf = "rdmad_rpc_duration_seconds_bucket{method=\"GetPd\",le=\"+Inf\"}";
  const Scrape before = Get();
  EXPECT_EQ(Api().GetPd("pds/999999").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Api().GetPd("pds/999998").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(Api().ListPds().ok());
  const Scrape after = Get();
  EXPECT_EQ(after[not_found], before[not_found] + 2) << after.text;
  EXPECT_EQ(after[ok], before[ok] + 1);
  EXPECT_EQ(after[count], before[count] + 2);
  EXPECT_EQ(after[inf], after[count]);
  EXPECT_GT(after["rdmad_rpc_duration_seconds_sum{method=\"GetPd\"}"],
            before["rdmad_rpc_duration_seconds_sum{method=\"GetPd\"}"]);
}

// A connect request with a bad token: rejected with TOKEN_MALFORMED, counted; its CONNECT_REQUEST counted
// among the rdma_cm events. Then a good token: accepted, a connection while it lasts, its events counted.
TEST(Metrics, DataPlaneRejectsAcceptsConnectionsAndCmEventsMove) {
  v1::CreatePdRequest pr;
  pr.set_device(Device());
  auto pd = Api().CreatePd(pr);
  ASSERT_TRUE(pd.ok()) << pd.status();
  const std::string malformed = "rdmad_dataplane_rejections_total{reason=\"TOKEN_MALFORMED\"}";
  const Scrape before = Get();
  {
    CmPeer peer;
    CmPeer::Result r = peer.Dial(Addr(), 7471, std::string(56, 'x'));
    ASSERT_EQ(r.outcome, CmPeer::Outcome::kRejected) << r.event << " " << r.error;
  }
  const Scrape rejected = GetWhen([&](const Scrape& s) {
    return s.Sum("rdmad_cm_events_total", {"type=\"CONNECT_REQUEST\""}) >
           before.Sum("rdmad_cm_events_total", {"type=\"CONNECT_REQUEST\""});
  });
  EXPECT_EQ(rejected[malformed], before[malformed] + 1) << rejected.text;
  EXPECT_EQ(rejected.Sum("rdmad_cm_events_total", {"type=\"CONNECT_REQUEST\""}),
            before.Sum("rdmad_cm_events_total", {"type=\"CONNECT_REQUEST\""}) + 1);
  EXPECT_EQ(rejected["rdmad_dataplane_accepted_total"], before["rdmad_dataplane_accepted_total"]);

  v1::IssueConnectTokenRequest tr;
  tr.set_pd(pd->name());
  auto token = Api().IssueConnectToken(tr);
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(Get()[Objects("tokens")], before[Objects("tokens")] + 1);
  {
    CmPeer peer;
    CmPeer::Result r = peer.Dial(Addr(), 7471, token->token());
    ASSERT_EQ(r.outcome, CmPeer::Outcome::kEstablished) << r.event << " " << r.error;
    const Scrape connected = GetWhen([&](const Scrape& s) {
      return s["rdmad_dataplane_connections"] > before["rdmad_dataplane_connections"] &&
             s.Sum("rdmad_cm_events_total", {"type=\"ESTABLISHED\""}) >
                 before.Sum("rdmad_cm_events_total", {"type=\"ESTABLISHED\""});
    });
    EXPECT_EQ(connected["rdmad_dataplane_connections"], before["rdmad_dataplane_connections"] + 1) << connected.text;
    EXPECT_EQ(connected["rdmad_dataplane_accepted_total"], before["rdmad_dataplane_accepted_total"] + 1);
    EXPECT_EQ(connected.Sum("rdmad_cm_events_total", {"type=\"ESTABLISHED\""}),
              before.Sum("rdmad_cm_events_total", {"type=\"ESTABLISHED\""}) + 1);
    EXPECT_EQ(connected[Objects("tokens")], before[Objects("tokens")]);  // used up
    EXPECT_EQ(connected[Objects("cm_ids")], before[Objects("cm_ids")] + 1);  // the accepted connection's id
    // Events on rdmad's own channels are labelled with the channel's name, never "user" here.
    EXPECT_EQ(connected.Sum("rdmad_cm_events_total", {"channel=\"user\""}), 0) << connected.text;
    // The NIC saw the connection's packets (the CM handshake runs over rxe's own QP1).
    const std::string rcvd = "rdmad_nic_events_total{device=\"" + Device() + "\",port=\"1\",counter=\"rcvd_pkts\"," +
                             "remote_access_error=\"false\"}";
    EXPECT_GT(connected[rcvd], before[rcvd]) << connected.text;
    EXPECT_EQ(peer.Disconnect(), "");
  }
  const Scrape gone = GetWhen([&](const Scrape& s) {
    return s["rdmad_dataplane_connections"] == before["rdmad_dataplane_connections"] &&
           s[Objects("cm_ids")] == before[Objects("cm_ids")];
  });
  EXPECT_EQ(gone["rdmad_dataplane_connections"], before["rdmad_dataplane_connections"]);
  EXPECT_GE(gone.Sum("rdmad_cm_events_total", {"type=\"DISCONNECTED\""}),
            before.Sum("rdmad_cm_events_total", {"type=\"DISCONNECTED\""}) + 1);
  ASSERT_TRUE(Api().DeletePd(pd->name()).ok());
}

TEST(Metrics, GrantsIssuedAndRevokedAreCounted) {
  v1::CreatePdRequest pr;
  pr.set_device(Device());
  auto pd = Api().CreatePd(pr);
  ASSERT_TRUE(pd.ok()) << pd.status();
  v1::RegisterMrRequest mr;
  mr.set_pd(pd->name());
  mr.mutable_source()->mutable_anonymous()->set_size(4096);
  for (auto a : {v1::LOCAL_WRITE, v1::REMOTE_READ, v1::MW_BIND}) mr.add_access(a);
  auto region = Api().RegisterMr(mr);
  ASSERT_TRUE(region.ok()) << region.status();
  const std::string issued = "rdmad_grant_events_total{event=\"issued\",reason=\"\"}";
  const std::string revoked = "rdmad_grant_events_total{event=\"revoked\",reason=\"revoked\"}";
  const Scrape before = Get();
  v1::IssueGrantRequest gr;
  gr.set_mr(region->name());
  gr.set_length(4096);
  gr.set_principal("spiffe://cluster/ns/ops/sa/reader");
  auto grant = Api().IssueGrant(gr);
  ASSERT_TRUE(grant.ok()) << grant.status();
  const Scrape live = Get();
  EXPECT_EQ(live[issued], before[issued] + 1) << live.text;
  EXPECT_EQ(live[Objects("grants")], before[Objects("grants")] + 1);
  ASSERT_TRUE(Api().RevokeGrant(grant->grant().name()).ok());
  const Scrape after = GetWhen([&](const Scrape& s) { return s[revoked] > before[revoked]; });
  EXPECT_EQ(after[revoked], before[revoked] + 1) << after.text;
  EXPECT_EQ(after[Objects("grants")], before[Objects("grants")]);
  ASSERT_TRUE(Api().DeregisterMr(region->name(), /*revoke_grants=*/true).ok());
  ASSERT_TRUE(Api().DeletePd(pd->name(), /*cascade=*/true).ok());
}

TEST(Metrics, EverythingTheSuiteMadeIsGone) {
  const Scrape s = GetWhen([](const Scrape& s) {
    for (const char* k : {"pds", "mrs", "mws", "qps", "cm_ids", "grants", "tokens"}) {
      if (s[Objects(k)] != 0) return false;
    }
    return true;
  });
  for (const char* k : {"pds", "mrs", "mws", "qps", "cm_ids", "grants", "tokens"}) {
    EXPECT_EQ(s[Objects(k)], 0) << k << "\n" << s.text;
  }
  EXPECT_EQ(s["rdmad_pinned_bytes{tenant=\"ops\"}"], 0);
}

}  // namespace
}  // namespace rdmad::testing
