#!/usr/bin/env bash
# Both sides of the two-machine tests, run by tests/guest/run-two-guests.sh:
#   guest A: the application first: a process writes 4 MiB of random bytes to /dev/shm/rdmad-grant-e2e.bin
#            and copies them to OUT_DIR/grant-expected.bin (what B compares its reads with); then rdmad with
#            its data-plane listener on 10.0.3.1:7471 and gRPC on 10.0.3.1:50051 (TCP, the test wire only),
#            its unix socket open to every local user (mode 0666); then, as uid 65534 with RLIMIT_MEMLOCK
#            64 KiB, tests/conformance/fd_memory_client.py passes a 64 MiB memfd to rdmad's descriptor
#            socket, registers and grants it (the token in OUT_DIR/fd-memory.token).
#            While B's tests run, A answers their snapshot requests (`rdma resource show` in A, see
#            grant_e2e_test.cc); then the perftest servers of the grants benchmark; waits for B to finish,
#            then SIGTERM, and checks the clean release (two_host_shutdown_a.xml).
#   guest B: its own rdmad, then
#            two_host_test (two_host.xml): rdma_cm between the two rdmads, and a plain client;
#            grant_e2e_test (grant_e2e.xml): grants of rdmad A on A's file, read from B (client library only);
#            memory passed as a descriptor (fd_memory.xml): B reads A's 64 MiB memfd grant whole with
#            `rdmactl read`, byte for byte;
#            the grant clients (grant_clients_*.xml): docs/examples/read_grant.py (pyverbs) and `rdmactl read`,
#            each reading a grant of the same file, compared byte for byte, and read_grant.py --loop revoked
#            mid-stream: its first failed read refused by A's NIC (grant_clients_pyverbs_revoked.xml);
#            a session (session_grants.xml): docs/examples/read_session.py (pyverbs) reads 1,000 grants over one
#            connection, each checked; one revoked in the middle, the others unharmed, its key refused by A's NIC;
#            the SDKs' examples (sdk_examples_cpp.xml, sdk_examples_python.xml): examples/read_grant.cc (the
#            binary RDMAD_SDK_EXAMPLE, built against the installed SDK by tests/run-all.sh; built here with g++
#            and pkg-config when unset) and examples/read_grant.py, each with A's rdmad as its control plane
#            and A's file /dev/shm/rdmad-sdk-example.bin (their 64 KiB pattern, written in A) as the region;
#            the reject flood (reject_flood.xml): 300 connect requests with garbage private data at A's
#            data-plane listener, every one rejected, A still answering gRPC, and A's audit trail
#            (OUT_DIR/audit-a.jsonl) and log (OUT_DIR/rdmad-a.log) holding the first reject per interval and
#            summary records, not one line per attempt;
#            the grants benchmark, short form (tests/bench/run-grant-bench.sh; grant_bench.xml says it ran;
#            RDMAD_GRANT_BENCH=off skips it, =full runs the long form);
#            then the same release check (two_host_shutdown_b.xml).
# Usage: run-two-host.sh OUT_DIR   (RDMAD_GUEST_ROLE, RDMAD_GUEST_ADDR, RDMAD_PEER_ADDR, RDMAD_PEER_SH
# come from run-two-guests.sh)
# RDMAD_TWO_HOST_ONLY=STEP (a developer's shortcut, never set by the suite): B runs only that one of its
# steps (two_host, grant_e2e, fd_memory, grant_clients, sessions, sdk_examples, reject_flood), A only
# serves it, and neither the benchmark nor the soak runs.
set -euo pipefail
out=${1:?usage: run-two-host.sh OUT_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$root/bazel-bin
junit=$root/tests/lib/junit-case.sh
role=${RDMAD_GUEST_ROLE:?run under run-two-guests.sh}
bench=${RDMAD_GRANT_BENCH:-short}
work=$(mktemp -d /tmp/rdmad-two-host.XXXXXX)
sock=$work/rdmad.sock
grant_file=/dev/shm/rdmad-grant-e2e.bin
listen="\"unix:$sock\""
audit='"-"'
# A's audit trail goes to its own file in the shared dir, where B's reject flood reads it.
[ "$role" = a ] && listen="$listen, \"$RDMAD_GUEST_ADDR:50051\"" && audit="\"$out/audit-a.jsonl\"" && rm -f "$out/audit-a.jsonl"
# B's tests call A's rdmad over plain gRPC/TCP on the guests' private wire: insecure_tcp (callers there are
# "anonymous"; single-tenant mode admits them). TLS itself is tested on the host (tests/unit/listeners_test).
cat >"$work/rdmad.json" <<JSON
{ "listen": [$listen], "insecure_tcp": true, "rdma_listen": ["$RDMAD_GUEST_ADDR:7471"], "cm_workers": 2,
  "log_level": "info", "audit": $audit, "unix_socket": {"mode": "0666"} }
JSON
chmod 0755 "$work"  # A's non-root client reaches the sockets in it
if [ "$role" = a ]; then
  # The application: writes the bytes B will read through grants, before rdmad (and B) start.
  dd if=/dev/urandom of="$grant_file" bs=1M count=16 iflag=fullblock status=none
  cp "$grant_file" "$out/grant-expected.bin"
  # The SDK examples' pattern (examples/read_grant.*: byte i is i * 7 + 3), for B's examples to register here.
  python3 -c 'import sys; sys.stdout.buffer.write(bytes((i * 7 + 3) & 0xFF for i in range(64 << 10)))' \
    >/dev/shm/rdmad-sdk-example.bin
fi
rdma resource show >"$work/before.txt" 2>&1 || true
"$bin/server/rdmad" --config "$work/rdmad.json" >"$out/rdmad-$role.log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do [ -S "$sock" ] && break; sleep 0.1; done

# A: answers B's requests for `rdma resource show` (B creates snap-req-LABEL; A writes a-res-LABEL.txt, then
# snap-LABEL) until B's tests are done. Polls with `read -t`: no fork per poll.
serve_snapshots() {
  local nap req label
  exec {nap}<> <(:)
  while [ ! -e "$out/b-tests-done" ]; do
    [ -e "$out/guest-b.status" ] && return 1
    for req in "$out"/snap-req-*; do
      [ -e "$req" ] || continue
      label=${req##*/snap-req-}
      rm -f "$req"
      rdma resource show >"$out/a-res-$label.txt" 2>&1 || true
      rdma statistic show >"$out/a-stat-$label.txt" 2>&1 || true  # the device's counters, for diagnosis
      "$RDMAD_PEER_SH" signal "snap-$label"
    done
    read -r -t 0.2 -u "$nap" _ || true
  done
}

# B: docs/examples/read_grant.py (pyverbs) and `rdmactl read` on grants of A's file, compared with the copy.
# Each is a JUnit case: grant_clients_pyverbs.xml, grant_clients_pyverbs_revoked.xml, grant_clients_rdmactl.xml.
expected_slice() {  # OFFSET LENGTH: the expected bytes of A's file
  tail -c +$(($1 + 1)) "$out/grant-expected.bin" | head -c "$2"
}
grant_clients() {
  local ctl=("$bin/cli/rdmactl" --server "$RDMAD_PEER_ADDR:50051" --timeout 60s) pd mr problem status=0
  local example=$root/docs/examples/read_grant.py
  pd=$("${ctl[@]}" -o name create pd --device rxe0 --label grant-clients 2>"$work/ctl.err") &&
    mr=$("${ctl[@]}" -o name register mr --pd "$pd" --file "$grant_file" --length 4MiB --access local-write,remote-read,mw-bind \
      2>>"$work/ctl.err") || {
    problem="rdmactl could not register $grant_file in A: $(tr '\n' ' ' <"$work/ctl.err")"
    "$junit" "$out/grant_clients_pyverbs.xml" GrantClients PyverbsExample "$problem"
    "$junit" "$out/grant_clients_rdmactl.xml" GrantClients RdmactlRead "$problem"
    "$junit" "$out/grant_clients_pyverbs_revoked.xml" GrantClients PyverbsRefusedByTheNicRightAfterRevoke "$problem"
    echo "$problem" >&2
    return 1
  }
  echo "grant clients: $mr ($pd) in A registers $grant_file"

  # pyverbs: a grant issued by rdmactl (token in a file), read by the example with pyverbs only.
  problem=""
  if [ ! -f "$example" ]; then
    problem="$example does not exist"
  elif ! "${ctl[@]}" grant "$mr" --offset 8191 --length 300000 --for pyverbs-example --ttl 120s \
      --token-file "$work/py.token" >"$work/grant.out" 2>&1; then
    problem="rdmactl grant failed: $(tr '\n' ' ' <"$work/grant.out")"
  else
    py_rc=0
    timeout 120 /usr/bin/python3 "$example" --endpoint "$RDMAD_PEER_ADDR:7471" --token-file "$work/py.token" \
      --offset 1000 --length 200000 -o "$work/py.out" >"$out/read_grant_py.log" 2>&1 || py_rc=$?
    [ "$py_rc" -eq 0 ] || problem="read_grant.py failed (exit $py_rc): $(tail -n 5 "$out/read_grant_py.log" | tr '\n' ' ')"
  fi
  if [ -n "$problem" ]; then
    :
  elif ! cmp -s <(expected_slice 9191 200000) "$work/py.out"; then
    problem="read_grant.py's bytes differ from A's file ($(stat -c %s "$work/py.out") bytes written): $(cmp <(expected_slice 9191 200000) "$work/py.out" 2>&1 | head -n 1)"
  fi
  sed 's/^/  read_grant.py: /' "$out/read_grant_py.log" 2>/dev/null | tail -n 5 || true
  "$junit" "$out/grant_clients_pyverbs.xml" GrantClients PyverbsExample "$problem"
  [ -z "$problem" ] && echo "grant clients: read_grant.py (pyverbs) read 200000 bytes: identical" ||
    { echo "grant clients: $problem" >&2; status=1; }

  # pyverbs, revoked mid-stream: read_grant.py --loop reads a grant's range over and over; once it has read it
  # whole, the grant is revoked (rdmactl revoke, from here). Its first failed read must be refused by A's NIC
  # (remote access error) at once: not flushed by a disconnect, nor timed out by its transport (the
  # connection stays up for A's grant_end_grace_ms after the key died). Printed: from RevokeGrant's return
  # to that failure, by this guest's clock.
  # One exception is run again, once, and said: a transport retry error. A's QP goes to the error state as
  # it sends the refusal (a NAK), so if the emulated wire drops that one packet the client's retries go
  # unanswered; nothing on A's side can resend it. Any other outcome, or the same twice, fails.
  local grant loop_pid loop_rc called returned failed_at attempt
  for attempt in 1 2; do
    problem=""
    loop_rc=0
    if ! grant=$("${ctl[@]}" -o name grant "$mr" --length 65536 --for pyverbs-loop --ttl 120s --token-file "$work/loop.token" 2>"$work/grant.out"); then
      problem="rdmactl grant failed: $(tr '\n' ' ' <"$work/grant.out")"
    else
      /usr/bin/python3 "$example" --endpoint "$RDMAD_PEER_ADDR:7471" --token-file "$work/loop.token" --length 65536 \
        --loop --timeout 90 -o "$work/loop.out" >"$out/read_grant_loop.log" 2>&1 &
      loop_pid=$!
      for _ in $(seq 600); do
        grep -q "pass 1 done" "$out/read_grant_loop.log" && break
        kill -0 "$loop_pid" 2>/dev/null || break
        sleep 0.1
      done
      called=$(date +%s%N)
      "${ctl[@]}" revoke "$grant" >"$work/revoke.out" 2>&1 || problem="rdmactl revoke $grant failed: $(tr '\n' ' ' <"$work/revoke.out")"
      returned=$(date +%s%N)
      wait "$loop_pid" || loop_rc=$?
      failed_at=$(sed -n 's/^read_grant: read failed at \([0-9]*\) ns.*/\1/p' "$out/read_grant_loop.log")
      if [ -n "$problem" ]; then
        :
      elif ! grep -q "pass 1 done" "$out/read_grant_loop.log"; then
        problem="read_grant.py --loop never read the range whole (exit $loop_rc): $(tail -n 3 "$out/read_grant_loop.log" | tr '\n' ' ')"
      elif [ -z "$failed_at" ]; then
        problem="read_grant.py --loop did not report a failed read (exit $loop_rc): $(tail -n 3 "$out/read_grant_loop.log" | tr '\n' ' ')"
      elif ! grep -q "read failed at .*remote access error" "$out/read_grant_loop.log"; then
        problem="the first failed read after the revocation was not refused by the NIC: $(grep 'read failed at' "$out/read_grant_loop.log")"
      elif ! cmp -s <(expected_slice 0 65536) "$work/loop.out"; then
        problem="read_grant.py --loop's first pass differs from A's file"
      else
        echo "grant clients: revoke took $(((returned - called) / 1000000)) ms; the pyverbs reader's first failed read came" \
          "$(((failed_at - returned) / 1000000)) ms after RevokeGrant returned: $(sed -n 's/^read_grant: read failed at [0-9]* ns (Unix time) //p' "$out/read_grant_loop.log")"
      fi
    fi
    if [ "$attempt" = 1 ] && grep -q "read failed at .*\(retry exceeded error\|transport retry counter exceeded\)" "$out/read_grant_loop.log" 2>/dev/null; then
      echo "grant clients: the pyverbs reader's first failed read was a transport retry error (A's refusal lost on the wire): once more" >&2
      cp "$out/read_grant_loop.log" "$out/read_grant_loop.1.log"
      continue
    fi
    break
  done
  sed 's/^/  read_grant.py --loop: /' "$out/read_grant_loop.log" 2>/dev/null | tail -n 3 || true
  if [ -n "$problem" ]; then
    # Both devices' counters (packets sent and received, NAKs, retries), to tell a loss on the wire from a
    # refusal never sent: this guest's now, A's through its snapshot service (a-stat-pyverbs-revoked.txt).
    rdma statistic show >"$out/b-stat-pyverbs-revoked.txt" 2>&1 || true
    touch "$out/snap-req-pyverbs-revoked"
    "$RDMAD_PEER_SH" wait snap-pyverbs-revoked 30 || true
  fi
  "$junit" "$out/grant_clients_pyverbs_revoked.xml" GrantClients PyverbsRefusedByTheNicRightAfterRevoke "$problem"
  [ -z "$problem" ] || { echo "grant clients: $problem" >&2; status=1; }

  # rdmactl read: rdmactl issues its own grant over the range, reads it, revokes it.
  problem=""
  if ! "${ctl[@]}" read "$mr" --offset 777 --length 1MiB --out-file "$work/ctl.out" >"$out/rdmactl_read.log" 2>&1; then
    problem="rdmactl read failed: $(tail -n 3 "$out/rdmactl_read.log" | tr '\n' ' ')"
  elif ! cmp -s <(expected_slice 777 1048576) "$work/ctl.out"; then
    problem="rdmactl read's bytes differ from A's file: $(cmp <(expected_slice 777 1048576) "$work/ctl.out" 2>&1 | head -n 1)"
  fi
  sed 's/^/  rdmactl: /' "$out/rdmactl_read.log"
  "$junit" "$out/grant_clients_rdmactl.xml" GrantClients RdmactlRead "$problem"
  [ -z "$problem" ] && echo "grant clients: rdmactl read 1MiB: identical" || { echo "grant clients: $problem" >&2; status=1; }

  "${ctl[@]}" delete pd "$pd" --cascade --revoke-grants >/dev/null 2>&1 ||
    { echo "grant clients: deleting $pd in A failed" >&2; status=1; }
  return "$status"
}

# A: a non-root process (uid 65534, RLIMIT_MEMLOCK 64 KiB) registers a 64 MiB memfd through the descriptor
# socket and grants it; B reads it (fd_memory_read). Its status in OUT_DIR/fd-memory-a.rc.
fd_memory_share() {
  local rc=0
  rm -f "$out/fd-memory.token"
  install -m 0600 -o 65534 -g 65534 /dev/null "$work/fd-memory.token"  # the client's to write
  prlimit --memlock=65536:65536 setpriv --reuid=65534 --regid=65534 --clear-groups -- \
    env -u PYTHONPATH /usr/bin/python3 "$root/tests/conformance/fd_memory_client.py" share "unix:$sock" \
    "$work/fd-memory.token" >"$out/fd_memory_a.log" 2>&1 || rc=$?
  [ "$rc" -eq 0 ] && cp "$work/fd-memory.token" "$out/fd-memory.token"
  sed 's/^/  fd memory (A): /' "$out/fd_memory_a.log"
  echo "$rc" >"$out/fd-memory-a.rc"
}

# B: A's memfd grant read whole with rdmactl read, compared byte for byte with the pattern; fd_memory.xml.
fd_memory_read() {
  local problem="" a_rc
  a_rc=$(cat "$out/fd-memory-a.rc" 2>/dev/null || echo "none")
  if [ "$a_rc" != 0 ]; then
    problem="A's non-root client could not register and grant its memfd (status $a_rc): $(tail -n 3 "$out/fd_memory_a.log" 2>/dev/null | tr '\n' ' ')"
  elif ! "$bin/cli/rdmactl" --timeout 300s read --token-file "$out/fd-memory.token" --endpoint "$RDMAD_PEER_ADDR:7471" \
      --out-file "$work/fd-memory.out" >"$out/fd_memory_b.log" 2>&1; then
    problem="rdmactl read of A's memfd grant failed: $(tail -n 3 "$out/fd_memory_b.log" | tr '\n' ' ')"
  else
    /usr/bin/python3 "$root/tests/conformance/fd_memory_client.py" expected "$work/fd-memory.expected"
    cmp -s "$work/fd-memory.expected" "$work/fd-memory.out" ||
      problem="the bytes read through A's memfd grant differ from the pattern: $(cmp "$work/fd-memory.expected" "$work/fd-memory.out" 2>&1 | head -n 1)"
  fi
  sed 's/^/  fd memory (B): /' "$out/fd_memory_b.log" 2>/dev/null || true
  "$junit" "$out/fd_memory.xml" FdMemory NonRootMemfdOf64MiBReadFromTheOtherMachine "$problem"
  rm -f "$work/fd-memory.out" "$work/fd-memory.expected"
  [ -z "$problem" ] && echo "fd memory: 64 MiB read through A's memfd grant: identical" || { echo "fd memory: $problem" >&2; return 1; }
}

# B: the SDKs' examples from B, with rdmad A as their control plane: they register A's pattern file, grant a
# range of it, read it over RDMA from B, check the bytes, revoke and see the next read refused (exit status 0).
sdk_examples() {
  local example=${RDMAD_SDK_EXAMPLE:-} problem status=0 rc
  problem=""
  if [ -z "$example" ]; then
    example=$work/read_grant
    g++ -Wall -Wextra -Werror -o "$example" "$root/examples/read_grant.cc" $(pkg-config --cflags --libs rdmad-client) \
      >"$out/sdk_example_cpp.log" 2>&1 || problem="examples/read_grant.cc does not build against the installed SDK"
  fi
  if [ -z "$problem" ]; then
    rc=0
    "$example" "$RDMAD_PEER_ADDR:50051" /dev/shm/rdmad-sdk-example.bin >>"$out/sdk_example_cpp.log" 2>&1 || rc=$?
    [ "$rc" -eq 0 ] || problem="examples/read_grant.cc against rdmad A exited with status $rc: $(tail -n 3 "$out/sdk_example_cpp.log" | tr '\n' ' ')"
  fi
  sed 's/^/  read_grant (C++): /' "$out/sdk_example_cpp.log"
  "$junit" "$out/sdk_examples_cpp.xml" SdkExamples CppReadsAGrantOfTheOtherMachine "$problem"
  [ -z "$problem" ] || { echo "sdk examples: $problem" >&2; status=1; }

  problem="" rc=0
  (cd "$work" && PYTHONPATH= /usr/bin/python3 "$root/examples/read_grant.py" "$RDMAD_PEER_ADDR:50051" \
    /dev/shm/rdmad-sdk-example.bin) >"$out/sdk_example_python.log" 2>&1 || rc=$?
  [ "$rc" -eq 0 ] || problem="examples/read_grant.py against rdmad A exited with status $rc: $(tail -n 3 "$out/sdk_example_python.log" | tr '\n' ' ')"
  sed 's/^/  read_grant.py: /' "$out/sdk_example_python.log"
  "$junit" "$out/sdk_examples_python.xml" SdkExamples PythonReadsAGrantOfTheOtherMachine "$problem"
  [ -z "$problem" ] || { echo "sdk examples: $problem" >&2; status=1; }
  return "$status"
}

# B: a session (docs/examples/read_session.py, pyverbs only): 1,000 grants of A's file, each over its own 4 KiB,
# issued in two IssueGrants calls (tests/conformance/session_grants.py, the installed Python SDK), activated
# and read over one connection, every range checked against the copy; rdmad A holds one data-plane
# connection for them, the reader one QP. Then one grant in the middle is revoked: its ENDED arrives, every
# other grant reads unchanged; the reader releases the first grant (RELEASED); and a read through the revoked
# grant's dead key is refused by A's NIC. session_grants.xml.
sessions() {
  local ctl=("$bin/cli/rdmactl" --server "$RDMAD_PEER_ADDR:50051" --timeout 60s) grants=$root/tests/conformance/session_grants.py
  local problem="" pd mr n=1000 each=4096 reader_pid reader_rc=0 victim held qps
  if ! pd=$("${ctl[@]}" -o name create pd --device rxe0 --label sessions 2>"$work/ctl.err") ||
    ! mr=$("${ctl[@]}" -o name register mr --pd "$pd" --file "$grant_file" --length 4MiB \
      --access local-write,remote-read,mw-bind 2>>"$work/ctl.err"); then
    problem="rdmactl could not register $grant_file in A: $(tr '\n' ' ' <"$work/ctl.err")"
  elif ! PYTHONPATH= /usr/bin/python3 "$grants" issue "$RDMAD_PEER_ADDR:50051" "$mr" "$n" "$each" \
      "$work/session.tokens" "$work/session.names" >"$out/session_grants.log" 2>&1; then
    problem="issuing $n grants failed: $(tail -n 3 "$out/session_grants.log" | tr '\n' ' ')"
  else
    /usr/bin/python3 "$root/docs/examples/read_session.py" --endpoint "$RDMAD_PEER_ADDR:7471" \
      --tokens-file "$work/session.tokens" --wait-ended 120 --release-first --probe-ended --timeout 900 \
      >"$work/session.out" 2>"$out/read_session.log" &
    reader_pid=$!
    for _ in $(seq 6000); do
      grep -q "all $n grants read" "$out/read_session.log" && break
      kill -0 "$reader_pid" 2>/dev/null || break
      sleep 0.1
    done
    if grep -q "all $n grants read" "$out/read_session.log"; then
      held=$(PYTHONPATH= /usr/bin/python3 "$grants" connections "$RDMAD_PEER_ADDR:50051" "$pd" 2>>"$out/session_grants.log")
      qps=$(rdma resource show qp 2>/dev/null | grep -c "pid $reader_pid " || true)
      victim=$(sed -n "$((n / 2 + 1))p" "$work/session.names")
      PYTHONPATH= /usr/bin/python3 "$grants" revoke "$RDMAD_PEER_ADDR:50051" "$victim" >>"$out/session_grants.log" 2>&1 ||
        problem="revoking $victim failed: $(tail -n 2 "$out/session_grants.log" | tr '\n' ' ')"
    fi
    wait "$reader_pid" || reader_rc=$?
    cat "$work/session.out" >>"$out/read_session.log"
    if [ -n "$problem" ]; then
      :
    elif [ "$reader_rc" -ne 0 ]; then
      problem="read_session.py exited with status $reader_rc: $(grep -v '^[0-9]' "$out/read_session.log" | tail -n 3 | tr '\n' ' ')"
    elif [ "$held" != 1 ] || [ "$qps" != 1 ]; then
      problem="$n grants held $held data-plane connection(s) in A and $qps QP(s) in the reader, not 1 and 1"
    elif ! /usr/bin/python3 - "$out/grant-expected.bin" "$work/session.out" "$n" "$each" <<'PY'
import hashlib, sys
data, lines, n, each = open(sys.argv[1], "rb").read(), open(sys.argv[2]).read().split("\n"), int(sys.argv[3]), int(sys.argv[4])
got = {int(f[0]): f[3] for f in (l.split() for l in lines) if len(f) == 4 and f[0].isdigit()}
bad = [i for i in range(n) if got.get(i) != hashlib.sha256(data[i * each:(i + 1) * each]).hexdigest()]
print("session: %d of %d grants read their own range" % (n - len(bad), n) + ("; wrong: %s" % bad[:5] if bad else ""))
sys.exit(1 if bad else 0)
PY
    then
      problem="the session's reads differ from A's file (see read_session.log)"
    elif ! grep -q "^ended $((n / 2)) ${victim} REVOKED" "$work/session.out" ||
      ! grep -q "^reread $((n - 1)) grants: unchanged" "$work/session.out" ||
      ! grep -q "^released 0 $(head -n 1 "$work/session.names") RELEASED" "$work/session.out" ||
      ! grep -q "^probe $((n / 2)) ${victim}: remote access error" "$work/session.out"; then
      problem="after revoking $victim: $(grep -v '^[0-9]' "$work/session.out" | tr '\n' ' ')"
    fi
  fi
  sed 's/^/  read_session.py: /' "$out/read_session.log" 2>/dev/null | grep -v ': [0-9]* grants/' | tail -n 8 || true
  [ -z "$problem" ] && echo "sessions: $n grants over one connection (A: $held connection, reader: $qps QP), each read" \
    "its own range; $victim revoked in the middle, the others unchanged, its key refused by A's NIC"
  [ -n "${pd:-}" ] && "${ctl[@]}" delete pd "$pd" --cascade --revoke-grants >/dev/null 2>&1 || true
  "$junit" "$out/session_grants.xml" Sessions ThousandGrantsOverOneConnection "$problem"
  [ -z "$problem" ] || { echo "sessions: $problem" >&2; return 1; }
}

# B: the reject flood against A's data-plane listener (tests/conformance/reject_flood.cc); reject_flood.xml.
reject_flood() {
  local problem="" flood_rc=0
  "$bin/tests/conformance/reject_flood" --address "$RDMAD_PEER_ADDR" --port 7471 --grpc "$RDMAD_PEER_ADDR:50051" \
    --self "$RDMAD_GUEST_ADDR" --audit "$out/audit-a.jsonl" --log "$out/rdmad-a.log" --count 300 --interval-s 10 \
    >"$out/reject_flood.log" 2>&1 || flood_rc=$?
  sed 's/^/  /' "$out/reject_flood.log"
  [ "$flood_rc" -eq 0 ] ||
    problem="reject flood (exit $flood_rc): $(grep 'FAIL: \|usage' "$out/reject_flood.log" | tr '\n' ' ')"
  "$junit" "$out/reject_flood.xml" RejectFlood GarbageConnectsRejectedAndAggregated "$problem"
  [ -z "$problem" ] || { echo "$problem" >&2; return 1; }
}

only=${RDMAD_TWO_HOST_ONLY:-}
step() {  # STEP: whether B runs it
  [ -z "$only" ] || [ "$only" = "$1" ]
}
[ -n "$only" ] && bench=off
rc=0
if [ "$role" = a ]; then
  if step fd_memory; then fd_memory_share; fi
  "$RDMAD_PEER_SH" signal a-up
  serve_snapshots || rc=1
  if [ "$bench" != off ]; then
    bench_args=(--rdmad-running)
    [ "$bench" = full ] && bench_args+=(--full)
    "$root/tests/bench/run-grant-bench.sh" "${bench_args[@]}" || true
  fi
  "$RDMAD_PEER_SH" wait b-done 1200 || rc=1
  rm -f "$grant_file" /dev/shm/rdmad-sdk-example.bin
else
  "$RDMAD_PEER_SH" wait a-up 300 || { echo "guest A never came up" >&2; exit 1; }
  if step two_host; then
    RDMAD_TARGET="unix:$sock" RDMAD_REMOTE_TARGET="$RDMAD_PEER_ADDR:50051" RDMAD_REMOTE_ADDR="$RDMAD_PEER_ADDR" \
      "$bin/tests/conformance/two_host_test" --gtest_output="xml:$out/two_host.xml" || rc=$?
  fi
  if step grant_e2e; then
    RDMAD_REMOTE_TARGET="$RDMAD_PEER_ADDR:50051" RDMAD_REMOTE_ADDR="$RDMAD_PEER_ADDR" RDMAD_GRANT_FILE="$grant_file" \
      RDMAD_GRANT_SYNC_CLOCK=1 \
      RDMAD_GRANT_EXPECTED="$out/grant-expected.bin" \
      "$bin/tests/conformance/grant_e2e_test" --gtest_output="xml:$out/grant_e2e.xml" || rc=1
  fi
  if step fd_memory; then fd_memory_read || rc=1; fi
  if step grant_clients; then grant_clients || rc=1; fi
  if step sessions; then sessions || rc=1; fi
  if step sdk_examples; then sdk_examples || rc=1; fi
  if step reject_flood; then reject_flood || rc=1; fi
  "$RDMAD_PEER_SH" signal b-tests-done
  if [ "$bench" != off ]; then
    bench_args=(--rdmad-running)
    [ "$bench" = full ] && bench_args+=(--full)
    problem=""
    "$root/tests/bench/run-grant-bench.sh" "${bench_args[@]}" 2>&1 | tee "$out/grant-bench.log" ||
      problem="tests/bench/run-grant-bench.sh did not run to the end (see grant-bench.log)"
    "$junit" "$out/grant_bench.xml" Benchmarks GrantBenchRuns "$problem"
    [ -z "$problem" ] || { echo "$problem" >&2; rc=1; }
  fi
  "$RDMAD_PEER_SH" signal b-done
fi
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
rdma resource show >"$work/after.txt" 2>&1 || true
problem=""
[ "$status" -eq 0 ] || problem="rdmad ($role) exited with status $status after SIGTERM"
diff -q "$work/before.txt" "$work/after.txt" >/dev/null || problem="$problem device resources differ: $(diff "$work/before.txt" "$work/after.txt" | tr '\n' ' ')"
"$junit" "$out/two_host_shutdown_$role.xml" TwoHostShutdown "Guest_$role" "$problem"
[ -z "$problem" ] || { echo "$problem" >&2; rc=1; }
rm -rf "$work"
# The fault soak, both sides (tests/soak/run-fault-soak.sh: its own rdmad in A, started once this one has
# stopped): one round; RDMAD_SOAK=full runs 20, RDMAD_SOAK_ROUNDS=N runs N.
[ -n "$only" ] && exit "$rc"
soak_args=()
[ "${RDMAD_SOAK:-short}" = full ] && soak_args+=(--full)
"$root/tests/soak/run-fault-soak.sh" "$out" "${soak_args[@]}" || rc=1
exit "$rc"
