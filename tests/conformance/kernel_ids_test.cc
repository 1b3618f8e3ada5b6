// ListKernelIds against the kernel itself (run in the Soft-RoCE guest by run-conformance.sh, against the
// rdmad it started): a PD, two regions (one of a length no other region of rdmad's has), a QP and a listening
// rdma_cm id made through rdmad, then rdmad's numbers for them checked against `rdma -j resource show` for
// rdmad's pid: the region's mrn has its length (and its lkey where the tool shows keys) and its PD's pdn;
// the QP's qpn is an lqpn of that PD; the id's cm-idn listens on its port. rdmad runs as root here, so the
// dump has keys (the fake fabric's unit test covers the join without them).
// Environment: RDMAD_TARGET (unix:PATH), RDMAD_PID, RDMAD_ADDR (the guest's address, default 10.0.2.15).
// Threads: the test's main thread only.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "client/client.h"

namespace rdmad {
namespace {

std::string Env(const char* name, const std::string& otherwise) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : otherwise;
}

// rdmad's threads: the kernel reports the thread that made an object (while it lives), not the process.
std::set<int64_t> Threads(int64_t pid) {
  std::set<int64_t> tids;
  FILE* p = popen(absl::StrCat("ls /proc/", pid, "/task").c_str(), "r");
  if (p == nullptr) return tids;
  long long tid = 0;
  while (fscanf(p, "%lld", &tid) == 1) tids.insert(tid);
  pclose(p);
  return tids;
}

// `rdma -j resource show KIND`'s entries on rxe0 of rdmad's threads, and those whose thread exited (no pid).
std::vector<nlohmann::json> RdmaShow(const std::string& kind, int64_t pid) {
  const std::set<int64_t> tids = Threads(pid);
  std::string out;
  FILE* p = popen(("rdma -j resource show " + kind).c_str(), "r");
  if (p == nullptr) return {};
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  pclose(p);
  std::vector<nlohmann::json> entries;
  nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  if (!j.is_array()) {
    ADD_FAILURE() << "rdma -j resource show " << kind << ": " << out;
    return entries;
  }
  for (const nlohmann::json& e : j) {
    if (e.value("ifname", "") != "rxe0" || e.contains("kernel")) continue;
    if (!e.contains("pid") || tids.count(e["pid"].get<int64_t>())) entries.push_back(e);
  }
  return entries;
}

const nlohmann::json* Find(const std::vector<nlohmann::json>& entries, const char* key, uint32_t value) {
  for (const nlohmann::json& e : entries) {
    if (e.contains(key) && e[key].get<uint32_t>() == value) return &e;
  }
  return nullptr;
}

TEST(KernelIds, RdmadsNumbersAreTheKernelsForItsPid) {
  const std::string pid_text = Env("RDMAD_PID", "");
  ASSERT_FALSE(pid_text.empty()) << "RDMAD_PID is not set";
  const int64_t pid = std::stoll(pid_text);
  client::Client::Options o;
  o.target = Env("RDMAD_TARGET", "unix:/run/rdmad/rdmad.sock");
  client::Client c(o);

  v1::CreatePdRequest pd_req;
  pd_req.set_device("rxe0");
  pd_req.set_label("kernel-ids");
  absl::StatusOr<v1::ProtectionDomain> pd = c.CreatePd(pd_req);
  ASSERT_TRUE(pd.ok()) << pd.status();
  std::map<std::string, v1::MemoryRegion> mrs;
  for (uint64_t size : {uint64_t{3 * 4096 + 8192 * 7}, uint64_t{4096}}) {
    v1::RegisterMrRequest r;
    r.set_pd(pd->name());
    r.mutable_source()->mutable_anonymous()->set_size(size);
    r.add_access(v1::LOCAL_WRITE);
    absl::StatusOr<v1::MemoryRegion> mr = c.RegisterMr(r);
    ASSERT_TRUE(mr.ok()) << mr.status();
    mrs[mr->name()] = *mr;
  }
  v1::CreateQpRequest qp_req;
  qp_req.set_pd(pd->name());
  absl::StatusOr<v1::QueuePair> qp = c.CreateQp(qp_req);
  ASSERT_TRUE(qp.ok()) << qp.status();
  v1::CreateCmIdRequest id_req;
  id_req.set_pd(pd->name());
  absl::StatusOr<v1::CmId> id = c.CreateCmId(id_req);
  ASSERT_TRUE(id.ok()) << id.status();
  v1::ListenRequest listen;
  listen.set_name(id->name());
  listen.mutable_address()->set_address(Env("RDMAD_ADDR", "10.0.2.15"));
  listen.mutable_address()->set_port(7539);
  absl::StatusOr<v1::CmId> listening = c.Listen(listen);
  ASSERT_TRUE(listening.ok()) << listening.status();

  absl::StatusOr<v1::ListKernelIdsResponse> r = c.ListKernelIds("rxe0");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->keyed()) << "rdmad runs as root: the dump should carry the regions' keys";
  std::map<std::string, uint32_t> ids;
  for (const v1::KernelId& k : r->ids()) ids[k.name()] = k.number();
  std::printf("ListKernelIds: %s\n", r->ShortDebugString().c_str());

