#!/usr/bin/env bash
# The rdmad demo: starts rdmad on this machine's verbs device, then does what an operator would with
# rdmactl: look at the device, create a PD, register memory an application shares (a file in /dev/shm)
# and memory rdmad allocates, bind a memory window over part of it, show it, rereg, see a refusal; then
# rdma_cm: rdmad's event channels, a connection token, a connection from an rdmad id to rdmad's own
# token-checked data-plane listener, its events; then a grant: a client in another process reads a range of
# the file over RDMA with the grant's token (rdmactl read, as an application with the client library would),
# its bytes are compared with the file's, and a revoked grant's client sees its next read fail; and tear it
# all down. Works on any host with a verbs device (RDMAD_DEMO_DEVICE, default: the first one), the client then
# on the same host.
# ./quickstart.sh demo on a host without RDMA runs it in two Soft-RoCE guests on one wire
# (tests/guest/run-two-guests.sh, which sets RDMAD_GUEST_ROLE): rdmad and the operator's commands in the
# first, 10.0.3.1 ([A] in the output); the grants' client in the second, 10.0.3.2 ([B]), reading across the
# wire. The token reaches the client through the directory the two share, as an application's would through
# its own channel.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/bazel-bin
role=${RDMAD_GUEST_ROLE:-}
shared=${RDMAD_GUEST_OUT:-}

# The second machine (two guests): the grants' client. It does what the first asks, in order: read a grant
# (read-1), then read another until it fails (read-2), each with the token the first left in the shared
# directory; it reports each exit status there.
if [ "$role" = b ]; then
  "$RDMAD_PEER_SH" wait read-1 600 || exit 1
  endpoint=$(cat "$shared/endpoint")
  printf '$ rdmactl read --token-file client.token --endpoint %s --out-file read.bin   # the client\n' "$endpoint"
  rc=0
  "$bin/cli/rdmactl" read --token-file "$shared/client.token" --endpoint "$endpoint" --out-file "$shared/read.bin" || rc=$?
  echo "$rc" >"$shared/read-1.rc"
  "$RDMAD_PEER_SH" signal read-1-done
  "$RDMAD_PEER_SH" wait read-2 300 || exit 1
  printf '$ rdmactl bench read --token-file client2.token --endpoint %s --size 4KiB --depth 1 --duration 60s\n' "$endpoint"
  "$bin/cli/rdmactl" bench read --token-file "$shared/client2.token" --endpoint "$endpoint" --size 4KiB --depth 1 \
    --duration 60s >/tmp/reader.out 2>/tmp/reader.err &
  reader=$!
  "$RDMAD_PEER_SH" signal reading-2
  rc=0
  wait "$reader" || rc=$?
  cat /tmp/reader.err
  echo "$rc" >"$shared/read-2.rc"
  "$RDMAD_PEER_SH" signal read-2-done
  exit 0
fi
work=$(mktemp -d /tmp/rdmad-demo.XXXXXX)
sock=$work/rdmad.sock
device=${RDMAD_DEMO_DEVICE:-$(ls /sys/class/infiniband | head -n 1)}
[ -n "$device" ] || { echo "demo: no verbs device on this machine" >&2; exit 1; }

# The address of the device's network interface, for rdmad's data-plane listener (RoCE; empty: none).
netdev=$(rdma link show 2>/dev/null | awk -v d="$device/" '$2 ~ "^"d {for (i = 1; i < NF; i++) if ($i == "netdev") print $(i + 1)}' | head -n 1)
addr=$([ -n "$netdev" ] && ip -4 -o addr show dev "$netdev" | awk '{print $4}' | cut -d/ -f1 | head -n 1 || true)
listen='[]'
[ -n "$addr" ] && listen="[\"$addr:7471\"]"
cat >"$work/rdmad.json" <<JSON
{ "listen": ["unix:$sock"], "rdma_listen": $listen }
JSON
"$bin/server/rdmad" --config "$work/rdmad.json" >"$work/rdmad.log" 2>&1 &
rdmad_pid=$!
stop() {
  kill -TERM "$rdmad_pid" 2>/dev/null && wait "$rdmad_pid" 2>/dev/null
  echo
  echo "--- rdmad's log ---"
  cat "$work/rdmad.log"
  rm -rf "$work" /dev/shm/rdmad-demo-buffer
}
trap stop EXIT
for _ in $(seq 1 100); do [ -S "$sock" ] && break; sleep 0.1; done

