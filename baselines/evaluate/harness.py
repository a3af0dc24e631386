"""The benchmark harness: an agent over a task set, N episodes at a time, each result kept at once."""

from __future__ import annotations

import json
import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym

import cuda_gym  # noqa: F401  (registers the env ids)
from cuda_gym.baselines.agents import Agent, ReplayAgent, run_episode, scripted_actions
from cuda_gym.baselines.agents.replay import CHECKS, DemoSolution
from cuda_gym.baselines.evaluate.records import ResultsFile, TaskRecord
from cuda_gym.baselines.evaluate.report import write_report
from cuda_gym.errors import ConfigError, CudaGymError
from cuda_gym.reward import DEFAULT_THRESHOLD

logger = logging.getLogger(__name__)

AgentFactory = Callable[[str], Agent]
"""Makes the agent of one task from its id (a fresh agent per episode, or a shared one)."""


@dataclass
class EvalConfig:
    """Settings of one benchmark run (``cuda-gym eval`` options of the same names)."""

    env_id: str = "CpuKernel-Builtin-v0"
    """The registered env id to run (multi-turn ids for tool-calling agents)."""
    tasks: Sequence[str] | None = None
    """Task ids to run, in order; ``None`` runs every task of the env's task set."""
    output: Path = Path("eval/results.jsonl")
    """The JSONL file of finished tasks: appended to at once, read back to skip finished tasks."""
    report_dir: Path | None = None
    """Where the report goes (``report.md``, ``report.json``, plots, ``kernelbench/``); ``None``: beside ``output``."""
    parallel: int = 1
    """Episodes at a time (threads; each has its own env and judge)."""
    seed: int = 0
    """``reset`` seed of every episode."""
    max_steps: int | None = None
    """A stop for the harness's loop (the env ends episodes itself after ``max_turns``)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """``gym.make`` settings (``KernelEnvConfig`` fields such as ``max_turns``, ``judge``)."""
    retry_errors: bool = False
    """On resume, run again the tasks whose episode raised (server down, infrastructure failure)."""
    progress: bool = True
    """Show a tqdm progress bar (on stderr) with live pass and faster-than-compile rates."""
    plots: bool = True
    """Write PNG plots (needs matplotlib)."""
    threshold: float = DEFAULT_THRESHOLD
    """The speedup bar of the ``> threshold x compile`` column (the milestone reward's)."""
    agent_name: str = ""
    """The agent's name in the report."""

    def __post_init__(self) -> None:
        self.output = Path(self.output)
        if self.report_dir is not None:
            self.report_dir = Path(self.report_dir)
        if self.parallel < 1:
            raise ConfigError(f"parallel must be >= 1, got {self.parallel}")
        if isinstance(self.tasks, str):
            self.tasks = [self.tasks]


@dataclass
class EvalRun:
    """What :func:`evaluate` did: every record (earlier runs' too), the ones run now, the report files."""

    records: list[TaskRecord]
    ran: list[str]
    skipped: list[str]
    report: dict[str, Path]


class RecordingJudge:
    """Wraps an env's judge and keeps the last result, so the harness sees what ``info`` leaves out
    (every violation's rule, the timing statistics, the fingerprint)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.last: Any = None

    def _keep(self, result: Any) -> Any:
        self.last = result
        return result

    def verify(self, ws: Any) -> Any:
        """The inner judge's ``verify``."""
        return self._keep(self.inner.verify(ws))

    def profile(self, ws: Any) -> Any:
        """The inner judge's ``profile``."""
        return self._keep(self.inner.profile(ws))

    def submit(self, ws: Any) -> Any:
        """The inner judge's ``submit`` (the final judgement)."""
        return self._keep(self.inner.submit(ws))

    def evaluate(self, task: Any, **kwargs: Any) -> Any:
        """The inner judge's ``evaluate`` (single-turn envs)."""
        return self._keep(self.inner.evaluate(task, **kwargs))

    def close(self) -> None:
        """Close the inner judge when it can be closed."""
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()


def load_task_file(path: str | Path) -> list[str]:
    """Task ids from a file: a JSON list, or one id a line (``#`` starts a comment).

    Raises:
        ConfigError: the file is missing or holds no id.
    """
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"no task file at {file}: give a JSON list or one task id a line")
    text = file.read_text()
    if text.lstrip().startswith("["):
        ids = [str(x) for x in json.loads(text)]
    else:
        ids = [line.split("#", 1)[0].strip() for line in text.splitlines()]
    ids = [i for i in ids if i]
    if not ids:
        raise ConfigError(f"{file} names no task")
    return ids


