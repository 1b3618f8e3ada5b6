#!/usr/bin/env bash
# Runs reg_bench inside the Soft-RoCE guest: registering large anonymous regions on rxe0, one ibv_reg_mr of
# the whole beside parallel pre-faulting (MADV_POPULATE_WRITE in chunks across threads, then one ibv_reg_mr),
# parallel chunk MRs, transparent and reserved 2 MiB huge pages, and RegisterMr through rdmad (started here
# on a unix socket).
# Prints figures; judges nothing (exits non-zero only if the benchmark could not run).
# Usage (from the host):
#   [RDMAD_GUEST_MEM=4G] tests/guest/run-in-guest.sh --timeout 900 [--out DIR] -- tests/bench/run-reg-bench.sh
#       [--full] [--thp-mode MODE] [-- REG_BENCH_ARGS...]
#   default: a short form as CI runs it (64 MiB, threads 1 and 2, 1 run each, huge pages): well under a minute;
#   --full: 256 MiB, 1 GiB and the largest the guest allows (MemAvailable less 512 MiB of headroom for rdmad
#     and the page tables, down to a multiple of 256 MiB: about 3 GiB with RDMAD_GUEST_MEM=4G), threads 1, 2
#     and 4 (the guest has 2 vCPUs: 4 threads oversubscribe them), 2 runs each, huge pages at every size where
#     the kernel can reserve them (else the row says skipped); about 8 minutes under TCG with 4G;
#   --thp-mode MODE: the guest kernel's transparent huge pages for the run (restored after): madvise (the
#     default: plain mappings get 4 KiB pages, so "whole" is the 4 KiB baseline and "thp whole" shows what
#     advising MADV_HUGEPAGE gains), always (the guest kernel's own default: every large anonymous mapping
#     may get THP, advised or not), never, or keep;
#   RDMAD_BENCH_RESULTS=DIR (a dir the guest can write: run-in-guest.sh --out): also write DIR/reg.md (the
#     tables, for docs/performance.md), DIR/reg-size.dat and DIR/reg-threads.dat (tests/bench/plots/reg-*.gp);
#   -- ARGS: reg_bench's arguments instead of the form's.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$root/bazel-bin
args=(--sizes $((64 << 20)) --threads 1,2 --reps 1 --hugepages)
thp_set=madvise
while [ $# -gt 0 ]; do
  case "$1" in
    --full)
      avail_mib=$(awk '/MemAvailable/ { print int($2 / 1024) }' /proc/meminfo)
      largest=$(( (avail_mib - 512) / 256 * 256 ))
      sizes="$((256 << 20)),$((1 << 30))"
      [ "$largest" -gt 1024 ] && sizes="$sizes,$((largest << 20))"
      args=(--sizes "$sizes" --threads 1,2,4 --reps 2 --hugepages) ;;
    --thp-mode) thp_set=$2; shift ;;
    --) shift; args=("$@"); break ;;
    *) echo "usage: $0 [--full] [--thp-mode MODE] [-- REG_BENCH_ARGS...]" >&2; exit 2 ;;
  esac
  shift
done
work=$(mktemp -d /tmp/rdmad-reg-bench.XXXXXX)
thp_file=/sys/kernel/mm/transparent_hugepage/enabled
thp_before=$(sed 's/.*\[\(.*\)\].*/\1/' "$thp_file" 2>/dev/null || echo unknown)
if [ "$thp_set" != keep ] && [ -w "$thp_file" ]; then echo "$thp_set" >"$thp_file"; fi
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  if [ "$thp_before" != unknown ] && [ -w "$thp_file" ]; then echo "$thp_before" >"$thp_file" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
cat >"$work/rdmad.json" <<JSON
{ "listen": ["unix:$work/rdmad.sock"], "log_level": "warning", "audit": "" }
JSON
"$bin/server/rdmad" --config "$work/rdmad.json" >"$work/rdmad.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 300); do [ -S "$work/rdmad.sock" ] && break; sleep 0.1; done
[ -S "$work/rdmad.sock" ] || { echo "rdmad did not start:"; cat "$work/rdmad.log"; exit 1; }
what="reg_bench ${args[*]}"
thp_mode=$(sed 's/.*\[\(.*\)\].*/\1/' "$thp_file" 2>/dev/null || echo unknown)
echo "$what (uname -r $(uname -r), $(nproc) CPUs, $(awk '/MemTotal/ { print int($2 / 1024) }' /proc/meminfo) MiB, THP $thp_mode)"
results=()
if [ -n "${RDMAD_BENCH_RESULTS:-}" ]; then
  results=(--markdown "$RDMAD_BENCH_RESULTS/reg.md" --data-prefix "$RDMAD_BENCH_RESULTS/reg"
           --caption "Measured $(date -u +%F), $(uname -r), $(nproc) vCPUs, $(awk '/MemTotal/ { print int($2 / 1024) }' /proc/meminfo) MiB (Soft-RoCE guest), THP $thp_mode, $what")
fi
status=0
"$bin/tests/bench/reg_bench" --device rxe0 --target "unix:$work/rdmad.sock" "${results[@]}" "${args[@]}" ||
  status=$?
if [ "$status" != 0 ]; then
  echo "reg_bench failed ($status); rdmad's log:"
  tail -n 40 "$work/rdmad.log"
fi
exit "$status"
