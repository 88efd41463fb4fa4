#!/usr/bin/env bash
# End-to-end upload rate on loopback: generates SIZE_MB of float32 .npy tensors (16 MiB each),
# starts parityd on a fresh data directory, uploads them with parity-agent (golden run, full
# data, no comparison) and prints the rate and the daemon's peak resident memory.
#   tests/bench/upload_rate.sh [SIZE_MB=1024] [extra parityd flags...]
set -euo pipefail
cd "$(dirname "$0")/../.."
SIZE_MB="${1:-1024}"; shift || true
BUILD="${PARITY_BUILD_DIR:-build}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/parity-bench.XXXXXX")"
trap '[ -z "${PID:-}" ] || kill -TERM "$PID" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
python3 - "$WORK/dump" "$SIZE_MB" <<'PY'
import os, sys
out, size_mb = sys.argv[1], int(sys.argv[2])
os.makedirs(out)
per = 16 << 20
n = max(1, (size_mb << 20) // per)
count = per // 4
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }" % count
header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
block = os.urandom(per)
for i in range(n):
    with open(os.path.join(out, "t%04d.npy" % i), "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode())
        f.write(block[i % 7:] + block[:i % 7])  # distinct contents per file (no dedup)
PY
BYTES=$(du -sb "$WORK/dump" | cut -f1)
"$BUILD"/server/parityd --data-dir "$WORK/data" --listen 127.0.0.1:0 --port-file "$WORK/port" "$@" 2>"$WORK/log" &
PID=$!
for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.1; done
# The same bytes uploaded with read-ahead 4 (the default) and 0, alternately, twice each.
for RA in 4 0 4 0; do
  START=$(date +%s.%N)
  "$BUILD"/client/parity-agent upload "$WORK/dump" --server "127.0.0.1:$(cat "$WORK/port")" --no-dedup \
    --project bench --role golden --no-color --read-ahead "$RA" > "$WORK/agent.log"
  END=$(date +%s.%N)
  RSS_KB=$(grep VmHWM /proc/$PID/status | awk '{print $2}')
  python3 - "$BYTES" "$START" "$END" "$RSS_KB" "$RA" <<'PY'
import sys
b, s, e, rss, ra = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
print("read-ahead %s: uploaded %.1f MB in %.2f s: %.0f MB/s; parityd peak RSS so far %.0f MiB" % (ra, b / 1e6, e - s, b / 1e6 / (e - s), rss / 1024))
PY
done
