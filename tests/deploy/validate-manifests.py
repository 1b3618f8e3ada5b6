#!/usr/bin/python3
"""Validates Kubernetes manifests offline against the typed API models of Debian's python3-kubernetes.

Each YAML document is decoded strictly into the model its apiVersion and kind name (apps/v1 DaemonSet ->
V1DaemonSet, ...), field by field, with the models' own tables (attribute_map: the JSON names;
openapi_types: the types): an unknown field, a value of the wrong type (a string where an integer goes, a
map where a list goes) or a missing required field is an error with its path, like
`DaemonSet rdmad: spec.template.spec.containers[0].livenessProbe.exec.comand: unknown field`. The models
are generated from Kubernetes' OpenAPI spec (python3-kubernetes 22.6: the Kubernetes 1.22 API). Then a few
of the API server's own rules that no schema expresses: a workload's selector matches its template's
labels, container and volume names are unique, every volumeMount names a volume of the Pod, and a
configMap volume that names a ConfigMap of the same file set finds it there.

Limits (docs/operations.md#deployment-on-kubernetes): fields newer than Kubernetes 1.22 (e.g. a probe's
`grpc`, 1.24) are unknown here; string formats and enums are not checked (a Quantity must be a string
here, although the API server also takes a bare number); IntOrString ('object' in the models) takes an
integer or a string. No admission, defaulting or cluster state: a real `kubectl apply --dry-run=server`
against a cluster sees more.

Usage: validate-manifests.py FILE.yaml...   exit 0: all valid; 1: errors (printed); 2: usage/setup.
"""
import re
import sys

try:
    import yaml
    from kubernetes import client
except ImportError as e:  # pragma: no cover
    print(f"validate-manifests: {e}: apt-get install python3-kubernetes python3-yaml", file=sys.stderr)
    sys.exit(2)

PRIMITIVES = {"str": str, "int": int, "float": (int, float), "bool": bool}


def model_for(api_version, kind):
    """apps/v1 + DaemonSet -> client.V1DaemonSet; networking.k8s.io/v1 + Ingress -> V1Ingress."""
    version = api_version.split("/")[-1]
    name = version[0].upper() + version[1:] + kind
    return getattr(client, name, None)


