#!/usr/bin/env bash
# Runs inside the Soft-RoCE guest (tests/guest/run-in-guest.sh): restart recovery (docs/operations.md#restart-recovery).
# recovery_test starts rdmad itself with a state file, kills it with SIGKILL in the middle of activity, restarts
# it and checks names, keys, lost regions, ended grants (and a watcher told), a client's Reconnect and, by
# rdmad's pid, `rdma resource show` (nothing left after the kill, exactly what rdmad lists after the restart,
# nothing after SIGTERM); then, as tenant a (uid 1000, through the socket's mode 0666), that a file swapped for
# a symlink to uid 1001's private file while rdmad was killed comes back MR_LOST naming the link, and an
# untouched one MR_READY with its bytes. This script then compares the whole device's `rdma resource show`
# before and after.
# Usage: run-recovery.sh OUT_DIR
#   OUT_DIR receives recovery.xml (gtest), recovery_resources.xml, recovery.log and
#   recovery-resources-{before,after}.txt.
# Binaries: bazel-bin/ of this checkout (build //server:rdmad and //tests/conformance:recovery_test first), or
# $RDMAD_BIN_DIR if set.
set -uo pipefail

out=${1:?usage: run-recovery.sh OUT_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${RDMAD_BIN_DIR:-$root/bazel-bin}
mkdir -p "$out"
rm -f "$out/recovery.xml" "$out/recovery_resources.xml"
addr=$(ip -4 -o addr show 2>/dev/null | awk '$2 != "lo" {print $4; exit}' | cut -d/ -f1)

rc=0
rdma resource show >"$out/recovery-resources-before.txt" 2>&1 || true
RDMAD_BIN=$bin/server/rdmad RDMAD_GUEST_ADDR=${addr:-10.0.2.15} \
  "$bin/tests/conformance/recovery_test" --gtest_output="xml:$out/recovery.xml" 2>&1 | tee "$out/recovery.log"
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
sleep 1  # connections of the killed rdmad are torn down by the kernel
rdma resource show >"$out/recovery-resources-after.txt" 2>&1 || true
problem=""
diff -q "$out/recovery-resources-before.txt" "$out/recovery-resources-after.txt" >/dev/null ||
  problem="device resources differ before and after the recovery test: $(diff "$out/recovery-resources-before.txt" "$out/recovery-resources-after.txt" | tr '\n' ' ')"
"$root/tests/lib/junit-case.sh" "$out/recovery_resources.xml" Recovery NothingLeftOnTheDeviceAfterKillRestartAndStop "$problem"
if [ -n "$problem" ]; then
  echo "$problem" >&2
  rc=1
else
  echo "[       OK ] Recovery.NothingLeftOnTheDeviceAfterKillRestartAndStop"
fi
exit "$rc"
