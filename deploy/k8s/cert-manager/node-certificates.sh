#!/usr/bin/env bash
# Prints one cert-manager Certificate per RDMA node for rdmad, and the Role that lets the DaemonSet's
# tls-fetch and tls-sync read exactly those Secrets. Clients dial each node's own address (hostNetwork),
# so each node's rdmad needs a certificate naming that address: an IP SAN for each of the node's
# InternalIP addresses, and the node's name as a DNS SAN. Secret rdmad-tls-<node>: tls.crt, tls.key and
# ca.crt (issuer.yaml's CA, rdmad's client_ca). cert-manager renews each before it expires (renewBefore);
# tls-sync hands the renewal to rdmad without a restart.
#   deploy/k8s/cert-manager/node-certificates.sh | kubectl apply -f -
# Run it again when a node joins, or changes its address (kubectl apply keeps the others as they are);
# a node that left keeps its Certificate until you delete it.
# Options: --selector LABELS (default: the DaemonSet's nodeSelector, feature.node.kubernetes.io/rdma.available=true)
#          --nodes FILE (lines "NAME ADDRESS [ADDRESS...]" instead of asking the cluster; - for stdin)
#          --issuer NAME (ClusterIssuer, default rdmad-ca) --namespace NS (default rdmad-system)
set -euo pipefail
selector=feature.node.kubernetes.io/rdma.available=true nodes= issuer=rdmad-ca ns=rdmad-system
while (($#)); do
  case $1 in
    --selector) selector=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --issuer) issuer=$2; shift 2 ;;
    --namespace) ns=$2; shift 2 ;;
    *) echo "usage: $0 [--selector LABELS] [--nodes FILE] [--issuer NAME] [--namespace NS]" >&2; exit 2 ;;
  esac
done
if [ -n "$nodes" ]; then
  list=$(cat -- "$nodes")
else
  list=$(kubectl get nodes -l "$selector" -o \
    'jsonpath={range .items[*]}{.metadata.name}{range .status.addresses[?(@.type=="InternalIP")]} {.address}{end}{"\n"}{end}')
fi
names=()
while read -r node addrs; do
  [ -n "$node" ] || continue
  case $node in \#*) continue ;; esac
  if [ -z "$addrs" ]; then echo "$0: node $node has no InternalIP address" >&2; exit 1; fi
  names+=("rdmad-tls-$node")
  cat <<YAML
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: rdmad-tls-$node
  namespace: $ns
  labels:
    app.kubernetes.io/name: rdmad
spec:
  secretName: rdmad-tls-$node
  dnsNames: ["$node"]
  ipAddresses: [$(sed 's/ \+/", "/g; s/^/"/; s/$/"/' <<<"$addrs")]
  duration: 2160h
  renewBefore: 720h
  usages: ["server auth", "digital signature", "key encipherment"]
  privateKey:
    algorithm: RSA
    size: 2048
    rotationPolicy: Always
  issuerRef:
    name: $issuer
    kind: ClusterIssuer
    group: cert-manager.io
YAML
done <<<"$list"
if ((${#names[@]} == 0)); then echo "$0: no node matches $selector" >&2; exit 1; fi
# Every rdmad Pod shares the service account, so each may read every node's Secret: a node that is taken
# over gives away the other nodes' keys too (docs/operations.md#certificates-one-per-node).
cat <<YAML
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: rdmad-tls-reader
  namespace: $ns
  labels:
    app.kubernetes.io/name: rdmad
rules:
  - apiGroups: [""]
    resources: ["secrets"]
    verbs: ["get"]
    resourceNames: [$(printf '"%s", ' "${names[@]}" | sed 's/, $//')]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: rdmad-tls-reader
  namespace: $ns
  labels:
    app.kubernetes.io/name: rdmad
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: rdmad-tls-reader
subjects:
  - {kind: ServiceAccount, name: rdmad, namespace: $ns}
YAML
