#!/usr/bin/env bash
# Several parityd on one PostgreSQL store and one S3 bucket, on loopback (docs/scale-out.md): for
# each daemon count N, N daemons share a fresh database and bucket prefix; a golden run is
# uploaded to the first, then N agents upload the target side at once, one to each daemon, each
# against that golden run (N jobs, each daemon fetching the golden tensors it lacks from the
# bucket). The dump pair is tests/bench/gen_e2e_dump.py's (SIZE_MB in total, half a side).
# Prints per N: the targets' wall time and GB/s, and the CPU seconds per GB of target data of
# each daemon, of PostgreSQL (every server process), of the S3 server (s3rver, Node.js) and of the
# agents: on this machine's cores the processes compete, so the CPU seconds per GB are what
# project a larger deployment (docs/scale-out.md). The golden upload is reported apart. A
# baseline runs first in the same invocation: one daemon on the embedded default (SQLite and
# its spool), the golden then the target; each daemon's CPU per GB is also given as a ratio to it.
# PostgreSQL and s3rver are started here (tests/postgres.sh, tests/s3.sh), as for the tests.
#   tests/bench/cluster_rate.sh [SIZE_MB=1024] [COUNTS="1 2 3"]
# PARITY_PYTHON picks the Python with numpy (default /usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")/../.."
SIZE_MB="${1:-1024}"
COUNTS="${2:-1 2 3}"
BUILD="${PARITY_BUILD_DIR:-build}"
PY="${PARITY_PYTHON:-/usr/bin/python3}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/parity-cluster.XXXXXX")"
chmod 755 "$WORK"  # the PostgreSQL server runs as the postgres user when this runs as root
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -z "$p" ] || kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  tests/postgres.sh stop "$WORK/pg" >/dev/null 2>&1 || true
  tests/s3.sh stop "$WORK/s3" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
"$PY" tests/bench/gen_e2e_dump.py "$WORK" "$SIZE_MB"
sync
TARGET_BYTES=$(du -sb "$WORK/target" | cut -f1)
GOLDEN_BYTES=$(du -sb "$WORK/golden" | cut -f1)
URI="$(tests/postgres.sh start "$WORK/pg" | tail -1)"
ENDPOINT="$(tests/s3.sh start "$WORK/s3" | tail -1)"
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER
HZ=$(getconf CLK_TCK)
# CPU seconds (user + system) of a process, and of the processes under it that it waited for.
cpu_of() { awk -v hz="$HZ" '{printf "%.3f", ($14 + $15 + $16 + $17) / hz}' "/proc/$1/stat" 2>/dev/null || echo 0; }
# Every PostgreSQL server process: the postmaster with its reaped children, and the live ones.
pg_cpu() {
  local pm total
  pm=$(head -1 "$WORK/pg/data/postmaster.pid")
  total=$(cpu_of "$pm")
  for c in $(pgrep -P "$pm"); do total=$(awk -v a="$total" -v b="$(cpu_of "$c")" 'BEGIN {printf "%.3f", a + b}'); done
  echo "$total"
}
S3PID=$(cat "$WORK/s3/pid")
echo "dump: golden $(awk -v b="$GOLDEN_BYTES" 'BEGIN {printf "%.2f", b / 1e9}') GB, target $(awk -v b="$TARGET_BYTES" 'BEGIN {printf "%.2f", b / 1e9}') GB; $(nproc) cores"
# The baseline, in the same invocation: one daemon on the embedded default (SQLite, the spool).
mkdir -p "$WORK/base"
"$BUILD"/server/parityd --data-dir "$WORK/base/data" --listen 127.0.0.1:0 --port-file "$WORK/base/port" \
  2> "$WORK/base/log" &
PIDS=($!)
for _ in $(seq 200); do [ -s "$WORK/base/port" ] && break; sleep 0.1; done
BASE="127.0.0.1:$(cat "$WORK/base/port")"
"$BUILD"/client/parity-agent upload "$WORK/golden" --server "$BASE" --project bench --role golden --no-dedup \
  --no-color --run-id-file "$WORK/base/golden.id" > /dev/null 2>&1
B0=$(cpu_of "${PIDS[0]}"); BS=$(date +%s.%N)
"$BUILD"/client/parity-agent upload "$WORK/target" --server "$BASE" --project bench --role target \
  --against "$(cat "$WORK/base/golden.id")" --no-dedup > /dev/null 2>&1 || [ $? -eq 1 ]
