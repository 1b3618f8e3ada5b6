#!/usr/bin/env bash
# Runs inside the Soft-RoCE guest (tests/guest/run-in-guest.sh): the librdmacm backend's own test
# (cm_backend_test: server/verbs/cm.* on rxe0, no rdmad, no gRPC), then checks that the device's resources
# (`rdma resource show`) are exactly what they were before it ran.
#
# Usage: run-cm-backend.sh OUT_DIR [GTEST_ARGS...]
#   OUT_DIR receives cm_backend.xml (gtest), cm-resources-{before,after}.txt and
#   cm_backend_release.xml (the resource check, as one more test case). A test binary that dies without
#   writing its XML (the destroy watchdog ends it) is reported as a failed case in cm_backend.xml.
# Binaries: bazel-bin/ of the checkout this script lives in (build //tests/conformance:cm_backend_test).
set -euo pipefail

out=${1:?usage: run-cm-backend.sh OUT_DIR [GTEST_ARGS...]}
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
rm -f "$out/cm_backend.xml"

rdma resource show >"$out/cm-resources-before.txt" 2>&1 || true
rc=0
"$root/bazel-bin/tests/conformance/cm_backend_test" --gtest_output="xml:$out/cm_backend.xml" "$@" || rc=$?
if [ ! -f "$out/cm_backend.xml" ]; then
  "$root/tests/lib/junit-case.sh" "$out/cm_backend.xml" CmBackendTest Binary \
    "cm_backend_test exited with status $rc without writing its results"
  rc=1
fi

rdma resource show >"$out/cm-resources-after.txt" 2>&1 || true
problem=""
diff -q "$out/cm-resources-before.txt" "$out/cm-resources-after.txt" >/dev/null ||
  problem="device resources differ before and after cm_backend_test: $(diff "$out/cm-resources-before.txt" "$out/cm-resources-after.txt" | tr '\n' ' ')"
"$root/tests/lib/junit-case.sh" "$out/cm_backend_release.xml" CmBackendRelease ResourcesUnchanged "$problem"
if [ -n "$problem" ]; then
  echo "resource check failed: $problem" >&2
  rc=1
else
  echo "[       OK ] CmBackendRelease.ResourcesUnchanged"
fi
exit "$rc"
