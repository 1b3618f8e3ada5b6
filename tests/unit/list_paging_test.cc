// Paging of the List calls (docs/api.md#paging; server/rpc/page.h) through a whole rdmad in-process
// (tests/support/daemon_fixture.h) over the fake fabric: a list far past gRPC's 4 MiB message limit read
// whole by the client library (which follows next_page_token) with a 4 MiB receive limit; page_size and
// page_token refused clearly; objects made or removed between pages neither repeated nor skipped; tenants
// paging only through their own objects, with nothing said about others'; every List call pages.
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "rdmad/v1/rdmad.grpc.pb.h"
#include "server/config.h"
#include "tests/support/daemon_fixture.h"

namespace rdmad {
namespace {

using ::testing::HasSubstr;

constexpr char kA[] = "spiffe://t/a";
constexpr char kB[] = "spiffe://t/b";

// The request field a failed call's ErrorDetail names, read as the client library reads it.
std::string FieldOf(const grpc::Status& s) { return client::Detail(client::FromGrpc(s)).field(); }

class ListPagingTest : public ::testing::Test {
 protected:
  void Start(bool tenants = false) {
    if (tenants) {
      absl::StatusOr<Config> c = ParseConfig(R"({
        "admins": ["ops"],
        "tenants": [{"name": "a", "principals": ["spiffe://t/a"]}, {"name": "b", "principals": ["spiffe://t/b"]}]})");
      ASSERT_TRUE(c.ok()) << c.status();
      rdmad_.config().admins = c->admins;
      rdmad_.config().tenants = c->tenants;
    }
    rdmad_.config().audit = "";
    ASSERT_TRUE(rdmad_.Start().ok());
    channel_ = rdmad_.Channel();
  }
  std::unique_ptr<grpc::ClientContext> Ctx(const std::string& who) {
    return who.empty() ? std::make_unique<grpc::ClientContext>() : test::DaemonFixture::As(who);
  }
  std::string CreatePd(const std::string& who = "") {
    v1::CreatePdRequest req;
    req.set_device("rxe0");
    v1::ProtectionDomain pd;
    grpc::Status s = v1::ProtectionDomains::NewStub(channel_)->CreatePd(Ctx(who).get(), req, &pd);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return pd.name();
  }
  std::string RegisterMr(const std::string& pd, const std::string& who = "") {
    v1::RegisterMrRequest req;
    req.set_pd(pd);
    req.mutable_source()->mutable_anonymous()->set_size(4096);
    req.add_access(v1::LOCAL_WRITE);
    v1::MemoryRegion mr;
    grpc::Status s = v1::MemoryRegions::NewStub(channel_)->RegisterMr(Ctx(who).get(), req, &mr);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return mr.name();
  }
  grpc::Status ListMrs(const v1::ListMrsRequest& req, v1::ListMrsResponse* resp, const std::string& who = "") {
    return v1::MemoryRegions::NewStub(channel_)->ListMrs(Ctx(who).get(), req, resp);
  }
  // Every page of ListPds as `who`, page_size `size`: the names, page by page.
  std::vector<std::vector<std::string>> PdPages(int size, const std::string& who = "") {
    std::vector<std::vector<std::string>> pages;
    v1::ListPdsRequest req;
    req.set_page_size(size);
    for (;;) {
      v1::ListPdsResponse resp;
      grpc::Status s = v1::ProtectionDomains::NewStub(channel_)->ListPds(Ctx(who).get(), req, &resp);
      EXPECT_TRUE(s.ok()) << s.error_message();
      if (!s.ok()) return pages;
      pages.emplace_back();
      for (const auto& pd : resp.pds()) pages.back().push_back(pd.name());
      if (resp.next_page_token().empty()) return pages;
      req.set_page_token(resp.next_page_token());
    }
  }

