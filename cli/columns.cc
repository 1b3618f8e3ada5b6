// The column spec of each resource kind and the line spec of each stream (cli/output.h): what `get` shows
// with -o table and -o wide, and what events, watch grants and audit print per event.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "cli/output.h"

namespace rdmad::cli {
namespace {

using absl::StrCat;

template <typename F>
std::string JoinPorts(const v1::Device& d, F field) {
  std::vector<std::string> parts;
  for (const v1::Port& p : d.ports()) parts.push_back(field(p));
  return absl::StrJoin(parts, ",");
}

std::string MwTypes(const v1::DeviceCaps& caps) {
  std::vector<std::string> types;
  if (caps.mw_type1()) types.push_back("1");
  if (caps.mw_type2a()) types.push_back("2a");
  if (caps.mw_type2b()) types.push_back("2b");
  return types.empty() ? "none" : absl::StrJoin(types, ",");
}

// Who keeps a window's key to its range: the device itself, rdmad's bounds region, or nobody (mw_bounds_region
// "never" on a device whose probe did not see it enforce window bounds).
std::string MwBounds(const v1::DeviceCaps& caps) {
  if (caps.mw_bounds_region()) return "bounds-region";
  return caps.mw_bounds_enforced() ? "device" : "UNSAFE";
}

// A bound window's binding field, or "" (<none>) for an unbound one.
template <typename F>
std::function<std::string(const v1::MemoryWindow&)> Bound(F f) {
  return [f](const v1::MemoryWindow& mw) { return mw.bound() ? f(mw.binding()) : std::string(); };
}

// A connected QP's remote field, or "".
template <typename F>
std::function<std::string(const v1::QueuePair&)> Remote(F f) {
  return [f](const v1::QueuePair& qp) { return qp.has_remote() ? f(qp.remote()) : std::string(); };
}

std::string EndReason(const v1::Grant& g) {
  if (g.end_reason() == v1::GRANT_END_UNSPECIFIED) return "";
  std::string reason = GrantEndReasonString(g.end_reason());
  if (!g.end_detail().empty()) absl::StrAppend(&reason, ": ", g.end_detail());
  return reason;
}

std::string Principals(const v1::Tenant& t) {
  if (t.principals().empty()) return "";
  if (t.principals_size() == 1) return t.principals(0);
  return StrCat(t.principals(0), " (+", t.principals_size() - 1, ")");
}

std::function<std::string(const v1::Tenant&)> Quota(const char* quota) {
  return [quota](const v1::Tenant& t) {
    const v1::QuotaUsage* q = FindQuota(t, quota);
    return q == nullptr ? std::string() : QuotaCell(*q);
  };
}

}  // namespace

const Columns<v1::Device>& DeviceColumns() {
  static const auto* columns = new Columns<v1::Device>{
      {"NAME", [](const v1::Device& d) { return d.name(); }},
      {"TRANSPORT", [](const v1::Device& d) { return d.transport(); }},
      {"PORTS", [](const v1::Device& d) { return StrCat(d.ports_size()); }},
      {"STATE", [](const v1::Device& d) { return JoinPorts(d, [](const v1::Port& p) { return p.state(); }); }},
      {"MTU", [](const v1::Device& d) { return JoinPorts(d, [](const v1::Port& p) { return StrCat(p.active_mtu()); }); }},
      {"LINK", [](const v1::Device& d) { return JoinPorts(d, [](const v1::Port& p) { return p.link_layer(); }); }},
      {"GIDS",
       [](const v1::Device& d) {
         int gids = 0;
         for (const v1::Port& p : d.ports()) gids += p.gids_size();
         return StrCat(gids);
       }},
      {"MW-TYPES", [](const v1::Device& d) { return MwTypes(d.caps()); }},
      {"NATIVE-REREG", [](const v1::Device& d) { return YesNo(d.caps().native_rereg()); }},
      {"NODE-TYPE", [](const v1::Device& d) { return d.node_type(); }, true},
      {"GUID", [](const v1::Device& d) { return d.node_guid(); }, true},
      {"FIRMWARE", [](const v1::Device& d) { return d.firmware(); }, true},
      {"MAX-MR-SIZE", [](const v1::Device& d) { return FormatSize(d.caps().max_mr_size()); }, true},
      {"MAX-MR", [](const v1::Device& d) { return StrCat(d.caps().max_mr()); }, true},
      {"MAX-MW", [](const v1::Device& d) { return StrCat(d.caps().max_mw()); }, true},
      {"MW-BOUNDS", [](const v1::Device& d) { return MwBounds(d.caps()); }, true},
      {"REREG-PROBE", [](const v1::Device& d) { return d.caps().native_rereg_probe(); }, true},
  };
  return *columns;
}

Table GidsTable(const google::protobuf::RepeatedPtrField<v1::Device>& devices) {
  Table t({"DEVICE", "PORT", "INDEX", "TYPE", "GID"});
  for (const v1::Device& d : devices) {
    for (const v1::Port& p : d.ports()) {
      for (const v1::Gid& g : p.gids()) t.AddRow({d.name(), StrCat(p.number()), StrCat(g.index()), g.type(), g.gid()});
    }
  }
  return t;
}

Table HwCountersTable(const google::protobuf::RepeatedPtrField<v1::Device>& devices) {
  Table t({"DEVICE", "PORT", "COUNTER", "VALUE", "REMOTE-ACCESS-ERROR"});
  for (const v1::Device& d : devices) {
    for (const v1::HwCounter& c : d.hw_counters()) {
      t.AddRow({d.name(), c.port() == 0 ? "device" : StrCat(c.port()), c.name(), StrCat(c.value()),
                YesNo(c.remote_access_error())});
    }
  }
  return t;
}

const Columns<v1::ProtectionDomain>& PdColumns() {
  // A PD has no hidden columns: -o wide shows the same.
  using Pd = v1::ProtectionDomain;
  static const auto* columns = new Columns<Pd>{
      {"NAME", [](const Pd& pd) { return pd.name(); }},
      {"DEVICE", [](const Pd& pd) { return pd.device(); }},
      {"MRS", [](const Pd& pd) { return StrCat(pd.mr_count()); }},
      {"MWS", [](const Pd& pd) { return StrCat(pd.mw_count()); }},
      {"QPS", [](const Pd& pd) { return StrCat(pd.qp_count()); }},
      {"LABEL", [](const Pd& pd) { return pd.label(); }},
  };
  return *columns;
}

const Columns<v1::MemoryRegion>& MrColumns() {
  using Mr = v1::MemoryRegion;
  static const auto* columns = new Columns<Mr>{
      {"NAME", [](const Mr& mr) { return mr.name(); }},
      {"PD", [](const Mr& mr) { return mr.pd(); }},
      {"SOURCE", [](const Mr& mr) { return SourceString(mr.source()); }},
      {"LENGTH", [](const Mr& mr) { return FormatSize(mr.length()); }},
      {"LKEY", [](const Mr& mr) { return Hex(mr.lkey()); }},
      {"RKEY", [](const Mr& mr) { return Hex(mr.rkey()); }},
      {"ACCESS", [](const Mr& mr) { return AccessString(mr.access()); }},
      {"STATE", [](const Mr& mr) { return MrStateString(mr.state()); }},
      {"WINDOWS", [](const Mr& mr) { return StrCat(mr.bound_windows()); }},
      {"ADDR", [](const Mr& mr) { return Hex(mr.addr()); }, true},
      {"GENERATION", [](const Mr& mr) { return StrCat(mr.generation()); }, true},
      {"REASON", [](const Mr& mr) { return mr.unusable_reason(); }, true},
  };
  return *columns;
}

const Columns<v1::MemoryWindow>& MwColumns() {
  using Mw = v1::MemoryWindow;
  using B = v1::MwBinding;
  static const auto* columns = new Columns<Mw>{
      {"NAME", [](const Mw& mw) { return mw.name(); }},
      {"PD", [](const Mw& mw) { return mw.pd(); }},
      {"TYPE", [](const Mw& mw) { return MwTypeString(mw.type()); }},
      {"BOUND", [](const Mw& mw) { return YesNo(mw.bound()); }},
      {"RKEY", [](const Mw& mw) { return Hex(mw.rkey()); }},
      {"MR", Bound([](const B& b) { return b.mr(); })},
      {"OFFSET", Bound([](const B& b) { return FormatSize(b.offset()); })},
      {"LENGTH", Bound([](const B& b) { return FormatSize(b.length()); })},
      {"ACCESS", Bound([](const B& b) { return AccessString(b.access()); })},
      {"QP", Bound([](const B& b) { return b.qp(); })},
      {"ZERO-BASED", Bound([](const B& b) { return YesNo(b.zero_based()); }), true},
      {"ADDR", Bound([](const B& b) { return Hex(b.addr()); }), true},
      {"REMOTE-ADDR", Bound([](const B& b) { return Hex(b.remote_addr()); }), true},
  };
  return *columns;
}

const Columns<v1::QueuePair>& QpColumns() {
  using Qp = v1::QueuePair;
  using E = v1::QpEndpoint;
  static const auto* columns = new Columns<Qp>{
      {"NAME", [](const Qp& qp) { return qp.name(); }},
      {"PD", [](const Qp& qp) { return qp.pd(); }},
      {"STATE", [](const Qp& qp) { return QpStateString(qp.state()); }},
      {"PORT", [](const Qp& qp) { return StrCat(qp.port()); }},
      {"GID-INDEX", [](const Qp& qp) { return StrCat(qp.gid_index()); }},
      {"QPN", [](const Qp& qp) { return StrCat(qp.local().qpn()); }},
      {"PSN", [](const Qp& qp) { return StrCat(qp.local().psn()); }},
      {"REMOTE-QPN", Remote([](const E& e) { return StrCat(e.qpn()); })},
      {"WINDOWS", [](const Qp& qp) { return StrCat(qp.bound_windows()); }},
      {"GID", [](const Qp& qp) { return qp.local().gid(); }, true},
      {"LID", [](const Qp& qp) { return StrCat(qp.local().lid()); }, true},
      {"REMOTE-GID", Remote([](const E& e) { return e.gid(); }), true},
      {"REMOTE-PSN", Remote([](const E& e) { return StrCat(e.psn()); }), true},
      {"REMOTE-LID", Remote([](const E& e) { return StrCat(e.lid()); }), true},
  };
  return *columns;
}

const Columns<v1::EventChannel>& ChannelColumns() {
  using Ch = v1::EventChannel;
  static const auto* columns = new Columns<Ch>{
      {"NAME", [](const Ch& ch) { return ch.name(); }},
      {"ROLE", [](const Ch& ch) { return ChannelRoleString(ch.role()); }},
      {"CM-IDS", [](const Ch& ch) { return StrCat(ch.cm_ids_size()); }},
      {"EVENTS", [](const Ch& ch) { return StrCat(ch.events_dispatched()); }},
      {"PENDING", [](const Ch& ch) { return StrCat(ch.events_pending()); }},
      {"THREAD", [](const Ch& ch) { return ch.thread(); }},
      {"LABEL", [](const Ch& ch) { return ch.label(); }},
      {"TID", [](const Ch& ch) { return ch.thread_id() ? StrCat(ch.thread_id()) : ""; }, true},
      {"IDS", [](const Ch& ch) { return absl::StrJoin(ch.cm_ids(), ","); }, true},
  };
  return *columns;
}

const Columns<v1::CmId>& CmIdColumns() {
  using Id = v1::CmId;
  static const auto* columns = new Columns<Id>{
      {"NAME", [](const Id& id) { return id.name(); }},
      {"CHANNEL", [](const Id& id) { return id.channel(); }},
      {"PD", [](const Id& id) { return id.pd(); }},
      {"STATE", [](const Id& id) { return CmIdStateString(id.state()); }},
      {"DEVICE", [](const Id& id) { return id.device(); }},
      {"LOCAL", [](const Id& id) { return SocketAddressString(id.local()); }, true},
      {"REMOTE", [](const Id& id) { return SocketAddressString(id.remote()); }, true},
      {"QP", [](const Id& id) { return id.qp(); }, true},
      {"LISTENER", [](const Id& id) { return id.listener(); }, true},
      {"EVENTS", [](const Id& id) { return StrCat(id.counters().events()); }, true},
      {"MIGRATIONS", [](const Id& id) { return StrCat(id.counters().migrations()); }, true},
      {"LAST-EVENT", [](const Id& id) { return EventTypeString(id.last_event()); }, true},
      {"DATA-PLANE", [](const Id& id) { return YesNo(id.data_plane()); }, true},
      {"REASON", [](const Id& id) { return id.error(); }, true},
  };
  return *columns;
}

Columns<v1::Grant> GrantColumns(absl::Time now) {
  using G = v1::Grant;
  return {
      {"NAME", [](const G& g) { return g.name(); }},
      {"MR", [](const G& g) { return g.mr(); }},
      {"OFFSET", [](const G& g) { return FormatSize(g.offset()); }},
      {"LENGTH", [](const G& g) { return FormatSize(g.length()); }},
      {"SCOPE", [](const G& g) { return GrantScopeString(g.scope()); }},
      {"STATE", [](const G& g) { return GrantStateString(g.state()); }},
      {"PRINCIPAL", [](const G& g) { return g.principal(); }},
      {"EXPIRES",
       [now](const G& g) { return g.state() == v1::GRANT_ENDED ? "" : ExpiresIn(g.expire_time_unix_nanos(), now); }},
      {"PD", [](const G& g) { return g.pd(); }, true},
      {"ACCESS", [](const G& g) { return AccessString(g.access()); }, true},
      {"RENEWALS", [](const G& g) { return StrCat(g.renewals()); }, true},
      {"EXPIRY", [](const G& g) { return FormatExpiry(g.expire_time_unix_nanos()); }, true},
      {"CM-ID", [](const G& g) { return g.cm_id(); }, true},
      {"QP", [](const G& g) { return g.qp(); }, true},
      {"WINDOW", [](const G& g) { return g.window(); }, true},
      {"TOKEN", [](const G& g) { return g.token(); }, true},
      {"REASON", EndReason, true},
  };
}

const Columns<v1::Tenant>& TenantColumns() {
  using T = v1::Tenant;
  static const auto* columns = new Columns<T>{
      {"NAME", [](const T& t) { return t.name(); }},
      {"PRINCIPALS", Principals},
      {"PDS", [](const T& t) { return StrCat(t.pds_size()); }},
      {"MRS", Quota("mrs")},
      {"PINNED", Quota("pinned_bytes")},
      {"GRANTS", Quota("grants")},
      {"TOKENS", Quota("tokens")},
      {"CONNS", Quota("connections")},
      {"MWS", Quota("mws"), true},
      {"QPS", Quota("qps"), true},
      {"CM-IDS", Quota("cm_ids"), true},
      {"RPC/S", Quota("rpc_per_second"), true},
      {"FILE-ROOTS",
       [](const T& t) { return t.file_roots().empty() ? "<allowed_file_roots>" : absl::StrJoin(t.file_roots(), ","); },
       true},
      {"DEVICES", [](const T& t) { return t.devices().empty() ? "<all>" : absl::StrJoin(t.devices(), ","); }, true},
  };
  return *columns;
}

// ---- streams

std::string StreamColumns(const std::vector<std::string>& cells, const std::vector<size_t>& widths) {
  std::string line;
  for (size_t i = 0; i < cells.size(); i++) {
    const bool last = i + 1 == cells.size();
    const std::string& cell = cells[i].empty() && !last ? std::string("<none>") : cells[i];
    line += cell;
    if (!last) line.append(cell.size() < widths[i] ? widths[i] - cell.size() + 3 : 3, ' ');
  }
  absl::StripTrailingAsciiWhitespace(&line);
  return line;
}

const StreamSpec<v1::CmEvent>& EventStream() {
  using E = v1::CmEvent;
  static const auto* spec = new StreamSpec<E>{
      {
          {"SEQ", 6, [](const E& e, bool) { return StrCat(e.sequence()); }},
          {"TIME", 27, [](const E& e, bool) { return FormatUnixNanos(e.time_unix_nanos()); }},
          {"CHANNEL", 11, [](const E& e, bool) { return e.channel(); }},
          {"CM-ID", 9, [](const E& e, bool) { return e.cm_id(); }},
          {"TYPE", 16, [](const E& e, bool) { return EventTypeString(e.type()); }},
          {"STATUS", 6, [](const E& e, bool) { return StrCat(e.status()); }},
          {"DETAILS", 0,
           [](const E& e, bool wide) {
             std::vector<std::string> details;
             if (!e.listener().empty()) details.push_back(StrCat("listener ", e.listener()));
             if (!e.private_data().empty()) {
               details.push_back(StrCat("data ", HexBytes(e.private_data(), wide ? 0 : 16), " (",
                                        e.private_data().size(), " bytes)"));
             }
             return absl::StrJoin(details, ", ");
           }},
      },
      [](const E& e) { return e.cm_id(); },
  };
  return *spec;
}

const StreamSpec<v1::GrantEvent>& GrantEventStream() {
  using E = v1::GrantEvent;
  static const auto* spec = new StreamSpec<E>{
      {
          {"SEQ", 6, [](const E& e, bool) { return StrCat(e.sequence()); }},
          {"TIME", 27, [](const E& e, bool) { return FormatUnixNanos(e.time_unix_nanos()); }},
          {"TYPE", 9, [](const E& e, bool) { return GrantEventTypeString(e.type()); }},
          {"GRANT", 10, [](const E& e, bool) { return e.grant().name(); }},
          {"MR", 8, [](const E& e, bool) { return e.grant().mr(); }},
          {"PRINCIPAL", 12, [](const E& e, bool) { return e.grant().principal(); }},
          {"DETAILS", 0,
           [](const E& e, bool) {
             const v1::Grant& g = e.grant();
             std::vector<std::string> d;
             switch (e.type()) {
               case v1::GRANT_ISSUED_EVENT:
                 d.push_back(StrCat("offset ", FormatSize(g.offset()), ", length ", FormatSize(g.length())));
                 d.push_back(AccessString(g.access()));
                 if (g.scope() != v1::GRANT_SCOPE_UNSPECIFIED) d.push_back(StrCat("scope ", GrantScopeString(g.scope())));
                 if (g.expire_time_unix_nanos() != 0) {
                   d.push_back(StrCat("expires ", FormatExpiry(g.expire_time_unix_nanos())));
                 }
                 break;
               case v1::GRANT_ACTIVATED:
                 if (!g.cm_id().empty()) d.push_back(StrCat("cmid ", g.cm_id()));
                 if (!g.qp().empty()) d.push_back(StrCat("qp ", g.qp()));
                 if (!g.window().empty()) d.push_back(StrCat("window ", g.window()));
                 break;
               case v1::GRANT_RENEWED:
                 d.push_back(StrCat("expires ", FormatExpiry(g.expire_time_unix_nanos())));
                 d.push_back(StrCat("renewals ", g.renewals()));
                 break;
               case v1::GRANT_REVOKED:
               case v1::GRANT_EXPIRED:
                 if (g.end_reason() != v1::GRANT_END_UNSPECIFIED) d.push_back(StrCat("reason ", EndReason(g)));
                 break;
               default: break;
             }
             return absl::StrJoin(d, ", ");
           }},
      },
      [](const E& e) { return e.grant().name(); },
  };
  return *spec;
}

const StreamSpec<v1::AuditRecord>& AuditStream() {
  using R = v1::AuditRecord;
  static const auto* spec = new StreamSpec<R>{
      {
          {"SEQ", 6, [](const R& r, bool) { return StrCat(r.sequence()); }},
          {"TIME", 27, [](const R& r, bool) { return FormatUnixNanos(r.time_unix_nanos()); }},
          {"PRINCIPAL", 20, [](const R& r, bool) { return r.principal(); }},
          {"METHOD", 17, [](const R& r, bool) { return r.method(); }},
          {"RESOURCE", 10, [](const R& r, bool) { return r.resource(); }},
          {"RESULT", 19,
           [](const R& r, bool) {
             std::string result = r.code().empty() ? std::string("OK") : r.code();
             if (r.errno_value() != 0) {
               absl::StrAppend(&result, " (", r.errno_name().empty() ? StrCat(r.errno_value()) : r.errno_name(), ")");
             }
             return result;
           }},
          {"TENANT", 8, [](const R& r, bool) { return r.tenant(); }, true},
          {"PEER", 22, [](const R& r, bool) { return r.peer(); }, true},
          {"DETAIL", 0,
           [](const R& r, bool) {
             std::string detail = r.detail();  // one record, one line: a multi-line message is folded
             for (char& c : detail) {
               if (c == '\n' || c == '\r') c = ' ';
             }
             return detail;
           }},
      },
      [](const R& r) { return r.resource().empty() ? std::string("<none>") : r.resource(); },
  };
  return *spec;
}

}  // namespace rdmad::cli
