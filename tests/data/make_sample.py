#!/usr/bin/env python3
"""Writes the bundled sample dump pair tests/data/sample/{golden,target}.

A tiny MLP (linear -> relu -> linear -> layer_norm -> softmax) run twice in float32: the
golden run exactly, the target run with device-like rounding noise (~1e-6 relative) on every
operator and an injected defect in Functional.linear.1: its output carries a 40% error on every
fourth column. Every later operator consumes the target's own (already wrong) values, so it fails
too: linear.1 is the culprit, layer_norm and softmax are propagated failures.

Both dumps are msprobe "tensor" task dumps (dump.json + dump_tensor_data/*.npy), MindSpore
style (.npy data files). Standard library only; deterministic (fixed seed, no timestamps).
"""
import json
import math
import os
import random
import shutil
import struct
import sys

SEED = 20261121
BATCH, D_IN, D_HID, D_OUT = 4, 16, 32, 16


def npy_bytes(values, shape):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % (
        ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else ""))
    total = 10 + len(header) + 1
    header += " " * ((64 - total % 64) % 64) + "\n"
    return (b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1") +
            struct.pack("<%df" % len(values), *values))


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def matmul_t(x, w, b, rows, k, n):
    # y[r][j] = sum_i x[r][i] * w[j][i] + b[j]
    return [f32(sum(x[r * k + i] * w[j * k + i] for i in range(k)) + b[j])
            for r in range(rows) for j in range(n)]


def layer_norm(x, rows, n):
    out = []
    for r in range(rows):
        row = x[r * n:(r + 1) * n]
        mu = sum(row) / n
        var = sum((v - mu) ** 2 for v in row) / n
        out += [f32((v - mu) / math.sqrt(var + 1e-5)) for v in row]
    return out


def softmax(x, rows, n):
    out = []
    for r in range(rows):
        row = x[r * n:(r + 1) * n]
        m = max(row)
        e = [math.exp(v - m) for v in row]
        s = sum(e)
        out += [f32(v / s) for v in e]
    return out


class Dumper:
    def __init__(self, root):
        self.root = root
        self.data = {}
        if os.path.exists(root):
            shutil.rmtree(root)
        os.makedirs(os.path.join(root, "dump_tensor_data"))

    def tensor(self, name, values, shape, requires_grad=False):
        file_name = name + ".npy"
        with open(os.path.join(self.root, "dump_tensor_data", file_name), "wb") as f:
            f.write(npy_bytes(values, shape))
        return {
            "type": "mindspore.Tensor", "dtype": "Float32", "shape": list(shape),
            "Max": f32(max(values)), "Min": f32(min(values)),
            "Mean": f32(sum(values) / len(values)),
            "Norm": f32(math.sqrt(sum(v * v for v in values))),
            "requires_grad": requires_grad, "data_name": file_name,
        }

    def api(self, api, inputs, output, kwargs=None, params=None):
        entry = {"input_args": [], "input_kwargs": {}}
        for i, (values, shape, rg) in enumerate(inputs):
            entry["input_args"].append(self.tensor("%s.input.%d" % (api, i), values, shape, rg))
        for k, v in (kwargs or {}).items():
            entry["input_kwargs"][k] = v
        values, shape = output
        entry["output"] = [self.tensor("%s.output.0" % api, values, shape)]
        self.data[api] = entry

    def close(self):
        with open(os.path.join(self.root, "dump.json"), "w") as f:
            json.dump({"task": "tensor", "level": "L1", "framework": "mindspore",
                       "dump_data_dir": "dump_tensor_data", "data": self.data}, f, indent=1)


def run(root, rng_noise, culprit):
    rng = random.Random(SEED)
    x = [f32(rng.gauss(0, 1)) for _ in range(BATCH * D_IN)]
    w1 = [f32(rng.gauss(0, 0.25)) for _ in range(D_HID * D_IN)]
    b1 = [f32(rng.gauss(0, 0.1)) for _ in range(D_HID)]
    w2 = [f32(rng.gauss(0, 0.18)) for _ in range(D_OUT * D_HID)]
    b2 = [f32(rng.gauss(0, 0.1)) for _ in range(D_OUT)]

    def device(values):  # device rounding noise on an operator's output
        if rng_noise is None:
            return values
        return [f32(v * (1 + rng_noise.gauss(0, 2e-7))) for v in values]

    d = Dumper(root)
    y1 = device(matmul_t(x, w1, b1, BATCH, D_IN, D_HID))
    d.api("Functional.linear.0.forward",
          [(x, (BATCH, D_IN), False), (w1, (D_HID, D_IN), True), (b1, (D_HID,), True)],
          (y1, (BATCH, D_HID)))
    r1 = device([max(v, 0.0) for v in y1])
    d.api("Functional.relu.0.forward", [(y1, (BATCH, D_HID), False)], (r1, (BATCH, D_HID)))
    y2 = device(matmul_t(r1, w2, b2, BATCH, D_HID, D_OUT))
    if culprit:
        # The injected defect: a 40% error on every fourth output column.
        y2 = [f32(v * 1.4 + 0.25) if (i % D_OUT) % 4 == 0 else v for i, v in enumerate(y2)]
    d.api("Functional.linear.1.forward",
          [(r1, (BATCH, D_HID), False), (w2, (D_OUT, D_HID), True), (b2, (D_OUT,), True)],
          (y2, (BATCH, D_OUT)))
    ln = device(layer_norm(y2, BATCH, D_OUT))
    d.api("Functional.layer_norm.0.forward", [(y2, (BATCH, D_OUT), False)], (ln, (BATCH, D_OUT)),
          kwargs={"normalized_shape": [{"type": "int", "value": D_OUT}],
                  "eps": {"type": "float", "value": 1e-05}})
    sm = device(softmax(ln, BATCH, D_OUT))
    d.api("Functional.softmax.0.forward", [(ln, (BATCH, D_OUT), False)], (sm, (BATCH, D_OUT)),
          kwargs={"dim": {"type": "int", "value": -1}})
    d.close()


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sample")
    if len(sys.argv) > 1:
        out = sys.argv[1]
    run(os.path.join(out, "golden"), None, culprit=False)
    run(os.path.join(out, "target"), random.Random(SEED + 1), culprit=True)


if __name__ == "__main__":
    main()
