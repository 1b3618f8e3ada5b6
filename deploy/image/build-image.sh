#!/usr/bin/env bash
# Builds rdmad's container image from Debian packages alone (no registry but Debian's mirror is needed):
# mmdebstrap makes a Debian 12 root (variant minbase by default: the Essential set and Priority:required,
# so the image has a shell, coreutils and ldd for probes and the sidecar's application), adds only the
# runtime library packages that rdmad and rdmactl link to (found here with ldd + dpkg -S) and the verbs
# providers that libibverbs dlopens (ibverbs-providers: rxe, mlx5, ...), copies bazel-bin/server/rdmad
# and bazel-bin/cli/rdmactl to /usr/local/bin, checks inside the root that ldd finds every library, and
# imports the tarball with `podman import` (or writes only the tarball with --tar-only).
#
# Usage: deploy/image/build-image.sh [--tag rdmad:dev] [--variant minbase|essential] [--out DIR] [--tar-only]
# Needs: mmdebstrap, podman (unless --tar-only), root (mmdebstrap's root mode; unshare mode works rootless
# where user namespaces are allowed). docs/operations.md#deployment-on-kubernetes.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
tag=rdmad:dev variant=essential out=$repo/out/image tar_only=0
suite=bookworm mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
while (($#)); do
  case $1 in
    --tag) tag=$2; shift 2 ;;
    --variant) variant=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --tar-only) tar_only=1; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "build-image: unknown argument $1" >&2; exit 2 ;;
  esac
done

bins=("$repo/bazel-bin/server/rdmad" "$repo/bazel-bin/cli/rdmactl")
for b in "${bins[@]}"; do
  [ -x "$b" ] || { echo "build-image: $b missing: bazel build //server:rdmad //cli:rdmactl first" >&2; exit 2; }
done
command -v mmdebstrap >/dev/null || { echo "build-image: mmdebstrap missing (apt-get install mmdebstrap)" >&2; exit 2; }

# The packages that own the libraries the binaries load (ldd on this Debian 12 host, same suite as the image).
libs=$(ldd "${bins[@]}" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u)
if ldd "${bins[@]}" | grep -q 'not found'; then echo "build-image: a library is missing on the host" >&2; exit 1; fi
pkgs=()
for l in $libs; do
  p=$(dpkg -S "$l" 2>/dev/null || dpkg -S "$(readlink -f "$l")" 2>/dev/null) || {
    echo "build-image: no Debian package owns $l" >&2; exit 1; }
  pkgs+=("${p%%:*}")
done
# dlopened, so invisible to ldd: the user-space verbs drivers (libibverbs.d/*.driver -> libibverbs/*.so).
pkgs+=(ibverbs-providers)
mapfile -t pkgs < <(printf '%s\n' "${pkgs[@]}" | sort -u)
echo "build-image: packages: ${pkgs[*]}" >&2

mkdir -p "$out"
tarball=$out/rdmad-image.tar
start=$(date +%s)
# The merged-usr hook makes /bin etc. symlinks itself, instead of installing usrmerge (which pulls in perl).
# Documentation, manual pages and locales are not extracted; apt's lists and caches are emptied.
mmdebstrap --variant="$variant" --mode=auto --format=tar \
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
  --include="$(IFS=,; echo "${pkgs[*]}")" \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --customize-hook='mkdir -p "$1/usr/local/bin" "$1/run/rdmad" "$1/var/lib/rdmad" "$1/etc/rdmad"' \
  --customize-hook="copy-in ${bins[0]} ${bins[1]} /usr/local/bin" \
  --customize-hook='chroot "$1" sh -c "! ldd /usr/local/bin/rdmad /usr/local/bin/rdmactl | grep \"not found\""' \
  --customize-hook='chroot "$1" /usr/local/bin/rdmactl --help >/dev/null' \
  --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/*' \
  "$suite" "$tarball" "$mirror"
echo "build-image: root $(du -h "$tarball" | cut -f1) in $(( $(date +%s) - start )) s: $tarball" >&2

if ((tar_only)); then exit 0; fi
command -v podman >/dev/null || { echo "build-image: podman missing (apt-get install podman), or use --tar-only" >&2; exit 2; }
podman import \
  --change 'ENTRYPOINT ["/usr/local/bin/rdmad"]' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'LABEL org.opencontainers.image.title=rdmad' \
  --change 'LABEL org.opencontainers.image.source=debian-bookworm+bazel-bin' \
  "$tarball" "$tag" >/dev/null
echo "build-image: imported $tag ($(podman image inspect --format '{{.Size}}' "$tag") bytes) in $(( $(date +%s) - start )) s" >&2
