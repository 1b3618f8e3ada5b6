#!/usr/bin/env bash
# The grants data-plane benchmark between two Soft-RoCE guests (tests/guest/run-two-guests.sh): reads from
# guest B through grants of rdmad in guest A with `rdmactl bench read` (the operators' tool: it issues a
# grant, opens it with client::RemoteRegion and keeps --depth reads outstanding), beside perftest's
# ib_read_lat and ib_read_bw between the same two guests in the same run (server in A, client in B,
# -d rxe0 -x <the index of the IPv4-mapped GID>), at 64 B, 4 KiB, 64 KiB and 1 MiB (short form: 4 KiB and 1 MiB), depth 1 and 16; then
# grant_bench's copying and zero-copy reads (client::RemoteRegion, RegisterDestination) at 4 KiB, 64 KiB and
# 1 MiB, depth 16, beside that run's ib_read_bw, and its time from IssueGrant to the first byte read beside a
# plain type 2 BindMw on a connected QP; then session_bench: grants activated one at a time over one
# connection (data-plane protocol version 2, a session) beside a plain server in A (`session_bench --serve`,
# port 7490) that posts the same type 2 bind and fenced SEND per request (and, in a second variant, registers
# the window's bounds region first), and the connections and QPs held for many grants with and without sessions.
# Prints figures; judges nothing (exits non-zero only if a benchmark could not run). Writes the tables as
# markdown (dataplane.md, zerocopy.md, firstbyte.md, session.md) and dataplane-size.dat for the plot into $RDMAD_GUEST_OUT/grant-bench/,
# and copies them to $RDMAD_BENCH_RESULTS if set (tests/bench/regenerate.sh).
#
# Usage, from the host:
#   tests/guest/run-two-guests.sh --timeout 1200 \
#     --a 'tests/bench/run-grant-bench.sh [--full]' --b 'tests/bench/run-grant-bench.sh [--full]'
#   default: the short form CI runs (so it cannot rot); --full: the long one (docs/performance.md), whose
#   figures are the means of 2 rounds (--rounds=N, 1-9, sets that; both sides must be given the same).
#   --session-only (both sides): session_bench alone, for working on it (its table is the doc's only with --full).
#   --bounds=MODE (A): its own rdmad's mw_bounds_region (auto, always, never; docs/config.md). "never" on rxe is
#   UNSAFE (rxe does not enforce window bounds): only to measure rdmad's binds without the bounds region.
# run-two-host.sh runs it in the suite's two-guest boot with --rdmad-running: rdmad in A is already up
# (gRPC 10.0.3.1:50051, data plane 10.0.3.1:7471); otherwise A starts its own.
# Logs: $RDMAD_GUEST_OUT/grant-bench/ (perftest's output on both sides).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$root/bazel-bin
full=0
own_rdmad=1
rounds_arg=""
session_only=0
bounds=auto
for arg in "$@"; do
  case $arg in
    --full) full=1 ;;
    --session-only) session_only=1 ;;
    --bounds=auto|--bounds=always|--bounds=never) bounds=${arg#*=} ;;
    --rdmad-running) own_rdmad=0 ;;
    --rounds=[1-9]) rounds_arg=${arg#*=} ;;
    *) echo "usage: run-grant-bench.sh [--full] [--rounds=N] [--rdmad-running] [--session-only] [--bounds=MODE]" >&2; exit 2 ;;
  esac
done
role=${RDMAD_GUEST_ROLE:?run under tests/guest/run-two-guests.sh}
peer=${RDMAD_PEER_SH:?run under tests/guest/run-two-guests.sh}
a_addr=10.0.3.1
[ "$role" = a ] && a_addr=$RDMAD_GUEST_ADDR || a_addr=$RDMAD_PEER_ADDR
logs=$RDMAD_GUEST_OUT/grant-bench
mkdir -p "$logs"

