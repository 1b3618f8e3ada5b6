// api_fuzzer: hostile input against a running rdmad. Random sequences of real RPCs with random and
// malformed fields (names of the wrong kind, of deleted objects, of other tenants; uint64 values near 2^64
// and negative as int64; unknown enum values; oversized private data), local mischief on the files rdmad
// maps (truncation, symlinks, FIFOs), and random private data on rdmad's rdma_cm data-plane listener
// (random bytes, and truncated or garbled real tokens from IssueConnectToken / IssueGrant).
//
// It checks the reply contract of docs/api.md on every reply:
//   - the code is one the API documents (OK, INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION, ALREADY_EXISTS,
//     OUT_OF_RANGE, RESOURCE_EXHAUSTED, ABORTED, PERMISSION_DENIED, UNIMPLEMENTED; DEADLINE_EXCEEDED and
//     UNAVAILABLE for Connect, DEADLINE_EXCEEDED for MigrateCmId); never UNKNOWN, INTERNAL, DATA_LOSS;
//   - a failure has a message, and grpc-status-details-bin holds an RpcStatus with the same code and message
//     and exactly one rdmad.v1.ErrorDetail; a detail's field starts the message; errno and its name go
//     together; a failed ReregisterMr says what survived (rereg_outcome);
//   - a malformed name is INVALID_ARGUMENT, a well-formed name of nothing (deleted, never made, another
//     tenant's) is NOT_FOUND; requests that break a documented rule are never OK; ranges stay in bounds;
//   - on the data plane: every refusal is rdmad's reject (magic RDRJ) with the reason PROTOCOL.md's table
//     gives for those bytes, never INTERNAL; only a live, unused token is accepted, exactly once;
//   - every object rdmad lists is one this process made (no leftovers of failed calls);
// then deletes everything it made, checks that rdmad holds nothing of it, and that rdmad is healthy.
//
// Usage: api_fuzzer [--target unix:PATH] [--seed N] [--iterations N] [--log FILE] [--device rxe0]
//                   [--rdma-addr 10.0.2.15] [--dp-port 7471] [--shm-dir /dev/shm] [--tag NAME]
//                   [--names-out FILE] [--names-in FILE] [--cleanup-only] [--no-cleanup] [--no-rdma]
//                   [--wire-garbage] [--receives N]
// --receives N: every data-plane client posts N receives (0: a client that never takes its key).
// --wire-garbage: also strings that are not valid UTF-8 and request bytes that do not parse. gRPC refuses
// those itself, before rdmad sees them (INTERNAL or UNIMPLEMENTED, no ErrorDetail): kept out of the CI form.
// --no-rdma: against an rdmad on a host without RDMA (a quick check of the plumbing): the rdma_cm, token and
// grant calls may answer UNAVAILABLE there (documented), and the data plane is skipped.
// The same seed replays the same sequence of requests, as long as rdmad answers the same way (a fresh rdmad
// with the same config). Every RPC is logged to --log (method, short request, code, message, time).
// Exit status: 0 no violation, 1 violations, 2 bad usage, 3 rdmad went away.
#include <arpa/inet.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "proto/wire/grant_message.h"
#include "proto/wire/handshake.h"
#include "rdmad/v1/rdmad.grpc.pb.h"
#include "tests/fuzz/dp_peer.h"

namespace rdmad::fuzz {
namespace {

using grpc::StatusCode;
using Clock = std::chrono::steady_clock;

// ------------------------------------------------------------------------------------------------------
// Options

struct Options {
  std::string target = "unix:/run/rdmad/rdmad.sock";
  uint64_t seed = 0;
  bool seed_given = false;
  uint64_t iterations = 500;
  std::string log_path = "api-fuzz.log";
  std::string device = "rxe0";
  std::string rdma_addr = "10.0.2.15";
  int dp_port = 7471;
  std::string shm_dir = "/dev/shm";
  std::string tag;
  std::string names_out;  // tenancy: append "kind name" of what this process made
  std::string names_in;   // tenancy: the other tenant's names (must all be NOT_FOUND here)
  bool cleanup_only = false;  // delete everything rdmad lists (an admin's cleanup), no fuzzing
  bool no_cleanup = false;    // leave what this process made (an admin cleans up after the tenants)
  bool no_rdma = false;  // a host without RDMA: rdma_cm calls answer UNAVAILABLE (documented), no data plane
  bool wire_garbage = false;  // also strings that are not UTF-8, and request bytes that are no protobuf
  int receives = -1;  // >= 0: every dial posts this many receives (0: a client that never takes its key)
};

const char* kUsage =
    "usage: api_fuzzer [--target unix:PATH] [--seed N] [--iterations N] [--log FILE] [--device DEV]\n"
    "                  [--rdma-addr ADDR] [--dp-port PORT] [--shm-dir DIR] [--tag NAME]\n"
    "                  [--names-out FILE] [--names-in FILE] [--cleanup-only] [--no-cleanup] [--no-rdma]\n"
    "                  [--wire-garbage] [--receives N]\n"
    "docs/dev/fuzzing.md describes every flag.\n";

// ------------------------------------------------------------------------------------------------------
// Randomness: one mt19937_64 from the seed; every draw goes through it (no distribution objects, whose
// results may differ between standard libraries).

class Rng {
 public:
  explicit Rng(uint64_t seed) : g_(seed) {}
  uint64_t U64() { return g_(); }
  uint64_t Below(uint64_t n) { return n == 0 ? 0 : g_() % n; }
  bool Chance(double p) { return static_cast<double>(g_() >> 11) * 0x1.0p-53 < p; }
  template <typename T>
  const T& Pick(const std::vector<T>& v) { return v[Below(v.size())]; }
  std::string Bytes(size_t n) {
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(g_() & 0xff);
    return s;
  }

 private:
  std::mt19937_64 g_;
};

// ------------------------------------------------------------------------------------------------------
// Helpers

int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Printable(const std::string& s, size_t max) {
  std::string out;
  for (size_t i = 0; i < s.size() && out.size() < max; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    }
  }
  if (out.size() >= max) out += "...(" + std::to_string(s.size()) + " bytes)";
  return out;
}

std::string Short(const google::protobuf::Message& m) { return Printable(m.ShortDebugString(), 400); }

const char* CodeName(StatusCode c) {
  switch (c) {
    case StatusCode::OK: return "OK";
    case StatusCode::CANCELLED: return "CANCELLED";
    case StatusCode::UNKNOWN: return "UNKNOWN";
    case StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case StatusCode::NOT_FOUND: return "NOT_FOUND";
    case StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case StatusCode::ABORTED: return "ABORTED";
    case StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case StatusCode::INTERNAL: return "INTERNAL";
    case StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case StatusCode::DATA_LOSS: return "DATA_LOSS";
    case StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "CODE?";
  }
}

// "pds/3" -> 3 for the canonical form only (as rdmad's rules.h defines a name); 0 if not.
uint64_t NameNumber(const std::string& name, const std::string& kind) {
  const std::string prefix = kind + "/";
  if (name.compare(0, prefix.size(), prefix) != 0 || name.size() == prefix.size()) return 0;
  const std::string digits = name.substr(prefix.size());
  if (digits[0] == '0' || digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 20) return 0;
  errno = 0;
  unsigned long long v = std::strtoull(digits.c_str(), nullptr, 10);
  if (errno == ERANGE) return 0;
  return v;
}

uint64_t BigEndian64(const std::string& s, size_t at) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  return v;
}

// ------------------------------------------------------------------------------------------------------
// The RPC log (every request, before it is sent, and its reply) and the violations.

class Report {
 public:
  bool Open(const std::string& path) {
    f_ = std::fopen(path.c_str(), "w");
    return f_ != nullptr;
  }
  void Line(const std::string& s) {
    std::lock_guard<std::mutex> l(mu_);
    if (f_ == nullptr) return;
    std::fputs(s.c_str(), f_);
    std::fputc('\n', f_);
    std::fflush(f_);
  }
  void Violation(uint64_t seq, const std::string& method, const std::string& what) {
    std::string line = "VIOLATION #" + std::to_string(seq) + " " + method + ": " + what;
    Line(line);
    std::lock_guard<std::mutex> l(mu_);
    ++violations_;
    if (violations_ <= 40) std::fprintf(stderr, "%s\n", line.c_str());
    if (violations_ == 40) std::fprintf(stderr, "(further violations only in the log)\n");
  }
  void Count(const std::string& method, StatusCode code) { Count(method, CodeName(code)); }
  void Count(const std::string& method, const std::string& outcome) {
    std::lock_guard<std::mutex> l(mu_);
    ++stats_[method][outcome];
  }
  int violations() {
    std::lock_guard<std::mutex> l(mu_);
    return violations_;
  }
  std::map<std::string, std::map<std::string, int>> stats() {
    std::lock_guard<std::mutex> l(mu_);
    return stats_;
  }

 private:
  std::mutex mu_;
  FILE* f_ = nullptr;
  int violations_ = 0;
  std::map<std::string, std::map<std::string, int>> stats_;
};

// What a reply may be, beyond the contract every reply keeps.
struct Expect {
  std::vector<StatusCode> one_of;     // non-empty: the code must be one of these
  std::vector<StatusCode> also;       // codes allowed for this call on top of the documented set
  std::string field;                  // with one_of: on failure, the detail's field must be this
  std::string why;                    // why one_of / never_ok (for the violation's text)
  bool never_ok = false;              // the request breaks a documented rule
  bool rereg_outcome = false;         // a failed ReregisterMr of an existing region says what survived
  static Expect Code(StatusCode c, const std::string& field, const std::string& why) {
    Expect e;
    e.one_of = {c};
    e.field = field;
    e.why = why;
    return e;
  }
  static Expect Fails(const std::string& why) {
    Expect e;
    e.never_ok = true;
    e.why = why;
    return e;
  }
};

const std::set<StatusCode> kDocumented = {
    StatusCode::OK,           StatusCode::INVALID_ARGUMENT,   StatusCode::NOT_FOUND,
    StatusCode::FAILED_PRECONDITION, StatusCode::ALREADY_EXISTS, StatusCode::OUT_OF_RANGE,
    StatusCode::RESOURCE_EXHAUSTED,  StatusCode::ABORTED,        StatusCode::PERMISSION_DENIED,
    StatusCode::UNIMPLEMENTED,
};

// docs/api.md: "codes follow the errno where verbs failed". A code outside the set above is still documented
// when the detail names the failed call and its errno and the code is that errno's (ETIMEDOUT ->
// DEADLINE_EXCEEDED: ibv_modify_qp towards a GID nobody answers for); never UNKNOWN, INTERNAL or DATA_LOSS.
bool FollowsErrno(const grpc::Status& s) {
  const StatusCode code = s.error_code();
  if (code == StatusCode::UNKNOWN || code == StatusCode::INTERNAL || code == StatusCode::DATA_LOSS) return false;
  v1::RpcStatus rpc;
  v1::ErrorDetail d;
  if (!rpc.ParseFromString(s.error_details()) || rpc.details_size() != 1 || !rpc.details(0).UnpackTo(&d)) return false;
  return d.errno_value() != 0 && !d.verbs_call().empty() &&
         static_cast<int>(absl::ErrnoToStatusCode(d.errno_value())) == static_cast<int>(code);
}

// Checks one reply against the contract; reports violations. Thread-safe (Report is).
void CheckReply(Report* report, uint64_t seq, const std::string& method, const grpc::Status& s, const Expect& e) {
  const StatusCode code = s.error_code();
  const bool allowed =
      kDocumented.count(code) != 0 || std::count(e.also.begin(), e.also.end(), code) != 0 || FollowsErrno(s);
  if (!allowed) {
    report->Violation(seq, method, std::string("reply ") + CodeName(code) + " is not a documented status for " + method +
                                       ": " + Printable(s.error_message(), 300));
  }
  if (!e.one_of.empty() && std::count(e.one_of.begin(), e.one_of.end(), code) == 0) {
    std::string want;
    for (StatusCode c : e.one_of) want += std::string(want.empty() ? "" : " or ") + CodeName(c);
    report->Violation(seq, method, std::string("expected ") + want + " (" + e.why + "), got " + CodeName(code) + ": " +
                                       Printable(s.error_message(), 300));
  }
  if (e.never_ok && s.ok()) report->Violation(seq, method, "accepted a request that must fail: " + e.why);
  if (s.ok()) return;
  // A deadline or a cancellation may be the client's own (gRPC then has no detail); the code checks above
  // decide whether it is allowed at all.
  const bool client_side_possible = code == StatusCode::DEADLINE_EXCEEDED || code == StatusCode::CANCELLED;
  if (s.error_details().empty()) {
    if (!client_side_possible) {
      report->Violation(seq, method, std::string(CodeName(code)) +
                                         " without rdmad's ErrorDetail in grpc-status-details-bin: " +
                                         Printable(s.error_message(), 300));
    }
    return;
  }
  if (s.error_message().empty()) report->Violation(seq, method, std::string(CodeName(code)) + " with an empty message");
  v1::RpcStatus rpc;
  if (!rpc.ParseFromString(s.error_details())) {
    report->Violation(seq, method, "grpc-status-details-bin does not parse as RpcStatus");
    return;
  }
  if (rpc.code() != static_cast<int>(code)) {
    report->Violation(seq, method, "RpcStatus.code " + std::to_string(rpc.code()) + " differs from the status code " +
                                       std::to_string(static_cast<int>(code)));
  }
  if (rpc.message() != s.error_message()) report->Violation(seq, method, "RpcStatus.message differs from the status message");
  if (rpc.details_size() != 1) {
    report->Violation(seq, method, "RpcStatus has " + std::to_string(rpc.details_size()) + " details, not one ErrorDetail");
    return;
  }
  v1::ErrorDetail d;
  if (!rpc.details(0).Is<v1::ErrorDetail>() || !rpc.details(0).UnpackTo(&d)) {
    report->Violation(seq, method, "the detail is not an rdmad.v1.ErrorDetail: " + rpc.details(0).type_url());
    return;
  }
  if (!d.field().empty() && s.error_message().compare(0, d.field().size() + 2, d.field() + ": ") != 0) {
    report->Violation(seq, method, "the message does not start with the field at fault '" + d.field() +
                                       "': " + Printable(s.error_message(), 200));
  }
  if ((d.errno_value() != 0) != !d.errno_name().empty()) {
    report->Violation(seq, method, "errno_value " + std::to_string(d.errno_value()) + " with errno_name '" +
                                       d.errno_name() + "'");
  }
  // An errno comes with the call that failed, except for rdmad's own "in use" refusals (docs/api.md:
  // FAILED_PRECONDITION with errno EBUSY, no call).
  if (d.errno_value() != 0 && d.verbs_call().empty() &&
      !(d.errno_value() == EBUSY && code == StatusCode::FAILED_PRECONDITION)) {
    report->Violation(seq, method, "errno " + d.errno_name() + " without the call that failed");
  }
  if (e.rereg_outcome && d.rereg_outcome() != v1::OUTCOME_OLD_MR_VALID &&
      d.rereg_outcome() != v1::OUTCOME_MR_UNUSABLE) {
    report->Violation(seq, method, std::string("a failed ReregisterMr (") + CodeName(code) +
                                       ") without rereg_outcome: " + Printable(s.error_message(), 200));
  }
  if (method != "ReregisterMr" && d.rereg_outcome() != v1::REREG_OUTCOME_UNSPECIFIED) {
    report->Violation(seq, method, "rereg_outcome set outside ReregisterMr");
  }
  // (The field is the name's for the name's answers; a quota refusal that comes first names none.)
  if (!e.one_of.empty() && !e.field.empty() && std::count(e.one_of.begin(), e.one_of.end(), code) != 0 &&
      (code == StatusCode::NOT_FOUND || code == StatusCode::INVALID_ARGUMENT) && d.field() != e.field) {
    report->Violation(seq, method, "the detail names field '" + d.field() + "', expected '" + e.field + "' (" + e.why + ")");
  }
}

// The calls that need rdma_cm (UNAVAILABLE on a host without it).
const std::set<std::string> kCmMethods = {
    "CreateChannel", "GetChannel", "ListChannels", "DeleteChannel", "CreateCmId", "GetCmId", "ListCmIds",
    "Listen", "Connect", "Accept", "Reject", "Disconnect", "DeleteCmId", "MigrateCmId", "WatchEvents",
    "IssueConnectToken", "IssueGrant", "IssueGrants"};

// The calls that reserve a tenant's quota.
const std::set<std::string> kCreations = {"CreatePd",   "RegisterMr",        "ReregisterMr", "CreateQp",
                                          "AllocMw",    "CreateChannel",     "CreateCmId",   "Connect",
                                          "Accept",     "IssueConnectToken", "IssueGrant",   "IssueGrants"};

// ------------------------------------------------------------------------------------------------------
// The model: what this process made, as far as it knows.

enum class NameClass { kLive, kDead, kNever, kMalformed, kOtherKind, kForeign, kAmbiguous };
struct Named {
  std::string name;
  NameClass cls = NameClass::kLive;
};

struct PdM {};
struct MrM {
  std::string pd;
  uint64_t length = 0;
  std::set<int> access;
};
struct QpM {
  std::string pd;
  uint32_t qpn = 0;
  std::string gid;
  bool rts = false;
  bool cm = false;  // the QP of a CM id (rdma_cm drives it)
};
struct MwM {
  std::string pd;
  int type = 1;
  bool bound = false;
};
struct CmIdM {
  std::string pd;
  int state = v1::CM_IDLE;
  uint32_t listen_port = 0;
  bool incoming = false;  // a connect request on one of our listeners
  bool connecting = false;  // a Connect of ours is in flight on it
};
struct GrantM {
  std::string mr;
  bool ended = false;
  bool maybe_ended = false;  // a removal with revoke_grants ran on its region, whatever its answer
};
struct TokenM {
  std::string bytes;  // 32
  bool grant = false;
  std::string pd;     // connect tokens
  std::string grant_name;
  int64_t expire_ns = 0;     // the token's own expiry (a grant's: its lease at issue, at most an hour)
  int64_t lease_end_ns = 0;  // a grant's lease as renewals moved it (the grant ends then)
  bool presented = false;  // its exact bytes went to the listener (redeemed, or refused)
  bool maybe_presented = false;  // a Connect of ours carried it, or a dial whose answer is not known yet
  bool dead = false;             // refused as revoked or expired: so it stays
  bool accepted = false;
};
struct FileM {
  std::string path;
  uint64_t size = 0;
};

