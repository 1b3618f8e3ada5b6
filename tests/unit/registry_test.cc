// Unit tests of rdmad::Registry over the in-memory fake fabric (tests/unit/fake_fabric.h): every rule the
// registry promises (server/registry/registry.h, proto/rdmad/v1/rdmad.proto), through its public API.
//
// Every test ends (TearDown) by destroying the registry and checking that the fake saw no verbs-rule
// violation and that nothing is left allocated.
#include "server/registry/registry.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "server/common/status.h"
#include "server/rpc/status.h"
#include "tests/support/server_status.h"
#include "tests/support/status.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/fake_fabric.h"

namespace rdmad {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::rdmad::fake::FakeLedger;
using ::rdmad::test::IsError;
using ::rdmad::test::TempDir;
using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;
using ::testing::UnorderedElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kEmu[] = "devices/rxe0";  // no native rereg: the emulated path
constexpr char kNat[] = "devices/rxe1";  // native ibv_rereg_mr
constexpr uint64_t kPage = 4096;

using Access = std::vector<v1::Access>;
const Access kFull = {v1::LOCAL_WRITE, v1::REMOTE_READ, v1::REMOTE_WRITE, v1::MW_BIND};

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

std::string S(uint64_t id) { return absl::StrCat(id); }

v1::CreatePdRequest PdReq(const std::string& device, const std::string& label = "") {
  v1::CreatePdRequest r;
  r.set_device(device);
  r.set_label(label);
  return r;
}

v1::RegisterMrRequest AnonReq(const std::string& pd, uint64_t size, const Access& access = kFull) {
  v1::RegisterMrRequest r;
  r.set_pd(pd);
  r.mutable_source()->mutable_anonymous()->set_size(size);
  SetAccess(&r, access);
  return r;
}

v1::RegisterMrRequest FileReq(const std::string& pd, const std::string& path, uint64_t offset, uint64_t length,
                              const Access& access = kFull) {
  v1::RegisterMrRequest r;
  r.set_pd(pd);
  auto* f = r.mutable_source()->mutable_file();
  f->set_path(path);
  f->set_offset(offset);
  f->set_length(length);
  SetAccess(&r, access);
  return r;
}

v1::BindMwRequest BindReq(const std::string& mw, const std::string& mr, uint64_t offset, uint64_t length,
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

v1::ReregisterMrRequest ReregReq(const std::string& mr, std::initializer_list<v1::ReregFlag> flags) {
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

// ---------------------------------------------------------------------------------------------------------
// Devices

TEST_F(RegistryTest, ListsDevicesInNameOrderAndGetsThemByEitherName) {
  std::vector<v1::Device> devices = registry_->ListDevices();
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0].name(), "devices/rxe0");
  EXPECT_EQ(devices[1].name(), "devices/rxe1");
  EXPECT_FALSE(devices[0].caps().native_rereg());
  EXPECT_TRUE(devices[1].caps().native_rereg());
  ASSERT_EQ(devices[0].ports_size(), 1);
  EXPECT_EQ(devices[0].ports(0).gids_size(), 2);
  EXPECT_EQ(devices[0].ports(0).gids(1).type(), "RoCEv2");

  EXPECT_EQ(OK(registry_->GetDevice("devices/rxe1")).name(), "devices/rxe1");
  EXPECT_EQ(OK(registry_->GetDevice("rxe1")).name(), "devices/rxe1");
  EXPECT_TRUE(IsError(registry_->GetDevice("devices/mlx5_0"), absl::StatusCode::kNotFound, "name"));
  EXPECT_TRUE(IsError(registry_->GetDevice(""), absl::StatusCode::kInvalidArgument, "name"));
}

// ---------------------------------------------------------------------------------------------------------
// Names

TEST_F(RegistryTest, NamesCountUpPerKindAndAreNeverReused) {
  EXPECT_EQ(NewPd(), "pds/1");
  EXPECT_EQ(NewPd(), "pds/2");
  v1::DeletePdRequest del;
  del.set_name("pds/2");
  ASSERT_OK(registry_->DeletePd(del).status());
  EXPECT_EQ(NewPd(), "pds/3");

  EXPECT_EQ(NewMr("pds/1").name(), "mrs/1");
  ASSERT_OK(registry_->DeregisterMr("mrs/1"));
  EXPECT_EQ(NewMr("pds/1").name(), "mrs/2");

  EXPECT_EQ(NewMw("pds/1", v1::TYPE_1).name(), "mws/1");
  ASSERT_OK(registry_->DeallocMw("mws/1"));
  EXPECT_EQ(NewMw("pds/1", v1::TYPE_2).name(), "mws/2");

  EXPECT_EQ(NewQp("pds/1", false).name(), "qps/1");
  ASSERT_OK(registry_->DeleteQp("qps/1"));
  EXPECT_EQ(NewQp("pds/1", false).name(), "qps/2");

  // A cascade does not give numbers back either.
  del.set_name("pds/1");
  del.set_cascade(true);
  ASSERT_OK(registry_->DeletePd(del).status());
  EXPECT_EQ(NewPd(), "pds/4");
  const std::string pd = "pds/4";
  EXPECT_EQ(NewMr(pd).name(), "mrs/3");
  EXPECT_EQ(NewMw(pd, v1::TYPE_1).name(), "mws/3");
  EXPECT_EQ(NewQp(pd, false).name(), "qps/3");

  // Deleted names are NOT_FOUND, not reused.
  EXPECT_TRUE(IsError(registry_->GetPd("pds/2"), absl::StatusCode::kNotFound, "name"));
  EXPECT_TRUE(IsError(registry_->GetMr("mrs/1"), absl::StatusCode::kNotFound, "name"));
}

TEST_F(RegistryTest, MalformedNamesAreInvalidArgumentNamingTheField) {
  NewPd();
  for (const char* bad : {"", "pds", "pds/", "pds/0", "pds/x", "pds/-1", "pds/+1", "pds/1/2", "pds/ 1", "pds/1 ",
                          "mrs/1", "PDS/1", "/pds/1", "pds/99999999999999999999999"}) {
    SCOPED_TRACE(bad);
    EXPECT_TRUE(IsError(registry_->GetPd(bad), absl::StatusCode::kInvalidArgument, "name"));
  }
  EXPECT_TRUE(IsError(registry_->GetMr("pds/1"), absl::StatusCode::kInvalidArgument, "name"));
  EXPECT_TRUE(IsError(registry_->GetMw("mw/1"), absl::StatusCode::kInvalidArgument, "name"));
  EXPECT_TRUE(IsError(registry_->GetQp("qps/a"), absl::StatusCode::kInvalidArgument, "name"));
  EXPECT_TRUE(IsError(registry_->DeregisterMr("mrs"), absl::StatusCode::kInvalidArgument, "name"));
  EXPECT_TRUE(IsError(registry_->DeleteQp(""), absl::StatusCode::kInvalidArgument, "name"));
  EXPECT_TRUE(IsError(registry_->DeallocMw("qps/1"), absl::StatusCode::kInvalidArgument, "name"));
  EXPECT_TRUE(IsError(registry_->InvalidateMw("mws/"), absl::StatusCode::kInvalidArgument, "name"));
  // The field is the request's own: pd, mr, qp, device.
  EXPECT_TRUE(IsError(registry_->RegisterMr(AnonReq("pd/1", kPage)), absl::StatusCode::kInvalidArgument, "pd"));
  EXPECT_TRUE(IsError(registry_->CreatePd(PdReq("")), absl::StatusCode::kInvalidArgument, "device"));
  v1::ListMrsRequest list;
  list.set_pd("1");
  EXPECT_TRUE(IsError(registry_->ListMrs(list), absl::StatusCode::kInvalidArgument, "pd"));
  v1::MemoryWindow mw = NewMw("pds/1", v1::TYPE_1);
  EXPECT_TRUE(IsError(registry_->BindMw(BindReq(mw.name(), "mrs/x", 0, 1)), absl::StatusCode::kInvalidArgument,
                      "mr"));
  v1::MemoryRegion mr = NewMr("pds/1");
  EXPECT_TRUE(IsError(registry_->BindMw(BindReq(mw.name(), mr.name(), 0, 1, {v1::REMOTE_READ}, "qp/1")),
                      absl::StatusCode::kInvalidArgument, "qp"));
  EXPECT_EQ(ledger_->calls("bind"), 0);
}

TEST_F(RegistryTest, UnknownNamesAreNotFoundNamingTheField) {
  const std::string pd = NewPd();
  EXPECT_TRUE(IsError(registry_->GetPd("pds/2"), absl::StatusCode::kNotFound, "name"));
  EXPECT_TRUE(IsError(registry_->GetMr("mrs/1"), absl::StatusCode::kNotFound, "name"));
  EXPECT_TRUE(IsError(registry_->GetMw("mws/1"), absl::StatusCode::kNotFound, "name"));
  EXPECT_TRUE(IsError(registry_->GetQp("qps/1"), absl::StatusCode::kNotFound, "name"));
  EXPECT_TRUE(IsError(registry_->DeregisterMr("mrs/7"), absl::StatusCode::kNotFound, "name"));
  EXPECT_TRUE(IsError(registry_->DeleteQp("qps/7"), absl::StatusCode::kNotFound, "name"));
  EXPECT_TRUE(IsError(registry_->DeallocMw("mws/7"), absl::StatusCode::kNotFound, "name"));
  EXPECT_TRUE(IsError(registry_->InvalidateMw("mws/7"), absl::StatusCode::kNotFound, "name"));
  v1::DeletePdRequest del;
  del.set_name("pds/7");
  EXPECT_TRUE(IsError(registry_->DeletePd(del), absl::StatusCode::kNotFound, "name"));
  EXPECT_TRUE(IsError(registry_->RegisterMr(AnonReq("pds/7", kPage)), absl::StatusCode::kNotFound, "pd"));
  EXPECT_TRUE(IsError(registry_->CreatePd(PdReq("devices/mlx5_0")), absl::StatusCode::kNotFound, "device"));
  v1::CreateQpRequest qp;
  qp.set_pd("pds/7");
  EXPECT_TRUE(IsError(registry_->CreateQp(qp), absl::StatusCode::kNotFound, "pd"));
  v1::AllocMwRequest mw;
  mw.set_pd("pds/7");
  mw.set_type(v1::TYPE_1);
  EXPECT_TRUE(IsError(registry_->AllocMw(mw), absl::StatusCode::kNotFound, "pd"));
  v1::ListMwsRequest list;
  list.set_pd("pds/7");
  EXPECT_TRUE(IsError(registry_->ListMws(list), absl::StatusCode::kNotFound, "pd"));
  EXPECT_TRUE(IsError(registry_->ConnectQp(ConnectReq("qps/7")), absl::StatusCode::kNotFound, "name"));
  // The message names the missing resource.
  absl::Status s = registry_->GetMr("mrs/12345").status();
  EXPECT_THAT(std::string(s.message()), HasSubstr("mrs/12345"));
  // Nothing reached the fabric except the one PD.
  EXPECT_EQ(ledger_->calls("reg_mr"), 0);
  EXPECT_EQ(ledger_->calls("alloc_mw"), 0);
  EXPECT_EQ(ledger_->calls("create_qp"), 0);
  EXPECT_EQ(Live(), "pds=1 mrs=0 mws=0 qps=0");
}

// ---------------------------------------------------------------------------------------------------------
// Protection domains

TEST_F(RegistryTest, CreatePdValidatesLabelAndReportsAllocFailure) {
  EXPECT_TRUE(IsError(registry_->CreatePd(PdReq(kEmu, std::string(129, 'x'))), absl::StatusCode::kInvalidArgument,
                      "label"));
  EXPECT_EQ(ledger_->calls("alloc_pd"), 0);
  v1::ProtectionDomain pd = OK(registry_->CreatePd(PdReq("rxe0", std::string(128, 'y'))));
  EXPECT_EQ(pd.device(), "devices/rxe0");
  EXPECT_EQ(pd.label(), std::string(128, 'y'));

  ledger_->FailNextAllocPd(ENOMEM);
  absl::Status s = registry_->CreatePd(PdReq(kEmu)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(ErrnoOf(s), ENOMEM);
  EXPECT_EQ(CallOf(s), "ibv_alloc_pd");
  EXPECT_EQ(registry_->ListPds().size(), 1u);
  EXPECT_EQ(Live(), "pds=1 mrs=0 mws=0 qps=0");
}

TEST_F(RegistryTest, DeletePdIsRefusedWhileItHoldsAnything) {
  const std::string a = NewPd(), b = NewPd(), c = NewPd();
  NewMr(a);
  NewMw(b, v1::TYPE_1);
  NewQp(c, false);
  const size_t events = ledger_->events().size();
  for (const std::string& pd : {a, b, c}) {
    SCOPED_TRACE(pd);
    v1::DeletePdRequest del;
    del.set_name(pd);
    absl::StatusOr<v1::DeletePdResponse> r = registry_->DeletePd(del);
    EXPECT_TRUE(IsError(r, absl::StatusCode::kFailedPrecondition, "name"));
    EXPECT_EQ(ErrnoOf(r.status()), EBUSY);
    EXPECT_EQ(DetailOf(r.status()).errno_name(), "EBUSY");
  }
  EXPECT_EQ(ledger_->events().size(), events);  // nothing released
  EXPECT_EQ(registry_->ListPds().size(), 3u);
  EXPECT_EQ(Pd(a).mr_count(), 1u);
  EXPECT_EQ(Pd(b).mw_count(), 1u);
  EXPECT_EQ(Pd(c).qp_count(), 1u);
}

TEST_F(RegistryTest, DeletePdCascadeReleasesWindowsThenRegionsThenQpsThenThePd) {
  const std::string pd = NewPd();
  const std::string other = NewPd();
  v1::MemoryRegion other_mr = NewMr(other);

  v1::MemoryRegion mr1 = NewMr(pd), mr2 = NewMr(pd);
  v1::QueuePair qp1 = NewQp(pd), qp2 = NewQp(pd);
  v1::MemoryWindow w1 = NewMw(pd, v1::TYPE_1), w2 = NewMw(pd, v1::TYPE_2);
  w1 = OK(registry_->BindMw(BindReq(w1.name(), mr1.name(), 0, kPage)));                       // internal bind QP
  w2 = OK(registry_->BindMw(BindReq(w2.name(), mr2.name(), 0, kPage, {v1::REMOTE_READ}, qp1.name())));
  ASSERT_TRUE(w1.bound() && w2.bound());

  const uint64_t fw1 = ledger_->MwIdByRkey(w1.rkey()), fw2 = ledger_->MwIdByRkey(w2.rkey());
  const uint64_t fb1 = ledger_->MwBoundMr(fw1), fb2 = ledger_->MwBoundMr(fw2);  // the bounds MRs
  const uint64_t fm1 = ledger_->MrIdByLkey(mr1.lkey()), fm2 = ledger_->MrIdByLkey(mr2.lkey());
  const uint64_t fq1 = ledger_->QpIdByQpn(qp1.local().qpn()), fq2 = ledger_->QpIdByQpn(qp2.local().qpn());
  ASSERT_TRUE(fw1 && fw2 && fb1 && fb2 && fm1 && fm2 && fq1 && fq2);
  std::vector<uint64_t> created = CreatedQpIds();
  ASSERT_EQ(created.size(), 3u);  // two user QPs and the PD's bind QP
  uint64_t bind_qp = 0;
  for (uint64_t id : created) {
    if (id != fq1 && id != fq2) bind_qp = id;
  }
  ledger_->ClearEvents();

  v1::DeletePdRequest del;
  del.set_name(pd);
  del.set_cascade(true);
  v1::DeletePdResponse r = OK(registry_->DeletePd(del));
  EXPECT_THAT(r.deleted(), ElementsAre("mws/1", "mws/2", "mrs/2", "mrs/3", "qps/1", "qps/2", "pds/1"));
  EXPECT_THAT(ledger_->events_of({"dealloc_mw", "dereg_mr", "destroy_qp", "dealloc_pd"}),
              ElementsAre("dealloc_mw " + S(fw1), "dereg_mr " + S(fb1),  // each window, then its bounds MR
                          "dealloc_mw " + S(fw2), "dereg_mr " + S(fb2),  //
                          "dereg_mr " + S(fm1), "dereg_mr " + S(fm2),    // the regions
                          "destroy_qp " + S(fq1), "destroy_qp " + S(fq2), "destroy_qp " + S(bind_qp), "dealloc_pd 1"));
  EXPECT_THAT(ledger_->violations(), IsEmpty());
  EXPECT_TRUE(IsError(registry_->GetPd(pd), absl::StatusCode::kNotFound, "name"));
  EXPECT_TRUE(IsError(registry_->GetMw(w1.name()), absl::StatusCode::kNotFound, "name"));
  EXPECT_TRUE(IsError(registry_->GetQp(qp1.name()), absl::StatusCode::kNotFound, "name"));
  // The other PD is untouched.
  EXPECT_EQ(Pd(other).mr_count(), 1u);
  EXPECT_TRUE(MessageDifferencer::Equals(Mr(other_mr.name()), other_mr));
  EXPECT_EQ(Live(), "pds=1 mrs=1 mws=0 qps=0");
}

TEST_F(RegistryTest, DeletePdCascadeStopsAtAnMrThatCannotBeReleased) {
  const std::string pd = NewPd();
  v1::MemoryRegion mr1 = NewMr(pd), mr2 = NewMr(pd);
  v1::MemoryWindow w = NewMw(pd, v1::TYPE_1);
  ASSERT_OK(registry_->BindMw(BindReq(w.name(), mr1.name(), 0, kPage)).status());
  ledger_->FailNextRelease(EIO);

  v1::DeletePdRequest del;
  del.set_name(pd);
  del.set_cascade(true);
  absl::Status s = registry_->DeletePd(del).status();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(ErrnoOf(s), EIO);
  EXPECT_EQ(CallOf(s), "ibv_dereg_mr");
  EXPECT_THAT(std::string(s.message()), HasSubstr("cascade stopped at mrs/1"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("mws/1"));  // released so far
  // The window is gone, both regions and the PD remain, with consistent counts.
  v1::ProtectionDomain p = Pd(pd);
  EXPECT_EQ(p.mw_count(), 0u);
  EXPECT_EQ(p.mr_count(), 2u);
  EXPECT_EQ(Mr(mr1.name()).bound_windows(), 0u);
  EXPECT_EQ(Live(), "pds=1 mrs=2 mws=0 qps=1");  // qps: the bind QP

  v1::DeletePdResponse r = OK(registry_->DeletePd(del));
  EXPECT_THAT(r.deleted(), ElementsAre("mrs/1", "mrs/2", "pds/1"));
  EXPECT_EQ(Live(), "pds=0 mrs=0 mws=0 qps=0");
}

TEST_F(RegistryTest, DestructorReleasesWindowsThenRegionsThenQpsThenPdsThenDevices) {
  struct Made {
    v1::MemoryRegion mr;
    v1::QueuePair qp;
    v1::MemoryWindow w1, w2;
  };
  std::vector<Made> made;
  for (const char* device : {kEmu, kNat}) {
    const std::string pd = NewPd(device);
    Made m;
    m.mr = NewMr(pd);
    m.qp = NewQp(pd);
    m.w1 = NewMw(pd, v1::TYPE_1);
    m.w2 = NewMw(pd, v1::TYPE_2);
    m.w1 = OK(registry_->BindMw(BindReq(m.w1.name(), m.mr.name(), 0, kPage)));
    m.w2 = OK(registry_->BindMw(BindReq(m.w2.name(), m.mr.name(), kPage, kPage, {v1::REMOTE_WRITE}, m.qp.name())));
    made.push_back(m);
  }
  std::set<uint64_t> user_qps;
  for (const Made& m : made) user_qps.insert(ledger_->QpIdByQpn(m.qp.local().qpn()));
  std::vector<uint64_t> bind_qps;
  for (uint64_t id : CreatedQpIds()) {
    if (!user_qps.count(id)) bind_qps.push_back(id);
  }
  ASSERT_EQ(bind_qps.size(), 2u);
  std::map<std::string, std::string> bounds_of;  // "dealloc_mw W" -> "dereg_mr B" (W's bounds MR)
  for (const Made& m : made) {
    for (const v1::MemoryWindow* w : {&m.w1, &m.w2}) {
      const uint64_t id = ledger_->MwIdByRkey(w->rkey());
      bounds_of["dealloc_mw " + S(id)] = "dereg_mr " + S(ledger_->MwBoundMr(id));
    }
  }
  ASSERT_EQ(bounds_of.size(), 4u);
  auto mr = [&](const v1::MemoryRegion& m) { return "dereg_mr " + S(ledger_->MrIdByLkey(m.lkey())); };
  auto qp = [&](const v1::QueuePair& q) { return "destroy_qp " + S(ledger_->QpIdByQpn(q.local().qpn())); };
  const std::vector<std::string> regions = {mr(made[0].mr), mr(made[1].mr)};
  const std::vector<std::string> qps = {qp(made[0].qp), qp(made[1].qp)};
  ledger_->ClearEvents();
  registry_.reset();
  // Within a kind the order is the registry's business; across kinds it is fixed. Each window's bounds MR
  // goes right after the window; each PD's internal bind QP goes with (just before) its PD.
  std::vector<std::string> ev =
      ledger_->events_of({"dealloc_mw", "dereg_mr", "destroy_qp", "dealloc_pd", "close_device"});
  ASSERT_EQ(ev.size(), 18u) << ::testing::PrintToString(ev);
  std::set<std::string> windows_seen;
  for (size_t i = 0; i < 8; i += 2) {
    ASSERT_TRUE(bounds_of.count(ev[i])) << ev[i];
    EXPECT_EQ(ev[i + 1], bounds_of[ev[i]]);
    windows_seen.insert(ev[i]);
  }
  EXPECT_EQ(windows_seen.size(), 4u);
  ev.erase(ev.begin(), ev.begin() + 8);  // the windows are checked; now regions, QPs, PDs, devices
  EXPECT_THAT(std::vector<std::string>(ev.begin(), ev.begin() + 2), UnorderedElementsAreArray(regions));
  EXPECT_THAT(std::vector<std::string>(ev.begin() + 2, ev.begin() + 4), UnorderedElementsAreArray(qps));
  std::vector<std::string> pds(ev.begin() + 4, ev.begin() + 8);
  if (pds[1] == "dealloc_pd 2") {  // PD 2 went first
    std::swap(pds[0], pds[2]);
    std::swap(pds[1], pds[3]);
  }
  EXPECT_THAT(pds, ElementsAre("destroy_qp " + S(bind_qps[0]), "dealloc_pd 1", "destroy_qp " + S(bind_qps[1]),
                               "dealloc_pd 2"));
  EXPECT_THAT(std::vector<std::string>(ev.begin() + 8, ev.end()),
              UnorderedElementsAre("close_device rxe0", "close_device rxe1"));
  EXPECT_THAT(ledger_->violations(), IsEmpty());
  EXPECT_EQ(Live(), "pds=0 mrs=0 mws=0 qps=0");
}

// ---------------------------------------------------------------------------------------------------------
// Access rule (ibv_reg_mr(3)): REMOTE_WRITE / REMOTE_ATOMIC need LOCAL_WRITE, checked before the fabric.

TEST_F(RegistryTest, ARegistrationPastRlimitMemlockIsRefusedBeforeAnythingIsPinned) {
  // What the kernel counts as pinned (VmPin in rdmad): set by the test as the fake "pins".
  auto pinned = std::make_shared<std::atomic<uint64_t>>(0);
  Reset({fake::MakeDeviceInfo("rxe0", false), fake::MakeDeviceInfo("rxe1", true)}, 0,
        Memlock(16 * kPage, [pinned] { return pinned->load(); }));
  const std::string pd = NewPd();
  NewMr(pd, 8 * kPage);
  pinned->store(8 * kPage);
  absl::StatusOr<v1::MemoryRegion> over = registry_->RegisterMr(AnonReq(pd, 9 * kPage, kFull));
  ASSERT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted) << over.status();
  EXPECT_EQ(FieldOf(over.status()), "source");
  EXPECT_THAT(std::string(over.status().message()),
              ::testing::AllOf(HasSubstr("RLIMIT_MEMLOCK of 65536 bytes"), HasSubstr("32768 bytes pinned already"),
                    HasSubstr("LimitMEMLOCK=infinity"), HasSubstr("CAP_IPC_LOCK")));
  EXPECT_EQ(Live(), "pds=1 mrs=1 mws=0 qps=0");  // nothing reached the NIC
  NewMr(pd, 8 * kPage);  // exactly up to the limit is fine
  EXPECT_EQ(Live(), "pds=1 mrs=2 mws=0 qps=0");
}

TEST_F(RegistryTest, RemoteWriteOrAtomicWithoutLocalWriteIsRefusedBeforeTheFabric) {
  const std::string pd = NewPd();
  const std::vector<std::string> events = ledger_->events();
  for (const Access& access : {Access{v1::REMOTE_WRITE}, Access{v1::REMOTE_ATOMIC},
                               Access{v1::REMOTE_READ, v1::REMOTE_WRITE, v1::MW_BIND},
                               Access{v1::REMOTE_ATOMIC, v1::REMOTE_READ}}) {
    absl::StatusOr<v1::MemoryRegion> r = registry_->RegisterMr(AnonReq(pd, kPage, access));
    EXPECT_TRUE(IsError(r, absl::StatusCode::kInvalidArgument, "access"));
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("LOCAL_WRITE"));
  }
  // An unknown flag value is refused the same way.
  v1::RegisterMrRequest unknown = AnonReq(pd, kPage, {v1::LOCAL_WRITE});
  unknown.add_access(static_cast<v1::Access>(42));
  EXPECT_TRUE(IsError(registry_->RegisterMr(unknown), absl::StatusCode::kInvalidArgument, "access"));

  EXPECT_EQ(ledger_->calls("reg_mr"), 0);
  EXPECT_EQ(ledger_->events(), events);
  EXPECT_EQ(Live(), "pds=1 mrs=0 mws=0 qps=0");
  EXPECT_EQ(Pd(pd).mr_count(), 0u);

  // With LOCAL_WRITE they are accepted, and the MR reports what it was given.
  v1::MemoryRegion mr = NewMr(pd, kPage, {v1::REMOTE_ATOMIC, v1::LOCAL_WRITE, v1::REMOTE_WRITE});
  EXPECT_THAT(mr.access(), ElementsAre(v1::LOCAL_WRITE, v1::REMOTE_WRITE, v1::REMOTE_ATOMIC));
  // No access at all (local read only) is valid.
  EXPECT_THAT(NewMr(pd, kPage, {}).access(), IsEmpty());
}

// ---------------------------------------------------------------------------------------------------------
// RegisterMr

TEST_F(RegistryTest, RegistersAnonymousMemory) {
  const std::string pd = NewPd();
  v1::MemoryRegion mr = NewMr(pd, 3 * kPage + 5);
  EXPECT_EQ(mr.name(), "mrs/1");
  EXPECT_EQ(mr.pd(), pd);
  EXPECT_EQ(mr.length(), 3 * kPage + 5);
  EXPECT_NE(mr.addr(), 0u);
  EXPECT_EQ(mr.state(), v1::MR_READY);
  EXPECT_EQ(mr.generation(), 0u);
  EXPECT_EQ(mr.bound_windows(), 0u);
  EXPECT_EQ(mr.source().anonymous().size(), 3 * kPage + 5);
  EXPECT_THAT(mr.access(), ElementsAre(v1::LOCAL_WRITE, v1::REMOTE_WRITE, v1::REMOTE_READ, v1::MW_BIND));
  EXPECT_NE(ledger_->MrIdByLkey(mr.lkey()), 0u);
  EXPECT_NE(mr.lkey(), mr.rkey());
  // Anonymous memory is rdmad's own and zero-filled.
  const auto* bytes = reinterpret_cast<const unsigned char*>(mr.addr());
  EXPECT_EQ(bytes[0], 0);
  EXPECT_EQ(bytes[mr.length() - 1], 0);
  EXPECT_EQ(Pd(pd).mr_count(), 1u);
  EXPECT_EQ(Live(), "pds=1 mrs=1 mws=0 qps=0");

  // Keys are unique per registration.
  v1::MemoryRegion mr2 = NewMr(pd);
  EXPECT_NE(mr2.lkey(), mr.lkey());
  EXPECT_NE(mr2.rkey(), mr.rkey());
  EXPECT_NE(mr2.addr(), mr.addr());

  // ListMrs, with and without the PD filter.
  const std::string pd2 = NewPd();
  NewMr(pd2);
  EXPECT_EQ(OK(registry_->ListMrs(v1::ListMrsRequest())).size(), 3u);
  v1::ListMrsRequest list;
  list.set_pd(pd2);
  std::vector<v1::MemoryRegion> in2 = OK(registry_->ListMrs(list));
  ASSERT_EQ(in2.size(), 1u);
  EXPECT_EQ(in2[0].name(), "mrs/3");
}

TEST_F(RegistryTest, RegistersARangeOfASharedFileAtAnyOffset) {
  const std::string pd = NewPd();
  const std::string path = root_.WriteFile("shared.bin", 3 * kPage);
  v1::MemoryRegion mr = OK(registry_->RegisterMr(FileReq(pd, path, 100, 5000)));
  EXPECT_EQ(mr.length(), 5000u);
  EXPECT_EQ(mr.source().file().path(), path);
  EXPECT_EQ(mr.source().file().offset(), 100u);
  const auto* bytes = reinterpret_cast<const unsigned char*>(mr.addr());
  for (uint64_t i : {0ull, 1ull, 3995ull, 3996ull, 4999ull}) {
    EXPECT_EQ(bytes[i], TempDir::Pattern(100 + i)) << "byte " << i;
  }
  // The whole file, and its last byte alone.
  EXPECT_EQ(OK(registry_->RegisterMr(FileReq(pd, path, 0, 3 * kPage))).length(), 3 * kPage);
  v1::MemoryRegion last = OK(registry_->RegisterMr(FileReq(pd, path, 3 * kPage - 1, 1)));
  EXPECT_EQ(*reinterpret_cast<const unsigned char*>(last.addr()), TempDir::Pattern(3 * kPage - 1));
  EXPECT_EQ(Pd(pd).mr_count(), 3u);
}

TEST_F(RegistryTest, FileSourceErrorsLeakNothing) {
  Reset({fake::MakeDeviceInfo("rxe0")}, /*max_mr_bytes=*/8 * kPage);
  const std::string pd = NewPd();
  const std::string path = root_.WriteFile("f.bin", 4 * kPage);
  TempDir outside;
  const std::string foreign = outside.WriteFile("foreign.bin", kPage);
  root_.MakeDir("dir");

  struct Case {
    const char* what;
    v1::RegisterMrRequest req;
    absl::StatusCode code;
    const char* field;
    int err;  // expected errno payload; -1: not checked
  };
  const std::vector<Case> cases = {
      {"offset at EOF", FileReq(pd, path, 4 * kPage, 1), absl::StatusCode::kOutOfRange, "source.file.offset", 0},
      {"offset past EOF", FileReq(pd, path, 9 * kPage, 1), absl::StatusCode::kOutOfRange, "source.file.offset", 0},
      {"length past EOF", FileReq(pd, path, 100, 4 * kPage), absl::StatusCode::kOutOfRange, "source.file.length", 0},
      {"offset + length overflows", FileReq(pd, path, UINT64_MAX - 10, 100), absl::StatusCode::kOutOfRange,
       "source.file.length", 0},
      {"missing file", FileReq(pd, root_.Sub("nope.bin"), 0, 1), absl::StatusCode::kNotFound, "source.file.path",
       ENOENT},
      {"outside the roots", FileReq(pd, foreign, 0, 1), absl::StatusCode::kPermissionDenied, "source.file.path", 0},
      {"relative path", FileReq(pd, "f.bin", 0, 1), absl::StatusCode::kInvalidArgument, "source.file.path", 0},
      {"empty path", FileReq(pd, "", 0, 1), absl::StatusCode::kInvalidArgument, "source.file.path", 0},
      {"length 0", FileReq(pd, path, 0, 0), absl::StatusCode::kInvalidArgument, "source.file.length", 0},
      {"length over the limit", FileReq(pd, path, 0, 8 * kPage + 1), absl::StatusCode::kOutOfRange,
       "source.file.length", 0},
      {"a directory", FileReq(pd, root_.Sub("dir"), 0, 1), absl::StatusCode::kInvalidArgument,
       "source.file.path", 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    absl::StatusOr<v1::MemoryRegion> r = registry_->RegisterMr(c.req);
    EXPECT_TRUE(IsError(r, c.code, c.field));
    if (c.err >= 0) {
      EXPECT_EQ(ErrnoOf(r.status()), c.err);
    }
  }
  EXPECT_EQ(ErrnoOf(registry_->RegisterMr(cases[4].req).status()), ENOENT);
  EXPECT_EQ(CallOf(registry_->RegisterMr(cases[4].req).status()), "open");
  EXPECT_EQ(ledger_->calls("reg_mr"), 0);
  EXPECT_EQ(Live(), "pds=1 mrs=0 mws=0 qps=0");
  EXPECT_EQ(Pd(pd).mr_count(), 0u);
  // No registration is left "in progress": the PD can be deleted without a cascade.
  v1::DeletePdRequest del;
  del.set_name(pd);
  EXPECT_THAT(OK(registry_->DeletePd(del)).deleted(), ElementsAre(pd));
}

TEST_F(RegistryTest, AnonymousSourceErrorsLeakNothing) {
  Reset({fake::MakeDeviceInfo("rxe0")}, /*max_mr_bytes=*/8 * kPage);
  const std::string pd = NewPd();
  EXPECT_TRUE(IsError(registry_->RegisterMr(AnonReq(pd, 0)), absl::StatusCode::kInvalidArgument,
                      "source.anonymous.size"));
  EXPECT_TRUE(IsError(registry_->RegisterMr(AnonReq(pd, 8 * kPage + 1)), absl::StatusCode::kOutOfRange,
                      "source.anonymous.size"));
  v1::RegisterMrRequest huge = AnonReq(pd, 3 * kPage);  // under the limit, not a multiple of a huge page
  huge.mutable_source()->mutable_anonymous()->set_huge_pages(true);
  EXPECT_TRUE(IsError(registry_->RegisterMr(huge), absl::StatusCode::kInvalidArgument, "source.anonymous.size"));
  v1::RegisterMrRequest none = AnonReq(pd, kPage);
  none.clear_source();
  EXPECT_TRUE(IsError(registry_->RegisterMr(none), absl::StatusCode::kInvalidArgument, "source"));
  EXPECT_EQ(ledger_->calls("reg_mr"), 0);
  // Exactly at the limit is fine.
  EXPECT_EQ(NewMr(pd, 8 * kPage).length(), 8 * kPage);
  EXPECT_EQ(Pd(pd).mr_count(), 1u);
  EXPECT_EQ(Live(), "pds=1 mrs=1 mws=0 qps=0");
}

TEST_F(RegistryTest, TheSizeLimitIsTheSmallerOfTheOptionAndTheDeviceMaximum) {
  fabric::DeviceInfo small = fake::MakeDeviceInfo("rxe0");
  small.max_mr_size = 2 * kPage;
  Reset({small}, /*max_mr_bytes=*/0);  // 0: the device's max_mr_size
  std::string pd = NewPd();
  EXPECT_TRUE(IsError(registry_->RegisterMr(AnonReq(pd, 2 * kPage + 1)), absl::StatusCode::kOutOfRange,
                      "source.anonymous.size"));
  EXPECT_EQ(NewMr(pd, 2 * kPage).length(), 2 * kPage);

  Reset({small}, /*max_mr_bytes=*/16 * kPage);  // larger than the device: the device wins
  pd = NewPd();
  EXPECT_TRUE(IsError(registry_->RegisterMr(AnonReq(pd, 3 * kPage)), absl::StatusCode::kOutOfRange,
                      "source.anonymous.size"));

  Reset({fake::MakeDeviceInfo("rxe0")}, /*max_mr_bytes=*/kPage);  // smaller than the device: the option wins
  pd = NewPd();
  EXPECT_TRUE(IsError(registry_->RegisterMr(AnonReq(pd, kPage + 1)), absl::StatusCode::kOutOfRange,
                      "source.anonymous.size"));
  EXPECT_EQ(ledger_->calls("reg_mr"), 0);
}

TEST_F(RegistryTest, NoRegionIsLargerThanPhysicalMemory) {
  fabric::DeviceInfo rxe = fake::MakeDeviceInfo("rxe0");
  rxe.max_mr_size = UINT64_MAX;  // what rxe reports
  Reset({rxe}, /*max_mr_bytes=*/0);
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  ASSERT_GT(pages, 0);
  ASSERT_GT(page, 0);
  const uint64_t phys = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
  const std::string pd = NewPd();
  EXPECT_TRUE(IsError(registry_->RegisterMr(AnonReq(pd, phys + 1)), absl::StatusCode::kOutOfRange,
                      "source.anonymous.size"));
  const std::string path = root_.WriteFile("small.bin", kPage);
  EXPECT_TRUE(IsError(registry_->RegisterMr(FileReq(pd, path, 0, phys + 1)), absl::StatusCode::kOutOfRange,
                      "source.file.length"));
  EXPECT_EQ(ledger_->calls("reg_mr"), 0);
  EXPECT_EQ(Live(), "pds=1 mrs=0 mws=0 qps=0");
}

TEST_F(RegistryTest, RegMrFailureIsReportedWithErrnoAndLeaksNothing) {
  const std::string pd = NewPd();
  ledger_->FailNextRegMr(ENOMEM);
  absl::StatusOr<v1::MemoryRegion> r = registry_->RegisterMr(AnonReq(pd, kPage));
  EXPECT_TRUE(IsError(r, absl::StatusCode::kResourceExhausted, ""));
  EXPECT_EQ(ErrnoOf(r.status()), ENOMEM);
  EXPECT_EQ(CallOf(r.status()), "ibv_reg_mr");
  v1::ErrorDetail d = DetailOf(r.status());
  EXPECT_EQ(d.verbs_call(), "ibv_reg_mr");
  EXPECT_EQ(d.errno_name(), "ENOMEM");
  EXPECT_EQ(ledger_->calls("reg_mr"), 1);
  EXPECT_EQ(Live(), "pds=1 mrs=0 mws=0 qps=0");
  EXPECT_EQ(Pd(pd).mr_count(), 0u);
  EXPECT_TRUE(OK(registry_->ListMrs(v1::ListMrsRequest())).empty());
  v1::DeletePdRequest del;
  del.set_name(pd);
  EXPECT_TRUE(registry_->DeletePd(del).ok());  // no pending registration left behind
}

TEST_F(RegistryTest, DeletePdIsRefusedWhileARegistrationIsInFlight) {
  const std::string pd = NewPd();
  int hook_runs = 0;
  // RegMr runs without the registry lock: from inside it, the registry answers, and refuses the delete.
  ledger_->SetRegMrHook([&] {
    ++hook_runs;
    v1::DeletePdRequest del;
    del.set_name(pd);
    del.set_cascade(true);
    absl::StatusOr<v1::DeletePdResponse> r = registry_->DeletePd(del);
    EXPECT_TRUE(IsError(r, absl::StatusCode::kFailedPrecondition, "name"));
    EXPECT_EQ(ErrnoOf(r.status()), EBUSY);
    EXPECT_EQ(Pd(pd).mr_count(), 0u);
  });
  v1::MemoryRegion mr = NewMr(pd);
  ledger_->SetRegMrHook(nullptr);
  EXPECT_EQ(hook_runs, 1);
  EXPECT_EQ(Pd(pd).mr_count(), 1u);
  v1::DeletePdRequest del;
  del.set_name(pd);
  del.set_cascade(true);
  EXPECT_THAT(OK(registry_->DeletePd(del)).deleted(), ElementsAre(mr.name(), pd));
}

// ---------------------------------------------------------------------------------------------------------
// DeregisterMr

TEST_F(RegistryTest, DeregisterIsRefusedWithEbusyWhileAWindowIsBound) {
  const std::string pd = NewPd();
  v1::MemoryRegion mr = NewMr(pd);
  v1::QueuePair qp = NewQp(pd);
  v1::MemoryWindow w1 = NewMw(pd, v1::TYPE_1), w2 = NewMw(pd, v1::TYPE_2);
  ASSERT_OK(registry_->BindMw(BindReq(w1.name(), mr.name(), 0, kPage)).status());
  ASSERT_OK(registry_->BindMw(BindReq(w2.name(), mr.name(), kPage, kPage, {v1::REMOTE_READ}, qp.name())).status());
  EXPECT_EQ(Mr(mr.name()).bound_windows(), 2u);

  absl::Status s = registry_->DeregisterMr(mr.name());
  EXPECT_TRUE(IsError(s, absl::StatusCode::kFailedPrecondition, "name"));
  EXPECT_EQ(ErrnoOf(s), EBUSY);
  EXPECT_THAT(std::string(s.message()), HasSubstr("mws/1, mws/2"));
  EXPECT_EQ(ledger_->calls("dereg_mr"), 0);  // refused by rdmad, not by the device

  ASSERT_OK(registry_->InvalidateMw(w1.name()).status());
  EXPECT_EQ(ErrnoOf(registry_->DeregisterMr(mr.name())), EBUSY);
  ASSERT_OK(registry_->InvalidateMw(w2.name()).status());
  EXPECT_EQ(Mr(mr.name()).bound_windows(), 0u);
  EXPECT_OK(registry_->DeregisterMr(mr.name()));
  EXPECT_EQ(Pd(pd).mr_count(), 0u);
  EXPECT_EQ(Live(), "pds=1 mrs=0 mws=2 qps=2");
}

TEST_F(RegistryTest, DeallocatingTheWindowAlsoAllowsDeregistration) {
  const std::string pd = NewPd();
  v1::MemoryRegion mr = NewMr(pd);
  v1::MemoryWindow w = NewMw(pd, v1::TYPE_1);
  ASSERT_OK(registry_->BindMw(BindReq(w.name(), mr.name(), 0, kPage)).status());
  ASSERT_OK(registry_->DeallocMw(w.name()));
  EXPECT_EQ(Mr(mr.name()).bound_windows(), 0u);
  EXPECT_EQ(Pd(pd).mw_count(), 0u);
  EXPECT_OK(registry_->DeregisterMr(mr.name()));
}

TEST_F(RegistryTest, AFailedDeregistrationKeepsTheRegion) {
  const std::string pd = NewPd();
  v1::MemoryRegion mr = NewMr(pd);
  ledger_->FailNextRelease(EINVAL);
  absl::Status s = registry_->DeregisterMr(mr.name());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(ErrnoOf(s), EINVAL);
  EXPECT_EQ(CallOf(s), "ibv_dereg_mr");
  EXPECT_THAT(std::string(s.message()), HasSubstr(mr.name()));
  EXPECT_TRUE(MessageDifferencer::Equals(Mr(mr.name()), mr));
  EXPECT_EQ(Pd(pd).mr_count(), 1u);
  EXPECT_EQ(Live(), "pds=1 mrs=1 mws=0 qps=0");
  EXPECT_OK(registry_->DeregisterMr(mr.name()));
  EXPECT_EQ(Live(), "pds=1 mrs=0 mws=0 qps=0");
}

// ---------------------------------------------------------------------------------------------------------
// ReregisterMr: validation (both paths)

class ReregValidationTest : public RegistryTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(ReregValidationTest, BadRequestsAreRefusedAndTheRegionIsValidAndUnchanged) {
  const std::string device = GetParam();
  const std::string pd = NewPd(device);
  const std::string pd2 = NewPd(device);
  const std::string foreign_pd = NewPd(device == kEmu ? kNat : kEmu);
  v1::MemoryRegion mr = NewMr(pd);

  auto with_source = [](v1::ReregisterMrRequest r, uint64_t size) {
    r.mutable_source()->mutable_anonymous()->set_size(size);
    return r;
  };
  auto with_pd = [](v1::ReregisterMrRequest r, const std::string& p) {
    r.set_pd(p);
    return r;
  };
  auto with_access = [](v1::ReregisterMrRequest r, const Access& a) {
    SetAccess(&r, a);
    return r;
  };
  v1::ReregisterMrRequest unknown_flag = ReregReq(mr.name(), {v1::CHANGE_ACCESS});
  unknown_flag.add_flags(static_cast<v1::ReregFlag>(9));
  struct Case {
    const char* what;
    v1::ReregisterMrRequest req;
    absl::StatusCode code;
    const char* field;
  };
  const std::string n = mr.name();
  const std::vector<Case> cases = {
      {"no flags", ReregReq(n, {}), absl::StatusCode::kInvalidArgument, "flags"},
      {"unknown flag", unknown_flag, absl::StatusCode::kInvalidArgument, "flags"},
      {"source without CHANGE_TRANSLATION", with_source(ReregReq(n, {v1::CHANGE_ACCESS}), kPage),
       absl::StatusCode::kInvalidArgument, "source"},
      {"CHANGE_TRANSLATION without source", ReregReq(n, {v1::CHANGE_TRANSLATION}),
       absl::StatusCode::kInvalidArgument, "flags"},
      {"pd without CHANGE_PD", with_pd(ReregReq(n, {v1::CHANGE_ACCESS}), pd2), absl::StatusCode::kInvalidArgument,
       "pd"},
      {"CHANGE_PD without pd", ReregReq(n, {v1::CHANGE_PD}), absl::StatusCode::kInvalidArgument, "flags"},
      {"access without CHANGE_ACCESS",
       with_access(with_source(ReregReq(n, {v1::CHANGE_TRANSLATION}), kPage), {v1::LOCAL_WRITE}),
       absl::StatusCode::kInvalidArgument, "access"},
      {"unknown new pd", with_pd(ReregReq(n, {v1::CHANGE_PD}), "pds/99"), absl::StatusCode::kNotFound, "pd"},
      {"malformed new pd", with_pd(ReregReq(n, {v1::CHANGE_PD}), "pd2"), absl::StatusCode::kInvalidArgument, "pd"},
      {"pd on another device", with_pd(ReregReq(n, {v1::CHANGE_PD}), foreign_pd),
       absl::StatusCode::kInvalidArgument, "pd"},
      {"access rule", with_access(ReregReq(n, {v1::CHANGE_ACCESS}), {v1::REMOTE_WRITE}),
       absl::StatusCode::kInvalidArgument, "access"},
      {"new source of size 0", with_source(ReregReq(n, {v1::CHANGE_TRANSLATION}), 0),
       absl::StatusCode::kInvalidArgument, "source.anonymous.size"},
  };
  const int reg_calls = ledger_->calls("reg_mr");
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    absl::StatusOr<v1::ReregisterMrResponse> r = registry_->ReregisterMr(c.req);
    EXPECT_TRUE(IsError(r, c.code, c.field));
    EXPECT_EQ(DetailOf(r.status()).rereg_outcome(), v1::OUTCOME_OLD_MR_VALID);
  }
  EXPECT_EQ(ledger_->calls("rereg_mr"), 0);
  EXPECT_EQ(ledger_->calls("reg_mr"), reg_calls);
  EXPECT_EQ(ledger_->calls("dereg_mr"), 0);
  EXPECT_TRUE(MessageDifferencer::Equals(Mr(n), mr));
  EXPECT_EQ(Pd(pd).mr_count(), 1u);
  EXPECT_EQ(Pd(pd2).mr_count(), 0u);
}

TEST_P(ReregValidationTest, RefusedWithEbusyWhileAWindowIsBound) {
  const std::string pd = NewPd(GetParam());
  v1::MemoryRegion mr = NewMr(pd);
  v1::MemoryWindow w = NewMw(pd, v1::TYPE_1);
  ASSERT_OK(registry_->BindMw(BindReq(w.name(), mr.name(), 0, kPage)).status());
  mr = Mr(mr.name());
  v1::ReregisterMrRequest req = ReregReq(mr.name(), {v1::CHANGE_ACCESS});
  SetAccess(&req, {v1::LOCAL_WRITE, v1::MW_BIND});
  absl::StatusOr<v1::ReregisterMrResponse> r = registry_->ReregisterMr(req);
  EXPECT_TRUE(IsError(r, absl::StatusCode::kFailedPrecondition, "name"));
  EXPECT_EQ(ErrnoOf(r.status()), EBUSY);
  EXPECT_EQ(DetailOf(r.status()).rereg_outcome(), v1::OUTCOME_OLD_MR_VALID);
  EXPECT_EQ(ledger_->calls("rereg_mr"), 0);
  EXPECT_TRUE(MessageDifferencer::Equals(Mr(mr.name()), mr));
  // After the window is invalidated, the same request succeeds.
  ASSERT_OK(registry_->InvalidateMw(w.name()).status());
  EXPECT_TRUE(registry_->ReregisterMr(req).ok());
}

INSTANTIATE_TEST_SUITE_P(BothPaths, ReregValidationTest, ::testing::Values(kEmu, kNat),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param) == kEmu ? "Emulated" : "Native";
                         });

