// rdmactl's output for tenants (cli/output.h): the `get tenants` table, `describe tenant` and `whoami`. Pure.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "cli/output.h"

namespace rdmad::cli {
namespace {

constexpr char kNoneCell[] = "<none>";
constexpr char kRateQuota[] = "rpc_per_second";
constexpr char kBytesQuota[] = "pinned_bytes";
constexpr size_t kLabelWidth = 16;  // "Authenticated:" and two spaces

// "Label:          value", and further values of a list on their own lines under the first.
void Field(std::string* out, absl::string_view label, const std::vector<std::string>& values) {
  std::string head = absl::StrCat(label, ":");
  head.append(head.size() < kLabelWidth ? kLabelWidth - head.size() : 1, ' ');
  if (values.empty()) {
    absl::StrAppend(out, head, kNoneCell, "\n");
    return;
  }
  for (size_t i = 0; i < values.size(); i++) {
    absl::StrAppend(out, i == 0 ? head : std::string(head.size(), ' '), values[i], "\n");
  }
}

std::vector<std::string> Values(const google::protobuf::RepeatedPtrField<std::string>& list) {
  return std::vector<std::string>(list.begin(), list.end());
}

std::string Principals(const v1::Tenant& t) {
  if (t.principals().empty()) return "";
  if (t.principals_size() == 1) return t.principals(0);
  return absl::StrCat(t.principals(0), " (+", t.principals_size() - 1, ")");
}

std::string Cell(const v1::Tenant& t, absl::string_view quota) {
  const v1::QuotaUsage* q = FindQuota(t, quota);
  return q == nullptr ? "" : QuotaCell(*q);
}

}  // namespace

std::string RoleString(int role) {
  const auto* v = v1::Role_descriptor()->FindValueByNumber(role);
  if (v == nullptr) return absl::StrCat(role);
  absl::string_view name = v->name();
  absl::ConsumePrefix(&name, "ROLE_");
  return std::string(name);
}

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

Table TenantsTable(const google::protobuf::RepeatedPtrField<v1::Tenant>& tenants, bool wide) {
  std::vector<std::string> header = {"NAME", "PRINCIPALS", "PDS", "MRS", "PINNED", "GRANTS", "TOKENS", "CONNS"};
  if (wide) {
    for (const char* h : {"MWS", "QPS", "CM-IDS", "RPC/S", "FILE-ROOTS", "DEVICES"}) header.push_back(h);
  }
  Table t(std::move(header));
  for (const v1::Tenant& tenant : tenants) {
    std::vector<std::string> row = {tenant.name(),
                                    Principals(tenant),
                                    absl::StrCat(tenant.pds_size()),
                                    Cell(tenant, "mrs"),
                                    Cell(tenant, kBytesQuota),
                                    Cell(tenant, "grants"),
                                    Cell(tenant, "tokens"),
                                    Cell(tenant, "connections")};
    if (wide) {
      for (std::string cell :
           {Cell(tenant, "mws"), Cell(tenant, "qps"), Cell(tenant, "cm_ids"), Cell(tenant, kRateQuota),
            tenant.file_roots().empty() ? std::string("<allowed_file_roots>") : absl::StrJoin(tenant.file_roots(), ","),
            tenant.devices().empty() ? std::string("<all>") : absl::StrJoin(tenant.devices(), ",")}) {
        row.push_back(std::move(cell));
      }
    }
    t.AddRow(std::move(row));
  }
  return t;
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

std::string CallerText(const v1::Caller& c) {
  std::string out;
  Field(&out, "Principal", {c.principal().empty() ? std::string(kNoneCell) : c.principal()});
  Field(&out, "Tenant", {c.tenant().empty() ? std::string("<none> (outside any tenant)") : c.tenant()});
  Field(&out, "Role", {RoleString(c.role())});
  Field(&out, "Authenticated",
        {c.authenticated() ? std::string("yes") : std::string("no (rdmad did not verify who is calling)")});
  Field(&out, "Transport", {c.transport().empty() ? std::string(kNoneCell) : c.transport()});
  if (c.uid() >= 0) Field(&out, "UID", {absl::StrCat(c.uid())});
  if (c.gid() >= 0) Field(&out, "GID", {absl::StrCat(c.gid())});
  return out;
}

}  // namespace rdmad::cli
