// The column spec of each resource kind and the line spec of each stream (cli/output.h): what `get` shows
// with -o table and -o wide, and what events, watch grants and audit print per event.
#include <functional>
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
  for (const v1::Port& p : d.ports()) parts.push_back(std::invoke(field, p));
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

// Cells of the common kinds: a field as a number, or through a formatter (Hex, FormatSize, YesNo, ...). A text
// field is its accessor itself (&T::name).
template <typename T, typename R>
std::function<std::string(const T&)> Num(R (T::*get)() const) {
  return [get](const T& t) { return StrCat((t.*get)()); };
}
template <typename T, typename R, typename F>
std::function<std::string(const T&)> As(R (T::*get)() const, F format) {
  return [get, format](const T& t) { return std::string(format((t.*get)())); };
}

// A bound window's binding field, or "" (<none>) for an unbound one.
template <typename F>
std::function<std::string(const v1::MemoryWindow&)> Bound(F f) {
  return [f](const v1::MemoryWindow& mw) { return mw.bound() ? std::string(std::invoke(f, mw.binding())) : std::string(); };
}

// A connected QP's remote field, or "".
template <typename F>
std::function<std::string(const v1::QueuePair&)> Remote(F f) {
  return [f](const v1::QueuePair& qp) { return qp.has_remote() ? std::string(std::invoke(f, qp.remote())) : std::string(); };
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
      {"NAME", &v1::Device::name},
      {"TRANSPORT", &v1::Device::transport},
      {"PORTS", Num(&v1::Device::ports_size)},
      {"STATE", [](const v1::Device& d) { return JoinPorts(d, &v1::Port::state); }},
      {"MTU", [](const v1::Device& d) { return JoinPorts(d, Num(&v1::Port::active_mtu)); }},
      {"LINK", [](const v1::Device& d) { return JoinPorts(d, &v1::Port::link_layer); }},
      {"GIDS",
       [](const v1::Device& d) {
         int gids = 0;
         for (const v1::Port& p : d.ports()) gids += p.gids_size();
         return StrCat(gids);
       }},
      {"MW-TYPES", [](const v1::Device& d) { return MwTypes(d.caps()); }},
      {"NATIVE-REREG", [](const v1::Device& d) { return YesNo(d.caps().native_rereg()); }},
      {"NODE-TYPE", &v1::Device::node_type, true},
      {"GUID", &v1::Device::node_guid, true},
      {"FIRMWARE", &v1::Device::firmware, true},
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
  // -o wide adds the kernel's pdn (GetOptions::WithKernelIds).
  using Pd = v1::ProtectionDomain;
  static const auto* columns = new Columns<Pd>{
      {"NAME", &Pd::name},
      {"DEVICE", &Pd::device},
      {"MRS", Num(&Pd::mr_count)},
      {"MWS", Num(&Pd::mw_count)},
      {"QPS", Num(&Pd::qp_count)},
      {"LABEL", &Pd::label},
  };
  return *columns;
}

const Columns<v1::MemoryRegion>& MrColumns() {
  using Mr = v1::MemoryRegion;
  static const auto* columns = new Columns<Mr>{
      {"NAME", &Mr::name},
      {"PD", &Mr::pd},
      {"SOURCE", As(&Mr::source, SourceString)},
      {"LENGTH", As(&Mr::length, FormatSize)},
      {"LKEY", As(&Mr::lkey, Hex)},
      {"RKEY", As(&Mr::rkey, Hex)},
      {"ACCESS", [](const Mr& mr) { return AccessString(mr.access()); }},
      {"STATE", As(&Mr::state, MrStateString)},
      {"WINDOWS", Num(&Mr::bound_windows)},
      {"ADDR", As(&Mr::addr, Hex), true},
      {"GENERATION", Num(&Mr::generation), true},
      {"REASON", &Mr::unusable_reason, true},
  };
  return *columns;
}

const Columns<v1::MemoryWindow>& MwColumns() {
  using Mw = v1::MemoryWindow;
  using B = v1::MwBinding;
  static const auto* columns = new Columns<Mw>{
      {"NAME", &Mw::name},
      {"PD", &Mw::pd},
      {"TYPE", As(&Mw::type, MwTypeString)},
      {"BOUND", As(&Mw::bound, YesNo)},
      {"RKEY", As(&Mw::rkey, Hex)},
      {"MR", Bound(&B::mr)},
      {"OFFSET", Bound(As(&B::offset, FormatSize))},
      {"LENGTH", Bound(As(&B::length, FormatSize))},
      {"ACCESS", Bound([](const B& b) { return AccessString(b.access()); })},
      {"QP", Bound(&B::qp)},
      {"ZERO-BASED", Bound(As(&B::zero_based, YesNo)), true},
      {"ADDR", Bound(As(&B::addr, Hex)), true},
      {"REMOTE-ADDR", Bound(As(&B::remote_addr, Hex)), true},
  };
  return *columns;
}

