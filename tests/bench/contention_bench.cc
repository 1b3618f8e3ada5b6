// contention_bench: how rdmad's answers slow down while other clients change its state. One rdmad in this
// process (tests/support/daemon_fixture.h: the fake fabric, on a unix socket), with its state store and its
// audit log in files, so that every registration writes to disk as in production. Three phases of --seconds
// each, in one run:
//   1. idle: a no-op RPC (ListPds, as control_bench and rpc_latency call it; --noop Health for gRPC's health
//      check, which never enters rdmad's own code) in a loop, alone: its baseline;
//   2. single: one client registers and deregisters a 4 KiB anonymous region in a loop while a watcher
//      follows the MR events: the events' baseline;
//   3. loaded: --clients clients (each its own gRPC connection and PD) register and deregister in a loop, the
//      no-op client loops beside them and the watcher follows.
// The MR events are WatchAudit's records of RegisterMr (rdmad has no watch of MRs alone; the audit trail
// carries every mutating call, each with its own time). An event's delay is measured two ways: from the
// record's own time (taken as rdmad ends the call, before the answer leaves) to its arrival at the watcher,
// and from the RegisterMr reply's arrival at its client to the record's arrival at the watcher (negative when
// the watcher heard first). Both clocks are this process's CLOCK_REALTIME.
// Prints a table and one JSON line (starting {"bench":"contention"); the ratios are against the baselines of
// the same run. rdmad's own counters from its /metrics over the loaded phase: rdmad_rpc_thread_handoffs,
// rdmad_state_commits_total and rdmad_state_records_total ("n/a" where rdmad does not export them). Judges
// nothing. What it measures is rdmad's locks, threads and disk writes; the fake fabric costs next to nothing.
// Usage: contention_bench [--seconds S] [--clients K] [--short] [--noop ListPds|Health] [--dir DIR]
//                         [--log-level warning]
// Threads: the main thread runs the phases; each registering client, the no-op client and the watcher run on
// a thread of their own, each with its own Client (its own gRPC connection to rdmad); they keep their samples
// to themselves until the main thread joins them.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <grpcpp/grpcpp.h>
#include <httplib.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "client/client.h"
#include "server/common/log.h"
#include "tests/support/daemon_fixture.h"

namespace {

namespace v1 = rdmad::v1;
using rdmad::client::Client;
using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "contention_bench: %s\n", what.c_str());
  std::exit(1);
}

double UsSince(Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count(); }

// CLOCK_REALTIME in ns: the clock of the audit records' time_unix_nanos (proto/wire/wall_clock.h).
int64_t WallNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

struct Summary {
  size_t n = 0;
  double p50 = 0, p99 = 0, p999 = 0, max = 0;
};

Summary Summarize(std::vector<double> us) {
  Summary s;
  if (us.empty()) return s;
  std::sort(us.begin(), us.end());
  auto at = [&us](size_t per_mille) { return us[std::min(us.size() - 1, us.size() * per_mille / 1000)]; };
  s.n = us.size();
  s.p50 = at(500);
  s.p99 = at(990);
  s.p999 = at(999);
  s.max = us.back();
  return s;
}

// A client of its own connection: channels with the same arguments would share one (gRPC's subchannel pool).
std::unique_ptr<Client> NewClient(const std::string& target) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return std::make_unique<Client>(grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args),
                                  std::chrono::milliseconds(60000));
}

// A TCP port on 127.0.0.1 free a moment ago, for rdmad's metrics endpoint (which refuses port 0 in its config
// and does not say which port it took).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) Die("socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    Die("no free port for the metrics endpoint");
  }
  const int port = ntohs(a.sin_port);
  close(fd);
  return port;
}

// The filesystem that holds `dir`, by name where known: on tmpfs (or an overlay on one, as in the test
// guest) the state store's fsync reaches no disk.
std::string Filesystem(const std::string& dir) {
  struct statfs fs {};
  if (statfs(dir.c_str(), &fs) != 0) return "filesystem unknown";
  switch (static_cast<uint64_t>(fs.f_type)) {
    case 0xEF53: return "ext2/3/4";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x01021994: return "tmpfs: no disk under it";
    case 0x794C7630: return "overlayfs: maybe no disk under it";
    default: {
      char buf[48];
      std::snprintf(buf, sizeof buf, "filesystem 0x%llx", static_cast<unsigned long long>(fs.f_type));
      return buf;
    }
  }
}

