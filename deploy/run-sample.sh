#!/usr/bin/env bash
# The main job: installs dependencies, builds, starts parityd on a fresh SQLite file (loopback
# only), uploads the bundled golden and target sample dumps with parity-agent, and prints the
# verdicts as they stream back, then the job summary naming the first culprit.
#   deploy/run-sample.sh [--dashboard] [parity-agent flags...]
# --dashboard: parityd also serves HTTP on 127.0.0.1:$PARITY_HTTP_PORT (8080) and keeps running
# after the upload, with the sample's job on its dashboard, until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
DASHBOARD=0
if [ "${1:-}" = "--dashboard" ]; then
  DASHBOARD=1
  shift
fi
deploy/install-deps.sh
deploy/build.sh
BUILD="${PARITY_BUILD_DIR:-build}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/parity-sample.XXXXXX")"
cleanup() {
  if [ -n "${DAEMON_PID:-}" ] && kill -0 "$DAEMON_PID" 2>/dev/null; then
    kill -TERM "$DAEMON_PID" && wait "$DAEMON_PID" || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

HTTP_FLAGS=()
if [ "$DASHBOARD" = 1 ]; then HTTP_FLAGS=(--http-listen "127.0.0.1:${PARITY_HTTP_PORT:-8080}"); fi
"$BUILD"/server/parityd --data-dir "$WORK/data" --listen 127.0.0.1:0 --port-file "$WORK/port" \
  "${HTTP_FLAGS[@]}" 2> "$WORK/parityd.log" &
DAEMON_PID=$!
for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.1; done
if [ ! -s "$WORK/port" ]; then cat "$WORK/parityd.log" >&2; exit 2; fi
SERVER="127.0.0.1:$(cat "$WORK/port")"
echo "parityd listening on $SERVER (data in $WORK/data)"

echo "== uploading the golden run"
"$BUILD"/client/parity-agent upload tests/data/sample/golden --server "$SERVER" \
  --project sample --role golden --label build=sample --run-id-file "$WORK/golden"
echo "== uploading the target run, compared against the golden run as it arrives"
set +e
"$BUILD"/client/parity-agent upload tests/data/sample/target --server "$SERVER" \
  --project sample --role target --against "$(cat "$WORK/golden")" "$@"
rc=$?
set -e
# Exit code 1 means "precision failures found", which is what the sample is built to show.
if [ "$rc" -eq 1 ]; then
  echo "(exit code 1: precision failures found, as expected for this sample)"
  rc=0
fi
if [ "$DASHBOARD" = 1 ] && [ "$rc" -eq 0 ]; then
  echo "dashboard: http://127.0.0.1:${PARITY_HTTP_PORT:-8080}/ (Ctrl-C stops parityd)"
  wait "$DAEMON_PID" || true
fi
exit "$rc"
