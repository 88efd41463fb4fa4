#!/usr/bin/env python3
"""Writes a dump pair of .npy files like a model's: DIR/golden and DIR/target, SIZE_MB per side,
a few large tensors, many medium and small ones (by bytes ~60 / 30 / 10 %: 16 MiB, 256 KiB and
4 KiB float32 tensors), the target the golden plus noise of 1e-3, every fifth pair with exact
zeros at the same places. Used by vs_numpy.sh and upload_small.sh.
  gen_model_pair.py DIR SIZE_MB"""
import os
import sys

import numpy as np

work, size_mb = sys.argv[1], int(sys.argv[2])
os.makedirs(work + "/golden")
os.makedirs(work + "/target")
rng = np.random.default_rng(7)
budget = size_mb << 20
plan = [(1 << 22, 0.6), (1 << 16, 0.3), (1 << 10, 0.1)]
i = 0
for n, share in plan:
    for _ in range(max(1, int(budget * share) // (4 * n))):
        g = rng.standard_normal(n, dtype=np.float32)
        t = g + np.float32(1e-3) * rng.standard_normal(n, dtype=np.float32)
        if i % 5 == 0:
            g[:: 97] = 0; t[:: 97] = 0  # exact zeros in the bench: the eps path
        np.save("%s/golden/t%05d.npy" % (work, i), g)
        np.save("%s/target/t%05d.npy" % (work, i), t.astype(np.float32))
        i += 1
print("generated %d tensor pairs" % i)
