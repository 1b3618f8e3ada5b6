// Client::Options against a whole rdmad in-process (tests/support/daemon_fixture.h, fake fabric) on a TCP
// listener with mutual TLS: the CA, client certificate and key reach the handshake, the server name override
// is what the server's certificate is checked against, a client that trusts another CA gets no answer, and the
// maximum answer size applies on that channel. Certificates are made at test time with the openssl CLI.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "client/client.h"
#include "tests/support/daemon_fixture.h"
#include "tests/support/status.h"

namespace rdmad::client {
namespace {

using namespace std::chrono_literals;

// A CA, rdmad's certificate for the name rdmad.test only (not 127.0.0.1), a client certificate with a SPIFFE
// ID, and another CA that signed nothing of these.
constexpr char kMakeCerts[] = R"(set -e
cd "$1"
key() { openssl ecparam -name prime256v1 -genkey -noout -out "$1.key"; }
ca() { key "$1"; openssl req -x509 -new -key "$1.key" -subj "/CN=$1" -days 2 -out "$1.pem" \
  -addext basicConstraints=critical,CA:true -addext keyUsage=critical,keyCertSign,cRLSign; }
leaf() { key "$1"; openssl req -new -key "$1.key" -subj "/CN=$1" -out "$1.csr"
  printf 'basicConstraints=CA:false\nkeyUsage=critical,digitalSignature,keyEncipherment\nsubjectAltName=%s\n' "$2" >"$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -set_serial 0x$(openssl rand -hex 8) -days 2 \
    -extfile "$1.ext" -out "$1.pem"; }
ca ca; ca other-ca
leaf server DNS:rdmad.test
leaf client URI:spiffe://cluster/ns/app/sa/sdk-test
)";

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t n = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n) != 0) {
    close(fd);
    return -1;
  }
  close(fd);
  return ntohs(a.sin_port);
}

class ClientTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    certs_ = rdmad_.dir().Sub("certs");
    const std::string script = rdmad_.dir().Sub("make-certs.sh");
    FILE* f = std::fopen(script.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(kMakeCerts, f);
    std::fclose(f);
    ASSERT_EQ(std::system(("mkdir -p '" + certs_ + "' && bash '" + script + "' '" + certs_ + "' >/dev/null 2>&1")
                              .c_str()),
              0)
        << "making the test certificates failed (is openssl installed?)";
    const int port = FreePort();
    ASSERT_GT(port, 0);
    target_ = "127.0.0.1:" + std::to_string(port);
    rdmad_.config().listen.push_back(target_);
    rdmad_.config().tls.cert = certs_ + "/server.pem";
    rdmad_.config().tls.key = certs_ + "/server.key";
    rdmad_.config().tls.client_ca = certs_ + "/ca.pem";
    ASSERT_OK(rdmad_.Start());
  }

  Client::Options Options(const std::string& ca = "ca.pem") {
    Client::Options o;
    o.target = target_;
    o.timeout = 5000ms;
    o.retry.max_attempts = 1;
    o.tls.ca_file = certs_ + "/" + ca;
    o.tls.cert_file = certs_ + "/client.pem";
    o.tls.key_file = certs_ + "/client.key";
    o.tls.server_name = "rdmad.test";
    return o;
  }

  test::DaemonFixture rdmad_;
  std::string certs_, target_;
};

TEST_F(ClientTlsTest, MutualTlsWithTheServerNameOverride) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Client> c, Client::Create(Options()));
  ASSERT_OK_AND_ASSIGN(v1::Caller me, c->WhoAmI());
  EXPECT_EQ(me.principal(), "spiffe://cluster/ns/app/sa/sdk-test");
  EXPECT_EQ(me.transport(), "tls");
  EXPECT_TRUE(me.authenticated());
  ASSERT_OK(c->ListDevices());
}

TEST_F(ClientTlsTest, TheServersCertificateIsCheckedForTheTargetOrTheOverride) {
  // Without the override the certificate (rdmad.test) does not name 127.0.0.1: no answer.
  Client::Options o = Options();
  o.tls.server_name = "";
  Client plain_name(o);
  absl::Status s = plain_name.WhoAmI().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_FALSE(HasDetail(s));

  // A client that trusts another CA does not accept rdmad's certificate.
  Client other_ca(Options("other-ca.pem"));
  s = other_ca.WhoAmI().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_FALSE(HasDetail(s));
}

TEST_F(ClientTlsTest, TheMaximumAnswerSizeAppliesOnTheTlsChannel) {
  Client::Options o = Options();
  o.max_receive_message_bytes = 16;  // less than a device's description
  Client c(o);
  absl::Status s = c.ListDevices().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
}

}  // namespace
}  // namespace rdmad::client
