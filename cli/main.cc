// rdmactl's entry point: the command line is cli/rdmactl.cc.
#include <iostream>
#include <string>
#include <vector>

#include "cli/rdmactl.h"
#include "client/channel.h"

int main(int argc, char** argv) {
  // Outlives every channel: rdmactl exits with gRPC ended and its threads joined.
  rdmad::client::GrpcRuntime grpc;
  return rdmad::cli::Rdmactl(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
}
