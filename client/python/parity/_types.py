"""Results as plain dataclasses, named as the CLI's --json documents name them (docs/schemas/).

Each class has ``to_dict()``, giving the document ``parity ... --json`` prints for the same
object: enum values are the CLI's words ("PASS", "forward", "done"), NaN and infinities in
metrics and statistics are the text "nan", "inf", "-inf".
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict, List, Optional, Union

from parity.v1 import parity_pb2 as pb

Number = Union[float, int, str, None]

_GOLDEN_ONLY_INDEX_BASE = 1000000000000

VERDICTS = ("PASS", "WARN", "FAIL", "ERROR", "UNMATCHED", "SKIPPED")


def _enum_word(enum_type, value: int, prefix: str, lower: bool = True) -> str:
    name = enum_type.Name(value)[len(prefix):]
    return name.lower() if lower else name


def _enum_value(enum_type, word: str, prefix: str, what: str) -> int:
    try:
        return enum_type.Value(prefix + word.upper())
    except ValueError:
        names = [n[len(prefix):].lower() for n in enum_type.keys() if not n.endswith("UNSPECIFIED")]
        raise ValueError("%s must be one of %s, not %r" % (what, ", ".join(names), word)) from None


def verdict_value(word: str) -> int:
    return _enum_value(pb.Verdict, word, "VERDICT_", "verdict")


def phase_value(word: str) -> int:
    return _enum_value(pb.Phase, word, "PHASE_", "phase")


def role_value(word: str) -> int:
    return _enum_value(pb.Role, word, "ROLE_", "role")


def state_value(word: str) -> int:
    return _enum_value(pb.JobState, word, "JOB_STATE_", "state")


def policy_value(word: Optional[str]) -> int:
    if not word:
        return pb.POLICY_UNSPECIFIED
    return _enum_value(pb.Policy, word, "POLICY_", "policy")


def _json_number(v: Number) -> Number:
    if isinstance(v, float) and not math.isfinite(v):
        return repr(v)
    return v


@dataclasses.dataclass
class Counts:
    """How many items got each verdict."""
    PASS: int = 0
    WARN: int = 0
    FAIL: int = 0
    ERROR: int = 0
    UNMATCHED: int = 0
    SKIPPED: int = 0

    @classmethod
    def from_proto(cls, c: "pb.VerdictCounts") -> "Counts":
        return cls(getattr(c, "pass"), c.warn, c.fail, c.error,
                   c.unmatched, c.skipped)

    def to_dict(self) -> Dict[str, int]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Job:
    """A comparison of a target run against a golden run."""
    job_id: str
    project: str
    state: str                     # queued, running, done, failed, cancelled
    policy: Optional[str]          # msprobe, forge, torch; None: the server's default
    golden_run_id: str
    target_run_id: str
    golden_run_name: Optional[str]
    target_run_name: Optional[str]
    pairs_done: int
    pairs_total: int
    counts: Counts
    first_culprit: Optional[str]
    error: Optional[str]
    created_at_ms: int
    finished_at_ms: Optional[int]

    @property
    def finished(self) -> bool:
        return self.state in ("done", "failed", "cancelled")

    @classmethod
    def from_proto(cls, j: "pb.Job") -> "Job":
        policy = j.config.policy
        return cls(
            job_id=j.job_id, project=j.project,
            state=_enum_word(pb.JobState, j.state, "JOB_STATE_"),
            policy=None if policy == pb.POLICY_UNSPECIFIED else _enum_word(pb.Policy, policy, "POLICY_"),
            golden_run_id=j.golden_run_id, target_run_id=j.target_run_id,
            golden_run_name=j.golden_run_name or None, target_run_name=j.target_run_name or None,
            pairs_done=j.pairs_done, pairs_total=j.pairs_total, counts=Counts.from_proto(j.counts),
            first_culprit=j.first_culprit or None, error=j.error or None,
            created_at_ms=j.created_at_ms, finished_at_ms=j.finished_at_ms or None)

    def to_dict(self) -> Dict[str, Any]:
        d = dataclasses.asdict(self)
        d["counts"] = self.counts.to_dict()
        return d


@dataclasses.dataclass
class Run:
    """One uploaded dump (a golden or a target run)."""
    run_id: str
    project: str
    side: str                      # golden or target
    name: str
    model: str
    device: str
    framework: str
    item_count: int
    complete: bool
    structure_hash: str
    fingerprint: str
    labels: Dict[str, str]
    created_at_ms: int

    @classmethod
    def from_proto(cls, r: "pb.Run") -> "Run":
        m = r.metadata
        return cls(run_id=r.run_id, project=m.project, side=_enum_word(pb.Side, m.side, "SIDE_"),
                   name=m.name, model=m.model, device=m.device, framework=m.framework,
                   item_count=r.item_count, complete=r.complete, structure_hash=r.structure_hash,
                   fingerprint=r.fingerprint, labels=dict(m.labels), created_at_ms=r.created_at_ms)

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Side:
    """One side of a compared pair as its dump records it."""
    dtype: Optional[str]           # float32, bfloat16, ...; None for a non-tensor argument
    shape: Optional[List[int]]
    stats: Dict[str, Number]       # max, min, mean, norm (None when absent)
    requires_grad: Optional[bool]
    value: Optional[str]           # a non-tensor argument's str(); None for a tensor

    def to_dict(self) -> Dict[str, Any]:
        return {"dtype": self.dtype, "shape": self.shape,
                "stats": {k: _json_number(v) for k, v in self.stats.items()},
                "requires_grad": self.requires_grad, "value": self.value}


def _side(r: "pb.OpResult", prefix: str, present: bool) -> Optional[Side]:
    if not present:
        return None
    dtype = getattr(r, prefix + "_dtype")
    stats_pb = getattr(r, prefix + "_stats")
    stats = {k: (getattr(stats_pb, k) if stats_pb.HasField(k) else None) for k in ("max", "min", "mean", "norm")}
    value = getattr(r, prefix + "_value") if r.HasField(prefix + "_value") else None
    rg = getattr(r, prefix + "_requires_grad") if r.HasField(prefix + "_requires_grad") else None
    tensor = dtype != pb.DTYPE_UNSPECIFIED
    return Side(dtype=_enum_word(pb.DType, dtype, "DTYPE_") if tensor else None,
                shape=list(getattr(r, prefix + "_shape")) if tensor else None,
                stats=stats, requires_grad=rg, value=value)


@dataclasses.dataclass
class Result:
    """One compared item: a tensor (or argument) of an operator, with its verdict and metrics."""
    name: str
    golden_name: Optional[str]
    target_name: Optional[str]
    api: str
    op_type: str
    phase: str                     # forward, backward, unknown
    role: str                      # input, output, parameter, gradient, unknown
    verdict: str                   # PASS, WARN, FAIL, ERROR, UNMATCHED, SKIPPED
    policy: str                    # msprobe, forge, torch
    peer_verdict: str
    message: str
    culprit: Optional[str]         # "culprit", "propagated" or None
    metrics: Dict[str, Number]     # in the peer's column order
    golden: Optional[Side]
    target: Optional[Side]
    job_id: str = ""

    @property
    def failed(self) -> bool:
        return self.verdict in ("FAIL", "ERROR")

    @classmethod
    def from_proto(cls, r: "pb.OpResult") -> "Result":
        metrics: Dict[str, Number] = {}
        for m in r.metrics:
            kind = m.WhichOneof("value")
            metrics[m.name] = getattr(m, kind) if kind else None
        # A golden item without a target counterpart is listed under an index past every target
        # item's (the daemon's kGoldenOnlyIndexBase); its golden_name is its own name.
        golden_only = r.key.index >= _GOLDEN_ONLY_INDEX_BASE
        culprit = {pb.CULPRIT_STATUS_CULPRIT: "culprit", pb.CULPRIT_STATUS_PROPAGATED: "propagated"}.get(r.culprit)
        k = r.key
        return cls(
            name=k.name, golden_name=r.golden_name or None,
            target_name=None if golden_only else k.name, api=k.api, op_type=k.op_type,
            phase=_enum_word(pb.Phase, k.phase, "PHASE_") if k.phase else "unknown",
            role=_enum_word(pb.Role, k.role, "ROLE_") if k.role else "unknown",
            verdict=_enum_word(pb.Verdict, r.verdict, "VERDICT_", lower=False),
            policy=_enum_word(pb.Policy, r.policy, "POLICY_") if r.policy else "",
            peer_verdict=r.peer_verdict, message=r.message, culprit=culprit, metrics=metrics,
            golden=_side(r, "golden", bool(r.golden_name)), target=_side(r, "target", not golden_only),
            job_id=r.job_id)

    def to_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "golden_name": self.golden_name, "target_name": self.target_name,
                "api": self.api, "op_type": self.op_type, "phase": self.phase, "role": self.role,
                "verdict": self.verdict, "policy": self.policy, "peer_verdict": self.peer_verdict,
                "message": self.message, "culprit": self.culprit,
                "metrics": {k: _json_number(v) for k, v in self.metrics.items()},
                "golden": self.golden.to_dict() if self.golden else None,
                "target": self.target.to_dict() if self.target else None}


@dataclasses.dataclass
class WorstOp:
    metric: str
    name: str
    value: float

    def to_dict(self) -> Dict[str, Any]:
        return {"metric": self.metric, "name": self.name, "value": _json_number(self.value)}


@dataclasses.dataclass
class Culprit:
    """A culprit with its error growth: how much it amplifies the relative error it receives."""
    api: str
    phase: Optional[str]          # "forward", "backward", "gradient"; None outside a training step
    growth: Optional[float]       # None when unknown
    in_error: Optional[float]
    out_error: Optional[float]
    stack: Optional[str]          # the code that called it (msprobe's stack.json)

    @classmethod
    def from_proto(cls, c: "pb.Culprit") -> "Culprit":
        phase = None if c.phase == pb.STEP_PHASE_UNSPECIFIED else _enum_word(pb.StepPhase, c.phase, "STEP_PHASE_")
        opt = (lambda f: getattr(c, f) if c.HasField(f) else None)
        return cls(api=c.api, phase=phase, growth=opt("growth"), in_error=opt("in_error"),
                   out_error=opt("out_error"), stack=c.stack or None)

    def to_dict(self) -> Dict[str, Any]:
        return {"api": self.api, "phase": self.phase, "growth": _json_number(self.growth),
                "in_error": _json_number(self.in_error), "out_error": _json_number(self.out_error),
                "stack": self.stack}


@dataclasses.dataclass
class CulpritAnalysis:
    """The culprits ranked by error growth, and the noise floor they were measured against."""
    noise_growth: Optional[float]
    growth_threshold: float
    noise_samples: int
    ranked: List[Culprit]
    within_noise: List[str]       # failing operators whose growth stays below the threshold
    more: int                     # culprits beyond ``ranked``
    growth_fence: Optional[float] = None  # the outlier fence; None with too few operators

    @classmethod
    def from_proto(cls, s: "pb.JobSummary") -> "CulpritAnalysis":
        return cls(noise_growth=s.noise_growth if s.HasField("noise_growth") else None,
                   growth_threshold=s.growth_threshold, noise_samples=s.noise_samples,
                   ranked=[Culprit.from_proto(c) for c in s.ranked_culprits],
                   within_noise=list(s.within_noise), more=s.more_culprits,
                   growth_fence=s.growth_fence if s.HasField("growth_fence") else None)

    def to_dict(self) -> Dict[str, Any]:
        return {"noise_growth": _json_number(self.noise_growth),
                "growth_threshold": _json_number(self.growth_threshold), "noise_samples": self.noise_samples,
                "growth_fence": _json_number(self.growth_fence),
                "ranked": [c.to_dict() for c in self.ranked], "within_noise": list(self.within_noise),
                "more": self.more}


@dataclasses.dataclass
class Summary:
    """A job's verdict counts, culprits and worst operators per metric (``parity summary``)."""
    job: Job
    counts: Counts
    first_culprit: Optional[str]
    culprits: List[str]
    worst: List[WorstOp]
    culprit_analysis: CulpritAnalysis
    module_tree: Optional[List[Dict[str, Any]]] = None  # with ``module_tree=True``

    @classmethod
    def from_proto(cls, s: "pb.JobSummary") -> "Summary":
        status = (lambda v: None if v == pb.CULPRIT_STATUS_UNSPECIFIED
                  else _enum_word(pb.CulpritStatus, v, "CULPRIT_STATUS_"))
        tree = [{"name": n.name, "parent": n.parent or None, "status": status(n.status), "fails": n.fails,
                 "gradient_status": status(n.gradient_status), "gradient_fails": n.gradient_fails}
                for n in s.module_tree] or None
        return cls(job=Job.from_proto(s.job), counts=Counts.from_proto(s.counts),
                   first_culprit=s.first_culprit or None, culprits=list(s.culprits),
                   worst=[WorstOp(w.metric, w.name, w.value) for w in s.worst],
                   culprit_analysis=CulpritAnalysis.from_proto(s), module_tree=tree)

    def to_dict(self) -> Dict[str, Any]:
        d = {"job": self.job.to_dict(), "counts": self.counts.to_dict(),
             "first_culprit": self.first_culprit, "culprits": list(self.culprits),
             "worst": [w.to_dict() for w in self.worst], "culprit_analysis": self.culprit_analysis.to_dict()}
        if self.module_tree is not None:
            d["module_tree"] = [dict(n) for n in self.module_tree]
        return d


@dataclasses.dataclass
class Regression:
    """An item that got worse (or better, when asked for improvements) between two jobs."""
    name: str
    reason: str
    base: Optional[Result]
    current: Optional[Result]

    @classmethod
    def from_proto(cls, r: "pb.OpRegression") -> "Regression":
        return cls(name=r.name, reason=r.reason,
                   base=Result.from_proto(r.base) if r.HasField("base") else None,
                   current=Result.from_proto(r.current) if r.HasField("current") else None)

    def to_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "reason": self.reason}
