#!/usr/bin/env bash
# The one command behind docs/dev/benchmarks.md (the full tables) and the plots of docs/performance.md: runs every
# benchmark in fresh Soft-RoCE guests, one after the other, then rewrites the generated tables and the plots
# from what they measured:
#   - each benchmark writes markdown fragments (NAME.md) and plot data (NAME.dat) into its output directory
#     (RDMAD_BENCH_RESULTS, which the harness passes into the guests); they are gathered in OUT/results;
#   - tests/bench/render_doc.py puts each NAME.md between `<!-- generated:NAME -->` and `<!-- end:NAME -->`
#     in docs/dev/benchmarks.md, and draws each tests/bench/plots/NAME.gp from NAME.dat into docs/perf/NAME.png
#     (gnuplot, on the host).
# The prose around the tables, and docs/performance.md's summary tables (ratios and their spread), are written
# by hand: update them after a run whose figures moved, with the run's date.
#
# Usage: tests/bench/regenerate.sh [--out DIR] [--short] [--only NAMES] [--render-only]
#   --out DIR      where logs and results go (default out/bench; kept)
#   --short        the benchmarks' short forms: checks the pipeline in ~10 minutes; its figures are not the
#                  doc's (few samples), so the doc is rendered only with --render-only afterwards, on purpose
#   --only NAMES   comma-separated subset of: control, cm, scale, reg, dataplane (default: all)
#   --render-only  run nothing; render OUT/results as they are
# The full run takes about 25 minutes on an idle 2-core machine of these (scale 8, the data plane's two
# guests 9, the rest together about 10; on a loaded one, two to three times that). Run it on an idle machine:
# each ratio is measured within one run, but a busy host stretches the guests' timings unevenly.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
out=$root/out/bench
full=--full
only=control,cm,scale,reg,dataplane
render_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift ;;
    --short) full="" ;;
    --only) only=$2; shift ;;
    --render-only) render_only=1 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "regenerate.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$out/results"
out=$(cd "$out" && pwd)
results=$out/results
guest=$root/tests/guest
wanted() { [[ ",$only," == *",$1,"* ]]; }
failed=()

# One benchmark: NAME, then the harness command (with --out OUT/NAME). Its fragments and data files, written
# into OUT/NAME by the benchmark, are copied into OUT/results.
run() {
  local name=$1 t0=$SECONDS
  shift
  echo "== $name: ${*#$guest/} (at $(date -u +%H:%M:%S))"
  if RDMAD_BENCH_RESULTS=$out/$name "$@" >"$out/$name.log" 2>&1; then
    echo "   done in $((SECONDS - t0)) s"
  else
    echo "   FAILED after $((SECONDS - t0)) s; the end of $out/$name.log:"
    tail -n 20 "$out/$name.log" | sed 's/^/   | /'
    failed+=("$name")
  fi
  find "$out/$name" -maxdepth 1 \( -name '*.md' -o -name '*.dat' \) -exec cp {} "$results/" \;
}
single() {  # NAME GUEST_MEMORY SCRIPT ARGS...
  local name=$1 mem=$2
  shift 2
  rm -rf "${out:?}/$name" && mkdir -p "$out/$name"
  RDMAD_GUEST_MEM=$mem run "$name" "$guest/run-in-guest.sh" --timeout 3600 --out "$out/$name" -- "$@"
}
pair() {  # NAME 'SCRIPT ARGS' (the same command on both sides)
  local name=$1
  rm -rf "${out:?}/$name" && mkdir -p "$out/$name"
  run "$name" "$guest/run-two-guests.sh" --timeout 3600 --out "$out/$name" --a "$2" --b "$2"
}

if ((render_only == 0)); then
  echo "regenerate.sh: building"
  bazel build //server:rdmad //cli:rdmactl //tests/bench/... >"$out/build.log" 2>&1 ||
    { tail -n 30 "$out/build.log"; exit 1; }
  echo "regenerate.sh: results in $results (forms: ${full:-short})"
  wanted control && single control 2G tests/bench/run-control-bench.sh $full
  wanted cm && single cm 2G tests/bench/run-cm-bench.sh $full
  wanted reg && single reg 4G tests/bench/run-reg-bench.sh $full
  wanted scale && single scale 4G tests/bench/run-scale-bench.sh $full
  wanted dataplane && pair dataplane "tests/bench/run-grant-bench.sh $full"
fi

if [ -n "$full" ] || ((render_only)); then
  python3 tests/bench/render_doc.py docs/dev/benchmarks.md "$results" tests/bench/plots docs/perf ||
    failed+=(render)
else
  echo "regenerate.sh: --short: docs/dev/benchmarks.md left as it is (render with --render-only if wanted)"
fi
if ((${#failed[@]})); then
  echo "regenerate.sh: FAILED: ${failed[*]}"
  exit 1
fi
echo "regenerate.sh: done; review: git diff docs/dev/benchmarks.md docs/perf, then update docs/performance.md"