def replay_factory(solutions: dict[str, DemoSolution], checks: Sequence[str] = CHECKS) -> AgentFactory:
    """Agents that replay the stored solution of each task (``submit`` at once where there is none)."""
    def make(task_id: str) -> Agent:
        solution = solutions.get(task_id)
        return ReplayAgent(scripted_actions(solution, checks) if solution else [])

    return make


def _usage(agent: Agent) -> dict[str, int]:
    usage = getattr(agent, "usage", None)
    as_dict = getattr(usage, "as_dict", None)
    return dict(as_dict()) if callable(as_dict) else {}


def _num(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


class _Worker:
    """One env (with its judge) that plays tasks one after the other."""

    def __init__(self, config: EvalConfig) -> None:
        self.config = config
        self.env: Any = None
        self.judge: RecordingJudge | None = None

    def _open(self) -> None:
        if self.env is None:
            self.env = gym.make(self.config.env_id, **self.config.env_kwargs)
            inner = self.env.unwrapped
            self.judge = RecordingJudge(inner.judge)
            inner.judge = self.judge  # the tool runner made at reset takes it from here

    def close(self) -> None:
        """Close the env (its workspace and its judge's workers)."""
        if self.env is not None:
            self.env.close()
        self.env = self.judge = None

    def play(self, task_id: str, agent: Agent) -> TaskRecord:
        """One episode of ``agent`` on ``task_id``, as a record (an exception becomes ``agent_error``)."""
        self._open()
        assert self.judge is not None
        self.judge.last = None
        record = TaskRecord(task_id=task_id, env_id=self.config.env_id, problem_id=task_id)
        before = _usage(agent)
        start = time.monotonic()
        try:
            inner = self.env.unwrapped
            episode = run_episode(self.env, agent, seed=self.config.seed, options={"task_id": task_id},
                                  max_steps=self.config.max_steps)
            record.steps, record.terminated, record.truncated = episode.steps, episode.terminated, episode.truncated
            record.reward = episode.reward
            _fill_from_info(record, episode.info)
            if inner.task is not None:
                record.level = int(inner.task.level)
                pid = inner.task.meta.get("problem_id")
                record.problem_id = str(pid) if pid is not None else task_id
        except Exception as exc:  # one failed episode must not end a benchmark run
            logger.exception("episode on %s failed", task_id)
            record.agent_error = f"{type(exc).__name__}: {exc}"[:2000]
            self.close()  # a fresh env for the next task
        record.seconds = time.monotonic() - start
        after = _usage(agent)
        record.usage = {k: after[k] - before.get(k, 0) for k in after}
        record.stop_reason = str(getattr(agent, "stop_reason", "") or "")
        if self.judge is not None and self.judge.last is not None and record.final_eval:
            _fill_from_result(record, self.judge.last)
        return record


def _fill_from_info(record: TaskRecord, info: dict[str, Any]) -> None:
    record.final_eval = bool(info.get("final_eval", False))
    if not record.final_eval:
        return
    for key in ("compiled", "correct", "passed"):
        setattr(record, key, bool(info.get(key, False)))
    for key in ("speedup_vs_eager", "speedup_vs_compile", "candidate_ms", "eager_ms", "compile_ms"):
        setattr(record, key, _num(info.get(key)))
    milestone = info.get("milestone")
    record.milestone = int(milestone) if isinstance(milestone, (int, float)) and math.isfinite(milestone) else None
    record.error = str(info.get("error", "") or "")[:2000]
    if info.get("violation") and not record.violations:
        record.violations = [str(info["violation"]).split(":", 1)[0]]


def _fill_from_result(record: TaskRecord, result: Any) -> None:
    record.violations = [str(v.rule) for v in getattr(result, "violations", [])]
    record.held_out_failed = any(getattr(t, "held_out", False) and not t.passed for t in getattr(result, "trials", []))
    record.fingerprint = {str(k): str(v) for k, v in (getattr(result, "fingerprint", None) or {}).items()}
    timing = getattr(result, "candidate", None)
    if timing is not None:
        record.timing = {k: getattr(timing, k) for k in ("median_ms", "min_ms", "max_ms", "iqr_ms", "trials")}


class _Progress:
    """A tqdm bar with the live pass and faster-than-compile rates (a no-op when disabled)."""

    def __init__(self, total: int, done: list[TaskRecord], enabled: bool, desc: str) -> None:
        self.records = list(done)
        self.bar: Any = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=desc, unit="task", dynamic_ncols=True)
            self._postfix()

    def _postfix(self) -> None:
        n = len(self.records)
        passed = sum(r.passed for r in self.records)
        faster = sum(r.passed and r.speedup_vs_compile > 1.0 for r in self.records)
        def rate(k: int) -> str:
            return f"{k}/{n} ({100 * k / n:.0f}%)" if n else "0/0"

        self.bar.set_postfix_str(f"pass {rate(passed)}, faster than compile {rate(faster)}")

    def update(self, record: TaskRecord) -> None:
        """Count one finished task."""
        self.records.append(record)
        if self.bar is not None:
            self._postfix()
            self.bar.update(1)

    def close(self) -> None:
        """Close the bar."""
        if self.bar is not None:
            self.bar.close()


