#!/usr/bin/env bash
# Runs Bazel with --config=asan (ASan + LSan + UBSan, see .bazelrc and docs/build.md#sanitizers) in an output
# base of its own, so that it never waits for, nor disturbs, the default Bazel server and its bazel-bin.
#   tests/sanitizers/bazel-asan.sh build //...
#   tests/sanitizers/bazel-asan.sh test //tests/unit/...
#   tests/sanitizers/bazel-asan.sh info bazel-bin      # where the instrumented binaries are
# The output base is one per checkout (override: RDMAD_ASAN_OUTPUT_BASE); free it with `... clean --expunge`.
# The checkout gets no bazel-asan-* symlinks (see .bazelrc). This server walking //... would meet the default
# server's bazel-<dir> symlink (its execroot, with BUILD files) and fail, so a //... argument is replaced by
# the top-level packages of the checkout (//:all and //DIR/... for each real directory with a BUILD file).
set -euo pipefail
cd "$(dirname "$0")/../.."
(($#)) || { echo "usage: $0 BAZEL_COMMAND [ARGS...]" >&2; exit 2; }
base=${RDMAD_ASAN_OUTPUT_BASE:-${XDG_CACHE_HOME:-$HOME/.cache}/bazel-asan/$(printf %s "$PWD" | md5sum | cut -d' ' -f1)}
args=()
for a in "$@"; do
  if [[ $a == //... ]]; then
    args+=(//:all)
    for d in */; do
      d=${d%/}
      [[ -L $d || $d == bazel-* || $d == out ]] && continue  # out/: .bazelignore'd test outputs
      [[ -n $(find "$d" \( -name BUILD -o -name BUILD.bazel \) -print -quit) ]] && args+=("//$d/...")
    done
  else
    args+=("$a")
  fi
done
cmd=${args[0]}
exec bazel --output_base="$base" "$cmd" --config=asan "${args[@]:1}"
