#!/usr/bin/env bash
# Measures the rkeys rdmad hands out on a real device, with rdmactl only (docs/security.md#keys). Runs
# inside the Soft-RoCE guest (tests/guest/run-in-guest.sh), as root:
#
#   tests/guest/run-in-guest.sh --timeout 600 --out "$PWD/keys" -- tests/conformance/key-sequence.sh "$PWD/keys"
#
# It starts rdmad on rxe0 (twice: grant quarantine off, then the default 60 s), and records, in order:
#   mr       regions registered one after another, two deregistered and two more registered, one re-registered
#   mw1      type 1 windows: each one's key at allocation, then one window bound 6 times, invalidated, bound
#   mw2      type 2 windows bound on a QP (connected to itself): alloc, 6 binds with a LOCAL_INV between
#   grant    keys of grant windows from the pool (each grant opened, read and revoked by rdmactl bench
#            read): with the quarantine off the pool's windows are bound again and again; with the default
#            quarantine a revoked window rests and fresh ones are used
# OUT_DIR/keys.tsv has one line per key: kind, object, event, key (hex), index (key >> 8), key byte
# (key & 0xff), and the key byte's step from the same object's previous key. The summary goes to stdout.
# Binaries: bazel-bin/ of this checkout (//server:rdmad, //cli:rdmactl).
set -euo pipefail