// ---------------------------------------------------------------------------------------------------------
// ReregisterMr: emulated (register the new, then deregister the old)

TEST_F(RegistryTest, EmulatedReregChangesAccessKeepingTheName) {
  const std::string pd = NewPd(kEmu);
  v1::MemoryRegion mr = NewMr(pd, kPage, {v1::LOCAL_WRITE});
  const uint64_t old_fake = ledger_->MrIdByLkey(mr.lkey());
  ledger_->ClearEvents();
  v1::ReregisterMrRequest req = ReregReq(mr.name(), {v1::CHANGE_ACCESS});
  SetAccess(&req, {v1::LOCAL_WRITE, v1::REMOTE_READ, v1::MW_BIND});
  v1::ReregisterMrResponse r = OK(registry_->ReregisterMr(req));
  EXPECT_EQ(r.method(), v1::EMULATED);
  EXPECT_EQ(r.mr().name(), mr.name());
  EXPECT_EQ(r.mr().generation(), 1u);
  EXPECT_TRUE(r.keys_changed());
  EXPECT_EQ(r.old_lkey(), mr.lkey());
  EXPECT_EQ(r.old_rkey(), mr.rkey());
  EXPECT_NE(r.mr().lkey(), mr.lkey());
  EXPECT_NE(r.mr().rkey(), mr.rkey());
  EXPECT_THAT(r.mr().access(), ElementsAre(v1::LOCAL_WRITE, v1::REMOTE_READ, v1::MW_BIND));
  EXPECT_EQ(r.mr().addr(), mr.addr());  // same memory
  EXPECT_EQ(r.mr().length(), mr.length());
  EXPECT_TRUE(r.warning().empty());
  EXPECT_TRUE(MessageDifferencer::Equals(Mr(mr.name()), r.mr()));
  // The new registration first, then the old one released: never a moment without a valid MR.
  const uint64_t new_fake = ledger_->MrIdByLkey(r.mr().lkey());
  EXPECT_THAT(ledger_->events_of({"reg_mr", "dereg_mr"}),
              ElementsAre("reg_mr " + S(new_fake), "dereg_mr " + S(old_fake)));
  EXPECT_EQ(ledger_->calls("rereg_mr"), 0);
  EXPECT_EQ(Live(), "pds=1 mrs=1 mws=0 qps=0");
  // A second rereg counts up again.
  EXPECT_EQ(OK(registry_->ReregisterMr(req)).mr().generation(), 2u);
}

