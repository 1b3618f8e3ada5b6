#!/usr/bin/env bash
# Runs a command in each of two throw-away Soft-RoCE guests, A and B, joined by a private wire.
#
# Usage: run-two-guests.sh [OPTIONS] --a 'COMMAND_A' --b 'COMMAND_B'
#   --a CMD, --b CMD  shell command for guest A / guest B (run there with /bin/sh -c)
#   --timeout SECS    bound on the whole run, both boots included (default 600); on expiry: exit 124
#   --out DIR         writable host directory shared by both guests, mounted at the same path in
#                     each (RDMAD_GUEST_OUT). The harness keeps there each side's console log
#                     (guest-console-a.log, -b), output (guest-a.stdout, guest-a.stderr, ...) and,
#                     once the side has ended, its status (guest-a.status, guest-b.status).
#                     Default: a temp dir, removed at exit unless the harness failed (124/125).
#   --env NAME[=VAL]  also pass NAME into both guests (repeatable); RDMAD_* and GTEST_* always pass
#   -v, --verbose     progress and timings on stderr
#   -h, --help        this text
#
# The wire: a QEMU stream over a UNIX socket in the harness's own directory (-netdev stream), A
# listening, B connecting. (QEMU's TCP socket wire, used before, delays frames that follow one another
# closely by the host's delayed ACK, ~40 ms: its listening side does not set TCP_NODELAY.) eth0 is
# 10.0.3.1/24 in A and 10.0.3.2/24 in B (MACs 52:54:00:00:03:01 and :02), rxe0 is ACTIVE on eth0 in
# each, and nothing else is reachable. A boots first; B is started once A's command is running,
# so a server started by A has a head start of one boot (clients should still retry).
# Each guest is what run-in-guest.sh makes (same root, cwd, limits; memory RDMAD_GUEST_MEM, 1G here
# by default), plus these variables:
#   RDMAD_GUEST_ROLE  a or b              RDMAD_GUEST_ADDR, RDMAD_PEER_ADDR  10.0.3.1 / 10.0.3.2
#   RDMAD_GUEST_OUT   the shared dir      RDMAD_PEER_SH  peer.sh: `"$RDMAD_PEER_SH" signal NAME`,
#                                         `"$RDMAD_PEER_SH" wait NAME [SECS]` (files in the shared dir)
# A side whose command ends normally does not stop the other one; a harness failure on one side
# (exit 125: boot failure, guest died) stops the other at once.
#
# Output: each side's stdout and stderr stream to this script's stdout and stderr, every line
# prefixed with "[A] " or "[B] ". The last line on stderr gives both statuses, e.g.
#   run-two-guests: A (10.0.3.1): 0 (ok); B (10.0.3.2): 3 (command failed)
# Exit status: 0 if both commands exited 0; 1 if only A's failed, 2 if only B's, 3 if both;
# 124 if --timeout expired; 125 if the harness failed on either side.
set -euo pipefail

readonly PROG=run-two-guests
readonly USAGE="[--timeout SECS] [--out DIR] [--env NAME[=VAL]] [-v] --a 'COMMAND_A' --b 'COMMAND_B'"
HERE=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
readonly HERE RUN=$HERE/run-in-guest.sh
# shellcheck source=harness-lib.sh
source "$HERE/harness-lib.sh" || { echo "$PROG: error: $HERE/harness-lib.sh is missing" >&2; exit 125; }
readonly SIDES=(a b)
declare -rA ADDR=([a]=10.0.3.1 [b]=10.0.3.2) MAC=([a]=52:54:00:00:03:01 [b]=52:54:00:00:03:02)
declare -rA PEER=([a]=b [b]=a) LABEL=([a]=A [b]=B)