  test::DaemonFixture rdmad_;
  std::shared_ptr<grpc::Channel> channel_;
};

// 100,000 regions cannot exist in one process: each is a mapping, and vm.max_map_count is 65,530 by
// default. So the regions are fewer and larger on the wire: each over one page of a tmpfs file whose name
// is 200 characters long, so that 20,000 of them (5.1 MB as one message, measured) pass 4 MiB. Registering
// them takes about 10 s here, the list in 20 pages about 0.3 s.
TEST_F(ListPagingTest, AListPastFourMiBIsReadWholeByTheClientWithAFourMiBLimit) {
  Start();
  const std::string path =
      absl::StrCat("/dev/shm/rdmad-list-paging-", getpid(), "-", std::string(170, 'r'));
  {
    std::ofstream f(path);
    f << std::string(4096, 'x');
  }
  const std::string pd = CreatePd();
  constexpr int kRegions = 20000;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto stub = v1::MemoryRegions::NewStub(channel_);
      for (int i = t; i < kRegions; i += 4) {
        v1::RegisterMrRequest req;
        req.set_pd(pd);
        v1::FileMemory* file = req.mutable_source()->mutable_file();
        file->set_path(path);
        file->set_length(4096);
        req.add_access(v1::LOCAL_WRITE);
        req.add_access(v1::REMOTE_READ);
        v1::MemoryRegion mr;
        grpc::ClientContext ctx;
        grpc::Status s = stub->RegisterMr(&ctx, req, &mr);
        ASSERT_TRUE(s.ok()) << s.error_message();
      }
    });
  }
  for (auto& t : threads) t.join();
  const auto registered = std::chrono::steady_clock::now();

  client::Client::Options o;
  o.target = rdmad_.target();
  o.max_receive_message_bytes = 4 << 20;
  client::Client c(o);
  absl::StatusOr<v1::ListMrsResponse> all = c.ListMrs();
  const auto listed = std::chrono::steady_clock::now();
  std::remove(path.c_str());
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->mrs_size(), kRegions);
  EXPECT_GT(all->ByteSizeLong(), size_t{4} << 20);  // as one message it would not pass 4 MiB
  EXPECT_TRUE(all->next_page_token().empty());
  uint64_t previous = 0;
  for (const v1::MemoryRegion& mr : all->mrs()) {  // in number order, each once
    const uint64_t n = std::stoull(mr.name().substr(4));
    ASSERT_GT(n, previous) << mr.name();
    previous = n;
  }
  std::printf("%d regions: registered in %lld ms, listed (%zu bytes, %d pages) in %lld ms\n", kRegions,
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(registered - start).count()),
              all->ByteSizeLong(), (kRegions + 999) / 1000,
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(listed - registered).count()));

  // One page: the default and the maximum are 1000.
  v1::ListMrsRequest one;
  absl::StatusOr<v1::ListMrsResponse> page = c.ListMrsPage(one);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->mrs_size(), 1000);
  EXPECT_FALSE(page->next_page_token().empty());
  one.set_page_size(5000);
  page = c.ListMrsPage(one);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->mrs_size(), 1000);
  // The client's own page size.
  o.list_page_size = 7;
  one.set_page_size(0);
  one.set_pd(pd);
  page = client::Client(o).ListMrsPage(one);  // a page as asked: rdmad's default
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->mrs_size(), 1000);
}

