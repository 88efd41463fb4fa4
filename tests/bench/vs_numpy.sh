#!/usr/bin/env bash
# Parity versus the peer's arithmetic: `parity compare` (msprobe policy) against a numpy
# implementation of msprobe's six real-data metrics (numpy_msprobe.py), on the same generated
# dump pair, both pinned to one core, in one invocation. Prints GB/s for each (bytes of both
# dumps / wall time, msprobe's own definition) as the median of PARITY_VS_NUMPY_ROUNDS (3)
# alternated runs, the ratio of the medians, and the largest disagreement between the two on
# every metric. Beside them, each round times build/tests/read_floor, which only opens, reads and
# closes every file of both dumps (plain system calls, the bytes unused): the kernel's share,
# which a reader of these files by plain reads does not avoid, and so about the bound on the
# ratio (mapping the largest files instead of reading them saved ~4 % of it here).
# Last in each round, `parity compare` runs unpinned, on every CPU it may use (pairs compared
# side by side): its median and its speed-up over one core are printed too.
#   tests/bench/vs_numpy.sh [SIZE_MB_PER_SIDE=256]
# Needs Debian's python3-numpy (deploy/install-deps.sh installs it); $PARITY_PYTHON overrides.
# PARITY_KEEP=1 keeps the generated dumps and both JSON outputs (the path is under $TMPDIR).
set -euo pipefail
cd "$(dirname "$0")/../.."
SIZE_MB="${1:-256}"
BUILD="${PARITY_BUILD_DIR:-build}"
PY="${PARITY_PYTHON:-/usr/bin/python3}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/parity-vs-numpy.XXXXXX")"
trap '[ -n "${PARITY_KEEP:-}" ] || rm -rf "$WORK"' EXIT
"$PY" tests/bench/gen_model_pair.py "$WORK" "$SIZE_MB"
BYTES=$(( $(du -sb "$WORK/golden" | cut -f1) + $(du -sb "$WORK/target" | cut -f1) ))
# Written back before timing (otherwise the writeback of the generated files runs during the
# first timed command, parity's), and both start from a warm page cache.
sync
cat "$WORK"/golden/* "$WORK"/target/* > /dev/null

# Each side runs ROUNDS times, alternated (parity, numpy, parity, numpy...); the medians are
# compared. A first run after generating the files pays for memory the kernel has to compact
# for huge pages and for files just written back, whichever tool comes first.
ROUNDS="${PARITY_VS_NUMPY_ROUNDS:-3}"
TIMES=""
for r in $(seq "$ROUNDS"); do
  t0=$(date +%s.%N)
  taskset -c 0 "$BUILD"/client/parity compare "$WORK/golden" "$WORK/target" --json \
    > "$WORK/parity.json" || [ $? -eq 1 ]
  t1=$(date +%s.%N)
  taskset -c 0 "$PY" tests/bench/numpy_msprobe.py "$WORK/golden" "$WORK/target" --json "$WORK/numpy.json"
  t2=$(date +%s.%N)
  taskset -c 0 "$BUILD"/tests/read_floor "$WORK/golden" "$WORK/target" > /dev/null
  t3=$(date +%s.%N)
  "$BUILD"/client/parity compare "$WORK/golden" "$WORK/target" --json > /dev/null || [ $? -eq 1 ]
  t4=$(date +%s.%N)
  TIMES="$TIMES $t0,$t1,$t2,$t3,$t4"
done

"$PY" - "$BYTES" "$TIMES" "$WORK/parity.json" "$WORK/numpy.json" <<'PY'
import json, math, os, statistics, sys
b = int(sys.argv[1])
runs = [[float(x) for x in r.split(",")] for r in sys.argv[2].split()]
tp = [t1 - t0 for t0, t1, t2, t3, t4 in runs]
tn = [t2 - t1 for t0, t1, t2, t3, t4 in runs]
tf = [t3 - t2 for t0, t1, t2, t3, t4 in runs]
ta = [t4 - t3 for t0, t1, t2, t3, t4 in runs]
p = {it["name"]: it.get("metrics", {}) for it in json.load(open(sys.argv[3]))["items"]}
n = json.load(open(sys.argv[4]))
worst = {}
for name, m in n.items():
    if m is None or name not in p:
        continue
    for k, v in m.items():
        q = p[name].get(k)
        if not isinstance(q, (int, float)):
            worst[k] = (float("inf"), name); continue
        d = 0.0 if (math.isnan(v) and math.isnan(q)) else abs(q - v) / max(abs(v), 1e-300)
        worst[k] = max(worst.get(k, (0.0, "")), (d, name))
mp, mn = statistics.median(tp), statistics.median(tn)
pg, ng = b / mp / 1e9, b / mn / 1e9
fmt = lambda ts: " ".join("%.2f" % t for t in ts)
print("dump pair: %.1f MB (both sides), %d pairs checked against numpy" % (b / 1e6, len(n)))
print("parity compare (1 core): median %.2f s  %.3f GB/s  (runs: %s s)" % (mp, pg, fmt(tp)))
print("numpy msprobe  (1 core): median %.2f s  %.3f GB/s  (runs: %s s)" % (mn, ng, fmt(tn)))
print("ratio parity/numpy (medians): %.2fx" % (pg / ng))
ma = statistics.median(ta)
print("parity compare (all %d CPUs it may use, not pinned): median %.3f s  %.3f GB/s  (runs: %s s), %.2fx one core"
      % (len(os.sched_getaffinity(0)), ma, b / ma / 1e9, " ".join("%.3f" % t for t in ta), mp / ma))
mf = statistics.median(tf)
print("reading every file, nothing else (read_floor, 1 core): median %.3f s  (runs: %s s)"
      % (mf, " ".join("%.3f" % t for t in tf)))
print("  parity takes %.2fx the reading floor; numpy / floor = %.1fx, the most parity/numpy could be here"
      % (mp / mf, mn / mf))
for k, (d, name) in sorted(worst.items()):
    print("  largest relative disagreement, %s: %.3g (%s)" % (k, d, name))
PY
