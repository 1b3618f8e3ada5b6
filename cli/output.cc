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

namespace rdmad::cli {
namespace {

constexpr char kNone[] = "<none>";

template <typename T>
std::string JoinPorts(const v1::Device& d, T&& field) {
  std::vector<std::string> parts;
  for (const v1::Port& p : d.ports()) parts.push_back(field(p));
  return absl::StrJoin(parts, ",");
}

std::string YesNo(bool b) { return b ? "yes" : "no"; }

std::string MwTypes(const v1::DeviceCaps& caps) {
  std::vector<std::string> types;
  if (caps.mw_type1()) types.push_back("1");
  if (caps.mw_type2a()) types.push_back("2a");
  if (caps.mw_type2b()) types.push_back("2b");
  return types.empty() ? "none" : absl::StrJoin(types, ",");
}

// "MR_READY" -> "READY" given the prefix "MR_"; unknown numbers as "N".
template <typename Descriptor>
std::string EnumName(const Descriptor* descriptor, int value, absl::string_view prefix) {
  const auto* v = descriptor->FindValueByNumber(value);
  if (v == nullptr) return absl::StrCat(value);
  absl::string_view name = v->name();
  absl::ConsumePrefix(&name, prefix);
  return std::string(name);
}

}  // namespace

absl::StatusOr<Format> ParseFormat(absl::string_view text) {
  const std::string f = absl::AsciiStrToLower(text);
  if (f == "table") return Format::kTable;
  if (f == "wide") return Format::kWide;
  if (f == "json") return Format::kJson;
  if (f == "name") return Format::kName;
  return absl::InvalidArgumentError(absl::StrCat("unknown output format '", text, "' (table, wide, json or name)"));
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

std::string JsonQuote(absl::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
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

std::string Table::Render() const {
  std::vector<size_t> width(header_.size(), 0);
  auto measure = [&width](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size(); i++) width[i] = std::max(width[i], row[i].size());
  };
  measure(header_);
  for (const auto& row : rows_) measure(row);
  std::string out;
  auto render = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < row.size(); i++) {
      line += row[i];
      if (i + 1 < row.size()) line.append(width[i] - row[i].size() + 3, ' ');
    }
    absl::StripTrailingAsciiWhitespace(&line);
    out += line + "\n";
  };
  render(header_);
  for (const auto& row : rows_) render(row);
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
    default: return kNone;
  }
}

namespace {

// Who keeps a window's key to its range: the device itself, rdmad's bounds region, or nobody (mw_bounds_region
// "never" on a device whose probe did not see it enforce window bounds).
std::string MwBounds(const v1::DeviceCaps& caps) {
  if (caps.mw_bounds_region()) return "bounds-region";
  return caps.mw_bounds_enforced() ? "device" : "UNSAFE";
}

}  // namespace

Table DevicesTable(const google::protobuf::RepeatedPtrField<v1::Device>& devices, bool wide) {
  std::vector<std::string> header = {"NAME", "TRANSPORT", "PORTS",    "STATE",       "MTU",
                                     "LINK", "GIDS",      "MW-TYPES", "NATIVE-REREG"};
  if (wide) {
    for (const char* h :
         {"NODE-TYPE", "GUID", "FIRMWARE", "MAX-MR-SIZE", "MAX-MR", "MAX-MW", "MW-BOUNDS", "REREG-PROBE"}) {
      header.push_back(h);
    }
  }
  Table t(std::move(header));
  for (const v1::Device& d : devices) {
    int gids = 0;
    for (const v1::Port& p : d.ports()) gids += p.gids_size();
    std::vector<std::string> row = {
        d.name(),
        d.transport(),
        absl::StrCat(d.ports_size()),
        JoinPorts(d, [](const v1::Port& p) { return p.state(); }),
        JoinPorts(d, [](const v1::Port& p) { return absl::StrCat(p.active_mtu()); }),
        JoinPorts(d, [](const v1::Port& p) { return p.link_layer(); }),
        absl::StrCat(gids),
        MwTypes(d.caps()),
        YesNo(d.caps().native_rereg()),
    };
    if (wide) {
      for (std::string cell :
           {d.node_type(), d.node_guid(), d.firmware(), FormatSize(d.caps().max_mr_size()),
            absl::StrCat(d.caps().max_mr()), absl::StrCat(d.caps().max_mw()), MwBounds(d.caps()),
            d.caps().native_rereg_probe()}) {
        row.push_back(std::move(cell));
      }
    }
    t.AddRow(std::move(row));
  }
  return t;
}