struct Model {
  std::map<std::string, PdM> pds;
  std::map<std::string, MrM> mrs;
  std::map<std::string, QpM> qps;
  std::map<std::string, MwM> mws;
  std::map<std::string, int> channels;
  std::map<std::string, CmIdM> cmids;
  std::map<std::string, GrantM> grants;
  std::map<std::string, TokenM> tokens;  // by token name
  std::map<std::string, std::vector<std::string>> dead;      // kind -> names that existed
  std::map<std::string, std::vector<std::string>> foreign;   // kind -> the other tenant's names
  std::set<std::string> seen;  // every name rdmad ever gave us (names are never reused)
  std::set<std::string> ended_grants;  // grants known to have ended
};

template <typename M>
std::vector<std::string> Keys(const M& m) {
  std::vector<std::string> out;
  for (const auto& kv : m) out.push_back(kv.first);
  return out;
}

// Bounds of the live mix (per kind).
constexpr size_t kMaxPds = 4, kMaxMrs = 12, kMaxQps = 8, kMaxMws = 10, kMaxChannels = 3, kMaxCmIds = 8,
                 kMaxGrants = 10, kMaxPeers = 4, kMaxBackground = 3;

// ------------------------------------------------------------------------------------------------------
// The fuzzer

class Fuzzer {
 public:
  Fuzzer(const Options& o, Report* report)
      : o_(o), report_(report), rng_(o.seed),
        channel_(grpc::CreateChannel(o.target, grpc::InsecureChannelCredentials())),
        devices_(v1::Devices::NewStub(channel_)),
        pds_(v1::ProtectionDomains::NewStub(channel_)),
        mrs_(v1::MemoryRegions::NewStub(channel_)),
        qps_(v1::QueuePairs::NewStub(channel_)),
        mws_(v1::MemoryWindows::NewStub(channel_)),
        chans_(v1::EventChannels::NewStub(channel_)),
        ids_(v1::CmIds::NewStub(channel_)),
        tokens_(v1::ConnectTokens::NewStub(channel_)),
        grants_(v1::Grants::NewStub(channel_)),
        health_(grpc::health::v1::Health::NewStub(channel_)) {}

  int Run();

 private:
  // ---- RPC plumbing
  template <typename Req, typename Resp, typename Fn>
  grpc::Status Rpc(const std::string& method, const Req& req, Resp* resp, Fn fn, Expect e = Expect(),
                   int deadline_ms = 20000) {
    if (o_.no_rdma && kCmMethods.count(method)) {
      e.one_of.clear();
      e.also.push_back(StatusCode::UNAVAILABLE);
    }
    // A tenant's quota is checked before the names (alike for every name: no hint), so a creation may be
    // RESOURCE_EXHAUSTED whatever else is wrong.
    if (!e.one_of.empty() && kCreations.count(method)) e.one_of.push_back(StatusCode::RESOURCE_EXHAUSTED);
    const uint64_t seq = ++seq_;
    report_->Line(std::to_string(seq) + " " + method + " {" + Short(req) + "}");
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(deadline_ms));
    const auto t0 = Clock::now();
    grpc::Status s = fn(&ctx, req, resp);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
    report_->Line(std::to_string(seq) + " -> " + CodeName(s.error_code()) +
                  (s.ok() ? "" : " " + Printable(s.error_message(), 300)) + " (" + std::to_string(ms) + " ms)");
    report_->Count(method, s.error_code());
    CheckReply(report_, seq, method, s, e);
    if (s.error_code() == StatusCode::UNAVAILABLE && method != "Connect") CheckAlive(seq, method);
    return s;
  }
#define RDMAD_FUZZ_CALL(stub, M) [this](grpc::ClientContext* c, const auto& q, auto* r) { return stub->M(c, q, r); }

  void CheckAlive(uint64_t seq, const std::string& method);
  bool Healthy(std::string* why);
  void Violation(const std::string& what) { report_->Violation(seq_, "-", what); }
  void Note(const std::string& what) { report_->Line("# " + what); }

  // ---- names and values
  std::vector<std::string> Live(const std::string& kind);
  Named NameArg(const std::string& kind, double p_live = 0.75);
  Named DeviceArg();
  Expect ForName(const Named& n, const std::string& field = "name");
  // A name in a request with other fields: exactly ForName's answer if every other field is valid; otherwise
  // only never OK (rdmad may refuse another field first).
  Expect Composite(const Named& n, const std::string& field, bool others_valid);
  uint64_t HostileU64();
  uint32_t HostileU32();
  int32_t HostileEnum();
  std::string Label();
  std::string Principal();
  void AccessList(google::protobuf::RepeatedField<int>* out, bool for_mr, bool* bad);
  bool FillSource(v1::MemorySource* src, uint64_t* length, bool* bad, std::string* why);
  std::string PathArg(const FileM** file);
  std::string HostileAddress();
  void Created(const std::string& kind, const std::string& name);
  void Gone(const std::string& kind, const std::string& name);
  void GrantsMayEnd(const std::string& mr, const std::string& pd);

  // ---- operations
  void Step();
  void OpListDevices();
  void OpGetDevice();
  void OpListKernelIds();
  void OpCreatePd();
  void OpGetPd();
  void OpListPds();
  void OpDeletePd(bool cleanup = false);
  void OpRegisterMr();
  void OpGetMr();
  void OpListMrs();
  void OpReregisterMr();
  void OpDeregisterMr();
  void OpCreateQp();
  void OpGetQp();
  void OpConnectQp();
  void OpDeleteQp();
  void OpAllocMw();
  void OpGetMw();
  void OpListMws();
  void OpBindMw();
  void OpInvalidateMw();
  void OpDeallocMw();
  void OpCreateChannel();
  void OpGetChannel();
  void OpDeleteChannel();
  void OpCreateCmId();
  void OpGetCmId();
  void OpListCmIds();
  void OpListen();
  void OpConnect();
  void OpAcceptOrReject(bool accept);
  void OpDisconnect();
  void OpDeleteCmId();
  void OpMigrate();
  void OpWatchEvents();
  void OpWatchGrants();
  void OpIssueToken();
  void OpIssueGrant();
  void OpIssueGrants();
  void OpGetGrant();
  void OpListGrants();
  void OpRenewGrant();
  void OpRevokeGrant();
  void OpDial();
  void OpClosePeer();
  void OpFileMischief();
  void OpForeign();
  void OpWireGarbage();
  void OpBurst();

  // ---- the data plane
  struct DialPlan {
    std::string data;
    std::string what;                 // for the log
    int port = 0;
    bool to_listener = true;          // rdmad's data-plane listener (else a listener of ours)
    std::set<uint16_t> reasons;       // acceptable reject reasons
    bool may_establish = false;
    bool must_establish = false;
    std::string token;                // the token name whose exact bytes are presented
    std::string grant;                // its grant, for the key message
    int receives = 2;
  };
  DialPlan PlanDial();
  void PlanFromBytes(DialPlan* p);

  // ---- bookkeeping
  void Reconcile();
  void ReadForeign();
  void Background(std::function<std::function<void()>()> work, bool dial = false);
  void SettleDials();
  void DrainBackground(bool wait);
  void MakeFiles();
  void RemoveFiles();
  void Cleanup();
  void CleanupAll();  // --cleanup-only

  const Options o_;
  Report* const report_;
  Rng rng_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Devices::Stub> devices_;
  std::unique_ptr<v1::ProtectionDomains::Stub> pds_;
  std::unique_ptr<v1::MemoryRegions::Stub> mrs_;
  std::unique_ptr<v1::QueuePairs::Stub> qps_;
  std::unique_ptr<v1::MemoryWindows::Stub> mws_;
  std::unique_ptr<v1::EventChannels::Stub> chans_;
  std::unique_ptr<v1::CmIds::Stub> ids_;
  std::unique_ptr<v1::ConnectTokens::Stub> tokens_;
  std::unique_ptr<v1::Grants::Stub> grants_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;

  std::atomic<uint64_t> seq_{0};
  std::atomic<bool> gone_{false};
  uint64_t iteration_ = 0;
  Model m_;
  std::vector<FileM> files_;
  std::vector<std::string> hostile_paths_;
  std::vector<std::shared_ptr<DpPeer>> peers_;
  struct Pending {
    std::future<std::function<void()>> result;
    bool dial = false;  // a data-plane dial (its expectation depends on the token's PD, region and grant)
  };
  std::vector<Pending> background_;
  std::vector<std::string> worker_channels_;
  std::set<uint32_t> listen_ports_;
  FILE* names_out_ = nullptr;
  bool adopt_ = false;  // --cleanup-only: what rdmad lists is taken over, not a leftover
};

// ------------------------------------------------------------------------------------------------------
// Plumbing

bool Fuzzer::Healthy(std::string* why) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::health::v1::HealthCheckRequest req;
  grpc::health::v1::HealthCheckResponse resp;
  grpc::Status s = health_->Check(&ctx, req, &resp);
  if (!s.ok()) {
    *why = std::string(CodeName(s.error_code())) + " " + s.error_message();
    return false;
  }
  if (resp.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    *why = "status " + std::to_string(resp.status());
    return false;
  }
  return true;
}

void Fuzzer::CheckAlive(uint64_t seq, const std::string& method) {
  std::string why;
  if (Healthy(&why)) return;
  report_->Violation(seq, method, "rdmad is gone (health check: " + why + ")");
  gone_ = true;
}

std::vector<std::string> Fuzzer::Live(const std::string& kind) {
  if (kind == "pds") return Keys(m_.pds);
  if (kind == "mrs") return Keys(m_.mrs);
  if (kind == "qps") return Keys(m_.qps);
  if (kind == "mws") return Keys(m_.mws);
  if (kind == "channels") return Keys(m_.channels);
  if (kind == "cmids") return Keys(m_.cmids);
  if (kind == "grants") return Keys(m_.grants);
  return {};
}

const std::vector<std::string> kKinds = {"pds", "mrs", "qps", "mws", "channels", "cmids", "grants"};

Named Fuzzer::NameArg(const std::string& kind, double p_live) {
  Named n;
  std::vector<std::string> live = Live(kind);
  if (!live.empty() && rng_.Chance(p_live)) {
    n.name = rng_.Pick(live);
    return n;
  }
  const auto& foreign = m_.foreign[kind];
  if (!foreign.empty() && rng_.Chance(0.4)) {
    n.name = rng_.Pick(foreign);
    n.cls = NameClass::kForeign;
    return n;
  }
  const auto& dead = m_.dead[kind];
  switch (rng_.Below(4)) {
    case 0:
      if (!dead.empty()) {
        n.name = rng_.Pick(dead);
        n.cls = NameClass::kDead;
        return n;
      }
      [[fallthrough]];
    case 1: {
      static const std::vector<std::string> tails = {"18446744073709551615", "4294967296", "9223372036854775808",
                                                     "4294967295", "999999"};
      n.name = kind + "/" + (rng_.Chance(0.5) ? rng_.Pick(tails) : std::to_string(1000000 + rng_.Below(1000000)));
      n.cls = NameClass::kNever;
      return n;
    }
    case 2: {
      std::string other = rng_.Pick(kKinds);
      std::vector<std::string> names = Live(other);
      if (other != kind && !names.empty()) {
        n.name = rng_.Pick(names);
        n.cls = NameClass::kOtherKind;
        return n;
      }
      [[fallthrough]];
    }
    default: {
      std::string up = kind;
      for (auto& c : up) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      const std::vector<std::string> bad = {
          "", kind, kind + "/", kind + "/0", kind + "/01", kind + "/-1", kind + "/+1", kind + "/1x", kind + "/ 1",
          " " + kind + "/1", kind + "/1 ", up + "/1", kind + "//1", "/" + kind + "/1", kind + "/1/2", kind + "/0x1",
          kind + "/18446744073709551616", kind + "/99999999999999999999999", kind + "/\xd9\xa1",
          kind + "/1" + std::string(1, '\0'), kind + "/" + std::string(3000, '9'), std::string(70000, 'a'),
          "../" + kind + "/1", kind + "\n/1", "%s%s%n%n", kind + "/1;", "devices/" + o_.device, kind + "/-9223372036854775808",
          kind + "/\xef\xbc\x91",  // fullwidth digit one
      };
      n.name = rng_.Pick(bad);
      n.cls = NameClass::kMalformed;
      return n;
    }
  }
}

Named Fuzzer::DeviceArg() {
  Named n;
  if (rng_.Chance(0.8)) {
    n.name = rng_.Chance(0.5) ? o_.device : "devices/" + o_.device;
    return n;
  }
  const std::vector<std::string> bad = {"", "devices/", "devices/rxe9", "mlx5_0", "devices/" + o_.device + "/",
                                        o_.device + " ", "DEVICES/" + o_.device, "devices//" + o_.device,
                                        std::string(5000, 'r'), "pds/1", "devices/" + o_.device + std::string(1, '\0'),
                                        "../" + o_.device, "devices/%n%n"};
  n.name = rng_.Pick(bad);
  n.cls = NameClass::kAmbiguous;
  return n;
}

// What a call whose only argument is this name must answer (docs/api.md: malformed -> INVALID_ARGUMENT,
// well-formed but nothing -> NOT_FOUND; another tenant's resource is nothing).
Expect Fuzzer::ForName(const Named& n, const std::string& field) {
  switch (n.cls) {
    case NameClass::kLive: return Expect();
    case NameClass::kDead: return Expect::Code(StatusCode::NOT_FOUND, field, "a deleted name");
    case NameClass::kNever: return Expect::Code(StatusCode::NOT_FOUND, field, "a well-formed name of nothing");
    case NameClass::kForeign: return Expect::Code(StatusCode::NOT_FOUND, field, "another tenant's name");
    case NameClass::kMalformed:
      return Expect::Code(StatusCode::INVALID_ARGUMENT, field, "a malformed name");
    case NameClass::kOtherKind: return Expect::Code(StatusCode::INVALID_ARGUMENT, field, "a name of another kind");
    case NameClass::kAmbiguous: {
      Expect e;
      e.one_of = {StatusCode::INVALID_ARGUMENT, StatusCode::NOT_FOUND};
      e.why = "no such device";
      return e;
    }
  }
  return Expect();
}

Expect Fuzzer::Composite(const Named& n, const std::string& field, bool others_valid) {
  if (n.cls == NameClass::kLive) return Expect();
  if (others_valid) return ForName(n, field);
  Expect e = ForName(n, field);
  e.one_of.clear();
  e.never_ok = true;
  e.why = field + " names nothing of ours";
  return e;
}

uint64_t Fuzzer::HostileU64() {
  static const std::vector<uint64_t> v = {
      0, 1, 2, 4095, 4096, 4097, 65536, 1ull << 20, (1ull << 20) + 1, 1ull << 31, 1ull << 32, (1ull << 32) - 1,
      (1ull << 32) + 4096, 1ull << 40, (1ull << 63) - 1, 1ull << 63, ~0ull, ~0ull - 4095, ~0ull - 1,
      static_cast<uint64_t>(-4096), static_cast<uint64_t>(INT64_MIN), static_cast<uint64_t>(-1) - 8191};
  if (rng_.Chance(0.75)) return rng_.Pick(v);
  return rng_.U64() >> rng_.Below(64);
}

uint32_t HostileU32Of(Rng& r) {
  static const std::vector<uint32_t> v = {0, 1, 2, 255, 256, 0xffffff, 0x1000000, 0x7fffffff, 0x80000000, 0xffffffff,
                                          0xfffffffe, 65535, 65536};
  if (r.Chance(0.75)) return r.Pick(v);
  return static_cast<uint32_t>(r.U64());
}
uint32_t Fuzzer::HostileU32() { return HostileU32Of(rng_); }

int32_t Fuzzer::HostileEnum() {
  static const std::vector<int32_t> v = {0, -1, 6, 7, 99, INT32_MIN, INT32_MAX, 3, 2, 1};
  return rng_.Pick(v);
}

std::string Fuzzer::Label() {
  switch (rng_.Below(10)) {
    case 0: return "";
    case 1: return std::string(128, 'L');
    case 2: return std::string(129 + rng_.Below(4000), 'L');
    case 3: return "\xe2\x98\x83 snow\n\t" + std::string(1, '\0') + "%s%n";
    case 4:
      if (o_.wire_garbage) return std::string(42, '\xc3') + "\xa9";  // not UTF-8
      return "\xc3\xa9t\xc3\xa9 \xf0\x9f\x94\xa5";
    default: return "fuzz-" + o_.tag + "-" + std::to_string(iteration_);
  }
}

std::string Fuzzer::Principal() {
  switch (rng_.Below(10)) {
    case 0: return "";
    case 1: return std::string(256, 'p');
    case 2: return std::string(257 + rng_.Below(1000), 'p');
    case 3: return "unix:uid:0";
    case 4: return std::string("p") + std::string(1, '\0') + "q";
    default: return "fuzz-client-" + std::to_string(rng_.Below(5));
  }
}

// Access flags. *bad: the list breaks a documented rule by itself (an unknown value; REMOTE_WRITE or
// REMOTE_ATOMIC without LOCAL_WRITE on a region).
void Fuzzer::AccessList(google::protobuf::RepeatedField<int>* out, bool for_mr, bool* bad) {
  *bad = false;
  std::set<int> have;
  if (rng_.Chance(0.08)) {
    int n = 1 + static_cast<int>(rng_.Below(3));
    for (int i = 0; i < n; ++i) {
      int v = HostileEnum();
      out->Add(v);
      have.insert(v);
      if (v < 1 || v > 5) *bad = true;
    }
  } else if (for_mr) {
    if (rng_.Chance(0.7)) out->Add(v1::LOCAL_WRITE), have.insert(v1::LOCAL_WRITE);
    if (rng_.Chance(0.6)) out->Add(v1::REMOTE_READ), have.insert(v1::REMOTE_READ);
    if (rng_.Chance(0.3)) out->Add(v1::REMOTE_WRITE), have.insert(v1::REMOTE_WRITE);
    if (rng_.Chance(0.1)) out->Add(v1::REMOTE_ATOMIC), have.insert(v1::REMOTE_ATOMIC);
    if (rng_.Chance(0.65)) out->Add(v1::MW_BIND), have.insert(v1::MW_BIND);
    if (rng_.Chance(0.05) && !out->empty()) out->Add(out->Get(0));  // a duplicate
  } else {
    if (rng_.Chance(0.85)) out->Add(v1::REMOTE_READ), have.insert(v1::REMOTE_READ);
    if (rng_.Chance(0.3)) out->Add(v1::REMOTE_WRITE), have.insert(v1::REMOTE_WRITE);
    if (rng_.Chance(0.08)) out->Add(v1::REMOTE_ATOMIC), have.insert(v1::REMOTE_ATOMIC);
    if (rng_.Chance(0.04)) out->Add(v1::LOCAL_WRITE), have.insert(v1::LOCAL_WRITE);
    if (rng_.Chance(0.04)) out->Add(v1::MW_BIND), have.insert(v1::MW_BIND);
  }
  if (for_mr && (have.count(v1::REMOTE_WRITE) || have.count(v1::REMOTE_ATOMIC)) && !have.count(v1::LOCAL_WRITE)) {
    *bad = true;
  }
}

