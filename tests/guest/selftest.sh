#!/usr/bin/env bash
# Self-test of the Soft-RoCE guest harness (run-in-guest.sh, run-two-guests.sh). Needs root.
#
# Usage: selftest.sh [--all | --pair]
#   default: two guest boots (~12 s): rxe0 + rdma_cm (rping) + plumbing; exit-status propagation
#   --pair:  only the two-guest checks, two pairs (~35 s): rping from B to A across the private
#            wire, each rxe0 ACTIVE on its own address, a failing side is named in the status
#   --all:   the default checks, the boot watchdog retry, --timeout, two guests side by side,
#            the --pair checks and a pair's --timeout (~2 min)
# Ends with a line "N passed, N failed"; exits 0 only if every check passed.
set -euo pipefail

HERE=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
readonly HERE RUN="$HERE/run-in-guest.sh" PAIR="$HERE/run-two-guests.sh"

all=0 single=1 pair=0
case "${1:-}" in
  --all) all=1 pair=1 ;;
  --pair) single=0 pair=1 ;;
  "") ;;
  -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "selftest: unknown argument '$1' (usage: $0 [--all | --pair])" >&2; exit 2 ;;
esac

# Private TMPDIR: run-in-guest.sh puts its per-run dirs there, so leftovers can be spotted.
work=$(mktemp -d "${TMPDIR:-/tmp}/rdmad-guest-selftest.XXXXXX")
export TMPDIR=$work/tmp
mkdir -p "$TMPDIR"
trap 'rm -rf -- "$work"' EXIT

