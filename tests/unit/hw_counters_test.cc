// The NIC counters: reading a sysfs tree (server/fabric/hw_counters.h) built in a temp dir, the
// classification table, and the registry's GetDevice / ListDevices filling Device.hw_counters from the
// fabric (the fake's settable counters), read at each call.
#include "server/fabric/hw_counters.h"

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/registry/registry.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/fake_fabric.h"

namespace rdmad {
namespace {

using fabric::HwCounterValue;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

// "port/name=value" plus "!" for a remote-access-error counter: one string per counter, easy to compare.
std::vector<std::string> Flat(const std::vector<HwCounterValue>& counters) {
  std::vector<std::string> out;
  for (const auto& c : counters) {
    out.push_back(absl::StrCat(c.port, "/", c.name, "=", c.value, c.remote_access_error ? "!" : ""));
  }
  return out;
}

class SysfsTree {
 public:
  // Makes root/DEV (and root itself).
  explicit SysfsTree(const std::string& device) : device_(device) { Dir(""); }
  std::string root() const { return dir_.path(); }
  void Dir(const std::string& rel) {
    std::string path = rel.empty() ? device_ : absl::StrCat(device_, "/", rel);
    // mkdir -p, one level at a time.
    std::string acc;
    for (absl::string_view part : absl::StrSplit(path, '/')) {
      acc = acc.empty() ? std::string(part) : absl::StrCat(acc, "/", part);
      if (access(dir_.Sub(acc).c_str(), F_OK) != 0) dir_.MakeDir(acc);
    }
  }
  void File(const std::string& rel, const std::string& text) {
    std::string path = dir_.Sub(absl::StrCat(device_, "/", rel));
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr) << path;
    std::fputs(text.c_str(), f);
    std::fclose(f);
  }
  void Link(const std::string& rel, const std::string& target) {
    std::string path = dir_.Sub(absl::StrCat(device_, "/", rel));
    ASSERT_EQ(symlink(target.c_str(), path.c_str()), 0) << path;
  }

