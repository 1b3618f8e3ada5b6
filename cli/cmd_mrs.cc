// rdmactl's memory region commands: get mrs [--pd], register mr, rereg mr (ibv_rereg_mr), delete mr
// [--revoke-grants].
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/command.h"
#include "proto/wire/wall_clock.h"

namespace rdmad::cli {
namespace {

// A memory source: --size N [--huge-pages] (anonymous memory rdmad allocates) or --file PATH [--offset N]
// --length N (a range of a shared file).
struct SourceOptions {
  uint64_t size = 0, offset = 0, length = 0;
  bool huge_pages = false;
  std::string file;
  CLI::Option *size_flag = nullptr, *file_flag = nullptr, *offset_flag = nullptr, *length_flag = nullptr;

  void Flags(CLI::App* sub, const std::string& what) {
    size_flag = sub->add_option("--size", size, what + "anonymous memory rdmad allocates: 4096, 4KiB, 1MiB, 2GiB")
                    ->transform(SizeFlag());
    sub->add_flag("--huge-pages", huge_pages, "with --size: back the memory with huge pages (MAP_HUGETLB)");
    file_flag = sub->add_option("--file", file, what + "a file to map shared (under rdmad's allowed roots, e.g. /dev/shm)");
    offset_flag = sub->add_option("--offset", offset, "with --file: byte offset in the file (default 0)")->transform(SizeFlag());
    length_flag = sub->add_option("--length", length, "with --file: bytes to register")->transform(SizeFlag());
    size_flag->excludes(file_flag);
  }
  bool given() const { return size_flag->count() > 0 || file_flag->count() > 0; }
  absl::StatusOr<v1::MemorySource> Build() const {
    v1::MemorySource source;
    if (huge_pages && size_flag->count() == 0) {
      return UsageError("--huge-pages goes with --size (a shared file has its file system's page size)");
    }
    if ((offset_flag->count() > 0 || length_flag->count() > 0) && file_flag->count() == 0) {
      return UsageError("--offset and --length go with --file");
    }
    if (size_flag->count() > 0) {
      if (size == 0) return UsageError("--size: must be greater than 0");
      source.mutable_anonymous()->set_size(size);
      source.mutable_anonymous()->set_huge_pages(huge_pages);
    } else if (file_flag->count() > 0) {
      if (file.empty()) return UsageError("--file: a path is required");
      if (length_flag->count() == 0) return UsageError("--length is required with --file");
      if (length == 0) return UsageError("--length: must be greater than 0");
      source.mutable_file()->set_path(file);
      source.mutable_file()->set_offset(offset);
      source.mutable_file()->set_length(length);
    } else {
      return UsageError("a memory source is required: --size N [--huge-pages], or --file PATH --length N [--offset N]");
    }
    return source;
  }
};

struct RegisterMrOptions {
  std::string pd, access;
  SourceOptions source;
  DryRun dry_run = DryRun::kNone;
  v1::RegisterMrRequest request;

  void Flags(CLI::App* sub) {
    sub->add_option("--pd", pd, "protection domain (pds/N)")->transform(NameFlag(Kind::kPd))->required();
    AddDryRun(sub, &dry_run);
    source.Flags(sub, "");
    sub->add_option("--access", access,
                    "access flags, comma-separated: local-write, remote-write, remote-read, remote-atomic, mw-bind, "
                    "or none")
        ->transform(AccessFlag())
        ->required();
  }
  absl::Status Validate() {
    absl::StatusOr<v1::MemorySource> s = source.Build();
    if (!s.ok()) return s.status();
    request.set_pd(pd);
    *request.mutable_source() = *s;
    for (v1::Access a : AccessList(access)) request.add_access(a);
    return absl::OkStatus();
  }
  int Run(Context& ctx) const {
    if (dry_run == DryRun::kClient) return PrintDryRunRequest(ctx, request, "RegisterMr");
    if (dry_run == DryRun::kServer) {
      auto checked = ctx.client().RegisterMr(request, Mutate(dry_run));
      if (!checked.ok()) return ctx.Fail(checked.status());
      return PrintResult(ctx, *checked, {},
                         absl::StrCat("memory region of ", checked->length(), " bytes in ", request.pd(),
                                      " would be registered (server dry run: rdmad checked it; nothing was registered)"));
    }
    return Done(ctx, ctx.client().RegisterMr(request), [](const v1::MemoryRegion& mr) {
      return absl::StrCat(mr.name(), " registered (lkey ", Hex(mr.lkey()), ", rkey ", Hex(mr.rkey()), ", addr ",
                          Hex(mr.addr()), ", ", mr.length(), " bytes)");
    });
  }
};

// The ibv_rereg_mr flags follow from what is given: --access CHANGE_ACCESS, --pd CHANGE_PD, a new source
// CHANGE_TRANSLATION; at least one.
struct ReregMrOptions {
  std::string access, pd;
  SourceOptions source;
  bool revoke_grants = false;
  CLI::Option *access_flag = nullptr, *pd_flag = nullptr;
  v1::ReregisterMrRequest request;

