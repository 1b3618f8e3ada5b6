// rdmactl's library for tenants: tenant names (NormalizeName, TYPE/NAME), the quota cells, the
// `get tenants` table, `describe tenant` and `whoami` (cli/parse.h, cli/output.h), from hand-built messages.
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/output.h"
#include "cli/parse.h"

namespace rdmad::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using V = std::vector<std::string>;

const std::set<std::string> kValued = {"--server", "-o", "--output", "--timeout"};

// ---- names

TEST(TenantNamesTest, NormalizeAcceptsTheNameAndBothPrefixes) {
  EXPECT_EQ(NormalizeName(Kind::kTenant, "app").value(), "tenants/app");
  EXPECT_EQ(NormalizeName(Kind::kTenant, "tenant/app").value(), "tenants/app");
  EXPECT_EQ(NormalizeName(Kind::kTenant, "tenants/app").value(), "tenants/app");
  EXPECT_EQ(NormalizeName(Kind::kTenant, " Team.A_1-b ").value(), "tenants/Team.A_1-b");
  // Not numeric: digits are a name like any other, and are kept as typed.
  EXPECT_EQ(NormalizeName(Kind::kTenant, "007").value(), "tenants/007");
  EXPECT_EQ(KindFromNoun("Tenants"), Kind::kTenant);
  EXPECT_EQ(KindFromNoun("tenant"), Kind::kTenant);
  EXPECT_EQ(NormalizeName(Kind::kTenant, "tenant/app").value(), "tenants/app");
}

TEST(TenantNamesTest, NormalizeRejects) {
  EXPECT_THAT(std::string(NormalizeName(Kind::kTenant, "").status().message()), HasSubstr("a tenant name is required"));
  EXPECT_THAT(std::string(NormalizeName(Kind::kTenant, "tenants/").status().message()),
              HasSubstr("is not a tenant name"));
  EXPECT_THAT(std::string(NormalizeName(Kind::kTenant, "a/b").status().message()),
              HasSubstr("'a/b' is not a tenant name (tenants/NAME)"));
  EXPECT_THAT(std::string(NormalizeName(Kind::kTenant, "tenants/a/b").status().message()),
              HasSubstr("is not a tenant name"));
  EXPECT_THAT(std::string(NormalizeName(Kind::kTenant, "app team").status().message()),
              HasSubstr("is not a tenant name"));
  EXPECT_THAT(std::string(NormalizeName(Kind::kTenant, "app:1").status().message()),
              HasSubstr("'app:1' is not a tenant name (letters, digits, '.', '_' and '-'"));
  EXPECT_THAT(std::string(NormalizeName(Kind::kTenant, "pds/1").status().message()),
              HasSubstr("'pds/1' names a protection domain, not a tenant"));
  EXPECT_THAT(std::string(NormalizeName(Kind::kPd, "tenants/app").status().message()),
              HasSubstr("'tenants/app' names a tenant, not a protection domain"));
}

TEST(TenantNamesTest, TypeSlashName) {
  EXPECT_EQ(SplitTypeSlashName(V{"get", "tenants/app"}, kValued), (V{"get", "tenants", "tenants/app"}));
  EXPECT_EQ(SplitTypeSlashName(V{"-o", "json", "describe", "tenant/app"}, kValued),
            (V{"-o", "json", "describe", "tenant", "tenant/app"}));
}

// ---- outputs

v1::QuotaUsage Quota(const std::string& name, uint64_t used, uint64_t limit) {
  v1::QuotaUsage q;
  q.set_quota(name);
  q.set_used(used);
  q.set_limit(limit);
  return q;
}

