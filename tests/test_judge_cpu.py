"""The whole judge path on the CPU device: real compiles, real sandboxed worker processes, real timings."""

from __future__ import annotations

import dataclasses
import errno
import json
import math
import os
import selectors
import time
from pathlib import Path

import pytest
import torch

import judge_cases as cases
from cuda_gym.errors import ConfigError, JudgeError
from cuda_gym.judge import Judge, JudgeConfig, JudgeResult
from cuda_gym.judge.baselines import BaselineCache
from cuda_gym.judge.compare import compare_outputs, constant_would_pass
from cuda_gym.reward import milestone_reward
from cuda_gym.tools.render import render_submit

TOL = {"float32": (1e-2, 1e-2), "float64": (1e-2, 1e-2), "float16": (1e-2, 1e-2)}


# ---------------------------------------------------------------------------- comparison (no processes)


def test_compare_accepts_within_tolerance_and_reports_errors() -> None:
    r = torch.linspace(-3, 3, 100)
    ok = compare_outputs(r, r + 0.005, TOL)
    assert ok.passed and 0.004 < ok.max_abs_error < 0.006
    bad = compare_outputs(r, r + 0.5, TOL)
    assert not bad.passed and "outside atol=0.01" in bad.message and bad.max_abs_error == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("ref", "cand", "needle"),
    [
        (torch.zeros(3), torch.zeros(4), "shape"),
        (torch.zeros(3), torch.zeros(3, dtype=torch.float64), "dtype"),
        (torch.zeros(3), (torch.zeros(3),), "expected Tensor, got tuple"),
        ((torch.zeros(3), torch.zeros(2)), (torch.zeros(3),), "length"),
        ({"a": torch.zeros(1)}, {"b": torch.zeros(1)}, "keys"),
        (torch.zeros(3), torch.tensor([0.0, float("nan"), 0.0]), "NaN or inf"),
        (torch.tensor([1.0, float("nan")]), torch.tensor([1.0, 2.0]), "reference is NaN"),
        (torch.tensor([1, 2, 3]), torch.tensor([1, 2, 4]), "integer elements differ"),
        (3, 4, "expected 3"),
        (torch.zeros(3), torch.nn.Parameter(torch.zeros(3)), "subclass"),
    ],
)
def test_compare_rejects(ref: object, cand: object, needle: str) -> None:
    res = compare_outputs(ref, cand, TOL)
    assert not res.passed
    assert needle in res.message


def test_compare_matching_non_finite_and_nested_structures() -> None:
    ref = (torch.tensor([1.0, float("inf"), float("nan")]), [torch.tensor([1, 2])], {"k": 2.0})
    cand = (torch.tensor([1.001, float("inf"), float("nan")]), [torch.tensor([1, 2])], {"k": 2.001})
    assert compare_outputs(ref, cand, TOL).passed
    assert not compare_outputs(ref, (ref[0], [torch.tensor([1, 3])], {"k": 2.0}), TOL).passed


def test_constant_would_pass_flags_low_variance_outputs() -> None:
    g = torch.Generator().manual_seed(0)
    varied = [torch.randn(64, generator=g) for _ in range(3)]
    assert constant_would_pass(varied, TOL) == ""
    tiny = [1e-4 * torch.randn(64, generator=g) for _ in range(3)]
    assert "all-zero" in constant_would_pass(tiny, TOL)
    shifted = [5.0 + 1e-4 * torch.randn(64, generator=g) for _ in range(3)]
    assert "constant" in constant_would_pass(shifted, TOL)
    fixed = torch.randn(64, generator=g) * 10
    same = [fixed + 1e-5 * torch.randn(64, generator=g) for _ in range(3)]
    assert "depends on the inputs" in constant_would_pass(same, TOL)


