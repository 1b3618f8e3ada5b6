// scale_bench's RSS baselines: N verbs (or librdmacm) objects made directly in this process, as rdmad makes
// them, and how much this process's VmRSS grew; then freed. What rdmad keeps per object beyond that is its own.
// Threads: the calling thread only.
#include <infiniband/verbs.h>
#include <malloc.h>
#include <rdma/rdma_cma.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "tests/bench/scale_bench.h"

namespace rdmad::bench::scale {
namespace {

std::string Errno(const std::string& call, int err) { return call + ": " + std::strerror(err); }

// The device's context and a PD, closed on scope exit.
struct Device {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ~Device() {
    if (pd) ibv_dealloc_pd(pd);
    if (ctx) ibv_close_device(ctx);
  }
  bool Open(const std::string& name, std::string* error) {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    for (int i = 0; list && i < n && !ctx; ++i) {
      if (name == ibv_get_device_name(list[i])) ctx = ibv_open_device(list[i]);
    }
    if (list) ibv_free_device_list(list);
    if (!ctx) {
      *error = "cannot open " + name;
      return false;
    }
    pd = ibv_alloc_pd(ctx);
    if (!pd) *error = Errno("ibv_alloc_pd", errno);
    return pd != nullptr;
  }
};

// This process's memory in KiB as the larger of two views: its VmRSS, and its heap in use (mallinfo2: malloc's
// arenas and its mmapped blocks). The heap view counts what verbs allocates even when malloc reuses memory an
// earlier baseline freed (RSS does not grow then); the RSS view counts pages verbs maps itself (and the MRs'
// own pinned pages, mapped here with mmap).
struct Footprint {
  long rss_kb, heap_kb;
  static Footprint Now() {
    const struct mallinfo2 m = mallinfo2();
    return Footprint{RssKb(0), static_cast<long>((m.uordblks + m.hblkhd) / 1024)};
  }
  long GrowthSince(const Footprint& before) const {
    return std::max(rss_kb - before.rss_kb, heap_kb - before.heap_kb);
  }
};

}  // namespace

long RssKb(int pid) {
  std::ifstream in(pid == 0 ? std::string("/proc/self/status") : "/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

long DirectMrsKb(const std::string& device, uint64_t n, std::string* error) {
  Device d;
  if (!d.Open(device, error)) return -1;
  std::vector<ibv_mr*> mrs;
  mrs.reserve(n);  // the vector's own memory is allocated before the first reading
  const Footprint before = Footprint::Now();
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND;
  for (uint64_t i = 0; i < n && error->empty(); ++i) {
    void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      *error = Errno("mmap", errno);
      break;
    }
    ibv_mr* mr = ibv_reg_mr(d.pd, p, 4096, access);
    if (!mr) {
      *error = Errno("ibv_reg_mr (number " + std::to_string(i + 1) + ")", errno);
      munmap(p, 4096);
      break;
    }
    mrs.push_back(mr);
  }
  const long growth = Footprint::Now().GrowthSince(before);
  for (ibv_mr* mr : mrs) {
    void* p = mr->addr;
    ibv_dereg_mr(mr);
    munmap(p, 4096);
  }
  return error->empty() ? growth : -1;
}

long DirectMwsKb(const std::string& device, uint64_t n, std::string* error) {
  Device d;
  if (!d.Open(device, error)) return -1;
  std::vector<ibv_mw*> mws;
  mws.reserve(n);
  const Footprint before = Footprint::Now();
  for (uint64_t i = 0; i < n; ++i) {
    ibv_mw* mw = ibv_alloc_mw(d.pd, IBV_MW_TYPE_1);
    if (!mw) {
      *error = Errno("ibv_alloc_mw (number " + std::to_string(i + 1) + ")", errno);
      break;
    }
    mws.push_back(mw);
  }
  const long growth = Footprint::Now().GrowthSince(before);
  for (ibv_mw* mw : mws) ibv_dealloc_mw(mw);
  return error->empty() ? growth : -1;
}

long DirectCmIdsKb(uint64_t n, std::string* error) {
  rdma_event_channel* ch = rdma_create_event_channel();
  if (!ch) {
    *error = Errno("rdma_create_event_channel", errno);
    return -1;
  }
  std::vector<rdma_cm_id*> ids;
  ids.reserve(n);
  const Footprint before = Footprint::Now();
  for (uint64_t i = 0; i < n; ++i) {
    rdma_cm_id* id = nullptr;
    if (rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP) != 0) {
      *error = Errno("rdma_create_id (number " + std::to_string(i + 1) + ")", errno);
      break;
    }
    ids.push_back(id);
  }
  const long growth = Footprint::Now().GrowthSince(before);
  for (rdma_cm_id* id : ids) rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
  return error->empty() ? growth : -1;
}

}  // namespace rdmad::bench::scale
