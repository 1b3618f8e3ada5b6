// Unit tests of rdmad::Registry over the fake fabric (registry_fixture.h): devices (listed in name order,
// got by either name), names (counted up per kind and never reused, malformed ones INVALID_ARGUMENT and
// unknown ones NOT_FOUND, each naming the request's field) and protection domains (the label, a failed
// ibv_alloc_pd, deletion refused while the PD holds anything, the cascade's release order and where it stops).
//
// Threads: the test's own; the registry's dispatchers run the bind completions its calls wait for.
#include <cerrno>
#include <cstdint>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "server/common/status.h"
#include "server/rpc/status.h"
#include "tests/support/server_status.h"
#include "tests/support/status.h"
#include "tests/unit/registry_fixture.h"

namespace rdmad::registry_test {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::rdmad::test::IsError;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

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

// The tenant a PD was made for is the registry's record from its creation to its deletion, a cascade's too.
TEST_F(RegistryTest, EachPdsTenantIsKnownFromItsCreationToItsDeletion) {
  const std::string a1 = OK(registry_->CreatePd(PdReq(kEmu), "alpha")).name();
  const std::string a2 = OK(registry_->CreatePd(PdReq(kEmu), "alpha")).name();
  const std::string b = OK(registry_->CreatePd(PdReq(kEmu), "beta")).name();
  const std::string admins = NewPd();
  EXPECT_EQ(registry_->TenantOfPd(a1), "alpha");
  EXPECT_EQ(registry_->TenantOfPd(b), "beta");
  EXPECT_EQ(registry_->TenantOfPd(admins), "");
  EXPECT_EQ(registry_->TenantOfPd("pds/999"), "");
  EXPECT_THAT(registry_->PdsOfTenant("alpha"), ElementsAre(a1, a2));
  EXPECT_THAT(registry_->PdsOfTenant("gamma"), ::testing::IsEmpty());
  NewMr(a2);
  v1::DeletePdRequest del;
  del.set_name(a2);
  EXPECT_FALSE(registry_->DeletePd(del).ok());  // refused: still the tenant's
  EXPECT_EQ(registry_->TenantOfPd(a2), "alpha");
  del.set_cascade(true);
  ASSERT_OK(registry_->DeletePd(del).status());
  EXPECT_EQ(registry_->TenantOfPd(a2), "");
  EXPECT_THAT(registry_->PdsOfTenant("alpha"), ElementsAre(a1));
  del.set_name(a1);
  ASSERT_OK(registry_->DeletePd(del).status());
  EXPECT_THAT(registry_->PdsOfTenant("alpha"), ::testing::IsEmpty());
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

}  // namespace
}  // namespace rdmad::registry_test
