// soak_reader: one data-plane client of the fault soak (tests/soak/run-fault-soak.sh). Opens one grant with
// its token (client library, RemoteRegion) and reads the whole granted range over and over, comparing each
// pass with the expected bytes, until a stop file appears or a read fails. One thread: main owns everything.
//
// Usage: soak_reader --endpoint HOST:PORT --token-file FILE --expected FILE --file-offset N --stop FILE
// Prints "open grants/N" once the key arrived, then "pass K ok" after each identical pass (flushed at once,
// the soak counts these lines), and the status of the first failure.
// Exit: 0 stopped by the stop file; 2 bytes differ from the expected file; 3 the open or a read failed
// (a clean failure: the status is printed); 1 bad arguments.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "client/remote_region.h"

namespace {

bool Slurp(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

int Usage(const char* why) {
  std::fprintf(stderr, "soak_reader: %s\nusage: soak_reader --endpoint HOST:PORT --token-file FILE --expected FILE "
               "--file-offset N --stop FILE\n", why);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string endpoint, token_file, expected_file, stop_file;
  uint64_t file_offset = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--endpoint") endpoint = value;
    else if (flag == "--token-file") token_file = value;
    else if (flag == "--expected") expected_file = value;
    else if (flag == "--stop") stop_file = value;
    else if (flag == "--file-offset") {
      if (!absl::SimpleAtoi(value, &file_offset)) return Usage("--file-offset: not a number");
    } else return Usage(("unknown flag " + flag).c_str());
  }
  if (argc % 2 != 1 || endpoint.empty() || token_file.empty() || expected_file.empty() || stop_file.empty()) {
    return Usage("--endpoint, --token-file, --expected and --stop are required");
  }
  size_t colon = endpoint.rfind(':');
  uint32_t port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(endpoint.substr(colon + 1), &port) || port == 0 ||
      port > 65535) {
    return Usage("--endpoint: expected HOST:PORT");
  }
  std::string token, expected;
  if (!Slurp(token_file, &token) || token.size() != 32) return Usage("--token-file: cannot read 32 raw bytes");
  if (!Slurp(expected_file, &expected)) return Usage("--expected: cannot read the file");

  rdmad::client::RemoteRegion::Options options;
  auto region = rdmad::client::RemoteRegion::Open(endpoint.substr(0, colon), static_cast<uint16_t>(port), token,
                                                  options);
  if (!region.ok()) {
    std::printf("open failed: %s\n", region.status().ToString().c_str());
    return 3;
  }
  const uint64_t length = (*region)->length();
  if (file_offset + length > expected.size()) {
    std::printf("the grant (%llu bytes at %llu) is past the expected file's end\n",
                static_cast<unsigned long long>(length), static_cast<unsigned long long>(file_offset));
    return 2;
  }
  std::printf("open %s (%llu bytes)\n", (*region)->grant_name().c_str(), static_cast<unsigned long long>(length));
  std::fflush(stdout);
  std::vector<char> buffer(length);
  struct stat st;
  for (uint64_t pass = 1; stat(stop_file.c_str(), &st) != 0; ++pass) {
    for (uint64_t at = 0; at < length; at += options.max_read_bytes) {
      uint64_t n = std::min<uint64_t>(options.max_read_bytes, length - at);
      absl::Status s = (*region)->Read(at, n, buffer.data() + at);
      if (!s.ok()) {
        std::printf("read failed in pass %llu at %llu: %s\n", static_cast<unsigned long long>(pass),
                    static_cast<unsigned long long>(at), s.ToString().c_str());
        return 3;
      }
    }
    if (std::memcmp(buffer.data(), expected.data() + file_offset, length) != 0) {
      std::printf("pass %llu: bytes differ from the expected file\n", static_cast<unsigned long long>(pass));
      return 2;
    }
    std::printf("pass %llu ok\n", static_cast<unsigned long long>(pass));
    std::fflush(stdout);
  }
  std::printf("stopped\n");
  return 0;
}
