#!/usr/bin/env bash
# Runs control_bench inside the Soft-RoCE guest: starts rdmad on rxe0 (gRPC on a unix socket, data-plane
# listener on 10.0.2.15:7471 for the grants), runs the benchmark (direct verbs, the RPCs and the no-op RPC in
# one process), stops rdmad. Prints figures; judges nothing (exits non-zero only if the benchmark could not
# run).
# Usage (from the host): tests/guest/run-in-guest.sh --timeout 900 -- tests/bench/run-control-bench.sh [--full]
#   default: a short form (RegisterMr at 4 KiB, 1 MiB, 16 MiB; 5 samples per operation, 2 at 16 MiB, 5 first
#   bytes), as CI runs it so it cannot rot; --full: 4 KiB .. 256 MiB, 200 samples (20 at 16 MiB and above),
#   200 window operations, 50 first bytes.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$root/bazel-bin
args=(--sizes 4096,1048576,16777216 --iters 5 --big-iters 2 --mw-iters 5 --first-byte-iters 5)
if [ "${1:-}" = --full ]; then
  args=(--sizes 4096,1048576,16777216,268435456 --iters 200 --big-iters 20 --mw-iters 200 --first-byte-iters 50)
fi
work=$(mktemp -d /tmp/rdmad-control-bench.XXXXXX)
cat >"$work/rdmad.json" <<JSON
{ "listen": ["unix:$work/rdmad.sock"], "rdma_listen": ["10.0.2.15:7471"], "log_level": "warning" }
JSON
"$bin/server/rdmad" --config "$work/rdmad.json" >"$work/rdmad.log" 2>&1 &
rdmad_pid=$!
trap 'kill $rdmad_pid 2>/dev/null || true; wait $rdmad_pid 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 1 300); do [ -S "$work/rdmad.sock" ] && break; sleep 0.1; done
[ -S "$work/rdmad.sock" ] || { echo "rdmad did not start:"; cat "$work/rdmad.log"; exit 1; }
echo "control_bench ${args[*]} (uname -r $(uname -r), $(nproc) CPUs)"
status=0
"$bin/tests/bench/control_bench" --target "unix:$work/rdmad.sock" --device rxe0 --baseline-addr 10.0.2.15 \
  "${args[@]}" || status=$?
if [ "$status" != 0 ]; then
  echo "control_bench failed ($status); rdmad's log:"
  tail -n 40 "$work/rdmad.log"
fi
exit "$status"
