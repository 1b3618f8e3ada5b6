#!/usr/bin/env bash
# Runs inside the Soft-RoCE guest (tests/guest/run-in-guest.sh): starts rdmad on rxe0 with its data-plane
# listener on 10.0.2.15:7471, drives it with the API fuzzer (tests/fuzz/api_fuzzer.cc) for a bounded
# number of iterations, stops rdmad with SIGTERM and checks that it survived, answered by its contract,
# and leaves nothing behind. See docs/dev/fuzzing.md.
#
# Usage: run-fuzz.sh OUT_DIR [--iterations N] [--seed S] [--tenants | --both] [--wire-garbage]
#   --iterations N   default 600 (the CI form); a large N is the long soak
#   --seed S         default: a fresh one, printed; the same seed replays the same requests
#   --tenants        two tenants: fuzzers as uid 1001 (tenant a, with quotas) and uid 1002 (tenant b) at once,
#                    each using the other's names (which must be NOT_FOUND, exactly like names of nothing);
#                    then root, an admin, deletes everything (api_fuzzer --cleanup-only)
#   --both           the CI form: one run as root into OUT_DIR/one, then --tenants with half the iterations
#                    each into OUT_DIR/tenants (two rdmad runs in one guest)
#   --wire-garbage   passed to api_fuzzer (docs/dev/fuzzing.md)
# OUT_DIR receives fuzz.xml (the fuzzer's verdict) and fuzz_shutdown.xml (the shutdown checks), one JUnit
# test case each; fuzz.log (every RPC: method, request, reply), fuzz.out (summary), rdmad.log,
# resources-{before,idle,cleaned,after}.txt.
# Binaries: bazel-bin/ of the checkout this script lives in (build //server:rdmad and
# //tests/fuzz:api_fuzzer first); RDMAD_BIN_DIR=DIR takes rdmad from DIR/server/rdmad instead.
set -euo pipefail

out=${1:?usage: run-fuzz.sh OUT_DIR [--iterations N] [--seed S] [--wire-garbage]}
shift
iterations=600
seed=
tenants=0
both=0
extra=()
while (($#)); do
  case "$1" in
    --iterations) iterations=${2:?--iterations needs a value}; shift 2 ;;
    --seed) seed=${2:?--seed needs a value}; shift 2 ;;
    --tenants) tenants=1; shift ;;
    --both) both=1; shift ;;
    --wire-garbage) extra+=("$1"); shift ;;
    *) echo "run-fuzz.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ -n "$seed" ] || seed=$(( $(od -An -N4 -tu4 /dev/urandom) % 1000000000 ))
if ((both)); then
  rc=0
  "$0" "$out/one" --seed "$seed" --iterations "$iterations" "${extra[@]}" || rc=1
  "$0" "$out/tenants" --tenants --seed "$seed" --iterations "$(((iterations + 1) / 2))" "${extra[@]}" || rc=1
  exit "$rc"
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$root/bazel-bin
rdmad=${RDMAD_BIN_DIR:-$bin}/server/rdmad  # RDMAD_BIN_DIR: another build of rdmad (an instrumented one)
junit=$root/tests/lib/junit-case.sh
work=$(mktemp -d /tmp/rdmad-fuzz.XXXXXX)
sock=$work/rdmad.sock
mkdir -p "$out"
mode=""
((tenants)) && mode=" --tenants"
echo "run-fuzz: seed $seed, $iterations iterations$mode (replay: tests/fuzz/run-fuzz.sh OUT --seed $seed --iterations $iterations$mode)"

# Two tenants on the unix socket: callers are "unix:uid:N" (SO_PEERCRED); root is an admin.
security=""
if ((tenants)); then
  security='
  "unix_socket": {"mode": "0666"},
  "admins": ["unix:uid:0"],
  "tenants": [
    {"name": "a", "principals": ["unix:uid:1001"],
     "quotas": {"mrs": 8, "mws": 8, "qps": 6, "cm_ids": 8, "grants": 8, "tokens": 64, "pinned_bytes": 4194304}},
    {"name": "b", "principals": ["unix:uid:1002"]}
  ],'
fi

