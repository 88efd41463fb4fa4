#!/usr/bin/env bash
# Configures and builds Parity into build/ (or $PARITY_BUILD_DIR). Extra arguments go to cmake's
# configure step, e.g. -DPARITY_SANITIZE=address,undefined.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${PARITY_BUILD_DIR:-build}"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-RelWithDebInfo}" "$@" >/dev/null
cmake --build "$BUILD_DIR" -j "${PARITY_JOBS:-2}"
