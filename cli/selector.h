// -l/--selector: kubectl's label selectors over the free-text `label` of PDs and channels. Pure.
//
// A label is read as comma-separated items: `k=v` gives key k the value v, an item without '=' is a key with
// no value (so a label without '=' at all, "demo", is the one key "demo"). Spaces around keys and values are
// dropped. A selector is comma-separated requirements, all of which must hold:
//   key=value, key==value   the key is there with that value
//   key!=value              the key is missing, or has another value
//   key                     the key is there (with any value, or none)
//   !key                    the key is missing
//   key in (a,b)            the key is there with one of the values
//   key notin (a,b)         the key is missing, or has none of the values
// An empty value matches a key without one ("key=" matches the label "key").
//
// Thread-safety: a Selector is immutable after Parse.
#ifndef RDMAD_CLI_SELECTOR_H_
#define RDMAD_CLI_SELECTOR_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rdmad::cli {

// "app=web, tier = db,demo" -> {app: web, demo: "", tier: db}; a later item with the same key wins.
std::map<std::string, std::string> ParseLabel(absl::string_view label);

class Selector {
 public:
  // INVALID_ARGUMENT quoting the requirement at fault: an empty one, a missing key, an unclosed or empty set.
  static absl::StatusOr<Selector> Parse(absl::string_view text);
  bool Matches(absl::string_view label) const;

 private:
  enum class Op { kEq, kNe, kExists, kMissing, kIn, kNotIn };
  struct Requirement {
    std::string key;
    Op op;
    std::vector<std::string> values;
  };
  std::vector<Requirement> requirements_;
};

}  // namespace rdmad::cli

#endif  // RDMAD_CLI_SELECTOR_H_
