#!/bin/bash
# Stage 2 of the rdmad test guest: runs as PID 1 inside the guest, after the initramfs (stage 1,
# see build-initramfs.sh) has mounted the host's / (read-only 9p + tmpfs overlay) and the run's
# control share at /run/rdmad-guest. run-in-guest.sh copies this file into the control share; it is
# not meant to be run on the host.
#
# Control share protocol (files in /run/rdmad-guest, read by run-in-guest.sh on the host):
#   params   (in)  bash assignments: GUEST_CWD, GUEST_OUT, GUEST_CMD, GUEST_ENV (array NAME=VALUE),
#                  GUEST_ADDR (eth0's address/prefix), GUEST_HOSTNAME
#   stdout, stderr (out) the command's output (appended; the host streams them)
#   ready    (out) guest uptime when rxe0 was ACTIVE and the command was about to start
#   failed   (out) reason, when the guest setup failed (no command was run)
#   status   (out) the command's exit status; written last
#   done     (out) guest uptime when the command ended
set -uo pipefail

CTL=/run/rdmad-guest
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root
unset TERM

# Everything this script says goes to the console (the host's console log), not to the caller.
exec </dev/null >/dev/console 2>&1

say() { echo "rdmad-guest: $*"; }

power_off() {
  sync
  echo o >/proc/sysrq-trigger
  sleep 60 # sysrq poweroff is asynchronous; PID 1 must not exit meanwhile
  exit 1
}

fail() {
  say "FATAL: $*"
  echo "$*" >"$CTL/failed.tmp" && mv -f "$CTL/failed.tmp" "$CTL/failed"
  dmesg 2>/dev/null | tail -n 40
  power_off
}

uptime_s() { cut -d' ' -f1 /proc/uptime; }

say "stage2 start at $(uptime_s) s"
mount -t sysfs -o nosuid,noexec,nodev sysfs /sys || fail "mount /sys"
mkdir -p /dev/pts /dev/shm /dev/mqueue
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts || fail "mount /dev/pts"
mount -t tmpfs -o nosuid,nodev,mode=1777 shm /dev/shm || fail "mount /dev/shm"
ln -sfn /proc/self/fd /dev/fd
ln -sfn /proc/self/fd/0 /dev/stdin
ln -sfn /proc/self/fd/1 /dev/stdout
ln -sfn /proc/self/fd/2 /dev/stderr
# /tmp stays on the overlay: writable, private to the guest, and a cwd under the host's /tmp
# still exists in here.
chmod 1777 /tmp 2>/dev/null
ip link set lo up || fail "ip link set lo up"

# shellcheck source=/dev/null
source "$CTL/params" || fail "cannot read $CTL/params"
: "${GUEST_ADDR:=10.0.2.15/24}" "${GUEST_HOSTNAME:=rdmad-guest}"
echo "$GUEST_HOSTNAME" >/proc/sys/kernel/hostname

mkdir -p "$GUEST_OUT" 2>/dev/null
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=none out "$GUEST_OUT" ||
  fail "cannot mount the output share at $GUEST_OUT"

modprobe -a rdma_rxe ib_uverbs rdma_ucm || fail "modprobe -a rdma_rxe ib_uverbs rdma_ucm"
ip addr add "$GUEST_ADDR" dev eth0 || fail "ip addr add $GUEST_ADDR dev eth0"
ip link set eth0 up || fail "ip link set eth0 up"
rdma link add rxe0 type rxe netdev eth0 || fail "rdma link add rxe0 type rxe netdev eth0"

active=0
for _ in $(seq 1 300); do
  if ibv_devices 2>/dev/null | grep -qw rxe0 &&
     ibv_devinfo -d rxe0 2>/dev/null | grep -q 'PORT_ACTIVE'; then
    active=1
    break
  fi
  sleep 0.1
done
((active)) || fail "rxe0 did not appear with an ACTIVE port within 30 s ($(rdma link show 2>&1 | tr '\n' ' '))"

ulimit -l unlimited || fail "ulimit -l unlimited"
cd "$GUEST_CWD" || fail "cannot cd to $GUEST_CWD in the guest"
for kv in "${GUEST_ENV[@]}"; do
  export "${kv?}"
done

say "rxe0 ACTIVE at $(uptime_s) s; running: $GUEST_CMD"
uptime_s >"$CTL/ready.tmp" && mv -f "$CTL/ready.tmp" "$CTL/ready"
/bin/sh -c "$GUEST_CMD" </dev/null >>"$CTL/stdout" 2>>"$CTL/stderr"
rc=$?
say "command exited with status $rc at $(uptime_s) s"
uptime_s >"$CTL/done.tmp" && mv -f "$CTL/done.tmp" "$CTL/done"
sync
echo "$rc" >"$CTL/status.tmp" && mv -f "$CTL/status.tmp" "$CTL/status"
power_off
