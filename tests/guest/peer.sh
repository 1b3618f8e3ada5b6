#!/usr/bin/env bash
# Rendezvous between the two guests of run-two-guests.sh, through files in the directory they share
# ($RDMAD_GUEST_OUT). Runs inside a guest, where run-two-guests.sh puts its path in $RDMAD_PEER_SH.
#
# Usage: peer.sh signal NAME        creates $RDMAD_GUEST_OUT/NAME
#        peer.sh wait NAME [SECS]   waits until $RDMAD_GUEST_OUT/NAME exists (default: 300 s).
#                                   Exits 1 if SECS run out, or at once if the other guest has
#                                   ended (run-two-guests.sh writes guest-a.status / guest-b.status
#                                   when a side ends).
# Example: A `server & "$RDMAD_PEER_SH" signal a-up; "$RDMAD_PEER_SH" wait guest-b.status; kill $!`
#          B `"$RDMAD_PEER_SH" wait a-up && client --server "$RDMAD_PEER_ADDR"` (still retry: "a-up"
#          says the server was started, not that it is listening yet).
set -euo pipefail

die() { echo "peer.sh: $*" >&2; exit "${2:-2}"; }
usage() { die "usage: peer.sh signal NAME | peer.sh wait NAME [SECS]"; }

[[ -n ${RDMAD_GUEST_OUT:-} && -d $RDMAD_GUEST_OUT ]] || die "RDMAD_GUEST_OUT is not a directory (run under run-two-guests.sh)"
case ${RDMAD_GUEST_ROLE:-} in
  a) peer=b ;;
  b) peer=a ;;
  *) die "RDMAD_GUEST_ROLE must be a or b (run under run-two-guests.sh)" ;;
esac
(($# >= 2)) || usage
op=$1 name=$2 secs=${3:-300}
[[ $name =~ ^[A-Za-z0-9._-]+$ && $name != .* ]] || die "bad NAME '$name' (letters, digits, . _ -)"
[[ $secs =~ ^[0-9]+$ ]] || die "SECS must be a number, got '$secs'"
file=$RDMAD_GUEST_OUT/$name

case $op in
  signal)
    (($# == 2)) || usage
    : >"$file.tmp.$$" && mv -f -- "$file.tmp.$$" "$file"
    ;;
  wait)
    (($# <= 3)) || usage
    t=${EPOCHREALTIME/./}
    end=$((t + secs * 1000000))
    # Sleeps with `read -t` on a pipe that never delivers: no fork per poll. Under TCG every fork is
    # dear, and this polls while the other guest boots on the same host cores.
    exec {nap}<> <(:)
    until [[ -e $file ]]; do
      if [[ -e $RDMAD_GUEST_OUT/guest-$peer.status ]]; then
        die "guest ${peer^^} ended (status $(<"$RDMAD_GUEST_OUT/guest-$peer.status")) before $name appeared" 1
      fi
      t=${EPOCHREALTIME/./}
      ((t < end)) || die "$name did not appear within $secs s" 1
      read -r -t 0.5 -u "$nap" _ || true
    done
    ;;
  *) usage ;;
esac
