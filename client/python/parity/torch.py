"""Live capture from a running PyTorch model straight to parityd, named as msprobe names a dump.

    with parity.torch.capture(model, client, project="resnet", against=golden_run) as run:
        model(x).sum().backward()
    print(run.first_culprit)

Hooks follow msprobe's dumper (its API wrapping and module hooks), so a capture pairs with an
msprobe dump of the same model and call sequence:

- level "L1" (APIs): calls of torch.nn.functional, torch and torch.Tensor functions in the
  list below, outermost call only (an API called inside another is not recorded), named
  ``Functional.conv2d.0.forward`` (a count per API name from 0); their backward as
  ``Functional.conv2d.0.backward`` (input: the gradients arriving at the op's outputs; output:
  those it passes to its inputs).
- level "L0" (modules): every submodule but the root, ``Module.layer1.0.conv1.Conv2d.forward.0``
  (a count per module from 0), its backward, and each parameter's gradient as
  ``Module.layer1.0.conv1.Conv2d.parameters_grad.weight``.
- level "mix": both.

Items within an entry: positional arguments ``input.0``, ``input.1`` (nested lists
``input.1.0``), keyword arguments ``input.<name>``, outputs ``output.0``... Tensors are detached,
copied to host memory and handed to a background sender through a bounded queue; the model's
values are never changed. See docs/python.md for what is not captured.
"""
from __future__ import annotations

import collections
import contextlib
import fnmatch
import json
import os
import threading
import traceback
import weakref
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import torch

from parity import _apis
from parity._tensors import TensorStats, WithStats, torch_stats
from parity._types import Result, Summary
from parity._upload import MODES

# The APIs wrapped at levels L1 and mix: msprobe's (parity/_apis.py).
FUNCTIONAL_APIS, TENSOR_APIS, TORCH_APIS = _apis.FUNCTIONAL, _apis.TENSOR, _apis.TORCH

LEVELS = ("L0", "L1", "mix")

# Set on a thread while it runs Parity's own torch calls (recording, statistics, the sender's
# conversions): the API hooks let those through unrecorded.
_PARITY_THREAD = threading.local()


# Frames of this package: left out of recorded stacks.
_OWN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _forward_name(backward: str) -> str:
    """"Functional.relu.0.backward" -> "Functional.relu.0.forward"; modules as well."""
    i = backward.rfind(".backward")
    return backward[:i] + ".forward" + backward[i + 9:]


def _backward_name(forward: str) -> str:
    i = forward.rfind(".forward")
    return forward[:i] + ".backward" + forward[i + 8:]


class CulpritFound(RuntimeError):
    """Raised in the training loop (``stop_on_culprit=True``) once an operator's outputs fail
    while all its inputs pass."""

    def __init__(self, api: str):
        super().__init__("parity: %s is a culprit (its outputs fail while its inputs pass)" % api)
        self.api = api


class _Queue:
    """The bounded hand-over from the model's threads to the sender: at most max_bytes of copies
    waiting; when full, block (the model waits) or drop (counted)."""

    def __init__(self, max_bytes: int, block: bool):
        self.max_bytes, self.block = max_bytes, block
        self.sender_gone = threading.Event()  # the upload ended early (failed): nothing is taken
        self.sender_done: Callable[[], bool] = lambda: False
        self.cv = threading.Condition()
        self.items: List[Tuple[str, Any]] = []
        self.bytes = 0
        self.closed = False
        self.dropped = 0

    def put(self, name: str, value: Any, nbytes: int) -> None:
        with self.cv:
            while self.items and self.bytes + nbytes > self.max_bytes or self.sender_gone.is_set():
                if not self.block or self.sender_gone.is_set() or self.sender_done():
                    # Full with on_full="drop", or the upload failed (the capture's end raises
                    # its error): the model goes on.
                    self.dropped += 1
                    return
                self.cv.wait(0.1)
            self.items.append((name, value, nbytes))
            self.bytes += nbytes
            self.cv.notify_all()

    def close(self) -> None:
        with self.cv:
            self.closed = True
            self.cv.notify_all()

    def __iter__(self):
        try:
            yield from self._take()
        finally:  # also when the upload stops taking (it failed): the model must not wait
            self.sender_gone.set()

    def _take(self):
        # The thread that takes (gRPC's, sending the upload) converts tensors: its torch calls
        # are Parity's, not the model's.
        _PARITY_THREAD.on = True
        while True:
            with self.cv:
                while not self.items and not self.closed:
                    self.cv.wait()
                if not self.items:
                    return
                name, value, nbytes = self.items.pop(0)
                self.bytes -= nbytes
                self.cv.notify_all()
            yield name, value


