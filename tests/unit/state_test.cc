// The state store (server/state/) and restart recovery on the fake fabric: the store keeps what was
// committed across a reopen and across a process killed without closing it; names are never reused after
// a restart; a "restart" (a new Registry and GrantManager over the same state file) re-creates PDs and
// file-backed MRs under their names, reports anonymous ones and those whose file vanished as MR_LOST, and
// ends the grants that were live with END_RESTARTED, told to a watcher that asks from_oldest.
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

#include "server/cm/token.h"
#include "server/grants/manager.h"
#include "server/registry/registry.h"
#include "server/state/names.h"
#include "server/state/store.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/fake_fabric.h"

namespace rdmad {
namespace {

using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

std::unique_ptr<state::Store> OpenOrDie(const std::string& path) {
  auto s = state::Store::Open(path);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(s).value() : nullptr;
}

// A state file as the first schema wrote it (no record of who registered a file): one PD (pds/1, tenant
// "alpha", on rxe0) and one file region over `file` (mrs/1, LOCAL_WRITE | REMOTE_READ, 4096 bytes).
bool WriteFirstSchemaFile(const std::string& path, const std::string& file) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) return false;
  v1::MemorySource source;
  source.mutable_file()->set_path(file);
  source.mutable_file()->set_length(4096);
  std::string blob;
  source.SerializeToString(&blob);
  std::string hex;
  for (unsigned char c : blob) absl::StrAppend(&hex, absl::Hex(c, absl::kZeroPad2));
  const std::string sql = absl::StrCat(
      "CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);"
      "CREATE TABLE marks (kind TEXT PRIMARY KEY, next INTEGER NOT NULL);"
      "CREATE TABLE pds (id INTEGER PRIMARY KEY, device TEXT NOT NULL, label TEXT NOT NULL, owner TEXT NOT NULL);"
      "CREATE TABLE mrs (id INTEGER PRIMARY KEY, pd INTEGER NOT NULL, source BLOB NOT NULL, access INTEGER NOT NULL);"
      "CREATE TABLE grants (id INTEGER PRIMARY KEY, info BLOB NOT NULL);"
      "INSERT INTO meta VALUES ('schema', 1);"
      "INSERT INTO marks VALUES ('pds', 1024), ('mrs', 1024);"
      "INSERT INTO pds VALUES (1, 'rxe0', '', 'alpha');"
      "INSERT INTO mrs VALUES (1, 1, X'", hex, "', ", fabric::kLocalWrite | fabric::kRemoteRead, ");");
  const bool ok = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK;
  sqlite3_close(db);
  return ok;
}

TEST(StateStoreTest, KeepsWhatWasCommittedAcrossReopen) {
  test::TempDir dir;
  const std::string path = dir.Sub("state.db");
  {
    auto store = OpenOrDie(path);
    ASSERT_TRUE(store->SetMark("pds", 1025).ok());
    ASSERT_TRUE(store->PutPd({1, "rxe0", "web", "alpha"}).ok());
    ASSERT_TRUE(store->PutPd({2, "rxe0", "", ""}).ok());
    ASSERT_TRUE(store->DeletePd(2).ok());
    state::MrRow mr{7, 1, {}, 3};
    mr.source.mutable_file()->set_path("/dev/shm/x");
    mr.source.mutable_file()->set_length(4096);
    ASSERT_TRUE(store->PutMr(mr).ok());
    v1::Grant g;
    g.set_name("grants/4");
    g.set_mr("mrs/7");
    ASSERT_TRUE(store->PutGrant(4, g).ok());
  }
  auto store = OpenOrDie(path);
  EXPECT_EQ(store->Mark("pds"), 1025u);
  EXPECT_EQ(store->Mark("mrs"), 0u);
  absl::StatusOr<state::Snapshot> snap = store->Load();
  ASSERT_TRUE(snap.ok()) << snap.status();
  ASSERT_EQ(snap->pds.size(), 1u);
  EXPECT_EQ(snap->pds[0].id, 1u);
  EXPECT_EQ(snap->pds[0].device, "rxe0");
  EXPECT_EQ(snap->pds[0].label, "web");
  EXPECT_EQ(snap->pds[0].owner, "alpha");
  ASSERT_EQ(snap->mrs.size(), 1u);
  EXPECT_EQ(snap->mrs[0].source.file().path(), "/dev/shm/x");
  EXPECT_EQ(snap->mrs[0].access, 3u);
  ASSERT_EQ(snap->grants.size(), 1u);
  EXPECT_EQ(snap->grants[0].name(), "grants/4");
}

