"""Turns what a caller uploads (numpy arrays, torch tensors, Python scalars) into items: the
TensorHeader the daemon reads and the raw little-endian bytes sent in chunks."""
from __future__ import annotations

import dataclasses
import re
import zlib
from typing import Any, NamedTuple, Optional

import numpy as np

from parity.v1 import parity_pb2 as pb

_NUMPY_DTYPES = {
    "bool": pb.DTYPE_BOOL, "uint8": pb.DTYPE_UINT8, "int8": pb.DTYPE_INT8, "int16": pb.DTYPE_INT16,
    "uint16": pb.DTYPE_UINT16, "int32": pb.DTYPE_INT32, "uint32": pb.DTYPE_UINT32,
    "int64": pb.DTYPE_INT64, "uint64": pb.DTYPE_UINT64, "float16": pb.DTYPE_FLOAT16,
    "float32": pb.DTYPE_FLOAT32, "float64": pb.DTYPE_FLOAT64,
}

# msprobe's item names: "<api>.<section>.<i>[.<j>...]" where the API ends in ".forward" or
# ".backward" (a module's with its call count after it), or "<module>.parameters_grad.<param>".
_API_ITEM = re.compile(r"^(?P<api>.+?\.(?:forward|backward)(?:\.\d+)?)\.(?P<section>input|output|parameters)(?:\.|$)")
_GRAD_ITEM = re.compile(r"^(?P<api>.+\.parameters_grad)(?:\.|$)")
_ROLES = {"input": pb.ROLE_INPUT, "output": pb.ROLE_OUTPUT, "parameters": pb.ROLE_PARAMETER}


def op_type_of(api: str) -> str:
    """The operator type of an API name, as the daemon's dump reader derives it."""
    parts = api.split(".")
    if parts[0] in ("Module", "Cell"):
        for i in range(1, len(parts)):
            if parts[i] in ("forward", "backward", "parameters_grad"):
                return parts[i - 1]
    return parts[1] if len(parts) > 1 else parts[0]


def item_key(name: str, index: int) -> "pb.ItemKey":
    """The key of an item named as msprobe names it; any other name is its own operator."""
    key = pb.ItemKey(name=name, index=index)
    m = _API_ITEM.match(name)
    g = None if m else _GRAD_ITEM.match(name)
    if m:
        key.api = m.group("api")
        key.role = _ROLES[m.group("section")]
    elif g:
        key.api = g.group("api")
        key.role = pb.ROLE_GRADIENT
    else:
        key.api = key.op_type = name
        return key
    key.op_type = op_type_of(key.api)
    if ".backward" in key.api or "parameters_grad" in key.api:
        key.phase = pb.PHASE_BACKWARD
    elif ".forward" in key.api:
        key.phase = pb.PHASE_FORWARD
    return key


@dataclasses.dataclass
class Item:
    """One item ready to send: its header (without key) and its bytes (None for an argument)."""
    header: "pb.TensorHeader"
    data: Optional[memoryview]
    keep: Any = None  # what `data` views, kept alive while the item may be sent

    @property
    def nbytes(self) -> int:
        return self.data.nbytes if self.data is not None else 0


def _torch_to_numpy(t):
    """A CPU numpy view of a torch tensor's bytes, its DType and its torch dtype text."""
    import torch  # only when the caller passed a torch tensor
    dtype_text = str(t.dtype)
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy(), pb.DTYPE_BFLOAT16, dtype_text
    f8 = {getattr(torch, "float8_e4m3fn", None): pb.DTYPE_FLOAT8_E4M3FN,
          getattr(torch, "float8_e5m2", None): pb.DTYPE_FLOAT8_E5M2}
    if t.dtype in f8 and t.dtype is not None:
        return t.view(torch.uint8).numpy(), f8[t.dtype], dtype_text
    a = t.numpy()
    if a.dtype.name not in _NUMPY_DTYPES:
        raise TypeError("torch dtype %s cannot be uploaded" % dtype_text)
    return a, _NUMPY_DTYPES[a.dtype.name], dtype_text


def torch_stats(t) -> "pb.Statistics":
    """A torch tensor's statistics where it lives (the device), as msprobe's dumper computes
    them (its get_stat_info): a bool tensor's max and min are any() and all(); a 0-d tensor's
    four are its value; integer and float64 tensors are reduced in float32, other floating
    tensors in their own dtype (torch.max, min, mean, norm)."""
    import torch
    s = pb.Statistics()
    v = t.detach()
    if v.numel() == 0 or v.is_complex():
        return s
    if v.dtype == torch.bool:
        s.max, s.min = float(torch.any(v)), float(torch.all(v))
        return s
    if v.dim() == 0:
        s.max = s.min = s.mean = s.norm = float(v)
        return s
    if not v.is_floating_point() or v.dtype == torch.float64:
        v = v.float()
    s.max = float(torch.max(v))
    s.min = float(torch.min(v))
    s.mean = float(torch.mean(v))
    s.norm = float(torch.norm(v))
    return s


