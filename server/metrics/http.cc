#include "server/metrics/http.h"

#include <pthread.h>
#include <sys/socket.h>

#include <utility>

#include <httplib.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/common/log.h"

namespace rdmad::metrics {

absl::StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(const std::string& host, uint16_t port,
                                                                  std::function<std::string()> render) {
  std::unique_ptr<HttpEndpoint> e(new HttpEndpoint());
  e->server_ = std::make_unique<httplib::Server>();
  // Two request threads are plenty for a scraper or two (httplib's default is 8 or more).
  e->server_->new_task_queue = [] { return new httplib::ThreadPool(2); };
  // httplib's default also sets SO_REUSEPORT, which lets a second rdmad bind the same port unnoticed
  // (scrapes then reach either). SO_REUSEADDR only: a busy port is refused, a restart still rebinds.
  e->server_->set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  e->server_->Get("/metrics", [render = std::move(render)](const httplib::Request&, httplib::Response& res) {
    res.set_content(render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  const std::string address = host.find(':') != std::string::npos ? absl::StrCat("[", host, "]:", port)
                                                                    : absl::StrCat(host, ":", port);
  if (port == 0) {
    const int bound = e->server_->bind_to_any_port(host);
    if (bound <= 0) return absl::UnavailableError(absl::StrCat("metrics_listen: cannot listen on ", address));
    e->port_ = static_cast<uint16_t>(bound);
  } else {
    if (!e->server_->bind_to_port(host, port)) {
      return absl::UnavailableError(absl::StrCat("metrics_listen: cannot listen on ", address));
    }
    e->port_ = port;
  }
  httplib::Server* server = e->server_.get();
  std::atomic<bool>* done = &e->done_;
  e->thread_ = std::thread([server, done] {
    pthread_setname_np(pthread_self(), "metrics-http");
    server->listen_after_bind();
    done->store(true);
  });
  RDMAD_LOG_INFO("metrics on http://%s/metrics", address.c_str());
  return e;
}

void HttpEndpoint::Stop() {
  if (!thread_.joinable()) return;
  // httplib's stop() does nothing until the listener runs (it looks at is_running()): repeat it until the
  // listener has returned, so a Stop right after Start cannot miss it.
  while (!done_.load()) {
    server_->stop();
    absl::SleepFor(absl::Milliseconds(1));
  }
  thread_.join();
}

HttpEndpoint::~HttpEndpoint() { Stop(); }

}  // namespace rdmad::metrics
