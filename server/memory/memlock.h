// Memlock: rdmad's RLIMIT_MEMLOCK as the kernel applies it to registered memory. ibv_reg_mr pins the pages
// (ib_umem_get) and charges them to rdmad's mm->pinned_vm, refusing with ENOMEM past RLIMIT_MEMLOCK unless
// rdmad has CAP_IPC_LOCK. rdmad pays for the applications' memory it registers, so this limit is theirs
// too. Check() refuses, before anything is pinned, a registration that would pass the limit, with a message
// that says which limit and how to raise it; Explain() gives a registration the kernel refused with ENOMEM
// the same message (two registrations racing past one check).
//
// Threads: immutable after construction; Check and Explain from any thread (pin workers).
#ifndef RDMAD_SERVER_MEMORY_MEMLOCK_H_
#define RDMAD_SERVER_MEMORY_MEMLOCK_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"

namespace rdmad {

class Memlock {
 public:
  static constexpr uint64_t kUnlimited = UINT64_MAX;

  // rdmad's own: getrlimit(RLIMIT_MEMLOCK), CAP_IPC_LOCK in its effective set, pinned bytes from
  // /proc/self/status (VmPin).
  static Memlock OfThisProcess();
  // For tests: a limit (kUnlimited: none applies) and what is pinned now.
  Memlock(uint64_t limit_bytes, std::function<uint64_t()> pinned_bytes)
      : limit_(limit_bytes), pinned_(std::move(pinned_bytes)) {}
  // No limit (the default Registry option).
  Memlock() : Memlock(kUnlimited, [] { return uint64_t{0}; }) {}

  // The limit that applies (kUnlimited: RLIMIT_MEMLOCK is infinite, or rdmad has CAP_IPC_LOCK).
  uint64_t limit() const { return limit_; }
  // "unlimited", or "64 MiB (67108864 bytes)".
  std::string Describe() const;

  // OK if pinning [data, data + length) keeps rdmad within the limit (whole pages, as the kernel counts);
  // else RESOURCE_EXHAUSTED on `field`, naming the limit, what is pinned, and how to raise it.
  absl::Status Check(const void* data, uint64_t length, const std::string& field) const;
  // `status` from a registration of `length` bytes: an ENOMEM under a finite limit becomes Check's
  // message (with the errno kept); anything else is returned as is.
  absl::Status Explain(absl::Status status, uint64_t length, const std::string& field) const;

 private:
  std::string Refusal(uint64_t pages_bytes, uint64_t pinned) const;

  uint64_t limit_;
  std::function<uint64_t()> pinned_;
};

}  // namespace rdmad

#endif  // RDMAD_SERVER_MEMORY_MEMLOCK_H_
