// Helpers shared by rdmactl's command files (commands*.cc): usage errors that name their
// flag, and printing one result or a list in the chosen output format. Private to cli/.
//
// Thread-safety: as commands.h (single-threaded).
#ifndef RDMAD_CLI_COMMAND_UTIL_H_
#define RDMAD_CLI_COMMAND_UTIL_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "cli/commands.h"

namespace rdmad::cli::internal {

// "--size: '1.5.2MB' is not a size ..." : parser errors name the flag they came from.
inline absl::Status FlagError(absl::string_view flag, const absl::Status& status) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", status.message()));
}
inline absl::Status UsageError(absl::string_view message) { return absl::InvalidArgumentError(message); }

inline absl::StatusOr<std::string> FlagName(absl::string_view flag, Kind kind, const std::string& text) {
  absl::StatusOr<std::string> name = NormalizeName(kind, text);
  if (!name.ok()) return FlagError(flag, name.status());
  return name;
}

inline absl::StatusOr<uint64_t> FlagUint(absl::string_view flag, const std::string& text, uint64_t max) {
  absl::StatusOr<uint64_t> n = ParseUint(text, max);
  if (!n.ok()) return FlagError(flag, n.status());
  return n;
}

#define RDMACTL_ASSIGN_OR_RETURN(lhs, expr)                                                                 \
  auto RDMACTL_CONCAT_(rdmactl_or_, __LINE__) = (expr);                                                     \
  if (!RDMACTL_CONCAT_(rdmactl_or_, __LINE__).ok()) return RDMACTL_CONCAT_(rdmactl_or_, __LINE__).status(); \
  lhs = std::move(RDMACTL_CONCAT_(rdmactl_or_, __LINE__)).value()
#define RDMACTL_CONCAT_(a, b) RDMACTL_CONCAT_IMPL_(a, b)
#define RDMACTL_CONCAT_IMPL_(a, b) a##b
#define RDMACTL_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    absl::Status rdmactl_status_ = (expr);             \
    if (!rdmactl_status_.ok()) return rdmactl_status_; \
  } while (0)

// Output of a command that returns one resource (or a response about one).
inline int PrintResult(Context& ctx, const google::protobuf::Message& result, const std::vector<std::string>& names,
                       const std::string& message) {
  switch (ctx.format()) {
    case Format::kJson: ctx.out() << ToJson(result); break;
    case Format::kName:
      for (const std::string& n : names) ctx.out() << n << "\n";
      break;
    case Format::kTable:
    case Format::kWide: ctx.out() << message << "\n"; break;
  }
  return kExitOk;
}

template <typename T, typename TableFn>
int PrintList(Context& ctx, const google::protobuf::RepeatedPtrField<T>& items, TableFn table,
              const std::string& scope) {
  const bool wide = ctx.format() == Format::kWide;
  switch (ctx.format()) {
    case Format::kJson:
      ctx.out() << ToJsonList(items);
      return kExitOk;  // an empty list is a valid answer: nothing on stderr
    case Format::kName:
      for (const T& item : items) ctx.out() << item.name() << "\n";
      break;
    case Format::kTable:
    case Format::kWide:
      if (!items.empty()) ctx.out() << table(items, wide).Render();
      break;
  }
  if (items.empty()) ctx.err() << "No resources found" << scope << ".\n";
  return kExitOk;
}

template <typename T, typename TableFn>
int PrintOne(Context& ctx, const T& item, TableFn table) {
  google::protobuf::RepeatedPtrField<T> items;
  *items.Add() = item;
  if (ctx.format() == Format::kJson) {
    ctx.out() << ToJson(item);
    return kExitOk;
  }
  return PrintList(ctx, items, table, "");
}

}  // namespace rdmad::cli::internal

#endif  // RDMAD_CLI_COMMAND_UTIL_H_