  const std::vector<nlohmann::json> kmrs = RdmaShow("mr", pid), kpds = RdmaShow("pd", pid),
                                    kqps = RdmaShow("qp", pid), kids = RdmaShow("cm_id", pid);
  ASSERT_TRUE(ids.count(pd->name())) << r->DebugString();
  const uint32_t pdn = ids[pd->name()];
  EXPECT_NE(Find(kpds, "pdn", pdn), nullptr) << "pdn " << pdn;
  for (const auto& [name, mr] : mrs) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(ids.count(name)) << r->DebugString();
    const nlohmann::json* k = Find(kmrs, "mrn", ids[name]);
    ASSERT_NE(k, nullptr) << "mrn " << ids[name] << " is not rdmad's";
    EXPECT_EQ((*k)["mrlen"].get<uint64_t>(), mr.length()) << k->dump();
    EXPECT_EQ((*k)["pdn"].get<uint32_t>(), pdn) << k->dump();
    if (k->contains("lkey")) {
      const nlohmann::json& lkey = (*k)["lkey"];
      // iproute2 prints keys as hex digits without 0x ("945" is 0x945).
      const uint32_t shown = lkey.is_string() ? static_cast<uint32_t>(std::stoul(lkey.get<std::string>(), nullptr, 16))
                                              : lkey.get<uint32_t>();
      EXPECT_EQ(shown, mr.lkey()) << k->dump();
    }
  }
  ASSERT_TRUE(ids.count(qp->name())) << r->DebugString();
  EXPECT_EQ(ids[qp->name()], qp->local().qpn());
  const nlohmann::json* kqp = Find(kqps, "lqpn", ids[qp->name()]);
  ASSERT_NE(kqp, nullptr) << "lqpn " << ids[qp->name()];
  EXPECT_EQ((*kqp)["pdn"].get<uint32_t>(), pdn) << kqp->dump();
  std::string shown;
  for (const nlohmann::json& e : kids) shown += e.dump() + "\n";
  ASSERT_TRUE(ids.count(id->name())) << r->DebugString() << "\n" << listening->DebugString() << "\n" << shown;
  const nlohmann::json* kid = Find(kids, "cm-idn", ids[id->name()]);
  ASSERT_NE(kid, nullptr) << "cm-idn " << ids[id->name()];
  EXPECT_EQ(kid->value("src-addr", ""), absl::StrCat(Env("RDMAD_ADDR", "10.0.2.15"), ":7539")) << kid->dump();
  // rdmad's own data-plane listener (cmids/1, made at start-up) is on the same device: it is never named.
  EXPECT_EQ(ids.count("cmids/1"), 0u) << r->DebugString();

  EXPECT_TRUE(c.DeleteCmId(id->name()).ok());
  EXPECT_TRUE(c.DeletePd(pd->name(), true, false).ok());
}

}  // namespace
}  // namespace rdmad
