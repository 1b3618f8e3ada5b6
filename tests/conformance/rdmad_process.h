// rdmad as a child process of a guest test that needs to signal it, kill it or restart it (drain_test,
// recovery_test): the binary is $RDMAD_BIN (default bazel-bin/server/rdmad).
// Threads: call from the test's thread.
#ifndef RDMAD_TESTS_CONFORMANCE_RDMAD_PROCESS_H_
#define RDMAD_TESTS_CONFORMANCE_RDMAD_PROCESS_H_

#include <sys/types.h>

#include <string>

namespace rdmad::test {

// $NAME, or `fallback` when it is unset or empty.
std::string EnvOr(const char* name, const char* fallback);

// Starts `rdmad --config CONFIG` with its stdout and stderr in LOG, then waits (up to 10 s) for SOCKET to
// appear. Returns the child's pid (its socket may still be missing if it failed: the test's first call says).
pid_t StartRdmad(const std::string& config, const std::string& log, const std::string& socket);

}  // namespace rdmad::test

#endif  // RDMAD_TESTS_CONFORMANCE_RDMAD_PROCESS_H_
