// Restart recovery maps a region's file again only as the caller who registered it could map it now
// (server/registry/recover.cc, docs/operations.md "Restart recovery"), on the fake fabric: a file swapped
// for a symlink to another user's private file, a directory on the path swapped for a symlink, a file
// replaced by another inode, rights taken away, the tenant's roots moved or the tenant removed: each
// region comes back MR_LOST with the reason, and nothing is registered at the fake NIC. An unchanged file,
// registered through a symlink that was there at registration, comes back MR_READY over the same bytes.
//
// The files are given to other owners (chown), so the tests need root, as rdmad has; skipped otherwise.
// Files live on /dev/shm (tmpfs: no allow_disk_files needed), the state store under TEST_TMPDIR.
// Threads: the test's own; the registry's workers run the registrations (RegisterMr waits for them).
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/memory/mapping.h"
#include "server/registry/registry.h"
#include "server/state/store.h"
#include "tests/support/status.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/fake_fabric.h"
#include "tests/unit/shm_dir.h"

namespace rdmad {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr uint32_t kUidA = 1000, kUidB = 2000;
constexpr uint64_t kLength = 4096;

class RecoveryRightsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to give files to other owners (rdmad runs as root)";
    if (!shm_.ok()) GTEST_SKIP() << "/dev/shm is not a writable tmpfs here";
    const std::string probe = shm_.WriteFile("probe", 1);
    if (chown(probe.c_str(), kUidB, kUidB) != 0) {
      GTEST_SKIP() << "cannot chown to uid " << kUidB << " here (" << std::strerror(errno)
                   << "): run without a sandbox (BUILD tags it no-sandbox)";
    }
    a_ = Dir("a", kUidA);
    b_ = Dir("b", kUidB);
    tenant_roots_["a"] = {a_};
    tenant_roots_["b"] = {b_};
  }
  void TearDown() override {
    if (registry_) Stop();
  }

  std::string Dir(const std::string& rel, uint32_t uid) {
    const std::string d = shm_.MakeDir(rel);
    EXPECT_EQ(chown(d.c_str(), uid, uid), 0);
    EXPECT_EQ(chmod(d.c_str(), 0700), 0);
    return d;
  }
  // A file of kLength bytes of `fill` at `path`, given to uid with mode.
  static void Own(const std::string& path, uint32_t uid, mode_t mode, char fill) {
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr) << path << ": " << std::strerror(errno);
    std::fputs(std::string(kLength, fill).c_str(), f);
    std::fclose(f);
    ASSERT_EQ(chown(path.c_str(), uid, uid), 0);
    ASSERT_EQ(chmod(path.c_str(), mode), 0);
  }
  // What a unix peer of uid `uid` in tenant `tenant` registers with (server/auth/policy.cc).
  FileAccess As(uint32_t uid, const std::string& tenant) {
    FileAccess f;
    f.check = true;
    f.identity = FileIdentity{uid, uid, {}};
    f.roots = tenant_roots_[tenant];
    return f;
  }

  // A start of rdmad over the state file: recovery with the tenants' roots as tenant_roots_ has them now.
  void Start() {
    store_ = state::Store::Open(state_.Sub("state.db")).value();
    ledger_ = std::make_shared<fake::FakeLedger>();
    Registry::Options options;
    options.allowed_file_roots = {shm_.path()};
    options.state = store_.get();
    registry_ = std::make_unique<Registry>(
        std::make_unique<fake::FakeFabric>(std::vector<fabric::DeviceInfo>{fake::MakeDeviceInfo("rxe0")}, ledger_),
        options);
    absl::StatusOr<state::Snapshot> snap = store_->Load();
    ASSERT_TRUE(snap.ok()) << snap.status();
    auto rights = [this](const std::string& tenant, const FileAccess& recorded) {
      auto it = tenant_roots_.find(tenant);
      return RightsAtRecovery(recorded, tenant, it == tenant_roots_.end() ? nullptr : &it->second,
                              "source.file.path");
    };
    absl::StatusOr<Registry::Recovered> recovered = registry_->Recover(*snap, rights);
    ASSERT_TRUE(recovered.ok()) << recovered.status();
    recovered_ = *recovered;
  }
  // A kill -9 as far as the store is concerned: nothing is removed from it.
  void Stop() {
    registry_.reset();
    EXPECT_THAT(ledger_->violations(), IsEmpty());
    EXPECT_EQ(ledger_->live().mrs, 0);
    store_.reset();
  }
  std::string CreatePd(const std::string& tenant) {
    v1::CreatePdRequest create;
    create.set_device("rxe0");
    return registry_->CreatePd(create, tenant).value().name();
  }
  absl::StatusOr<v1::MemoryRegion> Register(const std::string& pd, const std::string& path,
                                            const FileAccess& files) {
    v1::RegisterMrRequest r;
    r.set_pd(pd);
    r.mutable_source()->mutable_file()->set_path(path);
    r.mutable_source()->mutable_file()->set_length(kLength);
    r.add_access(v1::REMOTE_READ);
    r.add_access(v1::MW_BIND);
    return registry_->RegisterMr(r, files);
  }
  // After a restart: the region is MR_LOST, its reason has `why`, and nothing is registered at the NIC.
  void ExpectLost(const std::string& mr, const std::string& why) {
    v1::MemoryRegion got = registry_->GetMr(mr).value();
    EXPECT_EQ(got.state(), v1::MR_LOST) << got.DebugString();
    EXPECT_THAT(got.unusable_reason(), HasSubstr(why));
    EXPECT_EQ(got.rkey(), 0u);
    EXPECT_EQ(ledger_->live().mrs, 0);
    EXPECT_THAT(recovered_.mrs, IsEmpty());
    ASSERT_EQ(recovered_.lost.size(), 1u);
    EXPECT_THAT(recovered_.lost[0], HasSubstr(mr));
  }

  test::ShmDir shm_;
  test::TempDir state_;
  std::string a_, b_;
  std::map<std::string, std::vector<std::string>> tenant_roots_;
  std::unique_ptr<state::Store> store_;
  std::shared_ptr<fake::FakeLedger> ledger_;
  std::unique_ptr<Registry> registry_;
  Registry::Recovered recovered_;
};

