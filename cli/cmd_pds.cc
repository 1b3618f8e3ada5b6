// rdmactl's protection domain commands: get pds, create pd, delete pd [--cascade] [--revoke-grants].
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/command.h"

namespace rdmad::cli {
namespace {

struct CreatePdOptions {
  v1::CreatePdRequest request;

  void Flags(CLI::App* sub) {
    sub->add_option("--device", *request.mutable_device(), "device: rxe0 or devices/rxe0")
        ->transform(NameFlag(Kind::kDevice))
        ->required();
    sub->add_option("--label", *request.mutable_label(), "free text, at most 128 bytes");
  }
  int Run(Context& ctx) const {
    return Done(ctx, ctx.client().CreatePd(request),
                [](const v1::ProtectionDomain& pd) { return absl::StrCat(pd.name(), " created (", pd.device(), ")"); });
  }
};

struct DeletePdOptions {
  std::string name;
  bool cascade = false;
  bool revoke_grants = false;

  void Flags(CLI::App* sub) {
    AddName(sub, &name, Kind::kPd);
    sub->add_flag("--cascade", cascade, "release its windows, regions and queue pairs first");
    AddRevokeGrants(sub, &revoke_grants, "the live grants on its regions");
  }
  int Run(Context& ctx) const {
    auto res = ctx.client().DeletePd(name, cascade, revoke_grants);
    if (!res.ok()) return ctx.Fail(res.status());
    std::vector<std::string> deleted(res->deleted().begin(), res->deleted().end());
    if (deleted.empty()) deleted.push_back(name);
    const std::string done = absl::StrCat(name, " deleted");
    return PrintResult(ctx, *res, deleted,
                       cascade ? absl::StrCat(done, " (cascade: ", absl::StrJoin(deleted, ", "), ")") : done);
  }
};

}  // namespace

void RegisterPdCommands(Registry& r) {
  r.Add(r.Noun("get", Kind::kPd, "protection domains", true),
        GetOptions<json::PdList, v1::ProtectionDomain>{Kind::kPd, PdColumns, &client::Client::ListPds,
                                                       &v1::ListPdsResponse::pds, &client::Client::GetPd}
            .WithLabel(&v1::ProtectionDomain::label)
            .WithKernelIds("PDN"));
  r.Add<CreatePdOptions>(r.Noun("create", Kind::kPd, "Create a protection domain on a device"));
  r.Add<DeletePdOptions>(r.Noun("delete", Kind::kPd,
                                "Delete a protection domain (refused while it holds resources unless --cascade, or "
                                "while its regions have live grants unless --revoke-grants)"));
}

}  // namespace rdmad::cli