# ---- arguments -----------------------------------------------------------------------------------
declare -A cmd=()
while (($#)); do
  if common_option "$@"; then shift "$nshift"; continue; fi
  case "$1" in
    --a|--b) (($# >= 2)) || usage_error "$1 needs a command"; cmd[${1#--}]=$2; shift 2 ;;
    --a=*|--b=*) side=${1%%=*}; cmd[${side#--}]=${1#*=}; shift ;;
    *) usage_error "unexpected argument '$1'" ;;
  esac
done
[[ -n ${cmd[a]:-} && -n ${cmd[b]:-} ]] || usage_error "both --a and --b are needed"
check_common_options
pass=() # options handed to both run-in-guest.sh
for e in "${extra_env[@]}"; do pass+=(--env "$e"); done
((verbose)) && pass+=(-v)
export RDMAD_GUEST_MEM=${RDMAD_GUEST_MEM:-1G}

check_host ss setpriv tail sed
[[ -x $RUN && -f $HERE/peer.sh ]] || { err "run-in-guest.sh and peer.sh must be next to this script"; exit "$EXIT_HARNESS"; }

# ---- per-run state -------------------------------------------------------------------------------
declare -A pid=() status=() note=()
ctl=

t_start=$(now)
deadline=$((t_start + timeout_s * 1000000))
# run-in-guest.sh ends itself at the deadline (124) and stops QEMU within ~15 s; this is the backstop.
hard_deadline=$((deadline + 30 * 1000000))

running() { [[ -n ${pid[$1]:-} ]] && kill -0 "${pid[$1]}" 2>/dev/null; }

# Collects the status of a side whose run-in-guest.sh has exited, and tells the peer guest.
reap() {
  local s=$1 rc=0
  wait "${pid[$s]}" || rc=$?
  pid[$s]=
  status[$s]=$rc
  echo "$rc" >"$out_dir/guest-$s.status.tmp" && mv -f -- "$out_dir/guest-$s.status.tmp" "$out_dir/guest-$s.status"
  info "${LABEL[$s]} ended with status $rc after $(secs $(($(now) - t_start))) s"
}

# Stops a side (run-in-guest.sh stops its QEMU on TERM; KILL is the last resort: QEMU dies with it).
stop_side() {
  local s=$1
  running "$s" || return 0
  kill -TERM "${pid[$s]}" 2>/dev/null || true
  for _ in $(seq 1 200); do running "$s" || break; sleep 0.1; done
  kill -KILL "${pid[$s]}" 2>/dev/null || true
  reap "$s"
}

# Streams a side's output files here, prefixed; tail exits once run-in-guest.sh has gone.
start_tails() {
  local s=$1 p
  p="[${LABEL[$1]}] "
  tail -n +1 -s 0.2 --pid="${pid[$s]}" -f "$out_dir/guest-$s.stdout" | sed -u "s/^/$p/" &
  tail_pids+=($!)
  tail -n +1 -s 0.2 --pid="${pid[$s]}" -f "$out_dir/guest-$s.stderr" | sed -u "s/^/$p/" >&2 &
  tail_pids+=($!)
}

# shellcheck disable=SC2317 # invoked by the EXIT trap
describe() { # status of a side, in words
  local s=$1 rc=${status[$1]:-}
  case $rc in
    "") echo "not started${note[$s]:+ (${note[$s]})}" ;;
    0) echo "0 (ok)" ;;
    "$EXIT_TIMEOUT") echo "$rc (timed out)" ;;
    "$EXIT_HARNESS") echo "$rc (harness failure, see guest-console-$s.log)" ;;
    129|130|143) echo "$rc (stopped${note[$s]:+: ${note[$s]}})" ;;
    *) echo "$rc (command failed)" ;;
  esac
}

# shellcheck disable=SC2317 # invoked by the EXIT trap
cleanup() {
  local rc=$? s
  trap - EXIT INT TERM HUP
  for s in "${SIDES[@]}"; do stop_side "$s"; done
  stop_tails 5
  [[ -n $ctl ]] && rm -rf -- "$ctl"
  finish_out_dir "$rc"
  if [[ -n ${status[a]:-} || -n ${status[b]:-} ]]; then
    echo "$PROG: A (${ADDR[a]}): $(describe a); B (${ADDR[b]}): $(describe b)" >&2
  fi
  exit "$rc"
}
install_traps
prepare_out_dir
rm -f -- "$out_dir"/guest-{a,b}.status
ctl=$(mktemp -d "${TMPDIR:-/tmp}/rdmad-guest-pair.XXXXXX")

