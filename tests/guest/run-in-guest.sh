#!/usr/bin/env bash
# Runs a command inside a throw-away QEMU guest that has a Soft-RoCE (rdma_rxe) device rxe0.
#
# Usage: run-in-guest.sh [OPTIONS] -- COMMAND [ARGS...]
#   --timeout SECS   bound on the whole run, boot included (default 600); on expiry: exit 124
#   --out DIR        writable host directory, mounted at the same path in the guest; the guest's
#                    console log (guest-console.log) is kept there. Default: a temp dir, removed
#                    at exit unless the harness failed (exit 124/125: then kept and named).
#   --env NAME[=VAL] also pass NAME into the guest (repeatable); RDMAD_* and GTEST_* always pass
#   -v, --verbose    progress and timings on stderr
#   -h, --help       this text
# For a guest that is one end of a private wire (run-two-guests.sh uses these):
#   --net MODE       eth0's network: user (the default), unix-listen:PATH or unix-connect:PATH (a wire to
#                    another guest over a UNIX socket), listen:HOST:PORT or connect:HOST:PORT (over TCP)
#                    (QEMU socket networking: a wire to the one guest at the other end, nothing else)
#   --addr CIDR      eth0's address (default 10.0.2.15/24)
#   --mac MAC        eth0's MAC address (default QEMU's, the same in every guest)
#   --name NAME      names the guest: console log guest-console-NAME.log, hostname rdmad-guest-NAME
#   --ready-file F   the script creates host file F when rxe0 is ACTIVE and COMMAND starts
#
# The guest's root is the host's own / (read-only 9p + tmpfs overlay: writes stay in the guest),
# so COMMAND is any host path or program; it runs as root via /bin/sh -c with ARGS quoted one by
# one (for shell syntax pass: sh -c '...'), in the host's cwd, with stdin /dev/null, `ulimit -l
# unlimited`, and eth0 = 10.0.2.15/24 carrying rxe0 (QEMU user net, restrict=on: no way out).
# COMMAND's stdout and stderr stream to this script's stdout and stderr.
#
# Exit status: COMMAND's; 124 if --timeout expired; 125 if the harness or the guest failed
# (bad usage, boot failure or hang after one retry, rxe0 never ACTIVE, guest died mid-command).
#
# Tuning (environment):
#   RDMAD_GUEST_BOOT_TIMEOUT   s until stage 1 reports, else retry once (default 40; doubled on retry)
#   RDMAD_GUEST_READY_TIMEOUT  s until rxe0 is ACTIVE (default 150)
#   RDMAD_GUEST_SMP, RDMAD_GUEST_MEM   guest CPUs and memory (default 2, 2G)
#   RDMAD_GUEST_CACHE          boot files (default /var/cache/rdmad-guest)
#   RDMAD_GUEST_APPEND         extra kernel arguments (e.g. quiet; the console log has the full log)
#   RDMAD_GUEST_VERBOSE=1      same as --verbose
#   RDMAD_GUEST_INJECT_HANG=1  test hook: the first boot attempt hangs with an empty console
set -euo pipefail

readonly PROG=run-in-guest
readonly USAGE="[--timeout SECS] [--out DIR] [--env NAME[=VAL]] [-v] -- COMMAND [ARGS...]"
HERE=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
readonly HERE
# shellcheck source=harness-lib.sh
source "$HERE/harness-lib.sh" || { echo "$PROG: error: $HERE/harness-lib.sh is missing" >&2; exit 125; }

