#!/usr/bin/env bash
# Installs everything Parity needs to build and test on Debian 12. Idempotent: a no-op when all
# packages are present. Runs apt-get through sudo when not root.
set -euo pipefail

PACKAGES=(
  g++ cmake ninja-build pkg-config
  libabsl-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libsqlite3-dev libssl-dev openssl
  libpq-dev postgresql-15
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

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

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
# The tests start PostgreSQL servers of their own (tests/postgres.sh); the cluster Debian's package
# creates is not left running on a machine with systemd.
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
