"""The judge on a CUDA device (``gpu`` marker): the CPU suite's scenarios mirrored, plus CUDA faults."""

from __future__ import annotations

from pathlib import Path

import pytest

import judge_cases as cases
from cuda_gym.judge import Judge, JudgeConfig
from cuda_gym.reward import milestone_reward

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def task():
    return cases.small_task()


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("judge_gpu")
    cfg = JudgeConfig(device="cuda:0", timed_calls=20, warmup=3, cache_judgements=False, cache_dir=root / "cache",
                      work_dir=root / "jobs")
    with Judge(cfg) as j:
        yield j


def test_honest_cuda_solution_passes_with_event_timing_and_cached_baselines(judge: Judge, task) -> None:
    res = judge.evaluate(task, solution=cases.CUDA_OK, mode="full")
    assert res.passed, res.to_json()
    assert res.candidate is not None and res.candidate.trials == 20
    assert res.candidate.host_median_ms >= res.candidate.median_ms - 0.05
    assert res.eager is not None and res.compile is not None
    assert sum(t.timed for t in res.trials) == 3
    assert res.fingerprint["gpu"] and res.fingerprint["driver"]
    again = judge.evaluate(task, solution=cases.CUDA_OK, mode="full")
    assert again.passed and again.eager.source == "cache" and again.compile.source == "cache"


def test_wrong_cuda_solution_fails(judge: Judge, task) -> None:
    res = judge.evaluate(task, solution=cases.CUDA_WRONG, mode="verify")
    assert res.compiled and not res.correct and milestone_reward(res) == -1


def test_illegal_address_is_an_error_and_the_judge_recovers(judge: Judge, task) -> None:
    res = judge.evaluate(task, solution=cases.CUDA_ILLEGAL_ADDRESS, mode="full")
    assert not res.correct and "CUDA error" in res.error, res.error
    ok = judge.evaluate(task, solution=cases.CUDA_OK, mode="verify")
    assert ok.passed, ok.to_json()


def test_hang_on_gpu_is_killed(tmp_path: Path, task) -> None:
    cfg = JudgeConfig(device="cuda:0", timeout_s=40, single_file_build_s=0, timing_budget_s=0, cache_judgements=False,
                      cache_dir=tmp_path / "cache")
    with Judge(cfg) as j:
        res = j.evaluate(task, solution=cases.HANG, mode="verify")
        assert "killed" in res.error and not res.correct
        ok = j.evaluate(task, solution=cases.TORCH_FALLBACK, mode="verify")
        assert ok.correct and any(v.rule == "torch-compute" for v in ok.violations)


def test_profile_mode_lists_cuda_kernels(judge: Judge, task) -> None:
    res = judge.evaluate(task, solution=cases.CUDA_OK, mode="profile")
    assert res.passed, res.to_json()
    assert any("bias_gelu_kernel" in k.name for k in res.profile), res.profile
    assert res.reference_profile


@pytest.mark.parametrize("side_stream", [False, True], ids=["current_stream", "side_stream"])
def test_timed_call_counts_gpu_work_on_any_stream_but_not_the_host_round_trip(side_stream: bool) -> None:
    """The device time of ``timed_call`` covers work left running on another stream after the call returned
    (so a side stream cannot hide work from the timer), while the calibrated idle host round trip is small."""
    import torch

    from cuda_gym.judge import harness

    device = "cuda:0"
    harness.warm_device(device)
    idle = harness.idle_tail_ms(device)
    assert 0.0 <= idle < 1.0
    side = torch.cuda.Stream()
    x = torch.ones(4, device=device)

    def model(t):
        if side_stream:
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                torch.cuda._sleep(40_000_000)  # 20 ms at 1.98 GHz, longer at lower clocks
            return t
        torch.cuda._sleep(40_000_000)
        return t

    times = [harness.timed_call(model, [x], device, idle)[1] for _ in range(3)]
    for t in times:
        assert t.event_ms >= 15.0, t
        assert t.host_ms >= t.event_ms - 0.05, t
