"""Task validation: the CUDA Agent paper's rubric, rule by rule, over a task set, into a JSONL report.

A task is worth training or evaluating on when it runs in eager mode and under ``torch.compile``,
is deterministic, has outputs that depend on its inputs (more than the judge's tolerance can
hide), runs for a sensible time, fits in memory, has a static output shape and is no near-copy of
a reference (KernelBench) task. ``validate_tasks`` checks each selected rule on every task, each
task in a worker process under a time limit, and appends one JSON line per task to a report as
soon as it is done, so an interrupted run resumes where it stopped. See ``docs/task_pipeline.md``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import multiprocessing
import os
import statistics
import tempfile
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Literal

from cuda_gym.errors import ConfigError, TaskError
from cuda_gym.tasks.similarity import DEFAULT_THRESHOLD, ReferenceIndex
from cuda_gym.tasks.task import Task
from cuda_gym.vocab import check_device, indexed_device

logger = logging.getLogger(__name__)

RULES = ("eager", "compile", "deterministic", "varies", "timing", "memory", "static_shape", "similarity")
"""Every rule, in the order they are reported.

* ``eager``: the model builds and ``forward`` runs on the device, returning at least one tensor.
* ``compile``: ``torch.compile(model)`` runs and matches eager at the tolerance.
* ``deterministic``: two runs with the same seed for weights and inputs, but a different global
  RNG state when ``forward`` is called, give the same outputs at the tolerance (a random op in
  ``forward``, dropout in training mode, ``randn_like`` noise: a kernel could not match them).