TEST_F(RegistryTest, EmulatedReregChangePdMovesTheCount) {
  const std::string a = NewPd(kEmu), b = NewPd(kEmu);
  v1::MemoryRegion mr = NewMr(a);
  v1::ReregisterMrRequest req = ReregReq(mr.name(), {v1::CHANGE_PD});
  req.set_pd(b);
  v1::ReregisterMrResponse r = OK(registry_->ReregisterMr(req));
  EXPECT_EQ(r.mr().pd(), b);
  EXPECT_EQ(r.mr().generation(), 1u);
  EXPECT_EQ(Pd(a).mr_count(), 0u);
  EXPECT_EQ(Pd(b).mr_count(), 1u);
  v1::ListMrsRequest list;
  list.set_pd(b);
  EXPECT_EQ(OK(registry_->ListMrs(list)).size(), 1u);
  // A is empty now (and the fake checks that its fabric PD really holds nothing when it is deallocated).
  v1::DeletePdRequest del;
  del.set_name(a);
  EXPECT_TRUE(registry_->DeletePd(del).ok());
  EXPECT_THAT(ledger_->violations(), IsEmpty());
  // A window of B binds to it.
  v1::MemoryWindow w = NewMw(b, v1::TYPE_1);
  EXPECT_TRUE(registry_->BindMw(BindReq(w.name(), mr.name(), 0, kPage)).ok());
}