// As rdmad's Gate::TenantProto builds it: every quota in its order, rpc_per_second last without a use.
v1::Tenant SampleTenant() {
  v1::Tenant t;
  t.set_name("tenants/app");
  t.add_principals("spiffe://cluster/ns/app/sa/reader");
  t.add_principals("unix:uid:1000");
  t.add_file_roots("/dev/shm/app");
  t.add_pds("pds/1");
  t.add_pds("pds/3");
  *t.add_quotas() = Quota("pinned_bytes", 12 << 10, uint64_t{1} << 30);
  *t.add_quotas() = Quota("mrs", 2, 8);
  *t.add_quotas() = Quota("mws", 1, 0);
  *t.add_quotas() = Quota("qps", 0, 16);
  *t.add_quotas() = Quota("cm_ids", 1, 0);
  *t.add_quotas() = Quota("grants", 1, 64);
  *t.add_quotas() = Quota("tokens", 0, 0);
  *t.add_quotas() = Quota("connections", 1, 4);
  *t.add_quotas() = Quota("rpc_per_second", 0, 100);
  return t;
}

TEST(TenantOutputTest, QuotaCells) {
  EXPECT_EQ(QuotaCell(Quota("mrs", 2, 8)), "2/8");
  EXPECT_EQ(QuotaCell(Quota("mrs", 2, 0)), "2/unlimited");
  EXPECT_EQ(QuotaCell(Quota("pinned_bytes", 12 << 10, uint64_t{1} << 30)), "12KiB/1GiB");
  EXPECT_EQ(QuotaCell(Quota("pinned_bytes", 1536, 0)), "1.5KiB/unlimited");
  EXPECT_EQ(QuotaCell(Quota("rpc_per_second", 0, 100)), "100");
  EXPECT_EQ(QuotaCell(Quota("rpc_per_second", 0, 0)), "unlimited");
  EXPECT_EQ(QuotaUsedString(Quota("rpc_per_second", 7, 100)), "-");
  EXPECT_EQ(QuotaLimitString(Quota("tokens", 3, 0)), "unlimited");
  const v1::Tenant t = SampleTenant();
  ASSERT_NE(FindQuota(t, "grants"), nullptr);
  EXPECT_EQ(FindQuota(t, "grants")->limit(), 64u);
  EXPECT_EQ(FindQuota(t, "nothing"), nullptr);
  EXPECT_EQ(RoleString(v1::ROLE_ADMIN), "ADMIN");
  EXPECT_EQ(RoleString(v1::ROLE_TENANT), "TENANT");
  EXPECT_EQ(RoleString(42), "42");
}

TEST(TenantOutputTest, Table) {
  google::protobuf::RepeatedPtrField<v1::Tenant> tenants;
  *tenants.Add() = SampleTenant();
  v1::Tenant* bare = tenants.Add();  // one principal, nothing used, no quotas sent at all
  bare->set_name("tenants/batch");
  bare->add_principals("CN=batch");
  EXPECT_EQ(MakeTable(TenantColumns(), tenants, false).Render(),
            "NAME            PRINCIPALS                               PDS   MRS      PINNED       GRANTS   TOKENS        "
            "CONNS\n"
            "tenants/app     spiffe://cluster/ns/app/sa/reader (+1)   2     2/8      12KiB/1GiB   1/64     0/unlimited   "
            "1/4\n"
            "tenants/batch   CN=batch                                 0     <none>   <none>       <none>   <none>        "
            "<none>\n");
}

TEST(TenantOutputTest, WideAddsTheOtherQuotasRootsAndDevices) {
  google::protobuf::RepeatedPtrField<v1::Tenant> tenants;
  *tenants.Add() = SampleTenant();
  v1::Tenant* other = tenants.Add();
  other->set_name("tenants/batch");
  other->add_devices("devices/rxe0");
  other->add_devices("devices/mlx5_0");
  const std::string wide = MakeTable(TenantColumns(), tenants, true).Render();
  EXPECT_THAT(wide, HasSubstr("CONNS    MWS           QPS      CM-IDS        RPC/S    FILE-ROOTS             DEVICES\n"));
  EXPECT_THAT(wide, HasSubstr("1/4      1/unlimited   0/16     1/unlimited   100      /dev/shm/app           <all>\n"));
  EXPECT_THAT(wide, HasSubstr("<allowed_file_roots>   devices/rxe0,devices/mlx5_0\n"));
  EXPECT_THAT(MakeTable(TenantColumns(), tenants, false).Render(), Not(HasSubstr("RPC/S")));
}