Table GidsTable(const google::protobuf::RepeatedPtrField<v1::Device>& devices) {
  Table t({"DEVICE", "PORT", "INDEX", "TYPE", "GID"});
  for (const v1::Device& d : devices) {
    for (const v1::Port& p : d.ports()) {
      for (const v1::Gid& g : p.gids()) {
        t.AddRow({d.name(), absl::StrCat(p.number()), absl::StrCat(g.index()), g.type(), g.gid()});
      }
    }
  }
  return t;
}

Table HwCountersTable(const google::protobuf::RepeatedPtrField<v1::Device>& devices) {
  Table t({"DEVICE", "PORT", "COUNTER", "VALUE", "REMOTE-ACCESS-ERROR"});
  for (const v1::Device& d : devices) {
    for (const v1::HwCounter& c : d.hw_counters()) {
      t.AddRow({d.name(), c.port() == 0 ? "device" : absl::StrCat(c.port()), c.name(), absl::StrCat(c.value()),
                YesNo(c.remote_access_error())});
    }
  }
  return t;
}

Table PdsTable(const google::protobuf::RepeatedPtrField<v1::ProtectionDomain>& pds, bool wide) {
  // Nothing more to show in wide: a PD has no hidden columns.
  Table t({"NAME", "DEVICE", "MRS", "MWS", "QPS", "LABEL"});
  for (const v1::ProtectionDomain& pd : pds) {
    t.AddRow({pd.name(), pd.device(), absl::StrCat(pd.mr_count()), absl::StrCat(pd.mw_count()),
              absl::StrCat(pd.qp_count()), pd.label()});
  }
  return t;
}

Table MrsTable(const google::protobuf::RepeatedPtrField<v1::MemoryRegion>& mrs, bool wide) {
  std::vector<std::string> header = {"NAME", "PD", "SOURCE", "LENGTH", "LKEY", "RKEY", "ACCESS", "STATE", "WINDOWS"};
  if (wide) {
    for (const char* h : {"ADDR", "GENERATION", "REASON"}) header.push_back(h);
  }
  Table t(std::move(header));
  for (const v1::MemoryRegion& mr : mrs) {
    std::vector<std::string> row = {mr.name(),
                                    mr.pd(),
                                    SourceString(mr.source()),
                                    FormatSize(mr.length()),
                                    Hex(mr.lkey()),
                                    Hex(mr.rkey()),
                                    AccessString(mr.access()),
                                    MrStateString(mr.state()),
                                    absl::StrCat(mr.bound_windows())};
    if (wide) {
      row.push_back(Hex(mr.addr()));
      row.push_back(absl::StrCat(mr.generation()));
      row.push_back(mr.unusable_reason());
    }
    t.AddRow(std::move(row));
  }
  return t;
}

