// rdmactl's data-plane commands: read and bench read, through a grant, with client::RemoteRegion (rdma_cm
// connect to rdmad's data-plane listener, then rdma_post_read straight from this process).
//
// A token is single use and only IssueGrant returns it, so these commands take an MR and issue their own
// grant over exactly the range they read, and revoke it when done (whether the reads succeeded or not). With
// --token-file and --endpoint they use a grant someone else issued instead and issue or revoke nothing.
// Opening the grant, the loops and the statistics are client/transfer.h's.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "cli/command_util.h"
#include "cli/commands.h"
#include "client/transfer.h"

namespace rdmad::cli {
namespace {

using internal::FlagError;
using internal::UsageError;

constexpr size_t kMaxTokenFile = 4096;  // a token is 32 bytes (64 in hex): a bigger file is a mistake

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return UsageError(absl::StrCat("--token-file: cannot read '", path, "'"));
  std::string bytes;
  char buf[1024];
  while (in.read(buf, sizeof(buf)) || in.gcount() > 0) {
    bytes.append(buf, static_cast<size_t>(in.gcount()));
    if (bytes.size() > kMaxTokenFile) {
      return UsageError(absl::StrCat("--token-file: '", path, "' is larger than ", kMaxTokenFile,
                                     " bytes: not a token"));
    }
  }
  absl::StatusOr<std::string> token = TokenFromFile(bytes);
  if (!token.ok()) return FlagError(absl::StrCat("--token-file '", path, "'"), token.status());
  return token;
}

absl::StatusOr<GrantSource> BuildGrantSource(const GrantSourceOptions& o) {
  GrantSource src;
  uint64_t offset = 0, length = 0;
  if (!o.offset.empty()) {
    absl::StatusOr<uint64_t> n = ParseSize(o.offset);
    if (!n.ok()) return FlagError("--offset", n.status());
    offset = *n;
  }
  if (!o.length.empty()) {
    absl::StatusOr<uint64_t> n = ParseSize(o.length);
    if (!n.ok()) return FlagError("--length", n.status());
    if (*n == 0) return UsageError("--length: must be greater than 0 (omit it to read to the end)");
    length = *n;
  }
  if (!o.token_file.empty() || !o.endpoint.empty()) {
    if (!o.mr.empty()) {
      return UsageError(
          "give either an MR (rdmactl issues a grant for the range it reads) or --token-file and --endpoint (a grant "
          "issued elsewhere), not both");
    }
    if (o.token_file.empty() || o.endpoint.empty()) {
      return UsageError("--token-file and --endpoint go together: the token of a grant and where to present it");
    }
    if (o.ttl_given || o.principal_given) {
      return UsageError("--ttl and --for apply when rdmactl issues the grant (give an MR), not with --token-file");
    }
    src.issue = false;
    RDMACTL_ASSIGN_OR_RETURN(src.token, ReadTokenFile(o.token_file));
    absl::StatusOr<v1::SocketAddress> endpoint = ParseSocketAddress(o.endpoint);
    if (!endpoint.ok()) return FlagError("--endpoint", endpoint.status());
    src.host = endpoint->address();
    src.port = static_cast<uint16_t>(endpoint->port());
    src.offset = offset;
    src.length = length;
    return src;
  }
  if (o.mr.empty()) {
    return UsageError(
        "an MR is required (mrs/N: rdmactl issues a grant for the range it reads), or --token-file and --endpoint "
        "for a grant issued elsewhere");
  }
  v1::IssueGrantRequest& r = src.request;
  RDMACTL_ASSIGN_OR_RETURN(std::string mr, NormalizeName(Kind::kMr, o.mr));
  r.set_mr(mr);
  r.set_offset(offset);
  r.set_length(length);
  r.add_access(v1::REMOTE_READ);
  if (o.principal.empty()) return UsageError("--for: the principal the grant is issued to cannot be empty");
  r.set_principal(o.principal);
  if (!o.ttl.empty()) {
    absl::StatusOr<std::chrono::milliseconds> ttl = ParseTimeout(o.ttl);
    if (!ttl.ok()) return FlagError("--ttl", ttl.status());
    if (ttl->count() > UINT32_MAX) return UsageError(absl::StrCat("--ttl: '", o.ttl, "' is too long"));
    r.set_ttl_ms(static_cast<uint32_t>(ttl->count()));
  }
  return src;
}

// A data-plane failure: the message as the library says it (it names the grant and the endpoint), and its
// code (PERMISSION_DENIED: revoked, DEADLINE_EXCEEDED: expired, UNAVAILABLE: connection lost; see
// client/remote_region.h). No hint about rdmad's control-plane address: that is not what failed.
int DataPlaneFail(Context& ctx, const absl::Status& status) {
  ctx.err() << "error: " << status.message() << " (" << absl::StatusCodeToString(status.code()) << ")\n";
  return kExitServerError;
}

// Opens the grant to read: issued here over the range (asking GetMr for the region's length when --length was
// not given) or given with --token-file. The range must hold at least `min_length` bytes. Returns the reader,
// or prints why not and sets *rc (revoking a grant it issued).
std::unique_ptr<client::GrantReader> OpenReader(const GrantSource& src, uint64_t min_length,
                                                client::RemoteRegion::Options options, Context& ctx, int* rc,
                                                std::string* what) {
  options.connect_timeout = absl::FromChrono(ctx.timeout());
  const auto usage = [&](const std::string& message) {
    ctx.err() << "error: " << message << "\n";
    *rc = kExitUsage;
    return nullptr;
  };
  if (!src.issue) {
    auto reader = client::GrantReader::OpenToken(src.host, src.port, src.token, options);
    if (!reader.ok()) return *rc = DataPlaneFail(ctx, reader.status()), nullptr;
    if (absl::Status in = (*reader)->SetRange(src.offset, src.length); !in.ok()) {
      return usage(absl::StrCat("--offset/--length: ", in.message()));
    }
    *what = absl::StrCat((*reader)->grant(), " offset ", FormatSize((*reader)->offset()), " length ",
                         FormatSize((*reader)->length()));
    if ((*reader)->length() < min_length) {
      return usage(absl::StrCat(*what, " is shorter than one read (", FormatSize(min_length), ")"));
    }
    return *std::move(reader);
  }
  v1::IssueGrantRequest request = src.request;
  absl::StatusOr<uint64_t> length = client::RangeLength(ctx.client(), request.mr(), request.offset(), request.length());
  if (!length.ok() && length.status().code() == absl::StatusCode::kOutOfRange && !client::HasDetail(length.status())) {
    return usage(absl::StrCat("--offset: ", length.status().message()));
  }
  if (!length.ok()) return *rc = ctx.Fail(length.status()), nullptr;
  request.set_length(*length);
  if (request.length() < min_length) {
    return usage(absl::StrCat("the range (", FormatSize(request.length()), ") is shorter than one read (",
                              FormatSize(min_length), ")"));
  }
  auto issued = ctx.client().IssueGrant(request);
  if (!issued.ok()) return *rc = ctx.Fail(issued.status()), nullptr;
  *what = absl::StrCat(request.mr(), " offset ", FormatSize(request.offset()), " length ", FormatSize(*length));
  std::string revoke_error;
  auto reader = client::GrantReader::OpenIssued(ctx.client(), *issued, options, &revoke_error);
  if (!reader.ok()) {
    *rc = DataPlaneFail(ctx, reader.status());
    if (revoke_error.empty()) {
      ctx.err() << issued->grant().name() << " revoked\n";
    } else {
      ctx.err() << "warning: " << issued->grant().name() << " could not be revoked (" << revoke_error
                << "); it ends when its lease runs out\n";
    }
    return nullptr;
  }
  return *std::move(reader);
}

// Closes the reader (revoking a grant it issued). Returns "grants/9 revoked" for the caller's summary, or ""
// (nothing issued, or the revoke failed: a warning then, as the grant also ends when the connection closes).
std::string CloseReader(client::GrantReader& reader, Context& ctx) {
  const bool issued = reader.issued();
  absl::Status closed = reader.Close();
  if (!closed.ok()) {
    ctx.err() << "warning: revoking " << reader.grant() << ": " << closed.message()
              << " (closing the connection ends it too)\n";
    return "";
  }
  return issued ? absl::StrCat(reader.grant(), " revoked") : "";
}

}  // namespace

