// rpc_latency: the round trip of a no-op RPC (ListPds) to a running rdmad, the baseline every control-plane
// figure is compared with. Prints p50/p99/mean in microseconds; not a test (it judges nothing).
//   rpc_latency [--target unix:/path] [--calls N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "client/client.h"

int main(int argc, char** argv) {
  CLI::App app{"rpc_latency: no-op RPC round trips to rdmad"};
  std::string target = rdmad::client::kDefaultTarget;
  int calls = 2000;
  app.add_option("--target", target, "rdmad address");
  app.add_option("--calls", calls, "number of calls (the first 10% are warm-up)")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  rdmad::client::Client::Options options;
  options.target = target;
  rdmad::client::Client client(options);
  std::vector<double> us;
  for (int i = 0; i < calls; ++i) {
    auto start = std::chrono::steady_clock::now();
    auto r = client.ListPds();
    auto end = std::chrono::steady_clock::now();
    if (!r.ok()) {
      std::fprintf(stderr, "ListPds: %s\n", std::string(r.status().message()).c_str());
      return 1;
    }
    if (i >= calls / 10) us.push_back(std::chrono::duration<double, std::micro>(end - start).count());
  }
  std::sort(us.begin(), us.end());
  double sum = 0;
  for (double v : us) sum += v;
  std::printf("ListPds round trip over %zu calls: p50 %.1f us, p99 %.1f us, mean %.1f us\n", us.size(),
              us[us.size() / 2], us[us.size() * 99 / 100], sum / us.size());
  return 0;
}
