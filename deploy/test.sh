#!/usr/bin/env bash
# Installs dependencies, builds with -Wall -Wextra -Werror and runs the whole test suite.
# PARITY_SANITIZE=address,undefined builds into build-sanitize/ with those sanitizers instead.
set -euo pipefail
cd "$(dirname "$0")/.."
deploy/install-deps.sh
if [ -n "${PARITY_SANITIZE:-}" ]; then
  export PARITY_BUILD_DIR="${PARITY_BUILD_DIR:-build-sanitize}"
  deploy/build.sh -DPARITY_SANITIZE="$PARITY_SANITIZE"
else
  deploy/build.sh -DPARITY_SANITIZE=
fi
cd "${PARITY_BUILD_DIR:-build}"
ctest --output-on-failure -j 2 --timeout 600