ctl() {
  printf '\n$ rdmactl %s\n' "$*"
  "$bin/cli/rdmactl" --server "unix:$sock" "$@"
}

# The grants' client: here, or on the second machine (its output there is marked [B]).
# read_grant TOKEN_FILE OUT_FILE: reads the grant whole into OUT_FILE; its exit status.
read_grant() {
  if [ "$role" = a ]; then
    cp "$1" "$shared/client.token" && echo "$addr:7471" >"$shared/endpoint"
    echo "# (the client runs on the second machine, $RDMAD_PEER_ADDR: its lines are marked [B])"
    "$RDMAD_PEER_SH" signal read-1 && "$RDMAD_PEER_SH" wait read-1-done 300 ||
      { echo "GRANT-CLIENT-LOST: no word from the client on $RDMAD_PEER_ADDR" >&2; exit 1; }
    cp "$shared/read.bin" "$2" 2>/dev/null || true
    return "$(cat "$shared/read-1.rc")"
  fi
  printf '\n$ rdmactl read --token-file client.token --endpoint %s:7471 --out-file read.bin   # the client\n' "$addr"
  "$bin/cli/rdmactl" read --token-file "$1" --endpoint "$addr:7471" --out-file "$2"
}
# start_reader TOKEN_FILE: a client that reads the grant until a read fails; wait_reader: its exit status.
start_reader() {
  if [ "$role" = a ]; then
    cp "$1" "$shared/client2.token"
    "$RDMAD_PEER_SH" signal read-2 && "$RDMAD_PEER_SH" wait reading-2 300 ||
      { echo "GRANT-CLIENT-LOST: no word from the client on $RDMAD_PEER_ADDR" >&2; exit 1; }
    return 0
  fi
  printf '\n$ rdmactl bench read --token-file client2.token --endpoint %s:7471 --size 4KiB --depth 1 --duration 60s &\n' "$addr"
  "$bin/cli/rdmactl" bench read --token-file "$1" --endpoint "$addr:7471" --size 4KiB --depth 1 \
    --duration 60s >"$work/reader.out" 2>"$work/reader.err" &
  reader=$!
}
wait_reader() {
  if [ "$role" = a ]; then
    "$RDMAD_PEER_SH" wait read-2-done 120 ||
      { echo "GRANT-CLIENT-LOST: no word from the client on $RDMAD_PEER_ADDR" >&2; exit 1; }
    return "$(cat "$shared/read-2.rc")"
  fi
  local rc=0
  wait "$reader" || rc=$?
  sed 's/^/[the client] /' "$work/reader.err"
  return "$rc"
}

# The application's shared buffer: 1 MiB in /dev/shm.
head -c $((1 << 20)) /dev/urandom >/dev/shm/rdmad-demo-buffer

ctl get devices
ctl create pd --device "$device" --label demo
ctl register mr --pd pds/1 --file /dev/shm/rdmad-demo-buffer --offset 0 --length 1MiB --access local-write,mw-bind
ctl register mr --pd pds/1 --size 4MiB --access local-write,remote-read
ctl create mw --pd pds/1 --type 1
ctl bind mw mws/1 --mr mrs/1 --offset 4KiB --length 64KiB --access remote-read
ctl get mws -o wide
ctl get mrs
ctl rereg mr mrs/2 --access local-write
echo
echo "# Deregistering a region while a window is bound is refused (ibv_dereg_mr(3)):"
ctl delete mr mrs/1 || echo "(exit status $?)"
ctl invalidate mw mws/1
ctl delete mr mrs/1

