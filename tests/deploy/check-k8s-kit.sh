#!/usr/bin/env bash
# Checks the Kubernetes kit beyond the schema (tests/deploy/validate-manifests.sh does the schema of
# deploy/k8s/*.yaml), offline:
#   1. tests/deploy/check-k8s-kit.py: Pod Security level, PodDisruptionBudget, metrics Service,
#      ServiceMonitor, kube-rbac-proxy and rdmad's metrics_listen, the per-node certificates and the TLS
#      paths, rdma_listen in every rdmad config, and that the alerts use metric names rdmad exports;
#   2. `promtool check rules` on the PrometheusRule's groups and `promtool test rules` with
#      tests/deploy/rdmad-alerts.test.yaml (promtool from deploy/fetch-promtool.sh: Debian's prometheus
#      package unpacked, never installed);
#   3. the certificate copier (the DaemonSet's tls-sync.sh) run for real in a PID namespace of its own,
#      with a stand-in kubectl: `once` waits for the node's Secret and writes the files (mode 0600), `watch`
#      copies a renewal and sends SIGHUP to the process named rdmad, and to nothing else;
#   4. node-certificates.sh's Role and RoleBinding against the API's types (validate-manifests.py).
# Then it proves each check can fail: broken copies of the kit must each be refused with their error.
# Usage: tests/deploy/check-k8s-kit.sh [--xml FILE]   exit 0: the kit passes and every broken copy fails.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
xml=
[ "${1:-}" = --xml ] && xml=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
failures=()
py=/usr/bin/python3
nodes=$'node-a 10.0.0.1\nnode-b 10.0.0.2 fd00::2'  # check-k8s-kit.py's NODES

promtool=${PROMTOOL:-}
[ -n "$promtool" ] || promtool=$("$repo/deploy/fetch-promtool.sh") || promtool=
if [ -z "$promtool" ] || ! "$promtool" --version >/dev/null 2>&1; then
  failures+=("no promtool (deploy/fetch-promtool.sh failed; PROMTOOL=path to use another)")
fi

# check KIT_DIR OUT: every check on a copy of deploy/k8s; 0 if all pass. Output (errors) in OUT.
check() {
  local kit=$1 out=$2 rc=0 t=$1.tmp
  mkdir -p "$t"
  {
    printf '%s\n' "$nodes" | "$kit/cert-manager/node-certificates.sh" --nodes - >"$t/certs.yaml" || rc=1
    "$py" "$repo/tests/deploy/check-k8s-kit.py" "$kit" "$repo/server/metrics/rdmad_metrics.cc" "$t/certs.yaml" || rc=1
    "$py" - "$t/certs.yaml" "$t/rbac.yaml" <<'PY' && "$py" "$repo/tests/deploy/validate-manifests.py" "$t/rbac.yaml" >/dev/null || rc=1
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] in ("Role", "RoleBinding")]
yaml.safe_dump_all(docs, open(sys.argv[2], "w"))
PY
    "$py" - "$kit/monitoring/prometheusrule.yaml" "$t/rdmad-rules.yaml" <<'PY' || rc=1
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
yaml.safe_dump({"groups": d["spec"]["groups"]}, open(sys.argv[2], "w"), sort_keys=False)
PY
    cp "$repo/tests/deploy/rdmad-alerts.test.yaml" "$t/"
    if [ -n "$promtool" ]; then
      "$promtool" check rules "$t/rdmad-rules.yaml" || rc=1
      (cd "$t" && "$promtool" test rules rdmad-alerts.test.yaml) || rc=1
    fi
    sync_test "$kit" "$t" || rc=1
  } >"$out" 2>&1
  return "$rc"
}