# ---- arguments -----------------------------------------------------------------------------------
net=user
addr=10.0.2.15/24
mac=
guest_name=
ready_file=
while (($#)); do
  if common_option "$@"; then shift "$nshift"; continue; fi
  case "$1" in
    --net) (($# >= 2)) || usage_error "--net needs a value"; net=$2; shift 2 ;;
    --net=*) net=${1#*=}; shift ;;
    --addr) (($# >= 2)) || usage_error "--addr needs a value"; addr=$2; shift 2 ;;
    --addr=*) addr=${1#*=}; shift ;;
    --mac) (($# >= 2)) || usage_error "--mac needs a value"; mac=$2; shift 2 ;;
    --mac=*) mac=${1#*=}; shift ;;
    --name) (($# >= 2)) || usage_error "--name needs a value"; guest_name=$2; shift 2 ;;
    --name=*) guest_name=${1#*=}; shift ;;
    --ready-file) (($# >= 2)) || usage_error "--ready-file needs a value"; ready_file=$2; shift 2 ;;
    --ready-file=*) ready_file=${1#*=}; shift ;;
    --) shift; break ;;
    *) usage_error "unexpected argument '$1' (put the command after --)" ;;
  esac
done
(($#)) || usage_error "no COMMAND given"
check_common_options
[[ $net =~ ^(user|(listen|connect):[A-Za-z0-9.-]+:[0-9]+|unix-(listen|connect):/[^,]+)$ ]] ||
  usage_error "--net must be user, unix-listen:PATH, unix-connect:PATH (absolute), listen:HOST:PORT or connect:HOST:PORT, got '$net'"
[[ $addr =~ ^[0-9]+(\.[0-9]+){3}/[0-9]+$ ]] || usage_error "--addr must be an IPv4 CIDR like 10.0.3.1/24, got '$addr'"
[[ -z $mac || $mac =~ ^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$ ]] || usage_error "--mac must look like 52:54:00:12:34:56, got '$mac'"
[[ -z $guest_name || $guest_name =~ ^[A-Za-z0-9_-]+$ ]] || usage_error "--name must be letters, digits, - or _, got '$guest_name'"

boot_timeout=${RDMAD_GUEST_BOOT_TIMEOUT:-40}
ready_timeout=${RDMAD_GUEST_READY_TIMEOUT:-150}
smp=${RDMAD_GUEST_SMP:-2}
mem=${RDMAD_GUEST_MEM:-2G}
for v in boot_timeout ready_timeout smp; do
  [[ ${!v} =~ ^[0-9]+$ && ${!v} -gt 0 ]] || usage_error "$v must be a positive integer, got '${!v}'"
done

check_host qemu-system-x86_64 timeout setpriv tail

# POSIX-sh single-quoting (the guest runs the command with /bin/sh, i.e. dash).
sh_quote() { local s=${1//\'/\'\\\'\'}; printf "'%s'" "$s"; }
cmd=
for a in "$@"; do cmd+="${cmd:+ }$(sh_quote "$a")"; done

# Environment passed into the guest: RDMAD_*, GTEST_*, and --env.
guest_env=()
while IFS= read -r name; do
  guest_env+=("$name=${!name}")
done < <(compgen -e | grep -E '^(RDMAD_|GTEST_)' || true)
for e in "${extra_env[@]}"; do
  name=${e%%=*}
  [[ $name =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || usage_error "--env: bad variable name '$name'"
  if [[ $e == *=* ]]; then guest_env+=("$e")
  elif [[ -v $name ]]; then guest_env+=("$name=${!name}")
  else warn "--env $name: not set on the host, not passed"
  fi
done

cwd=$PWD
[[ -d $cwd ]] || cwd=$(pwd -P)

# ---- boot files ----------------------------------------------------------------------------------
boot_files=$("$HERE/build-initramfs.sh") || { err "building the guest boot files failed"; exit "$EXIT_HARNESS"; }
kernel=$(sed -n 's/^KERNEL=//p' <<<"$boot_files")
initrd=$(sed -n 's/^INITRD=//p' <<<"$boot_files")
[[ -f $kernel && -f $initrd ]] || { err "build-initramfs.sh gave no kernel/initrd"; exit "$EXIT_HARNESS"; }

# ---- per-run state (no fixed names in shared places) ---------------------------------------------
ctl=
qpid=

stop_qemu() {
  [[ -n $qpid ]] || return 0
  if kill -0 "$qpid" 2>/dev/null; then
    # timeout passes TERM on to QEMU and sends KILL 5 s later; QEMU also dies with timeout.
    kill -TERM "$qpid" 2>/dev/null || true
    for _ in $(seq 1 80); do kill -0 "$qpid" 2>/dev/null || break; sleep 0.1; done
    pkill -KILL -P "$qpid" 2>/dev/null || true
    kill -KILL "$qpid" 2>/dev/null || true
  fi
  wait "$qpid" 2>/dev/null || true
  qpid=
}

# shellcheck disable=SC2317 # invoked by the EXIT trap
cleanup() {
  local rc=$?
  trap - EXIT INT TERM HUP
  stop_qemu
  stop_tails
  [[ -n $ctl ]] && rm -rf -- "$ctl"
  finish_out_dir "$rc"
  exit "$rc"
}
install_traps
prepare_out_dir
ctl=$(mktemp -d "${TMPDIR:-/tmp}/rdmad-guest-ctl.XXXXXX")
cp "$HERE/guest-init.sh" "$ctl/guest-init.sh"
{
  printf 'GUEST_CWD=%q\n' "$cwd"
  printf 'GUEST_OUT=%q\n' "$out_dir"
  printf 'GUEST_CMD=%q\n' "$cmd"
  printf 'GUEST_ADDR=%q\n' "$addr"
  printf 'GUEST_HOSTNAME=%q\n' "rdmad-guest${guest_name:+-$guest_name}"
  printf 'GUEST_ENV=('
  for kv in "${guest_env[@]}"; do printf ' %q' "$kv"; done
  printf ' )\n'
} >"$ctl/params"

# QEMU option values: a comma is written as two.
qesc() { printf '%s' "${1//,/,,}"; }

t_start=$(now)
deadline=$((t_start + timeout_s * 1000000))

console=$out_dir/guest-console${guest_name:+-$guest_name}.log

# eth0: QEMU user networking (no way out), or one end of a socket wire.
if [[ $net == user ]]; then
  nic=(-nic "user,model=virtio-net-pci,restrict=on${mac:+,mac=$mac}")
elif [[ $net == unix-listen:* || $net == unix-connect:* ]]; then
  # A stream over a UNIX socket (QEMU 7.2's -netdev stream): no Nagle, no delayed ACK, flow-controlled.
  server=off
  [[ $net == unix-listen:* ]] && server=on
  nic=(-netdev "stream,id=n0,server=$server,addr.type=unix,addr.path=$(qesc "${net#*:}")"
       -device "virtio-net-pci,netdev=n0${mac:+,mac=$mac}")
else
  nic=(-netdev "socket,id=n0,${net%%:*}=${net#*:}" -device "virtio-net-pci,netdev=n0${mac:+,mac=$mac}")
fi

# Starts QEMU in the background; sets qpid. $1 = attempt number.
launch() {
  local attempt=$1 remaining extra=()
  rm -f -- "$ctl"/{booted,ready,failed,status,done}{,.tmp}
  : >"$ctl/stdout"
  : >"$ctl/stderr"
  remaining=$(((deadline - $(now)) / 1000000 + 1))
  ((remaining > 0)) || remaining=1
  [[ ${RDMAD_GUEST_INJECT_HANG:-0} == 1 && $attempt == 1 ]] && extra+=(-S) # CPUs never start
  # setpriv: if this script dies (even by SIGKILL), timeout gets SIGTERM and takes QEMU down, and
  # QEMU dies with timeout; timeout: a hard bound on QEMU's life whatever happens to this script.
  setpriv --pdeathsig TERM -- \
    timeout --kill-after=5 "$remaining" \
    setpriv --pdeathsig KILL -- \
    qemu-system-x86_64 -nodefaults -no-user-config -display none -no-reboot \
      -machine pc -accel tcg,thread=multi -cpu max -smp "$smp" -m "$mem" \
      -kernel "$kernel" -initrd "$initrd" \
      -append "console=ttyS0 panic=-1 rdmad.attempt=$attempt ${RDMAD_GUEST_APPEND:-}" \
      -chardev "file,id=con,path=$(qesc "$console")" -serial chardev:con \
      -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
      -virtfs "local,path=$(qesc "$ctl"),mount_tag=ctl,security_model=none,multidevs=remap" \
      -virtfs "local,path=$(qesc "$out_dir"),mount_tag=out,security_model=none,multidevs=remap" \
      "${nic[@]}" \
      "${extra[@]}" \
      </dev/null >"$ctl/qemu.log" 2>&1 &
  qpid=$!
}

start_tails() {
  tail -n +1 -s 0.2 --pid="$qpid" -f "$ctl/stdout" &
  tail_pids+=($!)
  tail -n +1 -s 0.2 --pid="$qpid" -f "$ctl/stderr" >&2 &
  tail_pids+=($!)
}

explain_failure() {
  echo "$PROG: see the guest console log: $console" >&2
  if [[ -s $ctl/qemu.log ]]; then
    sed "s/^/$PROG: qemu: /" "$ctl/qemu.log" >&2
    cp "$ctl/qemu.log" "$out_dir/guest-qemu${guest_name:+-$guest_name}.log" 2>/dev/null || true
  fi
}

# ---- boot, watch, run ----------------------------------------------------------------------------
attempt=1
max_attempts=2
ready=0
while :; do
  info "booting the guest (kernel $(basename "$(dirname "$kernel")"), attempt $attempt)"
  t_attempt=$(now)
  launch "$attempt"
  booted=0 ready=0 retry_reason=
  while :; do
    if ((!ready)) && [[ -e $ctl/ready ]]; then
      ready=1
      [[ -z $ready_file ]] || { : >"$ready_file"; } 2>/dev/null || warn "cannot create --ready-file $ready_file"
      start_tails
      info "rxe0 ACTIVE after $(secs $(($(now) - t_attempt))) s (guest uptime $(<"$ctl/ready") s); running the command"
    fi
    [[ -e $ctl/status ]] && break
    kill -0 "$qpid" 2>/dev/null || break
    t=$(now)
    ((t < deadline)) || break
    if ((!ready)); then
      [[ -e $ctl/failed ]] && break
      ((booted)) || { [[ -e $ctl/booted ]] && booted=1; }
      if ((!booted && t - t_attempt > boot_timeout * attempt * 1000000)); then
        retry_reason="no sign of life from the guest after $((boot_timeout * attempt)) s (console: $(wc -c <"$console" 2>/dev/null || echo 0) bytes)"
        break
      fi
      if ((t - t_attempt > ready_timeout * 1000000)); then
        retry_reason="rxe0 not ready after $ready_timeout s"
        break
      fi
    fi
    sleep 0.1
  done

  if [[ -e $ctl/status ]]; then
    # The guest is powering off; give it a moment, then make sure.
    for _ in $(seq 1 100); do kill -0 "$qpid" 2>/dev/null || break; sleep 0.1; done
    stop_qemu
    stop_tails 10
    break
  fi
  if (($(now) >= deadline)); then
    stop_qemu
    stop_tails 2
    err "timed out after $timeout_s s ($([[ $ready == 1 ]] && echo "command still running" || echo "guest not ready yet"))"
    explain_failure
    exit "$EXIT_TIMEOUT"
  fi
  if [[ -z $retry_reason ]]; then
    # QEMU is gone, or the guest reported a setup failure.
    for _ in $(seq 1 30); do kill -0 "$qpid" 2>/dev/null || break; sleep 0.1; done
    stop_qemu
    stop_tails 5
    if [[ -e $ctl/failed ]]; then
      err "guest setup failed: $(<"$ctl/failed")"
      explain_failure
      exit "$EXIT_HARNESS"
    fi
    if ((ready)); then
      err "the guest died while the command was running (no exit status came back)"
      explain_failure
      exit "$EXIT_HARNESS"
    fi
    retry_reason="QEMU exited before the guest was ready"
  else
    stop_qemu
  fi
  if ((attempt >= max_attempts)); then
    err "guest failed to boot: $retry_reason (attempt $attempt of $max_attempts)"
    explain_failure
    exit "$EXIT_HARNESS"
  fi
  warn "guest boot attempt $attempt failed: $retry_reason; retrying"
  mv -f -- "$console" "${console%.log}.attempt$attempt.log" 2>/dev/null || true
  attempt=$((attempt + 1))
done

final_rc=$(<"$ctl/status")
[[ $final_rc =~ ^[0-9]+$ ]] || { err "bad exit status from the guest: '$final_rc'"; exit "$EXIT_HARNESS"; }
harness_ok=1
t_end=$(now)
info "command exited with status $final_rc; guest uptime at start $(<"$ctl/ready") s, at end $(<"$ctl/done") s; whole run $(secs $((t_end - t_start))) s"
exit "$final_rc"
