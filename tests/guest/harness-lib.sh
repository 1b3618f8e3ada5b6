# Shared by run-in-guest.sh and run-two-guests.sh: sourced, never run. The sourcing script sets PROG
# (message prefix) and USAGE (its usage line, without the program name) first, and defines cleanup
# (the EXIT trap).
# shellcheck shell=bash

# shellcheck disable=SC2034 # used by the sourcing scripts
readonly EXIT_TIMEOUT=124 EXIT_HARNESS=125

err() { echo "$PROG: error: $*" >&2; }
warn() { echo "$PROG: warning: $*" >&2; }
usage_error() { err "$*"; echo "usage: $0 $USAGE" >&2; exit "$EXIT_HARNESS"; }
verbose=0
info() { ((verbose)) && echo "$PROG: $*" >&2; return 0; }

now() { local t=$EPOCHREALTIME; echo "${t/./}"; } # microseconds
secs() { printf '%d.%01d' $(($1 / 1000000)) $(($1 % 1000000 / 100000)); } # us -> "S.d"

# ---- the options both scripts take ---------------------------------------------------------------
timeout_s=600
out_dir=
extra_env=()
# Takes "$1" (and its value) if it is --timeout, --out, --env, -v or -h; sets nshift to the number of
# words it used. Returns 1 (nshift=0) for any other word.
# shellcheck disable=SC2034 # nshift is the caller's
common_option() {
  nshift=1
  case "$1" in
    --timeout) (($# >= 2)) || usage_error "--timeout needs a value"; timeout_s=$2; nshift=2 ;;
    --timeout=*) timeout_s=${1#*=} ;;
    --out) (($# >= 2)) || usage_error "--out needs a value"; out_dir=$2; nshift=2 ;;
    --out=*) out_dir=${1#*=} ;;
    --env) (($# >= 2)) || usage_error "--env needs a value"; extra_env+=("$2"); nshift=2 ;;
    --env=*) extra_env+=("${1#*=}") ;;
    -v|--verbose) verbose=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) nshift=0; return 1 ;;
  esac
}

# After the options: the checks on them both scripts make.
check_common_options() {
  [[ $timeout_s =~ ^[0-9]+$ && $timeout_s -gt 0 ]] || usage_error "--timeout must be a positive integer, got '$timeout_s'"
  if [[ ${RDMAD_GUEST_VERBOSE:-0} == 1 ]]; then verbose=1; fi
}

# Root, and the tools named as arguments.
check_host() {
  local tool
  ((EUID == 0)) || { err "must run as root (QEMU's 9p export of / needs it)"; exit "$EXIT_HARNESS"; }
  for tool in "$@"; do
    command -v "$tool" >/dev/null || { err "$tool not found (see deploy/install-deps.sh)"; exit "$EXIT_HARNESS"; }
  done
}

# ---- exit paths -----------------------------------------------------------------------------------
# cleanup (the sourcing script's) runs on every exit; a signal exits with 128 + its number.
install_traps() {
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  trap 'exit 129' HUP
}

# ---- the out dir ----------------------------------------------------------------------------------
own_out=0
harness_ok=0
# Creates the --out dir, or a temp dir of our own (own_out=1); out_dir becomes absolute, no symlinks.
prepare_out_dir() {
  if [[ -n $out_dir ]]; then
    mkdir -p -- "$out_dir" || { err "cannot create --out dir $out_dir"; exit "$EXIT_HARNESS"; }
  else
    out_dir=$(mktemp -d "${TMPDIR:-/tmp}/rdmad-guest-out.XXXXXX")
    own_out=1
  fi
  out_dir=$(cd -- "$out_dir" && pwd -P)
}
# At exit ($1 = status): a temp out dir of our own is removed, unless the harness itself failed
# (harness_ok unset and no signal: boot, timeout, crash); then it is kept for the console logs.
finish_out_dir() {
  ((own_out)) || return 0
  if ((harness_ok || $1 >= 128)); then rm -rf -- "$out_dir"
  else echo "$PROG: guest logs kept in $out_dir" >&2
  fi
}

# ---- output streaming -----------------------------------------------------------------------------
tail_pids=()
# $1 = seconds to let the tails drain their files (they exit by themselves once their --pid is gone).
stop_tails() {
  local p grace=$((${1:-0} * 10))
  for p in "${tail_pids[@]}"; do
    while ((grace > 0)) && kill -0 "$p" 2>/dev/null; do sleep 0.1; grace=$((grace - 1)); done
    kill "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  tail_pids=()
}
