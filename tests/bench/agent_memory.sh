#!/usr/bin/env bash
# The agent's memory and one large tensor: uploads a generated float32 .npy of SIZE_MB (a golden
# run, to a parityd on loopback) and prints the agent's peak resident memory, its CPU seconds
# and the upload's wall time (tests/bench/peak_rss.py). An agent that loads tensors whole needs
# at least SIZE_MB; one that sends them from their files in pieces does not grow with it.
#   tests/bench/agent_memory.sh [SIZE_MB=1024] [extra parity-agent flags, e.g. --no-dedup]
set -euo pipefail
cd "$(dirname "$0")/../.."
SIZE_MB="${1:-1024}"; shift || true
BUILD="${PARITY_BUILD_DIR:-build}"
PY="${PARITY_PYTHON:-/usr/bin/python3}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/parity-agentmem.XXXXXX")"
trap '[ -z "${PID:-}" ] || kill -TERM "$PID" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
mkdir -p "$WORK/dump"
"$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.random.default_rng(1).standard_normal($SIZE_MB << 18, dtype=np.float32))" \
  "$WORK/dump/w.npy"
sync
"$BUILD"/server/parityd --data-dir "$WORK/data" --listen 127.0.0.1:0 --port-file "$WORK/port" 2>"$WORK/log" &
PID=$!
for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.1; done
START=$(date +%s.%N)
"$PY" tests/bench/peak_rss.py "$WORK/agent" "$BUILD"/client/parity-agent upload "$WORK/dump" \
  --server "127.0.0.1:$(cat "$WORK/port")" --project bench --role golden --no-color "$@" > "$WORK/out"
END=$(date +%s.%N)
read -r RSS USR SYS < "$WORK/agent"
awk -v mb="$SIZE_MB" -v rss="$RSS" -v u="$USR" -v s="$SYS" -v t0="$START" -v t1="$END" 'BEGIN {
  printf "one %d MiB float32 tensor: agent peak RSS %.0f MiB, agent CPU %.2f s (user %.2f, sys %.2f), upload %.2f s\n",
         mb, rss / 1024, u + s, u, s, t1 - t0 }'
