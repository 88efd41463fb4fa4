#!/usr/bin/env python3
"""Writes tests/data/msprobe_args/{tensor,statistics,md5}/{golden,target}: msprobe dumps whose
operators take every kind of non-tensor argument msprobe's dumper writes (int, float, bool, None,
str, torch.dtype, torch.Size, slice, ellipsis, lists and nested containers of them, a
point-to-point rank, a process group), plus what yields no row (is_recompute, a bare value).
The target changes some arguments' values. tests/common/compare/argument_rows_test.cc holds the
rows msprobe's compare writes for them, read from its code (compare/utils.py gen_op_item and
acc_compare.py). Standard library only; deterministic.
"""
import json
import os
import shutil
import struct
import zlib

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "msprobe_args")


def npy_bytes(values, shape):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % (
        ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else ""))
    total = 10 + len(header) + 1
    header += " " * ((64 - total % 64) % 64) + "\n"
    return (b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1") +
            struct.pack("<%df" % len(values), *values))


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def tensor(task, name, values, shape):
    """A tensor leaf as the dumper writes it for `task`; returns (leaf, data file bytes or None)."""
    vals = [f32(v) for v in values]
    leaf = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": list(shape),
            "Max": max(vals), "Min": min(vals), "Mean": sum(vals) / len(vals),
            "Norm": sum(v * v for v in vals) ** 0.5, "requires_grad": False}
    data = None
    if task == "md5":
        raw = struct.pack("<%df" % len(vals), *vals)
        leaf["md5"] = "%08x" % zlib.crc32(raw)
    if task == "tensor":
        leaf["data_name"] = name + ".npy"
        data = npy_bytes(vals, shape)
    return leaf, data


def arguments(side):
    t = side == "target"
    return {
        "stride": {"type": "int", "value": 2},
        "padding": [{"type": "int", "value": 1}, {"type": "int", "value": 1}],
        "dilation": {"type": "int", "value": 3 if t else 1},
        "groups": {"type": "int", "value": 0},
        "bias": None,
        "scale": {"type": "float", "value": 0.25 if t else 0.5},
        "eps": {"type": "float", "value": 1e-05},
        "transposed": {"type": "bool", "value": False},
        "padding_mode": {"type": "str", "value": "reflect" if t else "zeros"},
        "dtype": {"type": "torch.dtype", "value": "torch.float32"},
        "size": {"type": "torch.Size", "value": [2, 3]},
        "index": {"type": "slice", "value": [0, 3, None]},
        "rest": {"type": "ellipsis", "value": "..."},
        "nested": {"a": [{"type": "int", "value": 4}, {"b": {"type": "float", "value": 1.5}}]},
        "count": {"type": "int", "value": 5},
        "flag": True,  # a bare value: no leaf, no row
    }


def dump(task, side):
    root = os.path.join(OUT, task, side)
    data_dir = os.path.join(root, "dump_tensor_data")
    os.makedirs(root)
    if task == "tensor":
        os.makedirs(data_dir)
    files = {}

    def leaf(name, values, shape):
        lf, data = tensor(task, name, values, shape)
        if data is not None:
            files[name + ".npy"] = data
        return lf

    x = [0.5, -1.0, 2.0, 0.25, 1.5, -0.75]
    y = [v * (1.001 if side == "target" else 1.0) for v in x]
    conv = "Functional.conv2d.0.forward"
    send = "Distributed.isend.0.forward"
    data = {
        conv: {
            "input_args": [leaf(conv + ".input.0", x, [2, 3])],
            "input_kwargs": arguments(side),
            "output": [leaf(conv + ".output.0", y, [2, 3])],
            "is_recompute": False,
        },
        send: {
            "input_args": [leaf(send + ".input.0", y, [2, 3])],
            "input_kwargs": {
                "dst": {"type": "int", "value": 1},
                "group": {"type": "torch.ProcessGroup", "group_ranks": [0, 1], "group_id": "g0"},
                "tag": {"type": "int", "value": 0},
            },
            "output": [None],
        },
    }
    # msprobe writes an md5 dump as a statistics task whose leaves carry "md5".
    doc = {"task": "statistics" if task == "md5" else task, "level": "L1", "framework": "pytorch", "dump_data_dir": data_dir if task == "tensor" else None,
           "data": data}
    with open(os.path.join(root, "dump.json"), "w") as f:
        json.dump(doc, f, indent=1)
    for name, b in files.items():
        with open(os.path.join(data_dir, name), "wb") as f:
            f.write(b)


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    for task in ("tensor", "statistics", "md5"):
        for side in ("golden", "target"):
            dump(task, side)


if __name__ == "__main__":
    main()
