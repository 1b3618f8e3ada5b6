// reg_bench: registering a large anonymous region, by technique, in one process on one device
// (docs/performance.md, "Registration of large regions"). For each size, each technique runs `reps` times on a
// fresh mapping (mmap untimed; the timed part ends when the region is registered; ibv_dereg_mr and munmap untimed):
//   whole         one ibv_reg_mr of the untouched region (ibv_reg_mr faults every page in while it pins):
//                 the baseline every other row is divided by;
//   populate xT   T threads pre-fault the region's chunks (madvise MADV_POPULATE_WRITE, Linux >= 5.14), then
//                 one ibv_reg_mr: still ONE region, one key;
//   chunks xT     the region as `chunks` MRs registered by T threads in parallel: NOT one region (one key per
//                 chunk), listed to see what splitting the pinning itself would gain;
//   thp whole     one ibv_reg_mr of a mapping aligned to 2 MiB and advised MADV_HUGEPAGE (transparent huge
//                 pages: nothing reserved);
//   huge ...      the same on 2 MiB huge pages (MAP_HUGETLB), with --hugepages: the benchmark reserves them
//                 (/proc/sys/vm/nr_hugepages, root) for each size and gives them back after;
//   rdmad         RegisterMr of anonymous memory through rdmad (--target), what a client sees.
// Prints a table per size; with --markdown/--data-prefix also the fragment and gnuplot data of
// tests/bench/regenerate.sh. Judges nothing.
// Threads: the main thread, and per timed run T short-lived workers that each touch only their own chunks.
#include <infiniband/verbs.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "client/client.h"
#include "tests/bench/stats.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif
#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << 26)
#endif

namespace {

using rdmad::bench::Summarize;
namespace v1 = rdmad::v1;
using Clock = std::chrono::steady_clock;

constexpr size_t kHuge = 2u << 20;
constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "reg_bench: %s\n", what.c_str());
  std::exit(1);
}

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

std::string SizeName(uint64_t size) {
  if (size >= (1ull << 30) && size % (1ull << 30) == 0) return std::to_string(size >> 30) + " GiB";
  return std::to_string(size >> 20) + " MiB";
}

// Runs fn(i) for i in [0, n) on `threads` threads (chunk i goes to thread i % threads). Returns the first
// error any call reported (empty: none).
std::string Parallel(int threads, size_t n, const std::function<std::string(size_t)>& fn) {
  std::vector<std::string> errors(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (size_t i = t; i < n && errors[t].empty(); i += threads) errors[t] = fn(i);
    });
  }
  for (auto& th : pool) th.join();
  for (auto& e : errors) {
    if (!e.empty()) return e;
  }
  return "";
}

struct Technique {
  std::string name;     // "whole", "populate", "chunks", "huge whole", "huge populate", "rdmad"
  int threads = 1;
  bool huge = false;
};

class Bench {
 public:
  Bench(ibv_pd* pd, int chunks) : pd_(pd), chunks_(chunks) {}

