// Unit tests of the status helpers (server/common/status.h) and of the structured error detail across
// gRPC: server ToGrpc (server/rpc/status.h) -> client FromGrpc / Detail (client/client.h).
#include "server/common/status.h"

#include <cerrno>
#include <cstring>
#include <string>

#include <gmock/gmock.h>
#include <grpcpp/support/status.h>
#include <gtest/gtest.h>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "rdmad/v1/rdmad.pb.h"
#include "server/rpc/status.h"

namespace rdmad {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

absl::Status WithOutcome(absl::Status s, v1::ReregOutcome outcome) {
  s.SetPayload(kReregOutcomePayload, absl::Cord(absl::StrCat(static_cast<int>(outcome))));
  return s;
}

// ---------------------------------------------------------------------------------------------------------
// ErrnoError

TEST(ErrnoErrorTest, CarriesCallErrnoAndAReadableMessage) {
  absl::Status s = ErrnoError("ibv_dereg_mr", EBUSY, "mrs/3");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), absl::StrCat("mrs/3: ibv_dereg_mr: ", std::strerror(EBUSY), " (errno 16, EBUSY)"));
  EXPECT_EQ(CallOf(s), "ibv_dereg_mr");
  EXPECT_EQ(ErrnoOf(s), EBUSY);
  EXPECT_EQ(FieldOf(s), "");
  EXPECT_FALSE(s.GetPayload(kFieldPayload).has_value());
}

TEST(ErrnoErrorTest, WithoutContextTheMessageStartsWithTheCall) {
  absl::Status s = ErrnoError("ibv_reg_mr", ENOMEM);
  EXPECT_EQ(s.message(), absl::StrCat("ibv_reg_mr: ", std::strerror(ENOMEM), " (errno 12, ENOMEM)"));
}

TEST(ErrnoErrorTest, WithAFieldTheMessageStartsWithIt) {
  absl::Status s = ErrnoError("mmap", ENOMEM, "allocating memory", "source.anonymous.size");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), StartsWith("source.anonymous.size: allocating memory: mmap: "));
  EXPECT_EQ(FieldOf(s), "source.anonymous.size");
  EXPECT_EQ(CallOf(s), "mmap");
  EXPECT_EQ(ErrnoOf(s), ENOMEM);
}

TEST(ErrnoErrorTest, TheCodeFollowsTheErrno) {
  struct Case {
    int err;
    absl::StatusCode code;
  };
  for (const Case& c : {Case{EBUSY, absl::StatusCode::kFailedPrecondition},
                        Case{ENOMEM, absl::StatusCode::kResourceExhausted},
                        Case{ENOENT, absl::StatusCode::kNotFound},
                        Case{EOPNOTSUPP, absl::StatusCode::kUnimplemented},
                        Case{EACCES, absl::StatusCode::kPermissionDenied},
                        Case{EPERM, absl::StatusCode::kPermissionDenied},
                        Case{EINVAL, absl::StatusCode::kInvalidArgument},
                        Case{ETIMEDOUT, absl::StatusCode::kDeadlineExceeded},
                        Case{0, absl::StatusCode::kInternal}}) {
    SCOPED_TRACE(c.err);
    absl::Status s = ErrnoError("call", c.err);
    EXPECT_EQ(s.code(), c.code) << s;
    EXPECT_EQ(ErrnoOf(s), c.err);
    EXPECT_FALSE(s.ok());
  }
}

TEST(ErrnoErrorTest, ErrnoZeroIsAnInternalErrorNeverOk) {
  absl::Status s = ErrnoError("ibv_alloc_pd", 0, "no reason given");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(CallOf(s), "ibv_alloc_pd");
  EXPECT_EQ(ErrnoOf(s), 0);
  EXPECT_THAT(std::string(s.message()), HasSubstr("errno 0"));
}

TEST(ErrnoErrorTest, AChosenCodeKeepsTheErrno) {
  absl::Status s = ErrnoError(absl::StatusCode::kNotFound, "realpath", ENOTDIR, "/a/b", "source.file.path");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ErrnoOf(s), ENOTDIR);
  EXPECT_EQ(CallOf(s), "realpath");
  EXPECT_EQ(FieldOf(s), "source.file.path");
  EXPECT_THAT(std::string(s.message()), StartsWith("source.file.path: /a/b: realpath: "));
  EXPECT_THAT(std::string(s.message()), HasSubstr("ENOTDIR"));
}

