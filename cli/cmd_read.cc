// rdmactl's data-plane commands: read and bench read, through a grant, with client::GrantReader (rdma_cm connect
// to rdmad's data-plane listener, then RDMA reads straight from this process).
//
// A token is single use and only IssueGrant returns it, so these commands take an MR, issue their own grant over
// exactly the range they read, and revoke it when done (whether the reads succeeded or not). With --token-file
// and --endpoint they use a grant someone else issued instead and issue or revoke nothing.
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/command.h"
#include "client/transfer.h"

namespace rdmad::cli {
namespace {

using absl::StrCat;

constexpr uint64_t kReadChunk = 1 << 20;  // read's largest single read
// Without --ttl, bench read's grant lasts the duration plus this; a --ttl not longer than the duration is a
// usage error (the grant would end mid-bench).
constexpr int64_t kBenchTtlMarginMs = 60000;
constexpr uint64_t kMaxBenchDepth = 4096;

// The grant to read through: issued for the positional MR, or someone else's (--token-file and --endpoint).
struct GrantSource {
  std::string mr, principal = "rdmactl", token_file, endpoint;
  uint64_t offset = 0, length = 0;  // length 0: to the end (of the MR, or of the granted range)
  uint32_t ttl_ms = 0;              // 0: the command's default
  std::string token;                // read from token_file
  CLI::Option *length_flag = nullptr, *ttl_flag = nullptr, *for_flag = nullptr;

  bool issue() const { return token_file.empty(); }
  void Flags(CLI::App* sub, const std::string& ttl_default) {
    sub->add_option("MR", mr, NameHelp(Kind::kMr) + ": rdmactl issues a grant over the range, and revokes it at the end")
        ->transform(NameFlag(Kind::kMr));
    sub->add_option("--offset", offset,
                    "start of the range: bytes from the start of the region (with --token-file: of the granted range); "
                    "default 0")
        ->transform(SizeFlag());
    length_flag = sub->add_option("--length", length, "bytes in the range (default: to the end of the region, or of the grant)")
                      ->transform(SizeFlag());
    ttl_flag = AddMillis(sub, "--ttl", [this](uint32_t ms) { ttl_ms = ms; }, "the lease of the grant rdmactl issues (default: " + ttl_default + ")");
    for_flag = sub->add_option("--for", principal, "the principal of the grant rdmactl issues")->capture_default_str();
    auto* token = sub->add_option("--token-file", token_file,
                                  "instead of an MR: the token of a grant issued elsewhere (a secret: raw, as 'rdmactl grant "
                                  "--token-file' writes it, or hex); nothing is issued or revoked")
                      ->check(CLI::ExistingFile);
    auto* at = sub->add_option("--endpoint", endpoint,
                               "with --token-file: rdmad's data-plane listener, address:port (10.0.2.15:7471)")
                   ->transform(AddressFlag());
    token->needs(at);
    at->needs(token);
  }
  absl::Status Validate() {
    if (length_flag->count() > 0 && length == 0) return UsageError("--length: must be greater than 0 (omit it to read to the end)");
    if (issue()) {
      if (mr.empty()) {
        return UsageError("an MR is required (mrs/N: rdmactl issues a grant for the range it reads), or --token-file and "
                          "--endpoint for a grant issued elsewhere");
      }
      return principal.empty() ? UsageError("--for: the principal the grant is issued to cannot be empty") : absl::OkStatus();
    }
    if (!mr.empty()) {
      return UsageError("give either an MR (rdmactl issues a grant for the range it reads) or --token-file and --endpoint "
                        "(a grant issued elsewhere), not both");
    }
    if (ttl_flag->count() > 0 || for_flag->count() > 0) {
      return UsageError("--ttl and --for apply when rdmactl issues the grant (give an MR), not with --token-file");
    }
    absl::StatusOr<std::string> bytes = ReadFlagFile("--token-file", token_file, ": not a token");
    if (!bytes.ok()) return bytes.status();
    absl::StatusOr<std::string> t = TokenFromFile(*bytes);
    if (!t.ok()) return UsageError(StrCat("--token-file '", token_file, "': ", t.status().message()));
    token = *t;
    return absl::OkStatus();
  }

