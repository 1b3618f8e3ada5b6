// rdmad client library: the control-plane stubs of rdmad.v1 behind absl::StatusOr.
//
// Errors come back as absl::Status with the server's code and message; the structured ErrorDetail (field,
// verbs call, errno, rereg outcome) is decoded from the status details and available via Detail().
//
// Thread-safety: a Client may be used from many threads at once (gRPC channels and stubs are).
#ifndef RDMAD_CLIENT_CLIENT_H_
#define RDMAD_CLIENT_CLIENT_H_

#include <chrono>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "rdmad/v1/rdmad.grpc.pb.h"

namespace rdmad::client {

inline constexpr char kDefaultTarget[] = "unix:/run/rdmad/rdmad.sock";

// grpc::Status -> absl::Status; the ErrorDetail, if any, rides along as a payload.
absl::Status FromGrpc(const grpc::Status& status);
// The ErrorDetail carried by a status returned from this library (empty if none).
v1::ErrorDetail Detail(const absl::Status& status);

class Client {
 public:
  struct Options {
    std::string target = kDefaultTarget;    // "unix:/path" or "host:port"
    std::chrono::milliseconds timeout{30000};  // per call
  };
  explicit Client(Options options);
  explicit Client(std::shared_ptr<grpc::Channel> channel,
                  std::chrono::milliseconds timeout = std::chrono::milliseconds(30000));

  absl::StatusOr<v1::ListDevicesResponse> ListDevices();
  absl::StatusOr<v1::Device> GetDevice(const std::string& name);

  absl::StatusOr<v1::ProtectionDomain> CreatePd(const v1::CreatePdRequest& request);
  absl::StatusOr<v1::ProtectionDomain> GetPd(const std::string& name);
  absl::StatusOr<v1::ListPdsResponse> ListPds();
  absl::StatusOr<v1::DeletePdResponse> DeletePd(const std::string& name, bool cascade = false);

  absl::StatusOr<v1::MemoryRegion> RegisterMr(const v1::RegisterMrRequest& request);
  absl::StatusOr<v1::MemoryRegion> GetMr(const std::string& name);
  absl::StatusOr<v1::ListMrsResponse> ListMrs(const std::string& pd = "");
  absl::StatusOr<v1::ReregisterMrResponse> ReregisterMr(const v1::ReregisterMrRequest& request);
  absl::Status DeregisterMr(const std::string& name);

  absl::StatusOr<v1::QueuePair> CreateQp(const v1::CreateQpRequest& request);
  absl::StatusOr<v1::QueuePair> GetQp(const std::string& name);
  absl::StatusOr<v1::ListQpsResponse> ListQps();
  absl::StatusOr<v1::QueuePair> ConnectQp(const v1::ConnectQpRequest& request);
  absl::Status DeleteQp(const std::string& name);

  absl::StatusOr<v1::MemoryWindow> AllocMw(const v1::AllocMwRequest& request);
  absl::StatusOr<v1::MemoryWindow> GetMw(const std::string& name);
  absl::StatusOr<v1::ListMwsResponse> ListMws(const std::string& pd = "");
  absl::StatusOr<v1::MemoryWindow> BindMw(const v1::BindMwRequest& request);
  absl::StatusOr<v1::MemoryWindow> InvalidateMw(const std::string& name);
  absl::Status DeallocMw(const std::string& name);

  // grpc.health.v1: OK when the server reports SERVING.
  absl::Status Health();

 private:
  template <typename Stub, typename Request, typename Response>
  absl::StatusOr<Response> Call(Stub* stub,
                                grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Response*),
                                const Request& request);

  std::shared_ptr<grpc::Channel> channel_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<v1::Devices::Stub> devices_;
  std::unique_ptr<v1::ProtectionDomains::Stub> pds_;
  std::unique_ptr<v1::MemoryRegions::Stub> mrs_;
  std::unique_ptr<v1::QueuePairs::Stub> qps_;
  std::unique_ptr<v1::MemoryWindows::Stub> mws_;
};

}  // namespace rdmad::client

#endif  // RDMAD_CLIENT_CLIENT_H_
