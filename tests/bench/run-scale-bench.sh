#!/usr/bin/env bash
# Runs scale_bench inside the Soft-RoCE guest: starts rdmad on rxe0 (gRPC on a unix socket, the data-plane
# listener on 10.0.2.15:7476 because IssueGrant needs one; audit trail off: its cost is per call, not per
# object, and run-control-bench.sh --no-audit measures it), runs the benchmark with rdmad's pid (for its
# VmRSS), stops rdmad. Prints figures; judges nothing (exits non-zero only if the benchmark could not run).
# Usage (from the host):
#   [RDMAD_GUEST_MEM=4G] tests/guest/run-in-guest.sh --timeout 900 [--out DIR] -- \
#       tests/bench/run-scale-bench.sh [--full] [--tenancy] [-- SCALE_BENCH_ARGS...]
#   default: a short form, as CI runs it so it cannot rot: 100 and 1000 MRs, 100 and 500 grants, 10 and 100
#     CM ids, 100 windows, 1 and 8 clients (1 s each), 15 samples per operation and count (about a minute);
#   --full: the full sizes: 1k, 10k, 100k MRs (400 MiB pinned in rdmad, as much again in the benchmark's
#     direct baseline, one after the other: run it with RDMAD_GUEST_MEM=4G and --timeout 3600), 1k and 10k
#     grants, 100 and 1000 CM ids, 1000 windows, 1, 8 and 64 clients, 300 samples;
#   --tenancy: rdmad with the caller (uid 0 on the unix socket) in a tenant with quotas on MRs, windows, QPs,
#     CM ids, grants and tokens (limits far above the counts), so that every creation checks its quota;
#   -- ARGS: scale_bench's arguments instead of the form's (e.g. -- --mrs 1000,10000 --grants '' ...).
# With RDMAD_BENCH_RESULTS=DIR (a directory writable from the guest, e.g. run-in-guest.sh's --out): also writes
# DIR/scale.md (the tables as a markdown fragment) and DIR/scale-{mrs,grants,cmids,clients}.dat for
# tests/bench/plots/scale-*.gp.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$root/bazel-bin
form=short
args=(--mrs 100,1000 --grants 100,500 --cm-ids 10,100 --mws 100 --clients 1,8 --client-seconds 1
      --samples 15 --list-samples 3)
tenancy=0
while [ $# -gt 0 ]; do
  case "$1" in
    --full) form=full
            args=(--mrs 1000,10000,100000 --grants 1000,10000 --cm-ids 100,1000 --mws 1000 --clients 1,8,64
                  --client-seconds 10 --samples 300 --list-samples 10) ;;
    --tenancy) tenancy=1 ;;
    --) shift; form=custom; args=("$@"); break ;;
    *) echo "usage: $0 [--full] [--tenancy] [-- SCALE_BENCH_ARGS...]" >&2; exit 2 ;;
  esac
  shift
done
work=$(mktemp -d /tmp/rdmad-scale-bench.XXXXXX)
tenants=""
if [ "$tenancy" = 1 ]; then
  tenants=', "unix_principals": [{"uid": 0, "principal": "bench"}], "tenants": [{"name": "bench",
    "principals": ["bench"], "quotas": {"mrs": 1000000000, "mws": 1000000000, "qps": 1000000000,
    "cm_ids": 1000000000, "grants": 1000000000, "tokens": 1000000000}}]'
fi
cat >"$work/rdmad.json" <<JSON
{ "listen": ["unix:$work/rdmad.sock"], "rdma_listen": ["10.0.2.15:7476"], "log_level": "warning", "audit": ""$tenants }
JSON
ulimit -l unlimited 2>/dev/null || true  # 100k registrations of 4 KiB pin 400 MiB (rdmad runs as root here)
"$bin/server/rdmad" --config "$work/rdmad.json" >"$work/rdmad.log" 2>&1 &
rdmad_pid=$!
cleanup() {
  kill "$rdmad_pid" 2>/dev/null || true
  wait "$rdmad_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 1 300); do [ -S "$work/rdmad.sock" ] && break; sleep 0.1; done
[ -S "$work/rdmad.sock" ] || { echo "rdmad did not start:"; cat "$work/rdmad.log"; exit 1; }
# The device's limits that bound these counts (rxe's defaults; ibv_devinfo -v).
limits=$(ibv_devinfo -v -d rxe0 2>/dev/null | grep -E '^\s+(max_mr|max_mw|max_qp|max_mr_size):' |
  awk '{printf "%s%s %s", sep, $1, $2; sep=", "}' || true)
quotas=""
[ "$tenancy" = 1 ] && quotas=", tenancy with quotas"
echo "scale_bench ($form form$quotas) ${args[*]}; rxe0: $limits; $(nproc) vCPUs," \
  "$(awk '/MemTotal/ {print int($2/1024) " MiB"}' /proc/meminfo)"
what="tests/bench/run-scale-bench.sh ($form form$quotas); rxe0 ${limits//:/}"
out=()
if [ -n "${RDMAD_BENCH_RESULTS:-}" ]; then
  out=(--markdown "$RDMAD_BENCH_RESULTS/scale.md" --data-prefix "$RDMAD_BENCH_RESULTS/scale")
fi
status=0
"$bin/tests/bench/scale_bench" --target "unix:$work/rdmad.sock" --device rxe0 --rdmad-pid "$rdmad_pid" \
  --what "$what" "${out[@]}" "${args[@]}" || status=$?
if [ "$status" != 0 ]; then
  echo "scale_bench failed ($status); rdmad's log:"
  tail -n 40 "$work/rdmad.log"
fi
exit "$status"
