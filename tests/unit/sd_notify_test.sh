#!/usr/bin/env bash
# rdmad's sd_notify(3) messages, as systemd's Type=notify unit (deploy/rdmad.service) reads them, on the host
# (no RDMA device needed: rdmad serves an empty device list):
#   - with $NOTIFY_SOCKET: READY=1 once rdmad serves (its unix socket already accepts), with a STATUS=;
#     SIGHUP: RELOADING=1 (with MONOTONIC_USEC=), then READY=1 again; SIGTERM: STOPPING=1, then a STATUS=
#     per drain stage, and exit 0;
#   - without $NOTIFY_SOCKET: rdmad serves and drains the same (exit 0), nothing is sent;
#   - with a $NOTIFY_SOCKET nobody listens on: rdmad still serves and exits 0 (a warning in its log).
# The test's notify socket is a unix datagram socket read by python3 (one line per message, "\n" as "|").
#
# Under Bazel: bazel test //tests/unit:sd_notify_test. By hand: RDMAD=... tests/unit/sd_notify_test.sh
set -u

runfiles="${TEST_SRCDIR:-}/${TEST_WORKSPACE:-rdmad}"
RDMAD="${RDMAD:-$runfiles/server/rdmad}"
[[ -x "$RDMAD" ]] || { echo "FAIL: $RDMAD is not an executable" >&2; exit 1; }

dir="$(mktemp -d /tmp/rdmad-notify.XXXXXX)"  # short: a unix socket path must fit in 108 bytes
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  rm -rf "$dir"
}
trap cleanup EXIT

failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# wait_for FILE PATTERN PID: until a line of FILE matches PATTERN (grep -E), at most 10 s, or PID exits.
wait_for() {
  for _ in $(seq 1 100); do
    grep -qE "$2" "$1" 2>/dev/null && return 0
    kill -0 "$3" 2>/dev/null || { grep -qE "$2" "$1" 2>/dev/null; return; }
    sleep 0.1
  done
  return 1
}

cat >"$dir/rdmad.json" <<EOF
{ "listen": ["unix:$dir/rdmad.sock"], "unix_socket": { "mode": "0600" }, "audit": "", "state_file": "" }
EOF

# The service manager's end: every datagram on $dir/notify.sock, one line each, flushed at once.
python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
out = open(sys.argv[2], "w")
while True:
    msg = s.recv(4096).decode("utf-8", "replace")
    out.write(msg.replace("\n", "|") + "\n")
    out.flush()
' "$dir/notify.sock" "$dir/messages" &
pids+=($!)
for _ in $(seq 1 50); do [[ -S "$dir/notify.sock" ]] && break; sleep 0.1; done
[[ -S "$dir/notify.sock" ]] || { echo "FAIL: the test's notify socket was not created" >&2; exit 1; }

echo "--- with NOTIFY_SOCKET: READY=1 once serving"
NOTIFY_SOCKET="$dir/notify.sock" "$RDMAD" --config "$dir/rdmad.json" 2>"$dir/rdmad.log" &
rdmad=$!
pids+=("$rdmad")
if wait_for "$dir/messages" '(^|\|)READY=1(\||$)' "$rdmad"; then
  [[ -S "$dir/rdmad.sock" ]] || fail "READY=1 came before rdmad's unix socket existed"
  grep -qE '^READY=1\|STATUS=serving rdmad.v1 on unix:' "$dir/messages" ||
    fail "READY=1 without the serving STATUS=: $(cat "$dir/messages")"
  grep -q "serving rdmad.v1 on" "$dir/rdmad.log" || fail "READY=1 before rdmad logged that it serves"
else
  fail "no READY=1 within 10 s: messages: $(cat "$dir/messages" 2>/dev/null); rdmad's log: $(cat "$dir/rdmad.log")"
fi
[[ "$(grep -c '^READY=1' "$dir/messages")" == 1 ]] || fail "READY=1 not sent exactly once at start: $(cat "$dir/messages")"
grep -q STOPPING "$dir/messages" && fail "STOPPING=1 before any signal: $(cat "$dir/messages")"

