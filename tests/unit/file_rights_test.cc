// The caller's rights on files: the pure POSIX check (server/memory/file_rights.h) over every
// permission class, supplementary groups and root; then the registry over the fake fabric registering and
// re-registering files as another uid: 0444 owned by nobody is readable but not writable, 0600 owned by
// root is neither, a caller without a file identity gets no file at all, the tenant's roots narrow
// allowed_file_roots, and the check is made on the inode rdmad opened (a symlink does not launder it).
//
// The registry tests chown files and so need root (rdmad's own situation); they are skipped otherwise.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "server/common/status.h"
#include "server/memory/file_rights.h"
#include "server/registry/registry.h"
#include "server/registry/rules.h"
#include "tests/support/server_status.h"
#include "tests/support/status.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/fake_fabric.h"

namespace rdmad {
namespace {

using ::rdmad::fake::FakeLedger;
using ::rdmad::test::IsError;
using ::rdmad::test::TempDir;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr uint32_t kNobody = 65534;
constexpr uint64_t kPage = 4096;

FileIdentity Who(uint32_t uid, uint32_t gid, std::vector<uint32_t> groups = {}) {
  FileIdentity w;
  w.uid = uid;
  w.gid = gid;
  w.groups = std::move(groups);
  return w;
}
FileOwnership File(uint32_t uid, uint32_t gid, uint32_t mode) {
  FileOwnership f;
  f.uid = uid;
  f.gid = gid;
  f.mode = S_IFREG | mode;
  return f;
}
FileAccess Checked(FileIdentity who, std::vector<std::string> roots = {}) {
  FileAccess a;
  a.check = true;
  a.identity = std::move(who);
  a.roots = std::move(roots);
  return a;
}

constexpr unsigned R = kFileRead, W = kFileWrite, RW = kFileRead | kFileWrite;

// ---------------------------------------------------------------------------------------------------------
// The pure check

TEST(MayAccessTest, OwnerClassUsesTheOwnerBitsOnly) {
  const FileIdentity alice = Who(1000, 1000);
  EXPECT_TRUE(MayAccess(alice, File(1000, 50, 0600), RW));
  EXPECT_TRUE(MayAccess(alice, File(1000, 50, 0400), R));
  EXPECT_FALSE(MayAccess(alice, File(1000, 50, 0400), W));
  EXPECT_FALSE(MayAccess(alice, File(1000, 50, 0400), RW));
  EXPECT_TRUE(MayAccess(alice, File(1000, 50, 0200), W));
  EXPECT_FALSE(MayAccess(alice, File(1000, 50, 0200), R));
  // POSIX: the owner class decides alone, even when group or other would allow more.
  EXPECT_FALSE(MayAccess(alice, File(1000, 1000, 0066), R));
  EXPECT_FALSE(MayAccess(alice, File(1000, 1000, 0077), W));
  EXPECT_STREQ(PermissionClass(alice, File(1000, 1000, 0600)), "owner");
}

TEST(MayAccessTest, GroupClassByPrimaryOrSupplementaryGroup) {
  const FileIdentity bob = Who(1001, 100, {20, 4242});
  EXPECT_TRUE(MayAccess(bob, File(0, 100, 0640), R));   // primary gid
  EXPECT_FALSE(MayAccess(bob, File(0, 100, 0640), W));
  EXPECT_TRUE(MayAccess(bob, File(0, 4242, 0660), RW));  // a supplementary group
  EXPECT_TRUE(MayAccess(bob, File(0, 20, 0620), W));
  EXPECT_FALSE(MayAccess(bob, File(0, 20, 0620), R));
  EXPECT_STREQ(PermissionClass(bob, File(0, 4242, 0660)), "group");
  // The group class decides alone: "other" bits do not add to it.
  EXPECT_FALSE(MayAccess(bob, File(0, 4242, 0606), R));
  // Not a member: other.
  EXPECT_FALSE(MayAccess(bob, File(0, 7, 0660), R));
  EXPECT_STREQ(PermissionClass(bob, File(0, 7, 0660)), "other");
  // Without supplementary groups the same file is "other".
  EXPECT_FALSE(MayAccess(Who(1001, 100), File(0, 4242, 0660), R));
}

TEST(MayAccessTest, OtherClass) {
  const FileIdentity carol = Who(1002, 1002);
  EXPECT_TRUE(MayAccess(carol, File(kNobody, kNobody, 0444), R));
  EXPECT_FALSE(MayAccess(carol, File(kNobody, kNobody, 0444), W));
  EXPECT_FALSE(MayAccess(carol, File(kNobody, kNobody, 0444), RW));
  EXPECT_TRUE(MayAccess(carol, File(kNobody, kNobody, 0666), RW));
  EXPECT_TRUE(MayAccess(carol, File(kNobody, kNobody, 0442), W));
  EXPECT_FALSE(MayAccess(carol, File(kNobody, kNobody, 0660), R));
  EXPECT_FALSE(MayAccess(carol, File(0, 0, 0600), R));
  EXPECT_STREQ(PermissionClass(carol, File(0, 0, 0600)), "other");
}

TEST(MayAccessTest, RootReadsAndWritesAnything) {
  const FileIdentity root = Who(0, 0);
  EXPECT_TRUE(MayAccess(root, File(kNobody, kNobody, 0000), RW));
  EXPECT_TRUE(MayAccess(root, File(kNobody, kNobody, 0444), W));
  EXPECT_STREQ(PermissionClass(root, File(kNobody, kNobody, 0)), "root");
  // gid 0 alone is no privilege: the group class.
  EXPECT_FALSE(MayAccess(Who(1000, 0), File(kNobody, 0, 0600), R));
  EXPECT_TRUE(MayAccess(Who(1000, 0), File(kNobody, 0, 0640), R));
}

TEST(MayAccessTest, FileTypeAndSpecialBitsDoNotGrantAnything) {
  const FileIdentity carol = Who(1002, 1002);
  FileOwnership f = File(kNobody, kNobody, 07000);  // setuid, setgid, sticky; no permission bit
  EXPECT_FALSE(MayAccess(carol, f, R));
  EXPECT_FALSE(MayAccess(carol, f, W));
  // Nothing asked: nothing to refuse.
  EXPECT_TRUE(MayAccess(carol, f, 0));
}

TEST(FileRightsForTest, ReadAlwaysWriteForAnyWritingAccess) {
  EXPECT_EQ(FileRightsFor(0), R);
  EXPECT_EQ(FileRightsFor(fabric::kRemoteRead), R);
  EXPECT_EQ(FileRightsFor(fabric::kMwBind), R);
  EXPECT_EQ(FileRightsFor(fabric::kRemoteRead | fabric::kMwBind), R);
  EXPECT_EQ(FileRightsFor(fabric::kLocalWrite), RW);
  EXPECT_EQ(FileRightsFor(fabric::kLocalWrite | fabric::kRemoteWrite), RW);
  EXPECT_EQ(FileRightsFor(fabric::kLocalWrite | fabric::kRemoteAtomic), RW);
}

TEST(CheckFileRightsTest, UncheckedIsRdmadsOwnRights) {
  FileAccess own;  // check = false
  EXPECT_OK(CheckFileRights(own, File(0, 0, 0000), RW, "/dev/shm/x", "source.file.path"));
  EXPECT_OK(CheckMayUseFiles(own, "source.file.path"));
}

TEST(CheckFileRightsTest, NoIdentityMeansNoFile) {
  FileAccess none;
  none.check = true;
  for (absl::Status s : {CheckMayUseFiles(none, "source.file.path"),
                         CheckFileRights(none, File(0, 0, 0666), R, "/dev/shm/x", "source.file.path")}) {
    EXPECT_TRUE(IsError(s, absl::StatusCode::kPermissionDenied, "source.file.path"));
    EXPECT_THAT(std::string(s.message()), HasSubstr("no file-system identity"));
  }
}

TEST(CheckFileRightsTest, RefusalIsPermissionDeniedWithEaccesAndSaysWhy) {
  const absl::Status s = CheckFileRights(Checked(Who(1000, 1000, {27})), File(kNobody, kNobody, 0444), RW,
                                         "/dev/shm/ro", "source.file.path");
  ASSERT_TRUE(IsError(s, absl::StatusCode::kPermissionDenied, "source.file.path"));
  EXPECT_EQ(ErrnoOf(s), EACCES);
  const std::string m(s.message());
  EXPECT_THAT(m, HasSubstr("uid 1000, gid 1000, groups 27"));
  EXPECT_THAT(m, HasSubstr("may not read and write /dev/shm/ro"));
  EXPECT_THAT(m, HasSubstr("owner 65534, group 65534, mode 0444"));
  EXPECT_THAT(m, HasSubstr("the other class applies"));
  EXPECT_OK(CheckFileRights(Checked(Who(1000, 1000)), File(kNobody, kNobody, 0444), R, "/dev/shm/ro",
                            "source.file.path"));
}

// ---------------------------------------------------------------------------------------------------------
// The registry, over the fake fabric

using Access = std::vector<v1::Access>;
const Access kRead = {v1::REMOTE_READ};
const Access kWrite = {v1::LOCAL_WRITE, v1::REMOTE_WRITE};
const Access kLocalWrite = {v1::LOCAL_WRITE};

v1::RegisterMrRequest FileReq(const std::string& pd, const std::string& path, const Access& access) {
  v1::RegisterMrRequest r;
  r.set_pd(pd);
  auto* f = r.mutable_source()->mutable_file();
  f->set_path(path);
  f->set_offset(0);
  f->set_length(kPage);
  for (v1::Access a : access) r.add_access(a);
  return r;
}

std::string OutcomeOf(const absl::Status& s) {
  absl::optional<absl::Cord> p = s.GetPayload(kReregOutcomePayload);
  return p ? std::string(*p) : std::string();
}

class FileRightsRegistryTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to give files to other owners (rdmad runs as root)";
    {
      // In a user namespace that maps uid 0 only (a sandbox), other owners do not exist.
      const std::string probe = root_.WriteFile("probe", 1);
      if (chown(probe.c_str(), kNobody, kNobody) != 0) {
        GTEST_SKIP() << "cannot chown to uid " << kNobody << " here (" << std::strerror(errno)
                     << "): run without a sandbox (BUILD tags it no-sandbox)";
      }
    }
    ledger_ = std::make_shared<FakeLedger>();
    Registry::Options options;
    options.allowed_file_roots = {root_.path()};
    options.allow_disk_files = true;  // TempDir is on TEST_TMPDIR's filesystem, usually a disk
    std::vector<fabric::DeviceInfo> devices = {fake::MakeDeviceInfo("rxe0", GetParam())};
    registry_ = std::make_unique<Registry>(std::make_unique<fake::FakeFabric>(std::move(devices), ledger_), options);
    v1::CreatePdRequest pd;
    pd.set_device("devices/rxe0");
    absl::StatusOr<v1::ProtectionDomain> made = registry_->CreatePd(pd);
    ASSERT_TRUE(made.ok()) << made.status();
    pd_ = made->name();
  }
  void TearDown() override {
    if (!registry_) return;
    registry_.reset();
    EXPECT_THAT(ledger_->violations(), IsEmpty());
    EXPECT_EQ(ledger_->live().mrs, 0);
  }

