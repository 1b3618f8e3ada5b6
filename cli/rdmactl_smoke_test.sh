#!/usr/bin/env bash
# Smoke test of rdmactl against a real rdmad on a temporary unix socket. Needs no RDMA device: rdmad serves
# an empty device list, which is enough to check the plumbing, the output formats and the exit statuses
# (0 success, 1 error from rdmad, 2 usage error). Without RDMA there is no rdma_cm either: the rdma_cm
# commands are checked for rdmad's UNAVAILABLE reason, NOT_FOUND, usage errors and the event stream's ends.
#
# Under Bazel: bazel test //cli:rdmactl_smoke_test. By hand: RDMAD=... RDMACTL=... cli/rdmactl_smoke_test.sh
set -u

runfiles="${TEST_SRCDIR:-}/${TEST_WORKSPACE:-rdmad}"
RDMAD="${RDMAD:-$runfiles/server/rdmad}"
RDMACTL="${RDMACTL:-$runfiles/cli/rdmactl}"
for bin in "$RDMAD" "$RDMACTL"; do
  [[ -x "$bin" ]] || { echo "FAIL: $bin is not an executable" >&2; exit 1; }
done

# A short directory: a unix socket path must fit in 108 bytes, which Bazel's TEST_TMPDIR may not.
dir="$(mktemp -d /tmp/rdmactl-smoke.XXXXXX)"
sock="unix:$dir/rdmad.sock"
rdmad_pid=""
cleanup() {
  if [[ -n "$rdmad_pid" ]]; then
    kill "$rdmad_pid" 2>/dev/null
    wait "$rdmad_pid" 2>/dev/null
  fi
  rm -rf "$dir"
}
trap cleanup EXIT

failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# run ARGS...: runs rdmactl against the test rdmad; sets rc, out, err.
run() {
  "$RDMACTL" --server "$sock" --timeout 5s "$@" >"$dir/out" 2>"$dir/err"
  rc=$?
  out="$(cat "$dir/out")"
  err="$(cat "$dir/err")"
}

expect_rc() {  # expect_rc WANT DESCRIPTION
  if [[ "$rc" != "$1" ]]; then
    fail "$2: exit status $rc, want $1 (stdout: '$out', stderr: '$err')"
  fi
}

"$RDMAD" --listen "$sock" --log-level warning 2>"$dir/rdmad.log" &
rdmad_pid=$!

# Wait (up to ~10 s) for rdmad to serve.
for _ in $(seq 1 100); do
  run health
  [[ "$rc" == 0 ]] && break
  kill -0 "$rdmad_pid" 2>/dev/null || { cat "$dir/rdmad.log" >&2; echo "FAIL: rdmad exited" >&2; exit 1; }
  sleep 0.1
done

echo "--- health"
run health
expect_rc 0 "health"
[[ "$out" == *"is serving"* ]] || fail "health: stdout '$out' does not say it is serving"

echo "--- health -o json, server from RDMAD_SERVER"
RDMAD_SERVER="$sock" "$RDMACTL" health -o json >"$dir/out" 2>"$dir/err"
rc=$?; out="$(cat "$dir/out")"; err="$(cat "$dir/err")"
expect_rc 0 "RDMAD_SERVER health"
grep -q '"status": "SERVING"' "$dir/out" || fail "health -o json: '$out'"

echo "--- get devices -o json"
run get devices -o json
expect_rc 0 "get devices -o json"
[[ -z "$err" ]] || fail "get devices -o json: stderr is not empty: '$err'"
head -c1 "$dir/out" | grep -q '{' || fail "get devices -o json: not a JSON object: '$out'"
grep -q '"items": \[' "$dir/out" || fail "get devices -o json: no items array: '$out'"
if command -v python3 >/dev/null 2>&1; then
  python3 -c 'import json, sys; d = json.load(sys.stdin); assert isinstance(d["items"], list)' <"$dir/out" ||
    fail "get devices -o json: not valid JSON with an items list: '$out'"
fi

echo "--- get pds (empty: message on stderr only)"
run get pds
expect_rc 0 "get pds"
[[ -z "$out" ]] || fail "get pds: stdout should be empty, got '$out'"
[[ "$err" == *"No resources found"* ]] || fail "get pds: stderr '$err' lacks 'No resources found'"

echo "--- get pds -o name"
run get pds -o name
expect_rc 0 "get pds -o name"
[[ -z "$out" ]] || fail "get pds -o name: stdout should be empty, got '$out'"

