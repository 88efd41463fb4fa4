#!/usr/bin/env python3
"""Step-time overhead of parity.torch.capture: training steps (forward and backward) of a
ResNet-like CNN on CPU, bare and under capture in each mode (full, stats, crc) at levels L1 and
mix (and mix stats recording msprobe's stack.json), streaming to a real parityd on loopback as a target compared against a golden capture of
one step. Each step is its own capture (a run, as msprobe dumps a step). Prints the median step
time inside the capture and until the capture's end has its summary (the sender drained, every
verdict and the job's summary back), each with its ratio to the bare step in the same run.

    tests/bench/capture_overhead.py BUILD_DIR [--steps 5] [--batch 16] [--size 64]
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--size", type=int, default=64)
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(a.build, "python"))
    sys.path.insert(0, os.path.join(HERE, "..", "python"))
    import torch
    import torch.nn as nn
    import parity
    import parity.torch as pt
    from daemon import Daemon

    torch.set_num_threads(1)

    def block(cin, cout, stride):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                             nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())

    model = nn.Sequential(nn.Conv2d(3, 32, 3, 1, 1), nn.BatchNorm2d(32), nn.ReLU(), block(32, 32, 1),
                          block(32, 64, 2), block(64, 128, 2), block(128, 256, 2), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(256, 100))
    x = torch.randn(a.batch, 3, a.size, a.size)

    def step():
        model.zero_grad()
        model(x).sum().backward()

    def steps():
        times = []
        for _ in range(a.steps):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
        return statistics.median(times) * 1e3

    d = Daemon(a.build)
    try:
        c = parity.Client(d.address)
        step()  # warm up
        with pt.capture(model, c, project="bench", role="golden", level="mix") as g:
            step()
        bare = steps()
        print("capture overhead: median of %d steps, batch %d, %dx%d, 1 torch thread; one capture per step"
              % (a.steps, a.batch, a.size, a.size))
        print("%-16s %9s %7s %6s %9s %7s" % ("capture", "ms/step", "ratio", "items", "end (ms)", "ratio"))
        print("%-16s %9.1f %7.2f %6s %9s %7s" % ("none", bare, 1.0, "-", "-", "-"))
        configs = [(level, mode, False) for level in ("L1", "mix") for mode in ("full", "stats", "crc")]
        configs.append(("mix", "stats", True))  # with msprobe's stack.json (a stack walk per call)
        for level, mode, stack in configs:
            inside, total = [], []
            for _ in range(a.steps):
                t0 = time.perf_counter()
                with pt.capture(model, c, project="bench", against=g.run_id, level=level, mode=mode,
                                stack=stack) as run:
                    step()
                    inside.append(time.perf_counter() - t0)
                total.append(time.perf_counter() - t0)
            ms, end = statistics.median(inside) * 1e3, statistics.median(total) * 1e3
            name = "%s %s%s" % (level, mode, " +stack" if stack else "")
            print("%-16s %9.1f %7.2f %6d %9.0f %7.2f" % (name, ms, ms / bare, run.upload.items_received, end,
                                                         end / bare))
        c.close()
    finally:
        d.close()


if __name__ == "__main__":
    main()
