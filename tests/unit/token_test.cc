// Unit tests of the connection-token and reject wire formats (server/cm/token.h): layouts, round trips,
// the 56-byte bound, IB zero padding, and every reason DecodeToken gives. TokenStore: token_store_test.cc.
#include "server/cm/token.h"

#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "tests/support/status.h"

namespace rdmad::cm {
namespace {

Token SampleToken(TokenKind kind = TokenKind::kConnect, uint64_t id = 0x0102030405060708) {
  Token t;
  t.kind = kind;
  t.id = id;
  for (size_t i = 0; i < t.secret.size(); ++i) t.secret[i] = static_cast<uint8_t>(0xA0 + i);
  return t;
}

// The reason DecodeToken gives; a test failure if the bytes decoded.
RejectReason DecodeFailure(const std::string& bytes) {
  DecodedToken d = DecodeToken(bytes);
  EXPECT_FALSE(d.ok()) << "decoded unexpectedly";
  EXPECT_FALSE(d.detail.empty());
  return d.reason;
}

std::string Padded(std::string bytes, size_t to) {
  bytes.resize(to, '\0');
  return bytes;
}

TEST(TokenFormat, LayoutAndSize) {
  const std::string b = EncodeToken(SampleToken(TokenKind::kGrant));
  ASSERT_EQ(b.size(), kTokenSize);
  EXPECT_LE(b.size(), kConnectPrivateDataMax);
  EXPECT_EQ(b.substr(0, 4), "RDTK");
  EXPECT_EQ(b[4], 1);  // version
  EXPECT_EQ(b[5], 2);  // kind grant
  EXPECT_EQ(b.substr(6, 2), std::string(2, '\0'));
  EXPECT_EQ(b.substr(8, 8), std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8));  // big-endian id
  EXPECT_EQ(static_cast<uint8_t>(b[16]), 0xA0);
  EXPECT_EQ(static_cast<uint8_t>(b[31]), 0xAF);
}

TEST(TokenFormat, RoundTripsIncludingIbZeroPadding) {
  for (TokenKind kind : {TokenKind::kConnect, TokenKind::kGrant}) {
    for (uint64_t id : {uint64_t{0}, uint64_t{1}, uint64_t{0xFFFFFFFFFFFFFFFF}}) {
      const Token t = SampleToken(kind, id);
      const std::string b = EncodeToken(t);
      EXPECT_LE(b.size(), kConnectPrivateDataMax);
      for (const std::string& in : {b, Padded(b, kConnectPrivateDataMax)}) {
        DecodedToken d = DecodeToken(in);
        ASSERT_TRUE(d.ok()) << d.detail;
        EXPECT_EQ(d.token->version, kTokenVersion);
        EXPECT_EQ(d.token->kind, kind);
        EXPECT_EQ(d.token->id, id);
        EXPECT_EQ(d.token->secret, t.secret);
      }
    }
  }
}

TEST(TokenFormat, Missing) {
  EXPECT_EQ(DecodeFailure(""), RejectReason::kMissing);
  // What the IB CM delivers when the client sent no private data.
  EXPECT_EQ(DecodeFailure(std::string(kConnectPrivateDataMax, '\0')), RejectReason::kMissing);
}

TEST(TokenFormat, Malformed) {
  const std::string good = EncodeToken(SampleToken());
  EXPECT_EQ(DecodeFailure("hello, rdmad"), RejectReason::kMalformed);  // wrong magic
  EXPECT_EQ(DecodeFailure(std::string(40, '\x5a')), RejectReason::kMalformed);
  std::string bad_magic = good;
  bad_magic[3] = 'X';
  EXPECT_EQ(DecodeFailure(bad_magic), RejectReason::kMalformed);
  // Truncated, at every length short of a whole token.
  for (size_t n = 1; n < kTokenSize; ++n) {
    EXPECT_EQ(DecodeFailure(good.substr(0, n)), RejectReason::kMalformed) << n << " bytes";
  }
  // Oversized: more than a connect request can carry, even if the rest is zeros.
  EXPECT_EQ(DecodeFailure(Padded(good, kConnectPrivateDataMax + 1)), RejectReason::kMalformed);
  // Wrong length: anything but zero padding after the token.
  std::string trailing = Padded(good, kConnectPrivateDataMax);
  trailing[kTokenSize + 5] = 1;
  EXPECT_EQ(DecodeFailure(trailing), RejectReason::kMalformed);
  EXPECT_EQ(DecodeFailure(good + "x"), RejectReason::kMalformed);
  // Nonzero reserved bits, each byte.
  for (size_t at : {6, 7}) {
    std::string reserved = good;
    reserved[at] = 0x01;
    EXPECT_EQ(DecodeFailure(reserved), RejectReason::kMalformed) << "byte " << at;
  }
  // Unknown kinds.
  for (char kind : {'\0', '\x03', '\xff'}) {
    std::string k = good;
    k[5] = kind;
    EXPECT_EQ(DecodeFailure(k), RejectReason::kMalformed) << int{kind};
  }
}

TEST(TokenFormat, WrongVersion) {
  for (char version : {'\0', '\x02', '\xff'}) {
    std::string b = EncodeToken(SampleToken());
    b[4] = version;
    EXPECT_EQ(DecodeFailure(b), RejectReason::kWrongVersion);
    // A later version may have another length: the version is judged first.
    EXPECT_EQ(DecodeFailure(b.substr(0, 5)), RejectReason::kWrongVersion);
    EXPECT_EQ(DecodeFailure(Padded(b, 50) + "\x07"), RejectReason::kWrongVersion);
  }
}

TEST(RejectFormat, LayoutRoundTripAndPadding) {
  const std::string b = EncodeReject({RejectReason::kExpired, 17});
  ASSERT_EQ(b.size(), kRejectSize);
  EXPECT_EQ(b, std::string("RDRJ\x01\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\x11", 16));
  for (const std::string& in : {b, Padded(b, kRejectPrivateDataMax)}) {
    ASSERT_OK_AND_ASSIGN(Reject r, DecodeReject(in));
    EXPECT_EQ(r.reason, RejectReason::kExpired);
    EXPECT_EQ(r.token_id, 17u);
  }
}

TEST(RejectFormat, EveryReasonRoundTrips) {
  for (uint16_t n = 1; n <= 10; ++n) {
    const auto reason = static_cast<RejectReason>(n);
    ASSERT_OK_AND_ASSIGN(Reject r, DecodeReject(EncodeReject({reason, 0})));
    EXPECT_EQ(r.reason, reason);
    EXPECT_FALSE(absl::StartsWith(RejectReasonName(reason), "REASON_")) << n;
  }
  // A reason from a newer rdmad survives decoding and still has a name.
  ASSERT_OK_AND_ASSIGN(Reject r, DecodeReject(EncodeReject({static_cast<RejectReason>(300), 0})));
  EXPECT_EQ(static_cast<uint16_t>(r.reason), 300);
  EXPECT_EQ(RejectReasonName(r.reason), "REASON_300");
}

TEST(RejectFormat, Names) {
  EXPECT_EQ(RejectReasonName(RejectReason::kMissing), "TOKEN_MISSING");
  EXPECT_EQ(RejectReasonName(RejectReason::kMalformed), "TOKEN_MALFORMED");
  EXPECT_EQ(RejectReasonName(RejectReason::kWrongVersion), "TOKEN_WRONG_VERSION");
  EXPECT_EQ(RejectReasonName(RejectReason::kUnknown), "TOKEN_UNKNOWN");
  EXPECT_EQ(RejectReasonName(RejectReason::kExpired), "TOKEN_EXPIRED");
  EXPECT_EQ(RejectReasonName(RejectReason::kReplayed), "TOKEN_REPLAYED");
  EXPECT_EQ(RejectReasonName(RejectReason::kRevoked), "TOKEN_REVOKED");
  EXPECT_EQ(RejectReasonName(RejectReason::kInternal), "INTERNAL");
}

TEST(RejectFormat, NotAnRdmadReject) {
  EXPECT_FALSE(DecodeReject("").ok());
  EXPECT_FALSE(DecodeReject(std::string(kRejectPrivateDataMax, '\0')).ok());  // the CM's own reject
  EXPECT_FALSE(DecodeReject("some other listener's reason").ok());
  EXPECT_FALSE(DecodeReject(EncodeReject({RejectReason::kExpired, 1}).substr(0, 12)).ok());  // truncated
  std::string v0 = EncodeReject({RejectReason::kExpired, 1});
  v0[4] = 0;
  EXPECT_FALSE(DecodeReject(v0).ok());
}

TEST(RejectFormat, NewerVersionReadByItsFirstEightBytes) {
  std::string v2 = EncodeReject({RejectReason::kReplayed, 9}).substr(0, 8);
  v2[4] = 2;
  ASSERT_OK_AND_ASSIGN(Reject r, DecodeReject(v2 + "future"));
  EXPECT_EQ(r.reason, RejectReason::kReplayed);
  EXPECT_EQ(r.token_id, 0u);
}

TEST(TokenNames, FormatAndParse) {
  EXPECT_EQ(TokenName(17), "tokens/17");
  uint64_t id = 0;
  EXPECT_TRUE(ParseTokenName("tokens/17", &id));
  EXPECT_EQ(id, 17u);
  for (const char* bad : {"", "tokens/", "tokens/0", "tokens/-1", "tokens/1x", "pds/1", "17", "tokens/+1",
                          "tokens/99999999999999999999999"}) {
    EXPECT_FALSE(ParseTokenName(bad, &id)) << bad;
  }
}

}  // namespace
}  // namespace rdmad::cm
