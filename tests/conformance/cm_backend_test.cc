// The librdmacm backend alone (server/verbs/cm.*): real rdma_cm on rxe0 in the Soft-RoCE guest, no gRPC,
// no registry. Run by run-cm-backend.sh inside tests/guest/run-in-guest.sh, never on the host.
//
// Environment: RDMAD_DEVICE (default rxe0), RDMAD_CM_ADDR (an IPv4 address on it, default 10.0.2.15).
// Every test opens its own VerbsFabric, uses its own ports, and checks at TearDown that `rdma resource
// show` is what it was after the fabric opened (everything the test made was destroyed by then).
// Threads: channels are driven synchronously on the test thread (poll() the fd with a bounded timeout,
// then Drain()); the only other thread is the destroy watchdog, which ends the process after 10 s.
#include "tests/conformance/cm_backend_fixture.h"

#include <cerrno>

#include "server/verbs/pd.h"

namespace rdmad::verbs::cmtest {
namespace {

TEST_F(CmBackendTest, ListenConnectAcceptEstablished) {
  const uint16_t port = 7471;
  auto lchan = NewChannel(), achan = NewChannel();
  ASSERT_TRUE(lchan && achan);
  std::unique_ptr<CmId> listener;
  End active, passive;
  ASSERT_NO_FATAL_FAILURE(Listen(*lchan, 1, port, &listener));
  EXPECT_EQ(listener->local().host, Addr());
  EXPECT_EQ(listener->local().port, port);
  EXPECT_EQ(listener->device(), device_);
  ASSERT_NO_FATAL_FAILURE(Resolve(*achan, 2, port, &active));
  EXPECT_EQ(State(active), fabric::QpState::kInit);

  const std::string hello = "connect: a token of 24 b", welcome = "accept: (addr, rkey, length) would go here";
  ASSERT_TRUE(active.id->Connect(hello).ok());
  std::string request_data;
  ASSERT_NO_FATAL_FAILURE(TakeRequest(*lchan, 1, 3, &passive, &request_data));
  EXPECT_TRUE(Padded(request_data, hello));
  std::cout << "[   INFO   ] CONNECT_REQUEST private data: " << request_data.size() << " bytes for "
            << hello.size() << " sent" << std::endl;
  EXPECT_EQ(passive.id->local().host, Addr());
  EXPECT_EQ(passive.id->local().port, port);
  EXPECT_EQ(passive.id->remote().host, Addr());
  EXPECT_EQ(passive.id->remote().port, active.id->local().port);

  ASSERT_TRUE(passive.id->Accept(welcome).ok());
  CmEvent est;
  ASSERT_TRUE(NextIs(*achan, CmEventType::kEstablished, 2, &est));  // and no CONNECT_REQUEST before it
  EXPECT_TRUE(Padded(est.private_data, welcome));
  std::cout << "[   INFO   ] active ESTABLISHED private data: " << est.private_data.size() << " bytes for "
            << welcome.size() << " sent" << std::endl;
  CmEvent pest;
  ASSERT_TRUE(NextIs(*lchan, CmEventType::kEstablished, 3, &pest));
  std::cout << "[   INFO   ] passive ESTABLISHED private data: " << pest.private_data.size() << " bytes"
            << std::endl;
  EXPECT_EQ(State(active), fabric::QpState::kRts);
  EXPECT_EQ(State(passive), fabric::QpState::kRts);

  EXPECT_EQ(active.id->local().host, Addr());
  EXPECT_NE(active.id->local().port, 0);
  EXPECT_EQ(active.id->remote().host, Addr());
  EXPECT_EQ(active.id->remote().port, port);

  // Each side's endpoint is what the other side's QP was connected to.
  for (auto [self, peer] : {std::pair{&active, &passive}, std::pair{&passive, &active}}) {
    fabric::QpEndpoint mine = self->qp()->local();
    EXPECT_EQ(mine.qpn, self->qp()->raw()->qp_num);
    EXPECT_FALSE(mine.gid.empty());
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    ASSERT_EQ(ibv_query_qp(peer->qp()->raw(), &attr, IBV_QP_DEST_QPN | IBV_QP_RQ_PSN, &init), 0);
    EXPECT_EQ(attr.dest_qp_num, mine.qpn);
    EXPECT_EQ(attr.rq_psn, mine.psn);
  }
  absl::Status s = active.id->qp()->Connect(passive.qp()->local());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(Quiet(*achan));
  EXPECT_TRUE(Quiet(*lchan));

  // rdma_disconnect sends a DREQ: the peer hears DISCONNECTED; the disconnecting side hears it only once
  // the peer answers with its own rdma_disconnect (the DREP), or the DREQ times out.
  ASSERT_TRUE(active.id->Disconnect().ok());
  EXPECT_TRUE(NextIs(*lchan, CmEventType::kDisconnected, 3));
  EXPECT_TRUE(Quiet(*achan));
  ASSERT_TRUE(passive.id->Disconnect().ok());
  EXPECT_TRUE(NextIs(*achan, CmEventType::kDisconnected, 2));
}

TEST_F(CmBackendTest, RejectCarriesPrivateData) {
  const uint16_t port = 7472;
  auto lchan = NewChannel(), achan = NewChannel();
  ASSERT_TRUE(lchan && achan);
  std::unique_ptr<CmId> listener;
  End active;
  ASSERT_NO_FATAL_FAILURE(Listen(*lchan, 1, port, &listener));
  ASSERT_NO_FATAL_FAILURE(Resolve(*achan, 2, port, &active));
  ASSERT_TRUE(active.id->Connect("let me in").ok());
  CmEvent req;
  ASSERT_TRUE(NextIs(*lchan, CmEventType::kConnectRequest, 1, &req));
  const std::string no = "rejected: unknown token (code 7)";
  ASSERT_TRUE(req.new_id->Reject(no).ok());
  CmEvent rej;
  ASSERT_TRUE(NextIs(*achan, CmEventType::kRejected, 2, &rej));
  EXPECT_TRUE(Padded(rej.private_data, no));
  EXPECT_EQ(rej.status, 28) << "IB_CM_REJ_CONSUMER_DEFINED";
  std::cout << "[   INFO   ] REJECTED: status " << rej.status << ", " << rej.private_data.size()
            << " bytes of private data" << std::endl;
  EXPECT_EQ(State(active), fabric::QpState::kError);  // librdmacm moves the QP to ERROR on REJECTED
  EXPECT_TRUE(Quiet(*lchan));
}

TEST_F(CmBackendTest, MigratedIdGetsDisconnectOnNewChannelOnly) {
  auto lchan = NewChannel(), achan = NewChannel(), cchan = NewChannel();
  ASSERT_TRUE(lchan && achan && cchan);
  std::unique_ptr<CmId> listener;
  End active, passive;
  ASSERT_NO_FATAL_FAILURE(Establish(*lchan, *achan, 7473, &listener, &active, &passive));
  ASSERT_TRUE(active.id->Migrate(*cchan->ch).ok());
  ASSERT_TRUE(passive.id->Disconnect().ok());
  EXPECT_TRUE(NextIs(*cchan, CmEventType::kDisconnected, 2));
  ASSERT_TRUE(active.id->Disconnect().ok());  // answers the DREQ: the passive side's DISCONNECTED
  EXPECT_TRUE(NextIs(*lchan, CmEventType::kDisconnected, 3));
  EXPECT_TRUE(Quiet(*achan));
  EXPECT_TRUE(Quiet(*cchan));
}

TEST_F(CmBackendTest, EventPendingAtMigrationArrivesOnceOnNewChannel) {
  auto lchan = NewChannel(), achan = NewChannel(), cchan = NewChannel();
  ASSERT_TRUE(lchan && achan && cchan);
  std::unique_ptr<CmId> listener;
  End active, passive;
  ASSERT_NO_FATAL_FAILURE(Establish(*lchan, *achan, 7474, &listener, &active, &passive));
  ASSERT_TRUE(passive.id->Disconnect().ok());
  ASSERT_TRUE(Readable(achan->ch->fd(), kWaitMs)) << "the DISCONNECTED for the active id never became pending";
  ASSERT_TRUE(active.id->Migrate(*cchan->ch).ok());
  EXPECT_TRUE(Quiet(*achan));
  EXPECT_TRUE(NextIs(*cchan, CmEventType::kDisconnected, 2));
  EXPECT_TRUE(Quiet(*cchan));
  ASSERT_TRUE(active.id->Disconnect().ok());
  EXPECT_TRUE(NextIs(*lchan, CmEventType::kDisconnected, 3));
}

TEST_F(CmBackendTest, IdMigratedBeforeConnectGetsEstablishedOnNewChannel) {
  const uint16_t port = 7475;
  auto lchan = NewChannel(), achan = NewChannel(), cchan = NewChannel();
  ASSERT_TRUE(lchan && achan && cchan);
  std::unique_ptr<CmId> listener;
  End active, passive;
  ASSERT_NO_FATAL_FAILURE(Listen(*lchan, 1, port, &listener));
  ASSERT_NO_FATAL_FAILURE(Resolve(*achan, 2, port, &active));
  ASSERT_TRUE(active.id->Migrate(*cchan->ch).ok());
  ASSERT_TRUE(active.id->Connect("after migration").ok());
  ASSERT_NO_FATAL_FAILURE(TakeRequest(*lchan, 1, 3, &passive));
  ASSERT_TRUE(passive.id->Accept("").ok());
  EXPECT_TRUE(NextIs(*cchan, CmEventType::kEstablished, 2));
  EXPECT_TRUE(NextIs(*lchan, CmEventType::kEstablished, 3));
  EXPECT_TRUE(Quiet(*achan));
  EXPECT_EQ(State(active), fabric::QpState::kRts);
}

TEST_F(CmBackendTest, DestroyingIdsNeverBlocks) {
  auto lchan = NewChannel(), achan = NewChannel();
  ASSERT_TRUE(lchan && achan);
  {  // Connected, disconnected, every event drained (and so acknowledged): ids with QPs, then the listener.
    std::unique_ptr<CmId> listener;
    End active, passive;
    ASSERT_NO_FATAL_FAILURE(Establish(*lchan, *achan, 7476, &listener, &active, &passive));
    ASSERT_TRUE(active.id->Disconnect().ok());
    ASSERT_TRUE(NextIs(*lchan, CmEventType::kDisconnected, 3));
    ASSERT_TRUE(passive.id->Disconnect().ok());
    ASSERT_TRUE(NextIs(*achan, CmEventType::kDisconnected, 2));
    Destroy(passive.id, "a disconnected passive id with a QP");
    Destroy(active.id, "a disconnected active id with a QP");
    Destroy(listener, "a listener");
  }
  {  // An id whose DISCONNECTED is still queued, not taken: destroying it drops the event.
    std::unique_ptr<CmId> listener;
    End active, passive;
    ASSERT_NO_FATAL_FAILURE(Establish(*lchan, *achan, 7477, &listener, &active, &passive));
    ASSERT_TRUE(passive.id->Disconnect().ok());
    ASSERT_TRUE(Readable(achan->ch->fd(), kWaitMs));
    Destroy(active.id, "an id with a queued event");
    EXPECT_TRUE(Quiet(*achan));
    EXPECT_TRUE(NextIs(*lchan, CmEventType::kDisconnected, 3));  // destroying the id answered the DREQ
  }
  {  // An incoming id destroyed without accept or reject: the active side hears REJECTED.
    std::unique_ptr<CmId> listener;
    End active;
    ASSERT_NO_FATAL_FAILURE(Listen(*lchan, 1, 7478, &listener));
    ASSERT_NO_FATAL_FAILURE(Resolve(*achan, 2, 7478, &active));
    ASSERT_TRUE(active.id->Connect("").ok());
    CmEvent req;
    ASSERT_TRUE(NextIs(*lchan, CmEventType::kConnectRequest, 1, &req));
    Destroy(req.new_id, "an unanswered incoming id");
    CmEvent rej;
    ASSERT_TRUE(NextIs(*achan, CmEventType::kRejected, 2, &rej));
    std::cout << "[   INFO   ] unanswered request destroyed: REJECTED status " << rej.status << std::endl;
  }
  {  // A listener destroyed with its CONNECT_REQUEST still queued: the request dies with it.
    std::unique_ptr<CmId> listener;
    End active;
    ASSERT_NO_FATAL_FAILURE(Listen(*lchan, 1, 7479, &listener));
    ASSERT_NO_FATAL_FAILURE(Resolve(*achan, 2, 7479, &active));
    ASSERT_TRUE(active.id->Connect("").ok());
    ASSERT_TRUE(Readable(lchan->ch->fd(), kWaitMs));
    Destroy(listener, "a listener with a queued connect request");
    EXPECT_TRUE(Quiet(*lchan));
    std::optional<CmEvent> e = achan->Next(kWaitMs);
    ASSERT_TRUE(e.has_value()) << "the active side heard nothing";
    EXPECT_EQ(e->type, CmEventType::kRejected) << Describe(*e);
    std::cout << "[   INFO   ] listener destroyed with a queued request: active got " << Describe(*e) << std::endl;
  }
}

TEST_F(CmBackendTest, BadInputsAreRefusedAndCreateNothing) {
  const uint16_t port = 7480;
  auto lchan = NewChannel(), achan = NewChannel();
  ASSERT_TRUE(lchan && achan);
  auto fresh = achan->ch->CreateId(9);
  ASSERT_TRUE(fresh.ok());
  std::unique_ptr<CmId> id = std::move(fresh).value();
  auto pd = device_->AllocPd();
  ASSERT_TRUE(pd.ok());
  std::string before = Resources();
  for (const char* host : {"10.0.2.999", "", "rxe0.example", "10.0.2", "::1::2"}) {
    absl::Status s = id->Bind({host, port});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << host << ": " << s;
    EXPECT_EQ(FieldOf(s), "address") << s;
    s = id->ResolveAddr({host, port}, 1000);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << host << ": " << s;
    EXPECT_EQ(FieldOf(s), "address") << s;
  }
  absl::Status s = id->Bind({"10.9.9.9", port});  // well formed, but not an address of this host
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(FieldOf(s), "address") << s;
  EXPECT_EQ(CallOf(s), "rdma_bind_addr") << s;
  std::cout << "[   INFO   ] bind to a foreign address: " << s << std::endl;
  s = id->CreateQp(**pd);  // on no device yet
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(id->qp(), nullptr);
  EXPECT_EQ(Resources(), before);
  EXPECT_TRUE(Quiet(*achan));
  id.reset();
  pd->reset();

  std::unique_ptr<CmId> listener;
  End active, passive;
  ASSERT_NO_FATAL_FAILURE(Listen(*lchan, 1, port, &listener));
  ASSERT_NO_FATAL_FAILURE(Resolve(*achan, 2, port, &active));
  before = Resources();
  const std::string c56(fabric::kConnectPrivateDataMax, 'c'), a196(fabric::kAcceptPrivateDataMax, 'a');
  s = active.id->Connect(c56 + "!");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(FieldOf(s), "private_data") << s;
  EXPECT_TRUE(Quiet(*lchan));
  EXPECT_EQ(State(active), fabric::QpState::kInit);
  EXPECT_EQ(Resources(), before);

  ASSERT_TRUE(active.id->Connect(c56).ok());  // exactly at the limit
  std::string data;
  ASSERT_NO_FATAL_FAILURE(TakeRequest(*lchan, 1, 3, &passive, &data));
  EXPECT_EQ(data, c56);
  s = passive.id->CreateQp(*passive.pd);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  before = Resources();
  s = passive.id->Accept(a196 + "!");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(FieldOf(s), "private_data") << s;
  s = passive.id->Reject(std::string(fabric::kRejectPrivateDataMax + 1, 'r'));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(FieldOf(s), "private_data") << s;
  EXPECT_TRUE(Quiet(*achan));
  EXPECT_EQ(Resources(), before);

  ASSERT_TRUE(passive.id->Accept(a196).ok());  // exactly at the limit
  CmEvent est;
  ASSERT_TRUE(NextIs(*achan, CmEventType::kEstablished, 2, &est));
  EXPECT_EQ(est.private_data, a196);
  EXPECT_TRUE(NextIs(*lchan, CmEventType::kEstablished, 3));
}

TEST_F(CmBackendTest, Type2WindowBindsOnCmQpAndThePeerReadsThroughIt) {
  auto lchan = NewChannel(), achan = NewChannel();
  ASSERT_TRUE(lchan && achan);
  std::unique_ptr<CmId> listener;
  End active, passive;
  ASSERT_NO_FATAL_FAILURE(Establish(*lchan, *achan, 7481, &listener, &active, &passive));

  std::vector<char> src(4096), dst(4096, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>('A' + i % 26);
  auto mr = active.pd->RegMr(src.data(), src.size(),
                             fabric::kLocalWrite | fabric::kRemoteRead | fabric::kMwBind);
  ASSERT_TRUE(mr.ok()) << mr.status();
  auto mw = active.pd->AllocMw(fabric::MwType::kType2);
  ASSERT_TRUE(mw.ok()) << mw.status();
  auto dst_mr = passive.pd->RegMr(dst.data(), dst.size(), fabric::kLocalWrite);
  ASSERT_TRUE(dst_mr.ok()) << dst_mr.status();

  // Runs the device's completions until `done` says so (bounded).
  auto run_until = [&](const bool& done) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(kWaitMs);
    while (!done && Clock::now() < deadline) {
      if (Readable(device_->completion_fd(), 100)) device_->DrainCompletions();
    }
  };
  fabric::BindSpec spec;
  spec.mr = mr->get();
  spec.addr = reinterpret_cast<uintptr_t>(src.data());
  spec.length = src.size();
  spec.access = fabric::kRemoteRead;
  bool bound = false;
  absl::StatusOr<uint32_t> rkey = absl::UnknownError("no completion");
  ASSERT_TRUE(active.id->qp()->PostBind(**mw, spec, [&](absl::StatusOr<uint32_t> r) {
    rkey = r;
    bound = true;
  }).ok());
  run_until(bound);
  ASSERT_TRUE(bound) << "no bind completion in " << kWaitMs << " ms";
  ASSERT_TRUE(rkey.ok()) << rkey.status();
  EXPECT_EQ(*rkey, (*mw)->rkey());

  // The peer reads the window through its own QP (unsignaled: a failure still completes, with an error).
  ibv_sge sge{reinterpret_cast<uintptr_t>(dst.data()), static_cast<uint32_t>(dst.size()), (*dst_mr)->lkey()};
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_RDMA_READ;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.wr.rdma.remote_addr = spec.addr;
  wr.wr.rdma.rkey = *rkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(passive.qp()->raw(), &wr, &bad), 0);
  bool read_done = false;
  const auto deadline = Clock::now() + std::chrono::milliseconds(kWaitMs);
  while (!read_done && Clock::now() < deadline && State(passive) == fabric::QpState::kRts) {
    if (Readable(device_->completion_fd(), 50)) device_->DrainCompletions();
    read_done = dst == src;
  }
  EXPECT_TRUE(read_done) << "the read through the window did not complete; peer QP state "
                         << static_cast<int>(State(passive));

