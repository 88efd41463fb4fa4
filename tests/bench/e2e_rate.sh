#!/usr/bin/env bash
# End to end on loopback: agent -> parityd -> compared -> stored, for a generated dump pair of
# SIZE_MB in total (half golden, half target; 60% of the bytes in 16 MiB tensors, 40% in tensors
# of 4 KiB to 1 MiB, like a real model; tests/bench/gen_e2e_dump.py). PARITY_E2E_SHAPE=large,
# medium or small generates tensors of one size instead (16 MiB, 256 KiB, 4 KiB; see
# gen_e2e_dump.py): with the CPU microseconds per tensor item it prints, they split the cost into
# a part per byte and a part per item. Prints the dump rate,
# parityd's peak resident memory, and the rate as a ratio to a plain gRPC client stream of the
# same bytes (1 MiB messages) measured in the same invocation, and the CPU seconds of the agent
# and of parityd, and parityd's CPU seconds by thread name (role) over the whole run. The plain
# stream's rate varies from run to run on a shared VM (1.1-3.1 GB/s in five runs in a row): it
# runs three times before and three times after, and the ratio is to the median of the six; its
# CPU seconds per GB (both ends) are printed beside Parity's, the steadier comparison.
# The agent's peak resident memory (each agent runs under tests/bench/peak_rss.py).
# Both programs share the machine's cores, so the CPU seconds per GB of dump (agent and parityd
# together) bound the rate whatever the overlap: that line is steadier than the rate itself.
#   tests/bench/e2e_rate.sh [SIZE_MB=2048] [extra parityd flags...]
# PARITY_E2E_MODE=pair (default): one `parity-agent upload-pair`, both sides at once, each pair
# compared from memory when both halves are there; sequential: the golden side, then the target
# against it (its golden half read back from the spool), with each phase's
# CPU seconds.
# PARITY_E2E_ROUNDS=N (default 2): the pair is uploaded N times, as new runs, to the same parityd;
# each round is printed. The first round of a fresh parityd pays for its memory's first touch,
# which this benchmark's VM (Firecracker, free page reporting) charges at about 2.3 ms per MiB;
# later rounds show a daemon that has been serving. PARITY_E2E_GAP=S waits S seconds between
# rounds (65: a daemon that has been idle for a minute, whose freed memory the VM has taken back
# unless parityd kept it).
# PARITY_PYTHON picks the Python with numpy (default /usr/bin/python3, Debian's python3-numpy).
# PARITY_E2E_DEDUP=1 uploads with the agent's default dedup offer (a probe by length and CRC-32
# per tensor of 64 KiB or more; nothing is held, so nothing is hashed); default off.
# Before timing, it waits until 65 s have passed since the previous run of this script deleted
# its files (a stamp in $TMPDIR): on ext4 without a journal, files created within a minute of
# many deletions cost an inode scan each, and the second of two runs back to back measured
# 10-32 % slower. PARITY_E2E_NO_WAIT=1 skips the wait.
set -euo pipefail
cd "$(dirname "$0")/../.."
SIZE_MB="${1:-2048}"; shift || true
BUILD="${PARITY_BUILD_DIR:-build}"
PY="${PARITY_PYTHON:-/usr/bin/python3}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/parity-e2e.XXXXXX")"
DEDUP=--no-dedup
[ "${PARITY_E2E_DEDUP:-0}" = 1 ] && DEDUP=
STAMP="${TMPDIR:-/tmp}/parity-e2e.last-cleanup"
trap '[ -z "${PID:-}" ] || kill -TERM "$PID" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"; touch "$STAMP"' EXIT
"$PY" tests/bench/gen_e2e_dump.py "$WORK" "$SIZE_MB" "${PARITY_E2E_SHAPE:-mixed}"
ITEMS=$(( $(ls "$WORK/golden" | wc -l) + $(ls "$WORK/target" | wc -l) ))
# The generated dump is written back to disk before anything is timed: otherwise its 2 GB of
# dirty pages are flushed during the upload, and the daemon's own syncs (--fsync) wait for them.
sync
if [ "${PARITY_E2E_NO_WAIT:-0}" != 1 ] && [ -e "$STAMP" ]; then
  AGE=$(( $(date +%s) - $(stat -c %Y "$STAMP") ))
  if [ "$AGE" -lt 65 ]; then
    echo "waiting $((65 - AGE)) s: the previous run deleted its files ${AGE} s ago (see the header)" >&2
    sleep $((65 - AGE))
  fi
