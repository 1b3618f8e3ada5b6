#!/usr/bin/env bash
# tests/sanitizers/bazel-san.sh with --config=asan (ASan + LSan + UBSan): see there.
exec "$(dirname "$0")/bazel-san.sh" asan "$@"
