// Tenants and mutual TLS on real rdmad, rxe0 in the Soft-RoCE guest: run by run-tenancy.sh, which makes the
// certificates, writes rdmad's config (a unix socket for root as admin, 127.0.0.1 with mutual TLS, two tenants,
// an audit file, the data-plane listener) and starts rdmad. tests/unit/tenancy_test.cc checks the same rules
// on the fake fabric with a test-only identity header; here every caller is who its certificate says.
//
// Callers (certificates in RDMAD_CERTS, signed by ca.pem unless said otherwise):
//   a         spiffe://cluster/ns/a/sa/app   tenant a: mrs 2, pinned_bytes 12288, mws 1, qps 1, grants 1,
//                                            tokens 2; files as uid/gid 1000 under RDMAD_TENANT_DIR
//   b         spiffe://cluster/ns/b/sa/app   tenant b: no quotas, no file identity
//   elsewhere spiffe://cluster/ns/d/sa/app   tenant d: restricted to rxe9, a device this host does not have
//   admin     spiffe://cluster/ops/rdmactl   admin
//   stranger  spiffe://cluster/ns/c/sa/app   valid, but in no tenant
//   expired   a's principal, expired in 2020; untrusted: a's principal, signed by other-ca.pem
//   root on the unix socket: unix:uid:0, an admin by the config.
//
// Cases: handshakes refused (expired, untrusted, plaintext); who each caller is (WhoAmI), the stranger refused;
// every resource of a is NOT_FOUND for b with exactly the message of a resource that never existed, in Get,
// the filters of List and Watch, and every mutation that names it, and b's lists and watches hold none of it,
// while the admins see both; a's quotas stop creations exactly at the limit with nothing half created (rdmad's
// lists and the device's counts unchanged); a real RDMA read through a's grant, which b can neither revoke,
// renew nor remove; a tenant restricted to other devices finds rxe0 NOT_FOUND under both spellings, as a
// device that does not exist; a CM id needs a PD, and holds its PD while it listens (the port free again once
// both are gone); last, the audit file holds exactly one line per mutating call made here (and the
// data-plane records of the grants), in order.
//
// Environment: RDMAD_TLS_TARGET (127.0.0.1:PORT), RDMAD_UNIX_TARGET (unix:PATH), RDMAD_CERTS, RDMAD_AUDIT (the
// audit file), RDMAD_TENANT_DIR (tenant a's file root, under rdmad's allowed_file_roots), RDMAD_DEVICE (rxe0),
// RDMAD_GUEST_ADDR (rxe0's IPv4 address, where the CM ids listen; 10.0.2.15).
//
// Threads: single-threaded. The tests run in the order written (the last one reads the audit file).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gmock/gmock.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/time.h"
#include "client/channel.h"
#include "client/client.h"
#include "client/remote_region.h"
#include "tests/support/status.h"
#include "tests/support/grant_state.h"

