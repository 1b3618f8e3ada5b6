#!/usr/bin/env bash
# rdmad quick start (Debian 12, as root). Both commands install what they need first.
#   ./quickstart.sh demo   rdmad's main job: install rdmad and rdmactl (/usr/local/bin) and serve this host's
#                          verbs devices (creating a Soft-RoCE rxe0 where the kernel has rdma_rxe), or, where
#                          it has not, the demo in two Soft-RoCE guests on one wire (docs/dev/harness.md):
#                          rdmad and its operator in the first, a grant's client in the second
#   ./quickstart.sh test   the whole test suite; ends with "N passed, N failed"
set -euo pipefail
cd "$(dirname "$0")"

case "${1:-}" in
  demo)
    shift
    bash deploy/install-deps.sh
    bash deploy/install.sh  # rdmad and rdmactl into /usr/local/bin, the systemd unit, /etc/rdmad/rdmad.json
    # No RDMA NIC: Soft-RoCE on the host itself, if its kernel has rdma_rxe (docs/operations.md).
    if [ -z "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
      bash deploy/host-rxe.sh || true
    fi
    if [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
      echo "verbs devices found: $(ls /sys/class/infiniband | tr '\n' ' ')- serving them on unix:/run/rdmad/rdmad.sock"
      echo "(in another shell: rdmactl get devices; stop with Ctrl-C or SIGTERM, which drains)"
      exec /usr/local/bin/rdmad --config /etc/rdmad/rdmad.json "$@"
    fi
    echo "no RDMA on this host, and its kernel has no rdma_rxe: running the demo on rxe0 in two Soft-RoCE guests"
    echo "(rdmad and rdmactl in [A], a grant's client in [B])"
    exec tests/guest/run-two-guests.sh --timeout 900 --a deploy/demo.sh --b deploy/demo.sh
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