  // Opens the grant (issuing it over the range, GetMr telling the region's length when --length was not given).
  // The range must hold at least `min_length` bytes. Returns the reader and says what it reads in `what`, or
  // prints why not and sets *rc (revoking a grant it issued).
  std::unique_ptr<client::GrantReader> Open(uint64_t min_length, client::RemoteRegion::Options options, Context& ctx,
                                            int* rc, std::string* what) const {
    options.connect_timeout = absl::FromChrono(ctx.timeout());
    auto usage = [&](const std::string& message) {
      ctx.err() << "error: " << message << "\n";
      *rc = kExitUsage;
      return nullptr;
    };
    if (!issue()) {
      v1::SocketAddress at = *ParseSocketAddress(endpoint);
      auto reader = client::GrantReader::OpenToken(at.address(), static_cast<uint16_t>(at.port()), token, options);
      if (!reader.ok()) return *rc = DataPlaneFail(ctx, reader.status()), nullptr;
      if (absl::Status in = (*reader)->SetRange(offset, length); !in.ok()) return usage(StrCat("--offset/--length: ", in.message()));
      *what = StrCat((*reader)->grant(), " offset ", FormatSize(offset), " length ", FormatSize((*reader)->length()));
      if ((*reader)->length() < min_length) {
        return usage(StrCat(*what, " is shorter than one read (", FormatSize(min_length), ")"));
      }
      return *std::move(reader);
    }
    absl::StatusOr<uint64_t> range = client::RangeLength(ctx.client(), mr, offset, length);
    if (!range.ok() && range.status().code() == absl::StatusCode::kOutOfRange && !client::HasDetail(range.status())) {
      return usage(StrCat("--offset: ", range.status().message()));
    }
    if (!range.ok()) return *rc = ctx.Fail(range.status()), nullptr;
    if (*range < min_length) {
      return usage(StrCat("the range (", FormatSize(*range), ") is shorter than one read (", FormatSize(min_length), ")"));
    }
    v1::IssueGrantRequest request;
    request.set_mr(mr);
    request.set_offset(offset);
    request.set_length(*range);
    request.add_access(v1::REMOTE_READ);
    request.set_principal(principal);
    request.set_ttl_ms(ttl_ms);
    auto issued = ctx.client().IssueGrant(request);
    if (!issued.ok()) return *rc = ctx.Fail(issued.status()), nullptr;
    *what = StrCat(mr, " offset ", FormatSize(offset), " length ", FormatSize(*range));
    std::string revoke_error;
    auto reader = client::GrantReader::OpenIssued(ctx.client(), *issued, options, &revoke_error);
    if (reader.ok()) return *std::move(reader);
    *rc = DataPlaneFail(ctx, reader.status());
    const std::string& name = issued->grant().name();
    if (revoke_error.empty()) {
      ctx.err() << name << " revoked\n";
    } else {
      ctx.err() << "warning: " << name << " could not be revoked (" << revoke_error << "); it ends when its lease runs out\n";
    }
    return nullptr;
  }

  // A data-plane failure: the library's message (it names the grant and the endpoint) and its code
  // (PERMISSION_DENIED revoked, DEADLINE_EXCEEDED expired, UNAVAILABLE connection lost). No hint about rdmad's
  // control-plane address: that is not what failed.
  static int DataPlaneFail(Context& ctx, const absl::Status& status) {
    ctx.err() << "error: " << status.message() << " (" << absl::StatusCodeToString(status.code()) << ")\n";
    return kExitServerError;
  }
};

// Closes the reader (revoking a grant it issued). Returns "grants/9 revoked" for the caller's summary, or ""
// (nothing issued, or the revoke failed: a warning then, as the grant also ends when the connection closes).
std::string Close(client::GrantReader& reader, Context& ctx) {
  const bool issued = reader.issued();
  if (absl::Status closed = reader.Close(); !closed.ok()) {
    ctx.err() << "warning: revoking " << reader.grant() << ": " << closed.message() << " (closing the connection ends it too)\n";
    return "";
  }
  return issued ? reader.grant() + " revoked" : "";
}

// Reads in chunks of at most kReadChunk, to stdout or --out-file; a summary goes to stderr.
struct ReadOptions {
  GrantSource source;
  std::string out_file;  // empty: stdout

