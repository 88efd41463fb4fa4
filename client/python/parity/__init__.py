"""Parity's Python client: upload tensors to parityd, follow jobs, read per-operator results.

    import parity
    with parity.Client("localhost:50051") as c:
        up = c.upload({"Functional.relu.0.forward.output.0": y}, project="demo", role="target",
                      against=golden_run_id)
        for r in up:
            print(r.name, r.verdict, r.metrics)
        print(up.summary.first_culprit)

See docs/python.md. Live capture from a PyTorch model: parity.torch.
"""
from parity._errors import ParityError
from parity._types import Counts, Culprit, CulpritAnalysis, Job, Regression, Result, Run, Side, Summary, WorstOp
from parity._upload import Upload
from parity._version import __version__
from parity.client import Client, Results

__all__ = ["Client", "Counts", "Culprit", "CulpritAnalysis", "Job", "ParityError", "Regression", "Result", "Results", "Run", "Side",
           "Summary", "Upload", "WorstOp", "__version__"]
