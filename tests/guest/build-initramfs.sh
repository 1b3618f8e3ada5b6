#!/usr/bin/env bash
# Builds the boot files of the Soft-RoCE test guest into a cache directory:
#   <cache>/<kver>/vmlinux        the kernel (uncompressed ELF from /boot/vmlinuz-<kver>,
#                                 booted through QEMU's PVH entry; falls back to a copy of vmlinuz)
#   <cache>/<kver>/initramfs.cpio busybox-static + the modules that mount the host's / over
#                                 virtio-9p with a tmpfs overlay, and a stage-1 /init
# Rebuilds only when an input changed (kernel image, busybox, modules, this script).
# Safe to run concurrently (flock). On success prints two lines on stdout:
#   KERNEL=<path>
#   INITRD=<path>
# Usage: build-initramfs.sh [--force]     Cache dir: ${RDMAD_GUEST_CACHE:-/var/cache/rdmad-guest}
set -euo pipefail

readonly PROG=build-initramfs
die() { echo "$PROG: error: $*" >&2; exit 1; }
log() { echo "$PROG: $*" >&2; }

force=0
case "${1:-}" in
  --force) force=1 ;;
  "") ;;
  -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) die "unknown argument '$1' (usage: $0 [--force])" ;;
esac

# Modules needed before switch_root, in dependency order (modprobe --show-depends expands each).
readonly MODULES=(virtio_pci 9pnet_virtio 9p overlay virtio_net)

