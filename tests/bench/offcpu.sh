#!/usr/bin/env bash
# Where the upload's threads wait: an off-CPU profile of one upload on a fresh parityd. Every
# context switch of every thread (perf's sched:sched_switch, all CPUs, DWARF call stacks) is
# matched with the thread's next switch-in; the time between is summed by thread role and by
# the stack the thread slept in. Prints each role's total off-CPU seconds, then the N longest
# waits by stack. Idle workers waiting for work show up too (WorkerPool::Loop, pollset_work,
# IoThreads::Run): what matters is a thread of the data path blocked in the middle of its work
# (a spool stage it waits for, a file it creates, a disk write).
#   tests/bench/offcpu.sh DUMP_DIR [golden|target] [N=30] [extra parityd flags...]
# golden (default): DUMP_DIR/golden uploaded once unrecorded (warm-up), then once recorded;
# target: DUMP_DIR/golden uploaded unrecorded, then DUMP_DIR/target recorded against it.
# DUMP_DIR as for upload_pair.sh (gen_e2e_dump.py's layout). Needs perf with DWARF unwinding
# and about 300 MB in $TMPDIR per second recorded; the recording slows the upload about 1.5x.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 1 ] || { echo "usage: $0 DUMP_DIR [golden|target] [N] [parityd flags...]" >&2; exit 2; }
DUMP="$1"; PHASE="${2:-golden}"; N="${3:-30}"; shift $(( $# < 3 ? $# : 3 ))
case "$PHASE" in golden|target) ;; *) echo "the phase must be golden or target" >&2; exit 2;; esac
BUILD="${PARITY_BUILD_DIR:-build}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/parity-offcpu.XXXXXX")"
trap '[ -z "${PID:-}" ] || kill -TERM "$PID" 2>/dev/null || true; [ -z "${PERF:-}" ] || kill -INT "$PERF" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
"$BUILD"/server/parityd --data-dir "$WORK/data" --listen 127.0.0.1:0 --port-file "$WORK/port" "$@" 2>"$WORK/log" &
PID=$!
for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.1; done
[ -s "$WORK/port" ] || { echo "parityd did not start:" >&2; cat "$WORK/log" >&2; exit 2; }
A=(--server "127.0.0.1:$(cat "$WORK/port")" --project bench --no-dedup --no-color)
"$BUILD"/client/parity-agent upload "$DUMP/golden" "${A[@]}" --role golden --run-id-file "$WORK/gid" > /dev/null 2>&1
perf record -q -e sched:sched_switch --call-graph dwarf,8192 -a -o "$WORK/perf.data" > /dev/null 2>&1 &
PERF=$!
sleep 0.5
T0=$(date +%s.%N)
if [ "$PHASE" = golden ]; then
  "$BUILD"/client/parity-agent upload "$DUMP/golden" "${A[@]}" --role golden > /dev/null 2>&1
else
  "$BUILD"/client/parity-agent upload "$DUMP/target" "${A[@]}" --role target --against "$(cat "$WORK/gid")" > /dev/null 2>&1 || [ $? -eq 1 ]
fi
T1=$(date +%s.%N)
kill -INT "$PERF"; wait "$PERF" || true; PERF=
echo "$PHASE upload recorded: $(awk -v a="$T0" -v b="$T1" 'BEGIN {printf "%.2f", b - a}') s"
perf script -i "$WORK/perf.data" -F comm,tid,time,event,trace,ip,sym 2>/dev/null | python3 -c '
import collections, re, sys
n = int(sys.argv[1])
roles = ("parity-agent", "nexting_thread", "ingest", "spool-io", "store-writer", "compare", "results",
         "default-executo")
head = re.compile(r"^\S.*?\s+\d+\s+([\d.]+): sched:sched_switch: prev_comm=(.*?) prev_pid=(\d+) .*==> next_comm=.*? next_pid=(\d+)")
off, by_stack, by_role = {}, collections.Counter(), collections.Counter()
event = None
def close(e):
    if e is None: return
    t, comm, prev, nxt, frames = e
    if nxt in off:
        t0, role, key = off.pop(nxt)
        by_stack[(role, key)] += t - t0
        by_role[role] += t - t0
    role = re.sub(r"\d+$", "", comm)
    if role in roles and prev != 0:
        kernel = [f for f in frames if f.startswith(("do_epoll_wait", "futex_wait", "io_schedule",
                  "rwsem_down", "schedule_timeout", "__x64_sys_"))][:1]
        user, seen = [], False
        for f in frames:
            if "entry_SYSCALL" in f or "asm_exc" in f: seen = True; continue
            if seen and not f.startswith("[unknown]"): user.append(re.sub(r"\(.*", "", f)[:60])
        user = [f for f in user if not f.startswith(("syscall", "absl::debian3::synchronization_internal",
                "AbslInternalPerThreadSem", "absl::debian3::Mutex::Block"))]
        off[prev] = (t, role, " < ".join(kernel + user[:9]))
for line in sys.stdin:
    m = head.match(line)
    if m:
        close(event)
        event = (float(m.group(1)), m.group(2), int(m.group(3)), int(m.group(4)), [])
    elif event is not None and line.strip():
        parts = line.split(None, 1)
        if len(parts) == 2: event[4].append(parts[1].strip())
close(event)
print("off-CPU seconds by role (summed over its threads):")
for role, s in by_role.most_common(): print("  %-16s %.3f" % (role, s))
print("longest waits by stack:")
for (role, key), s in by_stack.most_common(n): print("  %.3f %-14s %s" % (s, role, key[:400]))
' "$N"