// ---- read

absl::StatusOr<ReadPlan> Validate(const ReadOptions& o) {
  ReadPlan plan;
  RDMACTL_ASSIGN_OR_RETURN(plan.source, BuildGrantSource(o.source));
  plan.output_file = o.output_file;
  return plan;
}

int Run(const ReadPlan& plan, Context& ctx) {
  std::ofstream file;
  if (!plan.output_file.empty()) {  // before issuing anything: a bad path costs no grant
    file.open(plan.output_file, std::ios::binary | std::ios::trunc);
    if (!file) {
      ctx.err() << "error: --out-file: cannot write '" << plan.output_file << "'\n";
      return kExitUsage;
    }
  }
  client::RemoteRegion::Options options;
  options.queue_depth = 1;
  options.max_read_bytes = static_cast<size_t>(
      plan.source.issue && plan.source.request.length() > 0 ? std::min(plan.source.request.length(), kReadChunk)
                                                            : kReadChunk);
  int rc = kExitOk;
  std::string what;
  std::unique_ptr<client::GrantReader> reader = OpenReader(plan.source, 1, options, ctx, &rc, &what);
  if (reader == nullptr) return rc;

  std::ostream& out = plan.output_file.empty() ? ctx.out() : file;
  const absl::Time start = absl::Now();
  absl::Status status = reader->ReadTo(kReadChunk, [&](const char* data, size_t n) {
    out.write(data, static_cast<std::streamsize>(n));
    if (!out) {
      return absl::DataLossError(
          absl::StrCat("cannot write ", plan.output_file.empty() ? std::string("stdout") : plan.output_file));
    }
    return absl::OkStatus();
  });
  out.flush();
  const absl::Duration took = absl::Now() - start;
  if (status.ok() && !out) status = absl::DataLossError("cannot write the output");
  const std::string closed = CloseReader(*reader, ctx);
  if (!status.ok()) {
    const int failed = DataPlaneFail(ctx, status);
    if (!closed.empty()) ctx.err() << closed << "\n";
    return failed;
  }
  const uint64_t length = reader->length();
  const double seconds = absl::ToDoubleSeconds(took);
  ctx.err() << "read " << FormatSize(length) << " (" << length << " bytes) of " << what << " through "
            << reader->grant()
            << (plan.output_file.empty() ? std::string() : absl::StrCat(" to ", plan.output_file)) << " in "
            << absl::FormatDuration(absl::Trunc(took, absl::Microseconds(1)))
            << (seconds > 0 && length >= kReadChunk  // a rate means little for less
                    ? absl::StrFormat(" (%.1f MiB/s)", static_cast<double>(length) / seconds / 1048576)
                    : std::string())
            << (closed.empty() ? std::string() : absl::StrCat("; ", closed)) << "\n";
  return kExitOk;
}

