#!/usr/bin/env bash
# The dashboard's API calls on a job of RESULTS results (default 1,000,000: an msprobe
# statistics dump pair of RESULTS/2 operators from tests/data/make_stats_dump.py, uploaded with
# parity-agent upload-pair into a fresh parityd): each call a job page makes, timed with curl
# cold (first call after the job finished) and warm (the same call again), then the same after
# parityd restarted (nothing in memory). Figures for docs/performance.md; nothing is asserted.
#   tests/bench/dashboard_api.sh [RESULTS]
set -euo pipefail
cd "$(dirname "$0")/../.."
RESULTS="${1:-1000000}"
BUILD="${PARITY_BUILD_DIR:-build}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/parity-dashboard-bench.XXXXXX")"
cleanup() {
  if [ -n "${PID:-}" ]; then kill -TERM "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
python3 tests/data/make_stats_dump.py "$WORK/dump" $((RESULTS / 2))
start_parityd() {
  rm -f "$WORK/port" "$WORK/http_port"
  "$BUILD"/server/parityd --data-dir "$WORK/data" --listen 127.0.0.1:0 --port-file "$WORK/port" \
    --http-listen 127.0.0.1:0 --http-port-file "$WORK/http_port" 2>> "$WORK/parityd.log" &
  PID=$!
  for _ in $(seq 100); do [ -s "$WORK/http_port" ] && break; sleep 0.1; done
  H="http://127.0.0.1:$(cat "$WORK/http_port")"
}
# Each call a job page makes: cold (the first time), then warm (the same call again).
table() {
  local J="$H/api/v1/jobs/$JOB"
  printf '%-70s %10s %10s\n' "call ($1)" "cold ms" "warm ms"
  for path in "" "/series?buckets=600" "/results?culprits=CULPRIT&page_size=100" \
              "/results?culprits=PROPAGATED&page_size=1000" "/results?page_size=50" \
              "/results?page_size=50&page_token=900000" "/results?verdicts=WARN&page_size=50" \
              "/results?sort_metric=Max%20diff&descending=true&page_size=50" \
              "/summary?module_tree=true&worst_per_metric=1"; do
    cold=$(curl -s -o /dev/null -w '%{time_total}' "$J$path")
    warm=$(curl -s -o /dev/null -w '%{time_total}' "$J$path")
    awk -v p="GET /api/v1/jobs/{job}$path" -v c="$cold" -v w="$warm" 'BEGIN { printf "%-70s %10.0f %10.0f\n", p, c * 1000, w * 1000 }'
  done
}
start_parityd
start=$(date +%s%N)
"$BUILD"/client/parity-agent upload-pair "$WORK/dump/golden" "$WORK/dump/target" \
  --server "127.0.0.1:$(cat "$WORK/port")" --project bench > /dev/null || true
echo "upload-pair of $RESULTS results: $(( ($(date +%s%N) - start) / 1000000 )) ms"
JOB=$(curl -s "$H/api/v1/projects/bench/jobs?page_size=1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["jobId"])')
table "right after the job finished"
kill -TERM "$PID" && wait "$PID" || true
start_parityd
table "after parityd restarted"
