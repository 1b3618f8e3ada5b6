#!/usr/bin/env bash
# rdmad's listeners end to end, on the host (no RDMA device needed: rdmad serves an empty device list):
#   - a TCP listener without TLS or insecure_tcp is refused at start-up (exit status 2), also from --listen;
#     a TLS key that is not the certificate's is refused (exit status 2);
#   - mutual TLS with rdmactl's --tls-ca/--tls-cert/--tls-key (and the RDMAD_TLS_* environment): accepted
#     with a good client certificate, refused without one, with an untrusted one, or with a missing file
#     (usage error); --tls-server-name;
#   - SIGHUP reloads the certificates (editing the files alone changes nothing; a bad reload keeps the old
#     ones and rdmad keeps serving); SIGTERM exits 0 and removes the unix socket and the TLS copies;
#   - the unix socket gets unix_socket.mode.
# Certificates are made at test time by gen_test_certs.sh (openssl).
#
# Under Bazel: bazel test //tests/unit:rdmad_tls_test. By hand: RDMAD=... RDMACTL=... tests/unit/rdmad_tls_test.sh
set -u

runfiles="${TEST_SRCDIR:-}/${TEST_WORKSPACE:-rdmad}"
RDMAD="${RDMAD:-$runfiles/server/rdmad}"
RDMACTL="${RDMACTL:-$runfiles/cli/rdmactl}"
GEN="${GEN:-$runfiles/tests/unit/gen_test_certs.sh}"
[[ -f "$GEN" ]] || GEN="$(dirname "$0")/gen_test_certs.sh"
for bin in "$RDMAD" "$RDMACTL"; do
  [[ -x "$bin" ]] || { echo "FAIL: $bin is not an executable" >&2; exit 1; }
done

dir="$(mktemp -d /tmp/rdmad-tls.XXXXXX)"  # short: a unix socket path must fit in 108 bytes
rdmad_pid=""
cleanup() {
  if [[ -n "$rdmad_pid" ]]; then
    kill "$rdmad_pid" 2>/dev/null
    wait "$rdmad_pid" 2>/dev/null
  fi
  rm -rf "$dir"
}
trap cleanup EXIT

failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

bash "$GEN" "$dir/certs" || { echo "FAIL: gen_test_certs.sh" >&2; exit 1; }
c="$dir/certs"
mkdir "$dir/etc"
cp "$c/server.pem" "$c/server.key" "$c/ca.pem" "$dir/etc/"

echo "--- a TCP listener without TLS is refused (exit 2)"
echo '{ "listen": ["127.0.0.1:0"] }' >"$dir/plain.json"
"$RDMAD" --config "$dir/plain.json" 2>"$dir/err"; rc=$?
[[ $rc == 2 ]] || fail "plain TCP: exit $rc, want 2: $(cat "$dir/err")"
grep -q insecure_tcp "$dir/err" || fail "plain TCP: the error does not name insecure_tcp: $(cat "$dir/err")"
"$RDMAD" --listen 127.0.0.1:0 2>"$dir/err"; rc=$?
[[ $rc == 2 ]] || fail "--listen 127.0.0.1:0: exit $rc, want 2: $(cat "$dir/err")"

echo "--- a key that is not the certificate's is refused (exit 2)"
cat >"$dir/badkey.json" <<EOF
{ "listen": ["127.0.0.1:0"],
  "tls": { "cert": "$c/server.pem", "key": "$c/server2.key", "client_ca": "$c/ca.pem" } }
EOF
"$RDMAD" --config "$dir/badkey.json" 2>"$dir/err"; rc=$?
[[ $rc == 2 ]] || fail "mismatched key: exit $rc, want 2: $(cat "$dir/err")"
grep -q "not the private key" "$dir/err" || fail "mismatched key: $(cat "$dir/err")"

echo "--- rdmad with mutual TLS and a unix socket"
cat >"$dir/rdmad.json" <<EOF
{ "listen": ["unix:$dir/rdmad.sock", "127.0.0.1:0"],
  "tls": { "cert": "$dir/etc/server.pem", "key": "$dir/etc/server.key", "client_ca": "$dir/etc/ca.pem" },
  "unix_socket": { "mode": "0600" },
  "audit": "" }
EOF
"$RDMAD" --config "$dir/rdmad.json" 2>"$dir/rdmad.log" &
rdmad_pid=$!
port=""
for _ in $(seq 1 100); do
  port="$(sed -n 's/.*serving rdmad.v1 on .*(TCP port \([0-9]*\)).*/\1/p' "$dir/rdmad.log")"
  [[ -n "$port" ]] && break
  kill -0 "$rdmad_pid" 2>/dev/null || break
  sleep 0.1
done
[[ -n "$port" ]] || { cat "$dir/rdmad.log" >&2; echo "FAIL: rdmad did not start" >&2; exit 1; }
copies="$(sed -n 's/.*copies in \([^,]*\), reloaded on SIGHUP.*/\1/p' "$dir/rdmad.log")"
[[ -d "$copies" ]] || fail "the TLS copies' directory '$copies' is not there"
[[ "$(stat -c %a "$dir/rdmad.sock")" == 600 ]] || fail "socket mode $(stat -c %a "$dir/rdmad.sock"), want 600"

