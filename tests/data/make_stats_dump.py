#!/usr/bin/env python3
"""Writes an msprobe statistics dump pair (dump.json only, no tensor files) of OPS operators,
each with one input and one output: OUT/golden and OUT/target. The target's statistics drift
from operator BAD on (its output's statistics 3 times the golden ones, every later one's 1.6
times), so the job has WARN rows there; --hostile adds an operator whose name is HTML.

    make_stats_dump.py OUT OPS [--bad N] [--hostile]
"""
import argparse
import json
import os


def stats(i, scale):
    base = 1.0 + (i % 97) / 97.0
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [8, 16],
            "Max": base * scale, "Min": -base * scale, "Mean": 0.01 * base * scale,
            "Norm": 11.3 * base * scale, "requires_grad": False}


def dump(ops, bad, hostile, target):
    data = {}
    for i in range(ops):
        name = "Functional.linear.%d.forward" % i
        drift = 1.0
        if target and i >= bad:
            drift = 3.0 if i == bad else 1.6
        data[name] = {"input_args": [stats(i, drift if target and i > bad else 1.0)], "input_kwargs": {},
                      "output": [stats(i + 1, drift)]}
    if hostile:
        data["<img src=x onerror=alert(1)>.0.forward"] = {"input_args": [stats(1, 1.0)], "input_kwargs": {},
                                                          "output": [stats(2, 1.0)]}
    return {"task": "statistics", "level": "L1", "framework": "pytorch", "dump_data_dir": None, "data": data}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("ops", type=int)
    p.add_argument("--bad", type=int, default=-1)
    p.add_argument("--hostile", action="store_true")
    a = p.parse_args()
    bad = a.bad if a.bad >= 0 else a.ops // 2
    for side in ("golden", "target"):
        d = os.path.join(a.out, side)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "dump.json"), "w") as f:
            json.dump(dump(a.ops, bad, a.hostile, side == "target"), f)


if __name__ == "__main__":
    main()
