#include "client/transfer.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace rdmad::client {

uint64_t Percentile(const std::vector<uint64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  // Nearest rank, ceil(p/100 * n) (at least 1), in integers: p in thousandths of a percent, so that 99.9% of
  // 1000 samples is rank 999 exactly.
  const unsigned __int128 milli = static_cast<uint64_t>(std::llround(std::min(std::max(p, 0.0), 100.0) * 1000));
  const unsigned __int128 n = sorted.size();
  const uint64_t rank = static_cast<uint64_t>((milli * n + 99999) / 100000);
  return sorted[rank == 0 ? 0 : std::min<size_t>(rank - 1, sorted.size() - 1)];
}

BenchResult Summarize(std::vector<uint64_t> latencies_ns, uint64_t size, uint64_t depth, absl::Duration elapsed) {
  std::sort(latencies_ns.begin(), latencies_ns.end());
  BenchResult r;
  r.reads = latencies_ns.size();
  r.size = size;
  r.depth = depth;
  r.bytes = r.reads * size;
  r.elapsed = elapsed;
  const double seconds = absl::ToDoubleSeconds(elapsed);
  if (seconds > 0) {
    r.iops = static_cast<double>(r.reads) / seconds;
    r.mib_per_s = static_cast<double>(r.bytes) / seconds / (1024.0 * 1024.0);
  }
  r.p50_us = static_cast<double>(Percentile(latencies_ns, 50)) / 1000.0;
  r.p99_us = static_cast<double>(Percentile(latencies_ns, 99)) / 1000.0;
  r.p999_us = static_cast<double>(Percentile(latencies_ns, 99.9)) / 1000.0;
  return r;
}

absl::StatusOr<uint64_t> RangeLength(Client& client, const std::string& mr, uint64_t offset, uint64_t length) {
  if (length > 0) return length;
  absl::StatusOr<v1::MemoryRegion> region = client.GetMr(mr);
  if (!region.ok()) return region.status();
  if (offset >= region->length()) {
    return absl::OutOfRangeError(absl::StrCat(offset, " is at or beyond the end of ", mr, " (", region->length(),
                                              " bytes)"));
  }
  return region->length() - offset;
}

GrantReader::GrantReader(std::unique_ptr<RemoteRegion> region, Client* client, std::string grant)
    : region_(std::move(region)), client_(client), grant_(std::move(grant)), length_(region_->length()) {}

GrantReader::~GrantReader() { Close().IgnoreError(); }

absl::StatusOr<std::unique_ptr<GrantReader>> GrantReader::OpenIssued(Client& client, const v1::IssuedGrant& issued,
                                                                     const RemoteRegion::Options& options,
                                                                     std::string* revoke_error) {
  absl::StatusOr<std::unique_ptr<RemoteRegion>> region = RemoteRegion::Open(issued, options);
  if (!region.ok()) {
    absl::StatusOr<v1::Grant> revoked = client.RevokeGrant(issued.grant().name());
    if (revoke_error != nullptr) *revoke_error = revoked.ok() ? "" : std::string(revoked.status().message());
    return region.status();
  }
  return std::unique_ptr<GrantReader>(new GrantReader(*std::move(region), &client, issued.grant().name()));
}

absl::StatusOr<std::unique_ptr<GrantReader>> GrantReader::OpenToken(const std::string& host, uint16_t port,
                                                                    const std::string& token,
                                                                    const RemoteRegion::Options& options) {
  absl::StatusOr<std::unique_ptr<RemoteRegion>> region = RemoteRegion::Open(host, port, token, options);
  if (!region.ok()) return region.status();
  std::string grant = (*region)->grant_name();
  return std::unique_ptr<GrantReader>(new GrantReader(*std::move(region), nullptr, std::move(grant)));
}

uint64_t GrantReader::granted() const { return region_ == nullptr ? 0 : region_->length(); }

absl::Status GrantReader::SetRange(uint64_t offset, uint64_t length) {
  const uint64_t granted = this->granted();
  if (offset >= granted || (length > 0 && length > granted - offset)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the range is outside ", grant_, ", which covers ", granted, " bytes"));
  }
  offset_ = offset;
  length_ = length > 0 ? length : granted - offset;
  return absl::OkStatus();
}

absl::Status GrantReader::ReadTo(uint64_t chunk, const std::function<absl::Status(const char*, size_t)>& sink) {
  if (region_ == nullptr) return absl::FailedPreconditionError(absl::StrCat(grant_, " is closed"));
  return ReadInChunks(*region_, offset_, length_, chunk, sink);
}

absl::StatusOr<BenchResult> GrantReader::Bench(uint64_t size, uint64_t depth, absl::Duration duration) {
  if (region_ == nullptr) return absl::FailedPreconditionError(absl::StrCat(grant_, " is closed"));
  BenchPlan plan;
  plan.offset = offset_;
  plan.span = length_;
  plan.size = size;
  plan.depth = depth;
  plan.duration = duration;
  return RunReadBench(*region_, plan, [] { return absl::Now(); });
}

absl::Status GrantReader::Close() {
  absl::Status status;
  if (client_ != nullptr && region_ != nullptr) {
    absl::StatusOr<v1::Grant> revoked = client_->RevokeGrant(grant_);
    if (!revoked.ok()) status = revoked.status();
  }
  region_.reset();
  return status;
}

}  // namespace rdmad::client