 private:
  test::TempDir dir_;
  std::string device_;
};

// ---------------------------------------------------------------------------------------------------------
// Reading sysfs

TEST(SysfsHwCounters, RxeLikePortCountersWithoutLifespan) {
  SysfsTree t("rxe0");
  t.Dir("ports/1/hw_counters");
  t.File("ports/1/hw_counters/rcvd_pkts", "42\n");
  t.File("ports/1/hw_counters/sent_pkts", "40\n");
  t.File("ports/1/hw_counters/lifespan", "12\n");  // the refresh period, not a counter
  t.File("ports/1/hw_counters/duplicate_request", "0\n");
  EXPECT_THAT(Flat(fabric::ReadSysfsHwCounters(t.root(), "rxe0")),
              ElementsAre("1/duplicate_request=0", "1/rcvd_pkts=42", "1/sent_pkts=40"));
}

TEST(SysfsHwCounters, DeviceLevelFirstThenPortsInNumericOrderAndClassified) {
  SysfsTree t("mlx5_0");
  t.Dir("hw_counters");
  t.File("hw_counters/rq_num_rae", "3\n");  // device-level (port 0), an mlx4-style name
  for (int p : {10, 2, 1}) {
    t.Dir(absl::StrCat("ports/", p, "/hw_counters"));
    t.File(absl::StrCat("ports/", p, "/hw_counters/resp_remote_access_errors"), absl::StrCat(p * 100, "\n"));
    t.File(absl::StrCat("ports/", p, "/hw_counters/req_remote_access_errors"), "1\n");
  }
  t.Dir("ports/3");  // a port without hw_counters: nothing, no error
  t.Dir("ports/gids");  // not a port number
  EXPECT_THAT(Flat(fabric::ReadSysfsHwCounters(t.root(), "mlx5_0")),
              ElementsAre("0/rq_num_rae=3!",  //
                          "1/req_remote_access_errors=1", "1/resp_remote_access_errors=100!",
                          "2/req_remote_access_errors=1", "2/resp_remote_access_errors=200!",
                          "10/req_remote_access_errors=1", "10/resp_remote_access_errors=1000!"));
}

TEST(SysfsHwCounters, LargeValuesAndWhitespace) {
  SysfsTree t("bnxt_re0");
  t.Dir("ports/1/hw_counters");
  t.File("ports/1/hw_counters/res_tx_invalid_rkey", "18446744073709551615\n");  // UINT64_MAX
  t.File("ports/1/hw_counters/rx_pkts", "  7 \n");
  EXPECT_THAT(Flat(fabric::ReadSysfsHwCounters(t.root(), "bnxt_re0")),
              ElementsAre("1/res_tx_invalid_rkey=18446744073709551615!", "1/rx_pkts=7"));
}

TEST(SysfsHwCounters, UnreadableOrMalformedFilesAreSkipped) {
  SysfsTree t("irdma0");
  t.Dir("ports/1/hw_counters");
  t.File("ports/1/hw_counters/good", "5\n");
  t.File("ports/1/hw_counters/empty", "");
  t.File("ports/1/hw_counters/text", "N/A\n");
  t.File("ports/1/hw_counters/negative", "-1\n");
  t.File("ports/1/hw_counters/overflow", "18446744073709551616\n");
  t.Dir("ports/1/hw_counters/a_directory");                      // read fails (EISDIR)
  t.Link("ports/1/hw_counters/dangling", "/nonexistent/counter");  // open fails (ENOENT)
  EXPECT_THAT(Flat(fabric::ReadSysfsHwCounters(t.root(), "irdma0")), ElementsAre("1/good=5"));
}

TEST(SysfsHwCounters, NoSuchDeviceOrNoCountersIsEmpty) {
  SysfsTree t("siw0");
  t.Dir("ports/1");
  EXPECT_THAT(fabric::ReadSysfsHwCounters(t.root(), "siw0"), IsEmpty());
  EXPECT_THAT(fabric::ReadSysfsHwCounters(t.root(), "nosuch0"), IsEmpty());
  EXPECT_THAT(fabric::ReadSysfsHwCounters("/nonexistent/sysfs", "rxe0"), IsEmpty());
}

TEST(SysfsHwCounters, ReadsAtEachCall) {
  SysfsTree t("rxe0");
  t.Dir("ports/1/hw_counters");
  t.File("ports/1/hw_counters/rcvd_pkts", "1\n");
  EXPECT_THAT(Flat(fabric::ReadSysfsHwCounters(t.root(), "rxe0")), ElementsAre("1/rcvd_pkts=1"));
  t.File("ports/1/hw_counters/rcvd_pkts", "2\n");
  EXPECT_THAT(Flat(fabric::ReadSysfsHwCounters(t.root(), "rxe0")), ElementsAre("1/rcvd_pkts=2"));
}

// ---------------------------------------------------------------------------------------------------------
// The classification table

TEST(HwCounterTable, RespondersAreFlaggedRequestersAndRxeAreNot) {
  for (const char* name : {"resp_remote_access_errors", "rq_num_rae", "res_rx_invalid_rkey", "res_rx_domain_err",
                           "res_rx_no_perm", "res_rx_range_err", "res_tx_invalid_rkey", "res_tx_domain_err",
                           "res_tx_no_perm", "res_tx_range_err", "res_invalid_dup_rkey"}) {
    EXPECT_TRUE(fabric::IsRemoteAccessErrorCounter(name)) << name;
  }
  for (const char* name : {"req_remote_access_errors", "req_remote_invalid_request", "sq_num_rae",
                           "remote_access_err", "remote_invalid_req_err", "OtherNak",
                           // rxe's whole set: none counts a refused remote access.
                           "sent_pkts", "rcvd_pkts", "duplicate_request", "out_of_seq_request", "rcvd_rnr_err",
                           "send_rnr_err", "rcvd_seq_err", "ack_deferred", "retry_exceeded_err",
                           "retry_rnr_exceeded_err", "completer_retry_err", "send_err", "link_downed",
                           "rdma_sends", "rdma_recvs", "lifespan", ""}) {
    EXPECT_FALSE(fabric::IsRemoteAccessErrorCounter(name)) << name;
  }
}

TEST(HwCounterTable, EveryEntryIsUniqueAndNamesItsSource) {
  std::set<std::string> names;
  for (size_t i = 0; i < fabric::kHwCounterTableSize; ++i) {
    const fabric::HwCounterKind& k = fabric::kHwCounterTable[i];
    EXPECT_TRUE(names.insert(k.name).second) << "duplicate " << k.name;
    EXPECT_NE(std::string(k.driver), "") << k.name;
    EXPECT_NE(std::string(k.meaning), "") << k.name;
    EXPECT_NE(std::string(k.source).find("drivers/infiniband/"), std::string::npos) << k.name;
    EXPECT_EQ(fabric::FindHwCounterKind(k.name), &k);
  }
}

// ---------------------------------------------------------------------------------------------------------
// The registry fills Device.hw_counters from the fabric, at each call

class RegistryCountersTest : public ::testing::Test {
 protected:
  RegistryCountersTest() {
    ledger_ = std::make_shared<fake::FakeLedger>();
    registry_ = std::make_unique<Registry>(
        std::make_unique<fake::FakeFabric>(
            std::vector<fabric::DeviceInfo>{fake::MakeDeviceInfo("mlx5_0"), fake::MakeDeviceInfo("rxe0")}, ledger_),
        Registry::Options());
  }
  ~RegistryCountersTest() override {
    registry_.reset();
    EXPECT_THAT(ledger_->violations(), IsEmpty());
  }
  static std::vector<std::string> Flat(const v1::Device& d) {
    std::vector<std::string> out;
    for (const v1::HwCounter& c : d.hw_counters()) {
      out.push_back(absl::StrCat(c.port(), "/", c.name(), "=", c.value(), c.remote_access_error() ? "!" : ""));
    }
    return out;
  }
  v1::Device Get(const std::string& name) {
    absl::StatusOr<v1::Device> d = registry_->GetDevice(name);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *d : v1::Device();
  }