namespace rdmad::testing {
namespace {

using client::Client;
using client::RemoteRegion;
using ::rdmad::test::StatusOf;
using ::testing::HasSubstr;

std::string Env(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}
std::string Device() { return Env("RDMAD_DEVICE", "rxe0"); }
std::string Cert(const std::string& file) { return Env("RDMAD_CERTS", "/tmp/rdmad-tenancy-certs") + "/" + file; }

constexpr char kPrincipalA[] = "spiffe://cluster/ns/a/sa/app";
constexpr char kPrincipalB[] = "spiffe://cluster/ns/b/sa/app";
constexpr char kPrincipalAdmin[] = "spiffe://cluster/ops/rdmactl";
constexpr char kPrincipalStranger[] = "spiffe://cluster/ns/c/sa/app";
constexpr char kPrincipalD[] = "spiffe://cluster/ns/d/sa/app";  // tenant d: devices ["rxe9"]
constexpr char kGrantee[] = "spiffe://cluster/ns/a/sa/reader";  // whom a's grants are for (not an API caller)

// ---- callers

// One caller: its own channel (its own TLS connection), and how the audit log names it.
struct Party {
  std::string principal;  // as the audit line names it
  std::string tenant;
  std::unique_ptr<Client> client;
  Client* operator->() { return client.get(); }
};

std::unique_ptr<Client> TlsClient(const std::string& who, const std::string& ca = "ca.pem") {
  client::TlsOptions tls;
  tls.ca_file = Cert(ca);
  tls.cert_file = Cert(who + ".pem");
  tls.key_file = Cert(who + ".key");
  absl::StatusOr<std::shared_ptr<grpc::Channel>> ch = client::Dial(Env("RDMAD_TLS_TARGET", "127.0.0.1:7470"), tls);
  EXPECT_TRUE(ch.ok()) << who << ": " << ch.status();
  if (!ch.ok()) return nullptr;
  return std::make_unique<Client>(*ch, std::chrono::seconds(30));
}

Party& A() {
  static Party* p = new Party{kPrincipalA, "a", TlsClient("a")};
  return *p;
}
Party& B() {
  static Party* p = new Party{kPrincipalB, "b", TlsClient("b")};
  return *p;
}
Party& D() {
  static Party* p = new Party{kPrincipalD, "d", TlsClient("elsewhere")};
  return *p;
}
Party& Admin() {
  static Party* p = new Party{kPrincipalAdmin, "", TlsClient("admin")};
  return *p;
}
Party& Root() {  // root on the unix socket
  static Party* p = [] {
    Client::Options o;
    o.target = Env("RDMAD_UNIX_TARGET", "unix:/run/rdmad/rdmad.sock");
    return new Party{"unix:uid:0", "", std::make_unique<Client>(o)};
  }();
  return *p;
}
// rdmad does not admit it; its audit lines still carry the principal it presented (and no tenant).
Party& Stranger() {
  static Party* p = new Party{"spiffe://cluster/ns/c/sa/app", "", TlsClient("stranger")};
  return *p;
}

// ---- what the audit log must hold

struct Line {
  std::string principal, tenant, method, resource, code;
  bool operator<(const Line& o) const {
    return std::tie(principal, tenant, method, resource, code) <
           std::tie(o.principal, o.tenant, o.method, o.resource, o.code);
  }
  bool operator==(const Line& o) const { return !(*this < o) && !(o < *this); }
};
std::ostream& operator<<(std::ostream& os, const Line& l) {
  return os << l.method << " " << (l.resource.empty() ? "-" : l.resource) << " " << l.code << " by "
            << l.principal << (l.tenant.empty() ? "" : " (tenant " + l.tenant + ")");
}
std::vector<Line>& Calls() {  // mutating RPCs, in the order made
  static auto* v = new std::vector<Line>;
  return *v;
}
std::vector<Line>& DataPlane() {  // data-plane accepts and grant ends, in any order
  static auto* v = new std::vector<Line>;
  return *v;
}

// The response's own "name" (what a creation made, or what a call acted on), as rdmad's RPC layer reads it.
std::string NameOf(const google::protobuf::Message& m) {
  const google::protobuf::FieldDescriptor* f = m.GetDescriptor()->FindFieldByName("name");
  if (f == nullptr || f->type() != google::protobuf::FieldDescriptor::TYPE_STRING || f->is_repeated()) return "";
  return m.GetReflection()->GetString(m, f);
}

// A mutating call by `who`: notes the audit line it must leave (the resource it created, else `target`, the
// first name its request gives), and returns its result.
template <typename T>
absl::StatusOr<T> Do(Party& who, const char* method, const std::string& target, absl::StatusOr<T> result) {
  std::string resource = result.ok() && !NameOf(*result).empty() ? NameOf(*result) : target;
  Calls().push_back({who.principal, who.tenant, method, resource, absl::StatusCodeToString(result.status().code())});
  return result;
}
absl::Status Do(Party& who, const char* method, const std::string& target, absl::Status result) {
  Calls().push_back({who.principal, who.tenant, method, target, absl::StatusCodeToString(result.code())});
  return result;
}

// What b gets for a's resource `name` must be what anyone gets for `missing`, a name of the same kind that
// never existed (with the name swapped in): NOT_FOUND, "FIELD: NAME does not exist" (grants: "... (or ended
// long ago)"), the same ErrorDetail field.
void ExpectHidden(const absl::Status& got, const absl::Status& never, const std::string& field,
                  const std::string& name, const std::string& missing, const char* what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(never.code(), absl::StatusCode::kNotFound) << never;
  EXPECT_EQ(got.code(), absl::StatusCode::kNotFound) << got;
  EXPECT_EQ(std::string(got.message()), absl::StrReplaceAll(never.message(), {{missing, name}}));
  const std::string tail = name.rfind("grants/", 0) == 0 ? " does not exist (or ended long ago)" : " does not exist";
  EXPECT_EQ(std::string(got.message()), field + ": " + name + tail);
  EXPECT_EQ(client::Detail(got).field(), field);
  EXPECT_EQ(client::Detail(got).field(), client::Detail(never).field());
}
// Both calls are evaluated (b's, then the never-existing one's), then compared.
#define EXPECT_HIDDEN(field, name, missing, call_name, call_missing) \
  do {                                                               \
    const absl::Status got_ = StatusOf(call_name);                   \
    const absl::Status never_ = StatusOf(call_missing);              \
    ExpectHidden(got_, never_, field, name, missing, #call_name);    \
  } while (0)

// ---- the device

// Device-wide resource counts from iproute2's `rdma resource show` (every process), without "ctx" (this
// process's rdma_cm keeps a device context open once it used the device).
std::map<std::string, long> DeviceResources() {
  std::map<std::string, long> counts;
  FILE* p = popen("rdma resource show 2>&1", "r");
  if (!p) return counts;
  char line[1024];
  const std::string dev = Device() + ":";
  while (fgets(line, sizeof line, p)) {
    std::istringstream in(line);
    std::string word, prev;
    bool ours = false;
    while (in >> word) {
      if (word == dev) ours = true;
      if (ours && !prev.empty() && prev != "ctx" && word.find_first_not_of("0123456789") == std::string::npos) {
        counts[prev] = std::stol(word);
      }
      prev = word;
    }
  }
  pclose(p);
  return counts;
}
std::string Show(const std::map<std::string, long>& m) {
  std::string s;
  for (const auto& [k, v] : m) absl::StrAppend(&s, s.empty() ? "" : " ", k, "=", v);
  return s;
}

// rdmad's resources as an admin sees them (windows of the grants' pool left out: rdmad allocates them ahead,
// on its own thread) and the device's counts.
struct Snapshot {
  size_t pds = 0, mrs = 0, mws = 0, qps = 0, cm_ids = 0, grants = 0;
  std::map<std::string, long> device;
  bool operator==(const Snapshot& o) const {
    return std::tie(pds, mrs, mws, qps, cm_ids, grants, device) ==
           std::tie(o.pds, o.mrs, o.mws, o.qps, o.cm_ids, o.grants, o.device);
  }
};
std::ostream& operator<<(std::ostream& os, const Snapshot& s) {
  return os << "{rdmad: " << s.pds << " pds, " << s.mrs << " mrs, " << s.mws << " mws, " << s.qps << " qps, "
            << s.cm_ids << " cm ids, " << s.grants << " live grants; device: " << Show(s.device) << "}";
}
Snapshot Snap() {
  Snapshot s;
  Client& c = *Root().client;
  if (auto r = c.ListPds(); r.ok()) s.pds = r->pds_size();
  if (auto r = c.ListMrs(); r.ok()) s.mrs = r->mrs_size();
  if (auto r = c.ListMws(); r.ok()) {
    for (const auto& w : r->mws()) s.mws += w.owner().empty();
  }
  if (auto r = c.ListQps(); r.ok()) s.qps = r->qps_size();
  if (auto r = c.ListCmIds(); r.ok()) s.cm_ids = r->cm_ids_size();
  if (auto r = c.ListGrants(); r.ok()) s.grants = r->grants_size();
  s.device = DeviceResources();
  return s;
}

// A refused call: the code and exact message, and nothing created or changed.
#define EXPECT_REFUSED(call, want_code, want_message)               \
  do {                                                              \
    const Snapshot before_ = Snap();                                \
    const absl::Status s_ = StatusOf(call);                         \
    EXPECT_EQ(s_.code(), want_code) << #call << ": " << s_;         \
    EXPECT_EQ(std::string(s_.message()), want_message) << #call;    \
    EXPECT_EQ(Snap(), before_) << "half created by " #call;         \
  } while (0)

// ---- requests

v1::CreatePdRequest PdReq(const std::string& label) {
  v1::CreatePdRequest r;
  r.set_device(Device());
  r.set_label(label);
  return r;
}
v1::RegisterMrRequest AnonReq(const std::string& pd, uint64_t size) {
  v1::RegisterMrRequest r;
  r.set_pd(pd);
  r.mutable_source()->mutable_anonymous()->set_size(size);
  for (v1::Access a : {v1::LOCAL_WRITE, v1::REMOTE_READ, v1::MW_BIND}) r.add_access(a);
  return r;
}
v1::AllocMwRequest MwReq(const std::string& pd) {
  v1::AllocMwRequest r;
  r.set_pd(pd);
  r.set_type(v1::TYPE_2);
  return r;
}
v1::CreateQpRequest QpReq(const std::string& pd) {
  v1::CreateQpRequest r;
  r.set_pd(pd);
  return r;
}
v1::IssueGrantRequest GrantReq(const std::string& mr, uint64_t offset, uint64_t length) {
  v1::IssueGrantRequest r;
  r.set_mr(mr);
  r.set_offset(offset);
  r.set_length(length);
  r.add_access(v1::REMOTE_READ);
  r.set_ttl_ms(120000);
  r.set_principal(kGrantee);
  return r;
}
// The grant's client (the client library's RemoteRegion) for reads of a page at a time, `depth` outstanding.
absl::StatusOr<std::unique_ptr<RemoteRegion>> OpenPage(const v1::IssuedGrant& issued, size_t depth) {
  RemoteRegion::Options o;
  o.queue_depth = depth;
  o.max_read_bytes = 4096;
  o.connect_timeout = absl::Seconds(30);
  return RemoteRegion::Open(issued, o);
}
v1::IssueConnectTokenRequest TokenReq(const std::string& pd) {
  v1::IssueConnectTokenRequest r;
  r.set_pd(pd);
  return r;
}

// Removes what a test made (ids, channels, PDs with what is in them and their grants), as root on the unix
// socket, and checks that rdmad and the device are back where the test started.
class Tenancy : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(A().client, nullptr);
    ASSERT_NE(B().client, nullptr);
    ASSERT_NE(Admin().client, nullptr);
    baseline_ = Snap();
  }
  void TearDown() override {
    for (const auto& id : cm_ids_) (void)Do(Root(), "DeleteCmId", id, Root()->DeleteCmId(id));
    for (const auto& ch : channels_) (void)Do(Root(), "DeleteChannel", ch, Root()->DeleteChannel(ch));
    for (const auto& pd : pds_) {
      // Its live grants end with it (PD_DELETED), each with an audit line.
      if (auto g = Root()->ListGrants(); g.ok()) {
        for (const auto& grant : g->grants()) {
          if (grant.pd() == pd) DataPlane().push_back({grant.principal(), "", "grant ended", grant.name(), "OK"});
        }
      }
      // It closes what is left of the PD's data-plane connections (a revoked grant's in its end grace).
      absl::StatusOr<v1::DeletePdResponse> d =
          Do(Root(), "DeletePd", pd, Root()->DeletePd(pd, /*cascade=*/true, /*revoke_grants=*/true));
      EXPECT_TRUE(d.ok() || d.status().code() == absl::StatusCode::kNotFound) << "DeletePd " << pd << ": " << d.status();
    }
    // Data-plane connections go away on rdmad's threads once the client left: give them a moment.
    Snapshot now = Snap();
    for (int i = 0; i < 100 && !(now == baseline_); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      now = Snap();
    }
    EXPECT_EQ(now, baseline_) << "left behind";
  }