// A tenant's quotas read UsageOfPd's running totals (issue 9: no listing per creation). Through every change
// of membership or length they must equal what the lists say.
TEST_F(RegistryTest, UsageOfPdMatchesTheListsThroughEveryChange) {
  auto expect_matches = [&](const std::string& pd, const char* when) {
    SCOPED_TRACE(absl::StrCat(pd, " ", when));
    Registry::PdUsage u = OK(registry_->UsageOfPd(pd));
    v1::ListMrsRequest mrs;
    mrs.set_pd(pd);
    uint64_t n = 0, bytes = 0;
    const std::vector<v1::MemoryRegion> listed = OK(registry_->ListMrs(mrs));
    for (const v1::MemoryRegion& m : listed) n++, bytes += m.length();
    EXPECT_EQ(u.mrs, n);
    EXPECT_EQ(u.mr_bytes, bytes);
    v1::ListMwsRequest mws;
    mws.set_pd(pd);
    uint64_t own = 0;
    const std::vector<v1::MemoryWindow> windows = OK(registry_->ListMws(mws));
    for (const v1::MemoryWindow& w : windows) own += w.owner().empty() ? 1 : 0;
    EXPECT_EQ(u.mws, own);
    uint64_t qps = 0;
    for (const v1::QueuePair& q : registry_->ListQps()) qps += q.pd() == pd ? 1 : 0;
    EXPECT_EQ(u.qps, qps);
  };
  const std::string a = NewPd(kEmu), b = NewPd(kEmu), c = NewPd(kNat);
  expect_matches(a, "empty");
  v1::MemoryRegion m1 = NewMr(a, kPage), m2 = NewMr(a, 3 * kPage), m3 = NewMr(a, 5 * kPage);
  v1::MemoryRegion m4 = NewMr(c, 2 * kPage);
  v1::MemoryWindow own = NewMw(a, v1::TYPE_1);
  v1::AllocMwRequest pool;
  pool.set_pd(a);
  pool.set_type(v1::TYPE_2);
  v1::MemoryWindow grants = OK(registry_->AllocMw(pool, "grants"));
  v1::QueuePair qp = NewQp(a, false);
  expect_matches(a, "after creations");
  EXPECT_EQ(OK(registry_->UsageOfPd(a)).mr_bytes, 9 * kPage);
  EXPECT_EQ(OK(registry_->UsageOfPd(a)).mws, 1u);  // the grant pool's window is rdmad's

  v1::ReregisterMrRequest grow = ReregReq(m2.name(), {v1::CHANGE_TRANSLATION});  // emulated: 3 -> 7 pages
  grow.mutable_source()->mutable_anonymous()->set_size(7 * kPage);
  ASSERT_TRUE(registry_->ReregisterMr(grow).ok());
  expect_matches(a, "after an emulated rereg of the length");
  v1::ReregisterMrRequest move = ReregReq(m3.name(), {v1::CHANGE_PD});
  move.set_pd(b);
  ASSERT_TRUE(registry_->ReregisterMr(move).ok());
  expect_matches(a, "after CHANGE_PD away");
  expect_matches(b, "after CHANGE_PD in");
  v1::ReregisterMrRequest shrink = ReregReq(m4.name(), {v1::CHANGE_TRANSLATION});  // native: 2 -> 1 page
  shrink.mutable_source()->mutable_anonymous()->set_size(kPage);
  ASSERT_TRUE(registry_->ReregisterMr(shrink).ok());
  expect_matches(c, "after a native rereg of the length");
  EXPECT_EQ(OK(registry_->UsageOfPd(c)).mr_bytes, kPage);

  ASSERT_TRUE(registry_->DeregisterMr(m1.name()).ok());
  ASSERT_TRUE(registry_->DeallocMw(own.name()).ok());
  ASSERT_TRUE(registry_->DeleteQp(qp.name()).ok());
  expect_matches(a, "after removals");
  EXPECT_EQ(OK(registry_->UsageOfPd(a)).mrs, 1u);
  EXPECT_EQ(OK(registry_->UsageOfPd(a)).mws, 0u);
  EXPECT_EQ(OK(registry_->UsageOfPd(a)).qps, 0u);
  ASSERT_TRUE(registry_->DeallocMw(grants.name(), "grants").ok());

  v1::DeletePdRequest del;
  del.set_name(b);
  del.set_cascade(true);
  ASSERT_TRUE(registry_->DeletePd(del).ok());
  EXPECT_TRUE(IsError(registry_->UsageOfPd(b), absl::StatusCode::kNotFound, "pd"));
  for (const std::string& pd : {a, c}) {
    del.set_name(pd);
    ASSERT_TRUE(registry_->DeletePd(del).ok());
  }
}

