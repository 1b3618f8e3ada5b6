// StartRdmad: see rdmad_process.h.
#include "tests/conformance/rdmad_process.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace rdmad::test {

std::string EnvOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

pid_t StartRdmad(const std::string& config, const std::string& log, const std::string& socket) {
  const std::string bin = EnvOr("RDMAD_BIN", "bazel-bin/server/rdmad");
  const pid_t pid = fork();
  if (pid == 0) {
    FILE* out = freopen(log.c_str(), "w", stderr);
    (void)out;
    dup2(fileno(stderr), STDOUT_FILENO);
    execl(bin.c_str(), bin.c_str(), "--config", config.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  for (int i = 0; i < 200; ++i) {
    struct stat st;
    if (stat(socket.c_str(), &st) == 0) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return pid;
}

}  // namespace rdmad::test
