#!/usr/bin/env bash
# Builds rdmad and rdmactl and installs them where the README uses them: $PREFIX/bin (default /usr/local/bin,
# on PATH on Debian), with the systemd unit (/etc/systemd/system/rdmad.service) and, if none is there yet,
# the example config as /etc/rdmad/rdmad.json. Also the C++ SDK (docs/sdk.md): $PREFIX/lib/librdmad-client.so.3
# with its symlinks, the public headers under $PREFIX/include/rdmad/ and $PREFIX/lib/pkgconfig/rdmad-client.pc
# (on pkg-config's default path for /usr/local), then ldconfig. And the Python SDK (docs/sdk.md#python): the
# package rdmad for Debian's /usr/bin/python3 in $PREFIX/lib/python3.X/dist-packages/rdmad. DESTDIR stages the whole tree elsewhere (the
# test suite installs into a scratch directory this way). Idempotent; an existing config is never overwritten.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${PREFIX:-/usr/local}
dest=${DESTDIR:-}

echo "install: building rdmad, rdmactl, librdmad-client.so and the Python package" >&2
bazel build //server:rdmad //cli:rdmactl //client:librdmad-client.so //proto:rdmad_v1 \
  //python:rdmad_v1_py //python:_rdmad_dataplane.so
install -D -m 0755 bazel-bin/server/rdmad "$dest$prefix/bin/rdmad"
install -D -m 0755 bazel-bin/cli/rdmactl "$dest$prefix/bin/rdmactl"
install -d -m 0755 "$dest/etc/systemd/system" "$dest$prefix/share/doc/rdmad"
sed -e "s|@PREFIX@|$prefix|g" -e "s|@DOCDIR@|$prefix/share/doc/rdmad|g" deploy/rdmad.service \
  >"$dest/etc/systemd/system/rdmad.service"
install -m 0644 docs/*.md "$dest$prefix/share/doc/rdmad/"
if [ ! -e "$dest/etc/rdmad/rdmad.json" ]; then
  install -D -m 0644 deploy/rdmad.example.json "$dest/etc/rdmad/rdmad.json"
  echo "install: /etc/rdmad/rdmad.json (from deploy/rdmad.example.json)" >&2
elif ! grep -q '"rdma_listen"' "$dest/etc/rdmad/rdmad.json"; then
  echo "install: the existing /etc/rdmad/rdmad.json (kept) has no \"rdma_listen\": grants need rdmad's data-plane listener; add deploy/rdmad.example.json's line" >&2
fi

# The C++ SDK. The SONAME's major number changes only with an incompatible ABI (docs/sdk.md); an older
# major's library, if installed, stays for the applications built against it.
sdk_version=3.0.0
sdk_major=${sdk_version%%.*}
libdir=$prefix/lib
inc=$dest$prefix/include/rdmad
install -D -m 0755 bazel-bin/client/librdmad-client.so "$dest$libdir/librdmad-client.so.$sdk_version"
ln -sfn "librdmad-client.so.$sdk_version" "$dest$libdir/librdmad-client.so.$sdk_major"
ln -sfn "librdmad-client.so.$sdk_major" "$dest$libdir/librdmad-client.so"
# The public headers, each under rdmad/ as <rdmad/client/client.h> names it: their own includes of the tree's
# "client/..." and "proto/wire/..." are rewritten to "rdmad/client/..." and "rdmad/proto/wire/...", so the
# SDK adds no top-level names to the include path. Private headers (read_plan.h, read_status.h) stay out.
rm -rf "$inc"
sdk_header() {  # sdk_header SOURCE DESTINATION (relative to $inc)
  install -d -m 0755 "$(dirname "$inc/$2")"
  sed -e 's|^#include "client/|#include "rdmad/client/|' -e 's|^#include "proto/wire/|#include "rdmad/proto/wire/|' \
    "$1" >"$inc/$2"
  chmod 0644 "$inc/$2"
}
for h in client.h channel.h remote_region.h; do sdk_header "client/$h" "client/$h"; done
sdk_header proto/wire/grant_message.h proto/wire/grant_message.h
for h in rdmad.pb.h rdmad.grpc.pb.h; do sdk_header "bazel-bin/proto/rdmad/v1/$h" "v1/$h"; done
# Every include of rdmad/... must be one of the installed headers: a public header that starts to include a
# file not installed here fails the install, not the first application built against it.
missing_headers=$(grep -rhoE '^#include "rdmad/[^"]+"' "$inc" | sed -E 's/^#include "(.*)"/\1/' | sort -u |
  while read -r h; do [ -e "$dest$prefix/include/$h" ] || echo "$h"; done)
if [ -n "$missing_headers" ]; then
  echo "install: the SDK's headers include files that are not installed: $missing_headers" >&2
  exit 1
fi
install -d -m 0755 "$dest$libdir/pkgconfig"
sed -e "s|@PREFIX@|$prefix|g" -e "s|@LIBDIR@|$libdir|g" -e "s|@VERSION@|$sdk_version|g" deploy/rdmad-client.pc.in \
  >"$dest$libdir/pkgconfig/rdmad-client.pc"
chmod 0644 "$dest$libdir/pkgconfig/rdmad-client.pc"
[ -n "$dest" ] || ldconfig
echo "install: $libdir/librdmad-client.so.$sdk_major, $prefix/include/rdmad/, $libdir/pkgconfig/rdmad-client.pc${dest:+ (under $dest)}" >&2

# The Python SDK, for Debian's /usr/bin/python3 (its python3-grpcio and python3-protobuf, which the generated
# code matches; the extension module is built for its 3.X ABI). $PREFIX/lib/python3.X/dist-packages is on that
# interpreter's default sys.path for PREFIX=/usr/local; another prefix needs PYTHONPATH.
python=/usr/bin/python3
pyver=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
pysite=$prefix/lib/python$pyver/dist-packages
pkg=$dest$pysite/rdmad
rm -rf "$pkg"
install -d -m 0755 "$pkg/v1"
install -m 0644 python/rdmad/*.py "$pkg/"
install -m 0644 python/rdmad/v1/__init__.py bazel-bin/python/rdmad/v1/rdmad_pb2.py \
  bazel-bin/python/rdmad/v1/rdmad_pb2_grpc.py "$pkg/v1/"
install -m 0644 bazel-bin/python/_rdmad_dataplane.so "$pkg/"
# Import what was installed (from /, with only the installed tree added): a missing module, a dependency
# (python3-grpcio, python3-protobuf) or an unresolved symbol of the extension fails the install.
if ! imported=$(cd / && PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$dest$pysite "$python" -c \
  'import rdmad, rdmad._rdmad_dataplane as d; print(rdmad.__file__); print(d.__file__)' 2>&1); then
  echo "install: the installed Python package does not import: $imported" >&2
  exit 1
fi
case $imported in
  "$pkg"/*) ;;
  *) echo "install: python3 imported rdmad from elsewhere than $pkg: $imported" >&2; exit 1 ;;
esac
"$python" -m compileall -q -d "$pysite/rdmad" "$pkg" >/dev/null
echo "install: $pysite/rdmad (import rdmad)${dest:+ (under $dest)}" >&2
[ "$prefix" = /usr/local ] || echo "install: add $pysite to PYTHONPATH" >&2

echo "install: $prefix/bin/rdmad, $prefix/bin/rdmactl, /etc/systemd/system/rdmad.service${dest:+ (under $dest)}" >&2
if [ -z "$dest" ] && [ -d /run/systemd/system ]; then
  systemctl daemon-reload
  echo "install: start it with: systemctl enable --now rdmad" >&2
fi