TEST_F(RegistryTest, EmulatedReregChangeTranslationChangesSourceAndLength) {
  const std::string pd = NewPd(kEmu);
  v1::MemoryRegion mr = NewMr(pd, kPage);
  v1::ReregisterMrRequest req = ReregReq(mr.name(), {v1::CHANGE_TRANSLATION});
  req.mutable_source()->mutable_anonymous()->set_size(3 * kPage);
  v1::ReregisterMrResponse r = OK(registry_->ReregisterMr(req));
  EXPECT_EQ(r.mr().length(), 3 * kPage);
  EXPECT_EQ(r.mr().source().anonymous().size(), 3 * kPage);
  EXPECT_TRUE(r.keys_changed());
  EXPECT_EQ(r.mr().generation(), 1u);

  // To a file range.
  const std::string path = root_.WriteFile("t.bin", 2 * kPage);
  v1::ReregisterMrRequest to_file = ReregReq(mr.name(), {v1::CHANGE_TRANSLATION, v1::CHANGE_ACCESS});
  auto* f = to_file.mutable_source()->mutable_file();
  f->set_path(path);
  f->set_offset(10);
  f->set_length(kPage);
  SetAccess(&to_file, {v1::LOCAL_WRITE});
  r = OK(registry_->ReregisterMr(to_file));
  EXPECT_EQ(r.mr().length(), kPage);
  EXPECT_EQ(r.mr().source().file().path(), path);
  EXPECT_EQ(*reinterpret_cast<const unsigned char*>(r.mr().addr()), TempDir::Pattern(10));
  EXPECT_THAT(r.mr().access(), ElementsAre(v1::LOCAL_WRITE));
  EXPECT_EQ(r.mr().generation(), 2u);

  // A new source past the end of the file: refused, nothing changes.
  f->set_offset(2 * kPage);
  absl::StatusOr<v1::ReregisterMrResponse> bad = registry_->ReregisterMr(to_file);
  EXPECT_TRUE(IsError(bad, absl::StatusCode::kOutOfRange, "source.file.offset"));
  EXPECT_EQ(DetailOf(bad.status()).rereg_outcome(), v1::OUTCOME_OLD_MR_VALID);
  EXPECT_TRUE(MessageDifferencer::Equals(Mr(mr.name()), r.mr()));
  EXPECT_EQ(Live(), "pds=1 mrs=1 mws=0 qps=0");
}

TEST_F(RegistryTest, EmulatedReregWhoseNewRegistrationFailsLeavesTheOldOne) {
  const std::string a = NewPd(kEmu), b = NewPd(kEmu);
  v1::MemoryRegion mr = NewMr(a);
  ledger_->FailNextRegMr(ENOMEM);
  v1::ReregisterMrRequest req = ReregReq(mr.name(), {v1::CHANGE_PD, v1::CHANGE_TRANSLATION});
  req.set_pd(b);
  req.mutable_source()->mutable_anonymous()->set_size(2 * kPage);
  absl::StatusOr<v1::ReregisterMrResponse> r = registry_->ReregisterMr(req);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_EQ(ErrnoOf(r.status()), ENOMEM);
  EXPECT_EQ(CallOf(r.status()), "ibv_reg_mr");
  EXPECT_EQ(DetailOf(r.status()).rereg_outcome(), v1::OUTCOME_OLD_MR_VALID);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("unchanged"));
  EXPECT_TRUE(MessageDifferencer::Equals(Mr(mr.name()), mr));  // same keys, PD, source, generation 0
  EXPECT_EQ(Pd(a).mr_count(), 1u);
  EXPECT_EQ(Pd(b).mr_count(), 0u);
  EXPECT_EQ(ledger_->calls("dereg_mr"), 0);
  EXPECT_EQ(Live(), "pds=2 mrs=1 mws=0 qps=0");
  EXPECT_NE(ledger_->MrIdByLkey(mr.lkey()), 0u);  // the old registration is still the live one
}

TEST_F(RegistryTest, EmulatedReregWhoseOldReleaseFailsUndoesTheNewOne) {
  const std::string a = NewPd(kEmu), b = NewPd(kEmu);
  v1::MemoryRegion mr = NewMr(a);
  const uint64_t old_fake = ledger_->MrIdByLkey(mr.lkey());
  ledger_->ClearEvents();
  ledger_->FailNextRelease(EIO);
  v1::ReregisterMrRequest req = ReregReq(mr.name(), {v1::CHANGE_PD});
  req.set_pd(b);
  absl::StatusOr<v1::ReregisterMrResponse> r = registry_->ReregisterMr(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(ErrnoOf(r.status()), EIO);
  EXPECT_EQ(CallOf(r.status()), "ibv_dereg_mr");
  EXPECT_EQ(DetailOf(r.status()).rereg_outcome(), v1::OUTCOME_OLD_MR_VALID);
  EXPECT_TRUE(MessageDifferencer::Equals(Mr(mr.name()), mr));
  EXPECT_EQ(Pd(a).mr_count(), 1u);
  EXPECT_EQ(Pd(b).mr_count(), 0u);
  // The new registration was made and undone; the old one is still live.
  std::vector<std::string> ev = ledger_->events_of({"reg_mr", "dereg_mr"});
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].substr(0, 7), "reg_mr ");
  EXPECT_EQ(ev[1], "dereg_mr " + ev[0].substr(7));
  EXPECT_NE(ev[1], "dereg_mr " + S(old_fake));
  EXPECT_EQ(ledger_->MrIdByLkey(mr.lkey()), old_fake);
  EXPECT_EQ(Live(), "pds=2 mrs=1 mws=0 qps=0");
  // And the region still works: it can be deleted normally.
  EXPECT_OK(registry_->DeregisterMr(mr.name()));
}

// ---------------------------------------------------------------------------------------------------------
// ReregisterMr: native (ibv_rereg_mr and its result codes)

TEST_F(RegistryTest, NativeReregOkAppliesEverything) {
  const std::string a = NewPd(kNat), b = NewPd(kNat);
  v1::MemoryRegion mr = NewMr(a, kPage, {v1::LOCAL_WRITE});
  const uint64_t fake_id = ledger_->MrIdByLkey(mr.lkey());
  v1::ReregisterMrRequest req = ReregReq(mr.name(), {v1::CHANGE_TRANSLATION, v1::CHANGE_PD, v1::CHANGE_ACCESS});
  req.mutable_source()->mutable_anonymous()->set_size(2 * kPage);
  req.set_pd(b);
  SetAccess(&req, {v1::LOCAL_WRITE, v1::REMOTE_READ});
  v1::ReregisterMrResponse r = OK(registry_->ReregisterMr(req));
  EXPECT_EQ(r.method(), v1::NATIVE);
  EXPECT_EQ(r.mr().name(), mr.name());
  EXPECT_EQ(r.mr().pd(), b);
  EXPECT_EQ(r.mr().length(), 2 * kPage);
  EXPECT_EQ(r.mr().source().anonymous().size(), 2 * kPage);
  EXPECT_THAT(r.mr().access(), ElementsAre(v1::LOCAL_WRITE, v1::REMOTE_READ));
  EXPECT_EQ(r.mr().generation(), 1u);
  EXPECT_EQ(r.mr().state(), v1::MR_READY);
  EXPECT_TRUE(r.keys_changed());
  EXPECT_EQ(r.old_lkey(), mr.lkey());
  EXPECT_EQ(r.old_rkey(), mr.rkey());
  EXPECT_TRUE(r.warning().empty());
  EXPECT_EQ(Pd(a).mr_count(), 0u);
  EXPECT_EQ(Pd(b).mr_count(), 1u);
  // One ibv_rereg_mr on the same fabric MR; no extra registration.
  EXPECT_EQ(ledger_->calls("rereg_mr"), 1);
  EXPECT_EQ(ledger_->calls("reg_mr"), 1);
  EXPECT_EQ(ledger_->MrIdByLkey(r.mr().lkey()), fake_id);
  EXPECT_TRUE(MessageDifferencer::Equals(Mr(mr.name()), r.mr()));
}

class NativeOldValidTest : public RegistryTest, public ::testing::WithParamInterface<fabric::ReregCode> {};

