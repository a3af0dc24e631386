"""The milestone reward and the speedup rewards, on judge results and on plain facts."""

from __future__ import annotations

import math

import pytest

from cuda_gym.judge.result import JudgeResult, Timing, TrialResult, Violation
from cuda_gym.reward import log_speedup_reward, milestone, milestone_reward, speedup_reward


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