  void Flags(CLI::App* sub) {
    source.Flags(sub, "rdmad's, 60s");
    sub->add_option("--out-file", out_file, "write the bytes to this file instead of stdout");
  }
  absl::Status Validate() { return source.Validate(); }
  int Run(Context& ctx) const {
    std::ofstream file;
    if (!out_file.empty()) {  // before issuing anything: a bad path costs no grant
      file.open(out_file, std::ios::binary | std::ios::trunc);
      if (!file) return ctx.err() << "error: --out-file: cannot write '" << out_file << "'\n", kExitUsage;
    }
    client::RemoteRegion::Options options;
    options.queue_depth = 1;
    options.max_read_bytes = static_cast<size_t>(source.length > 0 ? std::min(source.length, kReadChunk) : kReadChunk);
    int rc = kExitOk;
    std::string what;
    std::unique_ptr<client::GrantReader> reader = source.Open(1, options, ctx, &rc, &what);
    if (reader == nullptr) return rc;
    std::ostream& out = out_file.empty() ? ctx.out() : file;
    const absl::Time start = absl::Now();
    absl::Status status = reader->ReadTo(kReadChunk, [&](const char* data, size_t n) {
      out.write(data, static_cast<std::streamsize>(n));
      return out ? absl::OkStatus() : absl::DataLossError(StrCat("cannot write ", out_file.empty() ? "stdout" : out_file));
    });
    out.flush();
    const absl::Duration took = absl::Now() - start;
    if (status.ok() && !out) status = absl::DataLossError("cannot write the output");
    const std::string closed = Close(*reader, ctx);
    if (!status.ok()) {
      rc = GrantSource::DataPlaneFail(ctx, status);
      if (!closed.empty()) ctx.err() << closed << "\n";
      return rc;
    }
    const uint64_t length = reader->length();
    const double seconds = absl::ToDoubleSeconds(took);
    ctx.err() << "read " << FormatSize(length) << " (" << length << " bytes) of " << what << " through " << reader->grant()
              << (out_file.empty() ? "" : StrCat(" to ", out_file)) << " in "
              << absl::FormatDuration(absl::Trunc(took, absl::Microseconds(1)))
              << (seconds > 0 && length >= kReadChunk  // a rate means little for less
                      ? absl::StrFormat(" (%.1f MiB/s)", static_cast<double>(length) / seconds / 1048576)
                      : "")
              << (closed.empty() ? "" : StrCat("; ", closed)) << "\n";
    return kExitOk;
  }
};

// Keeps --depth reads of --size outstanding for --duration; prints the table (or -o json): reads, IOPS, MiB/s,
// p50/p99/p999 latency in microseconds.
struct BenchReadOptions {
  GrantSource source;
  uint64_t size = 4096, depth = 16;
  int64_t duration_ms = 10000;

