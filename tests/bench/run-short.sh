#!/usr/bin/env bash
# The benchmarks' short forms, in one guest boot (tests/run-all.sh), so that they cannot rot: rdma_cm through
# rdmad (run-cm-bench.sh), each control-plane RPC beside its verbs call (run-control-bench.sh) and large
# registrations (run-reg-bench.sh), and a no-op RPC and MR events while 8 clients register (contention_bench:
# rdmad in the benchmark's process on the fake fabric, no device; 1 s per phase, under 10 s in all). Figures
# only; exits non-zero if a benchmark could not run. The full forms: docs/performance.md.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rc=0
echo "=== run-cm-bench.sh (short) ==="
"$here/run-cm-bench.sh" || { echo "run-cm-bench.sh failed" >&2; rc=1; }
echo "=== run-control-bench.sh (short) ==="
"$here/run-control-bench.sh" || { echo "run-control-bench.sh failed" >&2; rc=1; }
echo "=== run-reg-bench.sh (short) ==="
"$here/run-reg-bench.sh" || { echo "run-reg-bench.sh failed" >&2; rc=1; }
echo "=== run-scale-bench.sh (short) ==="
"$here/run-scale-bench.sh" || { echo "run-scale-bench.sh failed" >&2; rc=1; }
echo "=== contention_bench --short ==="
"$here/../../bazel-bin/tests/bench/contention_bench" --short || { echo "contention_bench failed" >&2; rc=1; }
exit "$rc"
