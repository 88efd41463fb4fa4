#!/usr/bin/env python3
"""parity.torch.capture against a real parityd: msprobe's names for a small CNN and a small
transformer block at levels L1, L0 and mix; a golden fp32 capture against a target with a
defect inside one batch_norm call (fp32 and bf16 autocast) names that call as the first culprit;
the same target without the defect names none; statistics mode; stop_on_culprit.

    capture_test.py SOURCE_DIR BUILD_DIR
"""
import os
import sys
import time
import unittest

SRC, BUILD = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(BUILD, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data"))
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import parity  # noqa: E402
import parity.torch as pt  # noqa: E402
from daemon import Daemon  # noqa: E402
from msprobe_dump import DumpWriter  # noqa: E402
from make_training import BatchNormDefect, Nothing as _Nothing  # noqa: E402


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.layer = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8))
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.layer(x)) + x
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(x)


class Block(nn.Module):
    """A pre-norm transformer block: attention by hand (matmul, softmax) and an MLP."""

    def __init__(self, d=16):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
        att = F.softmax(torch.matmul(q, k.transpose(-2, -1)) / 4.0, dim=-1)
        x = x + self.proj(torch.matmul(att, v))
        return x + self.mlp(x)


def captured_names(client, model, run, **kw):
    """The operator and item names a capture of `run()` sends, in capture order: a golden capture,
    then a target capture against it, listed from the job's results."""
    with pt.capture(model, client, project="names", role="golden", **kw) as g:
        run()
    with pt.capture(model, client, project="names", against=g.run_id, **kw) as t:
        run()
    names, items = [], []
    for r in client.results(t.job_id):
        items.append(r.name)
        if r.api not in names:
            names.append(r.api)
    return names, items


class CaptureTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(BUILD)
        cls.c = parity.Client(cls.d.address)
        torch.manual_seed(0)
        cls.cnn = SmallCNN().eval()
        with torch.no_grad():  # running statistics far from 0/1, so that ignoring them shows
            for bn in (cls.cnn.bn1, cls.cnn.layer[1]):
                bn.running_mean.uniform_(-1, 1)
                bn.running_var.uniform_(0.5, 2)
        cls.x = torch.randn(2, 3, 8, 8)
        with pt.capture(cls.cnn, cls.c, project="cap", role="golden", level="mix") as g:
            cls.cnn(cls.x).sum().backward()
        cls.golden = g.run_id

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.d.close()

    def test_l1_names_are_msprobes_for_a_cnn(self):
        m = SmallCNN().eval()
        names, items = captured_names(self.c, m, lambda: m(self.x), level="L1", backward=False)
        self.assertEqual(names, [
            "Functional.conv2d.0.forward", "Functional.batch_norm.0.forward", "Functional.relu.0.forward",
            "Functional.conv2d.1.forward", "Functional.batch_norm.1.forward", "Functional.relu.1.forward",
            "Tensor.__add__.0.forward", "Functional.adaptive_avg_pool2d.0.forward", "Torch.flatten.0.forward",
            "Functional.linear.0.forward"])
        self.assertEqual([i for i in items if i.startswith("Functional.conv2d.0.")], [
            "Functional.conv2d.0.forward.input.0", "Functional.conv2d.0.forward.input.1",
            "Functional.conv2d.0.forward.input.2", "Functional.conv2d.0.forward.input.3.0",
            "Functional.conv2d.0.forward.input.3.1", "Functional.conv2d.0.forward.input.4.0",
            "Functional.conv2d.0.forward.input.4.1", "Functional.conv2d.0.forward.input.5.0",
            "Functional.conv2d.0.forward.input.5.1", "Functional.conv2d.0.forward.input.6",
            "Functional.conv2d.0.forward.output.0"])

    def test_l0_and_mix_names_for_a_transformer_block(self):
        b = Block()
        x = torch.randn(2, 5, 16, requires_grad=True)
        names, items = captured_names(self.c, b, lambda: b(x).sum().backward(), level="L0")
        self.assertEqual(names[:6], [
            "Module.norm.LayerNorm.forward.0", "Module.qkv.Linear.forward.0", "Module.proj.Linear.forward.0",
            "Module.mlp.0.Linear.forward.0", "Module.mlp.1.GELU.forward.0", "Module.mlp.2.Linear.forward.0"])
        self.assertIn("Module.mlp.Sequential.forward.0", names)
        self.assertIn("Module.qkv.Linear.backward.0", names)
        self.assertIn("Module.qkv.Linear.parameters_grad.weight", items)
        self.assertEqual([i for i in items if i.startswith("Module.qkv.Linear.forward.0.")], [
            "Module.qkv.Linear.forward.0.input.0", "Module.qkv.Linear.forward.0.parameters.weight",
            "Module.qkv.Linear.forward.0.parameters.bias", "Module.qkv.Linear.forward.0.output.0"])
        names, _ = captured_names(self.c, b, lambda: b(x), level="mix", backward=False)
        self.assertEqual(names[:4], ["Functional.layer_norm.0.forward", "Module.norm.LayerNorm.forward.0",
                                     "Functional.linear.0.forward", "Module.qkv.Linear.forward.0"])
        for api in ("Tensor.chunk.0.forward", "Tensor.transpose.0.forward", "Torch.matmul.0.forward",
                    "Tensor.__truediv__.0.forward", "Functional.softmax.0.forward", "Torch.matmul.1.forward",
                    "Functional.gelu.0.forward", "Tensor.__add__.1.forward"):
            self.assertIn(api, names)

    def target(self, defect, autocast=False, **kw):
        ctx = BatchNormDefect(2) if defect else _Nothing()
        amp = torch.autocast("cpu", dtype=torch.bfloat16) if autocast else _Nothing()
        with ctx, pt.capture(self.cnn, self.c, project="cap", against=self.golden, level="mix", **kw) as t, amp:
            self.cnn.zero_grad()
            self.cnn(self.x).float().sum().backward()
        return t

    def test_a_defect_in_one_call_is_the_first_culprit(self):
        t = self.target(defect=True)
        self.assertEqual(t.summary.job.state, "done")
        self.assertEqual(t.first_culprit, "Functional.batch_norm.1.forward")
        self.assertEqual(t.summary.counts.UNMATCHED, 0)

    def test_the_same_target_without_the_defect_has_no_culprit(self):
        t = self.target(defect=False)
        self.assertIsNone(t.first_culprit)
        self.assertEqual(t.summary.counts.FAIL, 0)
        t = self.target(defect=False, autocast=True)
        self.assertIsNone(t.first_culprit)
        self.assertEqual(t.summary.culprits, [])

    def test_steps_capture_the_chosen_steps_each_against_its_golden_step(self):
        golden = pt.Steps(self.cnn, self.c, steps=[1, 3], project="steps", role="golden",
                          labels={"build": "fp32"}, level="L1", backward=False)
        target = pt.Steps(self.cnn, self.c, steps=[1, 3], project="steps", against_label={"build": "fp32"},
                          level="L1", backward=False)
        for i in range(5):
            with golden.step(i):
                self.cnn(self.x)
        for i in range(5):
            with target.step(i), (BatchNormDefect(2) if i == 3 else _Nothing()):
                self.cnn(self.x)
        self.assertEqual([r.summary is None for r in golden.runs], [True, True])
        runs = {r.labels["step"]: r for r in self.c.runs(project="steps") if r.side == "golden"}
        self.assertEqual(sorted(runs), ["1", "3"])
        self.assertEqual([r.first_culprit for r in target.runs], [None, "Functional.batch_norm.1.forward"])
        self.assertEqual([self.c.job(r.job_id).golden_run_id for r in target.runs],
                         [runs["1"].run_id, runs["3"].run_id])

    def test_under_bf16_autocast_the_defect_is_still_the_first_culprit(self):
        t = self.target(defect=True, autocast=True)
        self.assertEqual(t.first_culprit, "Functional.batch_norm.1.forward")

    def test_statistics_mode_sends_no_tensor_bytes(self):
        t = self.target(defect=True, mode="stats", backward=False)
        rows = {r.name: r for r in self.c.results(t.job_id) if r.phase == "forward"}
        self.assertTrue(rows)
        self.assertTrue(all("Max diff" in r.metrics for r in rows.values()))
        self.assertEqual(rows["Functional.conv2d.0.forward.output.0"].verdict, "PASS")
        bad = rows["Functional.batch_norm.1.forward.output.0"]
        self.assertNotEqual(bad.verdict, "PASS")
        self.assertGreater(abs(bad.metrics["Max diff"]), 0.1)

    def test_stop_on_culprit_raises_in_the_training_loop(self):
        with self.assertRaises(pt.CulpritFound) as e, BatchNormDefect(2):
            with pt.capture(self.cnn, self.c, project="cap", against=self.golden, level="L1",
                            stop_on_culprit=True, backward=False):
                deadline = time.monotonic() + 120  # the verdict arrives while the model keeps running
                while time.monotonic() < deadline:
                    self.cnn(self.x)
                    time.sleep(0.01)
        self.assertEqual(e.exception.api, "Functional.batch_norm.1.forward")

    def test_a_capture_pairs_with_an_msprobe_dump_of_the_same_run(self):
        import subprocess
        import tempfile
        with tempfile.TemporaryDirectory() as root:
            with pt.capture(self.cnn, DumpWriter(root), project="cap", role="golden", level="mix"):
                self.cnn.zero_grad()
                self.cnn(self.x).sum().backward()
            agent = subprocess.run(
                [os.path.join(BUILD, "client", "parity-agent"), "upload", root, "--server", self.d.address,
                 "--project", "cap", "--role", "golden", "--json"], capture_output=True, text=True)
            self.assertEqual(agent.returncode, 0, agent.stderr)
        dumped = next(r for r in self.c.runs(project="cap") if r.side == "golden").run_id
        self.assertNotEqual(dumped, self.golden)
        by_capture = self.target(defect=True)
        with BatchNormDefect(2), pt.capture(self.cnn, self.c, project="cap", against=dumped, level="mix") as t:
            self.cnn.zero_grad()
            self.cnn(self.x).sum().backward()
        want = {r.name: r.verdict for r in self.c.results(by_capture.job_id)}
        got = {r.name: r.verdict for r in self.c.results(t.job_id)}
        diff = {k: (got.get(k), want.get(k)) for k in set(got) | set(want) if got.get(k) != want.get(k)}
        self.assertEqual(diff, {})
        self.assertEqual(t.summary.counts.UNMATCHED, 0)
        self.assertEqual(t.first_culprit, "Functional.batch_norm.1.forward")

    def test_a_full_queue_drops_and_counts_with_on_full_drop(self):
        with pt.capture(self.cnn, self.c, project="drop", role="golden", level="L1", backward=False,
                        max_queue_bytes=1, on_full="drop") as run:
            for _ in range(5):
                self.cnn(self.x)
        self.assertGreater(run.dropped, 0)
        total = run.upload.items_received + run.dropped
        with pt.capture(self.cnn, self.c, project="drop", role="golden", level="L1", backward=False) as full:
            for _ in range(5):
                self.cnn(self.x)
        self.assertEqual(full.dropped, 0)
        self.assertEqual(full.upload.items_received, total)

    def test_the_models_outputs_are_unchanged(self):
        torch.manual_seed(1)
        m = SmallCNN().eval()
        want = m(self.x)
        with pt.capture(m, self.c, project="names", role="golden", level="mix"):
            got = m(self.x)
        self.assertTrue(torch.equal(want, got))
        self.assertIs(F.conv2d, F.conv2d)  # hooks removed: a second capture wraps the originals
        self.assertEqual(torch.Tensor.__add__.__name__, "__add__")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
