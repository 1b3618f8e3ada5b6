#!/usr/bin/env bash
# Runs cm_bench inside the Soft-RoCE guest: starts rdmad (data-plane listener on 10.0.2.15:7471) and
# `rping -s -P` (the baseline listener), runs the benchmark, stops both. Prints figures; judges nothing
# (exits non-zero only if the benchmark could not run).
# Usage (from the host): tests/guest/run-in-guest.sh -- tests/bench/run-cm-bench.sh [--full]
#   default: a short form (20 connections each), as CI runs it so it cannot rot; --full: 500.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$root/bazel-bin
n=20
[ "${1:-}" = --full ] && n=500
work=$(mktemp -d /tmp/rdmad-bench.XXXXXX)
cat >"$work/rdmad.json" <<JSON
{ "listen": ["unix:$work/rdmad.sock"], "rdma_listen": ["10.0.2.15:7471"], "cm_workers": 2, "log_level": "warning" }
JSON
"$bin/server/rdmad" --config "$work/rdmad.json" >"$work/rdmad.log" 2>&1 &
rdmad_pid=$!
rping -s -P -a 10.0.2.15 -p 7901 >/dev/null 2>&1 &
rping_pid=$!
trap 'kill $rdmad_pid $rping_pid 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 1 300); do [ -S "$work/rdmad.sock" ] && break; sleep 0.1; done
sleep 1  # rping -s binds asynchronously
results=()  # tests/bench/regenerate.sh: the table as a markdown fragment
[ -n "${RDMAD_BENCH_RESULTS:-}" ] && results=(--markdown "$RDMAD_BENCH_RESULTS/cm.md"
  --caption "Measured $(date -u +%F), $(uname -r), $(nproc) vCPUs (Soft-RoCE guest), $n connections each")
"$bin/tests/bench/cm_bench" --target "unix:$work/rdmad.sock" --addr 10.0.2.15 --connections "$n" "${results[@]}"