echo "--- create pd on a device that does not exist: error from rdmad, exit 1"
run create pd --device nosuchdev0
expect_rc 1 "create pd --device nosuchdev0"
[[ "$err" == error:* ]] || fail "create pd: stderr '$err' does not start with 'error:'"
[[ "$err" == *nosuchdev0* ]] || fail "create pd: stderr '$err' does not name the device"
[[ -z "$out" ]] || fail "create pd: stdout should be empty, got '$out'"

echo "--- get mrs/17 (TYPE/NAME form): NOT_FOUND, exit 1"
run get mrs/17 -o json
expect_rc 1 "get mrs/17"
[[ "$err" == *"error:"*"mrs/17"* ]] || fail "get mrs/17: stderr '$err'"
[[ -z "$out" ]] || fail "get mrs/17 -o json: stdout should be empty, got '$out'"

echo "--- delete pd --cascade of a missing PD: exit 1"
run delete pd 7 --cascade
expect_rc 1 "delete pd 7 --cascade"
[[ "$err" == *"pds/7"* ]] || fail "delete pd 7: stderr '$err' does not name pds/7"

echo "--- unknown verb: exit 2"
run frobnicate mrs
expect_rc 2 "unknown verb"
[[ "$err" == *"error:"* ]] || fail "unknown verb: stderr '$err'"

echo "--- unknown noun, missing required flag, bad size, bad access, bad name: exit 2"
run get widgets
expect_rc 2 "get widgets"
run create pd
expect_rc 2 "create pd without --device"
run register mr --pd pds/1 --size 1.5.2MB --access local-write
expect_rc 2 "register mr --size 1.5.2MB"
[[ "$err" == *"1.5.2MB"* ]] || fail "bad size: stderr '$err' does not quote the size"
run register mr --pd pds/1 --size 4KiB --access local-write,remote-raed
expect_rc 2 "register mr with an unknown access flag"
[[ "$err" == *"remote-raed"* ]] || fail "bad access: stderr '$err' does not name the flag"
run delete mr pds/1
expect_rc 2 "delete mr pds/1"
run rereg mr mrs/1
expect_rc 2 "rereg mr with nothing to change"
run get pds -o xml
expect_rc 2 "-o xml"

# ---- rdma_cm. A host without RDMA has no rdma_cm: rdmad says so in its log and answers UNAVAILABLE to
# what needs it; rdmactl must print rdmad's reason, exit 1, and not blame the connection.
if grep -q "rdma_cm is unavailable" "$dir/rdmad.log"; then
  echo "--- rdma_cm unavailable on this host: create channel|cmid|token fail clearly, exit 1"
  for cmd in "create channel --label smoke" "create cmid --pd pds/1" "create token --pd pds/1 --ttl 10s"; do
    # shellcheck disable=SC2086
    run $cmd
    expect_rc 1 "$cmd"
    [[ "$err" == "error: rdma_cm is unavailable on this host" ]] ||
      fail "$cmd: stderr '$err' is not exactly rdmad's reason (and no hint about the connection)"
    [[ -z "$out" ]] || fail "$cmd: stdout should be empty, got '$out'"
  done
  run create cmid --pd pds/1 -o json
  expect_rc 1 "create cmid -o json"
  [[ -z "$out" ]] || fail "create cmid -o json: stdout should be empty, got '$out'"
else
  echo "--- rdma_cm available: create and delete a channel"
  run create channel --label smoke -o name
  expect_rc 0 "create channel"
  [[ "$out" =~ ^channels/[0-9]+$ ]] || fail "create channel -o name: '$out'"
  run delete channel "$out"
  expect_rc 0 "delete channel"
fi

if grep -q "rdma_cm is unavailable" "$dir/rdmad.log"; then
  echo "--- rdma_cm unavailable: lists, lookups and event streams say so too (never an empty answer), exit 1"
  for cmd in "get channels" "get cmids" "get cmids/4" "get channels 9" "events" "events --follow" \
             "events --channel channels/9"; do
    # shellcheck disable=SC2086
    run $cmd
    expect_rc 1 "$cmd"
    [[ "$err" == "error: rdma_cm is unavailable on this host" ]] || fail "$cmd: stderr '$err'"
  done
