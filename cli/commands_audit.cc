// rdmactl audit / watch audit: rdmad's audit trail (WatchAudit), a line per record. See commands.h.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "cli/command_util.h"
#include "cli/commands.h"
#include "cli/output.h"

namespace rdmad::cli {

using internal::FlagUint;
using internal::UsageError;

namespace {

// Pads each cell but the last to its column's width (cells longer than it push the line on).
std::string Columns(const std::vector<std::string>& cells, const std::vector<size_t>& widths) {
  std::string line;
  for (size_t i = 0; i < cells.size(); i++) {
    line += cells[i];
    if (i + 1 < cells.size()) {
      const size_t w = i < widths.size() ? widths[i] : 0;
      line.append(cells[i].size() < w ? w - cells[i].size() + 3 : 3, ' ');
    }
  }
  absl::StripTrailingAsciiWhitespace(&line);
  return line;
}

std::vector<size_t> Widths(bool wide) {
  // SEQ TIME PRINCIPAL METHOD RESOURCE RESULT [TENANT PEER] DETAIL
  if (wide) return {6, 27, 20, 17, 10, 19, 8, 22};
  return {6, 27, 20, 17, 10, 19};
}

constexpr char kNoValue[] = "<none>";
std::string Cell(const std::string& s) { return s.empty() ? std::string(kNoValue) : s; }

}  // namespace

absl::StatusOr<AuditPlan> Validate(const AuditOptions& o) {
  AuditPlan plan;
  plan.follow = o.follow;
  if (!o.after.empty() && o.from_oldest) return UsageError("--after and --from-oldest: give one of them");
  if (!o.after.empty()) {
    RDMACTL_ASSIGN_OR_RETURN(uint64_t after, FlagUint("--after", o.after, UINT64_MAX));
    plan.request.set_after_sequence(after);
  } else if (o.from_oldest || !o.follow) {
    plan.request.set_from_oldest(true);  // every retained record
  }
  return plan;
}

std::string AuditHeader(bool wide) {
  std::vector<std::string> cells = {"SEQ", "TIME", "PRINCIPAL", "METHOD", "RESOURCE", "RESULT"};
  if (wide) {
    cells.push_back("TENANT");
    cells.push_back("PEER");
  }
  cells.push_back("DETAIL");
  return Columns(cells, Widths(wide));
}

std::string AuditLine(const v1::AuditRecord& r, bool wide) {
  std::string result = r.code().empty() ? std::string("OK") : r.code();
  if (r.errno_value() != 0) {
    absl::StrAppend(&result, " (", r.errno_name().empty() ? absl::StrCat(r.errno_value()) : r.errno_name(), ")");
  }
  std::vector<std::string> cells = {absl::StrCat(r.sequence()), FormatUnixNanos(r.time_unix_nanos()),
                                    Cell(r.principal()),         Cell(r.method()),
                                    Cell(r.resource()),          result};
  if (wide) {
    cells.push_back(Cell(r.tenant()));
    cells.push_back(Cell(r.peer()));
  }
  // One record, one line: a multi-line message is folded.
  std::string detail = r.detail();
  for (char& c : detail) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  cells.push_back(detail);
  return Columns(cells, Widths(wide));
}

int Run(const AuditPlan& plan, Context& ctx) {
  client::WatchOptions options;
  if (!plan.follow) options.idle_timeout = kEventsIdle;
  uint64_t count = 0, last = 0;
  const bool wide = ctx.format() == Format::kWide;
  absl::Status s = ctx.client().WatchAudit(
      plan.request,
      [&](const v1::AuditRecord& r) {
        switch (ctx.format()) {
          case Format::kJson:
            // The line of rdmad's audit log itself (the same bytes as in its file).
            if (!r.json().empty()) {
              ctx.out() << r.json() << "\n";
            } else {
              ctx.out() << ToJsonLine(r);
            }
            break;
          case Format::kName: ctx.out() << Cell(r.resource()) << "\n"; break;
          case Format::kTable:
          case Format::kWide:
            if (count == 0) ctx.out() << AuditHeader(wide) << "\n";
            ctx.out() << AuditLine(r, wide) << "\n";
            break;
        }
        ctx.out().flush();  // a stream: each record as it comes
        count++;
        last = r.sequence();
        return true;
      },
      options);
  if (!s.ok()) {
    const int rc = ctx.Fail(s);
    const uint64_t resume = count > 0 ? last : plan.request.after_sequence();
    if (s.code() == absl::StatusCode::kResourceExhausted) {
      ctx.err() << "hint: rdmactl fell behind the audit stream; resume with 'rdmactl watch audit --after " << resume
                << "' (the last record it printed); rdmad's audit file has every record\n";
    } else if (s.code() == absl::StatusCode::kOutOfRange) {
      ctx.err() << "hint: rdmad no longer holds the records after " << plan.request.after_sequence()
                << " in memory; its audit file has them (config \"audit\")\n";
    } else if (s.code() == absl::StatusCode::kPermissionDenied) {
      ctx.err() << "hint: the audit trail is for rdmad's admins (config \"admins\")\n";
    }
    return rc;
  }
  if (plan.follow) {
    ctx.err() << "The audit stream ended: rdmad closed it (rdmad is shutting down).\n";
  } else if (count == 0 && ctx.format() != Format::kJson) {
    ctx.err() << "No audit records found.\n";
  }
  return kExitOk;
}

}  // namespace rdmad::cli