TEST(StateStoreTest, RefusesAFileThatIsNotAStore) {
  test::TempDir dir;
  const std::string path = dir.WriteFile("garbage", 8192);
  absl::StatusOr<std::unique_ptr<state::Store>> s = state::Store::Open(path);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()), HasSubstr(path));
}

// A process killed (SIGKILL) right after its writes returned, without closing the store: every write is there.
TEST(StateStoreTest, CommittedWritesSurviveAKill) {
  test::TempDir dir;
  const std::string path = dir.Sub("state.db");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto s = state::Store::Open(path);
    if (!s.ok()) _exit(2);
    for (uint64_t i = 1; i <= 20; ++i) {
      if (!(*s)->PutPd({i, "rxe0", "", ""}).ok()) _exit(3);
    }
    if (!(*s)->SetMark("pds", 2048).ok()) _exit(4);
    raise(SIGKILL);
    _exit(5);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);
  auto store = OpenOrDie(path);
  EXPECT_EQ(store->Mark("pds"), 2048u);
  absl::StatusOr<state::Snapshot> snap = store->Load();
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->pds.size(), 20u);
}

// The cost of a write (one transaction, one fsync of the WAL): printed, for docs/operations.md.
TEST(StateStoreTest, WriteCost) {
  test::TempDir dir;
  auto store = OpenOrDie(dir.Sub("state.db"));
  constexpr int kWrites = 200;
  const absl::Time start = absl::Now();
  for (int i = 1; i <= kWrites; ++i) ASSERT_TRUE(store->PutPd({static_cast<uint64_t>(i), "rxe0", "", ""}).ok());
  const absl::Duration each = (absl::Now() - start) / kWrites;
  std::printf("state store: %d PutPd in %s: %s each (%s)\n", kWrites, absl::FormatDuration(each * kWrites).c_str(),
              absl::FormatDuration(each).c_str(), dir.path().c_str());
  EXPECT_EQ(store->Load().value().pds.size(), static_cast<size_t>(kWrites));
}

TEST(NameCounterTest, NeverReusesANumberAfterARestart) {
  test::TempDir dir;
  const std::string path = dir.Sub("state.db");
  uint64_t last = 0;
  {
    auto store = OpenOrDie(path);
    state::NameCounter names(store.get(), "pds");
    EXPECT_EQ(names.Next(), 1u);
    EXPECT_EQ(names.Next(), 2u);
    last = names.Next();
  }
  auto store = OpenOrDie(path);
  state::NameCounter names(store.get(), "pds");
  const uint64_t next = names.Next();
  EXPECT_GT(next, last);
  EXPECT_EQ(next, 1 + state::NameCounter::kBlock);
  state::NameCounter other(store.get(), "mrs");  // kinds are independent
  EXPECT_EQ(other.Next(), 1u);
  state::NameCounter none(nullptr, "pds");  // no store: from 1, as before
  EXPECT_EQ(none.Next(), 1u);
  state::NameCounter floor(store.get(), "channels", 4);  // rdmad's own channels below 4
  EXPECT_EQ(floor.Next(), 4u);
}