  // A file of two pages under `dir`, given to uid:gid with `mode`.
  std::string Owned(const TempDir& dir, const std::string& rel, uint32_t uid, uint32_t gid, mode_t mode) {
    const std::string p = dir.WriteFile(rel, 2 * kPage);
    EXPECT_EQ(chown(p.c_str(), uid, gid), 0) << p << ": " << std::strerror(errno);
    EXPECT_EQ(chmod(p.c_str(), mode), 0) << p << ": " << std::strerror(errno);
    return p;
  }
  int LiveMrs() const { return ledger_->live().mrs; }

  TempDir root_;
  std::shared_ptr<FakeLedger> ledger_;
  std::unique_ptr<Registry> registry_;
  std::string pd_;
};

TEST_P(FileRightsRegistryTest, ReadOnlyFileOfNobodyIsReadableButNotWritableByAnotherUid) {
  const std::string ro = Owned(root_, "ro.bin", kNobody, kNobody, 0444);
  const FileAccess uid1000 = Checked(Who(1000, 1000));

  for (const Access& writing : {kWrite, kLocalWrite, Access{v1::LOCAL_WRITE, v1::REMOTE_ATOMIC}}) {
    absl::StatusOr<v1::MemoryRegion> refused = registry_->RegisterMr(FileReq(pd_, ro, writing), uid1000);
    ASSERT_TRUE(IsError(refused, absl::StatusCode::kPermissionDenied, "source.file.path"));
    EXPECT_EQ(ErrnoOf(refused.status()), EACCES);
    EXPECT_THAT(std::string(refused.status().message()), HasSubstr("mode 0444"));
  }
  EXPECT_EQ(LiveMrs(), 0);  // nothing was registered, not even for a moment

  absl::StatusOr<v1::MemoryRegion> read = registry_->RegisterMr(FileReq(pd_, ro, kRead), uid1000);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(LiveMrs(), 1);
  // MW_BIND alone needs no write either.
  ASSERT_OK(registry_->RegisterMr(FileReq(pd_, ro, {v1::REMOTE_READ, v1::MW_BIND}), uid1000).status());

  // rdmad's own rights (single-tenant mode, internal callers): only the allowed roots apply.
  ASSERT_OK(registry_->RegisterMr(FileReq(pd_, ro, kWrite)).status());
  // The owner may not write its 0444 file either; root may.
  EXPECT_TRUE(IsError(registry_->RegisterMr(FileReq(pd_, ro, kWrite), Checked(Who(kNobody, kNobody))),
                      absl::StatusCode::kPermissionDenied, "source.file.path"));
  ASSERT_OK(registry_->RegisterMr(FileReq(pd_, ro, kWrite), Checked(Who(0, 0))).status());
}