* ``varies``: the outputs for ``seeds`` input seeds are not all equal and not low-signal: no
  constant (zeros, the mean, the per-element mean across seeds) passes the judge's tolerance
  (``cuda_gym.judge.compare.constant_would_pass``, the judge's own ``low_variance_output`` check).
* ``timing``: the median eager time of ``timing_calls`` calls is within [``min_ms``, ``max_ms``].
* ``memory``: inputs + parameters + outputs (traced on the meta device, before anything runs)
  and, on a GPU, the measured peak of an eager call, within ``memory_budget_gib``.
* ``static_shape``: the output shapes do not change with the inputs, and the meta-device trace
  did not stop at a data-dependent op (``nonzero``, ``masked_select``, ``unique``...).
* ``similarity``: the normalized-AST similarity (``cuda_gym.tasks.similarity``) to the nearest
  reference task is below ``similarity_threshold``.
"""

Status = Literal["pass", "fail", "skip"]
REPORT_VERSION = 1
_RUN_RULES = ("eager", "deterministic", "varies", "timing", "static_shape", "compile")
"""Rules that need the task to run (the eager run comes first)."""
_DATA_DEPENDENT = ("nonzero", "masked_select", "unique", "data-dependent", "data dependent",
                   "DataDependent", "data-independent")


@dataclass
class ValidationConfig:
    """What ``validate_tasks`` checks and how. Every field is also a ``cuda-gym tasks validate`` option."""

    device: str = "cpu"
    """Where tasks run: ``cpu``, ``cuda`` or ``cuda:N`` (the CLI picks ``cuda:0`` when a GPU is visible)."""

    rules: str = ",".join(RULES)
    """Comma-separated rules to check (``eager,varies,timing``); see ``RULES``."""

    min_ms: float = 1.0
    """Fastest allowed median eager time in milliseconds (the paper: 1 ms)."""

    max_ms: float = 100.0
    """Slowest allowed median eager time in milliseconds (the paper: 100 ms)."""

    timing_calls: int = 5
    """Timed eager calls, after the untimed calls of the other rules (timing stops early once a call takes
    10x ``max_ms``); with ``timing`` alone, the eager run is the warm-up."""

    memory_budget_gib: float = 40.0
    """Largest allowed memory of a task in GiB: traced inputs + parameters + outputs, and the
    measured peak of an eager call on a GPU. Tasks traced above it are not run at all."""

    allow_dynamic_shape: bool = False
    """Accept tasks whose output shape depends on the input values (``static_shape`` is skipped)."""

    similarity_threshold: float = DEFAULT_THRESHOLD
    """A task whose normalized-AST similarity to a reference task reaches this is a near-copy."""

    reference: str = "kernelbench"
    """The reference set of the ``similarity`` rule: a task source (``kernelbench``, every level
    found) or a folder of task files; empty: no reference (the rule is skipped)."""

    reference_path: str | None = None
    """Data folder or file of the reference set (default: the usual data lookup)."""

    seeds: int = 3
    """Input seeds for ``varies`` and ``static_shape`` (at least 2)."""

    input_seed: int = 0
    """Base seed of the inputs (seed ``input_seed + i`` for the i-th input draw)."""

    init_seed: int = 42
    """Seed under which the model is built (the judge's ``init_seed``)."""

    atol: dict[str, float] = field(default_factory=dict)
    """Absolute tolerance per float dtype (as ``JudgeConfig.atol``); missing ones use the judge's default."""

    rtol: dict[str, float] = field(default_factory=dict)
    """Relative tolerance per float dtype (as ``JudgeConfig.rtol``)."""

    timeout_s: float = 300.0
    """Wall-time limit of one task (all its rules, ``torch.compile`` included); a task over it fails
    the rule it was in, and its worker process is replaced."""

    jobs: int = 1
    """Worker processes validating tasks in parallel (each imports torch once and runs many tasks)."""

    exclusive_device: bool | None = None
    """Hold a lock across workers while a task runs on the device (eager runs and timing; not
    ``torch.compile``), so timings are not shared with other workers. ``None``: on for CUDA."""

    def __post_init__(self) -> None:
        self.device = indexed_device(check_device(self.device, "validation device"))
        unknown = [r for r in self.rule_list if r not in RULES]
        if unknown or not self.rule_list:
            raise ConfigError(f"unknown rule(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(RULES)}")
        if self.seeds < 2:
            raise ConfigError("seeds must be at least 2: `varies` compares outputs of different inputs")
        if not 0 <= self.min_ms <= self.max_ms:
            raise ConfigError(f"need 0 <= min_ms <= max_ms, got {self.min_ms} and {self.max_ms}")
        if self.timing_calls < 1 or self.jobs < 1 or self.timeout_s <= 0:
            raise ConfigError("timing_calls and jobs must be >= 1 and timeout_s > 0")

    @property
    def rule_list(self) -> tuple[str, ...]:
        """The selected rules, in ``RULES`` order."""
        chosen = {r.strip() for r in self.rules.split(",") if r.strip()}
        return tuple(r for r in RULES if r in chosen) + tuple(sorted(chosen - set(RULES)))

    @property
    def lock_device(self) -> bool:
        """Whether workers take the device lock (``exclusive_device``, defaulting to CUDA)."""
        return self.device.startswith("cuda") if self.exclusive_device is None else self.exclusive_device

    def settings(self) -> dict[str, Any]:
        """The settings a rule's outcome depends on (a report's records are reused only under equal ones)."""
        skip = {"rules", "jobs", "timeout_s", "exclusive_device"}
        return {k: v for k, v in asdict(self).items() if k not in skip}

    def settings_key(self) -> str:
        """A short hash of ``settings()``."""
        return hashlib.sha256(json.dumps(self.settings(), sort_keys=True).encode()).hexdigest()[:12]

    def tolerances(self) -> dict[str, tuple[float, float]]:
        """Per-dtype ``(atol, rtol)``, as the judge computes them."""
        from cuda_gym.judge.config import JudgeConfig

        return JudgeConfig(device=self.device, atol=self.atol, rtol=self.rtol).tolerances()


# ------------------------------------------------------------------------------------------ records


@dataclass
class RuleResult:
    """The outcome of one rule on one task."""

    status: Status
    """``pass``, ``fail``, or ``skip`` (not applicable, or not run because an earlier step failed)."""
    detail: str = ""
    """Why, in one sentence (empty for a plain pass)."""


@dataclass
class TaskRecord:
    """One line of a validation report: every rule checked on one task, plus the measured facts."""

    task_id: str
    code_hash: str
    settings: str
    rules: dict[str, RuleResult] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    """Measurements: ``eager_ms``, ``static_bytes``, ``peak_bytes``, ``nearest``, ``similarity``,
    ``low_signal``, ``output_shapes``, ``seconds``."""
    version: int = REPORT_VERSION

    @property
    def passed(self) -> bool:
        """No rule failed (skipped rules do not count against a task)."""
        return all(r.status != "fail" for r in self.rules.values())

    def failed(self) -> list[str]:
        """The rules that failed."""
        return [name for name, r in self.rules.items() if r.status == "fail"]

    def to_json(self) -> str:
        """One JSON line (``passed`` and ``failed`` included for readers that do not use this class)."""
        data = asdict(self)
        data["passed"] = self.passed
        data["failed"] = self.failed()
        return json.dumps(data, default=str)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskRecord:
        """Rebuild from a report line; ``TaskError`` on a line that is not a record."""
        try:
            rules = {k: RuleResult(v["status"], v.get("detail", "")) for k, v in data["rules"].items()}
            return cls(str(data["task_id"]), str(data["code_hash"]), str(data.get("settings", "")),
                       rules, dict(data.get("facts") or {}), int(data.get("version", REPORT_VERSION)))
        except (KeyError, TypeError, AttributeError) as exc:
            raise TaskError(f"not a validation record ({exc!r}): {str(data)[:200]}") from None


def read_report(path: str | os.PathLike[str]) -> list[TaskRecord]:
    """Every record of a JSONL report, in file order (a torn last line, from a killed run, is skipped)."""
    path = Path(path).expanduser()
    if not path.exists():
        raise TaskError(f"no validation report at {path}; make one with `cuda-gym tasks validate SOURCE --report {path}`")
    records = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                records.append(TaskRecord.from_dict(json.loads(line)))
            except (json.JSONDecodeError, TaskError) as exc:
                logger.warning("%s:%d: skipping an unreadable line (%s)", path, lineno, exc)
    return records


def merged_records(records: Iterable[TaskRecord]) -> dict[tuple[str, str], TaskRecord]:
    """One record per (task id, code hash): the rules of later records (later runs) override earlier ones."""
    merged: dict[tuple[str, str], TaskRecord] = {}
    for rec in records:
        key = (rec.task_id, rec.code_hash)
        if key in merged:
            old = merged[key]
            merged[key] = TaskRecord(rec.task_id, rec.code_hash, rec.settings, {**old.rules, **rec.rules},
                                     {**old.facts, **rec.facts})
        else:
            merged[key] = rec
    return merged


def passing(report: str | os.PathLike[str]) -> set[tuple[str, str]]:
    """(task id, code hash) of every task of a report that failed no rule."""
    return {key for key, rec in merged_records(read_report(report)).items() if rec.passed}


def filter_tasks(tasks: Sequence[Task], report: str | os.PathLike[str]) -> list[Task]:
    """The tasks of ``tasks`` that a validation report passed, with the code it validated.

    A task missing from the report, or whose code changed since, is left out.
    """
    keep = passing(report)
    return [t for t in tasks if (t.id, t.code_hash) in keep]


# ---------------------------------------------------------------------------------------- the checks


def _to_cpu(obj: Any) -> Any:
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, tuple) and type(obj) is tuple:
        return tuple(_to_cpu(v) for v in obj)
    if isinstance(obj, list):
        return [_to_cpu(v) for v in obj]
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    return obj


def _plain(out: Any) -> Any:
    """HF ``ModelOutput`` and namedtuples as plain tuples, so outputs compare structurally."""
    if hasattr(out, "to_tuple"):
        return out.to_tuple()
    if isinstance(out, tuple) and type(out) is not tuple:
        return tuple(out)
    return out


def _shapes(out: Any) -> list[list[int] | str]:
    import torch

    from cuda_gym.judge.harness import iter_leaves

    return [list(v.shape) if isinstance(v, torch.Tensor) else type(v).__name__ for _, v in iter_leaves(out)]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}"


