#include "cli/output.h"

#include <algorithm>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "cli/parse.h"
#include "cli/yaml.h"

namespace rdmad::cli {
namespace {

constexpr char kNone[] = "<none>";

// "MR_READY" -> "READY" given the prefix "MR_"; unknown numbers as "N".
template <typename Descriptor>
std::string EnumName(const Descriptor* descriptor, int value, absl::string_view prefix) {
  const auto* v = descriptor->FindValueByNumber(value);
  if (v == nullptr) return absl::StrCat(value);
  absl::string_view name = v->name();
  absl::ConsumePrefix(&name, prefix);
  return std::string(name);
}

// "10.0.2.15:7471, [fe80::1]:7471", or <none>.
std::string Endpoints(const google::protobuf::RepeatedPtrField<v1::SocketAddress>& endpoints) {
  std::vector<std::string> out;
  for (const v1::SocketAddress& a : endpoints) out.push_back(SocketAddressString(a));
  return out.empty() ? kNone : absl::StrJoin(out, ", ");
}

}  // namespace

std::string YesNo(bool b) { return b ? "yes" : "no"; }

absl::StatusOr<Format> ParseFormat(absl::string_view text) {
  const std::string f = absl::AsciiStrToLower(text);
  if (f == "table") return Format::kTable;
  if (f == "wide") return Format::kWide;
  if (f == "json") return Format::kJson;
  if (f == "yaml") return Format::kYaml;
  if (f == "name") return Format::kName;
  return absl::InvalidArgumentError(absl::StrCat("unknown output format '", text, "' (table, wide, json, yaml or name)"));
}

std::string FormatSize(uint64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int unit = 0;
  while (unit < 6 && bytes >= (uint64_t{1} << (10 * (unit + 1)))) unit++;
  const uint64_t size = uint64_t{1} << (10 * unit);
  if (bytes % size == 0) return absl::StrCat(bytes / size, kUnits[unit]);
  // Tenths of the unit, rounded half up; 1023.96KiB rounds to 1024.0KiB, which reads better one unit up.
  using u128 = unsigned __int128;
  uint64_t tenths = static_cast<uint64_t>((static_cast<u128>(bytes) * 10 + size / 2) / size);
  if (tenths >= 10240 && unit < 6) {
    unit++;
    tenths = static_cast<uint64_t>((static_cast<u128>(bytes) * 10 + (size << 10) / 2) / (size << 10));
  }
  return absl::StrCat(tenths / 10, ".", tenths % 10, kUnits[unit]);
}

std::string Hex(uint64_t value) { return absl::StrCat("0x", absl::Hex(value)); }

std::string AccessString(const google::protobuf::RepeatedField<int>& access) {
  if (access.empty()) return "none";
  std::vector<std::string> names;
  for (int a : access) names.push_back(AccessName(a));
  return absl::StrJoin(names, ",");
}

// ---- Tables

Table::Table(std::vector<std::string> header) : header_(std::move(header)) {}

void Table::AddRow(std::vector<std::string> row) {
  row.resize(header_.size());
  for (std::string& cell : row) {
    if (cell.empty()) cell = kNone;
  }
  rows_.push_back(std::move(row));
}

std::vector<size_t> Table::Widths() const {
  std::vector<size_t> width(header_.size(), 0);
  auto measure = [&width](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size(); i++) width[i] = std::max(width[i], row[i].size());
  };
  measure(header_);
  for (const auto& row : rows_) measure(row);
  return width;
}

std::string Table::Render(bool headers) const {
  std::vector<size_t> width = Widths();
  if (!headers) {
    width.assign(header_.size(), 0);
    for (const auto& row : rows_) {
      for (size_t i = 0; i < row.size(); i++) width[i] = std::max(width[i], row[i].size());
    }
  }
  // every cell is as wide as its column: aligned
  std::string out = headers ? StreamColumns(header_, width) + "\n" : "";
  for (const auto& row : rows_) out += StreamColumns(row, width) + "\n";
  return out;
}

std::string MrStateString(int state) { return EnumName(v1::MrState_descriptor(), state, "MR_"); }
std::string QpStateString(int state) { return EnumName(v1::QpState_descriptor(), state, "QP_"); }
std::string MwTypeString(int type) { return EnumName(v1::MwType_descriptor(), type, "TYPE_"); }
std::string ReregMethodString(int method) {
  return absl::AsciiStrToLower(EnumName(v1::ReregMethod_descriptor(), method, ""));
}
std::string ChannelRoleString(int role) { return EnumName(v1::ChannelRole_descriptor(), role, "CHANNEL_"); }
std::string CmIdStateString(int state) { return EnumName(v1::CmIdState_descriptor(), state, "CM_"); }
std::string EventTypeString(absl::string_view type) {
  absl::ConsumePrefix(&type, "RDMA_CM_EVENT_");
  return std::string(type);
}

