// Assertions on absl::Status and absl::StatusOr for GoogleTest, shared by the unit and the guest tests:
//   ASSERT_OK(expr), EXPECT_OK(expr)      expr (a Status or a StatusOr) is OK; on failure the message gives the
//                                         expression's text and the status
//   ASSERT_OK_AND_ASSIGN(decl, expr)      expr (a StatusOr) is OK, and its value is moved into `decl`, which
//                                         may declare it: ASSERT_OK_AND_ASSIGN(auto pd, registry.CreatePd(...))
//   StatusOf(x)                           the status of a Status or a StatusOr, for helpers that take either
// The ASSERT_ forms return from the calling function on failure, as GoogleTest's ASSERT_* do (so they go in
// functions that return void). ASSERT_OK_AND_ASSIGN expands to several statements (it declares `decl` in the
// enclosing scope): not the body of an unbraced if or loop, and at most one per line.
//
// Threads: no state of its own; GoogleTest's assertions may be made on any thread (a fatal one returns from the
// calling function only).
#ifndef RDMAD_TESTS_SUPPORT_STATUS_H_
#define RDMAD_TESTS_SUPPORT_STATUS_H_

#include <utility>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace rdmad::test {

inline absl::Status StatusOf(const absl::Status& s) { return s; }
template <typename T>
absl::Status StatusOf(const absl::StatusOr<T>& s) {
  return s.status();
}

}  // namespace rdmad::test

#define ASSERT_OK(expr)                                                                    \
  do {                                                                                     \
    const ::absl::Status rdmad_test_status_ = ::rdmad::test::StatusOf(expr);               \
    if (!rdmad_test_status_.ok()) FAIL() << #expr << " is not OK: " << rdmad_test_status_; \
  } while (0)

#define EXPECT_OK(expr)                                                                           \
  do {                                                                                            \
    const ::absl::Status rdmad_test_status_ = ::rdmad::test::StatusOf(expr);                      \
    if (!rdmad_test_status_.ok()) ADD_FAILURE() << #expr << " is not OK: " << rdmad_test_status_; \
  } while (0)

// The temporary's name carries the line number: ASSERT_OK_AND_ASSIGNs on other lines of the same scope do not
// collide with it. The expression's text is taken here, before its macros expand.
#define ASSERT_OK_AND_ASSIGN(decl, expr) \
  RDMAD_TEST_ASSERT_OK_AND_ASSIGN_(RDMAD_TEST_CONCAT_(rdmad_test_statusor_, __LINE__), decl, expr, #expr)
#define RDMAD_TEST_ASSERT_OK_AND_ASSIGN_(tmp, decl, expr, text)    \
  auto tmp = (expr);                                               \
  if (!tmp.ok()) FAIL() << text << " is not OK: " << tmp.status(); \
  decl = std::move(tmp).value()

#define RDMAD_TEST_CONCAT_(a, b) RDMAD_TEST_CONCAT_INNER_(a, b)
#define RDMAD_TEST_CONCAT_INNER_(a, b) a##b

#endif  // RDMAD_TESTS_SUPPORT_STATUS_H_
