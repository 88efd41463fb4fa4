#!/usr/bin/env bash
# Opt-in (not in the default test run): a well-behaved project's uploads with and without a
# hostile tenant beside it, in one invocation against one parityd. AGENTS agents of project
# "good" upload target runs against one golden run in a loop for SECONDS, first alone, then while
# build/tests/hostile_client (project "evil") holds idle upload streams and watches of a job that
# never ends and floods metadata and oversized requests. Prints the good project's upload rate,
# verdict latency p50/p99 and errors in both phases, and their ratios.
#   tests/soak/hostile_tenant.sh [SECONDS=60] [AGENTS=4] [extra parityd flags...]
# PARITY_HOSTILE_IDLE (30) and PARITY_HOSTILE_WATCHES (300) size the hostile tenant.
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_EACH="${1:-60}"; AGENTS="${2:-4}"; shift 2 || shift $# || true
BUILD="${PARITY_BUILD_DIR:-build}"
# The hostile tenant's idle uploads and watches; at the defaults its idle uploads leave one slot
# of its project's share (--max-streams-per-project, 32) to its metadata flood.
IDLE="${PARITY_HOSTILE_IDLE:-30}"; WATCHES="${PARITY_HOSTILE_WATCHES:-300}"
PY="${PARITY_PYTHON:-/usr/bin/python3}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/parity-hostile.XXXXXX")"
trap 'for p in ${HOSTILE:-} ${PID:-}; do kill -TERM "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
"$PY" - "$WORK" <<'PY'
import os, sys
import numpy as np
work = sys.argv[1]
rng = np.random.default_rng(5)
for side in ("golden", "target"):
    os.makedirs(os.path.join(work, side))
for k in range(40):  # 40 tensors of 4-64 KiB, one of them wrong
    g = rng.standard_normal(1024 * (1 + k % 16), dtype=np.float32)
    t = g + np.float32(1e-4) * rng.standard_normal(g.size, dtype=np.float32)
    if k == 20:
        t = -t
    np.save(os.path.join(work, "golden", "t%02d.npy" % k), g)
    np.save(os.path.join(work, "target", "t%02d.npy" % k), t)
PY
"$BUILD"/server/parityd --data-dir "$WORK/data" --listen 127.0.0.1:0 --port-file "$WORK/port" "$@" 2>"$WORK/log" &
PID=$!
for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.1; done
ADDR="127.0.0.1:$(cat "$WORK/port")"
"$BUILD"/client/parity-agent upload "$WORK/golden" --server "$ADDR" --project good --role golden \
  --run-id-file "$WORK/golden.id" --no-color > /dev/null
GOLDEN="$(cat "$WORK/golden.id")"

# Runs the good project's agents for SECONDS_EACH; their outputs go to $WORK/$1.*
phase() {
  local end_at=$(( $(date +%s) + SECONDS_EACH ))
  date +%s.%N > "$WORK/$1.start"
  for a in $(seq "$AGENTS"); do
    (
      n=0
      while [ "$(date +%s)" -lt "$end_at" ]; do
        n=$((n + 1)); rc=0
        "$BUILD"/client/parity-agent upload "$WORK/target" --server "$ADDR" --project good --role target \
          --against "$GOLDEN" --no-dedup --retry-seconds 0 --json > "$WORK/$1.a$a.$n.json" 2> "$WORK/$1.a$a.$n.err" || rc=$?
        echo "$rc" >> "$WORK/$1.a$a.rc"
      done
    ) &
  done
  wait $(jobs -p | grep -v -x -e "$PID" -e "${HOSTILE:-none}") 2>/dev/null || true
  date +%s.%N > "$WORK/$1.end"
}

phase alone
"$BUILD"/tests/hostile_client "$ADDR" "$IDLE" "$WATCHES" > "$WORK/hostile.out" 2>&1 &
HOSTILE=$!
for _ in $(seq 300); do grep -q "watches held" "$WORK/hostile.out" 2>/dev/null && break; sleep 0.1; done
phase beside
kill -TERM "$HOSTILE"; wait "$HOSTILE" || true
cat "$WORK/hostile.out"
"$PY" - "$WORK" "$AGENTS" <<'PY'
import glob, json, os, sys
work, agents = sys.argv[1], int(sys.argv[2])
def stats(phase):
    s = float(open(os.path.join(work, phase + ".start")).read())
    e = float(open(os.path.join(work, phase + ".end")).read())
    uploads = errors = items = 0
    p50s, p99s = [], []
    for f in glob.glob(os.path.join(work, phase + ".a*.rc")):
        for line in open(f):
            uploads += 1
            errors += line.strip() not in ("0", "1")
    for f in glob.glob(os.path.join(work, phase + ".a*.json")):
        try:
            j = json.load(open(f))
        except ValueError:
            continue
        items += j.get("items_acknowledged", 0)
        v = j.get("verdict_latency_ms", {})
        if v.get("count"):
            p50s.append(v["p50"]); p99s.append(v["p99"])
    p50 = sorted(p50s)[len(p50s) // 2] if p50s else 0
    p99 = sorted(p99s)[min(len(p99s) - 1, int(len(p99s) * 0.99))] if p99s else 0
    return {"uploads": uploads, "rate": items / (e - s), "p50": p50, "p99": p99, "errors": errors}
a, b = stats("alone"), stats("beside")
print("good project, %d agents   %12s %12s %8s" % (agents, "alone", "beside evil", "ratio"))
for key, label, fmt in (("uploads", "uploads", "%d"), ("rate", "items/s", "%.0f"),
                        ("p50", "verdict p50 ms", "%.1f"), ("p99", "verdict p99 ms", "%.1f"),
                        ("errors", "errors", "%d")):
    ratio = "%.2f" % (b[key] / a[key]) if a[key] else "-"
    print("%-26s %12s %12s %8s" % (label, fmt % a[key], fmt % b[key], ratio))
sys.exit(1 if a["errors"] or b["errors"] else 0)
PY