if [ -n "$addr" ]; then
  echo
  echo "# rdma_cm: event channels are dispatcher threads; rdmad's data-plane listener is cmids/1."
  ctl get channels -o wide
  ctl get cmids -o wide
  echo
  echo "# A single-use token for the listener, and a connection that presents it (rdmad to itself here;"
  echo "# any rdma_cm client on any machine does the same: docs/PROTOCOL.md)."
  token=$("$bin/cli/rdmactl" --server "unix:$sock" create token --pd pds/1 --ttl 30s 2>/dev/null | awk '/^token:/ {print $2}')
  echo "token issued (a secret: not shown)"
  ctl create cmid --pd pds/1
  printf '\n$ rdmactl connect cmid cmids/2 --to %s:7471 --data-hex "$TOKEN"\n' "$addr"
  "$bin/cli/rdmactl" --server "unix:$sock" connect cmid cmids/2 --to "$addr:7471" --data-hex "$token"
  ctl get cmids -o wide
  ctl get qps
  ctl events --type established
  ctl delete cmid cmids/2
  # The accepted side goes when its peer disconnects.
  for _ in $(seq 1 50); do "$bin/cli/rdmactl" --server "unix:$sock" get cmids/3 >/dev/null 2>&1 || break; sleep 0.1; done
  ctl get cmids

  echo
  echo "# GRANT: a key for one client to one range of the application's file, for a lease. The client is"
  echo "# another process (rdmactl read, as an application with the client library would be): it connects to"
  echo "# the data-plane listener with the grant's token and reads the bytes over RDMA itself; rdmad is not"
  echo "# in the data path."
  ctl register mr --pd pds/1 --file /dev/shm/rdmad-demo-buffer --offset 0 --length 1MiB --access local-write,mw-bind
  ctl grant mrs/3 --offset 4KiB --length 64KiB --for demo-client --ttl 60s --token-file "$work/client.token"
  read_grant "$work/client.token" "$work/read.bin" || { echo "GRANT-READ-FAILED: the client's read failed" >&2; exit 1; }
  # The bytes the client read against the file's own: 64 KiB from offset 4 KiB.
  dd if=/dev/shm/rdmad-demo-buffer of="$work/expected.bin" bs=4096 skip=1 count=16 status=none
  if cmp -s "$work/read.bin" "$work/expected.bin"; then
    echo "GRANT-READ-MATCHES: the client read $(stat -c %s "$work/read.bin") bytes through grants/1, equal to the file's"
  else
    echo "GRANT-READ-DIFFERS: the bytes the client read are not the file's" >&2
    exit 1
  fi
  echo "# The client disconnected when it was done: its grant ended."
  ctl get grants --mr mrs/3 --all

  echo
  echo "# Revocation: a second grant, read by a client that keeps reading; rdmad revokes the key at the NIC,"
  echo "# and the client's next read fails."
  ctl grant mrs/3 --offset 4KiB --length 64KiB --for demo-client --ttl 60s --token-file "$work/client2.token"
  start_reader "$work/client2.token"
  for _ in $(seq 1 150); do
    [[ $("$bin/cli/rdmactl" --server "unix:$sock" get grants/2 2>/dev/null) == *ACTIVE* ]] && break
    sleep 0.2
  done
  ctl get grants/2
  ctl revoke grants/2
  reader_rc=0
  wait_reader || reader_rc=$?
  if ((reader_rc == 0)); then
    echo "GRANT-REVOKED-READ-SUCCEEDED: the client read on after the revocation" >&2
    exit 1
  elif [[ $("$bin/cli/rdmactl" --server "unix:$sock" get grants/2 -o json) != *END_REVOKED* ]]; then
    echo "GRANT-READER-FAILED-OTHERWISE: the client failed (exit status $reader_rc), and grants/2 did not end revoked" >&2
    exit 1
  fi
  # (The client sees the revocation as its key refused, the ENDED message, or its connection dropped after
  # it, whichever reaches it first: all of them end its reads.)
  echo "GRANT-REVOKED-READ-FAILED: the client's read after the revocation failed (exit status $reader_rc)"
  ctl get grants --mr mrs/3 --all
fi
ctl delete pd pds/1 --cascade
ctl get pds