BE=$(date +%s.%N); B1=$(cpu_of "${PIDS[0]}")
kill -TERM "${PIDS[0]}"; wait "${PIDS[0]}" 2>/dev/null || true
PIDS=()
BASE_CPU=$(awk -v a="$B0" -v b="$B1" -v t="$TARGET_BYTES" 'BEGIN {printf "%.2f", (b - a) / (t / 1e9)}')
awk -v s="$BS" -v e="$BE" -v t="$TARGET_BYTES" -v c="$BASE_CPU" 'BEGIN {
  printf "baseline, one daemon on the embedded default (SQLite, local spool): target %.2f GB in %.2f s = %.3f GB/s; daemon %s CPU seconds per GB\n",
    t / 1e9, e - s, t / 1e9 / (e - s), c}'
rm -rf "$WORK/base"
for N in $COUNTS; do
  DB="cluster_$N"
  psql "$URI" -qc "CREATE DATABASE $DB" >/dev/null
  STORE="${URI%/*}/$DB"
  BLOBS="s3://parity/n$N?endpoint=$ENDPOINT"
  PIDS=()
  ADDRS=()
  for i in $(seq "$N"); do
    D="$WORK/n$N/d$i"
    mkdir -p "$D"
    "$BUILD"/server/parityd --data-dir "$D/data" --listen 127.0.0.1:0 --port-file "$D/port" \
      --store "$STORE" --blobs "$BLOBS" 2> "$D/log" &
    PIDS+=($!)
  done
  for i in $(seq "$N"); do
    D="$WORK/n$N/d$i"
    for _ in $(seq 200); do [ -s "$D/port" ] && break; sleep 0.1; done
    ADDRS+=("127.0.0.1:$(cat "$D/port")")
  done
  G0=$(date +%s.%N)
  "$BUILD"/client/parity-agent upload "$WORK/golden" --server "${ADDRS[0]}" --project bench --role golden \
    --no-dedup --no-color --run-id-file "$WORK/n$N/golden.id" > /dev/null 2> "$WORK/n$N/golden.err"
  G1=$(date +%s.%N)
  D0=(); for p in "${PIDS[@]}"; do D0+=("$(cpu_of "$p")"); done
  P0=$(pg_cpu); S0=$(cpu_of "$S3PID")
  START=$(date +%s.%N)
  for i in $(seq "$N"); do
    "$PY" tests/bench/peak_rss.py "$WORK/n$N/agent$i.time" "$BUILD"/client/parity-agent upload "$WORK/target" \
      --server "${ADDRS[$((i - 1))]}" --project bench --role target --against "$(cat "$WORK/n$N/golden.id")" \
      --no-dedup --json > "$WORK/n$N/target$i.json" 2> "$WORK/n$N/target$i.err" &
    AGENTS[$i]=$!
  done
  for i in $(seq "$N"); do wait "${AGENTS[$i]}" || [ $? -eq 1 ]; done
  END=$(date +%s.%N)
  D1=(); for p in "${PIDS[@]}"; do D1+=("$(cpu_of "$p")"); done
  P1=$(pg_cpu); S1=$(cpu_of "$S3PID")
  AG=0; for i in $(seq "$N"); do AG=$(awk -v a="$AG" '{printf "%.3f", a + $2 + $3}' "$WORK/n$N/agent$i.time"); done
  VERDICTS=$("$PY" -c 'import json, sys; print(" ".join(json.dumps((json.load(open(f)).get("job") or {}).get("counts"), separators=(",", ":")) for f in sys.argv[1:]))' \
    "$WORK"/n"$N"/target*.json)
  "$PY" - "$N" "$TARGET_BYTES" "$GOLDEN_BYTES" "$G0" "$G1" "$START" "$END" "${D0[*]}" "${D1[*]}" "$P0" "$P1" "$S0" "$S1" \
    "$AG" "$VERDICTS" "$BASE_CPU" <<'PY'
import sys
n, tb, gb = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
g0, g1, s, e = map(float, sys.argv[4:8])
d0, d1 = [list(map(float, a.split())) for a in sys.argv[8:10]]
p0, p1, s0, s1, ag = map(float, sys.argv[10:15])
total = n * tb / 1e9
per_daemon = [(b - a) / (tb / 1e9) for a, b in zip(d0, d1)]
base = float(sys.argv[16])
print("%d daemon%s: golden %.2f GB to the first in %.2f s; targets %.2f GB (%d x %.2f) in %.2f s = %.3f GB/s; "
      "CPU seconds per GB of target data: each daemon %s (its own target; %s the baseline's), PostgreSQL %.3f, "
      "s3rver %.3f, agents %.3f; verdicts %s"
      % (n, "" if n == 1 else "s", gb / 1e9, g1 - g0, total, n, tb / 1e9, e - s, total / (e - s),
         " / ".join("%.2f" % x for x in per_daemon), " / ".join("%.1fx" % (x / base) for x in per_daemon),
         (p1 - p0) / total, (s1 - s0) / total, ag / total, sys.argv[15]))
PY
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait "${PIDS[@]}" 2>/dev/null || true
  PIDS=()
  rm -rf "$WORK/n$N"
done
