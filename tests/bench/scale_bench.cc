// scale_bench: rdmad at scale. Per-operation p50/p99 at growing object counts (MRs, grants, CM ids),
// each beside the same operation at the first (smallest) count of the same run; rdmad's memory per object
// (VmRSS growth over N objects) beside the same N verbs objects made directly in this process; throughput of
// 1..K concurrent clients beside one client. Prints the tables (and writes them as a markdown fragment and
// gnuplot data, when asked); judges nothing. Run by run-scale-bench.sh in the guest.
// Usage: scale_bench --target unix:/path --rdmad-pid PID [--device rxe0] [--mrs 1000,10000,100000]
//          [--grants 1000,10000] [--cm-ids 100,1000] [--mws 1000] [--clients 1,8,64] [--client-seconds S]
//          [--samples N] [--list-samples N] [--fill-threads N] [--markdown FILE] [--data-prefix PREFIX]
//          [--what TEXT]
// Threads: the main thread; the sections start and join their own (scale_bench.h).
#include <sys/utsname.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/bench/scale_bench.h"

namespace rdmad::bench::scale {

void Die(const std::string& what) {
  std::fprintf(stderr, "scale_bench: %s\n", what.c_str());
  std::exit(1);
}

std::unique_ptr<client::Client> NewClient(const std::string& target) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(-1);
  return std::make_unique<client::Client>(
      grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args), std::chrono::milliseconds(600000));
}

