#!/usr/bin/env python3
# The dump pair of tests/bench/e2e_rate.sh and tests/bench/upload_pair.sh: SIZE_MB in total
# (half golden, half target; 60% of the bytes in 16 MiB float32 tensors, 40% in tensors of
# 4 KiB to 1 MiB, like a real model), as .npy files in WORK/golden and WORK/target; one
# operator's target is negated (a divergence). The same seed every time.
#   gen_e2e_dump.py WORK SIZE_MB
import os, sys
import numpy as np
work, size_mb = sys.argv[1], int(sys.argv[2])
side = (size_mb << 20) // 2
rng = np.random.default_rng(7)
sizes = []  # element counts (float32)
big = int(side * 0.6) // (16 << 20)
sizes += [4 << 20] * max(1, big)
small_budget = side - sum(sizes) * 4
cycle = [1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10]  # 4 KiB .. 1 MiB
i = 0
while small_budget >= cycle[0] * 4:
    n = cycle[i % len(cycle)]
    if n * 4 > small_budget:
        n = small_budget // 4
    sizes.append(n)
    small_budget -= n * 4
    i += 1
for d in ("golden", "target"):
    os.makedirs(os.path.join(work, d))
for k, n in enumerate(sizes):
    g = rng.standard_normal(n, dtype=np.float32)
    t = g + np.float32(1e-4) * rng.standard_normal(n, dtype=np.float32)
    if k == len(sizes) // 2:
        t = -t  # one operator that diverges
    np.save(os.path.join(work, "golden", "t%05d.npy" % k), g)
    np.save(os.path.join(work, "target", "t%05d.npy" % k), t)
print("generated %d tensor pairs" % len(sizes), file=sys.stderr)