def _task_ids(config: EvalConfig) -> list[str]:
    if config.tasks is not None:
        ids = list(dict.fromkeys(config.tasks))
        if not ids:
            raise ConfigError("the task list is empty: give task ids or leave tasks unset for the env's whole set")
        return ids
    env = gym.make(config.env_id, **config.env_kwargs)
    try:
        inner: Any = env.unwrapped  # a KernelEnvBase: the task set it draws from
        return [t.id for t in inner.tasks]
    finally:
        env.close()


def evaluate(agent_factory: AgentFactory, config: EvalConfig | None = None, **overrides: Any) -> EvalRun:
    """Run the agents of ``agent_factory`` over ``config``'s tasks and write the results and report.

    Tasks already in ``config.output`` are skipped (a killed run resumes where it stopped); each
    task's record is appended the moment its episode ends. ``config.parallel`` episodes run at a
    time, each worker thread with its own env and judge. Returns every record (the earlier runs'
    included) and the report's files.
    """
    config = EvalConfig(**{**(config or EvalConfig()).__dict__, **overrides})
    results = ResultsFile(config.output)
    latest: dict[str, TaskRecord] = {}
    for record in results.load():
        latest[record.task_id] = record  # the newest record of a task wins (retried errors)
    ids = _task_ids(config)
    done = {t for t, r in latest.items() if not (config.retry_errors and r.agent_error)}
    pending = [t for t in ids if t not in done]
    skipped = [t for t in ids if t in done]
    if skipped:
        logger.info("%d of %d tasks already in %s: skipped", len(skipped), len(ids), config.output)
    todo: queue.Queue[str] = queue.Queue()
    for task_id in pending:
        todo.put(task_id)
    progress = _Progress(len(ids), [latest[t] for t in skipped], config.progress, config.env_id)
    if progress.bar is not None:
        progress.bar.update(len(skipped))
    lock = threading.Lock()
    failures: list[BaseException] = []

    def work() -> None:
        worker = _Worker(config)
        try:
            while not failures:
                try:
                    task_id = todo.get_nowait()
                except queue.Empty:
                    return
                record = worker.play(task_id, agent_factory(task_id))
                results.append(record)
                with lock:
                    latest[task_id] = record
                    progress.update(record)
        except BaseException as exc:  # noqa: B036  (reported in the main thread)
            failures.append(exc)
        finally:
            worker.close()

    threads = [threading.Thread(target=work, name=f"eval-{i}", daemon=True)
               for i in range(min(config.parallel, max(1, len(pending))))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    progress.close()
    if failures:
        raise CudaGymError(f"the benchmark run stopped: {failures[0]}; rerun to resume") from failures[0]
    records = [latest[t] for t in ids if t in latest]
    meta = {"env_id": config.env_id, "agent": config.agent_name or "agent", "tasks": len(ids),
            "output": str(config.output), "threshold": config.threshold}
    report_dir = config.report_dir or config.output.parent
    report = write_report(records, report_dir, meta=meta, threshold=config.threshold, plots=config.plots)
    return EvalRun(records, pending, skipped, report)