  void Flags(CLI::App* sub) {
    AddName(sub, request.mutable_name(), Kind::kMr);
    access_flag = sub->add_option("--access", access, "new access flags (CHANGE_ACCESS), or none")->transform(AccessFlag());
    pd_flag = sub->add_option("--pd", pd, "new protection domain on the same device (CHANGE_PD)")
                  ->transform(NameFlag(Kind::kPd));
    source.Flags(sub, "new source: ");
    AddRevokeGrants(sub, &revoke_grants, "the region's live grants");
  }
  absl::Status Validate() {
    request.clear_flags();
    request.set_revoke_grants(revoke_grants);
    if (source.given() || source.huge_pages || source.offset_flag->count() > 0 || source.length_flag->count() > 0) {
      absl::StatusOr<v1::MemorySource> s = source.Build();
      if (!s.ok()) return s.status();
      request.add_flags(v1::CHANGE_TRANSLATION);
      *request.mutable_source() = *s;
    }
    if (pd_flag->count() > 0) {
      request.add_flags(v1::CHANGE_PD);
      request.set_pd(pd);
    }
    if (access_flag->count() > 0) {
      request.add_flags(v1::CHANGE_ACCESS);
      for (v1::Access a : AccessList(access)) request.add_access(a);
    }
    if (request.flags().empty()) {
      return UsageError("nothing to change: give --access, --pd, or a new source (--size or --file)");
    }
    return absl::OkStatus();
  }
  int Run(Context& ctx) const {
    auto res = ctx.client().ReregisterMr(request);
    if (!res.ok()) return ctx.Fail(res.status());
    const v1::MemoryRegion& mr = res->mr();
    std::string keys = absl::StrCat("keys unchanged: lkey ", Hex(mr.lkey()), ", rkey ", Hex(mr.rkey()));
    if (res->keys_changed()) {
      std::vector<std::string> changed;
      if (res->old_rkey() != mr.rkey()) changed.push_back(absl::StrCat("rkey ", Hex(res->old_rkey()), " -> ", Hex(mr.rkey())));
      if (res->old_lkey() != mr.lkey()) changed.push_back(absl::StrCat("lkey ", Hex(res->old_lkey()), " -> ", Hex(mr.lkey())));
      keys = absl::StrCat("keys changed: ", absl::StrJoin(changed, ", "), "; the old keys are dead");
    }
    if (!res->warning().empty()) ctx.err() << "warning: " << res->warning() << "\n";
    return PrintResult(ctx, *res, {mr.name()},
                       absl::StrCat(mr.name(), " reregistered (", ReregMethodString(res->method()), "; ", keys,
                                    "; generation ", mr.generation(), ")"));
  }
};

struct DeleteMrOptions {
  std::string name;
  bool revoke_grants = false;

  void Flags(CLI::App* sub) {
    AddName(sub, &name, Kind::kMr);
    AddRevokeGrants(sub, &revoke_grants, "its live grants");
  }
  int Run(Context& ctx) const {
    absl::Status s = ctx.client().DeregisterMr(name, revoke_grants);
    return s.ok() ? PrintResult(ctx, v1::DeregisterMrResponse(), {name}, absl::StrCat(name, " deleted")) : ctx.Fail(s);
  }
};

// `describe mr NAME`: GetMr, the windows bound to it (ListMws of its PD, narrowed to the region) and its live
// grants (ListGrants --mr).
int Describe(Context& ctx, const std::string& name) {
  auto mr = ctx.client().GetMr(name);
  if (!mr.ok()) return ctx.Fail(mr.status());
  auto mws = ctx.client().ListMws(mr->pd());
  if (!mws.ok()) return ctx.Fail(mws.status());
  auto grants = ctx.client().ListGrants(name);
  if (!grants.ok()) return ctx.Fail(grants.status());
  json::MrDescription d;
  *d.mutable_mr() = *mr;
  for (const v1::MemoryWindow& mw : mws->mws()) {
    if (mw.bound() && mw.binding().mr() == name) *d.add_windows() = mw;
  }
  *d.mutable_grants() = grants->grants();
  // The kernel's numbers: on the region's PD's device; a failure only leaves them out.
  absl::StatusOr<v1::ProtectionDomain> pd = ctx.client().GetPd(mr->pd());
  absl::StatusOr<v1::ListKernelIdsResponse> ids =
      pd.ok() ? ctx.client().ListKernelIds(pd->device()) : absl::StatusOr<v1::ListKernelIdsResponse>(pd.status());
  if (ids.ok()) {
    for (const v1::KernelId& id : ids->ids()) {
      if (id.name() == name) d.set_mrn(id.number());
      if (id.name() == mr->pd()) d.set_pdn(id.number());
    }
  } else {
    d.set_kernel_ids_note(StatusNote(ids.status()));
  }
  return PrintResult(ctx, d, {name},
                     MrText(d.mr(), d.windows(), d.grants(), wire::WallNow(),
                            KernelIdsText(d.has_mrn() ? std::optional<uint32_t>(d.mrn()) : std::nullopt,
                                          d.has_pdn() ? std::optional<uint32_t>(d.pdn()) : std::nullopt,
                                          d.kernel_ids_note())));
}

}  // namespace

void RegisterMrCommands(Registry& r) {
  r.Add(r.Noun("get", Kind::kMr, "memory regions", true),
        GetOptions<json::MrList, v1::MemoryRegion>{Kind::kMr, MrColumns, &client::Client::ListMrs,
                                                   &v1::ListMrsResponse::mrs, &client::Client::GetMr}
            .FilterBy("--pd", Kind::kPd, "in")
            .WithKernelIds("MRN"));
  r.Named("describe", Kind::kMr, "A memory region: PD, source, access, state, generation, keys, its windows and grants",
          Describe);
  r.Add<RegisterMrOptions>(r.Noun("register", Kind::kMr, "Register a memory region"));
  r.Add<ReregMrOptions>(
      r.Noun("rereg", Kind::kMr, "Change a region's access, PD or memory; the flags follow from the options given"));
  r.Add<DeleteMrOptions>(r.Noun("delete", Kind::kMr,
                                "Deregister a memory region (refused while windows are bound to it, or while it has "
                                "live grants unless --revoke-grants)"));
}

}  // namespace rdmad::cli