TEST_P(FileRightsRegistryTest, RootsPrivateFileIsRefusedToAnotherUid) {
  const std::string secret = Owned(root_, "secret.bin", 0, 0, 0600);
  const FileAccess uid1000 = Checked(Who(1000, 1000, {0}));  // even in group 0: mode has no group bits
  for (const Access& a : {kRead, kWrite}) {
    absl::StatusOr<v1::MemoryRegion> refused = registry_->RegisterMr(FileReq(pd_, secret, a), uid1000);
    ASSERT_TRUE(IsError(refused, absl::StatusCode::kPermissionDenied, "source.file.path"));
    EXPECT_EQ(ErrnoOf(refused.status()), EACCES);
  }
  EXPECT_EQ(LiveMrs(), 0);
  ASSERT_OK(registry_->RegisterMr(FileReq(pd_, secret, kWrite), Checked(Who(0, 0))).status());
}

TEST_P(FileRightsRegistryTest, SupplementaryGroupGivesTheGroupBits) {
  const std::string shared = Owned(root_, "shared.bin", kNobody, 4242, 0640);
  EXPECT_TRUE(IsError(registry_->RegisterMr(FileReq(pd_, shared, kRead), Checked(Who(1000, 1000))),
                      absl::StatusCode::kPermissionDenied, "source.file.path"));
  const FileAccess member = Checked(Who(1000, 1000, {27, 4242}));
  ASSERT_OK(registry_->RegisterMr(FileReq(pd_, shared, kRead), member).status());
  EXPECT_TRUE(IsError(registry_->RegisterMr(FileReq(pd_, shared, kWrite), member),
                      absl::StatusCode::kPermissionDenied, "source.file.path"));
}