namespace {

template <typename T>
std::vector<T> ParseList(const std::string& text, const char* flag) {
  std::vector<T> out;
  for (absl::string_view s : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    T v = 0;
    if (!absl::SimpleAtoi(s, &v) || v <= 0) Die(std::string(flag) + ": not a positive number: " + std::string(s));
    if (!out.empty() && v <= out.back()) Die(std::string(flag) + ": give the counts in ascending order");
    out.push_back(v);
  }
  return out;
}

std::string Us(double us) { return us >= 10000 ? absl::StrCat(static_cast<long>(us / 1000 + 0.5), " ms")
                                                : absl::StrCat(static_cast<long>(us + 0.5), " us"); }
std::string Ratio(double a, double b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", b > 0 ? a / b : 0);
  return buf;
}
std::string PerObject(long kb, uint64_t n) {
  if (kb < 0 || n == 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f KiB", static_cast<double>(kb) / n);
  return buf;
}

const char* kCaptions[][2] = {
    {"mrs", "MRs in one PD (RegisterMr 4 KiB each); each operation beside itself at the first count"},
    {"grants", "grants issued on one 64 KiB MR, not connected; each operation beside itself at the first count"},
    {"cmids", "CM ids on one channel (CreateCmId); each operation beside itself at the first count"},
};

std::string Tables(const Report& r) {
  std::string md;
  for (const auto& [group, caption] : kCaptions) {
    std::vector<std::string> ops;
    std::map<std::string, const OpRow*> first;
    for (const OpRow& row : r.ops) {
      if (row.group != group) continue;
      if (!first.count(row.op)) ops.push_back(row.op), first[row.op] = &row;
    }
    if (ops.empty()) continue;
    absl::StrAppend(&md, "\n", caption, ":\n\n| operation | objects | n | p50 | p99 | p50 / p50 at ",
                    first[ops[0]]->count, " | p99 / p99 at ", first[ops[0]]->count, " |\n",
                    "| --- | --- | --- | --- | --- | --- | --- |\n");
    for (const std::string& op : ops) {
      for (const OpRow& row : r.ops) {
        if (row.group != group || row.op != op) continue;
        const Stats& b = first[op]->s;
        absl::StrAppend(&md, "| ", op, " | ", row.count, " | ", row.s.n, " | ", Us(row.s.p50), " | ", Us(row.s.p99),
                        " | ", Ratio(row.s.p50, b.p50), " | ", Ratio(row.s.p99, b.p99), " |\n");
      }
    }
  }
  if (!r.rss.empty()) {
    absl::StrAppend(&md, "\nrdmad's VmRSS growth over N objects beside the same N made directly with verbs in the "
                         "benchmark's process:\n\n| object | N | rdmad RSS growth | per object | baseline (direct) | "
                         "its growth | per object | rdmad beyond verbs, per object (goal < 2 KiB) |\n"
                         "| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for (const RssRow& x : r.rss) {
      const double beyond = (x.rdmad_kb >= 0 ? static_cast<double>(x.rdmad_kb) / x.n : 0) -
                            (x.direct_kb >= 0 && x.direct_n ? static_cast<double>(x.direct_kb) / x.direct_n : 0);
      char b[32];
      std::snprintf(b, sizeof b, "%.2f KiB", beyond);
      absl::StrAppend(&md, "| ", x.object, " | ", x.n, " | ", x.rdmad_kb < 0 ? "-" : absl::StrCat(x.rdmad_kb, " KiB"),
                      " | ", PerObject(x.rdmad_kb, x.n), " | ", x.baseline, " | ",
                      x.direct_kb < 0 ? "-" : absl::StrCat(x.direct_kb, " KiB"), " | ",
                      PerObject(x.direct_kb, x.direct_n), " | ", x.rdmad_kb < 0 ? "-" : b, " |\n");
    }
  }
  if (!r.clients.empty()) {
    absl::StrAppend(&md, "\nConcurrent clients, each a thread with its own gRPC connection, for a fixed time; beside "
                         "one client:\n\n| operation | clients | operations | seconds | ops/s | vs 1 client |\n"
                         "| --- | --- | --- | --- | --- | --- |\n");
    for (const ClientRow& c : r.clients) {
      double one = 0;
      for (const ClientRow& d : r.clients) {
        if (d.op == c.op && d.clients == r.clients.front().clients) one = d.ops / d.seconds;
      }
      char rate[32];
      std::snprintf(rate, sizeof rate, "%.1f", c.ops / c.seconds);
      char secs[32];
      std::snprintf(secs, sizeof secs, "%.1f", c.seconds);
      absl::StrAppend(&md, "| ", c.op, " | ", c.clients, " | ", c.ops, " | ", secs, " | ", rate, " | ",
                      Ratio(c.ops / c.seconds, one), " |\n");
    }
  }
  for (const std::string& n : r.notes) absl::StrAppend(&md, "\n", n, "\n");
  return md;
}

// PREFIX-<group>.dat: one line per count, "p50 p99" (microseconds) per operation in the table's order;
// PREFIX-clients.dat: one line per client count, ops/s per operation.
void WriteData(const Report& r, const std::string& prefix) {
  for (const auto& [group, caption] : kCaptions) {
    std::vector<std::string> ops;
    std::set<uint64_t> counts;
    for (const OpRow& row : r.ops) {
      if (row.group != group) continue;
      if (std::find(ops.begin(), ops.end(), row.op) == ops.end()) ops.push_back(row.op);
      counts.insert(row.count);
    }
    if (ops.empty()) continue;
    FILE* f = std::fopen((prefix + "-" + group + ".dat").c_str(), "w");
    if (!f) Die("cannot write " + prefix + "-" + group + ".dat");
    std::fprintf(f, "# objects");
    for (const std::string& op : ops) {
      std::string id;  // the name as one word: letters and digits, runs of anything else as one '_'
      for (char ch : op) {
        if (std::isalnum(static_cast<unsigned char>(ch))) id += ch;
        else if (!id.empty() && id.back() != '_') id += '_';
      }
      while (!id.empty() && id.back() == '_') id.pop_back();
      std::fprintf(f, " %s_p50_us %s_p99_us", id.c_str(), id.c_str());
    }
    std::fprintf(f, "\n");
    for (uint64_t count : counts) {
      std::fprintf(f, "%llu", static_cast<unsigned long long>(count));
      for (const std::string& op : ops) {
        for (const OpRow& row : r.ops) {
          if (row.group == group && row.op == op && row.count == count) {
            std::fprintf(f, " %.0f %.0f", row.s.p50, row.s.p99);
          }
        }
      }
      std::fprintf(f, "\n");
    }
    std::fclose(f);
  }
  if (r.clients.empty()) return;
  FILE* f = std::fopen((prefix + "-clients.dat").c_str(), "w");
  if (!f) Die("cannot write " + prefix + "-clients.dat");
  std::fprintf(f, "# clients noop_ListPds_ops_per_s RegisterMr_DeregisterMr_pairs_per_s\n");
  std::vector<int> ks;
  for (const ClientRow& c : r.clients) {
    if (std::find(ks.begin(), ks.end(), c.clients) == ks.end()) ks.push_back(c.clients);
  }
  for (int k : ks) {
    std::fprintf(f, "%d", k);
    for (const ClientRow& c : r.clients) {
      if (c.clients == k) std::fprintf(f, " %.2f", c.ops / c.seconds);
    }
    std::fprintf(f, "\n");
  }
  std::fclose(f);
}

}  // namespace
}  // namespace rdmad::bench::scale

