#!/usr/bin/env bash
# Many uploads at once: N `parity-agent upload-pair`s (2N streams; parityd's --max-streams is
# 64) of the same generated dump pair (SIZE_MB in total, tests/bench/gen_e2e_dump.py), each
# into its own project, against one fresh parityd. Prints the aggregate rate, parityd's peak
# resident memory and its parts' peaks from its shutdown log (upload buffers, pooled buffers,
# O_DIRECT stages, held blobs), and checks that every upload ended with its verdicts (an agent
# that has not ended after PARITY_MANY_TIMEOUT seconds, default 600, counts as stalled).
#   tests/bench/many_uploads.sh [N=32] [SIZE_MB=256] [extra parityd flags...]
# PARITY_PYTHON picks the Python with numpy (default /usr/bin/python3, Debian's python3-numpy).
set -euo pipefail
cd "$(dirname "$0")/../.."
N="${1:-32}"; shift || true
SIZE_MB="${1:-256}"; shift || true
BUILD="${PARITY_BUILD_DIR:-build}"
PY="${PARITY_PYTHON:-/usr/bin/python3}"
LIMIT="${PARITY_MANY_TIMEOUT:-600}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/parity-many.XXXXXX")"
trap '[ -z "${PID:-}" ] || kill -TERM "$PID" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
"$PY" tests/bench/gen_e2e_dump.py "$WORK" "$SIZE_MB"
sync
BYTES=$(( $(du -sb "$WORK/golden" | cut -f1) + $(du -sb "$WORK/target" | cut -f1) ))
"$BUILD"/server/parityd --data-dir "$WORK/data" --listen 127.0.0.1:0 --port-file "$WORK/port" "$@" 2>"$WORK/log" &
PID=$!
for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.1; done
ADDR="127.0.0.1:$(cat "$WORK/port")"
mkdir "$WORK/out"
START=$(date +%s.%N)
AGENTS=()
for i in $(seq "$N"); do
  timeout "$LIMIT" "$BUILD"/client/parity-agent upload-pair "$WORK/golden" "$WORK/target" --server "$ADDR" \
    --project "p$i" --no-dedup --json > "$WORK/out/$i.json" 2> "$WORK/out/$i.err" &
  AGENTS+=($!)
done
CODES=""
for a in "${AGENTS[@]}"; do
  rc=0; wait "$a" || rc=$?
  CODES="$CODES $rc"
done
END=$(date +%s.%N)
RSS_KB=$(grep VmHWM /proc/$PID/status | awk '{print $2}')
kill -TERM "$PID"; wait "$PID" 2>/dev/null || true; PID=
"$PY" - "$N" "$BYTES" "$START" "$END" "$RSS_KB" "$WORK" "$CODES" <<'PY'
import json, re, sys
n, b, s, e, rss, work = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
codes = [int(c) for c in sys.argv[7].split()]
ok = 0
for i in range(1, n + 1):
    try:
        if "counts" in (json.load(open("%s/out/%d.json" % (work, i))).get("job") or {}):
            ok += 1
    except Exception:
        pass
log = open(work + "/log").read()
def last(pattern):
    m = re.findall(pattern, log)
    return m[-1] if m else "none"
print("%d upload-pairs at once (%d streams) of a %.2f GB dump pair: %.2f s, %.3f GB/s together"
      % (n, 2 * n, b / 1e9, e - s, n * b / (e - s) / 1e9))
print("uploads with their verdicts: %d of %d; agent exit codes: %s (124: stalled, killed after the timeout)"
      % (ok, n, " ".join(sorted(set(str(c) for c in codes)))))
import glob
lost = sum(open(f).read().count("reconnecting in") for f in glob.glob(work + "/out/*.err"))
print("streams the agents resumed after losing them: %d" % lost)
print("parityd peak resident memory: %.0f MiB" % (rss / 1024))
print("parts' peaks (not simultaneous): %s; spool stages (1 MiB each): %s; held blobs: %s"
      % (last(r'msg="memory peaks" ([^\n]*)'), last(r'msg="spool stages" ([^\n]*)'),
         last(r'msg="held blobs" ([^\n]*)')))
PY
