"""Trusted verification and timing: the judge, its configuration and its verdict."""

from cuda_gym.judge.config import PEAKS, JudgeConfig
from cuda_gym.judge.judge import Judge
from cuda_gym.judge.result import JudgeResult, KernelStat, Mode, Timing, TrialResult, Violation

__all__ = ["PEAKS", "Judge", "JudgeConfig", "JudgeResult", "KernelStat", "Mode", "Timing", "TrialResult", "Violation"]