TEST_P(NativeOldValidTest, TheRegionIsValidAndUnchanged) {
  const std::string a = NewPd(kNat), b = NewPd(kNat);
  v1::MemoryRegion mr = NewMr(a);
  ledger_->ScriptRereg(GetParam(), ENOMEM);
  v1::ReregisterMrRequest req = ReregReq(mr.name(), {v1::CHANGE_PD, v1::CHANGE_TRANSLATION});
  req.set_pd(b);
  req.mutable_source()->mutable_anonymous()->set_size(2 * kPage);
  absl::StatusOr<v1::ReregisterMrResponse> r = registry_->ReregisterMr(req);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_EQ(ErrnoOf(r.status()), ENOMEM);
  EXPECT_EQ(CallOf(r.status()), "ibv_rereg_mr");
  EXPECT_EQ(DetailOf(r.status()).rereg_outcome(), v1::OUTCOME_OLD_MR_VALID);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(fabric::ReregCodeName(GetParam())));
  v1::MemoryRegion now = Mr(mr.name());
  EXPECT_TRUE(MessageDifferencer::Equals(now, mr)) << now.DebugString();
  EXPECT_EQ(Pd(a).mr_count(), 1u);
  EXPECT_EQ(Pd(b).mr_count(), 0u);
  // Still usable: a window binds, a later rereg works.
  v1::MemoryWindow w = NewMw(a, v1::TYPE_1);
  ASSERT_TRUE(registry_->BindMw(BindReq(w.name(), mr.name(), 0, kPage)).ok());
  ASSERT_OK(registry_->InvalidateMw(w.name()).status());
  EXPECT_EQ(OK(registry_->ReregisterMr(req)).mr().generation(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Codes, NativeOldValidTest,
                         ::testing::Values(fabric::ReregCode::kErrInput, fabric::ReregCode::kErrDontForkNew),
                         [](const ::testing::TestParamInfo<fabric::ReregCode>& info) {
                           return info.param == fabric::ReregCode::kErrInput ? "ErrInput" : "ErrDontForkNew";
                         });

TEST_F(RegistryTest, NativeDoForkOldIsSuccessWithAWarning) {
  const std::string pd = NewPd(kNat);
  v1::MemoryRegion mr = NewMr(pd, kPage);
  ledger_->ScriptRereg(fabric::ReregCode::kErrDoForkOld, EFAULT);
  v1::ReregisterMrRequest req = ReregReq(mr.name(), {v1::CHANGE_TRANSLATION, v1::CHANGE_ACCESS});
  req.mutable_source()->mutable_anonymous()->set_size(5 * kPage);
  SetAccess(&req, {v1::LOCAL_WRITE, v1::REMOTE_WRITE});
  v1::ReregisterMrResponse r = OK(registry_->ReregisterMr(req));
  EXPECT_EQ(r.method(), v1::NATIVE);
  EXPECT_THAT(r.warning(), HasSubstr("IBV_REREG_MR_ERR_DO_FORK_OLD"));
  EXPECT_THAT(r.warning(), HasSubstr("EFAULT"));
  EXPECT_EQ(r.mr().length(), 5 * kPage);
  EXPECT_THAT(r.mr().access(), ElementsAre(v1::LOCAL_WRITE, v1::REMOTE_WRITE));
  EXPECT_EQ(r.mr().generation(), 1u);
  EXPECT_EQ(r.mr().state(), v1::MR_READY);
  EXPECT_TRUE(r.keys_changed());
  EXPECT_TRUE(MessageDifferencer::Equals(Mr(mr.name()), r.mr()));
}

class NativeUnusableTest : public RegistryTest, public ::testing::WithParamInterface<fabric::ReregCode> {};

TEST_P(NativeUnusableTest, TheRegionBecomesUnusableAndOnlyDeregisterIsAccepted) {
  const std::string pd = NewPd(kNat);
  v1::MemoryRegion mr = NewMr(pd);
  v1::MemoryWindow w = NewMw(pd, v1::TYPE_1);
  ledger_->ScriptRereg(GetParam(), EIO);
  v1::ReregisterMrRequest req = ReregReq(mr.name(), {v1::CHANGE_TRANSLATION});
  req.mutable_source()->mutable_anonymous()->set_size(2 * kPage);
  absl::StatusOr<v1::ReregisterMrResponse> r = registry_->ReregisterMr(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(ErrnoOf(r.status()), EIO);
  EXPECT_EQ(CallOf(r.status()), "ibv_rereg_mr");
  EXPECT_EQ(DetailOf(r.status()).rereg_outcome(), v1::OUTCOME_MR_UNUSABLE);

  v1::MemoryRegion now = Mr(mr.name());
  EXPECT_EQ(now.state(), v1::MR_UNUSABLE);
  EXPECT_THAT(now.unusable_reason(), HasSubstr(fabric::ReregCodeName(GetParam())));
  EXPECT_THAT(now.unusable_reason(), HasSubstr("EIO"));
  EXPECT_EQ(Pd(pd).mr_count(), 1u);

  // Rereg and BindMw are refused; nothing reaches the fabric.
  v1::ReregisterMrRequest again = ReregReq(mr.name(), {v1::CHANGE_ACCESS});
  EXPECT_TRUE(IsError(registry_->ReregisterMr(again), absl::StatusCode::kFailedPrecondition, "name"));
  EXPECT_TRUE(IsError(registry_->BindMw(BindReq(w.name(), mr.name(), 0, kPage)),
                      absl::StatusCode::kFailedPrecondition, "mr"));
  EXPECT_EQ(ledger_->calls("rereg_mr"), 1);
  EXPECT_EQ(ledger_->calls("bind"), 0);
  EXPECT_EQ(ledger_->calls("reg_mr"), 1);
  EXPECT_FALSE(Mw(w.name()).bound());

  // Deregister is accepted (ibv_rereg_mr(3) NOTES: even on failure, ibv_dereg_mr is still needed).
  EXPECT_OK(registry_->DeregisterMr(mr.name()));
  EXPECT_EQ(Pd(pd).mr_count(), 0u);
  EXPECT_EQ(Live(), "pds=1 mrs=0 mws=1 qps=0");
}

INSTANTIATE_TEST_SUITE_P(Codes, NativeUnusableTest,
                         ::testing::Values(fabric::ReregCode::kErrCmd, fabric::ReregCode::kErrCmdAndDoForkNew),
                         [](const ::testing::TestParamInfo<fabric::ReregCode>& info) {
                           return info.param == fabric::ReregCode::kErrCmd ? "ErrCmd" : "ErrCmdAndDoForkNew";
                         });

// BUG (contract gap; server/registry/registry.cc, Registry::ReregisterMr): docs/api.md promises that
// "every refusal before the fabric is called also carries" a rereg outcome, "so a client can always tell
// from the error alone what survived". A rereg of a region that is already MR_UNUSABLE is refused with
// FAILED_PRECONDITION but carries no rereg_outcome at all (REREG_OUTCOME_UNSPECIFIED): the `unusable`
// check returns before the `refuse` wrapper is applied. What survives is an unusable region, so the
// outcome should be OUTCOME_MR_UNUSABLE (OUTCOME_OLD_MR_VALID, the other refusals' value, would be false).
TEST_F(RegistryTest, ReregOfAnUnusableRegionSaysItIsUnusable) {
  const std::string pd = NewPd(kNat);
  v1::MemoryRegion mr = NewMr(pd);
  ledger_->ScriptRereg(fabric::ReregCode::kErrCmd, EIO);
  ASSERT_FALSE(registry_->ReregisterMr(ReregReq(mr.name(), {v1::CHANGE_ACCESS})).ok());
  absl::StatusOr<v1::ReregisterMrResponse> r = registry_->ReregisterMr(ReregReq(mr.name(), {v1::CHANGE_ACCESS}));
  EXPECT_TRUE(IsError(r, absl::StatusCode::kFailedPrecondition, "name"));
  EXPECT_EQ(DetailOf(r.status()).rereg_outcome(), v1::OUTCOME_MR_UNUSABLE);
}

TEST_F(RegistryTest, AnUnusableRegionIsReleasedByACascadeAndTheDestructor) {
  const std::string pd = NewPd(kNat);
  v1::MemoryRegion a = NewMr(pd), b = NewMr(pd);
  ledger_->ScriptRereg(fabric::ReregCode::kErrCmd, EINVAL);
  ledger_->ScriptRereg(fabric::ReregCode::kErrCmdAndDoForkNew, EINVAL);
  EXPECT_FALSE(registry_->ReregisterMr(ReregReq(a.name(), {v1::CHANGE_ACCESS})).ok());
  EXPECT_FALSE(registry_->ReregisterMr(ReregReq(b.name(), {v1::CHANGE_ACCESS})).ok());
  v1::DeletePdRequest del;
  del.set_name(pd);
  del.set_cascade(true);
  EXPECT_THAT(OK(registry_->DeletePd(del)).deleted(), ElementsAre(a.name(), b.name(), pd));
  const std::string pd2 = NewPd(kNat);
  v1::MemoryRegion c = NewMr(pd2);
  ledger_->ScriptRereg(fabric::ReregCode::kErrCmd, EINVAL);
  EXPECT_FALSE(registry_->ReregisterMr(ReregReq(c.name(), {v1::CHANGE_ACCESS})).ok());
  // TearDown destroys the registry with the unusable MR in it and checks it was released.
}

// ---------------------------------------------------------------------------------------------------------
// Queue pairs

TEST_F(RegistryTest, QueuePairsAreCreatedInInitAndConnectToRts) {
  const std::string pd = NewPd();
  v1::QueuePair qp = NewQp(pd, false);
  EXPECT_EQ(qp.name(), "qps/1");
  EXPECT_EQ(qp.pd(), pd);
  EXPECT_EQ(qp.state(), v1::QP_INIT);
  EXPECT_EQ(qp.port(), 1u);
  EXPECT_EQ(qp.gid_index(), 1u);  // the IPv4-mapped RoCEv2 GID
  EXPECT_EQ(qp.local().gid(), "0000:0000:0000:0000:0000:ffff:0a00:0001");
  EXPECT_FALSE(qp.has_remote());
  EXPECT_EQ(Pd(pd).qp_count(), 1u);

  EXPECT_TRUE(IsError(registry_->ConnectQp(ConnectReq(qp.name(), 0)), absl::StatusCode::kInvalidArgument,
                      "remote.qpn"));
  EXPECT_TRUE(IsError(registry_->ConnectQp(ConnectReq(qp.name(), 0x1000000)), absl::StatusCode::kInvalidArgument,
                      "remote.qpn"));
  EXPECT_TRUE(IsError(registry_->ConnectQp(ConnectReq(qp.name(), 5, 0x1000000)),
                      absl::StatusCode::kInvalidArgument, "remote.psn"));
  EXPECT_EQ(ledger_->calls("connect"), 0);

  ledger_->FailNextConnect(ETIMEDOUT);
  absl::StatusOr<v1::QueuePair> failed = registry_->ConnectQp(ConnectReq(qp.name()));
  EXPECT_EQ(ErrnoOf(failed.status()), ETIMEDOUT);
  EXPECT_FALSE(Qp(qp.name()).has_remote());

  v1::QueuePair connected = OK(registry_->ConnectQp(ConnectReq(qp.name(), 0x4242, 9)));
  EXPECT_EQ(connected.state(), v1::QP_RTS);
  EXPECT_EQ(connected.remote().qpn(), 0x4242u);
  EXPECT_EQ(connected.remote().psn(), 9u);

  v1::CreateQpRequest r;
  r.set_pd(pd);
  r.set_port(2);
  EXPECT_TRUE(IsError(registry_->CreateQp(r), absl::StatusCode::kInvalidArgument, "port"));
  r.set_port(1);
  r.set_gid_index(5);
  EXPECT_TRUE(IsError(registry_->CreateQp(r), absl::StatusCode::kInvalidArgument, "gid_index"));
  r.set_gid_index(0);
  EXPECT_EQ(OK(registry_->CreateQp(r)).gid_index(), 0u);
  EXPECT_EQ(registry_->ListQps().size(), 2u);
}

// BUG (server/registry/registry.cc, Registry::ConnectQp): remote.qpn and remote.psn are range-checked, but
// remote.lid (a uint32 on the wire, a 16-bit LID in verbs) is narrowed with static_cast<uint16_t> without
// a check: lid 0x10001 silently becomes LID 1, so the QP is connected to a different port than the one
// asked for, the call succeeds, and GetQp then reports remote.lid 1. Expected: INVALID_ARGUMENT naming
// "remote.lid", and nothing reaches the fabric.
TEST_F(RegistryTest, ConnectQpRejectsALidWiderThan16Bits) {
  v1::QueuePair qp = NewQp(NewPd(), /*connect=*/false);
  v1::ConnectQpRequest req = ConnectReq(qp.name());
  req.mutable_remote()->set_lid(0x10001);
  absl::StatusOr<v1::QueuePair> r = registry_->ConnectQp(req);
  EXPECT_TRUE(IsError(r, absl::StatusCode::kInvalidArgument, "remote.lid"));
  EXPECT_EQ(ledger_->calls("connect"), 0);
  EXPECT_EQ(Qp(qp.name()).state(), v1::QP_INIT);
}

TEST_F(RegistryTest, NamesHaveOneCanonicalForm) {
  const std::string pd = NewPd();
  ASSERT_EQ(pd, "pds/1");
  for (const char* alias : {"pds/01", "pds/+1", "pds/ 1", "pds/1 ", "pds/", "pds/0x1"}) {
    EXPECT_TRUE(IsError(registry_->GetPd(alias), absl::StatusCode::kInvalidArgument, "name")) << alias;
  }
}

TEST_F(RegistryTest, DeletingTheQpAType1WindowWasBoundThroughClearsItFromTheBinding) {
  const std::string pd = NewPd();
  v1::QueuePair qp = NewQp(pd, /*connect=*/true);
  v1::RegisterMrRequest r;
  r.set_pd(pd);
  r.mutable_source()->mutable_anonymous()->set_size(8192);
  r.add_access(v1::LOCAL_WRITE);
  r.add_access(v1::MW_BIND);
  ASSERT_OK_AND_ASSIGN(v1::MemoryRegion mr, registry_->RegisterMr(r));
  v1::AllocMwRequest a;
  a.set_pd(pd);
  a.set_type(v1::TYPE_1);
  ASSERT_OK_AND_ASSIGN(v1::MemoryWindow mw, registry_->AllocMw(a));
  v1::BindMwRequest b;
  b.set_name(mw.name());
  b.set_mr(mr.name());
  b.set_length(4096);
  b.add_access(v1::REMOTE_READ);
  b.set_qp(qp.name());
  ASSERT_OK_AND_ASSIGN(v1::MemoryWindow bound, registry_->BindMw(b));
  EXPECT_EQ(bound.binding().qp(), qp.name());
  ASSERT_TRUE(registry_->DeleteQp(qp.name()).ok());
  ASSERT_OK_AND_ASSIGN(v1::MemoryWindow after, registry_->GetMw(mw.name()));
  EXPECT_TRUE(after.bound());
  EXPECT_EQ(after.binding().qp(), "");
}

// ---------------------------------------------------------------------------------------------------------
// Memory windows

TEST_F(RegistryTest, AllocMwChecksTheDeviceSupport) {
  fabric::DeviceInfo no_type2 = fake::MakeDeviceInfo("rxe0");
  no_type2.mw_type2a = no_type2.mw_type2b = false;
  fabric::DeviceInfo no_mw = fake::MakeDeviceInfo("rxe1");
  no_mw.mw_type1 = no_mw.mw_type2a = no_mw.mw_type2b = false;
  Reset({no_type2, no_mw});
  const std::string a = NewPd("rxe0"), b = NewPd("rxe1");
  v1::AllocMwRequest r;
  r.set_pd(a);
  r.set_type(v1::TYPE_2);
  EXPECT_TRUE(IsError(registry_->AllocMw(r), absl::StatusCode::kFailedPrecondition, "type"));
  r.set_type(v1::MW_TYPE_UNSPECIFIED);
  EXPECT_TRUE(IsError(registry_->AllocMw(r), absl::StatusCode::kInvalidArgument, "type"));
  r.set_pd(b);
  r.set_type(v1::TYPE_1);
  EXPECT_TRUE(IsError(registry_->AllocMw(r), absl::StatusCode::kFailedPrecondition, "type"));
  EXPECT_EQ(ledger_->calls("alloc_mw"), 0);
  EXPECT_EQ(Pd(a).mw_count(), 0u);

  r.set_pd(a);
  v1::MemoryWindow w = OK(registry_->AllocMw(r));
  EXPECT_EQ(w.type(), v1::TYPE_1);
  EXPECT_FALSE(w.bound());
  EXPECT_EQ(w.pd(), a);
  EXPECT_EQ(Pd(a).mw_count(), 1u);

  // Type 2A alone is enough for type 2.
  fabric::DeviceInfo only_2a = fake::MakeDeviceInfo("rxe0");
  only_2a.mw_type2b = false;
  only_2a.mw_type2a = true;
  Reset({only_2a});
  EXPECT_EQ(NewMw(NewPd(), v1::TYPE_2).type(), v1::TYPE_2);

  ledger_->FailNextAllocMw(ENOMEM);
  r.set_pd("pds/1");
  r.set_type(v1::TYPE_1);
  absl::StatusOr<v1::MemoryWindow> failed = registry_->AllocMw(r);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CallOf(failed.status()), "ibv_alloc_mw");
  EXPECT_EQ(Pd("pds/1").mw_count(), 1u);
}

// A PD with an MR (LOCAL_WRITE, REMOTE_READ, REMOTE_WRITE, MW_BIND; 4 pages), a type 1 and a type 2 window
// and a connected QP.
class BindTest : public RegistryTest {
 protected:
  void SetUp() override {
    pd_ = NewPd();
    mr_ = NewMr(pd_, 4 * kPage);
    w1_ = NewMw(pd_, v1::TYPE_1);
    w2_ = NewMw(pd_, v1::TYPE_2);
    qp_ = NewQp(pd_);
  }
  // Expect `req` refused with (code, field), with nothing bound, registered or posted.
  void ExpectRefused(const v1::BindMwRequest& req, absl::StatusCode code, const std::string& field) {
    const v1::MemoryWindow before = Mw(req.name());
    const int binds = ledger_->calls("bind"), regs = ledger_->calls("reg_mr");
    const std::string live = Live();
    EXPECT_TRUE(IsError(registry_->BindMw(req), code, field));
    EXPECT_EQ(ledger_->calls("bind"), binds);
    EXPECT_EQ(ledger_->calls("reg_mr"), regs);  // no bounds region either
    EXPECT_EQ(Live(), live);
    EXPECT_TRUE(MessageDifferencer::Equals(Mw(req.name()), before));
    EXPECT_EQ(Mr(mr_.name()).bound_windows(), 0u);
    EXPECT_EQ(Qp(qp_.name()).bound_windows(), 0u);
  }

  std::string pd_;
  v1::MemoryRegion mr_;
  v1::MemoryWindow w1_, w2_;
  v1::QueuePair qp_;
};

TEST_F(BindTest, BindsATypeOneWindowAndPublishesTheNewRkey) {
  v1::MemoryWindow w = OK(registry_->BindMw(BindReq(w1_.name(), mr_.name(), 100, 2 * kPage,
                                                    {v1::REMOTE_READ, v1::REMOTE_WRITE})));
  EXPECT_TRUE(w.bound());
  EXPECT_EQ(w.rkey(), fake::IncRkey(w1_.rkey()));
  EXPECT_EQ(w.binding().mr(), mr_.name());
  EXPECT_EQ(w.binding().offset(), 100u);
  EXPECT_EQ(w.binding().length(), 2 * kPage);
  EXPECT_THAT(w.binding().access(), ElementsAre(v1::REMOTE_READ, v1::REMOTE_WRITE));
  EXPECT_FALSE(w.binding().zero_based());
  EXPECT_EQ(w.binding().addr(), mr_.addr() + 100);
  EXPECT_EQ(w.binding().remote_addr(), mr_.addr() + 100);
  EXPECT_EQ(w.binding().qp(), "");
  EXPECT_EQ(Mr(mr_.name()).bound_windows(), 1u);
  EXPECT_TRUE(MessageDifferencer::Equals(Mw(w1_.name()), w));
  // The window is bound to its private bounds MR: exactly its range, in its PD, with the parent's
  // LOCAL_WRITE and MW_BIND and no remote access of its own.
  const uint64_t parent = ledger_->MrIdByLkey(mr_.lkey());
  const FakeLedger::MrView bounds = ledger_->Mr(ledger_->MwBoundMr(ledger_->MwIdByRkey(w.rkey())));
  ASSERT_NE(bounds.id, 0u);
  EXPECT_NE(bounds.id, parent);
  EXPECT_EQ(bounds.pd, ledger_->Mr(parent).pd);
  EXPECT_EQ(bounds.addr, mr_.addr() + 100);
  EXPECT_EQ(bounds.length, 2 * kPage);
  EXPECT_EQ(bounds.access, static_cast<uint32_t>(fabric::kLocalWrite | fabric::kMwBind));
  EXPECT_EQ(ledger_->MrBoundWindows(parent), 0);
  EXPECT_EQ(Live(), "pds=1 mrs=2 mws=2 qps=2");  // qps: the user QP and the PD's bind QP
  // The whole MR, to the last byte: a new bounds MR; the previous one is released after the bind.
  ledger_->ClearEvents();
  v1::MemoryWindow again = OK(registry_->BindMw(BindReq(w1_.name(), mr_.name(), 0, 4 * kPage)));
  EXPECT_EQ(again.rkey(), fake::IncRkey(w.rkey()));
  EXPECT_EQ(Mr(mr_.name()).bound_windows(), 1u);
  const FakeLedger::MrView bounds2 = ledger_->Mr(ledger_->MwBoundMr(ledger_->MwIdByRkey(again.rkey())));
  EXPECT_EQ(bounds2.addr, mr_.addr());
  EXPECT_EQ(bounds2.length, 4 * kPage);
  EXPECT_THAT(ledger_->events_of({"reg_mr", "bind_mw", "dereg_mr"}),
              ElementsAre("reg_mr " + S(bounds2.id), "bind_mw " + S(ledger_->MwIdByRkey(again.rkey())),
                          "dereg_mr " + S(bounds.id)));
  EXPECT_EQ(Live(), "pds=1 mrs=2 mws=2 qps=2");
  // ListMws with the filter.
  v1::ListMwsRequest list;
  list.set_pd(pd_);
  EXPECT_EQ(OK(registry_->ListMws(list)).size(), 2u);
}

TEST_F(BindTest, BindsATypeTwoWindowOnItsQp) {
  v1::MemoryWindow w = OK(registry_->BindMw(BindReq(w2_.name(), mr_.name(), kPage, kPage,
                                                    {v1::REMOTE_READ}, qp_.name(), /*zero_based=*/true)));
  EXPECT_TRUE(w.bound());
  EXPECT_EQ(w.rkey(), fake::IncRkey(w2_.rkey()));
  EXPECT_TRUE(w.binding().zero_based());
  EXPECT_EQ(w.binding().addr(), mr_.addr() + kPage);
  EXPECT_EQ(w.binding().remote_addr(), 0u);
  EXPECT_EQ(w.binding().qp(), qp_.name());
  EXPECT_EQ(Qp(qp_.name()).bound_windows(), 1u);
  EXPECT_EQ(Mr(mr_.name()).bound_windows(), 1u);
}

TEST_F(BindTest, ATypeTwoWindowCannotBeBoundTwice) {
  v1::MemoryWindow w = OK(registry_->BindMw(BindReq(w2_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ},
                                                    qp_.name())));
  absl::StatusOr<v1::MemoryWindow> r =
      registry_->BindMw(BindReq(w2_.name(), mr_.name(), kPage, kPage, {v1::REMOTE_READ}, qp_.name()));
  EXPECT_TRUE(IsError(r, absl::StatusCode::kFailedPrecondition, "name"));
  EXPECT_TRUE(MessageDifferencer::Equals(Mw(w2_.name()), w));
  EXPECT_EQ(Mr(mr_.name()).bound_windows(), 1u);
  EXPECT_EQ(Qp(qp_.name()).bound_windows(), 1u);
  // After invalidation it binds again, with a new rkey.
  v1::MemoryWindow inv = OK(registry_->InvalidateMw(w2_.name()));
  EXPECT_FALSE(inv.bound());
  EXPECT_EQ(Qp(qp_.name()).bound_windows(), 0u);
  v1::MemoryWindow again =
      OK(registry_->BindMw(BindReq(w2_.name(), mr_.name(), kPage, kPage, {v1::REMOTE_READ}, qp_.name())));
  EXPECT_EQ(again.rkey(), fake::IncRkey(inv.rkey()));
  EXPECT_NE(again.rkey(), w.rkey());
}