# Starts a side's run-in-guest.sh in the background. $1 = side, $2 = its --net.
launch() {
  local s=$1 net=$2 remaining
  remaining=$(((deadline - $(now)) / 1000000))
  ((remaining > 0)) || remaining=1
  : >"$out_dir/guest-$s.stdout"
  : >"$out_dir/guest-$s.stderr"
  # pdeathsig: if this script dies, even by SIGKILL, the side's harness gets TERM and stops QEMU.
  setpriv --pdeathsig TERM -- "$RUN" --name "$s" --net "$net" --mac "${MAC[$s]}" --addr "${ADDR[$s]}/24" \
    --timeout "$remaining" --out "$out_dir" --ready-file "$ctl/$s.ready" "${pass[@]}" \
    --env "RDMAD_GUEST_ROLE=$s" --env "RDMAD_GUEST_ADDR=${ADDR[$s]}" \
    --env "RDMAD_PEER_ADDR=${ADDR[${PEER[$s]}]}" --env "RDMAD_GUEST_OUT=$out_dir" \
    --env "RDMAD_PEER_SH=$HERE/peer.sh" \
    -- sh -c "${cmd[$s]}" </dev/null >"$out_dir/guest-$s.stdout" 2>"$out_dir/guest-$s.stderr" &
  pid[$s]=$!
}

# ---- A: boot until its command runs ------------------------------------------------------------------
wire=$ctl/wire.sock
info "A listens on $wire; booting A"
launch a "unix-listen:$wire"
while running a && [[ ! -e $ctl/a.ready ]] && (($(now) < hard_deadline)); do sleep 0.1; done
[[ -e $ctl/a.ready ]] || { running a && exit "$EXIT_TIMEOUT"; reap a; } # cleanup stops a running A
start_tails a
if [[ ! -e $ctl/a.ready ]]; then
  note[b]="A never got ready"
  exit "${status[a]}"
fi
t_a=$(now)
info "A ready (rxe0 ACTIVE, command started) after $(secs $((t_a - t_start))) s; booting B"

# ---- B: boot on the wire to A ----------------------------------------------------------------------
running a || warn "A's command ended before B was started: B is alone on the wire"
launch b "unix-connect:$wire"
start_tails b

# ---- wait for both sides ---------------------------------------------------------------------------
b_ready=0
while running a || running b; do
  if ((!b_ready)) && [[ -e $ctl/b.ready ]]; then
    b_ready=1
    info "B ready after $(secs $(($(now) - t_start))) s (both guests up; B's boot took $(secs $(($(now) - t_a))) s)"
  fi
  for s in "${SIDES[@]}"; do
    if [[ -z ${pid[$s]} ]] || running "$s"; then continue; fi
    reap "$s"
    if [[ ${status[$s]} == "$EXIT_HARNESS" ]] && running "${PEER[$s]}"; then
      note[${PEER[$s]}]="${LABEL[$s]} failed in the harness"
      warn "${LABEL[$s]} failed in the harness; stopping ${LABEL[${PEER[$s]}]}"
      stop_side "${PEER[$s]}"
    fi
  done
  if (($(now) >= hard_deadline)); then
    err "run-in-guest.sh outlived the deadline; stopping both guests"
    exit "$EXIT_TIMEOUT"
  fi
  sleep 0.2
done
for s in "${SIDES[@]}"; do if [[ -n ${pid[$s]} ]]; then reap "$s"; fi; done
info "both done after $(secs $(($(now) - t_start))) s"

# ---- exit status -----------------------------------------------------------------------------------
rc=0
for s in "${SIDES[@]}"; do
  case ${status[$s]} in
    "$EXIT_HARNESS") rc=$EXIT_HARNESS ;;
    "$EXIT_TIMEOUT") ((rc == EXIT_HARNESS)) || rc=$EXIT_TIMEOUT ;;
  esac
done
if ((rc == 0)); then
  ((status[a] == 0)) || rc=$((rc | 1))
  ((status[b] == 0)) || rc=$((rc | 2))
fi
((rc == EXIT_TIMEOUT || rc == EXIT_HARNESS)) || harness_ok=1
exit "$rc"
