#!/usr/bin/env bash
# The grants data-plane benchmark between two Soft-RoCE guests (tests/guest/run-two-guests.sh): reads from
# guest B through grants of rdmad in guest A with `rdmactl bench read` (the operators' tool: it issues a
# grant, opens it with client::RemoteRegion and keeps --depth reads outstanding), beside perftest's
# ib_read_lat and ib_read_bw between the same two guests in the same run (server in A, client in B,
# -d rxe0 -x <the index of the IPv4-mapped GID>), at 64 B, 4 KiB, 64 KiB and 1 MiB, depth 1 and 16; then
# grant_bench's time from IssueGrant to the first byte read beside a plain type 2 BindMw on a connected QP.
# Prints figures; judges nothing (exits non-zero only if a benchmark could not run). Writes the tables as
# markdown (dataplane.md, firstbyte.md) and dataplane-size.dat for the plot into $RDMAD_GUEST_OUT/grant-bench/,
# and copies them to $RDMAD_BENCH_RESULTS if set (tests/bench/regenerate.sh).
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

sizes=(64 4096 65536 1048576)
depths=(1 16)
# Runs per figure: perftest's iterations (fewer at 1 MiB, where one read takes tens of ms on these guests),
# rdmactl bench read's seconds per size and depth, IssueGrant -> first byte runs.
if ((full)); then lat_n=1000 lat_big_n=200 bw_n=5000 bw_big_n=300 bench_s=10 first_n=50
else lat_n=100 lat_big_n=10 bw_n=500 bw_big_n=40 bench_s=1 first_n=10; fi
# The perftest runs, in order (both sides walk the same list): tool size depth.
tests=()
for s in "${sizes[@]}"; do tests+=("lat $s 1"); done
for s in "${sizes[@]}"; do for d in "${depths[@]}"; do tests+=("bw $s $d"); done; done

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

