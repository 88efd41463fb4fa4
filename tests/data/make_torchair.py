#!/usr/bin/env python3
"""TorchAir graph-mode fixtures without an NPU: a small CNN + MLP on CPU, traced to ATen ops with
torch.fx (make_fx), run node by node, and written as

  fx/msit_fx_dump/worldsize2_global_rank{R}/{model}/{token}/{node}-{target}.{INPUT|OUTPUT}.{i}.{ts}.npy
      the FX dump (golden), ranks 0 and 1, tokens 0 and 1;
  ge_fused/msit_ge_dump/worldsize2_global_rank{R}/{time}/{device}/{model}/{model_id}/{token}/
      {op_type}.{op_name}.{task}.{stream}.{timestamp}
      a GE dump of the same run in the GE binary layout ([u64 header length][DumpData][data]),
      with dynamo_original_graph_*_rank_{R}_*.txt (one GE op per ATen node, each output_desc
      carrying _fx_tensor_name) at msit_ge_dump/; conv + batch_norm + relu and mm + add fused
      into AutomaticBufferFusionOp ops named after their ops, the second conv group computing a
      wrong output (the numeric defect: one channel scaled and shifted), which the rest of the
      run consumes; a Cast and a TransData op that GE inserted (not in the graph);
  ge_unfused/...     the same GE dump with fusion switched off and no defect;
  fx_old/data_dump/{token + 1}/gm_{time}_dump/*.npy and ge_old/dump_{time}/...
      rank 0 in the older layouts (no rank directories; FX token directories one above the token).

Tensors are stored as an NPU would hold them: activations in bfloat16 (conv outputs NC1HWC0,
mm outputs float32 FRACTAL_NZ), convolution weights float16 FRACTAL_Z, the rest float32 ND, each
with its original shape. Deterministic (fixed seeds).

    make_torchair.py OUT      -> prints the JSON of what was written (see EXPECTED)
"""
import json
import os
import struct
import sys

import numpy as np
import torch
from torch.fx.experimental.proxy_tensor import make_fx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_ge import field  # noqa: E402  (the protobuf wire format, written by hand)

DT = {"float32": 1, "float16": 2, "bfloat16": 27}
FMT = {"ND": 2, "NCHW": 0, "NC1HWC0": 3, "FRACTAL_Z": 4, "FRACTAL_NZ": 29}
GE_TYPES = {"aten.convolution.default": "Conv2D", "aten.native_batch_norm.default": "BNInference",
            "aten.relu.default": "Relu", "aten.avg_pool2d.default": "AvgPool", "aten._reshape_alias.default": "Reshape",
            "aten.view.default": "Reshape", "aten.mm.default": "MatMul", "aten.add.Tensor": "Add"}
SKIPPED_TARGETS = ("aten.empty.memory_format", "aten.detach.default", "<built-in function getitem>")
MODEL = "graph_1"
DEFECT_GROUP = 1  # the second conv + batch_norm + relu group
# What the tests expect of the fixtures.
EXPECTED = {"culprit": "Conv2D_2BNInference_2Relu_2", "tokens": ["0", "1"], "ranks": ["0", "1"],
            "unresolved": ["Cast_99", "TransData_98"]}


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 19, 3, padding=1)  # 19 channels: C not a multiple of C0
        self.bn1 = torch.nn.BatchNorm2d(19)
        self.conv2 = torch.nn.Conv2d(19, 21, 3, padding=1)
        self.bn2 = torch.nn.BatchNorm2d(21)
        self.w1 = torch.nn.Parameter(torch.randn(21 * 4 * 4, 37) * 0.05)  # 37: N not a multiple of N0
        self.b1 = torch.nn.Parameter(torch.randn(37) * 0.1)
        self.w2 = torch.nn.Parameter(torch.randn(37, 10) * 0.1)
        self.b2 = torch.nn.Parameter(torch.randn(10) * 0.1)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.bn2(self.conv2(y)))
        y = torch.nn.functional.avg_pool2d(y, 2).flatten(1)
        y = torch.relu(torch.matmul(y, self.w1) + self.b1)
        return torch.matmul(y, self.w2) + self.b2


