#!/usr/bin/env bash
# One measured upload on a fresh parityd, for A/B runs of two builds or two sets of flags:
# the e2e dump pair's golden side, then its target side against it (no dedup), printing the
# wall time of each, GB/s, each agent's CPU seconds, parityd's CPU seconds, context switches
# (all its threads) and page faults over the two. With PARITY_PAIR_MODE=golden3, the golden
# side three times instead, with the agent's default dedup offers (the second and third find
# everything held), printing each upload's wall time and parityd's CPU seconds; with
# PARITY_PAIR_MODE=golden4, the golden side four times without dedup (four runs, every byte sent
# and written each time, no files deleted in between), printing each upload's wall time, the
# agent's and parityd's CPU seconds (the first upload of a fresh parityd pays for its memory's
# first touch: compare the other three).
#   tests/bench/upload_pair.sh DUMP_DIR [extra parityd flags...]
# DUMP_DIR is generated (tests/bench/gen_e2e_dump.py, PARITY_PAIR_SIZE_MB, default 2048) when
# it has no golden/ and target/, and kept for the next run. PARITY_BUILD_DIR picks the build.
# PARITY_PAIR_PROFILE=1 (needs perf) also samples parityd (perf record -F 4000 -e cpu-clock)
# and prints the share of its samples zeroing fresh pages (clear_page_erms), copying, hashing
# (SHA-256) and checking CRC-32s.
# Like e2e_rate.sh, it first waits until 65 s have passed since a run of either deleted its
# files (ext4 without a journal; see e2e_rate.sh); PARITY_E2E_NO_WAIT=1 skips the wait.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 1 ] || { echo "usage: $0 DUMP_DIR [parityd flags...]" >&2; exit 2; }
DUMP="$1"; shift
BUILD="${PARITY_BUILD_DIR:-build}"
PY="${PARITY_PYTHON:-/usr/bin/python3}"
MODE="${PARITY_PAIR_MODE:-pair}"
case "$MODE" in pair|golden3|golden4) ;; *) echo "PARITY_PAIR_MODE must be pair, golden3 or golden4" >&2; exit 2;; esac
if [ ! -d "$DUMP/golden" ] || [ ! -d "$DUMP/target" ]; then
  mkdir -p "$DUMP"
  "$PY" tests/bench/gen_e2e_dump.py "$DUMP" "${PARITY_PAIR_SIZE_MB:-2048}"
  sync
fi
STAMP="${TMPDIR:-/tmp}/parity-e2e.last-cleanup"
if [ "${PARITY_E2E_NO_WAIT:-0}" != 1 ] && [ -e "$STAMP" ]; then
  AGE=$(( $(date +%s) - $(stat -c %Y "$STAMP") ))
  [ "$AGE" -ge 65 ] || sleep $((65 - AGE))
