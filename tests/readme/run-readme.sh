#!/usr/bin/env bash
# The README's "Using it" commands, run as written, so that they cannot rot.
#
# Usage: tests/readme/run-readme.sh OUT_DIR [--readme FILE]     (on the host: boots the Soft-RoCE guest)
#        tests/readme/run-readme.sh --in-guest OUT_DIR [--readme FILE]   (what the guest runs)
#
# The block is the first fenced block after the line `<!-- readme-commands ... -->` in README.md. In the guest,
# as on a fresh machine after `./quickstart.sh demo`: bazel-bin's rdmad and rdmactl go into /usr/local/bin and
# deploy/rdmad.example.json becomes /etc/rdmad/rdmad.json, with no state store yet (the guest's root is a tmpfs
# overlay of the host's: nothing of this reaches the host). Then, in one bash process in an empty directory, each
# line of the block runs as written, in order: each is echoed ("$ LINE"), and the first line that exits non-zero
# stops the run and fails the case, naming the line. A line that ends in `&` (rdmad started in the background, as
# the README says) is followed by a wait for rdmad's socket, /run/rdmad/rdmad.sock (at most 30 s). At the end
# rdmad gets SIGTERM and must exit 0.
#
# Not run: the README's second block (systemctl, tenants, and commands that run until Ctrl-C) is outside the
# markers on purpose. Nothing else is skipped.
#
# Writes OUT_DIR/readme.xml (suite Readme, case UsingItRunsAsWritten) via tests/lib/junit-case.sh, and
# OUT_DIR/readme.log (the commands and their output; in the guest mode also rdmad's log as readme-rdmad.log).
# Exit status 0 only if the case passed. On the host the guest's own failure (no XML written) is a failed case.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
junit=$root/tests/lib/junit-case.sh
in_guest=0
if [ "${1:-}" = --in-guest ]; then in_guest=1; shift; fi
out=${1:?usage: run-readme.sh [--in-guest] OUT_DIR [--readme FILE]}
shift
readme=$root/README.md
while [ $# -gt 0 ]; do
  case "$1" in
    --readme) readme=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift ;;
    *) echo "run-readme.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
xml=$out/readme.xml

if ((in_guest == 0)); then
  rm -f "$xml"
  rc=0
  "$root/tests/guest/run-in-guest.sh" --timeout "${RDMAD_README_TIMEOUT:-600}" --out "$out" -- \
    "$root/tests/readme/run-readme.sh" --in-guest "$out" --readme "$readme" || rc=$?
  if [ ! -f "$xml" ]; then
    "$junit" "$xml" Readme UsingItRunsAsWritten "the guest run ended with status $rc without a result (see $out/readme.log)"
    exit 1
  fi
  grep -q '<failure' "$xml" && exit 1
  exit "$rc"
fi

# ---- in the guest
log=$out/readme.log
fail() {
  echo "run-readme.sh: FAILED: $1" | tee -a "$log" >&2
  "$junit" "$xml" Readme UsingItRunsAsWritten "$1"
  exit 1
}
# The block: the fence that follows the marker, up to the next fence.
block=$(awk '/^<!-- readme-commands/ {m = 1; next} m == 1 && /^```/ {m = 2; next} m == 2 && /^```/ {exit} m == 2 {print}' "$readme")
[ -n "$block" ] || fail "no <!-- readme-commands --> block followed by a fenced block in $readme"

# A fresh install, as deploy/install.sh makes it (in the guest's overlay only: never on a host's own root).
[ "$(findmnt -n -o FSTYPE /)" = overlay ] || [ "${RDMAD_README_ANY_ROOT:-0}" = 1 ] ||
  fail "--in-guest installs into /usr/local/bin and /etc/rdmad: it runs in the Soft-RoCE guest, whose / is an overlay, not here"
[ -x "$root/bazel-bin/server/rdmad" ] && [ -x "$root/bazel-bin/cli/rdmactl" ] ||
  fail "bazel-bin/server/rdmad or bazel-bin/cli/rdmactl is missing (bazel build //server:rdmad //cli:rdmactl)"
install -D -m 0755 "$root/bazel-bin/server/rdmad" /usr/local/bin/rdmad &&
  install -D -m 0755 "$root/bazel-bin/cli/rdmactl" /usr/local/bin/rdmactl &&
  install -D -m 0644 "$root/deploy/rdmad.example.json" /etc/rdmad/rdmad.json || fail "could not install into the guest's overlay"
rm -rf /var/lib/rdmad /run/rdmad
rm -f /dev/shm/app-buffer

# One script: each line as written, then its check. Variables persist from line to line, as in a shell.
work=$(mktemp -d /tmp/readme.XXXXXX)
script=$work/.readme-lines.sh
{
  echo 'readme_rdmad=""'
  echo 'readme_stop() { [ -z "$readme_rdmad" ] || { kill -TERM "$readme_rdmad" 2>/dev/null; wait "$readme_rdmad"; echo "$?" >"$README_WORK/.rdmad-exit"; }; }'
  n=0
  while IFS= read -r line; do
    n=$((n + 1))
    [ -n "${line//[[:space:]]/}" ] || continue
    printf 'printf "\\n$ %%s\\n" %q\n' "$line"
    printf '%s\n' "$line"
    printf 'readme_rc=$?; if ((readme_rc != 0)); then printf "%%s\\n" %q >"$README_WORK/.failed"; echo "exit status $readme_rc" >>"$README_WORK/.failed"; readme_stop; exit 1; fi\n' "the block's line $n, $line,"
    if [[ $line =~ \&[[:space:]]*(#.*)?$ ]]; then
      # Started in the background: wait for its socket (and fail if it died first).
      echo 'readme_rdmad=$!'
      echo 'for _ in $(seq 1 300); do [ -S /run/rdmad/rdmad.sock ] && break; kill -0 "$readme_rdmad" 2>/dev/null || break; sleep 0.1; done'
      printf '[ -S /run/rdmad/rdmad.sock ] || { printf "%%s\\n" %q >"$README_WORK/.failed"; echo "no /run/rdmad/rdmad.sock within 30 s" >>"$README_WORK/.failed"; readme_stop; exit 1; }\n' "the block's line $n, $line,"
    fi
  done <<<"$block"
  echo 'readme_stop'
} >"$script"

echo "run-readme.sh: $(grep -c . <<<"$block") lines of $readme, in $work" | tee "$log"
(cd "$work" && README_WORK=$work bash "$script") >>"$log" 2>&1
status=$?
cat "$log"
[ -f "$work/rdmad.log" ] && cp "$work/rdmad.log" "$out/readme-rdmad.log"
rm -f /dev/shm/app-buffer
if [ -f "$work/.failed" ]; then
  fail "$(head -n 1 "$work/.failed") failed: $(sed -n 2p "$work/.failed") (see $log)"
fi
((status == 0)) || fail "the block's shell exited with status $status (see $log)"
[ -f "$work/.rdmad-exit" ] || fail "the block did not start rdmad in the background (a line ending in '&')"
rdmad_exit=$(cat "$work/.rdmad-exit")
((rdmad_exit == 0)) || fail "rdmad exited with status $rdmad_exit on SIGTERM (see $out/readme-rdmad.log)"
"$junit" "$xml" Readme UsingItRunsAsWritten ""
echo "run-readme.sh: every line ran; rdmad exited 0 on SIGTERM"