// The machine's load average over the last minute (others' work on the same cores shows in every figure).
std::string LoadAverage() {
  std::FILE* f = std::fopen("/proc/loadavg", "r");
  if (f == nullptr) return "?";
  char buf[64] = {};
  const bool ok = std::fgets(buf, sizeof buf, f) != nullptr;
  std::fclose(f);
  if (!ok) return "?";
  std::string s(buf);
  return s.substr(0, s.find(' '));
}

// rdmad's /metrics: per series (name and labels, as printed) its value.
using Metrics = std::map<std::string, double>;

Metrics Scrape(int port) {
  httplib::Client http("127.0.0.1", port);
  httplib::Result r = http.Get("/metrics");
  if (!r || r->status != 200) Die("GET /metrics on 127.0.0.1:" + std::to_string(port) + " failed");
  Metrics out;
  for (absl::string_view line : absl::StrSplit(r->body, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "#")) continue;
    const size_t space = line.rfind(' ');
    double v = 0;
    if (space == absl::string_view::npos || !absl::SimpleAtod(line.substr(space + 1), &v)) continue;
    out[std::string(line.substr(0, space))] = v;
  }
  return out;
}

// The sum of every series of `name` (any labels) whose labels contain `label` (e.g. method="RegisterMr");
// -1 if rdmad exports no series of that name.
double Sum(const Metrics& m, const std::string& name, const std::string& label = "") {
  double sum = 0;
  bool found = false;
  for (const auto& [series, v] : m) {
    if (series != name && !absl::StartsWith(series, name + "{")) continue;
    if (!label.empty() && !absl::StrContains(series, label)) continue;
    sum += v;
    found = true;
  }
  return found ? sum : -1;
}

// A counter's growth between two scrapes; -1 if absent.
double Delta(const Metrics& before, const Metrics& after, const std::string& name, const std::string& label = "") {
  const double a = Sum(after, name, label), b = Sum(before, name, label);
  return a < 0 ? -1 : a - std::max(b, 0.0);
}

// What one registering client did in one phase.
struct Registrar {
  std::vector<std::pair<std::string, int64_t>> replies;  // MR name, wall ns the RegisterMr reply arrived
  std::vector<double> register_us;
  std::string failure;
};

// The RegisterMr records the watcher saw.
struct Seen {
  std::string name;
  int64_t event_ns = 0, arrival_ns = 0;
};

enum Phase { kIdle, kSingle, kLoaded, kPhases };
const char* const kPhaseNames[] = {"idle", "1 client registering", "clients registering"};

class Bench {
 public:
  Bench(std::string target, int clients, double seconds, std::string noop)
      : target_(std::move(target)), seconds_(seconds), noop_(std::move(noop)) {
    for (int i = 0; i < clients; ++i) registrars_.push_back(NewClient(target_));
    noop_client_ = NewClient(target_);
    watch_client_ = NewClient(target_);
  }

  // Each registering client's PD, and a warm-up of every connection: `pairs` registrations per client and
  // ten times as many no-ops.
  void Prepare(int pairs) {
    for (size_t i = 0; i < registrars_.size(); ++i) {
      v1::CreatePdRequest p;
      p.set_device("rxe0");
      p.set_label(absl::StrCat("contention-", i));
      absl::StatusOr<v1::ProtectionDomain> pd = registrars_[i]->CreatePd(p);
      if (!pd.ok()) Die("CreatePd: " + pd.status().ToString());
      pds_.push_back(pd->name());
      for (int k = 0; k < pairs; ++k) {
        absl::StatusOr<v1::MemoryRegion> m = registrars_[i]->RegisterMr(Request(i));
        if (!m.ok()) Die("RegisterMr (warm-up): " + m.status().ToString());
        if (absl::Status s = registrars_[i]->DeregisterMr(m->name()); !s.ok()) Die("DeregisterMr: " + s.ToString());
      }
    }
    for (int k = 0; k < 10 * pairs; ++k) {
      if (absl::Status s = Noop(); !s.ok()) Die(noop_ + " (warm-up): " + s.ToString());
    }
  }

