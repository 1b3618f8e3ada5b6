// rdmactl audit [-f|--follow] [--from-oldest] [--after SEQ] and watch audit (= audit --follow): rdmad's audit
// records (WatchAudit, admins only), a line per record. Without --follow: every record rdmad retains, until
// none came for a second. With --follow: new records (after --after, or every retained one first with
// --from-oldest) until rdmad ends the stream. -o json prints each record's line exactly as rdmad wrote it.
#include "absl/strings/str_cat.h"
#include "cli/command.h"

namespace rdmad::cli {
namespace {

constexpr std::chrono::milliseconds kIdle{1000};

struct AuditOptions {
  bool follow = false;  // `watch audit`: always
  bool from_oldest = false;
  v1::WatchAuditRequest request;
  CLI::Option* after = nullptr;

  void Flags(CLI::App* sub) {
    if (!follow) {
      sub->add_flag("-f,--follow", follow, "keep streaming new records until rdmad ends the stream (Ctrl-C to stop)");
    }
    sub->add_flag("--from-oldest", from_oldest, "every record rdmad retains first (the default without --follow)");
    after = sub->add_option_function<uint64_t>("--after", [this](uint64_t n) { request.set_after_sequence(n); },
                                               "the retained records after this sequence first, then the new ones")
                ->transform(UintFlag(UINT64_MAX));
  }
  absl::Status Validate() {
    if (after->count() > 0 && from_oldest) return UsageError("--after and --from-oldest: give one of them");
    request.set_from_oldest(after->count() == 0 && (from_oldest || !follow));  // every retained record
    return absl::OkStatus();
  }
  int Run(Context& ctx) const {
    client::WatchOptions options;
    if (!follow) options.idle_timeout = kIdle;
    uint64_t last = request.after_sequence();
    // The line of rdmad's audit log itself (the same bytes as in its file).
    StreamPrinter<v1::AuditRecord> print(ctx, AuditStream(), [](const v1::AuditRecord& r) {
      return r.json().empty() ? ToJsonLine(r) : r.json() + "\n";
    });
    absl::Status s = ctx.client().WatchAudit(
        request, [&](const v1::AuditRecord& r) { return last = r.sequence(), print(r); }, options);
    return print.End(s,
                     {{absl::StatusCode::kResourceExhausted,
                       absl::StrCat("rdmactl fell behind the audit stream; resume with 'rdmactl watch audit --after ",
                                    last, "' (the last record it printed); rdmad's audit file has every record")},
                      {absl::StatusCode::kOutOfRange,
                       absl::StrCat("rdmad no longer holds the records after ", request.after_sequence(),
                                    " in memory; its audit file has them (config \"audit\")")},
                      {absl::StatusCode::kPermissionDenied, "the audit trail is for rdmad's admins (config \"admins\")"}},
                     follow, "The audit stream ended: rdmad closed it (rdmad is shutting down).", "audit records");
  }
};

}  // namespace

void RegisterAuditCommands(Registry& r) {
  r.Add<AuditOptions>(r.Verb("audit"));
  AuditOptions watch;
  watch.follow = true;
  r.Add(r.Verb("watch")->add_subcommand("audit", "Print rdmad's audit records (admins only) as they are made, until "
                                                 "rdmad ends the stream (Ctrl-C to stop)"),
        watch);
}

}  // namespace rdmad::cli