  // Creations through these are removed at the end, whatever happens (if still there).
  absl::StatusOr<v1::ProtectionDomain> NewPd(Party& who, const std::string& label) {
    auto pd = Do(who, "CreatePd", Device(), who->CreatePd(PdReq(label)));
    if (pd.ok()) pds_.push_back(pd->name());
    return pd;
  }
  absl::StatusOr<v1::EventChannel> NewChannel(Party& who) {
    auto ch = Do(who, "CreateChannel", "", who->CreateChannel(v1::CreateChannelRequest()));
    if (ch.ok()) channels_.push_back(ch->name());
    return ch;
  }
  absl::StatusOr<v1::CmId> NewCmId(Party& who, const std::string& pd, const std::string& channel) {
    v1::CreateCmIdRequest r;
    r.set_pd(pd);
    r.set_channel(channel);
    auto id = Do(who, "CreateCmId", channel.empty() ? pd : channel, who->CreateCmId(r));
    if (id.ok()) cm_ids_.push_back(id->name());
    return id;
  }
  void Forget(std::vector<std::string>* list, const std::string& name) {
    list->erase(std::remove(list->begin(), list->end(), name), list->end());
  }

  Snapshot baseline_;
  std::vector<std::string> pds_, channels_, cm_ids_;
};

// ---- the transport

TEST(Transport, ExpiredUntrustedAndPlaintextClientsAreRefusedAtTheHandshake) {
  struct Refused {
    const char* what;
    std::unique_ptr<Client> client;
  };
  Client::Options plain;
  plain.target = Env("RDMAD_TLS_TARGET", "127.0.0.1:7470");
  Refused cases[] = {
      {"an expired client certificate (a's principal)", TlsClient("expired")},
      {"a client certificate of another CA (a's principal)", TlsClient("untrusted")},
      {"plaintext on the TLS port", std::make_unique<Client>(plain)},
  };
  const Snapshot before = Snap();
  for (auto& c : cases) {
    SCOPED_TRACE(c.what);
    ASSERT_NE(c.client, nullptr);
    for (int attempt = 0; attempt < 2; ++attempt) {  // a second try on the same channel: no different
      absl::StatusOr<v1::Caller> who = c.client->WhoAmI();
      EXPECT_EQ(who.status().code(), absl::StatusCode::kUnavailable) << who.status();
      // Refused by the transport, never by rdmad: rdmad attaches an ErrorDetail to every failure it reports.
      EXPECT_FALSE(client::HasDetail(who.status())) << who.status();
      EXPECT_THAT(std::string(who.status().message()), HasSubstr("failed to connect")) << who.status();
      std::printf("[ refused  ] %s: %s\n", c.what, who.status().ToString().c_str());
    }
    // A mutation does not get through either (and so leaves no audit line).
    absl::StatusOr<v1::ProtectionDomain> pd = c.client->CreatePd(PdReq("refused"));
    EXPECT_EQ(pd.status().code(), absl::StatusCode::kUnavailable) << pd.status();
  }
  EXPECT_EQ(Snap(), before);
}

TEST(Transport, EachCallerIsWhoItsCertificateOrUidSays) {
  struct Want {
    Party* who;
    std::string principal, tenant, transport;
    v1::Role role;
  };
  for (const Want& w : std::vector<Want>{
           {&A(), kPrincipalA, "a", "tls", v1::ROLE_TENANT},
           {&B(), kPrincipalB, "b", "tls", v1::ROLE_TENANT},
           {&D(), kPrincipalD, "d", "tls", v1::ROLE_TENANT},
           {&Admin(), kPrincipalAdmin, "", "tls", v1::ROLE_ADMIN},
           {&Root(), "unix:uid:0", "", "unix", v1::ROLE_ADMIN},  // "unix:uid:0" is in the config's admins
       }) {
    SCOPED_TRACE(w.principal);
    ASSERT_OK_AND_ASSIGN(auto me, (*w.who)->WhoAmI());
    EXPECT_EQ(me.principal(), w.principal);
    EXPECT_EQ(me.tenant(), w.tenant);
    EXPECT_EQ(me.transport(), w.transport);
    EXPECT_EQ(me.role(), w.role);
    EXPECT_TRUE(me.authenticated());
    EXPECT_EQ(me.uid(), w.transport == "unix" ? 0 : -1);
  }

  // A valid certificate whose principal is in no tenant: every call refused, naming it.
  const std::string denied = absl::StrCat("principal '", kPrincipalStranger,
                                          "' (tls) is neither an admin nor in a tenant of this rdmad");
  absl::StatusOr<v1::Caller> who = Stranger()->WhoAmI();
  EXPECT_EQ(who.status().code(), absl::StatusCode::kPermissionDenied) << who.status();
  EXPECT_EQ(std::string(who.status().message()), denied);
  absl::StatusOr<v1::ListPdsResponse> pds = Stranger()->ListPds();
  EXPECT_EQ(pds.status().code(), absl::StatusCode::kPermissionDenied) << pds.status();
  const Snapshot before = Snap();
  absl::StatusOr<v1::ProtectionDomain> pd = Do(Stranger(), "CreatePd", Device(), Stranger()->CreatePd(PdReq("x")));
  EXPECT_EQ(pd.status().code(), absl::StatusCode::kPermissionDenied) << pd.status();
  EXPECT_EQ(std::string(pd.status().message()), denied);
  EXPECT_EQ(Snap(), before);

  // Tenants see themselves only; the admins every tenant.
  ASSERT_OK_AND_ASSIGN(auto seen_by_b, B()->ListTenants());
  ASSERT_EQ(seen_by_b.tenants_size(), 1);
  EXPECT_EQ(seen_by_b.tenants(0).name(), "tenants/b");
  EXPECT_HIDDEN("name", "tenants/a", "tenants/no-such-tenant", B()->GetTenant("tenants/a"),
                B()->GetTenant("tenants/no-such-tenant"));
  for (Party* admin : {&Admin(), &Root()}) {
    ASSERT_OK_AND_ASSIGN(auto all, (*admin)->ListTenants());
    EXPECT_EQ(all.tenants_size(), 3);
  }
}

// ---- isolation

TEST_F(Tenancy, AnotherTenantsResourcesAreNotFoundEverywhere) {
  // a: a PD on rxe0, a region of anonymous memory, a type 2 window, a QP, an event channel, a CM id, a grant.
  ASSERT_OK_AND_ASSIGN(auto pd, NewPd(A(), "a"));
  ASSERT_OK_AND_ASSIGN(auto mr, Do(A(), "RegisterMr", pd.name(), A()->RegisterMr(AnonReq(pd.name(), 4096))));
  ASSERT_OK_AND_ASSIGN(auto mw, Do(A(), "AllocMw", pd.name(), A()->AllocMw(MwReq(pd.name()))));
  ASSERT_OK_AND_ASSIGN(auto qp, Do(A(), "CreateQp", pd.name(), A()->CreateQp(QpReq(pd.name()))));
  ASSERT_OK_AND_ASSIGN(auto ch, NewChannel(A()));
  ASSERT_OK_AND_ASSIGN(auto id, NewCmId(A(), pd.name(), ch.name()));
  ASSERT_OK_AND_ASSIGN(auto issued, Do(A(), "IssueGrant", mr.name(), A()->IssueGrant(GrantReq(mr.name(), 0, 4096))));
  const std::string grant = issued.grant().name();
  const std::set<std::string> of_a = {pd.name(), mr.name(), mw.name(), qp.name(), ch.name(), id.name(), grant};

  // b's own: a PD with a type 2 window and a QP, an id on rdmad's shared channel.
  ASSERT_OK_AND_ASSIGN(auto pd_b, NewPd(B(), "b"));
  ASSERT_OK_AND_ASSIGN(auto mw_b, Do(B(), "AllocMw", pd_b.name(), B()->AllocMw(MwReq(pd_b.name()))));
  ASSERT_OK_AND_ASSIGN(auto qp_b, Do(B(), "CreateQp", pd_b.name(), B()->CreateQp(QpReq(pd_b.name()))));
  ASSERT_OK_AND_ASSIGN(auto id_b, NewCmId(B(), pd_b.name(), ""));

  // Names of each kind that never existed.
  const std::string no_pd = "pds/999999", no_mr = "mrs/999999", no_mw = "mws/999999", no_qp = "qps/999999",
                    no_ch = "channels/999999", no_id = "cmids/999999", no_grant = "grants/999999";
  const Snapshot before = Snap();

  // Get.
  EXPECT_HIDDEN("name", pd.name(), no_pd, B()->GetPd(pd.name()), B()->GetPd(no_pd));
  EXPECT_HIDDEN("name", mr.name(), no_mr, B()->GetMr(mr.name()), B()->GetMr(no_mr));
  EXPECT_HIDDEN("name", mw.name(), no_mw, B()->GetMw(mw.name()), B()->GetMw(no_mw));
  EXPECT_HIDDEN("name", qp.name(), no_qp, B()->GetQp(qp.name()), B()->GetQp(no_qp));
  EXPECT_HIDDEN("name", ch.name(), no_ch, B()->GetChannel(ch.name()), B()->GetChannel(no_ch));
  EXPECT_HIDDEN("name", id.name(), no_id, B()->GetCmId(id.name()), B()->GetCmId(no_id));
  EXPECT_HIDDEN("name", grant, no_grant, B()->GetGrant(grant), B()->GetGrant(no_grant));

  // The filters of List and Watch.
  EXPECT_HIDDEN("pd", pd.name(), no_pd, B()->ListMrs(pd.name()), B()->ListMrs(no_pd));
  EXPECT_HIDDEN("pd", pd.name(), no_pd, B()->ListMws(pd.name()), B()->ListMws(no_pd));
  EXPECT_HIDDEN("channel", ch.name(), no_ch, B()->ListCmIds(ch.name()), B()->ListCmIds(no_ch));
  EXPECT_HIDDEN("mr", mr.name(), no_mr, B()->ListGrants(mr.name()), B()->ListGrants(no_mr));
  client::WatchOptions brief;
  brief.idle_timeout = std::chrono::milliseconds(300);
  auto watch_grants = [&](const std::string& mr_name) {
    v1::WatchGrantsRequest r;
    r.set_mr(mr_name);
    return B()->WatchGrants(r, [](const v1::GrantEvent&) { return true; }, brief);
  };
  EXPECT_HIDDEN("mr", mr.name(), no_mr, watch_grants(mr.name()), watch_grants(no_mr));
  auto watch_events = [&](const std::string& channel, const std::string& cm_id) {
    v1::WatchEventsRequest r;
    r.set_channel(channel);
    r.set_cm_id(cm_id);
    return B()->WatchEvents(r, [](const v1::CmEvent&) { return true; }, brief);
  };
  EXPECT_HIDDEN("channel", ch.name(), no_ch, watch_events(ch.name(), ""), watch_events(no_ch, ""));
  EXPECT_HIDDEN("cm_id", id.name(), no_id, watch_events("", id.name()), watch_events("", no_id));

  // Mutations that name a's resources, each against the same call naming one that never existed.
  EXPECT_HIDDEN("name", grant, no_grant, Do(B(), "RevokeGrant", grant, B()->RevokeGrant(grant)),
                Do(B(), "RevokeGrant", no_grant, B()->RevokeGrant(no_grant)));
  EXPECT_HIDDEN("name", grant, no_grant,
                Do(B(), "RenewGrant", grant, B()->RenewGrant(grant, std::chrono::seconds(60))),
                Do(B(), "RenewGrant", no_grant, B()->RenewGrant(no_grant, std::chrono::seconds(60))));
  auto bind = [&](const std::string& mr_name) {
    v1::BindMwRequest r;
    r.set_name(mw_b.name());  // b's own window, on b's own QP
    r.set_qp(qp_b.name());
    r.set_mr(mr_name);
    r.set_length(4096);
    r.add_access(v1::REMOTE_READ);
    return Do(B(), "BindMw", mw_b.name(), B()->BindMw(r));
  };
  EXPECT_HIDDEN("mr", mr.name(), no_mr, bind(mr.name()), bind(no_mr));
  EXPECT_HIDDEN("name", mr.name(), no_mr, Do(B(), "DeregisterMr", mr.name(), B()->DeregisterMr(mr.name(), true)),
                Do(B(), "DeregisterMr", no_mr, B()->DeregisterMr(no_mr, true)));
  EXPECT_HIDDEN("name", pd.name(), no_pd, Do(B(), "DeletePd", pd.name(), B()->DeletePd(pd.name(), true, true)),
                Do(B(), "DeletePd", no_pd, B()->DeletePd(no_pd, true, true)));
  EXPECT_HIDDEN("name", mw.name(), no_mw, Do(B(), "DeallocMw", mw.name(), B()->DeallocMw(mw.name())),
                Do(B(), "DeallocMw", no_mw, B()->DeallocMw(no_mw)));
  EXPECT_HIDDEN("name", qp.name(), no_qp, Do(B(), "DeleteQp", qp.name(), B()->DeleteQp(qp.name())),
                Do(B(), "DeleteQp", no_qp, B()->DeleteQp(no_qp)));
  EXPECT_HIDDEN("name", id.name(), no_id, Do(B(), "DeleteCmId", id.name(), B()->DeleteCmId(id.name())),
                Do(B(), "DeleteCmId", no_id, B()->DeleteCmId(no_id)));
  EXPECT_HIDDEN("name", ch.name(), no_ch, Do(B(), "DeleteChannel", ch.name(), B()->DeleteChannel(ch.name())),
                Do(B(), "DeleteChannel", no_ch, B()->DeleteChannel(no_ch)));
  auto create_id = [&](const std::string& channel) {
    v1::CreateCmIdRequest r;
    r.set_channel(channel);  // a's channel, with b's own PD
    r.set_pd(pd_b.name());
    return Do(B(), "CreateCmId", channel, B()->CreateCmId(r));
  };
  EXPECT_HIDDEN("channel", ch.name(), no_ch, create_id(ch.name()), create_id(no_ch));
  auto migrate = [&](const std::string& channel) {
    v1::MigrateCmIdRequest r;
    r.set_name(id_b.name());  // b's own id, to a's channel
    r.set_channel(channel);
    return Do(B(), "MigrateCmId", id_b.name(), B()->MigrateCmId(r));
  };
  EXPECT_HIDDEN("channel", ch.name(), no_ch, migrate(ch.name()), migrate(no_ch));
  EXPECT_HIDDEN("pd", pd.name(), no_pd,
                Do(B(), "IssueConnectToken", pd.name(), B()->IssueConnectToken(TokenReq(pd.name()))),
                Do(B(), "IssueConnectToken", no_pd, B()->IssueConnectToken(TokenReq(no_pd))));
  EXPECT_HIDDEN("mr", mr.name(), no_mr, Do(B(), "IssueGrant", mr.name(), B()->IssueGrant(GrantReq(mr.name(), 0, 4096))),
                Do(B(), "IssueGrant", no_mr, B()->IssueGrant(GrantReq(no_mr, 0, 4096))));
  EXPECT_HIDDEN("pd", pd.name(), no_pd, Do(B(), "RegisterMr", pd.name(), B()->RegisterMr(AnonReq(pd.name(), 4096))),
                Do(B(), "RegisterMr", no_pd, B()->RegisterMr(AnonReq(no_pd, 4096))));
  EXPECT_HIDDEN("pd", pd.name(), no_pd, Do(B(), "AllocMw", pd.name(), B()->AllocMw(MwReq(pd.name()))),
                Do(B(), "AllocMw", no_pd, B()->AllocMw(MwReq(no_pd))));
  EXPECT_HIDDEN("pd", pd.name(), no_pd, Do(B(), "CreateQp", pd.name(), B()->CreateQp(QpReq(pd.name()))),
                Do(B(), "CreateQp", no_pd, B()->CreateQp(QpReq(no_pd))));
  EXPECT_EQ(Snap(), before) << "b's refused calls changed something";

  // b's unfiltered lists and watches: nothing of a's (but b's own).
  std::set<std::string> seen_by_b;
  ASSERT_OK_AND_ASSIGN(auto pds, B()->ListPds());
  for (const auto& x : pds.pds()) seen_by_b.insert(x.name());
  EXPECT_EQ(pds.pds_size(), 1);
  ASSERT_OK_AND_ASSIGN(auto mrs, B()->ListMrs());
  for (const auto& x : mrs.mrs()) seen_by_b.insert(x.name());
  ASSERT_OK_AND_ASSIGN(auto mws, B()->ListMws());
  for (const auto& x : mws.mws()) seen_by_b.insert(x.name());
  ASSERT_OK_AND_ASSIGN(auto qps, B()->ListQps());
  for (const auto& x : qps.qps()) seen_by_b.insert(x.name());
  EXPECT_EQ(qps.qps_size(), 1);
  ASSERT_OK_AND_ASSIGN(auto chs, B()->ListChannels());
  for (const auto& x : chs.channels()) {
    seen_by_b.insert(x.name());
    for (const auto& i : x.cm_ids()) seen_by_b.insert(i);
  }
  ASSERT_OK_AND_ASSIGN(auto ids, B()->ListCmIds());
  for (const auto& x : ids.cm_ids()) seen_by_b.insert(x.name());
  EXPECT_EQ(ids.cm_ids_size(), 1);
  ASSERT_OK_AND_ASSIGN(auto grants, B()->ListGrants());
  for (const auto& x : grants.grants()) seen_by_b.insert(x.name());
  EXPECT_EQ(grants.grants_size(), 0);
  v1::WatchGrantsRequest all_grants;
  all_grants.set_after_sequence(1);  // replay what rdmad retains (a's grant was issued after event 1)
  std::set<std::string> events_b;
  ASSERT_OK(B()->WatchGrants(
      all_grants, [&](const v1::GrantEvent& e) { return events_b.insert(e.grant().name()), true; }, brief));
  for (const auto& n : events_b) seen_by_b.insert(n);
  v1::WatchEventsRequest all_events;
  all_events.set_from_oldest(true);
  ASSERT_OK(B()->WatchEvents(
      all_events, [&](const v1::CmEvent& e) { return seen_by_b.insert(e.cm_id()), true; }, brief));
  for (const auto& name : of_a) EXPECT_EQ(seen_by_b.count(name), 0u) << "b sees " << name;
  EXPECT_EQ(seen_by_b.count(pd_b.name()), 1u);
  EXPECT_EQ(seen_by_b.count(id_b.name()), 1u);

  // The admins see both tenants'; a still has all of its own.
  for (Party* admin : {&Admin(), &Root()}) {
    SCOPED_TRACE(admin->principal);
    std::set<std::string> seen;
    ASSERT_OK_AND_ASSIGN(auto all_pds, (*admin)->ListPds());
    for (const auto& x : all_pds.pds()) seen.insert(x.name());
    ASSERT_OK_AND_ASSIGN(auto all_mrs, (*admin)->ListMrs(pd.name()));
    for (const auto& x : all_mrs.mrs()) seen.insert(x.name());
    ASSERT_OK_AND_ASSIGN(auto all_ids, (*admin)->ListCmIds());
    for (const auto& x : all_ids.cm_ids()) seen.insert(x.name());
    ASSERT_OK_AND_ASSIGN(auto all_grants, (*admin)->ListGrants(mr.name()));
    for (const auto& x : all_grants.grants()) seen.insert(x.name());
    for (const auto& name : {pd.name(), mr.name(), id.name(), grant, pd_b.name(), id_b.name()}) {
      EXPECT_EQ(seen.count(name), 1u) << name;
    }
    EXPECT_TRUE((*admin)->GetMw(mw.name()).ok());
    EXPECT_TRUE((*admin)->GetQp(qp.name()).ok());
    EXPECT_TRUE((*admin)->GetChannel(ch.name()).ok());
  }
  ASSERT_OK_AND_ASSIGN(auto still, A()->GetGrant(grant));
  EXPECT_EQ(still.state(), v1::GRANT_ISSUED);
  ASSERT_OK(A()->GetMr(mr.name()).status());

  // a removes its own: the id and the channel, the grant (never used: it ends REVOKED), then the PD.
  ASSERT_OK(Do(A(), "DeleteCmId", id.name(), A()->DeleteCmId(id.name())));
  Forget(&cm_ids_, id.name());
  ASSERT_OK(Do(A(), "DeleteChannel", ch.name(), A()->DeleteChannel(ch.name())));
  Forget(&channels_, ch.name());
  ASSERT_OK_AND_ASSIGN(auto revoked, Do(A(), "RevokeGrant", grant, A()->RevokeGrant(grant)));
  EXPECT_EQ(revoked.state(), v1::GRANT_ENDED);
  EXPECT_EQ(revoked.end_reason(), v1::END_REVOKED);
  DataPlane().push_back({kGrantee, "", "grant ended", grant, "OK"});
  ASSERT_OK(Do(A(), "DeletePd", pd.name(), A()->DeletePd(pd.name(), /*cascade=*/true)).status());
  Forget(&pds_, pd.name());
}

// ---- quotas

// Tenant a: mrs 2, pinned_bytes 12288 (3 pages), mws 1, qps 1, grants 1, tokens 2 (run-tenancy.sh).
TEST_F(Tenancy, QuotasStopExactlyAtTheLimitWithNothingHalfCreated) {
  auto usage = [](const std::string& quota) -> std::pair<uint64_t, uint64_t> {
    absl::StatusOr<v1::Tenant> t = A()->GetTenant("a");
    EXPECT_TRUE(t.ok()) << t.status();
    if (!t.ok()) return {~0ull, ~0ull};
    for (const auto& q : t->quotas()) {
      if (q.quota() == quota) return {q.used(), q.limit()};
    }
    return {~0ull, ~0ull};
  };
  using U = std::pair<uint64_t, uint64_t>;
  // Nothing left over from the other tests (use is counted from live resources).
  for (const char* q : {"pinned_bytes", "mrs", "mws", "qps", "grants", "tokens", "cm_ids", "connections"}) {
    EXPECT_EQ(usage(q).first, 0u) << q;
  }
  ASSERT_OK_AND_ASSIGN(auto pd, NewPd(A(), "quotas"));
  const std::string p = pd.name();

  // mrs 2 and pinned_bytes 12288: 4096 + 8192 fits exactly; a third region is one too many.
  ASSERT_OK_AND_ASSIGN(auto mr1, Do(A(), "RegisterMr", p, A()->RegisterMr(AnonReq(p, 4096))));
  ASSERT_OK_AND_ASSIGN(auto mr2, Do(A(), "RegisterMr", p, A()->RegisterMr(AnonReq(p, 8192))));
  EXPECT_EQ(usage("mrs"), U(2, 2));
  EXPECT_EQ(usage("pinned_bytes"), U(12288, 12288));
  EXPECT_REFUSED(Do(A(), "RegisterMr", p, A()->RegisterMr(AnonReq(p, 4096))), absl::StatusCode::kResourceExhausted,
                 "quota mrs of tenant a: limit 2, in use 2; this call needs 1");
  ASSERT_OK(Do(A(), "DeregisterMr", mr1.name(), A()->DeregisterMr(mr1.name())));
  // One region of 8192 left: another 8192 passes the pinned bytes; 4096 fits exactly.
  EXPECT_REFUSED(Do(A(), "RegisterMr", p, A()->RegisterMr(AnonReq(p, 8192))), absl::StatusCode::kResourceExhausted,
                 "quota pinned_bytes of tenant a: limit 12288, in use 8192; this call needs 8192");
  ASSERT_OK_AND_ASSIGN(auto mr3, Do(A(), "RegisterMr", p, A()->RegisterMr(AnonReq(p, 4096))));
  EXPECT_EQ(usage("pinned_bytes"), U(12288, 12288));
  ASSERT_OK_AND_ASSIGN(auto mrs, A()->ListMrs(p));
  EXPECT_EQ(mrs.mrs_size(), 2);

  // mws 1.
  ASSERT_OK_AND_ASSIGN(auto mw, Do(A(), "AllocMw", p, A()->AllocMw(MwReq(p))));
  EXPECT_REFUSED(Do(A(), "AllocMw", p, A()->AllocMw(MwReq(p))), absl::StatusCode::kResourceExhausted,
                 "quota mws of tenant a: limit 1, in use 1; this call needs 1");
  // qps 1.
  ASSERT_OK_AND_ASSIGN(auto qp, Do(A(), "CreateQp", p, A()->CreateQp(QpReq(p))));
  EXPECT_REFUSED(Do(A(), "CreateQp", p, A()->CreateQp(QpReq(p))), absl::StatusCode::kResourceExhausted,
                 "quota qps of tenant a: limit 1, in use 1; this call needs 1");
  // grants 1 (each grant also holds a token until its client connects), tokens 2.
  ASSERT_OK_AND_ASSIGN(auto g1, Do(A(), "IssueGrant", mr2.name(), A()->IssueGrant(GrantReq(mr2.name(), 0, 4096))));
  EXPECT_REFUSED(Do(A(), "IssueGrant", mr2.name(), A()->IssueGrant(GrantReq(mr2.name(), 0, 4096))),
                 absl::StatusCode::kResourceExhausted,
                 "quota grants of tenant a: limit 1, in use 1; this call needs 1");
  v1::IssueGrantsRequest batch;
  *batch.add_grants() = GrantReq(mr2.name(), 0, 4096);
  *batch.add_grants() = GrantReq(mr3.name(), 0, 4096);
  EXPECT_REFUSED(Do(A(), "IssueGrants", mr2.name(), A()->IssueGrants(batch)), absl::StatusCode::kResourceExhausted,
                 "quota grants of tenant a: limit 1, in use 1; this call needs 2");
  ASSERT_OK_AND_ASSIGN(auto t1, Do(A(), "IssueConnectToken", p, A()->IssueConnectToken(TokenReq(p))));
  EXPECT_REFUSED(Do(A(), "IssueConnectToken", p, A()->IssueConnectToken(TokenReq(p))),
                 absl::StatusCode::kResourceExhausted,
                 "quota tokens of tenant a: limit 2, in use 2; this call needs 1");
  for (const char* q : {"mrs", "mws", "qps", "grants", "tokens"}) {
    EXPECT_EQ(usage(q).first, usage(q).second) << q << " should be at its limit";
  }
  EXPECT_EQ(usage("pinned_bytes"), U(12288, 12288));

  // What ends gives its unit back: the grant revoked frees a grant and its token.
  ASSERT_OK(Do(A(), "RevokeGrant", g1.grant().name(), A()->RevokeGrant(g1.grant().name())).status());
  DataPlane().push_back({kGrantee, "", "grant ended", g1.grant().name(), "OK"});
  EXPECT_EQ(usage("grants"), U(0, 1));
  EXPECT_EQ(usage("tokens"), U(1, 2));
  ASSERT_OK_AND_ASSIGN(auto g2, Do(A(), "IssueGrant", mr3.name(), A()->IssueGrant(GrantReq(mr3.name(), 0, 4096))));
  EXPECT_EQ(usage("grants"), U(1, 1));
  EXPECT_EQ(usage("tokens"), U(2, 2));

  // An admin has no quotas: it may add to a's PD past a's limits (the region then counts for a).
  ASSERT_OK_AND_ASSIGN(auto extra, Do(Root(), "AllocMw", p, Root()->AllocMw(MwReq(p))));
  EXPECT_EQ(usage("mws"), U(2, 1));
  ASSERT_OK(Do(Root(), "DeallocMw", extra.name(), Root()->DeallocMw(extra.name())));
  // a's own removal (cascade: window, regions, QP; the live grant revoked first).
  DataPlane().push_back({kGrantee, "", "grant ended", g2.grant().name(), "OK"});
  ASSERT_OK(Do(A(), "DeletePd", p, A()->DeletePd(p, /*cascade=*/true, /*revoke_grants=*/true)).status());
  Forget(&pds_, p);
  for (const char* q : {"pinned_bytes", "mrs", "mws", "qps", "grants"}) EXPECT_EQ(usage(q).first, 0u) << q;
  (void)mw;
  (void)qp;
  (void)t1;
}

// ---- the data plane

TEST_F(Tenancy, ARealReadThroughAsGrantWhichBCannotRevoke) {
  // a's file, on tmpfs under a's file root, owned by a's uid (1000) and only readable and writable by it.
  const std::string path = Env("RDMAD_TENANT_DIR", "/dev/shm/rdmad-tenancy-a") + "/data.bin";
  std::string bytes(8192, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 131 + 7) ^ (i >> 8));
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
  }
  ASSERT_EQ(chown(path.c_str(), 1000, 1000), 0) << std::strerror(errno);
  ASSERT_EQ(chmod(path.c_str(), 0600), 0);

  ASSERT_OK_AND_ASSIGN(auto pd, NewPd(A(), "data"));
  v1::RegisterMrRequest file_req;
  file_req.set_pd(pd.name());
  file_req.mutable_source()->mutable_file()->set_path(path);
  file_req.mutable_source()->mutable_file()->set_length(bytes.size());
  for (v1::Access a : {v1::LOCAL_WRITE, v1::REMOTE_READ, v1::MW_BIND}) file_req.add_access(a);
  ASSERT_OK_AND_ASSIGN(auto mr, Do(A(), "RegisterMr", pd.name(), A()->RegisterMr(file_req)));

  // b, in its own PD, may not register a's file (a tenant without a file-system identity registers none).
  ASSERT_OK_AND_ASSIGN(auto pd_b, NewPd(B(), "b-data"));
  file_req.set_pd(pd_b.name());
  absl::StatusOr<v1::MemoryRegion> b_file = Do(B(), "RegisterMr", pd_b.name(), B()->RegisterMr(file_req));
  EXPECT_EQ(b_file.status().code(), absl::StatusCode::kPermissionDenied) << b_file.status();
  EXPECT_EQ(client::Detail(b_file.status()).field(), "source.file.path");
  EXPECT_THAT(std::string(b_file.status().message()), HasSubstr("no file-system identity"));

  // a grants its second page; the client reads it over RDMA, straight from rdmad's registration of the file.
  ASSERT_OK_AND_ASSIGN(auto issued, Do(A(), "IssueGrant", mr.name(), A()->IssueGrant(GrantReq(mr.name(), 4096, 4096))));
  const std::string grant = issued.grant().name();
  ASSERT_OK_AND_ASSIGN(auto region, OpenPage(issued, 4));
  EXPECT_EQ(region->grant_name(), grant);
  std::string got(4096, '\0');
  ASSERT_OK(region->Read(0, got.size(), got.data()));
  EXPECT_TRUE(got == bytes.substr(4096)) << "the bytes read differ from the file's";
  // The key left with its bind: rdmad may report ACTIVATING until it has seen the bind complete.
  ASSERT_OK_AND_ASSIGN(auto active, test::PastActivating(*A().client, grant));
  EXPECT_EQ(active.state(), v1::GRANT_ACTIVE);
  ASSERT_FALSE(active.cm_id().empty());
  DataPlane().push_back({kGrantee, "", "data-plane accept", active.cm_id(), "OK"});

  // b can neither revoke nor renew it, nor pull the region or the PD from under it; nor see the connection.
  const std::string no_grant = "grants/999999", no_mr = "mrs/999999", no_pd = "pds/999999";
  EXPECT_HIDDEN("name", grant, no_grant, Do(B(), "RevokeGrant", grant, B()->RevokeGrant(grant)),
                Do(B(), "RevokeGrant", no_grant, B()->RevokeGrant(no_grant)));
  EXPECT_HIDDEN("name", grant, no_grant,
                Do(B(), "RenewGrant", grant, B()->RenewGrant(grant, std::chrono::seconds(1))),
                Do(B(), "RenewGrant", no_grant, B()->RenewGrant(no_grant, std::chrono::seconds(1))));
  EXPECT_HIDDEN("name", mr.name(), no_mr, Do(B(), "DeregisterMr", mr.name(), B()->DeregisterMr(mr.name(), true)),
                Do(B(), "DeregisterMr", no_mr, B()->DeregisterMr(no_mr, true)));
  EXPECT_HIDDEN("name", pd.name(), no_pd, Do(B(), "DeletePd", pd.name(), B()->DeletePd(pd.name(), true, true)),
                Do(B(), "DeletePd", no_pd, B()->DeletePd(no_pd, true, true)));
  const std::string no_id = "cmids/999999";
  EXPECT_HIDDEN("name", active.cm_id(), no_id, B()->GetCmId(active.cm_id()), B()->GetCmId(no_id));
  EXPECT_HIDDEN("name", active.cm_id(), no_id, Do(B(), "Disconnect", active.cm_id(), B()->Disconnect(active.cm_id())),
                Do(B(), "Disconnect", no_id, B()->Disconnect(no_id)));
  ASSERT_OK_AND_ASSIGN(auto ids_b, B()->ListCmIds());
  for (const auto& i : ids_b.cm_ids()) EXPECT_NE(i.name(), active.cm_id());

  // Still readable, still active, the lease untouched.
  ASSERT_OK(region->Read(0, got.size(), got.data()));
  EXPECT_TRUE(got == bytes.substr(4096));
  ASSERT_OK_AND_ASSIGN(auto after, A()->GetGrant(grant));
  EXPECT_EQ(after.state(), v1::GRANT_ACTIVE);
  EXPECT_EQ(after.renewals(), 0u);
  EXPECT_EQ(after.expire_time_unix_nanos(), active.expire_time_unix_nanos());

  // a revokes: the key dies at the NIC.
  ASSERT_OK_AND_ASSIGN(auto revoked, Do(A(), "RevokeGrant", grant, A()->RevokeGrant(grant)));
  EXPECT_EQ(revoked.end_reason(), v1::END_REVOKED);
  DataPlane().push_back({kGrantee, "", "grant ended", grant, "OK"});
  absl::Status dead = region->Read(0, got.size(), got.data());
  EXPECT_EQ(dead.code(), absl::StatusCode::kPermissionDenied) << dead;
  region.reset();
  unlink(path.c_str());
}

