#!/usr/bin/env bash
# Runs inside the Soft-RoCE guest (tests/guest/run-in-guest.sh): the operations suite in one boot.
#   1. drain_test: SIGTERM's drain (each case starts its own rdmad), then `rdma resource show` as before;
#   2. deploy/host-rxe.sh: Soft-RoCE made on a host whose kernel has rdma_rxe (rxe0 removed, made again);
#   3. RLIMIT_MEMLOCK: rdmad without CAP_IPC_LOCK under a 2 MiB limit reports it and refuses past it;
#   4. the metrics suite (run-metrics.sh), the restart-recovery suite (run-recovery.sh) and the limits suite
#      (run-limits.sh: caps, floods and OS limits), when present.
# Usage: run-operations.sh OUT_DIR
#   OUT_DIR receives drain.xml, drain_resources.xml, host_rxe.xml, memlock.xml, and what the sub-suites
#   write there.
# Binaries: bazel-bin/ of this checkout, or $RDMAD_BIN_DIR.
set -uo pipefail

out=${1:?usage: run-operations.sh OUT_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${RDMAD_BIN_DIR:-$root/bazel-bin}
junit=$root/tests/lib/junit-case.sh
mkdir -p "$out"
rc=0
addr=$(ip -4 -o addr show 2>/dev/null | awk '$2 != "lo" {print $4; exit}' | cut -d/ -f1)

# ---- 1. drain
rdma resource show >"$out/drain-resources-before.txt" 2>&1 || true
RDMAD_BIN=$bin/server/rdmad RDMAD_GUEST_ADDR=${addr:-10.0.2.15} \
  "$bin/tests/conformance/drain_test" --gtest_output="xml:$out/drain.xml" 2>&1 | tee "$out/drain.log" || true
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
sleep 1  # the stubborn clients' connections are torn down by the kernel
rdma resource show >"$out/drain-resources-after.txt" 2>&1 || true
problem=""
diff -q "$out/drain-resources-before.txt" "$out/drain-resources-after.txt" >/dev/null ||
  problem="device resources differ before and after the drain cases (forced exits included): $(diff "$out/drain-resources-before.txt" "$out/drain-resources-after.txt" | tr '\n' ' ')"
"$junit" "$out/drain_resources.xml" Drain NothingLeftOnTheDeviceAfterDrainsAndForcedExits "$problem"
[ -z "$problem" ] || { echo "$problem" >&2; rc=1; }

# ---- 2. Soft-RoCE on a host whose kernel has rdma_rxe (what ./quickstart.sh demo does before the guest)
problem=""
netdev=$(rdma link show 2>/dev/null | awk '$2 ~ /^rxe0\// {for (i = 1; i < NF; i++) if ($i == "netdev") print $(i + 1)}' | head -n 1)
if [ -z "$netdev" ]; then
  problem="no rxe0 in the guest to start from"
else
  rdma link delete rxe0 || problem="cannot delete rxe0"
  [ -z "$(ls /sys/class/infiniband 2>/dev/null)" ] || problem="${problem:-devices left after deleting rxe0: $(ls /sys/class/infiniband)}"
  RDMAD_RXE_NETDEV=$netdev bash "$root/deploy/host-rxe.sh" >"$out/host-rxe.log" 2>&1 || problem="${problem:-deploy/host-rxe.sh failed: $(cat "$out/host-rxe.log")}"
  [ -e /sys/class/infiniband/rxe0 ] || problem="${problem:-no rxe0 after deploy/host-rxe.sh}"
  # Without RDMAD_RXE_NETDEV it finds the default route's interface; with a device present it changes nothing.
  bash "$root/deploy/host-rxe.sh" >>"$out/host-rxe.log" 2>&1 || problem="${problem:-deploy/host-rxe.sh with rxe0 present failed}"
fi
"$junit" "$out/host_rxe.xml" HostRxe MakesRxe0WhereTheKernelHasRdmaRxe "$problem"
[ -z "$problem" ] || { echo "$problem" >&2; rc=1; }

# ---- 3. RLIMIT_MEMLOCK: rdmad without CAP_IPC_LOCK (nor CAP_SYS_RESOURCE, to raise it) under 2 MiB
problem=""
mdir=$(mktemp -d /tmp/rdmad-memlock.XXXXXX)
echo "{ \"listen\": [\"unix:$mdir/rdmad.sock\"] }" >"$mdir/rdmad.json"
setpriv --bounding-set=-ipc_lock,-sys_resource --inh-caps=-all \
  bash -c "ulimit -l 2048 && exec $bin/server/rdmad --config $mdir/rdmad.json" >"$out/memlock-rdmad.log" 2>&1 &
mpid=$!
for _ in $(seq 1 100); do [ -S "$mdir/rdmad.sock" ] && break; sleep 0.1; done
mctl() { "$bin/cli/rdmactl" --server "unix:$mdir/rdmad.sock" "$@"; }
{
  mctl create pd --device rxe0 --label memlock &&
    mctl register mr --pd pds/1 --size 1MiB --access local-write
} >"$out/memlock-ctl.log" 2>&1 || problem="a 1 MiB registration under a 2 MiB limit failed (see $out/memlock-ctl.log)"
refusal=$(mctl register mr --pd pds/1 --size 2MiB --access local-write 2>&1) && problem="${problem:-2 MiB more under a 2 MiB limit was registered}"
echo "$refusal" >>"$out/memlock-ctl.log"
# (Its code, RESOURCE_EXHAUSTED on "source", is checked by registry_mr_test; rdmactl prints the message.)
echo "$refusal" | grep -q "past rdmad's RLIMIT_MEMLOCK of 2 MiB" || problem="${problem:-the refusal does not name the limit: $refusal}"
kill -TERM "$mpid" 2>/dev/null
wait "$mpid" || problem="${problem:-rdmad under the memlock limit exited $?}"
grep -q "pinned memory limit (RLIMIT_MEMLOCK): 2 MiB" "$out/memlock-rdmad.log" ||
  problem="${problem:-rdmad did not report its 2 MiB limit (see $out/memlock-rdmad.log)}"
rm -rf "$mdir"
"$junit" "$out/memlock.xml" Memlock ARegistrationPastTheLimitIsRefusedNamingIt "$problem"
[ -z "$problem" ] || { echo "$problem" >&2; rc=1; }

# ---- 4. the other operations suites, in the same boot
for suite in run-metrics.sh run-recovery.sh run-limits.sh; do
  if [ -x "$root/tests/conformance/$suite" ]; then
    echo "=== $suite ==="
    "$root/tests/conformance/$suite" "$out" || rc=1
  fi
done
exit "$rc"
