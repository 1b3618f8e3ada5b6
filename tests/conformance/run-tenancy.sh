#!/usr/bin/env bash
# Runs inside the Soft-RoCE guest (tests/guest/run-in-guest.sh): rdmad on rxe0 with mutual TLS and two tenants.
# Makes a CA and certificates with openssl (rdmad's for 127.0.0.1/localhost/10.0.2.15; clients of tenant a,
# tenant b, tenant d, an admin, a principal in no tenant, an expired one and one of another CA), writes rdmad's
# config (a unix socket where root is an admin, 127.0.0.1:7470 with mutual TLS, tenants a with small quotas, b
# without, d restricted to a device this host does not have (rxe9), an audit file, the data-plane listener on
# 10.0.2.15:7471), starts rdmad, runs tenancy_test against
# it, stops rdmad with SIGTERM and checks that it exits cleanly and leaves nothing behind.
#
# Usage: run-tenancy.sh OUT_DIR [GTEST_ARGS...]
#   OUT_DIR receives tenancy.xml (gtest), tenancy_shutdown.xml, rdmad.log, rdmad-tenancy.json, audit.jsonl,
#   tenancy-resources-{before,after}.txt.
# Binaries: bazel-bin/ of this checkout (build //server:rdmad and //tests/conformance:tenancy_test first), or
# $RDMAD_BIN_DIR if set.
set -euo pipefail

out=${1:?usage: run-tenancy.sh OUT_DIR [GTEST_ARGS...]}
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${RDMAD_BIN_DIR:-$root/bazel-bin}
work=$(mktemp -d /tmp/rdmad-tenancy.XXXXXX)
files=$(mktemp -d /dev/shm/rdmad-tenancy-a.XXXXXX)  # tenant a's file root: its files act as uid/gid 1000
chown 1000:1000 "$files"
certs=$work/certs
sock=$work/rdmad.sock
port=7470
audit=$out/audit.jsonl
mkdir -p "$out" "$certs"
rm -f "$audit" "$out/tenancy.xml" "$out/tenancy_shutdown.xml"

