#!/usr/bin/env bash
# Builds rdmad and rdmactl and installs them where the README uses them: $PREFIX/bin (default /usr/local/bin,
# on PATH on Debian), with the systemd unit (/etc/systemd/system/rdmad.service) and, if none is there yet,
# the example config as /etc/rdmad/rdmad.json. DESTDIR stages the whole tree elsewhere (the test suite
# installs into a scratch directory this way). Idempotent; an existing config is never overwritten.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${PREFIX:-/usr/local}
dest=${DESTDIR:-}

echo "install: building rdmad and rdmactl" >&2
bazel build //server:rdmad //cli:rdmactl
install -D -m 0755 bazel-bin/server/rdmad "$dest$prefix/bin/rdmad"
install -D -m 0755 bazel-bin/cli/rdmactl "$dest$prefix/bin/rdmactl"
install -d -m 0755 "$dest/etc/systemd/system" "$dest$prefix/share/doc/rdmad"
sed -e "s|@PREFIX@|$prefix|g" -e "s|@DOCDIR@|$prefix/share/doc/rdmad|g" deploy/rdmad.service \
  >"$dest/etc/systemd/system/rdmad.service"
install -m 0644 docs/*.md "$dest$prefix/share/doc/rdmad/"
if [ ! -e "$dest/etc/rdmad/rdmad.json" ]; then
  install -D -m 0644 deploy/rdmad.example.json "$dest/etc/rdmad/rdmad.json"
  echo "install: /etc/rdmad/rdmad.json (from deploy/rdmad.example.json)" >&2
fi
echo "install: $prefix/bin/rdmad, $prefix/bin/rdmactl, /etc/systemd/system/rdmad.service${dest:+ (under $dest)}" >&2
if [ -z "$dest" ] && [ -d /run/systemd/system ]; then
  systemctl daemon-reload
  echo "install: start it with: systemctl enable --now rdmad" >&2
fi
