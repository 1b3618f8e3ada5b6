#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/output.h"
#include "cli/parse.h"
#include "cli/rdmactl_json.pb.h"

namespace rdmad::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// ---- ParseSize

TEST(ParseSizeTest, PlainNumbersAreBytes) {
  EXPECT_EQ(ParseSize("4096").value(), 4096u);
  EXPECT_EQ(ParseSize("0").value(), 0u);
  EXPECT_EQ(ParseSize("1").value(), 1u);
  EXPECT_EQ(ParseSize(" 4096 ").value(), 4096u);
  EXPECT_EQ(ParseSize("18446744073709551615").value(), UINT64_MAX);
}

TEST(ParseSizeTest, BinaryUnitsInEverySpelling) {
  EXPECT_EQ(ParseSize("1MiB").value(), 1048576u);
  for (const char* s : {"4k", "4K", "4KiB", "4kib", "4KB", "4kB", "4096B", "4096b", "4 KiB"}) {
    EXPECT_EQ(ParseSize(s).value(), 4096u) << s;
  }
  EXPECT_EQ(ParseSize("2M").value(), 2u << 20);
  EXPECT_EQ(ParseSize("2MB").value(), 2u << 20);
  EXPECT_EQ(ParseSize("1GiB").value(), uint64_t{1} << 30);
  EXPECT_EQ(ParseSize("3g").value(), uint64_t{3} << 30);
  EXPECT_EQ(ParseSize("1TiB").value(), uint64_t{1} << 40);
  EXPECT_EQ(ParseSize("1PiB").value(), uint64_t{1} << 50);
  EXPECT_EQ(ParseSize("15EiB").value(), uint64_t{15} << 60);
}

TEST(ParseSizeTest, FractionsThatAreWholeBytes) {
  EXPECT_EQ(ParseSize("1.5MiB").value(), 1572864u);
  EXPECT_EQ(ParseSize("0.5KiB").value(), 512u);
  EXPECT_EQ(ParseSize("1.0").value(), 1u);
  EXPECT_EQ(ParseSize("2.50k").value(), 2560u);
  EXPECT_EQ(ParseSize("0.25GiB").value(), uint64_t{1} << 28);
}

TEST(ParseSizeTest, RejectsJunk) {
  for (const char* s : {"1.5.2MB", "", " ", "MiB", "abc", "1MiBB", "1 M i B", "1XiB", "1kk", "0x10", "1e6", ".5KiB",
                        "1.KiB", "1,5MiB", "4 096", "1Mi", "1ib"}) {
    absl::StatusOr<uint64_t> r = ParseSize(s);
    EXPECT_FALSE(r.ok()) << "'" << s << "' parsed as " << r.value();
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << s;
    }
  }
  EXPECT_THAT(std::string(ParseSize("1.5.2MB").status().message()), HasSubstr("'1.5.2MB' is not a size"));
}

TEST(ParseSizeTest, RejectsNegative) {
  for (const char* s : {"-1", "-0", "-4KiB", " -1"}) {
    absl::StatusOr<uint64_t> r = ParseSize(s);
    ASSERT_FALSE(r.ok()) << s;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("negative")) << s;
  }
  EXPECT_FALSE(ParseSize("+1").ok());
}

TEST(ParseSizeTest, RejectsFractionalBytes) {
  for (const char* s : {"1.5", "0.3KiB", "1.0000001KiB", "0.1"}) {
    absl::StatusOr<uint64_t> r = ParseSize(s);
    ASSERT_FALSE(r.ok()) << s;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("whole number of bytes")) << s;
  }
}

TEST(ParseSizeTest, RejectsOverflow) {
  for (const char* s : {"18446744073709551616", "16EiB", "17179869184GiB", "99999999999999999999999", "15.99999EiB"}) {
    absl::StatusOr<uint64_t> r = ParseSize(s);
    ASSERT_FALSE(r.ok()) << s;
  }
  EXPECT_THAT(std::string(ParseSize("16EiB").status().message()), HasSubstr("too large"));
}

// ---- FormatSize

