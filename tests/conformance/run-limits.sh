#!/usr/bin/env bash
# Runs inside the Soft-RoCE guest (run-operations.sh calls it): rdmad on rxe0 under hostile load, with caps.
# rdmad starts under prlimit (RLIMIT_NOFILE 1024) with two tenants on its unix socket (uid 1000 -> tenant t,
# small quotas; uid 1001 -> tenant u, no quotas of its own, so default_quotas apply) and small rdmad-wide
# limits. limits_test then runs in phases: as uid 1000, as uid 1001, as root (an admin: the global limits and
# 12 watch streams that never read, with a 64-event buffer each, while 300 grants come and go), and, after prlimit --pid has lowered rdmad's
# RLIMIT_NOFILE to a few descriptors above its use, channels past the descriptors. Between phases and at the
# end this script checks that rdmad answers and that its descriptors, threads, RSS and VmPin stay within the
# bounds below; after SIGTERM, that it exited cleanly and `rdma resource show` is as before.
# Usage: run-limits.sh OUT_DIR   (writes limits.xml, limits_bounds.xml, limits-rdmad.log, limits-*.txt)
# Binaries: bazel-bin/ of this checkout, or $RDMAD_BIN_DIR.
set -uo pipefail

out=${1:?usage: run-limits.sh OUT_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${RDMAD_BIN_DIR:-$root/bazel-bin}
junit=$root/tests/lib/junit-case.sh
work=$(mktemp -d /tmp/rdmad-limits.XXXXXX)
chmod 755 "$work"
sock=$work/rdmad.sock
mkdir -p "$out"
rm -f "$out"/limits*.xml
# The data-plane listener (tokens and grants need one) on the guest's address.
addr=$(ip -4 -o addr show 2>/dev/null | awk '$2 != "lo" {print $4; exit}' | cut -d/ -f1)
# Bounds on rdmad's growth from its idle start to any point of the run (after each phase's cleanup).
max_fd_growth=8 max_thread_growth=4 max_rss_growth_kib=$((96 * 1024))

cat >"$work/rdmad.json" <<JSON
{
  "listen": ["unix:$sock"],
  "unix_socket": {"mode": "0666"},
  "admins": ["unix:uid:0"],
  "tenants": [
    {"name": "t", "principals": ["unix:uid:1000"],
     "quotas": {"channels": 3, "cm_ids": 4, "tokens": 4, "watch_streams": 4, "connections": 2,
                "pinned_bytes": 196608}},
    {"name": "u", "principals": ["unix:uid:1001"]}
  ],
  "default_quotas": {"tokens": 8, "channels": 2, "cm_ids": 8, "watch_streams": 4, "grants": 8},
  "limits": {"channels": 8, "watch_streams": 12, "cm_ids": 16, "tokens": 16, "connections": 8, "grants": 8},
  "allowed_file_roots": ["/dev/shm"],
  "rdma_listen": ["${addr:-10.0.2.15}:7473"],
  "watch_buffer": 64,
  "audit": "$out/limits-audit.jsonl",
  "log_level": "info"
}
JSON
cp "$work/rdmad.json" "$out/limits-rdmad.json"

rdma resource show >"$out/limits-resources-before.txt" 2>&1 || true
prlimit --nofile=1024 "$bin/server/rdmad" --config "$work/rdmad.json" >"$out/limits-rdmad.log" 2>&1 &
pid=$!
cleanup() { kill -KILL "$pid" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
for _ in $(seq 1 300); do [ -S "$sock" ] && break; sleep 0.1; done
# Serving (its threads started and its devices open) before the start is measured.
for _ in $(seq 1 100); do "$bin/cli/rdmactl" --server "unix:$sock" get pds >/dev/null 2>&1 && break; sleep 0.1; done

fds() { ls "/proc/$pid/fd" 2>/dev/null | wc -l; }
threads() { awk '/^Threads:/ {print $2}' "/proc/$pid/status" 2>/dev/null; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null; }
pin_kib() { awk '/^VmPin:/ {print $2}' "/proc/$pid/status" 2>/dev/null; }
fd0=$(fds) th0=$(threads) rss0=$(rss_kib) pin0=$(pin_kib)
echo "rdmad at start: $fd0 descriptors, $th0 threads, RSS $rss0 KiB, VmPin $pin0 KiB" | tee "$out/limits-usage.txt"

rc=0
bounds_problem=""
check_bounds() {  # LABEL: rdmad alive and within the bounds, after a phase cleaned up
  local fd th rss pin
  if ! kill -0 "$pid" 2>/dev/null; then
    bounds_problem="${bounds_problem:-rdmad died during $1}"
    return
  fi
  fd=$(fds) th=$(threads) rss=$(rss_kib) pin=$(pin_kib)
  echo "after $1: $fd descriptors, $th threads, RSS $rss KiB, VmPin $pin KiB" | tee -a "$out/limits-usage.txt"
  ((fd <= fd0 + max_fd_growth)) || bounds_problem="${bounds_problem:-after $1: $fd descriptors (start $fd0)}"
  ((th <= th0 + max_thread_growth)) || bounds_problem="${bounds_problem:-after $1: $th threads (start $th0)}"
  ((rss <= rss0 + max_rss_growth_kib)) || bounds_problem="${bounds_problem:-after $1: RSS $rss KiB (start $rss0)}"
  ((pin <= pin0)) || bounds_problem="${bounds_problem:-after $1: VmPin $pin KiB (start $pin0): pinned memory kept}"
}

phase() {  # NAME XML USER FILTER [ENV...]
  local name=$1 xml=$2 user=$3 filter=$4
  shift 4
  local as=()
  [ "$user" = root ] || as=(setpriv --reuid="$user" --regid="$user" --clear-groups)
  echo "=== limits: $name (as $user) ==="
  # The XML is written where the test's user may write, then copied to OUT_DIR.
  local results
  results=$(mktemp -d "$work/results.XXXXXX")
  chmod 777 "$results"
  env RDMAD_TARGET="unix:$sock" RDMAD_DEVICE=rxe0 RDMAD_PID="$pid" "$@" "${as[@]}" \
    "$bin/tests/conformance/limits_test" --gtest_filter="$filter" --gtest_output="xml:$results/$xml" || rc=1
  cp "$results/$xml" "$out/$xml" 2>/dev/null || echo "limits: $name wrote no $xml" >&2
  check_bounds "$name"
}

phase "tenant quotas" limits_tenant.xml 1000 'TenantQuotas.*'
phase "default quotas" limits_default.xml 1001 'DefaultQuotas.*'
phase "global limits" limits_global.xml root 'GlobalLimits.*'

# Descriptors: rdmad's RLIMIT_NOFILE lowered to its use plus 8 (a channel takes three): channels past it are
# refused with RESOURCE_EXHAUSTED naming the errno, and rdmad keeps answering. The limit is restored after.
prlimit --pid "$pid" --nofile=$(($(fds) + 8)):1024
phase "descriptors (RLIMIT_NOFILE lowered)" limits_os.xml root 'OsLimits.*' RDMAD_LIMIT_CHANNELS=64
prlimit --pid "$pid" --nofile=1024:1024

# Shutdown: SIGTERM, a clean exit, and the device's objects as before.
kill -TERM "$pid"
shutdown_rc=0
wait "$pid" || shutdown_rc=$?
rdma resource show >"$out/limits-resources-after.txt" 2>&1 || true
[ "$shutdown_rc" -eq 0 ] || bounds_problem="${bounds_problem:-rdmad exited with status $shutdown_rc after SIGTERM}"
diff -q "$out/limits-resources-before.txt" "$out/limits-resources-after.txt" >/dev/null ||
  bounds_problem="${bounds_problem:-device resources differ before start and after shutdown: $(diff "$out/limits-resources-before.txt" "$out/limits-resources-after.txt" | tr '\n' ' ')}"
"$junit" "$out/limits_bounds.xml" Limits RdmadStaysWithinItsBoundsAndReleasesEverything "$bounds_problem"
[ -z "$bounds_problem" ] || { echo "limits: $bounds_problem" >&2; rc=1; }
exit "$rc"
