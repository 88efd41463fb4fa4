#!/usr/bin/env python3
"""Writes Ascend GE dump fixtures for ge_test: [u64 header length][DumpData protobuf][raw data],
the protobuf encoded by hand (toolkit.dumpdata: DumpData{3: output, 4: input, 6: op_name};
OpInput{1: data_type, 2: format, 3: shape, 5: size}; OpOutput{1, 2, 3, 6: size};
Shape{1: repeated uint64 dim}). Standard library only; deterministic."""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ge")
DT_FLOAT, DT_FLOAT16, DT_INT32, DT_BF16 = 1, 2, 7, 27
ND, NC1HWC0 = 2, 3


def varint(v):
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, wire, payload):
    key = varint((num << 3) | wire)
    if wire == 0:
        return key + varint(payload)
    return key + varint(len(payload)) + payload


def tensor(dtype, fmt, shape, size, output):
    shp = b"".join(field(1, 0, d) for d in shape)
    return field(1, 0, dtype) + field(2, 0, fmt) + field(3, 2, shp) + field(6 if output else 5, 0, size)


def write(name, op_name, inputs, outputs, data, header_len_override=None):
    hdr = b"".join(field(4, 2, tensor(*t, False)) for t in inputs)
    hdr += b"".join(field(3, 2, tensor(*t, True)) for t in outputs)
    hdr += field(6, 2, op_name.encode())
    hl = len(hdr) if header_len_override is None else header_len_override
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(struct.pack("<Q", hl) + hdr + data)


def main():
    os.makedirs(OUT, exist_ok=True)
    for side, delta in (("golden", 0.0), ("target", 0.25)):
        d = os.path.join(OUT, side)
        os.makedirs(d, exist_ok=True)
        x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
        y = [0.5] * 6
        z = [a + b + (delta if i == 5 else 0) for i, (a, b) in enumerate(zip(x, y))]
        data = struct.pack("<6f", *x) + struct.pack("<6f", *y) + struct.pack("<6f", *z)
        write(os.path.join(side, "Add.add_1.3.2.1700000000000001"), "add_1",
              [(DT_FLOAT, ND, [2, 3], 24), (DT_FLOAT, ND, [2, 3], 24)], [(DT_FLOAT, ND, [2, 3], 24)], data)
        # bf16 output of a cast (1.0, -2.0), one occurrence.
        write(os.path.join(side, "Cast.cast_2.4.2.1700000000000002"), "cast_2",
              [(DT_FLOAT, ND, [2], 8)], [(DT_BF16, ND, [2], 4)],
              struct.pack("<2f", 1.0, -2.0) + struct.pack("<2H", 0x3F80, 0xC000))
    bad = os.path.join(OUT, "bad")
    os.makedirs(bad, exist_ok=True)
    write(os.path.join("bad", "Conv2D.conv.1.2.1700000000000003"), "conv",
          [(DT_FLOAT16, NC1HWC0, [1, 1, 2, 2, 16], 128)], [], b"\0" * 128)
    write(os.path.join("bad", "Add.wrong_size.1.2.1700000000000004"), "wrong_size",
          [(DT_FLOAT, ND, [2, 3], 20)], [], b"\0" * 20)
    write(os.path.join("bad", "Add.truncated.1.2.1700000000000005"), "truncated",
          [(DT_FLOAT, ND, [4], 16)], [], b"\0" * 8)
    write(os.path.join("bad", "Add.lying_header.1.2.1700000000000006"), "lying",
          [(DT_FLOAT, ND, [1], 4)], [], b"\0" * 4, header_len_override=1 << 40)


if __name__ == "__main__":
    main()
