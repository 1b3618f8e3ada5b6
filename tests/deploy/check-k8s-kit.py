#!/usr/bin/python3
"""Cross-checks the Kubernetes kit in deploy/k8s/ (the parts a schema cannot see), offline.

Usage: check-k8s-kit.py K8S_DIR METRICS_SOURCE CERTS_YAML
  K8S_DIR         a copy of deploy/k8s (the top-level manifests, monitoring/, cert-manager/)
  METRICS_SOURCE  server/metrics/rdmad_metrics.cc: the metric names rdmad exports
  CERTS_YAML      the output of cert-manager/node-certificates.sh for a list of nodes (NODES below)
Checks, each printed as `error: ...` when it fails:
  - Pod Security: the namespace's enforce level admits the DaemonSet's Pod (hostNetwork, host ports,
    hostPath volumes and capabilities outside baseline's list need `privileged`);
  - the PodDisruptionBudget, the metrics Service and the ServiceMonitor select what they mean to (the
    DaemonSet's Pods, the Service, its port), maxUnavailable 1; the Service publishes Pods that are not
    Ready (so that a down rdmad is scraped as down);
  - kube-rbac-proxy forwards to rdmad's metrics_listen, on the port the Service names;
  - rdmad's TLS files are in the volume the certificate copier writes, under the names it writes; the
    copier reads the Secret node-certificates.sh names, and the Role allows exactly those Secrets; every
    Certificate's issuer is a ClusterIssuer of issuer.yaml and its IP SANs are the node's addresses;
  - every rdmad config in the kit has a data-plane listener (rdma_listen), or it cannot issue grants;
  - every rdmad_* name in the alerts' expressions is one rdmad exports; the alerts select job="rdmad",
    the job the ServiceMonitor gives.
Exit 0: all hold; 1: errors (printed).
"""
import glob
import json
import os
import re
import sys

import yaml

NODES = {"node-a": ["10.0.0.1"], "node-b": ["10.0.0.2", "fd00::2"]}  # what check-k8s-kit.sh feeds the script
# Capabilities Pod Security's baseline level allows to be added.
BASELINE_CAPS = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
                 "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
OTHER_METRICS = {"up", "kube_daemonset_status_number_unavailable", "kube_pod_deletion_timestamp"}

errors = []


def err(msg):
    errors.append(msg)


def load(paths):
    docs = []
    for p in paths:
        with open(p) as f:
            docs += [(os.path.basename(p), d) for d in yaml.safe_load_all(f) if isinstance(d, dict)]
    return docs


def find(docs, kind, name=None):
    out = [d for _, d in docs if d.get("kind") == kind and (name is None or d["metadata"]["name"] == name)]
    if not out:
        err(f"no {kind}{' ' + name if name else ''} in the kit")
    return out


def selects(selector, labels):
    return all(labels.get(k) == v for k, v in (selector or {}).items())


def pod_containers(pod):
    return (pod.get("initContainers") or []) + (pod.get("containers") or [])


