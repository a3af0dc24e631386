"""Task facts: input, parameter and output sizes traced on the meta device, cached on disk."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import logging
import multiprocessing
import os
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cuda_gym.paths import cache_dir, write_text_atomic
from cuda_gym.tasks.task import Task  # one way: facts are about tasks; Task knows nothing of facts

logger = logging.getLogger(__name__)

FACTS_VERSION = 1
"""Bumped when the way facts are computed changes; older cache entries are ignored."""


@dataclass(frozen=True)
class TaskFacts:
    """What a task needs in memory, found without allocating it.

    Every size is in bytes; a field is ``None`` when tracing on the meta device could not find it
    (data-dependent ops such as ``.item()``, ops without a meta kernel, missing packages).
    """

    input_bytes: int | None = None
    """Bytes of the tensors ``get_inputs()`` returns (nested lists/tuples/dicts included)."""
    param_bytes: int | None = None
    """Bytes of the model's parameters and buffers (shared tensors counted once)."""
    output_bytes: int | None = None
    """Bytes of the tensors ``forward`` returns."""
    input_shapes: list[list[int]] | None = None
    """Shape of each tensor input, in order (non-tensor inputs are skipped)."""
    input_dtypes: list[str] | None = None
    """Dtype of each tensor input (``"torch.float32"``), in order."""
    output_shapes: list[list[int]] | None = None
    """Shape of each tensor output, in order."""
    error: str | None = None
    """Why some field is ``None`` (the first failure), or ``None`` when tracing succeeded."""
    version: int = field(default=FACTS_VERSION)
    """The facts format version (``FACTS_VERSION``)."""

    @property
    def total_bytes(self) -> int | None:
        """Inputs + parameters + outputs, or ``None`` if any part is unknown."""
        parts = (self.input_bytes, self.param_bytes, self.output_bytes)
        if any(p is None for p in parts):
            return None
        return sum(p for p in parts if p is not None)

    @property
    def ok(self) -> bool:
        """True when every size is known."""
        return self.total_bytes is not None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (the cache format)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskFacts:
        """Rebuild from ``to_dict()`` output."""
        fields: dict[str, Any] = {k: data.get(k) for k in cls.__dataclass_fields__}
        return cls(**fields)


def _tensors(obj: Any, depth: int = 0) -> Iterator[Any]:
    """Every tensor inside ``obj`` (lists, tuples, dicts, HF ``ModelOutput`` objects)."""
    import torch

    if depth > 8:
        return
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _tensors(v, depth + 1)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _tensors(v, depth + 1)


