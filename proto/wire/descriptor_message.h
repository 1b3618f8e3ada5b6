// The descriptor socket's messages (docs/PROTOCOL.md#memory-shared-by-file-descriptor), shared by rdmad and
// the client library. SOCK_SEQPACKET: one message is one request or one reply, read whole.
//
//   request, 16 bytes, with exactly one file descriptor as SCM_RIGHTS ancillary data:
//     0  magic    "RDFD"
//     4  version  u16 little-endian, 1
//     6  op       u16, 1 = DEPOSIT
//     8  flags    u32, 0
//    12  reserved u32, 0
//   reply, 16 bytes and then `length` bytes of UTF-8 text:
//     0  magic    "RDFD"
//     4  version  u16, 1
//     6  code     u16, a gRPC status code: 0 = OK
//     8  length   u32, the text's bytes (at most 4096)
//    12  reserved u32, 0
//    16  text     OK: the handle ("descriptors/" and 32 hex digits); otherwise the error ("field: message")
//
// Threads: pure functions.
#ifndef RDMAD_PROTO_WIRE_DESCRIPTOR_MESSAGE_H_
#define RDMAD_PROTO_WIRE_DESCRIPTOR_MESSAGE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rdmad::wire {

inline constexpr char kDescriptorMagic[4] = {'R', 'D', 'F', 'D'};
inline constexpr uint16_t kDescriptorVersion = 1;
inline constexpr uint16_t kDescriptorDeposit = 1;
inline constexpr size_t kDescriptorHeaderBytes = 16;
inline constexpr size_t kDescriptorMaxText = 4096;

struct DescriptorReply {
  uint16_t code = 0;  // a gRPC status code
  std::string text;   // the handle, or the error
};

std::string EncodeDescriptorRequest();
// INVALID_ARGUMENT, saying what is wrong, unless `message` is a version 1 DEPOSIT with zero flags.
absl::Status DecodeDescriptorRequest(absl::string_view message);
std::string EncodeDescriptorReply(uint16_t code, absl::string_view text);  // text cut at kDescriptorMaxText
absl::StatusOr<DescriptorReply> DecodeDescriptorReply(absl::string_view message);

}  // namespace rdmad::wire

#endif  // RDMAD_PROTO_WIRE_DESCRIPTOR_MESSAGE_H_