std::string Fuzzer::PathArg(const FileM** file) {
  *file = nullptr;
  if (!files_.empty() && rng_.Chance(0.75)) {
    const FileM& f = files_[rng_.Below(files_.size())];
    *file = &f;
    switch (rng_.Below(8)) {
      case 0: return o_.shm_dir + "/./" + f.path.substr(f.path.rfind('/') + 1);
      case 1: return "/" + f.path;  // "//dev/shm/..."
      default: return f.path;
    }
  }
  return rng_.Pick(hostile_paths_);
}

// Fills a memory source. *length: the region's length if rdmad accepts it. *bad: it breaks a documented
// rule (why says which). Returns false if no source was set.
bool Fuzzer::FillSource(v1::MemorySource* src, uint64_t* length, bool* bad, std::string* why) {
  *bad = false;
  const uint64_t r = rng_.Below(100);
  if (r < 6) {
    *bad = true;
    *why = "no source";
    return false;
  }
  if (r < 52) {
    auto* a = src->mutable_anonymous();
    uint64_t size = rng_.Chance(0.75) ? (1 + rng_.Below(4)) * 4096 - (rng_.Chance(0.2) ? rng_.Below(4095) : 0)
                                      : HostileU64();
    a->set_size(size);
    a->set_huge_pages(rng_.Chance(0.06));
    *length = size;
    if (size == 0) *bad = true, *why = "size 0";
    if (size > (1ull << 20)) *bad = true, *why = "size over max_mr_bytes (1 MiB)";
    return true;
  }
  auto* f = src->mutable_file();
  const FileM* file = nullptr;
  std::string path = PathArg(&file);
  f->set_path(path);
  uint64_t size = file ? file->size : 0;
  uint64_t offset = (file && rng_.Chance(0.75)) ? rng_.Below(size + 1) : HostileU64();
  uint64_t len = (file && rng_.Chance(0.75) && offset < size) ? 1 + rng_.Below(size - offset) : HostileU64();
  f->set_offset(offset);
  f->set_length(len);
  *length = len;
  if (file == nullptr) {
    *bad = true;
    *why = "a file rdmad must refuse (" + Printable(path, 80) + ")";
  } else if (len == 0) {
    *bad = true, *why = "length 0";
  } else if (offset > size || len > size - offset) {
    *bad = true, *why = "offset " + std::to_string(offset) + " + length " + std::to_string(len) + " passes the end (" +
                        std::to_string(size) + " bytes)";
  }
  return true;
}

std::string Fuzzer::HostileAddress() {
  const std::vector<std::string> v = {"",        "0.0.0.0",        "127.0.0.1",   "::",     "::1",
                                      "1.2.3.4", "999.1.1.1",      "10.0.2.15:1", "garbage", "fe80::1%eth0",
                                      "10.0.2",  std::string(300, '1'), "10.0.2.15" + std::string(1, '\0') + "x",
                                      "::ffff:10.0.2.15", "255.255.255.255", "224.0.0.1"};
  return rng_.Pick(v);
}

void Fuzzer::Created(const std::string& kind, const std::string& name) {
  if (name.empty() || NameNumber(name, kind) == 0) {
    Violation("rdmad returned the name '" + Printable(name, 100) + "' for a new " + kind + " object");
  }
  if (!m_.seen.insert(name).second) Violation("rdmad reused the name " + name);
  if (names_out_ != nullptr) {
    std::fprintf(names_out_, "%s %s\n", kind.c_str(), name.c_str());
    std::fflush(names_out_);
  }
}

// DeregisterMr, ReregisterMr and DeletePd with revoke_grants revoke the grants first and they "stay ended
// whatever the outcome" (api.md), unless the request was refused by the checks made before the revocation
// (api.md; docs/dev/fuzzing.md): the callers leave those grants alone.
void Fuzzer::GrantsMayEnd(const std::string& mr, const std::string& pd) {
  for (auto& [g, gm] : m_.grants) {
    if ((!mr.empty() && gm.mr == mr) || (!pd.empty() && m_.mrs.count(gm.mr) && m_.mrs[gm.mr].pd == pd)) {
      gm.maybe_ended = true;
    }
  }
}

void Fuzzer::Gone(const std::string& kind, const std::string& name) {
  bool had = false;
  if (kind == "pds") had = m_.pds.erase(name);
  if (kind == "mrs") had = m_.mrs.erase(name);
  if (kind == "qps") had = m_.qps.erase(name);
  if (kind == "mws") had = m_.mws.erase(name);
  if (kind == "channels") had = m_.channels.erase(name);
  if (kind == "cmids") had = m_.cmids.erase(name);
  if (kind == "grants") had = m_.grants.erase(name);
  if (had && kind != "grants") m_.dead[kind].push_back(name);
  if (had && kind == "grants") m_.ended_grants.insert(name);  // no longer listed as live
}

// ------------------------------------------------------------------------------------------------------
// Operations

void Fuzzer::OpListDevices() {
  v1::ListDevicesResponse resp;
  grpc::Status s = Rpc("ListDevices", v1::ListDevicesRequest(), &resp, RDMAD_FUZZ_CALL(devices_, ListDevices));
  if (s.ok() && !o_.no_rdma) {
    bool found = false;
    for (const auto& d : resp.devices()) found |= d.name() == "devices/" + o_.device;
    if (!found) Violation("ListDevices does not list devices/" + o_.device);
  }
}

void Fuzzer::OpGetDevice() {
  Named n = DeviceArg();
  v1::GetDeviceRequest req;
  req.set_name(n.name);
  v1::Device resp;
  Rpc("GetDevice", req, &resp, RDMAD_FUZZ_CALL(devices_, GetDevice), ForName(n));
}

// The join with the kernel's resource tracking while objects come and go: a device name's usual answers,
// and every number given is for a name of a kind it may name.
void Fuzzer::OpListKernelIds() {
  Named n = DeviceArg();
  v1::ListKernelIdsRequest req;
  req.set_device(n.name);
  v1::ListKernelIdsResponse resp;
  grpc::Status s = Rpc("ListKernelIds", req, &resp, RDMAD_FUZZ_CALL(devices_, ListKernelIds), ForName(n, "device"));
  if (!s.ok()) return;
  for (const v1::KernelId& id : resp.ids()) {
    if (!absl::StartsWith(id.name(), "pds/") && !absl::StartsWith(id.name(), "mrs/") &&
        !absl::StartsWith(id.name(), "qps/") && !absl::StartsWith(id.name(), "cmids/")) {
      Violation("ListKernelIds names " + id.name());
    }
  }
}

void Fuzzer::OpCreatePd() {
  if (m_.pds.size() >= kMaxPds) return OpDeletePd();
  Named d = DeviceArg();
  v1::CreatePdRequest req;
  req.set_device(d.name);
  req.set_label(Label());
  const bool label_ok = req.label().size() <= 128;
  Expect e = Composite(d, "device", label_ok);
  if (!label_ok) e = Expect::Fails("label longer than 128 bytes");
  v1::ProtectionDomain resp;
  grpc::Status s = Rpc("CreatePd", req, &resp, RDMAD_FUZZ_CALL(pds_, CreatePd), e);
  if (s.ok()) {
    Created("pds", resp.name());
    m_.pds[resp.name()] = PdM();
  }
}

void Fuzzer::OpGetPd() {
  Named n = NameArg("pds");
  v1::GetPdRequest req;
  req.set_name(n.name);
  v1::ProtectionDomain resp;
  Rpc("GetPd", req, &resp, RDMAD_FUZZ_CALL(pds_, GetPd), ForName(n));
}

void Fuzzer::OpListPds() {
  v1::ListPdsResponse resp;
  Rpc("ListPds", v1::ListPdsRequest(), &resp, RDMAD_FUZZ_CALL(pds_, ListPds));
}

void Fuzzer::OpDeletePd(bool cleanup) {
  SettleDials();
  Named n = cleanup ? Named{Live("pds").empty() ? "" : Live("pds")[0], NameClass::kLive} : NameArg("pds", 0.6);
  v1::DeletePdRequest req;
  req.set_name(n.name);
  req.set_cascade(cleanup || rng_.Chance(0.6));
  req.set_revoke_grants(cleanup || rng_.Chance(0.5));
  // Without a cascade, a PD that holds regions is refused before anything is revoked.
  bool holds_regions = false;
  for (const auto& [mr, m] : m_.mrs) holds_regions |= m.pd == n.name;
  if (req.revoke_grants() && n.cls == NameClass::kLive && (req.cascade() || !holds_regions)) GrantsMayEnd("", n.name);
  v1::DeletePdResponse resp;
  grpc::Status s = Rpc("DeletePd", req, &resp, RDMAD_FUZZ_CALL(pds_, DeletePd), ForName(n));
  if (!s.ok()) return;
  if (resp.deleted_size() == 0 || resp.deleted(resp.deleted_size() - 1) != n.name) {
    Violation("DeletePd " + n.name + ": the response does not end with the PD");
  }
  for (const std::string& gone : resp.deleted()) {
    std::string kind = gone.substr(0, gone.find('/'));
    Gone(kind, gone);
  }
  // A cascade takes the PD's grants with it (revoked first); CM ids on it stay (their QPs went? no: refused).
  for (auto& [g, gm] : m_.grants) {
    if (!m_.mrs.count(gm.mr)) gm.ended = true, m_.ended_grants.insert(g);
  }
}

void Fuzzer::OpRegisterMr() {
  if (m_.mrs.size() >= kMaxMrs) return OpDeregisterMr();
  Named pd = NameArg("pds", 0.85);
  v1::RegisterMrRequest req;
  req.set_pd(pd.name);
  uint64_t length = 0;
  bool bad_source = false, bad_access = false;
  std::string why;
  FillSource(req.mutable_source(), &length, &bad_source, &why);
  AccessList(req.mutable_access(), true, &bad_access);
  Expect e;
  if (pd.cls != NameClass::kLive) {
    e.never_ok = true;
    e.why = "pd is not ours";
    if (!bad_source && !bad_access) e = ForName(pd, "pd");
  } else if (bad_source) {
    e = Expect::Fails(why);
  } else if (bad_access) {
    e = Expect::Fails("access breaks ibv_reg_mr(3)'s rule or has an unknown value");
  }
  v1::MemoryRegion resp;
  grpc::Status s = Rpc("RegisterMr", req, &resp, RDMAD_FUZZ_CALL(mrs_, RegisterMr), e);
  if (!s.ok()) return;
  Created("mrs", resp.name());
  if (resp.length() != length) {
    Violation("RegisterMr " + resp.name() + ": length " + std::to_string(resp.length()) + ", asked for " +
              std::to_string(length));
  }
  if (resp.pd() != pd.name) Violation("RegisterMr " + resp.name() + " landed in " + resp.pd() + ", asked for " + pd.name);
  MrM mr;
  mr.pd = resp.pd();
  mr.length = resp.length();
  for (int a : resp.access()) mr.access.insert(a);
  m_.mrs[resp.name()] = mr;
}

void Fuzzer::OpGetMr() {
  Named n = NameArg("mrs");
  v1::GetMrRequest req;
  req.set_name(n.name);
  v1::MemoryRegion resp;
  grpc::Status s = Rpc("GetMr", req, &resp, RDMAD_FUZZ_CALL(mrs_, GetMr), ForName(n));
  if (s.ok() && m_.mrs.count(n.name)) m_.mrs[n.name].length = resp.length();
}

void Fuzzer::OpListMrs() {
  v1::ListMrsRequest req;
  Named pd;
  if (rng_.Chance(0.5)) {
    pd = NameArg("pds");
    req.set_pd(pd.name);
  }
  v1::ListMrsResponse resp;
  Expect e = req.pd().empty() ? Expect() : ForName(pd, "pd");
  if (req.pd().empty()) e = Expect();
  Rpc("ListMrs", req, &resp, RDMAD_FUZZ_CALL(mrs_, ListMrs), e);
}

void Fuzzer::OpReregisterMr() {
  SettleDials();
  Named n = NameArg("mrs", 0.85);
  v1::ReregisterMrRequest req;
  req.set_name(n.name);
  bool translation = false, change_pd = false, change_access = false, bad = false;
  bool bad_source = false;  // refused only while re-registering: after the grants were revoked
  std::string why;
  const int nflags = static_cast<int>(rng_.Below(4));
  for (int i = 0; i < nflags; ++i) {
    int f = rng_.Chance(0.9) ? 1 + static_cast<int>(rng_.Below(3)) : HostileEnum();
    req.add_flags(static_cast<v1::ReregFlag>(f));
    if (f == 1) translation = true;
    else if (f == 2) change_pd = true;
    else if (f == 3) change_access = true;
    else bad = true, why = "an unknown flag";
  }
  if (nflags == 0) bad = true, why = "no flag";
  uint64_t length = 0;
  if (translation || rng_.Chance(0.1)) {
    std::string w;
    bool set = FillSource(req.mutable_source(), &length, &bad_source, &w);
    if (translation && bad_source) bad = true, why = w;
    if (!translation && set) bad = true, why = "a source without CHANGE_TRANSLATION";
  } else if (translation) {
    bad = true, why = "CHANGE_TRANSLATION without a source";
  }
  Named pd;
  if (change_pd || rng_.Chance(0.1)) {
    pd = NameArg("pds", 0.85);
    req.set_pd(pd.name);
    if (!change_pd && !pd.name.empty()) bad = true, why = "a pd without CHANGE_PD";
    if (change_pd && pd.cls != NameClass::kLive) bad = true, why = "CHANGE_PD to a PD that is not ours";
  }
  if (change_access || rng_.Chance(0.1)) {
    bool bad_access = false;
    AccessList(req.mutable_access(), true, &bad_access);
    if (change_access && bad_access) bad = true, why = "access breaks the rule";
    if (!change_access && req.access_size() > 0) bad = true, why = "access without CHANGE_ACCESS";
  }
  req.set_revoke_grants(rng_.Chance(0.5));
  // A request refused by its own checks (all of `bad` but a bad source's content) revokes nothing.
  const bool checked_first = bad && !(translation && bad_source);
  if (req.revoke_grants() && n.cls == NameClass::kLive && !checked_first) GrantsMayEnd(n.name, "");
  Expect e = bad ? Expect::Fails(why) : Expect();
  if (n.cls != NameClass::kLive) e = Composite(n, "name", !bad);
  e.rereg_outcome = n.cls == NameClass::kLive;
  v1::ReregisterMrResponse resp;
  grpc::Status s = Rpc("ReregisterMr", req, &resp, RDMAD_FUZZ_CALL(mrs_, ReregisterMr), e);
  if (!s.ok() || !m_.mrs.count(n.name)) return;
  if (resp.mr().name() != n.name) Violation("ReregisterMr changed the name " + n.name + " to " + resp.mr().name());
  MrM& mr = m_.mrs[n.name];
  if (translation && resp.mr().length() != length) {
    Violation("ReregisterMr " + n.name + ": length " + std::to_string(resp.mr().length()) + ", asked for " +
              std::to_string(length));
  }
  mr.length = resp.mr().length();
  mr.pd = resp.mr().pd();
  mr.access.clear();
  for (int a : resp.mr().access()) mr.access.insert(a);
  for (auto& [g, gm] : m_.grants) {
    if (gm.mr == n.name && req.revoke_grants()) gm.ended = true, m_.ended_grants.insert(g);
  }
}

void Fuzzer::OpDeregisterMr() {
  SettleDials();
  Named n = NameArg("mrs", 0.7);
  v1::DeregisterMrRequest req;
  req.set_name(n.name);
  req.set_revoke_grants(rng_.Chance(0.5));
  if (req.revoke_grants() && n.cls == NameClass::kLive) GrantsMayEnd(n.name, "");
  v1::DeregisterMrResponse resp;
  grpc::Status s = Rpc("DeregisterMr", req, &resp, RDMAD_FUZZ_CALL(mrs_, DeregisterMr), ForName(n));
  if (!s.ok()) return;
  Gone("mrs", n.name);
  for (auto& [g, gm] : m_.grants) {
    if (gm.mr == n.name) gm.ended = true, m_.ended_grants.insert(g);
  }
}

void Fuzzer::OpCreateQp() {
  if (m_.qps.size() >= kMaxQps) return OpDeleteQp();
  Named pd = NameArg("pds", 0.85);
  v1::CreateQpRequest req;
  req.set_pd(pd.name);
  Expect e;
  bool bad_port = false;
  if (rng_.Chance(0.8)) {
    req.set_port(rng_.Chance(0.8) ? 1 : 0);
  } else {
    req.set_port(HostileU32());
    bad_port = req.port() > 1;
  }
  if (rng_.Chance(0.3)) req.set_gid_index(rng_.Chance(0.5) ? static_cast<uint32_t>(rng_.Below(4)) : HostileU32());
  e = Composite(pd, "pd", !bad_port && !req.has_gid_index());
  if (bad_port) e = Expect::Fails("port " + std::to_string(req.port()) + " does not exist");
  v1::QueuePair resp;
  grpc::Status s = Rpc("CreateQp", req, &resp, RDMAD_FUZZ_CALL(qps_, CreateQp), e);
  if (!s.ok()) return;
  Created("qps", resp.name());
  QpM q;
  q.pd = resp.pd();
  q.qpn = resp.local().qpn();
  q.gid = resp.local().gid();
  m_.qps[resp.name()] = q;
}

void Fuzzer::OpGetQp() {
  Named n = NameArg("qps");
  v1::GetQpRequest req;
  req.set_name(n.name);
  v1::QueuePair resp;
  grpc::Status s = Rpc("GetQp", req, &resp, RDMAD_FUZZ_CALL(qps_, GetQp), ForName(n));
  if (s.ok() && m_.qps.count(n.name)) m_.qps[n.name].rts = resp.state() == v1::QP_RTS;
  if (rng_.Chance(0.3)) {
    v1::ListQpsResponse all;
    Rpc("ListQps", v1::ListQpsRequest(), &all, RDMAD_FUZZ_CALL(qps_, ListQps));
  }
}

