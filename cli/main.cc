// rdmactl's entry point: the command line is cli/rdmactl.cc.
#include <iostream>
#include <string>
#include <vector>

#include "cli/rdmactl.h"

int main(int argc, char** argv) {
  return rdmad::cli::Rdmactl(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
}