std::string SourceString(const v1::MemorySource& source) {
  switch (source.kind_case()) {
    case v1::MemorySource::kAnonymous: return source.anonymous().huge_pages() ? "anon-huge" : "anon";
    case v1::MemorySource::kFile:
      if (source.file().offset() == 0) return absl::StrCat("file:", source.file().path());
      return absl::StrCat("file:", source.file().path(), "+", FormatSize(source.file().offset()));
    case v1::MemorySource::kFd:  // memory passed as a descriptor: no path to show
      if (source.fd().offset() == 0) return "fd";
      return absl::StrCat("fd+", FormatSize(source.fd().offset()));
    default: return kNone;
  }
}

// ---- rdma_cm

std::string SocketAddressString(const v1::SocketAddress& a) {
  if (a.address().empty()) return "";
  if (a.address().find(':') != std::string::npos) return absl::StrCat("[", a.address(), "]:", a.port());
  return absl::StrCat(a.address(), ":", a.port());
}

std::string HexBytes(absl::string_view bytes, size_t max_bytes) {
  if (max_bytes > 0 && bytes.size() > max_bytes) {
    return absl::StrCat(absl::BytesToHexString(bytes.substr(0, max_bytes)), "...");
  }
  return absl::BytesToHexString(bytes);
}

std::string FormatUnixNanos(int64_t nanos) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::FromUnixNanos(nanos), absl::UTCTimeZone());
}

std::string TokenText(const v1::ConnectToken& token, const std::string& pd, absl::Time now) {
  const int64_t expiry = token.expire_time_unix_nanos();
  return absl::StrCat(token.name(), " issued for ", pd, " (expires ", FormatExpiry(expiry), ", ", ExpiresIn(expiry, now),
                      ")\nendpoints: ", Endpoints(token.endpoints()), "\ntoken: ", HexBytes(token.token()), "\n");
}

// ---- JSON

namespace {
std::string PrintJson(const google::protobuf::Message& message, bool pretty) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = pretty;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;  // a stable shape for scripts: 0, false and "" are printed
  std::string out;
  // Fails only for messages that cannot be represented (an unresolvable Any): none of rdmactl's.
  if (auto status = google::protobuf::util::MessageToJsonString(message, &out, options); !status.ok()) {
    out = status.ToString();
  }
  if (out.empty() || out.back() != '\n') out += "\n";
  return out;
}
}  // namespace

std::string ToJson(const google::protobuf::Message& message) { return PrintJson(message, true); }
std::string ToJsonLine(const google::protobuf::Message& message) { return PrintJson(message, false); }
std::string ToYaml(const google::protobuf::Message& message) {
  absl::StatusOr<std::string> yaml = JsonToYaml(PrintJson(message, false));
  return yaml.ok() ? *yaml : std::string(yaml.status().message()) + "\n";
}
std::string ToStructured(const google::protobuf::Message& message, Format format) {
  return format == Format::kYaml ? ToYaml(message) : ToJson(message);
}

// ---- Errors

std::string FormatError(const absl::Status& status, const std::optional<v1::ErrorDetail>& maybe_detail,
                        absl::string_view server) {
  const v1::ErrorDetail detail = maybe_detail.value_or(v1::ErrorDetail());
  std::string out = absl::StrCat(
      "error: ", status.message().empty() ? absl::StatusCodeToString(status.code()) : std::string(status.message()));
  std::vector<std::string> parts;
  // rdmad's messages usually start with the field ("pd: pds/9 does not exist"): do not say it twice.
  if (!detail.field().empty() && !absl::StartsWith(status.message(), absl::StrCat(detail.field(), ": "))) {
    parts.push_back(absl::StrCat("field: ", detail.field()));
  }
  if (!detail.verbs_call().empty()) parts.push_back(absl::StrCat("verbs call: ", detail.verbs_call()));
  if (!detail.errno_name().empty()) {
    parts.push_back(absl::StrCat("errno: ", detail.errno_name()));
  } else if (detail.errno_value() != 0) {
    parts.push_back(absl::StrCat("errno: ", detail.errno_value()));
  }
  if (!parts.empty()) absl::StrAppend(&out, " (", absl::StrJoin(parts, ", "), ")");
  switch (detail.rereg_outcome()) {
    case v1::OUTCOME_OLD_MR_VALID:
      absl::StrAppend(&out, "\nnote: the memory region is unchanged and still valid (same keys, memory and PD)");
      break;
    case v1::OUTCOME_MR_UNUSABLE:
      absl::StrAppend(&out,
                      "\nnote: the memory region is now unusable: its keys are dead and only "
                      "'rdmactl delete mr NAME' is accepted");
      break;
    default: break;
  }
  // rdmad itself always sends an ErrorDetail (possibly empty); without one the failure is the channel's.
  const bool from_channel = !maybe_detail.has_value();
  if (status.code() == absl::StatusCode::kUnavailable && from_channel) {
    absl::StrAppend(&out, "\nhint: is rdmad running and listening on ", server,
                    "? (choose the address with --server or RDMAD_SERVER)");
  } else if (status.code() == absl::StatusCode::kDeadlineExceeded && from_channel) {
    absl::StrAppend(&out, "\nhint: rdmad at ", server, " did not answer in time (raise --timeout)");
  }
  return out;
}