Table MwsTable(const google::protobuf::RepeatedPtrField<v1::MemoryWindow>& mws, bool wide) {
  std::vector<std::string> header = {"NAME", "PD", "TYPE", "BOUND", "RKEY", "MR", "OFFSET", "LENGTH", "ACCESS", "QP"};
  if (wide) {
    for (const char* h : {"ZERO-BASED", "ADDR", "REMOTE-ADDR"}) header.push_back(h);
  }
  Table t(std::move(header));
  for (const v1::MemoryWindow& mw : mws) {
    const v1::MwBinding& b = mw.binding();
    std::vector<std::string> row = {mw.name(), mw.pd(), MwTypeString(mw.type()), YesNo(mw.bound()), Hex(mw.rkey())};
    if (mw.bound()) {
      for (std::string cell :
           {b.mr(), FormatSize(b.offset()), FormatSize(b.length()), AccessString(b.access()), b.qp()}) {
        row.push_back(std::move(cell));
      }
    } else {
      row.resize(row.size() + 5);  // <none>
    }
    if (wide) {
      if (mw.bound()) {
        row.push_back(YesNo(b.zero_based()));
        row.push_back(Hex(b.addr()));
        row.push_back(Hex(b.remote_addr()));
      } else {
        row.resize(row.size() + 3);
      }
    }
    t.AddRow(std::move(row));
  }
  return t;
}

Table QpsTable(const google::protobuf::RepeatedPtrField<v1::QueuePair>& qps, bool wide) {
  std::vector<std::string> header = {"NAME", "PD", "STATE", "PORT", "GID-INDEX", "QPN", "PSN", "REMOTE-QPN", "WINDOWS"};
  if (wide) {
    for (const char* h : {"GID", "LID", "REMOTE-GID", "REMOTE-PSN", "REMOTE-LID"}) header.push_back(h);
  }
  Table t(std::move(header));
  for (const v1::QueuePair& qp : qps) {
    const bool connected = qp.has_remote();
    std::vector<std::string> row = {qp.name(),
                                    qp.pd(),
                                    QpStateString(qp.state()),
                                    absl::StrCat(qp.port()),
                                    absl::StrCat(qp.gid_index()),
                                    absl::StrCat(qp.local().qpn()),
                                    absl::StrCat(qp.local().psn()),
                                    connected ? absl::StrCat(qp.remote().qpn()) : "",
                                    absl::StrCat(qp.bound_windows())};
    if (wide) {
      row.push_back(qp.local().gid());
      row.push_back(absl::StrCat(qp.local().lid()));
      row.push_back(connected ? qp.remote().gid() : "");
      row.push_back(connected ? absl::StrCat(qp.remote().psn()) : "");
      row.push_back(connected ? absl::StrCat(qp.remote().lid()) : "");
    }
    t.AddRow(std::move(row));
  }
  return t;
}

Table ChannelsTable(const google::protobuf::RepeatedPtrField<v1::EventChannel>& channels, bool wide) {
  std::vector<std::string> header = {"NAME", "ROLE", "CM-IDS", "EVENTS", "PENDING", "THREAD", "LABEL"};
  if (wide) {
    for (const char* h : {"TID", "IDS"}) header.push_back(h);
  }
  Table t(std::move(header));
  for (const v1::EventChannel& ch : channels) {
    std::vector<std::string> row = {ch.name(),
                                    ChannelRoleString(ch.role()),
                                    absl::StrCat(ch.cm_ids_size()),
                                    absl::StrCat(ch.events_dispatched()),
                                    absl::StrCat(ch.events_pending()),
                                    ch.thread(),
                                    ch.label()};
    if (wide) {
      row.push_back(ch.thread_id() ? absl::StrCat(ch.thread_id()) : "");
      row.push_back(absl::StrJoin(ch.cm_ids(), ","));
    }
    t.AddRow(std::move(row));
  }
  return t;
}

