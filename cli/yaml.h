// -o yaml: JSON text (protobuf's JSON mapping, as -o json prints it) as YAML, block style, keys in the JSON's
// order. The values are the JSON's: 64-bit integers stay quoted strings, enums their names. Pure.
//
// Thread-safety: stateless.
#ifndef RDMAD_CLI_YAML_H_
#define RDMAD_CLI_YAML_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rdmad::cli {

// `{"a": 1, "b": ["x"]}` -> "a: 1\nb:\n- x\n". A string is plain when YAML reads it back as the same string,
// else double-quoted with JSON's escapes. Malformed JSON is an error.
absl::StatusOr<std::string> JsonToYaml(absl::string_view json);

}  // namespace rdmad::cli

#endif  // RDMAD_CLI_YAML_H_
