"""Reward wrappers: rewards recomputed from the judge's facts in ``info`` on the judged step."""

from __future__ import annotations

import math
from typing import Any, SupportsFloat

import gymnasium as gym
from gymnasium.utils import RecordConstructorArgs

from cuda_gym.reward import DEFAULT_THRESHOLD, check_baseline, log_speedup_score, milestone, speedup_score


def _speedup(info: dict[str, Any], baseline: str) -> float:
    value = info.get(f"speedup_vs_{check_baseline(baseline)}", math.nan)
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


class InfoReward(gym.Wrapper[Any, Any, Any, Any]):
    """Base class: on the step that ran the final judgement (``info["final_eval"]``) the reward
    becomes ``self.score(info)``; every other step keeps the reward it had (0 from the envs).

    The env's own reward is kept in ``info["env_reward"]`` on judged steps. Subclasses set
    ``score``.
    """

    def score(self, info: dict[str, Any]) -> float:
        """The reward of a judged step, from the judge's facts in ``info``."""
        raise NotImplementedError

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the env; replace the reward on the judged step."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        if info.get("final_eval"):
            info = dict(info, env_reward=float(reward))
            reward = float(self.score(info))
        return obs, reward, terminated, truncated, info


class MilestoneReward(InfoReward, RecordConstructorArgs):
    """The milestone reward with your own threshold: -1 if the submission did not pass (compile,
    correctness, a broken rule); 3 if more than ``threshold`` times faster than both eager and
    ``torch.compile``; 2 if faster than eager only; else 1."""

    def __init__(self, env: gym.Env[Any, Any], threshold: float = DEFAULT_THRESHOLD) -> None:
        if threshold <= 0:
            raise ValueError(f"threshold must be positive, got {threshold}")
        RecordConstructorArgs.__init__(self, threshold=threshold)
        InfoReward.__init__(self, env)
        self.threshold = threshold

    def score(self, info: dict[str, Any]) -> float:
        """Milestone in {-1, 1, 2, 3} (NaN speedups never beat a threshold)."""
        return float(milestone(bool(info.get("passed")), _speedup(info, "eager"), _speedup(info, "compile"),
                               self.threshold))


class _BaselineReward(InfoReward, RecordConstructorArgs):
    """Base class of the rewards on the speedup over one ``baseline`` (``compile`` or ``eager``),
    with ``failure`` when the submission did not pass."""

    def __init__(self, env: gym.Env[Any, Any], baseline: str, failure: float) -> None:
        check_baseline(baseline)
        RecordConstructorArgs.__init__(self, baseline=baseline, failure=failure)
        InfoReward.__init__(self, env)
        self.baseline = baseline
        self.failure = failure


class SpeedupReward(_BaselineReward):
    """The raw speedup over ``baseline`` (``compile`` or ``eager``) when the submission passed,
    else ``failure`` (also when the speedup was not measured)."""

    def __init__(self, env: gym.Env[Any, Any], baseline: str = "compile", failure: float = 0.0) -> None:
        super().__init__(env, baseline, failure)

    def score(self, info: dict[str, Any]) -> float:
        """Speedup, or ``failure``."""
        return speedup_score(bool(info.get("passed")), _speedup(info, self.baseline), self.failure)


class LogSpeedupReward(_BaselineReward):
    """``ln(speedup)`` over ``baseline`` when the submission passed, else ``failure``: symmetric
    around 0 for faster/slower, so a 2x gain and a 2x loss weigh the same."""

    def __init__(self, env: gym.Env[Any, Any], baseline: str = "compile", failure: float = -1.0) -> None:
        super().__init__(env, baseline, failure)

    def score(self, info: dict[str, Any]) -> float:
        """Log-speedup, or ``failure``."""
        return log_speedup_score(bool(info.get("passed")), _speedup(info, self.baseline), self.failure)


class CorrectnessReward(InfoReward, RecordConstructorArgs):
    """``success`` when the submission passed (correct, no broken rule), else ``failure``;
    speed is ignored."""

    def __init__(self, env: gym.Env[Any, Any], success: float = 1.0, failure: float = -1.0) -> None:
        RecordConstructorArgs.__init__(self, success=success, failure=failure)
        InfoReward.__init__(self, env)
        self.success = success
        self.failure = failure

    def score(self, info: dict[str, Any]) -> float:
        """``success`` or ``failure``."""
        return self.success if info.get("passed") else self.failure


class FormatPenalty(gym.Wrapper[Any, Any, Any, Any], RecordConstructorArgs):
    """Subtracts ``penalty`` on every step whose action did not parse as a tool call
    (``info["parse_ok"]`` False), to teach the call format; other rewards are untouched."""

    def __init__(self, env: gym.Env[Any, Any], penalty: float = 0.1) -> None:
        RecordConstructorArgs.__init__(self, penalty=penalty)
        gym.Wrapper.__init__(self, env)
        self.penalty = penalty

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the env; subtract the penalty after a parse error."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        if info.get("parse_ok") is False:
            reward = float(reward) - self.penalty
        return obs, reward, terminated, truncated, info