TEST(FormatSizeTest, ExactUnits) {
  EXPECT_EQ(FormatSize(0), "0B");
  EXPECT_EQ(FormatSize(512), "512B");
  EXPECT_EQ(FormatSize(1023), "1023B");
  EXPECT_EQ(FormatSize(1024), "1KiB");
  EXPECT_EQ(FormatSize(4096), "4KiB");
  EXPECT_EQ(FormatSize(1048576), "1MiB");
  EXPECT_EQ(FormatSize(3ull << 30), "3GiB");
  EXPECT_EQ(FormatSize(uint64_t{1} << 40), "1TiB");
  EXPECT_EQ(FormatSize(uint64_t{8} << 60), "8EiB");
}

TEST(FormatSizeTest, RoundsToOneDecimal) {
  EXPECT_EQ(FormatSize(1536), "1.5KiB");
  EXPECT_EQ(FormatSize(1572864), "1.5MiB");
  EXPECT_EQ(FormatSize(1000000), "976.6KiB");
  EXPECT_EQ(FormatSize(1048575), "1.0MiB");  // not "1024.0KiB"
  EXPECT_EQ(FormatSize(UINT64_MAX), "16.0EiB");
}

TEST(FormatSizeTest, RoundTripsThroughParseSize) {
  for (uint64_t n : {uint64_t{0}, uint64_t{1}, uint64_t{4096}, uint64_t{1536}, uint64_t{1} << 20, uint64_t{5} << 30}) {
    EXPECT_EQ(ParseSize(FormatSize(n)).value(), n) << n;
  }
}

// ---- ParseUint, ParseTimeout

TEST(ParseUintTest, DecimalAndHex) {
  EXPECT_EQ(ParseUint("17").value(), 17u);
  EXPECT_EQ(ParseUint("0x11").value(), 17u);
  EXPECT_EQ(ParseUint("0XfF").value(), 255u);
  EXPECT_EQ(ParseUint("010").value(), 10u);  // not octal
  EXPECT_EQ(ParseUint("16777215", 0xffffff).value(), 0xffffffu);
}

TEST(ParseUintTest, Rejects) {
  EXPECT_THAT(std::string(ParseUint("-1").status().message()), HasSubstr("negative"));
  EXPECT_THAT(std::string(ParseUint("16777216", 0xffffff).status().message()), HasSubstr("too large"));
  EXPECT_THAT(std::string(ParseUint("99999999999999999999").status().message()), HasSubstr("too large"));
  for (const char* s : {"", "x", "0x", "1.0", "12a", "+3", "0xg"}) EXPECT_FALSE(ParseUint(s).ok()) << s;
}

TEST(ParseTimeoutTest, DurationsAndSeconds) {
  EXPECT_EQ(ParseTimeout("30s").value(), std::chrono::milliseconds(30000));
  EXPECT_EQ(ParseTimeout("500ms").value(), std::chrono::milliseconds(500));
  EXPECT_EQ(ParseTimeout("2m").value(), std::chrono::milliseconds(120000));
  EXPECT_EQ(ParseTimeout("1m30s").value(), std::chrono::milliseconds(90000));
  EXPECT_EQ(ParseTimeout("5").value(), std::chrono::milliseconds(5000));
  EXPECT_EQ(ParseTimeout("1us").value(), std::chrono::milliseconds(1));  // rounded up, never 0
}

TEST(ParseTimeoutTest, Rejects) {
  for (const char* s : {"0", "0s", "-1s", "inf", "abc", "", "30 parsecs"}) EXPECT_FALSE(ParseTimeout(s).ok()) << s;
}

// ---- Names

TEST(NormalizeNameTest, NumericKinds) {
  EXPECT_EQ(NormalizeName(Kind::kMr, "mr/17").value(), "mrs/17");
  EXPECT_EQ(NormalizeName(Kind::kMr, "mrs/17").value(), "mrs/17");
  EXPECT_EQ(NormalizeName(Kind::kMr, "17").value(), "mrs/17");
  EXPECT_EQ(NormalizeName(Kind::kMr, "MRS/17").value(), "mrs/17");
  EXPECT_EQ(NormalizeName(Kind::kMr, "mrs/017").value(), "mrs/17");
  EXPECT_EQ(NormalizeName(Kind::kPd, "1").value(), "pds/1");
  EXPECT_EQ(NormalizeName(Kind::kPd, "pd/1").value(), "pds/1");
  EXPECT_EQ(NormalizeName(Kind::kMw, "mws/2").value(), "mws/2");
  EXPECT_EQ(NormalizeName(Kind::kQp, "qp/3").value(), "qps/3");
}

