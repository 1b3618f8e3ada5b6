// Streaming a Hub's events to a gRPC client (private to server/rpc/): WatchWriter drains one HubWatcher
// into a callback ServerWriteReactor; FailedWatch is a watch refused at once.
// Threads: a WatchWriter is driven from gRPC's callback threads (OnWriteDone, OnCancel, OnDone) and from
// the hub's wake-up, on the publisher's thread. Its mu_ guards which write is in flight; StartWrite and
// Finish are called without it (gRPC may run a reaction inline). A stream keeps nothing once it is done:
// OnDone unsubscribes its watcher (whose buffer goes with it) and releases its slot among the open streams
// (the `hold` given to Start: the tenancy gate's watch_streams count).
// Handshake: an admitted stream sends its initial metadata at once, with kWatchOpenKey: kWatchOpenValue
// ("rdmad-watch: open"), so a client tells it from a refused stream (FailedWatch: trailers only, at once)
// without waiting for the first event.
#ifndef RDMAD_SERVER_RPC_WATCH_WRITER_H_
#define RDMAD_SERVER_RPC_WATCH_WRITER_H_

#include <memory>
#include <optional>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "server/common/sync.h"
#include "server/dispatch/hub.h"
#include "server/rpc/status.h"

namespace rdmad::rpc_internal {

// The initial metadata every admitted watch stream sends first (docs/api.md#watch-streams).
inline constexpr char kWatchOpenKey[] = "rdmad-watch";
inline constexpr char kWatchOpenValue[] = "open";

// A watch stream: drives itself from the watcher's queue, one write in flight, the next started from
// OnWriteDone or, when the watcher was empty, from the hub's wake-up. Shared ownership: gRPC holds it until
// OnDone, and a hub wake-up in flight holds it while it runs, so neither outlives the other's use.
template <typename Event, typename Filter>
class WatchWriter final : public grpc::ServerWriteReactor<Event> {
 public:
  using HubT = dispatch::Hub<Event, Filter>;
  using WatcherT = dispatch::HubWatcher<Event, Filter>;

  // `ctx` is the stream's context: the handshake's metadata goes out on it before anything else.
  static WatchWriter* Start(grpc::CallbackServerContext* ctx, HubT* hub, std::shared_ptr<WatcherT> watcher,
                            std::shared_ptr<void> hold = nullptr) {
    std::shared_ptr<WatchWriter> w(new WatchWriter(hub, std::move(watcher)));
    w->hold_ = std::move(hold);
    w->self_ = w;
    // Before the wake-up is set, so no write can be started concurrently; gRPC sends the metadata ahead of
    // any write or Finish started later.
    ctx->AddInitialMetadata(kWatchOpenKey, kWatchOpenValue);
    w->StartSendInitialMetadata();
    std::weak_ptr<WatchWriter> weak = w;
    w->watcher_->set_wake([weak] {
      if (std::shared_ptr<WatchWriter> alive = weak.lock()) alive->Pump();
    });
    w->Pump();
    return w.get();
  }
  void OnWriteDone(bool ok) override {
    {
      MutexLock lock(&mu_);
      writing_ = false;
      broken_ = broken_ || !ok;
    }
    Pump();
  }
  void OnCancel() override {
    {
      MutexLock lock(&mu_);
      broken_ = true;
    }
    Pump();
  }
  void OnDone() override {
    watcher_->set_wake(nullptr);
    hub_->Unsubscribe(watcher_);
    hold_.reset();  // the stream's slot: free for another from now
    std::shared_ptr<WatchWriter> last = std::move(self_);  // may destroy this on return
  }

 private:
  WatchWriter(HubT* hub, std::shared_ptr<WatcherT> watcher) : hub_(hub), watcher_(std::move(watcher)) {}

  // Starts the next write, or finishes the stream once the watcher is closed and drained.
  void Pump() ABSL_LOCKS_EXCLUDED(mu_) {
    bool write = false, finish = false;
    grpc::Status status;
    {
      MutexLock lock(&mu_);
      if (writing_ || finished_) return;
      if (broken_) {
        finished_ = finish = true;
        status = grpc::Status::CANCELLED;
      } else if (std::optional<Event> e = watcher_->Next()) {
        current_ = std::move(*e);
        writing_ = write = true;
      } else if (std::optional<absl::Status> closed = watcher_->Closed()) {
        finished_ = finish = true;
        status = ToGrpc(*closed);
      }
    }
    if (write) this->StartWrite(&current_);
    if (finish) this->Finish(status);
  }

  HubT* const hub_;
  const std::shared_ptr<WatcherT> watcher_;
  std::shared_ptr<WatchWriter> self_;
  std::shared_ptr<void> hold_;  // released in OnDone (gRPC calls it once, after every other reaction)
  Mutex mu_;
  Event current_;  // written under mu_ only while no write is in flight
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
};

// A slot among the open watch streams (tenancy gate's OpenWatch), type-erased for Start's `hold`.
template <typename Slot>
std::shared_ptr<void> HoldSlot(Slot slot) {
  return std::make_shared<Slot>(std::move(slot));
}

// A watch refused at once (bad filter, service unavailable): new FailedWatch<Event>(), then Fail(status).
template <typename Event>
class FailedWatch final : public grpc::ServerWriteReactor<Event> {
 public:
  void Fail(grpc::Status s) { this->Finish(std::move(s)); }
  void OnDone() override { delete this; }
};

}  // namespace rdmad::rpc_internal

#endif  // RDMAD_SERVER_RPC_WATCH_WRITER_H_