else
  echo "--- get channels, get cmids: an empty list, or rdmad's UNAVAILABLE"
  for cmd in "get channels" "get cmids"; do
    # shellcheck disable=SC2086
    run $cmd
    if [[ "$rc" == 0 ]]; then
      [[ -z "$out" ]] || fail "$cmd: stdout should be empty, got '$out'"
      [[ "$err" == *"No resources found"* ]] || fail "$cmd: stderr '$err' lacks 'No resources found'"
    else
      expect_rc 1 "$cmd"
      [[ "$err" == "error: rdma_cm is unavailable on this host" ]] || fail "$cmd: stderr '$err'"
    fi
  done
  run get cmids -o json
  if [[ "$rc" == 0 ]]; then
    grep -q '"items": \[\]' "$dir/out" || fail "get cmids -o json: '$out'"
    [[ -z "$err" ]] || fail "get cmids -o json: stderr is not empty: '$err'"
  fi

  echo "--- get cmids/4, get channels 9 (missing): exit 1 naming them"
  run get cmids/4
  expect_rc 1 "get cmids/4"
  [[ "$err" == *"error:"*"cmids/4"* ]] || fail "get cmids/4: stderr '$err'"
  run get channels 9
  expect_rc 1 "get channels 9"
  [[ "$err" == *"error:"*"channels/9"* ]] || fail "get channels 9: stderr '$err'"

  echo "--- events (no --follow): replays what rdmad retains, stops after 1 s without events"
  start=$SECONDS
  run events
  expect_rc 0 "events"
  ((SECONDS - start <= 8)) || fail "events took $((SECONDS - start)) s; it should stop after 1 s idle"
  [[ -z "$out" ]] || fail "events: stdout should be empty (no events), got '$out'"
  [[ "$err" == *"No events found."* ]] || fail "events: stderr '$err' lacks 'No events found.'"
  run events -o json --type established,disconnected
  expect_rc 0 "events -o json"
  [[ -z "$out" && -z "$err" ]] || fail "events -o json: nothing expected, got stdout '$out', stderr '$err'"

  echo "--- events --follow: no deadline (outlives --timeout), ends when interrupted"
  "$RDMACTL" --server "$sock" --timeout 1s events --follow >"$dir/out" 2>"$dir/err" &
  follow_pid=$!
  sleep 2.5
  if kill -0 "$follow_pid" 2>/dev/null; then
    kill "$follow_pid"
    wait "$follow_pid" 2>/dev/null
  else
    wait "$follow_pid"
    fail "events --follow ended by itself with status $? (stderr: '$(cat "$dir/err")')"
  fi

  echo "--- events --channel channels/9: the channel's name is not split as a noun; NOT_FOUND, exit 1"
  run events --channel channels/9
  expect_rc 1 "events --channel channels/9"
  [[ "$err" == *"channels/9 does not exist"* ]] || fail "events --channel channels/9: stderr '$err'"
fi

echo "--- rdma_cm usage errors: exit 2, nothing sent"
run listen cmids/1 --address fe80::1:7471
expect_rc 2 "listen with an unbracketed IPv6 address"
[[ "$err" == *"brackets"* ]] || fail "listen fe80::1:7471: stderr '$err' does not ask for brackets"
run listen cmids/1 --address "[fe80::1]:7471" --backlog x
expect_rc 2 "listen --backlog x"
run connect cmids/1 --to 10.0.2.15
expect_rc 2 "connect --to without a port"
run connect cmids/1 --to 10.0.2.15:7471 --data-hex abc
expect_rc 2 "connect --data-hex abc"
[[ "$err" == *"odd number"* ]] || fail "connect --data-hex abc: stderr '$err'"
run connect cmids/1 --to 10.0.2.15:7471 --data hello --data-hex 0a
expect_rc 2 "connect with --data and --data-hex"
run connect cmids/1 --to 10.0.2.15:7471 --data-file "$dir/no-such-file"
expect_rc 2 "connect --data-file missing"
run connect qps/1 --to 10.0.2.15:7471
expect_rc 2 "connect qps/1 --to (a QP takes --remote-*)"
run accept cmids/1 --data-hex zz
expect_rc 2 "accept --data-hex zz"
run migrate cmid cmids/1
expect_rc 2 "migrate without --to"
run migrate cmid cmids/1 --to pds/1
expect_rc 2 "migrate --to pds/1"
run create token --pd pds/1 --ttl forever
expect_rc 2 "create token --ttl forever"
run events --type estabished
expect_rc 2 "events --type estabished"
[[ "$err" == *"estabished"* && "$err" == *"established"* ]] || fail "events --type: stderr '$err'"
run events --after -1
expect_rc 2 "events --after -1"

