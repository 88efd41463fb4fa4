#!/usr/bin/env bash
# Opt-in load soak (not in the default test run): AGENTS concurrent agents upload target runs
# against one golden run in a loop for SECONDS on loopback. Prints throughput, p50/p99 verdict
# latency (each agent's own measure, pooled), parityd's resident memory at the start and at the
# end (and its growth), and the error count (non-zero exits other than precision failures).
#   tests/soak/load_soak.sh [AGENTS=64] [SECONDS=600] [extra parityd flags...]
set -euo pipefail
cd "$(dirname "$0")/../.."
AGENTS="${1:-64}"; SECONDS_TOTAL="${2:-600}"; shift 2 || shift $# || true
BUILD="${PARITY_BUILD_DIR:-build}"
PY="${PARITY_PYTHON:-/usr/bin/python3}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/parity-load.XXXXXX")"
trap '[ -z "${PID:-}" ] || kill -TERM "$PID" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
"$PY" - "$WORK" <<'PY'
import os, sys
import numpy as np
work = sys.argv[1]
rng = np.random.default_rng(3)
for side in ("golden", "target"):
    os.makedirs(os.path.join(work, side))
for k in range(40):  # 40 tensors of 4-64 KiB
    g = rng.standard_normal(1024 * (1 + k % 16), dtype=np.float32)
    t = g + np.float32(1e-4) * rng.standard_normal(g.size, dtype=np.float32)
    if k == 20:
        t = -t
    np.save(os.path.join(work, "golden", "t%02d.npy" % k), g)
    np.save(os.path.join(work, "target", "t%02d.npy" % k), t)
PY
"$BUILD"/server/parityd --data-dir "$WORK/data" --listen 127.0.0.1:0 --port-file "$WORK/port" \
  --max-streams "$((AGENTS + 8))" --max-streams-per-project "$((AGENTS + 8))" "$@" 2>"$WORK/log" &
PID=$!
for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.1; done
ADDR="127.0.0.1:$(cat "$WORK/port")"
"$BUILD"/client/parity-agent upload "$WORK/golden" --server "$ADDR" --project load --role golden \
  --run-id-file "$WORK/golden.id" --no-color > /dev/null
GOLDEN="$(cat "$WORK/golden.id")"
sleep 1
RSS_START=$(awk '/VmRSS/ {print $2}' /proc/$PID/status)
END_AT=$(( $(date +%s) + SECONDS_TOTAL ))
START=$(date +%s.%N)
for a in $(seq "$AGENTS"); do
  (
    n=0
    while [ "$(date +%s)" -lt "$END_AT" ]; do
      n=$((n + 1))
      rc=0
      "$BUILD"/client/parity-agent upload "$WORK/target" --server "$ADDR" --project load --role target \
        --against "$GOLDEN" --no-dedup --retry-seconds 0 --json > "$WORK/a$a.$n.json" 2> "$WORK/a$a.$n.err" || rc=$?
      echo "$rc" >> "$WORK/a$a.rc"
    done
  ) &
done
# Resident memory is sampled once caches have filled (after a fifth of the run, at most 60 s) and
# at the end: the growth between the two is what the soak watches.
WARM=$(( SECONDS_TOTAL / 5 < 60 ? SECONDS_TOTAL / 5 : 60 ))
sleep "$WARM"
RSS_WARM=$(awk '/VmRSS/ {print $2}' /proc/$PID/status)
wait $(jobs -p | grep -v "^$PID$") 2>/dev/null || true
END=$(date +%s.%N)
RSS_END=$(awk '/VmRSS/ {print $2}' /proc/$PID/status)
"$PY" - "$WORK" "$START" "$END" "$RSS_WARM" "$RSS_END" "$AGENTS" "$RSS_START" <<'PY'
import glob, json, os, sys
work, s, e = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
rss0, rss1, agents, rss_idle = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
uploads = errors = items = 0
lat = []
for f in glob.glob(os.path.join(work, "a*.rc")):
    for line in open(f):
        uploads += 1
        if line.strip() not in ("0", "1"):
            errors += 1
for f in glob.glob(os.path.join(work, "a*.json")):
    try:
        j = json.load(open(f))
    except ValueError:
        continue
    items += j.get("items_acknowledged", 0)
    v = j.get("verdict_latency_ms", {})
    if v.get("count"):
        lat.append((v["p50"], v["p99"]))
secs = e - s
p50 = sorted(x for x, _ in lat)[len(lat) // 2] if lat else 0
p99 = sorted(y for _, y in lat)[int(len(lat) * 0.99)] if lat else 0
print("%d agents for %.0f s: %d uploads, %d items (%.0f items/s), %d errors" % (agents, secs, uploads, items, items / secs, errors))
print("verdict latency: median of per-upload p50 %.1f ms, 99th percentile of per-upload p99 %.1f ms" % (p50, p99))
print("parityd RSS: %.1f MiB idle, %.1f MiB after warm-up, %.1f MiB at end (%+.1f%% from warm-up)" % (
    rss_idle / 1024, rss0 / 1024, rss1 / 1024, 100.0 * (rss1 - rss0) / rss0))
sys.exit(1 if errors else 0)
PY
