// rdmad's C++ SDK end to end (docs/sdk.md): register a file with rdmad, grant a range of it, read the range
// through the grant over RDMA, check the bytes, revoke the grant and see the next read refused.
//
//   g++ -o read_grant read_grant.cc $(pkg-config --cflags --libs rdmad-client)
//   ./read_grant [TARGET [FILE]]  # TARGET: unix:/run/rdmad/rdmad.sock (default) or host:port
//   FILE: when rdmad runs on another host, a file there (under its allowed_file_roots) that already holds the
//   example's 64 KiB pattern; by default the example writes its own file here, for an rdmad on this host.
//
// Exit status 0 when every step did what it should; otherwise 1, with the step and its error on stderr.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <rdmad/client/client.h>
#include <rdmad/client/remote_region.h>

namespace v1 = rdmad::v1;
using rdmad::client::Client;
using rdmad::client::RemoteRegion;

static void Check(const absl::Status& status, const char* step) {
  if (status.ok()) return;
  std::fprintf(stderr, "read_grant: %s: %s\n", step, status.ToString().c_str());
  std::exit(1);
}

int main(int argc, char** argv) {
  Client::Options options;
  if (argc > 1) options.target = argv[1];
  Client client(options);

  // 64 KiB of a known pattern in a file rdmad can map (tmpfs).
  const bool own_file = argc < 3;
  const std::string path = own_file ? "/dev/shm/rdmad-example-" + std::to_string(getpid()) : argv[2];
  std::vector<char> data(64 << 10);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + 3);
  if (own_file) std::ofstream(path, std::ios::binary).write(data.data(), data.size());

  auto devices = client.ListDevices();
  Check(devices.status(), "ListDevices");
  if (devices->devices().empty()) Check(absl::NotFoundError("rdmad serves no device"), "ListDevices");

  v1::CreatePdRequest pd_request;
  pd_request.set_device(devices->devices(0).name());
  pd_request.set_label("sdk-example");
  auto pd = client.CreatePd(pd_request);
  Check(pd.status(), "CreatePd");

  v1::RegisterMrRequest mr_request;
  mr_request.set_pd(pd->name());
  v1::FileMemory* file = mr_request.mutable_source()->mutable_file();
  file->set_path(path);
  file->set_length(data.size());
  for (v1::Access a : {v1::LOCAL_WRITE, v1::REMOTE_READ, v1::MW_BIND}) mr_request.add_access(a);
  auto mr = client.RegisterMr(mr_request);
  Check(mr.status(), "RegisterMr");

  // The grantee's principal: who rdmad takes this process to be (a grant may name another).
  auto me = client.WhoAmI();
  Check(me.status(), "WhoAmI");
  v1::IssueGrantRequest grant_request;
  grant_request.set_mr(mr->name());
  grant_request.set_offset(4096);
  grant_request.set_length(16384);
  grant_request.set_ttl_ms(60000);
  grant_request.set_principal(me->principal());
  auto grant = client.IssueGrant(grant_request);
  Check(grant.status(), "IssueGrant");

  // The data plane: connect with the grant's token, then read with rdma_post_read; rdmad is not involved.
  auto region = RemoteRegion::Open(*grant, RemoteRegion::Options());
  Check(region.status(), "RemoteRegion::Open");
  std::vector<char> got(16384);
  Check((*region)->Read(0, got.size(), got.data()), "Read");
  if (std::memcmp(got.data(), data.data() + 4096, got.size()) != 0) {
    Check(absl::DataLossError("the bytes read differ from the file's"), "Read");
  }
  std::printf("read %zu bytes of %s through %s: as written\n", got.size(), mr->name().c_str(),
              grant->grant().name().c_str());

  // Revoke: once RevokeGrant returns, the key is dead at the NIC and the next read is refused.
  Check(client.RevokeGrant(grant->grant().name()).status(), "RevokeGrant");
  absl::Status after = (*region)->Read(0, got.size(), got.data());
  if (after.ok()) Check(absl::InternalError("a read after the revocation succeeded"), "Read after revoke");
  std::printf("read after revoke: %s\n", after.ToString().c_str());

  region->reset();
  Check(client.DeregisterMr(mr->name(), /*revoke_grants=*/true), "DeregisterMr");
  Check(client.DeletePd(pd->name()).status(), "DeletePd");
  if (own_file) unlink(path.c_str());
  return after.code() == absl::StatusCode::kPermissionDenied ? 0 : 1;
}
