// InFlightCalls: see in_flight.h.
#include "server/rpc/in_flight.h"

namespace rdmad {
namespace {

// Lives exactly as long as its call: gRPC destroys a call's interceptors with the call.
class Counted : public grpc::experimental::Interceptor {
 public:
  explicit Counted(InFlightCalls* calls) : calls_(calls) { calls_->Started(); }
  ~Counted() override { calls_->Finished(); }
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override { methods->Proceed(); }

 private:
  InFlightCalls* const calls_;
};

class CountingFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit CountingFactory(InFlightCalls* calls) : calls_(calls) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo*) override {
    return new Counted(calls_);
  }

 private:
  InFlightCalls* const calls_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> InFlightCalls::Factory() {
  return std::make_unique<CountingFactory>(this);
}

void InFlightCalls::Started() {
  MutexLock lock(&mu_);
  ++count_;
}

void InFlightCalls::Finished() {
  MutexLock lock(&mu_);
  --count_;
}

size_t InFlightCalls::count() const {
  MutexLock lock(&mu_);
  return count_;
}

size_t InFlightCalls::AwaitNone(absl::Time deadline) {
  MutexLock lock(&mu_);
  auto none = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return count_ == 0; };
  mu_.AwaitWithDeadline(none, deadline);
  return count_;
}

}  // namespace rdmad