def main(k8s, metrics_src, certs_yaml):
    top = load(sorted(glob.glob(f"{k8s}/*.yaml")))
    mon = load(sorted(glob.glob(f"{k8s}/monitoring/*.yaml")))
    cm = load(sorted(glob.glob(f"{k8s}/cert-manager/*.yaml")))
    certs = load([certs_yaml])
    every = top + mon + cm + certs

    ds = (find(top, "DaemonSet", "rdmad") or [None])[0]
    if ds is None:
        return
    ns = ds["metadata"]["namespace"]
    tmpl_labels = ds["spec"]["template"]["metadata"]["labels"]
    pod = ds["spec"]["template"]["spec"]
    by_name = {c["name"]: c for c in pod_containers(pod)}
    rdmad = pod["containers"][0]
    config = json.loads(next(d for _, d in top if d.get("kind") == "ConfigMap"
                             and d["metadata"]["name"] == "rdmad-config")["data"]["rdmad.json"])

    # Pod Security Admission.
    need = []
    if pod.get("hostNetwork"):
        need.append("hostNetwork")
    if pod.get("hostNetwork") and any(c.get("ports") for c in pod_containers(pod)):
        need.append("host ports (hostNetwork makes each containerPort one)")
    if any("hostPath" in v for v in pod.get("volumes") or []):
        need.append("hostPath volumes")
    for c in pod_containers(pod):
        extra = set(((c.get("securityContext") or {}).get("capabilities") or {}).get("add") or []) - BASELINE_CAPS
        if extra:
            need.append(f"capabilities {sorted(extra)} of {c['name']}")
        if (c.get("securityContext") or {}).get("privileged"):
            need.append(f"a privileged container ({c['name']})")
    nsobj = [d for _, d in top if d.get("kind") == "Namespace" and d["metadata"]["name"] == ns]
    if not nsobj:
        err(f"no Namespace {ns} (namespace.yaml) for the DaemonSet")
    else:
        level = (nsobj[0]["metadata"].get("labels") or {}).get("pod-security.kubernetes.io/enforce")
        if need and level != "privileged":
            err(f"Namespace {ns}: pod-security.kubernetes.io/enforce is {level!r}, but the DaemonSet's Pod needs "
                f"'privileged' for: {', '.join(need)}")

    # PodDisruptionBudget.
    for pdb in find(top, "PodDisruptionBudget"):
        if pdb["metadata"].get("namespace") != ns or not selects(pdb["spec"]["selector"].get("matchLabels"), tmpl_labels):
            err(f"PodDisruptionBudget {pdb['metadata']['name']}: does not select the DaemonSet's Pods in {ns}")
        if pdb["spec"].get("maxUnavailable") != 1:
            err(f"PodDisruptionBudget {pdb['metadata']['name']}: maxUnavailable is {pdb['spec'].get('maxUnavailable')!r}, not 1")

    # The metrics path: ServiceMonitor -> Service -> kube-rbac-proxy -> rdmad's metrics_listen.
    ports = {p["name"]: (c, p) for c in pod_containers(pod) for p in c.get("ports") or [] if "name" in p}
    for svc in find(top, "Service", "rdmad-metrics"):
        if not selects(svc["spec"].get("selector"), tmpl_labels) or svc["metadata"].get("namespace") != ns:
            err("Service rdmad-metrics: its selector misses the DaemonSet's Pods")
        if not svc["spec"].get("publishNotReadyAddresses"):
            err("Service rdmad-metrics: without publishNotReadyAddresses a node whose rdmad is not Ready drops out "
                "of the scrape instead of showing up == 0 (RdmadDown)")
        for p in svc["spec"]["ports"]:
            if p.get("targetPort") not in ports:
                err(f"Service rdmad-metrics: targetPort {p.get('targetPort')!r} names no container port of the DaemonSet")
        for sm in find(mon, "ServiceMonitor", "rdmad"):
            spec = sm["spec"]
            if not selects(spec["selector"].get("matchLabels"), svc["metadata"].get("labels") or {}):
                err("ServiceMonitor rdmad: its selector misses Service rdmad-metrics")
            if ns not in (spec.get("namespaceSelector") or {}).get("matchNames", [sm["metadata"].get("namespace")]):
                err(f"ServiceMonitor rdmad: its namespaceSelector misses {ns}")
            for e in spec["endpoints"]:
                if e.get("port") not in {p["name"] for p in svc["spec"]["ports"]}:
                    err(f"ServiceMonitor rdmad: endpoint port {e.get('port')!r} is not a port of Service rdmad-metrics")
            job = (svc["metadata"].get("labels") or {}).get(spec.get("jobLabel"), "rdmad-metrics")
            for _, rule in mon:
                if rule.get("kind") != "PrometheusRule":
                    continue
                for g in rule["spec"]["groups"]:
                    for r in g["rules"]:
                        for j in re.findall(r'\bjob="([^"]*)"', r["expr"]):
                            if j != job:
                                err(f"alert {r.get('alert')}: selects job=\"{j}\", but the ServiceMonitor's job is \"{job}\"")
    proxy = by_name.get("kube-rbac-proxy")
    if proxy is None:
        err("the DaemonSet has no kube-rbac-proxy container")
    else:
        args = dict(a.lstrip("-").split("=", 1) for a in proxy.get("args", []) if "=" in a)
        up = re.fullmatch(r"http://([^/]+)/?", args.get("upstream", ""))
        if not up or up.group(1) != config.get("metrics_listen"):
            err(f"kube-rbac-proxy: --upstream {args.get('upstream')!r} is not rdmad's metrics_listen "
                f"{config.get('metrics_listen')!r}")
        listen_port = args.get("secure-listen-address", ":").rsplit(":", 1)[1]
        if str(ports.get("https-metrics", (None, {}))[1].get("containerPort")) != listen_port:
            err(f"kube-rbac-proxy: listens on port {listen_port}, but its port https-metrics says "
                f"{ports.get('https-metrics', (None, {}))[1].get('containerPort')}")

    # TLS: rdmad's files <- the copier's volume <- the per-node Secrets.
    mounts = {m["name"]: m["mountPath"] for m in rdmad.get("volumeMounts") or []}
    tls = config.get("tls") or {}
    for key, want in (("cert", "tls.crt"), ("key", "tls.key"), ("client_ca", "ca.crt")):
        path = tls.get(key, "")
        if os.path.dirname(path) != mounts.get("tls") or os.path.basename(path) != want:
            err(f"rdmad's tls.{key} is {path!r}, not {want} in the volume tls (mounted at {mounts.get('tls')!r})")
    script_cm = [d for _, d in top if d.get("kind") == "ConfigMap" and d["metadata"]["name"] == "rdmad-tls-sync"]
    script = script_cm[0]["data"]["tls-sync.sh"] if script_cm else ""
    if not script:
        err("no ConfigMap rdmad-tls-sync with tls-sync.sh")
    prefix = (re.search(r'secret="([^"$]*)\$NODE_NAME"', script) or [None, None])[1]
    tls_dir = (re.search(r"dir=\$\{TLS_DIR:-([^}]*)\}", script) or [None, None])[1]
    for name in ("tls-fetch", "tls-sync"):
        c = by_name.get(name)
        if c is None:
            err(f"the DaemonSet has no {name} container")
            continue
        m = {v["name"]: v["mountPath"] for v in c.get("volumeMounts") or []}
        if m.get("tls") != tls_dir:
            err(f"{name}: mounts the volume tls at {m.get('tls')!r}, but tls-sync.sh writes {tls_dir!r}")
        envs = {e["name"]: e for e in c.get("env") or []}
        if (envs.get("NODE_NAME", {}).get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath") != "spec.nodeName":
            err(f"{name}: NODE_NAME is not the Pod's spec.nodeName")
    if "tls-fetch" not in {c["name"] for c in pod.get("initContainers") or []}:
        err("tls-fetch is not an init container: rdmad could start before its certificate is there")
    issuers = {d["metadata"]["name"] for _, d in cm if d.get("kind") == "ClusterIssuer"}
    secrets = set()
    for c in [d for _, d in certs if d.get("kind") == "Certificate"]:
        node = c["metadata"]["name"].removeprefix("rdmad-tls-")
        secrets.add(c["spec"]["secretName"])
        if c["spec"]["secretName"] != f"{prefix}{node}":
            err(f"Certificate {c['metadata']['name']}: Secret {c['spec']['secretName']}, but tls-sync.sh reads {prefix}<node>")
        if c["spec"].get("ipAddresses") != NODES.get(node):
            err(f"Certificate {c['metadata']['name']}: IP SANs {c['spec'].get('ipAddresses')}, the node's are {NODES.get(node)}")
        if c["spec"]["issuerRef"]["name"] not in issuers or c["spec"]["issuerRef"].get("kind") != "ClusterIssuer":
            err(f"Certificate {c['metadata']['name']}: issuer {c['spec']['issuerRef']} is not a ClusterIssuer of issuer.yaml")
        if c["metadata"].get("namespace") != ns:
            err(f"Certificate {c['metadata']['name']}: in {c['metadata'].get('namespace')}, not {ns}")
    if len(secrets) != len(NODES):
        err(f"node-certificates.sh made {len(secrets)} Certificates for {len(NODES)} nodes")
    for role in find(certs, "Role", "rdmad-tls-reader"):
        names = set(role["rules"][0].get("resourceNames") or [])
        if names != secrets or role["rules"][0].get("verbs") != ["get"]:
            err(f"Role rdmad-tls-reader: allows {role['rules'][0].get('verbs')} on {sorted(names)}, not get on {sorted(secrets)}")
    for rb in find(certs, "RoleBinding", "rdmad-tls-reader"):
        if {"kind": "ServiceAccount", "name": pod.get("serviceAccountName"), "namespace": ns} not in rb["subjects"]:
            err("RoleBinding rdmad-tls-reader: does not bind the DaemonSet's service account")
    for c in [d for _, d in cm if d.get("kind") == "Certificate"]:
        ref = c["spec"]["issuerRef"]
        known = {d["metadata"]["name"] for _, d in cm if d.get("kind") == ref.get("kind")}
        if ref["name"] not in known:
            err(f"Certificate {c['metadata']['name']}: issuer {ref} is not in the kit")
        for uri in c["spec"].get("uris") or []:
            if uri not in config.get("admins", []) and not any(uri in t.get("principals", []) for t in config.get("tenants", [])):
                err(f"Certificate {c['metadata']['name']}: principal {uri} is neither an admin nor a tenant's in rdmad's config")

    # Every rdmad config can issue grants.
    for where, d in every:
        if d.get("kind") == "ConfigMap" and "rdmad.json" in (d.get("data") or {}):
            if not json.loads(d["data"]["rdmad.json"]).get("rdma_listen"):
                err(f"{where}: ConfigMap {d['metadata']['name']}: rdmad.json has no rdma_listen: no grant can be issued")

    # Alerts over real metric names.
    exported = set(re.findall(r'"(rdmad_[a-z0-9_]+)"', open(metrics_src).read()))
    for _, rule in mon:
        if rule.get("kind") != "PrometheusRule":
            continue
        for g in rule["spec"]["groups"]:
            for r in g["rules"]:
                expr = re.sub(r'"[^"]*"', '""', r["expr"])  # not label values
                for name in set(re.findall(r"\b([a-z_][a-z0-9_]*)\s*(?:\{|\[|\)|$|\s)", expr)):
                    base = re.sub(r"_(bucket|sum|count)$", "", name)
                    if name.startswith("rdmad_") and name not in exported and base not in exported:
                        err(f"alert {r.get('alert')}: {name} is not a metric rdmad exports ({metrics_src})")
                    elif not name.startswith("rdmad_") and name.startswith(("kube_", "up")) and name not in OTHER_METRICS:
                        err(f"alert {r.get('alert')}: {name} is not among the other metrics the kit expects: {sorted(OTHER_METRICS)}")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        sys.exit(2)
    main(*sys.argv[1:])
    for e in errors:
        print(f"error: {e}", file=sys.stderr)
    print(f"check-k8s-kit: {len(errors)} error(s)", file=sys.stderr)
    sys.exit(1 if errors else 0)