# ---- certificates (openssl; nothing secret is kept: the directory goes at exit)
(
  cd "$certs"
  key() { openssl ecparam -name prime256v1 -genkey -noout -out "$1.key" 2>/dev/null; }
  ca() {  # NAME CN
    key "$1"
    openssl req -x509 -new -key "$1.key" -subj "/CN=$2" -days 2 -out "$1.pem" \
      -addext basicConstraints=critical,CA:true -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
  }
  leaf() {  # NAME CA SUBJECT EXTENSIONS
    key "$1"
    openssl req -new -key "$1.key" -subj "$3" -out "$1.csr" 2>/dev/null
    printf 'basicConstraints=CA:false\nkeyUsage=critical,digitalSignature,keyEncipherment\n%b' "$4" >"$1.ext"
    openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -set_serial "0x$(openssl rand -hex 8)" \
      -days 2 -extfile "$1.ext" -out "$1.pem" 2>/dev/null
    rm -f "$1.csr" "$1.ext"
  }
  client() { leaf "$1" "${3:-ca}" "/CN=$1" "extendedKeyUsage=clientAuth\nsubjectAltName=URI:$2\n"; }
  ca ca "rdmad tenancy CA"
  ca other-ca "another CA"
  leaf server ca "/CN=rdmad" 'extendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1,IP:10.0.2.15\n'
  client a spiffe://cluster/ns/a/sa/app
  client b spiffe://cluster/ns/b/sa/app
  client admin spiffe://cluster/ops/rdmactl
  client stranger spiffe://cluster/ns/c/sa/app
  client elsewhere spiffe://cluster/ns/d/sa/app
  client untrusted spiffe://cluster/ns/a/sa/app other-ca
  # Expired (a's principal): `openssl x509` cannot date a certificate in the past; `openssl ca` can.
  key expired
  openssl req -new -key expired.key -subj "/CN=expired" -out expired.csr 2>/dev/null
  mkdir -p ca-db
  : >ca-db/index.txt
  openssl rand -hex 8 >ca-db/serial
  cat >ca-db/ca.cnf <<CNF
[ca]
default_ca = test
[test]
database = ca-db/index.txt
new_certs_dir = ca-db
serial = ca-db/serial
default_md = sha256
policy = any
copy_extensions = none
x509_extensions = leaf
unique_subject = no
[any]
commonName = supplied
[leaf]
basicConstraints = CA:false
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = clientAuth
subjectAltName = URI:spiffe://cluster/ns/a/sa/app
CNF
  openssl ca -batch -config ca-db/ca.cnf -cert ca.pem -keyfile ca.key -in expired.csr -out expired.pem \
    -startdate 20200101000000Z -enddate 20200102000000Z -notext 2>/dev/null
  rm -rf ca-db expired.csr
  chmod 600 ./*.key
)

cat >"$out/rdmad-tenancy.json" <<JSON
{
  "listen": ["unix:$sock", "127.0.0.1:$port"],
  "tls": {"cert": "$certs/server.pem", "key": "$certs/server.key", "client_ca": "$certs/ca.pem"},
  "unix_socket": {"mode": "0600"},
  "admins": ["unix:uid:0", "spiffe://cluster/ops/rdmactl"],
  "tenants": [
    {"name": "a", "principals": ["spiffe://cluster/ns/a/sa/app"], "uid": 1000, "gid": 1000,
     "file_roots": ["$files"], "devices": ["rxe0"],
     "quotas": {"mrs": 2, "pinned_bytes": 12288, "mws": 1, "qps": 1, "grants": 1, "tokens": 2}},
    {"name": "b", "principals": ["spiffe://cluster/ns/b/sa/app"]},
    {"name": "d", "principals": ["spiffe://cluster/ns/d/sa/app"], "devices": ["rxe9"]}
  ],
  "audit": "$audit",
  "allowed_file_roots": ["/dev/shm"],
  "rdma_listen": ["10.0.2.15:7471"],
  "log_level": "info"
}
JSON

tls_copies() { ls -d /run/rdmad/tls-* "${TMPDIR:-/tmp}"/tls-* 2>/dev/null | sort || true; }
tls_before=$(tls_copies)
rdma resource show >"$out/tenancy-resources-before.txt" 2>&1 || true
"$bin/server/rdmad" --config "$out/rdmad-tenancy.json" >"$out/rdmad.log" 2>&1 &
rdmad_pid=$!
cleanup() { kill -KILL "$rdmad_pid" 2>/dev/null || true; rm -rf "$work" "$files"; }
trap cleanup EXIT

for _ in $(seq 1 300); do
  [ -S "$sock" ] && break
  kill -0 "$rdmad_pid" 2>/dev/null || { echo "rdmad exited at start-up:" >&2; cat "$out/rdmad.log" >&2; exit 1; }
  sleep 0.1
done
[ -S "$sock" ] || { echo "rdmad did not create $sock" >&2; exit 1; }

rc=0
RDMAD_TLS_TARGET="127.0.0.1:$port" RDMAD_UNIX_TARGET="unix:$sock" RDMAD_CERTS="$certs" RDMAD_AUDIT="$audit" \
  RDMAD_TENANT_DIR="$files" RDMAD_DEVICE=rxe0 \
  "$bin/tests/conformance/tenancy_test" --gtest_output="xml:$out/tenancy.xml" "$@" || rc=$?

# Shutdown: SIGTERM, a clean exit, the socket and the private TLS copies removed, every verbs object released,
# no audit line written after the test's check. One more test case in tenancy_shutdown.xml.
lines_before=$(wc -l <"$audit" 2>/dev/null || echo 0)
kill -TERM "$rdmad_pid"
shutdown_rc=0
wait "$rdmad_pid" || shutdown_rc=$?
rdma resource show >"$out/tenancy-resources-after.txt" 2>&1 || true
problems=()
[ "$shutdown_rc" -eq 0 ] || problems+=("rdmad exited with status $shutdown_rc after SIGTERM")
[ ! -e "$sock" ] || problems+=("rdmad left its socket $sock behind")
grep -q "every resource released" "$out/rdmad.log" || problems+=("rdmad did not report a complete release")
leftover=$(comm -13 <(echo "$tls_before") <(tls_copies) | tr '\n' ' ')
[ -z "${leftover// /}" ] || problems+=("rdmad left copies of its TLS files: $leftover")
report=$(grep -m1 -E "ERROR: (Address|Leak)Sanitizer|runtime error:" "$out/rdmad.log" || true)
[ -z "$report" ] || problems+=("rdmad.log has a sanitizer report: $report")
lines_after=$(wc -l <"$audit" 2>/dev/null || echo 0)
[ "$lines_after" -eq "$lines_before" ] || problems+=("the audit log grew at shutdown: $lines_before -> $lines_after lines")
diff -q "$out/tenancy-resources-before.txt" "$out/tenancy-resources-after.txt" >/dev/null ||
  problems+=("device resources differ before start and after shutdown: $(diff "$out/tenancy-resources-before.txt" "$out/tenancy-resources-after.txt" | tr '\n' ' ')")
"$root/tests/lib/junit-case.sh" "$out/tenancy_shutdown.xml" RdmadTenancyShutdown SigtermReleasesEverything "${problems[*]:-}"
if ((${#problems[@]})); then
  printf 'shutdown check failed: %s\n' "${problems[@]}" >&2
  rc=1
else
  echo "[       OK ] RdmadTenancyShutdown.SigtermReleasesEverything"
fi
exit "$rc"