// A revoked grant's connection stays for grant_end_grace_ms, its QP in the grant's PD. A DeletePd of that PD
// meanwhile, with the client still connected, closes the connection and removes the PD.
TEST_F(Tenancy, DeletingThePdRightAfterARevocationClosesTheGrantsConnection) {
  ASSERT_OK_AND_ASSIGN(auto pd, NewPd(A(), "closing"));
  ASSERT_OK_AND_ASSIGN(auto mr, Do(A(), "RegisterMr", pd.name(), A()->RegisterMr(AnonReq(pd.name(), 8192))));
  ASSERT_OK_AND_ASSIGN(auto issued, Do(A(), "IssueGrant", mr.name(), A()->IssueGrant(GrantReq(mr.name(), 0, 4096))));
  const std::string grant = issued.grant().name();
  ASSERT_OK_AND_ASSIGN(auto region, OpenPage(issued, 1));
  std::string got(4096, 'x');
  ASSERT_OK(region->Read(0, got.size(), got.data()));
  EXPECT_TRUE(got == std::string(4096, '\0')) << "anonymous memory reads as zeros";
  ASSERT_OK_AND_ASSIGN(auto active, test::PastActivating(*A().client, grant));
  DataPlane().push_back({kGrantee, "", "data-plane accept", active.cm_id(), "OK"});
  ASSERT_OK(Do(A(), "RevokeGrant", grant, A()->RevokeGrant(grant)).status());
  DataPlane().push_back({kGrantee, "", "grant ended", grant, "OK"});
  absl::StatusOr<v1::DeletePdResponse> deleted =
      Do(A(), "DeletePd", pd.name(), A()->DeletePd(pd.name(), /*cascade=*/true, /*revoke_grants=*/true));
  ASSERT_OK(deleted.status());
  EXPECT_THAT(deleted->deleted(), ::testing::ElementsAre(mr.name(), pd.name()));
  EXPECT_FALSE(region->Read(0, got.size(), got.data()).ok());
  region.reset();
}

