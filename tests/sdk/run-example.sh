#!/usr/bin/env bash
# Runs inside the Soft-RoCE guest (tests/guest/run-in-guest.sh): starts rdmad on rxe0 with its data-plane
# listener, runs against it the C++ SDK example (examples/read_grant.cc, built by tests/run-all.sh with g++ and
# pkg-config against the installed librdmad-client.so.3), then the Python SDK's example (examples/read_grant.py)
# and its pytest suite (tests/python/), both with the installed package (deploy/install.sh put it under
# /usr/local, which the guest sees: its root is the host's), PYTHONPATH empty; stops rdmad with SIGTERM.
#   tests/sdk/run-example.sh EXAMPLE_BINARY OUT_DIR
# Writes in OUT_DIR: rdmad.log; python_example.log and python_example.xml (one case: the Python example did
# what it should); python_sdk.log and python_sdk.xml (pytest's JUnit XML, one case per test).
# Exit status: the C++ example's (0: it read the granted bytes, and the read after the revocation was
# refused), or 1 when rdmad did not start or did not stop cleanly. The Python results are in their XML only.
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

# The Python SDK, as installed: PYTHONPATH empty, run from outside the tree.
python=/usr/bin/python3
pkg_dir=$(cd / && PYTHONPATH= "$python" -c 'import os, rdmad; print(os.path.dirname(rdmad.__file__))' 2>&1) ||
  pkg_dir="(import rdmad failed: $pkg_dir)"
echo "run-example: python3 imports rdmad from $pkg_dir"
py_problem=""
py_rc=0
(cd "$work" && PYTHONPATH= "$python" "$root/examples/read_grant.py" "unix:$sock") >"$out/python_example.log" 2>&1 ||
  py_rc=$?
sed 's/^/  read_grant.py: /' "$out/python_example.log"
if [ "$py_rc" != 0 ]; then
  py_problem="examples/read_grant.py exited with status $py_rc: $(tail -n 3 "$out/python_example.log" | tr '\n' ' ')"
elif ! grep -q "^read after revoke: PERMISSION_DENIED" "$out/python_example.log"; then
  py_problem="examples/read_grant.py did not report the read after revoke refused with PERMISSION_DENIED"
fi
"$root/tests/lib/junit-case.sh" "$out/python_example.xml" PythonSdk \
  ExampleReadsThroughAGrantAndIsRefusedAfterRevoke "$py_problem"
echo "run-example: the Python example: ${py_problem:-passed}"

rm -f "$out/python_sdk.xml"
suite_rc=0
(cd "$work" && PYTHONPATH= RDMAD_TARGET="unix:$sock" RDMAD_DEVICE=rxe0 RDMAD_PYTHON_PACKAGE_DIR="$pkg_dir" \
  "$python" -m pytest -p no:cacheprovider -v --junitxml="$out/python_sdk.xml" "$root/tests/python") \
  >"$out/python_sdk.log" 2>&1 || suite_rc=$?
tail -n 15 "$out/python_sdk.log" | sed 's/^/  pytest: /'
if [ ! -s "$out/python_sdk.xml" ]; then  # pytest did not run at all: say so in its file
  "$root/tests/lib/junit-case.sh" "$out/python_sdk.xml" PythonSdk SuiteRan \
    "pytest exited with status $suite_rc before writing its results (see python_sdk.log)"
fi
echo "run-example: the Python suite exited with status $suite_rc"

kill -TERM "$rdmad_pid"
wait "$rdmad_pid" || { echo "rdmad exited with status $? after SIGTERM" >&2; [ "$rc" != 0 ] || rc=1; }
exit "$rc"
