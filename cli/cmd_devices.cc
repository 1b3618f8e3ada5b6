// rdmactl get devices: RDMA devices, their ports and capabilities; -o wide adds the GID table, and one device
// (or -o wide) its hardware counters.
#include "cli/command.h"

namespace rdmad::cli {
namespace {

struct GetDevicesOptions {
  std::string name;

  void Flags(CLI::App* sub) { AddName(sub, &name, Kind::kDevice, false); }
  int Run(Context& ctx) const {
    const bool one = !name.empty();
    auto devices = one ? One(ctx.client().GetDevice(name)) : Items(ctx.client().ListDevices(), &v1::ListDevicesResponse::devices);
    int rc = PrintGet<json::DeviceList>(ctx, DeviceColumns(), devices, one);
    if (!devices.ok() || ctx.format() == Format::kJson || ctx.format() == Format::kName) return rc;
    if (Table gids = GidsTable(*devices); ctx.wide() && gids.rows() > 0) ctx.out() << "\n" << gids.Render();
    if (Table counters = HwCountersTable(*devices); (ctx.wide() || one) && counters.rows() > 0) {
      ctx.out() << "\n" << counters.Render();
    }
    return rc;
  }
};

}  // namespace

void RegisterDeviceCommands(Registry& r) {
  r.Add<GetDevicesOptions>(r.Noun("get", Kind::kDevice, "RDMA devices, their ports and capabilities", true));
}

}  // namespace rdmad::cli
