#!/usr/bin/env python3
"""Writes msprobe-format dumps of one training step of a small CNN, one per scenario, for the
culprit analysis of training steps (tests/python/training_test.py):

    make_training.py OUT_DIR BUILD_DIR

BUILD_DIR holds the Parity Python package (build/python). Each scenario is an msprobe dump
directory OUT_DIR/<scenario>/ as msprobe's dumper writes it at level mix: dump.json (forward,
backward and parameters_grad entries), dump_tensor_data/*.npy, construct.json (each module's and
API's enclosing module) and stack.json (each forward entry's call stack). The step is recorded
by parity.torch.capture into tests/python/msprobe_dump.DumpWriter: the same hooks and names
that stream a live capture to parityd.

The model: a stem convolution, eight blocks of conv -> batch_norm -> activation (block 1's is a
custom autograd function, the others ReLU), average pooling and a linear layer; the loss is
scaled by 1024 as mixed-precision training scales it. Scenarios:

- golden: float32, no defect.
- forward_defect: float32; the third batch_norm call ignores its running mean.
- backward_defect: float32; block 1's activation masks the gradient with a wrong threshold in
  its backward only (forward right).
- gradient_defect: float32; noise is added to block 4's convolution weight gradient.
- bf16_control: bf16 autocast, no defect: rounding makes some backward operators fail the
  peer's rule, none of them a culprit.
- bf16_forward_defect: bf16 autocast and the forward defect.

Deterministic (fixed seeds); needs Debian's python3-torch.
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

BLOCKS, CHANNELS, SIDE, BATCH, LOSS_SCALE = 8, 16, 16, 8, 1024.0
# The entries each defect makes the culprit (the expected analysis).
EXPECTED = {
    "golden": [],
    "forward_defect": ["Functional.batch_norm.2.forward"],
    "backward_defect": ["Module.blocks.1.2.Act.backward.0"],
    "gradient_defect": ["Module.blocks.4.0.Conv2d.parameters_grad"],
    "bf16_control": [],
    "bf16_forward_defect": ["Functional.batch_norm.2.forward"],
}


class MaskedReLU(torch.autograd.Function):
    """ReLU whose backward lets the gradient through where x > `threshold` (0: a correct ReLU)."""

    @staticmethod
    def forward(ctx, x, threshold):
        ctx.save_for_backward(x)
        ctx.threshold = threshold
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x > ctx.threshold).to(g.dtype), None


class Act(nn.Module):
    def __init__(self):
        super().__init__()
        self.threshold = 0.0

    def forward(self, x):
        return MaskedReLU.apply(x, self.threshold)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, CHANNELS, 3, padding=1)
        self.blocks = nn.ModuleList(
            [nn.Sequential(nn.Conv2d(CHANNELS, CHANNELS, 3, padding=1), nn.BatchNorm2d(CHANNELS),
                           Act() if i == 1 else nn.ReLU()) for i in range(BLOCKS)])
        self.fc = nn.Linear(CHANNELS, 10)

    def forward(self, x):
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class BatchNormDefect:
    """torch.batch_norm (called inside F.batch_norm) ignoring the running mean in call `bad`
    (counted from 1)."""

    def __init__(self, bad):
        self.bad, self.calls, self.original = bad, 0, torch.batch_norm

    def __enter__(self):
        self.calls = 0

        def defect(x, weight, bias, mean, var, *rest):
            self.calls += 1
            if self.calls == self.bad:
                mean = torch.zeros_like(mean)
            return self.original(x, weight, bias, mean, var, *rest)
        torch.batch_norm = defect
        return self

    def __exit__(self, *exc):
        torch.batch_norm = self.original


class Threshold:
    """The activation's backward masks with a wrong threshold (its forward is right)."""

    def __init__(self, act, threshold):
        self.act, self.threshold = act, threshold

    def __enter__(self):
        self.act.threshold = self.threshold

    def __exit__(self, *exc):
        self.act.threshold = 0.0


class GradNoise:
    """Adds noise to a parameter's gradient before anything else sees it (a hook registered
    before the capture's): the same noise on every use."""

    def __init__(self, param, scale):
        self.param, self.scale = param, scale

    def __enter__(self):
        def noisy(g):
            gen = torch.Generator().manual_seed(1)
            return g + self.scale * g.abs().mean() * torch.randn(g.shape, generator=gen)
        self.handle = self.param.register_hook(noisy)

    def __exit__(self, *exc):
        self.handle.remove()


class Step:
    """The model, its input, and one training step with a scenario's defect and precision."""

    def __init__(self):
        torch.manual_seed(0)
        self.net = Net().eval()  # running statistics: a batch_norm ignoring them shows
        with torch.no_grad():
            for m in self.net.modules():
                if isinstance(m, nn.BatchNorm2d):
                    m.running_mean.uniform_(-1, 1)
                    m.running_var.uniform_(0.5, 2)
        self.x = torch.randn(BATCH, 3, SIDE, SIDE)
        self.y = torch.randint(0, 10, (BATCH,))

    def scenario(self, name):
        """(the defect's context manager, whether under bf16 autocast) of scenario `name`."""
        return {
            "golden": (Nothing(), False),
            "forward_defect": (BatchNormDefect(3), False),
            "backward_defect": (Threshold(self.net.blocks[1][2], 0.3), False),
            "gradient_defect": (GradNoise(self.net.blocks[4][0].weight, 1.0), False),
            "bf16_control": (Nothing(), True),
            "bf16_forward_defect": (BatchNormDefect(3), True),
        }[name]

    def run(self, autocast):
        self.net.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16) if autocast else Nothing():
            out = self.net(self.x)
        (F.cross_entropy(out.float(), self.y) * LOSS_SCALE).backward()


def write(out_dir, build_dir, names=tuple(EXPECTED)):
    """Writes the scenarios `names` under `out_dir`; returns {name: dump directory}."""
    sys.path.insert(0, os.path.join(build_dir, "python"))
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import parity.torch as pt  # noqa: E402
    from msprobe_dump import DumpWriter  # noqa: E402
    step = Step()
    dirs = {}
    for name in names:
        defect, autocast = step.scenario(name)
        root = os.path.join(out_dir, name)
        with defect:
            with pt.capture(step.net, DumpWriter(root), project="train", level="mix", stack=True):
                step.run(autocast)
        dirs[name] = root
    return dirs


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    for n, d in write(sys.argv[1], sys.argv[2]).items():
        print(n, d)