fi
WORK="$(mktemp -d "${TMPDIR:-/tmp}/parity-pair.XXXXXX")"
trap '[ -z "${PID:-}" ] || kill -TERM "$PID" 2>/dev/null || true; [ -z "${PERF:-}" ] || kill -INT "$PERF" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"; touch "$STAMP"' EXIT
"$BUILD"/server/parityd --data-dir "$WORK/data" --listen 127.0.0.1:0 --port-file "$WORK/port" "$@" 2>"$WORK/log" &
PID=$!
for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.1; done
[ -s "$WORK/port" ] || { echo "parityd did not start:" >&2; cat "$WORK/log" >&2; exit 2; }
ADDR="127.0.0.1:$(cat "$WORK/port")"
cpu() { awk '{print $14 + $15}' "/proc/$PID/stat"; }  # clock ticks, user + system
switches() { cat /proc/"$PID"/task/*/status 2>/dev/null | awk '/ctxt_switches/ {s += $2} END {print s}'; }
if [ "${PARITY_PAIR_PROFILE:-0}" = 1 ]; then
  perf record -q -F 4000 -e cpu-clock -p "$PID" -o "$WORK/perf.data" > /dev/null 2>&1 &
  PERF=$!
  sleep 0.3
fi
agent() {  # the agent's user and system CPU seconds to $1, the rest of the arguments to the agent
  local out="$1"; shift
  local TIMEFORMAT="%U %S"
  { time "$BUILD"/client/parity-agent upload "$@" --server "$ADDR" --project bench --no-color \
      > /dev/null 2>&1 || [ $? -eq 1 ] ; } 2> "$out"
}
TICK=$(getconf CLK_TCK)
if [ "$MODE" = golden3 ]; then
  LINE="golden side uploaded three times with dedup offers:"
  for i in 1 2 3; do
    c0=$(cpu); t0=$(date +%s.%N)
    agent "$WORK/a$i" "$DUMP/golden" --role golden
    t1=$(date +%s.%N); c1=$(cpu)
    LINE="$LINE $(awk -v a="$t0" -v b="$t1" -v c="$c0" -v d="$c1" -v k="$TICK" 'BEGIN {printf "%.2f s (parityd %.2f CPU-s)", b - a, (d - c) / k}')"
  done
  echo "$LINE"
  exit 0
fi
if [ "$MODE" = golden4 ]; then
  LINE="golden side uploaded four times without dedup:"
  for i in 1 2 3 4; do
    c0=$(cpu); t0=$(date +%s.%N)
    agent "$WORK/a$i" "$DUMP/golden" --role golden --no-dedup
    t1=$(date +%s.%N); c1=$(cpu)
    LINE="$LINE $(awk -v a="$t0" -v b="$t1" -v c="$c0" -v d="$c1" -v k="$TICK" -v g="$(cat "$WORK/a$i")" 'BEGIN {split(g, G, " "); printf "%.2f s (agent %.2f, parityd %.2f CPU-s)", b - a, G[1] + G[2], (d - c) / k}')"
  done
  echo "$LINE"
  exit 0
fi
BYTES=$(( $(du -sb "$DUMP/golden" | cut -f1) + $(du -sb "$DUMP/target" | cut -f1) ))
c0=$(cpu); s0=$(switches); f0=$(awk '{print $10}' "/proc/$PID/stat"); t0=$(date +%s.%N)
agent "$WORK/g" "$DUMP/golden" --role golden --no-dedup --run-id-file "$WORK/golden.id"
t1=$(date +%s.%N)
agent "$WORK/t" "$DUMP/target" --role target --against "$(cat "$WORK/golden.id")" --no-dedup
t2=$(date +%s.%N); c1=$(cpu); s1=$(switches); f1=$(awk '{print $10}' "/proc/$PID/stat")
awk -v b="$BYTES" -v t0="$t0" -v t1="$t1" -v t2="$t2" -v c="$((c1 - c0))" -v k="$TICK" \
    -v s="$((s1 - s0))" -v f="$((f1 - f0))" -v g="$(cat "$WORK/g")" -v t="$(cat "$WORK/t")" 'BEGIN {
  split(g, G, " "); split(t, T, " ");
  printf "golden %.2f s, target %.2f s: %.3f GB/s | agent %.2f + %.2f CPU-s, parityd %.2f CPU-s, %d context switches, %d page faults\n",
    t1 - t0, t2 - t1, b / (t2 - t0) / 1e9, G[1] + G[2], T[1] + T[2], c / k, s, f }'
if [ -n "${PERF:-}" ]; then
  kill -INT "$PERF"; wait "$PERF" || true; PERF=
  perf report -i "$WORK/perf.data" --no-children --sort sym --stdio -g none 2>/dev/null |
    awk '/^# Samples:/ {n = $3} / clear_page_erms *$/ {z = $1} / __memmove_avx512_unaligned_erms *$|__memcpy_avx_unaligned_erms *$/ {m = $1}
         / sha256_block_data_order/ {h += $1} /Fold(Pclmul|Vpclmul)/ {c += $1}
         END {printf "parityd samples (4 kHz): %s, zeroing fresh pages %s, memmove %s, SHA-256 %.2f%%, CRC-32 %.2f%%\n",
                     n, z ? z : "0%", m ? m : "0%", h, c}'
fi
