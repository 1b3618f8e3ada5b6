#include "cli/selector.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace rdmad::cli {
namespace {

std::string Trim(absl::string_view s) { return std::string(absl::StripAsciiWhitespace(s)); }

// Splits at commas outside parentheses.
std::vector<std::string> SplitTop(absl::string_view text) {
  std::vector<std::string> parts(1);
  int depth = 0;
  for (char c : text) {
    if (c == '(') depth++;
    if (c == ')') depth--;
    if (c == ',' && depth == 0) {
      parts.emplace_back();
    } else {
      parts.back() += c;
    }
  }
  return parts;
}

absl::Status Bad(absl::string_view requirement, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("'", requirement, "': ", why));
}

bool KeyOk(absl::string_view key) { return !key.empty() && key.find_first_of("=!(),") == absl::string_view::npos; }

}  // namespace

std::map<std::string, std::string> ParseLabel(absl::string_view label) {
  std::map<std::string, std::string> pairs;
  for (absl::string_view item : absl::StrSplit(label, ',')) {
    const size_t eq = item.find('=');
    const std::string key = Trim(item.substr(0, eq));
    if (key.empty()) continue;
    pairs[key] = eq == absl::string_view::npos ? "" : Trim(item.substr(eq + 1));
  }
  return pairs;
}

absl::StatusOr<Selector> Selector::Parse(absl::string_view text) {
  Selector s;
  if (Trim(text).empty()) return absl::InvalidArgumentError("empty selector (e.g. app=web, tier!=db, 'env in (a,b)')");
  for (const std::string& part : SplitTop(text)) {
    const std::string r = Trim(part);
    Requirement q;
    if (r.empty()) return Bad(text, "an empty requirement (two commas, or one at an end)");
    if (r[0] == '!' && r.find('=') == std::string::npos) {
      q.key = Trim(r.substr(1));
      q.op = Op::kMissing;
    } else if (const size_t ne = r.find("!="); ne != std::string::npos) {
      q.key = Trim(r.substr(0, ne));
      q.op = Op::kNe;
      q.values = {Trim(r.substr(ne + 2))};
    } else if (const size_t eq = r.find('='); eq != std::string::npos) {
      const size_t skip = r.compare(eq, 2, "==") == 0 ? 2 : 1;
      q.key = Trim(r.substr(0, eq));
      q.op = Op::kEq;
      q.values = {Trim(r.substr(eq + skip))};
    } else if (const size_t open = r.find('('); open != std::string::npos) {
      if (r.back() != ')') return Bad(r, "a set ends with ')': key in (a,b)");
      absl::string_view head = absl::StripAsciiWhitespace(absl::string_view(r).substr(0, open));
      if (absl::ConsumeSuffix(&head, " notin") || head == "notin") {
        q.op = Op::kNotIn;
      } else if (absl::ConsumeSuffix(&head, " in") || head == "in") {
        q.op = Op::kIn;
      } else {
        return Bad(r, "a set goes with 'in' or 'notin': key in (a,b)");
      }
      q.key = head == "in" || head == "notin" ? "" : Trim(head);
      for (absl::string_view v : absl::StrSplit(absl::string_view(r).substr(open + 1, r.size() - open - 2), ',')) {
        if (Trim(v).empty()) return Bad(r, "an empty value in the set");
        q.values.push_back(Trim(v));
      }
    } else {
      q.key = r;
      q.op = Op::kExists;
    }
    if (!KeyOk(q.key)) return Bad(r, "a key is required, without '=', '!', '(', ')' or ','");
    for (const std::string& v : q.values) {
      if (v.find_first_of("=!()") != std::string::npos) return Bad(r, "a value has no '=', '!', '(' or ')'");
    }
    s.requirements_.push_back(std::move(q));
  }
  return s;
}

bool Selector::Matches(absl::string_view label) const {
  const std::map<std::string, std::string> pairs = ParseLabel(label);
  for (const Requirement& q : requirements_) {
    auto it = pairs.find(q.key);
    const bool has = it != pairs.end();
    const bool in = has && std::find(q.values.begin(), q.values.end(), it->second) != q.values.end();
    bool ok = false;
    switch (q.op) {
      case Op::kEq:
      case Op::kIn: ok = in; break;
      case Op::kNe:
      case Op::kNotIn: ok = !in; break;
      case Op::kExists: ok = has; break;
      case Op::kMissing: ok = !has; break;
    }
    if (!ok) return false;
  }
  return true;
}

}  // namespace rdmad::cli
