#include "proto/wire/descriptor_message.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace rdmad::wire {
namespace {

void Put16(std::string* out, size_t at, uint16_t v) {
  (*out)[at] = static_cast<char>(v & 0xff);
  (*out)[at + 1] = static_cast<char>(v >> 8);
}
void Put32(std::string* out, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*out)[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint16_t Get16(absl::string_view m, size_t at) {
  return static_cast<uint16_t>(static_cast<uint8_t>(m[at]) | (static_cast<uint8_t>(m[at + 1]) << 8));
}
uint32_t Get32(absl::string_view m, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(m[at + i]);
  return v;
}
std::string Header(uint16_t second, uint32_t third) {
  std::string out(kDescriptorHeaderBytes, '\0');
  std::memcpy(out.data(), kDescriptorMagic, 4);
  Put16(&out, 4, kDescriptorVersion);
  Put16(&out, 6, second);
  Put32(&out, 8, third);
  return out;
}
absl::Status CheckHeader(absl::string_view m, const char* what) {
  if (m.size() < kDescriptorHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a descriptor-socket ", what, " of ", m.size(), " bytes: the header alone is 16"));
  }
  if (std::memcmp(m.data(), kDescriptorMagic, 4) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("a descriptor-socket ", what, " without the magic \"RDFD\""));
  }
  if (Get16(m, 4) != kDescriptorVersion) {
    return absl::InvalidArgumentError(absl::StrCat("descriptor-socket version ", Get16(m, 4), " (this rdmad speaks ",
                                                   kDescriptorVersion, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string EncodeDescriptorRequest() { return Header(kDescriptorDeposit, 0); }

absl::Status DecodeDescriptorRequest(absl::string_view message) {
  if (absl::Status s = CheckHeader(message, "request"); !s.ok()) return s;
  if (message.size() != kDescriptorHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat("a descriptor-socket request is 16 bytes, not ", message.size()));
  }
  if (Get16(message, 6) != kDescriptorDeposit) {
    return absl::InvalidArgumentError(absl::StrCat("unknown descriptor-socket operation ", Get16(message, 6),
                                                   " (1: DEPOSIT)"));
  }
  if (Get32(message, 8) != 0 || Get32(message, 12) != 0) {
    return absl::InvalidArgumentError("descriptor-socket request: flags and reserved must be 0");
  }
  return absl::OkStatus();
}

std::string EncodeDescriptorReply(uint16_t code, absl::string_view text) {
  text = text.substr(0, kDescriptorMaxText);
  std::string out = Header(code, static_cast<uint32_t>(text.size()));
  out.append(text.data(), text.size());
  return out;
}

absl::StatusOr<DescriptorReply> DecodeDescriptorReply(absl::string_view message) {
  if (absl::Status s = CheckHeader(message, "reply"); !s.ok()) return s;
  const uint32_t length = Get32(message, 8);
  if (length > kDescriptorMaxText || message.size() != kDescriptorHeaderBytes + length) {
    return absl::InvalidArgumentError(absl::StrCat("a descriptor-socket reply of ", message.size(),
                                                   " bytes whose header says ", length, " bytes of text"));
  }
  return DescriptorReply{Get16(message, 6), std::string(message.substr(kDescriptorHeaderBytes))};
}

}  // namespace rdmad::wire