  // One timed registration of `size` bytes by `t`; the region is released (untimed) before it returns.
  double Once(const Technique& t, size_t size) {
    int flags = MAP_PRIVATE | MAP_ANONYMOUS;
    if (t.huge) flags |= MAP_HUGETLB | MAP_HUGE_2MB;
    const bool thp = t.name == "thp whole";
    const size_t mapped = thp ? size + kHuge : size;  // room to align the region to a huge page
    void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (p == MAP_FAILED) Die(t.name + ": mmap of " + SizeName(size) + ": " + std::strerror(errno));
    char* base = static_cast<char*>(p);
    if (thp) {
      base = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(p) + kHuge - 1) / kHuge * kHuge);
      if (madvise(base, size, MADV_HUGEPAGE) != 0) Die(std::string("madvise(MADV_HUGEPAGE): ") + std::strerror(errno));
    }
    const size_t chunk = ChunkBytes(size, t.huge);
    const size_t n = (size + chunk - 1) / chunk;
    const bool populate = t.name == "populate" || t.name == "huge populate", chunked = t.name == "chunks";
    std::vector<ibv_mr*> mrs(chunked ? n : 1, nullptr);
    auto start = Clock::now();
    if (populate) {
      std::string e = Parallel(t.threads, n, [&](size_t i) -> std::string {
        size_t len = std::min(chunk, size - i * chunk);
        if (madvise(base + i * chunk, len, MADV_POPULATE_WRITE) != 0) {
          return std::string("madvise(MADV_POPULATE_WRITE): ") + std::strerror(errno);
        }
        return "";
      });
      if (!e.empty()) Die(e);
    }
    if (chunked) {
      std::string e = Parallel(t.threads, n, [&](size_t i) -> std::string {
        size_t len = std::min(chunk, size - i * chunk);
        mrs[i] = ibv_reg_mr(pd_, base + i * chunk, len, kAccess);
        return mrs[i] ? "" : std::string("ibv_reg_mr (chunk): ") + std::strerror(errno);
      });
      if (!e.empty()) Die(e);
    } else {
      mrs[0] = ibv_reg_mr(pd_, base, size, kAccess);
      if (mrs[0] == nullptr) Die(t.name + ": ibv_reg_mr of " + SizeName(size) + ": " + std::strerror(errno));
    }
    const double ms = MsSince(start);
    for (ibv_mr* mr : mrs) {
      if (mr && ibv_dereg_mr(mr) != 0) Die("ibv_dereg_mr failed");
    }
    munmap(p, mapped);
    return ms;
  }

  // Chunks of the populate and chunks techniques: `chunks_` of them, whole huge pages.
  size_t ChunkBytes(size_t size, bool huge) const {
    const size_t unit = huge ? kHuge : 4096;
    size_t c = (size / chunks_ + unit - 1) / unit * unit;
    return std::max(c, unit);
  }

 private:
  ibv_pd* pd_;
  int chunks_;
};

// rdmad's RegisterMr / DeregisterMr of anonymous memory.
class Rdmad {
 public:
  Rdmad(const std::string& target, const std::string& device) {
    rdmad::client::Client::Options options;
    options.target = target;
    options.timeout = std::chrono::milliseconds(600000);
    client_ = std::make_unique<rdmad::client::Client>(options);
    v1::CreatePdRequest r;
    r.set_device(device);
    r.set_label("reg-bench");
    auto pd = client_->CreatePd(r);
    if (!pd.ok()) Die("CreatePd: " + pd.status().ToString());
    pd_ = pd->name();
  }
  double Once(size_t size) {
    v1::RegisterMrRequest req;
    req.set_pd(pd_);
    req.mutable_source()->mutable_anonymous()->set_size(size);
    for (v1::Access a : {v1::LOCAL_WRITE, v1::REMOTE_READ, v1::MW_BIND}) req.add_access(a);
    auto t = Clock::now();
    auto mr = client_->RegisterMr(req);
    const double ms = MsSince(t);
    if (!mr.ok()) Die("RegisterMr " + SizeName(size) + ": " + mr.status().ToString());
    if (absl::Status s = client_->DeregisterMr(mr->name()); !s.ok()) Die("DeregisterMr: " + s.ToString());
    return ms;
  }
  ~Rdmad() {
    (void)client_->DeletePd(pd_);
  }

 private:
  std::unique_ptr<rdmad::client::Client> client_;
  std::string pd_;
};

// /proc/sys/vm/nr_hugepages: set, and read back (the kernel may reserve fewer than asked).
long SetHugePages(long n) {
  { std::ofstream("/proc/sys/vm/nr_hugepages") << n << "\n"; }
  long got = -1;
  std::ifstream("/proc/sys/vm/nr_hugepages") >> got;
  return got;
}

struct Row {
  uint64_t size = 0;
  Technique t;
  std::vector<double> ms;
};

std::string Label(const Technique& t) {
  if (t.name == "whole" || t.name == "thp whole" || t.name == "rdmad" || t.name == "huge whole") {
    return t.name;
  }
  return t.name + " x" + std::to_string(t.threads);
}