// The finding: tenant A registers its own file, replaces it with a symlink to B's 0600 file while rdmad
// is down. Live, A could neither open B's file nor register the link; recovery must not either.
TEST_F(RecoveryRightsTest, AFileSwappedForASymlinkToAnotherUsersFileIsLost) {
  const std::string mine = a_ + "/mine", secret = b_ + "/secret";
  Own(mine, kUidA, 0600, 'a');
  Own(secret, kUidB, 0600, 'B');
  Start();
  const std::string pd = CreatePd("a");
  ASSERT_OK_AND_ASSIGN(v1::MemoryRegion mr, Register(pd, mine, As(kUidA, "a")));
  // Live, the same link is refused (the inode opened is B's).
  const std::string link = a_ + "/link";
  ASSERT_EQ(symlink(secret.c_str(), link.c_str()), 0);
  EXPECT_EQ(Register(pd, link, As(kUidA, "a")).status().code(), absl::StatusCode::kPermissionDenied);
  Stop();

  ASSERT_EQ(unlink(mine.c_str()), 0);
  ASSERT_EQ(symlink(secret.c_str(), mine.c_str()), 0);
  ASSERT_EQ(lchown(mine.c_str(), kUidA, kUidA), 0);
  Start();
  v1::MemoryRegion got = registry_->GetMr(mr.name()).value();
  if (got.state() == v1::MR_READY) {
    ADD_FAILURE() << "recovery mapped " << secret << " for uid " << kUidA << ": first byte '"
                  << *reinterpret_cast<const char*>(got.addr()) << "'";
  }
  ExpectLost(mr.name(), "symbolic link");
}

// A directory on the path swapped for a symlink to a directory of B's holding a file of the same name,
// even one A may read: the path resolves elsewhere now, and the link was not there at registration.
TEST_F(RecoveryRightsTest, ADirectorySwappedForASymlinkIsLost) {
  tenant_roots_["a"] = {shm_.path()};  // A's roots hold both directories: only the link gives it away
  const std::string d = a_ + "/d";
  ASSERT_EQ(mkdir(d.c_str(), 0755), 0);
  Own(d + "/f", kUidA, 0644, 'a');
  const std::string other = b_ + "/d";
  ASSERT_EQ(mkdir(other.c_str(), 0755), 0);
  ASSERT_EQ(chmod(b_.c_str(), 0755), 0);
  Own(other + "/f", kUidB, 0644, 'B');
  Start();
  ASSERT_OK_AND_ASSIGN(v1::MemoryRegion mr, Register(CreatePd("a"), d + "/f", As(kUidA, "a")));
  Stop();

  ASSERT_EQ(rename(d.c_str(), (d + ".old").c_str()), 0);
  ASSERT_EQ(symlink(other.c_str(), d.c_str()), 0);
  Start();
  ExpectLost(mr.name(), "symbolic link");
}