@dataclass
class _Run:
    """Everything one worker keeps while checking one task."""

    task: Task
    config: ValidationConfig
    emit: Callable[[str, RuleResult], None]
    waiting: Callable[[bool], None] = lambda waiting: None
    """Told ``True`` before waiting for the device lock and ``False`` once it is held (the parent
    does not count the wait against the task's deadline)."""
    facts: dict[str, Any] = field(default_factory=dict)


class _Checker:
    """Checks the selected rules of one task in the worker process; reports each rule as it is decided."""

    def __init__(self, run: _Run, index: ReferenceIndex | None, device_lock: Any) -> None:
        self.run = run
        self.config = run.config
        self.rules = run.config.rule_list
        self.index = index
        self.lock = device_lock if run.config.lock_device else None
        self.tolerances = run.config.tolerances()

    def emit(self, rule: str, status: Status, detail: str = "") -> None:
        if rule in self.rules:
            self.run.emit(rule, RuleResult(status, detail))

    def skip_all(self, rules: Iterable[str], why: str) -> None:
        for rule in rules:
            self.emit(rule, "skip", why)

    def check(self) -> None:
        task, cfg = self.run.task, self.config
        if "similarity" in self.rules:
            self.similarity()
        meta_error = ""
        if "memory" in self.rules or "static_shape" in self.rules:
            from cuda_gym.tasks.facts import compute_facts

            facts = compute_facts(task, timeout_s=min(60.0, cfg.timeout_s / 4))
            self.run.facts["static_bytes"] = facts.total_bytes
            meta_error = facts.error or ""
            budget = cfg.memory_budget_gib * 2**30
            if facts.total_bytes is not None and facts.total_bytes > budget:
                self.emit("memory", "fail", f"inputs + parameters + outputs take {facts.total_bytes / 2**30:.1f} GiB, "
                          f"over the {cfg.memory_budget_gib:g} GiB budget")
                self.skip_all(_RUN_RULES, "not run: the task is over the memory budget")
                return
        if not any(r in self.rules for r in (*_RUN_RULES, "memory")):
            return
        self.runtime(meta_error)

    def similarity(self) -> None:
        if self.index is None or len(self.index) == 0:
            self.emit("similarity", "skip", "no reference set")
            return
        ref_id, score = self.index.nearest(self.run.task.code, exclude=self.run.task.id)
        self.run.facts.update(nearest=ref_id, similarity=round(score, 4))
        if score >= self.config.similarity_threshold:
            self.emit("similarity", "fail", f"{score:.3f} similar to {ref_id} (threshold "
                      f"{self.config.similarity_threshold:g}): a near-copy of a reference task")
        else:
            self.emit("similarity", "pass", f"nearest {ref_id} at {score:.3f}")

    @contextlib.contextmanager
    def _device_section(self) -> Iterator[None]:
        if self.lock is None:
            yield
            return
        self.run.waiting(True)
        with self.lock:
            self.run.waiting(False)
            yield

    def runtime(self, meta_error: str) -> None:
        import torch

        from cuda_gym.judge import harness

        task, cfg, dev = self.run.task, self.config, self.config.device
        cuda = dev.startswith("cuda")
        try:
            loaded = task.load()
        except TaskError as exc:
            self.emit("eager", "fail", str(exc))
            self.skip_all((*_RUN_RULES[1:], "memory"), "not run: the task does not import")
            return

        def build() -> Any:
            init = harness.make_init_inputs(loaded.get_init_inputs, cfg.init_seed, dev)
            return harness.build_model(loaded.Model, init, cfg.init_seed, dev)

        def call(model: Any, input_seed: int, rng_seed: int) -> Any:
            inputs = harness.make_inputs(loaded.get_inputs, input_seed, dev)
            harness.seed_everything(rng_seed)  # a different RNG state under forward: see `deterministic`
            with torch.no_grad():
                out = _plain(model(*inputs))
            harness.synchronize(dev)
            return out, inputs

        def keep(out: Any) -> Any:
            return _to_cpu(harness.sample_large(out, seed=1234))

        seeds = [cfg.input_seed + i for i in range(cfg.seeds)]
        with self._device_section():
            if cuda:
                torch.cuda.init()  # the allocator's statistics exist once CUDA is initialized ("Invalid device argument")
                torch.cuda.reset_peak_memory_stats(dev)
            try:
                model = build()
                out, inputs = call(model, seeds[0], 1)
            except Exception as exc:  # noqa: BLE001 - a task's code may raise anything
                self.emit("eager", "fail", f"forward raised {_first_line(exc)}")
                self.skip_all((*_RUN_RULES[1:], "memory"), "not run: the task fails in eager mode")
                return
            if not any(isinstance(v, torch.Tensor) for _, v in harness.iter_leaves(out)):
                self.emit("eager", "fail", f"forward returns no tensor ({type(out).__name__}); "
                          "a kernel has nothing to compute")
                self.skip_all(_RUN_RULES[1:], "not run: no tensor output")
                return
            self.emit("eager", "pass")
            first, first_shapes = keep(out), _shapes(out)
            self.run.facts["output_shapes"] = first_shapes
            del out
            self.deterministic(first, lambda: keep(call(build(), seeds[0], 2)[0]))
            outs, shapes = [first], [first_shapes]
            if "varies" in self.rules or "static_shape" in self.rules:
                for s in seeds[1:]:
                    o = call(model, s, 1)[0]
                    outs.append(keep(o))
                    shapes.append(_shapes(o))
                    del o
            self.varies(outs, shapes)
            self.static_shape(shapes, meta_error)
            if "timing" in self.rules:
                self.timing(model, inputs)
            if cuda:
                self.run.facts["peak_bytes"] = int(torch.cuda.max_memory_allocated(dev))
            del inputs
        self.memory_after_run()
        if "compile" in self.rules:
            self.compile(build, seeds[0], first, call)
        del model
        if cuda:
            torch.cuda.empty_cache()

    def deterministic(self, first: Any, again: Callable[[], Any]) -> None:
        from cuda_gym.judge.compare import compare_outputs

        if "deterministic" not in self.rules:
            return
        try:
            second = again()
        except Exception as exc:  # noqa: BLE001
            self.emit("deterministic", "fail", f"the second run raised {_first_line(exc)}")
            return
        cmp = compare_outputs(first, second, self.tolerances)
        if cmp.passed:
            self.emit("deterministic", "pass")
        else:
            self.emit("deterministic", "fail", "two runs with the same seed for weights and inputs differ "
                      f"(a random op or training-mode dropout in forward?): {cmp.message}")

    def varies(self, outs: list[Any], shapes: list[list[Any]]) -> None:
        import torch

        from cuda_gym.judge.compare import constant_would_pass
        from cuda_gym.judge.harness import iter_leaves

        if "varies" not in self.rules:
            return
        if any(s != shapes[0] for s in shapes):
            self.emit("varies", "pass", "the output shape itself changes with the inputs")
            return

        def same(a: Any, b: Any) -> bool:
            la, lb = list(iter_leaves(a)), list(iter_leaves(b))
            return len(la) == len(lb) and all(
                (torch.equal(x, y) if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) else x == y)
                for (_, x), (_, y) in zip(la, lb))

        if all(same(outs[0], o) for o in outs[1:]):
            self.run.facts["low_signal"] = "the output is the same for every input"
            self.emit("varies", "fail", f"the output is identical for {len(outs)} different inputs (a constant)")
            return
        reason = constant_would_pass(outs, self.tolerances)
        if reason:
            self.run.facts["low_signal"] = reason
            self.emit("varies", "fail", f"low-signal output at the judge's tolerance: {reason}")
        else:
            self.emit("varies", "pass")

    def static_shape(self, shapes: list[list[Any]], meta_error: str) -> None:
        if "static_shape" not in self.rules:
            return
        if self.config.allow_dynamic_shape:
            self.emit("static_shape", "skip", "dynamic output shapes allowed")
        elif any(s != shapes[0] for s in shapes):
            self.emit("static_shape", "fail", f"the output shape depends on the input values: {shapes[0]} vs "
                      f"{next(s for s in shapes if s != shapes[0])}")
        elif meta_error.startswith("forward") and any(k in meta_error for k in _DATA_DEPENDENT):
            self.emit("static_shape", "fail", f"forward uses a data-dependent op: {meta_error[:200]}")
        else:
            self.emit("static_shape", "pass")

    def timing(self, model: Any, inputs: list[Any]) -> None:
        import torch

        from cuda_gym.judge import harness

        cfg, dev = self.config, self.config.device
        times: list[float] = []
        try:
            with torch.no_grad():  # no warm-up call: the eager, deterministic and varies calls came first
                for _ in range(cfg.timing_calls):
                    start = time.perf_counter()
                    model(*inputs)
                    harness.synchronize(dev)
                    times.append((time.perf_counter() - start) * 1000.0)
                    if times[-1] > 10 * cfg.max_ms:
                        break
        except Exception as exc:  # noqa: BLE001
            self.emit("timing", "fail", f"a timed call raised {_first_line(exc)}")
            return
        median = statistics.median(times)
        self.run.facts["eager_ms"] = round(median, 4)
        if median < cfg.min_ms:
            self.emit("timing", "fail", f"eager median {median:.3g} ms is under {cfg.min_ms:g} ms: too fast to time")
        elif median > cfg.max_ms:
            self.emit("timing", "fail", f"eager median {median:.4g} ms is over {cfg.max_ms:g} ms: too slow")
        else:
            self.emit("timing", "pass", f"eager median {median:.4g} ms")

    def memory_after_run(self) -> None:
        cfg = self.config
        budget = cfg.memory_budget_gib * 2**30
        peak, static = self.run.facts.get("peak_bytes"), self.run.facts.get("static_bytes")
        if peak is not None and peak > budget:
            self.emit("memory", "fail", f"an eager call peaks at {peak / 2**30:.1f} GiB, over the "
                      f"{cfg.memory_budget_gib:g} GiB budget")
        elif peak is not None or static is not None:
            self.emit("memory", "pass", f"{max(peak or 0, static or 0) / 2**30:.2f} GiB")
        else:
            self.emit("memory", "skip", "size unknown: the meta-device trace failed and the CPU has no peak counter")

    def compile(self, build: Callable[[], Any], seed: int, first: Any, call: Callable[..., Any]) -> None:
        import torch

        from cuda_gym.judge import harness
        from cuda_gym.judge.compare import compare_outputs

        torch._dynamo.reset()
        try:
            compiled = torch.compile(build())
            out = _to_cpu(harness.sample_large(call(compiled, seed, 1)[0], seed=1234))
        except Exception as exc:  # noqa: BLE001 - dynamo/inductor raise many kinds
            self.emit("compile", "fail", f"torch.compile raised {_first_line(exc)}")
            return
        finally:
            torch._dynamo.reset()
        cmp = compare_outputs(first, out, self.tolerances, spread_tol=0.0)
        if cmp.passed:
            self.emit("compile", "pass")
        else:
            self.emit("compile", "fail", f"torch.compile's output differs from eager: {cmp.message}")