class _Culprits:
    """The daemon's culprit rule (docs/fidelity.md) on verdicts as they stream in: an API whose
    outputs fail while every input passes, and for a backward entry also its forward entry."""

    def __init__(self):
        self.lock = threading.Lock()
        self.inputs_ok: Dict[str, bool] = {}
        self.failed: set = set()  # APIs with a failing item
        self.first: Optional[str] = None

    def add(self, r: Result) -> None:
        with self.lock:
            if r.failed:
                self.failed.add(r.api)
            if r.role == "input":
                self.inputs_ok[r.api] = self.inputs_ok.get(r.api, True) and not r.failed
            elif r.role == "output" and r.failed and self.inputs_ok.get(r.api, True) and self.first is None:
                head, word, tail = r.api.rpartition(".backward")
                if word and (not tail or tail[1:].isdigit()) and head + ".forward" + tail in self.failed:
                    return  # its forward entry already fails: a consequence
                self.first = r.api


class Capture:
    """A capture in progress (what ``capture(...)`` yields). After the ``with`` block:
    ``summary`` (a :class:`parity.Summary`, None for a golden run), ``first_culprit``,
    ``run_id``, ``job_id``, ``dropped`` (items not sent because the queue was full with
    ``on_full="drop"``) and ``upload`` (the :class:`parity.Upload`)."""

    RECENT = 32  # tensors remembered for reuse (their copies stay alive until sent anyway)

    def __init__(self, model, client, *, level: str, mode: str, scope: Sequence[str], backward: bool,
                 max_queue_bytes: int, on_full: str, stop_on_culprit: bool,
                 on_verdict: Optional[Callable[[Result], None]], upload_args: Dict[str, Any], stack: bool = False):
        if level not in LEVELS:
            raise ValueError("level must be L0, L1 or mix, not %r" % (level,))
        if mode not in MODES:
            raise ValueError("mode must be full, stats or crc, not %r" % (mode,))
        if on_full not in ("block", "drop"):
            raise ValueError("on_full must be block or drop, not %r" % (on_full,))
        self.model, self.client, self.level, self.mode = model, client, level, mode
        self.scope, self.backward, self.stop_on_culprit = tuple(scope or ()), backward, stop_on_culprit
        self._queue = _Queue(max_queue_bytes, on_full == "block")
        self._culprits = _Culprits()
        self._user_on_verdict = on_verdict
        self._upload_args = dict(upload_args, files=self.files)
        # msprobe's construct.json (node -> enclosing module node; levels L0 and mix) and, with
        # ``stack``, its stack.json (the call stack of each forward entry, grouped by stack).
        self.stack = stack
        self._construct: Dict[str, Optional[str]] = {}
        self._stacks: Dict[str, List[str]] = {}
        self._local = threading.local()
        self._lock = threading.RLock()
        self._api_counts: Dict[str, int] = {}
        self._sent_names: set = set()
        # The last tensors taken (the same tensor object, not written in place since: its version):
        # an op's input is usually the output the op before it just recorded, and a module's
        # output the output of its last API call (level mix). Taken once, sent under each name.
        self._recent: "collections.OrderedDict[tuple, Any]" = collections.OrderedDict()
        self.repeated = 0
        self._module_counts: Dict[str, int] = {}
        self._restore: List[Tuple[Any, str, Any]] = []
        self._handles: List[Any] = []
        self.upload = None
        self.summary: Optional[Summary] = None
        self.run_id = self.job_id = ""

    # -- results --------------------------------------------------------------------------

    @property
    def dropped(self) -> int:
        return self._queue.dropped

    @property
    def first_culprit(self) -> Optional[str]:
        if self.summary is not None:
            return self.summary.first_culprit
        return self._culprits.first

    def files(self) -> Dict[str, bytes]:
        """The files the run carries (msprobe's construct.json and, with ``stack``, stack.json),
        as a dump of the same run would hold them."""
        with self._lock:
            out = {}
            if self.level in ("L0", "mix"):
                out["construct.json"] = json.dumps(self._construct, indent=1).encode()
            if self.stack:
                grouped = {str(i): [names, text] for i, (text, names) in enumerate(self._stacks.items())}
                out["stack.json"] = json.dumps(grouped, indent=1).encode()
            return out

    def _parent(self) -> Optional[str]:
        modules = getattr(self._local, "modules", None)
        return modules[-1] if modules else None

    def _place(self, node: str, parent: Optional[str]) -> None:
        with self._lock:
            self._construct[node] = parent

    def _record_stack(self, node: str) -> None:
        """The caller's stack as msprobe's analyze_api_call_stack writes it (innermost call first),
        without Parity's and torch's hook frames."""
        if not self.stack:
            return
        lines = []
        for f in reversed(traceback.extract_stack()[:-2]):
            if f.filename.startswith(_OWN_DIR) or not f.line:
                continue
            lines.append("File %s, line %d, in %s, \n %s \n" % (f.filename, f.lineno, f.name, f.line.strip()))
        with self._lock:
            self._stacks.setdefault("".join(lines), []).append(node)

    def _on_verdict(self, r: Result) -> None:
        self._culprits.add(r)
        if self._user_on_verdict is not None:
            self._user_on_verdict(r)

    # -- install and remove ---------------------------------------------------------------

    def __enter__(self) -> "Capture":
        self.upload = self.client.upload(iter(self._queue), mode=self.mode, on_verdict=self._on_verdict,
                                         **self._upload_args)
        try:
            self._queue.sender_done = self.upload.done
            if self.level in ("L1", "mix"):
                self._wrap_apis()
            if self.level in ("L0", "mix"):
                self._hook_modules()
        except BaseException:
            self._unhook()
            self._queue.close()
            raise
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._unhook()
        self._queue.close()
        self.upload.wait()
        self.run_id, self.job_id = self.upload.run_id, self.upload.job_id
        self.summary = self.upload.summary

    def _unhook(self) -> None:
        for owner, attr, original in reversed(self._restore):
            setattr(owner, attr, original)
        self._restore.clear()
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def _wrap_apis(self) -> None:
        import torch.nn.functional as F  # noqa: N812
        for owner, prefix, names in ((F, "Functional", FUNCTIONAL_APIS), (torch.Tensor, "Tensor", TENSOR_APIS),
                                     (torch, "Torch", TORCH_APIS), (torch.linalg, "Torch.linalg", _apis.TORCH_LINALG)):
            for n in names:
                original = getattr(owner, n, None)
                if original is None or not callable(original):
                    continue
                setattr(owner, n, self._api_wrapper(prefix + "." + n + ".", original))
                self._restore.append((owner, n, original))

    def _hook_modules(self) -> None:
        for name, module in self.model.named_modules():
            if module is self.model:
                continue
            prefix = "Module.%s.%s." % (name, type(module).__name__)
            if not self._in_scope(prefix):
                continue
            self._handles.append(module.register_forward_pre_hook(self._module_pre_hook(prefix)))
            self._handles.append(module.register_forward_hook(self._module_hook(prefix)))
            if self.backward:
                self._handles.append(module.register_full_backward_hook(self._module_backward_hook(prefix)))
                for pname, p in module.named_parameters(recurse=False):
                    if p.requires_grad:
                        self._handles.append(p.register_hook(self._grad_hook(prefix + "parameters_grad." + pname)))

    def _in_scope(self, name: str) -> bool:
        return not self.scope or any(fnmatch.fnmatchcase(name, s) or name.startswith(s) for s in self.scope)

    # -- the hooks ------------------------------------------------------------------------

    @staticmethod
    @contextlib.contextmanager
    def _inside():
        """While Parity records (its own tensor calls are not APIs of the model)."""
        before = getattr(_PARITY_THREAD, "on", False)
        _PARITY_THREAD.on = True
        try:
            yield
        finally:
            _PARITY_THREAD.on = before

    def _api_wrapper(self, prefix: str, original):
        cap = self

        def wrapper(*args, **kwargs):
            local = cap._local
            if getattr(_PARITY_THREAD, "on", False) or getattr(local, "depth", 0) > 0:
                return original(*args, **kwargs)
            local.depth = 1
            try:
                out = original(*args, **kwargs)
            finally:
                local.depth = 0
            with cap._lock:
                count = cap._api_counts.get(prefix, 0)
                cap._api_counts[prefix] = count + 1
            api = "%s%d.forward" % (prefix, count)
            if cap._in_scope(api):
                if cap.level == "mix":
                    cap._place(api, cap._parent())
                cap._record_stack(api)
                cap._record_forward(api, args, kwargs, out)
                if cap.backward:
                    cap._hook_api_backward("%s%d.backward" % (prefix, count), out)
            return out

        wrapper.__name__ = getattr(original, "__name__", "wrapper")
        wrapper.__doc__ = getattr(original, "__doc__", None)
        return wrapper

    def _module_pre_hook(self, prefix: str):
        def hook(module, args):
            with self._lock:
                count = self._module_counts.get(prefix, -1) + 1
                self._module_counts[prefix] = count
            node = "%sforward.%d" % (prefix, count)
            self._place(node, self._parent())
            self._record_stack(node)
            if not hasattr(self._local, "modules"):
                self._local.modules = []
            self._local.modules.append(node)
        return hook

    def _module_hook(self, prefix: str):
        def hook(module, args, out):
            modules = getattr(self._local, "modules", None)
            if modules:
                modules.pop()
            api = "%sforward.%d" % (prefix, self._module_counts.get(prefix, 0))
            # Inputs and outputs at the forward's end, with the module's own parameters, as msprobe's
            # module forward hook records them.
            self._record_forward(api, args, {}, out, dict(module.named_parameters(recurse=False)))
        return hook

    def _mirror(self, backward: str) -> None:
        """A backward node's parent: its forward node's, in the backward phase."""
        with self._lock:
            forward = _forward_name(backward)
            if forward not in self._construct:
                return
            parent = self._construct[forward]
            self._construct[backward] = None if parent is None else _backward_name(parent)

    def _module_backward_hook(self, prefix: str):
        def hook(module, grad_input, grad_output):
            api = "%sbackward.%d" % (prefix, self._module_counts.get(prefix, 0))
            self._mirror(api)
            with self._inside():
                self._emit(api + ".input", grad_output)
                self._emit(api + ".output", grad_input)
        return hook

    def _grad_hook(self, name: str):
        def hook(grad):
            with self._inside():
                self._put(name, grad)
        return hook

    def _hook_api_backward(self, api: str, out) -> None:
        first = out
        while isinstance(first, (list, tuple)) and first:
            first = first[0]
        if not isinstance(first, torch.Tensor) or not first.requires_grad or first.grad_fn is None \
                or not torch.is_grad_enabled():
            return

        def hook(grad_inputs, grad_outputs):
            self._mirror(api)
            with self._inside():
                self._emit(api + ".input", grad_outputs)
                self._emit(api + ".output", grad_inputs)

        first.grad_fn.register_hook(hook)

    def _record_forward(self, api: str, args, kwargs, out, parameters=None) -> None:
        if self.stop_on_culprit and self._culprits.first is not None:
            raise CulpritFound(self._culprits.first)
        with self._inside():
            self._emit(api + ".input", list(args))
            for k, v in kwargs.items():
                self._flatten(api + ".input." + k, v)
            for k, v in (parameters or {}).items():
                self._flatten(api + ".parameters." + k, v)
            self._emit(api + ".output", out if isinstance(out, (list, tuple, dict)) else [out])

    def _emit(self, section: str, values) -> None:
        if isinstance(values, dict):
            for k, v in values.items():
                self._flatten(section + "." + str(k), v)
        else:
            for i, v in enumerate(values):
                self._flatten("%s.%d" % (section, i), v)

    def _flatten(self, name: str, v) -> None:
        if isinstance(v, torch.Tensor):
            self._put(name, v)
        elif isinstance(v, (list, tuple)) and not isinstance(v, torch.Size):
            for i, x in enumerate(v):
                self._flatten("%s.%d" % (name, i), x)
        elif isinstance(v, dict):
            for k, x in v.items():
                self._flatten("%s.%s" % (name, k), x)
        elif (v is None or isinstance(v, (bool, int, float, str))) and self._first_time(name):
            self._queue.put(name, v, 0)

    def _first_time(self, name: str) -> bool:
        """A name is sent once per capture (one capture is one run, msprobe's one step): a
        parameter's gradient accumulated by a second backward pass is counted in `repeated`."""
        with self._lock:
            if name in self._sent_names:
                self.repeated += 1
                return False
            self._sent_names.add(name)
            return True

    def _put(self, name: str, t: "torch.Tensor") -> None:
        if not self._first_time(name):
            return
        with self._lock:
            seen = self._recent.get(id(t))
        taken = seen[2] if seen is not None and seen[0]() is t and seen[1] == t._version else None
        if taken is None:
            if self.mode == "full":
                stats = torch_stats(t)  # where the tensor lives, before the copy
                taken = WithStats(t.detach().to("cpu", copy=True), stats)
            else:
                # Statistics on the tensor where it lives; only a CRC needs its bytes on the host.
                taken = TensorStats(t, self.mode == "crc")
            with self._lock:
                self._recent[id(t)] = (weakref.ref(t), t._version, taken)
                if len(self._recent) > self.RECENT:
                    self._recent.popitem(last=False)
        nbytes = taken.tensor.element_size() * taken.tensor.numel() if self.mode == "full" else 0
        self._queue.put(name, taken, nbytes)


