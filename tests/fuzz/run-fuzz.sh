#!/usr/bin/env bash
# Runs inside the Soft-RoCE guest (tests/guest/run-in-guest.sh): starts rdmad on rxe0 with its data-plane
# listener on 10.0.2.15:7471, drives it with the API fuzzer (tests/fuzz/api_fuzzer.cc) for a bounded
# number of iterations, stops rdmad with SIGTERM and checks that it survived, answered by its contract,
# and leaves nothing behind. See docs/fuzzing.md.
#
# Usage: run-fuzz.sh OUT_DIR [--iterations N] [--seed S] [--wire-garbage]
#   --iterations N   default 400 (the CI form); a large N is the long soak
#   --seed S         default: a fresh one, printed; the same seed replays the same requests
#   --wire-garbage   also send strings that are not UTF-8 (gRPC refuses them before rdmad: known, see
#                    docs/fuzzing.md), passed to api_fuzzer
# OUT_DIR receives fuzz.xml (the fuzzer's verdict) and fuzz_shutdown.xml (the shutdown checks), one JUnit
# test case each; fuzz.log (every RPC: method, request, reply), fuzz.out (summary), rdmad.log,
# resources-{before,idle,cleaned,after}.txt.
# Binaries: bazel-bin/ of the checkout this script lives in (build //server:rdmad and
# //tests/fuzz:api_fuzzer first).
set -euo pipefail

out=${1:?usage: run-fuzz.sh OUT_DIR [--iterations N] [--seed S] [--wire-garbage]}
shift
iterations=400
seed=
extra=()
while (($#)); do
  case "$1" in
    --iterations) iterations=${2:?--iterations needs a value}; shift 2 ;;
    --seed) seed=${2:?--seed needs a value}; shift 2 ;;
    --wire-garbage) extra+=(--wire-garbage); shift ;;
    *) echo "run-fuzz.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ -n "$seed" ] || seed=$(( $(od -An -N4 -tu4 /dev/urandom) % 1000000000 ))
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$root/bazel-bin
junit=$root/tests/lib/junit-case.sh
work=$(mktemp -d /tmp/rdmad-fuzz.XXXXXX)
sock=$work/rdmad.sock
mkdir -p "$out"
echo "run-fuzz: seed $seed, $iterations iterations (replay: tests/fuzz/run-fuzz.sh OUT --seed $seed --iterations $iterations)"

# Small regions only (max_mr_bytes 1 MiB): the fuzzer's hostile sizes are refused, never allocated.
cat >"$work/rdmad.json" <<JSON
{
  "listen": ["unix:$sock"],
  "allowed_file_roots": ["/dev/shm"],
  "rdma_listen": ["10.0.2.15:7471"],
  "cm_workers": 2,
  "max_mr_bytes": 1048576,
  "watch_buffer": 128,
  "grant_quarantine_ms": 2000,
  "log_level": "info"
}
JSON

snapshot() { rdma resource show >"$out/resources-$1.txt" 2>&1 || true; }
snapshot before
"$bin/server/rdmad" --config "$work/rdmad.json" >"$out/rdmad.log" 2>&1 &
rdmad_pid=$!
cleanup() { kill -KILL "$rdmad_pid" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

for _ in $(seq 1 300); do
  [ -S "$sock" ] && break
  kill -0 "$rdmad_pid" 2>/dev/null || { echo "rdmad exited at start-up:" >&2; cat "$out/rdmad.log" >&2; exit 1; }
  sleep 0.1
done
[ -S "$sock" ] || { echo "rdmad did not create $sock" >&2; exit 1; }
# The socket comes before the devices are opened: wait until rdmad serves, then record what it holds idle.
for _ in $(seq 1 300); do
  grep -q "serving rdmad.v1" "$out/rdmad.log" && break
  kill -0 "$rdmad_pid" 2>/dev/null || { echo "rdmad exited at start-up:" >&2; cat "$out/rdmad.log" >&2; exit 1; }
  sleep 0.1
done
snapshot idle

start=$(date +%s)
fuzz_rc=0
"$bin/tests/fuzz/api_fuzzer" --target "unix:$sock" --seed "$seed" --iterations "$iterations" \
  --log "$out/fuzz.log" --tag ci --rdma-addr 10.0.2.15 --dp-port 7471 "${extra[@]}" >"$out/fuzz.out" 2>&1 || fuzz_rc=$?
echo "run-fuzz: the fuzzer took $(($(date +%s) - start)) s"
cat "$out/fuzz.out"

# The fuzzer deleted everything it made: rdmad's device resources are back to what it held when idle
# (retried briefly: a data-plane connection is released once its client has gone).
for _ in $(seq 1 50); do
  snapshot cleaned
  diff -q "$out/resources-idle.txt" "$out/resources-cleaned.txt" >/dev/null && break
  sleep 0.2
done

problems=()
alive=1
kill -0 "$rdmad_pid" 2>/dev/null || { alive=0; problems+=("rdmad died during the run (see $out/rdmad.log)"); }
case $fuzz_rc in
  0) ;;
  1) problems+=("the fuzzer found $(grep -c '^VIOLATION' "$out/fuzz.log" || true) violations: $(grep -m 3 '^VIOLATION' "$out/fuzz.log" | tr '\n' ' ' || true) (seed $seed; see $out/fuzz.log)") ;;
  3) problems+=("rdmad stopped answering (seed $seed; last calls in $out/fuzz.log)") ;;
  *) problems+=("api_fuzzer exited with status $fuzz_rc (see $out/fuzz.out)") ;;
esac
diff -q "$out/resources-idle.txt" "$out/resources-cleaned.txt" >/dev/null ||
  problems+=("after the fuzzer's cleanup rdmad still holds device resources: $(diff "$out/resources-idle.txt" "$out/resources-cleaned.txt" | tr '\n' ' ' || true)")
"$junit" "$out/fuzz.xml" ApiFuzzer RepliesKeepTheContract "${problems[*]:-}"

# Shutdown: SIGTERM, a clean exit, the socket removed, every verbs object released.
shutdown=()
if ((alive)); then
  kill -TERM "$rdmad_pid"
  shutdown_rc=0
  wait "$rdmad_pid" || shutdown_rc=$?
  [ "$shutdown_rc" -eq 0 ] || shutdown+=("rdmad exited with status $shutdown_rc after SIGTERM")
else
  shutdown+=("rdmad was not running at the end")
fi
snapshot after
[ ! -e "$sock" ] || shutdown+=("rdmad left its socket $sock behind")
grep -q "every resource released" "$out/rdmad.log" || shutdown+=("rdmad did not report a complete release")
diff -q "$out/resources-before.txt" "$out/resources-after.txt" >/dev/null ||
  shutdown+=("device resources differ before start and after shutdown: $(diff "$out/resources-before.txt" "$out/resources-after.txt" | tr '\n' ' ' || true)")
"$junit" "$out/fuzz_shutdown.xml" ApiFuzzer SigtermReleasesEverything "${shutdown[*]:-}"

rc=0
for p in "${problems[@]}" "${shutdown[@]}"; do
  [ -n "$p" ] && { echo "run-fuzz: FAILED: $p" >&2; rc=1; }
done
((rc)) || echo "run-fuzz: OK (seed $seed, $iterations iterations)"
exit "$rc"