int main(int argc, char** argv) {
  using namespace rdmad::bench::scale;
  CLI::App app{"scale_bench: rdmad's per-operation cost at growing object counts, memory per object, clients"};
  Options o;
  o.target = rdmad::client::kDefaultTarget;
  std::string mrs = "200,2000", grants = "200,1000", cm_ids = "20,100", clients = "1,8";
  std::string markdown, data_prefix, what = "scale_bench";
  app.add_option("--target", o.target, "rdmad address");
  app.add_option("--device", o.device, "RDMA device, for rdmad and for the direct baselines");
  app.add_option("--rdmad-pid", o.rdmad_pid, "rdmad's pid, for its VmRSS (0: no memory figures for rdmad)");
  app.add_option("--mrs", mrs, "MR counts, ascending, comma-separated ('' : skip)");
  app.add_option("--grants", grants, "grant counts, ascending, multiples of 100 ('' : skip)");
  app.add_option("--cm-ids", cm_ids, "CM id counts, ascending ('' : skip)");
  app.add_option("--mws", o.mw_count, "windows for the memory table (0: skip)");
  app.add_option("--clients", clients, "concurrent client counts, ascending ('' : skip)");
  app.add_option("--client-seconds", o.client_seconds, "seconds per operation and client count");
  app.add_option("--samples", o.samples, "samples per operation and count")->check(CLI::PositiveNumber);
  app.add_option("--list-samples", o.list_samples, "samples of the lists that return all N objects");
  app.add_option("--fill-threads", o.fill_threads, "clients making the objects in parallel")
      ->check(CLI::PositiveNumber);
  app.add_option("--markdown", markdown, "also write the tables as a markdown fragment to FILE");
  app.add_option("--data-prefix", data_prefix, "write PREFIX-mrs.dat, -grants.dat, -cmids.dat, -clients.dat");
  app.add_option("--what", what, "what ran, for the fragment's first line (the last one given)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  CLI11_PARSE(app, argc, argv);
  o.mr_counts = ParseList<uint64_t>(mrs, "--mrs");
  o.grant_counts = ParseList<uint64_t>(grants, "--grants");
  o.cm_counts = ParseList<uint64_t>(cm_ids, "--cm-ids");
  o.clients = ParseList<int>(clients, "--clients");
  for (uint64_t g : o.grant_counts) {
    if (g % 100) Die("--grants: counts must be multiples of 100 (grants are issued 100 per call)");
  }

  Progress("start");
  Clients c;
  c.main = NewClient(o.target);
  for (int i = 0; i < o.fill_threads; ++i) c.fill.push_back(NewClient(o.target));
  Report report;
  MeasureClients(o, &report);
  // Smallest footprint first: malloc reuses what a section freed without growing the RSS, so a section that
  // follows a bigger one would under-count its memory per object.
  MeasureMwRss(o, c, &report);
  MeasureCmIds(o, c, &report);
  MeasureGrants(o, c, &report);
  MeasureMrs(o, c, &report);

  utsname u{};
  uname(&u);
  char date[16];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%F", std::gmtime(&now));
  const std::string md = absl::StrCat("Measured ", date, ", ", u.release, ", ", std::thread::hardware_concurrency(),
                                      " vCPUs, ", what, "\n", Tables(report));
  std::printf("\n%s", md.c_str());
  std::fflush(stdout);
  if (!markdown.empty()) {
    FILE* f = std::fopen(markdown.c_str(), "w");
    if (!f) Die("cannot write " + markdown);
    std::fputs(md.c_str(), f);
    std::fclose(f);
  }
  if (!data_prefix.empty()) WriteData(report, data_prefix);
  return 0;
}