void Fuzzer::OpConnectQp() {
  Named n = NameArg("qps", 0.85);
  v1::ConnectQpRequest req;
  req.set_name(n.name);
  std::vector<std::string> peers;
  for (const auto& [name, q] : m_.qps) {
    if (!q.cm) peers.push_back(name);
  }
  bool remote_ok = false;
  if (!peers.empty() && rng_.Chance(0.65)) {
    const QpM& p = m_.qps[rng_.Pick(peers)];
    req.mutable_remote()->set_qpn(p.qpn);
    req.mutable_remote()->set_gid(p.gid);
    req.mutable_remote()->set_psn(rng_.Chance(0.8) ? static_cast<uint32_t>(rng_.Below(1 << 24)) : HostileU32());
    remote_ok = req.remote().psn() < (1u << 24);
  } else {
    req.mutable_remote()->set_qpn(HostileU32());
    req.mutable_remote()->set_psn(HostileU32());
    const std::vector<std::string> gids = {
        "", "zz", "::1", "fe80::", "0000:0000:0000:0000:0000:ffff:0a00:020f", "10.0.2.15",
        "gggg:0000:0000:0000:0000:ffff:0a00:020f", "0000:0000:0000:0000:0000:ffff:0a00:020f:0000",
        std::string(4000, 'f'), "0000:0000:0000:0000:0000:ffff:0a00:02", "-1"};
    req.mutable_remote()->set_gid(rng_.Pick(gids));
    req.mutable_remote()->set_lid(HostileU32());
  }
  v1::QueuePair resp;
  grpc::Status s = Rpc("ConnectQp", req, &resp, RDMAD_FUZZ_CALL(qps_, ConnectQp), Composite(n, "name", remote_ok));
  if (s.ok() && m_.qps.count(n.name)) m_.qps[n.name].rts = resp.state() == v1::QP_RTS;
}

void Fuzzer::OpDeleteQp() {
  Named n = NameArg("qps", 0.7);
  v1::DeleteQpRequest req;
  req.set_name(n.name);
  v1::DeleteQpResponse resp;
  Expect e = ForName(n);
  if (m_.qps.count(n.name) && m_.qps[n.name].cm) e = Expect::Fails("the QP of a CM id");
  grpc::Status s = Rpc("DeleteQp", req, &resp, RDMAD_FUZZ_CALL(qps_, DeleteQp), e);
  if (s.ok()) Gone("qps", n.name);
}

void Fuzzer::OpAllocMw() {
  if (m_.mws.size() >= kMaxMws) return OpDeallocMw();
  Named pd = NameArg("pds", 0.85);
  v1::AllocMwRequest req;
  req.set_pd(pd.name);
  int type = rng_.Chance(0.85) ? 1 + static_cast<int>(rng_.Below(2)) : HostileEnum();
  req.set_type(static_cast<v1::MwType>(type));
  Expect e = Composite(pd, "pd", type == 1 || type == 2);
  if (type != 1 && type != 2) e = Expect::Fails("type " + std::to_string(type));
  v1::MemoryWindow resp;
  grpc::Status s = Rpc("AllocMw", req, &resp, RDMAD_FUZZ_CALL(mws_, AllocMw), e);
  if (!s.ok()) return;
  Created("mws", resp.name());
  MwM w;
  w.pd = resp.pd();
  w.type = resp.type();
  m_.mws[resp.name()] = w;
}

void Fuzzer::OpGetMw() {
  Named n = NameArg("mws");
  v1::GetMwRequest req;
  req.set_name(n.name);
  v1::MemoryWindow resp;
  Rpc("GetMw", req, &resp, RDMAD_FUZZ_CALL(mws_, GetMw), ForName(n));
}

void Fuzzer::OpListMws() {
  v1::ListMwsRequest req;
  Named pd;
  Expect e;
  if (rng_.Chance(0.5)) {
    pd = NameArg("pds");
    req.set_pd(pd.name);
    e = ForName(pd, "pd");
  }
  v1::ListMwsResponse resp;
  Rpc("ListMws", req, &resp, RDMAD_FUZZ_CALL(mws_, ListMws), e);
}

void Fuzzer::OpBindMw() {
  Named n = NameArg("mws", 0.9);
  v1::BindMwRequest req;
  req.set_name(n.name);
  const MwM* w = m_.mws.count(n.name) ? &m_.mws[n.name] : nullptr;
  // Prefer a region of the window's PD.
  std::vector<std::string> same;
  for (const auto& [name, mr] : m_.mrs) {
    if (w && mr.pd == w->pd) same.push_back(name);
  }
  Named mr;
  if (!same.empty() && rng_.Chance(0.8)) {
    mr.name = rng_.Pick(same);
  } else {
    mr = NameArg("mrs", 0.8);
  }
  req.set_mr(mr.name);
  const MrM* r = m_.mrs.count(mr.name) ? &m_.mrs[mr.name] : nullptr;
  uint64_t len = r ? r->length : 0;
  bool in_range = false;
  if (r && rng_.Chance(0.75)) {
    uint64_t off = rng_.Below(len);
    req.set_offset(off);
    req.set_length(1 + rng_.Below(len - off));
    in_range = true;
  } else {
    req.set_offset(rng_.Chance(0.5) ? HostileU64() : rng_.Below(len + 2));
    req.set_length(rng_.Chance(0.3) ? (0ull - req.offset()) + 4096 : HostileU64());  // sometimes wraps to 4096
    in_range = r && req.length() > 0 && req.offset() <= len && req.length() <= len - req.offset();
  }
  bool bad_access = false;
  AccessList(req.mutable_access(), false, &bad_access);
  for (int a : req.access()) {
    if (a != v1::REMOTE_READ && a != v1::REMOTE_WRITE && a != v1::REMOTE_ATOMIC) bad_access = true;
  }
  req.set_zero_based(rng_.Chance(0.15));
  // Type 2 needs a connected QP of the same PD; type 1 may name one.
  if (w && (w->type == 2 || rng_.Chance(0.2))) {
    std::vector<std::string> qps;
    for (const auto& [name, q] : m_.qps) {
      if (q.pd == w->pd && q.rts) qps.push_back(name);
    }
    if (!qps.empty() && rng_.Chance(0.85)) {
      req.set_qp(rng_.Pick(qps));
    } else {
      req.set_qp(NameArg("qps", 0.5).name);
    }
  } else if (rng_.Chance(0.05)) {
    req.set_qp(NameArg("qps", 0.5).name);
  }
  Expect e;
  if (n.cls != NameClass::kLive) {
    e = ForName(n);
    e.one_of.clear();  // other fields may be refused first
    e.never_ok = true;
    e.why = "not our window";
  } else if (mr.cls != NameClass::kLive || !r) {
    e = Expect::Fails("not our region");
  } else if (!in_range) {
    e = Expect::Fails("range outside the region (offset " + std::to_string(req.offset()) + ", length " +
                      std::to_string(req.length()) + ", region " + std::to_string(len) + ")");
  } else if (bad_access) {
    e = Expect::Fails("access a window cannot take");
  } else if (w && r && w->pd != r->pd) {
    e = Expect::Fails("region of another PD");
  } else if (!r->access.count(v1::MW_BIND)) {
    e = Expect::Fails("region without MW_BIND");
  } else if (w && w->type == 1 && req.zero_based()) {
    e = Expect::Fails("zero-based type 1 window");
  }
  v1::MemoryWindow resp;
  grpc::Status s = Rpc("BindMw", req, &resp, RDMAD_FUZZ_CALL(mws_, BindMw), e);
  if (!s.ok()) return;
  if (w) m_.mws[n.name].bound = true;
  const auto& b = resp.binding();
  if (b.mr() != mr.name || b.offset() != req.offset() || b.length() != req.length()) {
    Violation("BindMw " + n.name + ": binding " + Short(b) + " differs from the request");
  }
}

void Fuzzer::OpInvalidateMw() {
  Named n = NameArg("mws");
  v1::InvalidateMwRequest req;
  req.set_name(n.name);
  v1::MemoryWindow resp;
  grpc::Status s = Rpc("InvalidateMw", req, &resp, RDMAD_FUZZ_CALL(mws_, InvalidateMw), ForName(n));
  if (s.ok() && m_.mws.count(n.name)) m_.mws[n.name].bound = false;
}

void Fuzzer::OpDeallocMw() {
  Named n = NameArg("mws", 0.7);
  v1::DeallocMwRequest req;
  req.set_name(n.name);
  v1::DeallocMwResponse resp;
  grpc::Status s = Rpc("DeallocMw", req, &resp, RDMAD_FUZZ_CALL(mws_, DeallocMw), ForName(n));
  if (s.ok()) Gone("mws", n.name);
}

void Fuzzer::OpCreateChannel() {
  if (m_.channels.size() >= kMaxChannels) return OpDeleteChannel();
  v1::CreateChannelRequest req;
  req.set_label(Label());
  v1::EventChannel resp;
  grpc::Status s = Rpc("CreateChannel", req, &resp, RDMAD_FUZZ_CALL(chans_, CreateChannel));
  if (!s.ok()) return;
  Created("channels", resp.name());
  m_.channels[resp.name()] = 1;
}

void Fuzzer::OpGetChannel() {
  Named n = NameArg("channels");
  if (rng_.Chance(0.2)) n = Named{"channels/1", NameClass::kLive};
  v1::GetChannelRequest req;
  req.set_name(n.name);
  v1::EventChannel resp;
  Rpc("GetChannel", req, &resp, RDMAD_FUZZ_CALL(chans_, GetChannel), ForName(n));
  if (rng_.Chance(0.3)) {
    v1::ListChannelsResponse all;
    Rpc("ListChannels", v1::ListChannelsRequest(), &all, RDMAD_FUZZ_CALL(chans_, ListChannels));
  }
}

void Fuzzer::OpDeleteChannel() {
  Named n = NameArg("channels", 0.7);
  Expect e = ForName(n);
  if (rng_.Chance(0.15)) {
    n = Named{rng_.Chance(0.5) || worker_channels_.empty() ? "channels/1" : rng_.Pick(worker_channels_),
              NameClass::kLive};
    e = Expect::Fails("a channel rdmad made itself");
  }
  v1::DeleteChannelRequest req;
  req.set_name(n.name);
  v1::DeleteChannelResponse resp;
  grpc::Status s = Rpc("DeleteChannel", req, &resp, RDMAD_FUZZ_CALL(chans_, DeleteChannel), e);
  if (s.ok()) Gone("channels", n.name);
}

void Fuzzer::OpCreateCmId() {
  if (m_.cmids.size() >= kMaxCmIds) return OpDeleteCmId();
  Named pd = NameArg("pds", 0.85);
  v1::CreateCmIdRequest req;
  req.set_pd(pd.name);
  bool channel_ok = true;
  Named ch;
  if (rng_.Chance(0.5)) {
    ch = NameArg("channels", 0.7);
    req.set_channel(ch.name);
    channel_ok = ch.cls == NameClass::kLive || ch.name.empty();
  }
  Expect e = Composite(pd, "pd", channel_ok);
  if (!channel_ok) e = Composite(ch, "channel", pd.cls == NameClass::kLive);
  v1::CmId resp;
  grpc::Status s = Rpc("CreateCmId", req, &resp, RDMAD_FUZZ_CALL(ids_, CreateCmId), e);
  if (!s.ok()) return;
  Created("cmids", resp.name());
  CmIdM c;
  c.pd = resp.pd();
  c.state = resp.state();
  m_.cmids[resp.name()] = c;
}

void Fuzzer::OpGetCmId() {
  Named n = NameArg("cmids");
  v1::GetCmIdRequest req;
  req.set_name(n.name);
  v1::CmId resp;
  grpc::Status s = Rpc("GetCmId", req, &resp, RDMAD_FUZZ_CALL(ids_, GetCmId), ForName(n));
  if (s.ok() && m_.cmids.count(n.name)) m_.cmids[n.name].state = resp.state();
}

void Fuzzer::OpListCmIds() {
  v1::ListCmIdsRequest req;
  Expect e;
  if (rng_.Chance(0.5)) {
    Named ch = NameArg("channels");
    req.set_channel(ch.name);
    e = ForName(ch, "channel");
    if (ch.name.empty()) e = Expect();
  }
  v1::ListCmIdsResponse resp;
  Rpc("ListCmIds", req, &resp, RDMAD_FUZZ_CALL(ids_, ListCmIds), e);
}

void Fuzzer::OpListen() {
  Named n = NameArg("cmids", 0.85);
  v1::ListenRequest req;
  req.set_name(n.name);
  uint32_t port = 20000 + static_cast<uint32_t>(rng_.Below(20000));
  bool bad = false;
  std::string why;
  if (rng_.Chance(0.75)) {
    req.mutable_address()->set_address(rng_.Chance(0.85) ? o_.rdma_addr : "0.0.0.0");
  } else {
    req.mutable_address()->set_address(HostileAddress());
  }
  if (rng_.Chance(0.2)) {
    const std::vector<uint32_t> ports = {0, static_cast<uint32_t>(o_.dp_port), 65535, 65536, 0xffffffff, 1};
    port = rng_.Pick(ports);
    if (port > 65535) bad = true, why = "port " + std::to_string(port);
  }
  req.mutable_address()->set_port(port);
  req.set_backlog(rng_.Chance(0.8) ? 0 : static_cast<int32_t>(HostileEnum()));
  Expect e = bad ? Expect::Fails(why) : Expect();
  if (n.cls != NameClass::kLive) e = Composite(n, "name", false);
  v1::CmId resp;
  grpc::Status s = Rpc("Listen", req, &resp, RDMAD_FUZZ_CALL(ids_, Listen), e);
  if (s.ok() && m_.cmids.count(n.name)) {
    m_.cmids[n.name].state = resp.state();
    m_.cmids[n.name].listen_port = resp.local().port();
    if (req.address().address() == o_.rdma_addr || req.address().address() == "0.0.0.0") {
      listen_ports_.insert(resp.local().port());
    }
  }
}

// Connect waits for ESTABLISHED, which for a listener of ours needs an Accept from this thread: it runs in
// the background and its reply is checked when it arrives.
void Fuzzer::OpConnect() {
  if (background_.size() >= kMaxBackground) return;
  Named n = NameArg("cmids", 0.85);
  auto req = std::make_shared<v1::ConnectRequest>();
  req->set_name(n.name);
  auto* remote = req->mutable_remote();
  std::string token_name;
  switch (rng_.Below(6)) {
    case 0:
    case 1: {  // rdmad's own data-plane listener, with a token or garbage
      remote->set_address(o_.rdma_addr);
      remote->set_port(o_.dp_port);
      std::vector<std::string> fresh;
      for (const auto& [name, t] : m_.tokens) {
        // (With a grant's token rdmad's own id is a client that posts no receive: its key message fails.)
        if (!t.presented && !t.maybe_presented) fresh.push_back(name);
      }
      if (!fresh.empty() && rng_.Chance(0.7)) {
        token_name = rng_.Pick(fresh);
        req->set_private_data(m_.tokens[token_name].bytes);
      } else {
        req->set_private_data(rng_.Bytes(rng_.Below(57)));
      }
      break;
    }
    case 2:  // one of our listeners
      if (!listen_ports_.empty()) {
        std::vector<uint32_t> ports(listen_ports_.begin(), listen_ports_.end());
        remote->set_address(o_.rdma_addr);
        remote->set_port(rng_.Pick(ports));
        req->set_private_data(rng_.Bytes(rng_.Below(57)));
        break;
      }
      [[fallthrough]];
    case 3:  // nothing listens there
      remote->set_address(o_.rdma_addr);
      remote->set_port(1 + static_cast<uint32_t>(rng_.Below(19999)));
      break;
    case 4:  // nobody there at all
      remote->set_address(rng_.Chance(0.5) ? "10.0.2.99" : "10.0.3.7");
      remote->set_port(7471);
      req->set_timeout_ms(100 + static_cast<uint32_t>(rng_.Below(400)));
      break;
    default:
      remote->set_address(HostileAddress());
      remote->set_port(rng_.Chance(0.5) ? static_cast<uint32_t>(o_.dp_port) : HostileU32());
      req->set_private_data(rng_.Bytes(rng_.Below(80)));
      if (rng_.Chance(0.5)) req->set_timeout_ms(HostileU32());
      break;
  }
  if (req->timeout_ms() == 0 && rng_.Chance(0.2)) req->set_timeout_ms(HostileU32());
  Expect e;
  e.also = {StatusCode::DEADLINE_EXCEEDED, StatusCode::UNAVAILABLE};
  if (n.cls != NameClass::kLive) e.never_ok = true, e.why = "not our id";
  if (req->private_data().size() > 56) e.never_ok = true, e.why = "private data over 56 bytes";
  if (!token_name.empty() && req->private_data().size() <= 56) {
    m_.tokens[token_name].maybe_presented = true;
  }
  if (m_.cmids.count(n.name)) m_.cmids[n.name].connecting = true;
  const uint64_t seq = ++seq_;
  report_->Line(std::to_string(seq) + " Connect (background) {" + Short(*req) + "}");
  Background([this, req, e, seq, name = n.name, token_name]() -> std::function<void()> {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(6000));
    v1::CmId resp;
    const auto t0 = Clock::now();
    grpc::Status s = ids_->Connect(&ctx, *req, &resp);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
    report_->Line(std::to_string(seq) + " -> " + CodeName(s.error_code()) +
                  (s.ok() ? "" : " " + Printable(s.error_message(), 300)) + " (" + std::to_string(ms) + " ms)");
    report_->Count("Connect", s.error_code());
    CheckReply(report_, seq, "Connect", s, e);
    return [this, s, resp, name, token_name]() {
      if (s.ok() && !token_name.empty()) m_.tokens[token_name].presented = true;
      if (!m_.cmids.count(name)) return;
      m_.cmids[name].connecting = false;
      if (s.ok()) m_.cmids[name].state = resp.state();
    };
  });
}

void Fuzzer::OpAcceptOrReject(bool accept) {
  std::vector<std::string> incoming;
  for (const auto& [name, c] : m_.cmids) {
    if (c.incoming && c.state == v1::CM_CONNECT_REQUEST) incoming.push_back(name);
  }
  Named n = (!incoming.empty() && rng_.Chance(0.8)) ? Named{rng_.Pick(incoming), NameClass::kLive} : NameArg("cmids");
  const size_t limit = accept ? 196 : 148;
  std::string data = rng_.Bytes(rng_.Chance(0.8) ? rng_.Below(limit + 1) : limit + 1 + rng_.Below(300));
  Expect e = Composite(n, "name", data.size() <= limit);
  if (data.size() > limit) e = Expect::Fails("private data over " + std::to_string(limit) + " bytes");
  v1::CmId resp;
  grpc::Status s;
  if (accept) {
    v1::AcceptRequest req;
    req.set_name(n.name);
    req.set_private_data(data);
    s = Rpc("Accept", req, &resp, RDMAD_FUZZ_CALL(ids_, Accept), e);
  } else {
    v1::RejectRequest req;
    req.set_name(n.name);
    req.set_private_data(data);
    s = Rpc("Reject", req, &resp, RDMAD_FUZZ_CALL(ids_, Reject), e);
    if (s.ok()) Gone("cmids", n.name);  // a reject destroys the id
    return;
  }
  if (s.ok() && m_.cmids.count(n.name)) m_.cmids[n.name].state = resp.state();
}

