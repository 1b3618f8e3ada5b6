#!/usr/bin/env bash
# Both sides of the two-machine rdma_cm test, run by tests/guest/run-two-guests.sh:
#   guest A: rdmad with its data-plane listener on 10.0.3.1:7471 and gRPC on 10.0.3.1:50051 (TCP, the
#            test wire only); waits for B to finish, then SIGTERM, and checks the clean release
#            (two_host_shutdown_a.xml).
#   guest B: its own rdmad, then two_host_test (two_host.xml) against both, then the same release check
#            (two_host_shutdown_b.xml).
# Usage: run-two-host.sh OUT_DIR   (RDMAD_GUEST_ROLE, RDMAD_GUEST_ADDR, RDMAD_PEER_ADDR, RDMAD_PEER_SH
# come from run-two-guests.sh)
set -euo pipefail
out=${1:?usage: run-two-host.sh OUT_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$root/bazel-bin
role=${RDMAD_GUEST_ROLE:?run under run-two-guests.sh}
work=$(mktemp -d /tmp/rdmad-two-host.XXXXXX)
sock=$work/rdmad.sock
listen="\"unix:$sock\""
[ "$role" = a ] && listen="$listen, \"$RDMAD_GUEST_ADDR:50051\""
cat >"$work/rdmad.json" <<JSON
{ "listen": [$listen], "rdma_listen": ["$RDMAD_GUEST_ADDR:7471"], "cm_workers": 2, "log_level": "info" }
JSON
rdma resource show >"$work/before.txt" 2>&1 || true
"$bin/server/rdmad" --config "$work/rdmad.json" >"$out/rdmad-$role.log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do [ -S "$sock" ] && break; sleep 0.1; done
rc=0
if [ "$role" = a ]; then
  "$RDMAD_PEER_SH" signal a-up
  "$RDMAD_PEER_SH" wait b-done 600 || rc=1
else
  "$RDMAD_PEER_SH" wait a-up 300 || { echo "guest A never came up" >&2; exit 1; }
  RDMAD_TARGET="unix:$sock" RDMAD_REMOTE_TARGET="$RDMAD_PEER_ADDR:50051" RDMAD_REMOTE_ADDR="$RDMAD_PEER_ADDR" \
    "$bin/tests/conformance/two_host_test" --gtest_output="xml:$out/two_host.xml" || rc=$?
  "$RDMAD_PEER_SH" signal b-done
fi
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
rdma resource show >"$work/after.txt" 2>&1 || true
problem=""
[ "$status" -eq 0 ] || problem="rdmad ($role) exited with status $status after SIGTERM"
diff -q "$work/before.txt" "$work/after.txt" >/dev/null || problem="$problem device resources differ: $(diff "$work/before.txt" "$work/after.txt" | tr '\n' ' ')"
"$root/tests/lib/junit-case.sh" "$out/two_host_shutdown_$role.xml" TwoHostShutdown "Guest_$role" "$problem"
[ -z "$problem" ] || { echo "$problem" >&2; rc=1; }
rm -rf "$work"
exit "$rc"