TEST_F(BindTest, RefusesAZeroOrOutOfRangeExtent) {
  ExpectRefused(BindReq(w1_.name(), mr_.name(), 0, 0), absl::StatusCode::kInvalidArgument, "length");
  ExpectRefused(BindReq(w1_.name(), mr_.name(), 4 * kPage, 1), absl::StatusCode::kOutOfRange, "offset");
  ExpectRefused(BindReq(w1_.name(), mr_.name(), UINT64_MAX, 1), absl::StatusCode::kOutOfRange, "offset");
  ExpectRefused(BindReq(w1_.name(), mr_.name(), 1, 4 * kPage), absl::StatusCode::kOutOfRange, "length");
  ExpectRefused(BindReq(w1_.name(), mr_.name(), 0, 4 * kPage + 1), absl::StatusCode::kOutOfRange, "length");
  ExpectRefused(BindReq(w1_.name(), mr_.name(), 2, UINT64_MAX), absl::StatusCode::kOutOfRange, "length");
}

TEST_F(BindTest, RefusesLocalWriteOrMwBindOnAWindow) {
  ExpectRefused(BindReq(w1_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ, v1::LOCAL_WRITE}),
                absl::StatusCode::kInvalidArgument, "access");
  ExpectRefused(BindReq(w1_.name(), mr_.name(), 0, kPage, {v1::MW_BIND}), absl::StatusCode::kInvalidArgument,
                "access");
  v1::BindMwRequest unknown = BindReq(w1_.name(), mr_.name(), 0, kPage);
  unknown.add_access(static_cast<v1::Access>(77));
  ExpectRefused(unknown, absl::StatusCode::kInvalidArgument, "access");
}

TEST_F(BindTest, RefusesAnMrWithoutMwBind) {
  v1::MemoryRegion plain = NewMr(pd_, kPage, {v1::LOCAL_WRITE, v1::REMOTE_READ, v1::REMOTE_WRITE});
  ExpectRefused(BindReq(w1_.name(), plain.name(), 0, kPage), absl::StatusCode::kFailedPrecondition, "mr");
  ExpectRefused(BindReq(w2_.name(), plain.name(), 0, kPage, {v1::REMOTE_READ}, qp_.name()),
                absl::StatusCode::kFailedPrecondition, "mr");
}

TEST_F(BindTest, RemoteWriteOrAtomicWindowsNeedLocalWriteOnTheMr) {
  v1::MemoryRegion ro = NewMr(pd_, kPage, {v1::REMOTE_READ, v1::MW_BIND});
  ExpectRefused(BindReq(w1_.name(), ro.name(), 0, kPage, {v1::REMOTE_WRITE}), absl::StatusCode::kFailedPrecondition,
                "access");
  ExpectRefused(BindReq(w1_.name(), ro.name(), 0, kPage, {v1::REMOTE_READ, v1::REMOTE_ATOMIC}),
                absl::StatusCode::kFailedPrecondition, "access");
  // REMOTE_READ alone is fine there.
  EXPECT_TRUE(registry_->BindMw(BindReq(w1_.name(), ro.name(), 0, kPage, {v1::REMOTE_READ})).ok());
  // A window may ask for REMOTE_WRITE/ATOMIC the MR itself lacks, as long as the MR has LOCAL_WRITE.
  v1::MemoryRegion lw = NewMr(pd_, kPage, {v1::LOCAL_WRITE, v1::MW_BIND});
  EXPECT_TRUE(registry_->BindMw(BindReq(w2_.name(), lw.name(), 0, kPage, {v1::REMOTE_WRITE, v1::REMOTE_ATOMIC},
                                        qp_.name()))
                  .ok());
}

TEST_F(BindTest, ZeroBasedIsForTypeTwoOnly) {
  ExpectRefused(BindReq(w1_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ}, "", true),
                absl::StatusCode::kInvalidArgument, "zero_based");
  ExpectRefused(BindReq(w1_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ}, qp_.name(), true),
                absl::StatusCode::kInvalidArgument, "zero_based");
}

TEST_F(BindTest, TypeTwoNeedsAConnectedQpOfTheSamePd) {
  ExpectRefused(BindReq(w2_.name(), mr_.name(), 0, kPage), absl::StatusCode::kInvalidArgument, "qp");
  v1::QueuePair idle = NewQp(pd_, /*connect=*/false);
  ExpectRefused(BindReq(w2_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ}, idle.name()),
                absl::StatusCode::kFailedPrecondition, "qp");
  // A type 1 window on an explicitly named QP needs it connected too.
  ExpectRefused(BindReq(w1_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ}, idle.name()),
                absl::StatusCode::kFailedPrecondition, "qp");
  const std::string other = NewPd();
  v1::QueuePair foreign = NewQp(other);
  ExpectRefused(BindReq(w2_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ}, foreign.name()),
                absl::StatusCode::kInvalidArgument, "qp");
  ExpectRefused(BindReq(w2_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ}, "qps/99"), absl::StatusCode::kNotFound,
                "qp");
}

TEST_F(BindTest, TheMrMustBeInTheWindowsPd) {
  const std::string other = NewPd();
  v1::MemoryRegion foreign = NewMr(other);
  const int binds = ledger_->calls("bind");
  EXPECT_TRUE(IsError(registry_->BindMw(BindReq(w1_.name(), foreign.name(), 0, kPage)),
                      absl::StatusCode::kInvalidArgument, "mr"));
  EXPECT_TRUE(IsError(registry_->BindMw(BindReq(w2_.name(), foreign.name(), 0, kPage, {v1::REMOTE_READ},
                                                qp_.name())),
                      absl::StatusCode::kInvalidArgument, "mr"));
  EXPECT_EQ(ledger_->calls("bind"), binds);
  EXPECT_EQ(Mr(foreign.name()).bound_windows(), 0u);
  EXPECT_TRUE(IsError(registry_->BindMw(BindReq(w1_.name(), "mrs/99", 0, kPage)), absl::StatusCode::kNotFound,
                      "mr"));
}

TEST_F(BindTest, RebindingATypeOneWindowMovesItBetweenRegions) {
  v1::MemoryRegion other = NewMr(pd_, kPage);
  ASSERT_OK(registry_->BindMw(BindReq(w1_.name(), mr_.name(), 0, kPage)).status());
  EXPECT_EQ(Mr(mr_.name()).bound_windows(), 1u);
  v1::MemoryWindow w = OK(registry_->BindMw(BindReq(w1_.name(), other.name(), 0, kPage)));
  EXPECT_EQ(w.binding().mr(), other.name());
  EXPECT_EQ(Mr(mr_.name()).bound_windows(), 0u);
  EXPECT_EQ(Mr(other.name()).bound_windows(), 1u);
  EXPECT_EQ(ledger_->Mr(ledger_->MwBoundMr(ledger_->MwIdByRkey(w.rkey()))).addr, other.addr());
  // The first region is free again.
  EXPECT_OK(registry_->DeregisterMr(mr_.name()));
  EXPECT_EQ(ErrnoOf(registry_->DeregisterMr(other.name())), EBUSY);
}

TEST_F(BindTest, AFailedBindCompletionLeavesTheWindowAsItWas) {
  v1::MemoryRegion other = NewMr(pd_, kPage);
  v1::MemoryWindow bound = OK(registry_->BindMw(BindReq(w1_.name(), mr_.name(), 0, kPage)));
  const int connects = ledger_->calls("connect");
  ledger_->FailNextBind();
  absl::StatusOr<v1::MemoryWindow> r = registry_->BindMw(BindReq(w1_.name(), other.name(), 0, kPage));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAborted) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(w1_.name()));
  EXPECT_TRUE(MessageDifferencer::Equals(Mw(w1_.name()), bound));  // same rkey, same binding
  EXPECT_EQ(Mr(mr_.name()).bound_windows(), 1u);
  EXPECT_EQ(Mr(other.name()).bound_windows(), 0u);
  const uint64_t bounds = ledger_->MwBoundMr(ledger_->MwIdByRkey(bound.rkey()));
  EXPECT_EQ(ledger_->Mr(bounds).addr, mr_.addr());  // still the old bounds MR
  EXPECT_EQ(Live(), "pds=1 mrs=3 mws=2 qps=2");     // the new bounds MR was released
  // The internal bind QP went to the error state; the next bind brings it back.
  v1::MemoryWindow w = OK(registry_->BindMw(BindReq(w1_.name(), other.name(), 0, kPage)));
  EXPECT_EQ(w.rkey(), fake::IncRkey(bound.rkey()));
  EXPECT_EQ(ledger_->calls("connect"), connects + 1);
  EXPECT_EQ(Mr(mr_.name()).bound_windows(), 0u);
  EXPECT_EQ(Mr(other.name()).bound_windows(), 1u);
}

TEST_F(BindTest, AFailedTypeTwoBindLeavesTheWindowUnboundAndTheQpInError) {
  ledger_->FailNextBind();
  absl::StatusOr<v1::MemoryWindow> r =
      registry_->BindMw(BindReq(w2_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ}, qp_.name()));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAborted) << r.status();
  EXPECT_TRUE(MessageDifferencer::Equals(Mw(w2_.name()), w2_));
  EXPECT_EQ(Qp(qp_.name()).bound_windows(), 0u);
  EXPECT_EQ(Mr(mr_.name()).bound_windows(), 0u);
  EXPECT_EQ(Qp(qp_.name()).state(), v1::QP_ERROR);
  // Not usable until reconnected.
  ExpectRefused(BindReq(w2_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ}, qp_.name()),
                absl::StatusCode::kFailedPrecondition, "qp");
  ASSERT_OK(registry_->ConnectQp(ConnectReq(qp_.name())).status());
  EXPECT_TRUE(registry_->BindMw(BindReq(w2_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ}, qp_.name())).ok());
}

TEST_F(BindTest, AQpWithABoundTypeTwoWindowCannotBeDeletedOrReconnected) {
  ASSERT_OK(registry_->BindMw(BindReq(w2_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ}, qp_.name())).status());
  absl::Status s = registry_->DeleteQp(qp_.name());
  EXPECT_TRUE(IsError(s, absl::StatusCode::kFailedPrecondition, "name"));
  EXPECT_EQ(ErrnoOf(s), EBUSY);
  absl::StatusOr<v1::QueuePair> c = registry_->ConnectQp(ConnectReq(qp_.name()));
  EXPECT_TRUE(IsError(c, absl::StatusCode::kFailedPrecondition, "name"));
  EXPECT_EQ(ErrnoOf(c.status()), EBUSY);
  EXPECT_EQ(Pd(pd_).qp_count(), 1u);

  ASSERT_OK(registry_->InvalidateMw(w2_.name()).status());
  EXPECT_OK(registry_->DeleteQp(qp_.name()));
  EXPECT_EQ(Pd(pd_).qp_count(), 0u);
}