void Fuzzer::OpDisconnect() {
  Named n = NameArg("cmids");
  v1::DisconnectRequest req;
  req.set_name(n.name);
  v1::CmId resp;
  grpc::Status s = Rpc("Disconnect", req, &resp, RDMAD_FUZZ_CALL(ids_, Disconnect), ForName(n));
  if (s.ok() && m_.cmids.count(n.name)) m_.cmids[n.name].state = resp.state();
}

void Fuzzer::OpDeleteCmId() {
  Named n = NameArg("cmids", 0.7);
  v1::DeleteCmIdRequest req;
  req.set_name(n.name);
  v1::DeleteCmIdResponse resp;
  grpc::Status s = Rpc("DeleteCmId", req, &resp, RDMAD_FUZZ_CALL(ids_, DeleteCmId), ForName(n));
  if (s.ok()) Gone("cmids", n.name);
}

void Fuzzer::OpMigrate() {
  Named n = NameArg("cmids");
  v1::MigrateCmIdRequest req;
  req.set_name(n.name);
  Named ch = NameArg("channels", 0.6);
  if (rng_.Chance(0.2)) ch = Named{"channels/1", NameClass::kLive};
  req.set_channel(ch.name);
  Expect e = Composite(n, "name", ch.cls == NameClass::kLive);
  if (ch.name.empty()) e = Expect::Fails("migration to no channel");
  else if (ch.cls != NameClass::kLive) e = Composite(ch, "channel", n.cls == NameClass::kLive);
  e.also = {StatusCode::DEADLINE_EXCEEDED};
  // Sometimes a deadline that passes at once: then the client's own DEADLINE_EXCEEDED may come first.
  const int deadline_ms = rng_.Chance(0.1) ? 1 : 10000;
  if (deadline_ms == 1 && !e.one_of.empty()) e.one_of.push_back(StatusCode::DEADLINE_EXCEEDED);
  v1::CmId resp;
  Rpc("MigrateCmId", req, &resp, RDMAD_FUZZ_CALL(ids_, MigrateCmId), e, deadline_ms);
}

// A watch with random filters, read for a short while; its end is checked like a reply.
void Fuzzer::OpWatchEvents() {
  v1::WatchEventsRequest req;
  Expect e;
  e.also = {StatusCode::DEADLINE_EXCEEDED};
  if (rng_.Chance(0.3)) {
    Named ch = NameArg("channels");
    req.set_channel(ch.name);
    if (!ch.name.empty() && ch.cls != NameClass::kLive) e.never_ok = true, e.why = "a channel that is not ours";
  }
  if (rng_.Chance(0.3)) {
    Named id = NameArg("cmids");
    req.set_cm_id(id.name);
    if (!id.name.empty() && id.cls != NameClass::kLive) e.never_ok = true, e.why = "an id that is not ours";
  }
  if (o_.no_rdma) e.also.push_back(StatusCode::UNAVAILABLE);
  const std::vector<std::string> types = {"DISCONNECTED", "RDMA_CM_EVENT_ESTABLISHED", "CONNECT_REQUEST",
                                          "rdma_cm_event_rejected", "", "NOPE", std::string(2000, 'X'),
                                          "RDMA_CM_EVENT_", "ESTABLISHED\n"};
  if (rng_.Chance(0.3)) req.add_types(rng_.Pick(types));
  if (rng_.Chance(0.3)) req.set_after_sequence(rng_.Chance(0.5) ? rng_.Below(50) : HostileU64());
  req.set_from_oldest(rng_.Chance(0.2));
  const uint64_t seq = ++seq_;
  report_->Line(std::to_string(seq) + " WatchEvents {" + Short(req) + "}");
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  auto reader = ids_->WatchEvents(&ctx, req);
  v1::CmEvent ev;
  int n = 0;
  const auto& foreign_ids = m_.foreign["cmids"];
  while (n < 200 && reader->Read(&ev)) {
    ++n;
    if (std::find(foreign_ids.begin(), foreign_ids.end(), ev.cm_id()) != foreign_ids.end()) {
      report_->Violation(seq, "WatchEvents", "an event of another tenant's " + ev.cm_id());
    }
  }
  if (n == 200) ctx.TryCancel();
  grpc::Status s = reader->Finish();
  if (n == 200) e.also.push_back(StatusCode::CANCELLED);
  // Once events were delivered the filter was accepted.
  if (n > 0) e.never_ok = false;
  report_->Line(std::to_string(seq) + " -> " + CodeName(s.error_code()) + " after " + std::to_string(n) + " events " +
                Printable(s.error_message(), 200));
  report_->Count("WatchEvents", s.error_code());
  if (e.never_ok && s.error_code() == StatusCode::DEADLINE_EXCEEDED) {
    report_->Violation(seq, "WatchEvents", "a watch filtered on a name that is not ours was accepted: " + e.why);
  }
  e.never_ok = false;
  CheckReply(report_, seq, "WatchEvents", s, e);
}

void Fuzzer::OpWatchGrants() {
  v1::WatchGrantsRequest req;
  Expect e;
  e.also = {StatusCode::DEADLINE_EXCEEDED};
  Named mr;
  if (rng_.Chance(0.3)) {
    mr = NameArg("mrs");
    req.set_mr(mr.name);
    // A filter naming no region of ours is refused at once (docs/grants.md), never a silent stream.
    if (!mr.name.empty() && mr.cls != NameClass::kLive) {
      e = ForName(mr, "mr");
      e.also = {StatusCode::DEADLINE_EXCEEDED};
    }
  }
  if (rng_.Chance(0.3)) req.set_principal(Principal());
  if (rng_.Chance(0.3)) req.set_after_sequence(rng_.Chance(0.5) ? rng_.Below(50) : HostileU64());
  const uint64_t seq = ++seq_;
  report_->Line(std::to_string(seq) + " WatchGrants {" + Short(req) + "}");
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  auto reader = grants_->WatchGrants(&ctx, req);
  v1::GrantEvent ev;
  int n = 0;
  const auto& foreign_grants = m_.foreign["grants"];
  const auto& foreign_mrs = m_.foreign["mrs"];
  while (n < 200 && reader->Read(&ev)) {
    ++n;
    if (std::find(foreign_grants.begin(), foreign_grants.end(), ev.grant().name()) != foreign_grants.end() ||
        std::find(foreign_mrs.begin(), foreign_mrs.end(), ev.grant().mr()) != foreign_mrs.end()) {
      report_->Violation(seq, "WatchGrants", "an event of another tenant's " + ev.grant().name());
    }
  }
  if (n == 200) ctx.TryCancel(), e.also.push_back(StatusCode::CANCELLED);
  grpc::Status s = reader->Finish();
  report_->Line(std::to_string(seq) + " -> " + CodeName(s.error_code()) + " after " + std::to_string(n) + " events " +
                Printable(s.error_message(), 200));
  report_->Count("WatchGrants", s.error_code());
  if (!e.one_of.empty() && s.error_code() == StatusCode::DEADLINE_EXCEEDED) {
    report_->Violation(seq, "WatchGrants", "a watch filtered on " + mr.name + " (" + e.why + ") was accepted");
  }
  if (!e.one_of.empty()) e.one_of.push_back(StatusCode::DEADLINE_EXCEEDED);  // reported just above
  CheckReply(report_, seq, "WatchGrants", s, e);
}

void Fuzzer::OpIssueToken() {
  Named pd = NameArg("pds", 0.85);
  v1::IssueConnectTokenRequest req;
  req.set_pd(pd.name);
  if (rng_.Chance(0.75)) {
    req.set_ttl_ms(rng_.Chance(0.3) ? 0 : 200 + static_cast<uint32_t>(rng_.Below(30000)));
  } else {
    req.set_ttl_ms(HostileU32());
  }
  const bool ttl_ok = req.ttl_ms() <= 3600u * 1000u;
  Expect e = Composite(pd, "pd", ttl_ok);
  if (!ttl_ok) e = Expect::Fails("ttl over max_token_ttl (1 h)");
  v1::ConnectToken resp;
  grpc::Status s = Rpc("IssueConnectToken", req, &resp, RDMAD_FUZZ_CALL(tokens_, IssueConnectToken), e);
  if (!s.ok()) return;
  if (resp.token().size() != 32) Violation("IssueConnectToken: a token of " + std::to_string(resp.token().size()) + " bytes");
  TokenM t;
  t.bytes = resp.token();
  t.pd = pd.name;
  t.expire_ns = resp.expire_time_unix_nanos();
  m_.tokens[resp.name()] = t;
}

void Fuzzer::OpIssueGrant() {
  if (m_.grants.size() >= kMaxGrants) return OpRevokeGrant();
  Named mr = NameArg("mrs", 0.85);
  v1::IssueGrantRequest req;
  req.set_mr(mr.name);
  const MrM* r = m_.mrs.count(mr.name) ? &m_.mrs[mr.name] : nullptr;
  const uint64_t len = r ? r->length : 0;
  bool in_range;
  if (r && rng_.Chance(0.75)) {
    uint64_t off = rng_.Below(len);
    req.set_offset(off);
    req.set_length(1 + rng_.Below(len - off));
    in_range = true;
  } else {
    req.set_offset(rng_.Chance(0.5) ? HostileU64() : rng_.Below(len + 2));
    req.set_length(rng_.Chance(0.3) ? (0ull - req.offset()) + 4096 : HostileU64());
    in_range = r && req.length() > 0 && req.offset() <= len && req.length() <= len - req.offset();
  }
  bool bad_access = false;
  if (rng_.Chance(0.3)) {
    AccessList(req.mutable_access(), false, &bad_access);
    for (int a : req.access()) bad_access |= a != v1::REMOTE_READ && a != v1::REMOTE_WRITE;
  }
  if (rng_.Chance(0.8)) {
    req.set_ttl_ms(rng_.Chance(0.3) ? 0 : 300 + static_cast<uint32_t>(rng_.Below(60000)));
  } else {
    req.set_ttl_ms(HostileU32());
  }
  req.set_principal(Principal());
  Expect e;
  if (mr.cls != NameClass::kLive) e = Expect::Fails("not our region");
  else if (!in_range) e = Expect::Fails("range outside the region");
  else if (bad_access) e = Expect::Fails("access other than REMOTE_READ / REMOTE_WRITE");
  else if (req.ttl_ms() > 86400u * 1000u) e = Expect::Fails("ttl over max_grant_ttl_s");
  else if (req.principal().empty() || req.principal().size() > 256) e = Expect::Fails("principal empty or over 256 bytes");
  v1::IssuedGrant resp;
  grpc::Status s = Rpc("IssueGrant", req, &resp, RDMAD_FUZZ_CALL(grants_, IssueGrant), e);
  if (!s.ok()) return;
  Created("grants", resp.grant().name());
  GrantM g;
  g.mr = mr.name;
  m_.grants[resp.grant().name()] = g;
  TokenM t;
  t.bytes = resp.token();
  t.grant = true;
  t.grant_name = resp.grant().name();
  t.expire_ns = t.lease_end_ns = resp.grant().expire_time_unix_nanos();
  m_.tokens[resp.grant().token()] = t;
  if (resp.grant().offset() != req.offset() || resp.grant().length() != req.length()) {
    Violation("IssueGrant " + resp.grant().name() + ": range differs from the request");
  }
}

void Fuzzer::OpIssueGrants() {
  v1::IssueGrantsRequest req;
  std::vector<std::string> mrs = Live("mrs");
  const uint64_t n = rng_.Chance(0.05) ? 1025 : rng_.Below(5);
  bool bad = n == 0 || n > 1024;
  for (uint64_t i = 0; i < n; ++i) {
    auto* g = req.add_grants();
    if (!mrs.empty() && rng_.Chance(0.85)) {
      g->set_mr(rng_.Pick(mrs));
      const uint64_t len = m_.mrs[g->mr()].length;
      g->set_offset(rng_.Below(len));
      g->set_length(1 + rng_.Below(len - g->offset()));
    } else {
      g->set_mr(NameArg("mrs", 0).name);
      g->set_length(1);
      bad = true;
    }
    g->set_ttl_ms(1000 + static_cast<uint32_t>(rng_.Below(30000)));
    g->set_principal(rng_.Chance(0.9) ? "batch-" + std::to_string(i) : "");
    if (g->principal().empty()) bad = true;
  }
  if (m_.grants.size() + n > kMaxGrants && n <= 1024) return;  // keep the mix bounded
  Expect e = bad ? Expect::Fails("a batch with a bad request (all or nothing)") : Expect();
  size_t before = 0;
  const bool count = rng_.Chance(0.5);
  if (count) {
    v1::ListGrantsResponse l;
    Rpc("ListGrants", v1::ListGrantsRequest(), &l, RDMAD_FUZZ_CALL(grants_, ListGrants));
    before = l.grants_size();
  }
  v1::IssueGrantsResponse resp;
  grpc::Status s = Rpc("IssueGrants", req, &resp, RDMAD_FUZZ_CALL(grants_, IssueGrants), e);
  if (s.ok()) {
    if (resp.grants_size() != static_cast<int>(n)) Violation("IssueGrants: " + std::to_string(resp.grants_size()) + " of " + std::to_string(n));
    for (const auto& ig : resp.grants()) {
      Created("grants", ig.grant().name());
      GrantM g;
      g.mr = ig.grant().mr();
      m_.grants[ig.grant().name()] = g;
      TokenM t;
      t.bytes = ig.token();
      t.grant = true;
      t.grant_name = ig.grant().name();
      t.expire_ns = t.lease_end_ns = ig.grant().expire_time_unix_nanos();
      m_.tokens[ig.grant().token()] = t;
    }
  } else if (count) {
    v1::ListGrantsResponse l;
    Rpc("ListGrants", v1::ListGrantsRequest(), &l, RDMAD_FUZZ_CALL(grants_, ListGrants));
    if (static_cast<size_t>(l.grants_size()) > before) {
      Violation("a refused IssueGrants left " + std::to_string(l.grants_size() - before) + " grants behind");
    }
  }
}

void Fuzzer::OpGetGrant() {
  Named n = NameArg("grants");
  v1::GetGrantRequest req;
  req.set_name(n.name);
  v1::Grant resp;
  Expect e = ForName(n);
  grpc::Status s = Rpc("GetGrant", req, &resp, RDMAD_FUZZ_CALL(grants_, GetGrant), e);
  if (s.ok() && resp.state() == v1::GRANT_ENDED) Gone("grants", n.name);
}

void Fuzzer::OpListGrants() {
  v1::ListGrantsRequest req;
  Expect e;
  if (rng_.Chance(0.4)) {
    Named mr = NameArg("mrs");
    req.set_mr(mr.name);
    if (!mr.name.empty()) e = ForName(mr, "mr");
    // A deregistered region's remembered grants are still listed by its name (docs/grants.md).
    if (mr.cls == NameClass::kDead) e.one_of.push_back(StatusCode::OK);
  }
  if (rng_.Chance(0.3)) req.set_principal(Principal());
  req.set_include_ended(rng_.Chance(0.3));
  v1::ListGrantsResponse resp;
  Rpc("ListGrants", req, &resp, RDMAD_FUZZ_CALL(grants_, ListGrants), e);
}

void Fuzzer::OpRenewGrant() {
  SettleDials();
  Named n = NameArg("grants");
  v1::RenewGrantRequest req;
  req.set_name(n.name);
  req.set_ttl_ms(rng_.Chance(0.7) ? static_cast<uint32_t>(rng_.Below(60000)) : HostileU32());
  const bool ttl_ok = req.ttl_ms() <= 86400u * 1000u;
  Expect e = Composite(n, "name", ttl_ok);
  if (!ttl_ok) e = Expect::Fails("ttl over max_grant_ttl_s");
  v1::Grant resp;
  grpc::Status s = Rpc("RenewGrant", req, &resp, RDMAD_FUZZ_CALL(grants_, RenewGrant), e);
  if (s.ok()) {
    for (auto& [name, t] : m_.tokens) {
      if (t.grant_name == n.name) t.lease_end_ns = resp.expire_time_unix_nanos();  // the token's own stays
    }
  }
}

void Fuzzer::OpRevokeGrant() {
  SettleDials();
  Named n = NameArg("grants", 0.8);
  v1::RevokeGrantRequest req;
  req.set_name(n.name);
  v1::Grant resp;
  grpc::Status s = Rpc("RevokeGrant", req, &resp, RDMAD_FUZZ_CALL(grants_, RevokeGrant), ForName(n));
  if (s.ok()) {
    if (resp.state() != v1::GRANT_ENDED) Violation("RevokeGrant " + n.name + " returned a grant that has not ended");
    Gone("grants", n.name);  // ended: out of the live mix (its name stays gettable for a while)
  }
}

// ------------------------------------------------------------------------------------------------------
// The data plane

// What rdmad must answer to these bytes (PROTOCOL.md's table, with the IB CM's zero padding to 56 bytes).
void Fuzzer::PlanFromBytes(DialPlan* p) {
  std::string pad = p->data;
  pad.resize(56, '\0');
  using R = wire::RejectReason;
  auto reason = [&](R r) { p->reasons.insert(static_cast<uint16_t>(r)); };
  if (pad.find_first_not_of('\0') == std::string::npos) return reason(R::kMissing);
  if (pad.compare(0, 4, "RDTK") != 0) return reason(R::kMalformed);
  if (pad[4] != 1) return reason(R::kWrongVersion);
  if (pad.find_first_not_of('\0', 32) != std::string::npos) return reason(R::kMalformed);
  if (pad[6] != 0 || pad[7] != 0 || (pad[5] != 1 && pad[5] != 2)) return reason(R::kMalformed);
  // A well-formed token: which one is it?
  const uint64_t id = BigEndian64(pad, 8);
  const std::string name = "tokens/" + std::to_string(id);
  auto it = m_.tokens.find(name);
  if (it == m_.tokens.end() || it->second.bytes != pad.substr(0, 32)) return reason(R::kUnknown);
  TokenM& t = it->second;
  p->token = name;
  p->grant = t.grant_name;
  const int64_t now = NowNanos();
  const int64_t margin = 2'000'000'000;
  if (now > t.expire_ns - margin) reason(R::kExpired);
  if (now > t.expire_ns + margin) return;  // past its own expiry: EXPIRED, whatever happened before
  if (t.presented) {
    reason(R::kReplayed);
    return;
  }
  if (t.dead) {
    reason(R::kRevoked);
    reason(R::kExpired);
    return;
  }
  const bool uncertain = t.maybe_presented && !t.presented;  // a Connect or a dial in flight may have used it
  if (uncertain) reason(R::kReplayed);
  if (t.grant) {
    auto g = m_.grants.find(t.grant_name);
    if (m_.ended_grants.count(t.grant_name) || (g != m_.grants.end() && g->second.ended)) {
      reason(R::kRevoked);  // ended before its client came: its token was revoked (or has expired)
      reason(R::kExpired);
      return;
    }
    if (g == m_.grants.end() || g->second.maybe_ended) {  // its state is unknown here
      reason(R::kRevoked);
      reason(R::kExpired);
      p->may_establish = true;
      return;
    }
    if (now > t.lease_end_ns - margin) {  // the lease ends about now, or has: the grant ends with it
      reason(R::kRevoked);
      if (now > t.lease_end_ns + margin) return;
    }
  } else if (!m_.pds.count(t.pd)) {
    // The token's PD was deleted before the client came: DeletePd revoked it.
    reason(R::kRevoked);
    return;
  }
  p->may_establish = true;
  p->must_establish = !uncertain && now < t.expire_ns - margin && (!t.grant || now < t.lease_end_ns - margin);
}

