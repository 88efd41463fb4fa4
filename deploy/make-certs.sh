#!/usr/bin/env bash
# Makes a local CA and a server and a client certificate for trying parityd with TLS and mutual
# TLS (not for production: use your organisation's CA there).
#   deploy/make-certs.sh DIR [SERVER_NAME...]
# Server names default to localhost and 127.0.0.1 (both always included). Writes DIR/ca.pem,
# DIR/ca.key, DIR/server.pem, DIR/server.key, DIR/client.pem, DIR/client.key (keys mode 0600).
#
# Then:
#   parityd --listen 0.0.0.0:50051 --tls-cert DIR/server.pem --tls-key DIR/server.key \
#           [--tls-client-ca DIR/ca.pem]          # mutual TLS: agents need a client certificate
#   parity-agent upload ... --server HOST:50051 --tls-ca DIR/ca.pem \
#           [--tls-cert DIR/client.pem --tls-key DIR/client.key]
#   (or PARITY_TLS_CA / PARITY_TLS_CERT / PARITY_TLS_KEY in the environment)
#
# Rotation: certificates are read when parityd starts. To rotate, make the new server key and
# certificate (same CA, or a bundle of old + new CA in --tls-client-ca and in the clients'
# --tls-ca while both are in use), replace the files, and restart parityd (SIGTERM drains
# running calls; agents reconnect and resume their uploads on their own). Retire the old CA from
# the bundles once every client certificate signed by it has been replaced.
set -euo pipefail
DIR="${1:?usage: deploy/make-certs.sh DIR [SERVER_NAME...]}"; shift || true
mkdir -p "$DIR"
umask 077
SAN="DNS:localhost,IP:127.0.0.1"
for n in "$@"; do
  if [[ "$n" =~ ^[0-9.]+$ || "$n" == *:* ]]; then SAN="$SAN,IP:$n"; else SAN="$SAN,DNS:$n"; fi
done
openssl req -x509 -newkey rsa:2048 -nodes -days 825 -subj "/CN=Parity local CA" \
  -keyout "$DIR/ca.key" -out "$DIR/ca.pem" 2>/dev/null
issue() {  # name, subject CN, extensions
  openssl req -newkey rsa:2048 -nodes -subj "/CN=$2" -keyout "$DIR/$1.key" -out "$DIR/$1.csr" 2>/dev/null
  printf '%s\n' "$3" > "$DIR/$1.ext"
  openssl x509 -req -in "$DIR/$1.csr" -CA "$DIR/ca.pem" -CAkey "$DIR/ca.key" -CAcreateserial \
    -days 397 -extfile "$DIR/$1.ext" -out "$DIR/$1.pem" 2>/dev/null
  rm -f "$DIR/$1.csr" "$DIR/$1.ext"
}
issue server "parityd" "subjectAltName=$SAN
extendedKeyUsage=serverAuth"
issue client "parity-agent" "extendedKeyUsage=clientAuth"
rm -f "$DIR/ca.srl"
chmod 644 "$DIR"/*.pem
echo "make-certs: CA, server ($SAN) and client certificates in $DIR"
