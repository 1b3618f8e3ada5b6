// rdmactl get devices: RDMA devices, their ports and capabilities; -o wide adds the GID table, and one device
// (or -o wide) its hardware counters.
#include "cli/command.h"

namespace rdmad::cli {

void RegisterDeviceCommands(Registry& r) {
  r.Add(r.Noun("get", Kind::kDevice, "RDMA devices, their ports and capabilities", true),
        GetOptions<json::DeviceList, v1::Device>{Kind::kDevice, DeviceColumns, &client::Client::ListDevices,
                                                 &v1::ListDevicesResponse::devices, &client::Client::GetDevice}
            .Then([](Context& ctx, const google::protobuf::RepeatedPtrField<v1::Device>& devices, bool one) {
              if (Table gids = GidsTable(devices); ctx.wide() && gids.rows() > 0) ctx.out() << "\n" << gids.Render();
              if (Table counters = HwCountersTable(devices); (ctx.wide() || one) && counters.rows() > 0) {
                ctx.out() << "\n" << counters.Render();
              }
            }));
}

}  // namespace rdmad::cli