TEST(NormalizeNameTest, Devices) {
  EXPECT_EQ(NormalizeName(Kind::kDevice, "rxe0").value(), "devices/rxe0");
  EXPECT_EQ(NormalizeName(Kind::kDevice, "device/rxe0").value(), "devices/rxe0");
  EXPECT_EQ(NormalizeName(Kind::kDevice, "devices/mlx5_0").value(), "devices/mlx5_0");
  EXPECT_FALSE(NormalizeName(Kind::kDevice, "").ok());
  EXPECT_FALSE(NormalizeName(Kind::kDevice, "devices/").ok());
  EXPECT_FALSE(NormalizeName(Kind::kDevice, "devices/a/b").ok());
  EXPECT_FALSE(NormalizeName(Kind::kDevice, "pds/1").ok());
}

TEST(NormalizeNameTest, RejectsMalformedAndWrongKind) {
  for (const char* s : {"", "mrs/", "mrs/0", "0", "mrs/x", "mrs/-1", "-1", "mrs/1/2", "mrs/1a", "foo/1", "mrs/ 1"}) {
    EXPECT_FALSE(NormalizeName(Kind::kMr, s).ok()) << s;
  }
  absl::StatusOr<std::string> r = NormalizeName(Kind::kMr, "pds/1");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("names a protection domain, not a memory region"));
}

TEST(NormalizeNameTest, SingularPrefixMeansThePlural) {
  EXPECT_EQ(NormalizeName(Kind::kMr, "mr/17").value(), "mrs/17");
  EXPECT_EQ(NormalizeName(Kind::kPd, "pd/1").value(), "pds/1");
  EXPECT_EQ(NormalizeName(Kind::kDevice, "device/rxe0").value(), "devices/rxe0");
}

TEST(KindFromNounTest, SingularPluralAnyCase) {
  EXPECT_EQ(KindFromNoun("mr"), Kind::kMr);
  EXPECT_EQ(KindFromNoun("mrs"), Kind::kMr);
  EXPECT_EQ(KindFromNoun("QPS"), Kind::kQp);
  EXPECT_EQ(KindFromNoun("device"), Kind::kDevice);
  EXPECT_EQ(KindFromNoun("mrss"), std::nullopt);
  EXPECT_EQ(KindFromNoun(""), std::nullopt);
}

const std::set<std::string> kValued = {"--server", "-o", "--output", "--timeout"};

TEST(SplitTypeSlashNameTest, SplitsTheNoun) {
  using V = std::vector<std::string>;
  EXPECT_EQ(SplitTypeSlashName(V{"get", "mrs/17"}, kValued), (V{"get", "mrs", "mrs/17"}));
  EXPECT_EQ(SplitTypeSlashName(V{"delete", "mr/3"}, kValued), (V{"delete", "mr", "mr/3"}));
  EXPECT_EQ(SplitTypeSlashName(V{"-o", "json", "get", "mrs/17"}, kValued), (V{"-o", "json", "get", "mrs", "mrs/17"}));
  EXPECT_EQ(SplitTypeSlashName(V{"get", "-o", "json", "devices/rxe0"}, kValued),
            (V{"get", "-o", "json", "devices", "devices/rxe0"}));
  EXPECT_EQ(SplitTypeSlashName(V{"--server=unix:/x", "get", "pds/1"}, kValued),
            (V{"--server=unix:/x", "get", "pds", "pds/1"}));
}

TEST(SplitTypeSlashNameTest, LeavesOtherFormsAlone) {
  using V = std::vector<std::string>;
  for (const V& args : {V{"get", "mrs", "mrs/17"}, V{"get", "mrs", "--pd", "pds/1"},
                        V{"register", "mr", "--pd", "pds/1"}, V{"get", "foo/1"}, V{"--server", "unix:/run/x", "health"},
                        V{"get"}, V{}, V{"get", "--", "mrs/1"}, V{"get", "/1"}}) {
    EXPECT_EQ(SplitTypeSlashName(args, kValued), args);
  }
}

TEST(BareWordsTest, SkipsOptionsAndTheirValues) {
  std::vector<std::string> args = {"--server", "unix:/x", "-o", "json", "get", "--verbose", "mrs", "17"};
  EXPECT_THAT(BareWords(args, kValued, 2), ElementsAre(4u, 6u));
  EXPECT_THAT(BareWords(args, kValued, 5), ElementsAre(4u, 6u, 7u));
  EXPECT_THAT(BareWords({"--", "get"}, kValued, 2), IsEmpty());
}

