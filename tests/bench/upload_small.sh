#!/usr/bin/env bash
# Many small tensors uploaded: `parity-agent upload-pair` of a model-like dump pair
# (tests/bench/gen_model_pair.py: SIZE_MB per side, ~10 % of the bytes in 4 KiB tensors, which
# makes most of the items) to one parityd per build directory given, the builds alternated
# PARITY_SMALL_ROUNDS (default 4) times. Prints, per upload: wall seconds, items per second (both
# sides), the agent's CPU seconds and parityd's (from /proc); at the end, parityd's CPU seconds per
# upload by thread role over rounds 2 on. The first upload to each parityd
# pays for its memory's first touch: compare the later rounds.
#   tests/bench/upload_small.sh [SIZE_MB=256] [BUILD_DIR...]   (default BUILD_DIR: build)
set -euo pipefail
cd "$(dirname "$0")/../.."
SIZE_MB="${1:-256}"; shift || true
BUILDS=("$@")
[ ${#BUILDS[@]} -gt 0 ] || BUILDS=(build)
PY="${PARITY_PYTHON:-/usr/bin/python3}"
ROUNDS="${PARITY_SMALL_ROUNDS:-4}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/parity-small.XXXXXX")"
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
"$PY" tests/bench/gen_model_pair.py "$WORK/dump" "$SIZE_MB"
sync
cat "$WORK"/dump/golden/* "$WORK"/dump/target/* > /dev/null
ITEMS=$(( $(ls "$WORK/dump/golden" | wc -l) + $(ls "$WORK/dump/target" | wc -l) ))
for i in "${!BUILDS[@]}"; do
  mkdir -p "$WORK/d$i"
  "${BUILDS[$i]}"/server/parityd --data-dir "$WORK/d$i/data" --listen 127.0.0.1:0 \
    --port-file "$WORK/d$i/port" 2>"$WORK/d$i/log" &
  PIDS+=($!)
done
for i in "${!BUILDS[@]}"; do
  for _ in $(seq 100); do [ -s "$WORK/d$i/port" ] && break; sleep 0.1; done
  [ -s "$WORK/d$i/port" ] || { echo "parityd (${BUILDS[$i]}) did not start:" >&2; cat "$WORK/d$i/log" >&2; exit 2; }
done
cpu() { awk '{printf "%.2f", ($14 + $15) / 100}' "/proc/$1/stat"; }
# parityd's CPU ticks by thread role (its threads are named: ingest, store-writer, compare, ...).
roles() {
  for t in /proc/"$1"/task/*; do echo "$(tr ' ' _ < "$t/comm") $(awk '{print $14 + $15}' "$t/stat")"; done |
    awk '{a[$1] += $2} END {for (k in a) print k, a[k]}' | sort
}
echo "dump pair: $ITEMS files ($(du -sh "$WORK/dump" | cut -f1)); per upload: wall, items/s, agent CPU-s, parityd CPU-s"
for r in $(seq "$ROUNDS"); do
  for i in "${!BUILDS[@]}"; do
    [ "$r" -eq 2 ] && roles "${PIDS[$i]}" > "$WORK/d$i/roles0"
    before=$(cpu "${PIDS[$i]}")
    /usr/bin/time -f "%e %U %S" -o "$WORK/time" "${BUILDS[$i]}"/client/parity-agent upload-pair \
      "$WORK/dump/golden" "$WORK/dump/target" --server "127.0.0.1:$(cat "$WORK/d$i/port")" \
      --no-dedup --project "round$r" > "$WORK/out" 2>&1 || [ $? -eq 1 ] || { cat "$WORK/out" >&2; exit 2; }
    after=$(cpu "${PIDS[$i]}")
    read -r wall user sys < "$WORK/time"
    awk -v b="${BUILDS[$i]}" -v r="$r" -v w="$wall" -v u="$user" -v s="$sys" -v n="$ITEMS" \
        -v c0="$before" -v c1="$after" \
        'BEGIN { printf "%-24s round %d: %.2f s  %.0f items/s  agent %.2f  parityd %.2f\n", b, r, w, n / w, u + s, c1 - c0 }'
  done
done
# Rounds 2..ROUNDS (a daemon that has been serving): parityd's CPU seconds per upload by role.
if [ "$ROUNDS" -ge 2 ]; then
  for i in "${!BUILDS[@]}"; do
    roles "${PIDS[$i]}" > "$WORK/d$i/roles1"
    echo "$(printf '%-24s' "${BUILDS[$i]}") parityd CPU-s per upload by thread, rounds 2-$ROUNDS: $(join "$WORK/d$i/roles0" "$WORK/d$i/roles1" |
      awk -v n=$((ROUNDS - 1)) -v hz="$(getconf CLK_TCK)" '{d = ($3 - $2) / hz / n; if (d >= 0.005) printf "%s %.3f  ", $1, d}')"
  done
fi