const Columns<v1::QueuePair>& QpColumns() {
  using Qp = v1::QueuePair;
  using E = v1::QpEndpoint;
  static const auto* columns = new Columns<Qp>{
      {"NAME", &Qp::name},
      {"PD", &Qp::pd},
      {"STATE", As(&Qp::state, QpStateString)},
      {"PORT", Num(&Qp::port)},
      {"GID-INDEX", Num(&Qp::gid_index)},
      {"QPN", [](const Qp& qp) { return StrCat(qp.local().qpn()); }},
      {"PSN", [](const Qp& qp) { return StrCat(qp.local().psn()); }},
      {"REMOTE-QPN", Remote(Num(&E::qpn))},
      {"WINDOWS", Num(&Qp::bound_windows)},
      {"GID", [](const Qp& qp) { return qp.local().gid(); }, true},
      {"LID", [](const Qp& qp) { return StrCat(qp.local().lid()); }, true},
      {"REMOTE-GID", Remote(&E::gid), true},
      {"REMOTE-PSN", Remote(Num(&E::psn)), true},
      {"REMOTE-LID", Remote(Num(&E::lid)), true},
  };
  return *columns;
}

const Columns<v1::EventChannel>& ChannelColumns() {
  using Ch = v1::EventChannel;
  static const auto* columns = new Columns<Ch>{
      {"NAME", &Ch::name},
      {"ROLE", As(&Ch::role, ChannelRoleString)},
      {"CM-IDS", Num(&Ch::cm_ids_size)},
      {"EVENTS", Num(&Ch::events_dispatched)},
      {"PENDING", Num(&Ch::events_pending)},
      {"THREAD", &Ch::thread},
      {"LABEL", &Ch::label},
      {"TID", [](const Ch& ch) { return ch.thread_id() ? StrCat(ch.thread_id()) : ""; }, true},
      {"IDS", [](const Ch& ch) { return absl::StrJoin(ch.cm_ids(), ","); }, true},
  };
  return *columns;
}

const Columns<v1::CmId>& CmIdColumns() {
  using Id = v1::CmId;
  static const auto* columns = new Columns<Id>{
      {"NAME", &Id::name},
      {"CHANNEL", &Id::channel},
      {"PD", &Id::pd},
      {"STATE", As(&Id::state, CmIdStateString)},
      {"DEVICE", &Id::device},
      {"LOCAL", As(&Id::local, SocketAddressString), true},
      {"REMOTE", As(&Id::remote, SocketAddressString), true},
      {"QP", &Id::qp, true},
      {"LISTENER", &Id::listener, true},
      {"EVENTS", [](const Id& id) { return StrCat(id.counters().events()); }, true},
      {"MIGRATIONS", [](const Id& id) { return StrCat(id.counters().migrations()); }, true},
      {"LAST-EVENT", As(&Id::last_event, EventTypeString), true},
      {"DATA-PLANE", As(&Id::data_plane, YesNo), true},
      {"REASON", &Id::error, true},
  };
  return *columns;
}

Columns<v1::Grant> GrantColumns(absl::Time now) {
  using G = v1::Grant;
  return {
      {"NAME", &G::name},
      {"MR", &G::mr},
      {"OFFSET", As(&G::offset, FormatSize)},
      {"LENGTH", As(&G::length, FormatSize)},
      {"SCOPE", As(&G::scope, GrantScopeString)},
      {"STATE", As(&G::state, GrantStateString)},
      {"PRINCIPAL", &G::principal},
      {"EXPIRES",
       [now](const G& g) { return g.state() == v1::GRANT_ENDED ? "" : ExpiresIn(g.expire_time_unix_nanos(), now); }},
      {"PD", &G::pd, true},
      {"ACCESS", [](const G& g) { return AccessString(g.access()); }, true},
      {"RENEWALS", Num(&G::renewals), true},
      {"EXPIRY", As(&G::expire_time_unix_nanos, FormatExpiry), true},
      {"CM-ID", &G::cm_id, true},
      {"QP", &G::qp, true},
      {"WINDOW", &G::window, true},
      {"TOKEN", &G::token, true},
      {"REASON", EndReason, true},
  };
}

const Columns<v1::Tenant>& TenantColumns() {
  using T = v1::Tenant;
  static const auto* columns = new Columns<T>{
      {"NAME", &T::name},
      {"PRINCIPALS", Principals},
      {"PDS", Num(&T::pds_size)},
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
      &E::cm_id,
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