echo "--- SIGHUP: RELOADING=1 (with MONOTONIC_USEC=), then READY=1"
kill -HUP "$rdmad"
wait_for "$dir/messages" '^RELOADING=1\|.*MONOTONIC_USEC=[0-9]+' "$rdmad" ||
  fail "no RELOADING=1 with MONOTONIC_USEC= after SIGHUP: $(cat "$dir/messages")"
for _ in $(seq 1 100); do [[ "$(grep -c '^READY=1' "$dir/messages")" == 2 ]] && break; sleep 0.1; done
[[ "$(grep -c '^READY=1' "$dir/messages")" == 2 ]] || fail "no READY=1 after the reload: $(cat "$dir/messages")"
[[ "$(grep -n '^RELOADING=1' "$dir/messages" | cut -d: -f1)" -lt "$(grep -n '^READY=1' "$dir/messages" | tail -n 1 | cut -d: -f1)" ]] ||
  fail "the second READY=1 does not follow RELOADING=1: $(cat "$dir/messages")"

echo "--- SIGTERM: STOPPING=1, the drain's stages, exit 0"
kill -TERM "$rdmad"
wait "$rdmad"; rc=$?
[[ $rc == 0 ]] || fail "rdmad exited $rc on SIGTERM: $(cat "$dir/rdmad.log")"
sleep 0.3  # the last datagrams reach the reader
grep -q '^STOPPING=1' "$dir/messages" || fail "no STOPPING=1 on SIGTERM: $(cat "$dir/messages")"
grep -q '^STATUS=draining: refusing new calls' "$dir/messages" ||
  fail "no STATUS= for the drain's first stage: $(cat "$dir/messages")"
[[ "$(grep -n '^STOPPING=1' "$dir/messages" | cut -d: -f1)" -gt "$(grep -n '^READY=1' "$dir/messages" | tail -n 1 | cut -d: -f1)" ]] ||
  fail "STOPPING=1 before the last READY=1: $(cat "$dir/messages")"
grep -q "sd_notify" "$dir/rdmad.log" && fail "rdmad warned about sd_notify: $(grep sd_notify "$dir/rdmad.log")"
echo "messages received:"
sed 's/^/  /' "$dir/messages"

echo "--- without NOTIFY_SOCKET: serves, drains, exit 0, nothing sent"
: >"$dir/messages"
env -u NOTIFY_SOCKET "$RDMAD" --config "$dir/rdmad.json" 2>"$dir/rdmad2.log" &
rdmad=$!
pids+=("$rdmad")
wait_for "$dir/rdmad2.log" "serving rdmad.v1 on" "$rdmad" || fail "rdmad did not serve: $(cat "$dir/rdmad2.log")"
kill -TERM "$rdmad"
wait "$rdmad"; rc=$?
[[ $rc == 0 ]] || fail "rdmad without NOTIFY_SOCKET exited $rc on SIGTERM: $(cat "$dir/rdmad2.log")"
grep -q "sd_notify" "$dir/rdmad2.log" && fail "rdmad without NOTIFY_SOCKET warned about sd_notify"
[[ -s "$dir/messages" ]] && fail "messages without NOTIFY_SOCKET: $(cat "$dir/messages")"

echo "--- a NOTIFY_SOCKET nobody listens on: serves anyway, exit 0"
NOTIFY_SOCKET="$dir/nobody.sock" "$RDMAD" --config "$dir/rdmad.json" 2>"$dir/rdmad3.log" &
rdmad=$!
pids+=("$rdmad")
wait_for "$dir/rdmad3.log" "serving rdmad.v1 on" "$rdmad" || fail "rdmad did not serve: $(cat "$dir/rdmad3.log")"
kill -TERM "$rdmad"
wait "$rdmad"; rc=$?
[[ $rc == 0 ]] || fail "rdmad with a dead NOTIFY_SOCKET exited $rc on SIGTERM: $(cat "$dir/rdmad3.log")"
grep -q "sd_notify" "$dir/rdmad3.log" || fail "rdmad did not warn that sd_notify failed: $(cat "$dir/rdmad3.log")"

if ((failures)); then
  echo "$failures failure(s)" >&2
  exit 1
fi
echo "PASS"
