#!/usr/bin/env bash
# Installs every Debian package rdmad needs to build, test and run its Soft-RoCE guest.
# Idempotent: packages already present are skipped; safe to run on every CI run.
set -euo pipefail

PKGS=(
  # build
  bazel-bootstrap g++ protobuf-compiler protobuf-compiler-grpc libprotobuf-dev
  libgrpc++-dev libgrpc-dev grpc-proto libabsl-dev
  libibverbs-dev librdmacm-dev rdma-core ibverbs-providers
  nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev
  # mutual TLS: libcrypto checks rdmad's certificate files; the tests make certificates with the openssl CLI
  libssl-dev openssl
  # the /metrics endpoint (server/metrics/http.cc): cpp-httplib, a shared library in Debian (libcpp-httplib0.11)
  libcpp-httplib-dev
  # the restart-recovery state store (server/state/, docs/operations.md#restart-recovery): SQLite (libsqlite3-0)
  libsqlite3-dev
  # readiness under the systemd unit (Type=notify: server/main.cc's sd_notify): libsystemd (libsystemd0)
  libsystemd-dev
  # the kernel's object numbers (pdn, mrn, cm-idn) from RDMA netlink, as `rdma resource show` prints them: libmnl
  libmnl-dev
  # tests and the Soft-RoCE guest
  qemu-system-x86 linux-image-amd64 busybox-static kmod cpio xz-utils iproute2 util-linux procps
  ibverbs-utils rdmacm-utils perftest
  # rdmactl's zsh completion is tested in zsh itself
  zsh
  # docs/examples/read_grant.py: a grant client on rdma-core's Python bindings alone
  python3-pyverbs
  # the Python SDK (python/, docs/sdk.md#python): its extension module's headers (pybind11-dev, python3-dev's
  # Python.h), the runtime its generated stubs need (python3-grpcio, python3-protobuf: the releases of Debian's
  # protoc and grpc_python_plugin), numpy arrays as read buffers and the suite (tests/python/)
  pybind11-dev python3-dev python3-grpcio python3-protobuf python3-numpy python3-pytest
  # Kubernetes (docs/operations.md#deployment-on-kubernetes): the image from Debian packages
  # (deploy/image/build-image.sh), the sidecar Pod under podman (runc: crun refuses hybrid cgroups here;
  # catatonit: the Pod's infra container), the manifests' schema (python3-kubernetes' typed models)
  mmdebstrap podman runc catatonit python3-kubernetes python3-yaml
  # the thread-safety analysis and the sanitizer builds (--config=tsa, asan, tsan; docs/dev/build.md#sanitizers):
  # clang 14 and its sanitizer runtimes
  clang libclang-rt-14-dev
  # the performance doc's plots (tests/bench/regenerate.sh draws them on the host)
  gnuplot-nox
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  # A first run installs a few hundred packages (about two minutes): say what is happening as it happens.
  echo "install-deps: installing ${#missing[@]} of ${#PKGS[@]} packages and their dependencies: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  echo "install-deps: apt-get update" >&2
  apt-get update -q 2>&1 | sed -u 's/^/install-deps:   /' >&2
  echo "install-deps: apt-get install (downloading, then unpacking and setting up each package)" >&2
  # One line per package downloaded and set up, numbered; apt's full output is kept in the log.
  log=$(mktemp /tmp/install-deps.XXXXXX.log)
  set +e
  apt-get install -y -q --no-install-recommends "${missing[@]}" 2>&1 | tee "$log" |
    awk '/^Need to get/ { print "install-deps:   " $0; fflush() }
         /^Get:[0-9]+/  { got++; if (got % 25 == 1) { printf "install-deps:   downloading (%d) %s\n", got, $5; fflush() } }
         /^Setting up / { n++; printf "install-deps:   [%d] %s\n", n, $3; fflush() }' >&2
  rc=${PIPESTATUS[0]}
  set -e
  if ((rc != 0)); then
    echo "install-deps: apt-get install failed (exit $rc); its output:" >&2
    tail -n 40 "$log" >&2
    exit "$rc"
  fi
  rm -f "$log"
fi
echo "install-deps: all ${#PKGS[@]} packages present" >&2
# promtool (the Kubernetes kit's alert rules: tests/deploy/check-k8s-kit.sh), unpacked from Debian's
# prometheus package without installing it (installing would start a Prometheus server).
"$(dirname "$0")/fetch-promtool.sh" >/dev/null
