// rdmactl's input side: pure parsers for what operators type (sizes, numbers, timeouts, resource names,
// access flags, socket addresses, private data, rdma_cm event types, token files) and the "TYPE/NAME"
// argument rewrite.
// No I/O, no client calls.
//
// Every parser returns INVALID_ARGUMENT with a message that quotes the offending text; rdmactl reports those
// as usage errors (exit status 2).
//
// Thread-safety: stateless; every function may be called from any thread.
#ifndef RDMAD_CLI_PARSE_H_
#define RDMAD_CLI_PARSE_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rdmad/v1/rdmad.pb.h"

namespace rdmad::cli {

// ---- Sizes and numbers

// "4096", "4k", "4K", "4KiB", "4KB", "1.5MiB", "2 GiB" -> bytes. Units are case-insensitive and all binary
// (K = KB = KiB = 1024, as the kernel's "kB" in /proc/meminfo); B, K, M, G, T, P, E. A fraction is accepted
// only if it yields a whole number of bytes. Rejects signs, empty text, junk ("1.5.2MB") and overflow.
absl::StatusOr<uint64_t> ParseSize(absl::string_view text);

// An unsigned integer, decimal or 0x-prefixed hexadecimal, at most `max`. No sign, no octal.
absl::StatusOr<uint64_t> ParseUint(absl::string_view text, uint64_t max = UINT64_MAX);

// "30s", "500ms", "2m", "1m30s" (absl::ParseDuration) or a plain number of seconds. Must be > 0 and finite;
// rounded up to whole milliseconds.
absl::StatusOr<std::chrono::milliseconds> ParseTimeout(absl::string_view text);

// ---- Resource names

enum class Kind { kDevice, kPd, kMr, kMw, kQp, kChannel, kCmId, kToken, kGrant, kTenant };

struct KindInfo {
  Kind kind;
  const char* singular;  // "mr": the noun on the command line and in messages ("mr/17 registered")
  const char* plural;    // "mrs": the prefix of the API name ("mrs/17")
  const char* title;     // "memory region"
  bool numeric;          // names are PLURAL/N with N > 0 (all but devices and tenants)
};

const KindInfo& Info(Kind kind);
const std::vector<KindInfo>& AllKinds();

// "mr", "mrs", "MR" -> kMr; anything else -> nullopt.
std::optional<Kind> KindFromNoun(absl::string_view noun);

// The API name of a resource of `kind` from what an operator typed. With kind kMr: "17", "mr/17",
// "mrs/17" -> "mrs/17" (leading zeros dropped). With kDevice: "rxe0", "device/rxe0", "devices/rxe0" ->
// "devices/rxe0". With kTenant: "app", "tenant/app", "tenants/app" -> "tenants/app" (letters, digits, '.', '_'
// and '-' only, as rdmad's config allows). A name of another kind ("pds/1" for an mr) or a malformed one is an
// error.
absl::StatusOr<std::string> NormalizeName(Kind kind, absl::string_view text);

// kubectl's TYPE/NAME form: in the argument list (without argv[0]) the first word after the verb is the
// noun; if it is "NOUN/NAME" with a known noun it is split into "NOUN" "NOUN/NAME", so "get mrs/17" parses
// as "get mrs mrs/17". Options before the verb or the noun are skipped; `valued_options` lists the options
// there that take a separate value ("--server", "-o", ...), whose value is skipped too.
// Indexes in `args` of the first `max` bare words (not options, not values of `valued_options`), stopping at
// "--": the verb and the noun.
std::vector<size_t> BareWords(const std::vector<std::string>& args, const std::set<std::string>& valued_options,
                              size_t max);
std::vector<std::string> SplitTypeSlashName(std::vector<std::string> args, const std::set<std::string>& valued_options);

// ---- GIDs

// A GID in any IPv6 text form ("fe80::1", the full 8-group form) or a plain IPv4 address (RoCEv2: mapped to
// ::ffff:a.b.c.d) -> the API's form, 8 groups of 4 lower-case hex digits.
absl::StatusOr<std::string> NormalizeGid(absl::string_view text);

// ---- Access flags

// "local-write,remote-read" -> [LOCAL_WRITE, REMOTE_READ]. Case-insensitive; '_' and '-' are the same
// ("LOCAL_WRITE" works); spaces around items are ignored; duplicates are dropped. "none" (alone) is the
// empty list. An unknown or empty item is an error naming it and listing the known flags.
absl::StatusOr<std::vector<v1::Access>> ParseAccess(absl::string_view text);

// The command-line spelling of one flag ("local-write"); "access(N)" for values this build does not know.
std::string AccessName(int access);

// ---- rdma_cm

// "10.0.2.15:7471" or "[fe80::1]:7471" -> {address, port}. The address is numeric (IPv4, or IPv6 in
// brackets; "0.0.0.0" and "[::]" mean every address of this host); the port is required, 1..65535.
absl::StatusOr<v1::SocketAddress> ParseSocketAddress(absl::string_view text);

// Private data given in hex: "0a0b0c", "0x0A0B0C" (an even number of hex digits, at least one byte; ':'
// between bytes is allowed: "0a:0b:0c") -> the bytes.
absl::StatusOr<std::string> ParseHexBytes(absl::string_view text);

// Event types, comma-separated, any case, '-' or '_': "established", "connect-request",
// "RDMA_CM_EVENT_DISCONNECTED" -> full names ("RDMA_CM_EVENT_ESTABLISHED", ...). An unknown name is an
// error listing the known ones.
absl::StatusOr<std::vector<std::string>> ParseEventTypes(absl::string_view text);
// The short names of every rdma_cm event type, in librdmacm's order ("ADDR_RESOLVED", ...).
const std::vector<std::string>& EventTypeNames();

// ---- grants

// A connection token from a file's contents (`--token-file`): the raw bytes `rdmactl grant --token-file`
// writes (1 to 56 bytes: what a connect request carries), or the same bytes as hex text ("5244544b...", as
// `rdmactl grant` prints them; whitespace around it, ':' between bytes and a 0x prefix allowed). Text made
// only of hex digits is read as hex: a raw rdmad token never is (it starts with "RDTK").
absl::StatusOr<std::string> TokenFromFile(absl::string_view contents);

}  // namespace rdmad::cli

#endif  // RDMAD_CLI_PARSE_H_
