// WorkerPool: a few threads for long work that must not run on a gRPC thread or a dispatcher: mapping and
// pinning memory (ibv_reg_mr of a large region takes seconds), an emulated re-registration. The registry
// reserves what the work needs under its lock, hands the work here, and the work commits its result
// (reserve -> work -> commit).
// Threads: Post() from any thread; tasks run on the pool's threads in FIFO order per free thread. The
// destructor lets running tasks finish, runs none of the queued ones (they are destroyed), and joins.
#ifndef RDMAD_SERVER_DISPATCH_WORKER_POOL_H_
#define RDMAD_SERVER_DISPATCH_WORKER_POOL_H_

#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "server/common/sync.h"

namespace rdmad::dispatch {

class WorkerPool {
 public:
  using Task = absl::AnyInvocable<void() &&>;
  WorkerPool(std::string name, int threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // False (the task destroyed unrun) once the pool is stopping.
  bool Post(Task task);
  int size() const { return static_cast<int>(threads_.size()); }

 private:
  void Run(int index);

  const std::string name_;
  Mutex mu_;
  std::deque<Task> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace rdmad::dispatch

#endif  // RDMAD_SERVER_DISPATCH_WORKER_POOL_H_
