#!/usr/bin/env bash
# Puts Prometheus' promtool (the rules checker and rules unit tester the Kubernetes kit's alerts are
# tested with: tests/deploy/check-k8s-kit.sh) in ${RDMAD_TOOLS:-/opt/rdmad-tools}/bin, without installing
# Debian's `prometheus` package: installing it would enable and start a Prometheus server. The package is
# downloaded with apt-get download from the mirror apt already uses, only its files are unpacked (dpkg -x:
# no maintainer scripts run, nothing is registered with dpkg), and only promtool is kept.
# Prints promtool's path. Idempotent: an existing promtool of the candidate version is kept.
set -euo pipefail
tools=${RDMAD_TOOLS:-/opt/rdmad-tools}
version=$(apt-cache policy prometheus 2>/dev/null | awk '/Candidate:/ { print $2 }')
if [ -x "$tools/bin/promtool" ] && [ -f "$tools/bin/promtool.version" ] &&
   { [ -z "$version" ] || [ "$(cat "$tools/bin/promtool.version")" = "$version" ]; }; then
  echo "$tools/bin/promtool"; exit 0
fi
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
chown _apt "$work" 2>/dev/null || true  # apt's download sandbox user writes there
download() { (cd "$work" && apt-get download -q prometheus) >&2; }
if ! download; then
  echo "fetch-promtool: apt-get download failed; apt-get update, then again" >&2
  apt-get update -q >&2 && download
fi
dpkg -x "$work"/prometheus_*.deb "$work/root"
install -D -m 0755 "$work/root/usr/bin/promtool" "$tools/bin/promtool"
dpkg-deb -f "$work"/prometheus_*.deb Version >"$tools/bin/promtool.version"
echo "fetch-promtool: $("$tools/bin/promtool" --version 2>&1 | head -n 1) in $tools/bin" >&2
echo "$tools/bin/promtool"
