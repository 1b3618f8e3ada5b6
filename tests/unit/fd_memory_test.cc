// Memory passed as a file descriptor (docs/PROTOCOL.md#memory-shared-by-file-descriptor): the descriptor
// socket's messages (proto/wire/descriptor_message.h), the DescriptorStore (server/memory/descriptors.h),
// Mapping::Descriptor's rights (open mode, seals), and the whole path in an in-process rdmad over its unix
// sockets: Client::ShareFd, then RegisterMr with source.fd; a handle used once, by its own principal only (a
// child process of another uid deposits over the real socket; SO_PEERCRED tells them apart); refused
// requests (no descriptor, two, garbage, a pipe) leave no descriptor open in rdmad.
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "client/client.h"
#include "proto/wire/descriptor_message.h"
#include "rdmad/v1/rdmad.pb.h"
#include "server/common/fd.h"
#include "server/config.h"
#include "server/memory/descriptors.h"
#include "server/memory/mapping.h"
#include "tests/support/daemon_fixture.h"
#include "tests/support/server_status.h"
#include "tests/support/status.h"

namespace rdmad {
namespace {

namespace v1 = rdmad::v1;
using ::testing::HasSubstr;
using test::IsError;

// A memfd of `size` bytes, byte i = i * 7 + 3.
UniqueFd Memfd(size_t size, unsigned flags = MFD_CLOEXEC) {
  UniqueFd fd(memfd_create("rdmad-test", flags));
  EXPECT_TRUE(fd.valid());
  std::vector<char> data(size);
  for (size_t i = 0; i < size; ++i) data[i] = static_cast<char>(i * 7 + 3);
  EXPECT_EQ(write(fd.get(), data.data(), data.size()), static_cast<ssize_t>(size));
  return fd;
}
// `fd`'s file opened again with `flags` (a new open file description: its own mode).
UniqueFd Reopen(int fd, int flags) {
  return UniqueFd(open(("/proc/self/fd/" + std::to_string(fd)).c_str(), flags | O_CLOEXEC));
}
// How many of this process's descriptors refer to the file `dev`/`ino` (rdmad runs in this process: the
// descriptors it received are counted too, and gRPC's own come and go without mattering).
int FdsOn(dev_t dev, ino_t ino) {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  while (dirent* e = readdir(d)) {
    struct stat st {};
    if (e->d_name[0] != '.' && fstatat(dirfd(d), e->d_name, &st, 0) == 0 && st.st_dev == dev && st.st_ino == ino) ++n;
  }
  closedir(d);
  return n;
}
int OpenFds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

// ---- the wire

TEST(DescriptorMessage, RequestAndReplyRoundTrip) {
  EXPECT_OK(wire::DecodeDescriptorRequest(wire::EncodeDescriptorRequest()));
  ASSERT_OK_AND_ASSIGN(wire::DescriptorReply r,
                       wire::DecodeDescriptorReply(wire::EncodeDescriptorReply(0, "descriptors/0123")));
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.text, "descriptors/0123");
  ASSERT_OK_AND_ASSIGN(r, wire::DecodeDescriptorReply(wire::EncodeDescriptorReply(7, "descriptor: no")));
  EXPECT_EQ(r.code, 7);
}

TEST(DescriptorMessage, BadRequestsSayWhat) {
  std::string m = wire::EncodeDescriptorRequest();
  EXPECT_THAT(wire::DecodeDescriptorRequest(m.substr(0, 8)).message(), HasSubstr("16"));
  std::string bad = m;
  bad[0] = 'X';
  EXPECT_THAT(wire::DecodeDescriptorRequest(bad).message(), HasSubstr("RDFD"));
  bad = m;
  bad[4] = 2;
  EXPECT_THAT(wire::DecodeDescriptorRequest(bad).message(), HasSubstr("version 2"));
  bad = m;
  bad[6] = 9;
  EXPECT_THAT(wire::DecodeDescriptorRequest(bad).message(), HasSubstr("operation 9"));
  bad = m;
  bad[8] = 1;
  EXPECT_THAT(wire::DecodeDescriptorRequest(bad).message(), HasSubstr("flags"));
  EXPECT_FALSE(wire::DecodeDescriptorRequest(m + "x").ok());
  std::string reply = wire::EncodeDescriptorReply(0, "abc");
  EXPECT_FALSE(wire::DecodeDescriptorReply(reply + "d").ok());  // text longer than its header says
}

// ---- the store

TEST(DescriptorStore, AHandleIsUsedOnceByItsOwnPrincipal) {
  DescriptorStore store({});
  ASSERT_OK_AND_ASSIGN(std::string handle, store.Deposit(Memfd(4096), "unix:uid:1000"));
  EXPECT_TRUE(absl::StartsWith(handle, "descriptors/"));
  EXPECT_EQ(handle.size(), std::string("descriptors/").size() + 32);
  EXPECT_TRUE(IsError(store.Claim(handle, "unix:uid:1001", "h").status(), absl::StatusCode::kNotFound, "h"));
  EXPECT_EQ(store.waiting(), 1u);  // another principal's attempt spends nothing
  ASSERT_OK_AND_ASSIGN(UniqueFd kept, store.Claim(handle, "unix:uid:1000", "h", /*keep=*/true));
  EXPECT_TRUE(kept.valid());
  EXPECT_EQ(store.waiting(), 1u);  // a validation's duplicate: the handle still waits
  ASSERT_OK_AND_ASSIGN(UniqueFd fd, store.Claim(handle, "unix:uid:1000", "h"));
  EXPECT_TRUE(fd.valid());
  EXPECT_EQ(store.waiting(), 0u);
  EXPECT_TRUE(IsError(store.Claim(handle, "unix:uid:1000", "h").status(), absl::StatusCode::kNotFound, "h"));
  EXPECT_TRUE(IsError(store.Claim("descriptors/xyz", "unix:uid:1000", "h").status(),
                      absl::StatusCode::kInvalidArgument, "h"));
}

TEST(DescriptorStore, ExpiresAndIsBoundedPerPrincipalAndInAll) {
  absl::Time now = absl::FromUnixSeconds(1000);
  DescriptorStore::Options o;
  o.ttl = absl::Seconds(60);
  o.per_principal = 2;
  o.total = 3;
  o.clock = [&now] { return now; };
  DescriptorStore store(o);
  const int before = OpenFds();
  ASSERT_OK_AND_ASSIGN(std::string a1, store.Deposit(Memfd(4096), "a"));
  ASSERT_OK(store.Deposit(Memfd(4096), "a").status());
  absl::Status over = store.Deposit(Memfd(4096), "a").status();
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(over.message(), HasSubstr("max_descriptors_per_principal"));
  ASSERT_OK(store.Deposit(Memfd(4096), "b").status());
  over = store.Deposit(Memfd(4096), "c").status();
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(over.message(), HasSubstr("limit descriptors"));
  EXPECT_EQ(OpenFds(), before + 3);  // the refused ones were closed
  now += absl::Seconds(61);
  EXPECT_TRUE(IsError(store.Claim(a1, "a", "h").status(), absl::StatusCode::kNotFound, "h"));
  EXPECT_EQ(store.waiting(), 0u);  // every expired one closed at that Claim
  EXPECT_EQ(OpenFds(), before);
  ASSERT_OK(store.Deposit(Memfd(4096), "c").status());
}

// ---- the mapping: the descriptor's rights

TEST(MappingDescriptor, MapsTheRangeAndHonoursOpenModeAndSeals) {
  UniqueFd rw = Memfd(3 * 4096, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_OK_AND_ASSIGN(auto m, Mapping::Descriptor(Reopen(rw.get(), O_RDWR), 4096 + 10, 100, true, false, "source.fd"));
  EXPECT_TRUE(m->is_descriptor());
  EXPECT_TRUE(m->writable());
  EXPECT_EQ(static_cast<const char*>(m->data())[0], static_cast<char>((4096 + 10) * 7 + 3));
  EXPECT_TRUE(IsError(Mapping::Descriptor(Reopen(rw.get(), O_RDONLY), 0, 4096, true, false, "source.fd").status(),
                      absl::StatusCode::kPermissionDenied, "source.fd"));
  ASSERT_OK_AND_ASSIGN(auto ro, Mapping::Descriptor(Reopen(rw.get(), O_RDONLY), 0, 4096, false, false, "source.fd"));
  EXPECT_FALSE(ro->writable());
  EXPECT_TRUE(IsError(Mapping::Descriptor(Reopen(rw.get(), O_WRONLY), 0, 4096, false, false, "source.fd").status(),
                      absl::StatusCode::kPermissionDenied, "source.fd"));
  EXPECT_TRUE(IsError(Mapping::Descriptor(Reopen(rw.get(), O_RDWR), 0, 4 * 4096, false, false, "source.fd").status(),
                      absl::StatusCode::kOutOfRange, "source.fd.length"));
  EXPECT_TRUE(IsError(Mapping::Descriptor(Reopen(rw.get(), O_RDWR), 3 * 4096, 1, false, false, "source.fd").status(),
                      absl::StatusCode::kOutOfRange, "source.fd.offset"));
  m.reset();
  ASSERT_EQ(fcntl(rw.get(), F_ADD_SEALS, F_SEAL_WRITE), 0) << std::strerror(errno);
  absl::Status sealed = Mapping::Descriptor(Reopen(rw.get(), O_RDWR), 0, 4096, true, false, "source.fd").status();
  EXPECT_TRUE(IsError(sealed, absl::StatusCode::kPermissionDenied, "source.fd"));
  EXPECT_THAT(sealed.message(), HasSubstr("sealed against writing"));
  EXPECT_OK(Mapping::Descriptor(Reopen(rw.get(), O_RDWR), 0, 4096, false, false, "source.fd").status());
}

// Before Linux 6.2 the kernel pins every region as if for writing: ibv_reg_mr of a read-only shared mapping
// fails with EFAULT (seen on rxe under Debian 12's 6.1). That failure is said plainly, naming source.fd.
TEST(MappingDescriptor, AKernelsRefusalToPinReadOnlyMemoryIsExplained) {
  UniqueFd rw = Memfd(4096);
  ASSERT_OK_AND_ASSIGN(auto ro, Mapping::Descriptor(Reopen(rw.get(), O_RDONLY), 0, 4096, false, false, "source.fd"));
  const absl::Status efault = ErrnoError("ibv_reg_mr", EFAULT);
  absl::Status s = ExplainReadOnlyPin(efault, *ro);
  EXPECT_TRUE(IsError(s, absl::StatusCode::kFailedPrecondition, "source.fd"));
  EXPECT_EQ(ErrnoOf(s), EFAULT);
  EXPECT_THAT(s.message(), HasSubstr("read-write"));
  ASSERT_OK_AND_ASSIGN(auto writable, Mapping::Descriptor(Reopen(rw.get(), O_RDWR), 0, 4096, true, false, "source.fd"));
  EXPECT_EQ(ExplainReadOnlyPin(efault, *writable), efault);
  EXPECT_EQ(ExplainReadOnlyPin(ErrnoError("ibv_reg_mr", ENOMEM), *ro).code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(MappingDescriptor, RefusesWhatIsNotMemory) {
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  UniqueFd r(p[0]), w(p[1]);
  EXPECT_TRUE(IsError(CheckDescriptor(r.get(), false, "descriptor"), absl::StatusCode::kInvalidArgument, "descriptor"));
  test::TempDir dir;
  const std::string path = dir.Sub("disk-file");
  { UniqueFd f(open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600)); ASSERT_EQ(ftruncate(f.get(), 4096), 0); }
  UniqueFd disk(open(path.c_str(), O_RDWR | O_CLOEXEC));
  absl::Status s = CheckDescriptor(disk.get(), false, "descriptor");
  // The test directory may itself be on tmpfs: then it is memory, and accepted.
  if (!s.ok()) EXPECT_TRUE(IsError(s, absl::StatusCode::kFailedPrecondition, "descriptor"));
}

// ---- the whole path, in-process

class FdMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rdmad_.config().max_descriptors_per_principal = 3;
    ASSERT_OK(rdmad_.Start());
  }
  client::Client Client() {
    client::Client::Options o;
    o.target = rdmad_.target();
    o.timeout = std::chrono::milliseconds(10000);
    return client::Client(o);
  }
  std::string Pd(client::Client& c) {
    v1::CreatePdRequest r;
    r.set_device("rxe0");
    absl::StatusOr<v1::ProtectionDomain> pd = c.CreatePd(r);
    EXPECT_OK(pd.status());
    return pd.ok() ? pd->name() : "";
  }
  static v1::RegisterMrRequest Register(const std::string& pd, const std::string& handle, uint64_t length,
                                        std::vector<v1::Access> access) {
    v1::RegisterMrRequest r;
    r.set_pd(pd);
    r.mutable_source()->mutable_fd()->set_handle(handle);
    r.mutable_source()->mutable_fd()->set_length(length);
    for (v1::Access a : access) r.add_access(a);
    return r;
  }
  // Sends `body` with `fds` on a fresh connection to the descriptor socket; rdmad's reply.
  wire::DescriptorReply Raw(const std::string& body, const std::vector<int>& fds) {
    UniqueFd s(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    const std::string path = rdmad_.socket() + ".fd";
    std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
    EXPECT_EQ(connect(s.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0) << std::strerror(errno);
    iovec iov{const_cast<char*>(body.data()), body.size()};
    std::vector<char> control(CMSG_SPACE(sizeof(int) * std::max<size_t>(fds.size(), 1)));
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (!fds.empty()) {
      msg.msg_control = control.data();
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    EXPECT_EQ(sendmsg(s.get(), &msg, MSG_NOSIGNAL), static_cast<ssize_t>(body.size())) << std::strerror(errno);
    char reply[wire::kDescriptorHeaderBytes + wire::kDescriptorMaxText];
    const ssize_t n = recv(s.get(), reply, sizeof reply, 0);
    absl::StatusOr<wire::DescriptorReply> r = wire::DecodeDescriptorReply(absl::string_view(reply, std::max<ssize_t>(n, 0)));
    EXPECT_OK(r.status());
    return r.ok() ? *r : wire::DescriptorReply{};
  }
  test::DaemonFixture rdmad_;
};

TEST_F(FdMemoryTest, AMemfdSharedAndRegisteredOnce) {
  client::Client c = Client();
  const std::string pd = Pd(c);
  UniqueFd memfd = Memfd(64 << 10);
  ASSERT_OK_AND_ASSIGN(std::string handle, c.ShareFd(memfd.get()));
  // A validation claims nothing: the same handle registers afterwards.
  v1::RegisterMrRequest r = Register(pd, handle, 64 << 10, {v1::LOCAL_WRITE, v1::REMOTE_READ, v1::MW_BIND});
  client::MutateOptions validate;
  validate.validate_only = true;
  ASSERT_OK(c.RegisterMr(r, validate).status());
  ASSERT_OK_AND_ASSIGN(v1::MemoryRegion mr, c.RegisterMr(r));
  EXPECT_EQ(mr.length(), 64u << 10);
  EXPECT_TRUE(mr.source().has_fd());
  // Spent.
  absl::Status again = c.RegisterMr(r).status();
  EXPECT_EQ(again.code(), absl::StatusCode::kNotFound) << again;
  EXPECT_THAT(again.message(), HasSubstr("source.fd.handle"));
  // Another principal (an authenticated TLS caller, as the fixture makes them) never finds it.
  ASSERT_OK_AND_ASSIGN(std::string second, c.ShareFd(memfd.get()));
  client::Client other = rdmad_.ClientAs("spiffe://t/other");
  absl::Status theirs = other.RegisterMr(Register(pd, second, 4096, {v1::REMOTE_READ})).status();
  EXPECT_EQ(theirs.code(), absl::StatusCode::kNotFound) << theirs;
  ASSERT_OK(c.RegisterMr(Register(pd, second, 4096, {v1::REMOTE_READ})).status());
}

TEST_F(FdMemoryTest, ADescriptorsRightsAreTheCallers) {
  client::Client c = Client();
  const std::string pd = Pd(c);
  UniqueFd memfd = Memfd(8192);
  UniqueFd read_only = Reopen(memfd.get(), O_RDONLY);
  ASSERT_OK_AND_ASSIGN(std::string handle, c.ShareFd(read_only.get()));
  absl::Status s = c.RegisterMr(Register(pd, handle, 8192, {v1::LOCAL_WRITE, v1::REMOTE_READ})).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_THAT(s.message(), HasSubstr("source.fd: the descriptor is open read-only"));
  ASSERT_OK_AND_ASSIGN(handle, c.ShareFd(read_only.get()));
  ASSERT_OK_AND_ASSIGN(v1::MemoryRegion mr, c.RegisterMr(Register(pd, handle, 8192, {v1::REMOTE_READ})));
  // It cannot gain write access later either.
  v1::ReregisterMrRequest rr;
  rr.set_name(mr.name());
  rr.add_access(v1::LOCAL_WRITE);
  rr.add_access(v1::REMOTE_READ);
  rr.add_flags(v1::CHANGE_ACCESS);
  absl::StatusOr<v1::ReregisterMrResponse> after = c.ReregisterMr(rr);
  EXPECT_EQ(after.status().code(), absl::StatusCode::kPermissionDenied) << after.status();
  // Past the end of the file: OUT_OF_RANGE on the field, and the handle is spent.
  ASSERT_OK_AND_ASSIGN(handle, c.ShareFd(memfd.get()));
  s = c.RegisterMr(Register(pd, handle, 3 * 4096, {v1::REMOTE_READ})).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;
  EXPECT_THAT(s.message(), HasSubstr("source.fd.length"));
}

TEST_F(FdMemoryTest, BadRequestsAreRefusedAndLeaveNothingOpen) {
  client::Client c = Client();
  UniqueFd memfd = Memfd(4096);
  struct stat m {};
  ASSERT_EQ(fstat(memfd.get(), &m), 0);
  ASSERT_OK(c.ShareFd(memfd.get()).status());
  const int before = FdsOn(m.st_dev, m.st_ino);  // ours, and the one the store keeps for the deposit above
  EXPECT_EQ(before, 2);
  const std::string request = wire::EncodeDescriptorRequest();
  wire::DescriptorReply r = Raw(request, {});
  EXPECT_EQ(r.code, static_cast<uint16_t>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(r.text, HasSubstr("exactly one descriptor"));
  r = Raw(request, {memfd.get(), memfd.get()});
  EXPECT_EQ(r.code, static_cast<uint16_t>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(r.text, HasSubstr("got 2"));
  r = Raw("garbage!garbage!", {memfd.get()});
  EXPECT_EQ(r.code, static_cast<uint16_t>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(r.text, HasSubstr("RDFD"));
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  struct stat pipe_st {};
  ASSERT_EQ(fstat(p[0], &pipe_st), 0);
  r = Raw(request, {p[0]});
  close(p[0]);
  close(p[1]);
  EXPECT_EQ(r.code, static_cast<uint16_t>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(r.text, HasSubstr("not a regular file"));
  // rdmad (this process) closed every descriptor those requests carried: the memfd has only its two, the
  // pipe none. (It closes them just after sending its reply: give it a moment.)
  for (int i = 0; i < 100 && (FdsOn(m.st_dev, m.st_ino) != before || FdsOn(pipe_st.st_dev, pipe_st.st_ino) != 0); ++i) {
    usleep(10000);
  }
  EXPECT_EQ(FdsOn(m.st_dev, m.st_ino), before);
  EXPECT_EQ(FdsOn(pipe_st.st_dev, pipe_st.st_ino), 0);
}

// A flood of connections that send nothing: past kMaxConnections (64) each new one is closed at once, the
// held ones do not stop rdmad serving, and once they go a deposit works again.
TEST_F(FdMemoryTest, AFloodOfIdleConnectionsIsCapped) {
  const std::string path = rdmad_.socket() + ".fd";
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
  std::vector<UniqueFd> held;
  for (int i = 0; i < 80; ++i) {
    UniqueFd s(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    ASSERT_EQ(connect(s.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0) << std::strerror(errno);
    held.push_back(std::move(s));
  }
  // rdmad accepts them all; the ones past 64 are closed at once: they read end-of-file.
  int closed = 0;
  for (int attempt = 0; attempt < 100 && closed < 16; ++attempt) {
    closed = 0;
    for (const UniqueFd& s : held) {
      char c;
      closed += recv(s.get(), &c, 1, MSG_DONTWAIT) == 0;
    }
    if (closed < 16) usleep(20000);
  }
  EXPECT_EQ(closed, 16);
  // rdmad's gRPC still answers; a deposit waits for a free connection and is served once the flood goes.
  client::Client c = Client();
  EXPECT_OK(c.WhoAmI().status());
  held.clear();
  UniqueFd memfd = Memfd(4096);
  absl::StatusOr<std::string> handle;
  for (int attempt = 0; attempt < 50; ++attempt) {  // the closes are seen on rdmad's next poll
    handle = c.ShareFd(memfd.get());
    if (handle.ok()) break;
    usleep(20000);
  }
  EXPECT_OK(handle.status());
}

TEST_F(FdMemoryTest, EachPrincipalHasItsCap) {
  client::Client c = Client();
  UniqueFd memfd = Memfd(4096);
  for (int i = 0; i < 3; ++i) ASSERT_OK(c.ShareFd(memfd.get()).status());
  absl::Status s = c.ShareFd(memfd.get()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(s.message(), HasSubstr("max_descriptors_per_principal"));
}

TEST_F(FdMemoryTest, AnotherUidsDescriptorIsNotThisCallers) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run a child as another uid";
  // The child (uid 65534) deposits over the real socket; its reply goes back through a pipe. Only system
  // calls after the fork: the request was encoded before it.
  const std::string request = wire::EncodeDescriptorRequest();
  const std::string path = rdmad_.socket() + ".fd";
  UniqueFd memfd = Memfd(4096);
  int out[2];
  ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
  // The socket's directory and the socket itself must let uid 65534 in.
  chmod(rdmad_.dir().path().c_str(), 0755);
  chmod(path.c_str(), 0666);
  const pid_t child = fork();
  if (child == 0) {
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) _exit(2);
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
    if (connect(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) _exit(3);
    iovec iov{const_cast<char*>(request.data()), request.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    const int fd = memfd.get();
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
    if (sendmsg(s, &msg, MSG_NOSIGNAL) < 0) _exit(4);
    char reply[256];
    const ssize_t n = recv(s, reply, sizeof reply, 0);
    if (n <= 0 || write(out[1], reply, static_cast<size_t>(n)) != n) _exit(5);
    _exit(0);
  }
  close(out[1]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  char reply[256];
  const ssize_t n = read(out[0], reply, sizeof reply);
  close(out[0]);
  ASSERT_OK_AND_ASSIGN(wire::DescriptorReply r, wire::DecodeDescriptorReply(absl::string_view(reply, n)));
  ASSERT_EQ(r.code, 0) << r.text;
  client::Client c = Client();  // root: unix:uid:0
  const std::string pd = Pd(c);
  absl::Status s = c.RegisterMr(Register(pd, r.text, 4096, {v1::REMOTE_READ})).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
}

TEST(FdMemoryOff, WithoutADescriptorSocketNothingIsClaimed) {
  test::DaemonFixture rdmad;
  rdmad.config().descriptor_socket = "";
  ASSERT_OK(rdmad.Start());
  client::Client::Options o;
  o.target = rdmad.target();
  client::Client c(o);
  UniqueFd memfd = Memfd(4096);
  EXPECT_EQ(c.ShareFd(memfd.get()).status().code(), absl::StatusCode::kUnavailable);
  v1::CreatePdRequest pr;
  pr.set_device("rxe0");
  ASSERT_OK_AND_ASSIGN(v1::ProtectionDomain pd, c.CreatePd(pr));
  v1::RegisterMrRequest r;
  r.set_pd(pd.name());
  r.mutable_source()->mutable_fd()->set_handle("descriptors/00000000000000000000000000000000");
  r.mutable_source()->mutable_fd()->set_length(4096);
  r.add_access(v1::REMOTE_READ);
  absl::Status s = c.RegisterMr(r).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("source.fd"));
}

TEST(FdMemoryConfig, TheSocketPathFollowsTheUnixListener) {
  Config c;
  c.listen = {"127.0.0.1:5000", "unix:/run/x/rdmad.sock"};
  EXPECT_EQ(DescriptorSocketPath(c), "/run/x/rdmad.sock.fd");
  c.listen = {"127.0.0.1:5000"};
  EXPECT_EQ(DescriptorSocketPath(c), "");
  c.descriptor_socket = "/run/y/fd.sock";
  EXPECT_EQ(DescriptorSocketPath(c), "/run/y/fd.sock");
  c.descriptor_socket = "";
  c.listen = {"unix:/run/x/rdmad.sock"};
  EXPECT_EQ(DescriptorSocketPath(c), "");
  EXPECT_FALSE(ParseConfig(R"({"descriptor_socket": "relative"})").ok());
  EXPECT_FALSE(ParseConfig(R"({"descriptor_ttl_s": 0})").ok());
  EXPECT_FALSE(ParseConfig(R"({"max_descriptors_per_principal": 5000})").ok());
  ASSERT_OK_AND_ASSIGN(Config parsed, ParseConfig(R"({"limits": {"descriptors": 8}, "descriptor_ttl_s": 5})"));
  EXPECT_EQ(parsed.limits.descriptors, 8u);
  EXPECT_EQ(parsed.descriptor_ttl_s, 5);
}

}  // namespace
}  // namespace rdmad