// A file region's record: who registered it and which inode, kept across a reopen; none for anonymous
// memory.
TEST(StateStoreTest, KeepsWhoRegisteredAFileAndWhichInode) {
  test::TempDir dir;
  const std::string path = dir.Sub("state.db");
  {
    auto store = OpenOrDie(path);
    state::MrRow file{3, 1, {}, 1, std::nullopt};
    file.source.mutable_file()->set_path("/dev/shm/a/link");
    file.source.mutable_file()->set_length(4096);
    state::FileRecord rec;
    rec.files.check = true;
    rec.files.identity = FileIdentity{1000, 1001, {27, 44}};
    rec.files.roots = {"/dev/shm/a", "/dev/shm/b"};
    rec.real_path = "/dev/shm/a/data";
    rec.dev = 0x2a;
    rec.ino = 123456789012ull;
    file.file = rec;
    ASSERT_TRUE(store->PutMr(file).ok());
    state::MrRow no_identity{4, 1, {}, 1, std::nullopt};
    no_identity.source.mutable_file()->set_path("/dev/shm/x");
    state::FileRecord own;  // rdmad's own rights: not checked, no identity, no roots
    own.real_path = "/dev/shm/x";
    no_identity.file = own;
    ASSERT_TRUE(store->PutMr(no_identity).ok());
    state::MrRow anon{5, 1, {}, 1, std::nullopt};
    anon.source.mutable_anonymous()->set_size(4096);
    ASSERT_TRUE(store->PutMr(anon).ok());
  }
  auto store = OpenOrDie(path);
  absl::StatusOr<state::Snapshot> snap = store->Load();
  ASSERT_TRUE(snap.ok()) << snap.status();
  ASSERT_EQ(snap->mrs.size(), 3u);
  ASSERT_TRUE(snap->mrs[0].file.has_value());
  const state::FileRecord& got = *snap->mrs[0].file;
  EXPECT_TRUE(got.files.check);
  ASSERT_TRUE(got.files.identity.has_value());
  EXPECT_EQ(got.files.identity->uid, 1000u);
  EXPECT_EQ(got.files.identity->gid, 1001u);
  EXPECT_EQ(got.files.identity->groups, (std::vector<uint32_t>{27, 44}));
  EXPECT_EQ(got.files.roots, (std::vector<std::string>{"/dev/shm/a", "/dev/shm/b"}));
  EXPECT_EQ(got.real_path, "/dev/shm/a/data");
  EXPECT_EQ(got.dev, 0x2au);
  EXPECT_EQ(got.ino, 123456789012ull);
  ASSERT_TRUE(snap->mrs[1].file.has_value());
  EXPECT_FALSE(snap->mrs[1].file->files.check);
  EXPECT_FALSE(snap->mrs[1].file->files.identity.has_value());
  EXPECT_TRUE(snap->mrs[1].file->files.roots.empty());
  EXPECT_FALSE(snap->mrs[2].file.has_value());
}

// A state file from before the record existed: it opens (the columns are added), its rows have no record.
TEST(StateStoreTest, AnOlderFileOpensAndItsRegionsHaveNoRecord) {
  test::TempDir dir;
  const std::string path = dir.Sub("state.db");
  ASSERT_TRUE(WriteFirstSchemaFile(path, "/dev/shm/old"));
  auto store = OpenOrDie(path);
  absl::StatusOr<state::Snapshot> snap = store->Load();
  ASSERT_TRUE(snap.ok()) << snap.status();
  ASSERT_EQ(snap->mrs.size(), 1u);
  EXPECT_EQ(snap->mrs[0].source.file().path(), "/dev/shm/old");
  EXPECT_FALSE(snap->mrs[0].file.has_value());
  EXPECT_EQ(store->Mark("mrs"), 1024u);
}

// --- recovery on the fake fabric ---

class RecoveryTest : public ::testing::Test {
 protected:
  void Start() {
    store_ = OpenOrDie(dir_.Sub("state.db"));
    ledger_ = std::make_shared<fake::FakeLedger>();
    Registry::Options options;
    options.allowed_file_roots = {files_.path()};
    options.allow_disk_files = true;  // TempDir is on TEST_TMPDIR's filesystem, usually a disk
    options.state = store_.get();
    registry_ = std::make_unique<Registry>(
        std::make_unique<fake::FakeFabric>(std::vector<fabric::DeviceInfo>{fake::MakeDeviceInfo("rxe0")}, ledger_),
        options);
    absl::StatusOr<state::Snapshot> snap = store_->Load();
    ASSERT_TRUE(snap.ok());
    auto recovered = registry_->Recover(*snap);
    ASSERT_TRUE(recovered.ok()) << recovered.status();
    recovered_ = *recovered;
    cm::TokenStore::Options token_options;
    token_options.state = store_.get();
    tokens_ = std::make_unique<cm::TokenStore>(token_options);
    grants::GrantManager::Options grant_options;
    grant_options.state = store_.get();
    grants_ = std::make_unique<grants::GrantManager>(registry_.get(), nullptr, nullptr, tokens_.get(), grant_options);
    lost_grants_ = grants_->Recover(snap->grants);
  }
  // A crash as far as the store is concerned: nothing is removed from it (the registry's destructor
  // releases the fabric objects, as the kernel does for a killed process).
  void Stop() {
    grants_.reset();
    tokens_.reset();
    registry_.reset();
    EXPECT_EQ(ledger_->live().pds + ledger_->live().mrs, 0);
    store_.reset();
  }
  void TearDown() override {
    if (registry_) Stop();
  }
  v1::MemoryRegion RegisterFile(const std::string& pd, const std::string& path, uint64_t length) {
    v1::RegisterMrRequest r;
    r.set_pd(pd);
    r.mutable_source()->mutable_file()->set_path(path);
    r.mutable_source()->mutable_file()->set_length(length);
    r.add_access(v1::LOCAL_WRITE);
    r.add_access(v1::REMOTE_READ);
    absl::StatusOr<v1::MemoryRegion> mr = registry_->RegisterMr(r);
    EXPECT_TRUE(mr.ok()) << mr.status();
    return mr.ok() ? *mr : v1::MemoryRegion();
  }

