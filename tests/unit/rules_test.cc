// The man-page rules as pure functions (server/registry/rules.h): no registry, no fabric.
#include "server/registry/rules.h"

#include <gtest/gtest.h>

#include "server/common/status.h"
#include "tests/support/server_status.h"

namespace rdmad {
namespace {

using ::rdmad::test::IsError;

google::protobuf::RepeatedField<int> Flags(std::initializer_list<int> f) {
  google::protobuf::RepeatedField<int> out;
  for (int v : f) out.Add(v);
  return out;
}

TEST(RulesTest, NamesAreCanonical) {
  EXPECT_EQ(ParseName("pds/3", "pds", "pd").value(), 3u);
  for (const char* bad : {"", "pds/", "pds/0", "pds/01", "pds/-1", "pds/+1", "pds/3x", "mrs/3", "pds3"}) {
    EXPECT_TRUE(IsError(ParseName(bad, "pds", "pd"), absl::StatusCode::kInvalidArgument, "pd")) << bad;
  }
  EXPECT_EQ(Name("mws", 7), "mws/7");
}

TEST(RulesTest, RegMrRemoteWriteAndAtomicNeedLocalWrite) {
  EXPECT_TRUE(CheckMrAccessRule(fabric::kRemoteRead, "access").ok());
  EXPECT_TRUE(CheckMrAccessRule(fabric::kRemoteWrite | fabric::kLocalWrite, "access").ok());
  EXPECT_TRUE(IsError(CheckMrAccessRule(fabric::kRemoteWrite, "access"), absl::StatusCode::kInvalidArgument, "access"));
  EXPECT_TRUE(IsError(CheckMrAccessRule(fabric::kRemoteAtomic, "access"), absl::StatusCode::kInvalidArgument, "access"));
  EXPECT_TRUE(IsError(AccessBits(Flags({99}), "access"), absl::StatusCode::kInvalidArgument, "access"));
  google::protobuf::RepeatedField<int> list;
  AccessList(fabric::kLocalWrite | fabric::kMwBind, &list);
  EXPECT_EQ(AccessBits(list, "access").value(), static_cast<uint32_t>(fabric::kLocalWrite | fabric::kMwBind));
}

TEST(RulesTest, BindMwRules) {
  BindCheck b{"mrs/1", 8192, fabric::kLocalWrite | fabric::kMwBind, /*type1=*/true, false, 0, 4096, false};
  EXPECT_EQ(CheckBind(b, Flags({v1::REMOTE_READ})).value(), static_cast<uint32_t>(fabric::kRemoteRead));
  BindCheck range = b;
  range.offset = 8192;
  EXPECT_TRUE(IsError(CheckBind(range, Flags({v1::REMOTE_READ})), absl::StatusCode::kOutOfRange, "offset"));
  range.offset = 4097;
  EXPECT_TRUE(IsError(CheckBind(range, Flags({v1::REMOTE_READ})), absl::StatusCode::kOutOfRange, "length"));
  BindCheck zero = b;
  zero.length = 0;
  EXPECT_TRUE(IsError(CheckBind(zero, Flags({v1::REMOTE_READ})), absl::StatusCode::kInvalidArgument, "length"));
  EXPECT_TRUE(IsError(CheckBind(b, Flags({v1::LOCAL_WRITE})), absl::StatusCode::kInvalidArgument, "access"));
  BindCheck no_bind = b;
  no_bind.mr_access = fabric::kLocalWrite;
  EXPECT_TRUE(IsError(CheckBind(no_bind, Flags({v1::REMOTE_READ})), absl::StatusCode::kFailedPrecondition, "mr"));
  BindCheck read_only = b;
  read_only.mr_access = fabric::kMwBind;
  EXPECT_TRUE(IsError(CheckBind(read_only, Flags({v1::REMOTE_WRITE})), absl::StatusCode::kFailedPrecondition, "access"));
  BindCheck zb = b;
  zb.zero_based = true;
  EXPECT_TRUE(IsError(CheckBind(zb, Flags({v1::REMOTE_READ})), absl::StatusCode::kInvalidArgument, "zero_based"));
  zb.type1 = false;
  EXPECT_EQ(CheckBind(zb, Flags({v1::REMOTE_READ})).value(),
            static_cast<uint32_t>(fabric::kRemoteRead | fabric::kZeroBased));
}

TEST(RulesTest, ReregFlagsGoWithTheirArguments) {
  v1::ReregisterMrRequest r;
  EXPECT_TRUE(IsError(ReregFlags(r), absl::StatusCode::kInvalidArgument, "flags"));
  r.add_flags(v1::CHANGE_ACCESS);
  EXPECT_EQ(ReregFlags(r).value(), fabric::kChangeAccess);
  r.set_pd("pds/2");
  EXPECT_TRUE(IsError(ReregFlags(r), absl::StatusCode::kInvalidArgument, "pd"));
  r.add_flags(v1::CHANGE_PD);
  EXPECT_EQ(ReregFlags(r).value(), fabric::kChangeAccess | fabric::kChangePd);
  r.add_flags(v1::CHANGE_TRANSLATION);
  EXPECT_TRUE(IsError(ReregFlags(r), absl::StatusCode::kInvalidArgument, "flags"));  // no source
  r.mutable_source()->mutable_anonymous()->set_size(4096);
  EXPECT_TRUE(ReregFlags(r).ok());
  v1::ReregisterMrRequest access_only;
  access_only.add_flags(v1::CHANGE_PD);
  access_only.set_pd("pds/1");
  access_only.add_access(v1::REMOTE_READ);
  EXPECT_TRUE(IsError(ReregFlags(access_only), absl::StatusCode::kInvalidArgument, "access"));
}

TEST(RulesTest, DefaultGidPrefersAnIpv4MappedRoceV2Gid) {
  fabric::PortInfo port;
  port.gids = {{0, "fe80:0000:0000:0000:5054:00ff:fe12:3456", "RoCEv1"},
               {1, "fe80:0000:0000:0000:5054:00ff:fe12:3456", "RoCEv2"},
               {2, "0000:0000:0000:0000:0000:ffff:0a00:020f", "RoCEv2"}};
  EXPECT_EQ(DefaultGidIndex(port), 2u);
  port.gids.pop_back();
  EXPECT_EQ(DefaultGidIndex(port), 1u);
  port.gids.clear();
  EXPECT_EQ(DefaultGidIndex(port), 0u);
}

}  // namespace
}  // namespace rdmad
