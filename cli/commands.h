// rdmactl's commands. Each command is an options struct (what CLI11 filled in, raw text), a Validate that
// completes and checks it and builds the typed request (errors are usage errors, exit status 2), and a Run that
// calls the client library and prints (errors from rdmad are exit status 1). Only client/ talks to rdmad.
//
// Thread-safety: single-threaded (one command per process).
#ifndef RDMAD_CLI_COMMANDS_H_
#define RDMAD_CLI_COMMANDS_H_

#include <chrono>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cli/output.h"
#include "cli/parse.h"
#include "client/channel.h"
#include "client/client.h"

namespace rdmad::cli {

inline constexpr char kRdmactlVersion[] = "0.1.0";
inline constexpr char kApiVersion[] = "rdmad.v1";

// Exit statuses.
inline constexpr int kExitOk = 0;
inline constexpr int kExitServerError = 1;  // rdmad (or the connection to it) failed the request
inline constexpr int kExitUsage = 2;        // the command line is wrong; nothing was sent

// The global flags, raw.
struct GlobalOptions {
  std::string server = client::kDefaultTarget;  // --server, env RDMAD_SERVER
  std::string output = "table";                 // -o
  std::string timeout = "30s";                  // --timeout
  client::TlsOptions tls;  // --tls-ca, --tls-cert, --tls-key, --tls-server-name (env RDMAD_TLS_*): TCP only
};

// What every Run gets: the checked global flags, the output streams and the client (made on first use).
class Context {
 public:
  Context(std::string server, Format format, std::chrono::milliseconds timeout, std::ostream& out, std::ostream& err);
  ~Context();

