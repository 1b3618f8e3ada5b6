#include "cli/sort.h"

#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "cli/parse.h"

namespace rdmad::cli {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

template <typename T>
int Cmp(const T& a, const T& b) {
  return a < b ? -1 : (b < a ? 1 : 0);
}

// Text with runs of digits compared as numbers (leading zeros ignored, then by length).
int Natural(absl::string_view a, absl::string_view b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (absl::ascii_isdigit(a[i]) && absl::ascii_isdigit(b[j])) {
      size_t ie = i, je = j;
      while (ie < a.size() && absl::ascii_isdigit(a[ie])) ie++;
      while (je < b.size() && absl::ascii_isdigit(b[je])) je++;
      absl::string_view x = a.substr(i, ie - i);
      absl::string_view y = b.substr(j, je - j);
      while (x.size() > 1 && x[0] == '0') x.remove_prefix(1);
      while (y.size() > 1 && y[0] == '0') y.remove_prefix(1);
      if (int c = x.size() != y.size() ? Cmp(x.size(), y.size()) : Cmp(x, y); c != 0) return c;
      i = ie, j = je;
      continue;
    }
    if (a[i] != b[j]) return Cmp(a[i], b[j]);
    i++, j++;
  }
  return Cmp(a.size() - i, b.size() - j);
}

struct Value {
  bool set = false;
  std::optional<long double> number;
  std::string text;
};

Value Get(const Message& message, const FieldPath& path) {
  const Message* m = &message;
  Value v;
  for (size_t k = 0; k + 1 < path.size(); k++) {
    if (!m->GetReflection()->HasField(*m, path[k])) return v;
    m = &m->GetReflection()->GetMessage(*m, path[k]);
  }
  const Reflection* r = m->GetReflection();
  const FieldDescriptor* f = path.back();
  v.set = true;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: v.number = r->GetInt32(*m, f); break;
    case FieldDescriptor::CPPTYPE_INT64: v.number = r->GetInt64(*m, f); break;
    case FieldDescriptor::CPPTYPE_UINT32: v.number = r->GetUInt32(*m, f); break;
    case FieldDescriptor::CPPTYPE_UINT64: v.number = r->GetUInt64(*m, f); break;
    case FieldDescriptor::CPPTYPE_DOUBLE: v.number = r->GetDouble(*m, f); break;
    case FieldDescriptor::CPPTYPE_FLOAT: v.number = r->GetFloat(*m, f); break;
    case FieldDescriptor::CPPTYPE_BOOL: v.number = r->GetBool(*m, f) ? 1 : 0; break;
    case FieldDescriptor::CPPTYPE_ENUM: v.number = r->GetEnumValue(*m, f); break;
    case FieldDescriptor::CPPTYPE_STRING: v.text = r->GetString(*m, f); break;
    case FieldDescriptor::CPPTYPE_MESSAGE: v.text = r->GetMessage(*m, f).ShortDebugString(); break;
  }
  return v;
}

}  // namespace

int CompareCells(absl::string_view a, absl::string_view b) {
  absl::StatusOr<uint64_t> x = ParseUint(a), y = ParseUint(b);
  if (x.ok() && y.ok()) return Cmp(*x, *y);
  x = ParseSize(a), y = ParseSize(b);
  if (x.ok() && y.ok()) return Cmp(*x, *y);
  return Natural(a, b);
}

absl::StatusOr<FieldPath> ParseFieldPath(const google::protobuf::Descriptor* descriptor, absl::string_view path) {
  absl::string_view p = absl::StripAsciiWhitespace(path);
  if (absl::ConsumePrefix(&p, "{") && !absl::ConsumeSuffix(&p, "}")) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "': a '{' without its '}'"));
  }
  absl::ConsumePrefix(&p, ".");
  FieldPath fields;
  const google::protobuf::Descriptor* d = descriptor;
  for (absl::string_view step : absl::StrSplit(p, '.')) {
    const FieldDescriptor* f = d == nullptr ? nullptr : d->FindFieldByName(std::string(step));
    if (f == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("'", path, "': ", descriptor->name(), " has no field '",
                                                     step, "' (the fields are -o json's)"));
    }
    if (f->is_repeated()) return absl::InvalidArgumentError(absl::StrCat("'", path, "': '", step, "' is a list"));
    fields.push_back(f);
    d = f->message_type();
  }
  return fields;
}

int CompareByField(const Message& a, const Message& b, const FieldPath& path) {
  const Value x = Get(a, path), y = Get(b, path);
  if (!x.set || !y.set) return Cmp(x.set, y.set);
  if (x.number && y.number) return Cmp(*x.number, *y.number);
  return CompareCells(x.text, y.text);
}

}  // namespace rdmad::cli
