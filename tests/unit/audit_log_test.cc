// Unit tests of the audit log (server/audit/audit_log.h): each record is one line of valid JSON with every
// field, numbered in order, in a file created 0600; Reopen follows a rename (logrotate); stdout works;
// watchers get the same records (and a slow one is cut off); RecordCall takes code and errno from a status.
#include "server/audit/audit_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "server/common/status.h"
#include "tests/support/server_status.h"
#include "tests/support/status.h"
#include "tests/support/temp_dir.h"

namespace rdmad::audit {
namespace {

using ::rdmad::test::IsError;
using ::rdmad::test::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Parses a line; a test failure (and a null value) if it is not one JSON object.
nlohmann::json Parse(const std::string& line) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON: " << line;
  EXPECT_TRUE(j.is_object()) << line;
  return j;
}

Event Sample(const std::string& method, const std::string& resource) {
  Event e;
  e.principal = "spiffe://example.org/app";
  e.tenant = "blue";
  e.method = method;
  e.resource = resource;
  e.code = "OK";
  e.peer = "ipv4:10.0.2.2:40000";
  return e;
}

class AuditLogTest : public ::testing::Test {
 protected:
  std::unique_ptr<AuditLog> OpenLog(AuditLog::Options options = {}) {
    absl::StatusOr<std::unique_ptr<AuditLog>> log = AuditLog::Open(path_, options);
    EXPECT_TRUE(log.ok()) << log.status();
    return log.ok() ? std::move(*log) : nullptr;
  }
  TempDir dir_;
  const std::string path_ = dir_.Sub("audit.log");
};

TEST_F(AuditLogTest, EachRecordIsOneJsonLineWithEveryFieldInOrder) {
  std::unique_ptr<AuditLog> log = OpenLog();
  ASSERT_NE(log, nullptr);
  const int64_t before = absl::ToUnixNanos(absl::Now());
  log->Record(Sample("RegisterMr", "mrs/17"));
  Event refused = Sample("RegisterMr", "");
  refused.code = "PERMISSION_DENIED";
  refused.errno_value = EACCES;
  refused.detail = "source.file.path: the caller (uid 1000) may not write \"/dev/shm/x\"\nsecond line";
  log->Record(refused);
  const int64_t after = absl::ToUnixNanos(absl::Now());

  log->Flush();  // Record queues its line; the journal's writer writes it
  const std::vector<std::string> lines = Lines(path_);
  ASSERT_EQ(lines.size(), 2u);
  const std::vector<std::string> keys = {"sequence", "time",     "time_unix_nanos", "principal",
                                         "tenant",   "method",   "resource",        "code",
                                         "errno_value", "errno_name", "detail",      "peer"};
  for (size_t i = 0; i < lines.size(); ++i) {
    SCOPED_TRACE(lines[i]);
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(lines[i], nullptr, false);
    ASSERT_FALSE(j.is_discarded());
    std::vector<std::string> got;
    for (auto it = j.begin(); it != j.end(); ++it) got.push_back(it.key());
    EXPECT_EQ(got, keys);
    EXPECT_EQ(j["sequence"].get<uint64_t>(), i + 1);
    const int64_t ns = j["time_unix_nanos"].get<int64_t>();
    EXPECT_GE(ns, before);
    EXPECT_LE(ns, after);
    // RFC 3339, UTC, nine fractional digits, the same instant as time_unix_nanos.
    const std::string t = j["time"].get<std::string>();
    EXPECT_TRUE(std::regex_match(t, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z)"))) << t;
    absl::Time parsed;
    std::string err;
    ASSERT_TRUE(absl::ParseTime(absl::RFC3339_full, t, &parsed, &err)) << err;
    EXPECT_EQ(absl::ToUnixNanos(parsed), ns);
    EXPECT_EQ(j["principal"], "spiffe://example.org/app");
    EXPECT_EQ(j["tenant"], "blue");
    EXPECT_EQ(j["method"], "RegisterMr");
    EXPECT_EQ(j["peer"], "ipv4:10.0.2.2:40000");
  }
  nlohmann::json ok = Parse(lines[0]);
  EXPECT_EQ(ok["resource"], "mrs/17");
  EXPECT_EQ(ok["code"], "OK");
  EXPECT_EQ(ok["errno_value"], 0);
  EXPECT_EQ(ok["errno_name"], "");
  EXPECT_EQ(ok["detail"], "");
  nlohmann::json bad = Parse(lines[1]);
  EXPECT_EQ(bad["code"], "PERMISSION_DENIED");
  EXPECT_EQ(bad["errno_value"], EACCES);
  EXPECT_EQ(bad["errno_name"], "EACCES");
  EXPECT_EQ(bad["detail"], refused.detail);  // quotes and the newline escaped, and back
}

TEST_F(AuditLogTest, FileIsCreatedOwnerOnlyAndAppendedTo) {
  const mode_t old_umask = umask(0);  // the mode must not depend on rdmad's umask
  std::unique_ptr<AuditLog> log = OpenLog();
  umask(old_umask);
  ASSERT_NE(log, nullptr);
  struct stat st {};
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  log->Record(Sample("CreatePd", "pds/1"));
  log.reset();
  // A second rdmad (a restart) appends; its numbering starts again, the time tells the runs apart.
  log = OpenLog();
  log->Record(Sample("CreatePd", "pds/2"));
  log->Flush();  // Record queues its line; the journal's writer writes it
  const std::vector<std::string> lines = Lines(path_);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(Parse(lines[0])["resource"], "pds/1");
  EXPECT_EQ(Parse(lines[1])["resource"], "pds/2");
}

TEST_F(AuditLogTest, ReopenAfterRenameWritesToTheNewFile) {
  std::unique_ptr<AuditLog> log = OpenLog();
  ASSERT_NE(log, nullptr);
  log->Record(Sample("CreatePd", "pds/1"));
  const std::string rotated = path_ + ".1";
  ASSERT_EQ(rename(path_.c_str(), rotated.c_str()), 0);
  log->Record(Sample("CreatePd", "pds/2"));  // still the old descriptor: the rotated file
  ASSERT_OK(log->Reopen());
  log->Record(Sample("CreatePd", "pds/3"));
  log->Flush();
  std::vector<std::string> old_lines = Lines(rotated), new_lines = Lines(path_);
  ASSERT_EQ(old_lines.size(), 2u);
  ASSERT_EQ(new_lines.size(), 1u);
  EXPECT_EQ(Parse(old_lines[1])["sequence"], 2);
  EXPECT_EQ(Parse(new_lines[0])["resource"], "pds/3");
  EXPECT_EQ(Parse(new_lines[0])["sequence"], 3);  // the numbering goes on across files
  struct stat st {};
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  // A Reopen that fails keeps the old file.
  ASSERT_EQ(rename(path_.c_str(), rotated.c_str()), 0);
  ASSERT_EQ(mkdir(path_.c_str(), 0700), 0);  // the path is now a directory: open fails
  EXPECT_FALSE(log->Reopen().ok());
  log->Record(Sample("CreatePd", "pds/4"));
  log->Flush();
  new_lines = Lines(rotated);
  ASSERT_EQ(new_lines.size(), 2u);
  EXPECT_EQ(Parse(new_lines[1])["resource"], "pds/4");
  EXPECT_EQ(log->write_errors(), 0u);
}

TEST_F(AuditLogTest, WritesToStdoutForDash) {
  // fd 1 redirected to a file for the test.
  fflush(stdout);
  const int saved = dup(STDOUT_FILENO);
  const std::string out = dir_.Sub("stdout.txt");
  const int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(dup2(fd, STDOUT_FILENO), STDOUT_FILENO);
  close(fd);
  {
    absl::StatusOr<std::unique_ptr<AuditLog>> log = AuditLog::Open("-", {});
    ASSERT_TRUE(log.ok()) << log.status();
    (*log)->Record(Sample("DeletePd", "pds/9"));
    EXPECT_OK((*log)->Reopen());  // a no-op for stdout
    (*log)->Record(Sample("DeletePd", "pds/10"));
  }  // closing the log must not close stdout
  EXPECT_NE(fcntl(STDOUT_FILENO, F_GETFD), -1);
  dup2(saved, STDOUT_FILENO);
  close(saved);
  const std::vector<std::string> lines = Lines(out);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(Parse(lines[0])["resource"], "pds/9");
  EXPECT_EQ(Parse(lines[1])["resource"], "pds/10");
}

TEST_F(AuditLogTest, BadPathsAreRefused) {
  EXPECT_TRUE(IsError(AuditLog::Open("audit.log", {}).status(), absl::StatusCode::kInvalidArgument, "audit"));
  EXPECT_TRUE(IsError(AuditLog::Open(dir_.Sub("no/such/dir/audit.log"), {}).status(), absl::StatusCode::kNotFound,
                      "audit"));
}

TEST_F(AuditLogTest, RecordCallTakesCodeErrnoAndMessageFromTheStatus) {
  std::unique_ptr<AuditLog> log = OpenLog();
  ASSERT_NE(log, nullptr);
  auth::Caller caller;
  caller.principal = "unix:uid:1000";
  caller.tenant = "red";
  caller.peer = "unix:/run/rdmad/rdmad.sock";
  log->RecordCall(caller, "DeregisterMr", "mrs/3",
                  ErrnoError(absl::StatusCode::kFailedPrecondition, "ibv_dereg_mr", EBUSY, "mrs/3", "name"));
  log->RecordCall(caller, "CreatePd", "pds/4", absl::OkStatus());
  log->RecordCall(caller, "GetPd", "pds/99", NotFound("name", "pds/99 does not exist"));
  log->Flush();  // Record queues its line; the journal's writer writes it
  const std::vector<std::string> lines = Lines(path_);
  ASSERT_EQ(lines.size(), 3u);
  nlohmann::json busy = Parse(lines[0]);
  EXPECT_EQ(busy["principal"], "unix:uid:1000");
  EXPECT_EQ(busy["tenant"], "red");
  EXPECT_EQ(busy["peer"], "unix:/run/rdmad/rdmad.sock");
  EXPECT_EQ(busy["method"], "DeregisterMr");
  EXPECT_EQ(busy["resource"], "mrs/3");
  EXPECT_EQ(busy["code"], "FAILED_PRECONDITION");
  EXPECT_EQ(busy["errno_value"], EBUSY);
  EXPECT_EQ(busy["errno_name"], "EBUSY");
  EXPECT_THAT(busy["detail"].get<std::string>(), HasSubstr("ibv_dereg_mr"));
  EXPECT_EQ(Parse(lines[1])["code"], "OK");
  nlohmann::json missing = Parse(lines[2]);
  EXPECT_EQ(missing["code"], "NOT_FOUND");
  EXPECT_EQ(missing["errno_value"], 0);
  EXPECT_EQ(missing["detail"], "name: pds/99 does not exist");
}

TEST_F(AuditLogTest, BytesThatAreNotUtf8AreReplacedNotThrown) {
  std::unique_ptr<AuditLog> log = OpenLog();
  ASSERT_NE(log, nullptr);
  Event e = Sample("RegisterMr", "");
  e.detail = std::string("source.file.path: /dev/shm/\xff\xfe.bin is not under an allowed root");
  e.principal = std::string("CN=\xc3", 4);  // a truncated two-byte sequence
  log->Record(e);
  log->Flush();  // Record queues its line; the journal's writer writes it
  const std::vector<std::string> lines = Lines(path_);
  ASSERT_EQ(lines.size(), 1u);
  nlohmann::json j = Parse(lines[0]);
  EXPECT_THAT(j["detail"].get<std::string>(), HasSubstr("\xEF\xBF\xBD"));  // U+FFFD
}

TEST_F(AuditLogTest, WatchersGetTheSameRecordsAsTheFile) {
  std::unique_ptr<AuditLog> log = OpenLog();
  ASSERT_NE(log, nullptr);
  log->Record(Sample("CreatePd", "pds/1"));
  std::shared_ptr<AuditWatcher> live = log->hub().Subscribe(AuditFilter{}, 0);
  std::shared_ptr<AuditWatcher> replay = log->hub().Subscribe(AuditFilter{}, 0, /*from_oldest=*/true);
  log->Record(Sample("CreatePd", "pds/2"));
  log->Flush();  // Record queues its line; the journal's writer writes it
  const std::vector<std::string> lines = Lines(path_);
  ASSERT_EQ(lines.size(), 2u);

  std::optional<v1::AuditRecord> r = live->Next();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->sequence(), 2u);
  EXPECT_EQ(r->resource(), "pds/2");
  EXPECT_EQ(r->json(), lines[1]);  // exactly the line written
  EXPECT_EQ(Parse(r->json())["time_unix_nanos"].get<int64_t>(), r->time_unix_nanos());
  EXPECT_FALSE(live->Next().has_value());

  std::vector<uint64_t> seen;
  while (std::optional<v1::AuditRecord> e = replay->Next()) seen.push_back(e->sequence());
  EXPECT_THAT(seen, ElementsAre(1u, 2u));
  EXPECT_EQ(Parse(lines[0])["sequence"], 1);

  // after_sequence resumes.
  std::shared_ptr<AuditWatcher> resumed = log->hub().Subscribe(AuditFilter{}, 1);
  r = resumed->Next();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->sequence(), 2u);

