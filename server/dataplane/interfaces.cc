// The RDMA devices' interface addresses, for a wildcard data-plane listener. See interfaces.h.
#include "server/dataplane/interfaces.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <system_error>

namespace rdmad::dataplane {
namespace {

namespace fs = std::filesystem;

// The entries of `dir` (empty if it cannot be read).
std::vector<fs::path> Entries(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) out.push_back(it->path());
  return out;
}

std::string FirstLine(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string Numeric(const sockaddr* a) {
  char buf[INET6_ADDRSTRLEN] = {};
  const void* raw = a->sa_family == AF_INET ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(a)->sin_addr)
                                            : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr);
  if (inet_ntop(a->sa_family, raw, buf, sizeof(buf)) == nullptr) return "";
  return buf;
}

}  // namespace

bool IsWildcard(const std::string& host) { return host == "0.0.0.0" || host == "::"; }

std::vector<std::string> RdmaInterfaces(const std::string& sysfs_infiniband) {
  std::set<std::string> names;
  for (const fs::path& dev : Entries(sysfs_infiniband)) {
    // RoCE (rxe among them): the netdev behind each GID; an unused GID's file reads empty or fails.
    for (const fs::path& port : Entries(dev / "ports")) {
      for (const fs::path& ndev : Entries(port / "gid_attrs" / "ndevs")) {
        const std::string name = FirstLine(ndev);
        if (!name.empty()) names.insert(name);
      }
    }
    // IPoIB and iWARP: the interfaces of the same PCI function.
    for (const fs::path& net : Entries(dev / "device" / "net")) names.insert(net.filename().string());
  }
  return {names.begin(), names.end()};
}

std::vector<std::string> RdmaInterfaceAddresses(const std::string& wildcard, const std::string& sysfs_infiniband) {
  const std::vector<std::string> interfaces = RdmaInterfaces(sysfs_infiniband);
  if (interfaces.empty() || !IsWildcard(wildcard)) return {};
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return {};
  std::vector<std::string> v6, v4;
  for (const std::string& name : interfaces) {
    for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
      if (a->ifa_addr == nullptr || name != a->ifa_name || (a->ifa_flags & IFF_LOOPBACK) != 0) continue;
      if (a->ifa_addr->sa_family == AF_INET) {
        v4.push_back(Numeric(a->ifa_addr));
      } else if (a->ifa_addr->sa_family == AF_INET6 && wildcard == "::") {
        const in6_addr& six = reinterpret_cast<const sockaddr_in6*>(a->ifa_addr)->sin6_addr;
        if (!IN6_IS_ADDR_LINKLOCAL(&six) && !IN6_IS_ADDR_V4MAPPED(&six)) v6.push_back(Numeric(a->ifa_addr));
      }
    }
  }
  freeifaddrs(list);
  std::vector<std::string> out = std::move(v6);
  out.insert(out.end(), v4.begin(), v4.end());
  out.erase(std::remove(out.begin(), out.end(), std::string()), out.end());
  return out;
}

}  // namespace rdmad::dataplane