def _stats(a: np.ndarray, dtype: int) -> "pb.Statistics":
    s = pb.Statistics()
    if a.size == 0 or dtype in (pb.DTYPE_BFLOAT16, pb.DTYPE_FLOAT8_E4M3FN, pb.DTYPE_FLOAT8_E5M2):
        return s
    v = a.astype(np.float64, copy=False)
    with np.errstate(all="ignore"):
        s.max = float(v.max())
        s.min = float(v.min())
        s.mean = float(v.mean())
        s.norm = float(np.sqrt(np.dot(v.ravel(), v.ravel())))
    return s


class WithStats(NamedTuple):
    """A tensor (a host copy) and the statistics computed before it was copied."""
    tensor: Any
    stats: "pb.Statistics"


class TensorStats:
    """A torch tensor reduced to what a STATS or CRC item carries: its dtype, shape and
    statistics (computed where the tensor lives), and for a CRC item the CRC-32 of its bytes
    (computed at once: a tensor the model changes later keeps the CRC it had)."""

    def __init__(self, t, crc: bool):
        self.dtype_text = str(t.dtype)
        self.requires_grad = bool(t.requires_grad)
        self.shape = tuple(int(d) for d in t.shape)
        self.stats = torch_stats(t)
        host, self.dtype, _ = _torch_to_numpy(t if crc else t.detach().reshape(-1)[:1])
        self.crc32 = zlib.crc32(memoryview(host.reshape(-1).view(np.uint8))) if crc else None


def make_item(value: Any, mode: int, stats: Optional["pb.Statistics"] = None) -> Item:
    """An item for `value`: a numpy array, a torch tensor (or either with its statistics, as
    WithStats), a TensorStats, or a Python scalar (an argument).

    `mode` is a DataMode; DATA sends the bytes, STATS and CRC only the header. Every tensor
    item carries its statistics (msprobe's max, min, mean and L2 norm, for the statistics
    comparison and the CSV's columns): `stats` when given, else computed here (for a torch
    tensor where it lives, in float64)."""
    if isinstance(value, WithStats):
        value, stats = value.tensor, value.stats
    h = pb.TensorHeader()
    if value is None or isinstance(value, (bool, int, float, str)):
        text = type(value).__name__ if value is not None else "None"
        h.scalar_value = str(value)
        h.scalar_type = text
        h.dtype_text = text
        h.shape_text = "None" if value is None else "[]"
        return Item(h, None)
    dtype_text = ""
    if isinstance(value, TensorStats):
        h.dtype, h.dtype_text, h.requires_grad, h.data_mode = value.dtype, value.dtype_text, value.requires_grad, mode
        h.shape.extend(value.shape)
        h.stats.CopyFrom(value.stats)
        if value.crc32 is not None:
            h.crc32 = value.crc32
        return Item(h, None)
    if isinstance(value, np.ndarray) or np.isscalar(value):
        a = np.asarray(value)
        if a.dtype.name not in _NUMPY_DTYPES:
            raise TypeError("numpy dtype %s cannot be uploaded (supported: %s)"
                            % (a.dtype, ", ".join(sorted(_NUMPY_DTYPES))))
        dtype = _NUMPY_DTYPES[a.dtype.name]
        requires_grad = None
    elif type(value).__module__.startswith("torch") and hasattr(value, "detach"):
        requires_grad = bool(value.requires_grad)
        if stats is None:
            stats = torch_stats(value)
        a, dtype, dtype_text = _torch_to_numpy(value)
    else:
        raise TypeError("cannot upload a %s: give a numpy array, a torch tensor or a Python scalar"
                        % type(value).__name__)
    if not a.flags.c_contiguous:
        a = a.copy()  # (np.ascontiguousarray would make a 0-d array 1-d)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    raw = memoryview(a.reshape(-1).view(np.uint8)) if a.size else memoryview(b"")
    h.dtype = dtype
    h.shape.extend(int(d) for d in a.shape)
    h.dtype_text = dtype_text
    if requires_grad is not None:
        h.requires_grad = requires_grad
    h.data_mode = mode
    h.stats.CopyFrom(stats if stats is not None else _stats(a, dtype))
    if mode == pb.DATA_MODE_DATA:
        h.byte_length = raw.nbytes
        h.crc32 = zlib.crc32(raw)
        return Item(h, raw, a)
    if mode == pb.DATA_MODE_CRC:
        h.crc32 = zlib.crc32(raw)
    return Item(h, None)