# ------------------------------------------------------------------------------------- the workers


class DeviceLock:
    """An exclusive lock across processes on a lock file (``flock``): released by the kernel when
    its holder dies, so a worker killed at its deadline never leaves the others waiting."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None

    def __enter__(self) -> DeviceLock:
        import fcntl

        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the lock
            self._fd = None


def _worker_main(conn: Connection, config: ValidationConfig, reference: list[tuple[str, str]],
                 lock_path: str, threads: int, parent: int) -> None:
    """A worker process: answers ``("task", Task)`` messages with ``("rule", ...)`` lines and ``("done", facts)``.
    It dies with its parent: a task's deadline is kept there, so an orphan in a hung task would run on."""
    import warnings

    from cuda_gym.sandbox import die_with_parent

    if not die_with_parent(parent):
        return

    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    if set(config.rule_list) - {"similarity"}:
        import torch

        torch.set_num_threads(max(1, threads))
        if {"memory", "static_shape", "compile"} & set(config.rule_list):
            import torch._dynamo  # noqa: F401 - meta tracing and compile import it on first use: seconds, before any deadline
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    index = ReferenceIndex(reference) if reference and "similarity" in config.rule_list else None
    conn.send(("ready",))
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg[0] == "stop":
            return
        task: Task = msg[1]
        start = time.perf_counter()
        run = _Run(task, config, lambda rule, res: conn.send(("rule", rule, res.status, res.detail)),
                   lambda waiting: conn.send(("lock", waiting)))
        try:
            with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                _Checker(run, index, DeviceLock(lock_path)).check()
        except Exception as exc:  # noqa: BLE001 - a bug here must not kill the run
            conn.send(("error", f"{_first_line(exc)}\n{traceback.format_exc()[-1500:]}"))
        run.facts["seconds"] = round(time.perf_counter() - start, 3)
        if config.device.startswith("cuda"):
            import gc

            import torch

            gc.collect()  # what a failed task left (a traceback's frames) goes before the next one
            torch.cuda.empty_cache()
        conn.send(("done", run.facts))


