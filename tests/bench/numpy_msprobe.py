#!/usr/bin/env python3
"""msprobe's six real-data metrics in numpy, one process: the speed baseline for Parity.

Follows core/compare/npy_compare.py as shared/reference/msprobe-semantics.md describes it for
the common case (pre-checks for empty, 0-d and shape mismatch; inf/NaN zeroing when the masks
agree; relative error in the loaded dtype with eps added where the bench is zero; float64
flattened copies for Cosine, EucDist and MaxAbsErr; format_value's %.12f rounding and the
0.9999 cosine rounding). Placeholder texts are not reproduced: this script exists to time
numpy doing msprobe's arithmetic, and to cross-check Parity's numbers on the same files.

usage: numpy_msprobe.py GOLDEN_DIR TARGET_DIR [--json OUT]
Pairs GOLDEN_DIR/x.npy with TARGET_DIR/x.npy (target as msprobe's NPU side, golden as its bench)
and, with --json, writes {name: {metric: value} or null when a pre-check stops the pair} to OUT.
"""
import json
import os
import sys

import numpy as np


def fmt(x):
    return float("%.12f" % x)


def relative_err(n, b):
    if n.dtype in (np.float16, np.float32, np.float64, np.longdouble):
        nc, bc = n.copy(), b.copy()
    else:
        nc, bc = n.astype(float), b.astype(float)
    z = bc == 0
    eps = np.finfo(float).eps  # float64's eps in every dtype: 2.2e-16 in fp32, 0 in fp16
    bc[z] += bc.dtype.type(eps)
    nc[z] += nc.dtype.type(eps)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.abs((nc - bc) / bc)


def compare(n, b):
    if n.size == 0 or n.shape == () or n.shape != b.shape:
        return None
    nf, bf = n.astype(float), b.astype(float)
    if not (np.all(np.isfinite(nf)) and np.all(np.isfinite(bf))):
        if not (np.array_equal(np.isinf(nf), np.isinf(bf)) and
                np.array_equal(np.isnan(nf), np.isnan(bf))):
            return None
        bad = ~np.isfinite(nf)
        n = n.copy(); b = b.copy()
        n[bad] = 0; b[bad] = 0
    re = relative_err(n, b)
    nv, bv = n.reshape(-1).astype(float), b.reshape(-1).astype(float)
    num, a, c = np.dot(nv, bv), np.linalg.norm(nv), np.linalg.norm(bv)
    eps = np.finfo(float).eps
    if a <= eps and c <= eps:
        cos = 1.0
    elif a <= eps or c <= eps:
        cos = float("nan")
    else:
        cos = fmt(num / (a * c))
        if cos > 0.9999:
            cos = round(cos, 6)
    return {
        "Cosine": cos,
        "EucDist": float(np.linalg.norm(nv - bv, ord=2)),
        "MaxAbsErr": fmt(np.max(np.abs(nv - bv))),
        "MaxRelativeErr": fmt(np.max(re)),
        "One Thousandth Err Ratio": fmt(np.sum(re < 0.001) / re.size),
        "Five Thousandths Err Ratio": fmt(np.sum(re < 0.005) / re.size),
    }


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    golden, target = argv[1], argv[2]
    out = {}
    for name in sorted(os.listdir(golden)):
        if not name.endswith(".npy") or not os.path.exists(os.path.join(target, name)):
            continue
        b = np.load(os.path.join(golden, name), allow_pickle=False)
        n = np.load(os.path.join(target, name), allow_pickle=False)
        out[name[:-4]] = compare(n, b)
    if len(argv) >= 5 and argv[3] == "--json":
        with open(argv[4], "w") as f:
            json.dump(out, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
