#!/usr/bin/env bash
# Runs inside the Soft-RoCE guest (tests/guest/run-in-guest.sh): starts rdmad on rxe0 with its
# data-plane listener on 10.0.2.15:7471, runs the verbs conformance suite and then the rdma_cm suite
# against it over the gRPC API, stops rdmad with SIGTERM and checks that it exits cleanly and leaves
# nothing behind (socket removed, device resource counts back to what they were).
#
# Usage: run-conformance.sh OUT_DIR [GTEST_ARGS...]   (GTEST_ARGS go to the verbs suite)
#   OUT_DIR receives conformance.xml, cm_conformance.xml, restrack.xml, restrack_no_net_admin.xml and
#   kernel_ids.xml (gtest),
#   rdmad.log, resources-{before,after}.txt, shutdown.xml.
# Binaries: bazel-bin/ of the checkout this script lives in (build //server:rdmad and
# //tests/conformance:conformance_test first), or $RDMAD_BIN_DIR if set, e.g. the ASan+UBSan build's
# (`tests/sanitizers/bazel-asan.sh info bazel-bin`; a sanitizer's report then lands in rdmad.log or the
# tests' output, and fails the run: docs/dev/build.md#sanitizers).
set -euo pipefail

out=${1:?usage: run-conformance.sh OUT_DIR [GTEST_ARGS...]}
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${RDMAD_BIN_DIR:-$root/bazel-bin}
work=$(mktemp -d /tmp/rdmad-conformance.XXXXXX)
sock=$work/rdmad.sock
mkdir -p "$out"

cat >"$work/rdmad.json" <<JSON
{
  "listen": ["unix:$sock"],
  "allowed_file_roots": ["/dev/shm"],
  "rdma_listen": ["10.0.2.15:7471"],
  "cm_workers": 2,
  "watch_buffer": 128,
  "log_level": "info"
}
JSON

rdma resource show >"$out/resources-before.txt" 2>&1 || true
"$bin/server/rdmad" --config "$work/rdmad.json" >"$out/rdmad.log" 2>&1 &
rdmad_pid=$!
cleanup() { kill -KILL "$rdmad_pid" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

# Until rdmad says it serves: the socket exists from the start, before the devices are opened and the
# data-plane listener made, and a test's baseline taken then would miss the listener's CM id and PD.
for _ in $(seq 1 600); do
  grep -q "serving rdmad.v1" "$out/rdmad.log" && break
  kill -0 "$rdmad_pid" 2>/dev/null || { echo "rdmad exited at start-up:" >&2; cat "$out/rdmad.log" >&2; exit 1; }
  sleep 0.1
done
grep -q "serving rdmad.v1" "$out/rdmad.log" || { echo "rdmad did not start serving in 60 s" >&2; exit 1; }

rc=0
RDMAD_TARGET="unix:$sock" RDMAD_DEVICE=rxe0 RDMAD_SHM_DIR=/dev/shm \
  "$bin/tests/conformance/conformance_test" --gtest_output="xml:$out/conformance.xml" "$@" || rc=$?
RDMAD_TARGET="unix:$sock" RDMAD_ADDR=10.0.2.15 \
  "$bin/tests/conformance/cm_conformance_test" --gtest_output="xml:$out/cm_conformance.xml" || rc=$?
# RDMA netlink's view of verbs objects (the kernel's pdn, mrn, qpn, cm-idn) against `rdma resource show`: as
# root (the dump carries MR keys) and without CAP_NET_ADMIN (no keys). A build dir without it: the plain one.
restrack=$bin/tests/conformance/restrack_test
[ -x "$restrack" ] || restrack=$root/bazel-bin/tests/conformance/restrack_test
"$restrack" --gtest_output="xml:$out/restrack.xml" || rc=$?
setpriv --inh-caps=-net_admin --bounding-set=-net_admin \
  "$restrack" --gtest_output="xml:$out/restrack_no_net_admin.xml" || rc=$?
# rdmad's own numbers (ListKernelIds) against `rdma -j resource show` for its pid.
kernel_ids=$bin/tests/conformance/kernel_ids_test
[ -x "$kernel_ids" ] || kernel_ids=$root/bazel-bin/tests/conformance/kernel_ids_test
RDMAD_TARGET="unix:$sock" RDMAD_PID=$rdmad_pid RDMAD_ADDR=10.0.2.15 \
  "$kernel_ids" --gtest_output="xml:$out/kernel_ids.xml" || rc=$?

# Shutdown: SIGTERM, a clean exit, the socket removed, every verbs object released. Reported as one more
# test case in shutdown.xml (tests/lib/junit-case.sh) so the summary counts it.
kill -TERM "$rdmad_pid"
shutdown_rc=0
wait "$rdmad_pid" || shutdown_rc=$?
rdma resource show >"$out/resources-after.txt" 2>&1 || true
problems=()
[ "$shutdown_rc" -eq 0 ] || problems+=("rdmad exited with status $shutdown_rc after SIGTERM")
[ ! -e "$sock" ] || problems+=("rdmad left its socket $sock behind")
grep -q "every resource released" "$out/rdmad.log" || problems+=("rdmad did not report a complete release")
report=$(grep -m1 -E "ERROR: (Address|Leak)Sanitizer|runtime error:" "$out/rdmad.log" || true)
[ -z "$report" ] || problems+=("rdmad.log has a sanitizer report: $report")
diff -q "$out/resources-before.txt" "$out/resources-after.txt" >/dev/null ||
  problems+=("device resources differ before start and after shutdown: $(diff "$out/resources-before.txt" "$out/resources-after.txt" | tr '\n' ' ')")
"$root/tests/lib/junit-case.sh" "$out/shutdown.xml" RdmadShutdown SigtermReleasesEverything "${problems[*]:-}"
if ((${#problems[@]})); then
  printf 'shutdown check failed: %s\n' "${problems[@]}" >&2
  rc=1
else
  echo "[       OK ] RdmadShutdown.SigtermReleasesEverything"
fi
exit "$rc"
