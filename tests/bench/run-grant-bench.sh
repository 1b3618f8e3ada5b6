#!/usr/bin/env bash
# The grants data-plane benchmark between two Soft-RoCE guests (tests/guest/run-two-guests.sh): reads from
# guest B through grants of rdmad in guest A (grant_bench, client::RemoteRegion), beside perftest's
# ib_read_lat and ib_read_bw between the same two guests in the same run (server in A, client in B,
# -d rxe0 -x <the index of the IPv4-mapped GID>), at 64 B, 4 KiB and 64 KiB; then the time from IssueGrant
# to the first byte read beside a plain type 2 BindMw on a connected QP. Prints figures; judges nothing
# (exits non-zero only if a benchmark could not run).
#
# Usage, from the host:
#   tests/guest/run-two-guests.sh --timeout 1200 \
#     --a 'tests/bench/run-grant-bench.sh [--full]' --b 'tests/bench/run-grant-bench.sh [--full]'
#   default: the short form CI runs (so it cannot rot); --full: the long one (docs/performance.md).
# run-two-host.sh runs it in the suite's two-guest boot with --rdmad-running: rdmad in A is already up
# (gRPC 10.0.3.1:50051, data plane 10.0.3.1:7471); otherwise A starts its own.
# Logs: $RDMAD_GUEST_OUT/grant-bench/ (perftest's output on both sides).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$root/bazel-bin
full=0
own_rdmad=1
for arg in "$@"; do
  case $arg in
    --full) full=1 ;;
    --rdmad-running) own_rdmad=0 ;;
    *) echo "usage: run-grant-bench.sh [--full] [--rdmad-running]" >&2; exit 2 ;;
  esac
done
role=${RDMAD_GUEST_ROLE:?run under tests/guest/run-two-guests.sh}
peer=${RDMAD_PEER_SH:?run under tests/guest/run-two-guests.sh}
a_addr=10.0.3.1
[ "$role" = a ] && a_addr=$RDMAD_GUEST_ADDR || a_addr=$RDMAD_PEER_ADDR
logs=$RDMAD_GUEST_OUT/grant-bench
mkdir -p "$logs"

sizes=(64 4096 65536)
depth=16
if ((full)); then lat_n=1000 bw_n=5000 first_n=50; else lat_n=100 bw_n=500 first_n=10; fi
# The perftest runs, in order (both sides walk the same list): tool size.
tests=()
for s in "${sizes[@]}"; do tests+=("lat $s"); done
for s in "${sizes[@]}"; do tests+=("bw $s"); done

# The index of rxe0's IPv4-mapped GID (::ffff:a.b.c.d, RoCE v2): the one perftest must use between the guests.
gid_index() {
  local f g
  for f in /sys/class/infiniband/rxe0/ports/1/gids/*; do
    g=$(<"$f")
    case $g in 0000:0000:0000:0000:0000:ffff:*) echo "${f##*/}"; return 0 ;; esac
  done
  return 1
}
gidx=$(gid_index) || { echo "run-grant-bench: rxe0 has no IPv4-mapped GID" >&2; exit 1; }
gid_type=$(cat "/sys/class/infiniband/rxe0/ports/1/gid_attrs/types/$gidx" 2>/dev/null || echo unknown)

perftest_args() {  # tool size -> the arguments both sides share
  local tool=$1 size=$2
  if [ "$tool" = lat ]; then
    echo "-d rxe0 -x $gidx -s $size -n $lat_n -F"
  else
    echo "-d rxe0 -x $gidx -s $size -n $bw_n -t $depth -o $depth -Q 1 -F"
  fi
}

if [ "$role" = a ]; then
  echo "guest A: rxe0 GID index $gidx ($gid_type) for perftest"
  rdmad_pid=
  if ((own_rdmad)); then
    work=$(mktemp -d /tmp/rdmad-grant-bench.XXXXXX)
    cat >"$work/rdmad.json" <<JSON
{ "listen": ["unix:$work/rdmad.sock", "$RDMAD_GUEST_ADDR:50051"], "insecure_tcp": true,
  "rdma_listen": ["$RDMAD_GUEST_ADDR:7471"], "cm_workers": 2, "log_level": "warning" }