fi
BYTES=$(( $(du -sb "$WORK/golden" | cut -f1) + $(du -sb "$WORK/target" | cut -f1) ))
# One run of the plain stream: "bytes_per_second cpu_seconds" appended to $WORK/ceiling.
ceiling() {
  "$BUILD"/tests/grpc_ceiling "$SIZE_MB" |
    awk '/ceiling_bytes_per_second/ {r = $2} /cpu_seconds/ {c = $2} END {print r, c}' >> "$WORK/ceiling"
}
: > "$WORK/ceiling"
for _ in 1 2 3; do ceiling; done
"$BUILD"/server/parityd --data-dir "$WORK/data" --listen 127.0.0.1:0 --port-file "$WORK/port" "$@" 2>"$WORK/log" &
PID=$!
for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.1; done
ADDR="127.0.0.1:$(cat "$WORK/port")"
RSS0=$(grep VmRSS /proc/$PID/status | awk '{print $2}')
# CPU seconds (user + system) of parityd so far, and of each agent (bash's time keyword).
daemon_cpu() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' /proc/$PID/stat; }
# Each agent runs under peak_rss.py, which records its own CPU seconds and peak RSS.
AGENT_RUN=("$PY" tests/bench/peak_rss.py)
MODE="${PARITY_E2E_MODE:-pair}"
ROUNDS="${PARITY_E2E_ROUNDS:-2}"
case "$MODE" in pair|sequential) ;; *) echo "PARITY_E2E_MODE must be pair or sequential" >&2; exit 2;; esac
agent_cpu() { awk '{print $2 + $3}' "$1"; }  # peak_rss.py's "maxrss_kib user sys"
AGENT_RSS_KB=0  # the largest agent peak RSS of all rounds
agent_rss() { awk -v m="$AGENT_RSS_KB" '{print ($1 > m ? $1 : m)}' "$1"; }
: > "$WORK/rounds"
for ROUND in $(seq "$ROUNDS"); do
  [ "$ROUND" = 1 ] || sleep "${PARITY_E2E_GAP:-0}"
  D0=$(daemon_cpu)
  START=$(date +%s.%N)
  if [ "$MODE" = pair ]; then
    "${AGENT_RUN[@]}" "$WORK/agent.time" "$BUILD"/client/parity-agent upload-pair "$WORK/golden" "$WORK/target" \
      --server "$ADDR" --project bench $DEDUP --json > "$WORK/target.json" 2> "$WORK/pair.log" || [ $? -eq 1 ]
    END=$(date +%s.%N)
    D2=$(daemon_cpu)
    MID=$START D1=$D0 AG=0 AT=$(agent_cpu "$WORK/agent.time")
    AGENT_RSS_KB=$(agent_rss "$WORK/agent.time")
  else
    "${AGENT_RUN[@]}" "$WORK/golden.time" "$BUILD"/client/parity-agent upload "$WORK/golden" --server "$ADDR" \
      --project bench --role golden $DEDUP --no-color --run-id-file "$WORK/golden.id" > "$WORK/golden.log" \
      2> "$WORK/golden.err"
    MID=$(date +%s.%N)
    D1=$(daemon_cpu)
    "${AGENT_RUN[@]}" "$WORK/target.time" "$BUILD"/client/parity-agent upload "$WORK/target" --server "$ADDR" \
      --project bench --role target --against "$(cat "$WORK/golden.id")" $DEDUP --json > "$WORK/target.json" \
      2> "$WORK/pair.log" || [ $? -eq 1 ]
    END=$(date +%s.%N)
    D2=$(daemon_cpu)
    cat "$WORK/golden.err" >> "$WORK/pair.log"
    AG=$(agent_cpu "$WORK/golden.time") AT=$(agent_cpu "$WORK/target.time")
    AGENT_RSS_KB=$(agent_rss "$WORK/golden.time")
    AGENT_RSS_KB=$(agent_rss "$WORK/target.time")
  fi
  "$PY" -c 'import json, sys; j = json.load(open(sys.argv[1])).get("job") or {}; print(json.dumps(j.get("counts")), j.get("first_culprit"))' \
    "$WORK/target.json" > "$WORK/verdicts"
  # Streams the agents lost and resumed (a cancellation by parityd's gRPC memory quota, say).
  LOST=$(grep -c "reconnecting in" "$WORK/pair.log" || true)
  echo "$START $MID $END $D0 $D1 $D2 $AG $AT $LOST $(cat "$WORK/verdicts")" >> "$WORK/rounds"
