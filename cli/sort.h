// --sort-by: ordering a list by one of its table's columns or by a field of its JSON. Pure.
//
// Cells compare as numbers when both are (decimal, or 0x hex: keys), then as sizes when both are ("4MiB" <
// "1GiB"), else as text with runs of digits compared as numbers ("mrs/2" < "mrs/10"). A field compares by its
// value: numbers as numbers, enums by number, text as cells do; a field inside a message that is not set
// sorts first.
//
// Thread-safety: stateless.
#ifndef RDMAD_CLI_SORT_H_
#define RDMAD_CLI_SORT_H_

#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rdmad::cli {

// -1, 0 or 1.
int CompareCells(absl::string_view a, absl::string_view b);

// ".binding.mr", "{.binding.mr}" or "binding.mr" (proto field names, as in -o json) -> the fields from the
// message's down; a field that does not exist, or a step through a list or past a scalar, is an error naming it.
using FieldPath = std::vector<const google::protobuf::FieldDescriptor*>;
absl::StatusOr<FieldPath> ParseFieldPath(const google::protobuf::Descriptor* descriptor, absl::string_view path);
// -1, 0 or 1: `a` and `b` by the field at `path` (both of the path's message type).
int CompareByField(const google::protobuf::Message& a, const google::protobuf::Message& b, const FieldPath& path);

}  // namespace rdmad::cli

#endif  // RDMAD_CLI_SORT_H_
