// ParseRpcTimes, MeanBetween and MeanHandoffsBetween on exposition text shaped like rdmad's /metrics (server/metrics/).
#include "tests/bench/rdmad_time.h"

#include <gtest/gtest.h>

namespace rdmad::bench {
namespace {

TEST(RdmadTime, ParsesSumAndCountPerMethodAndIgnoresTheRest) {
  const std::string text =
      "# HELP rdmad_rpc_duration_seconds Time from an RPC's admission to its answer, by method.\n"
      "# TYPE rdmad_rpc_duration_seconds histogram\n"
      "rdmad_rpc_duration_seconds_bucket{method=\"BindMw\",le=\"0.001\"} 3\n"
      "rdmad_rpc_duration_seconds_sum{method=\"BindMw\"} 0.25\n"
      "rdmad_rpc_duration_seconds_count{method=\"BindMw\"} 10\n"
      "rdmad_rpc_duration_seconds_sum{method=\"ListPds\"} 1e-3\n"
      "rdmad_rpc_duration_seconds_count{method=\"ListPds\"} 4\n"
      "rdmad_rpc_thread_handoffs_sum{method=\"BindMw\"} 4\n"
      "rdmad_rpc_thread_handoffs_count{method=\"BindMw\"} 10\n"
      "rdmad_rpc_total{method=\"BindMw\",code=\"OK\"} 10\n";
  const MethodTimes t = ParseRpcTimes(text);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_DOUBLE_EQ(t.at("BindMw").handoffs, 4);
  EXPECT_DOUBLE_EQ(t.at("BindMw").handoff_calls, 10);
  EXPECT_DOUBLE_EQ(t.at("ListPds").handoff_calls, 0);
  EXPECT_DOUBLE_EQ(t.at("BindMw").seconds, 0.25);
  EXPECT_DOUBLE_EQ(t.at("BindMw").calls, 10);
  EXPECT_DOUBLE_EQ(t.at("ListPds").seconds, 0.001);
  EXPECT_DOUBLE_EQ(t.at("ListPds").calls, 4);
}

TEST(RdmadTime, MeanBetweenTwoScrapes) {
  MethodTimes before, after;
  before["BindMw"] = {0.25, 10, 4, 10};
  after["BindMw"] = {0.55, 16, 10, 16};
  after["ListPds"] = {0.002, 4, 0, 4};  // absent before: counted from zero
  EXPECT_DOUBLE_EQ(MeanBetween(before, after, "BindMw"), 0.05);
  EXPECT_DOUBLE_EQ(MeanBetween(before, after, "ListPds"), 0.0005);
  EXPECT_EQ(MeanBetween(before, after, "RegisterMr"), -1);  // never called
  EXPECT_EQ(MeanBetween(after, after, "BindMw"), -1);       // no call in between
}

TEST(RdmadTime, MeanHandoffsBetweenTwoScrapes) {
  MethodTimes before, after;
  before["BindMw"] = {0.25, 10, 4, 10};
  after["BindMw"] = {0.55, 16, 10, 16};
  after["ListPds"] = {0.002, 4, 0, 4};
  EXPECT_DOUBLE_EQ(MeanHandoffsBetween(before, after, "BindMw"), 1.0);
  EXPECT_DOUBLE_EQ(MeanHandoffsBetween(before, after, "ListPds"), 0.0);
  EXPECT_EQ(MeanHandoffsBetween(before, after, "RegisterMr"), -1);
}

TEST(RdmadTime, KeyHandoffsByTheirLabel) {
  const std::string text =
      "# TYPE rdmad_grant_key_handoffs_total counter\n"
      "rdmad_grant_key_handoffs_total{handoffs=\"0\"} 3\n"
      "rdmad_grant_key_handoffs_total{handoffs=\"1\"} 20\n"
      "rdmad_grant_key_handoffs_total{handoffs=\"3+\"} 0\n"
      "rdmad_rpc_total{method=\"ListPds\",code=\"OK\"} 9\n";
  const std::map<std::string, double> keys = ParseKeyHandoffs(text);
  ASSERT_EQ(keys.size(), 3u);
  EXPECT_EQ(keys.at("0"), 3);
  EXPECT_EQ(keys.at("1"), 20);
  EXPECT_EQ(keys.at("3+"), 0);
}

}  // namespace
}  // namespace rdmad::bench