TEST_F(ListPagingTest, BadPageSizesAndTokensAreRefusedNamingTheField) {
  Start();
  const std::string pd1 = CreatePd(), pd2 = CreatePd();
  for (int i = 0; i < 3; ++i) RegisterMr(pd1);
  v1::ListMrsRequest req;
  v1::ListMrsResponse resp;
  req.set_page_size(-1);
  grpc::Status s = ListMrs(req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(FieldOf(s), "page_size");
  EXPECT_THAT(s.error_message(), HasSubstr("page_size: is negative (-1)"));

  // A good token, with its own filters: the next page.
  req.set_page_size(2);
  req.set_pd(pd1);
  ASSERT_TRUE(ListMrs(req, &resp).ok());
  ASSERT_EQ(resp.mrs_size(), 2);
  const std::string token = resp.next_page_token();
  ASSERT_FALSE(token.empty());
  req.set_page_token(token);
  req.set_page_size(1000);  // page_size may change between pages
  v1::ListMrsResponse next;
  ASSERT_TRUE(ListMrs(req, &next).ok());
  ASSERT_EQ(next.mrs_size(), 1);
  EXPECT_EQ(next.mrs(0).name(), "mrs/3");
  EXPECT_TRUE(next.next_page_token().empty());

  // The same token with another filter, or none.
  for (const std::string& other : {pd2, std::string()}) {
    req.set_pd(other);
    s = ListMrs(req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << other;
    EXPECT_EQ(FieldOf(s), "page_token");
    EXPECT_THAT(s.error_message(), HasSubstr("other filters"));
  }
  // Not a token at all, a token altered, and another call's token.
  req.set_pd(pd1);
  for (const std::string& bad : {std::string("garbage!"), std::string("bm90IGEgdG9rZW4"), token.substr(1)}) {
    req.set_page_token(bad);
    s = ListMrs(req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
    EXPECT_EQ(FieldOf(s), "page_token") << bad;
  }
  v1::ListMwsRequest mws;
  mws.set_pd(pd1);
  mws.set_page_token(token);
  v1::ListMwsResponse mws_resp;
  grpc::ClientContext ctx;
  s = v1::MemoryWindows::NewStub(channel_)->ListMws(&ctx, mws, &mws_resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(FieldOf(s), "page_token");
  EXPECT_THAT(s.error_message(), HasSubstr("is a page token of ListMrs, not of ListMws"));
}

TEST_F(ListPagingTest, ObjectsMadeOrRemovedBetweenPagesAreNeitherRepeatedNorSkipped) {
  Start();
  for (int i = 0; i < 10; ++i) CreatePd();  // pds/1 .. pds/10
  auto pds = v1::ProtectionDomains::NewStub(channel_);
  v1::ListPdsRequest req;
  req.set_page_size(4);
  v1::ListPdsResponse page;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(pds->ListPds(&ctx, req, &page).ok());
  }
  std::vector<std::string> seen;
  for (const auto& pd : page.pds()) seen.push_back(pd.name());
  EXPECT_EQ(seen, (std::vector<std::string>{"pds/1", "pds/2", "pds/3", "pds/4"}));
  // Between pages: one already listed and one not yet listed go, a new one comes.
  for (const char* gone : {"pds/2", "pds/6"}) {
    v1::DeletePdRequest del;
    del.set_name(gone);
    v1::DeletePdResponse unused;
    grpc::ClientContext ctx;
    ASSERT_TRUE(pds->DeletePd(&ctx, del, &unused).ok()) << gone;
  }
  EXPECT_EQ(CreatePd(), "pds/11");
  while (!page.next_page_token().empty()) {
    req.set_page_token(page.next_page_token());
    grpc::ClientContext ctx;
    ASSERT_TRUE(pds->ListPds(&ctx, req, &page).ok());
    EXPECT_LE(page.pds_size(), 4);
    for (const auto& pd : page.pds()) seen.push_back(pd.name());
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"pds/1", "pds/2", "pds/3", "pds/4", "pds/5", "pds/7", "pds/8", "pds/9",
                                            "pds/10", "pds/11"}));
}

TEST_F(ListPagingTest, TenantsPageThroughTheirOwnObjectsOnly) {
  Start(/*tenants=*/true);
  // Interleaved: a's PDs are odd, b's even; b has the last four.
  std::vector<std::string> of_a, of_b;
  for (int i = 0; i < 6; ++i) {
    of_a.push_back(CreatePd(kA));
    of_b.push_back(CreatePd(kB));
  }
  for (int i = 0; i < 3; ++i) of_b.push_back(CreatePd(kB));
  for (const auto& [who, own] : {std::pair(kA, of_a), std::pair(kB, of_b)}) {
    for (int size : {1, 2, 4, 6, 1000}) {
      std::vector<std::vector<std::string>> pages = PdPages(size, who);
      std::vector<std::string> all;
      for (size_t p = 0; p < pages.size(); ++p) {
        // Full pages but the last; no page is empty unless the list is, so a page says nothing of others'.
        if (p + 1 < pages.size()) {
          EXPECT_EQ(pages[p].size(), static_cast<size_t>(size)) << who;
        }
        EXPECT_FALSE(pages[p].empty()) << who << " page " << p;
        all.insert(all.end(), pages[p].begin(), pages[p].end());
      }
      EXPECT_EQ(all, own) << who << " page_size " << size;
      EXPECT_EQ(pages.size(), (own.size() + size - 1) / size) << who << " page_size " << size;
    }
  }
  // A token of a's used by b (or by the admin) gives b its own objects after that point, nothing of a's.
  v1::ListPdsRequest req;
  req.set_page_size(2);
  v1::ListPdsResponse resp;
  ASSERT_TRUE(v1::ProtectionDomains::NewStub(channel_)->ListPds(Ctx(kA).get(), req, &resp).ok());
  ASSERT_EQ(resp.pds(1).name(), of_a[1]);  // pds/3
  req.set_page_token(resp.next_page_token());
  req.set_page_size(1000);
  ASSERT_TRUE(v1::ProtectionDomains::NewStub(channel_)->ListPds(Ctx(kB).get(), req, &resp).ok());
  std::vector<std::string> got;
  for (const auto& pd : resp.pds()) got.push_back(pd.name());
  EXPECT_EQ(got, std::vector<std::string>(of_b.begin() + 1, of_b.end()));  // pds/4 on

  // Regions the same way, through the client library with small pages.
  for (int i = 0; i < 5; ++i) {
    RegisterMr(of_a[0], kA);
    RegisterMr(of_b[0], kB);
  }
  client::Client::Options o;
  o.target = rdmad_.target();
  o.list_page_size = 2;
  client::Client as_a(rdmad_.ChannelAs(kA));
  absl::StatusOr<v1::ListMrsResponse> mrs = as_a.ListMrs();
  ASSERT_TRUE(mrs.ok()) << mrs.status();
  EXPECT_EQ(mrs->mrs_size(), 5);
  for (const auto& mr : mrs->mrs()) EXPECT_EQ(mr.pd(), of_a[0]);
  v1::ListMrsRequest one;
  one.set_page_size(5);
  absl::StatusOr<v1::ListMrsResponse> page = as_a.ListMrsPage(one);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->mrs_size(), 5);
  EXPECT_TRUE(page->next_page_token().empty());  // b's regions after a's last say nothing

  // Tenants: each sees itself alone, on one page.
  v1::ListTenantsRequest tr;
  tr.set_page_size(1);
  v1::ListTenantsResponse tenants;
  ASSERT_TRUE(v1::Tenants::NewStub(channel_)->ListTenants(Ctx(kB).get(), tr, &tenants).ok());
  ASSERT_EQ(tenants.tenants_size(), 1);
  EXPECT_EQ(tenants.tenants(0).name(), "tenants/b");
  EXPECT_TRUE(tenants.next_page_token().empty());
  ASSERT_TRUE(v1::Tenants::NewStub(channel_)->ListTenants(Ctx("ops").get(), tr, &tenants).ok());
  ASSERT_EQ(tenants.tenants_size(), 1);
  EXPECT_EQ(tenants.tenants(0).name(), "tenants/a");
  EXPECT_FALSE(tenants.next_page_token().empty());
}