def model():
    torch.manual_seed(7)
    net = Net()
    with torch.no_grad():
        for bn in (net.bn1, net.bn2):
            bn.running_mean.uniform_(-0.2, 0.2)
            bn.running_var.uniform_(0.5, 1.5)
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.2, 0.2)
        for p in net.parameters():  # no value an fp16 weight would hold as a subnormal
            p.copy_(torch.where(p.abs() < 1e-3, torch.full_like(p, 1e-3) * torch.sign(p + 1e-9), p))
    net.eval()
    return net, make_fx(net)(torch.randn(2, 3, 8, 8))


def tensor_args(node):
    return [a for a in node.args if isinstance(a, torch.fx.Node)]


def run(gm, x, defect_node=None):
    """{node name: [output tensors]} for every node, in execution order; the defect (if any)
    applied to defect_node's output and consumed downstream."""
    env, outs = {}, {}
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            env[node.name] = x
        elif node.op == "get_attr":
            env[node.name] = getattr(gm, node.target)
        elif node.op == "call_function":
            args = torch.fx.node.map_arg(node.args, lambda n: env[n.name])
            kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: env[n.name])
            v = node.target(*args, **kwargs)
            if node.name == defect_node:
                v = v.clone()
                v[:, 5] = v[:, 5] * 1.8 + 0.3
            env[node.name] = v
        if node.op != "output":
            v = env[node.name]
            outs[node.name] = [t for t in (v if isinstance(v, (tuple, list)) else [v]) if isinstance(t, torch.Tensor)]
    return env, outs


def dumped_nodes(gm):
    return [n for n in gm.graph.nodes if n.op == "call_function" and str(n.target) not in SKIPPED_TARGETS]


def fx_name(node):
    return f"{node.name}-{node.target}"


def source(node):
    """The dumped node a tensor argument comes from (through getitem/detach)."""
    while node.op == "call_function" and str(node.target) in SKIPPED_TARGETS:
        node = node.args[0]
    return node


def ge_names(gm):
    """GE op names: {Type}_{k} per dumped node, Data_0 / Const_k for the rest."""
    counts, names = {}, {}
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            names[n.name] = "Data_0"
        elif n.op == "get_attr":
            counts["Const"] = counts.get("Const", 0) + 1
            names[n.name] = f"Const_{counts['Const']}"
        elif n.op == "call_function" and str(n.target) not in SKIPPED_TARGETS:
            t = GE_TYPES[str(n.target)]
            counts[t] = counts.get(t, 0) + 1
            names[n.name] = f"{t}_{counts[t]}"
    return names


def graph_text(gm, names):
    lines = []
    for n in gm.graph.nodes:
        if n.op in ("placeholder", "get_attr"):
            lines += ["op {", f'  name: "{names[n.name]}"', f'  type: "{"Data" if n.op == "placeholder" else "Const"}"',
                      "  output_desc {", '    name: "y"', "    dtype: DT_FLOAT", "  }", "}"]
        elif n.name in names:
            lines += ["op {", f'  name: "{names[n.name]}"', f'  type: "{GE_TYPES[str(n.target)]}"']
            lines += [f'  input: "{names[source(a).name]}:0"' for a in tensor_args(n)]
            lines += ['  input: "Data_0:-1"'] if n is dumped_nodes(gm)[0] else []  # a control edge
            lines += ["  attr {", '    key: "_fx_node"', "    value {", f'      s: "{n.name}"', "    }", "  }"]
            lines += ["  output_desc {", '    name: "y"', "    dtype: DT_FLOAT", "    attr {",
                      '      key: "_fx_tensor_name"', "      value {", f'        s: "{fx_name(n)}.OUTPUT.0"',
                      "      }", "    }", "  }", "}"]
    return "\n".join(lines) + "\n"


def fusion_groups(gm):
    """[[node, ...], ...]: conv + batch_norm + relu, mm + add; every other node alone."""
    nodes = dumped_nodes(gm)
    groups, i = [], 0
    while i < len(nodes):
        t = [str(n.target) for n in nodes[i:i + 3]]
        if t == ["aten.convolution.default", "aten.native_batch_norm.default", "aten.relu.default"]:
            groups.append(nodes[i:i + 3])
            i += 3
        elif t[:2] == ["aten.mm.default", "aten.add.Tensor"]:
            groups.append(nodes[i:i + 2])
            i += 2
        else:
            groups.append([nodes[i]])
            i += 1
    return groups


# --- storage: dtypes and device formats ------------------------------------------------------

