// The metrics core (server/metrics/metrics.h): exact exposition text for known inputs; the HTTP endpoint
// (server/metrics/http.h) on loopback; rdmad's hook-driven families (server/metrics/rdmad_metrics.h).
#include <limits>
#include <string>

#include <gtest/gtest.h>
#include <httplib.h>

#include "absl/time/time.h"
#include "server/metrics/http.h"
#include "server/metrics/metrics.h"
#include "server/metrics/rdmad_metrics.h"

namespace rdmad::metrics {
namespace {

TEST(MetricsText, CounterWithLabelsSortedByValues) {
  MetricRegistry r;
  Counter* c = r.AddCounter("rdmad_rpc_total", "RPCs finished.", {"method", "code"});
  c->Add({"ListPds", "OK"});
  c->Add({"CreatePd", "NOT_FOUND"}, 2);
  c->Add({"ListPds", "OK"});
  EXPECT_EQ(r.Render(),
            "# HELP rdmad_rpc_total RPCs finished.\n"
            "# TYPE rdmad_rpc_total counter\n"
            "rdmad_rpc_total{method=\"CreatePd\",code=\"NOT_FOUND\"} 2\n"
            "rdmad_rpc_total{method=\"ListPds\",code=\"OK\"} 2\n");
}

TEST(MetricsText, HistogramIsCumulativeWithSumAndCount) {
  MetricRegistry r;
  Histogram* h = r.AddHistogram("rdmad_rpc_duration_seconds", "Latency.", {"method"}, {0.001, 0.5});
  h->Observe({"GetPd"}, 0.0009765625);  // 2^-10: the sum is exact
  h->Observe({"GetPd"}, 0.25);
  h->Observe({"GetPd"}, 0.5);  // on the bound: in that bucket (le)
  h->Observe({"GetPd"}, 3);
  EXPECT_EQ(r.Render(),
            "# HELP rdmad_rpc_duration_seconds Latency.\n"
            "# TYPE rdmad_rpc_duration_seconds histogram\n"
            "rdmad_rpc_duration_seconds_bucket{method=\"GetPd\",le=\"0.001\"} 1\n"
            "rdmad_rpc_duration_seconds_bucket{method=\"GetPd\",le=\"0.5\"} 3\n"
            "rdmad_rpc_duration_seconds_bucket{method=\"GetPd\",le=\"+Inf\"} 4\n"
            "rdmad_rpc_duration_seconds_sum{method=\"GetPd\"} 3.7509765625\n"
            "rdmad_rpc_duration_seconds_count{method=\"GetPd\"} 4\n");
}

TEST(MetricsText, EscapesAndSpecialValues) {
  std::vector<Family> f = {{"rdmad_x", "a \\ help\nline", "gauge",
                            {{"", {{"tenant", "a\"b\\c\nd"}}, std::numeric_limits<double>::infinity()},
                             {"", {}, 1e20},
                             {"", {}, 0.1}}}};
  EXPECT_EQ(RenderText(f),
            "# HELP rdmad_x a \\\\ help\\nline\n"
            "# TYPE rdmad_x gauge\n"
            "rdmad_x{tenant=\"a\\\"b\\\\c\\nd\"} +Inf\n"
            "rdmad_x 1e+20\n"
            "rdmad_x 0.1\n");
}

TEST(MetricsText, CollectorsComeAfterOwnedFamilies) {
  MetricRegistry r;
  int scrapes = 0;
  r.AddCollector([&](std::vector<Family>* out) {
    ++scrapes;
    out->push_back({"rdmad_g", "G.", "gauge", {{"", {}, static_cast<double>(scrapes)}}});
  });
  r.AddCounter("rdmad_c_total", "C.", {})->Add({});
  EXPECT_EQ(r.Render(), "# HELP rdmad_c_total C.\n# TYPE rdmad_c_total counter\nrdmad_c_total 1\n"
                        "# HELP rdmad_g G.\n# TYPE rdmad_g gauge\nrdmad_g 1\n");
  EXPECT_NE(r.Render().find("rdmad_g 2\n"), std::string::npos);  // computed at each scrape
}

TEST(RdmadMetrics, HooksMoveTheirCounters) {
  RdmadMetrics m;
  const std::string before = m.Render();
  EXPECT_NE(before.find("rdmad_dataplane_accepted_total 0\n"), std::string::npos) << before;
  m.ObserveRpc("CreatePd", absl::StatusCode::kInvalidArgument, absl::Microseconds(300));
  m.ObserveRpc("BindMw", absl::StatusCode::kOk, absl::Microseconds(900), /*handoffs=*/1);
  m.OnDataPlaneRejected(cm::RejectReason::kExpired);
  m.OnDataPlaneRejected(cm::RejectReason::kExpired);
  m.OnDataPlaneAccepted();
  const std::string after = m.Render();
  EXPECT_NE(after.find("rdmad_rpc_total{method=\"CreatePd\",code=\"INVALID_ARGUMENT\"} 1\n"), std::string::npos)
      << after;
  EXPECT_NE(after.find("rdmad_rpc_duration_seconds_bucket{method=\"CreatePd\",le=\"0.00025\"} 0\n"),
            std::string::npos) << after;
  EXPECT_NE(after.find("rdmad_rpc_duration_seconds_bucket{method=\"CreatePd\",le=\"0.0005\"} 1\n"),
            std::string::npos) << after;
  EXPECT_NE(after.find("rdmad_dataplane_rejections_total{reason=\"TOKEN_EXPIRED\"} 2\n"), std::string::npos)
      << after;
  EXPECT_NE(after.find("rdmad_dataplane_accepted_total 1\n"), std::string::npos) << after;
  EXPECT_NE(after.find("rdmad_rpc_thread_handoffs_bucket{method=\"CreatePd\",le=\"0\"} 1\n"), std::string::npos)
      << after;
  EXPECT_NE(after.find("rdmad_rpc_thread_handoffs_bucket{method=\"BindMw\",le=\"0\"} 0\n"), std::string::npos)
      << after;
  EXPECT_NE(after.find("rdmad_rpc_thread_handoffs_sum{method=\"BindMw\"} 1\n"), std::string::npos) << after;
}

TEST(RdmadMetrics, MemlockLimitIsReported) {
  RdmadMetrics m;
  m.SetSources({});
  const std::string text = m.Render();
  EXPECT_NE(text.find("# TYPE rdmad_memlock_limit_bytes gauge\nrdmad_memlock_limit_bytes "), std::string::npos)
      << text;
}

TEST(RdmadMetrics, BuildInfoCarriesTheVersion) {
  RdmadMetrics m;
  m.SetSources({});
  const std::string text = m.Render();
  EXPECT_NE(text.find("# TYPE rdmad_build_info gauge\nrdmad_build_info{version=\"0.1.0\",api=\"rdmad.v1\"} 1\n"),
            std::string::npos)
      << text;
}

TEST(HttpEndpoint, ServesMetricsOnLoopbackAndNothingElse) {
  int calls = 0;
  auto e = HttpEndpoint::Start("127.0.0.1", 0, [&] { return "rdmad_up " + std::to_string(++calls) + "\n"; });
  ASSERT_TRUE(e.ok()) << e.status();
  httplib::Client client("127.0.0.1", (*e)->port());
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "rdmad_up 1\n");
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  auto other = client.Get("/");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 404);
  (*e)->Stop();
  EXPECT_FALSE(httplib::Client("127.0.0.1", (*e)->port()).Get("/metrics"));  // stopped: nothing listens
}

TEST(HttpEndpoint, ABusyPortIsUnavailable) {
  auto first = HttpEndpoint::Start("127.0.0.1", 0, [] { return ""; });
  ASSERT_TRUE(first.ok());
  auto second = HttpEndpoint::Start("127.0.0.1", (*first)->port(), [] { return ""; });
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace rdmad::metrics