  // Shutdown ends every stream with UNAVAILABLE once drained.
  log->Shutdown();
  std::optional<absl::Status> closed = live->Closed();
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->code(), absl::StatusCode::kUnavailable);
}

TEST_F(AuditLogTest, SlowWatcherIsCutOffAndTheFileLosesNothing) {
  AuditLog::Options options;
  options.watcher_capacity = 16;
  std::unique_ptr<AuditLog> log = OpenLog(options);
  ASSERT_NE(log, nullptr);
  std::shared_ptr<AuditWatcher> slow = log->hub().Subscribe(AuditFilter{}, 0);
  std::shared_ptr<AuditWatcher> fast = log->hub().Subscribe(AuditFilter{}, 0);
  uint64_t fast_seen = 0;
  for (int i = 1; i <= 40; ++i) {
    log->Record(Sample("CreatePd", absl::StrCat("pds/", i)));
    while (std::optional<v1::AuditRecord> e = fast->Next()) fast_seen = e->sequence();
  }
  EXPECT_EQ(fast_seen, 40u);
  EXPECT_FALSE(fast->Closed().has_value());
  std::optional<absl::Status> cut = slow->Closed();
  ASSERT_TRUE(cut.has_value());
  EXPECT_EQ(cut->code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(cut->message()), HasSubstr("resume with after_sequence = 0"));
  log->Flush();
  EXPECT_EQ(Lines(path_).size(), 40u);
}