def bf16_bytes(a):
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16).tobytes()


def pad_to(a, axis, multiple):
    n = a.shape[axis]
    extra = (-n) % multiple
    if not extra:
        return a
    widths = [(0, 0)] * a.ndim
    widths[axis] = (0, extra)
    return np.pad(a, widths)


def nc1hwc0(a, c0=16):
    n, c, h, w = a.shape
    p = pad_to(a, 1, c0)
    return p.reshape(n, p.shape[1] // c0, c0, h, w).transpose(0, 1, 3, 4, 2)


def fractal_z(a, n0=16, c0=16):
    n, c, h, w = a.shape
    p = pad_to(pad_to(a, 0, n0), 1, c0)
    n1, c1 = p.shape[0] // n0, p.shape[1] // c0
    return p.reshape(n1, n0, c1, c0, h, w).transpose(2, 4, 5, 0, 1, 3).reshape(c1 * h * w, n1, n0, c0)


def fractal_nz(a, m0=16, n0=16):
    m, n = a.shape
    p = pad_to(pad_to(a, 0, m0), 1, n0)
    m1, n1 = p.shape[0] // m0, p.shape[1] // n0
    return p.reshape(m1, m0, n1, n0).transpose(2, 0, 1, 3)


def storage(producer, value):
    """(dtype, format) of a tensor by the node that produced it."""
    t = str(producer.target) if producer.op == "call_function" else producer.op
    if producer.op == "get_attr":
        return ("float16", "FRACTAL_Z") if value.dim() == 4 else ("float32", "ND")
    if t in ("aten.convolution.default", "aten.native_batch_norm.default", "aten.relu.default",
             "aten.avg_pool2d.default") and value.dim() == 4:
        return "bfloat16", "NC1HWC0"
    if t == "aten.mm.default":
        return "float32", "FRACTAL_NZ"
    if t in ("aten.add.Tensor", "aten.relu.default", "aten._reshape_alias.default", "aten.view.default"):
        return "bfloat16", "ND"
    return "float32", "ND"


def stored(value, dtype, fmt):
    """(device shape, bytes, original shape or None)."""
    a = value.detach().numpy().astype(np.float32)
    if fmt == "NC1HWC0":
        d = nc1hwc0(a)
    elif fmt == "FRACTAL_Z":
        d = fractal_z(a)
    elif fmt == "FRACTAL_NZ":
        d = fractal_nz(a)
    else:
        d = a
    d = np.ascontiguousarray(d)
    data = bf16_bytes(d) if dtype == "bfloat16" else d.astype(dtype).tobytes()
    return list(d.shape), data, (list(a.shape) if fmt != "ND" else None)


# --- GE binary -------------------------------------------------------------------------------

def shape_msg(dims):
    return b"".join(field(1, 0, d) for d in dims)


def tensor_msg(dtype, fmt, shape, size, origin, output):
    m = field(1, 0, DT[dtype]) + field(2, 0, FMT[fmt]) + field(3, 2, shape_msg(shape))
    m += field(6 if output else 5, 0, size)
    if origin is not None:
        m += field(7 if output else 6, 2, shape_msg(origin))
    return m


def write_ge(path, op_name, inputs, outputs):
    """inputs/outputs: [(dtype, fmt, value tensor)]."""
    hdr, data = b"", b""
    for tensors, output in ((inputs, False), (outputs, True)):
        for dtype, fmt, value in tensors:
            shape, raw, origin = stored(value, dtype, fmt)
            hdr += field(3 if output else 4, 2, tensor_msg(dtype, fmt, shape, len(raw), origin, output))
            data += raw
    hdr += field(6, 2, op_name.encode())
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hdr)) + hdr + data)


def ge_tensors(nodes, env, outs, names, fused):
    """A GE op's (inputs, outputs): the group's inputs from outside it, then its last node's
    outputs (batch_norm's first output only)."""
    group = {n.name for n in nodes}
    ins = []
    for n in nodes:
        for a in tensor_args(n):
            src = source(a)
            if src.name in group:
                continue
            v = env[a.name] if not isinstance(env[a.name], (tuple, list)) else env[a.name][0]
            ins.append((*storage(src, v), v))
    last = nodes[-1]
    vals = outs[last.name][:1]
    return ins, [(*storage(last, v), v) for v in vals]


