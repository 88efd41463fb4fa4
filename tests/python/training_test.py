#!/usr/bin/env python3
"""Culprit analysis of training steps (forward, backward and parameter gradients) on msprobe-named
captures of a small CNN, one scenario per kind of defect, each checked through the daemon and by
`parity compare` on the same step written as msprobe dumps:

- a forward defect (one batch_norm call ignoring its running mean): its forward entry is the
  culprit, and no backward entry nor parameter gradient is (they compute from wrong tensors);
- a backward-only defect (an activation whose custom backward masks with a wrong threshold):
  that module's backward entry is the culprit, and nothing in forward;
- a wrong parameter gradient (noise added to one module's weight gradient): its parameters_grad
  entry is the culprit, and nothing else;
- no defect, the target under bf16 autocast: no culprit.

    training_test.py SOURCE_DIR BUILD_DIR
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

SRC, BUILD = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(BUILD, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import parity  # noqa: E402
import parity.torch as pt  # noqa: E402
from capture_test import BatchNormDefect, _Nothing  # noqa: E402
from daemon import Daemon  # noqa: E402
from msprobe_dump import DumpWriter  # noqa: E402


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
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.act = Act()
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        x = self.act(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class TrainingStepTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(BUILD)
        cls.c = parity.Client(cls.d.address)
        cls.tmp = tempfile.TemporaryDirectory()
        torch.manual_seed(0)
        cls.net = Net().eval()
        with torch.no_grad():
            for bn in (cls.net.bn1, cls.net.bn2):
                bn.running_mean.uniform_(-1, 1)
                bn.running_var.uniform_(0.5, 2)
        cls.x = torch.randn(4, 3, 8, 8)
        cls.y = torch.randint(0, 10, (4,))
        cls.golden = cls.step("golden", role="golden")
        cls.golden_dump = cls.dump("golden")

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.d.close()
        cls.tmp.cleanup()

    @classmethod
    def run_step(cls, autocast=False):
        cls.net.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16) if autocast else _Nothing():
            out = cls.net(cls.x)
        F.cross_entropy(out.float(), cls.y).backward()

    @classmethod
    def step(cls, name, autocast=False, **kw):
        with pt.capture(cls.net, cls.c, project="train", name=name, level="mix", **kw) as run:
            cls.run_step(autocast)
        return run

    @classmethod
    def dump(cls, name, autocast=False):
        root = os.path.join(cls.tmp.name, name)
        with pt.capture(cls.net, DumpWriter(root), project="train", level="mix"):
            cls.run_step(autocast)
        return root

    def check(self, defect, autocast=False):
        """The culprits the daemon names for a target step with `defect`, after checking that
        `parity compare` names the same ones on the step written as msprobe dumps."""
        with defect:
            target = self.step("target", against=self.golden.run_id, autocast=autocast)
        with defect:
            root = self.dump("target-" + type(defect).__name__ + str(autocast), autocast=autocast)
        local = subprocess.run([os.path.join(BUILD, "client", "parity"), "compare", self.golden_dump, root,
                                "--json"], capture_output=True, text=True)
        self.assertIn(local.returncode, (0, 1), local.stderr)
        self.assertEqual(json.loads(local.stdout)["summary"]["culprits"], target.summary.culprits)
        return target.summary.culprits

    def test_a_forward_defect_is_a_forward_culprit_and_no_backward_one(self):
        culprits = self.check(BatchNormDefect(2))
        self.assertEqual([c for c in culprits if not c.startswith("Module.")], ["Functional.batch_norm.1.forward"])
        self.assertEqual([c for c in culprits if ".backward" in c or "parameters_grad" in c], [])

    def test_a_backward_only_defect_is_that_backward_entry(self):
        culprits = self.check(_Threshold(self.net.act, 0.3))
        self.assertEqual(culprits, ["Module.act.Act.backward.0"])

    def test_a_wrong_parameter_gradient_is_a_gradient_culprit(self):
        culprits = self.check(_GradNoise(self.net.conv2.weight, 1.0))
        self.assertEqual(culprits, ["Module.conv2.Conv2d.parameters_grad"])

    def test_a_bf16_step_without_a_defect_names_no_culprit(self):
        self.assertEqual(self.check(_Nothing(), autocast=True), [])


class _Threshold:
    """The activation's backward masks with a wrong threshold (its forward is right)."""

    def __init__(self, act, threshold):
        self.act, self.threshold = act, threshold

    def __enter__(self):
        self.act.threshold = self.threshold

    def __exit__(self, *exc):
        self.act.threshold = 0.0


class _GradNoise:
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


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
