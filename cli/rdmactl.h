// rdmactl's whole command line as a function: parse `args` (without the program name), run the command,
// print on `out` and `err`, return the exit status (0 success, 1 rdmad failed the request, 2 usage error).
// main.cc calls it with the process's arguments and streams; tests call it with their own streams and an
// in-process channel to a fake rdmad.
//
// Thread-safety: one call at a time per process (CLI11 and the command run on the calling thread; RDMAD_SERVER
// is read from the environment).
#ifndef RDMAD_CLI_RDMACTL_H_
#define RDMAD_CLI_RDMACTL_H_

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

namespace rdmad::cli {

// `channel`: when set, commands talk to rdmad over it instead of dialing --server.
int Rdmactl(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
            std::shared_ptr<grpc::Channel> channel = nullptr);

}  // namespace rdmad::cli

#endif  // RDMAD_CLI_RDMACTL_H_