Fuzzer::DialPlan Fuzzer::PlanDial() {
  DialPlan p;
  p.port = o_.dp_port;
  p.receives = rng_.Chance(0.75) ? 2 : static_cast<int>(rng_.Below(2));
  if (o_.receives >= 0) p.receives = o_.receives;
  if (!listen_ports_.empty() && rng_.Chance(0.12)) {  // a listener of ours: rdmad decides nothing itself
    std::vector<uint32_t> ports(listen_ports_.begin(), listen_ports_.end());
    p.port = static_cast<int>(rng_.Pick(ports));
    p.to_listener = false;
    p.data = rng_.Bytes(rng_.Below(57));
    p.what = "to a listener of ours";
    return p;
  }
  std::vector<std::string> tokens = Keys(m_.tokens);
  const uint64_t kind = tokens.empty() ? rng_.Below(3) : rng_.Below(10);
  switch (kind) {
    case 0:
      p.data = rng_.Bytes(rng_.Below(57));
      p.what = "random bytes";
      break;
    case 1:
      p.data = std::string(rng_.Below(57), '\0');
      p.what = "zeros";
      break;
    case 2:
      p.data = "RDTK" + rng_.Bytes(rng_.Below(53));
      if (rng_.Chance(0.5) && p.data.size() > 4) p.data[4] = 1;
      p.what = "magic and random bytes";
      break;
    default: {
      // A real token: prefer ones never presented, so that the valid path runs often.
      std::vector<std::string> fresh;
      for (const auto& name : tokens) {
        if (!m_.tokens[name].presented && !m_.tokens[name].maybe_presented) fresh.push_back(name);
      }
      const std::string name = (!fresh.empty() && rng_.Chance(0.7)) ? rng_.Pick(fresh) : rng_.Pick(tokens);
      std::string t = m_.tokens[name].bytes;
      switch (rng_.Below(8)) {
        case 0:
        case 1:
        case 2:
          p.what = "the token " + name;
          break;
        case 3:
          t.resize(rng_.Below(32));
          p.what = "the token " + name + " cut to " + std::to_string(t.size()) + " bytes";
          break;
        case 4: {
          const size_t at = rng_.Below(32);
          t[at] = static_cast<char>(t[at] ^ (1 + rng_.Below(255)));
          p.what = "the token " + name + " with byte " + std::to_string(at) + " changed";
          break;
        }
        case 5:
          t += rng_.Bytes(1 + rng_.Below(24));
          p.what = "the token " + name + " with bytes after it";
          break;
        case 6:
          t += std::string(rng_.Below(25), '\0');
          p.what = "the token " + name + " with zeros after it";
          break;
        default:
          t[rng_.Below(2) ? 5 : 4] = static_cast<char>(rng_.Below(4));
          p.what = "the token " + name + " with another kind or version";
          break;
      }
      p.data = t;
    }
  }
  PlanFromBytes(&p);
  return p;
}

void Fuzzer::OpDial() {
  if (background_.size() >= kMaxBackground || o_.no_rdma) return;
  if (peers_.size() >= kMaxPeers) return OpClosePeer();
  DialPlan p = PlanDial();
  // A live token is used up by the first request that presents it, whatever then happens; a revoked or
  // expired one stays what it was. Which it was is known when the answer comes: uncertain until then.
  if (!p.token.empty() && p.may_establish) m_.tokens[p.token].maybe_presented = true;
  const uint64_t seq = ++seq_;
  report_->Line(std::to_string(seq) + " Dial " + o_.rdma_addr + ":" + std::to_string(p.port) + " " + p.what + " [" +
                Printable(p.data, 120) + "] receives " + std::to_string(p.receives));
  Background([this, p, seq]() -> std::function<void()> {
    auto peer = std::make_unique<DpPeer>();
    DpPeer::Result r = peer->Dial(o_.rdma_addr, p.port, p.data, p.receives, 8000);
    std::string outcome = r.outcome == DpPeer::Outcome::kEstablished ? "ESTABLISHED"
                          : r.outcome == DpPeer::Outcome::kRejected  ? "REJECTED status " + std::to_string(r.status)
                                                                     : "error " + r.event + " " + r.error;
    std::string reason_text;
    if (r.outcome == DpPeer::Outcome::kRejected && p.to_listener) {
      auto rej = wire::DecodeReject(r.private_data);
      if (!rej.ok()) {
        report_->Violation(seq, "Dial", "a refusal that is not rdmad's reject (" + p.what + "): status " +
                                            std::to_string(r.status) + ", private data [" + Printable(r.private_data, 40) + "]");
      } else {
        const uint16_t reason = static_cast<uint16_t>(rej->reason);
        reason_text = " " + wire::RejectReasonName(rej->reason);
        if (rej->reason == wire::RejectReason::kInternal) {
          report_->Violation(seq, "Dial", "rdmad rejected with INTERNAL (" + p.what + ")");
        } else if (!p.reasons.count(reason)) {
          std::string want;
          for (uint16_t w : p.reasons) want += " " + wire::RejectReasonName(static_cast<wire::RejectReason>(w));
          report_->Violation(seq, "Dial", "rejected" + reason_text + ", PROTOCOL.md says" +
                                              (want.empty() ? std::string(" ESTABLISHED") : want) + " for " + p.what);
        }
      }
    }
    if (p.to_listener && r.outcome == DpPeer::Outcome::kEstablished && !p.may_establish) {
      report_->Violation(seq, "Dial", "rdmad ACCEPTED " + p.what + " (it must refuse it)");
    }
    if (p.to_listener && p.must_establish && r.outcome != DpPeer::Outcome::kEstablished) {
      report_->Violation(seq, "Dial", "a live, unused token was not accepted (" + p.what + "): " + outcome + reason_text);
    }
    if (r.outcome == DpPeer::Outcome::kError && p.to_listener) {
      report_->Violation(seq, "Dial", "no answer from rdmad's listener: " + outcome);
    }
    std::string message;
    if (r.outcome == DpPeer::Outcome::kEstablished && !p.grant.empty() && p.receives > 0) {
      std::string error;
      std::string bytes = peer->FirstMessage(10000, &error);
      if (bytes.empty()) {
        report_->Violation(seq, "Dial", "no grant message within 10 s on " + p.grant + "'s connection: " + error);
      } else {
        auto gm = wire::DecodeGrantMessage(bytes);
        if (!gm.ok()) {
          report_->Violation(seq, "Dial", "a grant message that does not decode: " + std::string(gm.status().message()));
        } else {
          message = std::string(" message ") + wire::GrantMessageTypeName(gm->type);
          if ("grants/" + std::to_string(gm->grant_id) != p.grant) {
            report_->Violation(seq, "Dial", "the grant message names grants/" + std::to_string(gm->grant_id) +
                                                ", the token is " + p.grant + "'s");
          }
        }
      }
    }
    report_->Line(std::to_string(seq) + " -> " + outcome + reason_text + message);
    report_->Count("Dial", r.outcome == DpPeer::Outcome::kEstablished ? "ESTABLISHED"
                           : r.outcome == DpPeer::Outcome::kRejected  ? "REJECTED" + reason_text
                                                                      : "ERROR");
    std::shared_ptr<DpPeer> shared(std::move(peer));
    int reason = 0;
    if (r.outcome == DpPeer::Outcome::kRejected) {
      if (auto rej = wire::DecodeReject(r.private_data); rej.ok()) reason = static_cast<int>(rej->reason);
    }
    const bool established = r.outcome == DpPeer::Outcome::kEstablished;
    return [this, shared, token = p.token, established, reason]() {
      if (shared->connected()) peers_.push_back(shared);  // kept for a while, closed later (politely or not)
      if (token.empty() || !m_.tokens.count(token)) return;
      TokenM& t = m_.tokens[token];
      using R = wire::RejectReason;
      if (established || reason == static_cast<int>(R::kInternal) || reason == static_cast<int>(R::kReplayed)) {
        t.presented = true;  // redeemed (INTERNAL: redeemed, then the connection failed)
      } else if (reason == static_cast<int>(R::kRevoked) || reason == static_cast<int>(R::kExpired)) {
        t.dead = true;  // never usable again
      }
    };
  }, /*dial=*/p.to_listener);  // (a dial to a listener of ours waits for our Accept: never settled on)
}

void Fuzzer::OpClosePeer() {
  if (peers_.empty()) return;
  const size_t i = rng_.Below(peers_.size());
  const bool polite = rng_.Chance(0.6);
  report_->Line("# close peer " + std::to_string(i) + (polite ? " (disconnect)" : " (destroyed while connected)"));
  if (polite) peers_[i]->Disconnect(3000);
  peers_.erase(peers_.begin() + static_cast<long>(i));
}

// Local mischief on the files rdmad maps: truncate or regrow one (rdmad has some of them registered).
void Fuzzer::OpFileMischief() {
  if (files_.empty()) return;
  FileM& f = files_[rng_.Below(files_.size())];
  const std::vector<uint64_t> sizes = {0, 100, 4096, 8192, 12388, 16384};
  const uint64_t size = rng_.Pick(sizes);
  report_->Line("# truncate " + f.path + " to " + std::to_string(size));
  if (truncate(f.path.c_str(), static_cast<off_t>(size)) == 0) f.size = size;
}

// Another tenant's name: every call must answer exactly as for a name of nothing (NOT_FOUND, the same message
// and detail with the name swapped), never a hint that it exists. Each probe is made twice: with the foreign
// name and with a well-formed name of nothing of the same kind; the replies are compared.
void Fuzzer::OpForeign() {
  std::vector<std::string> kinds;
  for (const auto& [k, v] : m_.foreign) {
    if (!v.empty()) kinds.push_back(k);
  }
  if (kinds.empty()) return;
  const std::string kind = rng_.Pick(kinds);
  const std::string foreign = rng_.Pick(m_.foreign[kind]);
  const std::string never = kind + "/" + std::to_string(4000000000ull + rng_.Below(1000000000ull));
  const std::string own_pd = Live("pds").empty() ? "" : rng_.Pick(Live("pds"));
  // One probe: `call` makes the request with the name in the field `field`.
  using Probe = std::function<grpc::Status(const std::string& name, const Expect& e)>;
  std::vector<std::pair<std::string, Probe>> probes;  // (field, call)
  if (kind == "pds") {
    probes.push_back({"name", [&](const std::string& n, const Expect& e) {
      v1::GetPdRequest r; r.set_name(n); v1::ProtectionDomain out;
      return Rpc("GetPd", r, &out, RDMAD_FUZZ_CALL(pds_, GetPd), e); }});
    probes.push_back({"name", [&](const std::string& n, const Expect& e) {
      v1::DeletePdRequest r; r.set_name(n); r.set_cascade(true); r.set_revoke_grants(true); v1::DeletePdResponse out;
      return Rpc("DeletePd", r, &out, RDMAD_FUZZ_CALL(pds_, DeletePd), e); }});
    probes.push_back({"pd", [&](const std::string& n, const Expect& e) {
      v1::RegisterMrRequest r; r.set_pd(n); r.mutable_source()->mutable_anonymous()->set_size(4096);
      r.add_access(v1::LOCAL_WRITE); v1::MemoryRegion out;
      return Rpc("RegisterMr", r, &out, RDMAD_FUZZ_CALL(mrs_, RegisterMr), e); }});
    probes.push_back({"pd", [&](const std::string& n, const Expect& e) {
      v1::AllocMwRequest r; r.set_pd(n); r.set_type(v1::TYPE_2); v1::MemoryWindow out;
      return Rpc("AllocMw", r, &out, RDMAD_FUZZ_CALL(mws_, AllocMw), e); }});
    probes.push_back({"pd", [&](const std::string& n, const Expect& e) {
      v1::CreateQpRequest r; r.set_pd(n); v1::QueuePair out;
      return Rpc("CreateQp", r, &out, RDMAD_FUZZ_CALL(qps_, CreateQp), e); }});
    probes.push_back({"pd", [&](const std::string& n, const Expect& e) {
      v1::IssueConnectTokenRequest r; r.set_pd(n); v1::ConnectToken out;
      return Rpc("IssueConnectToken", r, &out, RDMAD_FUZZ_CALL(tokens_, IssueConnectToken), e); }});
    probes.push_back({"pd", [&](const std::string& n, const Expect& e) {
      v1::CreateCmIdRequest r; r.set_pd(n); v1::CmId out;
      return Rpc("CreateCmId", r, &out, RDMAD_FUZZ_CALL(ids_, CreateCmId), e); }});
    probes.push_back({"pd", [&](const std::string& n, const Expect& e) {
      v1::ListMrsRequest r; r.set_pd(n); v1::ListMrsResponse out;
      return Rpc("ListMrs", r, &out, RDMAD_FUZZ_CALL(mrs_, ListMrs), e); }});
  } else if (kind == "mrs") {
    probes.push_back({"name", [&](const std::string& n, const Expect& e) {
      v1::GetMrRequest r; r.set_name(n); v1::MemoryRegion out;
      return Rpc("GetMr", r, &out, RDMAD_FUZZ_CALL(mrs_, GetMr), e); }});
    probes.push_back({"name", [&](const std::string& n, const Expect& e) {
      v1::DeregisterMrRequest r; r.set_name(n); r.set_revoke_grants(true); v1::DeregisterMrResponse out;
      return Rpc("DeregisterMr", r, &out, RDMAD_FUZZ_CALL(mrs_, DeregisterMr), e); }});
    probes.push_back({"name", [&](const std::string& n, const Expect& e) {
      v1::ReregisterMrRequest r; r.set_name(n); r.add_flags(v1::CHANGE_ACCESS); r.add_access(v1::LOCAL_WRITE);
      Expect x = e; x.rereg_outcome = false;  // a region of nothing: what survived is moot
      v1::ReregisterMrResponse out;
      return Rpc("ReregisterMr", r, &out, RDMAD_FUZZ_CALL(mrs_, ReregisterMr), x); }});
    probes.push_back({"mr", [&](const std::string& n, const Expect& e) {
      v1::IssueGrantRequest r; r.set_mr(n); r.set_length(1); r.set_principal("probe"); v1::IssuedGrant out;
      return Rpc("IssueGrant", r, &out, RDMAD_FUZZ_CALL(grants_, IssueGrant), e); }});
    probes.push_back({"mr", [&](const std::string& n, const Expect& e) {
      v1::ListGrantsRequest r; r.set_mr(n); v1::ListGrantsResponse out;
      return Rpc("ListGrants", r, &out, RDMAD_FUZZ_CALL(grants_, ListGrants), e); }});
  } else if (kind == "qps") {
    probes.push_back({"name", [&](const std::string& n, const Expect& e) {
      v1::GetQpRequest r; r.set_name(n); v1::QueuePair out;
      return Rpc("GetQp", r, &out, RDMAD_FUZZ_CALL(qps_, GetQp), e); }});
    probes.push_back({"name", [&](const std::string& n, const Expect& e) {
      v1::DeleteQpRequest r; r.set_name(n); v1::DeleteQpResponse out;
      return Rpc("DeleteQp", r, &out, RDMAD_FUZZ_CALL(qps_, DeleteQp), e); }});
    probes.push_back({"name", [&](const std::string& n, const Expect& e) {
      v1::ConnectQpRequest r; r.set_name(n); r.mutable_remote()->set_qpn(17); r.mutable_remote()->set_psn(1);
      r.mutable_remote()->set_gid("0000:0000:0000:0000:0000:ffff:0a00:020f"); v1::QueuePair out;
      return Rpc("ConnectQp", r, &out, RDMAD_FUZZ_CALL(qps_, ConnectQp), e); }});
  } else if (kind == "mws") {
    probes.push_back({"name", [&](const std::string& n, const Expect& e) {
      v1::GetMwRequest r; r.set_name(n); v1::MemoryWindow out;
      return Rpc("GetMw", r, &out, RDMAD_FUZZ_CALL(mws_, GetMw), e); }});
    probes.push_back({"name", [&](const std::string& n, const Expect& e) {
      v1::DeallocMwRequest r; r.set_name(n); v1::DeallocMwResponse out;
      return Rpc("DeallocMw", r, &out, RDMAD_FUZZ_CALL(mws_, DeallocMw), e); }});
    probes.push_back({"name", [&](const std::string& n, const Expect& e) {
      v1::InvalidateMwRequest r; r.set_name(n); v1::MemoryWindow out;
      return Rpc("InvalidateMw", r, &out, RDMAD_FUZZ_CALL(mws_, InvalidateMw), e); }});
  } else if (kind == "channels") {
    probes.push_back({"name", [&](const std::string& n, const Expect& e) {
      v1::GetChannelRequest r; r.set_name(n); v1::EventChannel out;
      return Rpc("GetChannel", r, &out, RDMAD_FUZZ_CALL(chans_, GetChannel), e); }});
    probes.push_back({"name", [&](const std::string& n, const Expect& e) {
      v1::DeleteChannelRequest r; r.set_name(n); v1::DeleteChannelResponse out;
      return Rpc("DeleteChannel", r, &out, RDMAD_FUZZ_CALL(chans_, DeleteChannel), e); }});
    probes.push_back({"channel", [&](const std::string& n, const Expect& e) {
      v1::ListCmIdsRequest r; r.set_channel(n); v1::ListCmIdsResponse out;
      return Rpc("ListCmIds", r, &out, RDMAD_FUZZ_CALL(ids_, ListCmIds), e); }});
    if (!own_pd.empty()) {
      probes.push_back({"channel", [&](const std::string& n, const Expect& e) {
        v1::CreateCmIdRequest r; r.set_pd(own_pd); r.set_channel(n); v1::CmId out;
        return Rpc("CreateCmId", r, &out, RDMAD_FUZZ_CALL(ids_, CreateCmId), e); }});
    }
  } else if (kind == "cmids") {
    probes.push_back({"name", [&](const std::string& n, const Expect& e) {
      v1::GetCmIdRequest r; r.set_name(n); v1::CmId out;
      return Rpc("GetCmId", r, &out, RDMAD_FUZZ_CALL(ids_, GetCmId), e); }});
    probes.push_back({"name", [&](const std::string& n, const Expect& e) {
      v1::DeleteCmIdRequest r; r.set_name(n); v1::DeleteCmIdResponse out;
      return Rpc("DeleteCmId", r, &out, RDMAD_FUZZ_CALL(ids_, DeleteCmId), e); }});
    probes.push_back({"name", [&](const std::string& n, const Expect& e) {
      v1::DisconnectRequest r; r.set_name(n); v1::CmId out;
      return Rpc("Disconnect", r, &out, RDMAD_FUZZ_CALL(ids_, Disconnect), e); }});
    probes.push_back({"name", [&](const std::string& n, const Expect& e) {
      v1::ListenRequest r; r.set_name(n); r.mutable_address()->set_address(o_.rdma_addr);
      r.mutable_address()->set_port(40000 + static_cast<uint32_t>(rng_.Below(1000))); v1::CmId out;
      return Rpc("Listen", r, &out, RDMAD_FUZZ_CALL(ids_, Listen), e); }});
    probes.push_back({"name", [&](const std::string& n, const Expect& e) {
      v1::MigrateCmIdRequest r; r.set_name(n); r.set_channel("channels/1"); v1::CmId out;
      return Rpc("MigrateCmId", r, &out, RDMAD_FUZZ_CALL(ids_, MigrateCmId), e); }});
  } else if (kind == "grants") {
    probes.push_back({"name", [&](const std::string& n, const Expect& e) {
      v1::GetGrantRequest r; r.set_name(n); v1::Grant out;
      return Rpc("GetGrant", r, &out, RDMAD_FUZZ_CALL(grants_, GetGrant), e); }});
    probes.push_back({"name", [&](const std::string& n, const Expect& e) {
      v1::RevokeGrantRequest r; r.set_name(n); v1::Grant out;
      return Rpc("RevokeGrant", r, &out, RDMAD_FUZZ_CALL(grants_, RevokeGrant), e); }});
    probes.push_back({"name", [&](const std::string& n, const Expect& e) {
      v1::RenewGrantRequest r; r.set_name(n); r.set_ttl_ms(1000); v1::Grant out;
      return Rpc("RenewGrant", r, &out, RDMAD_FUZZ_CALL(grants_, RenewGrant), e); }});
  }
  if (probes.empty()) return;
  const auto& [field, call] = probes[rng_.Below(probes.size())];
  const grpc::Status a = call(foreign, ForName(Named{foreign, NameClass::kForeign}, field));
  const grpc::Status b = call(never, ForName(Named{never, NameClass::kNever}, field));
  auto swapped = [](std::string text, const std::string& name) {
    for (size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + 6)) {
      text.replace(at, name.size(), "<name>");
    }
    return text;
  };
  auto detail = [&](const grpc::Status& st, const std::string& name) {
    v1::RpcStatus rpc;
    v1::ErrorDetail d;
    if (rpc.ParseFromString(st.error_details()) && rpc.details_size() == 1) rpc.details(0).UnpackTo(&d);
    d.set_field(swapped(d.field(), name));
    return d.SerializeAsString();
  };
  if (a.error_code() != b.error_code() || swapped(a.error_message(), foreign) != swapped(b.error_message(), never) ||
      detail(a, foreign) != detail(b, never)) {
    Violation("another tenant's " + foreign + " answers differently from a name of nothing (" + never + "): " +
              CodeName(a.error_code()) + " '" + Printable(a.error_message(), 200) + "' vs " + CodeName(b.error_code()) +
              " '" + Printable(b.error_message(), 200) + "'");
  }
}