def test_config_validation_names_the_problem() -> None:
    with pytest.raises(ConfigError, match="device"):
        JudgeConfig(device="tpu")
    with pytest.raises(JudgeError, match="correctness_trials"):
        JudgeConfig(correctness_trials=0)
    with pytest.raises(JudgeError, match="unknown JudgeConfig field"):
        JudgeConfig.from_dict({"devise": "cpu"})
    cfg = JudgeConfig(device="cpu")
    assert cfg.n_timed == 10 and cfg.tolerance("float32") == (1e-2, 1e-2)
    assert JudgeConfig(device="cuda").n_timed == 50
    # short GPU timing runs go on to 0.3 s of windows unless the call count was chosen
    assert JudgeConfig(device="cuda").window_s == 0.3 and cfg.window_s == 0.0
    assert JudgeConfig(device="cuda", timed_calls=20).window_s == 0.0
    with pytest.raises(JudgeError, match="timed_window_s"):
        JudgeConfig(timed_window_s=-1.0)


def test_timing_runs_go_on_until_their_windows_add_up(judge_env: dict[str, Path], task, tmp_path: Path) -> None:
    cfg = JudgeConfig(device="cpu", timed_calls=2, timed_window_s=0.03, max_timed_calls=25, warmup=1,
                      compile_baseline=False, cache_judgements=False, noise_iqr=0, **judge_env)
    with Judge(cfg) as j:
        res = j.evaluate(task, solution=write(tmp_path, cases.HONEST), mode="full")
    assert res.passed, res.error
    assert res.candidate is not None and res.eager is not None
    # every call's window is well under 30 ms here: more than the two calls, at most the cap, each checked
    assert 2 < res.candidate.trials <= 25 and sum(t.timed for t in res.trials) == res.candidate.trials


def test_baseline_cache_roundtrip(tmp_path: Path) -> None:
    cache = BaselineCache(tmp_path)
    path = cache.path("abc", "NVIDIA H200 / SXM", "2.9.0+cu130", "float32")
    assert path.relative_to(tmp_path).parts == ("abc", "NVIDIA_H200_SXM", "2.9.0+cu130", "float32.json")
    assert cache.get(path) is None
    with cache.lock(path):
        cache.put(path, {"eager": {"median_ms": 1.0}, "compile": None})
    assert cache.get(path) == {"eager": {"median_ms": 1.0}, "compile": None}
    path.write_text("{broken")
    assert cache.get(path) is None


# ---------------------------------------------------------------------------- the real judge on the CPU


@pytest.fixture(scope="module")
def task():
    return cases.small_task()


@pytest.fixture(scope="module")
def judge_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("judge_cpu")
    return {"cache_dir": root / "cache", "work_dir": root / "jobs"}


@pytest.fixture(scope="module")
def judge(judge_env: dict[str, Path]):
    # noise_iqr=0: a loaded CI machine's spread must not keep the baselines out of the cache here
    # (test_noisy_baselines_are_not_cached checks that rule on its own).
    cfg = JudgeConfig(device="cpu", timed_calls=5, warmup=2, cache_judgements=False, noise_iqr=0, **judge_env)
    with Judge(cfg) as j:
        yield j


def write(tmp_path: Path, source: str, name: str = "solution.py") -> Path:
    path = tmp_path / name
    path.write_text(source)
    return path


