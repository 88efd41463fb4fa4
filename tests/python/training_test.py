#!/usr/bin/env python3
"""Culprit analysis of training steps (forward, backward and parameter gradients) on the
scenarios of tests/data/make_training.py, each checked through the daemon (a live capture
streamed to parityd against the golden step) and by `parity compare` on the same step written
as an msprobe dump (with its construct.json and stack.json):

- a forward defect (one batch_norm call ignoring its running mean): that forward entry is the
  only culprit, in fp32 and under bf16 autocast; no backward entry nor parameter gradient is
  one (they compute from wrong tensors), nor its enclosing modules;
- a backward-only defect (an activation whose custom backward masks with a wrong threshold):
  that module's backward entry is the only culprit;
- a wrong parameter gradient (noise added to one convolution's weight gradient): its
  parameters_grad entry is the only culprit, in the gradient phase;
- no defect under bf16 autocast: some backward operators fail msprobe's rule, none is a culprit
  (their error growth stays within the run's noise floor).

    training_test.py SOURCE_DIR BUILD_DIR
"""
import faulthandler
import json
import math
import os
import subprocess
import sys
import tempfile
import unittest

SRC, BUILD = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(BUILD, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(SRC, "tests", "data"))
import parity  # noqa: E402
import parity.torch as pt  # noqa: E402
import make_training  # noqa: E402
from daemon import Daemon  # noqa: E402

PHASES = {"forward_defect": "forward", "backward_defect": "backward", "gradient_defect": "gradient",
          "bf16_forward_defect": "forward"}


class TrainingStepTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(BUILD)
        cls.addClassCleanup(cls.d.close)  # also when the rest of the set-up fails
        cls.c = parity.Client(cls.d.address)
        cls.addClassCleanup(cls.c.close)
        cls.tmp = tempfile.TemporaryDirectory()
        cls.addClassCleanup(cls.tmp.cleanup)
        cls.dumps = make_training.write(cls.tmp.name, BUILD)
        cls.step = make_training.Step()
        with pt.capture(cls.step.net, cls.c, project="train", name="golden", role="golden", level="mix",
                        stack=True):
            cls.step.run(autocast=False)
        cls.golden = next(iter(cls.c.runs(project="train"))).run_id

    def local(self, scenario):
        """`parity compare --json --tree`'s summary for the scenario's dump."""
        out = subprocess.run([os.path.join(BUILD, "client", "parity"), "compare", self.dumps["golden"],
                              self.dumps[scenario], "--json", "--tree"], capture_output=True, text=True)
        self.assertIn(out.returncode, (0, 1), out.stderr)
        return json.loads(out.stdout)["summary"]

    def remote(self, scenario):
        """The daemon's summary (with the module tree) of the same step captured live."""
        defect, autocast = self.step.scenario(scenario)
        with defect:
            with pt.capture(self.step.net, self.c, project="train", name=scenario, against=self.golden,
                            level="mix", stack=True) as run:
                self.step.run(autocast)
        return self.c.summary(run.job_id, module_tree=True)

    def check(self, scenario):
        """Both paths name exactly the expected culprits, with the same figures; returns both."""
        local, remote = self.local(scenario), self.remote(scenario)
        la, ra = local["culprit_analysis"], remote.culprit_analysis
        want = make_training.EXPECTED[scenario]
        self.assertEqual([c["api"] for c in la["ranked"]], want, json.dumps(la, indent=1))
        self.assertEqual([c.api for c in ra.ranked], want)
        self.assertEqual(local["culprits"], want)
        self.assertEqual(remote.culprits, want)
        for lc, rc in zip(la["ranked"], ra.ranked):
            self.assertEqual(lc["phase"], rc.phase)
            self.assertEqual(lc["phase"], PHASES[scenario])
            self.assertTrue(math.isclose(lc["growth"], rc.growth, rel_tol=1e-12), (lc, rc))
            self.assertGreaterEqual(rc.growth, ra.growth_threshold)
            # Each names the model's line (the two runs' outer frames differ: generator and test).
            if lc["phase"] != "gradient":
                self.assertIn("make_training.py", lc["stack"])
                self.assertIn("make_training.py", rc.stack)
        self.assertEqual(la["growth_threshold"], ra.growth_threshold)
        self.assertEqual(la["within_noise"], ra.within_noise)
        return local, remote

    def marked(self, tree):
        return sorted(n["name"] for n in tree if "culprit" in (n["status"], n["gradient_status"]))

    def test_a_forward_defect_is_its_forward_entry_alone(self):
        local, remote = self.check("forward_defect")
        culprit = remote.culprit_analysis.ranked[0]
        self.assertIn("make_training.py", culprit.stack)  # the model's line that called it
        self.assertIn("F.batch_norm", culprit.stack)
        self.assertEqual(self.marked(local["module_tree"]), ["Functional.batch_norm.2.forward"])
        self.assertEqual(self.marked(remote.module_tree), ["Functional.batch_norm.2.forward"])
        # Its enclosing modules fail too, explained by it.
        statuses = {n["name"]: n["status"] for n in remote.module_tree}
        self.assertEqual(statuses["Module.blocks.2.1.BatchNorm2d.forward.0"], "propagated")
        self.assertEqual(statuses["Module.blocks.2.Sequential.forward.0"], "propagated")

    def test_a_backward_only_defect_is_that_backward_entry(self):
        local, remote = self.check("backward_defect")
        self.assertIn("make_training.py", remote.culprit_analysis.ranked[0].stack)  # its forward call
        self.assertEqual(self.marked(remote.module_tree), ["Module.blocks.1.2.Act.backward.0"])

    def test_a_wrong_parameter_gradient_is_a_gradient_culprit(self):
        local, remote = self.check("gradient_defect")
        self.assertEqual(self.marked(remote.module_tree), ["Module.blocks.4.0.Conv2d.forward.0"])
        node = [n for n in remote.module_tree if n["name"] == "Module.blocks.4.0.Conv2d.forward.0"][0]
        self.assertEqual(node["gradient_status"], "culprit")

    def test_a_bf16_step_without_a_defect_names_no_culprit(self):
        local, remote = self.check("bf16_control")
        # Rounding makes operators fail msprobe's rule: the growth analysis keeps them within noise.
        self.assertGreater(remote.counts.to_dict()["FAIL"], 0)
        self.assertTrue(remote.culprit_analysis.within_noise)
        self.assertEqual(self.marked(remote.module_tree), [])

    def test_a_bf16_step_with_the_forward_defect_names_it_alone(self):
        local, remote = self.check("bf16_forward_defect")
        self.assertTrue(remote.culprit_analysis.within_noise)  # noise still fails, and stays out

    def test_the_tree_text_marks_the_culprit_as_padiff_does(self):
        out = subprocess.run([os.path.join(BUILD, "client", "parity"), "compare", self.dumps["golden"],
                              self.dumps["forward_defect"], "--tree", "--no-color"], capture_output=True, text=True)
        tree = out.stdout[out.stdout.index("Module tree:"):]
        self.assertIn("\n    Functional.batch_norm.2.forward  <--- *** HERE ***\n", tree)
        self.assertIn("\n  Module.blocks.2.1.BatchNorm2d.forward.0  (propagated)  (parameters_grad: propagated)\n", tree)


if __name__ == "__main__":
    faulthandler.dump_traceback_later(int(os.environ.get("PARITY_TEST_DUMP_AFTER", "0")) or 10**6, exit=True)
    unittest.main(argv=sys.argv[:1], verbosity=2)
