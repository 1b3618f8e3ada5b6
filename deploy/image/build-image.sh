#!/usr/bin/env bash
# Builds rdmad's container image from Debian packages alone (no registry; the Debian mirror is the one this
# machine's apt uses, or DEBIAN_MIRROR):
# mmdebstrap makes a Debian 12 root (variant essential by default: the Essential:yes set, so the image has
# a shell, coreutils and ldd for the probes and the sidecar's application; minbase adds apt and its
# libraries, 17 MB more, which an image that is never upgraded in place does not use), adds only the
# runtime library packages that rdmad and rdmactl link to (found here with ldd + dpkg -S) and the verbs
# providers that libibverbs dlopens (ibverbs-providers: rxe, mlx5, ...), copies bazel-bin/server/rdmad
# and bazel-bin/cli/rdmactl to /usr/local/bin, checks inside the root that ldd finds every library, and
# imports the tarball with `podman import` (or writes only the tarball with --tar-only).
#
# Usage: deploy/image/build-image.sh [--tag rdmad:dev] [--variant essential|minbase] [--out DIR] [--cache DIR]
#        [--tar-only]   (the Debian root is cached in out/image-cache: a second build takes seconds)
# Needs: mmdebstrap, podman (unless --tar-only), root (mmdebstrap's root mode, chroot). docs/operations.md#deployment-on-kubernetes.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
tag=rdmad:dev variant=essential out=$repo/out/image tar_only=0 cache=$repo/out/image-cache
suite=bookworm mirror=${DEBIAN_MIRROR:-}
while (($#)); do
  case $1 in
    --tag) tag=$2; shift 2 ;;
    --variant) variant=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --cache) cache=$2; shift 2 ;;
    --tar-only) tar_only=1; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "build-image: unknown argument $1" >&2; exit 2 ;;
  esac
done

# The mirror this machine's apt uses for $suite (DEBIAN_MIRROR overrides it): the first URI of a deb822
# stanza (/etc/apt/sources.list.d/*.sources) whose Suites name $suite itself, else the first one-line
# "deb URI $suite ..." entry. No mirror is named here: the image comes from where the host's packages do.
apt_mirror() {
  local f found=""
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -r $f && -z $found ]] || continue
    found=$(awk -v suite="$suite" '
      /^[[:space:]]*$/ { if (uri != "" && hit && deb) { print uri; found = 1; exit } uri = ""; hit = 0; deb = 0; next }
      tolower($1) == "types:" { for (i = 2; i <= NF; i++) if ($i == "deb") deb = 1 }
      tolower($1) == "uris:" { uri = $2 }
      tolower($1) == "suites:" { for (i = 2; i <= NF; i++) if ($i == suite) hit = 1 }
      END { if (!found && uri != "" && hit && deb) print uri }' "$f")
  done
  if [[ -z $found ]]; then
    found=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
      awk -v suite="$suite" '$1 == "deb" { u = ($2 ~ /^\[/) ? 3 : 2; if ($(u + 1) == suite) { print $u; exit } }') || true
  fi
  echo "$found"
}
if [[ -z $mirror ]]; then
  mirror=$(apt_mirror)
  [[ -n $mirror ]] || { echo "build-image: no apt source for $suite on this machine: set DEBIAN_MIRROR" >&2; exit 2; }
fi

bins=("$repo/bazel-bin/server/rdmad" "$repo/bazel-bin/cli/rdmactl")
for b in "${bins[@]}"; do
  [ -x "$b" ] || { echo "build-image: $b missing: bazel build //server:rdmad //cli:rdmactl first" >&2; exit 2; }
done
command -v mmdebstrap >/dev/null || { echo "build-image: mmdebstrap missing (apt-get install mmdebstrap)" >&2; exit 2; }

# The packages that own the libraries the binaries load (ldd on this Debian 12 host, same suite as the image).
libs=$(ldd "${bins[@]}" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u)
if ldd "${bins[@]}" | grep -q 'not found'; then echo "build-image: a library is missing on the host" >&2; exit 1; fi
# One dpkg query for all of them (a query per library takes a minute on a busy machine); dpkg records some
# under /lib, some under /usr/lib, so each is searched by its directory's last part and file name.
patterns=()
for l in $libs; do real=$(readlink -f "$l"); patterns+=("*/$(basename "$(dirname "$real")")/$(basename "$real")"); done
owners=$(dpkg -S "${patterns[@]}" 2>/dev/null) || true
pkgs=()
for pat in "${patterns[@]}"; do
  p=$(awk -v f="/${pat#*/}" 'substr($0, length($0) - length(f) + 1) == f {print $1; exit}' <<<"$owners")
  [ -n "$p" ] || { echo "build-image: no Debian package owns ${pat#\*}" >&2; exit 1; }
  pkgs+=("${p%%:*}")
done
# dlopened, so invisible to ldd: the user-space verbs drivers (libibverbs.d/*.driver -> libibverbs/*.so).
pkgs+=(ibverbs-providers)
mapfile -t pkgs < <(printf '%s\n' "${pkgs[@]}" | sort -u)
echo "build-image: packages: ${pkgs[*]}" >&2

mkdir -p "$out" "$cache"
tarball=$out/rdmad-image.tar
start=$(date +%s)
# The Debian root is cached (a directory under $cache), keyed by the suite, the variant, this script and
# the host's versions of the packages (the ones the binaries were built and linked against): only the
# binaries change from one build to the next, and installing the packages is most of the time.
key=$({ echo "$suite $variant $mirror"; dpkg-query -W -f='${Package}=${Version}\n' "${pkgs[@]}"; cat "$0"; } |
      sha256sum | cut -c1-16)
base=$cache/root-$key
if [ ! -d "$base" ]; then
  rm -rf "$cache"/root-*
  # The merged-usr hook makes /bin etc. symlinks itself, instead of installing usrmerge (which pulls in
  # perl). Documentation, manual pages and locales are not extracted; apt's lists and caches are emptied.
  mmdebstrap --variant="$variant" --mode=root --format=directory \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --include="$(IFS=,; echo "${pkgs[*]}")" \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/*' \
    "$suite" "$base.tmp" "$mirror" || { rm -rf "$base.tmp"; exit 1; }
  mv "$base.tmp" "$base"
  echo "build-image: Debian root built in $(( $(date +%s) - start )) s: $base" >&2
else
  echo "build-image: Debian root from the cache: $base" >&2
fi
# rdmad's directories (made here: mmdebstrap's root mode mounts a tmpfs on the root's /run while it
# works). /run/rdmad is 1777 like /tmp (and like a Kubernetes emptyDir, 0777): podman copies the image's
# directory into a new volume mounted there, and a sidecar's application (not root) makes files in it.
mkdir -p "$base/usr/local/bin" "$base/run/rdmad" "$base/var/lib/rdmad" "$base/etc/rdmad"
chmod 1777 "$base/run/rdmad"
# The binaries, then the check that matters: inside the root, ldd finds every library they load.
install -m 0755 "${bins[0]}" "${bins[1]}" "$base/usr/local/bin/"
if ! chroot "$base" sh -c '! ldd /usr/local/bin/rdmad /usr/local/bin/rdmactl | grep "not found"' ||
   ! chroot "$base" /usr/local/bin/rdmactl --help >/dev/null; then
  echo "build-image: rdmad or rdmactl cannot run inside the root" >&2; exit 1
fi
tar --numeric-owner --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' -C "$base" -cf "$tarball" .
rm -f "$base/usr/local/bin/rdmad" "$base/usr/local/bin/rdmactl"
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
