#!/usr/bin/env bash
# A throwaway S3-compatible server for the tests (never a mock of Parity's own): s3rver, pinned in
# tests/s3/package.json (deploy/install-deps.sh installs it with npm ci), keeping its objects in
# DIR/data, listening on a free loopback port with the bucket "parity" and s3rver's fixed
# credentials (access key S3RVER, secret S3RVER). `start DIR` prints the endpoint
# (http://127.0.0.1:PORT) and writes it to DIR/endpoint; `stop DIR` stops it and removes DIR.
#   tests/s3.sh start|stop DIR
set -euo pipefail
cmd="${1:?start or stop}"; dir="${2:?directory}"
here="$(cd "$(dirname "$0")" && pwd)"
case "$cmd" in
  start)
    bin="$here/s3/node_modules/.bin/s3rver"
    if [ ! -x "$bin" ]; then
      echo "s3.sh: s3rver is not installed (deploy/install-deps.sh runs npm ci in tests/s3)" >&2
      exit 2
    fi
    rm -rf "$dir"
    mkdir -p "$dir/data"
    # s3rver encrypts the continuation token of every truncated listing with DES, which Node.js
    # built on OpenSSL 3 has only in its legacy provider (without it, such a listing is HTTP 500).
    NODE_OPTIONS=--openssl-legacy-provider \
      "$bin" -d "$dir/data" -a 127.0.0.1 -p 0 --silent --configure-bucket parity > "$dir/log" 2>&1 &
    echo $! > "$dir/pid"
    for _ in $(seq 100); do
      port="$(grep -o 'listening on 127.0.0.1:[0-9]*' "$dir/log" | cut -d: -f2 || true)"
      if [ -n "$port" ]; then
        echo "http://127.0.0.1:$port" | tee "$dir/endpoint"
        exit 0
      fi
      kill -0 "$(cat "$dir/pid")" 2>/dev/null || break
      sleep 0.1
    done
    cat "$dir/log" >&2
    exit 1
    ;;
  stop)
    if [ -f "$dir/pid" ]; then kill "$(cat "$dir/pid")" 2>/dev/null || true; fi
    rm -rf "$dir"
    ;;
  *) echo "s3.sh: start or stop" >&2; exit 2 ;;
esac
