#include "server/rpc/page.h"

#include <memory>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/common/status.h"

namespace rdmad::rpc_internal {
namespace {

constexpr char kVersion[] = "p1";

// FNV-1a, 64 bits: the same in every run and build of rdmad (a token outlives a restart).
uint64_t Fnv1a(const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

// The request's fields but page_size and page_token, as a check: its filters.
std::string FiltersOf(const google::protobuf::Message& request, const std::string& method) {
  std::unique_ptr<google::protobuf::Message> rest(request.New());
  rest->CopyFrom(request);
  const google::protobuf::Descriptor* d = rest->GetDescriptor();
  for (const char* name : {"page_size", "page_token"}) {
    if (const google::protobuf::FieldDescriptor* f = d->FindFieldByName(name)) rest->GetReflection()->ClearField(rest.get(), f);
  }
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream out(&bytes);
    google::protobuf::io::CodedOutputStream coded(&out);
    coded.SetSerializationDeterministic(true);
    rest->SerializeToCodedStream(&coded);
  }
  return absl::StrCat(absl::Hex(Fnv1a(absl::StrCat(method, "\n", bytes)), absl::kZeroPad16));
}

absl::Status BadToken(const std::string& method, const std::string& why) {
  return InvalidArgument("page_token", absl::StrCat(why, ": pass the next_page_token of the previous ", method,
                                                    " page, with the same filters, or none for the first page"));
}

}  // namespace

PageKey KeyOf(const std::string& name) {
  const size_t slash = name.rfind('/');
  const std::string tail = slash == std::string::npos ? name : name.substr(slash + 1);
  PageKey k;
  if (!tail.empty() && tail.size() <= 19 && std::all_of(tail.begin(), tail.end(), absl::ascii_isdigit) &&
      absl::SimpleAtoi(tail, &k.number)) {
    return k;
  }
  k.number = 0;
  k.text = tail;
  return k;
}

absl::StatusOr<Pager> Pager::Start(const google::protobuf::Message& request, const std::string& method) {
  const google::protobuf::Descriptor* d = request.GetDescriptor();
  const google::protobuf::Reflection* r = request.GetReflection();
  const google::protobuf::FieldDescriptor* size_field = d->FindFieldByName("page_size");
  const google::protobuf::FieldDescriptor* token_field = d->FindFieldByName("page_token");
  if (size_field == nullptr || token_field == nullptr) {
    return absl::InternalError(absl::StrCat(d->full_name(), " has no page_size or page_token"));
  }
  const int32_t asked = r->GetInt32(request, size_field);
  if (asked < 0) {
    return InvalidArgument("page_size", absl::StrCat("is negative (", asked, "): 0 asks for the default (",
                                                     kDefaultPageSize, " items), at most ", kMaxPageSize));
  }
  const size_t size = asked == 0 ? kDefaultPageSize : std::min(asked, kMaxPageSize);
  std::string filters = FiltersOf(request, method);
  const std::string token = r->GetString(request, token_field);
  After_ after;
  if (!token.empty()) {
    std::string plain;
    if (!absl::WebSafeBase64Unescape(token, &plain)) return BadToken(method, "is not a page token");
    std::vector<std::string> parts = absl::StrSplit(plain, absl::MaxSplits('\n', 4));
    if (parts.size() != 5 || parts[0] != kVersion || (parts[3] != "n" && parts[3] != "t")) {
      return BadToken(method, "is not a page token");
    }
    if (parts[1] != method) return BadToken(method, absl::StrCat("is a page token of ", parts[1], ", not of ", method));
    if (parts[2] != filters) {
      return BadToken(method, "was made for a list with other filters than this request's");
    }
    after.has_value = true;
    if (parts[3] == "n") {
      if (!absl::SimpleAtoi(parts[4], &after.key.number)) return BadToken(method, "is not a page token");
    } else {
      after.key.text = parts[4];
    }
  }
  return Pager(method, std::move(filters), size, std::move(after));
}

std::string Pager::TokenAfter(const PageKey& last) const {
  const bool text = !last.text.empty();
  return absl::WebSafeBase64Escape(absl::StrCat(kVersion, "\n", method_, "\n", filters_, "\n", text ? "t" : "n", "\n",
                                                text ? last.text : absl::StrCat(last.number)));
}

}  // namespace rdmad::rpc_internal