// ---- GIDs

TEST(NormalizeGidTest, AnyIpv6FormAndIpv4) {
  EXPECT_EQ(NormalizeGid("fe80::1").value(), "fe80:0000:0000:0000:0000:0000:0000:0001");
  EXPECT_EQ(NormalizeGid("FE80:0000:0000:0000:0202:C9FF:FE00:0001").value(), "fe80:0000:0000:0000:0202:c9ff:fe00:0001");
  EXPECT_EQ(NormalizeGid("192.168.1.5").value(), "0000:0000:0000:0000:0000:ffff:c0a8:0105");
  EXPECT_EQ(NormalizeGid("::ffff:192.168.1.5").value(), "0000:0000:0000:0000:0000:ffff:c0a8:0105");
  for (const char* s : {"", "fe80", "fe80:::1", "1.2.3", "gggg::1"}) EXPECT_FALSE(NormalizeGid(s).ok()) << s;
}

// ---- Access

TEST(ParseAccessTest, Lists) {
  EXPECT_THAT(ParseAccess("local-write,remote-read").value(), ElementsAre(v1::LOCAL_WRITE, v1::REMOTE_READ));
  EXPECT_THAT(ParseAccess("local-write,remote-write,remote-read,remote-atomic,mw-bind").value(),
              ElementsAre(v1::LOCAL_WRITE, v1::REMOTE_WRITE, v1::REMOTE_READ, v1::REMOTE_ATOMIC, v1::MW_BIND));
  EXPECT_THAT(ParseAccess("LOCAL_WRITE, Remote-Read").value(), ElementsAre(v1::LOCAL_WRITE, v1::REMOTE_READ));
  EXPECT_THAT(ParseAccess("remote-read,remote-read").value(), ElementsAre(v1::REMOTE_READ));
  EXPECT_THAT(ParseAccess("none").value(), IsEmpty());
  EXPECT_THAT(ParseAccess("NONE").value(), IsEmpty());
}

TEST(ParseAccessTest, UnknownFlagIsNamed) {
  absl::StatusOr<std::vector<v1::Access>> r = ParseAccess("local-write,remote-raed");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("unknown access flag 'remote-raed'"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("remote-read"));  // the known ones are listed
}

TEST(ParseAccessTest, RejectsEmptyItemsAndMixedNone) {
  EXPECT_THAT(std::string(ParseAccess("").status().message()), HasSubstr("empty access flag"));
  EXPECT_FALSE(ParseAccess("local-write,,remote-read").ok());
  EXPECT_FALSE(ParseAccess("local-write,").ok());
  EXPECT_THAT(std::string(ParseAccess("none,local-write").status().message()), HasSubstr("'none'"));
}

TEST(AccessStringTest, RoundTrip) {
  google::protobuf::RepeatedField<int> access;
  EXPECT_EQ(AccessString(access), "none");
  access.Add(v1::LOCAL_WRITE);
  access.Add(v1::MW_BIND);
  EXPECT_EQ(AccessString(access), "local-write,mw-bind");
  EXPECT_THAT(ParseAccess(AccessString(access)).value(), ElementsAre(v1::LOCAL_WRITE, v1::MW_BIND));
  access.Add(42);
  EXPECT_EQ(AccessString(access), "local-write,mw-bind,access(42)");
}

// ---- Formats and scalars

TEST(ParseFormatTest, KnownAndUnknown) {
  EXPECT_EQ(ParseFormat("table").value(), Format::kTable);
  EXPECT_EQ(ParseFormat("wide").value(), Format::kWide);
  EXPECT_EQ(ParseFormat("JSON").value(), Format::kJson);
  EXPECT_EQ(ParseFormat("name").value(), Format::kName);
  EXPECT_EQ(ParseFormat("YAML").value(), Format::kYaml);
  EXPECT_THAT(std::string(ParseFormat("xml").status().message()), HasSubstr("'xml'"));
}

TEST(ScalarsTest, HexAndJsonEscapes) {
  EXPECT_EQ(Hex(0), "0x0");
  EXPECT_EQ(Hex(0x1234abcd), "0x1234abcd");
  v1::ProtectionDomain pd;
  pd.set_label("a\"b\\c\nd\x01");
  EXPECT_THAT(ToJsonLine(pd), HasSubstr("\"label\":\"a\\\"b\\\\c\\nd\\u0001\""));
}