TEST_F(AuditLogTest, ConcurrentRecordsAreWholeLinesInSequenceOrder) {
  std::unique_ptr<AuditLog> log = OpenLog();
  ASSERT_NE(log, nullptr);
  constexpr int kThreads = 4, kEach = 250;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        Event e = Sample("data-plane reject", absl::StrCat("cmids/", t * kEach + i));
        e.detail = std::string(200 + i, 'x');
        log->Record(e);
      }
    });
  }
  for (auto& t : threads) t.join();
  log->Flush();  // Record queues its line; the journal's writer writes it
  const std::vector<std::string> lines = Lines(path_);
  ASSERT_EQ(lines.size(), static_cast<size_t>(kThreads * kEach));
  std::set<std::string> resources;
  for (size_t i = 0; i < lines.size(); ++i) {
    nlohmann::json j = Parse(lines[i]);
    ASSERT_FALSE(j.is_discarded());
    EXPECT_EQ(j["sequence"].get<uint64_t>(), i + 1);
    resources.insert(j["resource"].get<std::string>());
  }
  EXPECT_EQ(resources.size(), lines.size());
  EXPECT_EQ(Slurp(path_).back(), '\n');
}

TEST_F(AuditLogTest, AFailingWriteIsCountedAndTheStreamStillGetsTheRecord) {
  // /dev/full: every write fails with ENOSPC.
  absl::StatusOr<std::unique_ptr<AuditLog>> log = AuditLog::Open("/dev/full", {});
  ASSERT_TRUE(log.ok()) << log.status();
  std::shared_ptr<AuditWatcher> w = (*log)->hub().Subscribe(AuditFilter{}, 0);
  (*log)->Record(Sample("CreatePd", "pds/1"));
  (*log)->Record(Sample("CreatePd", "pds/2"));
  (*log)->Flush();
  EXPECT_EQ((*log)->write_errors(), 2u);
  std::optional<v1::AuditRecord> r = w->Next();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->sequence(), 1u);
}

}  // namespace
}  // namespace rdmad::audit
