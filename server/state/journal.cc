// state::Journal: the ordered writer with group commit. Threads: see journal.h (the writer thread owns the
// group being written; mu_ guards only the queue, the counters and the stop flags).
#include "server/state/journal.h"

#include <map>
#include <utility>

#include "server/common/log.h"

namespace rdmad::state {

Journal::Journal(Store* store) : store_(store) {
  if (store_ != nullptr) store_->set_journal(this);
  writer_ = std::thread([this] { Run(); });
}

Journal::~Journal() {
  Close();
  if (store_ != nullptr) store_->set_journal(nullptr);
}

Ticket Journal::Submit(Mutation m) {
  Record r;
  r.kind = Record::Kind::kMutation;
  r.mutation = std::move(m);
  return Enqueue(std::move(r));
}

Ticket Journal::SubmitLine(LineSink* sink, std::string line, uint64_t tag) {
  Record r;
  r.kind = Record::Kind::kLine;
  r.sink = sink;
  r.line = std::move(line);
  r.line.push_back('\n');
  r.tag = tag;
  return Enqueue(std::move(r));
}

void Journal::Flush() { Enqueue(Record()).Wait().IgnoreError(); }  // a barrier: always OK

Ticket Journal::Enqueue(Record r) {
  auto done = std::make_shared<Ticket::State>();
  r.done = done;
  bool inline_write = false;
  {
    MutexLock lock(&mu_);
    if (closed_) {
      inline_write = true;
    } else {
      queue_.push_back(std::move(r));
    }
  }
  if (inline_write) {
    // After Close (shutdown only): no writer any more; this thread writes its own record.
    std::vector<Record> group;
    group.push_back(std::move(r));
    MutexLock lock(&inline_mu_);
    WriteGroup(group);
  }
  return Ticket(std::move(done));
}

void Journal::Close() {
  {
    MutexLock lock(&mu_);
    if (stopping_) {
      // Closed, or closing on another thread: wait until the writer is gone.
      mu_.Await([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return closed_; });
      return;
    }
    stopping_ = true;
  }
  writer_.join();
}

Journal::Counts Journal::counts() const {
  MutexLock lock(&mu_);
  return counts_;
}

void Journal::Run() {
  for (;;) {
    std::vector<Record> group;
    {
      MutexLock lock(&mu_);
      mu_.Await([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty() || stopping_; });
      if (queue_.empty()) {  // stopping, and everything queued is written
        closed_ = true;
        return;
      }
      group.swap(queue_);
    }
    WriteGroup(group);
  }
}

void Journal::WriteGroup(std::vector<Record>& group) {
  // 1. The store's records: one transaction.
  std::vector<const Mutation*> mutations;
  std::vector<size_t> at;  // index in group of each mutation
  for (size_t i = 0; i < group.size(); ++i) {
    if (group[i].kind == Record::Kind::kMutation) {
      mutations.push_back(&group[i].mutation);
      at.push_back(i);
    }
  }
  std::vector<absl::Status> each;
  bool committed = false;
  if (!mutations.empty()) {
    if (store_ != nullptr) {
      // A failed transaction is also in each: logged below, per record.
      committed = store_->ApplyGroup(mutations, &each).ok();
    } else {
      each.assign(mutations.size(), absl::FailedPreconditionError("no state store"));
    }
    for (size_t k = 0; k < mutations.size(); ++k) {
      if (!each[k].ok()) mutations[k]->LogFailure(each[k]);
      group[at[k]].done->status = each[k];
    }
  }
  // 2. The lines: one write per sink, in submission order.
  struct Batch {
    std::string lines;
    uint64_t first = 0, last = 0;
    std::vector<size_t> records;
  };
  std::map<LineSink*, Batch> batches;
  std::vector<LineSink*> order;
  size_t lines = 0;
  for (size_t i = 0; i < group.size(); ++i) {
    if (group[i].kind != Record::Kind::kLine) continue;
    auto [it, fresh] = batches.try_emplace(group[i].sink);
    if (fresh) {
      order.push_back(group[i].sink);
      it->second.first = group[i].tag;
    }
    it->second.lines += group[i].line;
    it->second.last = group[i].tag;
    it->second.records.push_back(i);
    ++lines;
  }
  for (LineSink* sink : order) {
    Batch& b = batches[sink];
    const absl::Status written = sink->AppendLines(b.lines, b.first, b.last);
    for (size_t i : b.records) group[i].done->status = written;
  }
  // 3. Done: counted first, so that a waiter sees its own group in counts().
  {
    MutexLock lock(&mu_);
    if (!mutations.empty() && store_ != nullptr) {
      if (committed) {
        ++counts_.commits;
        counts_.records += mutations.size();
      } else {
        ++counts_.commit_errors;
      }
    }
    counts_.lines += lines;
  }
  for (Record& r : group) r.done->done.Notify();
}

}  // namespace rdmad::state