echo "--- rdma_cm on a missing id: rdmad's NOT_FOUND, exit 1"
printf 'hi' >"$dir/data"
run connect cmids/7 --to "[::1]:7471" --data-file "$dir/data"
expect_rc 1 "connect cmids/7"
[[ "$err" == *"cmids/7"* ]] || fail "connect cmids/7: stderr '$err'"
for cmd in "disconnect cmids/7" "accept cmid 7" "reject cmids/7 --data-hex 0a0b" "delete cmid 7"; do
  # shellcheck disable=SC2086
  run $cmd
  expect_rc 1 "$cmd"
  [[ "$err" == *"cmids/7"* ]] || fail "$cmd: stderr '$err' does not name cmids/7"
done

echo "--- grant, read and bench read usage errors: exit 2, nothing sent"
run grant mrs/1 --length 1MiB
expect_rc 2 "grant without --for"
run grant pds/1 --length 1MiB --for app
expect_rc 2 "grant pds/1"
[[ "$err" == *"not a memory region"* ]] || fail "grant pds/1: stderr '$err'"
run renew grants/1
expect_rc 2 "renew without --ttl"
run revoke grants/0
expect_rc 2 "revoke grants/0"
run delete mw mws/1 --revoke-grants
expect_rc 2 "delete mw --revoke-grants"
run read
expect_rc 2 "read without an MR or a token"
run read --token-file "$dir/no-such-file" --endpoint 10.0.2.15:7471
expect_rc 2 "read --token-file missing"
run bench read mrs/1 --ttl 5s --duration 10s
expect_rc 2 "bench read --ttl shorter than --duration"

echo "--- help and version: exit 0"
run --help
expect_rc 0 "--help"
run register mr --help
expect_rc 0 "register mr --help"
[[ "$out" == *"--access"* ]] || fail "register mr --help does not list --access"
run connect cmid --help
expect_rc 0 "connect cmid --help"
[[ "$out" == *"--data-hex"* && "$out" == *"--data-file"* ]] || fail "connect cmid --help: '$out'"
run grant --help
expect_rc 0 "grant --help"
[[ "$out" == *"SECRET"* && "$out" == *"--token-file"* ]] || fail "grant --help: '$out'"
run version
expect_rc 0 "version"
[[ "$out" == "Client Version: rdmactl "* ]] || fail "version: '$out'"

# ---- kubectl habits (docs/cli.md)
echo "--- create mr: a hint to register mr, exit 2"
run create mr --pd pds/1 --size 4KiB --access local-write
expect_rc 2 "create mr"
[[ "$err" == *'did you mean `rdmactl register mr`?'* ]] || fail "create mr: stderr '$err' has no hint"

echo "--- -o yaml, --no-headers, --ignore-not-found, --sort-by, -l"
run get devices -o yaml
expect_rc 0 "get devices -o yaml"
[[ "$out" == "items: []" || "$out" == items:* ]] || fail "get devices -o yaml: '$out'"
run version -o yaml
expect_rc 0 "version -o yaml"
[[ "$out" == *"server_status: SERVING"* ]] || fail "version -o yaml: '$out'"
run get mrs mrs/17 --ignore-not-found
expect_rc 0 "get mrs/17 --ignore-not-found"
[[ -z "$out$err" ]] || fail "get mrs/17 --ignore-not-found printed '$out' '$err'"
run delete pd 7 --ignore-not-found
expect_rc 0 "delete pd 7 --ignore-not-found"
run describe mr 17
expect_rc 1 "describe mr 17"
run get pds --sort-by .nope
expect_rc 2 "--sort-by .nope"
[[ "$err" == *"no field 'nope'"* ]] || fail "--sort-by .nope: '$err'"
run get pds -l 'app in (a'
expect_rc 2 "-l 'app in (a'"
run get devices --no-headers -o wide
expect_rc 0 "--no-headers"

echo "--- version: rdmactl's and rdmad's answer"
run version
expect_rc 0 "version"
[[ "$out" == *"Client Version: rdmactl"* && "$out" == *"Server Version: rdmad 0.1.0 (API rdmad.v1) at $sock"* ]] || fail "version: '$out'"