  test::TempDir dir_, files_;
  std::unique_ptr<state::Store> store_;
  std::shared_ptr<fake::FakeLedger> ledger_;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<cm::TokenStore> tokens_;
  std::unique_ptr<grants::GrantManager> grants_;
  Registry::Recovered recovered_;
  std::vector<std::string> lost_grants_;
};

TEST_F(RecoveryTest, RecreatesPdsAndFileRegionsUnderTheirNames) {
  Start();
  v1::CreatePdRequest create;
  create.set_device("rxe0");
  create.set_label("kept");
  const std::string pd = registry_->CreatePd(create, "alpha").value().name();
  create.set_label("deleted");
  const std::string gone = registry_->CreatePd(create).value().name();
  v1::DeletePdRequest del;
  del.set_name(gone);
  ASSERT_TRUE(registry_->DeletePd(del).ok());
  const std::string file = files_.WriteFile("region", 8192);
  const std::string vanishing = files_.WriteFile("vanishing", 4096);
  v1::MemoryRegion mr = RegisterFile(pd, file, 8192);
  v1::MemoryRegion mr2 = RegisterFile(pd, vanishing, 4096);
  v1::RegisterMrRequest anon;
  anon.set_pd(pd);
  anon.mutable_source()->mutable_anonymous()->set_size(4096);
  anon.add_access(v1::LOCAL_WRITE);
  const std::string anon_mr = registry_->RegisterMr(anon).value().name();
  v1::AllocMwRequest mw;
  mw.set_pd(pd);
  mw.set_type(v1::TYPE_1);
  const std::string window = registry_->AllocMw(mw).value().name();
  Stop();
  ASSERT_EQ(unlink(vanishing.c_str()), 0);

  Start();
  EXPECT_THAT(recovered_.pds, UnorderedElementsAre(pd));
  EXPECT_EQ(recovered_.owners[pd], "alpha");
  EXPECT_EQ(registry_->TenantOfPd(pd), "alpha");  // the restored PD is its tenant's again
  EXPECT_THAT(recovered_.mrs, UnorderedElementsAre(mr.name()));
  EXPECT_EQ(recovered_.lost.size(), 2u);
  v1::ProtectionDomain got = registry_->GetPd(pd).value();
  EXPECT_EQ(got.label(), "kept");
  EXPECT_EQ(got.mr_count(), 3u);
  EXPECT_EQ(registry_->GetPd(gone).status().code(), absl::StatusCode::kNotFound);
  v1::MemoryRegion again = registry_->GetMr(mr.name()).value();
  EXPECT_EQ(again.state(), v1::MR_READY);
  EXPECT_EQ(again.source().file().path(), file);
  EXPECT_EQ(again.length(), 8192u);
  v1::MemoryRegion lost = registry_->GetMr(anon_mr).value();
  EXPECT_EQ(lost.state(), v1::MR_LOST);
  EXPECT_THAT(lost.unusable_reason(), HasSubstr("anonymous"));
  EXPECT_EQ(lost.rkey(), 0u);
  v1::MemoryRegion lost_file = registry_->GetMr(mr2.name()).value();
  EXPECT_EQ(lost_file.state(), v1::MR_LOST);
  EXPECT_THAT(lost_file.unusable_reason(), HasSubstr("vanishing"));
  EXPECT_EQ(ledger_->live().pds, 1);  // nothing doubled: one PD, one MR at the fake NIC
  EXPECT_EQ(ledger_->live().mrs, 1);
  // Windows are gone; no name comes back: the next PD, MR and window are past everything handed out.
  EXPECT_EQ(registry_->GetMw(window).status().code(), absl::StatusCode::kNotFound);
  const std::string next_pd = registry_->CreatePd(create).value().name();
  EXPECT_NE(next_pd, pd);
  EXPECT_NE(next_pd, gone);
  EXPECT_EQ(next_pd, "pds/1025");
  mw.set_pd(next_pd);
  EXPECT_NE(registry_->AllocMw(mw).value().name(), window);
  // A lost region can only be deregistered; then it is gone from the store too.
  v1::ReregisterMrRequest rereg;
  rereg.set_name(anon_mr);
  rereg.add_flags(v1::CHANGE_ACCESS);
  rereg.add_access(v1::LOCAL_WRITE);
  EXPECT_FALSE(registry_->ReregisterMr(rereg).ok());
  ASSERT_TRUE(registry_->DeregisterMr(anon_mr).ok());
  ASSERT_TRUE(registry_->DeregisterMr(mr2.name()).ok());
  Stop();

  Start();
  EXPECT_TRUE(recovered_.lost.empty());
  EXPECT_THAT(recovered_.mrs, UnorderedElementsAre(mr.name()));
  EXPECT_THAT(recovered_.pds, UnorderedElementsAre(pd, next_pd));
  // A clean cascade removes the PD and its regions from the store.
  del.set_name(pd);
  del.set_cascade(true);
  ASSERT_TRUE(registry_->DeletePd(del).ok());
  Stop();
  Start();
  EXPECT_THAT(recovered_.pds, UnorderedElementsAre(next_pd));
  EXPECT_TRUE(recovered_.mrs.empty());
}