void PrintTables(std::FILE* out, const std::vector<Row>& rows, const std::vector<uint64_t>& sizes,
                 const std::string& caption) {
  if (!caption.empty()) std::fprintf(out, "%s\n\n", caption.c_str());
  for (uint64_t size : sizes) {
    double base = 0;
    for (const Row& r : rows) {
      if (r.size == size && r.t.name == "whole") base = Summarize(r.ms).p50;
    }
    std::fprintf(out, "Registering %s of anonymous memory: each technique beside one ibv_reg_mr of the whole "
                      "(4 KiB pages)\n\n", SizeName(size).c_str());
    std::fprintf(out, "| technique | threads | n | p50 | min | baseline: whole p50 | ratio |\n");
    std::fprintf(out, "|---|---|---|---|---|---|---|\n");
    for (const Row& r : rows) {
      if (r.size != size) continue;
      rdmad::bench::Stats s = Summarize(r.ms);
      const double min = *std::min_element(r.ms.begin(), r.ms.end());
      std::fprintf(out, "| %s | %d | %zu | %.1f ms | %.1f ms | %.1f ms | %.2fx |\n", Label(r.t).c_str(),
                   r.t.threads, s.n, s.p50, min, base, base > 0 ? s.p50 / base : 0);
    }
    std::fprintf(out, "\n");
  }
  std::fflush(out);
}

// PREFIX-size.dat: p50 by size per technique (2 threads for the parallel ones, the guest's vCPUs);
// PREFIX-threads.dat: p50 by threads at the largest size.
void WriteData(const std::vector<Row>& rows, const std::vector<uint64_t>& sizes, const std::vector<int>& threads,
               const std::string& prefix) {
  auto p50 = [&](uint64_t size, const std::string& name, int th) -> double {
    for (const Row& r : rows) {
      if (r.size == size && r.t.name == name && (r.t.threads == th || th == 0)) return Summarize(r.ms).p50;
    }
    return -1;  // not measured: written as NaN, which gnuplot leaves out
  };
  auto v = [](double x) { return x < 0 ? std::string("NaN") : std::to_string(x); };
  std::FILE* f = std::fopen((prefix + "-size.dat").c_str(), "w");
  if (f == nullptr) Die("cannot write " + prefix + "-size.dat");
  std::fprintf(f, "# size_mib p50_ms: whole populate_x2 chunks_x2 huge_whole huge_populate_x2 rdmad thp_whole\n");
  for (uint64_t s : sizes) {
    std::fprintf(f, "%llu %s %s %s %s %s %s %s\n", static_cast<unsigned long long>(s >> 20),
                 v(p50(s, "whole", 0)).c_str(), v(p50(s, "populate", 2)).c_str(), v(p50(s, "chunks", 2)).c_str(),
                 v(p50(s, "huge whole", 0)).c_str(), v(p50(s, "huge populate", 2)).c_str(),
                 v(p50(s, "rdmad", 0)).c_str(), v(p50(s, "thp whole", 0)).c_str());
  }
  std::fclose(f);
  f = std::fopen((prefix + "-threads.dat").c_str(), "w");
  if (f == nullptr) Die("cannot write " + prefix + "-threads.dat");
  const uint64_t s = sizes.back();
  std::fprintf(f, "# threads p50_ms at %llu MiB: whole populate chunks huge_whole huge_populate\n",
               static_cast<unsigned long long>(s >> 20));
  for (int th : threads) {
    std::fprintf(f, "%d %s %s %s %s %s\n", th, v(p50(s, "whole", 0)).c_str(), v(p50(s, "populate", th)).c_str(),
                 v(p50(s, "chunks", th)).c_str(), v(p50(s, "huge whole", 0)).c_str(),
                 v(p50(s, "huge populate", th)).c_str());
  }
  std::fclose(f);
}