echo "--- a context names the server; the flag and RDMAD_SERVER win over it"
cat >"$dir/config" <<CONFIG
{"current-context": "nowhere", "contexts": [{"name": "smoke", "server": "$sock"},
 {"name": "nowhere", "server": "unix:$dir/nobody.sock"}]}
CONFIG
RDMACTL_CONFIG="$dir/config" "$RDMACTL" --timeout 2s health >"$dir/out" 2>"$dir/err"; rc=$?
expect_rc 1 "health through the current context (nobody there)"
RDMACTL_CONFIG="$dir/config" "$RDMACTL" --context smoke health >"$dir/out" 2>"$dir/err"; rc=$?
expect_rc 0 "health --context smoke"
RDMACTL_CONFIG="$dir/config" RDMAD_SERVER="$sock" "$RDMACTL" health >"$dir/out" 2>"$dir/err"; rc=$?
expect_rc 0 "RDMAD_SERVER over the context"
RDMACTL_CONFIG="$dir/config" "$RDMACTL" config use-context smoke >"$dir/out" 2>"$dir/err"; rc=$?
expect_rc 0 "config use-context smoke"
RDMACTL_CONFIG="$dir/config" "$RDMACTL" health >"$dir/out" 2>"$dir/err"; rc=$?
expect_rc 0 "health through the new current context"
[[ "$(RDMACTL_CONFIG="$dir/config" "$RDMACTL" config current-context)" == smoke ]] || fail "current-context is not smoke"

echo "--- completion bash: the script sources, and offers the verbs, the kinds and the flags"
if ! out="$(bash -c '
  source <("$0" completion bash) || exit 1
  complete -p rdmactl >/dev/null || exit 1
  complete_words() { COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=(); _rdmactl; echo "${COMPREPLY[*]}"; }
  echo "verbs: $(complete_words rdmactl "")"
  echo "get: $(complete_words rdmactl get "")"
  echo "de: $(complete_words rdmactl de)"
  echo "describe: $(complete_words rdmactl -o json describe "")"
  echo "flags: $(complete_words rdmactl get mr --so)"
  echo "output: $(complete_words rdmactl get pds -o y)"
' "$RDMACTL" 2>&1)"; then
  fail "completion bash does not source: '$out'"
fi
grep -q '^verbs: .*\bget\b.*\bdescribe\b' <<<"$out" || fail "completion: no get/describe among the verbs: '$out'"
grep -q '^get: .*\bdevices\b.*\bpds\b.*\bmrs\b.*\bgrants\b' <<<"$out" || fail "completion: no kinds after get: '$out'"
grep -qx 'de: delete describe' <<<"$out" || fail "completion: 'de' does not give delete describe: '$out'"
grep -qx 'describe: mr tenant' <<<"$out" || fail "completion: describe's nouns: '$out'"
grep -qx 'flags: --sort-by' <<<"$out" || fail "completion: get mr --so: '$out'"
grep -qx 'output: yaml' <<<"$out" || fail "completion: -o y: '$out'"

echo "--- rdmad --version"
out="$("$RDMAD" --version 2>&1)"; rc=$?
expect_rc 0 "rdmad --version"
[[ "$out" == "rdmad "[0-9]*" (API rdmad.v1)" ]] || fail "rdmad --version: '$out'"
# the same version as WhoAmI reports to rdmactl version
[[ "$out" == "rdmad 0.1.0 (API rdmad.v1)" ]] || fail "rdmad --version and WhoAmI differ: '$out'"

echo "--- nobody listening: exit 1 with a hint"
"$RDMACTL" --server "unix:$dir/nobody.sock" --timeout 2s health >"$dir/out" 2>"$dir/err"
rc=$?; out="$(cat "$dir/out")"; err="$(cat "$dir/err")"
expect_rc 1 "health without rdmad"
[[ "$err" == *"hint:"* ]] || fail "health without rdmad: stderr '$err' has no hint"

echo "--- rdmad stops on SIGTERM with status 0 (under --config=asan: no sanitizer report, no leak)"
kill -TERM "$rdmad_pid"
wait "$rdmad_pid"
rdmad_rc=$?
rdmad_pid=""
if [[ "$rdmad_rc" != 0 ]]; then
  fail "rdmad exited with status $rdmad_rc after SIGTERM; its log:"
  cat "$dir/rdmad.log" >&2
fi

if ((failures > 0)); then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "PASS"
