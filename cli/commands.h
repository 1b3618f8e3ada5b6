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
#include "cli/output.h"
#include "cli/parse.h"
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
  std::string name;     // optional
  std::string pd;       // --pd filter, mrs and mws only
  std::string channel;  // --channel filter, cmids only
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
  bool cascade = false;  // delete pd only
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

// ---- health, version

int RunHealth(Context& ctx);
int RunVersion(Context& ctx);

}  // namespace rdmad::cli

#endif  // RDMAD_CLI_COMMANDS_H_