# sync_test KIT T: tls-sync.sh from the kit's DaemonSet, with a stand-in kubectl serving a Secret from
# $T/secret (absent: NotFound), in a new PID namespace holding a process named rdmad and one named other.
sync_test() {
  local kit=$1 t=$2/sync
  mkdir -p "$t/bin" "$t/tls"
  "$py" - "$kit/daemonset.yaml" "$t/tls-sync.sh" <<'PY' || { echo "sync: no tls-sync.sh in daemonset.yaml"; return 1; }
import sys, yaml
cm = next(d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["metadata"]["name"] == "rdmad-tls-sync")
open(sys.argv[2], "w").write(cm["data"]["tls-sync.sh"])
PY
  cat >"$t/bin/kubectl" <<KUBECTL
#!/bin/sh
echo "\$*" >>"$t/kubectl.calls"
case "\$*" in "-n rdmad-system get secret rdmad-tls-node-a -o"*) ;; *) echo "kubectl: unexpected: \$*" >&2; exit 1 ;; esac
[ -f "$t/secret" ] || { echo 'Error from server (NotFound): secrets "rdmad-tls-node-a" not found' >&2; exit 1; }
cat "$t/secret"
KUBECTL
  chmod +x "$t/bin/kubectl"
  cp /bin/sleep "$t/bin/rdmad"; cp /bin/sleep "$t/bin/other"
  secret() { printf '%s %s %s' "$(printf "$1-crt" | base64 -w0)" "$(printf "$1-key" | base64 -w0)" "$(printf "$1-ca" | base64 -w0)"; }
  secret v2 >"$t/secret.v2"
  unshare --pid --fork --mount-proc env -i PATH="$t/bin:/usr/bin:/bin" TLS_DIR="$t/tls" NODE_NAME=node-a \
    POD_NAMESPACE=rdmad-system TLS_SYNC_INTERVAL=0.2 TLS_SYNC_RETRY=0.2 T="$t" SECRET_V1="$(secret v1)" sh -c '
    fail=0
    rdmad 30 & r=$!; other 30 & o=$!
    sh "$T/tls-sync.sh" once & once=$!
    sleep 0.5; printf %s "$SECRET_V1" >"$T/secret"   # the Secret appears while once waits for it
    wait $once || { echo "sync: once exited $?"; fail=1; }
    [ "$(cat "$T/tls/tls.crt" "$T/tls/tls.key" "$T/tls/ca.crt")" = "v1-crtv1-keyv1-ca" ] || { echo "sync: once wrote the wrong files"; fail=1; }
    [ "$(stat -c %a "$T/tls/tls.key")" = 600 ] || { echo "sync: tls.key is mode $(stat -c %a "$T/tls/tls.key"), not 600"; fail=1; }
    kill -0 $r || { echo "sync: once signalled rdmad"; fail=1; }
    sh "$T/tls-sync.sh" watch & watch=$!
    sleep 0.7
    kill -0 $r || { echo "sync: watch signalled rdmad although the Secret had not changed"; fail=1; }
    cp "$T/secret.v2" "$T/secret"   # cert-manager renews it
    for _ in $(seq 1 30); do kill -0 $r 2>/dev/null || break; sleep 0.1; done
    kill $r 2>/dev/null; wait $r; rc=$?
    [ "$rc" = 129 ] || { echo "sync: rdmad was not ended by SIGHUP within 3 s of the renewal (exit $rc; 143: our SIGTERM)"; fail=1; }
    [ "$(cat "$T/tls/tls.crt" "$T/tls/tls.key" "$T/tls/ca.crt")" = "v2-crtv2-keyv2-ca" ] || { echo "sync: watch did not copy the renewal"; fail=1; }
    kill -0 $o || { echo "sync: watch signalled a process not named rdmad"; fail=1; }
    kill $watch $o 2>/dev/null
    exit $fail' 2>&1 | grep -v "^tls-sync: "
  return "${PIPESTATUS[0]}"
}

mkdir -p "$work/kit"
cp -r "$repo/deploy/k8s/." "$work/kit/"
if check "$work/kit" "$work/kit.out"; then
  echo "check-k8s-kit: the kit passes: $(grep -c '' "$work/kit.tmp/certs.yaml") lines of certificates for 2 nodes; $(grep -o 'SUCCESS: [0-9]* rules found' "$work/kit.out"); promtool test rules: $(grep -A1 'Unit Testing' "$work/kit.out" | tail -n 1 | xargs)"
else
  sed 's/^/  /' "$work/kit.out" >&2
  failures+=("deploy/k8s: the kit fails its checks (see above)")
fi