@dataclass
class _Slot:
    """A worker process as the parent sees it."""

    process: Any
    conn: Connection
    ready: bool = False
    record: TaskRecord | None = None
    deadline: float = math.inf
    started: float = 0.0
    waited: float = 0.0


class _Pool:
    """Worker processes with a deadline per task: a task past its time, or one that kills its
    worker, ends as a failed rule and the worker is replaced."""

    def __init__(self, config: ValidationConfig, reference: list[tuple[str, str]]) -> None:
        self.config = config
        self.reference = reference
        self.ctx = multiprocessing.get_context("spawn")
        self.tmp = tempfile.TemporaryDirectory(prefix="cuda_gym_validate_")
        self.lock_path = os.path.join(self.tmp.name, "device.lock")
        self.threads = max(1, (os.cpu_count() or 1) // config.jobs)
        self.failed_starts = 0
        self.todo: deque[tuple[Task, str]] = deque()
        self.slots = [self._start() for _ in range(config.jobs)]

    def _start(self) -> _Slot:
        parent, child = self.ctx.Pipe()
        process = self.ctx.Process(target=_worker_main, daemon=True,
                                   args=(child, self.config, self.reference, self.lock_path, self.threads,
                                         os.getpid()))
        process.start()
        child.close()
        return _Slot(process, parent)

    def _replace(self, slot: _Slot) -> None:
        with contextlib.suppress(Exception):
            slot.process.kill()
            slot.process.join(5)
        slot.conn.close()
        if self.todo:
            self.slots[self.slots.index(slot)] = self._start()
        else:
            self.slots.remove(slot)  # nothing left to give a fresh worker: do not pay for its start

    def close(self) -> None:
        for slot in self.slots:
            with contextlib.suppress(Exception):
                slot.conn.send(("stop",))
        deadline = time.monotonic() + 5.0  # idle workers stop at once; busy ones are killed after 5 s
        for slot in self.slots:
            slot.process.join(max(0.0, deadline - time.monotonic()))
            if slot.process.is_alive():
                slot.process.kill()
        self.tmp.cleanup()

    def run(self, tasks: Iterable[tuple[Task, str]], on_done: Callable[[TaskRecord], None]) -> None:
        """Validate ``(task, settings key)`` pairs; ``on_done`` gets each finished record."""
        todo = self.todo = deque(tasks)
        rules = self.config.rule_list
        while todo or any(s.record is not None for s in self.slots):
            if not self.slots:
                raise TaskError("every validation worker died and none could be restarted")
            for slot in self.slots:
                if slot.ready and slot.record is None and todo:
                    task, key = todo.popleft()
                    slot.record = TaskRecord(task.id, task.code_hash, key)
                    slot.started = time.monotonic()
                    slot.deadline = slot.started + self.config.timeout_s
                    slot.conn.send(("task", task))
            now = time.monotonic()
            timeout = max(0.0, min([s.deadline for s in self.slots if s.record is not None] + [now + 5.0]) - now)
            ready = wait([s.conn for s in self.slots] + [s.process.sentinel for s in self.slots], timeout=timeout)
            for slot in list(self.slots):
                if slot.conn not in ready and slot.process.sentinel not in ready:
                    continue
                try:
                    while slot.conn.poll():
                        self._handle(slot, slot.conn.recv(), rules, on_done)
                except (EOFError, OSError):
                    pass
                if slot.process.sentinel in ready or slot.conn.closed:
                    self._died(slot, rules, on_done)
            now = time.monotonic()
            for slot in list(self.slots):
                if slot.record is not None and now > slot.deadline:
                    self._finish(slot, rules, f"timed out after {self.config.timeout_s:g} s", on_done)
                    self._replace(slot)

    def _died(self, slot: _Slot, rules: Sequence[str], on_done: Callable[[TaskRecord], None]) -> None:
        slot.process.join(1)
        code = slot.process.exitcode
        if not slot.ready:
            self.failed_starts += 1
            if self.failed_starts > 2 * len(self.slots):
                raise TaskError(f"validation workers die as they start (exit code {code}); when calling "
                                "validate_tasks from a script, guard it with `if __name__ == \"__main__\":` "
                                "(workers are spawned processes)")
        self._finish(slot, rules, f"the worker died while checking it (exit code {code}): the task "
                     "crashed the process or ran out of memory", on_done)
        self._replace(slot)

    def _handle(self, slot: _Slot, msg: tuple[Any, ...], rules: Sequence[str],
                on_done: Callable[[TaskRecord], None]) -> None:
        kind = msg[0]
        if kind == "ready":
            slot.ready = True
        elif kind == "lock" and slot.record is not None:
            if msg[1]:
                slot.deadline, slot.waited = math.inf, time.monotonic()
            else:  # the wait for the device lock is not the task's time
                slot.deadline = time.monotonic() + self.config.timeout_s - (slot.waited - slot.started)
        elif kind == "rule" and slot.record is not None:
            slot.record.rules[msg[1]] = RuleResult(msg[2], msg[3])
        elif kind == "error" and slot.record is not None:
            slot.record.facts["error"] = msg[1]
        elif kind == "done" and slot.record is not None:
            slot.record.facts.update(msg[1])
            error = slot.record.facts.get("error", "")
            self._finish(slot, rules, f"the validator failed: {error.splitlines()[0] if error else 'no result'}",
                         on_done)

    def _finish(self, slot: _Slot, rules: Sequence[str], why: str, on_done: Callable[[TaskRecord], None]) -> None:
        """Complete the slot's record (the first missing rule fails with ``why``, the rest are skipped)."""
        record = slot.record
        if record is None:
            return
        missing = [r for r in rules if r not in record.rules]
        for i, rule in enumerate(missing):
            record.rules[rule] = RuleResult("fail", why) if i == 0 else RuleResult("skip", f"not run: {why}")
        record.rules = {r: record.rules[r] for r in RULES if r in record.rules}
        record.facts.setdefault("seconds", round(time.monotonic() - slot.started, 3))
        slot.record, slot.deadline = None, math.inf
        on_done(record)


# ----------------------------------------------------------------------------------------- public


def reference_items(config: ValidationConfig) -> list[tuple[str, str]]:
    """(id, code) of the reference set of the ``similarity`` rule (empty when none or not selected)."""
    if "similarity" not in config.rule_list or not config.reference:
        return []
    from cuda_gym.errors import DataNotFoundError
    from cuda_gym.tasks.loaders import SOURCES, load_tasks

    ref = config.reference
    try:
        if ref in SOURCES and ref != "custom":
            tasks = load_tasks(ref, path=config.reference_path)
        else:
            tasks = load_tasks("custom", path=ref)
    except DataNotFoundError as exc:
        raise DataNotFoundError(f"the similarity rule's reference set: {exc}; or leave the rule out "
                                "(rules=...) or set reference='' (CLI: --reference '')") from None
    return [(t.id, t.code) for t in tasks]


def validate_tasks(
    tasks: Sequence[Task],
    config: ValidationConfig | None = None,
    *,
    report: str | os.PathLike[str] | None = None,
    progress: bool = False,
    reference: Sequence[tuple[str, str]] | None = None,
    on_record: Callable[[TaskRecord], None] | None = None,
) -> list[TaskRecord]:
    """Check the selected rules on every task; return one merged record per task, in task order.

    Args:
        tasks: the tasks (any ``Task``: builtin, KernelBench, Ops-6K, custom, synthesized).
        config: the rules and their settings (``ValidationConfig()`` if omitted).
        report: a JSONL file to append each record to as soon as its task is done. Records already
            there for the same task code and settings are reused: the run resumes, checking only the
            rules a task still lacks.
        progress: show a tqdm bar on stderr.
        reference: (id, code) of the reference set; default: ``config.reference`` loaded.
        on_record: called with each new record (after it is written).
    """
    config = config or ValidationConfig()
    key = config.settings_key()
    known: dict[tuple[str, str], TaskRecord] = {}
    report_path = Path(report).expanduser() if report is not None else None
    if report_path is not None and report_path.exists():
        known = {k: r for k, r in merged_records(read_report(report_path)).items() if r.settings == key}
    wanted = config.rule_list
    todo: list[tuple[Task, str]] = []
    missing_rules: set[str] = set()
    for task in tasks:
        have = known.get((task.id, task.code_hash))
        lacking = [r for r in wanted if have is None or r not in have.rules]
        if lacking:
            todo.append((task, key))
            missing_rules.update(lacking)
    new: dict[tuple[str, str], TaskRecord] = {}
    if todo:
        # Resuming runs only the rules some task still lacks (rules a task has are kept as they were).
        run_config = ValidationConfig(**{**asdict(config), "rules": ",".join(r for r in wanted if r in missing_rules)})
        refs = list(reference) if reference is not None else reference_items(run_config)
        jobs = min(config.jobs, len(todo))
        run_config.jobs = jobs
        with contextlib.ExitStack() as stack:
            fh = None
            if report_path is not None:
                report_path.parent.mkdir(parents=True, exist_ok=True)
                fh = stack.enter_context(report_path.open("a", encoding="utf-8"))
            bar = None
            if progress:
                from tqdm import tqdm

                bar = stack.enter_context(tqdm(total=len(todo), desc="validate", unit="task", disable=None))
            pool = _Pool(run_config, refs)
            stack.callback(pool.close)

            def done(record: TaskRecord) -> None:
                if fh is not None:
                    fh.write(record.to_json() + "\n")
                    fh.flush()
                new[(record.task_id, record.code_hash)] = record
                if bar is not None:
                    bar.update(1)
                    if not record.passed:
                        bar.set_postfix_str(f"{record.task_id[-30:]}: {','.join(record.failed())}")
                if on_record is not None:
                    on_record(record)

            pool.run(todo, done)
    results = []
    for task in tasks:
        k = (task.id, task.code_hash)
        parts = [r for r in (known.get(k), new.get(k)) if r is not None]
        merged = merged_records(parts)[k]
        merged.rules = {r: v for r, v in merged.rules.items() if r in wanted}
        results.append(merged)
    return results


# ---------------------------------------------------------------------------------------- summary


@dataclass
class Summary:
    """Counts per rule and the notable tasks of a set of records."""

    tasks: int
    passed: int
    rules: dict[str, dict[str, int]]
    too_slow: list[str]
    too_fast: list[str]
    over_memory: list[str]
    low_signal: list[str]
    near_copies: list[str]
    failures: dict[str, list[str]]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)

    def table(self, limit: int = 10) -> str:
        """The summary as text: one row per rule, then the notable tasks (``limit`` ids each)."""
        width = max([len(r) for r in self.rules] + [4])
        lines = [f"{'rule':<{width}}  {'pass':>6}  {'fail':>6}  {'skip':>6}"]
        for rule, counts in self.rules.items():
            lines.append(f"{rule:<{width}}  {counts['pass']:>6}  {counts['fail']:>6}  {counts['skip']:>6}")
        lines.append(f"{self.passed} of {self.tasks} tasks pass every rule checked")

        def ids(title: str, items: list[str]) -> None:
            if items:
                shown = ", ".join(items[:limit]) + (f", ... ({len(items) - limit} more)" if len(items) > limit else "")
                lines.append(f"{title} ({len(items)}): {shown}")

        ids("over the time window", self.too_slow)
        ids("under the time window", self.too_fast)
        ids("over the memory budget", self.over_memory)
        ids("low-signal outputs", self.low_signal)
        ids("near-copies of a reference task", self.near_copies)
        return "\n".join(lines)