  bool invalidated = false;
  absl::Status inv = absl::UnknownError("no completion");
  ASSERT_TRUE(active.id->qp()->PostInvalidate(**mw, **mr, [&](absl::Status st) {
    inv = st;
    invalidated = true;
  }).ok());
  run_until(invalidated);
  EXPECT_TRUE(inv.ok()) << inv;
}

// A grant's activation posts the window's bind and the key's SEND in one ibv_post_send, the SEND fenced
// behind the bind (docs/grants.md, "The key never leaves before its bind"). KeyAfterBind does that on the
// accepting side of a connection on rxe0, with the dialing side's receive posted first (as a grant's client
// posts one before connecting), over a region with or without MW_BIND, and reports what each side saw.
struct KeyAfterBindResult {
  absl::StatusOr<uint32_t> rkey = absl::UnknownError("no completion");
  absl::Status sent = absl::UnknownError("no completion");
  fabric::QpState server_state = fabric::QpState::kReset;
  std::string received;  // the client's receive buffer, up to its first NUL
};

class KeyAfterBindTest : public CmBackendTest {
 protected:
  void KeyAfterBind(uint16_t port, bool region_allows_binds, KeyAfterBindResult* out) {
    auto lchan = NewChannel(), achan = NewChannel();
    ASSERT_TRUE(lchan && achan);
    std::unique_ptr<CmId> listener;
    End client, server;  // the grant's client dials; the server (rdmad's side) accepts, binds and sends
    ASSERT_NO_FATAL_FAILURE(Establish(*lchan, *achan, port, &listener, &client, &server));

    std::vector<char> inbox(256, 0);
    ibv_mr* inbox_mr = ibv_reg_mr(static_cast<Pd*>(client.pd.get())->raw(), inbox.data(), inbox.size(),
                                  IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(inbox_mr, nullptr) << "ibv_reg_mr: errno " << errno;
    ibv_sge rsge{reinterpret_cast<uintptr_t>(inbox.data()), static_cast<uint32_t>(inbox.size() - 1),
                 inbox_mr->lkey};
    ibv_recv_wr rwr{};
    rwr.wr_id = 0xC11E;
    rwr.sg_list = &rsge;
    rwr.num_sge = 1;
    ibv_recv_wr* rbad = nullptr;
    ASSERT_EQ(ibv_post_recv(client.qp()->raw(), &rwr, &rbad), 0);

    std::vector<char> memory(4096, 'x');
    const uint32_t access =
        fabric::kLocalWrite | fabric::kRemoteRead | (region_allows_binds ? fabric::kMwBind : 0u);
    auto mr = server.pd->RegMr(memory.data(), memory.size(), access);
    ASSERT_TRUE(mr.ok()) << mr.status();
    auto mw = server.pd->AllocMw(fabric::MwType::kType2);
    ASSERT_TRUE(mw.ok()) << mw.status();

    bool bind_done = false, send_done = false, message_asked = false;
    fabric::SendAfterBind key;
    key.message = [&](uint32_t r) {
      message_asked = true;
      return "KEY " + std::to_string(r);
    };
    key.done = [&](absl::Status st) {
      out->sent = st;
      send_done = true;
    };
    fabric::BindSpec spec;
    spec.mr = mr->get();
    spec.addr = reinterpret_cast<uintptr_t>(memory.data());
    spec.length = memory.size();
    spec.access = fabric::kRemoteRead;
    spec.then = &key;
    ASSERT_TRUE(server.qp()->PostBind(**mw, spec, [&](absl::StatusOr<uint32_t> r) {
      out->rkey = r;
      bind_done = true;
    }).ok());
    EXPECT_TRUE(message_asked);  // the SEND was posted, with the bind
    const auto deadline = Clock::now() + std::chrono::milliseconds(kWaitMs);
    while (!(bind_done && send_done) && Clock::now() < deadline) {
      if (Readable(device_->completion_fd(), 100)) device_->DrainCompletions();
    }
    EXPECT_TRUE(bind_done && send_done) << "bind done " << bind_done << ", send done " << send_done;
    out->server_state = State(server);
    // Time for the key to land, had it been sent (the client's completions are the device's too; the bytes
    // are what counts).
    const auto settle = Clock::now() + std::chrono::milliseconds(500);
    while (Clock::now() < settle) {
      if (Readable(device_->completion_fd(), 50)) device_->DrainCompletions();
    }
    out->received = std::string(inbox.data());
    std::cout << "[   INFO   ] bind: " << out->rkey.status() << "; SEND: " << out->sent << "; received \""
              << out->received << "\"" << std::endl;

    if (out->rkey.ok()) {  // a bound type 2 window is invalidated before it goes
      bool invalidated = false;
      ASSERT_TRUE(server.qp()->PostInvalidate(**mw, **mr, [&](absl::Status) { invalidated = true; }).ok());
      const auto until = Clock::now() + std::chrono::milliseconds(kWaitMs);
      while (!invalidated && Clock::now() < until) {
        if (Readable(device_->completion_fd(), 100)) device_->DrainCompletions();
      }
    }
    mw->reset();
    mr->reset();
    Destroy(client.id, "client id");  // its QP, with the receive posted, before the buffer's registration
    EXPECT_EQ(ibv_dereg_mr(inbox_mr), 0);
  }
};

// The control: over a region that allows binds, the key arrives in the client's receive.
TEST_F(KeyAfterBindTest, ABindAndItsKeysSendInOnePostDeliverTheKey) {
  KeyAfterBindResult r;
  ASSERT_NO_FATAL_FAILURE(KeyAfterBind(7483, /*region_allows_binds=*/true, &r));
  ASSERT_TRUE(r.rkey.ok()) << r.rkey.status();
  EXPECT_TRUE(r.sent.ok()) << r.sent;
  EXPECT_EQ(r.received, "KEY " + std::to_string(*r.rkey));
}

// The bind fails for real on rxe (the region lacks MW_BIND: ibv_bind_mw(3)): it completes in error, the QP
// goes to the error state, and the SEND fenced behind it is flushed: the key never reaches the client.
TEST_F(KeyAfterBindTest, AFailedBindFlushesTheKeysSendFencedBehindIt) {
  KeyAfterBindResult r;
  ASSERT_NO_FATAL_FAILURE(KeyAfterBind(7485, /*region_allows_binds=*/false, &r));
  EXPECT_FALSE(r.rkey.ok()) << "the bind succeeded on a region without MW_BIND";
  EXPECT_FALSE(r.sent.ok()) << "the key's SEND completed although its bind failed";
  EXPECT_EQ(r.server_state, fabric::QpState::kError);
  EXPECT_EQ(r.received, "") << "the client received the key of a failed bind";
}

}  // namespace
}  // namespace rdmad::verbs::cmtest
