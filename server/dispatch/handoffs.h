// Thread hand-offs on a request's path: how many times the work that leads to its answer moved to another
// thread (a task posted to an event loop or a worker pool, a completion callback run by a device's
// dispatcher, an operation queued on a PD's type 1 lane and run by whoever frees it). The RPC layer makes
// its handler's thread the start of a path (count 0) and reads the count where the answer leaves
// (rdmad_rpc_thread_handoffs, docs/operations.md#metrics). Carry wraps a piece of work so that it runs on
// its maker's path, one hand-off further if it runs on another thread. Work that branches off (a timer
// armed, a pool refilled) counts on its own branch, not on the answer's.
//
// Threads: any. The count is thread-local, carried by value into the work.
#ifndef RDMAD_SERVER_DISPATCH_HANDOFFS_H_
#define RDMAD_SERVER_DISPATCH_HANDOFFS_H_

#include <thread>
#include <utility>

namespace rdmad::dispatch {

class Handoffs {
 public:
  // Hand-offs so far on the path of the request whose work runs on this thread now; -1 outside any.
  static int Current() { return current_; }

  // Makes `count` this thread's current path until destroyed (then the previous one again).
  class Scope {
   public:
    explicit Scope(int count) : previous_(current_) { current_ = count; }
    ~Scope() { current_ = previous_; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    const int previous_;
  };

 private:
  static inline thread_local int current_ = -1;
};

// `f`, called once (as an rvalue), on the path current where Carry was called: one hand-off further if it
// runs on another thread than that one. Outside any request, `f` as it is.
template <typename F>
auto Carry(F f) {
  return [count = Handoffs::Current(), origin = std::this_thread::get_id(),
          f = std::move(f)](auto&&... args) mutable -> decltype(auto) {
    Handoffs::Scope scope(count < 0 || std::this_thread::get_id() == origin ? count : count + 1);
    return std::move(f)(std::forward<decltype(args)>(args)...);
  };
}

}  // namespace rdmad::dispatch

#endif  // RDMAD_SERVER_DISPATCH_HANDOFFS_H_
