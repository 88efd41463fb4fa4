#!/usr/bin/env python3
# The dump pair of tests/bench/e2e_rate.sh and tests/bench/upload_pair.sh: SIZE_MB in total
# (half golden, half target) as float32 .npy files in WORK/golden and WORK/target; one
# operator's target is negated (a divergence). The same seed every time. SHAPE:
#   mixed (default): 60% of the bytes in 16 MiB tensors, 40% in tensors of 4 KiB to 1 MiB
#     (4, 16, 64, 256 KiB, 1 MiB in turn), like a real model;
#   large: 16 MiB tensors only;  medium: 256 KiB tensors only (each a spool file in parityd);
#   small: 4 KiB tensors only (kept in parityd's database rows; 64 MB makes 8192 a side).
#   gen_e2e_dump.py WORK SIZE_MB [SHAPE]
import os, sys
import numpy as np
work, size_mb = sys.argv[1], int(sys.argv[2])
shape = sys.argv[3] if len(sys.argv) > 3 else "mixed"
side = (size_mb << 20) // 2
rng = np.random.default_rng(7)
sizes = []  # element counts (float32)
if shape == "mixed":
    big = int(side * 0.6) // (16 << 20)
    sizes += [4 << 20] * max(1, big)
    cycle = [1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10]  # 4 KiB .. 1 MiB
elif shape in ("large", "medium", "small"):
    cycle = [{"large": 4 << 20, "medium": 64 << 10, "small": 1 << 10}[shape]]
else:
    sys.exit("gen_e2e_dump.py: SHAPE must be mixed, large, medium or small, not %r" % shape)
small_budget = side - sum(sizes) * 4
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
