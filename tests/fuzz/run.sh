#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for SECONDS on a copy of
# its seed corpus (tests/fuzz/corpus/<target>/). Exits non-zero when a target crashes; the
# crashing input is left in $PARITY_FUZZ_OUT (default build-fuzz/findings/).
#   tests/fuzz/run.sh [SECONDS=15] [target...]
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_EACH="${1:-15}"; shift || true
BUILD="${PARITY_FUZZ_BUILD_DIR:-build-fuzz}"
OUT="${PARITY_FUZZ_OUT:-$BUILD/findings}"
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(npy safetensors pt dump_json ge_dump request result_blob escape checkers)
mkdir -p "$BUILD"
# The build's output goes to a log, shown when the build fails (set -e would otherwise end the
# script without a word).
if ! { CC=clang CXX=clang++ cmake -S . -B "$BUILD" -G Ninja -DPARITY_FUZZ=ON \
         -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build "$BUILD" -j2; } > "$BUILD/build.log" 2>&1; then
  echo "fuzz: the build failed; the end of $BUILD/build.log:" >&2
  tail -30 "$BUILD/build.log" >&2
  exit 1
fi
mkdir -p "$OUT"
status=0
for t in "${TARGETS[@]}"; do
  corpus="$BUILD/corpus/$t"
  mkdir -p "$corpus"
  cp -n tests/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
  log="$OUT/$t.log"
  if "$BUILD"/tests/fuzz/"${t}_fuzz" "$corpus" -max_total_time="$SECONDS_EACH" -max_len=65536 \
      -rss_limit_mb=2048 -artifact_prefix="$OUT/$t-" -print_final_stats=1 > "$log" 2>&1; then
    execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | awk '{print $2}')
    echo "fuzz $t: ${SECONDS_EACH}s, $execs executions, coverage $cov edges, no crash"
  else
    echo "fuzz $t: CRASH, see $log and $OUT/$t-*" >&2
    tail -40 "$log" >&2
    status=1
  fi
done
exit $status
