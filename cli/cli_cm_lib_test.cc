// rdmactl's library for the rdma_cm nouns: names, addresses, private data, event types, and their
// output (cli/parse.h, cli/output.h). The rest of the library is tested in cli_lib_test.cc.
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/output.h"
#include "cli/parse.h"

namespace rdmad::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using V = std::vector<std::string>;

// The global options that take a value (as in cli_lib_test.cc's SplitTypeSlashName tests).
const std::set<std::string> kValued = {"--server", "-o", "--output", "--timeout"};

// ---- rdma_cm: names

TEST(NormalizeNameTest, CmKinds) {
  EXPECT_EQ(NormalizeName(Kind::kChannel, "3").value(), "channels/3");
  EXPECT_EQ(NormalizeName(Kind::kChannel, "channel/3").value(), "channels/3");
  EXPECT_EQ(NormalizeName(Kind::kCmId, "cmids/4").value(), "cmids/4");
  EXPECT_EQ(NormalizeName(Kind::kCmId, "cmid/04").value(), "cmids/4");
  EXPECT_EQ(NormalizeName(Kind::kToken, "tokens/17").value(), "tokens/17");
  EXPECT_THAT(std::string(NormalizeName(Kind::kCmId, "channels/1").status().message()),
              HasSubstr("'channels/1' names an event channel, not a CM id"));
  EXPECT_THAT(std::string(NormalizeName(Kind::kChannel, "channels/0").status().message()),
              HasSubstr("is not an event channel name"));
  EXPECT_EQ(NormalizeName(Kind::kCmId, "cmid/4").value(), "cmids/4");
  EXPECT_EQ(NormalizeName(Kind::kChannel, "channel/2").value(), "channels/2");
  EXPECT_EQ(NormalizeName(Kind::kToken, "token/17").value(), "tokens/17");
  EXPECT_EQ(KindFromNoun("CMIDS"), Kind::kCmId);
  EXPECT_EQ(KindFromNoun("channel"), Kind::kChannel);
}

TEST(SplitTypeSlashNameTest, CmNouns) {
  using V = std::vector<std::string>;
  EXPECT_EQ(SplitTypeSlashName(V{"listen", "cmids/4", "--address", "0.0.0.0:1"}, kValued),
            (V{"listen", "cmids", "cmids/4", "--address", "0.0.0.0:1"}));
  EXPECT_EQ(SplitTypeSlashName(V{"delete", "channel/2"}, kValued), (V{"delete", "channel", "channel/2"}));
}

// ---- rdma_cm: addresses, private data, event types

TEST(ParseSocketAddressTest, Ipv4AndBracketedIpv6) {
  v1::SocketAddress a = ParseSocketAddress("10.0.2.15:7471").value();
  EXPECT_EQ(a.address(), "10.0.2.15");
  EXPECT_EQ(a.port(), 7471u);
  a = ParseSocketAddress(" [fe80::1]:65535 ").value();
  EXPECT_EQ(a.address(), "fe80::1");
  EXPECT_EQ(a.port(), 65535u);
  a = ParseSocketAddress("[::]:1").value();
  EXPECT_EQ(a.address(), "::");
  EXPECT_EQ(ParseSocketAddress("0.0.0.0:7471").value().address(), "0.0.0.0");
}

TEST(ParseSocketAddressTest, Rejects) {
  for (const char* s : {"", "10.0.2.15", "10.0.2.15:", "10.0.2.15:0", "10.0.2.15:65536", "10.0.2.15:-1",
                        "10.0.2.15:x", "host.example:7471", "10.0.2:7471", "[fe80::1]", "[fe80::1]7471",
                        "[fe80::1:7471", "[10.0.2.15]:7471", ":7471", "10.0.2.15:74 71"}) {
    EXPECT_FALSE(ParseSocketAddress(s).ok()) << s;
  }
  EXPECT_THAT(std::string(ParseSocketAddress("fe80::1:7471").status().message()), HasSubstr("brackets"));
  EXPECT_THAT(std::string(ParseSocketAddress("10.0.2.15").status().message()), HasSubstr("port"));
  EXPECT_THAT(std::string(ParseSocketAddress("rdma.example:1").status().message()),
              HasSubstr("'rdma.example' is not a numeric IPv4 address"));
}

TEST(ParseHexBytesTest, PairsWithOptionalPrefixAndColons) {
  EXPECT_EQ(ParseHexBytes("0a0b0c").value(), std::string("\x0a\x0b\x0c"));
  EXPECT_EQ(ParseHexBytes("0x0A0b").value(), std::string("\x0a\x0b"));
  EXPECT_EQ(ParseHexBytes("00ff").value(), std::string("\x00\xff", 2));
  EXPECT_EQ(ParseHexBytes("de:ad:be:ef").value(), "\xde\xad\xbe\xef");
}

