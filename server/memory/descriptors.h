// DescriptorStore: file descriptors local clients passed to rdmad over the descriptor socket
// (server/auth/descriptor_socket.h), each kept under a random handle, bound to the principal that passed it,
// until the one RegisterMr or ReregisterMr that names it (MemorySource.fd) claims it. A handle is a
// capability only for its own principal: any other caller gets NOT_FOUND, as for a handle that never
// existed, expired or was used.
//
// Bounded: at most `per_principal` waiting descriptors per principal and `total` in all (each is an open
// file of rdmad's, and memory it keeps alive); one more is RESOURCE_EXHAUSTED. Each waits at most `ttl`: an
// expired one is closed at the next Deposit or Claim, and every one at destruction.
//
// Threads: any. One mutex guards the table, held only to insert, find and erase; close(2) runs after it is
// released.
#ifndef RDMAD_SERVER_MEMORY_DESCRIPTORS_H_
#define RDMAD_SERVER_MEMORY_DESCRIPTORS_H_

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/common/fd.h"
#include "server/common/sync.h"

namespace rdmad {

inline constexpr char kDescriptorHandlePrefix[] = "descriptors/";

class DescriptorStore {
 public:
  struct Options {
    absl::Duration ttl = absl::Seconds(60);
    size_t per_principal = 16;
    size_t total = 256;
    std::function<absl::Time()> clock = [] { return absl::Now(); };
  };
  explicit DescriptorStore(Options options);
  DescriptorStore(const DescriptorStore&) = delete;
  DescriptorStore& operator=(const DescriptorStore&) = delete;

  // Keeps `fd` for `principal` (non-empty): its handle, "descriptors/" and 32 hex digits from getrandom(2).
  // RESOURCE_EXHAUSTED naming the limit when the principal, or rdmad, already keeps as many as allowed.
  absl::StatusOr<std::string> Deposit(UniqueFd fd, const std::string& principal);
  // The descriptor under `handle` if `principal` deposited it and it has neither expired nor been claimed:
  // it is the caller's from here, and the handle is spent. With `keep` (a validation), a duplicate of it
  // (F_DUPFD_CLOEXEC), and the original keeps waiting. NOT_FOUND on `field` otherwise; INVALID_ARGUMENT for
  // a handle that is not of the form above.
  absl::StatusOr<UniqueFd> Claim(const std::string& handle, const std::string& principal, const std::string& field,
                                 bool keep = false);
  // Descriptors waiting now (expired ones not yet closed included).
  size_t waiting() const;
  const Options& options() const { return options_; }

 private:
  struct Entry {
    UniqueFd fd;
    std::string principal;
    absl::Time expires;
  };
  // Moves the expired entries out (closed by the caller, without mu_).
  std::vector<UniqueFd> TakeExpired(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable Mutex mu_;
  std::map<std::string, Entry> by_handle_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, size_t> per_principal_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rdmad

#endif  // RDMAD_SERVER_MEMORY_DESCRIPTORS_H_
