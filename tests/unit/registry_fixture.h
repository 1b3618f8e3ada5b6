// The fixture and request builders of the registry's unit tests (registry_*_test.cc): RegistryTest, a
// rdmad::Registry over the in-memory fake fabric (tests/unit/fake_fabric.h) with two devices, rxe0 (kEmu: no
// native rereg, the emulated path) and rxe1 (kNat: native ibv_rereg_mr), and one allowed file root. Reset
// starts over with other devices or options. Every test ends (TearDown) by destroying the registry and
// checking that the fake saw no verbs-rule violation and that nothing is left allocated. Brings in the
// registry, the fake fabric and TempDir for the tests that include it.
//
// Threads: the fixture belongs to the test's thread; the registry it holds may be called from any thread.
#ifndef RDMAD_TESTS_UNIT_REGISTRY_FIXTURE_H_
#define RDMAD_TESTS_UNIT_REGISTRY_FIXTURE_H_

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "server/registry/registry.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/fake_fabric.h"

namespace rdmad::registry_test {

using ::rdmad::fake::FakeLedger;
using ::rdmad::test::TempDir;
using ::testing::IsEmpty;

inline constexpr char kEmu[] = "devices/rxe0";  // no native rereg: the emulated path
inline constexpr char kNat[] = "devices/rxe1";  // native ibv_rereg_mr
inline constexpr uint64_t kPage = 4096;

using Access = std::vector<v1::Access>;
inline const Access kFull = {v1::LOCAL_WRITE, v1::REMOTE_READ, v1::REMOTE_WRITE, v1::MW_BIND};

template <typename R>
void SetAccess(R* r, const Access& access) {
  r->clear_access();
  for (v1::Access a : access) r->add_access(a);
}

template <typename T>
T OkOr(absl::StatusOr<T> s, const char* what) {
  if (!s.ok()) {
    ADD_FAILURE() << what << ": " << s.status();
    return T();
  }
  return *std::move(s);
}
// The value of a StatusOr that must be OK (a test failure otherwise, and a default value).
#define OK(expr) OkOr((expr), #expr)

inline std::string S(uint64_t id) { return absl::StrCat(id); }

inline v1::CreatePdRequest PdReq(const std::string& device, const std::string& label = "") {
  v1::CreatePdRequest r;
  r.set_device(device);
  r.set_label(label);
  return r;
}

inline v1::RegisterMrRequest AnonReq(const std::string& pd, uint64_t size, const Access& access = kFull) {
  v1::RegisterMrRequest r;
  r.set_pd(pd);
  r.mutable_source()->mutable_anonymous()->set_size(size);
  SetAccess(&r, access);
  return r;
}

inline v1::RegisterMrRequest FileReq(const std::string& pd, const std::string& path, uint64_t offset,
                                     uint64_t length, const Access& access = kFull) {
  v1::RegisterMrRequest r;
  r.set_pd(pd);
  auto* f = r.mutable_source()->mutable_file();
  f->set_path(path);
  f->set_offset(offset);
  f->set_length(length);
  SetAccess(&r, access);
  return r;
}

inline v1::BindMwRequest BindReq(const std::string& mw, const std::string& mr, uint64_t offset, uint64_t length,
                                 const Access& access = {v1::REMOTE_READ}, const std::string& qp = "",
                                 bool zero_based = false) {
  v1::BindMwRequest r;
  r.set_name(mw);
  r.set_mr(mr);
  r.set_offset(offset);
  r.set_length(length);
  SetAccess(&r, access);
  r.set_qp(qp);
  r.set_zero_based(zero_based);
  return r;
}

inline v1::ReregisterMrRequest ReregReq(const std::string& mr, std::initializer_list<v1::ReregFlag> flags) {
  v1::ReregisterMrRequest r;
  r.set_name(mr);
  for (v1::ReregFlag f : flags) r.add_flags(f);
  return r;
}

class RegistryTest : public ::testing::Test {
 protected:
  RegistryTest() { Reset({fake::MakeDeviceInfo("rxe0", false), fake::MakeDeviceInfo("rxe1", true)}); }

