"""Ingest.Upload from Python: the agent's protocol (start, headers, chunks, end), resumed on a
new connection when one is lost, with verdicts handed to the caller as they arrive."""
from __future__ import annotations

import collections
import hashlib
import queue
import random
import secrets
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Tuple

import grpc

from parity._errors import ParityError, ended_by_parityd, retryable
from parity._tensors import Item, item_key, make_item
from parity._types import Job, Result, Summary
from parity.v1 import parity_pb2 as pb

MODES = {"full": pb.DATA_MODE_DATA, "stats": pb.DATA_MODE_STATS, "crc": pb.DATA_MODE_CRC}
DUMP_MODES = {"full": pb.DUMP_MODE_TENSOR, "stats": pb.DUMP_MODE_STATISTICS, "crc": pb.DUMP_MODE_MD5}
_DONE = object()  # ends the verdict queue


class Rejected(NamedTuple):
    """An item the daemon refused (the rest of the upload went on)."""
    name: str
    code: grpc.StatusCode
    message: str


class _Pending:
    """Items sent (or about to be) and not yet acknowledged, in send order, with their bytes.

    A lost connection re-sends them on the next; their total size is bounded (the source is
    not read further while it is over the limit)."""

    MAX_ITEMS = 65536

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.cv = threading.Condition()
        self.items: "collections.OrderedDict[str, Item]" = collections.OrderedDict()
        self.bytes = 0

    def add(self, name: str, item: Item, stop: threading.Event) -> bool:
        with self.cv:
            while self.items and (self.bytes + item.nbytes > self.max_bytes or len(self.items) >= self.MAX_ITEMS) \
                    and not stop.is_set():
                self.cv.wait(0.1)
            if stop.is_set():
                return False
            self.items[name] = item
            self.bytes += item.nbytes
            return True

    def drop(self, name: str) -> Optional[Item]:
        with self.cv:
            item = self.items.pop(name, None)
            if item is not None:
                self.bytes -= item.nbytes
                self.cv.notify_all()
            return item

    def holds(self, name: str) -> bool:
        with self.cv:
            return name in self.items

    def snapshot(self) -> List[Tuple[str, Item]]:
        with self.cv:
            return list(self.items.items())