Table CmIdsTable(const google::protobuf::RepeatedPtrField<v1::CmId>& ids, bool wide) {
  std::vector<std::string> header = {"NAME", "CHANNEL", "PD", "STATE", "DEVICE"};
  if (wide) {
    for (const char* h :
         {"LOCAL", "REMOTE", "QP", "LISTENER", "EVENTS", "MIGRATIONS", "LAST-EVENT", "DATA-PLANE", "REASON"}) {
      header.push_back(h);
    }
  }
  Table t(std::move(header));
  for (const v1::CmId& id : ids) {
    std::vector<std::string> row = {id.name(), id.channel(), id.pd(), CmIdStateString(id.state()), id.device()};
    if (wide) {
      for (std::string cell : {SocketAddressString(id.local()), SocketAddressString(id.remote()), id.qp(),
                               id.listener(), absl::StrCat(id.counters().events()),
                               absl::StrCat(id.counters().migrations()), EventTypeString(id.last_event()),
                               YesNo(id.data_plane()), id.error()}) {
        row.push_back(std::move(cell));
      }
    }
    t.AddRow(std::move(row));
  }
  return t;
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

namespace {
// Event columns: SEQ TIME CHANNEL CM-ID TYPE STATUS DETAILS, each padded to its width plus 3 spaces (as Table).
std::string EventColumns(const std::vector<std::string>& cells) {
  static const size_t kWidth[] = {6, 27, 11, 9, 16, 6};
  std::string line;
  for (size_t i = 0; i < cells.size(); i++) {
    line += cells[i];
    if (i < sizeof(kWidth) / sizeof(kWidth[0]) && i + 1 < cells.size()) {
      line.append(cells[i].size() < kWidth[i] ? kWidth[i] - cells[i].size() + 3 : 3, ' ');
    }
  }
  absl::StripTrailingAsciiWhitespace(&line);
  return line;
}
}  // namespace

std::string EventHeader() { return EventColumns({"SEQ", "TIME", "CHANNEL", "CM-ID", "TYPE", "STATUS", "DETAILS"}); }

std::string EventLine(const v1::CmEvent& e, bool wide) {
  std::vector<std::string> details;
  if (!e.listener().empty()) details.push_back(absl::StrCat("listener ", e.listener()));
  if (!e.private_data().empty()) {
    details.push_back(
        absl::StrCat("data ", HexBytes(e.private_data(), wide ? 0 : 16), " (", e.private_data().size(), " bytes)"));
  }
  auto cell = [](const std::string& s) { return s.empty() ? std::string(kNone) : s; };
  return EventColumns({absl::StrCat(e.sequence()), FormatUnixNanos(e.time_unix_nanos()), cell(e.channel()),
                       cell(e.cm_id()), cell(EventTypeString(e.type())), absl::StrCat(e.status()),
                       absl::StrJoin(details, ", ")});
}

std::string TokenText(const v1::ConnectToken& token, const std::string& pd, absl::Time now) {
  const absl::Time expiry = absl::FromUnixNanos(token.expire_time_unix_nanos());
  const absl::Duration left = absl::Ceil(expiry - now, absl::Seconds(1));
  std::vector<std::string> endpoints;
  for (const v1::SocketAddress& a : token.endpoints()) endpoints.push_back(SocketAddressString(a));
  return absl::StrCat(token.name(), " issued for ", pd, " (expires ",
                      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", expiry, absl::UTCTimeZone()), ", ",
                      left > absl::ZeroDuration() ? absl::StrCat("in ", absl::FormatDuration(left)) : "expired",
                      ")\nendpoints: ", endpoints.empty() ? kNone : absl::StrJoin(endpoints, ", "),
                      "\ntoken: ", HexBytes(token.token()), "\n");
}

// ---- JSON

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;  // a stable shape for scripts: 0, false and "" are printed
  std::string out;
  auto status = google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!status.ok()) {
    // Only for messages that cannot be represented (e.g. an unresolvable Any): none of rdmad.v1's results.
    return absl::StrCat("{\"error\": ", JsonQuote(status.ToString()), "}\n");
  }
  if (out.empty() || out.back() != '\n') out += "\n";
  return out;
}

std::string ToJsonLine(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string out;
  auto status = google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!status.ok()) return absl::StrCat("{\"error\": ", JsonQuote(status.ToString()), "}\n");
  return out + "\n";
}

