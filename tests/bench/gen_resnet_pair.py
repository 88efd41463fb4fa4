#!/usr/bin/env python3
"""Writes a mixed-precision msprobe dump pair shaped like one forward step of a ResNet-50 (level
L1, PyTorch `.pt` files as torch.save lays them out, written without PyTorch by
tests/data/make_pt.py's pickler): OUT/golden in float32 and OUT/target in bfloat16, about 640
tensors a side from 256 bytes (batch-norm statistics) to BATCH * 3 MiB (the largest
activations; 1.1 GB of float32 a side at the default batch of 4). The target is the golden rounded to bfloat16
(as autocast leaves it), except for a few real differences: one batch_norm's output with every
seventh value's sign flipped, and the next nine conv outputs with 20 % noise added. With
`float16`, the target is in float16 instead (an fp16 port's).

    gen_resnet_pair.py OUT [BATCH=4] [bfloat16|float16]
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data"))
import make_pt  # noqa: E402  (registers the stand-in torch modules its pickles name)


def layers(batch):
    """(api, [(role, shape)]) in dump order: stem, then the 16 bottlenecks of ResNet-50."""
    out = []
    count = {}

    def api(kind, tensors):
        n = count.get(kind, 0)
        count[kind] = n + 1
        out.append(("Functional.%s.%d.forward" % (kind, n), tensors))

    def conv_bn_relu(cin, cout, k, hw_in, hw_out, relu=True):
        api("conv2d", [("input", (batch, cin, hw_in, hw_in)), ("input", (cout, cin, k, k)),
                       ("output", (batch, cout, hw_out, hw_out))])
        act = (batch, cout, hw_out, hw_out)
        api("batch_norm", [("input", act), ("input", (cout,)), ("input", (cout,)), ("input", (cout,)),
                           ("input", (cout,)), ("output", act)])
        if relu:
            api("relu", [("input", act), ("output", act)])

    conv_bn_relu(3, 64, 7, 224, 112)
    api("max_pool2d", [("input", (batch, 64, 112, 112)), ("output", (batch, 64, 56, 56))])
    cin, hw = 64, 56
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for b in range(blocks):
            s = stride if b == 0 else 1
            conv_bn_relu(cin, width, 1, hw, hw)
            conv_bn_relu(width, width, 3, hw, hw // s)
            conv_bn_relu(width, width * 4, 1, hw // s, hw // s, relu=False)
            if b == 0:  # the projection shortcut
                conv_bn_relu(cin, width * 4, 1, hw, hw // s, relu=False)
            act = (batch, width * 4, hw // s, hw // s)
            api("add", [("input", act), ("input", act), ("output", act)])
            api("relu", [("input", act), ("output", act)])
            cin, hw = width * 4, hw // s
    api("adaptive_avg_pool2d", [("input", (batch, 2048, 7, 7)), ("output", (batch, 2048, 1, 1))])
    api("linear", [("input", (batch, 2048)), ("input", (1000, 2048)), ("input", (1000,)),
                   ("output", (batch, 1000))])
    return out


def bf16_bits(x):
    u = x.view(np.uint32)
    return ((u + np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1))) >> 16).astype(np.uint16)


def stats(x):
    x64 = x.astype(np.float64) if x.size < (1 << 20) else x
    return {"Max": float(x.max()), "Min": float(x.min()), "Mean": float(x64.mean()),
            "Norm": float(np.sqrt(np.dot(x.ravel().astype(np.float64), x.ravel().astype(np.float64))))}


def main():
    out, batch = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 4
    half = len(sys.argv) > 3 and sys.argv[3] == "float16"  # an fp16 port's target instead of bf16
    rng = np.random.default_rng(50)
    pool = rng.standard_normal(1 << 25, dtype=np.float32)  # 128 MiB, sliced for every tensor
    data = {"golden": {}, "target": {}}
    for side in data:
        os.makedirs(os.path.join(out, side, "dump_tensor_data"), exist_ok=True)
    bad_bn = "Functional.batch_norm.30.forward"
    off = 0
    tensors = 0
    for name, specs in layers(batch):
        entries = {"golden": {"input_args": [], "input_kwargs": {}, "output": []},
                   "target": {"input_args": [], "input_kwargs": {}, "output": []}}
        seen = {"input": 0, "output": 0}
        for role, shape in specs:
            n = int(np.prod(shape))
            if off + n > pool.size:
                off = 0
            g = pool[off:off + n]
            off = (off + n + 4099) % (pool.size - 1)
            t = g
            if role == "output" and name == bad_bn:
                t = g.copy()
                t[::7] = -t[::7]
            elif role == "output" and name.startswith("Functional.conv2d.") and 30 < int(name.split(".")[2]) <= 39:
                t = g + np.float32(0.2) * pool[(off + 1) % 4096:(off + 1) % 4096 + n]
            if half:
                tb = np.ascontiguousarray(t).astype(np.float16)
                tw = tb.astype(np.float32)
            else:
                tb = bf16_bits(np.ascontiguousarray(t))
                tw = (tb.astype(np.uint32) << 16).view(np.float32)
            target_storage, target_dtype = ("HalfStorage", "torch.float16") if half else ("BFloat16Storage",
                                                                                           "torch.bfloat16")
            data_name = "%s.%s.%d.pt" % (name, role, seen[role])
            for side, storage, raw, vals, dtype in (("golden", "FloatStorage", g.tobytes(), g, "torch.float32"),
                                                    ("target", target_storage, tb.tobytes(), tw, target_dtype)):
                st = make_pt.Storage(storage, "0", raw, n)
                stride = [int(np.prod(shape[i + 1:])) for i in range(len(shape))]
                make_pt.save(os.path.join(out, side, "dump_tensor_data", data_name),
                             make_pt.Tensor(st, 0, list(shape), stride), [st])
                entry = {"type": "torch.Tensor", "dtype": dtype, "shape": list(shape), "requires_grad": False,
                         "data_name": data_name}
                entry.update(stats(vals))
                entries[side]["input_args" if role == "input" else "output"].append(entry)
            seen[role] += 1
            tensors += 1
        for side in data:
            data[side][name] = entries[side]
    for side in data:
        with open(os.path.join(out, side, "dump.json"), "w") as f:
            json.dump({"task": "tensor", "level": "L1", "framework": "pytorch", "dump_data_dir": None,
                       "data": data[side]}, f)
    print("generated %d tensor pairs" % tensors)


if __name__ == "__main__":
    main()