// ---- grants

std::string GrantStateString(int state) { return EnumName(v1::GrantState_descriptor(), state, "GRANT_"); }
std::string GrantScopeString(int scope) { return EnumName(v1::GrantScope_descriptor(), scope, "SCOPE_"); }
std::string GrantEndReasonString(int reason) { return EnumName(v1::GrantEndReason_descriptor(), reason, "END_"); }
std::string RoleString(int role) { return EnumName(v1::Role_descriptor(), role, "ROLE_"); }
std::string GrantEventTypeString(int type) {
  std::string name = EnumName(v1::GrantEventType_descriptor(), type, "GRANT_");
  absl::string_view view = name;
  absl::ConsumeSuffix(&view, "_EVENT");  // GRANT_ISSUED_EVENT
  return std::string(view);
}

std::string FormatExpiry(int64_t nanos) {
  if (nanos == 0) return "";
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixNanos(nanos), absl::UTCTimeZone());
}

std::string ExpiresIn(int64_t nanos, absl::Time now) {
  if (nanos == 0) return "";
  const absl::Duration left = absl::Ceil(absl::FromUnixNanos(nanos) - now, absl::Seconds(1));
  if (left <= absl::ZeroDuration()) return "expired";
  return absl::StrCat("in ", absl::FormatDuration(left));
}

std::string IssuedGrantText(const v1::IssuedGrant& issued, absl::Time now, const std::string& token_file) {
  const v1::Grant& g = issued.grant();
  std::string out = absl::StrCat(g.name(), " issued to ", g.principal().empty() ? kNone : g.principal(),
                                 ": ", g.mr(), " offset ", FormatSize(g.offset()), " length ", FormatSize(g.length()),
                                 ", ", AccessString(g.access()), ", scope ", GrantScopeString(g.scope()));
  if (g.expire_time_unix_nanos() != 0) {
    absl::StrAppend(&out, " (expires ", FormatExpiry(g.expire_time_unix_nanos()), ", ",
                    ExpiresIn(g.expire_time_unix_nanos(), now), ")");
  }
  absl::StrAppend(&out, "\nendpoints: ", Endpoints(issued.endpoints()), "\n");
  if (token_file.empty()) {
    absl::StrAppend(&out, "token: ", HexBytes(issued.token()), "\n");
  } else {
    absl::StrAppend(&out, "token: written to ", token_file, " (", issued.token().size(), " bytes, mode 0600)\n");
  }
  return out;
}

// ---- tenants
namespace {

constexpr char kRateQuota[] = "rpc_per_second";
constexpr char kBytesQuota[] = "pinned_bytes";
constexpr size_t kLabelWidth = 16;  // "Authenticated:" and two spaces

// "Label:          value", and further values of a list on their own lines under the first.
void Field(std::string* out, absl::string_view label, const std::vector<std::string>& values) {
  std::string head = absl::StrCat(label, ":");
  head.append(head.size() < kLabelWidth ? kLabelWidth - head.size() : 1, ' ');
  if (values.empty()) {
    absl::StrAppend(out, head, kNone, "\n");
    return;
  }
  for (size_t i = 0; i < values.size(); i++) {
    absl::StrAppend(out, i == 0 ? head : std::string(head.size(), ' '), values[i], "\n");
  }
}

std::vector<std::string> Values(const google::protobuf::RepeatedPtrField<std::string>& list) {
  return std::vector<std::string>(list.begin(), list.end());
}

}  // namespace

const v1::QuotaUsage* FindQuota(const v1::Tenant& tenant, absl::string_view quota) {
  for (const v1::QuotaUsage& q : tenant.quotas()) {
    if (q.quota() == quota) return &q;
  }
  return nullptr;
}

std::string QuotaLimitString(const v1::QuotaUsage& q) {
  if (q.limit() == 0) return "unlimited";
  return q.quota() == kBytesQuota ? FormatSize(q.limit()) : absl::StrCat(q.limit());
}

std::string QuotaUsedString(const v1::QuotaUsage& q) {
  if (q.quota() == kRateQuota) return "-";
  return q.quota() == kBytesQuota ? FormatSize(q.used()) : absl::StrCat(q.used());
}

