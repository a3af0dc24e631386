"""One finished task of a benchmark run (``TaskRecord``) and the JSONL file that keeps them."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_gym.errors import CudaGymError

logger = logging.getLogger(__name__)

_FLOATS = ("speedup_vs_eager", "speedup_vs_compile", "candidate_ms", "eager_ms", "compile_ms", "reward", "seconds")


@dataclass
class TaskRecord:
    """What one episode of the harness found: the env's terminal ``info`` and the judge's result.

    Speedups and timings are NaN where the judge did not time (a failed build, a wrong answer);
    the JSONL file writes NaN as ``null``.
    """

    task_id: str
    """The task's id (``builtin/softmax``, ``kernelbench/L1/19_ReLU``)."""
    level: int = 0
    """KernelBench level of the task (builtin and Ops-6K tasks carry one too)."""
    env_id: str = ""
    problem_id: str = ""
    """KernelBench problem number where the task has one (the key of its ``eval_results.json``), else the task id."""
    final_eval: bool = False
    """Whether the episode reached the final judgement (False: the agent or the harness failed first)."""
    compiled: bool = False
    correct: bool = False
    """The outputs matched the reference in every trial."""
    passed: bool = False
    """Correct and no rule broken: what every rate and geomean counts as a success."""
    speedup_vs_eager: float = math.nan
    speedup_vs_compile: float = math.nan
    candidate_ms: float = math.nan
    eager_ms: float = math.nan
    compile_ms: float = math.nan
    reward: float = math.nan
    """The episode's return (the env's terminal reward)."""
    milestone: int | None = None
    violations: list[str] = field(default_factory=list)
    """Rule names of the judge's violations (hack findings), one entry per finding."""
    held_out_failed: bool = False
    """A correctness trial on held-out shapes (``JudgeConfig.held_out_shapes``) ran and failed."""
    error: str = ""
    """The judge's error text (cut), or the harness's when the episode raised."""
    agent_error: str = ""
    """An exception raised by the agent or the env during the episode (the task counts as failed)."""
    steps: int = 0
    terminated: bool = False
    truncated: bool = False
    stop_reason: str = ""
    """Why a chat agent ended the episode itself (``context_overflow``), else empty."""
    seconds: float = math.nan
    """Wall time of the episode."""
    usage: dict[str, int] = field(default_factory=dict)
    """The agent's token usage over the episode (chat agents)."""
    timing: dict[str, Any] = field(default_factory=dict)
    """The candidate's timing statistics (median, min, max, IQR, trials) where the judge timed it."""
    fingerprint: dict[str, str] = field(default_factory=dict)
    """The judge's hardware and software facts of the final judgement."""

    def to_json(self) -> str:
        """One JSON line (NaN as ``null``)."""
        data = dataclasses.asdict(self)
        for key in _FLOATS:
            if isinstance(data[key], float) and not math.isfinite(data[key]) and not math.isinf(data[key]):
                data[key] = None
            elif isinstance(data[key], float) and math.isinf(data[key]):
                data[key] = "inf" if data[key] > 0 else "-inf"
        return json.dumps(data, ensure_ascii=False, sort_keys=True, allow_nan=False, default=str)

    @classmethod
    def from_json(cls, line: str) -> TaskRecord:
        """Inverse of ``to_json``; unknown keys are an error (a file of another format).

        Raises:
            CudaGymError: the line is not a record.
        """
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CudaGymError(f"not a JSON record: {exc}") from exc
        if not isinstance(data, dict) or "task_id" not in data:
            raise CudaGymError("not a task record: a JSON object with task_id was expected")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise CudaGymError(f"unknown record key(s) {', '.join(unknown)}: the file was written by another tool")
        for key in _FLOATS:
            value = data.get(key, math.nan)
            data[key] = math.nan if value is None else float(value)
        return cls(**data)


class ResultsFile:
    """An append-only JSONL file of :class:`TaskRecord`, one line per finished task, thread-safe.

    Every record is written, flushed and fsynced as soon as its task ends, so a run killed at any
    moment keeps every finished task; :meth:`load` drops a torn last line (the one being written
    at the kill) so the next append starts on a line of its own.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def load(self) -> list[TaskRecord]:
        """The records already in the file (a torn last line is removed from the file).

        Raises:
            CudaGymError: a complete line is not a record (the file is something else).
        """
        if not self.path.is_file():
            return []
        raw = self.path.read_bytes()
        if raw and not raw.endswith(b"\n"):
            cut = raw.rfind(b"\n") + 1
            logger.warning("%s: dropping a torn last line (%d bytes) left by an interrupted run", self.path, len(raw) - cut)
            with self.path.open("r+b") as fh:
                fh.truncate(cut)
            raw = raw[:cut]
        records = []
        for number, line in enumerate(raw.decode("utf-8").splitlines(), 1):
            if line.strip():
                try:
                    records.append(TaskRecord.from_json(line))
                except CudaGymError as exc:
                    raise CudaGymError(f"{self.path}:{number}: {exc}; use another --output file") from exc
        return records

    def append(self, record: TaskRecord) -> None:
        """Write one record now (flushed and synced before returning)."""
        line = record.to_json() + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(line)
                fh.flush()
                os.fsync(fh.fileno())