// Pages of one item, followed to the end, against the client's whole list: every List call pages.
TEST_F(ListPagingTest, EveryListCallPages) {
  Start();
  client::Client::Options o;
  o.target = rdmad_.target();
  o.list_page_size = 1;
  client::Client c(o);
  const std::string pd = CreatePd();
  CreatePd();
  const std::string mr = RegisterMr(pd);
  RegisterMr(pd);
  for (int i = 0; i < 2; ++i) {
    v1::CreateQpRequest q;
    q.set_pd(pd);
    ASSERT_TRUE(c.CreateQp(q).ok());
    v1::AllocMwRequest w;
    w.set_pd(pd);
    w.set_type(v1::TYPE_1);
    ASSERT_TRUE(c.AllocMw(w).ok());
    v1::CreateCmIdRequest id;
    id.set_pd(pd);
    ASSERT_TRUE(c.CreateCmId(id).ok());
    v1::CreateChannelRequest ch;
    ASSERT_TRUE(c.CreateChannel(ch).ok());
  }
  // Grants need MW_BIND on their region.
  v1::RegisterMrRequest rr;
  rr.set_pd(pd);
  rr.mutable_source()->mutable_anonymous()->set_size(8192);
  for (v1::Access a : {v1::LOCAL_WRITE, v1::REMOTE_READ, v1::MW_BIND}) rr.add_access(a);
  absl::StatusOr<v1::MemoryRegion> granted = c.RegisterMr(rr);
  ASSERT_TRUE(granted.ok()) << granted.status();
  for (int i = 0; i < 3; ++i) {
    v1::IssueGrantRequest g;
    g.set_mr(granted->name());
    g.set_length(4096);
    g.set_principal("reader");
    ASSERT_TRUE(c.IssueGrant(g).ok());
  }

  auto expect_paged = [](const char* what, int all, int first_page, bool more) {
    SCOPED_TRACE(what);
    EXPECT_GE(all, 2);
    EXPECT_EQ(first_page, 1);
    EXPECT_TRUE(more);
  };
  auto devices = c.ListDevices();
  ASSERT_TRUE(devices.ok()) << devices.status();
  EXPECT_GE(devices->devices_size(), 1);
  {
    v1::ListDevicesRequest r;
    r.set_page_size(1);
    auto p = c.ListDevicesPage(r);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->devices_size(), 1);
    EXPECT_EQ(p->next_page_token().empty(), devices->devices_size() == 1);
  }
#define PAGED(List, Field)                                                          \
  {                                                                                 \
    auto all = c.List();                                                            \
    ASSERT_TRUE(all.ok()) << all.status();                                          \
    v1::List##Request r;                                                            \
    r.set_page_size(1);                                                             \
    auto p = c.List##Page(r);                                                       \
    ASSERT_TRUE(p.ok()) << p.status();                                              \
    expect_paged(#List, all->Field##_size(), p->Field##_size(), !p->next_page_token().empty()); \
    EXPECT_EQ(p->Field(0).name(), all->Field(0).name());                            \
  }
  PAGED(ListPds, pds)
  PAGED(ListMrs, mrs)
  PAGED(ListQps, qps)
  PAGED(ListMws, mws)
  PAGED(ListChannels, channels)
  PAGED(ListCmIds, cm_ids)
  PAGED(ListGrants, grants)
#undef PAGED
  auto grants = c.ListGrants();
  ASSERT_TRUE(grants.ok());
  EXPECT_EQ(grants->grants_size(), 3);
  auto mrs = c.ListMrs();
  ASSERT_TRUE(mrs.ok());
  EXPECT_EQ(mrs->mrs_size(), 3);
  EXPECT_EQ(mrs->mrs(0).name(), mr);
}

}  // namespace
}  // namespace rdmad