def test_honest_single_file_passes_with_timings_and_cached_baselines(judge: Judge, task, tmp_path: Path) -> None:
    res = judge.evaluate(task, solution=write(tmp_path, cases.HONEST), mode="full")
    assert res.compiled, res.compile_log
    assert res.error == "", res.error
    assert res.correct and res.violations == [], res.violations
    assert len(res.trials) == 5 + 5 and sum(t.timed for t in res.trials) == 5  # every timed call is checked
    assert len({t.seed for t in res.trials}) == 10  # fresh inputs per call
    assert res.candidate is not None and res.candidate.trials == 5 and res.candidate.median_ms > 0
    assert res.eager is not None and res.eager.median_ms > 0
    assert res.compile is not None and res.compile.median_ms > 0, res.fingerprint
    assert milestone_reward(res) >= 1
    assert 0 < res.timed_seconds < res.seconds
    assert res.fingerprint["device"] == "cpu" and res.fingerprint["torch"] == torch.__version__
    info = res.to_info()
    assert info["passed"] and info["trials_passed"] == 10
    # trusted times: the round trip minus the overhead calibrated before the submission loaded
    assert res.candidate.overhead_ms > 0 and res.candidate.host_median_ms >= res.candidate.median_ms
    assert JudgeResult.from_dict(json.loads(res.to_json())).to_info()["candidate_ms"] == pytest.approx(info["candidate_ms"])
    # what the CPUs did during the timing run (diagnostics of the clock, from /proc/stat's 10 ms ticks: a run
    # this short may fall between two ticks, then there is none); unpinned on the CPU: no timing-CPU keys
    cpu = {k: v for k, v in res.diagnostics.items() if k.startswith("cpu_")}
    assert set(cpu) <= {"cpu_others_busy", "cpu_steal"} and all(0.0 <= v <= os.cpu_count() for v in cpu.values()), cpu
    # The second evaluation takes both baselines from the on-disk cache.
    again = judge.evaluate(task, solution=cases.HONEST, mode="full")
    assert again.passed
    assert again.eager is not None and again.eager.source == "cache"
    assert again.compile is not None and again.compile.source == "cache"
    assert again.eager.median_ms == res.eager.median_ms


def test_noisy_baselines_are_not_cached_and_the_verdict_says_so(judge_env: dict[str, Path], task, tmp_path: Path) -> None:
    """With a spread limit no real timing meets, every baseline is noisy: measured twice, never cached."""
    cfg = JudgeConfig(device="cpu", timed_calls=5, warmup=1, cache_judgements=True, compile_baseline=False,
                      noise_iqr=1e-12, cache_dir=tmp_path / "cache", work_dir=judge_env["work_dir"])
    with Judge(cfg) as j:
        res = j.evaluate(task, solution=cases.HONEST, mode="full")
        assert res.passed and "noisy measurement" in res.noise, res.noise
        assert not any((tmp_path / "cache" / "baselines").rglob("*.json"))  # no noisy baseline is cached


def _fresh_judge(judge_env: dict[str, Path], tmp_path: Path) -> Judge:
    """A CPU judge with an empty cache of its own: a task's baselines are not measured yet."""
    return Judge(JudgeConfig(device="cpu", timed_calls=3, warmup=1, compile_baseline=False, cache_judgements=False,
                             noise_iqr=0, cache_dir=tmp_path / "cache", work_dir=judge_env["work_dir"]))


def test_baselines_are_measured_before_the_candidate_runs(judge_env: dict[str, Path], task, tmp_path: Path) -> None:
    """A task's first timed evaluation measures its baselines before any of the candidate's code runs, on the
    CPU as on a GPU: kernel work that outlives a killed server (red team 6's namespace teardown) would slow
    them for every later speedup of the task. An incorrect candidate finds them measured and cached."""
    with _fresh_judge(judge_env, tmp_path) as j:
        assert not j.baseline_cached(task)
        wrong = j.evaluate(task, solution=cases.WRONG, mode="full")
        assert wrong.compiled and not wrong.correct and wrong.eager is None, wrong.to_json()
        assert j.baseline_cached(task)
        honest = j.evaluate(task, solution=cases.HONEST, mode="full")
    assert honest.passed and honest.eager is not None and honest.eager.source == "cache", honest.to_json()


# The task's reference, made to run only where this test's variable is: in the judge's reference worker (which
# inherits the test's environment), never in a sandboxed server (whose environment the judge writes).
HOST_ONLY_REFERENCE = """
import os as _os

_forward = Model.forward


def _host_only(self, *args):
    if _os.environ.get("CUDA_GYM_TEST_REFERENCE_HOST") != "1":
        raise RuntimeError("this reference runs only in the judge's reference worker")
    return _forward(self, *args)


Model.forward = _host_only
"""