std::vector<uint64_t> ParseList(const std::string& text, const char* what) {
  std::vector<uint64_t> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    uint64_t v = 0;
    if (!absl::SimpleAtoi(part, &v) || v == 0) Die(std::string("bad ") + what + ": " + std::string(part));
    out.push_back(v);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"reg_bench: registering large regions, by technique (docs/performance.md)"};
  std::string device = "rxe0", sizes_text = "67108864", threads_text = "1,2,4", target, markdown, data_prefix,
              caption;
  int reps = 2, chunks = 16;
  bool hugepages = false;
  app.add_option("--device", device, "verbs device");
  app.add_option("--sizes", sizes_text, "region sizes in bytes, comma-separated (multiples of 2 MiB)");
  app.add_option("--threads", threads_text, "thread counts of the parallel techniques, comma-separated");
  app.add_option("--reps", reps, "timed runs per technique and size");
  app.add_option("--chunks", chunks, "chunks per region (populate and chunks techniques)");
  app.add_flag("--hugepages", hugepages, "also on 2 MiB huge pages, reserved here (root) and given back");
  app.add_option("--target", target, "rdmad's gRPC address: also RegisterMr through it");
  app.add_option("--markdown", markdown, "also write the tables to this file");
  app.add_option("--data-prefix", data_prefix, "also write PREFIX-size.dat and PREFIX-threads.dat");
  app.add_option("--caption", caption, "first line of the markdown fragment");
  CLI11_PARSE(app, argc, argv);
  const std::vector<uint64_t> sizes = ParseList(sizes_text, "--sizes");
  std::vector<int> threads;
  for (uint64_t t : ParseList(threads_text, "--threads")) threads.push_back(static_cast<int>(t));
  if (reps < 1 || chunks < 1) Die("--reps and --chunks must be at least 1");

  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ibv_context* ctx = nullptr;
  for (int i = 0; list && i < n; ++i) {
    if (device == ibv_get_device_name(list[i])) ctx = ibv_open_device(list[i]);
  }
  if (list) ibv_free_device_list(list);
  if (ctx == nullptr) Die("cannot open " + device);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  if (pd == nullptr) Die("ibv_alloc_pd failed");
  std::unique_ptr<Rdmad> rdmad;
  if (!target.empty()) rdmad = std::make_unique<Rdmad>(target, device);

  Bench bench(pd, chunks);
  std::vector<Row> rows;
  auto run = [&](uint64_t size, Technique t) {
    Row r{size, t, {}};
    for (int i = 0; i < reps; ++i) {
      r.ms.push_back(t.name == "rdmad" ? rdmad->Once(size) : bench.Once(t, size));
    }
    std::printf("  %-8s %-18s %s\n", SizeName(size).c_str(), Label(t).c_str(),
                (std::to_string(Summarize(r.ms).p50) + " ms").c_str());
    std::fflush(stdout);
    rows.push_back(std::move(r));
  };
  bench.Once({"whole", 1, false}, sizes.front());  // warm-up, untimed
  long huge_before = -1;
  std::ifstream("/proc/sys/vm/nr_hugepages") >> huge_before;
  for (uint64_t size : sizes) {
    run(size, {"whole", 1, false});
    run(size, {"thp whole", 1, false});
    for (int th : threads) run(size, {"populate", th, false});
    for (int th : threads) run(size, {"chunks", th, false});
    if (rdmad) run(size, {"rdmad", 1, false});
    if (hugepages) {
      const long want = static_cast<long>((size + kHuge - 1) / kHuge);
      const long got = SetHugePages(want);
      if (got < want) {
        std::printf("  %-8s huge pages: %ld of %ld reserved, skipped\n", SizeName(size).c_str(), got, want);
      } else {
        run(size, {"huge whole", 1, true});
        for (int th : threads) run(size, {"huge populate", th, true});
      }
      SetHugePages(std::max(huge_before, 0L));
    }
  }
  rdmad.reset();
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);

  std::printf("\n");
  PrintTables(stdout, rows, sizes, caption);
  if (!markdown.empty()) {
    std::FILE* f = std::fopen(markdown.c_str(), "w");
    if (f == nullptr) Die("cannot write " + markdown);
    PrintTables(f, rows, sizes, caption);
    std::fclose(f);
  }
  if (!data_prefix.empty()) WriteData(rows, sizes, threads, data_prefix);
  return 0;
}
