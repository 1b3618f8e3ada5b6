#!/usr/bin/env bash
# rdmad quick start (Debian 12, as root). Both commands install what they need first.
#   ./quickstart.sh demo   rdmad's main job: serve this host's verbs devices, or, on a host without RDMA,
#                          the demo inside the project's Soft-RoCE guest (docs/harness.md)
#   ./quickstart.sh test   the whole test suite; ends with "N passed, N failed"
set -euo pipefail
cd "$(dirname "$0")"

case "${1:-}" in
  demo)
    shift
    bash deploy/install-deps.sh
    bazel build //server:rdmad //cli:rdmactl
    if [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
      echo "verbs devices found: $(ls /sys/class/infiniband | tr '\n' ' ')- serving them on unix:/run/rdmad/rdmad.sock"
      exec bazel-bin/server/rdmad "$@"
    fi
    echo "no RDMA on this host: running the demo on rxe0 inside the Soft-RoCE guest"
    exec tests/guest/run-in-guest.sh --timeout 600 -- deploy/demo.sh
    ;;
  test)
    bash deploy/install-deps.sh
    exec tests/run-all.sh
    ;;
  *)
    echo "usage: $0 demo|test" >&2
    exit 2
    ;;
esac