TEST(ParseHexBytesTest, Rejects) {
  for (const char* s : {"", "0x", "abc", "0g", "0a 0b", ":0a", "0a:", "0a::0b", "0:a0b", "zz"}) {
    EXPECT_FALSE(ParseHexBytes(s).ok()) << s;
  }
  EXPECT_THAT(std::string(ParseHexBytes("abc").status().message()), HasSubstr("odd number"));
  EXPECT_THAT(std::string(ParseHexBytes("0g").status().message()), HasSubstr("'g' is not a hex digit"));
}

TEST(ParseEventTypesTest, AnySpellingToFullNames) {
  EXPECT_THAT(ParseEventTypes("established").value(), ElementsAre("RDMA_CM_EVENT_ESTABLISHED"));
  EXPECT_THAT(ParseEventTypes("connect-request, DISCONNECTED,RDMA_CM_EVENT_TIMEWAIT_EXIT,established").value(),
              ElementsAre("RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_DISCONNECTED", "RDMA_CM_EVENT_TIMEWAIT_EXIT",
                          "RDMA_CM_EVENT_ESTABLISHED"));
  EXPECT_THAT(ParseEventTypes("rejected,rejected").value(), ElementsAre("RDMA_CM_EVENT_REJECTED"));
  EXPECT_EQ(EventTypeNames().size(), 16u);
  for (const std::string& t : EventTypeNames()) EXPECT_TRUE(ParseEventTypes(t).ok()) << t;
}

TEST(ParseEventTypesTest, Rejects) {
  absl::StatusOr<std::vector<std::string>> r = ParseEventTypes("established,estabished");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("unknown event type 'estabished'"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("connect-request"));  // the known ones, as typed
  EXPECT_FALSE(ParseEventTypes("").ok());
  EXPECT_FALSE(ParseEventTypes("established,").ok());
  EXPECT_FALSE(ParseEventTypes("RDMA_CM_EVENT_").ok());
}

// ---- rdma_cm: output

TEST(CmOutputTest, AddressesHexAndTimes) {
  v1::SocketAddress a;
  EXPECT_EQ(SocketAddressString(a), "");
  a.set_address("10.0.2.15");
  a.set_port(7471);
  EXPECT_EQ(SocketAddressString(a), "10.0.2.15:7471");
  a.set_address("fe80::1");
  EXPECT_EQ(SocketAddressString(a), "[fe80::1]:7471");
  EXPECT_EQ(ParseSocketAddress(SocketAddressString(a)).value().address(), "fe80::1");  // round trip
  EXPECT_EQ(HexBytes(std::string("\x00\x0a\xff", 3)), "000aff");
  EXPECT_EQ(HexBytes("abcdef", 2), "6162...");
  EXPECT_EQ(HexBytes("ab", 2), "6162");
  EXPECT_EQ(FormatUnixNanos(1795321528123456789), "2026-11-22T04:25:28.123456Z");
  EXPECT_EQ(FormatUnixNanos(0), "1970-01-01T00:00:00.000000Z");
  EXPECT_EQ(CmIdStateString(v1::CM_CONNECT_REQUEST), "CONNECT_REQUEST");
  EXPECT_EQ(ChannelRoleString(v1::CHANNEL_WORKER), "WORKER");
  EXPECT_EQ(EventTypeString("RDMA_CM_EVENT_ESTABLISHED"), "ESTABLISHED");
}

v1::CmId SampleCmId() {
  v1::CmId id;
  id.set_name("cmids/4");
  id.set_channel("channels/1");
  id.set_pd("pds/1");
  id.set_state(v1::CM_CONNECTED);
  id.mutable_local()->set_address("10.0.2.15");
  id.mutable_local()->set_port(7471);
  id.mutable_remote()->set_address("10.0.2.16");
  id.mutable_remote()->set_port(40123);
  id.set_qp("qps/9");
  id.set_listener("cmids/2");
  id.mutable_counters()->set_events(3);
  id.mutable_counters()->set_migrations(1);
  id.set_last_event("RDMA_CM_EVENT_ESTABLISHED");
  id.set_device("devices/rxe0");
  return id;
}

