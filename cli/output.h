// rdmactl's output side, pure: human sizes and keys, aligned tables, the column spec of each resource kind
// (one spec serves the table, -o wide and -o name), the line spec of each stream (events, grant events,
// audit records), the texts of single results, protobuf -> JSON, and error lines. No I/O, no client calls.
//
// Thread-safety: stateless (Table is a plain value); every function may be called from any thread.
#ifndef RDMAD_CLI_OUTPUT_H_
#define RDMAD_CLI_OUTPUT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <google/protobuf/message.h>
#include <google/protobuf/repeated_field.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "rdmad/v1/rdmad.pb.h"

namespace rdmad::cli {

// -o table|wide|json|yaml|name
enum class Format { kTable, kWide, kJson, kYaml, kName };
absl::StatusOr<Format> ParseFormat(absl::string_view text);

// ---- Scalars

// Bytes for people: 512 -> "512B", 4096 -> "4KiB", 1572864 -> "1.5MiB"; a size that is not a whole number of
// its unit is rounded to one decimal (1000000 -> "976.6KiB").
std::string FormatSize(uint64_t bytes);
// 0x1234 (lower case, no padding): keys and addresses.
std::string Hex(uint64_t value);
// "local-write,remote-read"; "none" for an empty list.
std::string AccessString(const google::protobuf::RepeatedField<int>& access);
std::string YesNo(bool b);
// Short spellings of enum values: "READY", "RTS", "1", "emulated", "WORKER", "CONNECT_REQUEST", "ACTIVE",
// "QP" (scope), "MR_DEREGISTERED" (end reason), "ISSUED" (grant event), "ADMIN"; unknown numbers as "N".
std::string MrStateString(int state);
std::string QpStateString(int state);
std::string MwTypeString(int type);
std::string ReregMethodString(int method);
std::string ChannelRoleString(int role);
std::string CmIdStateString(int state);
std::string GrantStateString(int state);
std::string GrantScopeString(int scope);
std::string GrantEndReasonString(int reason);
std::string GrantEventTypeString(int type);
std::string RoleString(int role);
// "RDMA_CM_EVENT_ESTABLISHED" -> "ESTABLISHED"; other text unchanged.
std::string EventTypeString(absl::string_view type);
// "anon", "anon-huge", "file:/dev/shm/x" or "file:/dev/shm/x+4KiB" (offset), "<none>".
std::string SourceString(const v1::MemorySource& source);
// "10.0.2.15:7471", "[fe80::1]:7471"; "" when the address is empty.
std::string SocketAddressString(const v1::SocketAddress& address);
// Bytes as lower-case hex ("0a0b0c"); with max_bytes > 0 and more bytes than that, the first max_bytes and "...".
std::string HexBytes(absl::string_view bytes, size_t max_bytes = 0);
// Unix nanoseconds -> "2026-11-22T04:15:28.123456Z" (UTC, microseconds).
std::string FormatUnixNanos(int64_t nanos);
// Unix nanoseconds -> "2026-11-22T04:32:46Z" (UTC, whole seconds); "" for 0.
std::string FormatExpiry(int64_t nanos);
// The time left until `nanos` from `now`, rounded up to whole seconds: "in 59s", "in 1m30s"; "expired" when it
// is not in the future; "" for 0 (none).
std::string ExpiresIn(int64_t nanos, absl::Time now);

// ---- Tables

// Columns left-aligned, separated by three spaces, header in capitals (kubectl's look). An empty cell prints
// as "<none>". No trailing spaces.
class Table {
 public:
  explicit Table(std::vector<std::string> header);
  void AddRow(std::vector<std::string> row);  // padded or cut to the header's width
  size_t rows() const { return rows_.size(); }
  // Without the header (--no-headers) the columns are as wide as their widest cell.
  std::string Render(bool headers = true) const;
  // Each column's width (the header's included), for the rows a watch prints later.
  std::vector<size_t> Widths() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// A resource kind's columns: NAME first; `wide` columns only with -o wide. -o name prints the items' names.
template <typename T>
struct Column {
  const char* header;
  std::function<std::string(const T&)> cell;
  bool wide = false;
};
template <typename T>
using Columns = std::vector<Column<T>>;

template <typename T>
Table MakeTable(const Columns<T>& columns, const google::protobuf::RepeatedPtrField<T>& items, bool wide) {
  std::vector<std::string> header;
  for (const Column<T>& c : columns) {
    if (wide || !c.wide) header.push_back(c.header);
  }
  Table t(std::move(header));
  for (const T& item : items) {
    std::vector<std::string> row;
    for (const Column<T>& c : columns) {
      if (wide || !c.wide) row.push_back(c.cell(item));
    }
    t.AddRow(std::move(row));
  }
  return t;
}

const Columns<v1::Device>& DeviceColumns();
const Columns<v1::ProtectionDomain>& PdColumns();
const Columns<v1::MemoryRegion>& MrColumns();
const Columns<v1::MemoryWindow>& MwColumns();
const Columns<v1::QueuePair>& QpColumns();
const Columns<v1::EventChannel>& ChannelColumns();
const Columns<v1::CmId>& CmIdColumns();
// EXPIRES is the time left from `now` (empty for an ended grant).
Columns<v1::Grant> GrantColumns(absl::Time now);
// PRINCIPALS is the one, or the first and "(+N)"; quotas are used/limit; wide adds the other quotas, FILE-ROOTS
// ("<allowed_file_roots>": rdmad's own) and DEVICES ("<all>").
const Columns<v1::Tenant>& TenantColumns();
// Devices' second and third tables: one row per populated GID entry of every port; one row per hardware
// counter (port 0: "device"), REMOTE-ACCESS-ERROR "yes" for those of remote accesses the NIC refused.
Table GidsTable(const google::protobuf::RepeatedPtrField<v1::Device>& devices);
Table HwCountersTable(const google::protobuf::RepeatedPtrField<v1::Device>& devices);

// ---- Streams: one line per event, fixed-width columns (a stream cannot be aligned as a whole)

// Every cell but the last is padded to its width plus three spaces (a longer one pushes the line on); an
// empty cell but the last prints as "<none>". `wide` columns only with -o wide; cells may differ with it.
template <typename T>
struct StreamColumn {
  const char* header;
  size_t width;
  std::function<std::string(const T&, bool wide)> cell;
  bool wide = false;
};
template <typename T>
struct StreamSpec {
  std::vector<StreamColumn<T>> columns;
  std::function<std::string(const T&)> name;  // -o name
};
std::string StreamColumns(const std::vector<std::string>& cells, const std::vector<size_t>& widths);
// The header (no item) or an item's line.
template <typename T>
std::string StreamRow(const StreamSpec<T>& spec, const T* item, bool wide) {
  std::vector<std::string> cells;
  std::vector<size_t> widths;
  for (const auto& c : spec.columns) {
    if (wide || !c.wide) cells.push_back(item ? c.cell(*item, wide) : c.header), widths.push_back(c.width);
  }
  return StreamColumns(cells, widths);
}
template <typename T>
std::string StreamHeader(const StreamSpec<T>& spec, bool wide) { return StreamRow<T>(spec, nullptr, wide); }
template <typename T>
std::string StreamLine(const StreamSpec<T>& spec, const T& item, bool wide) { return StreamRow(spec, &item, wide); }
// SEQ TIME CHANNEL CM-ID TYPE STATUS DETAILS: "listener cmids/N" and "data HEX (N bytes)" (the first 16 bytes,
// or all of them when wide); the name is the CM id.
const StreamSpec<v1::CmEvent>& EventStream();
// SEQ TIME TYPE GRANT MR PRINCIPAL DETAILS: ISSUED the range, access, scope and expiry; ACTIVATED the CM id, QP
// and window; RENEWED the new expiry and the renewal count; REVOKED and EXPIRED the end reason.
const StreamSpec<v1::GrantEvent>& GrantEventStream();
// SEQ TIME PRINCIPAL METHOD RESOURCE RESULT [TENANT PEER] DETAIL (folded to one line); the name is the resource.
const StreamSpec<v1::AuditRecord>& AuditStream();

// ---- Texts of single results (one item per line, ending in a newline)

// `create token`: the name, expiry (absolute and from `now`), endpoints and the token in hex.
std::string TokenText(const v1::ConnectToken& token, const std::string& pd, absl::Time now);
// `grant`: the grant, the endpoints, and the token in hex, or where it was written when `token_file` is set.
std::string IssuedGrantText(const v1::IssuedGrant& issued, absl::Time now, const std::string& token_file);
// A quota's limit ("8", "1GiB" for pinned_bytes, "unlimited" for 0), use ("2", "12KiB"; "-" for
// rpc_per_second: a rate, no use counted) and cell ("used/limit"; rpc_per_second its limit alone).
const v1::QuotaUsage* FindQuota(const v1::Tenant& tenant, absl::string_view quota);
std::string QuotaLimitString(const v1::QuotaUsage& quota);
std::string QuotaUsedString(const v1::QuotaUsage& quota);
std::string QuotaCell(const v1::QuotaUsage& quota);
// `describe tenant`: name, principals, file roots, devices, PDs, then every quota (QUOTA USED LIMIT).
std::string TenantText(const v1::Tenant& tenant);
// `describe mr`: name, PD, source, length, address, access, state (and why UNUSABLE), generation, keys, the
// kernel's numbers (`kernel`: KernelIdsText; empty: no such line); then the windows bound to it (the get mws
// table) and its grants (the get grants table, EXPIRES from `now`), or <none>.
std::string MrText(const v1::MemoryRegion& mr, const google::protobuf::RepeatedPtrField<v1::MemoryWindow>& windows,
                   const google::protobuf::RepeatedPtrField<v1::Grant>& grants, absl::Time now,
                   const std::string& kernel = "");
// "CODE: message", on one line (a note beside output that still printed; FormatError is for failures).
std::string StatusNote(const absl::Status& status);
// "mrn 7, pdn 3", each "<unknown>" where not known exactly, or "<unavailable> (NOTE)" when they could not be
// read at all (`note` non-empty).
std::string KernelIdsText(std::optional<uint32_t> mrn, std::optional<uint32_t> pdn, const std::string& note);
// `whoami`: principal, tenant, role, authenticated, transport, and uid/gid when rdmad gave them (>= 0).
std::string CallerText(const v1::Caller& caller);

// ---- JSON: protobuf's printer, proto field names, default-valued fields included

// Pretty, ending in a newline.
std::string ToJson(const google::protobuf::Message& message);
// One line (JSON Lines), ending in a newline.
std::string ToJsonLine(const google::protobuf::Message& message);
// -o yaml: the JSON above as YAML (cli/yaml.h), ending in a newline.
std::string ToYaml(const google::protobuf::Message& message);
// -o json or -o yaml, by `format`.
std::string ToStructured(const google::protobuf::Message& message, Format format);

// ---- Errors

// "error: <message> (field: X, verbs call: ibv_reg_mr, errno: EBUSY)" with the parts the detail has (the field
// only if the message does not start with "X: "); then a "note:" line for a failed rereg's outcome, and a
// "hint:" line when rdmad could not be reached at `server` or did not answer in time. `detail` is nullopt when
// the status carries no ErrorDetail: rdmad sends one with every failure, so only then is it the channel's.
// No trailing newline.
std::string FormatError(const absl::Status& status, const std::optional<v1::ErrorDetail>& detail,
                        absl::string_view server);

}  // namespace rdmad::cli

#endif  // RDMAD_CLI_OUTPUT_H_
