#!/usr/bin/env bash
# Two builds' end-to-end rates alternated: ROUNDS rounds of e2e_rate.sh with each build, the
# order swapped every round. e2e_rate.sh itself waits until 65 s after the previous run deleted
# its files (on a journal-less ext4, this project's VMs, a run starting sooner allocates inodes
# past the recently deleted ones and loses 10-32 %); PARITY_AB_GAP adds a pause before each run.
#   tests/bench/ab_e2e.sh BASE_BUILD_DIR NEW_BUILD_DIR [ROUNDS=3] [SIZE_MB=2048]
# Environment as for e2e_rate.sh (PARITY_E2E_DEDUP=1 ...).
set -euo pipefail
cd "$(dirname "$0")/../.."
BASE="$1"; NEW="$2"; ROUNDS="${3:-3}"; SIZE_MB="${4:-2048}"; GAP="${PARITY_AB_GAP:-0}"
for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then order="$NEW $BASE"; else order="$BASE $NEW"; fi
  for b in $order; do
    sync
    sleep "$GAP"
    line=$(PARITY_BUILD_DIR="$b" tests/bench/e2e_rate.sh "$SIZE_MB" 2>&1 |
           grep -E 'uploaded, compared|upload \+|CPU seconds \(' | tr '\n' ' ')
    echo "round $r $([ "$b" = "$NEW" ] && echo new || echo base): $line"
  done
done