TEST(CmOutputTest, CmIdsTable) {
  google::protobuf::RepeatedPtrField<v1::CmId> ids;
  *ids.Add() = SampleCmId();
  v1::CmId* idle = ids.Add();
  idle->set_name("cmids/5");
  idle->set_channel("channels/2");
  idle->set_pd("pds/1");
  idle->set_state(v1::CM_IDLE);
  EXPECT_EQ(MakeTable(CmIdColumns(), ids, false).Render(),
            "NAME      CHANNEL      PD      STATE       DEVICE\n"
            "cmids/4   channels/1   pds/1   CONNECTED   devices/rxe0\n"
            "cmids/5   channels/2   pds/1   IDLE        <none>\n");
  EXPECT_EQ(MakeTable(CmIdColumns(), ids, true).Render(),
            "NAME      CHANNEL      PD      STATE       DEVICE         LOCAL            REMOTE            QP       "
            "LISTENER   EVENTS   MIGRATIONS   LAST-EVENT    DATA-PLANE   REASON\n"
            "cmids/4   channels/1   pds/1   CONNECTED   devices/rxe0   10.0.2.15:7471   10.0.2.16:40123   qps/9    "
            "cmids/2    3        1            ESTABLISHED   no           <none>\n"
            "cmids/5   channels/2   pds/1   IDLE        <none>         <none>           <none>            <none>   "
            "<none>     0        0            <none>        no           <none>\n");
}

TEST(CmOutputTest, ChannelsTable) {
  google::protobuf::RepeatedPtrField<v1::EventChannel> channels;
  v1::EventChannel* ch = channels.Add();
  ch->set_name("channels/1");
  ch->set_label("rdmad");
  ch->set_role(v1::CHANNEL_DEFAULT);
  ch->add_cm_ids("cmids/1");
  ch->add_cm_ids("cmids/4");
  ch->set_events_dispatched(12);
  ch->set_thread("cm-1");
  ch->set_thread_id(4242);
  EXPECT_EQ(MakeTable(ChannelColumns(), channels, false).Render(),
            "NAME         ROLE      CM-IDS   EVENTS   PENDING   THREAD   LABEL\n"
            "channels/1   DEFAULT   2        12       0         cm-1     rdmad\n");
  EXPECT_THAT(MakeTable(ChannelColumns(), channels, true).Render(), HasSubstr("cm-1     rdmad   4242   cmids/1,cmids/4\n"));
}

TEST(CmOutputTest, EventLines) {
  v1::CmEvent e;
  e.set_sequence(12);
  e.set_time_unix_nanos(1795321528123456789);
  e.set_channel("channels/3");
  e.set_cm_id("cmids/5");
  e.set_type("RDMA_CM_EVENT_CONNECT_REQUEST");
  e.set_listener("cmids/2");
  e.set_private_data(std::string(20, '\x01'));
  EXPECT_EQ(StreamHeader(EventStream(), false), "SEQ      TIME                          CHANNEL       CM-ID       TYPE               STATUS   DETAILS");
  EXPECT_EQ(StreamLine(EventStream(), e, false),
            "12       2026-11-22T04:25:28.123456Z   channels/3    cmids/5     CONNECT_REQUEST    0        "
            "listener cmids/2, data 01010101010101010101010101010101... (20 bytes)");
  EXPECT_THAT(StreamLine(EventStream(), e, true), HasSubstr("data 0101010101010101010101010101010101010101 (20 bytes)"));
  v1::CmEvent bare;
  bare.set_sequence(1);
  bare.set_status(-110);
  EXPECT_EQ(StreamLine(EventStream(), bare, false),
            "1        1970-01-01T00:00:00.000000Z   <none>        <none>      <none>             -110");
}

TEST(CmOutputTest, JsonLineIsOneLineWithBase64Bytes) {
  v1::CmEvent e;
  e.set_sequence(7);
  e.set_private_data("\x0a\x0b\x0c");
  const std::string line = ToJsonLine(e);
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  EXPECT_THAT(line, HasSubstr("\"sequence\":\"7\""));   // uint64 as a string
  EXPECT_THAT(line, HasSubstr("\"private_data\":\"CgsM\""));  // bytes as base64
  EXPECT_THAT(line, HasSubstr("\"listener\":\"\""));   // defaults printed
}

TEST(CmOutputTest, TokenText) {
  v1::ConnectToken t;
  t.set_name("tokens/17");
  t.set_token(std::string("\x9f\x00\x3a", 3));
  const absl::Time now = absl::FromUnixSeconds(1795321528);
  t.set_expire_time_unix_nanos(absl::ToUnixNanos(now + absl::Seconds(30)));
  v1::SocketAddress* e = t.add_endpoints();
  e->set_address("10.0.2.15");
  e->set_port(7471);
  EXPECT_EQ(TokenText(t, "pds/1", now),
            "tokens/17 issued for pds/1 (expires 2026-11-22T04:25:58Z, in 30s)\n"
            "endpoints: 10.0.2.15:7471\n"
            "token: 9f003a\n");
  t.clear_endpoints();
  EXPECT_THAT(TokenText(t, "pds/1", now + absl::Minutes(1)), HasSubstr("expired)\nendpoints: <none>\n"));
}

}  // namespace
}  // namespace rdmad::cli