passed=0 failed=0 mark=0
check() { # name, then a command that must succeed
  local name=$1; shift
  if "$@"; then
    passed=$((passed + 1)); echo "PASS  $name"
  else
    failed=$((failed + 1)); echo "FAIL  $name"
  fi
}
has() { grep -q -- "$2" "$1"; }
group_start() { mark=$failed; }
show_on_failure() { # label file...: print the files when a check since group_start failed
  local label=$1; shift
  ((failed > mark)) || return 0
  echo "---- $label ----"
  cat -- "$@" || true
  echo "----"
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

no_leftovers() {
  # No QEMU (or anything else) still using this test's temp dir, and no per-run dirs left in it.
  ! pgrep -f -- "$TMPDIR" >/dev/null && [[ -z $(ls -A -- "$TMPDIR") ]]
}

if ((single)); then
  # ---- 1: devices, rdma_cm, and the plumbing (cwd, env, --out share, stdout/stderr split) ----------
  out1=$work/out1
  mkdir -p "$work/cwd dir" "$out1"
  cd "$work/cwd dir"
  group_start
  t0=$(now)
  set +e
  # shellcheck disable=SC2016 # expanded in the guest
  RDMAD_SELFTEST_TOKEN="tok en'\"\$x" GTEST_SELFTEST=gt NOT_PASSED=np \
  "$RUN" --out "$out1" -- sh -c '
    set -e
    ibv_devices
    ibv_devinfo -d rxe0
    rdma resource show
    timeout 60 rping -s -a 10.0.2.15 -C 3 >/dev/null &
    ok=0
    for i in 1 2 3 4 5 6 7 8 9 10; do
      if rping -c -a 10.0.2.15 -C 3 -v; then ok=1; break; fi
      sleep 0.3
    done
    wait
    [ "$ok" = 1 ] && echo RPING-OK
    echo "cwd=$(pwd)"
    echo "token=$RDMAD_SELFTEST_TOKEN gtest=$GTEST_SELFTEST notpassed=${NOT_PASSED:-unset}"
    echo "memlock=$(ulimit -l)"
    echo to-stderr >&2
    echo result >"$1/result.txt"
  ' selftest "$out1" </dev/null >"$work/1.out" 2>"$work/1.err"
  rc=$?
  set -e
  t1=$(now)
  check "devices+rping run exits 0 (got $rc)" test "$rc" = 0
  check "ibv_devices lists rxe0" has "$work/1.out" 'rxe0'
  check "rxe0 port is PORT_ACTIVE" has "$work/1.out" 'PORT_ACTIVE'
  check "rdma resource show lists rxe0" has "$work/1.out" '^0: rxe0: pd'
  check "rping client verified 3 pings" has "$work/1.out" 'rdma-ping-2: '
  check "rping exchange succeeded" has "$work/1.out" '^RPING-OK$'
  check "command ran in the host's cwd" has "$work/1.out" "^cwd=$work/cwd dir\$"
  check "RDMAD_*/GTEST_* passed, others not" has "$work/1.out" "^token=tok en'\"\$x gtest=gt notpassed=unset\$"
  check "memlock is unlimited" has "$work/1.out" '^memlock=unlimited$'
  check "stderr reaches stderr" has "$work/1.err" '^to-stderr$'
  check "stderr not mixed into stdout" bash -c "! grep -q to-stderr '$work/1.out'"
  check "no kernel noise on stdout" bash -c "! grep -qE '^\[ *[0-9]+\.[0-9]+\]|rdmad-guest:' '$work/1.out'"
  check "--out share written by the guest" has "$out1/result.txt" '^result$'
  check "console log kept in --out" test -s "$out1/guest-console.log"
  show_on_failure "run 1 stdout/stderr" "$work/1.out" "$work/1.err"
  echo "      (devices+rping round trip $(elapsed "$t0" "$t1") s)"

  # ---- 2: a failing command's status comes back ----------------------------------------------------
  cd "$work"
  group_start
  t0=$(now)
  set +e
  "$RUN" -- false </dev/null >"$work/2.out" 2>"$work/2.err"
  rc=$?
  set -e
  t1=$(now)
  check "'false' exits 1 (got $rc)" test "$rc" = 1
  show_on_failure "run 2 stdout/stderr" "$work/2.out" "$work/2.err"
  echo "      (trivial command round trip $(elapsed "$t0" "$t1") s)"
  check "no leftover processes or temp dirs" no_leftovers
fi

if ((all)); then
  # ---- 3: boot watchdog: the first boot hangs with an empty console, the retry succeeds ----------
  group_start
  out3=$work/out3
  set +e
  RDMAD_GUEST_INJECT_HANG=1 RDMAD_GUEST_BOOT_TIMEOUT=8 "$RUN" --out "$out3" -- sh -c 'exit 7' \
    <&- >"$work/3.out" 2>"$work/3.err"
  rc=$?
  set -e
  check "watchdog: retried boot runs the command (exit 7, got $rc)" test "$rc" = 7
  check "watchdog: retry announced" has "$work/3.err" 'retrying'
  check "watchdog: first attempt's console kept" test -e "$out3/guest-console.attempt1.log"
  show_on_failure "run 3 stderr" "$work/3.err"

  # ---- 4: --timeout ends a hung command with 124 ------------------------------------------------
  group_start
  t0=$(now)
  set +e
  "$RUN" --timeout 12 -- sleep 600 </dev/null >"$work/4.out" 2>"$work/4.err"
  rc=$?
  set -e
  t1=$(now)
  check "--timeout 12 on 'sleep 600' exits 124 (got $rc)" test "$rc" = 124
  check "--timeout is reported" has "$work/4.err" 'timed out'
  check "--timeout returns promptly ($(elapsed "$t0" "$t1") s)" \
    awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b - a < 25) }'
  check "--timeout keeps the guest logs and says where" has "$work/4.err" 'guest logs kept in'
  show_on_failure "run 4 stderr" "$work/4.err"
  rm -rf -- "$TMPDIR"/rdmad-guest-out.* # kept on purpose (harness failure)
  check "no leftover processes or temp dirs" no_leftovers

  # ---- 5: two guests side by side ---------------------------------------------------------------
  group_start
  t0=$(now)
  set +e
  "$RUN" -- sh -c 'ibv_devinfo -d rxe0 | grep -q PORT_ACTIVE && exit 11' </dev/null >"$work/5a.out" 2>"$work/5a.err" &
  pa=$!
  "$RUN" -- sh -c 'ibv_devinfo -d rxe0 | grep -q PORT_ACTIVE && exit 12' </dev/null >"$work/5b.out" 2>"$work/5b.err" &
  pb=$!
  wait "$pa"; ra=$?
  wait "$pb"; rb=$?
  set -e
  t1=$(now)
  check "two guests side by side (exits 11 and 12, got $ra and $rb)" test "$ra.$rb" = 11.12
  show_on_failure "run 5 stderr" "$work/5a.err" "$work/5b.err"
  echo "      (two parallel round trips $(elapsed "$t0" "$t1") s)"

  # ---- 6: usage errors are the harness's (125) -------------------------------------------------
  set +e
  "$RUN" --timeout 0 -- true </dev/null >/dev/null 2>&1
  rc=$?
  set -e
  check "bad usage exits 125 (got $rc)" test "$rc" = 125
  check "no leftover processes or temp dirs" no_leftovers
fi

