// server/dataplane/interfaces.h: which network interfaces are behind the RDMA devices (a fake sysfs tree), and
// their addresses for a wildcard listener (this host's own interfaces).
#include "server/dataplane/interfaces.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/temp_dir.h"

namespace rdmad::dataplane {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

void Write(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

TEST(Interfaces, WildcardsAreTheTwoAnyAddresses) {
  EXPECT_TRUE(IsWildcard("0.0.0.0"));
  EXPECT_TRUE(IsWildcard("::"));
  EXPECT_FALSE(IsWildcard("10.0.2.15"));
  EXPECT_FALSE(IsWildcard("::1"));
  EXPECT_FALSE(IsWildcard(""));
}

TEST(Interfaces, RoceGidsAndPciFunctionsNameTheInterfacesOnceEach) {
  rdmad::test::TempDir dir;
  const fs::path ib = dir.path();
  // rxe0 on eth1: two GIDs on the same netdev, an unused GID's file empty.
  Write(ib / "rxe0/ports/1/gid_attrs/ndevs/0", "eth1\n");
  Write(ib / "rxe0/ports/1/gid_attrs/ndevs/1", "eth1\n");
  Write(ib / "rxe0/ports/1/gid_attrs/ndevs/2", "");
  // An IB HCA: no netdev per GID, IPoIB on the same PCI function.
  fs::create_directories(ib / "mlx5_0/ports/1/gid_attrs/ndevs");
  fs::create_directories(ib / "mlx5_0/device/net/ib0");
  EXPECT_THAT(RdmaInterfaces(ib.string()), ElementsAre("eth1", "ib0"));
  EXPECT_THAT(RdmaInterfaces((ib / "absent").string()), IsEmpty());
}

// The first interface of this host with an IPv4 address that is not loopback, or "" if there is none.
std::string SomeInterfaceWithIpv4(std::string* address) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string name;
  for (const ifaddrs* a = list; a != nullptr && name.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET || (a->ifa_flags & IFF_LOOPBACK) != 0) continue;
    name = a->ifa_name;
    char buf[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof(buf));
    *address = buf;
  }
  freeifaddrs(list);
  return name;
}

TEST(Interfaces, AddressesOfTheDevicesInterfacesNotLoopback) {
  rdmad::test::TempDir dir;
  const fs::path ib = dir.path();
  Write(ib / "rxe_lo/ports/1/gid_attrs/ndevs/0", "lo\n");
  EXPECT_THAT(RdmaInterfaceAddresses("0.0.0.0", ib.string()), IsEmpty());  // loopback only: nothing to tell
  std::string address;
  const std::string name = SomeInterfaceWithIpv4(&address);
  if (name.empty()) GTEST_SKIP() << "this host has no interface with an IPv4 address besides loopback";
  Write(ib / "rxe0/ports/1/gid_attrs/ndevs/0", name + "\n");
  const std::vector<std::string> v4 = RdmaInterfaceAddresses("0.0.0.0", ib.string());
  EXPECT_THAT(v4, ::testing::Contains(address));
  EXPECT_THAT(RdmaInterfaceAddresses("::", ib.string()), ::testing::Contains(address));  // "::" takes IPv4 too
  EXPECT_THAT(RdmaInterfaceAddresses("10.0.2.15", ib.string()), IsEmpty());           // not a wildcard
}

}  // namespace
}  // namespace rdmad::dataplane