# The guest kernel: the version under /lib/modules that has a matching /boot/vmlinuz (not uname -r:
# the host may run a kernel of its own that has neither).
find_kver() {
  local d v found=()
  for d in /lib/modules/*/; do
    v=$(basename "$d")
    [[ -f /boot/vmlinuz-$v && -f /lib/modules/$v/modules.dep ]] && found+=("$v")
  done
  ((${#found[@]})) || die "no kernel with both /boot/vmlinuz-<ver> and /lib/modules/<ver> (install linux-image-amd64)"
  # Newest version first if several are installed.
  printf '%s\n' "${found[@]}" | sort -V | tail -n 1
}

command -v modprobe >/dev/null || die "modprobe not found (install kmod)"
command -v cpio >/dev/null || die "cpio not found (install cpio)"
BUSYBOX=/bin/busybox
[[ -x $BUSYBOX ]] || BUSYBOX=$(command -v busybox || true)
[[ -n $BUSYBOX && -x $BUSYBOX ]] || die "busybox not found (install busybox-static)"
# A dynamically linked busybox names its program interpreter; busybox-static does not.
if LC_ALL=C grep -aq '/ld-linux' "$BUSYBOX"; then
  die "$BUSYBOX is not statically linked (install busybox-static)"
fi

KVER=$(find_kver)
VMLINUZ=/boot/vmlinuz-$KVER
CACHE=${RDMAD_GUEST_CACHE:-/var/cache/rdmad-guest}
OUTDIR=$CACHE/$KVER
mkdir -p "$OUTDIR" || die "cannot create the cache dir $OUTDIR (set RDMAD_GUEST_CACHE)"

# Module list, in load order, deduplicated.
mapfile -t KOS < <(
  for m in "${MODULES[@]}"; do
    modprobe -S "$KVER" --show-depends "$m" || echo "MISSING $m"
  done | awk '$1 == "MISSING" { print; next }
              $1 == "insmod" && !seen[$2]++ { print $2 }'
)
for ko in "${KOS[@]}"; do
  [[ $ko == MISSING* ]] && die "module ${ko#MISSING } not found for kernel $KVER"
  [[ $ko == *.ko || $ko == *.ko.xz || $ko == *.ko.zst || $ko == *.ko.gz ]] ||
    die "unexpected module file $ko"
done

# Everything the output depends on; any change triggers a rebuild.
stamp_of_inputs() {
  sha256sum <"$0"
  stat -L -c '%n %s %Y' "$VMLINUZ" "$BUSYBOX" "${KOS[@]}"
}
want_stamp=$(stamp_of_inputs | sha256sum | cut -d' ' -f1)

up_to_date() {
  ((force == 0)) && [[ -f $OUTDIR/stamp && $(<"$OUTDIR/stamp") == "$want_stamp" &&
                       -s $OUTDIR/vmlinux && -s $OUTDIR/initramfs.cpio ]]
}
print_paths() { printf 'KERNEL=%s\nINITRD=%s\n' "$OUTDIR/vmlinux" "$OUTDIR/initramfs.cpio"; }

# Fast path without the lock (the cache may be read-only, e.g. inside a build sandbox): files are
# moved into place before the stamp is written, so a matching stamp means complete files.
if up_to_date; then print_paths; exit 0; fi

exec 9>"$CACHE/.lock-$KVER" || die "cannot write to the cache dir $CACHE (set RDMAD_GUEST_CACHE)"
flock 9
if up_to_date; then print_paths; exit 0; fi # built meanwhile by another caller

log "building guest boot files for kernel $KVER in $OUTDIR"
work=$(mktemp -d "$OUTDIR/.build.XXXXXX")
trap 'rm -rf -- "$work"' EXIT

# --- kernel: find the compressed payload inside the bzImage and decompress it ---------------------
extract_vmlinux() {
  local src=$1 dst=$2 magic tool off
  # magic (as grep -P pattern) and the decompressor that ignores trailing data
  for spec in '\xFD7zXZ\x00|xz -dc --single-stream' \
              '\x28\xB5\x2F\xFD|zstd -dcq' \
              '\x1F\x8B\x08|gzip -dcq'; do
    magic=${spec%%|*}; tool=${spec#*|}
    command -v "${tool%% *}" >/dev/null || continue
    while read -r off; do
      [[ -n $off ]] || continue
      # shellcheck disable=SC2086 # tool carries its flags
      tail -c +$((off + 1)) "$src" | $tool >"$dst" 2>/dev/null || true
      if [[ $(head -c 4 "$dst" | od -An -tx1 | tr -d ' \n') == 7f454c46 ]]; then
        return 0
      fi
    done < <(LC_ALL=C grep -obUaP "$magic" "$src" | cut -d: -f1 | head -n 5)
  done
  return 1
}
if extract_vmlinux "$VMLINUZ" "$work/vmlinux"; then
  log "extracted uncompressed vmlinux ($(($(stat -c %s "$work/vmlinux") / 1048576)) MiB)"
else
  log "warning: could not extract vmlinux from $VMLINUZ; booting the compressed image (slower)"
  cp "$VMLINUZ" "$work/vmlinux"
fi

# --- initramfs ------------------------------------------------------------------------------------
root=$work/root
mkdir -p "$root"/{bin,dev,proc,sys,lower,rw,newroot,modules}
cp "$BUSYBOX" "$root/bin/busybox"
for applet in sh mount umount mkdir insmod switch_root sleep cat echo mv; do
  ln -s busybox "$root/bin/$applet"
done
mknod -m 600 "$root/dev/console" c 5 1
mknod -m 666 "$root/dev/null" c 1 3
: >"$root/modules/load.list"
i=0
for ko in "${KOS[@]}"; do
  base=$(basename "$ko")
  name=$(printf '%02d-%s.ko' "$i" "${base%%.ko*}")
  case $ko in # busybox insmod wants plain .ko files
    *.ko) cp "$ko" "$root/modules/$name" ;;
    *.xz) xz -dc "$ko" >"$root/modules/$name" ;;
    *.zst) zstd -dcq "$ko" >"$root/modules/$name" ;;
    *.gz) gzip -dc "$ko" >"$root/modules/$name" ;;
  esac
  echo "/modules/$name" >>"$root/modules/load.list"
  i=$((i + 1))
done

# Stage 1: load modules, mount the host's / (9p, read-only) under a tmpfs overlay, mount the run's
# control share at /run/rdmad-guest, and hand over to its guest-init.sh (run-in-guest.sh puts it there).
cat >"$root/init" <<'EOF'
#!/bin/sh
# rdmad guest stage 1 (generated by tests/guest/build-initramfs.sh)
export PATH=/bin
fail() {
  echo "rdmad-guest: stage1: FATAL: $*" >/dev/console
  echo o >/proc/sysrq-trigger
  sleep 60
}
mount -t devtmpfs devtmpfs /dev
mount -t proc proc /proc
echo "rdmad-guest: stage1 start" >/dev/console
while read -r ko; do
  insmod "$ko" || fail "insmod $ko"
done </modules/load.list
mount9p() { # tag dir opts: retries while the virtio device is being probed
  n=0
  until mount -t 9p -o "trans=virtio,version=9p2000.L,msize=512000,$3" "$1" "$2" 2>/dev/null; do
    n=$((n + 1)); [ "$n" -lt 50 ] || return 1; sleep 0.1
  done
}
mount9p hostroot /lower ro,cache=loose || fail "cannot mount the host root (9p tag hostroot)"
mount -t tmpfs -o mode=0755 rw /rw || fail "tmpfs /rw"
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay /newroot ||
  fail "cannot mount the overlay root"
mount -t tmpfs -o mode=0755,nosuid,nodev run /newroot/run || fail "tmpfs /run"
mkdir -p /newroot/run/rdmad-guest
mount9p ctl /newroot/run/rdmad-guest cache=none || fail "cannot mount the control share (9p tag ctl)"
[ -f /newroot/run/rdmad-guest/guest-init.sh ] || fail "no guest-init.sh in the control share"
cat /proc/uptime >/newroot/run/rdmad-guest/booted.tmp
mv /newroot/run/rdmad-guest/booted.tmp /newroot/run/rdmad-guest/booted
mount --move /dev /newroot/dev
mount --move /proc /newroot/proc
exec switch_root /newroot /bin/bash /run/rdmad-guest/guest-init.sh
EOF
chmod 755 "$root/init"

(cd "$root" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet) >"$work/initramfs.cpio"

mv -f "$work/vmlinux" "$OUTDIR/vmlinux"
mv -f "$work/initramfs.cpio" "$OUTDIR/initramfs.cpio"
echo "$want_stamp" >"$OUTDIR/stamp"
log "done ($(($(stat -c %s "$OUTDIR/initramfs.cpio") / 1024)) KiB initramfs, ${#KOS[@]} modules)"
print_paths