def _nbytes(tensors: Iterable[Any]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _meta_mode() -> Any:
    """A torch function mode that keeps everything on the meta device, whatever the code asks for.

    Factory calls get ``device="meta"`` even when the task names ``"cuda"``; ``.cuda()`` and
    ``.to(device)`` keep tensors where they are, so tasks written for a GPU trace here too.
    """
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._device import _device_constructors

    constructors = _device_constructors()
    meta = torch.device("meta")

    def is_device(x: Any) -> bool:
        return isinstance(x, (str, torch.device)) or (isinstance(x, int) and not isinstance(x, bool))

    class _ForceMeta(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if func in constructors:
                kwargs["device"] = meta
            elif func is torch.Tensor.cuda:
                return args[0]
            elif func is torch.Tensor.to:
                kwargs.pop("device", None)
                rest = [a for a in args[1:] if not is_device(a)]
                rest = [a.dtype if isinstance(a, torch.Tensor) else a for a in rest]
                if not rest and not kwargs:
                    return args[0]
                args = (args[0], *rest)
            return func(*args, **kwargs)

    return _ForceMeta()


def _shape_only_rnn(module: Any) -> Any:
    """A forward for ``nn.RNN/LSTM/GRU`` that returns empty outputs of the right shapes.

    Their meta kernels unroll every time step in Python, which takes seconds per task; the
    shapes follow directly from the module's settings.
    """
    import torch

    def forward(input: Any, hx: Any = None) -> Any:
        if isinstance(input, torch.nn.utils.rnn.PackedSequence):
            raise NotImplementedError("packed sequences are not traced")
        batched = input.dim() == 3
        seq_first = not (batched and module.batch_first)
        seq = input.shape[0] if seq_first else input.shape[1]
        batch = (input.shape[1] if seq_first else input.shape[0]) if batched else None
        dirs = 2 if module.bidirectional else 1
        out_size = module.proj_size if getattr(module, "proj_size", 0) > 0 else module.hidden_size
        if batch is None:
            out_shape: tuple[int, ...] = (seq, dirs * out_size)
            h_shape: tuple[int, ...] = (dirs * module.num_layers, out_size)
            c_shape: tuple[int, ...] = (dirs * module.num_layers, module.hidden_size)
        else:
            out_shape = (seq, batch, dirs * out_size) if seq_first else (batch, seq, dirs * out_size)
            h_shape = (dirs * module.num_layers, batch, out_size)
            c_shape = (dirs * module.num_layers, batch, module.hidden_size)
        out, h = input.new_empty(out_shape), input.new_empty(h_shape)
        if isinstance(module, torch.nn.LSTM):
            return out, (h, input.new_empty(c_shape))
        return out, h

    return forward


class _Timeout(Exception):
    """Tracing took longer than its budget."""


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Raise ``_Timeout`` inside the block after ``seconds`` (main thread on POSIX only; else no limit)."""
    import signal
    import threading

    if seconds <= 0 or not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise _Timeout(f"tracing took more than {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def compute_facts(task: Task, *, timeout_s: float = 20.0) -> TaskFacts:
    """Trace ``task`` on the meta device; never raises for a broken task (``error`` says why).

    ``timeout_s`` bounds the whole trace (enforced in the main thread only).
    """
    import torch

    if "from_pretrained" in task.code:
        return TaskFacts(error="the model loads pretrained weights from the Hugging Face hub")
    found: dict[str, Any] = {}
    step = "import"
    sink = io.StringIO()
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(contextlib.redirect_stdout(sink))
            stack.enter_context(contextlib.redirect_stderr(sink))
            stack.enter_context(warnings.catch_warnings())
            warnings.simplefilter("ignore")
            stack.enter_context(torch.device("meta"))
            stack.enter_context(_meta_mode())
            stack.enter_context(torch.no_grad())
            stack.enter_context(_time_limit(timeout_s))
            loaded = task.load()
            step = "get_init_inputs"
            init = loaded.get_init_inputs()
            step = "Model(...)"
            model = loaded.Model(*init)
            if isinstance(model, torch.nn.Module):
                for sub in model.modules():
                    if isinstance(sub, torch.nn.RNNBase):
                        sub.forward = _shape_only_rnn(sub)
                seen: dict[int, Any] = {}
                for t in itertools.chain(model.parameters(), model.buffers()):
                    seen[id(t)] = t
                found["param_bytes"] = _nbytes(seen.values())
            else:
                found["param_bytes"] = 0
            step = "get_inputs"
            inputs = loaded.get_inputs()
            tensors = list(_tensors(inputs))
            found["input_bytes"] = _nbytes(tensors)
            found["input_shapes"] = [list(t.shape) for t in tensors]
            found["input_dtypes"] = [str(t.dtype) for t in tensors]
            step = "forward"
            out = model(*inputs)
            if hasattr(out, "to_tuple"):
                out = out.to_tuple()
            outs = list(_tensors(out))
            found["output_bytes"] = _nbytes(outs)
            found["output_shapes"] = [list(t.shape) for t in outs]
    except BaseException as exc:  # noqa: BLE001 - a task's code may raise anything, SystemExit included
        if isinstance(exc, KeyboardInterrupt):
            raise
        message = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        return TaskFacts(**found, error=f"{step}: {type(exc).__name__}: {message}")
    return TaskFacts(**found)


def _cache_path(code_hash: str) -> Path:
    return cache_dir() / "facts" / f"{code_hash}.json"


def cached_facts(task: Task) -> TaskFacts | None:
    """The cached facts of ``task``, or ``None`` when absent, unreadable or from an older version."""
    path = _cache_path(task.code_hash)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("version") != FACTS_VERSION:
        return None
    try:
        return TaskFacts.from_dict(data)
    except TypeError:
        return None


def store_facts(task: Task, facts: TaskFacts) -> None:
    """Write ``facts`` to the cache atomically; a read-only cache only logs a warning."""
    path = _cache_path(task.code_hash)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, json.dumps(facts.to_dict()))
    except OSError as exc:
        logger.warning("could not cache task facts at %s: %s", path, exc)


def task_facts(task: Task, *, use_cache: bool = True) -> TaskFacts:
    """Sizes of one task's inputs, parameters and outputs, traced on the meta device (no real memory).

    Fields are ``None`` where tracing fails (data-dependent ops, ``.item()``, missing packages);
    ``error`` says why. Results are cached in ``cache_dir()/facts/<code_hash>.json`` unless
    ``use_cache`` is False.
    """
    if use_cache:
        hit = cached_facts(task)
        if hit is not None:
            return hit
    facts = compute_facts(task)
    if use_cache:
        store_facts(task, facts)
    return facts


def _init_worker() -> None:
    import torch

    torch.set_num_threads(1)
    logging.disable(logging.WARNING)


def _worker(task: Task) -> tuple[str, dict[str, Any]]:
    return task.id, compute_facts(task).to_dict()


def facts_for(
    tasks: list[Task],
    *,
    jobs: int | None = None,
    use_cache: bool = True,
    progress: bool = False,
) -> dict[str, TaskFacts]:
    """Facts of many tasks (task id -> facts), computing the uncached ones in ``jobs`` processes.

    ``jobs`` defaults to the number of CPUs (1 for fewer than 64 uncached tasks); ``jobs=1``
    computes in this process. ``progress``
    shows a tqdm bar on stderr.
    """
    result: dict[str, TaskFacts] = {}
    todo: list[Task] = []
    for task in tasks:
        hit = cached_facts(task) if use_cache else None
        if hit is not None:
            result[task.id] = hit
        else:
            todo.append(task)
    if not todo:
        return result
    by_id = {t.id: t for t in todo}
    if jobs is None and len(todo) < 64:
        jobs = 1  # starting workers (a torch import each) costs more than a few traces
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(todo)))
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(todo), desc="task facts", unit="task", leave=False, disable=None)
    with contextlib.ExitStack() as stack:
        if bar is not None:
            stack.callback(bar.close)
        if jobs == 1:
            results: Iterable[tuple[str, dict[str, Any]]] = map(_worker, todo)
        else:
            # Fresh (spawned) workers: forking a process whose OpenMP pool is running can hang the
            # child, and a task's import cannot leave stray global state in this process.
            ctx = multiprocessing.get_context("spawn")
            pool = stack.enter_context(ctx.Pool(jobs, initializer=_init_worker))
            results = pool.imap_unordered(_worker, todo, chunksize=16)
        for task_id, data in results:
            facts = TaskFacts.from_dict(data)
            result[task_id] = facts
            if use_cache:
                store_facts(by_id[task_id], facts)
            if bar is not None:
                bar.update(1)
    return result
