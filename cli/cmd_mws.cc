// rdmactl's memory window commands: get mws [--pd], create mw, bind mw, invalidate mw, delete mw.
#include "absl/strings/str_cat.h"
#include "cli/command.h"

namespace rdmad::cli {
namespace {

struct GetMwsOptions {
  std::string name, pd;

  void Flags(CLI::App* sub) {
    AddName(sub, &name, Kind::kMw, false);
    sub->add_option("--pd", pd, "only those in this protection domain (pds/N)")->transform(NameFlag(Kind::kPd));
  }
  absl::Status Validate() const {
    return !name.empty() && !pd.empty() ? UsageError("--pd filters a list: give either NAME or --pd") : absl::OkStatus();
  }
  int Run(Context& ctx) const {
    client::Client& c = ctx.client();
    return PrintGet<json::MwList>(ctx, MwColumns(), name.empty() ? Items(c.ListMws(pd), &v1::ListMwsResponse::mws) : One(c.GetMw(name)),
                                  !name.empty(), pd.empty() ? "" : absl::StrCat(" in ", pd));
  }
};

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

  void Flags(CLI::App* sub) {
    AddName(sub, request.mutable_name(), Kind::kMw);
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
    return Done(ctx, ctx.client().BindMw(request), [](const v1::MemoryWindow& mw) {
      return absl::StrCat(mw.name(), " bound (rkey ", Hex(mw.rkey()), ", remote_addr ", Hex(mw.binding().remote_addr()),
                          ", ", mw.binding().length(), " bytes)");
    });
  }
};

}  // namespace

void RegisterMwCommands(Registry& r) {
  r.Add<GetMwsOptions>(r.Noun("get", Kind::kMw, "memory windows", true));
  r.Add<CreateMwOptions>(r.Noun("create", Kind::kMw, "Allocate a memory window"));
  r.Add<BindMwOptions>(r.Noun("bind", Kind::kMw, "Bind a memory window; prints the new rkey"));
  r.Add(r.Noun("invalidate", Kind::kMw, "Invalidate a memory window"),
        NamedOptions{Kind::kMw, [](Context& ctx, const std::string& name) {
                       return Done(ctx, ctx.client().InvalidateMw(name),
                                   [](const v1::MemoryWindow& mw) { return mw.name() + " invalidated"; });
                     }});
  r.Add(r.Noun("delete", Kind::kMw, "Deallocate a memory window"),
        NamedOptions{Kind::kMw, [](Context& ctx, const std::string& name) {
                       return Deleted<v1::DeallocMwResponse>(ctx, ctx.client().DeallocMw(name), name);
                     }});
}

}  // namespace rdmad::cli