perftest_args() {  # tool size depth -> the arguments both sides share
  local tool=$1 size=$2 depth=$3 n
  if [ "$tool" = lat ]; then
    n=$lat_n; ((size > 65536)) && n=$lat_big_n
    echo "-d rxe0 -x $gidx -s $size -n $n -F"
  else
    n=$bw_n; ((size > 65536)) && n=$bw_big_n
    echo "-d rxe0 -x $gidx -s $size -n $n -t $depth -o $depth -Q 1 -F"
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
    ib_read_"$1" $(perftest_args "$1" "$2" "$3") -p $((18515 + i)) >"$logs/perftest-a-$i.log" 2>&1 &
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
declare -A pt_lat pt_bw  # [size] typical us; [size,depth] MiB/s
failed=""
i=0
for t in "${tests[@]}"; do
  i=$((i + 1))
  set -- $t
  "$peer" wait "pt-$i-up" 600
  ok=0
  for _ in $(seq 1 30); do  # the server may not be listening yet
    # shellcheck disable=SC2046
    if ib_read_"$1" $(perftest_args "$1" "$2" "$3") -p $((18515 + i)) "$a_addr" >"$logs/perftest-b-$i.log" 2>&1; then
      ok=1
      break
    fi
    sleep 0.5
  done
  "$peer" signal "pt-$i-done"
  if ((ok == 0)); then
    failed="$failed ib_read_$1@$2/$3"
    echo "ib_read_$1 -s $2 failed:" >&2
    tail -n 5 "$logs/perftest-b-$i.log" >&2
    continue
  fi
  if [ "$1" = lat ]; then  # #bytes #iterations t_min t_max t_typical ...
    v=$(awk -v s="$2" '$1 == s && NF >= 5 { print $5; exit }' "$logs/perftest-b-$i.log")
    [ -n "$v" ] && pt_lat[$2]=$v
  else                     # #bytes #iterations BW_peak BW_average MsgRate (MB = 2^20 bytes)
    v=$(awk -v s="$2" '$1 == s && NF >= 4 { print $4; exit }' "$logs/perftest-b-$i.log")
    [ -n "$v" ] && pt_bw[$2,$3]=$v
  fi
done

# rdmactl bench read, the operators' tool, through grants it issues on a region of A: every size at each depth.
ctl=("$bin/cli/rdmactl" --server "$a_addr:50051" --timeout 60s)
json_field() { sed -n "s/.*\"$1\": \\([0-9.]*\\).*/\\1/p" "$2" | head -n 1; }
declare -A ctl_p50 ctl_p99 ctl_bw
pd=$("${ctl[@]}" -o name create pd --device rxe0 --label bench-read 2>"$logs/rdmactl-setup.err") &&
  mr=$("${ctl[@]}" -o name register mr --pd "$pd" --size $((2 * 16 * 1048576)) \
    --access local-write,remote-read,mw-bind 2>>"$logs/rdmactl-setup.err") || {
  failed="$failed rdmactl-setup"
  cat "$logs/rdmactl-setup.err" >&2
}
if [ -n "${mr:-}" ]; then
  for s in "${sizes[@]}"; do
    for d in "${depths[@]}"; do
      f=$logs/rdmactl-bench-$s-$d.json
      if "${ctl[@]}" -o json bench read "$mr" --size "$s" --depth "$d" --duration "${bench_s}s" >"$f" \
          2>"$f.err"; then
        ctl_p50[$s,$d]=$(json_field p50 "$f")
        ctl_p99[$s,$d]=$(json_field p99 "$f")
        ctl_bw[$s,$d]=$(json_field mib_per_s "$f")
      else
        failed="$failed rdmactl-bench@$s/$d"
        cat "$f.err" >&2
      fi
    done
  done
  "${ctl[@]}" delete mr "$mr" >/dev/null 2>&1 || true
  "${ctl[@]}" delete pd "$pd" >/dev/null 2>&1 || true
fi

# The table: rdmactl's figures beside perftest's, ratio = rdmactl / perftest (latency: lower is better,
# goal <= 1.1; bandwidth: higher is better, goal >= 0.95). Latency is compared at depth 1 only: ib_read_lat
# keeps one read outstanding; at depth 16 rdmactl's latency includes the queue.
size_name() { awk -v n="$1" 'BEGIN { if (n >= 1048576) printf "%d MiB", n / 1048576; else if (n >= 1024) printf "%d KiB", n / 1024; else printf "%d B", n }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "n/a"; else printf "%.2fx", a / b }'; }
or_na() { [ -n "$1" ] && echo "$1" || echo "n/a"; }
md=$logs/dataplane.md
{
  echo "Measured $(date -u +%F), $(uname -r), $(nproc) vCPUs per guest, two guests on the harness's wire; perftest $lat_n/$bw_n iterations ($lat_big_n/$bw_big_n at 1 MiB), rdmactl bench read ${bench_s} s per size and depth"
  echo
  echo "| size | depth | \`ib_read_lat\` typical (us) | rdmactl p50 (us) | ratio (goal <= 1.1) | rdmactl p99 (us) | \`ib_read_bw\` (MiB/s) | rdmactl (MiB/s) | ratio (goal >= 0.95) |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  for s in "${sizes[@]}"; do
    for d in "${depths[@]}"; do
      lat=""; [ "$d" = 1 ] && lat=${pt_lat[$s]:-}
      echo "| $(size_name "$s") | $d | $(or_na "$lat") | $(or_na "${ctl_p50[$s,$d]:-}") | $( [ "$d" = 1 ] && ratio "${ctl_p50[$s,$d]:-}" "$lat" || echo "n/a") | $(or_na "${ctl_p99[$s,$d]:-}") | $(or_na "${pt_bw[$s,$d]:-}") | $(or_na "${ctl_bw[$s,$d]:-}") | $(ratio "${ctl_bw[$s,$d]:-}" "${pt_bw[$s,$d]:-}") |"
    done
  done
} >"$md"
{
  echo "# size_bytes ib_read_lat_us rdmactl_p50_us_depth1 ib_read_bw_depth1 rdmactl_bw_depth1 ib_read_bw_depth16 rdmactl_bw_depth16 (MiB/s)"
  for s in "${sizes[@]}"; do
    echo "$s ${pt_lat[$s]:-NaN} ${ctl_p50[$s,1]:-NaN} ${pt_bw[$s,1]:-NaN} ${ctl_bw[$s,1]:-NaN} ${pt_bw[$s,16]:-NaN} ${ctl_bw[$s,16]:-NaN}"
  done
} >"$logs/dataplane-size.dat"
echo "rdmactl bench read beside perftest (RC RDMA reads between the guests):"
cat "$md"

rc=0
"$bin/tests/bench/grant_bench" --target "$a_addr:50051" --self "$RDMAD_GUEST_ADDR" --sizes "" \
  --first-byte-iters "$first_n" --markdown "$logs/firstbyte.md" || rc=$?
"$peer" signal bench-b-done
if [ -n "${RDMAD_BENCH_RESULTS:-}" ]; then
  cp "$md" "$logs/dataplane-size.dat" "$RDMAD_BENCH_RESULTS/" && cp "$logs/firstbyte.md" "$RDMAD_BENCH_RESULTS/" ||
    rc=1
fi
[ -z "$failed" ] || { echo "run-grant-bench: did not run:$failed" >&2; rc=1; }
exit "$rc"