def test_a_reference_that_cannot_be_timed_costs_only_correct_candidates_their_verdict(
    judge_env: dict[str, Path], task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Baselines come first, but their failure is the judge's error only where a speed needs them: an
    incorrect candidate still gets its -1; a correct one, whose speedup has nothing to divide, a JudgeError."""
    monkeypatch.setenv("CUDA_GYM_TEST_REFERENCE_HOST", "1")
    untimeable = dataclasses.replace(task, id="custom/host_only_gelu", name="host_only_gelu",
                                     code=task.code + HOST_ONLY_REFERENCE)
    with _fresh_judge(judge_env, tmp_path) as j:
        wrong = j.evaluate(untimeable, solution=cases.WRONG, mode="full")
        assert wrong.compiled and not wrong.correct and milestone_reward(wrong) == -1, wrong.to_json()
        with pytest.raises(JudgeError, match="could not be timed.*runs only in the judge's reference worker"):
            j.evaluate(untimeable, solution=cases.HONEST, mode="full")


def test_wrong_output_fails_a_trial(judge: Judge, task) -> None:
    res = judge.evaluate(task, solution=cases.WRONG, mode="verify")
    assert res.compiled and not res.error
    assert not res.correct and milestone_reward(res) == -1
    assert all(not t.passed for t in res.trials)
    assert "outside atol" in res.trials[0].message
    assert res.candidate is None and res.eager is None  # verify mode does not time


def test_the_judge_waits_without_epoll(judge: Judge, task, monkeypatch: pytest.MonkeyPatch) -> None:
    """A candidate's sandbox runs as the judge's user and can use up that user's epoll watches (red team 8, E1;
    tests/test_sandbox.py): the orchestrator waits for its reference worker, and the worker's sandboxes for
    their output, with poll(2), so every epoll registration of the user failing changes no verdict."""

    def no_watches_left(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(selectors.EpollSelector, "register", no_watches_left)
    res = judge.evaluate(task, solution=cases.WRONG, mode="verify")
    assert res.compiled and not res.correct and "outside atol" in res.trials[0].message, res.to_json()


def test_uninitialised_output_fails_thanks_to_poisoned_memory(judge: Judge, task) -> None:
    res = judge.evaluate(task, solution=cases.EMPTY, mode="verify")
    assert res.compiled and not res.error
    assert not any(t.passed for t in res.trials), res.trials


def test_exception_crash_and_next_evaluation(judge: Judge, task) -> None:
    res = judge.evaluate(task, solution=cases.EXCEPTION, mode="full")
    assert res.compiled and not res.correct
    assert "RuntimeError: boom in forward" in res.error and "correctness" in res.error
    assert "solution.py" in res.error  # the candidate's frame is shown
    crash = judge.evaluate(task, solution=cases.CRASH, mode="full")
    assert not crash.correct and "server process died" in crash.error, crash.error
    assert milestone_reward(crash) == -1
    ok = judge.evaluate(task, solution=cases.HONEST, mode="verify")
    assert ok.passed, (ok.error, ok.violations)


def test_hang_is_killed_at_the_wall_limit(judge_env: dict[str, Path], task) -> None:
    cfg = JudgeConfig(device="cpu", call_timeout_s=1, cache_judgements=False, **judge_env)
    with Judge(cfg) as j:
        # the worker's start and the task's preparation first: the bound is about the hang (~21 s), not them
        assert j.evaluate(task, solution=cases.HONEST, mode="verify").passed
        start = time.monotonic()
        res = j.evaluate(task, solution=cases.HANG, mode="verify")
        assert time.monotonic() - start < 60
        assert not res.correct and "killed" in res.error and "time bound" in res.error, res.error
        assert "correctness" in res.error  # the stage it hung in
        # The same judge works next: a PyTorch-only ModelNew is correct but breaks the no-fallback rule.
        ok = j.evaluate(task, solution=cases.TORCH_FALLBACK, mode="verify")
        assert ok.correct, ok.error
        assert any(v.rule == "torch-compute" for v in ok.violations) and milestone_reward(ok) == -1


def test_a_static_violation_is_checked_but_not_timed(judge: Judge, task) -> None:
    """A rule the static checks found scores -1 whatever the speed: the trials run, the timed calls do not."""
    res = judge.evaluate(task, solution=cases.TORCH_FALLBACK, mode="full")
    assert res.correct and res.trials and any(v.rule == "torch-compute" for v in res.violations), res.to_json()
    assert res.candidate is None and res.eager is None and milestone_reward(res) == -1
    assert "Not timed" in render_submit(res)
    honest = judge.evaluate(task, solution=cases.HONEST, mode="full")
    assert honest.passed and honest.candidate is not None, honest.to_json()  # the timed path still runs


def test_a_folder_chain_left_by_the_server_is_removed_with_its_job(tmp_path: Path, task) -> None:
    """Whatever the server leaves in the folders it may write, the evaluation ends in a verdict and the job
    folder is gone (a 3000-deep chain made ``shutil.rmtree`` raise ``RecursionError`` after the verdict)."""
    cfg = JudgeConfig(device="cpu", cache_judgements=False, static_rules=False, cache_dir=tmp_path / "cache",
                      work_dir=tmp_path / "jobs")
    with Judge(cfg) as j:
        res = j.evaluate(task, solution=cases.DEEP_FOLDERS, mode="verify")
    assert res.compiled and not res.correct, res.to_json()  # the first call passed, the next ones could not mkdir
    assert not any((tmp_path / "jobs").iterdir()), list((tmp_path / "jobs").iterdir())


def test_a_server_that_fills_its_folder_is_stopped_at_its_entries_bound(tmp_path: Path, task) -> None:
    """Every entry a server makes is walked by the driver's side about every second: a candidate server
    may keep ``SERVER_ENTRIES`` (a million empty folders held a judge lane for minutes)."""
    cfg = JudgeConfig(device="cpu", cache_judgements=False, static_rules=False, cache_dir=tmp_path / "cache",
                      work_dir=tmp_path / "jobs")
    with Judge(cfg) as j:
        res = j.evaluate(task, solution=cases.MANY_FILES, mode="verify")
    assert res.compiled and not res.correct and "entries" in res.error, res.to_json()
    assert not any((tmp_path / "jobs").iterdir())


def test_import_errors_are_compile_failures(judge: Judge, task) -> None:
    res = judge.evaluate(task, solution=cases.SYNTAX_ERROR, mode="verify")
    assert not res.compiled and "SyntaxError" in res.compile_log
    res = judge.evaluate(task, solution=cases.NO_MODEL, mode="verify")
    assert not res.compiled and "no ModelNew" in res.compile_log


def test_input_mutation_and_python_threads_are_violations(judge: Judge, task) -> None:
    res = judge.evaluate(task, solution=cases.MUTATES, mode="verify")
    assert any(v.rule == "input-mutation" and "input 0" in v.message for v in res.violations), res.violations
    assert milestone_reward(res) == -1
    # The static rules flag the threading import; with them off, the runtime sees the threads.
    cfg = dataclasses.replace(judge.config, static_rules=False)
    with Judge(cfg) as j:
        res = j.evaluate(task, solution=cases.THREAD, mode="verify")
    assert any(v.rule == "thread" and "thread" in v.message for v in res.violations), res.violations


def test_forked_helpers_are_counted_by_the_driver(judge_env: dict[str, Path], task) -> None:
    """A forward that forks: the driver sees the server's child processes in /proc (static rules off)."""
    cfg = JudgeConfig(device="cpu", cache_judgements=False, static_rules=False, **judge_env)
    with Judge(cfg) as j:
        res = j.evaluate(task, solution=cases.FORK, mode="verify")
    assert res.correct and any(v.rule == "process" for v in res.violations), res.to_json()
    assert milestone_reward(res) == -1