# Small regions only (max_mr_bytes 1 MiB): the fuzzer's hostile sizes are refused, never allocated.
cat >"$work/rdmad.json" <<JSON
{$security
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
"$rdmad" --config "$work/rdmad.json" >"$out/rdmad.log" 2>&1 &
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
fuzz=("$bin/tests/fuzz/api_fuzzer" --target "unix:$sock" --iterations "$iterations" --rdma-addr 10.0.2.15 --dp-port 7471)
if ((tenants)); then
  # The tenants' processes write where they may (the out dir is the host's, through 9p); copied out below.
  chmod 755 "$work"
  shared=$work/shared
  mkdir -m 1777 "$shared"
  touch "$shared/a.names" "$shared/b.names"
  chmod 666 "$shared/a.names" "$shared/b.names"
  # rdma_cm as a plain user: the guest's device nodes are root's (no udev). Only there: on a real host, give
  # uids 1001 and 1002 access yourself.
  case $(hostname) in
    rdmad-guest*) chmod 666 /dev/infiniband/rdma_cm /dev/infiniband/uverbs* 2>/dev/null || true ;;
  esac
  tenant() {  # tenant NAME UID SEED OTHER
    setpriv --reuid="$2" --regid="$2" --clear-groups -- "${fuzz[@]}" --seed "$3" --tag "$1" --no-cleanup \
      --names-out "$shared/$1.names" --names-in "$shared/$4.names" --log "$shared/fuzz-$1.log" "${extra[@]}" \
      >"$shared/fuzz-$1.out" 2>&1
  }
  a_rc=0 b_rc=0
  tenant a 1001 "$seed" b &
  a_pid=$!
  tenant b 1002 "$((seed + 1))" a &
  b_pid=$!
  wait "$a_pid" || a_rc=$?
  wait "$b_pid" || b_rc=$?
  admin_rc=0
  "${fuzz[@]}" --seed "$seed" --tag admin --cleanup-only --log "$shared/fuzz-admin.log" >"$shared/fuzz-admin.out" 2>&1 ||
    admin_rc=$?
  cp "$shared"/fuzz-* "$shared"/*.names "$out/"
  rm -rf /dev/shm/rdmad-fuzz-a-* /dev/shm/rdmad-fuzz-b-*  # the tenants' files (their regions are gone)
  cat "$out/fuzz-a.out" "$out/fuzz-b.out" "$out/fuzz-admin.out" >"$out/fuzz.out"
  cat "$out/fuzz-a.log" "$out/fuzz-b.log" "$out/fuzz-admin.log" >"$out/fuzz.log"
  for rc in $a_rc $b_rc $admin_rc; do
    if ((rc > fuzz_rc)); then fuzz_rc=$rc; fi
  done
else
  "${fuzz[@]}" --seed "$seed" --tag ci --log "$out/fuzz.log" "${extra[@]}" >"$out/fuzz.out" 2>&1 || fuzz_rc=$?
fi
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
  1) problems+=("the fuzzer$mode found $(grep -c '^VIOLATION' "$out/fuzz.log" || true) violations: $(grep -m 3 '^VIOLATION' "$out/fuzz.log" | tr '\n' ' ' || true) (seed $seed; see $out/fuzz.log)") ;;
  3) problems+=("rdmad stopped answering (seed $seed; last calls in $out/fuzz.log)") ;;
  *) problems+=("api_fuzzer exited with status $fuzz_rc (see $out/fuzz.out)") ;;
esac
diff -q "$out/resources-idle.txt" "$out/resources-cleaned.txt" >/dev/null ||
  problems+=("after the fuzzer's cleanup rdmad still holds device resources: $(diff "$out/resources-idle.txt" "$out/resources-cleaned.txt" | tr '\n' ' ' || true)")
case_name=RepliesKeepTheContract
((tenants)) && case_name=TwoTenantsRepliesKeepTheContract
"$junit" "$out/fuzz.xml" ApiFuzzer "$case_name" "${problems[*]:-}"

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
"$junit" "$out/fuzz_shutdown.xml" ApiFuzzer "SigtermReleasesEverything$( ((tenants)) && echo AfterTwoTenants)" "${shutdown[*]:-}"

rc=0
for p in "${problems[@]}" "${shutdown[@]}"; do
  [ -n "$p" ] && { echo "run-fuzz: FAILED: $p" >&2; rc=1; }
done
((rc)) || echo "run-fuzz: OK (seed $seed, $iterations iterations)"
exit "$rc"
