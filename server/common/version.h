// rdmad's version: what `rdmad --version` prints, WhoAmI's Caller.server_version answers and the
// rdmad_build_info metric carries. rdmactl's own is in cli/cmd_server.cc.
// Threads: any (constants).
#ifndef RDMAD_SERVER_COMMON_VERSION_H_
#define RDMAD_SERVER_COMMON_VERSION_H_

namespace rdmad {

inline constexpr char kRdmadVersion[] = "0.1.0";
inline constexpr char kApiVersion[] = "rdmad.v1";

}  // namespace rdmad

#endif  // RDMAD_SERVER_COMMON_VERSION_H_
