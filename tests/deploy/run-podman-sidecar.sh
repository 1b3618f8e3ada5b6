#!/usr/bin/env bash
# Runs the sidecar Pod (deploy/k8s/sidecar-pod.yaml) with `podman kube play` on this machine and checks
# that the application container reaches rdmad over the shared socket:
#   - the image is built from Debian packages (deploy/image/build-image.sh) from the current bazel-bin;
#   - the application (uid 1000) gets `rdmactl health`, `whoami` (as tenant app, identified by
#     SO_PEERCRED across the two containers) and `get devices` answered;
#   - its RegisterMr and IssueGrant calls reach rdmad: rdmad's audit log records them from unix:uid:1000
#     (on a host without an RDMA device they are refused by rdmad itself, not by the transport);
#   - the Pod's livenessProbe (podman turns it into the container's healthcheck) passes;
#   - a uid outside the socket's group is refused at connect (the socket's mode 0660, group 1000);
#   - rdmad runs with exactly CHOWN, DAC_OVERRIDE and IPC_LOCK, the application with no capability;
#   - the DaemonSet's rdmad container (its ConfigMap, args, capabilities, read-only root, mounts, with TLS
#     files made here for its Secret) starts in the image, passes its own probe command, puts only its
#     socket (0660, group 2000) in the directory applications share, keeps its state store, exits 0.
# Skipped (JUnit <skipped>, exit 0) only when podman cannot start any container here (every OCI runtime
# installed is tried; their errors are the message). A missing podman or mmdebstrap is a failure:
# deploy/install-deps.sh installs them.
#
# Usage: tests/deploy/run-podman-sidecar.sh [--out DIR] [--image TAG] [--manifest FILE]
#   --image: use an image already built (no build); --manifest: another Pod file (to see the checks fail).
#   Writes DIR/deploy_image.xml, DIR/deploy_sidecar.xml and DIR/deploy_daemonset.xml (default DIR: out/deploy).
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=$repo/out/deploy image= manifest=$repo/deploy/k8s/sidecar-pod.yaml
while (($#)); do
  case $1 in
    --out) out=$2; shift 2 ;;
    --image) image=$2; shift 2 ;;
    --manifest) manifest=$2; shift 2 ;;
    *) echo "run-podman-sidecar: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
work=$(mktemp -d)
pod=rdmad-sidecar
log() { echo "run-podman-sidecar: $*" >&2; }

