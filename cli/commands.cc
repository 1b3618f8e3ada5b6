#include "cli/commands.h"

#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/command_util.h"

namespace rdmad::cli {
namespace {

using internal::FlagError;
using internal::FlagName;
using internal::FlagUint;
using internal::PrintList;
using internal::PrintOne;
using internal::PrintResult;
using internal::UsageError;

absl::StatusOr<uint64_t> FlagSize(absl::string_view flag, const std::string& text, bool positive) {
  absl::StatusOr<uint64_t> size = ParseSize(text);
  if (!size.ok()) return FlagError(flag, size.status());
  if (positive && *size == 0) return UsageError(absl::StrCat(flag, ": must be greater than 0"));
  return size;
}

absl::Status SetAccess(absl::string_view flag, const std::string& text, google::protobuf::RepeatedField<int>* out) {
  absl::StatusOr<std::vector<v1::Access>> access = ParseAccess(text);
  if (!access.ok()) return FlagError(flag, access.status());
  for (v1::Access a : *access) out->Add(a);
  return absl::OkStatus();
}

// --size N [--huge-pages] | --file PATH [--offset N] --length N
absl::StatusOr<v1::MemorySource> BuildSource(const SourceOptions& o) {
  v1::MemorySource source;
  if (o.size_given && o.file_given) return UsageError("give either --size or --file, not both");
  if (o.huge_pages && !o.size_given) {
    return UsageError("--huge-pages goes with --size (a shared file has its file system's page size)");
  }
  if ((o.offset_given || o.length_given) && !o.file_given) return UsageError("--offset and --length go with --file");
  if (o.size_given) {
    RDMACTL_ASSIGN_OR_RETURN(uint64_t size, FlagSize("--size", o.size, true));
    source.mutable_anonymous()->set_size(size);
    source.mutable_anonymous()->set_huge_pages(o.huge_pages);
  } else if (o.file_given) {
    if (o.file.empty()) return UsageError("--file: a path is required");
    if (!o.length_given) return UsageError("--length is required with --file");
    RDMACTL_ASSIGN_OR_RETURN(uint64_t offset, FlagSize("--offset", o.offset.empty() ? "0" : o.offset, false));
    RDMACTL_ASSIGN_OR_RETURN(uint64_t length, FlagSize("--length", o.length, true));
    source.mutable_file()->set_path(o.file);
    source.mutable_file()->set_offset(offset);
    source.mutable_file()->set_length(length);
  } else {
    return UsageError("a memory source is required: --size N [--huge-pages], or --file PATH --length N [--offset N]");
  }
  return source;
}

// Devices in wide format carry a second table: their GIDs; one device (get devices NAME), or any in wide
// format, also its hardware counters.
int PrintDevices(Context& ctx, const google::protobuf::RepeatedPtrField<v1::Device>& devices, bool one = false) {
  int rc = PrintList(ctx, devices, DevicesTable, "");
  if (ctx.format() == Format::kWide) {
    Table gids = GidsTable(devices);
    if (gids.rows() > 0) ctx.out() << "\n" << gids.Render();
  }
  if (ctx.format() == Format::kWide || (one && ctx.format() == Format::kTable)) {
    Table counters = HwCountersTable(devices);
    if (counters.rows() > 0) ctx.out() << "\n" << counters.Render();
  }
  return rc;
}

}  // namespace

// ---- Context

Context::Context(std::string server, Format format, std::chrono::milliseconds timeout, std::ostream& out,
                 std::ostream& err)
    : server_(std::move(server)), format_(format), timeout_(timeout), out_(out), err_(err) {}

Context::~Context() = default;

client::Client& Context::client() {
  if (!client_) {
    client::Client::Options options;
    options.target = server_;
    options.timeout = timeout_;
    client_ = std::make_unique<client::Client>(options);
  }
  return *client_;
}

void Context::UseChannel(std::shared_ptr<grpc::Channel> channel) {
  client_ = std::make_unique<client::Client>(std::move(channel), timeout_);
}

int Context::Fail(const absl::Status& status) {
  std::optional<v1::ErrorDetail> detail;
  if (client::HasDetail(status)) detail = client::Detail(status);
  err_ << FormatError(status, detail, server_) << "\n";
  return kExitServerError;
}

absl::StatusOr<std::unique_ptr<Context>> MakeContext(const GlobalOptions& options, std::ostream& out,
                                                     std::ostream& err) {
  if (options.server.empty()) return UsageError("--server: an address is required (unix:/path or host:port)");
  absl::StatusOr<Format> format = ParseFormat(options.output);
  if (!format.ok()) return FlagError("-o", format.status());
  absl::StatusOr<std::chrono::milliseconds> timeout = ParseTimeout(options.timeout);
  if (!timeout.ok()) return FlagError("--timeout", timeout.status());
  auto ctx = std::make_unique<Context>(options.server, *format, *timeout, out, err);
  if (options.tls.enabled()) {  // mutual TLS to a TCP rdmad (on a unix socket rdmad knows the uid instead)
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = client::Dial(options.server, options.tls);
    if (!channel.ok()) return UsageError("--tls-ca/--tls-cert/--tls-key: " + std::string(channel.status().message()));
    ctx->UseChannel(*std::move(channel));
  }
  return ctx;
}

// ---- get

absl::Status Validate(GetOptions& o) {
  if (!o.name.empty()) {
    RDMACTL_ASSIGN_OR_RETURN(o.name, NormalizeName(o.kind, o.name));
  }
  if (!o.pd.empty()) {
    if (o.kind != Kind::kMr && o.kind != Kind::kMw) return UsageError("--pd filters only mrs and mws");
    if (!o.name.empty()) return UsageError("--pd filters a list: give either NAME or --pd");
    RDMACTL_ASSIGN_OR_RETURN(o.pd, FlagName("--pd", Kind::kPd, o.pd));
  }
  if (!o.channel.empty()) {
    if (o.kind != Kind::kCmId) return UsageError("--channel filters only cmids");
    if (!o.name.empty()) return UsageError("--channel filters a list: give either NAME or --channel");
    RDMACTL_ASSIGN_OR_RETURN(o.channel, FlagName("--channel", Kind::kChannel, o.channel));
  }
  if (!o.mr.empty() || !o.principal.empty() || o.all) {
    if (o.kind != Kind::kGrant) return UsageError("--mr, --for and --all filter only grants");
    if (!o.name.empty()) return UsageError("--mr, --for and --all filter a list: give either NAME or filters");
  }
  if (!o.mr.empty()) {
    RDMACTL_ASSIGN_OR_RETURN(o.mr, FlagName("--mr", Kind::kMr, o.mr));
  }
  return absl::OkStatus();
}

int Run(const GetOptions& o, Context& ctx) {
  client::Client& c = ctx.client();
  const std::string scope = !o.pd.empty() ? absl::StrCat(" in ", o.pd)
                            : !o.channel.empty() ? absl::StrCat(" on ", o.channel)
                                                 : "";
  switch (o.kind) {
    case Kind::kDevice: {
      if (!o.name.empty()) {
        auto d = c.GetDevice(o.name);
        if (!d.ok()) return ctx.Fail(d.status());
        if (ctx.format() == Format::kJson) return PrintOne(ctx, *d, DevicesTable);
        google::protobuf::RepeatedPtrField<v1::Device> one;
        *one.Add() = *d;
        return PrintDevices(ctx, one, /*one=*/true);
      }
      auto list = c.ListDevices();
      if (!list.ok()) return ctx.Fail(list.status());
      return PrintDevices(ctx, list->devices());
    }
    case Kind::kPd: {
      if (!o.name.empty()) {
        auto pd = c.GetPd(o.name);
        return pd.ok() ? PrintOne(ctx, *pd, PdsTable) : ctx.Fail(pd.status());
      }
      auto list = c.ListPds();
      return list.ok() ? PrintList(ctx, list->pds(), PdsTable, scope) : ctx.Fail(list.status());
    }
    case Kind::kMr: {
      if (!o.name.empty()) {
        auto mr = c.GetMr(o.name);
        return mr.ok() ? PrintOne(ctx, *mr, MrsTable) : ctx.Fail(mr.status());
      }
      auto list = c.ListMrs(o.pd);
      return list.ok() ? PrintList(ctx, list->mrs(), MrsTable, scope) : ctx.Fail(list.status());
    }
    case Kind::kMw: {
      if (!o.name.empty()) {
        auto mw = c.GetMw(o.name);
        return mw.ok() ? PrintOne(ctx, *mw, MwsTable) : ctx.Fail(mw.status());
      }
      auto list = c.ListMws(o.pd);
      return list.ok() ? PrintList(ctx, list->mws(), MwsTable, scope) : ctx.Fail(list.status());
    }
    case Kind::kQp: {
      if (!o.name.empty()) {
        auto qp = c.GetQp(o.name);
        return qp.ok() ? PrintOne(ctx, *qp, QpsTable) : ctx.Fail(qp.status());
      }
      auto list = c.ListQps();
      return list.ok() ? PrintList(ctx, list->qps(), QpsTable, scope) : ctx.Fail(list.status());
    }
    case Kind::kChannel: {
      if (!o.name.empty()) {
        auto ch = c.GetChannel(o.name);
        return ch.ok() ? PrintOne(ctx, *ch, ChannelsTable) : ctx.Fail(ch.status());
      }
      auto list = c.ListChannels();
      return list.ok() ? PrintList(ctx, list->channels(), ChannelsTable, scope) : ctx.Fail(list.status());
    }
    case Kind::kCmId: {
      if (!o.name.empty()) {
        auto id = c.GetCmId(o.name);
        return id.ok() ? PrintOne(ctx, *id, CmIdsTable) : ctx.Fail(id.status());
      }
      auto list = c.ListCmIds(o.channel);
      return list.ok() ? PrintList(ctx, list->cm_ids(), CmIdsTable, scope) : ctx.Fail(list.status());
    }
    case Kind::kGrant: return RunGetGrants(o, ctx);
    case Kind::kTenant: return RunGetTenants(o, ctx);
    case Kind::kToken: break;
  }
  ctx.err() << "error: " << Info(o.kind).plural << " cannot be listed\n";
  return kExitUsage;
}

// ---- protection domains

absl::StatusOr<v1::CreatePdRequest> Validate(const CreatePdOptions& o) {
  v1::CreatePdRequest r;
  RDMACTL_ASSIGN_OR_RETURN(std::string device, FlagName("--device", Kind::kDevice, o.device));
  r.set_device(device);
  r.set_label(o.label);
  return r;
}

int Run(const v1::CreatePdRequest& request, Context& ctx) {
  auto pd = ctx.client().CreatePd(request);
  if (!pd.ok()) return ctx.Fail(pd.status());
  return PrintResult(ctx, *pd, {pd->name()}, absl::StrCat(pd->name(), " created (", pd->device(), ")"));
}

// ---- memory regions

absl::StatusOr<v1::RegisterMrRequest> Validate(const RegisterMrOptions& o) {
  v1::RegisterMrRequest r;
  RDMACTL_ASSIGN_OR_RETURN(std::string pd, FlagName("--pd", Kind::kPd, o.pd));
  r.set_pd(pd);
  RDMACTL_ASSIGN_OR_RETURN(*r.mutable_source(), BuildSource(o.source));
  RDMACTL_RETURN_IF_ERROR(SetAccess("--access", o.access, r.mutable_access()));
  return r;
}

int Run(const v1::RegisterMrRequest& request, Context& ctx) {
  auto mr = ctx.client().RegisterMr(request);
  if (!mr.ok()) return ctx.Fail(mr.status());
  return PrintResult(ctx, *mr, {mr->name()},
                     absl::StrCat(mr->name(), " registered (lkey ", Hex(mr->lkey()), ", rkey ",
                                  Hex(mr->rkey()), ", addr ", Hex(mr->addr()), ", ", mr->length(), " bytes)"));
}

absl::StatusOr<v1::ReregisterMrRequest> Validate(const ReregMrOptions& o) {
  v1::ReregisterMrRequest r;
  RDMACTL_ASSIGN_OR_RETURN(std::string name, NormalizeName(Kind::kMr, o.name));
  r.set_name(name);
  if (o.source.given()) {
    r.add_flags(v1::CHANGE_TRANSLATION);
    RDMACTL_ASSIGN_OR_RETURN(*r.mutable_source(), BuildSource(o.source));
  } else if (o.source.huge_pages || o.source.offset_given || o.source.length_given) {
    return BuildSource(o.source).status();  // says which flag they need
  }
  if (o.pd_given) {
    r.add_flags(v1::CHANGE_PD);
    RDMACTL_ASSIGN_OR_RETURN(std::string pd, FlagName("--pd", Kind::kPd, o.pd));
    r.set_pd(pd);
  }
  if (o.access_given) {
    r.add_flags(v1::CHANGE_ACCESS);
    RDMACTL_RETURN_IF_ERROR(SetAccess("--access", o.access, r.mutable_access()));
  }
  if (r.flags().empty()) return UsageError("nothing to change: give --access, --pd, or a new source (--size or --file)");
  r.set_revoke_grants(o.revoke_grants);
  return r;
}

int Run(const v1::ReregisterMrRequest& request, Context& ctx) {
  auto res = ctx.client().ReregisterMr(request);
  if (!res.ok()) return ctx.Fail(res.status());
  const v1::MemoryRegion& mr = res->mr();
  std::string keys;
  if (res->keys_changed()) {
    std::vector<std::string> changed;
    if (res->old_rkey() != mr.rkey())
      changed.push_back(absl::StrCat("rkey ", Hex(res->old_rkey()), " -> ", Hex(mr.rkey())));
    if (res->old_lkey() != mr.lkey())
      changed.push_back(absl::StrCat("lkey ", Hex(res->old_lkey()), " -> ", Hex(mr.lkey())));
    keys = absl::StrCat("keys changed: ", absl::StrJoin(changed, ", "), "; the old keys are dead");
  } else {
    keys = absl::StrCat("keys unchanged: lkey ", Hex(mr.lkey()), ", rkey ", Hex(mr.rkey()));
  }
  if (!res->warning().empty()) ctx.err() << "warning: " << res->warning() << "\n";
  return PrintResult(ctx, *res, {mr.name()},
                     absl::StrCat(mr.name(), " reregistered (", ReregMethodString(res->method()), "; ", keys,
                                  "; generation ", mr.generation(), ")"));
}

// ---- memory windows

absl::StatusOr<v1::AllocMwRequest> Validate(const CreateMwOptions& o) {
  v1::AllocMwRequest r;
  RDMACTL_ASSIGN_OR_RETURN(std::string pd, FlagName("--pd", Kind::kPd, o.pd));
  r.set_pd(pd);
  if (o.type == "1") {
    r.set_type(v1::TYPE_1);
  } else if (o.type == "2") {
    r.set_type(v1::TYPE_2);
  } else {
    return UsageError(absl::StrCat("--type: '", o.type, "' is not a memory window type (1 or 2)"));
  }
  return r;
}

int Run(const v1::AllocMwRequest& request, Context& ctx) {
  auto mw = ctx.client().AllocMw(request);
  if (!mw.ok()) return ctx.Fail(mw.status());
  return PrintResult(
      ctx, *mw, {mw->name()},
      absl::StrCat(mw->name(), " created (type ", MwTypeString(mw->type()), ", in ", mw->pd(), ")"));
}

absl::StatusOr<v1::BindMwRequest> Validate(const BindMwOptions& o) {
  v1::BindMwRequest r;
  RDMACTL_ASSIGN_OR_RETURN(std::string name, NormalizeName(Kind::kMw, o.name));
  r.set_name(name);
  RDMACTL_ASSIGN_OR_RETURN(std::string mr, FlagName("--mr", Kind::kMr, o.mr));
  r.set_mr(mr);
  RDMACTL_ASSIGN_OR_RETURN(uint64_t offset, FlagSize("--offset", o.offset.empty() ? "0" : o.offset, false));
  r.set_offset(offset);
  RDMACTL_ASSIGN_OR_RETURN(uint64_t length, FlagSize("--length", o.length, true));
  r.set_length(length);
  RDMACTL_RETURN_IF_ERROR(SetAccess("--access", o.access, r.mutable_access()));
  r.set_zero_based(o.zero_based);
  if (!o.qp.empty()) {
    RDMACTL_ASSIGN_OR_RETURN(std::string qp, FlagName("--qp", Kind::kQp, o.qp));
    r.set_qp(qp);
  }
  return r;
}

int Run(const v1::BindMwRequest& request, Context& ctx) {
  auto mw = ctx.client().BindMw(request);
  if (!mw.ok()) return ctx.Fail(mw.status());
  return PrintResult(ctx, *mw, {mw->name()},
                     absl::StrCat(mw->name(), " bound (rkey ", Hex(mw->rkey()), ", remote_addr ",
                                  Hex(mw->binding().remote_addr()), ", ", mw->binding().length(), " bytes)"));
}

// ---- queue pairs

absl::StatusOr<v1::CreateQpRequest> Validate(const CreateQpOptions& o) {
  v1::CreateQpRequest r;
  RDMACTL_ASSIGN_OR_RETURN(std::string pd, FlagName("--pd", Kind::kPd, o.pd));
  r.set_pd(pd);
  RDMACTL_ASSIGN_OR_RETURN(uint64_t port, FlagUint("--port", o.port.empty() ? "1" : o.port, 255));
  if (port == 0) return UsageError("--port: port numbers start at 1");
  r.set_port(static_cast<uint32_t>(port));
  if (!o.gid_index.empty()) {
    RDMACTL_ASSIGN_OR_RETURN(uint64_t index, FlagUint("--gid-index", o.gid_index, UINT32_MAX));
    r.set_gid_index(static_cast<uint32_t>(index));
  }
  return r;
}

int Run(const v1::CreateQpRequest& request, Context& ctx) {
  auto qp = ctx.client().CreateQp(request);
  if (!qp.ok()) return ctx.Fail(qp.status());
  return PrintResult(ctx, *qp, {qp->name()},
                     absl::StrCat(qp->name(), " created (qpn ", qp->local().qpn(), ", psn ",
                                  qp->local().psn(), ", gid ", qp->local().gid().empty() ? "<none>" : qp->local().gid(),
                                  ", lid ", qp->local().lid(), ", port ", qp->port(), ")"));
}

absl::StatusOr<v1::ConnectQpRequest> Validate(const ConnectQpOptions& o) {
  v1::ConnectQpRequest r;
  RDMACTL_ASSIGN_OR_RETURN(std::string name, NormalizeName(Kind::kQp, o.name));
  r.set_name(name);
  v1::QpEndpoint* remote = r.mutable_remote();
  RDMACTL_ASSIGN_OR_RETURN(uint64_t qpn, FlagUint("--remote-qpn", o.remote_qpn, 0xffffff));
  if (qpn == 0) return UsageError("--remote-qpn: QP number 0 is not a connectable QP");
  remote->set_qpn(static_cast<uint32_t>(qpn));
  RDMACTL_ASSIGN_OR_RETURN(uint64_t psn, FlagUint("--remote-psn", o.remote_psn, 0xffffff));
  remote->set_psn(static_cast<uint32_t>(psn));
  if (o.remote_gid.empty() && o.remote_lid.empty()) {
    return UsageError("--remote-gid is required (or --remote-lid on an InfiniBand port without GRH)");
  }
  if (!o.remote_gid.empty()) {
    absl::StatusOr<std::string> gid = NormalizeGid(o.remote_gid);
    if (!gid.ok()) return FlagError("--remote-gid", gid.status());
    remote->set_gid(*gid);
  }
  if (!o.remote_lid.empty()) {
    RDMACTL_ASSIGN_OR_RETURN(uint64_t lid, FlagUint("--remote-lid", o.remote_lid, 0xffff));
    remote->set_lid(static_cast<uint32_t>(lid));
  }
  return r;
}

int Run(const v1::ConnectQpRequest& request, Context& ctx) {
  auto qp = ctx.client().ConnectQp(request);
  if (!qp.ok()) return ctx.Fail(qp.status());
  return PrintResult(ctx, *qp, {qp->name()},
                     absl::StrCat(qp->name(), " connected (state ", QpStateString(qp->state()),
                                  ", remote qpn ", qp->remote().qpn(), ")"));
}

// ---- one named resource

absl::Status Validate(NamedOptions& o) {
  RDMACTL_ASSIGN_OR_RETURN(o.name, NormalizeName(o.kind, o.name));
  if (o.cascade && o.kind != Kind::kPd) return UsageError("--cascade applies only to delete pd");
  if (o.revoke_grants && o.kind != Kind::kPd && o.kind != Kind::kMr) {
    return UsageError("--revoke-grants applies only to delete pd and delete mr (and rereg mr)");
  }
  return absl::OkStatus();
}

int RunInvalidateMw(const NamedOptions& o, Context& ctx) {
  auto mw = ctx.client().InvalidateMw(o.name);
  if (!mw.ok()) return ctx.Fail(mw.status());
  return PrintResult(ctx, *mw, {mw->name()}, absl::StrCat(mw->name(), " invalidated"));
}

int RunDelete(const NamedOptions& o, Context& ctx) {
  client::Client& c = ctx.client();
  const std::string done = absl::StrCat(o.name, " deleted");
  switch (o.kind) {
    case Kind::kPd: {
      auto res = c.DeletePd(o.name, o.cascade, o.revoke_grants);
      if (!res.ok()) return ctx.Fail(res.status());
      std::vector<std::string> deleted(res->deleted().begin(), res->deleted().end());
      if (deleted.empty()) deleted.push_back(o.name);
      return PrintResult(ctx, *res, deleted,
                         o.cascade ? absl::StrCat(done, " (cascade: ", absl::StrJoin(deleted, ", "), ")") : done);
    }
    case Kind::kMr: {
      absl::Status s = c.DeregisterMr(o.name, o.revoke_grants);
      return s.ok() ? PrintResult(ctx, v1::DeregisterMrResponse(), {o.name}, done) : ctx.Fail(s);
    }
    case Kind::kMw: {
      absl::Status s = c.DeallocMw(o.name);
      return s.ok() ? PrintResult(ctx, v1::DeallocMwResponse(), {o.name}, done) : ctx.Fail(s);
    }
    case Kind::kQp: {
      absl::Status s = c.DeleteQp(o.name);
      return s.ok() ? PrintResult(ctx, v1::DeleteQpResponse(), {o.name}, done) : ctx.Fail(s);
    }
    case Kind::kChannel: {
      absl::Status s = c.DeleteChannel(o.name);
      return s.ok() ? PrintResult(ctx, v1::DeleteChannelResponse(), {o.name}, done) : ctx.Fail(s);
    }
    case Kind::kCmId: {
      absl::Status s = c.DeleteCmId(o.name);
      return s.ok() ? PrintResult(ctx, v1::DeleteCmIdResponse(), {o.name}, done) : ctx.Fail(s);
    }
    case Kind::kDevice:
    case Kind::kToken:
    case Kind::kGrant:
    case Kind::kTenant: break;
  }
  ctx.err() << "error: " << Info(o.kind).plural << " cannot be deleted\n";
  return kExitUsage;
}

// ---- health, version

int RunHealth(Context& ctx) {
  absl::Status s = ctx.client().Health();
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format() == Format::kJson) {
    ctx.out() << "{\n \"server\": " << JsonQuote(ctx.server()) << ",\n \"status\": \"SERVING\"\n}\n";
  } else {
    ctx.out() << "rdmad at " << ctx.server() << " is serving\n";
  }
  return kExitOk;
}

int RunVersion(Context& ctx) {
  if (ctx.format() == Format::kJson) {
    ctx.out() << "{\n \"rdmactl\": " << JsonQuote(kRdmactlVersion) << ",\n \"api\": " << JsonQuote(kApiVersion)
              << "\n}\n";
  } else {
    ctx.out() << "rdmactl " << kRdmactlVersion << " (API " << kApiVersion << ")\n";
  }
  return kExitOk;
}

}  // namespace rdmad::cli
