#include "server/memory/descriptors.h"

#include <fcntl.h>
#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/common/status.h"

namespace rdmad {

DescriptorStore::DescriptorStore(Options options) : options_(std::move(options)) {}

std::vector<UniqueFd> DescriptorStore::TakeExpired(absl::Time now) {
  std::vector<UniqueFd> expired;
  for (auto it = by_handle_.begin(); it != by_handle_.end();) {
    if (it->second.expires > now) {
      ++it;
      continue;
    }
    if (--per_principal_[it->second.principal] == 0) per_principal_.erase(it->second.principal);
    expired.push_back(std::move(it->second.fd));
    it = by_handle_.erase(it);
  }
  return expired;
}

absl::StatusOr<std::string> DescriptorStore::Deposit(UniqueFd fd, const std::string& principal) {
  if (principal.empty()) return InvalidArgument("principal", "is required");
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("getrandom", errno, "a descriptor handle");
    got += static_cast<size_t>(n);
  }
  std::string handle =
      absl::StrCat(kDescriptorHandlePrefix,
                   absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(bytes), sizeof bytes)));
  std::vector<UniqueFd> expired;
  absl::Status refused;
  {
    MutexLock lock(&mu_);
    expired = TakeExpired(options_.clock());
    auto mine = per_principal_.find(principal);
    const size_t held = mine == per_principal_.end() ? 0 : mine->second;
    if (held >= options_.per_principal) {
      refused = absl::ResourceExhaustedError(
          absl::StrCat("max_descriptors_per_principal: ", principal, " already has ", held,
                       " descriptors waiting to be registered (limit ", options_.per_principal,
                       "): register them, or wait for them to expire (descriptor_ttl_s ",
                       absl::FormatDuration(options_.ttl), ")"));
    } else if (by_handle_.size() >= options_.total) {
      refused = OverLimit("descriptors", options_.total, by_handle_.size());
    } else {
      per_principal_[principal]++;
      by_handle_.emplace(handle, Entry{std::move(fd), principal, options_.clock() + options_.ttl});
    }
  }
  if (!refused.ok()) return refused;  // `fd` is closed with this frame, the expired ones with `expired`
  return handle;
}

absl::StatusOr<UniqueFd> DescriptorStore::Claim(const std::string& handle, const std::string& principal,
                                                const std::string& field, bool keep) {
  const absl::string_view hex = absl::string_view(handle).substr(std::min(handle.size(), sizeof kDescriptorHandlePrefix - 1));
  bool well_formed = absl::StartsWith(handle, kDescriptorHandlePrefix) && hex.size() == 32;
  for (char c : hex) well_formed = well_formed && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  if (!well_formed) {
    return InvalidArgument(field, "expected \"descriptors/\" and 32 lower-case hex digits, as rdmad's descriptor "
                                  "socket answered");
  }
  std::vector<UniqueFd> expired;
  UniqueFd fd;
  {
    MutexLock lock(&mu_);
    expired = TakeExpired(options_.clock());
    auto it = by_handle_.find(handle);
    if (it != by_handle_.end() && it->second.principal == principal && keep) {
      fd = UniqueFd(fcntl(it->second.fd.get(), F_DUPFD_CLOEXEC, 0));  // does not block
      if (!fd.valid()) return ErrnoError("fcntl(F_DUPFD_CLOEXEC)", errno, handle, field);
    } else if (it != by_handle_.end() && it->second.principal == principal) {
      fd = std::move(it->second.fd);
      if (--per_principal_[principal] == 0) per_principal_.erase(principal);
      by_handle_.erase(it);
    }
  }
  if (!fd.valid()) {
    return NotFound(field, absl::StrCat(handle, ": no descriptor waits under this handle for this caller (a handle "
                                                "is used once, by the principal that passed the descriptor, within ",
                                        absl::FormatDuration(options_.ttl), ")"));
  }
  return fd;
}

size_t DescriptorStore::waiting() const {
  MutexLock lock(&mu_);
  return by_handle_.size();
}

}  // namespace rdmad
