#include "server/rpc/services.h"

#include <utility>

#include "server/common/log.h"
#include "server/rpc/status.h"

namespace rdmad {
namespace {

using grpc::ServerContext;
using grpc::Status;

// Runs `fn` (returning absl::StatusOr<T> or absl::Status) and turns its result into the RPC's outcome.
template <typename Fn, typename Response>
Status Serve(const char* method, ServerContext* ctx, Fn&& fn, Response* response) {
  auto result = fn();
  absl::Status status;
  if constexpr (std::is_same_v<decltype(result), absl::Status>) {
    status = result;
  } else {
    status = result.status();
    if (status.ok()) *response = std::move(result).value();
  }
  if (!status.ok()) {
    RDMAD_LOG_INFO("%s from %s: %s", method, ctx->peer().c_str(), std::string(status.message()).c_str());
  }
  return ToGrpc(status);
}

template <typename T, typename Repeated>
void Fill(std::vector<T> items, Repeated* out) {
  for (auto& i : items) *out->Add() = std::move(i);
}

class DevicesService final : public v1::Devices::Service {
 public:
  explicit DevicesService(Registry* r) : r_(r) {}
  Status ListDevices(ServerContext* ctx, const v1::ListDevicesRequest*, v1::ListDevicesResponse* resp) override {
    Fill(r_->ListDevices(), resp->mutable_devices());
    return Status::OK;
  }
  Status GetDevice(ServerContext* ctx, const v1::GetDeviceRequest* req, v1::Device* resp) override {
    return Serve("GetDevice", ctx, [&] { return r_->GetDevice(req->name()); }, resp);
  }

 private:
  Registry* const r_;
};

class PdsService final : public v1::ProtectionDomains::Service {
 public:
  explicit PdsService(Registry* r) : r_(r) {}
  Status CreatePd(ServerContext* ctx, const v1::CreatePdRequest* req, v1::ProtectionDomain* resp) override {
    return Serve("CreatePd", ctx, [&] { return r_->CreatePd(*req); }, resp);
  }
  Status GetPd(ServerContext* ctx, const v1::GetPdRequest* req, v1::ProtectionDomain* resp) override {
    return Serve("GetPd", ctx, [&] { return r_->GetPd(req->name()); }, resp);
  }
  Status ListPds(ServerContext* ctx, const v1::ListPdsRequest*, v1::ListPdsResponse* resp) override {
    Fill(r_->ListPds(), resp->mutable_pds());
    return Status::OK;
  }
  Status DeletePd(ServerContext* ctx, const v1::DeletePdRequest* req, v1::DeletePdResponse* resp) override {
    return Serve("DeletePd", ctx, [&] { return r_->DeletePd(*req); }, resp);
  }

 private:
  Registry* const r_;
};

class MrsService final : public v1::MemoryRegions::Service {
 public:
  explicit MrsService(Registry* r) : r_(r) {}
  Status RegisterMr(ServerContext* ctx, const v1::RegisterMrRequest* req, v1::MemoryRegion* resp) override {
    return Serve("RegisterMr", ctx, [&] { return r_->RegisterMr(*req); }, resp);
  }
  Status GetMr(ServerContext* ctx, const v1::GetMrRequest* req, v1::MemoryRegion* resp) override {
    return Serve("GetMr", ctx, [&] { return r_->GetMr(req->name()); }, resp);
  }
  Status ListMrs(ServerContext* ctx, const v1::ListMrsRequest* req, v1::ListMrsResponse* resp) override {
    return Serve("ListMrs", ctx, [&]() -> absl::Status {
      auto mrs = r_->ListMrs(*req);
      if (mrs.ok()) Fill(std::move(*mrs), resp->mutable_mrs());
      return mrs.status();
    }, resp);
  }
  Status ReregisterMr(ServerContext* ctx, const v1::ReregisterMrRequest* req,
                      v1::ReregisterMrResponse* resp) override {
    return Serve("ReregisterMr", ctx, [&] { return r_->ReregisterMr(*req); }, resp);
  }
  Status DeregisterMr(ServerContext* ctx, const v1::DeregisterMrRequest* req,
                      v1::DeregisterMrResponse* resp) override {
    return Serve("DeregisterMr", ctx, [&] { return r_->DeregisterMr(req->name()); }, resp);
  }