def type_name(value):
    return {dict: "a map", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number"}.get(type(value), type(value).__name__)


def join(path, key):
    return path + key if path.endswith(" ") else f"{path}.{key}"


def decode(value, typ, path, errors):
    """Checks `value` (from YAML) against the model type string `typ`; returns a model object or value."""
    if value is None:
        return None
    m = re.fullmatch(r"list\[(.+)\]", typ)
    if m:
        if not isinstance(value, list):
            errors.append(f"{path}: {type_name(value)} where a list goes")
            return None
        return [decode(v, m.group(1), f"{path}[{i}]", errors) for i, v in enumerate(value)]
    m = re.fullmatch(r"dict\(str, (.+)\)", typ)
    if m:
        if not isinstance(value, dict):
            errors.append(f"{path}: {type_name(value)} where a map goes")
            return None
        return {k: decode(v, m.group(1), join(path, k), errors) for k, v in value.items()}
    if typ in PRIMITIVES:
        ok = isinstance(value, PRIMITIVES[typ]) and not (typ != "bool" and isinstance(value, bool))
        if not ok:
            errors.append(f"{path}: {type_name(value)} ({value!r}) where a {typ} goes (Kubernetes 1.22 API)")
        return value
    if typ == "object":  # IntOrString in the kinds used here (ports, maxUnavailable)
        if not isinstance(value, (int, str)) or isinstance(value, bool):
            errors.append(f"{path}: {type_name(value)} where an integer or a string goes")
        return value
    if typ == "datetime":
        return value
    cls = getattr(client, typ, None)
    if cls is None:
        errors.append(f"{path}: the validator knows no type {typ}")
        return None
    if not isinstance(value, dict):
        errors.append(f"{path}: {type_name(value)} where an object ({typ}) goes")
        return None
    by_json = {j: a for a, j in cls.attribute_map.items()}
    kwargs = {}
    for key, v in value.items():
        attr = by_json.get(key)
        if attr is None:
            errors.append(f"{join(path, key)}: unknown field (not in {typ})")
            continue
        kwargs[attr] = decode(v, cls.openapi_types[attr], join(path, key), errors)
    try:
        return cls(**kwargs)  # the models' setters refuse a missing required field
    except ValueError as e:
        msg = str(e)
        field = re.search(r"`(\w+)`", msg)
        json_name = cls.attribute_map.get(field.group(1), field.group(1)) if field else "?"
        errors.append(f"{join(path, json_name)}: required ({msg})")
        return None


def pod_spec_of(doc):
    kind, spec = doc.get("kind"), doc.get("spec") or {}
    if kind == "Pod":
        return spec
    if kind in ("DaemonSet", "Deployment", "StatefulSet", "ReplicaSet", "Job"):
        return (spec.get("template") or {}).get("spec") or {}
    return None


def api_rules(doc, configmaps, errors, where):
    """A few of the API server's validation rules that a schema does not express."""
    spec = doc.get("spec") or {}
    if doc.get("kind") in ("DaemonSet", "Deployment", "StatefulSet", "ReplicaSet"):
        want = ((spec.get("selector") or {}).get("matchLabels")) or {}
        have = (((spec.get("template") or {}).get("metadata") or {}).get("labels")) or {}
        for k, v in want.items():
            if have.get(k) != v:
                errors.append(f"{where}: spec.selector.matchLabels {k}={v} does not match the template's labels")
    pod = pod_spec_of(doc)
    if pod is None:
        return
    containers = (pod.get("initContainers") or []) + (pod.get("containers") or [])
    names = [c.get("name") for c in containers]
    for n in set(names):
        if names.count(n) > 1:
            errors.append(f"{where}: container name {n} is used twice")
    volumes = [v.get("name") for v in pod.get("volumes") or []]
    for n in set(volumes):
        if volumes.count(n) > 1:
            errors.append(f"{where}: volume name {n} is used twice")
    for c in containers:
        for m in c.get("volumeMounts") or []:
            if m.get("name") not in volumes:
                errors.append(f"{where}: container {c.get('name')} mounts volume {m.get('name')}, "
                              "which the Pod does not declare")
    ns = (doc.get("metadata") or {}).get("namespace")
    for v in pod.get("volumes") or []:
        cm = (v.get("configMap") or {}).get("name")
        if cm and configmaps and (cm, ns) not in configmaps and not (v.get("configMap") or {}).get("optional"):
            errors.append(f"{where}: volume {v.get('name')} names ConfigMap {cm}, not among the files' ConfigMaps")


def main(paths):
    if not paths:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    errors, count = [], 0
    docs = []
    for path in paths:
        try:
            with open(path) as f:
                for i, doc in enumerate(yaml.safe_load_all(f)):
                    if doc is not None:
                        docs.append((path, i, doc))
        except (OSError, yaml.YAMLError) as e:
            errors.append(f"{path}: {e}")
    configmaps = {((d.get("metadata") or {}).get("name"), (d.get("metadata") or {}).get("namespace"))
                  for _, _, d in docs if isinstance(d, dict) and d.get("kind") == "ConfigMap"}
    for path, i, doc in docs:
        if not isinstance(doc, dict):
            errors.append(f"{path} document {i}: {type_name(doc)}, not an object")
            continue
        kind, api = doc.get("kind"), doc.get("apiVersion")
        name = (doc.get("metadata") or {}).get("name", "?")
        where = f"{path}: {kind} {name}"
        cls = model_for(api, kind) if isinstance(api, str) and isinstance(kind, str) else None
        if cls is None:
            errors.append(f"{path} document {i}: unknown apiVersion/kind {api}/{kind}")
            continue
        before = len(errors)
        decode(doc, cls.__name__, where + ": ", errors)
        if not (doc.get("metadata") or {}).get("name"):
            errors.append(f"{where}: metadata.name is required")
        api_rules(doc, configmaps, errors, where)
        count += 1
        if len(errors) == before:
            print(f"ok: {where} ({api}, {cls.__name__})")
    for e in errors:
        print(f"error: {e}", file=sys.stderr)
    print(f"validate-manifests: {count} object(s), {len(errors)} error(s)", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