TEST(ErrnoNameTest, NamesKnownValuesAndNumbersUnknownOnes) {
  EXPECT_EQ(ErrnoName(EBUSY), "EBUSY");
  EXPECT_EQ(ErrnoName(ENOMEM), "ENOMEM");
  EXPECT_EQ(ErrnoName(ENOENT), "ENOENT");
  EXPECT_EQ(ErrnoName(EOPNOTSUPP), "EOPNOTSUPP");
  EXPECT_EQ(ErrnoName(ETIMEDOUT), "ETIMEDOUT");
  EXPECT_EQ(ErrnoName(1234), "errno 1234");
  EXPECT_EQ(ErrnoName(0), "errno 0");
}

// ---------------------------------------------------------------------------------------------------------
// Field errors, WithField, WithContext

TEST(FieldErrorTest, PrefixesTheMessageAndCarriesTheField) {
  absl::Status s = InvalidArgument("size", "must be > 0");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "size: must be > 0");
  EXPECT_EQ(FieldOf(s), "size");
  EXPECT_EQ(CallOf(s), "");
  EXPECT_EQ(ErrnoOf(s), 0);
  EXPECT_EQ(NotFound("name", "x").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(FailedPrecondition("mr", "x").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(OutOfRange("offset", "x").code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(FieldOf(OutOfRange("offset", "x")), "offset");
  // Without a field: plain message, no payload.
  absl::Status plain = FieldError(absl::StatusCode::kInternal, "", "boom");
  EXPECT_EQ(plain.message(), "boom");
  EXPECT_FALSE(plain.GetPayload(kFieldPayload).has_value());
}

TEST(WithFieldTest, AddsAFieldAndKeepsEveryPayload) {
  absl::Status s = WithOutcome(ErrnoError("ibv_reg_mr", ENOMEM, "ctx"), v1::OUTCOME_OLD_MR_VALID);
  absl::Status f = WithField(s, "source");
  EXPECT_EQ(f.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(f.message(), absl::StrCat("source: ", s.message()));
  EXPECT_EQ(FieldOf(f), "source");
  EXPECT_EQ(CallOf(f), "ibv_reg_mr");
  EXPECT_EQ(ErrnoOf(f), ENOMEM);
  EXPECT_EQ(DetailOf(f).rereg_outcome(), v1::OUTCOME_OLD_MR_VALID);
}

TEST(WithFieldTest, KeepsAnExistingFieldAndIgnoresOkAndEmpty) {
  absl::Status s = InvalidArgument("access", "bad");
  absl::Status f = WithField(s, "source");
  EXPECT_EQ(f, s);
  EXPECT_EQ(FieldOf(f), "access");
  EXPECT_TRUE(WithField(absl::OkStatus(), "source").ok());
  absl::Status no_field = absl::InternalError("x");
  EXPECT_EQ(WithField(no_field, ""), no_field);
}

TEST(WithContextTest, PrefixesTheMessageKeepingCodeAndPayloads) {
  absl::Status s = WithOutcome(ErrnoError("ibv_rereg_mr", EIO, {}, "pd"), v1::OUTCOME_MR_UNUSABLE);
  absl::Status c = WithContext(s, "rereg mrs/4");
  EXPECT_EQ(c.code(), s.code());
  EXPECT_EQ(c.message(), absl::StrCat("rereg mrs/4: ", s.message()));
  EXPECT_EQ(FieldOf(c), "pd");
  EXPECT_EQ(CallOf(c), "ibv_rereg_mr");
  EXPECT_EQ(ErrnoOf(c), EIO);
  EXPECT_EQ(DetailOf(c).rereg_outcome(), v1::OUTCOME_MR_UNUSABLE);
  // Nested contexts stack outermost first.
  EXPECT_THAT(std::string(WithContext(c, "outer").message()), StartsWith("outer: rereg mrs/4: pd: "));
  EXPECT_TRUE(WithContext(absl::OkStatus(), "ctx").ok());
  EXPECT_EQ(WithContext(s, ""), s);
}

TEST(PayloadReadersTest, AnswerEmptyForAPlainStatus) {
  absl::Status s = absl::UnknownError("x");
  EXPECT_EQ(FieldOf(s), "");
  EXPECT_EQ(CallOf(s), "");
  EXPECT_EQ(ErrnoOf(s), 0);
  EXPECT_EQ(ErrnoOf(absl::OkStatus()), 0);
  absl::Status junk = absl::UnknownError("x");
  junk.SetPayload(kErrnoPayload, absl::Cord("not a number"));
  EXPECT_EQ(ErrnoOf(junk), 0);
}

// ---------------------------------------------------------------------------------------------------------
// Early-return macros

absl::StatusOr<int> Half(int v) {
  if (v % 2) return InvalidArgument("v", "odd");
  return v / 2;
}
absl::StatusOr<int> Quarter(int v) {
  RDMAD_ASSIGN_OR_RETURN(int h, Half(v));
  RDMAD_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}
absl::Status CheckEven(int v) {
  RDMAD_RETURN_IF_ERROR(Half(v).status());
  return absl::OkStatus();
}

TEST(MacrosTest, ReturnTheFirstError) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(FieldOf(Quarter(6).status()), "v");
  EXPECT_EQ(Quarter(7).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(FieldOf(CheckEven(5)), "v");
}

// ---------------------------------------------------------------------------------------------------------
// DetailOf, ToGrpc, and the client's FromGrpc / Detail

TEST(DetailOfTest, CollectsEveryPayload) {
  v1::ErrorDetail d = DetailOf(WithOutcome(ErrnoError("ibv_rereg_mr", ENOMEM, "ctx", "source"),
                                           v1::OUTCOME_OLD_MR_VALID));
  EXPECT_EQ(d.field(), "source");
  EXPECT_EQ(d.verbs_call(), "ibv_rereg_mr");
  EXPECT_EQ(d.errno_value(), ENOMEM);
  EXPECT_EQ(d.errno_name(), "ENOMEM");
  EXPECT_EQ(d.rereg_outcome(), v1::OUTCOME_OLD_MR_VALID);
  // Nothing to say: everything empty (no errno name for errno 0).
  v1::ErrorDetail none = DetailOf(absl::InternalError("x"));
  EXPECT_EQ(none.field(), "");
  EXPECT_EQ(none.verbs_call(), "");
  EXPECT_EQ(none.errno_value(), 0);
  EXPECT_EQ(none.errno_name(), "");
  EXPECT_EQ(none.rereg_outcome(), v1::REREG_OUTCOME_UNSPECIFIED);
}

TEST(ToGrpcTest, OkIsOk) {
  EXPECT_TRUE(ToGrpc(absl::OkStatus()).ok());
  EXPECT_TRUE(client::FromGrpc(grpc::Status::OK).ok());
}

TEST(ToGrpcTest, CarriesAnRpcStatusWithOneErrorDetail) {
  absl::Status s = ErrnoError("ibv_dereg_mr", EBUSY, "mrs/1", "name");
  grpc::Status g = ToGrpc(s);
  EXPECT_EQ(static_cast<int>(g.error_code()), static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(g.error_message(), std::string(s.message()));
  v1::RpcStatus rpc;
  ASSERT_TRUE(rpc.ParseFromString(g.error_details()));
  EXPECT_EQ(rpc.code(), static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(rpc.message(), std::string(s.message()));
  ASSERT_EQ(rpc.details_size(), 1);
  EXPECT_EQ(rpc.details(0).type_url(), "type.googleapis.com/rdmad.v1.ErrorDetail");
  v1::ErrorDetail d;
  ASSERT_TRUE(rpc.details(0).UnpackTo(&d));
  EXPECT_EQ(d.field(), "name");
  EXPECT_EQ(d.verbs_call(), "ibv_dereg_mr");
  EXPECT_EQ(d.errno_value(), EBUSY);
  EXPECT_EQ(d.errno_name(), "EBUSY");
}

TEST(ToGrpcTest, CutsAHugeMessageOnACharacterBoundary) {
  // A request field quoted whole would make the trailers too big for a client (found by the API fuzzer).
  // "name: " and 1017 'a' are 1023 bytes; the 1024-byte cut falls inside the "\xc3\xa9" that follows.
  const std::string huge = std::string(1017, 'a') + "\xc3\xa9\xc3\xa9" + std::string(70000, 'b');
  grpc::Status g = ToGrpc(InvalidArgument("name", huge));
  EXPECT_EQ(g.error_message(), "name: " + std::string(1017, 'a') + "... (" + std::to_string(huge.size() + 6) + " bytes)");
  v1::RpcStatus rpc;
  ASSERT_TRUE(rpc.ParseFromString(g.error_details()));
  EXPECT_EQ(rpc.message(), g.error_message());
  v1::ErrorDetail d;
  ASSERT_TRUE(rpc.details(0).UnpackTo(&d));
  EXPECT_EQ(d.field(), "name");
  // A message of ordinary length is untouched.
  EXPECT_EQ(ToGrpc(InvalidArgument("size", "must be > 0")).error_message(), "size: must be > 0");
}

TEST(RoundTripTest, ServerStatusToClientKeepsEverything) {
  absl::Status s = WithContext(WithOutcome(ErrnoError("ibv_rereg_mr", EIO, "rereg mrs/9", "source.file.length"),
                                           v1::OUTCOME_MR_UNUSABLE),
                               "outer");
  absl::Status c = client::FromGrpc(ToGrpc(s));
  EXPECT_EQ(c.code(), s.code());
  EXPECT_EQ(c.message(), s.message());
  v1::ErrorDetail d = client::Detail(c);
  EXPECT_EQ(d.field(), "source.file.length");
  EXPECT_EQ(d.verbs_call(), "ibv_rereg_mr");
  EXPECT_EQ(d.errno_value(), EIO);
  EXPECT_EQ(d.errno_name(), "EIO");
  EXPECT_EQ(d.rereg_outcome(), v1::OUTCOME_MR_UNUSABLE);
}

TEST(RoundTripTest, EveryCodeSurvives) {
  for (int code = 1; code <= 16; ++code) {
    SCOPED_TRACE(code);
    absl::Status s = FieldError(static_cast<absl::StatusCode>(code), "f", "m");
    absl::Status c = client::FromGrpc(ToGrpc(s));
    EXPECT_EQ(c.code(), s.code());
    EXPECT_EQ(c.message(), "f: m");
    EXPECT_EQ(client::Detail(c).field(), "f");
  }
}

TEST(RoundTripTest, AFieldOnlyErrorAndAPlainError) {
  absl::Status c = client::FromGrpc(ToGrpc(OutOfRange("offset", "past the end")));
  EXPECT_EQ(c.code(), absl::StatusCode::kOutOfRange);
  v1::ErrorDetail d = client::Detail(c);
  EXPECT_EQ(d.field(), "offset");
  EXPECT_EQ(d.verbs_call(), "");
  EXPECT_EQ(d.errno_value(), 0);
  EXPECT_EQ(d.errno_name(), "");
  EXPECT_EQ(d.rereg_outcome(), v1::REREG_OUTCOME_UNSPECIFIED);

  v1::ErrorDetail plain = client::Detail(client::FromGrpc(ToGrpc(absl::UnavailableError("down"))));
  EXPECT_EQ(plain.field(), "");
  EXPECT_EQ(plain.errno_value(), 0);
}

TEST(FromGrpcTest, AStatusWithoutOrWithBrokenDetailsHasAnEmptyDetail) {
  absl::Status bare = client::FromGrpc(grpc::Status(grpc::StatusCode::NOT_FOUND, "nope"));
  EXPECT_EQ(bare.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(bare.message(), "nope");
  EXPECT_EQ(client::Detail(bare).field(), "");
  absl::Status broken = client::FromGrpc(grpc::Status(grpc::StatusCode::INTERNAL, "x", "\xff\xff\xff garbage"));
  EXPECT_EQ(broken.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(client::Detail(broken).verbs_call(), "");
  // A status that never crossed gRPC has no client detail either.
  EXPECT_EQ(client::Detail(ErrnoError("x", EIO)).errno_value(), 0);
}

}  // namespace
}  // namespace rdmad