def test_profile_mode_returns_kernel_tables(judge: Judge, task) -> None:
    res = judge.evaluate(task, solution=cases.HONEST, mode="profile")
    assert res.passed, (res.error, res.violations)
    assert res.profile and res.reference_profile
    assert any("gelu" in k.name.lower() for k in res.reference_profile), res.reference_profile
    assert math.isclose(sum(k.share for k in res.profile), 1.0, rel_tol=1e-6) or len(res.profile) == 15


def test_judgement_cache_makes_repeats_cheap(judge_env: dict[str, Path], task) -> None:
    cfg = JudgeConfig(device="cpu", timed_calls=3, warmup=1, compile_baseline=False, **judge_env)
    with Judge(cfg) as j:
        first = j.evaluate(task, solution=cases.HONEST, mode="verify")
        assert first.passed and "judgement" not in first.fingerprint
        start = time.perf_counter()
        second = j.evaluate(task, solution=cases.HONEST, mode="verify")
        assert time.perf_counter() - start < 1.0
        assert second.fingerprint.get("judgement") == "cache" and second.passed
        assert [t.seed for t in second.trials] == [t.seed for t in first.trials]
        other = j.evaluate(task, solution=cases.WRONG, mode="verify")
        assert not other.passed and "judgement" not in other.fingerprint


