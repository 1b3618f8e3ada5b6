#!/usr/bin/env bash
# Soft-RoCE on this host: loads rdma_rxe and adds rxe0 over the interface of the default route
# (RDMAD_RXE_NETDEV overrides). Exits 0 with a device made or already there; 1, saying why, where the
# kernel has no rdma_rxe (this project's CI hosts: then ./quickstart.sh demo uses the QEMU guest instead).
set -uo pipefail
if [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
  echo "host-rxe: verbs devices already present: $(ls /sys/class/infiniband | tr '\n' ' ')" >&2
  exit 0
fi
if ! modprobe rdma_rxe 2>/dev/null; then
  echo "host-rxe: this kernel ($(uname -r)) has no rdma_rxe module (modprobe rdma_rxe failed)" >&2
  exit 1
fi
netdev=${RDMAD_RXE_NETDEV:-$(ip route show default 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "dev") { print $(i + 1); exit }}')}
if [ -z "$netdev" ]; then
  echo "host-rxe: no default route to put rxe0 on; set RDMAD_RXE_NETDEV=<interface>" >&2
  exit 1
fi
if ! rdma link add rxe0 type rxe netdev "$netdev"; then
  echo "host-rxe: 'rdma link add rxe0 type rxe netdev $netdev' failed" >&2
  exit 1
fi
echo "host-rxe: created rxe0 (Soft-RoCE) on $netdev" >&2
