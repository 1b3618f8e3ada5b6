#include "server/dispatch/worker_pool.h"

#include <pthread.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/dispatch/handoffs.h"

namespace rdmad::dispatch {

WorkerPool::WorkerPool(std::string name, int threads) : name_(std::move(name)) {
  for (int i = 0; i < (threads > 0 ? threads : 1); ++i) threads_.emplace_back([this, i] { Run(i); });
}

WorkerPool::~WorkerPool() {
  std::deque<Task> dropped;
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    dropped.swap(tasks_);
  }
  for (auto& t : threads_) t.join();
  dropped.clear();  // destroyed here, after the running tasks finished
}

bool WorkerPool::Post(Task task) {
  MutexLock lock(&mu_);
  if (stopping_) return false;
  tasks_.push_back(Carry(std::move(task)));  // on its maker's path, one hand-off further (handoffs.h)
  return true;
}

void WorkerPool::Run(int index) {
  pthread_setname_np(pthread_self(), absl::StrCat(name_, "-", index).substr(0, 15).c_str());
  for (;;) {
    Task task;
    {
      MutexLock lock(&mu_);
      mu_.Await([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !tasks_.empty(); });
      if (stopping_) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    std::move(task)();
  }
}

}  // namespace rdmad::dispatch