// Races: two to four calls at once on one object and its parents (a region being deregistered while a window
// is bound to it, a grant issued on it and its PD deleted by cascade; a window bound, invalidated and
// deallocated at once; a CM id listened on, migrated and deleted). The requests are made here, in order
// (replayable), and sent from one thread each; any documented reply is fine, and a reconcile afterwards finds
// leftovers. What succeeded is learnt from the lists.
void Fuzzer::OpBurst() {
  SettleDials();
  using Call = std::function<void()>;
  std::vector<std::pair<std::string, Call>> calls;  // (description, call)
  std::mutex mu;
  std::vector<std::string> issued;  // grants issued by the burst (their names are ours)
  auto add = [&](const std::string& method, auto req, auto invoke) {
    const uint64_t seq = ++seq_;
    report_->Line(std::to_string(seq) + " " + method + " (burst) {" + Short(req) + "}");
    calls.push_back({method, [this, method, req, invoke, seq, &mu, &issued]() {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
      auto resp = invoke(&ctx, req);
      const grpc::Status& st = resp.first;
      report_->Line(std::to_string(seq) + " -> " + CodeName(st.error_code()) +
                    (st.ok() ? "" : " " + Printable(st.error_message(), 300)));
      report_->Count(method, st.error_code());
      Expect e;
      e.rereg_outcome = method == "ReregisterMr";
      CheckReply(report_, seq, method, st, e);
      if (st.ok() && !resp.second.empty()) {
        std::lock_guard<std::mutex> l(mu);
        issued.push_back(resp.second);
      }
    }});
  };
  using Out = std::pair<grpc::Status, std::string>;
  const uint64_t pick = rng_.Below(3);
  if (pick == 0 && !m_.mrs.empty()) {
    const std::string mr = rng_.Pick(Live("mrs"));
    const std::string pd = m_.mrs[mr].pd;
    std::vector<std::string> windows;
    for (const auto& [w, wm] : m_.mws) {
      if (wm.pd == pd && wm.type == 1) windows.push_back(w);
    }
    for (int i = 0, n = 2 + static_cast<int>(rng_.Below(3)); i < n; ++i) {
      switch (rng_.Below(5)) {
        case 0: {
          v1::DeregisterMrRequest r;
          r.set_name(mr);
          r.set_revoke_grants(rng_.Chance(0.5));
          add("DeregisterMr", r, [this](grpc::ClientContext* c, const v1::DeregisterMrRequest& q) {
            v1::DeregisterMrResponse o;
            return Out(mrs_->DeregisterMr(c, q, &o), "");
          });
          break;
        }
        case 1: {
          v1::ReregisterMrRequest r;
          r.set_name(mr);
          r.add_flags(v1::CHANGE_ACCESS);
          r.add_access(v1::LOCAL_WRITE);
          r.add_access(v1::REMOTE_READ);
          r.add_access(v1::MW_BIND);
          r.set_revoke_grants(rng_.Chance(0.5));
          add("ReregisterMr", r, [this](grpc::ClientContext* c, const v1::ReregisterMrRequest& q) {
            v1::ReregisterMrResponse o;
            return Out(mrs_->ReregisterMr(c, q, &o), "");
          });
          break;
        }
        case 2: {
          if (windows.empty()) break;
          v1::BindMwRequest r;
          r.set_name(rng_.Pick(windows));
          r.set_mr(mr);
          r.set_length(1 + rng_.Below(m_.mrs[mr].length));
          r.add_access(v1::REMOTE_READ);
          add("BindMw", r, [this](grpc::ClientContext* c, const v1::BindMwRequest& q) {
            v1::MemoryWindow o;
            return Out(mws_->BindMw(c, q, &o), "");
          });
          break;
        }
        case 3: {
          if (m_.grants.size() >= kMaxGrants) break;
          v1::IssueGrantRequest r;
          r.set_mr(mr);
          r.set_length(1);
          r.set_ttl_ms(5000);
          r.set_principal("burst");
          add("IssueGrant", r, [this](grpc::ClientContext* c, const v1::IssueGrantRequest& q) {
            v1::IssuedGrant o;
            grpc::Status st = grants_->IssueGrant(c, q, &o);
            return Out(st, o.grant().name());
          });
          break;
        }
        default: {
          v1::DeletePdRequest r;
          r.set_name(pd);
          r.set_cascade(rng_.Chance(0.7));
          r.set_revoke_grants(rng_.Chance(0.7));
          add("DeletePd", r, [this](grpc::ClientContext* c, const v1::DeletePdRequest& q) {
            v1::DeletePdResponse o;
            return Out(pds_->DeletePd(c, q, &o), "");
          });
          break;
        }
      }
    }
  } else if (pick == 1 && !m_.mws.empty()) {
    const std::string w = rng_.Pick(Live("mws"));
    const MwM wm = m_.mws[w];
    std::vector<std::string> mrs, qps;
    for (const auto& [name, mr] : m_.mrs) {
      if (mr.pd == wm.pd && mr.access.count(v1::MW_BIND)) mrs.push_back(name);
    }
    for (const auto& [name, q] : m_.qps) {
      if (q.pd == wm.pd && q.rts) qps.push_back(name);
    }
    for (int i = 0, n = 2 + static_cast<int>(rng_.Below(3)); i < n; ++i) {
      const uint64_t what = rng_.Below(4);
      if (what <= 1 && !mrs.empty() && (wm.type == 1 || !qps.empty())) {
        v1::BindMwRequest r;
        r.set_name(w);
        r.set_mr(rng_.Pick(mrs));
        r.set_length(1 + rng_.Below(m_.mrs[r.mr()].length));
        r.add_access(v1::REMOTE_READ);
        if (wm.type == 2) r.set_qp(rng_.Pick(qps));
        add("BindMw", r, [this](grpc::ClientContext* c, const v1::BindMwRequest& q) {
          v1::MemoryWindow o;
          return Out(mws_->BindMw(c, q, &o), "");
        });
      } else if (what == 2) {
        v1::InvalidateMwRequest r;
        r.set_name(w);
        add("InvalidateMw", r, [this](grpc::ClientContext* c, const v1::InvalidateMwRequest& q) {
          v1::MemoryWindow o;
          return Out(mws_->InvalidateMw(c, q, &o), "");
        });
      } else {
        v1::DeallocMwRequest r;
        r.set_name(w);
        add("DeallocMw", r, [this](grpc::ClientContext* c, const v1::DeallocMwRequest& q) {
          v1::DeallocMwResponse o;
          return Out(mws_->DeallocMw(c, q, &o), "");
        });
      }
    }
  } else if (!m_.cmids.empty()) {
    const std::string id = rng_.Pick(Live("cmids"));
    for (int i = 0, n = 2 + static_cast<int>(rng_.Below(3)); i < n; ++i) {
      switch (rng_.Below(4)) {
        case 0: {
          v1::ListenRequest r;
          r.set_name(id);
          r.mutable_address()->set_address(o_.rdma_addr);
          r.mutable_address()->set_port(20000 + static_cast<uint32_t>(rng_.Below(20000)));
          add("Listen", r, [this](grpc::ClientContext* c, const v1::ListenRequest& q) {
            v1::CmId o;
            return Out(ids_->Listen(c, q, &o), "");
          });
          break;
        }
        case 1: {
          v1::MigrateCmIdRequest r;
          r.set_name(id);
          r.set_channel(m_.channels.empty() || rng_.Chance(0.3) ? "channels/1" : rng_.Pick(Live("channels")));
          add("MigrateCmId", r, [this](grpc::ClientContext* c, const v1::MigrateCmIdRequest& q) {
            v1::CmId o;
            return Out(ids_->MigrateCmId(c, q, &o), "");
          });
          break;
        }
        case 2: {
          v1::DisconnectRequest r;
          r.set_name(id);
          add("Disconnect", r, [this](grpc::ClientContext* c, const v1::DisconnectRequest& q) {
            v1::CmId o;
            return Out(ids_->Disconnect(c, q, &o), "");
          });
          break;
        }
        default: {
          v1::DeleteCmIdRequest r;
          r.set_name(id);
          add("DeleteCmId", r, [this](grpc::ClientContext* c, const v1::DeleteCmIdRequest& q) {
            v1::DeleteCmIdResponse o;
            return Out(ids_->DeleteCmId(c, q, &o), "");
          });
          break;
        }
      }
    }
  }
  if (calls.size() < 2) return;
  std::vector<std::thread> threads;
  for (auto& [method, call] : calls) threads.emplace_back(call);
  for (auto& t : threads) t.join();
  for (const std::string& g : issued) {
    Created("grants", g);
    m_.grants[g].mr = "";  // learnt again by the reconcile below
  }
  Reconcile();
}

// Request bytes that are no protobuf (or are, by chance) to rdmad's methods (--wire-garbage only).
void Fuzzer::OpWireGarbage() {
  if (!o_.wire_garbage) return;
  static const std::vector<std::string> methods = {
      "/rdmad.v1.ProtectionDomains/CreatePd", "/rdmad.v1.MemoryRegions/RegisterMr", "/rdmad.v1.MemoryWindows/BindMw",
      "/rdmad.v1.CmIds/Connect", "/rdmad.v1.Grants/IssueGrant", "/rdmad.v1.Devices/GetDevice",
      "/rdmad.v1.ProtectionDomains/Nope", "/rdmad.v1.Nope/Nope"};
  const std::string method = rng_.Pick(methods);
  const std::string bytes = rng_.Bytes(rng_.Below(200));
  const uint64_t seq = ++seq_;
  report_->Line(std::to_string(seq) + " raw " + method + " [" + Printable(bytes, 200) + "]");
  grpc::GenericStub stub(channel_);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1), response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  grpc::Status s = done.get_future().get();
  report_->Line(std::to_string(seq) + " -> " + CodeName(s.error_code()) + " " + Printable(s.error_message(), 300));
  report_->Count("raw bytes", s.error_code());
  CheckReply(report_, seq, "raw " + method, s, Expect());
}

// ------------------------------------------------------------------------------------------------------
// Bookkeeping

void Fuzzer::Background(std::function<std::function<void()>()> work, bool dial) {
  background_.push_back(Pending{std::async(std::launch::async, std::move(work)), dial});
}

// Before removing what a dial in flight may depend on (a PD, a region, a grant): the dial's expected answer
// was computed from the model when it was sent, so let it land first.
void Fuzzer::SettleDials() {
  bool any = false;
  for (const Pending& p : background_) any |= p.dial;
  if (!any) return;
  for (auto it = background_.begin(); it != background_.end();) {
    if (it->dial) {
      std::function<void()> apply = it->result.get();
      if (apply) apply();
      it = background_.erase(it);
    } else {
      ++it;
    }
  }
}

void Fuzzer::DrainBackground(bool wait) {
  for (auto it = background_.begin(); it != background_.end();) {
    if (wait || it->result.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      std::function<void()> apply = it->result.get();
      if (apply) apply();
      it = background_.erase(it);
    } else {
      ++it;
    }
  }
}

// Lists everything and compares it with the model: anything listed that this process did not make is a
// leftover (of a failed call); anything made but not listed went with a cascade or the data plane.
void Fuzzer::Reconcile() {
  ReadForeign();
  auto foreign_seen = [&](const std::string& kind, const std::string& name) {
    const auto& f = m_.foreign[kind];
    if (std::find(f.begin(), f.end(), name) != f.end()) {
      Violation("rdmad lists another tenant's " + name + " to this tenant");
      return true;
    }
    return false;
  };
  {
    v1::ListPdsResponse r;
    if (!Rpc("ListPds", v1::ListPdsRequest(), &r, RDMAD_FUZZ_CALL(pds_, ListPds)).ok()) return;
    std::set<std::string> listed;
    for (const auto& pd : r.pds()) {
      listed.insert(pd.name());
      if (!m_.pds.count(pd.name()) && !foreign_seen("pds", pd.name())) {
        if (!adopt_) Violation("rdmad lists " + pd.name() + ", which this process did not make (or deleted)");
        m_.pds[pd.name()] = PdM();
      }
    }
    for (const std::string& name : Keys(m_.pds)) {
      if (!listed.count(name)) Gone("pds", name);
    }
  }
  {
    v1::ListMrsResponse r;
    if (!Rpc("ListMrs", v1::ListMrsRequest(), &r, RDMAD_FUZZ_CALL(mrs_, ListMrs)).ok()) return;
    std::set<std::string> listed;
    for (const auto& mr : r.mrs()) {
      listed.insert(mr.name());
      if (!m_.mrs.count(mr.name()) && !foreign_seen("mrs", mr.name()) && !adopt_) {
        Violation("rdmad lists " + mr.name() + ", which this process did not make (or deregistered)");
      }
      MrM& mm = m_.mrs[mr.name()];
      mm.pd = mr.pd();
      mm.length = mr.length();
      mm.access.clear();
      for (int a : mr.access()) mm.access.insert(a);
    }
    for (const std::string& name : Keys(m_.mrs)) {
      if (!listed.count(name)) Gone("mrs", name);
    }
  }
  {
    v1::ListQpsResponse r;
    if (!Rpc("ListQps", v1::ListQpsRequest(), &r, RDMAD_FUZZ_CALL(qps_, ListQps)).ok()) return;
    std::set<std::string> listed;
    for (const auto& q : r.qps()) {
      listed.insert(q.name());
      if (!q.cm_id().empty()) {
        // A CM id's QP: usable for type 2 binds. Data-plane connections are rdmad's; skip them.
        bool ours = m_.cmids.count(q.cm_id()) != 0;
        if (!ours) continue;
      } else if (!m_.qps.count(q.name()) && !foreign_seen("qps", q.name()) && !adopt_) {
        Violation("rdmad lists " + q.name() + ", which this process did not make (or deleted)");
      }
      QpM& qm = m_.qps[q.name()];
      qm.pd = q.pd();
      qm.qpn = q.local().qpn();
      qm.gid = q.local().gid();
      qm.rts = q.state() == v1::QP_RTS;
      qm.cm = !q.cm_id().empty();
    }
    for (const std::string& name : Keys(m_.qps)) {
      if (!listed.count(name)) Gone("qps", name);
    }
  }
  {
    v1::ListMwsResponse r;
    if (!Rpc("ListMws", v1::ListMwsRequest(), &r, RDMAD_FUZZ_CALL(mws_, ListMws)).ok()) return;
    std::set<std::string> listed;
    for (const auto& w : r.mws()) {
      if (!w.owner().empty()) continue;  // the grants' pool
      listed.insert(w.name());
      if (!m_.mws.count(w.name()) && !foreign_seen("mws", w.name()) && !adopt_) {
        Violation("rdmad lists " + w.name() + ", which this process did not make (or deallocated)");
      }
      MwM& wm = m_.mws[w.name()];
      wm.pd = w.pd();
      wm.type = w.type();
      wm.bound = w.bound();
    }
    for (const std::string& name : Keys(m_.mws)) {
      if (!listed.count(name)) Gone("mws", name);
    }
  }
  {
    v1::ListChannelsResponse r;
    if (!Rpc("ListChannels", v1::ListChannelsRequest(), &r, RDMAD_FUZZ_CALL(chans_, ListChannels)).ok()) return;
    std::set<std::string> listed;
    worker_channels_.clear();
    for (const auto& c : r.channels()) {
      if (c.role() == v1::CHANNEL_WORKER) worker_channels_.push_back(c.name());
      if (c.role() != v1::CHANNEL_USER) continue;
      listed.insert(c.name());
      if (!m_.channels.count(c.name()) && !foreign_seen("channels", c.name())) {
        if (!adopt_) Violation("rdmad lists " + c.name() + ", which this process did not make (or deleted)");
        m_.channels[c.name()] = 1;
      }
    }
    for (const std::string& name : Keys(m_.channels)) {
      if (!listed.count(name)) Gone("channels", name);
    }
  }
  {
    v1::ListCmIdsResponse r;
    if (!Rpc("ListCmIds", v1::ListCmIdsRequest(), &r, RDMAD_FUZZ_CALL(ids_, ListCmIds)).ok()) return;
    std::set<std::string> listed;
    for (const auto& c : r.cm_ids()) {
      if (c.data_plane()) continue;  // rdmad's listener and the connections it accepted
      listed.insert(c.name());
      if (!m_.cmids.count(c.name())) {
        if (!c.listener().empty() && m_.seen.count(c.listener())) {  // (its listener may be gone since)
          m_.cmids[c.name()].incoming = true;  // a connect request on one of our listeners
        } else if (!foreign_seen("cmids", c.name()) && !adopt_) {
          Violation("rdmad lists " + c.name() + ", which this process did not make (or deleted)");
        }
      }
      CmIdM& cm = m_.cmids[c.name()];
      cm.pd = c.pd();
      cm.state = c.state();
    }
    for (const std::string& name : Keys(m_.cmids)) {
      if (!listed.count(name) && !m_.cmids[name].connecting) Gone("cmids", name);
    }
  }
  {
    v1::ListGrantsResponse r;
    if (!Rpc("ListGrants", v1::ListGrantsRequest(), &r, RDMAD_FUZZ_CALL(grants_, ListGrants)).ok()) return;
    std::set<std::string> listed;
    for (const auto& g : r.grants()) {
      listed.insert(g.name());
      if (!m_.grants.count(g.name()) && !foreign_seen("grants", g.name())) {
        bool ours = m_.seen.count(g.name()) != 0;
        if (adopt_) {
          m_.grants[g.name()].mr = g.mr();
        } else if (!ours) {
          Violation("rdmad lists " + g.name() + ", which this process did not issue");
        }
        continue;  // revoked by us meanwhile? then it is ending
      }
      if (m_.grants.count(g.name())) m_.grants[g.name()].mr = g.mr();
      if (m_.grants.count(g.name()) && g.state() == v1::GRANT_ENDED) m_.ended_grants.insert(g.name());
    }
    for (const std::string& name : Keys(m_.grants)) {
      if (!listed.count(name)) Gone("grants", name);
    }
  }
}