std::string ToJsonList(const std::vector<const google::protobuf::Message*>& items) {
  // Indentation as protobuf's printer: one space per level.
  if (items.empty()) return "{\n \"items\": []\n}\n";
  std::string out = "{\n \"items\": [\n";
  for (size_t i = 0; i < items.size(); i++) {
    std::string json = ToJson(*items[i]);
    absl::StripTrailingAsciiWhitespace(&json);
    std::vector<std::string> lines = absl::StrSplit(json, '\n');
    for (size_t l = 0; l < lines.size(); l++) {
      out += "  " + lines[l];
      if (l + 1 < lines.size()) out += "\n";
    }
    out += i + 1 < items.size() ? ",\n" : "\n";
  }
  return out + " ]\n}\n";
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

namespace {
std::string EndReason(const v1::Grant& g) {
  if (g.end_reason() == v1::GRANT_END_UNSPECIFIED) return "";
  std::string reason = GrantEndReasonString(g.end_reason());
  if (!g.end_detail().empty()) absl::StrAppend(&reason, ": ", g.end_detail());
  return reason;
}
}  // namespace

Table GrantsTable(const google::protobuf::RepeatedPtrField<v1::Grant>& grants, bool wide, absl::Time now) {
  std::vector<std::string> header = {"NAME", "MR", "OFFSET", "LENGTH", "SCOPE", "STATE", "PRINCIPAL", "EXPIRES"};
  if (wide) {
    for (const char* h : {"PD", "ACCESS", "RENEWALS", "EXPIRY", "CM-ID", "QP", "WINDOW", "TOKEN", "REASON"}) {
      header.push_back(h);
    }
  }
  Table t(std::move(header));
  for (const v1::Grant& g : grants) {
    const bool ended = g.state() == v1::GRANT_ENDED;
    std::vector<std::string> row = {g.name(),
                                    g.mr(),
                                    FormatSize(g.offset()),
                                    FormatSize(g.length()),
                                    GrantScopeString(g.scope()),
                                    GrantStateString(g.state()),
                                    g.principal(),
                                    ended ? "" : ExpiresIn(g.expire_time_unix_nanos(), now)};
    if (wide) {
      for (std::string cell : {g.pd(), AccessString(g.access()), absl::StrCat(g.renewals()),
                               FormatExpiry(g.expire_time_unix_nanos()), g.cm_id(), g.qp(), g.window(), g.token(),
                               EndReason(g)}) {
        row.push_back(std::move(cell));
      }
    }
    t.AddRow(std::move(row));
  }
  return t;
}

namespace {
// Grant event columns: SEQ TIME TYPE GRANT MR PRINCIPAL DETAILS (as EventColumns).
std::string GrantEventColumns(const std::vector<std::string>& cells) {
  static const size_t kWidth[] = {6, 27, 9, 10, 8, 12};
  std::string line;
  for (size_t i = 0; i < cells.size(); i++) {
    line += cells[i];
    if (i < sizeof(kWidth) / sizeof(kWidth[0]) && i + 1 < cells.size()) {
      line.append(cells[i].size() < kWidth[i] ? kWidth[i] - cells[i].size() + 3 : 3, ' ');
    }
  }
  absl::StripTrailingAsciiWhitespace(&line);
  return line;
}
}  // namespace

std::string GrantEventHeader() {
  return GrantEventColumns({"SEQ", "TIME", "TYPE", "GRANT", "MR", "PRINCIPAL", "DETAILS"});
}

std::string GrantEventLine(const v1::GrantEvent& e) {
  const v1::Grant& g = e.grant();
  std::vector<std::string> details;
  switch (e.type()) {
    case v1::GRANT_ISSUED_EVENT:
      details.push_back(absl::StrCat("offset ", FormatSize(g.offset()), ", length ", FormatSize(g.length())));
      details.push_back(AccessString(g.access()));
      if (g.scope() != v1::GRANT_SCOPE_UNSPECIFIED) details.push_back(absl::StrCat("scope ", GrantScopeString(g.scope())));
      if (g.expire_time_unix_nanos() != 0) details.push_back(absl::StrCat("expires ", FormatExpiry(g.expire_time_unix_nanos())));
      break;
    case v1::GRANT_ACTIVATED:
      if (!g.cm_id().empty()) details.push_back(absl::StrCat("cmid ", g.cm_id()));
      if (!g.qp().empty()) details.push_back(absl::StrCat("qp ", g.qp()));
      if (!g.window().empty()) details.push_back(absl::StrCat("window ", g.window()));
      break;
    case v1::GRANT_RENEWED:
      details.push_back(absl::StrCat("expires ", FormatExpiry(g.expire_time_unix_nanos())));
      details.push_back(absl::StrCat("renewals ", g.renewals()));
      break;
    case v1::GRANT_REVOKED:
    case v1::GRANT_EXPIRED:
      if (g.end_reason() != v1::GRANT_END_UNSPECIFIED) details.push_back(absl::StrCat("reason ", EndReason(g)));
      break;
    default: break;
  }
  auto cell = [](const std::string& s) { return s.empty() ? std::string(kNone) : s; };
  return GrantEventColumns({absl::StrCat(e.sequence()), FormatUnixNanos(e.time_unix_nanos()),
                            cell(GrantEventTypeString(e.type())), cell(g.name()), cell(g.mr()), cell(g.principal()),
                            absl::StrJoin(details, ", ")});
}

std::string IssuedGrantText(const v1::IssuedGrant& issued, absl::Time now, const std::string& token_file) {
  const v1::Grant& g = issued.grant();
  std::vector<std::string> endpoints;
  for (const v1::SocketAddress& a : issued.endpoints()) endpoints.push_back(SocketAddressString(a));
  const std::string left = ExpiresIn(g.expire_time_unix_nanos(), now);
  std::string out = absl::StrCat(g.name(), " issued to ", g.principal().empty() ? kNone : g.principal(),
                                 ": ", g.mr(), " offset ", FormatSize(g.offset()), " length ", FormatSize(g.length()),
                                 ", ", AccessString(g.access()), ", scope ", GrantScopeString(g.scope()));
  if (g.expire_time_unix_nanos() != 0) {
    absl::StrAppend(&out, " (expires ", FormatExpiry(g.expire_time_unix_nanos()), ", ", left, ")");
  }
  absl::StrAppend(&out, "\nendpoints: ", endpoints.empty() ? kNone : absl::StrJoin(endpoints, ", "), "\n");
  if (token_file.empty()) {
    absl::StrAppend(&out, "token: ", HexBytes(issued.token()), "\n");
  } else {
    absl::StrAppend(&out, "token: written to ", token_file, " (", issued.token().size(), " bytes, mode 0600)\n");
  }
  return out;
}

// ---- bench read

std::string BenchTable(const client::BenchResult& r) {
  Table t({"READS", "SIZE", "DEPTH", "SECONDS", "IOPS", "MIB/S", "P50-US", "P99-US", "P999-US"});
  t.AddRow({absl::StrCat(r.reads), FormatSize(r.size), absl::StrCat(r.depth),
            absl::StrFormat("%.2f", absl::ToDoubleSeconds(r.elapsed)), absl::StrFormat("%.0f", r.iops),
            absl::StrFormat("%.1f", r.mib_per_s), absl::StrFormat("%.1f", r.p50_us),
            absl::StrFormat("%.1f", r.p99_us), absl::StrFormat("%.1f", r.p999_us)});
  return t.Render();
}

std::string BenchJson(const client::BenchResult& r, const std::string& grant) {
  return absl::StrFormat(
      "{\n \"grant\": %s,\n \"reads\": %d,\n \"bytes\": %d,\n \"size\": %d,\n \"depth\": %d,\n \"seconds\": %.3f,\n"
      " \"iops\": %.1f,\n \"mib_per_s\": %.2f,\n \"latency_us\": {\n  \"p50\": %.2f,\n  \"p99\": %.2f,\n"
      "  \"p999\": %.2f\n }\n}\n",
      JsonQuote(grant), r.reads, r.bytes, r.size, r.depth, absl::ToDoubleSeconds(r.elapsed), r.iops, r.mib_per_s,
      r.p50_us, r.p99_us, r.p999_us);
}

}  // namespace rdmad::cli