# The short form measures the two ends of the range (a page and the largest copying read), at half the
# long form's time: it is there so that the benchmark cannot rot; the doc's figures come from --full.
if ((full)); then sizes=(64 4096 65536 1048576) zc_sizes=(4096 65536 1048576)
else sizes=(4096 1048576) zc_sizes=(4096 1048576); fi
depths=(1 16)
# Runs per figure: perftest's iterations (fewer at 1 MiB, where one read takes tens of ms on these guests),
# rdmactl bench read's seconds per size and depth, IssueGrant -> first byte runs.
# Rounds: every figure is the mean of its rounds.
# zc_n / zc_big_n: grant_bench's copying and zero-copy reads per size and path (zc_big_n at 1 MiB).
if ((full)); then lat_n=1000 lat_big_n=200 bw_n=5000 bw_big_n=300 bench_s=10 first_n=50 rounds=2 zc_n=2000 zc_big_n=200
else lat_n=100 lat_big_n=10 bw_n=500 bw_big_n=40 bench_s=1 first_n=10 rounds=1 zc_n=200 zc_big_n=32; fi
[ -n "$rounds_arg" ] && rounds=$rounds_arg
# session_bench: grants activated over one session (and as many binds per baseline connection); grants opened
# the version 1 way, a connection each, all held at once.
if ((full)); then sess_n=1000 sess_v1_n=200; else sess_n=100 sess_v1_n=20; fi
sess_port=7490
# The perftest runs, in order (both sides walk the same list): tool size depth round. Size by size, so that
# each rdmactl figure is measured seconds from its baseline, not minutes apart (the host's load drifts by more
# than the goals' margins over a whole run): B runs `rdmactl bench read` at a size and depth right after the
# ib_read_bw of that size and depth in odd rounds, and right before it in even rounds, whose order within a
# size is reversed too (bw 16, bw 1, lat), so that a drift within a size favours neither tool.
tests=()
((session_only)) && rounds=0
for ((r = 1; r <= rounds; r++)); do
  for s in "${sizes[@]}"; do
    if ((r % 2)); then
      tests+=("lat $s 1 $r")
      for d in "${depths[@]}"; do tests+=("bw $s $d $r"); done
    else
      for ((k = ${#depths[@]} - 1; k >= 0; k--)); do tests+=("bw $s ${depths[k]} $r"); done
      tests+=("lat $s 1 $r")
    fi
  done
done

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
  rdmad_pid='' serve_pid='' work=''
  trap 'kill $rdmad_pid $serve_pid 2>/dev/null || true; [ -z "$work" ] || rm -rf "$work"' EXIT
  # session_bench's baseline server: idle (in poll(2)) until B's session_bench dials it at the end.
  "$bin/tests/bench/session_bench" --serve "$RDMAD_GUEST_ADDR:$sess_port" >"$logs/session-serve.log" 2>&1 &
  serve_pid=$!
  if ((own_rdmad)); then
    work=$(mktemp -d /tmp/rdmad-grant-bench.XXXXXX)
    cat >"$work/rdmad.json" <<JSON
{ "listen": ["unix:$work/rdmad.sock", "$RDMAD_GUEST_ADDR:50051"], "insecure_tcp": true,
  "rdma_listen": ["$RDMAD_GUEST_ADDR:7471"], "cm_workers": 2, "log_level": "warning", "mw_bounds_region": "$bounds" }
JSON
    "$bin/server/rdmad" --config "$work/rdmad.json" >"$logs/rdmad-a.log" 2>&1 &
    rdmad_pid=$!
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
declare -A pt_lat pt_bw pt_rate  # [size,round] typical us; [size,depth,round] MiB/s and reads/s
failed=""
# rdmactl bench read, the operators' tool, through grants it issues on a region of A: every size at each
# depth, each right after perftest's ib_read_bw at that size and depth (ctl_bench below).
ctl=("$bin/cli/rdmactl" --server "$a_addr:50051" --timeout 60s)
json_field() { sed -n "s/.*\"$1\": \\([0-9.]*\\).*/\\1/p" "$2" | head -n 1; }
# A figure, kept only if it is a positive number (perftest's short runs print "inf" or 0.00 now and then).
pos() { awk -v v="$1" 'BEGIN { if (v ~ /^[0-9]*[.]?[0-9]+$/ && v + 0 > 0) print v }'; }
declare -A ctl_p50 ctl_p99 ctl_bw ctl_iops  # [size,depth,round]
if ((session_only == 0)); then
  pd=$("${ctl[@]}" -o name create pd --device rxe0 --label bench-read 2>"$logs/rdmactl-setup.err") &&
    mr=$("${ctl[@]}" -o name register mr --pd "$pd" --size $((2 * 16 * 1048576)) \
      --access local-write,remote-read,mw-bind 2>>"$logs/rdmactl-setup.err") || {
    failed="$failed rdmactl-setup"
    cat "$logs/rdmactl-setup.err" >&2
  }
fi
ctl_bench() {  # size depth round
  [ -n "${mr:-}" ] || return 0
  local f=$logs/rdmactl-bench-$1-$2-$3.json
  if "${ctl[@]}" -o json bench read "$mr" --size "$1" --depth "$2" --duration "${bench_s}s" >"$f" 2>"$f.err"; then
    ctl_p50[$1,$2,$3]=$(pos "$(json_field p50 "$f")")
    ctl_p99[$1,$2,$3]=$(pos "$(json_field p99 "$f")")
    ctl_bw[$1,$2,$3]=$(pos "$(json_field mib_per_s "$f")")
    ctl_iops[$1,$2,$3]=$(pos "$(json_field iops "$f")")
  else
    failed="$failed rdmactl-bench@$1/$2"
    cat "$f.err" >&2
  fi
}
i=0
for t in "${tests[@]}"; do
  i=$((i + 1))
  set -- $t
  "$peer" wait "pt-$i-up" 600
  if [ "$1" = bw ] && (($4 % 2 == 0)); then ctl_bench "$2" "$3" "$4"; fi
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
  if [ "$1" = bw ] && (($4 % 2)); then ctl_bench "$2" "$3" "$4"; fi
  if ((ok == 0)); then
    failed="$failed ib_read_$1@$2/$3"
    echo "ib_read_$1 -s $2 failed:" >&2
    tail -n 5 "$logs/perftest-b-$i.log" >&2
    continue
  fi
  if [ "$1" = lat ]; then  # #bytes #iterations t_min t_max t_typical ...
    v=$(awk -v s="$2" '$1 == s && NF >= 5 { print $5; exit }' "$logs/perftest-b-$i.log")
    v=$(pos "$v")
    [ -n "$v" ] && pt_lat[$2,$4]=$v
  else                     # #bytes #iterations BW_peak BW_average MsgRate (MB = 2^20 bytes; Mpps)
    v=$(awk -v s="$2" '$1 == s && NF >= 4 { print $4; exit }' "$logs/perftest-b-$i.log")
    v=$(pos "$v")
    [ -n "$v" ] && pt_bw[$2,$3,$4]=$v
    v=$(awk -v s="$2" '$1 == s && NF >= 5 { printf "%.1f", $5 * 1e6; exit }' "$logs/perftest-b-$i.log")
    v=$(pos "$v")
    [ -n "$v" ] && pt_rate[$2,$3,$4]=$v
  fi
done

if [ -n "${mr:-}" ]; then
  "${ctl[@]}" delete mr "$mr" >/dev/null 2>&1 || true
  "${ctl[@]}" delete pd "$pd" >/dev/null 2>&1 || true
fi

# The table: rdmactl's figures beside perftest's, each the mean of its rounds; ratio = rdmactl / perftest,
# the mean of the rounds' ratios (latency: lower is better, goal <= 1.1; bandwidth: higher is better, goal >= 0.95, from the read rates,
# which perftest and rdmactl print with more digits than MiB/s at 64 B). Latency is compared at depth 1 only:
# ib_read_lat keeps one read outstanding; at depth 16 rdmactl's latency includes the queue.
size_name() { awk -v n="$1" 'BEGIN { if (n >= 1048576) printf "%d MiB", n / 1048576; else if (n >= 1024) printf "%d KiB", n / 1024; else printf "%d B", n }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "n/a"; else printf "%.2fx", a / b }'; }
or_na() { [ -n "$1" ] && echo "$1" || echo "n/a"; }
mean() {  # ARRAY_NAME KEY_PREFIX: the mean over the rounds that have a value, 2 decimals; empty if none
  local -n arr=$1
  local r vals=""
  for ((r = 1; r <= rounds; r++)); do [ -n "${arr[$2,$r]:-}" ] && vals="$vals ${arr[$2,$r]}"; done
  [ -n "$vals" ] && echo "$vals" | awk '{ t = 0; for (i = 1; i <= NF; i++) t += $i; printf "%.2f", t / NF }'
  return 0
}
mean_ratio() {  # A B KEY_PREFIX: the mean of the rounds' A/B ratios (rounds with both figures), or n/a
  local -n a=$1 b=$2
  local r vals=""
  for ((r = 1; r <= rounds; r++)); do
    [ -n "${a[$3,$r]:-}" ] && [ -n "${b[$3,$r]:-}" ] && vals="$vals ${a[$3,$r]}/${b[$3,$r]}"
  done
  [ -n "$vals" ] || { echo "n/a"; return 0; }
  echo "$vals" | awk '{ t = 0; for (i = 1; i <= NF; i++) { split($i, q, "/"); t += q[1] / q[2] } printf "%.2fx", t / NF }'
}
per_round() {  # A B KEY_PREFIX: each round's A/B ratio, e.g. "0.98, 1.03"
  local -n a=$1 b=$2
  local r out=""
  for ((r = 1; r <= rounds; r++)); do out="$out${out:+, }$(ratio "${a[$3,$r]:-}" "${b[$3,$r]:-}")"; done
  echo "${out//x/}"
}
md=$logs/dataplane.md
{
  echo "Measured $(date -u +%F), $(uname -r), $(nproc) vCPUs per guest, two guests on the harness's wire; perftest $lat_n/$bw_n iterations ($lat_big_n/$bw_big_n at 1 MiB), rdmactl bench read ${bench_s} s per size and depth, next to perftest's run of the same size and depth; each figure the mean of $rounds round(s), the pair's order alternating"
  echo
  echo "| size | depth | \`ib_read_lat\` typical (us) | rdmactl p50 (us) | ratio (goal <= 1.1) | per round | rdmactl p99 (us) | \`ib_read_bw\` (MiB/s) | rdmactl (MiB/s) | ratio of read rates (goal >= 0.95) | per round |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  for s in "${sizes[@]}"; do
    for d in "${depths[@]}"; do
      lat="" lat_ratio="n/a" lat_rounds="n/a"
      if [ "$d" = 1 ]; then
        declare -A lat_by=()
        for ((r = 1; r <= rounds; r++)); do lat_by[$s,1,$r]=${pt_lat[$s,$r]:-}; done
        lat=$(mean lat_by "$s,1")
        lat_ratio=$(mean_ratio ctl_p50 lat_by "$s,1")
        lat_rounds=$(per_round ctl_p50 lat_by "$s,1")
        unset lat_by
      fi
      echo "| $(size_name "$s") | $d | $(or_na "$lat") | $(or_na "$(mean ctl_p50 "$s,$d")") | $lat_ratio | $lat_rounds | $(or_na "$(mean ctl_p99 "$s,$d")") | $(or_na "$(mean pt_bw "$s,$d")") | $(or_na "$(mean ctl_bw "$s,$d")") | $(mean_ratio ctl_iops pt_rate "$s,$d") | $(per_round ctl_iops pt_rate "$s,$d") |"
    done
  done
} >"$md"
{
  echo "# size_bytes ib_read_lat_us rdmactl_p50_us_depth1 ib_read_bw_depth1 rdmactl_bw_depth1 ib_read_bw_depth16 rdmactl_bw_depth16 (MiB/s; means over the rounds)"
  for s in "${sizes[@]}"; do
    declare -A lat_by=()
    for ((r = 1; r <= rounds; r++)); do lat_by[$s,$r]=${pt_lat[$s,$r]:-}; done
    nan() { [ -n "$1" ] && echo "$1" || echo NaN; }
    echo "$s $(nan "$(mean lat_by "$s")") $(nan "$(mean ctl_p50 "$s,1")") $(nan "$(mean pt_bw "$s,1")") $(nan "$(mean ctl_bw "$s,1")") $(nan "$(mean pt_bw "$s,16")") $(nan "$(mean ctl_bw "$s,16")")"
    unset lat_by
  done
} >"$logs/dataplane-size.dat"
if ((session_only == 0)); then
  echo "rdmactl bench read beside perftest (RC RDMA reads between the guests):"
  cat "$md"
fi

# Copying and zero-copy beside ib_read_bw at depth 16 (the mean of its rounds) at zc_sizes.
zc_bw=""
for s in "${zc_sizes[@]}"; do
  v=$(mean pt_bw "$s,16")
  [ -n "$v" ] && zc_bw="$zc_bw${zc_bw:+,}$s=$v"
done
rc=0
((session_only)) || "$bin/tests/bench/grant_bench" --target "$a_addr:50051" --self "$RDMAD_GUEST_ADDR" --sizes "" \
  --zero-copy-sizes "$(IFS=,; echo "${zc_sizes[*]}")" --depth 16 --zero-copy-reads "$zc_n" \
  --zero-copy-big-reads "$zc_big_n" --perftest-bw "$zc_bw" --zero-copy-markdown "$logs/zerocopy.md" \
  --first-byte-iters "$first_n" --markdown "$logs/firstbyte.md" || rc=$?
# Sessions: activations over one connection beside the baseline server in A, then connections and QPs held.
"$bin/tests/bench/session_bench" --target "$a_addr:50051" --baseline "$a_addr:$sess_port" --grants "$sess_n" \
  --v1-grants "$sess_v1_n" --markdown "$logs/session.md" --times "$logs/session-times.txt" || {
  rc=1
  failed="$failed session_bench"
}
"$peer" signal bench-b-done
if [ -n "${RDMAD_BENCH_RESULTS:-}" ] && ((session_only == 0)); then
  cp "$md" "$logs/dataplane-size.dat" "$RDMAD_BENCH_RESULTS/" && cp "$logs/firstbyte.md" "$RDMAD_BENCH_RESULTS/" &&
    cp "$logs/zerocopy.md" "$RDMAD_BENCH_RESULTS/" ||
    rc=1
fi
if [ -n "${RDMAD_BENCH_RESULTS:-}" ] && [ -f "$logs/session.md" ]; then
  cp "$logs/session.md" "$RDMAD_BENCH_RESULTS/" || rc=1
fi
[ -z "$failed" ] || { echo "run-grant-bench: did not run:$failed" >&2; rc=1; }
exit "$rc"
