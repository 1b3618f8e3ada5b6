// rdmactl's memory window commands: get mws [--pd], create mw, bind mw, invalidate mw, delete mw.
#include "absl/strings/str_cat.h"
#include "cli/command.h"

namespace rdmad::cli {
namespace {

struct CreateMwOptions {
  v1::AllocMwRequest request;
  int type = 0;

  void Flags(CLI::App* sub) {
    sub->add_option("--pd", *request.mutable_pd(), "protection domain (pds/N)")->transform(NameFlag(Kind::kPd))->required();
    sub->add_option("--type", type, "window type: 1 (any QP of the PD) or 2 (one QP, set at bind)")
        ->check(CLI::IsMember({1, 2}))
        ->required();
  }
  absl::Status Validate() {
    request.set_type(type == 1 ? v1::TYPE_1 : v1::TYPE_2);
    return absl::OkStatus();
  }
  int Run(Context& ctx) const {
    return Done(ctx, ctx.client().AllocMw(request), [](const v1::MemoryWindow& mw) {
      return absl::StrCat(mw.name(), " created (type ", MwTypeString(mw.type()), ", in ", mw.pd(), ")");
    });
  }
};

struct BindMwOptions {
  v1::BindMwRequest request;
  std::string access;
  DryRun dry_run = DryRun::kNone;

  void Flags(CLI::App* sub) {
    AddName(sub, request.mutable_name(), Kind::kMw);
    AddDryRun(sub, &dry_run);
    sub->add_option("--mr", *request.mutable_mr(), "memory region (mrs/N); needs mw-bind access")
        ->transform(NameFlag(Kind::kMr))
        ->required();
    sub->add_option_function<uint64_t>("--offset", [this](uint64_t n) { request.set_offset(n); },
                                       "bytes from the start of the region (default 0)")
        ->transform(SizeFlag());
    sub->add_option_function<uint64_t>("--length", [this](uint64_t n) { request.set_length(n); }, "bytes: 4096, 64KiB, ...")
        ->transform(SizeFlag())
        ->required();
    sub->add_option("--access", access, "remote-read, remote-write, remote-atomic (comma-separated)")
        ->transform(AccessFlag())
        ->required();
    sub->add_flag_function("--zero-based", [this](int64_t n) { request.set_zero_based(n > 0); },
                           "remote addresses start at 0 (type 2 only)");
    sub->add_option("--qp", *request.mutable_qp(), "queue pair to bind on (qps/N): required for type 2")
        ->transform(NameFlag(Kind::kQp));
  }
  absl::Status Validate() {
    if (request.length() == 0) return UsageError("--length: must be greater than 0");
    request.clear_access();
    for (v1::Access a : AccessList(access)) request.add_access(a);
    return absl::OkStatus();
  }
  int Run(Context& ctx) const {
    if (dry_run == DryRun::kClient) return PrintDryRunRequest(ctx, request, "BindMw");
    if (dry_run == DryRun::kServer) {
      auto checked = ctx.client().BindMw(request, Mutate(dry_run));
      if (!checked.ok()) return ctx.Fail(checked.status());
      return PrintResult(ctx, *checked, {request.name()},
                         absl::StrCat(request.name(), " would be bound to ", request.mr(), " (server dry run: rdmad "
                                      "checked it; nothing was bound)"));
    }
    return Done(ctx, ctx.client().BindMw(request), [](const v1::MemoryWindow& mw) {
      return absl::StrCat(mw.name(), " bound (rkey ", Hex(mw.rkey()), ", remote_addr ", Hex(mw.binding().remote_addr()),
                          ", ", mw.binding().length(), " bytes)");
    });
  }
};

}  // namespace

void RegisterMwCommands(Registry& r) {
  r.Add(r.Noun("get", Kind::kMw, "memory windows", true),
        GetOptions<json::MwList, v1::MemoryWindow>{Kind::kMw, MwColumns, &client::Client::ListMws,
                                                   &v1::ListMwsResponse::mws, &client::Client::GetMw}
            .FilterBy("--pd", Kind::kPd, "in"));
  r.Add<CreateMwOptions>(r.Noun("create", Kind::kMw, "Allocate a memory window"));
  r.Add<BindMwOptions>(r.Noun("bind", Kind::kMw, "Bind a memory window; prints the new rkey"));
  r.Named("invalidate", Kind::kMw, "Invalidate a memory window", Says(&client::Client::InvalidateMw, " invalidated"));
  r.Named("delete", Kind::kMw, "Deallocate a memory window", Deletes<v1::DeallocMwResponse>(&client::Client::DeallocMw));
}

}  // namespace rdmad::cli