def capture(model: "torch.nn.Module", client, *, project: str, role: str = "target", against: Optional[str] = None,
            against_label: Optional[Dict[str, str]] = None, labels: Optional[Dict[str, str]] = None, name: str = "",
            level: str = "L1", mode: str = "full", scope: Sequence[str] = (), backward: bool = True,
            max_queue_bytes: int = 256 << 20, on_full: str = "block", stop_on_culprit: bool = False,
            on_verdict: Optional[Callable[[Result], None]] = None, stack: bool = False, **upload_args) -> Capture:
    """Captures ``model``'s operators while it runs inside the ``with`` block and streams them to
    parityd as one run (``role`` golden or target; a target with ``against``/``against_label`` is
    compared as it arrives, ``on_verdict`` called per verdict). ``level``: "L1" APIs, "L0"
    modules, "mix" both; ``scope``: API or module name prefixes or globs to keep (all when
    empty); ``mode``: "full", "stats" (statistics computed on the device, no copy) or "crc".
    At most ``max_queue_bytes`` of copies wait for the sender; ``on_full`` "block" makes the
    model wait, "drop" skips the item (counted in ``dropped``). ``stop_on_culprit`` raises
    :class:`CulpritFound` from the next recorded operator once a culprit is known. The run
    carries msprobe's construct.json (levels L0 and mix: each module's and API's enclosing module)
    and, with ``stack`` (costly: a stack walk per call), its stack.json."""
    return Capture(model, client, level=level, mode=mode, scope=scope, backward=backward,
                   max_queue_bytes=max_queue_bytes, on_full=on_full, stop_on_culprit=stop_on_culprit,
                   on_verdict=on_verdict, stack=stack,
                   upload_args=dict(project=project, role=role, against=against, against_label=against_label,
                                    labels=labels, name=name, **upload_args))