// ---- devices

// Tenant d may use rxe9 only, which this host does not have: rxe0 is NOT_FOUND for it, bare or as
// "devices/rxe0", with exactly the answer anyone gets for a device that does not exist; tenant a, restricted to
// rxe0, gets rxe0 under both spellings.
TEST_F(Tenancy, ADeviceOutsideTheTenantsIsNotFoundUnderBothSpellings) {
  ASSERT_NE(D().client, nullptr);
  const std::string bare = Device(), full = "devices/" + Device();
  const std::string no_bare = "rxe77", no_full = "devices/rxe77";
  EXPECT_EQ(Root()->GetDevice(no_bare).status().code(), absl::StatusCode::kNotFound);
  for (const auto& [name, missing] : {std::make_pair(bare, no_bare), std::make_pair(full, no_full)}) {
    SCOPED_TRACE(name);
    const absl::Status got = D()->GetDevice(name).status();
    const absl::Status never = D()->GetDevice(missing).status();
    EXPECT_EQ(got.code(), absl::StatusCode::kNotFound) << got;
    EXPECT_EQ(never.code(), absl::StatusCode::kNotFound) << never;
    EXPECT_EQ(std::string(got.message()), absl::StrReplaceAll(never.message(), {{missing, name}}));
    EXPECT_EQ(std::string(got.message()), "name: no device '" + name + "'");
    EXPECT_EQ(client::Detail(got).field(), "name");
    // An admin asking for the device that does not exist gets the same words.
    EXPECT_EQ(std::string(Root()->GetDevice(missing).status().message()), std::string(never.message()));
  }
  // The bare spelling hides it exactly as the full one does (the name swapped).
  EXPECT_EQ(std::string(D()->GetDevice(bare).status().message()),
            absl::StrReplaceAll(D()->GetDevice(full).status().message(), {{full, bare}}));
  ASSERT_OK_AND_ASSIGN(auto listed_d, D()->ListDevices());
  for (const auto& d : listed_d.devices()) EXPECT_NE(d.name(), full) << "d lists " << d.name();
  // Nor can d make a PD on it: the words of a device that does not exist, and nothing made.
  const Snapshot before = Snap();
  const absl::Status pd_d = Do(D(), "CreatePd", bare, D()->CreatePd(PdReq("elsewhere"))).status();
  v1::CreatePdRequest nowhere = PdReq("nowhere");
  nowhere.set_device(no_bare);
  const absl::Status pd_never = Do(D(), "CreatePd", no_bare, D()->CreatePd(nowhere)).status();
  EXPECT_EQ(pd_d.code(), absl::StatusCode::kNotFound) << pd_d;
  EXPECT_EQ(std::string(pd_d.message()), absl::StrReplaceAll(pd_never.message(), {{no_bare, bare}}));
  EXPECT_EQ(client::Detail(pd_d).field(), "device");
  EXPECT_EQ(Snap(), before);

  // A listed device works under both spellings.
  ASSERT_OK_AND_ASSIGN(auto by_bare, A()->GetDevice(bare));
  ASSERT_OK_AND_ASSIGN(auto by_full, A()->GetDevice(full));
  EXPECT_EQ(by_bare.name(), full);
  EXPECT_EQ(by_full.name(), full);
  EXPECT_EQ(by_bare.node_guid(), by_full.node_guid());
  ASSERT_OK_AND_ASSIGN(auto listed_a, A()->ListDevices());
  ASSERT_EQ(listed_a.devices_size(), 1);
  EXPECT_EQ(listed_a.devices(0).name(), full);
}