// ---- Tables

TEST(TableTest, AlignsColumnsAndFillsEmptyCells) {
  Table t({"NAME", "PD", "LABEL"});
  t.AddRow({"pds/1", "devices/rxe0", ""});
  t.AddRow({"pds/10", "devices/x", "demo"});
  EXPECT_EQ(t.Render(),
            "NAME     PD             LABEL\n"
            "pds/1    devices/rxe0   <none>\n"
            "pds/10   devices/x      demo\n");
  EXPECT_EQ(t.rows(), 2u);
}

TEST(TableTest, ShortRowsArePadded) {
  Table t({"A", "B"});
  t.AddRow({"x"});
  EXPECT_EQ(t.Render(), "A   B\nx   <none>\n");
}

v1::MemoryRegion SampleMr() {
  v1::MemoryRegion mr;
  mr.set_name("mrs/17");
  mr.set_pd("pds/3");
  mr.mutable_source()->mutable_anonymous()->set_size(1 << 20);
  mr.set_addr(0x7f0000001000);
  mr.set_length(1 << 20);
  mr.set_lkey(0x1234);
  mr.set_rkey(0x1234);
  mr.add_access(v1::LOCAL_WRITE);
  mr.add_access(v1::REMOTE_READ);
  mr.set_state(v1::MR_READY);
  mr.set_bound_windows(2);
  mr.set_generation(1);
  return mr;
}

TEST(ResourceTablesTest, Mrs) {
  google::protobuf::RepeatedPtrField<v1::MemoryRegion> mrs;
  *mrs.Add() = SampleMr();
  EXPECT_EQ(MakeTable(MrColumns(), mrs, false).Render(),
            "NAME     PD      SOURCE   LENGTH   LKEY     RKEY     ACCESS                    STATE   WINDOWS\n"
            "mrs/17   pds/3   anon     1MiB     0x1234   0x1234   local-write,remote-read   READY   2\n");
  std::string table = MakeTable(MrColumns(), mrs, false).Render();
  EXPECT_THAT(table, HasSubstr("NAME"));
  EXPECT_EQ(table.find("NAME"), 0u);  // NAME first
  for (const char* cell :
       {"mrs/17", "pds/3", "anon", "1MiB", "0x1234", "local-write,remote-read", "READY", "WINDOWS"}) {
    EXPECT_THAT(table, HasSubstr(cell));
  }
  EXPECT_THAT(table, Not(HasSubstr("ADDR")));
  std::string wide = MakeTable(MrColumns(), mrs, true).Render();
  for (const char* cell : {"ADDR", "GENERATION", "0x7f0000001000"}) EXPECT_THAT(wide, HasSubstr(cell));
}

TEST(ResourceTablesTest, SourceStrings) {
  v1::MemorySource s;
  EXPECT_EQ(SourceString(s), "<none>");
  s.mutable_anonymous()->set_huge_pages(true);
  EXPECT_EQ(SourceString(s), "anon-huge");
  s.mutable_file()->set_path("/dev/shm/x");
  EXPECT_EQ(SourceString(s), "file:/dev/shm/x");
  s.mutable_file()->set_offset(4096);
  EXPECT_EQ(SourceString(s), "file:/dev/shm/x+4KiB");
  s.mutable_fd()->set_handle("descriptors/00");
  EXPECT_EQ(SourceString(s), "fd");
  s.mutable_fd()->set_offset(8192);
  EXPECT_EQ(SourceString(s), "fd+8KiB");
}

