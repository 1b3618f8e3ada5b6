// The /metrics endpoint: plain HTTP (cpp-httplib, Debian's libcpp-httplib), unauthenticated, GET /metrics
// answers the Prometheus text format; every other path is 404. Meant for a loopback address or a
// cluster-internal one (docs/operations.md#metrics): it tells anyone who can connect the tenants' names and
// how much they use.
//
// Threads: Start and Stop from main. httplib's listener runs on one thread of ours ("metrics-http"), the
// requests on httplib's pool of two; each scrape calls `render` on a pool thread. Stop returns once the
// listener thread has ended (after in-flight scrapes finished), so `render`'s objects may go after it.
#ifndef RDMAD_SERVER_METRICS_HTTP_H_
#define RDMAD_SERVER_METRICS_HTTP_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}

namespace rdmad::metrics {

class HttpEndpoint {
 public:
  // Binds host:port (port 0: any free one) and serves in the background. UNAVAILABLE naming the address
  // if it cannot bind.
  static absl::StatusOr<std::unique_ptr<HttpEndpoint>> Start(const std::string& host, uint16_t port,
                                                             std::function<std::string()> render);
  ~HttpEndpoint();  // Stop()
  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;

  uint16_t port() const { return port_; }
  void Stop();

 private:
  HttpEndpoint() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::atomic<bool> done_{false};  // the listener thread has returned
  uint16_t port_ = 0;
};

}  // namespace rdmad::metrics

#endif  // RDMAD_SERVER_METRICS_HTTP_H_