# broken NAME FILE SED-EXPRESSION EXPECTED: a copy of the kit whose FILE is changed by SED must fail with EXPECTED.
nbroken=0
broken() {
  local name=$1 file=$2 expr=$3 expected=$4 kit=$work/$1
  nbroken=$((nbroken + 1))
  mkdir -p "$kit"; cp -r "$repo/deploy/k8s/." "$kit/"
  sed -i -e "$expr" "$kit/$file"
  if cmp -s "$kit/$file" "$repo/deploy/k8s/$file"; then
    failures+=("$name: the mutation '$expr' changed nothing in $file (the test is stale)"); return
  fi
  if check "$kit" "$kit.out"; then
    failures+=("$name: a broken kit passed"); return
  fi
  if ! grep -qF -- "$expected" "$kit.out"; then
    failures+=("$name: refused, but not with '$expected': $(grep -m1 -i 'error\|fail' "$kit.out")"); return
  fi
  echo "refused as expected: $name: $(grep -m1 -F -- "$expected" "$kit.out" | cut -c1-200)"
}
broken psa_baseline namespace.yaml 's/enforce: privileged/enforce: baseline/' \
  "needs 'privileged' for: hostNetwork, host ports"
broken pdb_selector poddisruptionbudget.yaml 's/app.kubernetes.io\/name: rdmad$/app.kubernetes.io\/name: rdma/' \
  "does not select the DaemonSet's Pods"
broken pdb_two poddisruptionbudget.yaml 's/maxUnavailable: 1/maxUnavailable: 2/' "maxUnavailable is 2, not 1"
broken not_ready_hidden metrics.yaml '/publishNotReadyAddresses: true/d' "without publishNotReadyAddresses"
broken monitor_port monitoring/servicemonitor.yaml 's/- port: https-metrics/- port: metrics/' \
  "endpoint port 'metrics' is not a port of Service rdmad-metrics"
broken monitor_job monitoring/servicemonitor.yaml 's/jobLabel: app.kubernetes.io\/name/jobLabel: app.kubernetes.io\/component/' \
  'but the ServiceMonitor'"'"'s job is "metrics"'
broken proxy_upstream daemonset.yaml 's/--upstream=http:\/\/127.0.0.1:9470\//--upstream=http:\/\/127.0.0.1:9479\//' \
  "is not rdmad's metrics_listen"
broken tls_path daemonset.yaml 's/"key": "\/etc\/rdmad\/tls\/tls.key"/"key": "\/etc\/rdmad\/tls\/server.key"/' \
  "rdmad's tls.key is '/etc/rdmad/tls/server.key'"
broken secret_name cert-manager/node-certificates.sh 's/secretName: rdmad-tls-\$node/secretName: rdmad-cert-$node/' \
  "but tls-sync.sh reads rdmad-tls-<node>"
broken cert_issuer cert-manager/issuer.yaml '0,/name: rdmad-ca$/! s/^  name: rdmad-ca$/  name: rdmad-root/' \
  "is not a ClusterIssuer of issuer.yaml"
broken no_rdma_listen sidecar-pod.yaml '/"rdma_listen"/d' "has no rdma_listen: no grant can be issued"
broken metric_name monitoring/prometheusrule.yaml 's/rdmad_dataplane_rejections_total{reason="OVER_QUOTA"}/rdmad_dataplane_rejects_total{reason="OVER_QUOTA"}/' \
  "rdmad_dataplane_rejects_total is not a metric rdmad exports"
broken promql_syntax monitoring/prometheusrule.yaml 's/expr: up{job="rdmad"} == 0/expr: up{job="rdmad"} == == 0/' \
  "could not parse expression"
broken alert_for monitoring/prometheusrule.yaml '/alert: RdmadDown/,/for:/s/for: 3m/for: 10m/' \
  "alertname: RdmadDown"
broken alert_threshold monitoring/prometheusrule.yaml 's/increase(rdmad_nic_remote_access_errors_total\[10m\])) > 100/increase(rdmad_nic_remote_access_errors_total[10m])) > 1000/' \
  "alertname: RdmadNicRemoteAccessErrors"
broken sync_signal daemonset.yaml 's/= rdmad ]; then/= rdmadd ]; then/' \
  "rdmad was not ended by SIGHUP within 3 s of the renewal"
broken sync_mode daemonset.yaml 's/      umask 077/      umask 022/' "tls.key is mode 644, not 600"

if ((${#failures[@]})); then
  printf 'FAIL: %s\n' "${failures[@]}" >&2
else
  echo "check-k8s-kit: deploy/k8s passes; $nbroken broken copies refused"
fi
if [ -n "$xml" ]; then
  mkdir -p "$(dirname "$xml")"
  "$repo/tests/lib/junit-case.sh" "$xml" deploy_k8s_kit check_k8s_kit "$(IFS='; '; echo "${failures[*]}")"
fi
((${#failures[@]} == 0))