void Fuzzer::ReadForeign() {
  if (o_.names_in.empty()) return;
  std::ifstream in(o_.names_in);
  std::string kind, name;
  std::map<std::string, std::vector<std::string>> f;
  while (in >> kind >> name) f[kind].push_back(name);
  m_.foreign = f;
}

void Fuzzer::MakeFiles() {
  const std::string base = o_.shm_dir + "/rdmad-fuzz-" + o_.tag;
  const std::vector<uint64_t> sizes = {8192, 12388, 16384, 5000};
  for (size_t i = 0; i < sizes.size(); ++i) {
    FileM f;
    f.path = base + "-" + std::to_string(i);
    f.size = sizes[i];
    int fd = open(f.path.c_str(), O_CREAT | O_TRUNC | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(f.size)) != 0) {
      std::fprintf(stderr, "api_fuzzer: cannot create %s: %s\n", f.path.c_str(), std::strerror(errno));
      if (fd >= 0) close(fd);
      continue;
    }
    close(fd);
    files_.push_back(f);
  }
  unlink((base + "-link").c_str());
  unlink((base + "-dirlink").c_str());
  unlink((base + "-fifo").c_str());
  unlink((base + "-empty").c_str());
  rmdir((base + "-dir").c_str());
  (void)!symlink("/etc/passwd", (base + "-link").c_str());
  (void)!symlink("/etc", (base + "-dirlink").c_str());
  mkfifo((base + "-fifo").c_str(), 0600);
  close(open((base + "-empty").c_str(), O_CREAT | O_RDWR, 0600));
  mkdir((base + "-dir").c_str(), 0700);
  hostile_paths_ = {base + "-link", base + "-dirlink/passwd", base + "-fifo", base + "-empty", base + "-dir",
                    "/etc/passwd", o_.shm_dir + "/../../etc/passwd", "/dev/zero", "/proc/self/mem", "", "relative/path",
                    o_.shm_dir, o_.shm_dir + "/", o_.shm_dir + "/nonexistent-" + o_.tag,
                    o_.shm_dir + "/" + std::string(5000, 'x'), base + "-0" + std::string(1, '\0') + "/../../etc/passwd",
                    "/sys/kernel/mm/transparent_hugepage/enabled", o_.shm_dir + "/\xe2\x80\xae" + "evil"};
  if (o_.wire_garbage) hostile_paths_.push_back("/dev/shm\xff\xfe/x");
}

void Fuzzer::RemoveFiles() {
  for (const auto& f : files_) unlink(f.path.c_str());
  const std::string base = o_.shm_dir + "/rdmad-fuzz-" + o_.tag;
  unlink((base + "-link").c_str());
  unlink((base + "-dirlink").c_str());
  unlink((base + "-fifo").c_str());
  unlink((base + "-empty").c_str());
  rmdir((base + "-dir").c_str());
}

// ------------------------------------------------------------------------------------------------------
// The run

void Fuzzer::Step() {
  // Weights: creation and use often, deletion less, reads sometimes.
  struct Op {
    int weight;
    void (Fuzzer::*fn)();
  };
  static const std::vector<Op> ops = {
      {1, &Fuzzer::OpListDevices}, {2, &Fuzzer::OpGetDevice}, {1, &Fuzzer::OpListKernelIds},   {5, &Fuzzer::OpCreatePd},     {2, &Fuzzer::OpGetPd},
      {1, &Fuzzer::OpListPds},     {9, &Fuzzer::OpRegisterMr},  {2, &Fuzzer::OpGetMr},        {1, &Fuzzer::OpListMrs},
      {5, &Fuzzer::OpReregisterMr}, {3, &Fuzzer::OpDeregisterMr}, {4, &Fuzzer::OpCreateQp},   {1, &Fuzzer::OpGetQp},
      {4, &Fuzzer::OpConnectQp},   {1, &Fuzzer::OpDeleteQp},    {5, &Fuzzer::OpAllocMw},      {1, &Fuzzer::OpGetMw},
      {1, &Fuzzer::OpListMws},     {9, &Fuzzer::OpBindMw},      {3, &Fuzzer::OpInvalidateMw}, {2, &Fuzzer::OpDeallocMw},
      {2, &Fuzzer::OpCreateChannel}, {1, &Fuzzer::OpGetChannel}, {1, &Fuzzer::OpDeleteChannel}, {4, &Fuzzer::OpCreateCmId},
      {1, &Fuzzer::OpGetCmId},     {1, &Fuzzer::OpListCmIds},   {3, &Fuzzer::OpListen},       {2, &Fuzzer::OpConnect},
      {1, &Fuzzer::OpDisconnect},  {2, &Fuzzer::OpDeleteCmId},  {1, &Fuzzer::OpMigrate},      {1, &Fuzzer::OpWatchEvents},
      {1, &Fuzzer::OpWatchGrants}, {4, &Fuzzer::OpIssueToken},  {6, &Fuzzer::OpIssueGrant},   {1, &Fuzzer::OpIssueGrants},
      {1, &Fuzzer::OpGetGrant},    {1, &Fuzzer::OpListGrants},  {2, &Fuzzer::OpRenewGrant},   {2, &Fuzzer::OpRevokeGrant},
      {8, &Fuzzer::OpDial},        {2, &Fuzzer::OpClosePeer},   {1, &Fuzzer::OpFileMischief}, {3, &Fuzzer::OpForeign},
      {1, &Fuzzer::OpWireGarbage}, {3, &Fuzzer::OpBurst},
  };
  static const int total = [] {
    int t = 0;
    for (const Op& op : ops) t += op.weight;
    return t;
  }();
  // Accept and Reject are drawn separately (they need a waiting connect request to matter).
  if (rng_.Chance(0.04)) return OpAcceptOrReject(rng_.Chance(0.7));
  int pick = static_cast<int>(rng_.Below(static_cast<uint64_t>(total)));
  for (const Op& op : ops) {
    if (pick < op.weight) return (this->*op.fn)();
    pick -= op.weight;
  }
}

void Fuzzer::Cleanup() {
  report_->Line("# cleanup");
  DrainBackground(true);
  for (auto& p : peers_) p->Disconnect(3000);
  peers_.clear();
  Reconcile();
  for (const std::string& g : Keys(m_.grants)) {
    v1::RevokeGrantRequest req;
    req.set_name(g);
    v1::Grant resp;
    Rpc("RevokeGrant", req, &resp, RDMAD_FUZZ_CALL(grants_, RevokeGrant));
  }
  for (const std::string& w : Keys(m_.mws)) {
    v1::DeallocMwRequest req;
    req.set_name(w);
    v1::DeallocMwResponse resp;
    if (Rpc("DeallocMw", req, &resp, RDMAD_FUZZ_CALL(mws_, DeallocMw)).ok()) Gone("mws", w);
  }
  for (const std::string& id : Keys(m_.cmids)) {
    v1::DeleteCmIdRequest req;
    req.set_name(id);
    v1::DeleteCmIdResponse resp;
    if (Rpc("DeleteCmId", req, &resp, RDMAD_FUZZ_CALL(ids_, DeleteCmId)).ok()) Gone("cmids", id);
  }
  for (const std::string& c : Keys(m_.channels)) {
    v1::DeleteChannelRequest req;
    req.set_name(c);
    v1::DeleteChannelResponse resp;
    if (Rpc("DeleteChannel", req, &resp, RDMAD_FUZZ_CALL(chans_, DeleteChannel)).ok()) Gone("channels", c);
  }
  for (const std::string& pd : Keys(m_.pds)) {
    for (int attempt = 0; attempt < 50; ++attempt) {
      v1::DeletePdRequest req;
      req.set_name(pd);
      req.set_cascade(true);
      req.set_revoke_grants(true);
      v1::DeletePdResponse resp;
      grpc::Status s = Rpc("DeletePd", req, &resp, RDMAD_FUZZ_CALL(pds_, DeletePd));
      if (s.ok()) {
        for (const std::string& gone : resp.deleted()) Gone(gone.substr(0, gone.find('/')), gone);
        break;
      }
      if (s.error_code() != StatusCode::ABORTED && s.error_code() != StatusCode::FAILED_PRECONDITION) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  // rdmad releases a data-plane connection when its client leaves: wait (bounded) for that.
  std::string left;
  for (int i = 0; i < 100; ++i) {
    left.clear();
    v1::ListCmIdsResponse ids;
    Rpc("ListCmIds", v1::ListCmIdsRequest(), &ids, RDMAD_FUZZ_CALL(ids_, ListCmIds));
    for (const auto& c : ids.cm_ids()) {
      const bool rdmad_listener = c.data_plane() && c.state() == v1::CM_LISTENING && c.channel() == "channels/1";
      if (!rdmad_listener) left += " " + c.name() + "(" + v1::CmIdState_Name(c.state()) + ")";
    }
    if (left.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (!left.empty()) Violation("after cleanup rdmad still holds CM ids:" + left);
  v1::ListPdsResponse pds;
  Rpc("ListPds", v1::ListPdsRequest(), &pds, RDMAD_FUZZ_CALL(pds_, ListPds));
  v1::ListMrsResponse mrs;
  Rpc("ListMrs", v1::ListMrsRequest(), &mrs, RDMAD_FUZZ_CALL(mrs_, ListMrs));
  v1::ListQpsResponse qps;
  Rpc("ListQps", v1::ListQpsRequest(), &qps, RDMAD_FUZZ_CALL(qps_, ListQps));
  v1::ListMwsResponse mws;
  Rpc("ListMws", v1::ListMwsRequest(), &mws, RDMAD_FUZZ_CALL(mws_, ListMws));
  v1::ListGrantsResponse grants;
  Rpc("ListGrants", v1::ListGrantsRequest(), &grants, RDMAD_FUZZ_CALL(grants_, ListGrants));
  v1::ListChannelsResponse chans;
  Rpc("ListChannels", v1::ListChannelsRequest(), &chans, RDMAD_FUZZ_CALL(chans_, ListChannels));
  std::string rest;
  for (const auto& x : pds.pds()) rest += " " + x.name();
  for (const auto& x : mrs.mrs()) rest += " " + x.name();
  for (const auto& x : qps.qps()) rest += " " + x.name();
  for (const auto& x : mws.mws()) rest += " " + x.name();
  for (const auto& x : grants.grants()) rest += " " + x.name();
  for (const auto& x : chans.channels()) {
    if (x.role() == v1::CHANNEL_USER) rest += " " + x.name();
  }
  if (!rest.empty()) Violation("after cleanup rdmad still holds:" + rest);
  RemoveFiles();
}

// An admin's cleanup (the tenants' fuzzers ran as other users): delete everything rdmad lists.
void Fuzzer::CleanupAll() {
  adopt_ = true;  // as the admin sees it, everything is someone else's: taken over, no violation
  Cleanup();
}

int Fuzzer::Run() {
  if (!report_->Open(o_.log_path)) {
    std::fprintf(stderr, "api_fuzzer: cannot write %s\n", o_.log_path.c_str());
    return 2;
  }
  if (!o_.names_out.empty()) names_out_ = std::fopen(o_.names_out.c_str(), "a");
  report_->Line("# api_fuzzer seed " + std::to_string(o_.seed) + " iterations " + std::to_string(o_.iterations) +
                " target " + o_.target + " tag " + o_.tag);
  std::string why;
  for (int i = 0; i < 100 && !Healthy(&why); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (!Healthy(&why)) {
    std::fprintf(stderr, "api_fuzzer: rdmad at %s is not serving: %s\n", o_.target.c_str(), why.c_str());
    return 3;
  }
  const auto t0 = Clock::now();
  if (o_.cleanup_only) {
    CleanupAll();
    if (!gone_ && !Healthy(&why)) Violation("rdmad is not healthy at the end: " + why);
    const int v = report_->violations();
    std::printf("api_fuzzer: cleanup as %s: %llu calls, %d violation%s (log: %s)\n", o_.tag.c_str(),
                static_cast<unsigned long long>(seq_.load()), v, v == 1 ? "" : "s", o_.log_path.c_str());
    return gone_ ? 3 : v == 0 ? 0 : 1;
  }
  MakeFiles();
  Reconcile();  // learns rdmad's own channels
  for (iteration_ = 1; iteration_ <= o_.iterations && !gone_; ++iteration_) {
    char at[32];
    std::snprintf(at, sizeof at, " at %.3f s", std::chrono::duration<double>(Clock::now() - t0).count());
    report_->Line("## iteration " + std::to_string(iteration_) + at);
    Step();
    DrainBackground(false);
    if (iteration_ % 25 == 0) Reconcile();
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!gone_ && !o_.no_cleanup) {
    Cleanup();
  } else if (!gone_) {
    DrainBackground(true);
    for (auto& p : peers_) p->Disconnect(3000);
    peers_.clear();
    Reconcile();  // a last look: nothing of the other tenant's is visible
  }
  DrainBackground(true);
  peers_.clear();
  if (!gone_ && !Healthy(&why)) Violation("rdmad is not healthy at the end: " + why);
  // Summary.
  std::printf("api_fuzzer: seed %llu, %llu iterations, %llu calls in %.1f s\n",
              static_cast<unsigned long long>(o_.seed), static_cast<unsigned long long>(o_.iterations),
              static_cast<unsigned long long>(seq_.load()), secs);
  for (const auto& [method, codes] : report_->stats()) {
    std::printf("  %-18s", method.c_str());
    for (const auto& [code, n] : codes) std::printf(" %s %d", code.c_str(), n);
    std::printf("\n");
  }
  const int v = report_->violations();
  std::printf("api_fuzzer: %d violation%s (log: %s; replay: --seed %llu --iterations %llu)\n", v, v == 1 ? "" : "s",
              o_.log_path.c_str(), static_cast<unsigned long long>(o_.seed),
              static_cast<unsigned long long>(o_.iterations));
  if (names_out_ != nullptr) std::fclose(names_out_);
  if (gone_) return 3;
  return v == 0 ? 0 : 1;
}

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    std::string v;
    if (a == "--target" && value(&v)) o->target = v;
    else if (a == "--seed" && value(&v)) o->seed = std::strtoull(v.c_str(), nullptr, 10), o->seed_given = true;
    else if (a == "--iterations" && value(&v)) o->iterations = std::strtoull(v.c_str(), nullptr, 10);
    else if (a == "--log" && value(&v)) o->log_path = v;
    else if (a == "--device" && value(&v)) o->device = v;
    else if (a == "--rdma-addr" && value(&v)) o->rdma_addr = v;
    else if (a == "--dp-port" && value(&v)) o->dp_port = std::atoi(v.c_str());
    else if (a == "--shm-dir" && value(&v)) o->shm_dir = v;
    else if (a == "--tag" && value(&v)) o->tag = v;
    else if (a == "--names-out" && value(&v)) o->names_out = v;
    else if (a == "--names-in" && value(&v)) o->names_in = v;
    else if (a == "--cleanup-only") o->cleanup_only = true;
    else if (a == "--no-cleanup") o->no_cleanup = true;
    else if (a == "--no-rdma") o->no_rdma = true;
    else if (a == "--wire-garbage") o->wire_garbage = true;
    else if (a == "--receives" && value(&v)) o->receives = std::atoi(v.c_str());
    else return false;
  }
  return true;
}

}  // namespace
}  // namespace rdmad::fuzz

int main(int argc, char** argv) {
  using namespace rdmad::fuzz;
  signal(SIGPIPE, SIG_IGN);
  Options o;
  if (argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (!ParseArgs(argc, argv, &o)) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  if (!o.seed_given) {
    std::random_device rd;
    o.seed = (static_cast<uint64_t>(rd()) << 32 | rd()) % 1000000000ull;
  }
  if (o.tag.empty()) o.tag = std::to_string(getpid());
  std::printf("api_fuzzer: seed %llu (replay with --seed %llu --iterations %llu)\n",
              static_cast<unsigned long long>(o.seed), static_cast<unsigned long long>(o.seed),
              static_cast<unsigned long long>(o.iterations));
  std::fflush(stdout);
  Report report;
  Fuzzer f(o, &report);
  return f.Run();
}
