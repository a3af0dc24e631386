"""Rewards as pure functions of a JudgeResult: the paper's milestone scheme and friends."""

from __future__ import annotations

import math
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


def milestone_reward(result: "JudgeResult", threshold: float = DEFAULT_THRESHOLD) -> int:
    """The milestone reward r in {-1, 1, 2, 3} of a judge result.

    -1 if the submission failed to compile, failed any correctness trial, could not run, or broke
    a rule; 3 if faster than both eager PyTorch and ``torch.compile`` by more than ``threshold``;
    2 if faster than eager only; 1 otherwise (correct, including when no timing was taken).
    """
    return milestone(result.passed, result.speedup_vs_eager, result.speedup_vs_compile, threshold)


def speedup_reward(result: "JudgeResult", baseline: str = "compile", failure: float = 0.0) -> float:
    """Raw speedup over ``baseline`` (``eager`` or ``compile``); ``failure`` when it did not pass."""
    return speedup_score(result.passed, _speedup(result, baseline), failure)


def log_speedup_reward(result: "JudgeResult", baseline: str = "compile", failure: float = -1.0) -> float:
    """Natural log of the speedup over ``baseline``; ``failure`` when it did not pass."""
    return log_speedup_score(result.passed, _speedup(result, baseline), failure)


def check_baseline(baseline: str) -> str:
    """``baseline`` if it is ``eager`` or ``compile`` (what a speedup is measured against); else ``ValueError``."""
    if baseline not in BASELINES:
        raise ValueError(f"baseline must be 'eager' or 'compile', got {baseline!r}")
    return baseline


def _speedup(result: "JudgeResult", baseline: str) -> float:
    if check_baseline(baseline) == "eager":
        return result.speedup_vs_eager
    return result.speedup_vs_compile
