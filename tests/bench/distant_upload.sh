#!/usr/bin/env bash
# An upload over a distant link: `parity-agent upload-pair --no-dedup` of a generated dump pair
# (SIZE_MB in total, tests/bench/gen_e2e_dump.py) to a fresh parityd through
# tests/bench/delay_proxy.py, which delays every byte by RTT_MS/2 each way. Prints the rate and
# parityd's peak resident memory. Extra arguments go to parityd (e.g. --stream-window-bytes=0).
#   tests/bench/distant_upload.sh [RTT_MS=20] [SIZE_MB=256] [parityd flags...]
# PARITY_PYTHON picks the Python with numpy (default /usr/bin/python3, Debian's python3-numpy).
set -euo pipefail
cd "$(dirname "$0")/../.."
RTT_MS="${1:-20}"; shift || true
SIZE_MB="${1:-256}"; shift || true
BUILD="${PARITY_BUILD_DIR:-build}"
PY="${PARITY_PYTHON:-/usr/bin/python3}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/parity-distant.XXXXXX")"
trap 'for p in ${PID:-} ${PROXY:-}; do kill -TERM "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
"$PY" tests/bench/gen_e2e_dump.py "$WORK" "$SIZE_MB" > /dev/null
sync
BYTES=$(( $(du -sb "$WORK/golden" | cut -f1) + $(du -sb "$WORK/target" | cut -f1) ))
"$BUILD"/server/parityd --data-dir "$WORK/data" --listen 127.0.0.1:0 --port-file "$WORK/port" "$@" 2>"$WORK/log" &
PID=$!
for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.1; done
PORT=$(cat "$WORK/port")
# A free port for the proxy: the kernel picks one, released just before the proxy binds it.
PROXY_PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$PY" tests/bench/delay_proxy.py "$PROXY_PORT" "$PORT" "$(awk -v r="$RTT_MS" 'BEGIN { print r / 2000 }')" &
PROXY=$!
sleep 0.5
START=$(date +%s.%N)
rc=0
"$BUILD"/client/parity-agent upload-pair "$WORK/golden" "$WORK/target" --server "127.0.0.1:$PROXY_PORT" \
  --project distant --no-dedup --json > "$WORK/out.json" 2> "$WORK/agent.err" || rc=$?
END=$(date +%s.%N)
RSS_KB=$(grep VmHWM /proc/$PID/status | awk '{print $2}')
LOST=$(grep -c "reconnecting in" "$WORK/agent.err" || true)
"$PY" - "$BYTES" "$START" "$END" "$RSS_KB" "$RTT_MS" "$rc" "$WORK/out.json" "$*" "$LOST" <<'PY'
import json, sys
b, s, e, rss, rtt, rc, out, flags = (int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]),
                                     int(sys.argv[4]), sys.argv[5], int(sys.argv[6]), sys.argv[7], sys.argv[8])
lost = int(sys.argv[9])
try:
    counts = (json.load(open(out)).get("job") or {}).get("counts")
except Exception:
    counts = None
print("upload-pair of %.2f GB over a %s ms round trip (parityd flags: %s): %.2f s, %.1f MB/s; "
      "parityd peak %.0f MiB; agent exit %d; streams resumed %d; verdicts %s"
      % (b / 1e9, rtt, flags or "defaults", e - s, b / (e - s) / 1e6, rss / 1024, rc, lost, counts))
PY