  void TearDown() override { Finish(); }

  void Reset(std::vector<fabric::DeviceInfo> devices, uint64_t max_mr_bytes = 0, Memlock memlock = Memlock()) {
    Finish();
    ledger_ = std::make_shared<FakeLedger>();
    Registry::Options options;
    options.allowed_file_roots = {root_.path()};
    options.allow_disk_files = true;  // TempDir is on TEST_TMPDIR's filesystem, usually a disk
    options.max_mr_bytes = max_mr_bytes;
    options.memlock = std::move(memlock);
    registry_ = std::make_unique<Registry>(std::make_unique<fake::FakeFabric>(std::move(devices), ledger_),
                                           options);
  }

  // Destroys the registry; the fake must have seen no rule violation and nothing may remain allocated.
  void Finish() {
    if (!registry_) return;
    registry_.reset();
    EXPECT_THAT(ledger_->violations(), IsEmpty());
    EXPECT_EQ(Live(), "pds=0 mrs=0 mws=0 qps=0");
    EXPECT_EQ(ledger_->live().devices, 0);
  }

  // Live fake objects (QPs include rdmad's internal bind QPs).
  std::string Live() const {
    FakeLedger::Counts c = ledger_->live();
    return absl::StrCat("pds=", c.pds, " mrs=", c.mrs, " mws=", c.mws, " qps=", c.qps);
  }

  std::string NewPd(const std::string& device = kEmu) { return OK(registry_->CreatePd(PdReq(device))).name(); }
  v1::MemoryRegion NewMr(const std::string& pd, uint64_t size = 4 * kPage, const Access& access = kFull) {
    return OK(registry_->RegisterMr(AnonReq(pd, size, access)));
  }
  v1::MemoryWindow NewMw(const std::string& pd, v1::MwType type) {
    v1::AllocMwRequest r;
    r.set_pd(pd);
    r.set_type(type);
    return OK(registry_->AllocMw(r));
  }
  v1::QueuePair NewQp(const std::string& pd, bool connect = true) {
    v1::CreateQpRequest r;
    r.set_pd(pd);
    v1::QueuePair qp = OK(registry_->CreateQp(r));
    if (!connect) return qp;
    return OK(registry_->ConnectQp(ConnectReq(qp.name())));
  }
  static v1::ConnectQpRequest ConnectReq(const std::string& qp, uint32_t qpn = 0x4242, uint32_t psn = 7) {
    v1::ConnectQpRequest r;
    r.set_name(qp);
    r.mutable_remote()->set_qpn(qpn);
    r.mutable_remote()->set_psn(psn);
    r.mutable_remote()->set_gid("0000:0000:0000:0000:0000:ffff:0a00:0002");
    return r;
  }
  v1::MemoryRegion Mr(const std::string& name) { return OK(registry_->GetMr(name)); }
  v1::MemoryWindow Mw(const std::string& name) { return OK(registry_->GetMw(name)); }
  v1::ProtectionDomain Pd(const std::string& name) { return OK(registry_->GetPd(name)); }
  v1::QueuePair Qp(const std::string& name) { return OK(registry_->GetQp(name)); }

  // Fake ids of every QP the fake created, in creation order (user QPs and internal bind QPs).
  std::vector<uint64_t> CreatedQpIds() const {
    std::vector<uint64_t> ids;
    for (const auto& e : ledger_->events_of({"create_qp"})) ids.push_back(std::stoull(e.substr(e.find(' ') + 1)));
    return ids;
  }

  TempDir root_;  // the one allowed file root
  std::shared_ptr<FakeLedger> ledger_;
  std::unique_ptr<Registry> registry_;
};

}  // namespace rdmad::registry_test

#endif  // RDMAD_TESTS_UNIT_REGISTRY_FIXTURE_H_