// The same name, another inode (A's own file, same owner and mode): not the file that was registered.
TEST_F(RecoveryRightsTest, AFileReplacedByAnotherIsLost) {
  const std::string f = a_ + "/f";
  Own(f, kUidA, 0600, 'a');
  Start();
  ASSERT_OK_AND_ASSIGN(v1::MemoryRegion mr, Register(CreatePd("a"), f, As(kUidA, "a")));
  Stop();

  Own(a_ + "/new", kUidA, 0600, 'n');
  ASSERT_EQ(rename((a_ + "/new").c_str(), f.c_str()), 0);
  Start();
  ExpectLost(mr.name(), "replaced");
}

// The caller's rights are checked again on the inode: a file given away meanwhile is refused.
TEST_F(RecoveryRightsTest, AFileTheCallerMayNoLongerReadIsLost) {
  const std::string f = a_ + "/f";
  Own(f, kUidA, 0600, 'a');
  Start();
  ASSERT_OK_AND_ASSIGN(v1::MemoryRegion mr, Register(CreatePd("a"), f, As(kUidA, "a")));
  Stop();

  ASSERT_EQ(chown(f.c_str(), kUidB, kUidB), 0);
  Start();
  ExpectLost(mr.name(), "may not read");
}

// The tenant's file roots as the config has them at the restart: moved elsewhere, or the tenant gone.
TEST_F(RecoveryRightsTest, TheTenantsRootsNowDecide) {
  const std::string f = a_ + "/f";
  Own(f, kUidA, 0600, 'a');
  Start();
  ASSERT_OK_AND_ASSIGN(v1::MemoryRegion mr, Register(CreatePd("a"), f, As(kUidA, "a")));
  Stop();

  tenant_roots_["a"] = {b_};
  Start();
  ExpectLost(mr.name(), "no longer overlap");
  Stop();

  tenant_roots_["a"] = {a_ + "/sub"};  // narrower, and no longer holding the file
  ASSERT_EQ(mkdir((a_ + "/sub").c_str(), 0700), 0);
  Start();
  ExpectLost(mr.name(), "file roots");
  Stop();

  tenant_roots_.erase("a");
  Start();
  ExpectLost(mr.name(), "no longer in rdmad's config");
  Stop();

  tenant_roots_["a"] = {a_};  // as it was: the region comes back
  Start();
  EXPECT_EQ(registry_->GetMr(mr.name()).value().state(), v1::MR_READY);
}

// What nothing changed comes back, over the same bytes, including a file registered through a symlink
// that was there at registration (recovery opens the real path it led to).
TEST_F(RecoveryRightsTest, AnUnchangedFileComesBackEvenIfRegisteredThroughALink) {
  const std::string f = a_ + "/f", alias = a_ + "/alias";
  Own(f, kUidA, 0600, 'a');
  ASSERT_EQ(symlink(f.c_str(), alias.c_str()), 0);
  Start();
  const std::string pd = CreatePd("a");
  ASSERT_OK_AND_ASSIGN(v1::MemoryRegion direct, Register(pd, f, As(kUidA, "a")));
  ASSERT_OK_AND_ASSIGN(v1::MemoryRegion linked, Register(pd, alias, As(kUidA, "a")));
  Stop();

  Start();
  EXPECT_TRUE(recovered_.lost.empty()) << recovered_.lost[0];
  for (const v1::MemoryRegion& mr : {direct, linked}) {
    v1::MemoryRegion got = registry_->GetMr(mr.name()).value();
    ASSERT_EQ(got.state(), v1::MR_READY) << got.unusable_reason();
    EXPECT_EQ(got.source().file().path(), mr.source().file().path());
    EXPECT_EQ(*reinterpret_cast<const char*>(got.addr()), 'a');
  }
  EXPECT_EQ(ledger_->live().mrs, 2);
}

}  // namespace
}  // namespace rdmad
