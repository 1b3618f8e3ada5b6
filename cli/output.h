// rdmactl's output side: pure formatters. Human sizes and keys, aligned tables, protobuf -> JSON, the
// resource tables of `get`, and error lines. No I/O, no client calls.
//
// Thread-safety: stateless (Table is a plain value); every function may be called from any thread.
#ifndef RDMAD_CLI_OUTPUT_H_
#define RDMAD_CLI_OUTPUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include <google/protobuf/message.h>
#include <google/protobuf/repeated_field.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rdmad/v1/rdmad.pb.h"

namespace rdmad::cli {

// -o table|wide|json|name
enum class Format { kTable, kWide, kJson, kName };
absl::StatusOr<Format> ParseFormat(absl::string_view text);

// ---- Scalars

// Bytes for people: 512 -> "512B", 4096 -> "4KiB", 1048576 -> "1MiB", 1572864 -> "1.5MiB"; a size that is not a
// whole number of its unit is rounded to one decimal (1000000 -> "976.6KiB").
std::string FormatSize(uint64_t bytes);
// 0x1234 (lower case, no padding): keys and addresses.
std::string Hex(uint64_t value);
// "local-write,remote-read"; "none" for an empty list.
std::string AccessString(const google::protobuf::RepeatedField<int>& access);
// A JSON string literal, quotes included.
std::string JsonQuote(absl::string_view text);

// ---- Tables

// Columns left-aligned, separated by three spaces, header in capitals (kubectl's look). An empty cell prints
// as "<none>". No trailing spaces.
class Table {
 public:
  explicit Table(std::vector<std::string> header);
  void AddRow(std::vector<std::string> row);  // padded or cut to the header's width
  size_t rows() const { return rows_.size(); }
  std::string Render() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

Table DevicesTable(const google::protobuf::RepeatedPtrField<v1::Device>& devices, bool wide);
// One row per populated GID table entry of every port (shown by -o wide under the device table).
Table GidsTable(const google::protobuf::RepeatedPtrField<v1::Device>& devices);
Table PdsTable(const google::protobuf::RepeatedPtrField<v1::ProtectionDomain>& pds, bool wide);
Table MrsTable(const google::protobuf::RepeatedPtrField<v1::MemoryRegion>& mrs, bool wide);
Table MwsTable(const google::protobuf::RepeatedPtrField<v1::MemoryWindow>& mws, bool wide);
Table QpsTable(const google::protobuf::RepeatedPtrField<v1::QueuePair>& qps, bool wide);

// Short spellings of enum values used in tables and messages.
std::string MrStateString(int state);       // "READY", "UNUSABLE"
std::string QpStateString(int state);       // "RTS", ...
std::string MwTypeString(int type);         // "1", "2"
std::string ReregMethodString(int method);  // "native", "emulated"
// "anon", "anon-huge", "file:/dev/shm/x" or "file:/dev/shm/x+4KiB" (offset), "<none>".
std::string SourceString(const v1::MemorySource& source);

// ---- JSON

// The message as pretty JSON (proto field names, default-valued fields included), ending in a newline.
std::string ToJson(const google::protobuf::Message& message);
// {"items": [...]}, pretty, ending in a newline.
std::string ToJsonList(const std::vector<const google::protobuf::Message*>& items);
template <typename T>
std::string ToJsonList(const google::protobuf::RepeatedPtrField<T>& items) {
  std::vector<const google::protobuf::Message*> list;
  for (const T& item : items) list.push_back(&item);
  return ToJsonList(list);
}

// ---- Errors

// "error: <message> (field: X, verbs call: ibv_reg_mr, errno: EBUSY)" with only the parts the detail has (the
// field only if the message does not already start with "X: ");
// then, when they apply, a "note:" line for a failed rereg's outcome and a "hint:" line when rdmad could not
// be reached at `server` (UNAVAILABLE) or did not answer in time (DEADLINE_EXCEEDED). No trailing newline.
std::string FormatError(const absl::Status& status, const v1::ErrorDetail& detail, absl::string_view server);

}  // namespace rdmad::cli

#endif  // RDMAD_CLI_OUTPUT_H_
