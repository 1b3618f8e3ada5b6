#!/usr/bin/env bash
# Runs inside the Soft-RoCE guest (tests/guest/run-in-guest.sh): starts rdmad on rxe0 with its data-plane
# listener, runs the SDK example (examples/read_grant.cc, built by tests/run-all.sh with g++ and pkg-config
# against the installed librdmad-client.so.1) against it, stops rdmad with SIGTERM.
#   tests/sdk/run-example.sh EXAMPLE_BINARY OUT_DIR
# Exit status: the example's (0: it read the granted bytes, and the read after the revocation was refused),
# or 1 when rdmad did not start or did not stop cleanly.
set -euo pipefail
example=$1
out=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
rdmad=${RDMAD_BIN_DIR:-$root/bazel-bin}/server/rdmad
work=$(mktemp -d /tmp/rdmad-sdk.XXXXXX)
sock=$work/rdmad.sock
mkdir -p "$out"
cat >"$work/rdmad.json" <<JSON
{
  "listen": ["unix:$sock"],
  "allowed_file_roots": ["/dev/shm"],
  "rdma_listen": ["10.0.2.15:7471"],
  "log_level": "info"
}
JSON
"$rdmad" --config "$work/rdmad.json" >"$out/rdmad.log" 2>&1 &
rdmad_pid=$!
trap 'kill -KILL "$rdmad_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 1 300); do
  grep -q "serving rdmad.v1" "$out/rdmad.log" && break
  kill -0 "$rdmad_pid" 2>/dev/null || { echo "rdmad exited at start-up:" >&2; cat "$out/rdmad.log" >&2; exit 1; }
  sleep 0.1
done
echo "run-example: the example is linked against $(ldd "$example" | grep -o '/[^ ]*librdmad-client[^ ]*')"
rc=0
"$example" "unix:$sock" || rc=$?
echo "run-example: the example exited with status $rc"
kill -TERM "$rdmad_pid"
wait "$rdmad_pid" || { echo "rdmad exited with status $? after SIGTERM" >&2; [ "$rc" != 0 ] || rc=1; }
exit "$rc"