// ---- bench read

absl::StatusOr<BenchReadPlan> Validate(const BenchReadOptions& o) {
  BenchReadPlan plan;
  RDMACTL_ASSIGN_OR_RETURN(plan.source, BuildGrantSource(o.source));
  absl::StatusOr<uint64_t> size = ParseSize(o.size.empty() ? "4KiB" : o.size);
  if (!size.ok()) return FlagError("--size", size.status());
  if (*size == 0 || *size > (uint64_t{1} << 30)) return UsageError("--size: from 1 byte to 1GiB");
  plan.size = *size;
  absl::StatusOr<uint64_t> depth = ParseUint(o.depth.empty() ? "16" : o.depth, kMaxBenchDepth);
  if (!depth.ok()) return FlagError("--depth", depth.status());
  if (*depth == 0) return UsageError("--depth: at least 1 read outstanding");
  plan.depth = *depth;
  if (plan.size * plan.depth > (uint64_t{1} << 30)) {
    return UsageError("--size times --depth is more than 1GiB of local buffers: lower one of them");
  }
  absl::StatusOr<std::chrono::milliseconds> duration = ParseTimeout(o.duration.empty() ? "10s" : o.duration);
  if (!duration.ok()) return FlagError("--duration", duration.status());
  plan.duration = absl::FromChrono(*duration);
  if (plan.source.issue) {
    v1::IssueGrantRequest& r = plan.source.request;
    if (r.length() > 0 && r.length() < plan.size) {
      return UsageError(absl::StrCat("--length (", FormatSize(r.length()), ") is shorter than one read (--size ",
                                     FormatSize(plan.size), ")"));
    }
    const int64_t wanted = absl::ToInt64Milliseconds(plan.duration + kBenchTtlMargin);
    if (!o.source.ttl_given) {
      if (wanted > UINT32_MAX) return UsageError("--duration: too long for a grant's lease");
      r.set_ttl_ms(static_cast<uint32_t>(wanted));
    } else if (absl::Milliseconds(r.ttl_ms()) <= plan.duration) {
      return UsageError(absl::StrCat("--ttl (", o.source.ttl, ") must be longer than --duration (", o.duration,
                                     "): the grant would end mid-bench"));
    }
  } else if (plan.source.length > 0 && plan.source.length < plan.size) {
    return UsageError(absl::StrCat("--length (", FormatSize(plan.source.length), ") is shorter than one read (--size ",
                                   FormatSize(plan.size), ")"));
  }
  return plan;
}

int Run(const BenchReadPlan& plan, Context& ctx) {
  client::RemoteRegion::Options options;
  options.queue_depth = static_cast<size_t>(plan.depth);
  options.max_read_bytes = static_cast<size_t>(plan.size);
  int rc = kExitOk;
  std::string what;
  std::unique_ptr<client::GrantReader> reader = OpenReader(plan.source, plan.size, options, ctx, &rc, &what);
  if (reader == nullptr) return rc;
  ctx.err() << "reading " << what << " through " << reader->grant() << ": " << FormatSize(plan.size) << " reads, "
            << plan.depth << " outstanding, for " << absl::FormatDuration(plan.duration) << "\n";
  absl::StatusOr<client::BenchResult> result = reader->Bench(plan.size, plan.depth, plan.duration);
  const std::string closed = CloseReader(*reader, ctx);
  if (!result.ok()) {
    const int failed = DataPlaneFail(ctx, result.status());
    if (!closed.empty()) ctx.err() << closed << "\n";
    return failed;
  }
  ctx.out() << (ctx.format() == Format::kJson ? BenchJson(*result, reader->grant()) : BenchTable(*result));
  if (!closed.empty()) ctx.err() << closed << "\n";
  return kExitOk;
}

}  // namespace rdmad::cli
