#!/usr/bin/env bash
# Runs Bazel with a sanitizer config of .bazelrc (asan: ASan + LSan + UBSan; tsan: ThreadSanitizer; tsa:
# clang's thread-safety analysis; see
# docs/dev/build.md#sanitizers) in an output base of its own per config, so that it never waits for, nor disturbs,
# the default Bazel server and its bazel-bin.
#   tests/sanitizers/bazel-san.sh asan build //...
#   tests/sanitizers/bazel-san.sh tsan test //tests/unit/...
#   tests/sanitizers/bazel-san.sh asan info bazel-bin      # where the instrumented binaries are
# The output base is one per checkout and config (override: RDMAD_SAN_OUTPUT_BASE); free it with
# `... clean --expunge`. The checkout gets no bazel-<config>-* symlinks (see .bazelrc). This server walking //...
# would meet the default server's bazel-<dir> symlink (its execroot, with BUILD files) and fail, so a //...
# argument is replaced by the top-level packages of the checkout (//:all and //DIR/... for each real directory
# with a BUILD file).
set -euo pipefail
cd "$(dirname "$0")/../.."
(($# >= 2)) || { echo "usage: $0 asan|tsan|tsa BAZEL_COMMAND [ARGS...]" >&2; exit 2; }
config=$1
shift
case "$config" in asan | tsan | tsa) ;; *) echo "$0: unknown config '$config' (asan, tsan, tsa)" >&2; exit 2 ;; esac
base=${RDMAD_SAN_OUTPUT_BASE:-${XDG_CACHE_HOME:-$HOME/.cache}/bazel-$config/$(printf %s "$PWD" | md5sum | cut -d' ' -f1)}
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
extra=()
if [[ $config == tsan && ($cmd == test || $cmd == run) ]]; then
  # The suppressions file by absolute path (a test runs in its runfiles tree); every report is fatal.
  extra+=("--test_env=TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:history_size=4:suppressions=$PWD/tests/sanitizers/tsan.supp")
fi
exec bazel --output_base="$base" "$cmd" --config="$config" "${extra[@]}" "${args[@]:1}"