class Steps:
    """Captures chosen steps and ranks of a training loop, one run per step (msprobe's ``step``
    and ``rank`` selection):

        steps = parity.torch.Steps(model, client, steps=[0, 100], ranks=[0], project="llm",
                                   against_label={"build": "fp32"})
        for i, batch in enumerate(loader):
            with steps.step(i):
                train_step(batch)

    A captured step's run has the labels ``step`` and ``rank`` (and RunMetadata's step and rank);
    with ``against_label``, step N of rank R is compared with the golden run that also has
    ``step=N`` and ``rank=R``. Other steps and ranks run untouched. ``runs`` lists the captures.
    """

    def __init__(self, model, client, *, steps: Optional[Iterable[int]] = None,
                 ranks: Optional[Iterable[int]] = None, **capture_args):
        self.model, self.client = model, client
        self.steps = None if steps is None else set(steps)
        self.ranks = None if ranks is None else set(ranks)
        self.capture_args = capture_args
        self.runs: List[Capture] = []

    @staticmethod
    def rank() -> int:
        dist = getattr(torch, "distributed", None)
        if dist is not None and dist.is_available() and dist.is_initialized():
            return dist.get_rank()
        return 0

    def step(self, step: int):
        """The capture of step `step` on this rank, or a context that does nothing."""
        rank = self.rank()
        if (self.steps is not None and step not in self.steps) or (self.ranks is not None and rank not in self.ranks):
            return contextlib.nullcontext()
        args = dict(self.capture_args)
        where = {"step": str(step), "rank": str(rank)}
        args["labels"] = {**(args.get("labels") or {}), **where}
        if args.get("against_label"):
            args["against_label"] = {**args["against_label"], **where}
        c = capture(self.model, self.client, step=step, rank=rank, **args)
        self.runs.append(c)
        return c
