// IsError: a test's check of an error status from rdmad's server code, by its code and the request field it
// names (server/common/status.h: the FieldOf payload, and the message that starts with the field):
//   EXPECT_TRUE(IsError(registry.CreatePd(bad), absl::StatusCode::kInvalidArgument, "device"));
//
// Threads: no state; call from any thread.
#ifndef RDMAD_TESTS_SUPPORT_SERVER_STATUS_H_
#define RDMAD_TESTS_SUPPORT_SERVER_STATUS_H_

#include <string>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/common/status.h"

namespace rdmad::test {

// EXPECT_TRUE(IsError(s, code, "field")): the code, the field payload (FieldOf), and the field named in the
// message. An empty `field` requires that the status carries none.
inline ::testing::AssertionResult IsError(const absl::Status& s, absl::StatusCode code, const std::string& field) {
  if (s.ok()) return ::testing::AssertionFailure() << "expected " << absl::StatusCodeToString(code) << ", got OK";
  if (s.code() != code) {
    return ::testing::AssertionFailure() << "expected " << absl::StatusCodeToString(code) << ", got " << s;
  }
  if (FieldOf(s) != field) {
    return ::testing::AssertionFailure() << "expected field '" << field << "', got '" << FieldOf(s) << "' in " << s;
  }
  // docs/api.md: the message starts with the request field at fault.
  if (!field.empty() && !absl::StartsWith(s.message(), absl::StrCat(field, ": "))) {
    return ::testing::AssertionFailure() << "the message does not start with '" << field << ": ': " << s;
  }
  return ::testing::AssertionSuccess();
}

template <typename T>
::testing::AssertionResult IsError(const absl::StatusOr<T>& s, absl::StatusCode code, const std::string& field) {
  return IsError(s.status(), code, field);
}

}  // namespace rdmad::test

#endif  // RDMAD_TESTS_SUPPORT_SERVER_STATUS_H_