  void StartWatcher() {
    watcher_ = std::thread([this] {
      uint64_t after = 0;
      while (!stop_watch_) {
        v1::WatchAuditRequest req;
        req.set_after_sequence(after);
        absl::Status s = watch_client_->WatchAudit(req, [&](const v1::AuditRecord& r) {
          const int64_t arrival = WallNs();
          after = r.sequence();
          if (r.method() == "RegisterMr" && r.code() == "OK") {
            seen_.push_back({r.resource(), r.time_unix_nanos(), arrival});
          }
          return !stop_watch_.load();
        });
        if (stop_watch_) break;
        if (s.code() == absl::StatusCode::kResourceExhausted) {
          ++cutoffs_;  // fell behind: watch again from the last record seen (rdmad replays what it retains)
          continue;
        }
        watch_error_ = s.ToString();
        break;
      }
    });
  }
  // After rdmad has ended its streams (its drain) or a last event arrived.
  void JoinWatcher() {
    stop_watch_ = true;
    watcher_.join();
    if (!watch_error_.empty()) Die("WatchAudit: " + watch_error_);
  }
  void StopWatcherSoon() { stop_watch_ = true; }

  // One phase: `registering` clients and, if `noop`, the no-op client, for seconds_.
  void Run(Phase phase, int registering, bool noop) {
    std::atomic<bool> go{false}, stop{false};
    std::vector<Registrar> results(registering);
    std::vector<double> noop_us;
    std::string noop_failure;
    std::vector<std::thread> threads;
    for (int i = 0; i < registering; ++i) {
      threads.emplace_back([&, i] {
        Registrar& r = results[i];
        const v1::RegisterMrRequest req = Request(i);
        while (!go) std::this_thread::yield();
        while (!stop) {
          const auto t = Clock::now();
          absl::StatusOr<v1::MemoryRegion> m = registrars_[i]->RegisterMr(req);
          const int64_t reply = WallNs();
          if (!m.ok()) {
            r.failure = "RegisterMr: " + m.status().ToString();
            return;
          }
          r.register_us.push_back(UsSince(t));
          r.replies.emplace_back(m->name(), reply);
          if (absl::Status s = registrars_[i]->DeregisterMr(m->name()); !s.ok()) {
            r.failure = "DeregisterMr: " + s.ToString();
            return;
          }
        }
      });
    }
    if (noop) {
      threads.emplace_back([&] {
        while (!go) std::this_thread::yield();
        while (!stop) {
          const auto t = Clock::now();
          if (absl::Status s = Noop(); !s.ok()) {
            noop_failure = noop_ + ": " + s.ToString();
            return;
          }
          noop_us.push_back(UsSince(t));
        }
      });
    }
    const auto start = Clock::now();
    go = true;
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds_));
    stop = true;
    for (auto& t : threads) t.join();
    wall_s_[phase] = UsSince(start) / 1e6;
    if (!noop_failure.empty()) Die(noop_failure);
    for (const Registrar& r : results) {
      if (!r.failure.empty()) Die(r.failure);
      for (const auto& [name, ns] : r.replies) replies_[name] = {ns, phase};
      registrations_[phase] += r.replies.size();
      register_us_[phase].insert(register_us_[phase].end(), r.register_us.begin(), r.register_us.end());
    }
    noop_us_[phase] = std::move(noop_us);
  }

  // Matches the watcher's records to the replies (after JoinWatcher).
  void MatchEvents() {
    for (const Seen& s : seen_) {
      auto it = replies_.find(s.name);
      if (it == replies_.end()) continue;  // a warm-up's
      const auto& [reply_ns, phase] = it->second;
      event_us_[phase].push_back((s.arrival_ns - s.event_ns) / 1e3);
      reply_to_event_us_[phase].push_back((s.arrival_ns - reply_ns) / 1e3);
      ++matched_[phase];
    }
  }

  absl::Status Noop() {
    if (noop_ == "Health") return noop_client_->Health();
    return noop_client_->ListPds().status();
  }

  const std::vector<double>& noop_us(Phase p) const { return noop_us_[p]; }
  const std::vector<double>& event_us(Phase p) const { return event_us_[p]; }
  const std::vector<double>& reply_to_event_us(Phase p) const { return reply_to_event_us_[p]; }
  const std::vector<double>& register_us(Phase p) const { return register_us_[p]; }
  double rate(Phase p) const { return wall_s_[p] > 0 ? registrations_[p] / wall_s_[p] : 0; }
  uint64_t registrations(Phase p) const { return registrations_[p]; }
  uint64_t matched(Phase p) const { return matched_[p]; }
  int cutoffs() const { return cutoffs_; }
  const std::string& noop() const { return noop_; }

 private:
  v1::RegisterMrRequest Request(size_t i) const {
    v1::RegisterMrRequest req;
    req.set_pd(pds_[i]);
    req.mutable_source()->mutable_anonymous()->set_size(4096);
    req.add_access(v1::LOCAL_WRITE);
    req.add_access(v1::REMOTE_READ);
    return req;
  }

  const std::string target_;
  const double seconds_;
  const std::string noop_;
  std::vector<std::unique_ptr<Client>> registrars_;
  std::unique_ptr<Client> noop_client_, watch_client_;
  std::vector<std::string> pds_;

  std::thread watcher_;
  std::atomic<bool> stop_watch_{false};
  std::vector<Seen> seen_;  // the watcher's until joined
  int cutoffs_ = 0;         // the watcher's until joined
  std::string watch_error_;

  std::unordered_map<std::string, std::pair<int64_t, Phase>> replies_;
  double wall_s_[kPhases] = {};
  uint64_t registrations_[kPhases] = {}, matched_[kPhases] = {};
  std::vector<double> noop_us_[kPhases], event_us_[kPhases], reply_to_event_us_[kPhases], register_us_[kPhases];
};

