#!/usr/bin/env bash
# Installs everything Parity needs to build and test on Debian 12. Idempotent: a no-op when all
# packages are present. Runs apt-get through sudo when not root.
set -euo pipefail

PACKAGES=(
  g++ cmake ninja-build pkg-config
  libabsl-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libsqlite3-dev libssl-dev openssl
  libpq-dev postgresql-15 libcurl4-openssl-dev
  libjemalloc-dev
  zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-numpy python3-jsonschema
  python3-grpcio python3-protobuf python3-torch
  clang libclang-rt-14-dev
  libcpp-httplib-dev libjs-chart.js
  chromium chromium-driver python3-selenium prometheus
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# The blob-store tests' S3 server runs on Node.js: Debian's when the machine has no npm of its own.
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
else
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
      echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2
      exit 2
    fi
  fi
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  # The tests start PostgreSQL servers of their own (tests/postgres.sh); the cluster Debian's
  # package creates is not left running on a machine with systemd.
  if [[ " ${missing[*]} " == *" postgresql-15 "* ]] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    $SUDO systemctl disable --now postgresql.service >/dev/null 2>&1 || true
    echo "install-deps: postgresql-15 installed for the tests; its service is disabled"
  fi
  # The tests use only Prometheus's promtool, which Debian ships in the server's package; a server
  # this script installed is not left running on a machine with systemd.
  if [[ " ${missing[*]} " == *" prometheus "* ]] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    $SUDO systemctl disable --now prometheus.service >/dev/null 2>&1 || true
    echo "install-deps: prometheus installed for its promtool; its service is disabled"
  fi
fi

# The S3-compatible server of the blob-store tests (tests/s3.sh): s3rver, pinned with its
# dependencies' hashes in tests/s3/package-lock.json, installed again only when the lock changed.
# Only those tests need it: when the npm registry cannot be reached this warns, and they fail
# saying s3rver is not installed, while building and running Parity go on.
s3_dir="$(cd "$(dirname "$0")/.." && pwd)/tests/s3"
if ! cmp -s "$s3_dir/package-lock.json" "$s3_dir/node_modules/.package-lock.json.installed" 2>/dev/null; then
  echo "install-deps: npm ci in tests/s3 (s3rver for the tests)"
  if (cd "$s3_dir" && npm ci --no-audit --no-fund --loglevel=error); then
    cp "$s3_dir/package-lock.json" "$s3_dir/node_modules/.package-lock.json.installed"
  else
    echo "install-deps: npm ci in tests/s3 failed: the S3 blob-store tests cannot run" >&2
  fi
fi