def write_ge_run(root, gm, env, outs, names, fuse, token, t0):
    d = os.path.join(root, "20240101000000", "0", MODEL, "1", str(token))
    os.makedirs(d, exist_ok=True)
    groups = fusion_groups(gm) if fuse else [[n] for n in dumped_nodes(gm)]
    ts = t0
    for k, nodes in enumerate(groups):
        op = "".join(names[n.name] for n in nodes)
        op_type = "AutomaticBufferFusionOp" if len(nodes) > 1 else GE_TYPES[str(nodes[0].target)]
        ins, os_ = ge_tensors(nodes, env, outs, names, fuse)
        ts += 100
        write_ge(os.path.join(d, f"{op_type}.{op}.{k + 3}.2.{ts}"), op, ins, os_)
    if fuse:  # ops GE inserted: not in the graph
        x = env[[n for n in gm.graph.nodes if n.op == "placeholder"][0].name]
        write_ge(os.path.join(d, f"Cast.Cast_99.1.2.{t0 + 1}"), "Cast_99",
                 [("float32", "ND", x)], [("float16", "ND", x)])
        write_ge(os.path.join(d, f"TransData.TransData_98.2.2.{t0 + 2}"), "TransData_98",
                 [("float32", "ND", x)], [("float32", "ND", x)])


def write_fx_run(d, gm, env, outs, t0):
    os.makedirs(d, exist_ok=True)
    for k, n in enumerate(dumped_nodes(gm)):
        ts = f"2024012503111{t0:03d}{k:04d}"  # 20 digits, as msit writes them
        for i, a in enumerate(tensor_args(n)):
            v = env[a.name]
            np.save(os.path.join(d, f"{fx_name(n)}.INPUT.{i}.{ts}.npy"), v.detach().numpy())
        for i, v in enumerate(t for t in outs[n.name] if t.numel() > 0):
            np.save(os.path.join(d, f"{fx_name(n)}.OUTPUT.{i}.{ts}.npy"), v.detach().numpy())


def write(out):
    net, gm = model()
    names = ge_names(gm)
    text = graph_text(gm, names)
    defect = fusion_groups(gm)[[len(g) for g in fusion_groups(gm)].index(3, 1)][-1].name  # relu of group 2
    paths = {k: os.path.join(out, k) for k in ("fx", "ge_fused", "ge_unfused", "fx_old", "ge_old")}
    for rank in (0, 1):
        for side in ("ge_fused", "ge_unfused"):
            top = os.path.join(paths[side], "msit_ge_dump")
            os.makedirs(top, exist_ok=True)
            with open(os.path.join(top, f"dynamo_original_graph_1_rank_{rank}_pid_{4242 + rank}_20240101000000.txt"),
                      "w") as f:
                f.write(text)
        for token in (0, 1):
            torch.manual_seed(100 + 10 * rank + token)
            x = torch.randn(2, 3, 8, 8)
            with torch.no_grad():
                good, good_outs = run(gm, x)
                bad, bad_outs = run(gm, x, defect)
            rank_dir = f"worldsize2_global_rank{rank}"
            write_fx_run(os.path.join(paths["fx"], "msit_fx_dump", rank_dir, MODEL, str(token)), gm, good, good_outs,
                         token)
            write_ge_run(os.path.join(paths["ge_fused"], "msit_ge_dump", rank_dir), gm, bad, bad_outs, names, True,
                         token, 1700000000000000 + 100000 * token)
            write_ge_run(os.path.join(paths["ge_unfused"], "msit_ge_dump", rank_dir), gm, good, good_outs, names,
                         False, token, 1700000000000000 + 100000 * token)
            if rank == 0:
                write_fx_run(os.path.join(paths["fx_old"], "data_dump", str(token + 1), "gm_20240101000000_dump"), gm,
                             good, good_outs, token)
                write_ge_run(os.path.join(paths["ge_old"], "dump_20240101000000"), gm, bad, bad_outs, names, True,
                             token, 1700000000000000 + 100000 * token)
    with open(os.path.join(paths["ge_old"], "dump_20240101000000", "dynamo_original_graph_1_20240101000000.txt"),
              "w") as f:
        f.write(text)
    return {k: v for k, v in paths.items()}


if __name__ == "__main__":
    print(json.dumps(write(sys.argv[1]), indent=2))