  client::Client& client();
  Format format() const { return format_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  const std::string& server() const { return server_; }
  std::ostream& out() { return out_; }
  std::ostream& err() { return err_; }

  // Prints `status` (with its ErrorDetail) as "error: ..." on err and returns kExitServerError.
  int Fail(const absl::Status& status);

  // client() then talks over `channel` (tests: an in-process fake of rdmad) instead of dialing server().
  void UseChannel(std::shared_ptr<grpc::Channel> channel);

 private:
  std::string server_;
  Format format_;
  std::chrono::milliseconds timeout_;
  std::ostream& out_;
  std::ostream& err_;
  std::unique_ptr<client::Client> client_;
};

// Global flags -> Context. Errors are usage errors.
absl::StatusOr<std::unique_ptr<Context>> MakeContext(const GlobalOptions& options, std::ostream& out,
                                                     std::ostream& err);

// ---- get

struct GetOptions {
  Kind kind = Kind::kDevice;
  std::string name;       // optional
  std::string pd;         // --pd filter, mrs and mws only
  std::string channel;    // --channel filter, cmids only
  std::string mr;         // --mr filter, grants only
  std::string principal;  // --for filter, grants only
  bool all = false;       // --all, grants only: the recently ended ones too
};
absl::Status Validate(GetOptions& options);  // normalizes name and pd in place
int Run(const GetOptions& options, Context& ctx);

// ---- protection domains

struct CreatePdOptions {
  std::string device;
  std::string label;
};
absl::StatusOr<v1::CreatePdRequest> Validate(const CreatePdOptions& options);
int Run(const v1::CreatePdRequest& request, Context& ctx);

// ---- memory regions

// A memory source as given on the command line: --size [--huge-pages] or --file [--offset] --length.
struct SourceOptions {
  std::string size;
  bool huge_pages = false;
  std::string file;
  std::string offset;
  std::string length;
  bool size_given = false, file_given = false, offset_given = false, length_given = false;
  bool given() const { return size_given || file_given; }
};

struct RegisterMrOptions {
  std::string pd;
  SourceOptions source;
  std::string access;  // may be empty: local read only
};
absl::StatusOr<v1::RegisterMrRequest> Validate(const RegisterMrOptions& options);
int Run(const v1::RegisterMrRequest& request, Context& ctx);

struct ReregMrOptions {
  std::string name;
  std::string access;
  bool access_given = false;
  std::string pd;
  bool pd_given = false;
  SourceOptions source;
  bool revoke_grants = false;  // revoke the region's live grants first (rdmad refuses while any live)
};
// The flags are derived from what is given: --access CHANGE_ACCESS, --pd CHANGE_PD, --size/--file
// CHANGE_TRANSLATION. At least one is required.
absl::StatusOr<v1::ReregisterMrRequest> Validate(const ReregMrOptions& options);
int Run(const v1::ReregisterMrRequest& request, Context& ctx);

// ---- memory windows

struct CreateMwOptions {
  std::string pd;
  std::string type;  // "1" or "2"
};
absl::StatusOr<v1::AllocMwRequest> Validate(const CreateMwOptions& options);
int Run(const v1::AllocMwRequest& request, Context& ctx);

struct BindMwOptions {
  std::string name;
  std::string mr;
  std::string offset = "0";
  std::string length;
  std::string access;
  bool zero_based = false;
  std::string qp;
};
absl::StatusOr<v1::BindMwRequest> Validate(const BindMwOptions& options);
int Run(const v1::BindMwRequest& request, Context& ctx);

// ---- queue pairs

struct CreateQpOptions {
  std::string pd;
  std::string port = "1";
  std::string gid_index;  // empty: rdmad's default
};
absl::StatusOr<v1::CreateQpRequest> Validate(const CreateQpOptions& options);
int Run(const v1::CreateQpRequest& request, Context& ctx);

struct ConnectQpOptions {
  std::string name;
  std::string remote_qpn;
  std::string remote_psn;
  std::string remote_gid;
  std::string remote_lid;  // empty: 0
};
absl::StatusOr<v1::ConnectQpRequest> Validate(const ConnectQpOptions& options);
int Run(const v1::ConnectQpRequest& request, Context& ctx);

// ---- commands on one named resource: invalidate mw, disconnect cmid, delete pd|mr|mw|qp|channel|cmid

struct NamedOptions {
  Kind kind = Kind::kMr;
  std::string name;
  bool cascade = false;        // delete pd only
  bool revoke_grants = false;  // delete pd and delete mr only: revoke the live grants on it first
};
absl::Status Validate(NamedOptions& options);  // normalizes name in place
int RunInvalidateMw(const NamedOptions& options, Context& ctx);
int RunDisconnect(const NamedOptions& options, Context& ctx);
int RunDelete(const NamedOptions& options, Context& ctx);

// ---- rdma_cm (commands_cm.cc)

struct CreateChannelOptions {
  std::string label;
};
absl::StatusOr<v1::CreateChannelRequest> Validate(const CreateChannelOptions& options);
int Run(const v1::CreateChannelRequest& request, Context& ctx);

struct CreateCmIdOptions {
  std::string pd;
  std::string channel;  // empty: rdmad's default channel
};
absl::StatusOr<v1::CreateCmIdRequest> Validate(const CreateCmIdOptions& options);
int Run(const v1::CreateCmIdRequest& request, Context& ctx);

struct ListenOptions {
  std::string name;
  std::string address;  // ADDRESS:PORT, [IPV6]:PORT
  std::string backlog;  // empty: rdmad's default
};
absl::StatusOr<v1::ListenRequest> Validate(const ListenOptions& options);
int Run(const v1::ListenRequest& request, Context& ctx);

// Private data: at most one of --data TEXT (its bytes as typed), --data-hex HEX, --data-file PATH (the file's
// bytes). Reading the file is part of validation: a missing file is a usage error.
struct PrivateDataOptions {
  std::string text, hex, file;
  bool text_given = false, hex_given = false, file_given = false;
};
absl::StatusOr<std::string> BuildPrivateData(const PrivateDataOptions& options);

struct ConnectCmIdOptions {
  std::string name;
  std::string to;               // ADDRESS:PORT
  PrivateDataOptions data;
  std::string resolve_timeout;  // empty: rdmad's default (address and route resolution, each)
};
absl::StatusOr<v1::ConnectRequest> Validate(const ConnectCmIdOptions& options);
// Bounded by the global --timeout (the whole connect: resolution, route, the peer's answer).
int Run(const v1::ConnectRequest& request, Context& ctx);

struct AcceptOptions {
  std::string name;
  PrivateDataOptions data;
};
absl::StatusOr<v1::AcceptRequest> Validate(const AcceptOptions& options);
int Run(const v1::AcceptRequest& request, Context& ctx);

struct RejectOptions {
  std::string name;
  PrivateDataOptions data;
};
absl::StatusOr<v1::RejectRequest> Validate(const RejectOptions& options);
int Run(const v1::RejectRequest& request, Context& ctx);

struct MigrateCmIdOptions {
  std::string name;
  std::string to;  // a channel
};
absl::StatusOr<v1::MigrateCmIdRequest> Validate(const MigrateCmIdOptions& options);
int Run(const v1::MigrateCmIdRequest& request, Context& ctx);

struct CreateTokenOptions {
  std::string pd;
  std::string ttl;  // empty: rdmad's default
};
absl::StatusOr<v1::IssueConnectTokenRequest> Validate(const CreateTokenOptions& options);
int Run(const v1::IssueConnectTokenRequest& request, Context& ctx);

// `rdmactl events`. Without --follow: the retained events after --after (default 1), ending once no event
// came for kEventsIdle. With --follow: events after --after (default 0: new events only), until rdmad ends
// the stream.
inline constexpr std::chrono::milliseconds kEventsIdle{1000};
struct EventsOptions {
  std::string channel;
  std::string cm_id;
  std::vector<std::string> types;  // each may be a comma-separated list
  bool follow = false;
  std::string after;  // empty: the default above
};
struct EventsPlan {
  v1::WatchEventsRequest request;
  bool follow = false;
};
absl::StatusOr<EventsPlan> Validate(const EventsOptions& options);
int Run(const EventsPlan& plan, Context& ctx);

// ---- grants (commands_grants.cc)

// `rdmactl grant MR --length N --for PRINCIPAL [--offset N] [--ttl D] [--write] [--token-file F]`.
struct GrantOptions {
  std::string mr;
  std::string offset = "0";
  std::string length;
  std::string ttl;        // empty: rdmad's default (60s)
  std::string principal;  // --for
  bool write = false;     // REMOTE_WRITE as well as REMOTE_READ
  std::string token_file;
};
struct GrantPlan {
  v1::IssueGrantRequest request;
  std::string token_file;  // empty: print the token (hex) instead
};
absl::StatusOr<GrantPlan> Validate(const GrantOptions& options);
// With a token file: writes the token's raw bytes there (created or truncated, mode 0600) and not on stdout
// (nor in -o json); if that fails, revokes the grant it just issued.
int Run(const GrantPlan& plan, Context& ctx);

struct RenewGrantOptions {
  std::string name;
  std::string ttl;
};
absl::StatusOr<v1::RenewGrantRequest> Validate(const RenewGrantOptions& options);
int Run(const v1::RenewGrantRequest& request, Context& ctx);

int RunRevokeGrant(const NamedOptions& options, Context& ctx);
// `get grants` and `get grant NAME` (Run(GetOptions) comes here for Kind::kGrant).
int RunGetGrants(const GetOptions& options, Context& ctx);

// `rdmactl watch grants [--mr MR] [--for PRINCIPAL]`: events as they happen, until rdmad ends the stream.
struct WatchGrantsOptions {
  std::string mr;
  std::string principal;
  bool from_oldest = false;  // every retained event of rdmad's run first (after a restart: its END_RESTARTED ends)
};
absl::StatusOr<v1::WatchGrantsRequest> Validate(const WatchGrantsOptions& options);
int Run(const v1::WatchGrantsRequest& request, Context& ctx);

// ---- audit (commands_audit.cc)
//
// `rdmactl audit [-f|--follow] [--from-oldest] [--after SEQ]` and `rdmactl watch audit` (= audit --follow):
// rdmad's audit records (WatchAudit, admins only). Without --follow: every record rdmad retains, until none
// came for kEventsIdle. With --follow: new records (after --after, or every retained one first with
// --from-oldest) until rdmad ends the stream. -o json prints each record's line exactly as rdmad wrote it to
// its audit log.
struct AuditOptions {
  bool follow = false;
  bool from_oldest = false;
  std::string after;  // empty: none
};
struct AuditPlan {
  v1::WatchAuditRequest request;
  bool follow = false;
};
absl::StatusOr<AuditPlan> Validate(const AuditOptions& options);
int Run(const AuditPlan& plan, Context& ctx);
// Table lines: SEQ TIME PRINCIPAL METHOD RESOURCE RESULT DETAIL; `wide` adds TENANT and PEER before DETAIL.
std::string AuditHeader(bool wide);
std::string AuditLine(const v1::AuditRecord& record, bool wide);

// ---- the data plane: read, bench read (commands_read.cc)
//
// Both read through a grant, with client::RemoteRegion. A token is single use and only IssueGrant returns
// it, so by default they take an MR and issue their own grant over exactly the range read, revoking it at the
// end (on success and on failure). With --token-file and --endpoint they use a grant someone else issued
// instead: no grant is issued or revoked, and --offset/--length are then within the granted range.
struct GrantSourceOptions {
  std::string mr;                    // the positional MR (issue mode)
  std::string offset, length;        // empty: 0, and to the end (of the MR, or of the granted range)
  std::string ttl;                   // issue mode; empty: the command's default
  std::string principal = "rdmactl";  // --for, issue mode
  std::string token_file, endpoint;  // token mode: both
  bool ttl_given = false, principal_given = false;
};
struct GrantSource {
  bool issue = true;
  // Issue mode: the grant to ask for; a length of 0 means to the end of the MR (rdmactl asks GetMr).
  v1::IssueGrantRequest request;
  // Token mode: the token, where to present it, and the range within the grant (length 0: to its end).
  std::string token;
  std::string host;
  uint16_t port = 0;
  uint64_t offset = 0, length = 0;
};

struct ReadOptions {
  GrantSourceOptions source;
  std::string output_file;  // --out-file; empty: stdout
};
struct ReadPlan {
  GrantSource source;
  std::string output_file;
};
// Reads the token file (a missing or bad one is a usage error).
absl::StatusOr<ReadPlan> Validate(const ReadOptions& options);
// Reads in chunks of at most kReadChunk, to stdout or the file; a summary goes to stderr.
inline constexpr uint64_t kReadChunk = 1 << 20;
int Run(const ReadPlan& plan, Context& ctx);

struct BenchReadOptions {
  GrantSourceOptions source;
  std::string size = "4KiB";
  std::string depth = "16";
  std::string duration = "10s";
};
struct BenchReadPlan {
  GrantSource source;
  uint64_t size = 0, depth = 0;
  absl::Duration duration;
};
// Without --ttl the grant's lease is the duration plus kBenchTtlMargin; a --ttl not longer than the
// duration is a usage error (the grant would end mid-bench).
inline constexpr absl::Duration kBenchTtlMargin = absl::Seconds(60);
inline constexpr uint64_t kMaxBenchDepth = 4096;
absl::StatusOr<BenchReadPlan> Validate(const BenchReadOptions& options);
// Table (or -o json): reads, IOPS, MiB/s, p50/p99/p999 latency in microseconds.
int Run(const BenchReadPlan& plan, Context& ctx);

// ---- tenants (commands_tenants.cc)

// `get tenants [NAME]` (Run(GetOptions) comes here for Kind::kTenant): the table of tenants and their quotas'
// use; an admin sees every tenant, a tenant caller its own.
int RunGetTenants(const GetOptions& options, Context& ctx);
// `describe tenant NAME`: every quota (used, limit), principals, file roots, devices, PDs.
int RunDescribeTenant(const NamedOptions& options, Context& ctx);
// `whoami`: who rdmad takes this caller to be.
int RunWhoAmI(Context& ctx);

// ---- health, version

int RunHealth(Context& ctx);
int RunVersion(Context& ctx);

}  // namespace rdmad::cli

#endif  // RDMAD_CLI_COMMANDS_H_