TEST(TenantOutputTest, Describe) {
  EXPECT_EQ(TenantText(SampleTenant()),
            "Name:           tenants/app\n"
            "Principals:     spiffe://cluster/ns/app/sa/reader\n"
            "                unix:uid:1000\n"
            "File roots:     /dev/shm/app\n"
            "Devices:        <all>\n"
            "PDs:            pds/1\n"
            "                pds/3\n"
            "Quotas:\n"
            "  QUOTA            USED    LIMIT\n"
            "  pinned_bytes     12KiB   1GiB\n"
            "  mrs              2       8\n"
            "  mws              1       unlimited\n"
            "  qps              0       16\n"
            "  cm_ids           1       unlimited\n"
            "  grants           1       64\n"
            "  tokens           0       unlimited\n"
            "  connections      1       4\n"
            "  rpc_per_second   -       100\n"
            "  (rpc_per_second is a limit per connection: no use is counted)\n");
}

TEST(TenantOutputTest, DescribeEmptyTenant) {
  v1::Tenant t;
  t.set_name("tenants/empty");
  *t.add_quotas() = Quota("mrs", 0, 0);
  EXPECT_EQ(TenantText(t),
            "Name:           tenants/empty\n"
            "Principals:     <none>\n"
            "File roots:     <allowed_file_roots> (rdmad's own)\n"
            "Devices:        <all>\n"
            "PDs:            <none>\n"
            "Quotas:\n"
            "  QUOTA   USED   LIMIT\n"
            "  mrs     0      unlimited\n");
  t.clear_quotas();
  EXPECT_THAT(TenantText(t), HasSubstr("\nQuotas:         <none>\n"));
}

TEST(TenantOutputTest, WhoAmI) {
  v1::Caller c;
  c.set_principal("unix:uid:1000");
  c.set_tenant("app");
  c.set_role(v1::ROLE_TENANT);
  c.set_authenticated(true);
  c.set_transport("unix");
  c.set_uid(1000);
  c.set_gid(100);
  EXPECT_EQ(CallerText(c),
            "Principal:      unix:uid:1000\n"
            "Tenant:         app\n"
            "Role:           TENANT\n"
            "Authenticated:  yes\n"
            "Transport:      unix\n"
            "UID:            1000\n"
            "GID:            100\n");
  // An admin over TLS: no tenant, no uid/gid (-1).
  v1::Caller admin;
  admin.set_principal("CN=ops");
  admin.set_role(v1::ROLE_ADMIN);
  admin.set_authenticated(true);
  admin.set_transport("tls");
  admin.set_uid(-1);
  admin.set_gid(-1);
  EXPECT_EQ(CallerText(admin),
            "Principal:      CN=ops\n"
            "Tenant:         <none> (outside any tenant)\n"
            "Role:           ADMIN\n"
            "Authenticated:  yes\n"
            "Transport:      tls\n");
  // uid 0 (root over the unix socket) is shown: only negative ids are absent.
  admin.set_uid(0);
  admin.set_gid(0);
  EXPECT_THAT(CallerText(admin), HasSubstr("UID:            0\nGID:            0\n"));
  v1::Caller anonymous;
  anonymous.set_principal("anonymous");
  anonymous.set_transport("insecure_tcp");
  anonymous.set_uid(-1);
  anonymous.set_gid(-1);
  EXPECT_THAT(CallerText(anonymous), HasSubstr("Authenticated:  no (rdmad did not verify who is calling)\n"));
}

}  // namespace
}  // namespace rdmad::cli