def test_evaluate_argument_errors(judge: Judge, task, tmp_path: Path) -> None:
    with pytest.raises(JudgeError, match="exactly one"):
        judge.evaluate(task, mode="verify")
    with pytest.raises(JudgeError, match="mode"):
        judge.evaluate(task, solution="x", mode="fast")  # type: ignore[arg-type]
    with pytest.raises(JudgeError, match="does not exist"):
        judge.evaluate(task, solution=tmp_path / "missing.py")


# ---------------------------------------------------------------------------- workspaces (real builds)

from build_fixtures import add_task, write_add_kernels  # noqa: E402


def test_workspace_passes_then_tampering_and_compile_errors_are_reported(
    cpu_add_build, judge_env: dict[str, Path], tmp_path: Path
) -> None:
    ws = cpu_add_build.ws
    cfg = JudgeConfig(device="cpu", timed_calls=3, warmup=1, compile_baseline=False, cache_judgements=False,
                      build=cpu_add_build.config, **judge_env)
    with Judge(cfg) as j:
        res = j.submit(ws)
        assert res.passed, res.to_json()
        assert res.candidate is not None and res.eager is not None and res.compile is None
        assert math.isnan(res.speedup_vs_compile) and milestone_reward(res) in (1, 2)
        assert j.verify(ws).passed
        # A broken kernel in a copy of the workspace: compiled=False with the compiler's file:line.
        from cuda_gym.workspace import Workspace

        broken = Workspace.create(add_task(), flavour="cpu", parent=tmp_path)
        write_add_kernels(broken)
        (broken.root / "kernels" / "add.cpp").write_text("void add_cpu(const float* a) { return a +; }\n")
        bad = j.verify(broken)
        assert not bad.compiled and "kernels/add.cpp" in bad.compile_log
        assert milestone_reward(bad) == -1
        # The judge compiles in the sandbox: a host file outside the workspace cannot be read into the log.
        from cuda_gym.sandbox import sandbox_mode

        if sandbox_mode() == "bwrap":
            secret = tmp_path / "host_secret.h"
            secret.write_text("#error HOST_SECRET_7f3a\n")
            (broken.root / "kernels" / "add.cpp").write_text(f'#include "{secret}"\nvoid add_cpu() {{}}\n')
            leak = j.verify(broken)
            assert not leak.compiled and "host_secret.h" in leak.compile_log, leak.compile_log
            assert "HOST_SECRET_7f3a" not in leak.compile_log, leak.compile_log
        # Tampering with a protected file is a violation even when the outputs are right.
        model_py = broken.root / "model.py"
        write_add_kernels(broken)
        model_py.chmod(0o644)
        model_py.write_text(model_py.read_text() + "\n# edited\n")
        tampered = j.verify(broken)
        assert tampered.correct and any(v.rule == "infra-tamper" and "model.py" in v.message for v in tampered.violations)


# ---------------------------------------------------------------------------- CLI


