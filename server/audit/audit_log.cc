#include "server/audit/audit_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "proto/wire/wall_clock.h"
#include "server/dispatch/handoffs.h"
#include "server/common/log.h"
#include "server/common/status.h"

namespace rdmad::audit {
namespace {

constexpr char kStdout[] = "-";

// Opens (creating 0600) the audit file for appending.
absl::StatusOr<int> OpenFile(const std::string& path) {
  if (path.empty() || path[0] != '/') {
    return InvalidArgument("audit", absl::StrCat("must be an absolute path or \"-\" (stdout); got '", path, "'"));
  }
  const int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600);
  if (fd < 0) return ErrnoError("open", errno, absl::StrCat("the audit log ", path), "audit");
  struct stat st {};
  if (fstat(fd, &st) == 0) {
    if (!S_ISREG(st.st_mode)) {
      RDMAD_LOG_WARN("the audit log %s is not a regular file", path.c_str());
    } else if (st.st_mode & 077) {
      RDMAD_LOG_WARN("the audit log %s has mode 0%03o: others may read principals and peers from it (chmod 600)",
                     path.c_str(), static_cast<unsigned>(st.st_mode & 0777));
    }
  }
  return fd;
}

// The whole line, or the errno of the write that failed.
int WriteAll(int fd, const std::string& line) {
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = write(fd, line.data() + done, line.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;
    done += static_cast<size_t>(n);
  }
  return 0;
}

dispatch::Hub<v1::AuditRecord, AuditFilter>::Options HubOptions(const AuditLog::Options& o) {
  dispatch::Hub<v1::AuditRecord, AuditFilter>::Options h;
  h.watcher_capacity = o.watcher_capacity;
  h.retained = o.retained;
  h.publisher_numbers = true;  // the file's numbers are the streams' numbers
  return h;
}

}  // namespace

absl::StatusOr<std::unique_ptr<AuditLog>> AuditLog::Open(const std::string& path, Options options) {
  int fd = STDOUT_FILENO;
  if (path != kStdout) {
    RDMAD_ASSIGN_OR_RETURN(fd, OpenFile(path));
  }
  return std::unique_ptr<AuditLog>(new AuditLog(path, fd, options));
}

AuditLog::AuditLog(std::string path, int fd, Options options)
    : path_(std::move(path)),
      hub_(HubOptions(options)),
      own_journal_(options.journal != nullptr ? nullptr : std::make_unique<state::Journal>(nullptr)),
      journal_(options.journal != nullptr ? options.journal : own_journal_.get()),
      fd_(fd) {}

AuditLog::~AuditLog() {
  Shutdown();
  // Every line queued for this log is written before the descriptor goes (and the journal, if it is a
  // shared one, never calls AppendLines on this log again).
  journal_->Flush();
  own_journal_.reset();
  MutexLock lock(&fd_mu_);
  if (fd_ != STDOUT_FILENO && fd_ >= 0) close(fd_);
  fd_ = -1;
}

void AuditLog::Flush() { journal_->Flush(); }

void AuditLog::Shutdown() { hub_.CloseAll(absl::UnavailableError("rdmad is shutting down")); }

