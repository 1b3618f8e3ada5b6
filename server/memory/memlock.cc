// Memlock: see memlock.h.
#include "server/memory/memlock.h"

#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "server/common/status.h"

namespace rdmad {
namespace {

uint64_t PageSize() {
  const long page = sysconf(_SC_PAGESIZE);
  return page > 0 ? static_cast<uint64_t>(page) : 4096;
}

// The bytes of the whole pages [data, data + length) touches: what the kernel pins and charges.
uint64_t PagesBytes(const void* data, uint64_t length) {
  const uint64_t page = PageSize();
  const uint64_t start = reinterpret_cast<uintptr_t>(data) / page * page;
  const uint64_t end = (reinterpret_cast<uintptr_t>(data) + length + page - 1) / page * page;
  return end - start;
}

bool HasIpcLock() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  return (data[CAP_IPC_LOCK / 32].effective & (1u << (CAP_IPC_LOCK % 32))) != 0;
}

// VmPin from /proc/self/status: the kernel's mm->pinned_vm, in bytes (0 if unreadable).
uint64_t PinnedOfThisProcess() {
  FILE* f = std::fopen("/proc/self/status", "re");
  if (f == nullptr) return 0;
  char line[256];
  unsigned long long kib = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::sscanf(line, "VmPin: %llu kB", &kib) == 1) break;
  }
  std::fclose(f);
  return static_cast<uint64_t>(kib) * 1024;
}

std::string Bytes(uint64_t b) {
  if (b >= (uint64_t{1} << 30) && b % (uint64_t{1} << 20) == 0) return absl::StrCat(b >> 30, " GiB (", b, " bytes)");
  if (b >= (uint64_t{1} << 20)) return absl::StrCat(b >> 20, " MiB (", b, " bytes)");
  return absl::StrCat(b, " bytes");
}

}  // namespace

Memlock Memlock::OfThisProcess() {
  rlimit l{};
  const bool limited = getrlimit(RLIMIT_MEMLOCK, &l) == 0 && l.rlim_cur != RLIM_INFINITY && !HasIpcLock();
  return Memlock(limited ? static_cast<uint64_t>(l.rlim_cur) : kUnlimited, PinnedOfThisProcess);
}

std::string Memlock::Describe() const { return limit_ == kUnlimited ? "unlimited" : Bytes(limit_); }

std::string Memlock::Refusal(uint64_t pages_bytes, uint64_t pinned) const {
  return absl::StrCat("registering it would pin ", Bytes(pages_bytes), " more, with ", Bytes(pinned),
                      " pinned already, past rdmad's RLIMIT_MEMLOCK of ", Bytes(limit_),
                      ": the kernel charges every page rdmad registers, the applications' included, to rdmad. "
                      "Raise the limit (LimitMEMLOCK=infinity in rdmad's systemd unit, or the container "
                      "runtime's memlock ulimit) or give rdmad CAP_IPC_LOCK (docs/operations.md)");
}

absl::Status Memlock::Check(const void* data, uint64_t length, const std::string& field) const {
  if (limit_ == kUnlimited) return absl::OkStatus();
  const uint64_t need = PagesBytes(data, length);
  const uint64_t pinned = pinned_();
  if (pinned <= limit_ && need <= limit_ - pinned) return absl::OkStatus();
  return FieldError(absl::StatusCode::kResourceExhausted, field, Refusal(need, pinned));
}

absl::Status Memlock::Explain(absl::Status status, uint64_t length, const std::string& field) const {
  if (status.ok() || limit_ == kUnlimited || ErrnoOf(status) != ENOMEM) return status;
  const uint64_t page = PageSize();
  absl::Status out = ErrnoError(absl::StatusCode::kResourceExhausted, CallOf(status).empty() ? "ibv_reg_mr" : CallOf(status),
                                ENOMEM, Refusal((length + page - 1) / page * page, pinned_()), field);
  return out;
}

}  // namespace rdmad