TEST(ResourceTablesTest, DevicesAndGids) {
  google::protobuf::RepeatedPtrField<v1::Device> devices;
  v1::Device* d = devices.Add();
  d->set_name("devices/rxe0");
  d->set_transport("InfiniBand");
  v1::Port* p = d->add_ports();
  p->set_number(1);
  p->set_state("ACTIVE");
  p->set_active_mtu(1024);
  p->set_link_layer("Ethernet");
  v1::Gid* g = p->add_gids();
  g->set_index(1);
  g->set_gid("0000:0000:0000:0000:0000:ffff:c0a8:0105");
  g->set_type("RoCEv2");
  d->mutable_caps()->set_mw_type1(true);
  d->mutable_caps()->set_mw_type2b(true);
  const std::string table = MakeTable(DeviceColumns(), devices, false).Render();
  EXPECT_EQ(table.substr(0, table.find('\n')),
            "NAME           TRANSPORT    PORTS   STATE    MTU    LINK       GIDS   MW-TYPES   NATIVE-REREG");
  EXPECT_THAT(table, HasSubstr("devices/rxe0   InfiniBand   1       ACTIVE   1024   Ethernet   1      1,2b       no"));
  const std::string gids = GidsTable(devices).Render();
  EXPECT_THAT(gids, HasSubstr("devices/rxe0   1      1       RoCEv2   0000:0000:0000:0000:0000:ffff:c0a8:0105"));
  // MW-BOUNDS (wide): who keeps a window's key to its range.
  EXPECT_THAT(MakeTable(DeviceColumns(), devices, true).Render(), HasSubstr("   UNSAFE   "));
  d->mutable_caps()->set_mw_bounds_region(true);
  EXPECT_THAT(MakeTable(DeviceColumns(), devices, true).Render(), HasSubstr("   bounds-region   "));
  d->mutable_caps()->set_mw_bounds_region(false);
  d->mutable_caps()->set_mw_bounds_enforced(true);
  EXPECT_THAT(MakeTable(DeviceColumns(), devices, true).Render(), HasSubstr("   device   "));
}

TEST(ResourceTablesTest, HwCountersMarkRemoteAccessErrors) {
  google::protobuf::RepeatedPtrField<v1::Device> devices;
  v1::Device* d = devices.Add();
  d->set_name("devices/mlx5_0");
  v1::HwCounter* c = d->add_hw_counters();
  c->set_port(0);
  c->set_name("rq_num_rae");
  c->set_value(2);
  c->set_remote_access_error(true);
  c = d->add_hw_counters();
  c->set_port(1);
  c->set_name("resp_remote_access_errors");
  c->set_value(18446744073709551615u);
  c->set_remote_access_error(true);
  c = d->add_hw_counters();
  c->set_port(1);
  c->set_name("rx_read_requests");
  c->set_value(7);
  devices.Add()->set_name("devices/rxe0");  // no counters: no rows
  const std::string table = HwCountersTable(devices).Render();
  EXPECT_EQ(table,
            "DEVICE           PORT     COUNTER                     VALUE                  REMOTE-ACCESS-ERROR\n"
            "devices/mlx5_0   device   rq_num_rae                  2                      yes\n"
            "devices/mlx5_0   1        resp_remote_access_errors   18446744073709551615   yes\n"
            "devices/mlx5_0   1        rx_read_requests            7                      no\n");
}

TEST(ResourceTablesTest, UnboundWindowAndUnconnectedQp) {
  google::protobuf::RepeatedPtrField<v1::MemoryWindow> mws;
  v1::MemoryWindow* mw = mws.Add();
  mw->set_name("mws/2");
  mw->set_pd("pds/1");
  mw->set_type(v1::TYPE_2);
  mw->set_rkey(0xab);
  EXPECT_THAT(MakeTable(MwColumns(), mws, false).Render(), HasSubstr("mws/2   pds/1   2      no      0xab   <none>"));
  google::protobuf::RepeatedPtrField<v1::QueuePair> qps;
  v1::QueuePair* qp = qps.Add();
  qp->set_name("qps/1");
  qp->set_pd("pds/1");
  qp->set_state(v1::QP_INIT);
  qp->set_port(1);
  qp->mutable_local()->set_qpn(17);
  EXPECT_THAT(MakeTable(QpColumns(), qps, false).Render(),
              HasSubstr("qps/1   pds/1   INIT    1      0           17    0     <none>"));
}

TEST(EnumStringsTest, Short) {
  EXPECT_EQ(MrStateString(v1::MR_UNUSABLE), "UNUSABLE");
  EXPECT_EQ(QpStateString(v1::QP_RTS), "RTS");
  EXPECT_EQ(MwTypeString(v1::TYPE_1), "1");
  EXPECT_EQ(ReregMethodString(v1::EMULATED), "emulated");
  EXPECT_EQ(MrStateString(99), "99");
}

// ---- JSON

TEST(JsonTest, SingleObjectWithProtoNamesAndDefaults) {
  const std::string json = ToJson(SampleMr());
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.back(), '\n');
  EXPECT_THAT(json, HasSubstr("\"name\": \"mrs/17\""));
  EXPECT_THAT(json, HasSubstr("\"bound_windows\": 2"));       // proto field name, not boundWindows
  EXPECT_THAT(json, HasSubstr("\"unusable_reason\": \"\""));  // defaults printed: a stable shape
  EXPECT_THAT(json, HasSubstr("\"LOCAL_WRITE\""));
}