def summarize(records: Iterable[TaskRecord]) -> Summary:
    """Summarize records (merged per task first, so a report of several runs counts each task once)."""
    merged = list(merged_records(records).values())
    names = [r for r in RULES if any(r in rec.rules for rec in merged)]
    rules = {r: {"pass": 0, "fail": 0, "skip": 0} for r in names}
    failures: dict[str, list[str]] = {r: [] for r in names}
    for rec in merged:
        for name, res in rec.rules.items():
            if name in rules:
                rules[name][res.status] += 1
                if res.status == "fail":
                    failures[name].append(rec.task_id)

    def failing(rule: str, words: str) -> list[str]:
        return [rec.task_id for rec in merged
                if rule in rec.rules and rec.rules[rule].status == "fail" and words in rec.rules[rule].detail]

    return Summary(
        tasks=len(merged),
        passed=sum(rec.passed for rec in merged),
        rules=rules,
        too_slow=failing("timing", "too slow") + failing("timing", "timed out"),
        too_fast=failing("timing", "too fast"),
        over_memory=failing("memory", "budget"),
        low_signal=[rec.task_id for rec in merged if rec.facts.get("low_signal")],
        near_copies=failing("similarity", "near-copy"),
        failures=failures,
    )


def iter_records(path: str | os.PathLike[str]) -> Iterator[TaskRecord]:
    """The records of a report (``read_report``) as an iterator."""
    yield from read_report(path)
