"""Writes what a parity.torch capture records as an msprobe dump directory (dump.json, one .npy
per tensor in dump_tensor_data/, construct.json and, when the capture records stacks,
stack.json), for tests that upload it with parity-agent: the same model run, on disk in
msprobe's layout instead of streamed."""
import json
import os
import threading

import numpy as np

from parity._tensors import TensorStats, WithStats, item_key
from parity.v1 import parity_pb2 as pb

_SECTIONS = {pb.ROLE_INPUT: "input", pb.ROLE_OUTPUT: "output", pb.ROLE_PARAMETER: "parameters"}


def _place(container, parts, leaf):
    """Puts `leaf` at the path `parts` (digits index lists, other parts key objects)."""
    head, rest = parts[0], parts[1:]
    if isinstance(container, list):
        i = int(head)
        while len(container) <= i:
            container.append(None)
        if not rest:
            container[i] = leaf
            return
        if container[i] is None:
            container[i] = [] if rest[0].isdigit() else {}
        _place(container[i], rest, leaf)
    else:
        if not rest:
            container[head] = leaf
            return
        _place(container.setdefault(head, [] if rest[0].isdigit() else {}), rest, leaf)


def _leaf(name, value, data_dir):
    if isinstance(value, WithStats):
        t, s = value.tensor, value.stats
        a = t.float().numpy() if str(t.dtype) == "torch.bfloat16" else t.numpy()
        np.save(os.path.join(data_dir, name + ".npy"), a)
        return {"type": "torch.Tensor", "dtype": str(t.dtype), "shape": list(t.shape), "Max": s.max,
                "Min": s.min, "Mean": s.mean, "Norm": s.norm, "requires_grad": bool(t.requires_grad),
                "data_name": name + ".npy"}
    if isinstance(value, TensorStats):
        raise ValueError("write a dump from a capture in mode full")
    if value is None:
        return None
    return {"type": type(value).__name__, "value": value}


class DumpWriter:
    """Stands in for parity.Client in parity.torch.capture(model, DumpWriter(dir), ...): the
    capture's items go to an msprobe dump in `root` instead of to parityd."""

    def __init__(self, root):
        self.root = root
        self.run_id = self.job_id = ""
        self.summary = None

    def upload(self, items, files=None, **_):
        self._items = items
        self._files = files
        self._thread = threading.Thread(target=self._write, daemon=True)
        self._thread.start()
        return self

    def done(self):
        return not self._thread.is_alive()

    def wait(self):
        self._thread.join()
        return self

    def _write(self):
        data_dir = os.path.join(self.root, "dump_tensor_data")
        os.makedirs(data_dir, exist_ok=True)
        data = {}
        for name, value in self._items:
            key = item_key(name, 0)
            entry = data.setdefault(key.api, {})
            rest = name[len(key.api) + 1:].split(".")
            leaf = _leaf(name, value, data_dir)
            if key.role == pb.ROLE_GRADIENT:
                entry[rest[0]] = leaf
                continue
            section = _SECTIONS[key.role]
            rest = rest[1:]
            if section == "input":
                args = entry.setdefault("input_args", [])
                kwargs = entry.setdefault("input_kwargs", {})
                _place(args if rest[0].isdigit() else kwargs, rest, leaf)
            else:
                _place(entry.setdefault(section, [] if rest[0].isdigit() else {}), rest, leaf)
        with open(os.path.join(self.root, "dump.json"), "w") as f:
            json.dump({"task": "tensor", "level": "mix", "framework": "pytorch",
                       "dump_data_dir": "dump_tensor_data", "data": data}, f, indent=1)
        # construct.json and stack.json as the capture recorded them (msprobe writes them beside
        # dump.json).
        files = self._files() if callable(self._files) else (self._files or {})
        for name, content in files.items():
            with open(os.path.join(self.root, name), "wb") as f:
                f.write(content)
