#!/usr/bin/env bash
# Validates deploy/k8s/*.yaml against the Kubernetes API schema offline (tests/deploy/validate-manifests.py:
# a strict typed decode with python3-kubernetes' models, the Kubernetes 1.22 API), and proves the check
# can fail: broken copies of the real manifests (a misspelt field, a string where an integer goes, a
# container without its required name, a selector that misses the template, a mount of an undeclared
# volume) must each be refused with the error they carry.
# Usage: tests/deploy/validate-manifests.sh [--xml FILE]   exit 0: valid and every broken copy refused.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
xml=
[ "${1:-}" = --xml ] && xml=$2
validator=(/usr/bin/python3 "$repo/tests/deploy/validate-manifests.py")
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
failures=()

if ! "${validator[@]}" "$repo"/deploy/k8s/*.yaml; then
  failures+=("deploy/k8s/*.yaml: invalid (see above)")
fi

# broken NAME FILE SED-EXPRESSION EXPECTED-ERROR: a copy of FILE changed by SED must fail with EXPECTED.
broken() {
  local name=$1 file=$2 expr=$3 expected=$4 copy=$work/$1.yaml
  sed -e "$expr" "$repo/deploy/k8s/$file" >"$copy"
  if cmp -s "$copy" "$repo/deploy/k8s/$file"; then
    failures+=("$name: the mutation '$expr' changed nothing in $file (the test is stale)"); return
  fi
  if "${validator[@]}" "$copy" >"$work/$name.out" 2>&1; then
    failures+=("$name: a broken manifest was accepted"); return
  fi
  if ! grep -qF -- "$expected" "$work/$name.out"; then
    failures+=("$name: refused, but not with '$expected': $(grep -m1 error: "$work/$name.out")"); return
  fi
  echo "refused as expected: $name: $(grep -m1 -F -- "$expected" "$work/$name.out")"
}
broken unknown_field daemonset.yaml '0,/command: \["\/usr\/local\/bin\/rdmactl"/s//comand: ["\/usr\/local\/bin\/rdmactl"/' \
  'startupProbe.exec.comand: unknown field'
broken wrong_type daemonset.yaml 's/containerPort: 7470/containerPort: "7470"/' \
  "ports[0].containerPort: a string ('7470') where a int goes"
broken missing_required sidecar-pod.yaml 's/^    - name: app$/    - nam: app/' \
  'containers[1].name: required'
broken selector_mismatch daemonset.yaml '/matchLabels:/{n;s/app.kubernetes.io\/name: rdmad/app.kubernetes.io\/name: rdma/}' \
  'spec.selector.matchLabels app.kubernetes.io/name=rdma does not match'
broken undeclared_volume sidecar-pod.yaml 's/{name: config, mountPath: \/etc\/rdmad, readOnly: true}/{name: configs, mountPath: \/etc\/rdmad}/' \
  'mounts volume configs, which the Pod does not declare'
broken string_for_list daemonset.yaml 's/args: \["--config", "\/etc\/rdmad\/rdmad.json"\]/args: "--config"/' \
  'args: a string where a list goes'

if ((${#failures[@]})); then
  printf 'FAIL: %s\n' "${failures[@]}" >&2
else
  echo "validate-manifests: deploy/k8s valid; 6 broken copies refused"
fi
if [ -n "$xml" ]; then
  mkdir -p "$(dirname "$xml")"
  "$repo/tests/lib/junit-case.sh" "$xml" deploy_manifests validate_manifests "$(IFS='; '; echo "${failures[*]}")"
fi
((${#failures[@]} == 0))