tcp="127.0.0.1:$port"
# as CLIENT [CA] [rdmactl args...]: rdmactl over TLS with CLIENT's certificate, trusting CA (default ca)
as() {
  local who=$1 ca=$2
  shift 2
  "$RDMACTL" --server "$tcp" --timeout 3s --tls-ca "$c/$ca.pem" --tls-cert "$c/$who.pem" --tls-key "$c/$who.key" \
    "$@" >"$dir/out" 2>"$dir/err"
}

as spiffe ca health; rc=$?
[[ $rc == 0 ]] || fail "TLS health: exit $rc: $(cat "$dir/err")"
as spiffe ca get devices -o json; rc=$?
[[ $rc == 0 ]] || fail "TLS get devices: exit $rc: $(cat "$dir/err")"
as spiffe ca --tls-server-name localhost health; rc=$?
[[ $rc == 0 ]] || fail "--tls-server-name localhost: exit $rc: $(cat "$dir/err")"
as spiffe ca --tls-server-name wrong.example health; rc=$?
[[ $rc == 1 ]] || fail "--tls-server-name wrong.example: exit $rc, want 1"
RDMAD_TLS_CA="$c/ca.pem" RDMAD_TLS_CERT="$c/cn.pem" RDMAD_TLS_KEY="$c/cn.key" \
  "$RDMACTL" --server "$tcp" --timeout 3s health >"$dir/out" 2>"$dir/err"; rc=$?
[[ $rc == 0 ]] || fail "TLS from RDMAD_TLS_*: exit $rc: $(cat "$dir/err")"
"$RDMACTL" --server "$tcp" --timeout 3s health >"$dir/out" 2>"$dir/err"; rc=$?
[[ $rc == 1 ]] || fail "plaintext to the TLS port: exit $rc, want 1"
as untrusted ca health; rc=$?
[[ $rc == 1 ]] || fail "untrusted client certificate: exit $rc, want 1"
as expired ca health; rc=$?
[[ $rc == 1 ]] || fail "expired client certificate: exit $rc, want 1"
"$RDMACTL" --server "$tcp" --tls-ca "$c/ca.pem" --tls-cert "$dir/none.pem" --tls-key "$c/spiffe.key" health \
  >"$dir/out" 2>"$dir/err"; rc=$?
[[ $rc == 2 ]] || fail "missing certificate file: exit $rc, want 2"
grep -q "none.pem" "$dir/err" || fail "missing certificate file: the error does not name it: $(cat "$dir/err")"
"$RDMACTL" --server "$tcp" --tls-ca "$c/ca.pem" health >"$dir/out" 2>"$dir/err"; rc=$?
[[ $rc == 2 ]] || fail "--tls-ca without --tls-cert/--tls-key: exit $rc, want 2"
"$RDMACTL" --server "unix:$dir/rdmad.sock" --timeout 3s health >"$dir/out" 2>"$dir/err"; rc=$?
[[ $rc == 0 ]] || fail "unix health: exit $rc: $(cat "$dir/err")"

echo "--- new certificates: nothing changes without SIGHUP"
cp "$c/server2.pem" "$dir/etc/server.pem"
cp "$c/server2.key" "$dir/etc/server.key"
cp "$c/other-ca.pem" "$dir/etc/ca.pem"
sleep 2.5
as spiffe ca health; rc=$?
[[ $rc == 0 ]] || fail "the edited files took effect without SIGHUP (exit $rc)"

echo "--- SIGHUP: the new ones take effect, the old ones stop working"
kill -HUP "$rdmad_pid"
ok=""
for _ in $(seq 1 50); do
  if as untrusted other-ca health; then ok=1; break; fi
  sleep 0.1
done
[[ -n "$ok" ]] || fail "after SIGHUP the new certificates did not take effect within 5 s: $(cat "$dir/err")"
kill -0 "$rdmad_pid" 2>/dev/null || fail "rdmad died on SIGHUP"
grep -q "SIGHUP: TLS: CN=rdmad" "$dir/rdmad.log" || fail "no reload line in the log"
as spiffe ca health; rc=$?
[[ $rc == 1 ]] || fail "the old server certificate still served after SIGHUP (exit $rc)"
as spiffe other-ca health; rc=$?
[[ $rc == 1 ]] || fail "a client certificate from the old CA still accepted after SIGHUP (exit $rc)"

echo "--- a bad reload keeps the certificates in use"
echo "not a certificate" >"$dir/etc/server.pem"
kill -HUP "$rdmad_pid"
sleep 1.5
grep -q "TLS not reloaded" "$dir/rdmad.log" || fail "a bad reload was not reported: $(tail -3 "$dir/rdmad.log")"
as untrusted other-ca health; rc=$?
[[ $rc == 0 ]] || fail "after a bad reload: exit $rc: $(cat "$dir/err")"

echo "--- SIGTERM: exit 0, the socket and the TLS copies removed"
kill -TERM "$rdmad_pid"
wait "$rdmad_pid"; rc=$?
rdmad_pid=""
[[ $rc == 0 ]] || fail "rdmad exited $rc on SIGTERM"
[[ ! -e "$dir/rdmad.sock" ]] || fail "the unix socket is still there"
[[ ! -e "$copies" ]] || fail "the TLS copies ($copies) are still there"

if ((failures)); then
  echo "--- rdmad's log:" >&2
  cat "$dir/rdmad.log" >&2
  echo "$failures failure(s)" >&2
  exit 1
fi
echo "PASS"