// ---- CM ids and their PD

// A CM id needs a PD (tenant or admin: INVALID_ARGUMENT on pd, nothing made). A PD with a listening id of its
// own is not deleted (FAILED_PRECONDITION naming the id, with or without a cascade); once the id is deleted
// the PD goes, and the port is free again: a new id on another PD listens on it.
TEST_F(Tenancy, ACmIdNeedsAPdAndHoldsItWhileItListens) {
  for (Party* who : {&A(), &Root()}) {
    SCOPED_TRACE(who->principal);
    const Snapshot before = Snap();
    const absl::Status s = NewCmId(*who, "", "").status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_EQ(client::Detail(s).field(), "pd") << s;
    EXPECT_THAT(std::string(s.message()), ::testing::StartsWith("pd: is required")) << s;
    EXPECT_EQ(Snap(), before) << "half created by a CreateCmId without a pd";
  }

  const std::string addr = Env("RDMAD_GUEST_ADDR", "10.0.2.15");
  constexpr uint32_t kPort = 7479;  // not rdma_listen's 7471
  auto listen = [&](const std::string& id) {
    v1::ListenRequest r;
    r.set_name(id);
    r.mutable_address()->set_address(addr);
    r.mutable_address()->set_port(kPort);
    return Do(A(), "Listen", id, A()->Listen(r));
  };
  ASSERT_OK_AND_ASSIGN(auto pd, NewPd(A(), "listener"));
  ASSERT_OK_AND_ASSIGN(auto id, NewCmId(A(), pd.name(), ""));
  ASSERT_OK_AND_ASSIGN(auto listening, listen(id.name()));
  EXPECT_EQ(listening.state(), v1::CM_LISTENING);

  const Snapshot before = Snap();
  for (bool cascade : {false, true}) {
    SCOPED_TRACE(cascade ? "with a cascade" : "without a cascade");
    const absl::Status s = Do(A(), "DeletePd", pd.name(), A()->DeletePd(pd.name(), cascade)).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_EQ(client::Detail(s).field(), "name") << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(pd.name() + " still has 1 CM id(s) (" + id.name() + ")")) << s;
  }
  EXPECT_EQ(Snap(), before) << "a refused DeletePd changed something";
  ASSERT_OK_AND_ASSIGN(auto still, A()->GetCmId(id.name()));
  EXPECT_EQ(still.state(), v1::CM_LISTENING);
  ASSERT_OK(A()->GetPd(pd.name()).status());

  // The id goes, then the PD.
  ASSERT_OK(Do(A(), "DeleteCmId", id.name(), A()->DeleteCmId(id.name())));
  Forget(&cm_ids_, id.name());
  ASSERT_OK(Do(A(), "DeletePd", pd.name(), A()->DeletePd(pd.name())).status());
  Forget(&pds_, pd.name());
  EXPECT_EQ(A()->GetPd(pd.name()).status().code(), absl::StatusCode::kNotFound);

  // The port is free: a new id, on a new PD, listens on it.
  ASSERT_OK_AND_ASSIGN(auto pd2, NewPd(A(), "listener-2"));
  ASSERT_OK_AND_ASSIGN(auto id2, NewCmId(A(), pd2.name(), ""));
  ASSERT_OK_AND_ASSIGN(auto again, listen(id2.name()));
  EXPECT_EQ(again.state(), v1::CM_LISTENING);
  EXPECT_EQ(again.local().port(), kPort);
}