def test_cli_judge_prints_verdict_and_json(judge_env: dict[str, Path], tmp_path: Path, monkeypatch, capsys) -> None:
    from cuda_gym.build.store import cache_root
    from cuda_gym.cli import main

    # the module fixture's judge built this extension in the default build cache: keep using it
    monkeypatch.setenv("CUDA_GYM_BUILD_CACHE", str(cache_root()))
    monkeypatch.setenv("CUDA_GYM_CACHE_DIR", str(judge_env["cache_dir"]))
    path = write(tmp_path, cases.WRONG)
    argv = ["judge", "--task", cases.TASK_ID, "--size", "small", "--solution", str(path), "--device", "cpu",
            "--mode", "verify"]
    code = main(argv)
    out = capsys.readouterr().out
    assert code == 1 and "FAILED" in out and "milestone reward -1" in out and "failed check" in out
    code = main([*argv, "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and data["milestone"] == -1 and data["correct"] is False and len(data["trials"]) == 5
    assert main(["judge", "--task", "builtin/no_such_task", "--solution", str(path), "--device", "cpu"]) == 2


def test_cli_baselines_measure_is_resumable(judge_env: dict[str, Path], monkeypatch, capsys) -> None:
    from cuda_gym.cli import main

    monkeypatch.setenv("CUDA_GYM_CACHE_DIR", str(judge_env["cache_dir"]))
    # --noise-iqr 0: a loaded CI machine's spread must not keep these baselines out of the cache
    args = ["baselines", "measure", "--source", "builtin", "--size", "small", "--device", "cpu", "--limit", "2",
            "--no-compile", "--noise-iqr", "0"]
    assert main(args) == 0
    assert "measured 2, already cached 0" in capsys.readouterr().out
    assert main(args) == 0
    assert "measured 0, already cached 2" in capsys.readouterr().out


def test_sample_large_keeps_shape_and_draws_the_same_positions_for_the_same_seed() -> None:
    from cuda_gym.judge.harness import SAMPLED_KEY, sample_large

    ref = torch.randn(300, 300)
    a, b = sample_large(ref, 7, threshold=1024), sample_large(ref.clone(), 7, threshold=1024)
    assert a[SAMPLED_KEY] == [300, 300] and torch.equal(a["values"], b["values"])
    assert not torch.equal(a["values"], sample_large(ref, 8, threshold=1024)["values"])
    assert sample_large(ref, 7, threshold=ref.numel() * 4) is ref  # small tensors stay whole
    half = ref.clone()
    half[150:] = 0  # half the output never computed
    assert not compare_outputs(a, sample_large(half, 7, threshold=1024), {"float32": (1e-2, 1e-2)}).passed
    assert not compare_outputs(a, sample_large(ref.reshape(900, 100), 7, threshold=1024), {}).passed


def test_a_prepared_task_keeps_its_output_layout_but_not_its_output() -> None:
    """The worker holds a task as long as it judges it: its calibration template is a ``meta`` copy of the
    reference output's layout (a KernelBench output of 6 GiB was held whole before)."""
    from cuda_gym.judge.reference_worker import _Prepared

    code = (
        "import torch\n"
        "class Model(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return (x * 2, {'t': x.t(), 'n': 3})\n"
        "def get_inputs():\n"
        "    return [torch.randn(64, 32)]\n"
        "def get_init_inputs():\n"
        "    return []\n"
    )
    prepared = _Prepared(code, "f" * 64, "cpu", 1)
    doubled, rest = prepared.template
    assert doubled.device.type == "meta" and doubled.shape == (64, 32) and doubled.dtype == torch.float32
    assert rest["t"].device.type == "meta" and rest["t"].shape == (32, 64) and rest["t"].stride() == (1, 32)
    assert rest["n"] == 3
    assert prepared.facts.output_bytes == 2 * 64 * 32 * 4


def test_sampled_comparison_end_to_end(judge_env: dict[str, Path], task) -> None:
    """With a tiny sampling threshold every output is compared on a sample: honest passes, wrong fails."""
    cfg = JudgeConfig(device="cpu", timed_calls=2, warmup=1, checked_timed_calls=1, cache_judgements=False,
                      sample_threshold_bytes=256, **judge_env)
    with Judge(cfg) as j:
        assert j.evaluate(task, solution=cases.HONEST, mode="verify").correct
        assert not j.evaluate(task, solution=cases.WRONG, mode="verify").correct
