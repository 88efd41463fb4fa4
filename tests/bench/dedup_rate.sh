#!/usr/bin/env bash
# Dedup when a run is uploaded twice: generates SIZE_MB of float32 .npy tensors (56 % of the
# bytes in 16 MiB tensors, the rest in 1 MiB ones, all distinct), starts parityd on a fresh data
# directory and uploads the same dump three times with the agent's default dedup offer. Prints,
# per upload, the wall time, parityd's CPU seconds, the bytes sent and deduplicated and the
# hashes the agent took; then the spool's files and size. The second upload is the one where
# parityd hashes, from disk, the large blobs it keeps under unique keys
# (--spool-unique-key-min-bytes); the third finds those hashes recorded.
#   tests/bench/dedup_rate.sh [SIZE_MB=1024] [extra parityd flags...]
# PARITY_BUILD_DIR picks another build (default build/).
set -euo pipefail
cd "$(dirname "$0")/../.."
SIZE_MB="${1:-1024}"; shift || true
BUILD="${PARITY_BUILD_DIR:-build}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/parity-dedup.XXXXXX")"
trap '[ -z "${PID:-}" ] || kill -TERM "$PID" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
python3 - "$WORK/dump" "$SIZE_MB" <<'PY'
import os, sys
out, size_mb = sys.argv[1], int(sys.argv[2])
os.makedirs(out)
budget = size_mb << 20
plan = [(16 << 20, budget * 56 // 100)]
plan.append((1 << 20, budget - plan[0][1]))
block = os.urandom(16 << 20)
k = 0
for per, share in plan:
    count = per // 4
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }" % count
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    for _ in range(max(1, share // per)):
        with open(os.path.join(out, "t%05d.npy" % k), "wb") as f:
            f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode())
            data = block[k * 4099 % len(block):] + block
            f.write(k.to_bytes(8, "little") + data[8:per])  # distinct contents per file
        k += 1
print("generated %d tensors" % k, file=sys.stderr)
PY
sync
"$BUILD"/server/parityd --data-dir "$WORK/data" --listen 127.0.0.1:0 --port-file "$WORK/port" "$@" 2>"$WORK/log" &
PID=$!
for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.1; done
ADDR="127.0.0.1:$(cat "$WORK/port")"
daemon_cpu() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' /proc/$PID/stat; }
for pass in first second third; do
  C0=$(daemon_cpu); T0=$(date +%s.%N)
  "$BUILD"/client/parity-agent upload "$WORK/dump" --server "$ADDR" --project bench --role golden \
    --json > "$WORK/$pass.json"
  T1=$(date +%s.%N); C1=$(daemon_cpu)
  python3 - "$pass" "$T0" "$T1" "$C0" "$C1" "$WORK/$pass.json" <<'PY'
import json, sys
p, t0, t1, c0, c1 = sys.argv[1], *map(float, sys.argv[2:6])
j = json.load(open(sys.argv[6]))
print("%-6s upload: %.2f s, parityd %.2f CPU-s; %d bytes sent, %d deduplicated; agent hashes %d"
      % (p, t1 - t0, c1 - c0, j["data_bytes_sent"], j["data_bytes_deduplicated"], j["dedup_hashes"]))
PY
done
echo "spool: $(find "$WORK/data" -type f -regextype posix-extended -regex '.*/[0-9a-f]{64}' | wc -l) blob files, $(du -sm "$WORK/data" | cut -f1) MiB in the data directory"