done
RSS_KB=$(grep VmHWM /proc/$PID/status | awk '{print $2}')
# parityd's CPU seconds by thread name (its threads are named by role: ingest, compare, spool-io,
# store-writer...; gRPC's own keep theirs), busiest first.
THREADS=$(for t in /proc/$PID/task/*; do
  echo "$(tr ' ' '_' < "$t/comm") $(sed 's/^.*) //' "$t/stat" | awk '{print $12 + $13}')"
done | awk -v hz="$(getconf CLK_TCK)" '{c[$1] += $2; n[$1]++}
  END {for (k in c) if (c[k] > 0) printf "%.2f %s%s\n", c[k] / hz, k, (n[k] > 1 ? " (x" n[k] ")" : "")}' |
  sort -rn | awk '{printf "%s%s %s", (NR > 1 ? ", " : ""), $2 ($3 ? " " $3 : ""), $1}')
kill -TERM "$PID"; wait "$PID" 2>/dev/null || true; PID=
# Large target blobs compared from memory rather than read back from the spool (--held-blob-bytes).
HELD=$(grep -o 'held=[0-9]* taken=[0-9]* evicted=[0-9]* refused=[0-9]* peak_mib=[0-9]*' "$WORK/log" | tail -1 || true)
# The parts of parityd's memory at their peaks (its shutdown log; not simultaneous).
PARTS=$(grep -o 'msg="memory peaks" .*' "$WORK/log" | tail -1 | sed 's/msg="memory peaks" //' || true)
STAGES=$(grep -o 'msg="spool stages" peak=[0-9]*' "$WORK/log" | tail -1 | sed 's/.*peak=//' || true)
for _ in 1 2 3; do ceiling; done
"$PY" - "$BYTES" "$MODE" "$RSS0" "$RSS_KB" "$WORK/ceiling" "$SIZE_MB" "$WORK/rounds" "$THREADS" "${HELD:-none}" "$AGENT_RSS_KB" \
  "${PARTS:-none}" "${STAGES:-none}" "$ITEMS" "${PARITY_E2E_SHAPE:-mixed}" <<'PY'
import os, statistics, sys
b, mode = int(sys.argv[1]), sys.argv[2]
items, shape = int(sys.argv[13]), sys.argv[14]
rss0, rss = int(sys.argv[3]), int(sys.argv[4])
runs = [tuple(map(float, line.split())) for line in open(sys.argv[5]) if line.strip()]
rates = [r for r, _ in runs]
ceil = statistics.median(rates)
plain_cpu_per_gb = statistics.median(c for _, c in runs) / (int(sys.argv[6]) * 1048576 / 1e9)
gb = b / 1e9
cores = os.cpu_count() or 1
how = ("both sides at once (parity-agent upload-pair)" if mode == "pair" else
       "the golden side, then the target against it")
print("dump pair: %.2f GB in %d tensor items (shape %s), uploaded %s; plain gRPC stream of the same bytes, "
      "%d runs: median %.3f GB/s (%.3f-%.3f), %.2f CPU seconds per GB (both ends)"
      % (gb, items, shape, how, len(rates), ceil / 1e9, min(rates) / 1e9, max(rates) / 1e9, plain_cpu_per_gb))
for n, line in enumerate(open(sys.argv[7]), 1):
    f = line.split(None, 9)
    s, m, e, d0, d1, d2, ag, at = map(float, f[:8])
    lost, verdicts = int(f[8]), f[9].strip()
    rate = b / (e - s)
    cpu = ag + at + (d2 - d0)
    print("round %d%s: %.2f s, %.3f GB/s, ratio %.2f to the plain stream; streams resumed %d; verdicts %s" %
          (n, " (fresh parityd)" if n == 1 else "", e - s, rate / 1e9, rate / ceil, lost, verdicts))
    if mode == "sequential":
        print("  golden upload %.2f s, target upload + comparison %.2f s; CPU seconds (user+sys): golden phase "
              "agent %.2f, parityd %.2f; target phase agent %.2f, parityd %.2f" %
              (m - s, e - m, ag, d1 - d0, at, d2 - d1))
    else:
        print("  CPU seconds (user+sys): agent %.2f, parityd %.2f" % (at, d2 - d0))
    print("  CPU seconds per GB of dump: agent %.2f, parityd %.2f, together %.2f (on %d cores at most "
          "%.2f GB/s; %.2fx the plain stream's); the cores were %.0f %% busy with the two" %
          ((ag + at) / gb, (d2 - d0) / gb, cpu / gb, cores, cores / (cpu / gb), cpu / gb / plain_cpu_per_gb,
           100 * cpu / (cores * (e - s))))
    print("  CPU microseconds per tensor item: agent %.0f, parityd %.0f" %
          (1e6 * (ag + at) / items, 1e6 * (d2 - d0) / items))
print("parityd resident memory: %.0f MiB at start, peak %.0f MiB" % (rss0 / 1024, rss / 1024))
print("parity-agent peak resident memory: %.0f MiB (the largest of the rounds' agents)" % (int(sys.argv[10]) / 1024))
print("parityd CPU seconds by thread, whole run: %s" % sys.argv[8])
print("large blobs compared from memory (held blobs): %s" % sys.argv[9])
print("parityd's parts at their peaks: %s; O_DIRECT stages (1 MiB each) %s" % (sys.argv[11], sys.argv[12]))
PY
