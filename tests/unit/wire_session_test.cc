// Unit tests of the data-plane protocol's version 2 on the wire (proto/wire/handshake.h, grant_message.h):
// the version offer after the token, the accept's private data, and the session messages (ACTIVATE, and the
// 64-byte answers with their tag and token id), beside version 1, which must read as before.
#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "proto/wire/grant_message.h"
#include "proto/wire/handshake.h"
#include "tests/support/status.h"

namespace rdmad::wire {
namespace {

std::string SampleToken() {
  Token t;
  t.kind = TokenKind::kGrant;
  t.id = 77;
  for (size_t i = 0; i < t.secret.size(); ++i) t.secret[i] = static_cast<uint8_t>(0xB0 + i);
  return EncodeToken(t);
}

TEST(VersionOffer, ATokenAloneIsVersionOneAsSentOrZeroPadded) {
  const std::string token = SampleToken();
  ConnectRequest r = SplitConnectRequest(token);
  EXPECT_EQ(r.offered, 1);
  EXPECT_EQ(r.token, token);
  std::string padded = token;
  padded.resize(kConnectPrivateDataMax, '\0');  // as the IB CM delivers it
  r = SplitConnectRequest(padded);
  EXPECT_EQ(r.offered, 1);
  EXPECT_EQ(r.token.size(), kConnectPrivateDataMax);
  EXPECT_TRUE(DecodeToken(r.token).ok());
}

TEST(VersionOffer, AnOfferIsSplitOffAndTheTokenDecodes) {
  const std::string token = SampleToken();
  std::string request = EncodeConnectRequest(token, 2);
  ASSERT_EQ(request.size(), kTokenSize + kVersionOfferSize);
  EXPECT_EQ(request.substr(32, 5), std::string("RDVR\x02", 5));
  request.resize(kConnectPrivateDataMax, '\0');
  ConnectRequest r = SplitConnectRequest(request);
  EXPECT_EQ(r.offered, 2);
  EXPECT_EQ(r.token, token);
  ASSERT_TRUE(DecodeToken(r.token).ok());
  EXPECT_EQ(DecodeToken(r.token).token->id, 77u);
  // A later client offers more; the split reports it as sent (rdmad chooses).
  EXPECT_EQ(SplitConnectRequest(EncodeConnectRequest(token, 9)).offered, 9);
}

TEST(VersionOffer, AMalformedOfferIsLeftToTheTokenCheckWhichRefusesIt) {
  const std::string token = SampleToken();
  for (std::string bad : {EncodeConnectRequest(token, 0), EncodeConnectRequest(token, 2) + "x",
                          token + std::string("RDVQ\x02\0\0\0", 8)}) {
    ConnectRequest r = SplitConnectRequest(bad);
    EXPECT_EQ(r.offered, 1);
    EXPECT_EQ(r.token.size(), bad.size());
    DecodedToken d = DecodeToken(r.token);
    EXPECT_FALSE(d.ok());
    EXPECT_EQ(d.reason, RejectReason::kMalformed);
  }
  std::string reserved = EncodeConnectRequest(token, 2);
  reserved[38] = 1;
  EXPECT_EQ(SplitConnectRequest(reserved).offered, 1);
}

TEST(AcceptData, RoundTripsAndItsAbsenceIsVersionOne) {
  const std::string data = EncodeAcceptData({2, 16});
  ASSERT_EQ(data.size(), kAcceptDataSize);
  std::string padded = data;
  padded.resize(196, '\0');
  AcceptData a = DecodeAcceptData(padded);
  EXPECT_EQ(a.version, 2);
  EXPECT_EQ(a.credits, 16);
  EXPECT_EQ(DecodeAcceptData("").version, 1);
  EXPECT_EQ(DecodeAcceptData(std::string(196, '\0')).version, 1);
  EXPECT_EQ(DecodeAcceptData(std::string("RDVR\x01\x10\0\0", 8)).version, 1);
}

TEST(SessionMessages, AnActivateCarriesItsTokenAndTag) {
  GrantMessage m;
  m.version = kSessionMessageVersion;
  m.type = GrantMessageType::kActivate;
  m.tag = 0x1122334455667788;
  m.token = SampleToken();
  const std::string bytes = EncodeGrantMessage(m);
  ASSERT_EQ(bytes.size(), kSessionMessageSize);
  EXPECT_EQ(bytes.substr(0, 8), std::string("RDGM\x02\x05\0\0", 8));
  EXPECT_EQ(bytes.substr(8, 8), std::string(8, '\0'));
  EXPECT_EQ(bytes.substr(16, 32), m.token);
  EXPECT_EQ(bytes.substr(48, 8), std::string("\x11\x22\x33\x44\x55\x66\x77\x88", 8));
  EXPECT_EQ(bytes.substr(56), std::string(8, '\0'));
  ASSERT_OK_AND_ASSIGN(GrantMessage back, DecodeGrantMessage(bytes));
  EXPECT_EQ(back.type, GrantMessageType::kActivate);
  EXPECT_EQ(back.version, kSessionMessageVersion);
  EXPECT_EQ(back.tag, m.tag);
  EXPECT_EQ(back.token, m.token);
}

TEST(SessionMessages, AnswersRoundTripWithTagAndTokenId) {
  GrantMessage m;
  m.version = kSessionMessageVersion;
  m.type = GrantMessageType::kActive;
  m.grant_id = 9;
  m.remote_addr = 0x7f0000001000;
  m.length = 4096;
  m.rkey = 0xabcdef01;
  m.access = kGrantRead;
  m.expiry_unix_nanos = 1700000000000000000;
  m.tag = 42;
  m.token_id = 77;
  const std::string bytes = EncodeGrantMessage(m);
  ASSERT_EQ(bytes.size(), kSessionMessageSize);
  ASSERT_OK_AND_ASSIGN(GrantMessage back, DecodeGrantMessage(bytes));
  EXPECT_EQ(back.grant_id, 9u);
  EXPECT_EQ(back.rkey, 0xabcdef01u);
  EXPECT_EQ(back.tag, 42u);
  EXPECT_EQ(back.token_id, 77u);
  // Its first 48 bytes are a version 1 message but for the version byte: an old reader's fields.
  std::string v1 = bytes.substr(0, kGrantMessageSize);
  v1[4] = 1;
  m.version = 1;
  EXPECT_EQ(v1, EncodeGrantMessage(m));

  GrantMessage refused;
  refused.version = kSessionMessageVersion;
  refused.type = GrantMessageType::kRefused;
  refused.scope = GrantKeyScope::kQp;
  refused.reason = static_cast<uint8_t>(RejectReason::kReplayed);
  refused.tag = 5;
  refused.token_id = 77;
  ASSERT_OK_AND_ASSIGN(GrantMessage r, DecodeGrantMessage(EncodeGrantMessage(refused)));
  EXPECT_EQ(r.type, GrantMessageType::kRefused);
  EXPECT_EQ(static_cast<RejectReason>(r.reason), RejectReason::kReplayed);
  EXPECT_EQ(r.tag, 5u);
  EXPECT_EQ(std::string(GrantMessageTypeName(r.type)), "REFUSED");
}

TEST(SessionMessages, AReleaseNamesItsGrantAndTag) {
  GrantMessage m;
  m.version = kSessionMessageVersion;
  m.type = GrantMessageType::kRelease;
  m.grant_id = 501;
  m.tag = 9;
  m.rkey = 77;  // not sent: a RELEASE carries a grant id and a tag only
  const std::string bytes = EncodeGrantMessage(m);
  ASSERT_EQ(bytes.size(), kSessionMessageSize);
  EXPECT_EQ(bytes.substr(0, 8), std::string("RDGM\x02\x06\0\0", 8));
  EXPECT_EQ(bytes.substr(16, 32), std::string(32, '\0'));
  ASSERT_OK_AND_ASSIGN(GrantMessage back, DecodeGrantMessage(bytes));
  EXPECT_EQ(back.type, GrantMessageType::kRelease);
  EXPECT_EQ(back.grant_id, 501u);
  EXPECT_EQ(back.tag, 9u);
  EXPECT_EQ(GrantEndReasonName(10), "RELEASED");
  EXPECT_EQ(GrantEndReasonName(9), "RESTARTED");
  EXPECT_EQ(GrantEndReasonName(11), "REASON_11");
}

TEST(SessionMessages, VersionOneStaysFortyEightBytesAndKnowsNoSessionTypes) {
  GrantMessage m;
  m.type = GrantMessageType::kEnded;
  m.reason = 1;
  m.grant_id = 3;
  m.tag = 99;  // not sent in version 1
  const std::string bytes = EncodeGrantMessage(m);
  ASSERT_EQ(bytes.size(), kGrantMessageSize);
  ASSERT_OK_AND_ASSIGN(GrantMessage back, DecodeGrantMessage(bytes));
  EXPECT_EQ(back.version, 1);
  EXPECT_EQ(back.tag, 0u);
  std::string refused = bytes;
  refused[5] = 4;
  EXPECT_FALSE(DecodeGrantMessage(refused).ok());
  // A version 2 message cut to 48 bytes is refused, not read short.
  m.version = kSessionMessageVersion;
  EXPECT_FALSE(DecodeGrantMessage(EncodeGrantMessage(m).substr(0, kGrantMessageSize)).ok());
}

}  // namespace
}  // namespace rdmad::wire