TEST_F(RecoveryTest, GrantsLiveBeforeARestartEndAsRestarted) {
  {
    auto store = OpenOrDie(dir_.Sub("state.db"));
    ASSERT_TRUE(store->SetMark("grants", 1025).ok());
    v1::Grant live;
    live.set_name("grants/3");
    live.set_mr("mrs/1");
    live.set_pd("pds/1");
    live.set_principal("reader");
    live.set_state(v1::GRANT_ACTIVE);
    live.set_expire_time_unix_nanos(absl::ToUnixNanos(absl::Now() + absl::Hours(1)));
    ASSERT_TRUE(store->PutGrant(3, live).ok());
    v1::Grant old = live;
    old.set_name("grants/4");
    old.set_expire_time_unix_nanos(absl::ToUnixNanos(absl::Now() - absl::Minutes(1)));
    ASSERT_TRUE(store->PutGrant(4, old).ok());
  }
  Start();
  EXPECT_THAT(lost_grants_, UnorderedElementsAre("grants/3", "grants/4"));
  v1::Grant g = grants_->Get("grants/3").value();
  EXPECT_EQ(g.state(), v1::GRANT_ENDED);
  EXPECT_EQ(g.end_reason(), v1::END_RESTARTED);
  EXPECT_THAT(g.end_detail(), HasSubstr("restarted"));
  EXPECT_EQ(grants_->Get("grants/4").value().end_reason(), v1::END_EXPIRED);  // ran out while down
  v1::ListGrantsRequest list;
  list.set_include_ended(true);
  EXPECT_EQ(grants_->List(list).value().size(), 2u);
  // A watcher that connects after the restart learns it (from_oldest): the restart's ends come first.
  auto watcher = grants_->events().Subscribe(grants::GrantFilter{}, 0, /*from_oldest=*/true);
  std::optional<v1::GrantEvent> e = watcher->Next();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->type(), v1::GRANT_REVOKED);
  EXPECT_EQ(e->grant().name(), "grants/3");
  EXPECT_EQ(e->grant().end_reason(), v1::END_RESTARTED);
  grants_->events().Unsubscribe(watcher);
  // Reported once: the store no longer holds them, so the next restart does not report them again.
  Stop();
  Start();
  EXPECT_TRUE(lost_grants_.empty());
  EXPECT_EQ(store_->Mark("grants"), 1025u);  // no grant was issued: the mark did not move
}

// A region recorded without who registered it (an older rdmad's file): the strictest case, no file is
// mapped, the region is MR_LOST saying so; the PD comes back.
TEST_F(RecoveryTest, ARegionRecordedWithoutItsRegistrantIsLost) {
  const std::string file = files_.WriteFile("old", 4096);
  ASSERT_TRUE(WriteFirstSchemaFile(dir_.Sub("state.db"), file));
  Start();
  EXPECT_THAT(recovered_.pds, UnorderedElementsAre("pds/1"));
  EXPECT_TRUE(recovered_.mrs.empty());
  ASSERT_EQ(recovered_.lost.size(), 1u);
  v1::MemoryRegion lost = registry_->GetMr("mrs/1").value();
  EXPECT_EQ(lost.state(), v1::MR_LOST);
  EXPECT_THAT(lost.unusable_reason(), HasSubstr("without who registered it"));
  EXPECT_EQ(ledger_->live().mrs, 0);
  ASSERT_TRUE(registry_->DeregisterMr("mrs/1").ok());
}

}  // namespace
}  // namespace rdmad
