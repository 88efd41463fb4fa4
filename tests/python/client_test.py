#!/usr/bin/env python3
"""The Python client (build/python/parity) against a real parityd on loopback: uploads from
numpy and torch with verdicts streamed back, every page of results, summary, diff, runs, the
JSON vocabulary (docs/schemas/), refusals as ParityError, and an upload resumed after the
daemon was killed mid-stream.

    client_test.py SOURCE_DIR BUILD_DIR
"""
import json
import os
import sys
import threading
import time
import unittest

import numpy as np

SRC, BUILD = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(BUILD, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpc  # noqa: E402
import jsonschema  # noqa: E402
import parity  # noqa: E402
from daemon import Daemon  # noqa: E402

RNG = np.random.default_rng(7)


def golden_tensors(n_ops=6):
    """A small msprobe-named dump: each op's input is the previous op's output."""
    out, x = {}, RNG.standard_normal((4, 16)).astype(np.float32)
    for i in range(n_ops):
        api = "Functional.linear.%d.forward" % i
        out[api + ".input.0"] = x
        x = np.tanh(x * 1.1).astype(np.float32)
        out[api + ".output.0"] = x
    return out


def schema_validator(name):
    root = os.path.join(SRC, "docs", "schemas")
    store = {}
    for f in os.listdir(root):
        with open(os.path.join(root, f)) as fh:
            doc = json.load(fh)
        store[doc["$id"]] = doc
    doc = store["https://parity.dev/schemas/%s.schema.json" % name]
    resolver = jsonschema.RefResolver(base_uri=doc["$id"], referrer=doc, store=store)
    return jsonschema.Draft202012Validator(doc, resolver=resolver)


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(BUILD)
        cls.c = parity.Client(cls.d.address)
        cls.golden = golden_tensors()
        up = cls.c.upload(cls.golden, project="py", role="golden", name="golden fp32", labels={"build": "ref"})
        cls.golden_run = up.wait().run_id
        cls.golden_items = up.items_received

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.d.close()

    def target_with_defect(self, op=3, shift=0.5):
        t = dict(self.golden)
        api = "Functional.linear.%d.forward" % op
        for i in range(op, 6):  # the defect and everything downstream of it
            key = "Functional.linear.%d.forward.output.0" % i
            t[key] = (t[key] + shift).astype(np.float32)
            if i + 1 < 6:
                t["Functional.linear.%d.forward.input.0" % (i + 1)] = t[key]
        return api, t

    def test_a_golden_upload_is_acknowledged_item_by_item(self):
        self.assertEqual(self.golden_items, len(self.golden))
        run = next(r for r in self.c.runs(project="py") if r.run_id == self.golden_run)
        self.assertEqual((run.side, run.name, run.complete, run.item_count), ("golden", "golden fp32", True, 12))
        self.assertEqual(run.labels, {"build": "ref"})

    def test_verdicts_stream_back_and_the_summary_names_the_culprit(self):
        api, target = self.target_with_defect()
        seen = []
        up = self.c.upload(target, project="py", against=self.golden_run, on_verdict=seen.append)
        streamed = list(up)
        self.assertEqual(len(streamed), 12)
        self.assertEqual([r.name for r in streamed], [r.name for r in seen])
        failing = sorted(r.name for r in streamed if r.verdict == "FAIL")
        self.assertIn(api + ".output.0", failing)
        self.assertNotIn(api + ".input.0", failing)
        self.assertEqual(up.job.state, "done")
        self.assertEqual(up.summary.first_culprit, api)
        self.assertEqual(up.summary.culprits, [api])
        self.assertEqual(up.job.counts.FAIL, len(failing))
        cosine = next(r for r in streamed if r.name == api + ".output.0").metrics["Cosine"]
        self.assertLess(cosine, 0.99)

    def test_results_read_every_page_filter_and_sort(self):
        _, target = self.target_with_defect(op=1)
        up = self.c.upload(target, project="py", against=self.golden_run).wait()
        everything = list(self.c.results(up.job_id, page_size=5))
        self.assertEqual(len(everything), 12)
        self.assertEqual(len({r.name for r in everything}), 12)
        fails = self.c.results(up.job_id, verdict="FAIL", sort="Cosine", page_size=2)
        listed = list(fails)
        self.assertEqual(fails.total, len(listed))
        self.assertEqual([r.metrics["Cosine"] for r in listed], sorted(r.metrics["Cosine"] for r in listed))
        self.assertTrue(all(r.verdict == "FAIL" for r in listed))
        culprits = list(self.c.results(up.job_id, culprit="culprit"))
        self.assertEqual({r.api for r in culprits}, {"Functional.linear.1.forward"})
        one = self.c.result(up.job_id, "Functional.linear.1.forward.output.0")
        self.assertEqual((one.verdict, one.golden.dtype, one.target.shape), ("FAIL", "float32", [4, 16]))

    def test_documents_use_the_cli_vocabulary(self):
        _, target = self.target_with_defect(op=2)
        up = self.c.upload(target, project="py", against=self.golden_run).wait()
        item = schema_validator("item")
        for r in self.c.results(up.job_id):
            item.validate(r.to_dict())
        schema_validator("summary").validate(up.summary.to_dict())
        schema_validator("job").validate(self.c.job(up.job_id).to_dict())
        schema_validator("runs").validate([r.to_dict() for r in self.c.runs(project="py")])
        schema_validator("status").validate(self.c.status())

    def test_diff_names_what_got_worse(self):
        _, a = self.target_with_defect(op=4, shift=0.0)
        base = self.c.upload(a, project="py", against=self.golden_run).wait().job_id
        api, b = self.target_with_defect(op=4, shift=0.5)
        worse = self.c.upload(b, project="py", against=self.golden_run).wait().job_id
        regressions = list(self.c.diff(base, worse))
        self.assertIn(api + ".output.0", {r.name for r in regressions})
        self.assertTrue(all(r.reason for r in regressions))
        self.assertEqual(list(self.c.diff(worse, worse)), [])

    def test_submit_and_watch_compare_two_stored_runs(self):
        _, target = self.target_with_defect(op=5)
        run = self.c.upload(target, project="py", role="target").wait().run_id
        job = self.c.submit(self.golden_run, run, policy="forge")
        states = [j.state for j in self.c.watch(job.job_id)]
        self.assertEqual(states[-1], "done")
        final = self.c.job(job.job_id)
        self.assertEqual(final.policy, "forge")
        self.assertIn(job.job_id, [j.job_id for j in self.c.jobs(project="py", state="done")])

    def test_tensors_the_project_holds_go_by_reference(self):
        big = {"Functional.embedding.0.forward.output.0": RNG.standard_normal(1 << 20).astype(np.float32),
               "Functional.embedding.0.forward.input.0": np.arange(16, dtype=np.int64)}
        first = self.c.upload(big, project="py-dedup", role="golden").wait()
        self.assertEqual(first.bytes_by_reference, 0)
        self.assertEqual(first.bytes_sent, (4 << 20) + 128)
        again = self.c.upload(big, project="py-dedup", role="golden").wait()
        self.assertEqual(again.bytes_by_reference, 4 << 20)
        self.assertEqual(again.bytes_sent, 128)
        other = self.c.upload(big, project="py-other", role="golden").wait()  # never another project's
        self.assertEqual(other.bytes_by_reference, 0)
        up = self.c.upload(big, project="py-dedup", against=again.run_id).wait()
        self.assertEqual(up.job.counts.PASS, 2)

    def test_torch_tensors_upload_as_numpy_arrays_do(self):
        import torch
        t = {k: torch.from_numpy(v.copy()) for k, v in self.golden.items()}
        t["Functional.linear.0.forward.input.0"] = t["Functional.linear.0.forward.input.0"].to(torch.bfloat16)
        up = self.c.upload(t, project="py", against=self.golden_run).wait()
        rows = {r.name: r for r in self.c.results(up.job_id)}
        bf = rows["Functional.linear.0.forward.input.0"]
        self.assertEqual((bf.golden.dtype, bf.target.dtype), ("float32", "bfloat16"))
        self.assertEqual(up.job.counts.FAIL, 0)
        self.assertEqual(up.job.counts.PASS + up.job.counts.WARN, 12)

    def test_arguments_and_statistics_modes(self):
        g = {"Functional.pad.0.forward.input.0": np.ones(4, np.float32), "Functional.pad.0.forward.input.1": 2,
             "Functional.pad.0.forward.input.2": None, "Functional.pad.0.forward.output.0": np.ones(8, np.float32)}
        golden = self.c.upload(g, project="py-stats", role="golden", mode="stats").wait().run_id
        t = dict(g, **{"Functional.pad.0.forward.input.1": 3})
        up = self.c.upload(t, project="py-stats", against=golden, mode="stats").wait()
        rows = {r.name: r for r in self.c.results(up.job_id)}
        self.assertEqual(rows["Functional.pad.0.forward.input.1"].target.value, "3")
        self.assertEqual(rows["Functional.pad.0.forward.input.2"].target.value, "None")
        self.assertIn("Max diff", rows["Functional.pad.0.forward.output.0"].metrics)
        self.assertEqual(rows["Functional.pad.0.forward.output.0"].target.stats["max"], 1.0)

    def test_refusals_are_parity_errors_with_the_daemons_code(self):
        with self.assertRaises(parity.ParityError) as e:
            self.c.summary("job-that-does-not-exist")
        self.assertEqual(e.exception.code, grpc.StatusCode.NOT_FOUND)
        with self.assertRaises(parity.ParityError) as e:
            self.c.upload({"x": np.zeros(2, np.float32)}, project="bad project!", role="golden").wait()
        self.assertEqual(e.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("project", e.exception.message)
        with self.assertRaises(parity.ParityError) as e:
            self.c.upload({"x": object()}, project="py", role="golden").wait()
        self.assertIn("cannot upload a object", str(e.exception))
        with self.assertRaises(ValueError):
            self.c.results("j", verdict="BAD")


class AuthTest(unittest.TestCase):
    def test_a_daemon_with_tokens_refuses_a_client_without_one(self):
        d = Daemon(BUILD, "--auth", "tokens", "--admin-token-file", "ADMIN")
        try:
            token = None
            for _ in range(100):
                path = os.path.join(os.getcwd(), "ADMIN")
                if os.path.exists(path):
                    with open(path) as f:
                        token = f.read().strip()
                    break
                time.sleep(0.05)
            self.assertTrue(token)
            with parity.Client(d.address) as anonymous, self.assertRaises(parity.ParityError) as e:
                list(anonymous.runs())
            self.assertEqual(e.exception.code, grpc.StatusCode.UNAUTHENTICATED)
            with parity.Client(d.address, token=token) as admin:
                up = admin.upload({"a": np.ones(3, np.float32)}, project="tok", role="golden").wait()
                self.assertEqual([r.run_id for r in admin.runs(project="tok")], [up.run_id])
        finally:
            d.close()
            if os.path.exists("ADMIN"):
                os.remove("ADMIN")


class RejectedItemTest(unittest.TestCase):
    def test_a_refused_tensor_is_reported_and_the_rest_goes_on(self):
        d = Daemon(BUILD, "--max-tensor-bytes", "4096")
        try:
            with parity.Client(d.address) as c:
                up = c.upload({"small.0": np.ones(16, np.float32), "big": np.ones(4096, np.float32),
                               "small.1": np.zeros(16, np.float32)}, project="rej", role="golden").wait()
                self.assertEqual(up.items_received, 2)
                self.assertEqual([r.name for r in up.rejected], ["big"])
                self.assertIn(up.rejected[0].code, (grpc.StatusCode.RESOURCE_EXHAUSTED,
                                                    grpc.StatusCode.INVALID_ARGUMENT))
                self.assertIn("4096", up.rejected[0].message)
                self.assertEqual(next(c.runs(project="rej")).item_count, 2)
        finally:
            d.close()


class ResumeTest(unittest.TestCase):
    def test_an_upload_resumes_after_the_daemon_is_killed(self):
        d = Daemon(BUILD)
        try:
            c = parity.Client(d.address)
            n, sent = 60, []
            big = {"Functional.op.%d.forward.output.0" % i: RNG.standard_normal(1 << 18).astype(np.float32)
                   for i in range(n)}

            def slow():
                for k, v in big.items():
                    sent.append(k)
                    if len(sent) == n // 2:
                        d.kill()
                        threading.Timer(0.5, d.start, kwargs={"port": d.port}).start()
                    yield k, v

            up = c.upload(slow(), project="resume", role="golden", retry_seconds=60).wait(120)
            self.assertGreater(up.attempts, 1)
            run = next(c.runs(project="resume"))
            self.assertEqual((run.run_id, run.complete, run.item_count), (up.run_id, True, n))
            c.close()
        finally:
            d.close()


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