  std::shared_ptr<fake::FakeLedger> ledger_;
  std::unique_ptr<Registry> registry_;
};

TEST_F(RegistryCountersTest, GetDeviceReadsTheCountersAtEachCall) {
  ledger_->SetCounter("rxe0", 1, "rcvd_pkts", 10);
  ledger_->SetCounter("rxe0", 1, "sent_pkts", 11);
  EXPECT_THAT(Flat(Get("devices/rxe0")), ElementsAre("1/rcvd_pkts=10", "1/sent_pkts=11"));
  const int reads = ledger_->calls("read_counters");
  ledger_->SetCounter("rxe0", 1, "rcvd_pkts", 12);
  EXPECT_THAT(Flat(Get("rxe0")), ElementsAre("1/rcvd_pkts=12", "1/sent_pkts=11")) << "not cached";
  EXPECT_EQ(ledger_->calls("read_counters"), reads + 1);
  // A device without counters has none; the other device's are its own.
  EXPECT_THAT(Flat(Get("mlx5_0")), IsEmpty());
}

TEST_F(RegistryCountersTest, RemoteAccessErrorsAreMarkedPerPort) {
  ledger_->SetCounter("mlx5_0", 1, "resp_remote_access_errors", 3);
  ledger_->SetCounter("mlx5_0", 1, "req_remote_access_errors", 1);
  ledger_->SetCounter("mlx5_0", 2, "resp_remote_access_errors", 0);
  ledger_->SetCounter("mlx5_0", 0, "rq_num_rae", 9);
  EXPECT_THAT(Flat(Get("mlx5_0")), ElementsAre("0/rq_num_rae=9!", "1/req_remote_access_errors=1",
                                               "1/resp_remote_access_errors=3!", "2/resp_remote_access_errors=0!"));
}

TEST_F(RegistryCountersTest, ListDevicesFillsEveryDevice) {
  ledger_->SetCounter("mlx5_0", 1, "resp_remote_access_errors", 5);
  ledger_->SetCounter("rxe0", 1, "rcvd_pkts", 7);
  std::vector<v1::Device> list = registry_->ListDevices();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_THAT(Flat(list[0]), ElementsAre("1/resp_remote_access_errors=5!"));
  EXPECT_THAT(Flat(list[1]), ElementsAre("1/rcvd_pkts=7"));
  ledger_->ClearCounters("rxe0");
  EXPECT_THAT(Flat(registry_->ListDevices()[1]), IsEmpty());
}

TEST_F(RegistryCountersTest, WithoutCountersReadsNothing) {
  ledger_->SetCounter("rxe0", 1, "rcvd_pkts", 7);
  const int reads = ledger_->calls("read_counters");
  absl::StatusOr<v1::Device> d = registry_->GetDevice("rxe0", /*with_counters=*/false);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->hw_counters_size(), 0);
  EXPECT_TRUE(d->caps().mw_type2b());
  EXPECT_EQ(ledger_->calls("read_counters"), reads);
}

}  // namespace
}  // namespace rdmad
