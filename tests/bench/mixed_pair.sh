#!/usr/bin/env bash
# A mixed-precision pair as a bf16 port produces it: an msprobe dump of a ResNet-50-like forward
# step, float32 golden against bfloat16 target, .pt files (tests/bench/gen_resnet_pair.py; about
# 630 tensors a side, 2.1 GB in all at the default batch of 4). With a warm page cache, prints:
# - the read floor: build/tests/read_floor reading every tensor file of both sides (plain
#   open/pread/close, the bytes unused), best of PARITY_MIXED_ROUNDS (3) runs;
# - `parity compare G T --policy msprobe --csv` on every core, best of as many runs, its GB/s
#   (bytes of both dumps / wall time) and its ratio to the floor;
# - `parity-agent upload-pair` into a fresh parityd on loopback, once per round: GB/s and
#   parityd's peak resident memory.
# Nothing is asserted: figures for docs/performance.md.
#   tests/bench/mixed_pair.sh [BATCH=4] [TARGET_DTYPE=bfloat16|float16]
# PARITY_PYTHON picks the Python with numpy (default /usr/bin/python3, Debian's python3-numpy).
set -euo pipefail
cd "$(dirname "$0")/../.."
BATCH="${1:-4}"
TARGET_DTYPE="${2:-bfloat16}"
BUILD="${PARITY_BUILD_DIR:-build}"
PY="${PARITY_PYTHON:-/usr/bin/python3}"
ROUNDS="${PARITY_MIXED_ROUNDS:-3}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/parity-mixed.XXXXXX")"
trap '[ -z "${PID:-}" ] || kill -TERM "$PID" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
"$PY" tests/bench/gen_resnet_pair.py "$WORK" "$BATCH" "$TARGET_DTYPE"
G="$WORK/golden" T="$WORK/target"
BYTES=$(( $(du -sb "$G" | cut -f1) + $(du -sb "$T" | cut -f1) ))
sync
cat "$G"/dump_tensor_data/* "$T"/dump_tensor_data/* > /dev/null
best() { sort -g | head -1; }
secs() { local t0 t1; t0=$(date +%s.%N); "$@" > /dev/null; t1=$(date +%s.%N); awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }'; }
FLOOR=$(for _ in $(seq "$ROUNDS"); do secs "$BUILD"/tests/read_floor "$G/dump_tensor_data" "$T/dump_tensor_data"; done | best)
compare() { "$BUILD"/client/parity compare "$G" "$T" --policy msprobe --csv "$WORK/out.csv" || [ $? -eq 1 ]; }
COMPARE=$(for _ in $(seq "$ROUNDS"); do secs compare; done | best)
"$BUILD"/client/parity compare "$G" "$T" --policy msprobe > "$WORK/compare.txt" || [ $? -eq 1 ]
printf 'pair: %s bytes, %s\n' "$BYTES" "$(grep '^Summary' "$WORK/compare.txt")"
awk -v b="$BYTES" -v f="$FLOOR" -v c="$COMPARE" 'BEGIN {
  printf "read floor          %6.3f s  %5.2f GB/s\n", f, b / f / 1e9
  printf "parity compare      %6.3f s  %5.2f GB/s  %4.2fx the floor\n", c, b / c / 1e9, c / f }'
"$BUILD"/server/parityd --data-dir "$WORK/data" --listen 127.0.0.1:0 --port-file "$WORK/port" 2> "$WORK/log" &
PID=$!
for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.1; done
# Exit 1: the pair has failing operators.
upload() { "$BUILD"/client/parity-agent upload-pair "$G" "$T" --server "127.0.0.1:$(cat "$WORK/port")" \
             --project bench --no-dedup || [ $? -eq 1 ]; }
for r in $(seq "$ROUNDS"); do
  UP=$(secs upload)
  HWM=$(awk '/VmHWM/ {print $2}' /proc/$PID/status)
  awk -v b="$BYTES" -v u="$UP" -v h="$HWM" -v r="$r" 'BEGIN {
    printf "upload-pair round %d %6.3f s  %5.2f GB/s  parityd peak %d MiB\n", r, u, b / u / 1e9, h / 1024 }'
done
