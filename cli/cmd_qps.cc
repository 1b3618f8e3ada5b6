// rdmactl's queue pair commands: get qps, create qp, connect qp (to a remote endpoint), delete qp.
#include "absl/strings/str_cat.h"
#include "cli/command.h"

namespace rdmad::cli {
namespace {

struct CreateQpOptions {
  v1::CreateQpRequest request;
  uint32_t port = 1;

  void Flags(CLI::App* sub) {
    sub->add_option("--pd", *request.mutable_pd(), "protection domain (pds/N)")->transform(NameFlag(Kind::kPd))->required();
    sub->add_option("--port", port, "device port (default 1)")->transform(UintFlag(255))->check(CLI::Range(1, 255));
    sub->add_option_function<uint32_t>("--gid-index", [this](uint32_t n) { request.set_gid_index(n); },
                                       "GID table index (default: the port's IPv4 RoCEv2 GID, or 0 on IB)")
        ->transform(UintFlag(UINT32_MAX));
  }
  absl::Status Validate() {
    request.set_port(port);
    return absl::OkStatus();
  }
  int Run(Context& ctx) const {
    return Done(ctx, ctx.client().CreateQp(request), [](const v1::QueuePair& qp) {
      return absl::StrCat(qp.name(), " created (qpn ", qp.local().qpn(), ", psn ", qp.local().psn(), ", gid ",
                          qp.local().gid().empty() ? "<none>" : qp.local().gid(), ", lid ", qp.local().lid(), ", port ",
                          qp.port(), ")");
    });
  }
};

struct ConnectQpOptions {
  v1::ConnectQpRequest request;
  std::string gid;

  void Flags(CLI::App* sub) {
    AddName(sub, request.mutable_name(), Kind::kQp);
    v1::QpEndpoint* remote = request.mutable_remote();
    sub->add_option_function<uint32_t>("--remote-qpn", [remote](uint32_t n) { remote->set_qpn(n); },
                                       "remote QP number (decimal or 0x hex)")
        ->transform(UintFlag(0xffffff))
        ->check(CLI::Range(1, 0xffffff).description(""))
        ->required();
    sub->add_option_function<uint32_t>("--remote-psn", [remote](uint32_t n) { remote->set_psn(n); },
                                       "remote packet sequence number (24 bits)")
        ->transform(UintFlag(0xffffff))
        ->required();
    sub->add_option("--remote-gid", gid, "remote GID: fe80::1, the full 8-group form, or IPv4 (RoCEv2)")
        ->transform(TextFlag("GID", NormalizeGid));
    sub->add_option_function<uint32_t>("--remote-lid", [remote](uint32_t n) { remote->set_lid(n); }, "remote LID (InfiniBand)")
        ->transform(UintFlag(0xffff));
  }
  absl::Status Validate() {
    if (gid.empty() && request.remote().lid() == 0) {
      return UsageError("--remote-gid is required (or --remote-lid on an InfiniBand port without GRH)");
    }
    request.mutable_remote()->set_gid(gid);
    return absl::OkStatus();
  }
  int Run(Context& ctx) const {
    return Done(ctx, ctx.client().ConnectQp(request), [](const v1::QueuePair& qp) {
      return absl::StrCat(qp.name(), " connected (state ", QpStateString(qp.state()), ", remote qpn ", qp.remote().qpn(), ")");
    });
  }
};

}  // namespace

void RegisterQpCommands(Registry& r) {
  r.Add(r.Noun("get", Kind::kQp, "queue pairs", true),
        GetOptions<json::QpList, v1::QueuePair>{Kind::kQp, QpColumns, &client::Client::ListQps,
                                                &v1::ListQpsResponse::qps, &client::Client::GetQp});
  r.Add<CreateQpOptions>(r.Noun("create", Kind::kQp, "Create an RC queue pair owned by rdmad"));
  r.Add<ConnectQpOptions>(r.Noun("connect", Kind::kQp, "Move a queue pair to RTS against a remote endpoint"));
  r.Named("delete", Kind::kQp, "Destroy a queue pair (refused while type 2 windows are bound on it)",
          Deletes<v1::DeleteQpResponse>(&client::Client::DeleteQp));
}

}  // namespace rdmad::cli
