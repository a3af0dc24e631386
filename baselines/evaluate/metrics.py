"""The benchmark's metrics over task records, per level and overall (definitions in docs/benchmarking.md)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cuda_gym.baselines.evaluate.records import TaskRecord
from cuda_gym.reward import DEFAULT_THRESHOLD

FAST_P = (0.0, 1.0, 1.2, 2.0)
"""KernelBench's ``fast_p`` thresholds reported (strict ``speedup > p``)."""

BASELINES = ("eager", "compile")
"""The two references every speedup is measured against: PyTorch eager and ``torch.compile``."""


def _speedup(record: TaskRecord, baseline: str) -> float:
    return record.speedup_vs_eager if baseline == "eager" else record.speedup_vs_compile


def _timed(value: float) -> bool:
    return math.isfinite(value) and value > 0


def geomean(values: Iterable[float]) -> float:
    """Geometric mean of positive values (NaN for none)."""
    logs = [math.log(v) for v in values]
    return math.exp(sum(logs) / len(logs)) if logs else math.nan


@dataclass(frozen=True)
class Count:
    """A count of tasks beside its rate: ``count / of``."""

    count: int
    of: int

    @property
    def rate(self) -> float:
        """``count / of`` (NaN when ``of`` is 0)."""
        return self.count / self.of if self.of else math.nan

    def __str__(self) -> str:
        return f"{self.count}/{self.of} ({100 * self.rate:.1f}%)" if self.of else "0/0"

    def as_dict(self) -> dict[str, Any]:
        """``{"count", "of", "rate"}`` (rate ``None`` when ``of`` is 0)."""
        return {"count": self.count, "of": self.of, "rate": self.rate if self.of else None}


@dataclass
class GroupMetrics:
    """The metrics of one group of tasks (a level, or all of them).

    Every rate's denominator is ``tasks``, every task of the group (failures count as 0). See
    docs/benchmarking.md for each definition.
    """

    name: str
    tasks: int
    compiled: Count
    correct: Count
    passed: Count
    """Correct and no rule broken."""
    faster_than_eager: Count
    """Passed and ``speedup_vs_eager > 1``."""
    faster_than_compile: Count
    """Passed and ``speedup_vs_compile > 1``."""
    beats_compile_threshold: Count
    """Passed and ``speedup_vs_compile > threshold`` (the milestone reward's bar, 1.05 by default)."""
    threshold: float
    geomean_vs_eager: float
    geomean_vs_compile: float
    geomean_covers: int
    """Tasks the two geomeans cover: passed tasks with both speedups timed (finite, positive)."""
    geomean_all_vs_compile: float
    """Geomean over every task with failures (and untimed passes) counted as 1.0x."""
    fast_p: dict[str, dict[str, Count]]
    """``fast_p[baseline][str(p)]``: passed and speedup > p, over every task of the group."""
    rewards: dict[str, int]
    """How many episodes got each reward (``"none"`` for episodes that ended without a reward: the agent or the env raised)."""
    mean_reward: float
    hack_findings: dict[str, int]
    """Violations found by the judge, by rule name (one count per finding)."""
    tasks_with_violations: int
    held_out_failures: Count
    """Tasks where a correctness trial on held-out shapes ran and failed."""
    episode_errors: int
    """Episodes that raised (agent, server or env failure): counted as failed tasks."""
    usage: dict[str, int] = field(default_factory=dict)
    """The agents' token usage summed over the group."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (NaN as ``None``)."""
        def num(x: float) -> float | None:
            return x if math.isfinite(x) else None

        return {
            "name": self.name, "tasks": self.tasks,
            "compiled": self.compiled.as_dict(), "correct": self.correct.as_dict(), "passed": self.passed.as_dict(),
            "faster_than_eager": self.faster_than_eager.as_dict(),
            "faster_than_compile": self.faster_than_compile.as_dict(),
            "beats_compile_threshold": self.beats_compile_threshold.as_dict(), "threshold": self.threshold,
            "geomean_vs_eager": num(self.geomean_vs_eager), "geomean_vs_compile": num(self.geomean_vs_compile),
            "geomean_covers": self.geomean_covers, "geomean_all_vs_compile": num(self.geomean_all_vs_compile),
            "fast_p": {b: {p: c.as_dict() for p, c in row.items()} for b, row in self.fast_p.items()},
            "rewards": self.rewards, "mean_reward": num(self.mean_reward),
            "hack_findings": self.hack_findings, "tasks_with_violations": self.tasks_with_violations,
            "held_out_failures": self.held_out_failures.as_dict(), "episode_errors": self.episode_errors, "usage": self.usage,
        }


def group_metrics(name: str, records: Sequence[TaskRecord], threshold: float = DEFAULT_THRESHOLD) -> GroupMetrics:
    """The metrics of ``records`` (one group: a level, or all tasks)."""
    n = len(records)
    passed = [r for r in records if r.passed]

    def count(pred: Any) -> Count:
        return Count(sum(1 for r in records if pred(r)), n)

    covered = [r for r in passed if _timed(r.speedup_vs_eager) and _timed(r.speedup_vs_compile)]
    all_vs_compile = [r.speedup_vs_compile if r.passed and _timed(r.speedup_vs_compile) else 1.0 for r in records]
    fast_p = {
        b: {str(p): count(lambda r, b=b, p=p: r.passed and _speedup(r, b) > p) for p in FAST_P} for b in BASELINES
    }
    rewards = Counter("none" if not math.isfinite(r.reward) else f"{r.reward:g}" for r in records)
    finite_rewards = [r.reward for r in records if math.isfinite(r.reward)]
    hacks = Counter(rule for r in records for rule in r.violations)
    usage: Counter[str] = Counter()
    for r in records:
        usage.update(r.usage)
    return GroupMetrics(
        name=name,
        tasks=n,
        compiled=count(lambda r: r.compiled),
        correct=count(lambda r: r.correct),
        passed=Count(len(passed), n),
        faster_than_eager=count(lambda r: r.passed and r.speedup_vs_eager > 1.0),
        faster_than_compile=count(lambda r: r.passed and r.speedup_vs_compile > 1.0),
        beats_compile_threshold=count(lambda r: r.passed and r.speedup_vs_compile > threshold),
        threshold=threshold,
        geomean_vs_eager=geomean(r.speedup_vs_eager for r in covered),
        geomean_vs_compile=geomean(r.speedup_vs_compile for r in covered),
        geomean_covers=len(covered),
        geomean_all_vs_compile=geomean(all_vs_compile),
        fast_p=fast_p,
        rewards=dict(sorted(rewards.items())),
        mean_reward=sum(finite_rewards) / len(finite_rewards) if finite_rewards else math.nan,
        hack_findings=dict(hacks.most_common()),
        tasks_with_violations=sum(1 for r in records if r.violations),
        held_out_failures=count(lambda r: r.held_out_failed),
        episode_errors=sum(1 for r in records if r.agent_error),
        usage=dict(usage),
    )


def level_name(level: int) -> str:
    """The report's name of a level: ``L1``."""
    return f"L{level}"


def summarize(records: Sequence[TaskRecord], threshold: float = DEFAULT_THRESHOLD) -> list[GroupMetrics]:
    """One :class:`GroupMetrics` per level (in level order), then ``overall``."""
    levels = sorted({r.level for r in records})
    groups = [group_metrics(level_name(lv), [r for r in records if r.level == lv], threshold) for lv in levels]
    groups.append(group_metrics("overall", list(records), threshold))
    return groups