std::string AuditLog::ToJson(const v1::AuditRecord& r) {
  const absl::Time t = absl::FromUnixNanos(r.time_unix_nanos());
  nlohmann::ordered_json j;
  j["sequence"] = r.sequence();
  j["time"] = absl::FormatTime("%Y-%m-%dT%H:%M:%E9SZ", t, absl::UTCTimeZone());
  j["time_unix_nanos"] = r.time_unix_nanos();
  j["principal"] = r.principal();
  j["tenant"] = r.tenant();
  j["method"] = r.method();
  j["resource"] = r.resource();
  j["code"] = r.code();
  j["errno_value"] = r.errno_value();
  j["errno_name"] = r.errno_name();
  j["detail"] = r.detail();
  j["peer"] = r.peer();
  // One line: no indentation, control characters escaped; bytes that are not UTF-8 (a file name, say)
  // become U+FFFD instead of an exception.
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

void AuditLog::Record(const Event& event) { Submit(event); }

state::Ticket AuditLog::Submit(const Event& event) {
  v1::AuditRecord r;
  r.set_principal(event.principal);
  r.set_tenant(event.tenant);
  r.set_method(event.method);
  r.set_resource(event.resource);
  r.set_code(event.code.empty() ? "OK" : event.code);
  r.set_errno_value(event.errno_value);
  if (event.errno_value != 0) r.set_errno_name(ErrnoName(event.errno_value));
  r.set_detail(event.detail);
  r.set_peer(event.peer);

  MutexLock lock(&mu_);
  r.set_sequence(next_sequence_++);
  r.set_time_unix_nanos(absl::ToUnixNanos(wire::WallNow()));
  r.set_json(ToJson(r));
  // A queue push (the journal's writer writes it): under mu_, so the file has the records in sequence order.
  state::Ticket written = journal_->SubmitLine(this, r.json(), r.sequence());
  // Still under mu_: the streams get the records in sequence order, as the file does.
  hub_.Publish(std::move(r));
  return written;
}

absl::Status AuditLog::AppendLines(const std::string& lines, uint64_t first, uint64_t last) {
  MutexLock lock(&fd_mu_);
  const int err = fd_ >= 0 ? WriteAll(fd_, lines) : EBADF;
  if (err != 0) {
    write_errors_ += last - first + 1;
    if (!failing_) {
      RDMAD_LOG_ERROR("audit log %s: write failed: %s (errno %d, %s); record %llu and later ones may be missing "
                      "from it (still sent to WatchAudit streams)",
                      path_.c_str(), std::strerror(err), err, ErrnoName(err).c_str(),
                      static_cast<unsigned long long>(first));
    }
    failing_ = true;
    return ErrnoError("write", err, absl::StrCat("the audit log ", path_), "audit");
  }
  if (failing_) {
    failing_ = false;
    RDMAD_LOG_WARN("audit log %s: writing again from record %llu (%llu record(s) failed to be written)",
                   path_.c_str(), static_cast<unsigned long long>(first),
                   static_cast<unsigned long long>(write_errors_));
  }
  return absl::OkStatus();
}

void AuditLog::RecordCall(const auth::Caller& caller, const std::string& method, const std::string& resource,
                          const absl::Status& status) {
  Event e;
  e.principal = caller.principal;
  e.tenant = caller.tenant;
  e.method = method;
  e.resource = resource;
  e.code = absl::StatusCodeToString(status.code());
  e.errno_value = ErrnoOf(status);
  e.detail = std::string(status.message());
  e.peer = caller.peer;
  state::Ticket written = Submit(e);
  // On the RPC handler's own thread (a gRPC thread: no hand-off on the call's path, or outside any), its
  // record is written (in the kernel) before the answer leaves; a failure was logged. An answer that left
  // from another thread (a pin worker, a dispatcher: dispatch/handoffs.h) does not wait for the disk.
  if (dispatch::Handoffs::Current() <= 0) written.Wait().IgnoreError();
}

absl::Status AuditLog::Reopen() {
  if (path_ == kStdout) return absl::OkStatus();
  RDMAD_ASSIGN_OR_RETURN(int fd, OpenFile(path_));
  Flush();  // what was recorded before the rotation stays in the rotated file
  int old = -1;
  {
    MutexLock lock(&fd_mu_);  // after the write under way, if any
    old = fd_;
    fd_ = fd;
  }
  if (old >= 0 && old != STDOUT_FILENO) close(old);
  RDMAD_LOG_INFO("audit log %s reopened", path_.c_str());
  return absl::OkStatus();
}

uint64_t AuditLog::write_errors() const {
  MutexLock lock(&fd_mu_);
  return write_errors_;
}

}  // namespace rdmad::audit
