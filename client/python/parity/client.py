"""parity.Client: parityd's gRPC API (Ingest, Jobs, Query) in Python's idiom."""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Iterator, Mapping, Optional, Sequence, Union

import grpc

from parity._errors import ParityError
from parity._types import (Job, Regression, Result, Run, Summary, phase_value, policy_value, role_value,
                           state_value, verdict_value)
from parity._upload import DUMP_MODES, Upload, new_run_id
from parity.v1 import parity_pb2 as pb
from parity.v1 import parity_pb2_grpc as rpc

Tensors = Union[Mapping[str, Any], Iterable[tuple]]
_MATCH = {None: pb.MATCH_MODE_UNSPECIFIED, "exact": pb.MATCH_MODE_EXACT, "fuzzy": pb.MATCH_MODE_FUZZY}


def _words(value: Union[str, Sequence[str], None]) -> Sequence[str]:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


class Client:
    """A connection to one parityd.

    ``server`` is host:port (parityd's --listen; the CLI's --server). ``token`` is an API token
    (parityd --auth=tokens; the CLI's --token / $PARITY_TOKEN). ``tls_ca`` is a PEM file of the
    CA that signed parityd's certificate (TLS on); ``tls=True`` uses the system's CAs. Every
    call raises :class:`parity.ParityError` with the daemon's code and message when it fails.
    Use it as a context manager, or call ``close()``.
    """

    def __init__(self, server: str = "localhost:50051", *, token: Optional[str] = None,
                 tls_ca: Optional[str] = None, tls: bool = False, timeout: float = 60.0,
                 options: Sequence[tuple] = ()):
        self.server = server
        self.timeout = timeout
        if tls or tls_ca:
            root = None
            if tls_ca:
                with open(tls_ca, "rb") as f:
                    root = f.read()
            self._channel = grpc.secure_channel(server, grpc.ssl_channel_credentials(root_certificates=root),
                                                options=list(options))
        else:
            self._channel = grpc.insecure_channel(server, options=list(options))
        self._metadata = (("authorization", "Bearer " + token),) if token else ()
        self._ingest = rpc.IngestStub(self._channel)
        self._jobs = rpc.JobsStub(self._channel)
        self._query = rpc.QueryStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, method, request, what: str):
        try:
            return method(request, metadata=self._metadata, timeout=self.timeout)
        except grpc.RpcError as e:
            raise ParityError.from_rpc(e, what) from None

    def _pages(self, method, request, field: str, what: str) -> Iterator[Any]:
        while True:
            resp = self._call(method, request, what)
            yield from getattr(resp, field)
            if not resp.next_page_token:
                return
            request.page_token = resp.next_page_token

    # -- uploads ------------------------------------------------------------------------------

    def upload(self, tensors: Tensors, *, project: str, role: str = "target", against: Optional[str] = None,
               against_label: Optional[Mapping[str, str]] = None, labels: Optional[Mapping[str, str]] = None,
               name: str = "", model: str = "", device: str = "", framework: str = "pytorch",
               rank: int = 0, step: int = 0, mode: str = "full", policy: Optional[str] = None,
               match: Optional[str] = None, config: Optional[str] = None, dedup_min_bytes: int = 1 << 20,
               max_pending_bytes: int = 256 << 20, retry_seconds: float = 60.0, verdict_buffer: int = 65536,
               on_verdict: Optional[Callable[[Result], None]] = None,
               files: Union[Mapping[str, bytes], Callable[[], Mapping[str, bytes]], None] = None) -> Upload:
        """Uploads one run: ``tensors`` maps item names (msprobe's, e.g.
        ``"Functional.conv2d.0.forward.output.0"``, or any) to numpy arrays, torch tensors or Python
        scalars, or is an iterator of (name, value) pairs, read as the stream can take them.

        ``role`` is "golden" or "target". A target run with ``against`` (a golden run id) or
        ``against_label`` (the latest golden run of the project with these labels) is compared
        as it arrives: iterate over the returned :class:`Upload` for verdicts. ``mode`` is
        "full" (the bytes), "stats" (statistics only) or "crc" (statistics and CRC-32), as
        parity-agent's --mode. ``policy`` (msprobe, forge, torch), ``match`` (exact, fuzzy) and
        ``config`` (a JSON document, docs/cli.md) configure the job. Memory: at most
        ``max_pending_bytes`` of sent, unacknowledged tensors are kept (for resuming after a
        lost connection, within ``retry_seconds``); tensors of at least ``dedup_min_bytes`` the
        project already holds are sent by reference. ``files`` are the files the run carries
        beside its items (msprobe's "stack.json", "construct.json": name to bytes, or a callable
        returning them once the items are sent), shown with the culprits and by
        ``parity summary --tree``.
        """
        side = {"golden": pb.SIDE_GOLDEN, "target": pb.SIDE_TARGET}.get(role)
        if side is None:
            raise ValueError("role must be golden or target, not %r" % (role,))
        if (against or against_label) and side != pb.SIDE_TARGET:
            raise ValueError("against is for a target run")
        meta = pb.RunMetadata(project=project, side=side, name=name, model=model, framework=framework,
                              device=device, rank=rank, step=step, labels=dict(labels or {}),
                              dump_format="msprobe")
        if mode in DUMP_MODES:
            meta.dump_mode = DUMP_MODES[mode]
        start = pb.UploadStart(new_run=meta, new_run_id=new_run_id())
        if against:
            start.against_run_id = against
        elif against_label:
            pairs = sorted(against_label.items())
            start.against_label.key, start.against_label.value = pairs[0]
            for k, v in pairs[1:]:
                start.against_extra_labels.add(key=k, value=v)
        if against or against_label:
            start.summary_waits_for_job = True
            start.job_config.CopyFrom(self._job_config(policy, match, config))
        return Upload(self, tensors, start=start, mode=mode, dedup_min_bytes=dedup_min_bytes,
                      max_pending_bytes=max_pending_bytes, retry_seconds=retry_seconds,
                      verdict_buffer=verdict_buffer, on_verdict=on_verdict, files=files)

    @staticmethod
    def _job_config(policy: Optional[str], match: Optional[str], config: Optional[str]) -> "pb.JobConfig":
        if match not in _MATCH:
            raise ValueError("match must be exact or fuzzy, not %r" % (match,))
        return pb.JobConfig(policy=policy_value(policy), match_mode=_MATCH[match], config_json=config or "")

    # -- jobs ---------------------------------------------------------------------------------

    def submit(self, golden_run_id: str, target_run_id: str, *, policy: Optional[str] = None,
               match: Optional[str] = None, config: Optional[str] = None) -> Job:
        """Compares two stored runs; returns the job (queued or running)."""
        req = pb.SubmitJobRequest(golden_run_id=golden_run_id, target_run_id=target_run_id,
                                  config=self._job_config(policy, match, config))
        return Job.from_proto(self._call(self._jobs.Submit, req, "submit"))

    def job(self, job_id: str) -> Job:
        return Job.from_proto(self._call(self._jobs.Get, pb.GetJobRequest(job_id=job_id), "job " + job_id))

    def jobs(self, *, project: str = "", state: Optional[str] = None, run_id: str = "",
             page_size: int = 0) -> Iterator[Job]:
        """Every job (newest first), page after page."""
        req = pb.ListJobsRequest(project=project, run_id=run_id, page_size=page_size,
                                 state=state_value(state) if state else pb.JOB_STATE_UNSPECIFIED)
        return (Job.from_proto(j) for j in self._pages(self._jobs.List, req, "jobs", "jobs"))

    def cancel(self, job_id: str) -> Job:
        return Job.from_proto(self._call(self._jobs.Cancel, pb.CancelJobRequest(job_id=job_id), "cancel " + job_id))

    def watch(self, job_id: str) -> Iterator[Job]:
        """The job's progress until it is final (the last one yielded is)."""
        try:
            for p in self._jobs.Watch(pb.WatchJobRequest(job_id=job_id), metadata=self._metadata):
                yield Job.from_proto(p.job)
        except grpc.RpcError as e:
            raise ParityError.from_rpc(e, "watch " + job_id) from None

    # -- queries ------------------------------------------------------------------------------

    def runs(self, *, project: str = "", model: str = "", labels: Optional[Mapping[str, str]] = None,
             structure_hash: str = "", page_size: int = 0) -> Iterator[Run]:
        """Every run matching (newest first), page after page."""
        req = pb.ListRunsRequest(project=project, model=model, labels=dict(labels or {}),
                                 structure_hash=structure_hash, page_size=page_size)
        return (Run.from_proto(r) for r in self._pages(self._query.ListRuns, req, "runs", "runs"))

    def results(self, job_id: str, *, verdict: Union[str, Sequence[str], None] = None, op: str = "",
                phase: Optional[str] = None, role: Optional[str] = None,
                culprit: Union[str, Sequence[str], None] = None, sort: str = "", descending: bool = False,
                page_size: int = 0) -> "Results":
        """The job's results, filtered and sorted as ``parity results`` does: ``verdict`` any of
        PASS, WARN, FAIL, ERROR, UNMATCHED, SKIPPED; ``op`` a glob on the item name or API;
        ``culprit`` any of "culprit", "propagated", "none"; ``sort`` a metric ("Cosine",
        "MaxAbsErr", ...), dump order when empty. Iterating reads every page."""
        req = pb.ListOpResultsRequest(job_id=job_id, op_glob=op, sort_metric=sort, descending=descending,
                                      page_size=page_size)
        req.verdicts.extend(verdict_value(v) for v in _words(verdict))
        culprits = {"culprit": pb.CULPRIT_STATUS_CULPRIT, "propagated": pb.CULPRIT_STATUS_PROPAGATED,
                    "none": pb.CULPRIT_STATUS_UNSPECIFIED}
        for c in _words(culprit):
            if c not in culprits:
                raise ValueError("culprit must be culprit, propagated or none, not %r" % (c,))
            req.culprits.append(culprits[c])
        if phase:
            req.phase = phase_value(phase)
        if role:
            req.role = role_value(role)
        return Results(self, req)

    def result(self, job_id: str, name: str) -> Result:
        """One item's result (``parity show``)."""
        r = self._call(self._query.GetOpResult, pb.GetOpResultRequest(job_id=job_id, name=name), "result " + name)
        return Result.from_proto(r)

    def summary(self, job_id: str, *, worst: int = 5, module_tree: bool = False) -> Summary:
        """Verdict counts, culprits ranked by error growth, and the worst operators per metric
        (``parity summary``); with ``module_tree``, the target's module tree (``--tree``)."""
        req = pb.GetJobSummaryRequest(job_id=job_id, worst_per_metric=worst, module_tree=module_tree)
        return Summary.from_proto(self._call(self._query.GetJobSummary, req, "summary " + job_id))

    def diff(self, base_job_id: str, job_id: str, *, min_change: float = 0.0,
             improvements: bool = False, page_size: int = 0) -> Iterator[Regression]:
        """What got worse from ``base_job_id`` to ``job_id`` (or better, with improvements)."""
        req = pb.DiffJobsRequest(base_job_id=base_job_id, job_id=job_id, min_change=min_change,
                                 improvements=improvements, page_size=page_size)
        return (Regression.from_proto(r) for r in self._pages(self._query.DiffJobs, req, "regressions", "diff"))

    def status(self) -> Dict[str, Any]:
        """The daemon's version, uptime and gauges (``parity status --json``'s document)."""
        s = self._call(self._query.GetServerStatus, pb.GetServerStatusRequest(), "status")
        return {"server": self.server, "version": s.version, "started_at_ms": s.started_at_ms,
                "uptime_ms": s.uptime_ms,
                "gauges": {g.name: {"value": g.value, "peak": g.peak, "limit": g.limit,
                                    "limit_is_floor": g.limit_is_floor, "bytes": g.bytes, "flag": g.flag}
                           for g in s.gauges}}


class Results:
    """A job's results as an iterable over every page (read lazily); ``total`` is how many match,
    ``to_pandas()`` a DataFrame with one row per result (pandas needed)."""

    def __init__(self, client: Client, request: "pb.ListOpResultsRequest"):
        self._client = client
        self._request = request
        self.total: Optional[int] = None

    def __iter__(self) -> Iterator[Result]:
        req = pb.ListOpResultsRequest()
        req.CopyFrom(self._request)
        while True:
            resp = self._client._call(self._client._query.ListOpResults, req, "results " + req.job_id)
            self.total = resp.total
            for r in resp.results:
                yield Result.from_proto(r)
            if not resp.next_page_token:
                return
            req.page_token = resp.next_page_token

    def to_pandas(self):
        import pandas as pd  # noqa: PLC0415 - optional
        rows = []
        for r in self:
            row = {k: v for k, v in r.to_dict().items() if k not in ("metrics", "golden", "target")}
            row.update(r.metrics)
            rows.append(row)
        return pd.DataFrame(rows)