TEST_P(FileRightsRegistryTest, TheCheckIsOnTheOpenedInodeNotOnTheNameGiven) {
  // The caller owns a symlink (and the directory it is in) pointing at root's private file: the inode
  // opened is root's, and so are the rights checked.
  const std::string secret = Owned(root_, "secret.bin", 0, 0, 0600);
  const std::string dir = root_.MakeDir("mine");
  ASSERT_EQ(chown(dir.c_str(), 1000, 1000), 0);
  const std::string link = dir + "/link.bin";
  ASSERT_EQ(symlink(secret.c_str(), link.c_str()), 0);
  ASSERT_EQ(lchown(link.c_str(), 1000, 1000), 0);
  absl::StatusOr<v1::MemoryRegion> refused = registry_->RegisterMr(FileReq(pd_, link, kRead), Checked(Who(1000, 1000)));
  ASSERT_TRUE(IsError(refused, absl::StatusCode::kPermissionDenied, "source.file.path"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr(secret));
}

TEST_P(FileRightsRegistryTest, NoFileIdentityMeansNoFileAtAll) {
  const std::string open_to_all = Owned(root_, "open.bin", kNobody, kNobody, 0666);
  FileAccess none;
  none.check = true;
  for (const std::string& path : {open_to_all, root_.Sub("does-not-exist"), std::string("/etc/shadow")}) {
    SCOPED_TRACE(path);
    absl::StatusOr<v1::MemoryRegion> refused = registry_->RegisterMr(FileReq(pd_, path, kRead), none);
    // The same answer whether the file exists or not: the caller learns nothing about paths.
    ASSERT_TRUE(IsError(refused, absl::StatusCode::kPermissionDenied, "source.file.path"));
    EXPECT_THAT(std::string(refused.status().message()), HasSubstr("no file-system identity"));
  }
  // Anonymous memory is still fine.
  v1::RegisterMrRequest anon;
  anon.set_pd(pd_);
  anon.mutable_source()->mutable_anonymous()->set_size(kPage);
  anon.add_access(v1::LOCAL_WRITE);
  ASSERT_OK(registry_->RegisterMr(anon, none).status());
}

TEST_P(FileRightsRegistryTest, TenantRootsNarrowTheAllowedRoots) {
  const std::string a = root_.MakeDir("tenant-a");
  const std::string b = root_.MakeDir("tenant-b");
  const std::string in_a = Owned(root_, "tenant-a/x.bin", 1000, 1000, 0600);
  const std::string in_b = Owned(root_, "tenant-b/y.bin", 1000, 1000, 0600);
  const std::string at_top = Owned(root_, "top.bin", 1000, 1000, 0600);
  const FileAccess tenant_a = Checked(Who(1000, 1000), {a});

  ASSERT_OK(registry_->RegisterMr(FileReq(pd_, in_a, kWrite), tenant_a).status());
  for (const std::string& p : {in_b, at_top}) {
    absl::StatusOr<v1::MemoryRegion> refused = registry_->RegisterMr(FileReq(pd_, p, kRead), tenant_a);
    ASSERT_TRUE(IsError(refused, absl::StatusCode::kPermissionDenied, "source.file.path"));
    EXPECT_THAT(std::string(refused.status().message()), HasSubstr("file roots"));
  }
  // Roots narrow even rdmad's own rights.
  FileAccess unchecked_narrowed;
  unchecked_narrowed.roots = {b};
  EXPECT_TRUE(IsError(registry_->RegisterMr(FileReq(pd_, in_a, kRead), unchecked_narrowed),
                      absl::StatusCode::kPermissionDenied, "source.file.path"));
  ASSERT_OK(registry_->RegisterMr(FileReq(pd_, in_b, kRead), unchecked_narrowed).status());

  // A tenant root outside allowed_file_roots widens nothing: the file must be under both.
  TempDir outside;
  const std::string out = Owned(outside, "z.bin", 1000, 1000, 0600);
  absl::StatusOr<v1::MemoryRegion> refused =
      registry_->RegisterMr(FileReq(pd_, out, kRead), Checked(Who(1000, 1000), {outside.path()}));
  ASSERT_TRUE(IsError(refused, absl::StatusCode::kPermissionDenied, "source.file.path"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("allowed_file_roots"));
  // A symlink in the tenant's root to a file outside it is judged by where the file really is.
  const std::string link = a + "/to-b.bin";
  ASSERT_EQ(symlink(in_b.c_str(), link.c_str()), 0);
  EXPECT_TRUE(IsError(registry_->RegisterMr(FileReq(pd_, link, kRead), tenant_a),
                      absl::StatusCode::kPermissionDenied, "source.file.path"));
}

TEST_P(FileRightsRegistryTest, ReregWithNewAccessOrNewSourceChecksAgain) {
  const std::string ro = Owned(root_, "ro.bin", kNobody, kNobody, 0444);
  const std::string secret = Owned(root_, "secret.bin", 0, 0, 0600);
  const std::string rw = Owned(root_, "rw.bin", kNobody, kNobody, 0666);
  const FileAccess uid1000 = Checked(Who(1000, 1000));
  absl::StatusOr<v1::MemoryRegion> mr = registry_->RegisterMr(FileReq(pd_, ro, kRead), uid1000);
  ASSERT_TRUE(mr.ok()) << mr.status();
  const std::string old_outcome = absl::StrCat(static_cast<int>(v1::OUTCOME_OLD_MR_VALID));

  // More access over the same 0444 file: refused, the region unchanged.
  v1::ReregisterMrRequest more;
  more.set_name(mr->name());
  more.add_flags(v1::CHANGE_ACCESS);
  for (v1::Access a : kWrite) more.add_access(a);
  absl::StatusOr<v1::ReregisterMrResponse> refused = registry_->ReregisterMr(more, uid1000);
  ASSERT_TRUE(IsError(refused, absl::StatusCode::kPermissionDenied, "access"));
  EXPECT_EQ(ErrnoOf(refused.status()), EACCES);
  EXPECT_EQ(OutcomeOf(refused.status()), old_outcome);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr(ro));
  absl::StatusOr<v1::MemoryRegion> after = registry_->GetMr(mr->name());
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->generation(), mr->generation());
  EXPECT_EQ(after->rkey(), mr->rkey());
  // A caller with no file identity may not change a file region's access either.
  FileAccess none;
  none.check = true;
  EXPECT_TRUE(IsError(registry_->ReregisterMr(more, none), absl::StatusCode::kPermissionDenied, "access"));
  // Another tenant's roots do not hold the file: refused before the rights.
  EXPECT_TRUE(IsError(registry_->ReregisterMr(more, Checked(Who(0, 0), {root_.MakeDir("elsewhere")})),
                      absl::StatusCode::kPermissionDenied, "access"));
  // Fewer or equal rights: fine. (Read only again, with MW_BIND.)
  v1::ReregisterMrRequest same;
  same.set_name(mr->name());
  same.add_flags(v1::CHANGE_ACCESS);
  same.add_access(v1::REMOTE_READ);
  same.add_access(v1::MW_BIND);
  ASSERT_OK(registry_->ReregisterMr(same, uid1000).status());

  // A new source is opened and checked like a registration, with the region's (or the new) flags.
  v1::ReregisterMrRequest move;
  move.set_name(mr->name());
  move.add_flags(v1::CHANGE_TRANSLATION);
  auto* f = move.mutable_source()->mutable_file();
  f->set_path(secret);
  f->set_length(kPage);
  refused = registry_->ReregisterMr(move, uid1000);
  ASSERT_TRUE(IsError(refused, absl::StatusCode::kPermissionDenied, "source.file.path"));
  EXPECT_EQ(OutcomeOf(refused.status()), old_outcome);
  move.add_flags(v1::CHANGE_ACCESS);
  for (v1::Access a : kWrite) move.add_access(a);
  f->set_path(ro);
  EXPECT_TRUE(IsError(registry_->ReregisterMr(move, uid1000), absl::StatusCode::kPermissionDenied,
                      "source.file.path"));
  f->set_path(rw);
  absl::StatusOr<v1::ReregisterMrResponse> moved = registry_->ReregisterMr(move, uid1000);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(moved->mr().source().file().path(), rw);

  // rdmad's own rights (internal callers, e.g. a grant's key rotation) are not limited.
  more.set_name(mr->name());
  v1::ReregisterMrRequest back = move;
  f = back.mutable_source()->mutable_file();
  f->set_path(ro);
  ASSERT_OK(registry_->ReregisterMr(back).status());
}

INSTANTIATE_TEST_SUITE_P(EmulatedAndNativeRereg, FileRightsRegistryTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "native" : "emulated"; });

}  // namespace
}  // namespace rdmad
