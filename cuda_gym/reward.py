"""Rewards as pure functions of a JudgeResult: the paper's milestone scheme and friends."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cuda_gym.judge.result import JudgeResult

DEFAULT_THRESHOLD = 1.05
"""A speedup must beat a baseline by more than 5% to count (CUDA Agent, arXiv 2602.24286)."""

BASELINES = ("eager", "compile")
"""What a speedup is measured against: eager PyTorch or ``torch.compile``."""


def milestone(passed: bool, speedup_vs_eager: float, speedup_vs_compile: float,
              threshold: float = DEFAULT_THRESHOLD) -> int:
    """The milestone scheme on plain facts (what ``milestone_reward`` and the reward wrappers share).

    -1 unless ``passed``; 3 if both speedups exceed ``threshold``; 2 if only the one over eager
    does; 1 otherwise. NaN speedups (not measured) never exceed a threshold.
    """
    if threshold <= 0:
        raise ValueError(f"threshold must be positive, got {threshold}")
    if not passed:
        return -1
    beats_eager = speedup_vs_eager > threshold
    if beats_eager and speedup_vs_compile > threshold:
        return 3
    return 2 if beats_eager else 1


def speedup_score(passed: bool, speedup: float, failure: float = 0.0) -> float:
    """``speedup`` when the submission passed and it was measured, else ``failure``."""
    return speedup if passed and math.isfinite(speedup) else failure


def log_speedup_score(passed: bool, speedup: float, failure: float = -1.0) -> float:
    """``ln(speedup)`` when the submission passed and a positive speedup was measured, else ``failure``."""
    if not passed or not (math.isfinite(speedup) and speedup > 0):
        return failure
    return math.log(speedup)


def milestone_reward(result: JudgeResult, threshold: float = DEFAULT_THRESHOLD) -> int:
    """The milestone reward r in {-1, 1, 2, 3} of a judge result.

    -1 if the submission failed to compile, failed any correctness trial, could not run, or broke
    a rule; 3 if faster than both eager PyTorch and ``torch.compile`` by more than ``threshold``;
    2 if faster than eager only; 1 otherwise (correct, including when no timing was taken).
    """
    return milestone(result.passed, result.speedup_vs_eager, result.speedup_vs_compile, threshold)


def speedup_reward(result: JudgeResult, baseline: str = "compile", failure: float = 0.0) -> float:
    """Raw speedup over ``baseline`` (``eager`` or ``compile``); ``failure`` when it did not pass."""
    return speedup_score(result.passed, _speedup(result, baseline), failure)


def log_speedup_reward(result: JudgeResult, baseline: str = "compile", failure: float = -1.0) -> float:
    """Natural log of the speedup over ``baseline``; ``failure`` when it did not pass."""
    return log_speedup_score(result.passed, _speedup(result, baseline), failure)


def check_baseline(baseline: str) -> str:
    """``baseline`` if it is ``eager`` or ``compile`` (what a speedup is measured against); else ``ValueError``."""
    if baseline not in BASELINES:
        raise ValueError(f"baseline must be 'eager' or 'compile', got {baseline!r}")
    return baseline


def _speedup(result: JudgeResult, baseline: str) -> float:
    if check_baseline(baseline) == "eager":
        return result.speedup_vs_eager
    return result.speedup_vs_compile


REWARDS = ("milestone", "speedup", "log_speedup")
"""Terminal rewards selectable by name (``KernelEnvConfig.reward``)."""

RewardFn = Callable[["JudgeResult"], float]
"""A custom terminal reward: a (picklable) function of a judge result."""


def faster_than(threshold: float) -> str:
    """How a threshold reads: ``more than 5% faster than`` for 1.05, ``more than 0.9x as fast as`` below 1."""
    if threshold >= 1:
        return f"more than {(threshold - 1) * 100:.4g}% faster than"
    return f"more than {threshold:.4g}x as fast as"


def milestone_meaning(reward: int, threshold: float = DEFAULT_THRESHOLD) -> str:
    """What milestone ``reward`` (-1, 1, 2 or 3) means at ``threshold``, as one clause for the agent."""
    faster = faster_than(threshold)
    meanings = {
        -1: "the submission failed (compile, correctness, a runtime error or a rule violation)",
        1: f"correct, but not {faster} eager PyTorch",
        2: f"correct and {faster} eager PyTorch, but not than torch.compile",
        3: f"correct and {faster} both eager PyTorch and torch.compile",
    }
    return meanings[reward]


@dataclass(frozen=True)
class TerminalReward:
    """An env's terminal reward: its value for a judge result and the text that explains it to the agent.

    The one place where reward settings (``KernelEnvConfig.reward`` and ``reward_threshold``) meet a
    judge result: the env's reward, ``info["milestone"]`` and the reward line of the final judgement's
    observation all come from here, so they always agree.

    Attributes:
        kind: ``milestone``, ``speedup`` (over ``torch.compile``), ``log_speedup``, or a function
            ``JudgeResult -> float``.
        threshold: the speedup a milestone must beat (1.05: more than 5% faster); also gives
            ``info["milestone"]`` when ``kind`` is not ``milestone``.
    """

    kind: str | RewardFn = "milestone"
    threshold: float = DEFAULT_THRESHOLD

    def __post_init__(self) -> None:
        if not callable(self.kind) and self.kind not in REWARDS:
            raise ValueError(f"unknown reward {self.kind!r}: use one of {', '.join(REWARDS)} or a function")
        if not self.threshold > 0:
            raise ValueError(f"threshold must be positive, got {self.threshold}")

    def __call__(self, result: JudgeResult) -> float:
        """The reward of ``result``."""
        if callable(self.kind):
            return float(self.kind(result))
        if self.kind == "milestone":
            return float(self.milestone(result))
        if self.kind == "speedup":
            return speedup_reward(result)
        return log_speedup_reward(result)

    def milestone(self, result: JudgeResult) -> int:
        """The milestone of ``result`` at this threshold (``info["milestone"]`` whatever the reward)."""
        return milestone_reward(result, self.threshold)

    def target(self) -> str:
        """What the profile report says a milestone needs (empty when the reward is not the milestone)."""
        return f"a milestone needs > {self.threshold:g}x" if self.kind == "milestone" else ""

    def describe(self, result: JudgeResult) -> str:
        """The reward line of the final judgement, e.g. ``Milestone reward: 1 (correct, but ...).``"""
        if self.kind == "milestone":
            value = self.milestone(result)
            return f"Milestone reward: {value} ({milestone_meaning(value, self.threshold)})."
        if self.kind == "speedup":
            return f"Reward: {self(result):.4g} (the speedup over torch.compile; 0 when the submission fails)."
        if self.kind == "log_speedup":
            return f"Reward: {self(result):.4g} (the log speedup over torch.compile; -1 when the submission fails)."
        return f"Reward: {self(result):.4g}."