out=${1:?usage: key-sequence.sh OUT_DIR}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$root/bazel-bin
work=$(mktemp -d /tmp/rdmad-keys.XXXXXX)  # the guest's own /tmp: unix sockets do not work on 9p
tsv=$out/keys.tsv
printf 'kind\tobject\tevent\tkey\tindex\tkey_byte\tstep\n' >"$tsv"
pid=
cleanup() { [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

ctl() { "$bin/cli/rdmactl" --server "unix:$work/rdmad.sock" "$@"; }
json() { ctl "$@" -o json; }

declare -A last=()
# record KIND OBJECT EVENT KEY
record() {
  local key=$(($4)) step=""
  if [ -n "${last[$2]:-}" ]; then step=$(((key - ${last[$2]}) & 0xff)); fi
  last[$2]=$key
  printf '%s\t%s\t%s\t0x%08x\t0x%06x\t0x%02x\t%s\n' "$1" "$2" "$3" "$key" $((key >> 8)) $((key & 0xff)) "$step" |
    tee -a "$tsv"
}

start_rdmad() {  # QUARANTINE_MS
  cat >"$work/rdmad.json" <<JSON
{
  "listen": ["unix:$work/rdmad.sock"],
  "allowed_file_roots": ["/dev/shm"],
  "rdma_listen": ["10.0.2.15:7471"],
  "grant_window_pool": 4,
  "grant_quarantine_ms": $1,
  "log_level": "warning"
}
JSON
  "$bin/server/rdmad" --config "$work/rdmad.json" >>"$out/rdmad.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 300); do [ -S "$work/rdmad.sock" ] && return 0; sleep 0.1; done
  echo "rdmad did not start" >&2
  exit 1
}

stop_rdmad() {
  kill -TERM "$pid"
  wait "$pid" || true
  pid=
}

# grant_keys MR LABEL N: N grants, one after another, each opened and revoked by a short bench read; records
# the key of the window each one was bound on (a window keeps its last key after LOCAL_INV, so rdmad still
# shows it once the grant has ended).
grant_keys() {
  local mr=$1 label=$2 n=$3 i g w
  for i in $(seq 1 "$n"); do
    if ! g=$(json bench read "$mr" --length 4KiB --size 4KiB --depth 1 --duration 200ms --for "keys-$label-$i" \
      2>"$work/bench.err" | jq -r .grant); then
      echo "bench read $i ($label) failed: $(cat "$work/bench.err")" >&2
      continue
    fi
    w=$(json get grants "$g" | jq -r .window)
    record grant-$label "$w" "$g" "$(json get mws "$w" | jq -r .rkey)"
  done
}

# ---- run 1: quarantine off
start_rdmad 0
pd=$(ctl create pd --device rxe0 --label keys -o name)
access=local-write,remote-read,mw-bind

echo "# memory regions: rkey (lkey is the same on rxe when remote access is granted)"
mrs=()
for i in 1 2 3 4 5 6; do
  m=$(json register mr --pd "$pd" --size 64KiB --access "$access")
  mrs+=("$(jq -r .name <<<"$m")")
  record mr regions registered "$(jq -r .rkey <<<"$m")"
done
ctl delete mr "${mrs[1]}" >/dev/null
ctl delete mr "${mrs[2]}" >/dev/null
for i in 7 8; do
  m=$(json register mr --pd "$pd" --size 64KiB --access "$access")
  record mr regions "registered after 2 deregistrations" "$(jq -r .rkey <<<"$m")"
done
m=$(json register mr --pd "$pd" --size 64KiB --access local-write,mw-bind)
record mr-local "${mrs[0]}-local" "registered without remote access (lkey $(jq -r .lkey <<<"$m"))" "$(jq -r .rkey <<<"$m")"
record mr "${mrs[0]}" "before rereg" "$(json get mrs "${mrs[0]}" | jq -r .rkey)"
m=$(json rereg mr "${mrs[0]}" --access local-write,remote-read,remote-write,mw-bind)
record mr "${mrs[0]}" "re-registered (CHANGE_ACCESS, emulated on rxe)" "$(jq -r .mr.rkey <<<"$m")"

echo "# type 1 windows"
target=${mrs[3]}
mw1=()
for i in 1 2 3 4; do
  m=$(json create mw --pd "$pd" --type 1)
  mw1+=("$(jq -r .name <<<"$m")")
  record mw1 "$(jq -r .name <<<"$m")" allocated "$(jq -r .rkey <<<"$m")"
done
for i in 1 2 3 4 5 6; do
  record mw1 "${mw1[0]}" "bind $i" "$(json bind mw "${mw1[0]}" --mr "$target" --offset $((i * 4096)) --length 4KiB --access remote-read | jq -r .rkey)"
done
record mw1 "${mw1[0]}" invalidated "$(json invalidate mw "${mw1[0]}" | jq -r .rkey)"
record mw1 "${mw1[0]}" "bind after invalidate" "$(json bind mw "${mw1[0]}" --mr "$target" --length 4KiB --access remote-read | jq -r .rkey)"

echo "# type 2 windows, bound on a QP connected to itself"
q=$(json create qp --pd "$pd")
qp=$(jq -r .name <<<"$q")
ctl connect qp "$qp" --remote-qpn "$(jq -r .local.qpn <<<"$q")" --remote-psn "$(jq -r .local.psn <<<"$q")" \
  --remote-gid 10.0.2.15 >/dev/null
mw2=()
for i in 1 2 3; do
  m=$(json create mw --pd "$pd" --type 2)
  mw2+=("$(jq -r .name <<<"$m")")
  record mw2 "$(jq -r .name <<<"$m")" allocated "$(jq -r .rkey <<<"$m")"
done
for i in 1 2 3 4 5 6; do
  record mw2 "${mw2[0]}" "bind $i" "$(json bind mw "${mw2[0]}" --mr "$target" --length 4KiB --access remote-read --qp "$qp" | jq -r .rkey)"
  ctl invalidate mw "${mw2[0]}" >/dev/null
done
record mw2 "${mw2[1]}" "bind 1" "$(json bind mw "${mw2[1]}" --mr "$target" --length 4KiB --access remote-read --qp "$qp" | jq -r .rkey)"
ctl invalidate mw "${mw2[1]}" >/dev/null

echo "# grant windows, quarantine off (grant_quarantine_ms 0, pool of 4)"
grant_key_mr=${mrs[4]}
grant_keys "$grant_key_mr" q0 1  # the first grant creates the PD's pool
json get mws --pd "$pd" | jq -r '.items[] | select(.owner == "grants") | "\(.name) \(.rkey)"' |
  while read -r name key; do record grant-pool "$name" "in the pool after the first grant" "$key"; done
grant_keys "$grant_key_mr" q0 7
stop_rdmad

# ---- run 2: the default quarantine (60 s); names start again, so do the steps
last=()
start_rdmad 60000
pd=$(ctl create pd --device rxe0 --label keys -o name)
m=$(json register mr --pd "$pd" --size 64KiB --access "$access")
echo "# grant windows, default quarantine (60 s, pool of 4)"
grant_keys "$(jq -r .name <<<"$m")" q60 6
stop_rdmad

echo "# keys recorded in $tsv"