std::string QuotaCell(const v1::QuotaUsage& q) {
  if (q.quota() == kRateQuota) return QuotaLimitString(q);
  return absl::StrCat(QuotaUsedString(q), "/", QuotaLimitString(q));
}

std::string TenantText(const v1::Tenant& t) {
  std::string out;
  Field(&out, "Name", {t.name()});
  Field(&out, "Principals", Values(t.principals()));
  Field(&out, "File roots",
        t.file_roots().empty() ? std::vector<std::string>{"<allowed_file_roots> (rdmad's own)"} : Values(t.file_roots()));
  Field(&out, "Devices", t.devices().empty() ? std::vector<std::string>{"<all>"} : Values(t.devices()));
  Field(&out, "PDs", Values(t.pds()));
  if (t.quotas().empty()) {
    Field(&out, "Quotas", {});
    return out;
  }
  out += "Quotas:\n";
  Table quotas({"QUOTA", "USED", "LIMIT"});
  bool rate = false;
  for (const v1::QuotaUsage& q : t.quotas()) {
    quotas.AddRow({q.quota(), QuotaUsedString(q), QuotaLimitString(q)});
    rate = rate || q.quota() == kRateQuota;
  }
  for (absl::string_view line : absl::StrSplit(quotas.Render(), '\n', absl::SkipEmpty())) {
    absl::StrAppend(&out, "  ", line, "\n");
  }
  if (rate) absl::StrAppend(&out, "  (", kRateQuota, " is a limit per connection: no use is counted)\n");
  return out;
}

namespace {
// A table's lines under `title`, indented by two spaces; "<title>: <none>" when it has no rows.
void Section(std::string* out, absl::string_view title, const Table& table) {
  if (table.rows() == 0) {
    Field(out, title, {});
    return;
  }
  absl::StrAppend(out, title, ":\n");
  for (absl::string_view line : absl::StrSplit(table.Render(), '\n', absl::SkipEmpty())) {
    absl::StrAppend(out, "  ", line, "\n");
  }
}
}  // namespace

std::string MrText(const v1::MemoryRegion& mr, const google::protobuf::RepeatedPtrField<v1::MemoryWindow>& windows,
                   const google::protobuf::RepeatedPtrField<v1::Grant>& grants, absl::Time now,
                   const std::string& kernel) {
  std::string out;
  Field(&out, "Name", {mr.name()});
  Field(&out, "PD", {mr.pd()});
  Field(&out, "Source", {SourceString(mr.source())});
  Field(&out, "Length", {absl::StrCat(FormatSize(mr.length()), " (", mr.length(), " bytes)")});
  Field(&out, "Address", {Hex(mr.addr())});
  Field(&out, "Access", {AccessString(mr.access())});
  Field(&out, "State", {MrStateString(mr.state())});
  if (!mr.unusable_reason().empty()) Field(&out, "Reason", {mr.unusable_reason()});
  Field(&out, "Generation", {absl::StrCat(mr.generation())});
  Field(&out, "Keys", {absl::StrCat("lkey ", Hex(mr.lkey()), ", rkey ", Hex(mr.rkey()))});
  if (!kernel.empty()) Field(&out, "Kernel", {kernel});
  Section(&out, "Windows", MakeTable(MwColumns(), windows, false));
  Section(&out, "Grants", MakeTable(GrantColumns(now), grants, false));
  return out;
}

std::string StatusNote(const absl::Status& status) {
  return absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message());
}

std::string KernelIdsText(std::optional<uint32_t> mrn, std::optional<uint32_t> pdn, const std::string& note) {
  if (!note.empty()) return absl::StrCat("<unavailable> (", note, ")");
  auto n = [](std::optional<uint32_t> v) { return v.has_value() ? absl::StrCat(*v) : std::string("<unknown>"); };
  return absl::StrCat("mrn ", n(mrn), ", pdn ", n(pdn));
}

std::string CallerText(const v1::Caller& c) {
  std::string out;
  Field(&out, "Principal", {c.principal().empty() ? std::string(kNone) : c.principal()});
  Field(&out, "Tenant", {c.tenant().empty() ? std::string("<none> (outside any tenant)") : c.tenant()});
  Field(&out, "Role", {RoleString(c.role())});
  Field(&out, "Authenticated",
        {c.authenticated() ? std::string("yes") : std::string("no (rdmad did not verify who is calling)")});
  Field(&out, "Transport", {c.transport().empty() ? std::string(kNone) : c.transport()});
  if (c.uid() >= 0) Field(&out, "UID", {absl::StrCat(c.uid())});
  if (c.gid() >= 0) Field(&out, "GID", {absl::StrCat(c.gid())});
  return out;
}

}  // namespace rdmad::cli
