"""The milestone reward and the speedup rewards, on judge results and on plain facts; the env's
reward settings reach its reward, ``info["milestone"]`` and the text the agent reads alike."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from cuda_gym.envs import KernelEnv, SingleTurnKernelEnv
from cuda_gym.judge.result import JudgeResult, Timing, TrialResult, Violation
from cuda_gym.reward import (
    TerminalReward,
    log_speedup_reward,
    milestone,
    milestone_meaning,
    milestone_reward,
    speedup_reward,
)
from cuda_gym.tools.render import render_profile, render_submit
from env_helpers import TASK_ID, call


def _result(candidate: float, eager: float | None, compile_: float | None, **kw: object) -> JudgeResult:
    def t(ms: float | None) -> Timing | None:
        return None if ms is None else Timing(median_ms=ms, min_ms=ms, max_ms=ms, iqr_ms=0.0, trials=10)

    kw.setdefault("trials", [TrialResult(seed=1, passed=True)])
    return JudgeResult(task_id="t", mode="full", device="cpu", compiled=True, candidate=t(candidate),
                       eager=t(eager), compile=t(compile_), **kw)


@pytest.mark.parametrize(("eager", "compile_", "expected"), [
    (2.0, 2.0, 3), (2.0, 1.04, 2), (1.05, 2.0, 1), (1.0, 1.0, 1), (None, None, 1), (2.0, None, 2),
])
def test_milestone_levels(eager: float | None, compile_: float | None, expected: int) -> None:
    result = _result(1.0, eager, compile_)
    assert milestone_reward(result) == expected
    assert milestone(True, result.speedup_vs_eager, result.speedup_vs_compile) == expected


def test_failures_score_minus_one_and_failure_values() -> None:
    hacked = _result(0.1, 2.0, 2.0, violations=[Violation("torch-compute", "uses torch.matmul")])
    wrong = _result(0.1, 2.0, 2.0, trials=[TrialResult(seed=1, passed=False)])
    for bad in (hacked, wrong):
        assert milestone_reward(bad) == -1
        assert speedup_reward(bad, failure=0.0) == 0.0
        assert log_speedup_reward(bad, failure=-1.0) == -1.0
    good = _result(1.0, 4.0, 2.0)
    assert speedup_reward(good, "eager") == pytest.approx(4.0)
    assert log_speedup_reward(good, "compile") == pytest.approx(math.log(2.0))
    assert milestone_reward(good, threshold=3.0) == 2


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="threshold"):
        milestone(True, 2.0, 2.0, threshold=0)
    with pytest.raises(ValueError, match="baseline"):
        speedup_reward(_result(1.0, 2.0, 2.0), "triton")


# --- the env's reward settings, end to end -----------------------------------------------------------

SLOW_MEANING = "correct, but not more than 20% faster than eager PyTorch"


class FixedJudge:
    """A ready judge object (``KernelEnvConfig.judge``) answering every call with one result."""

    def __init__(self, result: JudgeResult) -> None:
        self.result = result

    def verify(self, ws: Any) -> JudgeResult:
        return self.result

    def profile(self, ws: Any) -> JudgeResult:
        return self.result

    def submit(self, ws: Any) -> JudgeResult:
        return self.result

    def evaluate(self, task: Any, **kwargs: Any) -> JudgeResult:
        return self.result


def test_judge_facts_carry_no_reward() -> None:
    result = _result(1.0, 1.1, 1.1)
    assert "milestone" not in result.to_info()
    assert "Milestone" not in render_submit(result) and "a milestone needs" not in render_profile(result)


def test_terminal_reward_text_follows_its_threshold() -> None:
    result = _result(1.0, 1.1, 1.1)  # 1.1x over both baselines
    assert TerminalReward().milestone(result) == 3
    strict = TerminalReward("milestone", 1.2)
    assert strict(result) == 1.0 and strict.milestone(result) == 1
    assert strict.describe(result) == f"Milestone reward: 1 ({SLOW_MEANING})."
    assert milestone_meaning(3) == "correct and more than 5% faster than both eager PyTorch and torch.compile"
    assert "a milestone needs > 1.2x" in render_profile(result, strict)
    speedup = TerminalReward("speedup", 1.2)
    assert speedup(result) == pytest.approx(1.1) and speedup.milestone(result) == 1
    assert "Reward: 1.1 (the speedup over torch.compile" in render_submit(result, speedup)
    assert "a milestone needs" not in render_profile(result, speedup)
    with pytest.raises(ValueError, match="threshold"):
        TerminalReward("milestone", 0)
    with pytest.raises(ValueError, match="unknown reward"):
        TerminalReward("fastest")


def test_threshold_1_2_multi_turn_reward_info_and_text_agree(tmp_path: Path) -> None:
    # 1.1x over eager and torch.compile: 3 at the default threshold, 1 at 1.2. The turn limit
    # runs the final judgement (judge.submit) and renders it.
    env = KernelEnv(device="cpu", size="small", task_ids=[TASK_ID], max_turns=1, reward_threshold=1.2,
                    judge=FixedJudge(_result(1.0, 1.1, 1.1)), workspace_dir=tmp_path)
    try:
        env.reset(seed=0)
        obs, reward, _, truncated, info = env.step(call("read_file", path="model.py"))
        assert truncated and info["final_eval"]
        assert reward == 1 and info["milestone"] == 1 and info["reward"] == 1
        assert f"Milestone reward: 1 ({SLOW_MEANING})." in obs and "5%" not in obs
        assert "a milestone needs > 1.2x" in obs
        env.reset(seed=0)
        assert env.runner.reward is env.reward_fn  # verify/profile/submit tool reports use it too
    finally:
        env.close()


def test_threshold_1_2_single_turn_reward_info_and_text_agree(tmp_path: Path) -> None:
    env = SingleTurnKernelEnv(device="cpu", size="small", task_ids=[TASK_ID], reward_threshold=1.2,
                              judge=FixedJudge(_result(1.0, 1.1, 1.1)), workspace_dir=tmp_path)
    try:
        env.reset(seed=0)
        obs, reward, terminated, _, info = env.step("```python\nclass ModelNew:\n    pass\n```")
        assert terminated and info["solution_form"] == "single_file"
        assert reward == 1 and info["milestone"] == 1
        assert f"Milestone reward: 1 ({SLOW_MEANING})." in obs
    finally:
        env.close()


def test_a_time_below_the_clocks_resolution_claims_no_speed_and_no_hack() -> None:
    """A candidate whose median is at its server's resolution (half the calibration IQR): speedups read 1.0
    (reward 1, not 3), the timing is noisy, and the speed-of-light bound does not call it a hack."""
    from dataclasses import replace

    from cuda_gym.judge.config import JudgeConfig
    from cuda_gym.judge.messages import TaskFacts
    from cuda_gym.judge.plausibility import implausible, noisy

    res = _result(0.04, 3.6, 3.0)
    assert milestone_reward(res) == 3 and res.speedup_vs_eager == pytest.approx(90.0)
    assert res.candidate is not None
    res.candidate = replace(res.candidate, resolution_ms=0.04)  # the median sits on the floor
    assert res.speedup_vs_eager == 1.0 and res.speedup_vs_compile == 1.0 and milestone_reward(res) == 1
    assert noisy(res.candidate, 0.25) and not noisy(replace(res.candidate, resolution_ms=0.01), 0.25)
    facts = TaskFacts(output_bytes=4, integer_output=False, input_bytes=2**30, dtype="float32", flops=1e9,
                      param_bytes=0, call_ms=1.0)
    cfg = JudgeConfig(device="cuda:0", max_speedup=50.0)
    assert not implausible(res, facts, "NVIDIA H200", cfg)  # unresolved: noise, not a broken timing
    assert implausible(replace(res, candidate=replace(res.candidate, resolution_ms=0.0)), facts, "NVIDIA H200", cfg)