if ((pair)); then
  # ---- 7: two guests on one private wire: rping from B to A, each rxe0 on its own address ------
  cd "$work"
  outp=$work/outp
  group_start
  t0=$(now)
  set +e
  # shellcheck disable=SC2016 # expanded in the guests
  show='echo "role=$RDMAD_GUEST_ROLE addr=$RDMAD_GUEST_ADDR peer=$RDMAD_PEER_ADDR"
        ip -o -4 addr show dev eth0; ip -o link show dev eth0
        ibv_devinfo -v -d rxe0 | grep -E "state:|GID\[ *1\]"'
  # shellcheck disable=SC2016
  "$PAIR" -v --timeout 300 --out "$outp" --a "set -e; $show"'
    rping -s -a 10.0.3.1 & srv=$!
    "$RDMAD_PEER_SH" signal a-up
    ("$RDMAD_PEER_SH" wait guest-b.status 250 2>/dev/null; kill $srv 2>/dev/null) &
    wait $srv && echo RPING-SERVER-OK' --b "set -e; $show"'
    "$RDMAD_PEER_SH" wait a-up 120
    ok=0
    for i in $(seq 1 20); do
      if rping -c -a 10.0.3.1 -C 5 -v -V; then ok=1; break; fi
      sleep 0.5
    done
    [ "$ok" = 1 ] && echo RPING-OK' </dev/null >"$work/p.out" 2>"$work/p.err"
  rc=$?
  set -e
  t1=$(now)
  check "pair: rping B -> A run exits 0 (got $rc)" test "$rc" = 0
  for side in A:a:1:2 B:b:2:1; do
    IFS=: read -r S s me peer <<<"$side"
    check "pair: $S knows its role and addresses" has "$work/p.out" "^\[$S\] role=$s addr=10.0.3.$me peer=10.0.3.$peer\$"
    check "pair: $S's eth0 is 10.0.3.$me/24" has "$work/p.out" "^\[$S\] .*eth0 *inet 10.0.3.$me/24 "
    check "pair: $S's eth0 has MAC 52:54:00:00:03:0$me" has "$work/p.out" "^\[$S\] .*eth0:.*link/ether 52:54:00:00:03:0$me "
    check "pair: $S's rxe0 is PORT_ACTIVE" has "$work/p.out" "^\[$S\] .*state:.*PORT_ACTIVE"
    check "pair: $S's rxe0 has GID ::ffff:10.0.3.$me" has "$work/p.out" "^\[$S\] .*GID\[ *1\]:.*::ffff:10.0.3.$me,"
    check "pair: $S's output kept in guest-$s.stdout" has "$outp/guest-$s.stdout" "^role=$s "
    check "pair: $S's console log kept" test -s "$outp/guest-console-$s.log"
    check "pair: $S's status file says 0" has "$outp/guest-$s.status" '^0$'
  done
  check "pair: B's rping verified 5 pings (-V)" has "$work/p.out" '^\[B\] ping data: rdma-ping-4: '
  check "pair: B's rping succeeded" has "$work/p.out" '^\[B\] RPING-OK$'
  check "pair: A's rping server ended cleanly" has "$work/p.out" '^\[A\] RPING-SERVER-OK$'
  check "pair: both statuses reported" has "$work/p.err" '^run-two-guests: A (10.0.3.1): 0 (ok); B (10.0.3.2): 0 (ok)$'
  show_on_failure "pair run stdout/stderr" "$work/p.out" "$work/p.err"
  ready=$(sed -n 's/^run-two-guests: B ready after \([0-9.]*\) s.*/\1/p' "$work/p.err")
  echo "      (pair: both guests ready after ${ready:-?} s; rping round trip $(elapsed "$t0" "$t1") s)"

  # ---- 8: a failing command in B: non-zero status (2), B named --------------------------------
  group_start
  t0=$(now)
  set +e
  # shellcheck disable=SC2016 # expanded in the guests
  "$PAIR" --timeout 300 --a '"$RDMAD_PEER_SH" wait guest-b.status 200; echo a-saw-b-end' \
    --b 'echo b-ran; exit 3' </dev/null >"$work/f.out" 2>"$work/f.err"
  rc=$?
  set -e
  t1=$(now)
  check "pair: only B failing exits 2 (got $rc)" test "$rc" = 2
  check "pair: B's failure is named" has "$work/f.err" '^run-two-guests: A (10.0.3.1): 0 (ok); B (10.0.3.2): 3 (command failed)$'
  check "pair: B's command ran" has "$work/f.out" '^\[B\] b-ran$'
  check "pair: A saw B end (peer.sh wait on guest-b.status)" has "$work/f.out" '^\[A\] a-saw-b-end$'
  show_on_failure "failing pair stdout/stderr" "$work/f.out" "$work/f.err"
  echo "      (failing pair round trip $(elapsed "$t0" "$t1") s)"

  set +e
  "$PAIR" --a true </dev/null >/dev/null 2>&1
  rc=$?
  set -e
  check "pair: bad usage exits 125 (got $rc)" test "$rc" = 125
  check "no leftover processes or temp dirs" no_leftovers

  if ((all)); then
    # ---- 9: a pair's --timeout stops both guests with 124 ---------------------------------------
    group_start
    t0=$(now)
    set +e
    "$PAIR" --timeout 30 --a 'sleep 600' --b 'sleep 600' </dev/null >"$work/t.out" 2>"$work/t.err"
    rc=$?
    set -e
    t1=$(now)
    check "pair: --timeout 30 exits 124 (got $rc)" test "$rc" = 124
    check "pair: the timeout is reported for both" has "$work/t.err" 'A (10.0.3.1): 124 (timed out); B (10.0.3.2): 124 (timed out)'
    check "pair: --timeout returns promptly ($(elapsed "$t0" "$t1") s)" \
      awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b - a < 45) }'
    check "pair: --timeout keeps the guest logs" has "$work/t.err" 'guest logs kept in'
    show_on_failure "pair timeout stderr" "$work/t.err"
    rm -rf -- "$TMPDIR"/rdmad-guest-out.* # kept on purpose (harness failure)
    check "no leftover processes or temp dirs" no_leftovers
  fi
fi

echo "$passed passed, $failed failed"
((failed == 0))
