#!/usr/bin/env bash
# Test certificates for tests/unit/listeners_test.cc and tests/unit/rdmad_tls_test.sh, made at test time
# with the openssl CLI (nothing secret is checked in). Usage: gen_test_certs.sh DIR. In DIR:
#   ca.pem ca.key            the client and server CA           other-ca.pem  an unrelated CA
#   server.pem server.key    rdmad (SAN DNS:localhost, IP:127.0.0.1), signed by ca
#   server2.pem server2.key  the same names, a second key, signed by other-ca (the "renewed" server cert)
#   spiffe.pem/.key          client, URI SAN spiffe://cluster/ns/a/sa/x, CN "x"    (ca)
#   cn.pem/.key              client, CN "reader" only, no SAN                      (ca)
#   expired.pem/.key         client, URI SAN spiffe://cluster/ns/a/sa/old, expired in 2020 (ca)
#   untrusted.pem/.key       client, URI SAN spiffe://cluster/ns/a/sa/x            (other-ca)
#   two-uris.pem/.key        client, two URI SANs                                  (ca)
#   unix-uri.pem/.key        client, URI SAN unix:uid:0                            (ca)
set -euo pipefail
dir=$1
mkdir -p "$dir"
cd "$dir"

key() { openssl ecparam -name prime256v1 -genkey -noout -out "$1.key" 2>/dev/null; }
ca() {  # name CN
  key "$1"
  openssl req -x509 -new -key "$1.key" -subj "/CN=$2" -days 2 -out "$1.pem" \
    -addext basicConstraints=critical,CA:true -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
}
# leaf NAME CA SUBJECT EXTENSIONS(openssl config lines, may be empty)
leaf() {
  key "$1"
  openssl req -new -key "$1.key" -subj "$3" -out "$1.csr" 2>/dev/null
  printf 'basicConstraints=CA:false\nkeyUsage=critical,digitalSignature,keyEncipherment\n%b' "$4" >"$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -set_serial "0x$(openssl rand -hex 8)" \
    -days 2 -extfile "$1.ext" -out "$1.pem" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}

ca ca "rdmad test CA"
ca other-ca "another CA"
leaf server ca "/CN=rdmad" 'extendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n'
leaf server2 other-ca "/CN=rdmad" 'extendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n'
leaf spiffe ca "/CN=x" 'extendedKeyUsage=clientAuth\nsubjectAltName=URI:spiffe://cluster/ns/a/sa/x\n'
leaf cn ca "/CN=reader" 'extendedKeyUsage=clientAuth\n'
leaf untrusted other-ca "/CN=x" 'extendedKeyUsage=clientAuth\nsubjectAltName=URI:spiffe://cluster/ns/a/sa/x\n'
leaf two-uris ca "/CN=two" 'extendedKeyUsage=clientAuth\nsubjectAltName=URI:spiffe://cluster/ns/a/sa/x,URI:spiffe://cluster/ns/b/sa/y\n'
leaf unix-uri ca "/CN=root" 'extendedKeyUsage=clientAuth\nsubjectAltName=URI:unix:uid:0\n'

# Expired: `openssl x509` (3.0) cannot date a certificate in the past; `openssl ca` can.
key expired
openssl req -new -key expired.key -subj "/CN=old" -out expired.csr 2>/dev/null
mkdir -p ca-db
: >ca-db/index.txt
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
subjectAltName = URI:spiffe://cluster/ns/a/sa/old
CNF
openssl rand -hex 8 >ca-db/serial
openssl ca -batch -config ca-db/ca.cnf -cert ca.pem -keyfile ca.key -in expired.csr -out expired.pem \
  -startdate 20200101000000Z -enddate 20200102000000Z -notext 2>/dev/null
rm -rf ca-db expired.csr
chmod 600 ./*.key
