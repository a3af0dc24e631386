"""Rewards as pure functions of a JudgeResult: the paper's milestone scheme and friends."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cuda_gym.judge.result import JudgeResult

DEFAULT_THRESHOLD = 1.05
"""A speedup must beat a baseline by more than 5% to count (CUDA Agent, arXiv 2602.24286)."""


def milestone_reward(result: "JudgeResult", threshold: float = DEFAULT_THRESHOLD) -> int:
    """The milestone reward r in {-1, 1, 2, 3}.

    -1 if the submission failed to compile, failed any correctness trial, could not run, or broke
    a rule; 3 if faster than both eager PyTorch and ``torch.compile`` by more than ``threshold``;
    2 if faster than eager only; 1 otherwise (correct, including when no timing was taken).
    """
    if threshold <= 0:
        raise ValueError(f"threshold must be positive, got {threshold}")
    if not result.passed:
        return -1
    beats_eager = result.speedup_vs_eager > threshold
    beats_compile = result.speedup_vs_compile > threshold
    if beats_eager and beats_compile:
        return 3
    if beats_eager:
        return 2
    return 1


def speedup_reward(result: "JudgeResult", baseline: str = "compile", failure: float = 0.0) -> float:
    """Raw speedup over ``baseline`` (``eager`` or ``compile``); ``failure`` when it did not pass."""
    speedup = _speedup(result, baseline)
    return speedup if result.passed and math.isfinite(speedup) else failure


def log_speedup_reward(result: "JudgeResult", baseline: str = "compile", failure: float = -1.0) -> float:
    """Natural log of the speedup over ``baseline``; ``failure`` when it did not pass."""
    speedup = _speedup(result, baseline)
    if not result.passed or not (math.isfinite(speedup) and speedup > 0):
        return failure
    return math.log(speedup)


def _speedup(result: "JudgeResult", baseline: str) -> float:
    if baseline == "eager":
        return result.speedup_vs_eager
    if baseline == "compile":
        return result.speedup_vs_compile
    raise ValueError(f"baseline must be 'eager' or 'compile', got {baseline!r}")
