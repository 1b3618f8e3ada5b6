#!/usr/bin/env bash
# The rdmad demo: starts rdmad on this machine's verbs device, then does what an operator would with
# rdmactl: look at the device, create a PD, register memory an application shares (a file in /dev/shm)
# and memory rdmad allocates, bind a memory window over part of it, show it, rereg, see a refusal, and
# tear it all down. Runs inside the Soft-RoCE guest via ./quickstart.sh demo; works on any host with a
# verbs device (RDMAD_DEMO_DEVICE, default: the first one).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/bazel-bin
work=$(mktemp -d /tmp/rdmad-demo.XXXXXX)
sock=$work/rdmad.sock
device=${RDMAD_DEMO_DEVICE:-$(ls /sys/class/infiniband | head -n 1)}
[ -n "$device" ] || { echo "demo: no verbs device on this machine" >&2; exit 1; }

"$bin/server/rdmad" --listen "unix:$sock" >"$work/rdmad.log" 2>&1 &
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
ctl delete pd pds/1 --cascade
ctl get pds