  void Flags(CLI::App* sub) {
    source.Flags(sub, "--duration + 60s");
    sub->add_option("--size", size, "bytes per read: 4KiB, 64KiB, 1MiB (default 4KiB)")->transform(SizeFlag());
    sub->add_option("--depth", depth, "reads kept outstanding (the connection's queue depth; default 16)")
        ->transform(UintFlag(kMaxBenchDepth));
    sub->add_option("--duration", duration_ms, "how long to post reads: 10s, 1m (default 10s)")
        ->transform(DurationFlag(UINT32_MAX - kBenchTtlMarginMs));
  }
  absl::Status Validate() {
    if (absl::Status s = source.Validate(); !s.ok()) return s;
    if (size == 0 || size > (uint64_t{1} << 30)) return UsageError("--size: from 1 byte to 1GiB");
    if (depth == 0) return UsageError("--depth: at least 1 read outstanding");
    if (size * depth > (uint64_t{1} << 30)) {
      return UsageError("--size times --depth is more than 1GiB of local buffers: lower one of them");
    }
    if (source.length > 0 && source.length < size) {
      return UsageError(StrCat("--length (", FormatSize(source.length), ") is shorter than one read (--size ",
                               FormatSize(size), ")"));
    }
    if (source.issue() && source.ttl_flag->count() == 0) {
      source.ttl_ms = static_cast<uint32_t>(duration_ms + kBenchTtlMarginMs);
    } else if (source.issue() && source.ttl_ms <= duration_ms) {
      return UsageError("--ttl must be longer than --duration: the grant would end mid-bench");
    }
    return absl::OkStatus();
  }
  int Run(Context& ctx) const {
    client::RemoteRegion::Options options;
    options.queue_depth = static_cast<size_t>(depth);
    options.max_read_bytes = static_cast<size_t>(size);
    int rc = kExitOk;
    std::string what;
    std::unique_ptr<client::GrantReader> reader = source.Open(size, options, ctx, &rc, &what);
    if (reader == nullptr) return rc;
    const absl::Duration duration = absl::Milliseconds(duration_ms);
    ctx.err() << "reading " << what << " through " << reader->grant() << ": " << FormatSize(size) << " reads, " << depth
              << " outstanding, for " << absl::FormatDuration(duration) << "\n";
    absl::StatusOr<client::BenchResult> result = reader->Bench(size, depth, duration);
    const std::string closed = Close(*reader, ctx);
    if (!result.ok()) rc = GrantSource::DataPlaneFail(ctx, result.status());
    if (result.ok()) ctx.out() << (ctx.structured() ? ToStructured(BenchJson(*result, reader->grant()), ctx.format()) : BenchTable(*result));
    if (!closed.empty()) ctx.err() << closed << "\n";
    return rc;
  }
};

}  // namespace

std::string BenchTable(const client::BenchResult& r) {
  Table t({"READS", "SIZE", "DEPTH", "SECONDS", "IOPS", "MIB/S", "P50-US", "P99-US", "P999-US"});
  t.AddRow({StrCat(r.reads), FormatSize(r.size), StrCat(r.depth), absl::StrFormat("%.2f", absl::ToDoubleSeconds(r.elapsed)),
            absl::StrFormat("%.0f", r.iops), absl::StrFormat("%.1f", r.mib_per_s), absl::StrFormat("%.1f", r.p50_us),
            absl::StrFormat("%.1f", r.p99_us), absl::StrFormat("%.1f", r.p999_us)});
  return t.Render();
}

json::Bench BenchJson(const client::BenchResult& r, const std::string& grant) {
  json::Bench b;
  b.set_grant(grant);
  b.set_reads(r.reads);
  b.set_bytes(r.bytes);
  b.set_size(r.size);
  b.set_depth(r.depth);
  b.set_seconds(absl::ToDoubleSeconds(r.elapsed));
  b.set_iops(r.iops);
  b.set_mib_per_s(r.mib_per_s);
  b.mutable_latency_us()->set_p50(r.p50_us);
  b.mutable_latency_us()->set_p99(r.p99_us);
  b.mutable_latency_us()->set_p999(r.p999_us);
  return b;
}

void RegisterReadCommands(Registry& r) {
  r.Add<ReadOptions>(r.Verb("read"));
  r.Add<BenchReadOptions>(r.Verb("bench")->add_subcommand(
      "read",
      "Keep --depth RDMA reads of --size outstanding through one grant for --duration; print p50/p99/p999 latency (us), "
      "IOPS and MiB/s"));
}

}  // namespace rdmad::cli
