#!/usr/bin/env python3
"""Writes .pt fixtures for pt_test without PyTorch: ZIP archives laid out as torch.save writes them
(<name>/data.pkl, <name>/data/<key>, <name>/version, <name>/byteorder) whose pickles reference
torch._utils._rebuild_tensor_v2 and torch.*Storage through stand-in modules registered in
sys.modules, so that the standard pickler emits the same GLOBAL opcodes torch's does.

Also writes malicious.pt (GLOBAL os.system + REDUCE) and broken variants. Deterministic.
"""
import collections
import io
import os
import pickle
import struct
import sys
import types
import zipfile

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pt")

torch = types.ModuleType("torch")
torch_utils = types.ModuleType("torch._utils")
sys.modules["torch"] = torch
sys.modules["torch._utils"] = torch_utils


def _rebuild_tensor_v2(*args):  # never called: only referenced by name
    raise AssertionError


_rebuild_tensor_v2.__module__ = "torch._utils"
torch_utils._rebuild_tensor_v2 = _rebuild_tensor_v2

STORAGES = {}
for name in ["FloatStorage", "HalfStorage", "BFloat16Storage", "LongStorage", "BoolStorage", "DoubleStorage"]:
    cls = type(name, (), {})
    cls.__module__ = "torch"
    setattr(torch, name, cls)
    STORAGES[name] = cls


class Storage:
    def __init__(self, cls_name, key, data, numel):
        self.cls, self.key, self.data, self.numel = STORAGES[cls_name], key, data, numel


class Tensor:
    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride

    def __reduce__(self):
        return (_rebuild_tensor_v2,
                (self.storage, self.offset, tuple(self.size), tuple(self.stride), False,
                 collections.OrderedDict()))


class TorchPickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", obj.cls, obj.key, "cpu", obj.numel)
        return None


def write_archive(path, pickle_bytes, storages, archive="archive", compress=False):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED) as z:
        z.writestr(archive + "/data.pkl", pickle_bytes)
        z.writestr(archive + "/byteorder", b"little")
        for s in storages:
            z.writestr(archive + "/data/" + s.key, s.data)
        z.writestr(archive + "/version", b"3\n")


def save(path, obj, storages, **kw):
    buf = io.BytesIO()
    TorchPickler(buf, protocol=2).dump(obj)
    write_archive(path, buf.getvalue(), storages, **kw)


def floats(values):
    return struct.pack("<%df" % len(values), *values)


def main():
    os.makedirs(OUT, exist_ok=True)
    # A 2x3 float32 tensor.
    s = Storage("FloatStorage", "0", floats([1, 2, 3, 4, 5, 6]), 6)
    save(os.path.join(OUT, "f32.pt"), Tensor(s, 0, [2, 3], [3, 1]), [s])
    # Its transpose: a non-contiguous view (3x2, stride (1, 3)) of the same storage, offset view.
    save(os.path.join(OUT, "transposed.pt"), Tensor(s, 0, [3, 2], [1, 3]), [s])
    save(os.path.join(OUT, "offset.pt"), Tensor(s, 2, [4], [1]), [s])
    # bfloat16 (1.0, -2.0) and bool.
    bf = Storage("BFloat16Storage", "0", struct.pack("<2H", 0x3F80, 0xC000), 2)
    save(os.path.join(OUT, "bf16.pt"), Tensor(bf, 0, [2], [1]), [bf], archive="bf16")
    # A state_dict (OrderedDict of two tensors sharing nothing).
    w = Storage("FloatStorage", "0", floats([0.5, -0.5]), 2)
    b = Storage("LongStorage", "1", struct.pack("<q", 7), 1)
    save(os.path.join(OUT, "state_dict.pt"),
         collections.OrderedDict([("weight", Tensor(w, 0, [2], [1])), ("step", Tensor(b, 0, [], []))]), [w, b])
    # Malicious: GLOBAL os.system, then REDUCE with a shell command. Must be refused unexecuted.
    cmd = b"touch /tmp/parity_pwned_by_pickle"
    evil = b"\x80\x02cos\nsystem\nq\x00X" + struct.pack("<I", len(cmd)) + cmd + b"q\x01\x85q\x02Rq\x03."
    write_archive(os.path.join(OUT, "malicious.pt"), evil, [])
    # An unsupported opcode (INST, 'i').
    write_archive(os.path.join(OUT, "bad_opcode.pt"), b"\x80\x02(i__main__\nThing\n.", [])
    # Lists nested 100,000 deep (destroying such a tree recursively would overflow the stack).
    n = 100000
    write_archive(os.path.join(OUT, "deep.pt"), b"\x80\x02" + b"]" * n + b"a" * (n - 1) + b".", [])
    # A list that holds itself (EMPTY_LIST, BINPUT 0, BINGET 0, APPEND).
    write_archive(os.path.join(OUT, "recursive.pt"), b"\x80\x02]q\x00h\x00a.", [])
    # A view reaching past its storage.
    short = Storage("FloatStorage", "0", floats([1, 2]), 2)
    save(os.path.join(OUT, "out_of_bounds.pt"), Tensor(short, 1, [4], [1]), [short])
    # A compressed archive (torch never writes one).
    save(os.path.join(OUT, "compressed.pt"), Tensor(s, 0, [2, 3], [3, 1]), [s], compress=True)
    # A PyTorch msprobe dump pair (dump.json + dump_tensor_data/*.pt): add(x, y) = z, the target's
    # z is off by 10%.
    import json
    for side, scale in (("golden", 1.0), ("target", 1.1)):
        root = os.path.join(OUT, "msprobe_dump", side)
        os.makedirs(os.path.join(root, "dump_tensor_data"), exist_ok=True)
        x, y = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [0.5] * 6
        z = [(a + b) * scale for a, b in zip(x, y)]
        entry = {"input_args": [], "input_kwargs": {}, "output": []}
        for role, name, vals in (("input_args", "input.0", x), ("input_args", "input.1", y), ("output", "output.0", z)):
            data_name = "Functional.add.0.forward.%s.pt" % name
            st = Storage("FloatStorage", "0", floats(vals), 6)
            save(os.path.join(root, "dump_tensor_data", data_name), Tensor(st, 0, [2, 3], [3, 1]), [st])
            entry[role].append({"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2, 3],
                                "Max": max(vals), "Min": min(vals), "Mean": sum(vals) / 6,
                                "Norm": sum(v * v for v in vals) ** 0.5, "requires_grad": False,
                                "data_name": data_name})
        with open(os.path.join(root, "dump.json"), "w") as f:
            json.dump({"task": "tensor", "level": "L1", "framework": "pytorch", "dump_data_dir": None,
                       "data": {"Functional.add.0.forward": entry}}, f, indent=1)
    # Not a zip at all.
    with open(os.path.join(OUT, "not_zip.pt"), "wb") as f:
        f.write(b"\x80\x02}q\x00.")


if __name__ == "__main__":
    main()