# One JUnit case per file; SKIP_REASON makes it <skipped>. junit FILE SUITE CASE SECONDS [FAILURE]
junit() {
  local file=$1 suite=$2 case=$3 secs=$4 failure=${5:-} skip=${SKIP_REASON:-}
  esc() { sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/"/\&quot;/g' <<<"$1" | tr '\n' ' '; }
  {
    echo '<?xml version="1.0" encoding="UTF-8"?>'
    echo "<testsuites tests=\"1\" failures=\"$([ -n "$failure" ] && echo 1 || echo 0)\" skipped=\"$([ -n "$skip" ] && echo 1 || echo 0)\" name=\"$suite\">"
    echo "  <testsuite name=\"$suite\" tests=\"1\" time=\"$secs\">"
    if [ -n "$failure" ]; then
      echo "    <testcase name=\"$case\" time=\"$secs\"><failure message=\"$(esc "$failure")\"/></testcase>"
    elif [ -n "$skip" ]; then
      echo "    <testcase name=\"$case\" time=\"$secs\"><skipped message=\"$(esc "$skip")\"/></testcase>"
    else
      echo "    <testcase name=\"$case\" time=\"$secs\"/>"
    fi
    echo '  </testsuite>'
    echo '</testsuites>'
  } >"$file"
}
finish() {  # finish CASE-FILE CASE SECONDS FAILURE...
  local file=$1 case=$2 secs=$3; shift 3
  junit "$out/$file" "deploy_$case" "$case" "$secs" "$*"
}

# --- podman itself
if ! command -v podman >/dev/null; then
  msg="podman is not installed (deploy/install-deps.sh installs it)"
  log "FAIL: $msg"; finish deploy_image.xml image 0 "$msg"; finish deploy_sidecar.xml sidecar 0 "$msg"
  finish deploy_daemonset.xml daemonset 0 "$msg"; exit 1
fi

# podman's default rlimits for containers (nofile and nproc 1048576) exceed what a runtime may set when
# this machine's root lacks CAP_SYS_RESOURCE: the containers get the host's hard nofile and at most 32768
# processes instead, through a private containers.conf (CONTAINERS_CONF: the machine's config is left alone).
nofile=$(ulimit -Hn); [ "$nofile" = unlimited ] && nofile=1048576; ((nofile > 1048576)) && nofile=1048576
nproc=$(ulimit -Hu); { [ "$nproc" = unlimited ] || ((nproc > 32768)); } && nproc=32768
conf=$work/containers.conf
write_conf() {  # write_conf [RUNTIME]
  printf '[containers]\ndefault_ulimits = ["nofile=%s:%s", "nproc=%s:%s"]\n' "$nofile" "$nofile" "$nproc" "$nproc" >"$conf"
  [ -z "${1:-}" ] || printf '[engine]\nruntime = "%s"\n' "$1" >>"$conf"
}
write_conf
export CONTAINERS_CONF=$conf

# --- the image
start=$(date +%s)
if [ -z "$image" ]; then
  image=localhost/rdmad:dev
  if ! "$repo/deploy/image/build-image.sh" --tag "$image" --out "$work/image" >"$out/build-image.log" 2>&1; then
    msg="deploy/image/build-image.sh failed: $(tail -n 3 "$out/build-image.log" | tr '\n' ' ')"
    log "FAIL: $msg"; finish deploy_image.xml image $(( $(date +%s) - start )) "$msg"
    finish deploy_sidecar.xml sidecar 0 "no image"; finish deploy_daemonset.xml daemonset 0 "no image"
    rm -rf "$work"; exit 1
  fi
  grep '^build-image:' "$out/build-image.log" >&2
fi
image_secs=$(( $(date +%s) - start ))
if ! podman image exists "$image"; then
  log "FAIL: no image $image"; finish deploy_image.xml image "$image_secs" "no image $image"
  finish deploy_sidecar.xml sidecar 0 "no image"; finish deploy_daemonset.xml daemonset 0 "no image"
  rm -rf "$work"; exit 1
fi
img_fail=

# --- can this machine run a container at all? Each installed OCI runtime is tried with a trivial one.
# A container that started but whose command is missing (exit 127, "not found") is the image's fault: a
# failure, never a skip.
runtime= errors= image_broken=
for r in crun runc; do
  command -v "$r" >/dev/null || continue
  write_conf "$r"
  podman run --rm --network none --entrypoint /bin/true "$image" 2>"$work/$r.err"; rc=$?
  if ((rc == 0)); then runtime=$r; break; fi
  errors+="$r: $(tail -n 1 "$work/$r.err"); "
  if ((rc == 127)) || grep -q 'executable file not found\|no such file or directory' "$work/$r.err"; then image_broken=1; fi
done
if [ -z "$runtime" ] && [ -n "$image_broken" ]; then
  msg="the image cannot run /bin/true: $errors"
  log "FAIL: $msg"; finish deploy_image.xml image "$image_secs" "$msg"; finish deploy_sidecar.xml sidecar 0 "$msg"
  finish deploy_daemonset.xml daemonset 0 "$msg"; rm -rf "$work"; exit 1
fi
if [ -z "$runtime" ]; then
  finish deploy_image.xml image "$image_secs"  # built, and checked with ldd inside its root by the build
  SKIP_REASON="podman cannot run containers on this machine: ${errors:-no OCI runtime (crun, runc) installed}"
  log "SKIPPED: $SKIP_REASON"
  finish deploy_sidecar.xml sidecar 0; finish deploy_daemonset.xml daemonset 0; rm -rf "$work"; exit 0
fi
log "runtime $runtime (nofile $nofile, nproc $nproc)"
# The image holds the two binaries and everything they load (checked again on the imported image).
if ! podman run --rm --network none --entrypoint /bin/sh "$image" -c \
     'ldd /usr/local/bin/rdmad /usr/local/bin/rdmactl | grep "not found"; /usr/local/bin/rdmactl version --client; /usr/local/bin/rdmad --version' \
     >"$work/ldd.out" 2>&1 || grep -q "not found" "$work/ldd.out"; then
  img_fail="inside the image: $(tr '\n' ' ' <"$work/ldd.out")"
fi
finish deploy_image.xml image "$image_secs" "$img_fail"
[ -n "$img_fail" ] && log "FAIL: $img_fail"

# --- the Pod
start=$(date +%s)
failures=()
fail() { failures+=("$*"); log "FAIL: $*"; }
cleanup() {
  podman kube down "$manifest" >/dev/null 2>&1
  podman volume rm -f rdmad-sidecar-config rdmad-shared >/dev/null 2>&1  # podman keeps the ConfigMap's
}
cleanup
sed "s#image: localhost/rdmad:dev#image: $image#" "$manifest" >"$work/pod.yaml"
if ! podman kube play --network none "$work/pod.yaml" >"$work/play.out" 2>&1; then
  fail "podman kube play: $(grep -v 'level=error.*systemd' "$work/play.out" | tail -n 2 | tr '\n' ' ')"
else
  app=$pod-app rdmad=$pod-rdmad
  for _ in $(seq 1 150); do  # the application prints "app: done" after its calls (30 s at most)
    podman logs "$app" 2>/dev/null | grep -q '^app: done' && break
    sleep 0.2
  done
  podman logs "$app" >"$out/sidecar-app.log" 2>&1
  podman logs "$rdmad" >"$out/sidecar-rdmad.log" 2>&1
  sed 's/^/  app | /' "$out/sidecar-app.log" >&2
  sed 's/^/  rdmad | /' "$out/sidecar-rdmad.log" >&2
  a=$out/sidecar-app.log r=$out/sidecar-rdmad.log
  grep -q '^app: done' "$a" || fail "the application did not finish its calls within 30 s"
  grep -q '^app: rdmad is serving' "$a" || fail "the application never got rdmad's health over the socket"
  grep -q '^app: whoami rc=0' "$a" || fail "rdmactl whoami failed in the application container"
  grep -Eq '^Principal: +unix:uid:1000$' "$a" && grep -Eq '^Tenant: +app$' "$a" \
    || fail "whoami: the application is not unix:uid:1000 in tenant app"
  grep -q '^app: get devices rc=0' "$a" || fail "rdmactl get devices failed in the application container"
  grep -q '^app: buffer written: -rw------- 1 1000 1000 1048576 ' "$a" \
    || fail "the application could not write its 1 MiB buffer (mode 0600) in the shared volume"
  grep -q 'failed to connect\|UNAVAILABLE' "$a" && fail "a call of the application did not reach rdmad"
  # The registration and the grant reached rdmad: its audit trail names the caller and the answer.
  for m in RegisterMr IssueGrant; do
    line=$(grep -m1 "\"principal\":\"unix:uid:1000\".*\"method\":\"$m\"" "$r")
    if [ -z "$line" ]; then fail "rdmad's audit log has no $m from unix:uid:1000"
    else log "$m reached rdmad: $(grep -o '"code":"[A-Z_]*".*"detail":"[^"]*"' <<<"$line")"; fi
  done
  if grep -q '^app: register mr rc=0' "$a"; then log "the file was registered (an RDMA device is present)"
  else log "the file was not registered: $(grep -m1 '^error:' "$a") (see docs/operations.md: no RDMA device here)"; fi
  # The livenessProbe, as podman's healthcheck of the rdmad container (rdmactl health over the socket).
  podman healthcheck run "$rdmad" >"$work/hc.out" 2>&1 || fail "rdmad's health probe failed: $(grep -v systemd "$work/hc.out" | tail -n 1)"
  # Someone outside the socket's group (uid 2000) is refused at connect.
  if podman exec --user 2000:2000 "$app" rdmactl --timeout 2s whoami >"$work/other.out" 2>&1; then
    fail "uid 2000 (not in the socket's group) reached rdmad"
  elif ! grep -q 'Permission denied' "$work/other.out"; then
    fail "uid 2000 was refused, but not at connect: $(head -n 1 "$work/other.out")"
  fi
  caps=$(podman exec "$rdmad" grep CapEff /proc/1/status | awk '{print $2}')
  [ "$caps" = 0000000000004003 ] || fail "rdmad's effective capabilities are $caps, not CHOWN+DAC_OVERRIDE+IPC_LOCK (4003)"
  caps=$(podman exec "$app" sh -c 'grep CapEff /proc/self/status' | awk '{print $2}')
  [ "$caps" = 0000000000000000 ] || fail "the application has capabilities $caps"
  log "the shared emptyDir here: $(podman exec "$app" sh -c "awk '\$2 == \"/run/rdmad\" {print \$3}' /proc/mounts")" \
      "(Kubernetes mounts medium: Memory as tmpfs; podman kube play 4.3 makes a volume on disk)"
fi
cleanup
secs=$(( $(date +%s) - start ))
finish deploy_sidecar.xml sidecar "$secs" "$(IFS=";"; echo "${failures[*]:-}")"
sidecar_failures=${#failures[@]}

# --- the DaemonSet's rdmad container, as close as podman run gets to it: its ConfigMap's rdmad.json, its
# args, capabilities, read-only root, TMPDIR and mounts (the shared directory, the state directory, TLS
# files in place of the Secret, made here with openssl), then its probe command run in the container.
# (podman kube play does not take a DaemonSet; the device plugin's resource and hostNetwork are left out.)
start=$(date +%s)
failures=()
ds=$work/ds; mkdir -p "$ds/tls" "$ds/shared" "$ds/state"
/usr/bin/python3 - "$repo/deploy/k8s/daemonset.yaml" "$ds" <<'PY' || fail "cannot read deploy/k8s/daemonset.yaml"
import json, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
cm = next(d for d in docs if d["kind"] == "ConfigMap")
ds = next(d for d in docs if d["kind"] == "DaemonSet")
c = ds["spec"]["template"]["spec"]["containers"][0]
open(sys.argv[2] + "/rdmad.json", "w").write(cm["data"]["rdmad.json"])
open(sys.argv[2] + "/args", "w").write("\n".join(c["args"]) + "\n")
open(sys.argv[2] + "/caps", "w").write(",".join(c["securityContext"]["capabilities"]["add"]) + "\n")
open(sys.argv[2] + "/probe", "w").write("\n".join(c["livenessProbe"]["exec"]["command"]) + "\n")
open(sys.argv[2] + "/env", "w").write("".join(f"{e['name']}={e['value']}\n" for e in c.get("env", [])))
PY
(cd "$ds/tls" && openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=clients-ca -keyout ca.key -out ca.crt -days 1 &&
  openssl req -newkey rsa:2048 -nodes -subj /CN=node -keyout tls.key -out tls.csr &&
  openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out tls.crt -days 1) >/dev/null 2>&1 \
  || fail "openssl could not make the test certificates"
mapfile -t ds_args <"$ds/args"; mapfile -t ds_probe <"$ds/probe"
ds_env=(); while read -r e; do [ -n "$e" ] && ds_env+=(-e "$e"); done <"$ds/env"
podman rm -f rdmad-daemonset-try >/dev/null 2>&1
# --read-only-tmpfs=false: Kubernetes' readOnlyRootFilesystem puts no tmpfs on /run or /tmp; the
# manifest's own emptyDir for /tmp is the --tmpfs. Ports are not published (the network is none).
if podman run -d --name rdmad-daemonset-try --network none --read-only --read-only-tmpfs=false \
     --tmpfs /tmp --cap-drop ALL --cap-add "$(cat "$ds/caps")" "${ds_env[@]}" \
     -v "$ds/rdmad.json:/etc/rdmad/rdmad.json:ro" -v "$ds/tls:/etc/rdmad/tls:ro" \
     -v "$ds/shared:/run/rdmad/shared" -v "$ds/state:/var/lib/rdmad" \
     "$image" "${ds_args[@]}" >/dev/null 2>"$work/ds.err"; then
  ok=
  for _ in $(seq 1 50); do
    if podman exec rdmad-daemonset-try "${ds_probe[@]}" >"$work/ds-probe.out" 2>&1; then ok=1; break; fi
    sleep 0.2
  done
  podman logs rdmad-daemonset-try >"$out/daemonset-rdmad.log" 2>&1
  sed 's/^/  daemonset rdmad | /' "$out/daemonset-rdmad.log" | cut -c1-220 >&2
  [ -n "$ok" ] || fail "the DaemonSet's probe (${ds_probe[*]}) never passed: $(tail -n 1 "$work/ds-probe.out")"
  grep -q 'with mutual TLS: client certificates required' "$out/daemonset-rdmad.log" \
    || fail "rdmad did not serve its TCP port with mutual TLS from the Secret's files"
  for f in rdmad.sock rdmad.sock.fd; do  # the gRPC socket, and the descriptor socket beside it
    sock=$(stat -c '%a %g' "$ds/shared/$f" 2>/dev/null)
    [ "$sock" = "660 2000" ] || fail "$f in the shared host directory is '$sock', not mode 660 group 2000"
  done
  [ -s "$ds/state/state.db" ] || fail "no state store in the state directory (/var/lib/rdmad/state.db)"
  leaked=$(find "$ds/shared" -mindepth 1 ! -name rdmad.sock ! -name rdmad.sock.fd | head -n 3)
  [ -z "$leaked" ] || fail "rdmad wrote more than its sockets into the directory applications share: $leaked"
  podman stop -t 40 rdmad-daemonset-try >/dev/null 2>&1
  code=$(podman inspect rdmad-daemonset-try --format '{{.State.ExitCode}}')
  [ "$code" = 0 ] || fail "rdmad exited $code on SIGTERM (podman stop), not 0"
else
  fail "podman run of the DaemonSet's container: $(tail -n 2 "$work/ds.err" | tr '\n' ' ')"
fi
podman rm -f rdmad-daemonset-try >/dev/null 2>&1
ds_secs=$(( $(date +%s) - start ))
finish deploy_daemonset.xml daemonset "$ds_secs" "$(IFS=";"; echo "${failures[*]:-}")"

rm -rf "$work"
if ((sidecar_failures + ${#failures[@]})) || [ -n "$img_fail" ]; then
  log "FAILED (${sidecar_failures} sidecar and ${#failures[@]} DaemonSet check(s))"; exit 1
fi
log "passed: image ${image_secs}s, sidecar ${secs}s, DaemonSet container ${ds_secs}s"