class Upload:
    """One run's upload, started by :meth:`parity.Client.upload`.

    Iterating over it yields a :class:`parity.Result` for each compared pair as the daemon sends
    it (only with ``against``), and ends when the upload has ended; ``wait()`` waits for that
    without looking at verdicts. Afterwards ``run_id``, ``job_id``, ``job`` (the final job),
    ``summary`` (its :class:`parity.Summary`, culprits included), ``items_received`` and
    ``rejected`` say what happened. A failure raises :class:`parity.ParityError` from the
    iteration or ``wait()``.
    """

    def __init__(self, client, tensors, *, start: "pb.UploadStart", mode: str, dedup_min_bytes: int,
                 max_pending_bytes: int, retry_seconds: float, verdict_buffer: int,
                 on_verdict: Optional[Callable[[Result], None]], files=None):
        if mode not in MODES:
            raise ValueError("mode must be full, stats or crc, not %r" % (mode,))
        self._client = client
        self._source = iter(tensors.items() if hasattr(tensors, "items") else tensors)
        self._start = start
        self._mode = MODES[mode]
        self._dedup_min_bytes = dedup_min_bytes
        self._retry_seconds = retry_seconds
        self._on_verdict = on_verdict
        self._files = files
        self._pending = _Pending(max_pending_bytes)
        self._verdicts: "queue.Queue[Any]" = queue.Queue(maxsize=max(verdict_buffer, 1))
        self._stop = threading.Event()
        self._call = None
        self._lock = threading.Lock()
        self._next_index = 0
        self._source_done = False
        self._source_error: Optional[BaseException] = None  # what reading or converting a tensor raised
        self.run_id = ""
        self.job_id = ""
        self.job: Optional[Job] = None
        self.summary: Optional[Summary] = None
        self.items_received = 0
        self.rejected: List[Rejected] = []
        self.bytes_sent = 0            # tensor bytes sent (again after a lost connection)
        self.bytes_by_reference = 0    # tensor bytes the project held: sent as their SHA-256
        self.verdicts_dropped = 0   # verdicts not kept because nobody iterated (the results stay queryable)
        self.attempts = 0
        self.error: Optional[ParityError] = None
        self._finished = threading.Event()
        self._thread = threading.Thread(target=self._run, name="parity-upload", daemon=True)
        self._thread.start()

    # -- the caller's side ------------------------------------------------------------------

    def __iter__(self) -> Iterator[Result]:
        while True:
            v = self._verdicts.get()
            if v is _DONE:
                self._verdicts.put(_DONE)  # a second iteration ends at once
                break
            yield v
        self._raise_if_failed()

    def wait(self, timeout: Optional[float] = None) -> "Upload":
        """Waits until the upload ended; raises ParityError if it failed."""
        if not self._finished.wait(timeout):
            raise TimeoutError("the upload did not end within %s s" % timeout)
        self._raise_if_failed()
        return self

    def done(self) -> bool:
        """Whether the upload has ended (with its summary or an error)."""
        return self._finished.is_set()

    def cancel(self) -> None:
        """Stops the upload (the run stays incomplete; the daemon keeps what it acknowledged)."""
        self._stop.set()
        with self._lock:
            if self._call is not None:
                self._call.cancel()

    def _raise_if_failed(self) -> None:
        if self.error is not None:
            raise self.error

    # -- the upload thread ------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._attempts()
            if self.job_id:
                self.summary = self._client.summary(self.job_id)
                self.job = self.summary.job
        except ParityError as e:
            self.error = e
        except Exception as e:  # noqa: BLE001 - a bad tensor or a bug: the caller sees it
            self.error = _source_failure(e)
        finally:
            self._finished.set()
            self._put_verdict(_DONE)

    def _attempts(self) -> None:
        backoff, lost_since, received_at_loss = 0.5, time.monotonic(), -1
        while True:
            self.attempts += 1
            code, message, by_parityd = self._attempt()
            if self._source_error is not None:
                raise _source_failure(self._source_error) from self._source_error
            if code is None:
                return
            if self._stop.is_set():
                raise ParityError(grpc.StatusCode.CANCELLED, "the upload was cancelled", "upload")
            now = time.monotonic()
            if self.items_received != received_at_loss:  # progress since the last loss: count afresh
                lost_since, received_at_loss, backoff = now, self.items_received, 0.5
            if not retryable(code, by_parityd) or now + backoff > lost_since + self._retry_seconds:
                raise ParityError(code, message, "upload (attempt %d)" % self.attempts)
            time.sleep(backoff / 2 + random.random() * backoff / 2)
            backoff = min(backoff * 2, 30.0)

    def _attempt(self) -> Tuple[Optional[grpc.StatusCode], str, bool]:
        """One connection: None when it ended with the summary, else why it failed."""
        accepted = threading.Event()
        state: Dict[str, Any] = {"held": set(), "chunk": 1 << 20}
        start = pb.UploadStart()
        start.CopyFrom(self._start)
        if self.run_id:
            start.ClearField("new_run")
            start.attach_run_id = self.run_id
        call = self._client._ingest.Upload(self._requests(start, accepted, state),
                                           metadata=self._client._metadata)
        with self._lock:
            self._call = call
        try:
            for resp in call:
                if self._on_response(resp, accepted, state):
                    return None, "", False
            return grpc.StatusCode.UNAVAILABLE, "the stream ended without a summary", False
        except grpc.RpcError as e:
            return e.code(), e.details() or "", ended_by_parityd(call)
        finally:
            accepted.set()  # releases a request generator still waiting
            state["dead"] = True

    def _on_response(self, resp, accepted: threading.Event, state: Dict[str, Any]) -> bool:
        kind = resp.WhichOneof("msg")
        if kind == "accepted":
            a = resp.accepted
            self.run_id, self.job_id = a.run_id, a.job_id or self.job_id
            state["held"] = set(a.held_item_names)
            state["chunk"] = a.max_chunk_bytes or state["chunk"]
            for name in state["held"]:
                self._pending.drop(name)
            accepted.set()
        elif kind == "ack":
            if self._pending.drop(resp.ack.name) is not None:
                self.items_received += 1
        elif kind == "rejected":
            r = resp.rejected
            item = self._pending.drop(r.name)
            if item is not None and item.header.by_reference and r.code == grpc.StatusCode.FAILED_PRECONDITION.value[0]:
                # The daemon no longer holds the offered blob: send the bytes after all.
                item.header.by_reference = False
                item.header.content_sha256 = ""
                state.setdefault("resend", collections.deque()).append((r.name, item))
            else:
                self.rejected.append(Rejected(r.name, _code(r.code), r.message))
        elif kind == "verdict":
            result = Result.from_proto(resp.verdict)
            if self._on_verdict is not None:
                self._on_verdict(result)
            self._put_verdict(result)
        elif kind == "summary":
            s = resp.summary
            if s.HasField("job"):
                self.job = Job.from_proto(s.job)
            return True
        return False

    def _put_verdict(self, result: Any) -> None:
        """Queues a verdict (or the end) for the iterator; when full, the oldest verdict goes."""
        try:
            self._verdicts.put_nowait(result)
        except queue.Full:
            self._drop_oldest_verdict()
            self._verdicts.put_nowait(result)

    def _drop_oldest_verdict(self) -> None:
        try:
            self._verdicts.get_nowait()
            self.verdicts_dropped += 1
        except queue.Empty:
            pass

    # -- what one connection sends (consumed by gRPC as the stream can take it) ---------------

    def _requests(self, start, accepted: threading.Event, state: Dict[str, Any]):
        yield pb.UploadRequest(start=start)
        accepted.wait()
        if state.get("dead"):
            return
        for name, item in self._pending.snapshot():  # what the last connection left unacknowledged
            if name not in state["held"]:
                yield from self._send(name, item, state)
        while not self._stop.is_set() and not state.get("dead"):
            resend = state.get("resend")
            if resend:
                name, item = resend.popleft()
                if self._pending.add(name, item, self._stop):
                    yield from self._send(name, item, state)
                continue
            try:
                nxt = self._next_item()
            except Exception as e:  # noqa: BLE001 - gRPC would hide it ("Exception iterating requests!")
                self._source_error = e
                self._stop.set()
                return
            if nxt is None:
                break
            name, item = nxt
            if name in state["held"] or not self._pending.add(name, item, self._stop):
                continue
            yield from self._send(name, item, state)
        if not self._stop.is_set() and not state.get("dead"):
            yield from self._send_files(state)
        if not self._stop.is_set() and not state.get("dead"):
            yield pb.UploadRequest(end=pb.UploadEnd())

    def _send_files(self, state: Dict[str, Any]):
        files = self._files() if callable(self._files) else (self._files or {})
        for name, data in files.items():
            data, step = bytes(data), state["chunk"]
            off = 0
            while True:
                part = data[off:off + step]
                last = off + len(part) >= len(data)
                yield pb.UploadRequest(run_file=pb.RunFilePart(name=name, offset=off, data=part, last=last))
                off += len(part)
                if last or state.get("dead"):
                    break

    def _next_item(self) -> Optional[Tuple[str, Item]]:
        if self._source_done:
            return None
        try:
            name, value = next(self._source)
        except StopIteration:
            self._source_done = True
            return None
        if not isinstance(name, str) or not name:
            raise TypeError("an item's name must be a non-empty string, not %r" % (name,))
        if self._pending.holds(name):
            # (A name repeated later, once acknowledged, is refused by the daemon: ALREADY_EXISTS in
            # `rejected`; remembering every name here would grow with the upload.)
            raise ValueError("item %r is given twice" % name)
        item = make_item(value, self._mode)
        item.header.key.CopyFrom(item_key(name, self._next_index))
        self._next_index += 1
        self._offer(item)
        return name, item

    def _offer(self, item: Item) -> None:
        """Dedup: a large tensor the project already holds goes by reference (its SHA-256)."""
        h = item.header
        if item.data is None or item.nbytes < self._dedup_min_bytes or h.by_reference:
            return
        project = self._start.new_run.project
        try:
            probe = self._client._ingest.HaveBlobs(pb.HaveBlobsRequest(
                project=project, probes=[pb.ContentProbe(byte_length=item.nbytes, crc32=h.crc32)]),
                metadata=self._client._metadata, timeout=30)
            if not (probe.maybe_held and probe.maybe_held[0]):
                return
            digest = hashlib.sha256(item.data).hexdigest()
            held = self._client._ingest.HaveBlobs(pb.HaveBlobsRequest(project=project, sha256=[digest]),
                                                  metadata=self._client._metadata, timeout=30)
        except grpc.RpcError:
            return  # no offer: the data goes
        if held.held and held.held[0]:
            h.by_reference = True
            h.content_sha256 = digest

    def _send(self, name: str, item: Item, state: Dict[str, Any]):
        yield pb.UploadRequest(header=item.header)
        if item.header.by_reference:
            self.bytes_by_reference += item.nbytes
        if item.data is None or item.header.by_reference:
            return
        self.bytes_sent += item.nbytes
        size, step = item.nbytes, state["chunk"]
        for off in range(0, size, step):
            if state.get("dead"):
                return
            yield pb.UploadRequest(chunk=pb.TensorChunk(offset=off, data=item.data[off:off + step].tobytes()))


def _source_failure(e: BaseException) -> ParityError:
    """What the caller's tensors (or a bug) raised, as the upload's error."""
    code = grpc.StatusCode.INVALID_ARGUMENT if isinstance(e, (TypeError, ValueError)) else grpc.StatusCode.UNKNOWN
    return ParityError(code, str(e), "upload")


def _code(value: int) -> grpc.StatusCode:
    for c in grpc.StatusCode:
        if c.value[0] == value:
            return c
    return grpc.StatusCode.UNKNOWN


def new_run_id() -> str:
    """A run id drawn by the client ("run-" and 16 hex digits): a start retried after a lost
    acceptance resumes the run instead of creating a second one."""
    return "run-" + secrets.token_hex(8)
