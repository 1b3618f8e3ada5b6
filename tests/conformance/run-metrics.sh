#!/usr/bin/env bash
# Runs inside the Soft-RoCE guest (tests/guest/run-in-guest.sh): rdmad on rxe0 with its /metrics endpoint on
# 127.0.0.1:9470, a unix socket where root is the one member of tenant "ops" (so the tenant label is real), and
# the data-plane listener on 10.0.2.15:7471; runs metrics_test against it (it scrapes while it acts), stops
# rdmad with SIGTERM and checks that it exits cleanly, that the endpoint is gone, and that the device holds
# what it held before rdmad started.
#
# Usage: run-metrics.sh OUT_DIR [GTEST_ARGS...]
#   OUT_DIR receives metrics.xml (gtest), metrics_shutdown.xml, rdmad-metrics.log, rdmad-metrics.json,
#   metrics-last.txt (a scrape after the test, linted by promtool if installed), metrics-resources-{before,after}.txt.
# Binaries: bazel-bin/ of this checkout (build //server:rdmad and //tests/conformance:metrics_test first), or
# $RDMAD_BIN_DIR if set.
set -euo pipefail

out=${1:?usage: run-metrics.sh OUT_DIR [GTEST_ARGS...]}
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${RDMAD_BIN_DIR:-$root/bazel-bin}
work=$(mktemp -d /tmp/rdmad-metrics.XXXXXX)
sock=$work/rdmad.sock
metrics=127.0.0.1:9470
mkdir -p "$out"
rm -f "$out/metrics.xml" "$out/metrics_shutdown.xml"

# Plain HTTP, unauthenticated: loopback only (docs/operations.md#metrics).
cat >"$out/rdmad-metrics.json" <<JSON
{
  "listen": ["unix:$sock"],
  "unix_socket": {"mode": "0600"},
  "tenants": [{"name": "ops", "principals": ["unix:uid:0"]}],
  "metrics_listen": "$metrics",
  "rdma_listen": ["10.0.2.15:7471"],
  "grant_quarantine_ms": 0,
  "audit": "",
  "log_level": "info"
}
JSON

scrape() {  # prints the endpoint's text; fails if nothing answers (python3: the guest sees the host's root)
  python3 - "$metrics" <<'PY'
import sys, urllib.request
print(urllib.request.urlopen("http://%s/metrics" % sys.argv[1], timeout=5).read().decode(), end="")
PY
}

rdma resource show >"$out/metrics-resources-before.txt" 2>&1 || true
"$bin/server/rdmad" --config "$out/rdmad-metrics.json" >"$out/rdmad-metrics.log" 2>&1 &
rdmad_pid=$!
cleanup() { kill -KILL "$rdmad_pid" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

# The socket is bound before the devices are opened; the metrics endpoint and the gRPC server start later:
# wait for the line rdmad logs once it serves.
for _ in $(seq 1 300); do
  grep -q "serving rdmad.v1 on" "$out/rdmad-metrics.log" && break
  kill -0 "$rdmad_pid" 2>/dev/null || { echo "rdmad exited at start-up:" >&2; cat "$out/rdmad-metrics.log" >&2; exit 1; }
  sleep 0.1
done
grep -q "serving rdmad.v1 on" "$out/rdmad-metrics.log" || { echo "rdmad did not start serving" >&2; exit 1; }

rc=0
RDMAD_METRICS="$metrics" RDMAD_UNIX_TARGET="unix:$sock" RDMAD_ADDR=10.0.2.15 RDMAD_DEVICE=rxe0 \
  "$bin/tests/conformance/metrics_test" --gtest_output="xml:$out/metrics.xml" "$@" || rc=$?
scrape >"$out/metrics-last.txt" || true

# Shutdown: SIGTERM, a clean exit, the endpoint closed with the rest, every verbs object released.
kill -TERM "$rdmad_pid"
shutdown_rc=0
wait "$rdmad_pid" || shutdown_rc=$?
rdma resource show >"$out/metrics-resources-after.txt" 2>&1 || true
problems=()
[ "$shutdown_rc" -eq 0 ] || problems+=("rdmad exited with status $shutdown_rc after SIGTERM")
grep -q "every resource released" "$out/rdmad-metrics.log" || problems+=("rdmad did not report a complete release")
grep -q "metrics on http://$metrics/metrics" "$out/rdmad-metrics.log" || problems+=("rdmad did not log its metrics endpoint")
[ -s "$out/metrics-last.txt" ] || problems+=("no scrape answered after the test")
if scrape >/dev/null 2>&1; then problems+=("the metrics endpoint still answers after rdmad exited"); fi
# Prometheus' own linter, where it is installed (Debian's prometheus package; or PROMTOOL=path): the
# format and the naming rules. metrics_test checks the format itself either way.
promtool=${PROMTOOL:-$(command -v promtool || true)}
if [ -n "$promtool" ] && [ -s "$out/metrics-last.txt" ]; then
  lint=$("$promtool" check metrics <"$out/metrics-last.txt" 2>&1) || problems+=("promtool check metrics: $(echo "$lint" | tr '\n' ' ')")
else
  echo "run-metrics: promtool not installed: Prometheus' lint of the text skipped" >&2
fi
report=$(grep -m1 -E "ERROR: (Address|Leak)Sanitizer|runtime error:" "$out/rdmad-metrics.log" || true)
[ -z "$report" ] || problems+=("rdmad-metrics.log has a sanitizer report: $report")
diff -q "$out/metrics-resources-before.txt" "$out/metrics-resources-after.txt" >/dev/null ||
  problems+=("device resources differ before start and after shutdown: $(diff "$out/metrics-resources-before.txt" "$out/metrics-resources-after.txt" | tr '\n' ' ')")
"$root/tests/lib/junit-case.sh" "$out/metrics_shutdown.xml" RdmadMetricsShutdown SigtermReleasesEverything "${problems[*]:-}"
if ((${#problems[@]})); then
  printf 'shutdown check failed: %s\n' "${problems[@]}" >&2
  rc=1
else
  echo "[       OK ] RdmadMetricsShutdown.SigtermReleasesEverything"
fi
exit "$rc"