 private:
  Registry* const r_;
};

class QpsService final : public v1::QueuePairs::Service {
 public:
  explicit QpsService(Registry* r) : r_(r) {}
  Status CreateQp(ServerContext* ctx, const v1::CreateQpRequest* req, v1::QueuePair* resp) override {
    return Serve("CreateQp", ctx, [&] { return r_->CreateQp(*req); }, resp);
  }
  Status GetQp(ServerContext* ctx, const v1::GetQpRequest* req, v1::QueuePair* resp) override {
    return Serve("GetQp", ctx, [&] { return r_->GetQp(req->name()); }, resp);
  }
  Status ListQps(ServerContext* ctx, const v1::ListQpsRequest*, v1::ListQpsResponse* resp) override {
    Fill(r_->ListQps(), resp->mutable_qps());
    return Status::OK;
  }
  Status ConnectQp(ServerContext* ctx, const v1::ConnectQpRequest* req, v1::QueuePair* resp) override {
    return Serve("ConnectQp", ctx, [&] { return r_->ConnectQp(*req); }, resp);
  }
  Status DeleteQp(ServerContext* ctx, const v1::DeleteQpRequest* req, v1::DeleteQpResponse* resp) override {
    return Serve("DeleteQp", ctx, [&] { return r_->DeleteQp(req->name()); }, resp);
  }

 private:
  Registry* const r_;
};

class MwsService final : public v1::MemoryWindows::Service {
 public:
  explicit MwsService(Registry* r) : r_(r) {}
  Status AllocMw(ServerContext* ctx, const v1::AllocMwRequest* req, v1::MemoryWindow* resp) override {
    return Serve("AllocMw", ctx, [&] { return r_->AllocMw(*req); }, resp);
  }
  Status GetMw(ServerContext* ctx, const v1::GetMwRequest* req, v1::MemoryWindow* resp) override {
    return Serve("GetMw", ctx, [&] { return r_->GetMw(req->name()); }, resp);
  }
  Status ListMws(ServerContext* ctx, const v1::ListMwsRequest* req, v1::ListMwsResponse* resp) override {
    return Serve("ListMws", ctx, [&]() -> absl::Status {
      auto mws = r_->ListMws(*req);
      if (mws.ok()) Fill(std::move(*mws), resp->mutable_mws());
      return mws.status();
    }, resp);
  }
  Status BindMw(ServerContext* ctx, const v1::BindMwRequest* req, v1::MemoryWindow* resp) override {
    return Serve("BindMw", ctx, [&] { return r_->BindMw(*req); }, resp);
  }
  Status InvalidateMw(ServerContext* ctx, const v1::InvalidateMwRequest* req, v1::MemoryWindow* resp) override {
    return Serve("InvalidateMw", ctx, [&] { return r_->InvalidateMw(req->name()); }, resp);
  }
  Status DeallocMw(ServerContext* ctx, const v1::DeallocMwRequest* req, v1::DeallocMwResponse* resp) override {
    return Serve("DeallocMw", ctx, [&] { return r_->DeallocMw(req->name()); }, resp);
  }

 private:
  Registry* const r_;
};

}  // namespace

std::vector<std::unique_ptr<grpc::Service>> MakeServices(Registry* registry) {
  std::vector<std::unique_ptr<grpc::Service>> out;
  out.push_back(std::make_unique<DevicesService>(registry));
  out.push_back(std::make_unique<PdsService>(registry));
  out.push_back(std::make_unique<MrsService>(registry));
  out.push_back(std::make_unique<QpsService>(registry));
  out.push_back(std::make_unique<MwsService>(registry));
  return out;
}

}  // namespace rdmad