// ---- the audit trail

// Last: every mutating call above left exactly one line, in the order made, with its principal, tenant,
// resource and code; the data-plane lines are the accepts and grant ends above. Nothing else.
TEST(Audit, OneLinePerMutationAndNothingElse) {
  const std::string path = Env("RDMAD_AUDIT", "");
  ASSERT_FALSE(path.empty()) << "RDMAD_AUDIT is not set";
  std::vector<Line> calls, data_plane;
  std::vector<std::string> bad;
  const size_t want = Calls().size() + DataPlane().size();
  size_t lines = 0;
  for (int attempt = 0; attempt < 50; ++attempt) {  // data-plane lines are written on rdmad's own threads
    calls.clear();
    data_plane.clear();
    bad.clear();
    lines = 0;
    std::ifstream in(path);
    ASSERT_TRUE(in) << "cannot read " << path;
    std::string text;
    uint64_t last = 0;
    while (std::getline(in, text)) {
      ++lines;
      nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.is_object()) {
        bad.push_back("not a JSON object: " + text);
        continue;
      }
      if (j.value("sequence", uint64_t{0}) != last + 1) bad.push_back("out of sequence: " + text);
      last = j.value("sequence", uint64_t{0});
      Line l{j.value("principal", ""), j.value("tenant", ""), j.value("method", ""), j.value("resource", ""),
             j.value("code", "")};
      (l.method.find(' ') == std::string::npos ? calls : data_plane).push_back(l);
    }
    if (lines >= want) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_THAT(bad, ::testing::IsEmpty());
  EXPECT_EQ(lines, want);
  EXPECT_EQ(calls, Calls());
  for (size_t i = 0; i < std::max(calls.size(), Calls().size()); ++i) {
    if (i < calls.size() && i < Calls().size() && calls[i] == Calls()[i]) continue;
    std::ostringstream got, wanted;
    if (i < calls.size()) got << calls[i]; else got << "nothing";
    if (i < Calls().size()) wanted << Calls()[i]; else wanted << "nothing";
    ADD_FAILURE() << "first difference at call line " << i << "\n got:  " << got.str() << "\n want: " << wanted.str();
    break;
  }
  std::multiset<Line> got_dp(data_plane.begin(), data_plane.end()), want_dp(DataPlane().begin(), DataPlane().end());
  EXPECT_TRUE(got_dp == want_dp) << ::testing::PrintToString(data_plane) << "\nwant "
                                 << ::testing::PrintToString(DataPlane());
  std::printf("[ audit    ] %zu lines: %zu calls, %zu data-plane records\n", lines, calls.size(), data_plane.size());
}

}  // namespace
}  // namespace rdmad::testing