TEST_F(BindTest, DeallocatingABoundTypeTwoWindowFreesItsQp) {
  ASSERT_OK(registry_->BindMw(BindReq(w2_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ}, qp_.name())).status());
  ASSERT_OK(registry_->DeallocMw(w2_.name()));
  EXPECT_EQ(Qp(qp_.name()).bound_windows(), 0u);
  EXPECT_EQ(Mr(mr_.name()).bound_windows(), 0u);
  EXPECT_EQ(Pd(pd_).mw_count(), 1u);
  EXPECT_OK(registry_->DeleteQp(qp_.name()));
}

TEST_F(BindTest, ATypeOneWindowBoundThroughAUserQpOutlivesIt) {
  v1::MemoryWindow w =
      OK(registry_->BindMw(BindReq(w1_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ}, qp_.name())));
  EXPECT_EQ(Qp(qp_.name()).bound_windows(), 0u);  // type 1 windows are not tied to the QP
  EXPECT_OK(registry_->DeleteQp(qp_.name()));
  EXPECT_TRUE(Mw(w1_.name()).bound());
  // Invalidation goes through rdmad's own bind QP.
  v1::MemoryWindow inv = OK(registry_->InvalidateMw(w1_.name()));
  EXPECT_FALSE(inv.bound());
  EXPECT_EQ(Mr(mr_.name()).bound_windows(), 0u);
}

TEST_F(BindTest, InvalidateIsIdempotent) {
  const int before = ledger_->calls("invalidate");
  v1::MemoryWindow w = OK(registry_->InvalidateMw(w1_.name()));  // never bound
  EXPECT_FALSE(w.bound());
  EXPECT_EQ(ledger_->calls("invalidate"), before);
  ASSERT_OK(registry_->BindMw(BindReq(w1_.name(), mr_.name(), 0, kPage)).status());
  w = OK(registry_->InvalidateMw(w1_.name()));
  EXPECT_FALSE(w.bound());
  EXPECT_FALSE(w.has_binding());
  EXPECT_EQ(Mr(mr_.name()).bound_windows(), 0u);
  EXPECT_EQ(ledger_->MwBoundMr(ledger_->MwIdByRkey(w.rkey())), 0u);
  EXPECT_EQ(ledger_->calls("invalidate"), before + 1);
  EXPECT_EQ(Live(), "pds=1 mrs=1 mws=2 qps=2");  // the bounds MR is released
  v1::MemoryWindow again = OK(registry_->InvalidateMw(w1_.name()));
  EXPECT_TRUE(MessageDifferencer::Equals(again, w));
  EXPECT_EQ(ledger_->calls("invalidate"), before + 1);
  // Type 2 as well.
  ASSERT_OK(registry_->BindMw(BindReq(w2_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ}, qp_.name())).status());
  ASSERT_OK(registry_->InvalidateMw(w2_.name()).status());
  ASSERT_OK(registry_->InvalidateMw(w2_.name()).status());
  EXPECT_EQ(ledger_->calls("invalidate"), before + 2);
}

TEST_F(BindTest, AFlushedInvalidationStillRevokesByReplacingTheWindow) {
  // A type 2 window whose QP went to the error state (a client's bad read) cannot be invalidated with
  // LOCAL_INV: the work request is flushed. Revocation must still happen: the window is deallocated (which
  // invalidates it) and a new one takes its name, unbound.
  v1::MemoryWindow bound =
      OK(registry_->BindMw(BindReq(w2_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ}, qp_.name())));
  const uint64_t old_mw = ledger_->MwIdByRkey(bound.rkey());
  ledger_->FailNextInvalidate();
  v1::MemoryWindow r = OK(registry_->InvalidateMw(w2_.name()));
  EXPECT_FALSE(r.bound());
  EXPECT_EQ(r.name(), w2_.name());
  EXPECT_NE(r.rkey(), bound.rkey());
  EXPECT_EQ(ledger_->MwIdByRkey(bound.rkey()), 0u);  // the old window is gone from the device
  EXPECT_THAT(ledger_->events_of({"dealloc_mw"}), ::testing::Contains("dealloc_mw " + S(old_mw)));
  EXPECT_EQ(Mr(mr_.name()).bound_windows(), 0u);
  EXPECT_EQ(Qp(qp_.name()).bound_windows(), 0u);
  EXPECT_OK(registry_->DeregisterMr(mr_.name()));
}

TEST_F(BindTest, AWindowOnAQpKnownToBeInErrorIsReplacedWithoutPostingOnIt) {
  v1::MemoryWindow bound =
      OK(registry_->BindMw(BindReq(w2_.name(), mr_.name(), 0, kPage, {v1::REMOTE_READ}, qp_.name())));
  ledger_->ForceQpError(Qp(qp_.name()).local().qpn());  // a peer's bad read; GetQp (above) saw it
  EXPECT_EQ(Qp(qp_.name()).state(), v1::QP_ERROR);
  const int posted = ledger_->calls("invalidate");
  v1::MemoryWindow r = OK(registry_->InvalidateMw(w2_.name()));
  EXPECT_FALSE(r.bound());
  EXPECT_EQ(ledger_->calls("invalidate"), posted);  // nothing posted on the dead QP
  EXPECT_EQ(ledger_->MwIdByRkey(bound.rkey()), 0u);
}

TEST_F(BindTest, BoundsRegionsArePrivateAndReleasedWithTheirWindow) {
  ASSERT_OK(registry_->BindMw(BindReq(w1_.name(), mr_.name(), 0, kPage)).status());
  ASSERT_OK(registry_->BindMw(BindReq(w2_.name(), mr_.name(), kPage, kPage, {v1::REMOTE_READ}, qp_.name())).status());
  EXPECT_EQ(Live(), "pds=1 mrs=3 mws=2 qps=2");
  // Not visible as regions, not counted in the PD.
  std::vector<v1::MemoryRegion> all = OK(registry_->ListMrs(v1::ListMrsRequest()));
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].name(), mr_.name());
  EXPECT_EQ(Pd(pd_).mr_count(), 1u);
  // Released with the window: by invalidation (after it), by deallocation (after the window).
  const uint64_t w1 = ledger_->MwIdByRkey(Mw(w1_.name()).rkey()), w2 = ledger_->MwIdByRkey(Mw(w2_.name()).rkey());
  const uint64_t b1 = ledger_->MwBoundMr(w1), b2 = ledger_->MwBoundMr(w2);
  ledger_->ClearEvents();
  ASSERT_OK(registry_->InvalidateMw(w2_.name()).status());
  ASSERT_OK(registry_->DeallocMw(w1_.name()));
  EXPECT_THAT(ledger_->events_of({"unbind_mw", "invalidate_mw", "dealloc_mw", "dereg_mr"}),
              ElementsAre("invalidate_mw " + S(w2), "dereg_mr " + S(b2), "dealloc_mw " + S(w1), "dereg_mr " + S(b1)));
  EXPECT_EQ(Live(), "pds=1 mrs=1 mws=1 qps=2");
}

TEST_F(BindTest, AFailedBoundsRegistrationLeavesTheWindowAsItWas) {
  ledger_->FailNextRegMr(ENOMEM);
  const int binds = ledger_->calls("bind");
  absl::StatusOr<v1::MemoryWindow> r = registry_->BindMw(BindReq(w1_.name(), mr_.name(), 0, kPage));
  EXPECT_TRUE(IsError(r, absl::StatusCode::kResourceExhausted, ""));
  EXPECT_EQ(CallOf(r.status()), "ibv_reg_mr");
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("bounds region"));
  EXPECT_EQ(ledger_->calls("bind"), binds);
  EXPECT_TRUE(MessageDifferencer::Equals(Mw(w1_.name()), w1_));
  EXPECT_EQ(Mr(mr_.name()).bound_windows(), 0u);
  EXPECT_OK(registry_->DeregisterMr(mr_.name()));
}

// ---------------------------------------------------------------------------------------------------------
// Threads

TEST_F(RegistryTest, ConcurrentRegisterAndDeregisterKeepCountsConsistent) {
  const std::string pd = NewPd();
  constexpr int kThreads = 4, kIterations = 40;
  std::mutex names_mu;
  std::set<std::string> names;
  std::vector<std::string> kept;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIterations; ++i) {
        absl::StatusOr<v1::MemoryRegion> mr = registry_->RegisterMr(AnonReq(pd, kPage * (1 + (i % 3))));
        if (!mr.ok()) {
          failures++;
          continue;
        }
        {
          std::lock_guard<std::mutex> lock(names_mu);
          names.insert(mr->name());
        }
        if (i % 4 == t % 4) {  // keep some
          std::lock_guard<std::mutex> lock(names_mu);
          kept.push_back(mr->name());
        } else if (!registry_->DeregisterMr(mr->name()).ok()) {
          failures++;
        }
        if (absl::StatusOr<v1::ProtectionDomain> p = registry_->GetPd(pd); !p.ok()) failures++;
      }
    });
  }
  // Meanwhile, list and read from this thread.
  for (int i = 0; i < kIterations; ++i) {
    absl::StatusOr<std::vector<v1::MemoryRegion>> all = registry_->ListMrs(v1::ListMrsRequest());
    EXPECT_TRUE(all.ok());
    if (all.ok()) {
      for (const auto& m : *all) EXPECT_EQ(m.state(), v1::MR_READY);
    }
  }
  for (auto& th : threads) th.join();

  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(names.size(), static_cast<size_t>(kThreads * kIterations));  // every name distinct
  EXPECT_EQ(ledger_->calls("reg_mr"), kThreads * kIterations);
  EXPECT_EQ(Pd(pd).mr_count(), kept.size());
  EXPECT_EQ(OK(registry_->ListMrs(v1::ListMrsRequest())).size(), kept.size());
  EXPECT_EQ(ledger_->live().mrs, static_cast<int>(kept.size()));
  v1::DeletePdRequest del;
  del.set_name(pd);
  del.set_cascade(true);
  EXPECT_EQ(OK(registry_->DeletePd(del)).deleted_size(), static_cast<int>(kept.size()) + 1);
  EXPECT_EQ(Live(), "pds=0 mrs=0 mws=0 qps=0");
}

// ---------------------------------------------------------------------------------------------------------
// The fake itself: it must catch the rule violations the tests above rely on it to catch.

TEST(FakeFabricTest, CatchesVerbsRuleViolations) {
  auto ledger = std::make_shared<FakeLedger>();
  {
    fake::FakeFabric fabric({fake::MakeDeviceInfo("rxe0")}, ledger);
    ASSERT_EQ(fabric.devices().size(), 1u);
    absl::StatusOr<std::unique_ptr<fabric::Pd>> pd = fabric.devices()[0]->AllocPd();
    ASSERT_TRUE(pd.ok());
    std::vector<char> buf(2 * kPage);
    absl::StatusOr<std::unique_ptr<fabric::Mr>> mr =
        (*pd)->RegMr(buf.data(), buf.size(), fabric::kLocalWrite | fabric::kMwBind);
    ASSERT_TRUE(mr.ok());
    absl::StatusOr<std::unique_ptr<fabric::Mw>> mw = (*pd)->AllocMw(fabric::MwType::kType1);
    ASSERT_TRUE(mw.ok());
    fabric::QpOptions options;
    options.gid_index = 1;
    absl::StatusOr<std::unique_ptr<fabric::Qp>> qp = (*pd)->CreateQp(options);
    ASSERT_TRUE(qp.ok());
    EXPECT_EQ((*qp)->state(), fabric::QpState::kInit);

    fabric::BindSpec spec;
    spec.mr = mr->get();
    spec.addr = (*mr)->addr();
    spec.length = kPage;
    spec.access = fabric::kRemoteRead;
    fabric::Device* device = fabric.devices()[0];
    // Post, then drain the device's completions on this thread, as the dispatcher would.
    auto bind = [&](const fabric::BindSpec& s) -> absl::StatusOr<uint32_t> {
      absl::StatusOr<uint32_t> out = absl::UnknownError("no completion");
      if (absl::Status posted = (*qp)->PostBind(**mw, s, [&](absl::StatusOr<uint32_t> r) { out = r; }); !posted.ok()) {
        return posted;
      }
      device->DrainCompletions();
      return out;
    };
    EXPECT_FALSE(bind(spec).ok());  // not in RTS
    EXPECT_EQ(ledger->violations().size(), 1u);
    ASSERT_TRUE((*qp)->Connect((*qp)->local()).ok());
    EXPECT_EQ((*qp)->state(), fabric::QpState::kRts);
    spec.length = 3 * kPage;
    EXPECT_FALSE(bind(spec).ok());  // past the MR
    EXPECT_EQ((*qp)->state(), fabric::QpState::kError);
    ASSERT_TRUE((*qp)->Connect((*qp)->local()).ok());
    spec.length = kPage;
    const uint32_t before = (*mw)->rkey();
    absl::StatusOr<uint32_t> rkey = bind(spec);
    ASSERT_TRUE(rkey.ok());
    EXPECT_EQ(*rkey, fake::IncRkey(before));
    EXPECT_EQ((*mw)->rkey(), *rkey);
    // ibv_dereg_mr refuses while a window is bound.
    absl::Status busy = (*mr)->Release();
    EXPECT_EQ(ErrnoOf(busy), EBUSY);
    EXPECT_EQ(ledger->live().mrs, 1);
    absl::Status invalidated = absl::UnknownError("no completion");
    ASSERT_TRUE((*qp)->PostInvalidate(**mw, **mr, [&](absl::Status r) { invalidated = r; }).ok());
    device->DrainCompletions();
    ASSERT_TRUE(invalidated.ok());
    EXPECT_TRUE((*mr)->Release().ok());
    EXPECT_EQ(ledger->live().mrs, 0);
    EXPECT_EQ(ledger->violations().size(), 2u);
    // A PD destroyed while it holds a window and a QP.
    pd->reset();
    EXPECT_EQ(ledger->violations().size(), 3u);
    EXPECT_THAT(ledger->violations().back(), HasSubstr("pd 1 deallocated while it holds 2 object(s)"));
  }
  EXPECT_EQ(ledger->live().devices, 0);
  EXPECT_THAT(ledger->events_of({"dealloc_pd", "dealloc_mw", "destroy_qp", "close_device"}),
              ElementsAre("dealloc_pd 1", "destroy_qp 1", "dealloc_mw 1", "close_device rxe0"));
}

}  // namespace
}  // namespace rdmad
