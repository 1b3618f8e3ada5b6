#!/usr/bin/env bash
# tests/sanitizers/bazel-san.sh with --config=tsan (ThreadSanitizer): see there.
exec "$(dirname "$0")/bazel-san.sh" tsan "$@"
