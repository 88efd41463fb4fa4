#!/usr/bin/env python3
"""TorchAir graph mode on the fixtures of tests/data/make_torchair.py (a GE dump with fused ops,
device formats and a defective fused op; the same run with fusion off; the FX dump; the older
data_dump layout):

- `parity compare` of every pair finds the defective fused op as the only culprit, rank by rank
  and token by token (none for the fusion-off dump against the FX dump, which agree);
- the TorchAir CSV table: its columns, Result and Accuracy Reached or Not by the TorchAir rule,
  the GE op in API Name and Stack Info, the GE file and tensor in Data Name, the ops GE inserted
  (Cast, TransData) compared output against input, as the reference compares them (and by name
  against a fusion-off GE dump);
- the device formats are converted exactly: a float32 FRACTAL_NZ tensor equals its FX tensor,
  bfloat16 NC1HWC0 and float16 FRACTAL_Z ones differ from it by exactly their rounding;
- parity-agent uploads the FX tree and the GE tree (one run per rank and token) to a real
  parityd: the same culprit per job, and `parity export --format csv` is the local CSV byte for
  byte.

    torchair_test.py SOURCE_DIR BUILD_DIR
"""
import csv
import faulthandler
import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

SRC, BUILD = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(SRC, "tests", "data"))
import make_torchair  # noqa: E402
from daemon import Daemon  # noqa: E402

PARITY = os.path.join(BUILD, "client", "parity")
AGENT = os.path.join(BUILD, "client", "parity-agent")
CULPRIT = make_torchair.EXPECTED["culprit"]
RUNS = [(r, t) for r in make_torchair.EXPECTED["ranks"] for t in make_torchair.EXPECTED["tokens"]]


def run(*args):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=120)


def bf16(a):
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)


class TorchairTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.addClassCleanup(cls.tmp.cleanup)
        cls.paths = make_torchair.write(cls.tmp.name)

    def compare(self, golden, target, *extra):
        out = run(PARITY, "compare", self.paths[golden], self.paths[target], "--json", *extra)
        self.assertIn(out.returncode, (0, 1), out.stderr)
        return json.loads(out.stdout), out.returncode

    def test_every_pair_names_the_defective_fused_op(self):
        cases = [("fx", "ge_fused", [CULPRIT], RUNS), ("ge_unfused", "ge_fused", [CULPRIT], RUNS),
                 ("fx", "ge_unfused", [], RUNS), ("fx_old", "ge_old", [CULPRIT], [("", t) for t in ("0", "1")])]
        for golden, target, culprits, runs in cases:
            with self.subTest(golden=golden, target=target):
                reports, rc = self.compare(golden, target)
                self.assertEqual(rc, 1 if culprits else 0)
                self.assertEqual([(r["rank"], r["token"]) for r in reports], runs)
                for r in reports:
                    s = r["report"]["summary"]
                    self.assertEqual(s["culprits"], culprits)
                    self.assertEqual(s["counts"]["FAIL"] > 0, bool(culprits))
                    self.assertEqual(s["counts"]["ERROR"], 0)
                    if culprits:
                        ranked = s["culprit_analysis"]["ranked"]
                        self.assertGreater(ranked[0]["growth"], 20)
                        self.assertIn("fuses 3 ops", ranked[0]["stack"])
                        # Everything downstream of it is explained by it.
                        self.assertIn("MatMul_2Add_2", s["propagated"])
                    else:
                        self.assertEqual(s["counts"]["UNMATCHED"], 0)  # one GE op per FX node

    def test_the_torchair_table(self):
        out_csv = os.path.join(self.tmp.name, "cmp.csv")
        reports, _ = self.compare("fx", "ge_fused", "--csv", out_csv)
        with open(out_csv + ".rank0.token0", newline="") as f:
            rows = list(csv.DictReader(f))
        with open(out_csv + ".rank0.token0", newline="") as f:
            header = next(csv.reader(f))
        self.assertEqual(header[:6], ["API Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape",
                                      "Bench Tensor Shape"])
        self.assertEqual(header[-7:], ["Bench l2norm", "Requires_grad Consistent", "Result", "Accuracy Reached or Not",
                                       "Err_message", "Stack Info", "Data Name"])
        by_api = {r["API Name"]: r for r in rows}
        out = by_api[CULPRIT + ".output.0"]
        self.assertEqual(out["Bench Name"], "relu_1-aten.relu.default.output.0")
        self.assertEqual((out["Result"], out["Accuracy Reached or Not"]), ("FAIL", "No"))
        self.assertIn("fuses 3 ops", by_api[CULPRIT + ".input.0"]["Stack Info"])  # the op's first row
        self.assertRegex(out["Data Name"], r"AutomaticBufferFusionOp\.%s\.\d+\.2\.\d+,outputs,0" % CULPRIT)
        # Its inputs beyond the convolution's: the batch norm's (after its input 0, the
        # convolution's output inside the group), paired with that node's FX inputs.
        self.assertEqual(by_api[CULPRIT + ".input.2"]["Bench Name"], "convolution_1-aten.convolution.default.input.2")
        self.assertEqual(by_api[CULPRIT + ".input.3"]["Bench Name"],
                         "native_batch_norm_1-aten.native_batch_norm.default.input.1")
        self.assertEqual(by_api[CULPRIT + ".input.6"]["Bench Name"],
                         "native_batch_norm_1-aten.native_batch_norm.default.input.4")
        # The TorchAir rule: Cosine >= 0.99 and MaxRelativeErr < 0.01.
        for r in rows:
            if r["Result"] in ("PASS", "FAIL"):
                ok = float(r["Cosine"]) >= 0.99 and float(r["MaxRelativeErr"]) < 0.01
                self.assertEqual(r["Result"], "PASS" if ok else "FAIL", r["API Name"])
                self.assertEqual(r["Accuracy Reached or Not"], "Yes" if ok else "No")
        passed = [r for r in rows if r["Result"] == "PASS"]
        self.assertTrue(passed)
        # bfloat16 GE tensors are shown widened to float32, as the reference's reader widens them.
        self.assertEqual(by_api["Conv2D_1BNInference_1Relu_1.output.0"]["NPU Dtype"], "torch.float32")
        # Ops GE inserted (not in the graph): output i against input i, one row each, as the
        # reference compares them; the input has no row of its own.
        for op in make_torchair.EXPECTED["unresolved"]:
            self.assertNotIn(op + ".input.0", by_api)
            r = by_api[op + ".output.0"]
            self.assertEqual(r["Bench Name"], op + ".input.0")
            self.assertEqual(r["Result"], "PASS")
            self.assertIn("not an op of the GE graph", r["Stack Info"])
            self.assertIn("its output i is compared with its input i", r["Stack Info"])
            self.assertRegex(r["Data Name"], r"^\['[A-Za-z]+\.%s\.[0-9.]+,outputs,0', '[A-Za-z]+\.%s\.[0-9.]+,inputs,0'\]$"
                             % (op, op))
        cast = by_api["Cast_99.output.0"]
        self.assertEqual((cast["NPU Dtype"], cast["Bench Dtype"]), ("torch.float16", "torch.float32"))
        self.assertGreater(float(cast["MaxAbsErr"]), 0)  # the cast's own rounding
        self.assertEqual(float(by_api["TransData_98.output.0"]["MaxAbsErr"]), 0)
        # FX tensors fused away (inside a fused op) have no GE tensor: golden-only rows, saying why.
        fused_away = {r["Bench Name"]: r for r in rows if r["API Name"] == "N/A"}
        row = fused_away["native_batch_norm_1-aten.native_batch_norm.default.output.0"]
        self.assertEqual(row["Result"], "UNMATCHED")
        self.assertIn("a fused GE op dumps only its outer tensors", row["Err_message"])

    def test_device_formats_are_converted_exactly(self):
        reports, _ = self.compare("fx", "ge_unfused")
        items = {i["name"]: i for i in reports[0]["report"]["items"]}
        fx_dir = os.path.join(self.paths["fx"], "msit_fx_dump", "worldsize2_global_rank0", make_torchair.MODEL, "0")

        def fx(prefix):
            [name] = [n for n in os.listdir(fx_dir) if n.startswith(prefix + ".")]
            return np.load(os.path.join(fx_dir, name)).astype(np.float64)

        def metric(name, m):
            return items[name]["metrics"][m]

        # float32 FRACTAL_NZ (M = 2, N = 37): exact.
        self.assertEqual(metric("mm_1-aten.mm.default.output.0", "MaxAbsErr"), 0.0)
        self.assertEqual(metric("mm_1-aten.mm.default.output.0", "Cosine"), 1.0)
        # bfloat16 NC1HWC0 (C = 21): its rounding, no more.
        g = fx("convolution_1-aten.convolution.default.OUTPUT.0")
        self.assertAlmostEqual(metric("convolution_1-aten.convolution.default.output.0", "MaxAbsErr"),
                               float(np.abs(bf16(g).astype(np.float64) - g).max()), places=9)
        # float16 FRACTAL_Z weight (N = 21, C = 19).
        w = fx("convolution_1-aten.convolution.default.INPUT.1")
        self.assertAlmostEqual(metric("convolution_1-aten.convolution.default.input.1", "MaxAbsErr"),
                               float(np.abs(w.astype(np.float32).astype(np.float16).astype(np.float64) - w).max()),
                               places=9)

    def test_the_agent_and_the_daemon_give_the_same_rows(self):
        d = Daemon(BUILD)
        self.addCleanup(d.close)
        common = ["--server", d.address, "--project", "ta"]
        g = run(AGENT, "upload", self.paths["fx"], *common, "--role", "golden", "--label", "build=1")
        self.assertEqual(g.returncode, 0, g.stderr)
        ids = os.path.join(self.tmp.name, "target-id")
        t = run(AGENT, "upload", self.paths["ge_fused"], *common, "--role", "target", "--against-label", "build=1",
                "--run-id-file", ids)
        self.assertEqual(t.returncode, 1, t.stdout + t.stderr)
        self.assertEqual(t.stdout.count("First culprit: " + CULPRIT), len(RUNS), t.stdout)
        jobs = json.loads(run(PARITY, "jobs", "--server", d.address, "--project", "ta", "--json").stdout)
        by_target = {j["target_run_id"]: j["job_id"] for j in jobs}
        local_csv = os.path.join(self.tmp.name, "local.csv")
        reports, _ = self.compare("fx", "ge_fused", "--csv", local_csv)
        local = {(r["rank"], r["token"]): r["report"]["summary"]["culprit_analysis"] for r in reports}
        table = run(PARITY, "compare", self.paths["fx"], self.paths["ge_fused"]).stdout
        for rank, token in RUNS:
            with open(f"{ids}.rank{rank}.token{token}") as f:
                job = by_target[f.read().strip()]
            s = json.loads(run(PARITY, "summary", job, "--server", d.address, "--json").stdout)
            self.assertEqual(s["culprits"], [CULPRIT])
            # One growth on every path: the daemon's, the local JSON's and the table's.
            growth = s["culprit_analysis"]["ranked"][0]["growth"]
            self.assertAlmostEqual(growth, local[(rank, token)]["ranked"][0]["growth"], delta=growth * 1e-12)
            self.assertIn("%s  (growth %.3gx" % (CULPRIT, growth), table)
            exported = run(PARITY, "export", job, "--format", "csv", "--server", d.address)
            self.assertEqual(exported.returncode, 0, exported.stderr)
            with open(f"{local_csv}.rank{rank}.token{token}") as f:
                self.assertEqual(exported.stdout, f.read())


if __name__ == "__main__":
    faulthandler.dump_traceback_later(280, exit=True)
    unittest.main(argv=[sys.argv[0]], verbosity=2)
