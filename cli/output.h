// rdmactl's output side: pure formatters. Human sizes and keys, aligned tables, protobuf -> JSON, the
// resource tables of `get`, and error lines. No I/O, no client calls.
//
// Thread-safety: stateless (Table is a plain value); every function may be called from any thread.
#ifndef RDMAD_CLI_OUTPUT_H_
#define RDMAD_CLI_OUTPUT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <google/protobuf/message.h>
#include <google/protobuf/repeated_field.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/transfer.h"
#include "rdmad/v1/rdmad.pb.h"

namespace rdmad::cli {

// -o table|wide|json|name
enum class Format { kTable, kWide, kJson, kName };
absl::StatusOr<Format> ParseFormat(absl::string_view text);

// ---- Scalars

// Bytes for people: 512 -> "512B", 4096 -> "4KiB", 1048576 -> "1MiB", 1572864 -> "1.5MiB"; a size that is not a
// whole number of its unit is rounded to one decimal (1000000 -> "976.6KiB").
std::string FormatSize(uint64_t bytes);
// 0x1234 (lower case, no padding): keys and addresses.
std::string Hex(uint64_t value);
// "local-write,remote-read"; "none" for an empty list.
std::string AccessString(const google::protobuf::RepeatedField<int>& access);
// A JSON string literal, quotes included.
std::string JsonQuote(absl::string_view text);

// ---- Tables

// Columns left-aligned, separated by three spaces, header in capitals (kubectl's look). An empty cell prints
// as "<none>". No trailing spaces.
class Table {
 public:
  explicit Table(std::vector<std::string> header);
  void AddRow(std::vector<std::string> row);  // padded or cut to the header's width
  size_t rows() const { return rows_.size(); }
  std::string Render() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

Table DevicesTable(const google::protobuf::RepeatedPtrField<v1::Device>& devices, bool wide);
// One row per populated GID table entry of every port (shown by -o wide under the device table).
Table GidsTable(const google::protobuf::RepeatedPtrField<v1::Device>& devices);
// One row per hardware counter of every device (port 0: device-level); REMOTE-ACCESS-ERROR is "yes" for
// the counters of remote accesses the NIC refused (a peer's bad or dead key: docs/security.md#keys).
Table HwCountersTable(const google::protobuf::RepeatedPtrField<v1::Device>& devices);
Table PdsTable(const google::protobuf::RepeatedPtrField<v1::ProtectionDomain>& pds, bool wide);
Table MrsTable(const google::protobuf::RepeatedPtrField<v1::MemoryRegion>& mrs, bool wide);
Table MwsTable(const google::protobuf::RepeatedPtrField<v1::MemoryWindow>& mws, bool wide);
Table QpsTable(const google::protobuf::RepeatedPtrField<v1::QueuePair>& qps, bool wide);
Table ChannelsTable(const google::protobuf::RepeatedPtrField<v1::EventChannel>& channels, bool wide);
Table CmIdsTable(const google::protobuf::RepeatedPtrField<v1::CmId>& ids, bool wide);

// Short spellings of enum values used in tables and messages.
std::string MrStateString(int state);       // "READY", "UNUSABLE"
std::string QpStateString(int state);       // "RTS", ...
std::string MwTypeString(int type);         // "1", "2"
std::string ReregMethodString(int method);  // "native", "emulated"
// "anon", "anon-huge", "file:/dev/shm/x" or "file:/dev/shm/x+4KiB" (offset), "<none>".
std::string SourceString(const v1::MemorySource& source);
std::string ChannelRoleString(int role);    // "DEFAULT", "WORKER", "USER"
std::string CmIdStateString(int state);     // "IDLE", "CONNECTED", "CONNECT_REQUEST", ...
// "RDMA_CM_EVENT_ESTABLISHED" -> "ESTABLISHED"; other text unchanged.
std::string EventTypeString(absl::string_view type);

// ---- rdma_cm

// "10.0.2.15:7471", "[fe80::1]:7471"; "" when the address is empty.
std::string SocketAddressString(const v1::SocketAddress& address);
// Bytes as lower-case hex ("0a0b0c"); with max_bytes > 0 and more bytes than that, the first max_bytes
// followed by "...".
std::string HexBytes(absl::string_view bytes, size_t max_bytes = 0);
// Unix nanoseconds -> "2026-11-22T04:15:28.123456Z" (UTC, microseconds).
std::string FormatUnixNanos(int64_t nanos);

// `rdmactl events`: one line per event, columns of fixed width (a stream cannot be aligned as a whole).
// The header line, then SEQ TIME CHANNEL CM-ID TYPE STATUS DETAILS. DETAILS has "listener cmids/N" (a
// CONNECT_REQUEST's listening id) and "data HEX (N bytes)" when the event carries private data: the first 16
// bytes, or all of them when `wide`. No trailing newline.
std::string EventHeader();
std::string EventLine(const v1::CmEvent& event, bool wide);

// `rdmactl create token`, table output: the name, expiry (absolute and from `now`), endpoints and the token's
// bytes in hex, one item per line, ending in a newline.
std::string TokenText(const v1::ConnectToken& token, const std::string& pd, absl::Time now);

// ---- grants

std::string GrantStateString(int state);       // "ISSUED", "ACTIVATING", "ACTIVE", "ENDED"
std::string GrantScopeString(int scope);       // "QP", "PD", "MR"
std::string GrantEndReasonString(int reason);  // "REVOKED", "EXPIRED", "MR_DEREGISTERED", ...
std::string GrantEventTypeString(int type);    // "ISSUED", "ACTIVATED", "RENEWED", "REVOKED", "EXPIRED"
// Unix nanoseconds -> "2026-11-22T04:32:46Z" (UTC, whole seconds); "" for 0.
std::string FormatExpiry(int64_t nanos);
// The time left until `nanos` from `now`, rounded up to whole seconds: "in 59s", "in 1m30s"; "expired" when it
// is not in the future; "" for 0 (none).
std::string ExpiresIn(int64_t nanos, absl::Time now);

// `get grants`: NAME MR OFFSET LENGTH SCOPE STATE PRINCIPAL EXPIRES (time left from `now`; empty for an ended
// grant). `wide` adds PD, ACCESS, RENEWALS, EXPIRY (absolute), CM-ID, QP, WINDOW, TOKEN, REASON (why it ended,
// with rdmad's detail after ':').
Table GrantsTable(const google::protobuf::RepeatedPtrField<v1::Grant>& grants, bool wide, absl::Time now);

// `rdmactl watch grants`: the header, then one line per event: SEQ TIME TYPE GRANT MR PRINCIPAL DETAILS, fixed
// widths. DETAILS by type: ISSUED the range, access, scope and expiry; ACTIVATED the connection's CM id, QP and
// window; RENEWED the new expiry and the renewal count; REVOKED and EXPIRED the end reason (and rdmad's
// detail). No trailing newline.
std::string GrantEventHeader();
std::string GrantEventLine(const v1::GrantEvent& event);

// `rdmactl grant`, table output: the grant (name, principal, MR, range, access, scope, expiry absolute and
// from `now`), the endpoints, and the token in hex, or, when `token_file` is not empty, where it was written
// instead. One item per line, ending in a newline.
std::string IssuedGrantText(const v1::IssuedGrant& issued, absl::Time now, const std::string& token_file);

// ---- tenants (output_tenants.cc)

std::string RoleString(int role);  // "ADMIN", "TENANT"
// The quota called `quota` ("mrs", "pinned_bytes") in `tenant`, or nullptr if rdmad sent none by that name.
const v1::QuotaUsage* FindQuota(const v1::Tenant& tenant, absl::string_view quota);
// A quota's limit: "8", "1GiB" (pinned_bytes as a size), "unlimited" for 0.
std::string QuotaLimitString(const v1::QuotaUsage& quota);
// A quota's use: "2", "12KiB" (pinned_bytes); "-" for rpc_per_second (a rate per connection: no use counted).
std::string QuotaUsedString(const v1::QuotaUsage& quota);
// "used/limit": "2/8", "12KiB/1GiB", "0/unlimited"; rpc_per_second its limit alone ("100", "unlimited").
std::string QuotaCell(const v1::QuotaUsage& quota);

// `get tenants`: NAME PRINCIPALS (the one, or the first and "(+N)") PDS (a count) MRS PINNED GRANTS TOKENS CONNS
// (used/limit). `wide` adds the other quotas (MWS, QPS, CM-IDS, RPC/S) and FILE-ROOTS ("<allowed_file_roots>":
// rdmad's own) and DEVICES ("<all>").
Table TenantsTable(const google::protobuf::RepeatedPtrField<v1::Tenant>& tenants, bool wide);
// `describe tenant`: name, principals, file roots, devices and PDs (one per line), then every quota rdmad sent
// (QUOTA USED LIMIT). Ends in a newline.
std::string TenantText(const v1::Tenant& tenant);
// `whoami`: principal, tenant, role, authenticated, transport, and uid/gid when rdmad gave them (>= 0). Ends in
// a newline.
std::string CallerText(const v1::Caller& caller);

// ---- JSON

// The message as pretty JSON (proto field names, default-valued fields included), ending in a newline.
std::string ToJson(const google::protobuf::Message& message);
// The same on one line (JSON Lines: one object per line), ending in a newline.
std::string ToJsonLine(const google::protobuf::Message& message);
// {"items": [...]}, pretty, ending in a newline.
std::string ToJsonList(const std::vector<const google::protobuf::Message*>& items);
template <typename T>
std::string ToJsonList(const google::protobuf::RepeatedPtrField<T>& items) {
  std::vector<const google::protobuf::Message*> list;
  for (const T& item : items) list.push_back(&item);
  return ToJsonList(list);
}

// ---- bench read

// Table: one header line and one row: READS SIZE DEPTH SECONDS IOPS MIB/S P50-US P99-US P999-US. JSON: one
// object with `grant` (may be empty), `reads`, `bytes`, `size`, `depth`, `seconds`, `iops`, `mib_per_s` and
// `latency_us` {`p50`, `p99`, `p999`}. Both end in a newline.
std::string BenchTable(const client::BenchResult& result);
std::string BenchJson(const client::BenchResult& result, const std::string& grant);

// ---- Errors

// "error: <message> (field: X, verbs call: ibv_reg_mr, errno: EBUSY)" with only the parts the detail has (the
// field only if the message does not already start with "X: ");
// then, when they apply, a "note:" line for a failed rereg's outcome and a "hint:" line when rdmad could not
// be reached at `server` (UNAVAILABLE) or did not answer in time (DEADLINE_EXCEEDED). `detail` is rdmad's
// ErrorDetail, or nullopt when the status carries none: rdmad sends one with every failure, so only such a
// failure is the channel's and gets a hint. No trailing newline.
std::string FormatError(const absl::Status& status, const std::optional<v1::ErrorDetail>& detail,
                        absl::string_view server);

}  // namespace rdmad::cli

#endif  // RDMAD_CLI_OUTPUT_H_