TEST(JsonTest, Lists) {
  json::PdList pds;
  EXPECT_EQ(ToJson(pds), "{\n \"items\": []\n}\n");
  pds.add_items()->set_name("pds/1");
  pds.add_items()->set_name("pds/2");
  const std::string json = ToJson(pds);
  EXPECT_EQ(json.rfind("{\n \"items\": [\n  {\n   \"name\": \"pds/1\",", 0), 0u) << json;
  EXPECT_THAT(json, HasSubstr("  },\n  {\n   \"name\": \"pds/2\""));
  EXPECT_THAT(json, HasSubstr("\n  }\n ]\n}\n"));
}

// ---- Errors

TEST(FormatErrorTest, MessageAndDetail) {
  v1::ErrorDetail d;
  d.set_field("name");
  d.set_errno_value(16);
  d.set_errno_name("EBUSY");
  absl::Status s = absl::FailedPreconditionError("mrs/3 has 1 bound memory window(s)");
  EXPECT_EQ(FormatError(s, d, "unix:/x"), "error: mrs/3 has 1 bound memory window(s) (field: name, errno: EBUSY)");
}

TEST(FormatErrorTest, FieldNotRepeatedWhenTheMessageStartsWithIt) {
  v1::ErrorDetail d;
  d.set_field("pd");
  EXPECT_EQ(FormatError(absl::NotFoundError("pd: pds/9 does not exist"), d, "unix:/x"),
            "error: pd: pds/9 does not exist");
}

TEST(FormatErrorTest, VerbsCallAndBareErrno) {
  v1::ErrorDetail d;
  d.set_verbs_call("ibv_reg_mr");
  d.set_errno_value(12);
  EXPECT_EQ(FormatError(absl::ResourceExhaustedError("no memory"), d, "unix:/x"),
            "error: no memory (verbs call: ibv_reg_mr, errno: 12)");
}

TEST(FormatErrorTest, ReregOutcome) {
  v1::ErrorDetail d;
  d.set_rereg_outcome(v1::OUTCOME_MR_UNUSABLE);
  EXPECT_THAT(FormatError(absl::InternalError("x"), d, "unix:/x"),
              HasSubstr("\nnote: the memory region is now unusable"));
  d.set_rereg_outcome(v1::OUTCOME_OLD_MR_VALID);
  EXPECT_THAT(FormatError(absl::InternalError("x"), d, "unix:/x"), HasSubstr("\nnote: the memory region is unchanged"));
}

TEST(FormatErrorTest, HintOnlyForChannelFailures) {
  const std::optional<v1::ErrorDetail> none;  // no ErrorDetail at all: the channel failed, not rdmad
  EXPECT_EQ(FormatError(absl::UnavailableError("failed to connect to all addresses"), none, "unix:/run/x.sock"),
            "error: failed to connect to all addresses\n"
            "hint: is rdmad running and listening on unix:/run/x.sock? (choose the address with --server or "
            "RDMAD_SERVER)");
  EXPECT_THAT(FormatError(absl::DeadlineExceededError("Deadline Exceeded"), none, "unix:/x"), HasSubstr("--timeout"));
  v1::ErrorDetail d;
  d.set_field("x");
  EXPECT_THAT(FormatError(absl::UnavailableError("x: busy"), d, "unix:/x"), Not(HasSubstr("hint:")));
  EXPECT_EQ(FormatError(absl::UnknownError(""), none, "unix:/x"), "error: UNKNOWN");
}

TEST(FormatErrorTest, NoHintForRdmadsOwnUnavailable) {
  // rdmad answers UNAVAILABLE where rdma_cm is missing, with an ErrorDetail that is empty: not a channel
  // failure, so no "is rdmad running" hint.
  EXPECT_EQ(FormatError(absl::UnavailableError("rdma_cm is unavailable on this host"), v1::ErrorDetail(), "unix:/x"),
            "error: rdma_cm is unavailable on this host");
  EXPECT_EQ(FormatError(absl::DeadlineExceededError("migration did not start"), v1::ErrorDetail(), "unix:/x"),
            "error: migration did not start");
}

}  // namespace
}  // namespace rdmad::cli
