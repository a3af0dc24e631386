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
    # The default size (2 GB in, 2 GB out: about 1-2 ms a call): the small one runs in 5 us, below what the
    # trusted clock resolves on a GPU, so its baselines would always be noisy (and never cached).
    from cuda_gym.tasks import get_task

    return get_task(cases.TASK_ID, size="default")


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
    assert res.candidate.host_median_ms >= res.candidate.median_ms  # raw round trip, before the overhead
    assert 0 < res.candidate.overhead_ms < 1.0
    assert res.eager is not None and res.compile is not None
    assert sum(t.timed for t in res.trials) == 20  # every timed call is checked
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


def test_a_server_holding_the_gpus_memory_is_the_candidates_failure(judge: Judge, task) -> None:
    """GPU memory is no sandbox limit: a server that takes it all makes the next allocation fail (the driver's:
    the server held far more than the task's tensors; or its own), which is the submission's -1, never a
    JudgeError; the judge works on."""
    assert cases.CUDA_HOGS_MEMORY != cases.CUDA_OK
    res = judge.evaluate(task, solution=cases.CUDA_HOGS_MEMORY, mode="full")
    assert res.compiled and not res.correct and "out of memory" in res.error.lower(), res.to_json()
    ok = judge.evaluate(task, solution=cases.CUDA_OK, mode="full")
    assert ok.passed, ok.to_json()


def test_baselines_are_measured_before_the_candidate_runs(tmp_path: Path, task) -> None:
    """A task's first timed evaluation on a GPU measures its baselines before any of the candidate's code runs
    there (a candidate timed first could leave the GPU hot for them): an incorrect candidate finds them
    measured, and the next evaluation uses them from the cache."""
    cfg = JudgeConfig(device="cuda:0", timed_calls=20, warmup=3, cache_judgements=False, cache_dir=tmp_path / "cache",
                      work_dir=tmp_path / "jobs")
    with Judge(cfg) as j:
        assert not j.baseline_cached(task)
        wrong = j.evaluate(task, solution=cases.CUDA_WRONG, mode="full")
        assert wrong.compiled and not wrong.correct and wrong.eager is None, wrong.to_json()
        assert j.baseline_cached(task)
        honest = j.evaluate(task, solution=cases.CUDA_OK, mode="full")
    assert honest.passed and honest.eager is not None and honest.eager.source == "cache", honest.to_json()


def test_hang_on_gpu_is_killed(tmp_path: Path, task) -> None:
    import time

    cfg = JudgeConfig(device="cuda:0", call_timeout_s=5, cache_judgements=False, cache_dir=tmp_path / "cache")
    with Judge(cfg) as j:
        start = time.monotonic()
        res = j.evaluate(task, solution=cases.HANG, mode="verify")
        assert "killed" in res.error and not res.correct
        assert time.monotonic() - start < 90  # a verdict within about a minute
        ok = j.evaluate(task, solution=cases.TORCH_FALLBACK, mode="verify")
        assert ok.correct and any(v.rule == "torch-compute" for v in ok.violations)


def test_profile_mode_lists_cuda_kernels(judge: Judge, task) -> None:
    res = judge.evaluate(task, solution=cases.CUDA_OK, mode="profile")
    assert res.passed, res.to_json()
    assert any("bias_gelu_kernel" in k.name for k in res.profile), res.profile
    assert res.reference_profile


SIDE_STREAM = cases.CUDA_OK.replace(
    "        return ext.fused_bias_gelu(",
    "        side = torch.cuda.Stream()\n"
    "        side.wait_stream(torch.cuda.current_stream())\n"
    "        with torch.cuda.stream(side):\n"
    "            torch.cuda._sleep(40_000_000)\n"
    "        return ext.fused_bias_gelu(",
)


def test_work_left_on_a_side_stream_is_never_free(tmp_path: Path, task) -> None:
    """A 20 ms spin left running on an unjoined side stream after the done word delays the driver's input
    copy of the next call (the GPU must switch away from the spinning context first): counted in that
    call's time and, past ``BUSY_EXCESS_MS`` in most calls, a busy GPU (-1). On the H200 (2026-12-04) a
    flush-only test missed it: each call was charged a time slice (1.5 ms) of the 20 ms spin."""
    assert SIDE_STREAM != cases.CUDA_OK
    cfg = JudgeConfig(device="cuda:0", timed_calls=5, warmup=1, cache_judgements=False, static_rules=False,
                      cache_dir=tmp_path / "cache")
    with Judge(cfg) as j:
        res = j.evaluate(task, solution=SIDE_STREAM, mode="full")
    assert res.candidate is not None, res.to_json()
    busy = any(v.rule == "gpu-busy" for v in res.violations)
    assert res.candidate.median_ms >= 15.0 or (busy and milestone_reward(res) == -1), res.to_json()


def test_noisy_baselines_on_gpu_are_not_cached_and_the_verdict_says_so(tmp_path: Path, task) -> None:
    """The CPU suite's noise case on the GPU: with a spread limit no real timing meets, the baselines are
    measured twice, never cached, and the result says its verdict rests on a noisy measurement."""
    cfg = JudgeConfig(device="cuda:0", timed_calls=5, warmup=1, cache_judgements=True, noise_iqr=1e-12,
                      compile_baseline=False, cache_dir=tmp_path / "cache", work_dir=tmp_path / "jobs")
    with Judge(cfg) as j:
        res = j.evaluate(task, solution=cases.CUDA_OK, mode="full")
    assert res.passed and "noisy measurement" in res.noise, res.to_json()
    assert res.eager is not None and res.eager.source != "cache"
    assert not any((tmp_path / "cache" / "baselines").rglob("*.json"))  # no noisy baseline is cached