std::string Us(double us) {
  char buf[32];
  if (us >= 10000 || us <= -10000) std::snprintf(buf, sizeof buf, "%.1f ms", us / 1000);
  else if (us >= 100 || us <= -100) std::snprintf(buf, sizeof buf, "%.0f us", us);
  else std::snprintf(buf, sizeof buf, "%.1f us", us);
  return buf;
}
std::string Ratio(double a, double b) {
  if (b <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", a / b);
  return buf;
}
std::string Num(double v, const char* format = "%.2f") {
  if (v < 0) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}
std::string Json(double v) { return v < 0 ? "null" : Num(v, "%.3f"); }
std::string Json(const Summary& s) {
  return absl::StrCat("{\"n\":", s.n, ",\"p50\":", Num(s.p50, "%.1f"), ",\"p99\":", Num(s.p99, "%.1f"),
                      ",\"p999\":", Num(s.p999, "%.1f"), "}");
}
std::string JsonSigned(const Summary& s) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "{\"n\":%zu,\"p50\":%.1f,\"p99\":%.1f,\"p999\":%.1f}", s.n, s.p50, s.p99, s.p999);
  return buf;
}
std::string JsonRatio(const Summary& a, const Summary& b) {
  auto r = [](double x, double y) { return y > 0 ? Num(x / y, "%.3f") : std::string("null"); };
  return absl::StrCat("{\"p50\":", r(a.p50, b.p50), ",\"p99\":", r(a.p99, b.p99), ",\"p999\":", r(a.p999, b.p999),
                      "}");
}

