// scale_bench's parts: what each section measures and the report they fill.
//   scale_objects.cc: per-operation latency at growing object counts (MRs, grants, CM ids) and rdmad's RSS
//                     per object;
//   scale_direct.cc:  the RSS baselines: the same verbs / librdmacm objects made directly in this process;
//   scale_clients.cc: throughput with 1..N concurrent clients, each on its own gRPC connection;
//   scale_bench.cc:   options, the order of the sections, the report (stdout, markdown, gnuplot data).
// Threads: the main thread runs the sections; the fills and the client section start worker threads that each
// use their own Client and append to the report only after they joined.
#ifndef RDMAD_TESTS_BENCH_SCALE_BENCH_H_
#define RDMAD_TESTS_BENCH_SCALE_BENCH_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "client/client.h"
#include "tests/bench/stats.h"

namespace rdmad::bench::scale {

using Clock = std::chrono::steady_clock;

inline double UsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t).count();
}

// A progress line on stderr, with the seconds since the first one.
inline void Progress(const std::string& what) {
  static const Clock::time_point start = Clock::now();
  std::fprintf(stderr, "scale_bench: %.1f s: %s\n", UsSince(start) / 1e6, what.c_str());
}

struct Options {
  std::string target;
  std::string device = "rxe0";
  int rdmad_pid = 0;  // for VmRSS; 0: no RSS figures for rdmad
  std::vector<uint64_t> mr_counts, grant_counts, cm_counts;  // ascending; the first is the baseline count
  uint64_t mw_count = 200;      // windows for the RSS table
  int samples = 20;             // per operation and count
  int list_samples = 5;         // of the lists whose answer grows with the count
  int fill_threads = 8;
  std::vector<int> clients;     // e.g. 1, 8, 64
  double client_seconds = 2;
};

// A client of its own: its own gRPC channel and connection (a local subchannel pool, so that gRPC does not
// share one connection between channels to the same target), no receive size limit (the long lists).
std::unique_ptr<client::Client> NewClient(const std::string& target);

// VmRSS of `pid` (0: this process) in KiB, from /proc/<pid>/status; -1 if unreadable.
long RssKb(int pid);

[[noreturn]] void Die(const std::string& what);

// One operation sampled at one object count.
struct OpRow {
  std::string group;  // "mrs", "grants", "cmids": one table and one .dat per group
  std::string op;
  uint64_t count = 0;
  Stats s;
};
// Memory per object: rdmad's RSS delta beside the same objects made directly (verbs), if any.
struct RssRow {
  RssRow(std::string what, uint64_t count) : object(std::move(what)), n(count) {}
  std::string object;
  uint64_t n = 0;
  long rdmad_kb = -1;   // rdmad's VmRSS after - before
  long direct_kb = -1;  // this process's growth over the same n verbs objects (scale_direct.cc); -1: none
  uint64_t direct_n = 0;
  std::string baseline;  // what the direct objects were
};
struct ClientRow {
  std::string op;
  int clients = 0;
  uint64_t ops = 0;
  double seconds = 0;
};
struct Report {
  std::vector<OpRow> ops;
  std::vector<RssRow> rss;
  std::vector<ClientRow> clients;
  std::vector<std::string> notes;  // one-line facts printed under the tables (device limits, failures)
};

// The clients of the object sections: `main` samples, `fill` (one per fill thread) make and delete the
// objects in parallel. Made once, before any RSS reading, so that rdmad's per-connection state is not
// counted as per-object memory.
struct Clients {
  std::unique_ptr<client::Client> main;
  std::vector<std::unique_ptr<client::Client>> fill;
};

// The sections. Each deletes what it made, except on a fatal error (then the process exits).
void MeasureMrs(const Options& o, Clients& c, Report* report);
void MeasureGrants(const Options& o, Clients& c, Report* report);
void MeasureCmIds(const Options& o, Clients& c, Report* report);
void MeasureMwRss(const Options& o, Clients& c, Report* report);
void MeasureClients(const Options& o, Report* report);

// The direct baselines: the KiB this process grew by while making `n` objects (then freed): the larger of its
// VmRSS growth and its heap-in-use growth (mallinfo2; malloc may reuse memory an earlier baseline freed).
// MRs: mmap of 4 KiB + ibv_reg_mr each (what rdmad's RegisterMr does); windows: ibv_alloc_mw type 1;
// CM ids: rdma_create_id on one event channel. -1 with *error on failure.
long DirectMrsKb(const std::string& device, uint64_t n, std::string* error);
long DirectMwsKb(const std::string& device, uint64_t n, std::string* error);
long DirectCmIdsKb(uint64_t n, std::string* error);

}  // namespace rdmad::bench::scale

#endif  // RDMAD_TESTS_BENCH_SCALE_BENCH_H_
