#!/usr/bin/env bash
# Installs dependencies, builds with -Wall -Wextra -Werror and runs the whole test suite.
# PARITY_SANITIZE=address,undefined builds into build-sanitize/ with those sanitizers instead
# (leaks inside OpenSSL suppressed by tests/lsan.supp); PARITY_SANITIZE=thread into build-tsan/,
# with tests/tsan.supp (Debian's uninstrumented libraries only) and every report fatal. Sanitizer
# builds leave out the benchmarks and the crash soak, which ctest never runs, and skip the
# browser and Python tests (labelled "browser" and "python"), which the plain build runs.
set -euo pipefail
cd "$(dirname "$0")/.."
deploy/install-deps.sh
if [ -n "${PARITY_SANITIZE:-}" ]; then
  case "$PARITY_SANITIZE" in
    *thread*)
      export PARITY_BUILD_DIR="${PARITY_BUILD_DIR:-build-tsan}"
      export TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
      ;;
    *)
      export PARITY_BUILD_DIR="${PARITY_BUILD_DIR:-build-sanitize}"
      export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp print_suppressions=0 ${LSAN_OPTIONS:-}"
      ;;
  esac
  deploy/build.sh -DPARITY_SANITIZE="$PARITY_SANITIZE" -DPARITY_BENCHMARKS=OFF
  CTEST_ARGS=(-LE "browser|python")
else
  deploy/build.sh -DPARITY_SANITIZE=
  CTEST_ARGS=()
fi
cd "${PARITY_BUILD_DIR:-build}"
ctest --output-on-failure -j 2 --timeout 600 "${CTEST_ARGS[@]}"