JSON
    "$bin/server/rdmad" --config "$work/rdmad.json" >"$logs/rdmad-a.log" 2>&1 &
    rdmad_pid=$!
    trap 'kill $rdmad_pid 2>/dev/null || true; rm -rf "$work"' EXIT
    for _ in $(seq 1 300); do [ -S "$work/rdmad.sock" ] && break; sleep 0.1; done
    "$peer" signal bench-a-up
  fi
  exec {nap}<> <(:)
  i=0
  for t in "${tests[@]}"; do
    i=$((i + 1))
    set -- $t
    # shellcheck disable=SC2046
    ib_read_"$1" $(perftest_args "$1" "$2") -p $((18515 + i)) >"$logs/perftest-a-$i.log" 2>&1 &
    spid=$!
    "$peer" signal "pt-$i-up"
    "$peer" wait "pt-$i-done" 600 || true
    # The server ends with its client; stop it if the client never came.
    for _ in $(seq 1 50); do kill -0 "$spid" 2>/dev/null || break; read -r -t 0.1 -u "$nap" _ || true; done
    kill "$spid" 2>/dev/null || true
    wait "$spid" 2>/dev/null || true
  done
  "$peer" wait bench-b-done 1200 || true
  exit 0
fi

# ---- guest B
echo "guest B: rxe0 GID index $gidx ($gid_type) for perftest; A at $a_addr"
((own_rdmad)) && "$peer" wait bench-a-up 300
lat_fig=""
bw_fig=""
failed=""
i=0
for t in "${tests[@]}"; do
  i=$((i + 1))
  set -- $t
  "$peer" wait "pt-$i-up" 600
  ok=0
  for _ in $(seq 1 30); do  # the server may not be listening yet
    # shellcheck disable=SC2046
    if ib_read_"$1" $(perftest_args "$1" "$2") -p $((18515 + i)) "$a_addr" >"$logs/perftest-b-$i.log" 2>&1; then
      ok=1
      break
    fi
    sleep 0.5
  done
  "$peer" signal "pt-$i-done"
  if ((ok == 0)); then
    failed="$failed ib_read_$1@$2"
    echo "ib_read_$1 -s $2 failed:" >&2
    tail -n 5 "$logs/perftest-b-$i.log" >&2
    continue
  fi
  if [ "$1" = lat ]; then  # #bytes #iterations t_min t_max t_typical ...
    v=$(awk -v s="$2" '$1 == s && NF >= 5 { print $5; exit }' "$logs/perftest-b-$i.log")
    [ -n "$v" ] && lat_fig="$lat_fig$2=$v,"
  else                     # #bytes #iterations BW_peak BW_average MsgRate (MB = 2^20 bytes)
    v=$(awk -v s="$2" '$1 == s && NF >= 4 { print $4; exit }' "$logs/perftest-b-$i.log")
    [ -n "$v" ] && bw_fig="$bw_fig$2=$v,"
  fi
done
echo "perftest (RC, rdma reads, $lat_n iterations for latency, $bw_n with $depth outstanding for bandwidth):"
echo "  ib_read_lat t_typical us: ${lat_fig:-none}"
echo "  ib_read_bw  average MiB/s: ${bw_fig:-none}"

rc=0
"$bin/tests/bench/grant_bench" --target "$a_addr:50051" --self "$RDMAD_GUEST_ADDR" \
  --sizes "$(IFS=,; echo "${sizes[*]}")" --lat-iters "$lat_n" --bw-iters "$bw_n" --depth "$depth" \
  --first-byte-iters "$first_n" --perftest-lat "$lat_fig" --perftest-bw "$bw_fig" || rc=$?
"$peer" signal bench-b-done
[ -z "$failed" ] || { echo "run-grant-bench: perftest did not run:$failed" >&2; rc=1; }
exit "$rc"