void Row(const std::string& what, const Summary& s, const Summary* base) {
  std::printf("| %s | %zu | %s | %s | %s | %s | %s | %s |\n", what.c_str(), s.n, Us(s.p50).c_str(), Us(s.p99).c_str(),
              Us(s.p999).c_str(), base ? Ratio(s.p50, base->p50).c_str() : "",
              base ? Ratio(s.p99, base->p99).c_str() : "", base ? Ratio(s.p999, base->p999).c_str() : "");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"contention_bench: rdmad's no-op and MR event delivery while clients register"};
  double seconds = 5;
  int clients = 8;
  bool short_form = false;
  std::string noop = "ListPds", dir;
  app.add_option("--seconds", seconds, "length of each phase (idle, 1 client, loaded)")->check(CLI::PositiveNumber);
  app.add_option("--clients", clients, "registering clients in the loaded phase")->check(CLI::Range(1, 256));
  app.add_flag("--short", short_form, "the short form (as CI runs it): 1 s per phase, a shorter warm-up");
  app.add_option("--noop", noop, "the no-op RPC: ListPds (rdmad's own path) or Health (gRPC's health check)")
      ->check(CLI::IsMember({"ListPds", "Health"}));
  std::string log_level = "warning";
  app.add_option("--log-level", log_level, "rdmad's log level (its default, info, logs a line per registration)")
      ->check(CLI::IsMember({"debug", "info", "warning", "error"}));
  app.add_option("--dir", dir, "where the state store and the audit log go (default: a fresh directory in /tmp)");
  CLI11_PARSE(app, argc, argv);
  if (short_form) seconds = 1;

  rdmad::LogLevel level = rdmad::LogLevel::kWarning;
  rdmad::ParseLogLevel(log_level.c_str(), &level);
  rdmad::SetLogLevel(level);  // what rdmad's main does with the config's log_level
  rdmad::test::DaemonFixture rdmad;
  const std::string files = dir.empty() ? rdmad.dir().path() : dir;
  rdmad.config().state_file = files + "/state.db";
  rdmad.config().audit = files + "/audit.log";
  rdmad.config().log_level = log_level;
  const int metrics_port = FreePort();
  rdmad.config().metrics_listen = absl::StrCat("127.0.0.1:", metrics_port);
  if (absl::Status s = rdmad.Start(); !s.ok()) Die("rdmad did not start: " + s.ToString());

  std::printf("contention_bench: %d registering clients (RegisterMr 4 KiB anonymous + DeregisterMr), no-op %s, "
              "%.1f s per phase; rdmad in this process on the fake fabric, state store %s/state.db and audit log "
              "%s/audit.log (%s); %u CPUs, load average %s\n",
              clients, noop.c_str(), seconds, files.c_str(), files.c_str(), Filesystem(files).c_str(),
              std::thread::hardware_concurrency(), LoadAverage().c_str());
  std::fflush(stdout);
  Bench bench(rdmad.target(), clients, seconds, noop);
  bench.Prepare(short_form ? 3 : 20);
  bench.StartWatcher();

  const Metrics m0 = Scrape(metrics_port);
  bench.Run(kIdle, 0, true);
  const Metrics m1 = Scrape(metrics_port);
  bench.Run(kSingle, 1, false);
  const Metrics m2 = Scrape(metrics_port);
  bench.Run(kLoaded, clients, true);
  const Metrics m3 = Scrape(metrics_port);
  // The watcher ends when rdmad's drain ends its stream (or at its next record).
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the last records on their way
  bench.StopWatcherSoon();
  rdmad.Stop();
  bench.JoinWatcher();
  bench.MatchEvents();

  const Summary noop_idle = Summarize(bench.noop_us(kIdle)), noop_loaded = Summarize(bench.noop_us(kLoaded));
  const Summary ev1 = Summarize(bench.event_us(kSingle)), evk = Summarize(bench.event_us(kLoaded));
  const Summary re1 = Summarize(bench.reply_to_event_us(kSingle)), rek = Summarize(bench.reply_to_event_us(kLoaded));
  const Summary reg1 = Summarize(bench.register_us(kSingle)), regk = Summarize(bench.register_us(kLoaded));
  const std::string k = absl::StrCat(clients, " ", kPhaseNames[kLoaded]);

  std::printf("\n| figure | n | p50 | p99 | p999 | p50 vs baseline | p99 vs baseline | p999 vs baseline |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  Row("no-op " + noop + ", idle (baseline)", noop_idle, nullptr);
  Row("no-op " + noop + ", " + k, noop_loaded, &noop_idle);
  Row("MR event, its time -> watcher, 1 client registering (baseline)", ev1, nullptr);
  Row("MR event, its time -> watcher, " + k, evk, &ev1);
  Row("MR event, RegisterMr reply -> watcher, 1 client registering (baseline)", re1, nullptr);
  Row("MR event, RegisterMr reply -> watcher, " + k, rek, &re1);
  Row("RegisterMr 4 KiB, 1 client registering (baseline)", reg1, nullptr);
  Row("RegisterMr 4 KiB, " + k, regk, &reg1);

  // rdmad's own counters over the loaded phase.
  auto handoffs = [](const Metrics& before, const Metrics& after, const std::string& method) {
    const std::string label = absl::StrCat("method=\"", method, "\"");
    const double sum = Delta(before, after, "rdmad_rpc_thread_handoffs_sum", label);
    const double count = Delta(before, after, "rdmad_rpc_thread_handoffs_count", label);
    return sum < 0 || count <= 0 ? -1.0 : sum / count;
  };
  const double h_reg = handoffs(m2, m3, "RegisterMr"), h_dereg = handoffs(m2, m3, "DeregisterMr");
  const double h_noop = handoffs(m2, m3, noop), h_noop_idle = handoffs(m0, m1, noop);
  const double commits = Delta(m2, m3, "rdmad_state_commits_total");
  const double records = Delta(m2, m3, "rdmad_state_records_total");
  const double commits1 = Delta(m1, m2, "rdmad_state_commits_total");
  std::printf("\nthroughput: %.0f registrations/s with 1 client, %.0f with %d clients (%s); %s\n", bench.rate(kSingle),
              bench.rate(kLoaded), clients, Ratio(bench.rate(kLoaded), bench.rate(kSingle)).c_str(),
              "each registration is followed by its DeregisterMr");
  std::printf("MR events matched to their replies: %llu of %llu (1 client), %llu of %llu (%d clients); watch cut "
              "off and resumed: %d times\n",
              static_cast<unsigned long long>(bench.matched(kSingle)),
              static_cast<unsigned long long>(bench.registrations(kSingle)),
              static_cast<unsigned long long>(bench.matched(kLoaded)),
              static_cast<unsigned long long>(bench.registrations(kLoaded)), clients, bench.cutoffs());
  std::printf("rdmad_rpc_thread_handoffs, mean per call with %d clients: RegisterMr %s, DeregisterMr %s, %s %s "
              "(idle: %s)\n",
              clients, Num(h_reg).c_str(), Num(h_dereg).c_str(), noop.c_str(), Num(h_noop).c_str(),
              Num(h_noop_idle).c_str());
  const double regs_k = static_cast<double>(bench.registrations(kLoaded));
  std::printf("rdmad_state_commits_total: %s with %d clients (%s per RegisterMr + DeregisterMr pair), %s with 1 "
              "client; rdmad_state_records_total: %s with %d clients (%s per commit)\n",
              Num(commits, "%.0f").c_str(), clients, commits < 0 || regs_k == 0 ? "n/a" : Num(commits / regs_k).c_str(),
              Num(commits1, "%.0f").c_str(), Num(records, "%.0f").c_str(), clients,
              records < 0 || commits <= 0 ? "n/a" : Num(records / commits).c_str());

  std::printf(
      "{\"bench\":\"contention\",\"clients\":%d,\"seconds\":%.1f,\"noop\":\"%s\",\"noop_idle_us\":%s,"
      "\"noop_loaded_us\":%s,\"noop_ratio\":%s,\"event_single_us\":%s,\"event_loaded_us\":%s,\"event_ratio\":%s,"
      "\"reply_to_event_single_us\":%s,\"reply_to_event_loaded_us\":%s,\"register_single_us\":%s,"
      "\"register_loaded_us\":%s,\"register_ratio\":%s,\"registrations_per_s_single\":%.1f,"
      "\"registrations_per_s_loaded\":%.1f,\"watch_cutoffs\":%d,\"handoffs_loaded\":{\"RegisterMr\":%s,"
      "\"DeregisterMr\":%s,\"%s\":%s},\"state_commits_loaded\":%s,\"state_records_loaded\":%s}\n",
      clients, seconds, noop.c_str(), Json(noop_idle).c_str(), Json(noop_loaded).c_str(),
      JsonRatio(noop_loaded, noop_idle).c_str(), Json(ev1).c_str(), Json(evk).c_str(), JsonRatio(evk, ev1).c_str(),
      JsonSigned(re1).c_str(), JsonSigned(rek).c_str(), Json(reg1).c_str(), Json(regk).c_str(),
      JsonRatio(regk, reg1).c_str(), bench.rate(kSingle), bench.rate(kLoaded), bench.cutoffs(), Json(h_reg).c_str(),
      Json(h_dereg).c_str(), noop.c_str(), Json(h_noop).c_str(), Json(commits).c_str(), Json(records).c_str());
  return 0;
}
