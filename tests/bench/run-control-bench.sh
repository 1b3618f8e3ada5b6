#!/usr/bin/env bash
# Runs control_bench inside the Soft-RoCE guest: starts rdmad on rxe0 (gRPC on a unix socket, data-plane
# listener on 10.0.2.15:7475 for the grants: not 7471, where run-cm-bench.sh's rdmad may still be draining
# when run-short.sh runs both in one boot), runs the benchmark (direct verbs, the RPCs and the no-op RPC in
# one process), stops rdmad. Prints figures; judges nothing (exits non-zero only if the benchmark could not
# run).
# Usage (from the host):
#   tests/guest/run-in-guest.sh --timeout 900 [--out DIR] -- tests/bench/run-control-bench.sh [--full]
#       [--perf DIR] [--no-audit] [--rdmad PATH] [--bounds MODE] [--completion-poll-us N] [-- CONTROL_BENCH_ARGS...]
#   default: a short form (RegisterMr at 4 KiB, 1 MiB, 16 MiB; 5 samples per operation, 2 at 16 MiB, 5 first
#     bytes), as CI runs it so it cannot rot; --full: 4 KiB .. 256 MiB, 200 samples (20 at 16 MiB and above),
#     200 window operations, 50 first bytes;
#   --perf DIR: profile the whole machine while the benchmark runs (perf record -a -g, cpu-clock: TCG has no
#     hardware counters) into DIR/perf.data and write DIR/perf-report.txt (by thread and shared object, the
#     hottest symbols by self time, then inclusive of their callees). DIR must be writable from the guest
#     (run-in-guest.sh --out);
#   --rdmad PATH: another rdmad binary (e.g. one built with other flags, to compare two builds in one boot);
#   --no-audit: rdmad with its audit trail off ("audit": ""; on by default, to stdout), to see its share;
#   --completion-poll-us N: rdmad's completion_poll_us (docs/config.md; 0: every completion on the dispatcher);
#   --bounds MODE: rdmad's mw_bounds_region (auto, always, never; docs/config.md). "never" on rxe is UNSAFE
#     (rxe does not enforce window bounds): only to measure rdmad's bind without the bounds region;
#   RDMAD_BENCH_RESULTS=DIR (a dir the guest can write: run-in-guest.sh --out): also write DIR/control.md (the
#     tables, for docs/performance.md) and DIR/control-size.dat (tests/bench/regenerate.sh);
#   -- ARGS: control_bench's arguments instead of the form's (e.g. -- --sizes '' --mw-iters 300 to profile the
#     window operations alone).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$root/bazel-bin
args=(--sizes 4096,1048576,16777216 --iters 5 --big-iters 2 --mw-iters 5 --first-byte-iters 5)
perf_dir=""
audit='"-"'
rdmad=$bin/server/rdmad
bounds=auto
poll=300
while [ $# -gt 0 ]; do
  case "$1" in
    --full) args=(--sizes 4096,1048576,16777216,268435456 --iters 200 --big-iters 20 --mw-iters 200
                  --first-byte-iters 50) ;;
    --perf) perf_dir=$2; shift ;;
    --no-audit) audit='""' ;;
    --rdmad) rdmad=$2; shift ;;
    --bounds) bounds=$2; shift ;;
    --completion-poll-us) poll=$2; shift ;;
    --) shift; args=("$@"); break ;;
    *) echo "usage: $0 [--full] [--perf DIR] [--no-audit] [--rdmad PATH] [--bounds MODE] [--completion-poll-us N] [-- CONTROL_BENCH_ARGS...]" >&2; exit 2 ;;
  esac
  shift
done
work=$(mktemp -d /tmp/rdmad-control-bench.XXXXXX)
cat >"$work/rdmad.json" <<JSON
{ "listen": ["unix:$work/rdmad.sock"], "rdma_listen": ["10.0.2.15:7475"], "log_level": "warning", "audit": $audit,
  "metrics_listen": "127.0.0.1:9475",
  "mw_bounds_region": "$bounds", "completion_poll_us": $poll }
JSON
"$rdmad" --config "$work/rdmad.json" >"$work/rdmad.log" 2>&1 &
rdmad_pid=$!
cleanup() {
  kill "$rdmad_pid" 2>/dev/null || true
  wait "$rdmad_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 1 300); do [ -S "$work/rdmad.sock" ] && break; sleep 0.1; done
[ -S "$work/rdmad.sock" ] || { echo "rdmad did not start:"; cat "$work/rdmad.log"; exit 1; }
perf=()
if [ -n "$perf_dir" ]; then
  command -v perf >/dev/null || { echo "--perf: perf is not installed (Debian: linux-perf)"; exit 1; }
  # Recorded in the guest's own tmpfs (perf mmaps its output, which fails on the 9p mount of --out), copied after.
  perf=(perf record -a -g -e cpu-clock -F 499 -o "$work/perf.data" --)
fi
echo "control_bench ${args[*]} (uname -r $(uname -r), $(nproc) CPUs, rdmad audit: $audit, mw_bounds_region: $bounds, completion_poll_us: $poll)"
# tests/bench/regenerate.sh: the tables as a markdown fragment and the RegisterMr figures for the plot.
results=()
if [ -n "${RDMAD_BENCH_RESULTS:-}" ]; then
  results=(--markdown "$RDMAD_BENCH_RESULTS/control.md" --data-prefix "$RDMAD_BENCH_RESULTS/control"
           --caption "Measured $(date -u +%F), $(uname -r), $(nproc) vCPUs (Soft-RoCE guest), control_bench ${args[*]}, audit: $audit, mw_bounds_region: $bounds")
fi
status=0
"${perf[@]}" "$bin/tests/bench/control_bench" --target "unix:$work/rdmad.sock" --device rxe0 \
  --baseline-addr 10.0.2.15 --metrics 127.0.0.1:9475 "${results[@]}" "${args[@]}" || status=$?
if [ "$status" != 0 ]; then
  echo "control_bench failed ($status); rdmad's log:"
  tail -n 40 "$work/rdmad.log"
fi
if [ -n "$perf_dir" ] && [ -s "$work/perf.data" ]; then
  # Whole reports to files first: `perf report | head` would end in SIGPIPE, fatal under pipefail.
  perf report -i "$work/perf.data" --no-children --stdio -g none --sort comm,dso >"$work/by-dso.txt" 2>/dev/null || true
  perf report -i "$work/perf.data" --no-children --stdio -g none --sort comm,dso,sym >"$work/by-sym.txt" 2>/dev/null ||
    true
  perf report -i "$work/perf.data" --children --stdio -g none --sort comm,sym >"$work/inclusive.txt" 2>/dev/null || true
  {
    echo "== by thread name and shared object (all CPUs, cpu-clock samples, self time)"
    grep -v -e '^#' -e '^$' "$work/by-dso.txt" | head -40 || true
    echo "== by thread name, shared object and symbol (self time)"
    grep -v -e '^#' -e '^$' "$work/by-sym.txt" | head -80 || true
    echo "== by thread name and symbol, inclusive (the time under each function, callees included)"
    grep -v -e '^#' -e '^$' "$work/inclusive.txt" | head -150 || true
  } >"$perf_dir/perf-report.txt"
  cp "$work/perf.data" "$perf_dir/perf.data"
  echo "perf: $perf_dir/perf.data, summary in $perf_dir/perf-report.txt"
fi
exit "$status"
