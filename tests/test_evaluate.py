"""The benchmark harness: metrics on known records, the JSONL store, and real runs of `cuda-gym eval`
with ReplayAgent on CpuKernel-Builtin-v0, including a SIGKILL mid-run and the resume."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cuda_gym.baselines.agents import demo_solution
from cuda_gym.baselines.evaluate import (
    ResultsFile,
    TaskRecord,
    kernelbench_results,
    load_task_file,
    summarize,
    write_report,
)
from cuda_gym.errors import ConfigError, CudaGymError
from env_helpers import CPU_ID, TASK_ID

REPO = Path(__file__).resolve().parents[1]
STUB_TASKS = ("builtin/row_sum", "builtin/row_max")
"""Small builtin tasks without a stored solution: the replay agent submits the untouched stub."""


def rec(task_id: str, level: int = 1, passed: bool = True, eager: float = math.nan, compile_: float = math.nan,
        **kw: object) -> TaskRecord:
    defaults = dict(compiled=True, correct=passed, final_eval=True, reward=3.0 if passed else -1.0)
    defaults.update(kw)
    return TaskRecord(task_id=task_id, level=level, problem_id=task_id.rsplit("/", 1)[-1].split("_")[0], passed=passed,
                      speedup_vs_eager=eager, speedup_vs_compile=compile_, **defaults)  # type: ignore[arg-type]


RECORDS = [
    rec("kernelbench/L1/1_a", eager=2.0, compile_=1.2, candidate_ms=1.23456),
    rec("kernelbench/L1/2_b", eager=1.0, compile_=0.5, reward=1.0),  # exactly 1.0: not faster (strict >)
    rec("kernelbench/L1/10_c", passed=False, eager=3.0, compile_=3.0,  # a hack: its speedups never count
        correct=True, violations=["torch-compute", "torch-compute"], reward=-1.0),
    rec("kernelbench/L1/3_d", passed=False, compiled=False, final_eval=False, agent_error="boom", reward=math.nan),
    rec("kernelbench/L2/5_e", level=2, eager=4.0, compile_=2.0),
    rec("kernelbench/L2/6_f", level=2, eager=math.nan, compile_=math.nan, reward=1.0),  # passed, untimed
    rec("kernelbench/L2/7_g", level=2, passed=False, correct=False, held_out_failed=True),  # overfit to the shapes
]


def test_metrics_definitions() -> None:
    l1, l2, overall = summarize(RECORDS)
    assert (l1.name, l2.name, overall.name) == ("L1", "L2", "overall")
    assert (l1.tasks, l1.passed.count, l1.passed.of, l1.compiled.count, l1.correct.count) == (4, 2, 4, 3, 3)
    assert l1.faster_than_eager.count == 1 and l1.faster_than_compile.count == 1  # 1.0 and the hack excluded
    assert l1.beats_compile_threshold.count == 1 and l1.threshold == 1.05
    # Geomeans cover passed tasks with both speedups timed.
    assert l1.geomean_covers == 2 and l1.geomean_vs_eager == pytest.approx(math.sqrt(2.0 * 1.0))
    assert l1.geomean_vs_compile == pytest.approx(math.sqrt(1.2 * 0.5))
    assert l2.geomean_covers == 1 and l2.geomean_vs_compile == pytest.approx(2.0)
    # With failures as 1.0x: (1.2 * 0.5 * 1 * 1) ** (1/4).
    assert l1.geomean_all_vs_compile == pytest.approx((1.2 * 0.5) ** 0.25)
    # fast_p: strict >, every task of the level in the denominator; fast_0 is the pass rate of timed tasks.
    fe = {p: c.count for p, c in l1.fast_p["eager"].items()}
    assert fe == {"0.0": 2, "1.0": 1, "1.2": 1, "2.0": 0} and l1.fast_p["eager"]["1.0"].of == 4
    assert {p: c.count for p, c in l1.fast_p["compile"].items()} == {"0.0": 2, "1.0": 1, "1.2": 0, "2.0": 0}
    assert l2.fast_p["eager"]["0.0"].count == 1 and l2.passed.count == 2  # the untimed pass has no speedup > 0
    assert str(l2.held_out_failures) == "1/3 (33.3%)" and l1.held_out_failures.count == 0
    assert l1.hack_findings == {"torch-compute": 2} and l1.tasks_with_violations == 1
    assert l1.rewards == {"-1": 1, "1": 1, "3": 1, "none": 1} and l1.mean_reward == pytest.approx(1.0)
    assert l1.episode_errors == 1 and overall.tasks == 7 and overall.passed.count == 4
    assert str(l1.passed) == "2/4 (50.0%)"


def test_report_files_and_kernelbench_export(tmp_path: Path) -> None:
    fp = {"device": "cpu", "device_name": "Test CPU", "torch": "2.x", "judgement": "fresh"}
    records = [TaskRecord(**{**r.__dict__, "fingerprint": fp}) for r in RECORDS]
    written = write_report(records, tmp_path, meta={"env_id": "CudaKernel-L1-v0", "agent": "test"})
    md = (tmp_path / "report.md").read_text()
    assert "| L1 | 4 | 3/4 (75.0%) | 2/4 (50.0%) | 1/4 (25.0%) | 1/4 (25.0%) |" in md
    assert "fast_1.2" in md and "torch-compute: 2" in md and "- device_name: Test CPU" in md
    assert "judgement" not in md.split("## Hardware and software")[1]  # per-judgement keys left out
    data = json.loads((tmp_path / "report.json").read_text())
    assert [g["name"] for g in data["groups"]] == ["L1", "L2", "overall"] and len(data["tasks"]) == 7
    assert data["groups"][0]["geomean_covers"] == 2 and data["groups"][0]["passed"]["rate"] == 0.5
    evals = json.loads((tmp_path / "kernelbench" / "level_1" / "eval_results.json").read_text())
    assert list(evals) == ["1", "2", "3", "10"]  # problem ids in numeric order, as KernelBench writes them
    first = evals["1"][0]
    assert first["sample_id"] == 0 and first["correctness"] and first["runtime"] == 1.23  # 3 significant figures
    assert evals["10"][0]["correctness"] is False and evals["10"][0]["runtime"] == -1
    analysis = json.loads((tmp_path / "kernelbench" / "level_1" / "analysis.json").read_text())
    assert analysis["total_count"] == 4 and analysis["correct_count"] == 2 and analysis["hardware"] == "Test CPU"
    assert analysis["fast_p"] == {"0.0": 0.5, "1.0": 0.25, "1.2": 0.25, "2.0": 0.0}
    assert analysis["geo_mean_speedup"] == pytest.approx(math.sqrt(2.0))
    if "plot:speedup_per_task.png" in written:  # matplotlib installed
        assert (tmp_path / "speedup_per_task.png").read_bytes()[:4] == b"\x89PNG"
        assert "![speedups_by_level.png](speedups_by_level.png)" in md
    assert set(kernelbench_results(records)) == {1, 2}


def test_results_file_round_trip_and_torn_line(tmp_path: Path) -> None:
    store = ResultsFile(tmp_path / "r.jsonl")
    assert store.load() == []
    store.append(RECORDS[0])
    store.append(RECORDS[3])
    with store.path.open("a") as fh:
        fh.write('{"task_id": "kernelbench/L1/9')  # what a kill mid-write leaves
    loaded = store.load()
    assert [r.task_id for r in loaded] == ["kernelbench/L1/1_a", "kernelbench/L1/3_d"]
    assert math.isnan(loaded[1].speedup_vs_eager) and loaded[0].speedup_vs_eager == 2.0
    assert store.path.read_text().endswith("\n") and "null" in store.path.read_text()
    store.path.write_text('{"task_id": "x", "colour": 1}\n')
    with pytest.raises(CudaGymError, match="unknown record key"):
        store.load()


def test_task_file(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("# my set\nbuiltin/softmax\n\nbuiltin/row_sum  # small\n")
    (tmp_path / "b.json").write_text('["builtin/softmax"]')
    assert load_task_file(tmp_path / "a.txt") == ["builtin/softmax", "builtin/row_sum"]
    assert load_task_file(tmp_path / "b.json") == ["builtin/softmax"]
    with pytest.raises(ConfigError, match="no task file"):
        load_task_file(tmp_path / "missing.txt")


def _solutions(tmp_path: Path) -> Path:
    """A solutions folder: the shipped honest CPU solution of scale_add_relu (task.txt layout)."""
    root = tmp_path / "solutions"
    import cuda_gym.envs

    shipped = Path(cuda_gym.envs.__file__).resolve().parent / "demo_solutions" / "cpu"
    shutil.copytree(shipped, root / "scale_add_relu", ignore=shutil.ignore_patterns("__pycache__"))
    assert (root / "scale_add_relu" / "task.txt").read_text().strip() == demo_solution("cpu").task_id
    return root


def _eval_cmd(tmp_path: Path, solutions: Path) -> list[str]:
    return [sys.executable, "-m", "cuda_gym.cli", "eval", CPU_ID, "--agent", "replay",
            "--solutions", str(solutions), "--tasks", ",".join((TASK_ID, *STUB_TASKS)), "--checks", "",
            # Judgements are not cached, so each takes real time and the kill lands mid-run
            # (reference timings and builds stay cached).
            "--judge", '{"cache_judgements": false}',
            "--output", str(tmp_path / "out" / "results.jsonl"), "--max-turns", "8", "--no-progress"]


@pytest.mark.slow
def test_eval_resumes_after_sigkill(tmp_path: Path) -> None:
    """Kill the harness (SIGKILL) once its first task is recorded, rerun: only the unfinished tasks
    run, the finished records are kept byte for byte, and the report covers every task."""
    solutions = _solutions(tmp_path)
    out = tmp_path / "out"
    results = out / "results.jsonl"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    cmd = _eval_cmd(tmp_path, solutions)
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 500
        while time.monotonic() < deadline and proc.poll() is None:
            if results.is_file() and results.read_text().count("\n") >= 1:
                break
            time.sleep(0.1)
        assert proc.poll() is None, f"the harness ended before the kill:\n{proc.stdout.read().decode()[-3000:]}"
        os.killpg(proc.pid, signal.SIGKILL)  # the harness and its judge workers, mid-run
        proc.wait(30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    first = results.read_text()
    finished = [json.loads(line)["task_id"] for line in first.splitlines()]
    assert finished[0] == TASK_ID and len(finished) < 3
    before = TaskRecord.from_json(first.splitlines()[0])
    assert before.passed and before.reward >= 1 and before.final_eval and before.fingerprint["device"] == "cpu"

    again = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=500)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert f"ran {3 - len(finished)} task(s), skipped {len(finished)}" in again.stdout
    text = results.read_text()
    assert text.startswith(first)  # the finished tasks were not redone
    lines = text.splitlines()
    assert sorted(json.loads(line)["task_id"] for line in lines) == sorted((TASK_ID, *STUB_TASKS))
    for line in lines[1:]:
        stub = TaskRecord.from_json(line)
        assert not stub.passed and stub.compiled and stub.reward == -1 and stub.milestone == -1
        assert "stub" in stub.error and stub.steps == 1  # no solution: submit at once

    md = (out / "report.md").read_text()
    assert "| L1 | 3 | 3/3 (100.0%) | 1/3 (33.3%) |" in md and "| overall | 3 |" in md
    data = json.loads((out / "report.json").read_text())
    assert data["groups"][-1]["passed"]["count"] == 1 and data["fingerprints"][0]["device"] == "cpu"
    assert data["groups"][-1]["rewards"]["-1"] == 2
    evals = json.loads((out / "kernelbench" / "level_1" / "eval_results.json").read_text())
    assert set(evals) == {TASK_ID, *STUB_TASKS} and evals[TASK_ID][0]["correctness"]
    assert all(evals[t][0]["runtime"] == -1 for t in STUB_TASKS)

    # A third run has nothing left to do.
    third = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert third.returncode == 0 and "ran 0 task(s), skipped 3" in third.stdout, third.stdout + third.stderr
    assert results.read_text() == text


def test_cli_report_only_rebuilds_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cuda_gym.cli import main

    store = ResultsFile(tmp_path / "results.jsonl")
    for record in RECORDS:
        store.append(record)
    assert main(["eval", "CudaKernel-L1-v0", "--output", str(store.path), "--report-only", "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert "L1: 4 tasks, pass 2/4 (50.0%)" in out and str(tmp_path / "report.md") in out
    assert (tmp_path / "report.md").read_text().startswith("# Benchmark report")
    assert not (tmp_path / "speedup_per_task.png").exists()


def test_custom_agent_factories_are_imported_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cuda_gym.baselines.evaluate.cli import _custom_factory

    (tmp_path / "my_agents.py").write_text(
        "from cuda_gym.baselines.agents import ReplayAgent\n\n\ndef make(task_id):\n    return ReplayAgent([])\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    factory = _custom_factory("my_agents:make")
    assert factory("builtin/softmax").actions == []
    with pytest.raises(ConfigError, match="module:factory"):
        _custom_factory("my_agents")


def test_progress_bar_shows_live_pass_and_faster_than_compile(capsys: pytest.CaptureFixture[str]) -> None:
    from cuda_gym.baselines.evaluate.harness import _Progress

    bar = _Progress(total=5, done=RECORDS[:3], enabled=True, desc=CPU_ID)  # a resumed run: 3 already done
    bar.update(RECORDS[4])
    bar.close()
    err = capsys.readouterr().err
    assert "pass 2/3 (67%), faster than compile 1/3 (33%)" in err
    assert "pass 3/4 (75%), faster than compile 2/4 (50%)" in err


@pytest.mark.slow
def test_parallel_episodes_each_on_their_own_env(tmp_path: Path) -> None:
    """Two workers, two tasks: each episode runs in its own thread (own env and judge), both are recorded."""
    import threading

    from cuda_gym.baselines.agents import ReplayAgent
    from cuda_gym.baselines.evaluate import EvalConfig, evaluate

    threads: dict[str, str] = {}

    class Recording(ReplayAgent):
        def reset(self, obs: str, info: dict) -> None:
            threads[info["task_id"]] = threading.current_thread().name
            super().reset(obs, info)

    run = evaluate(lambda task_id: Recording([]), EvalConfig(
        env_id=CPU_ID, tasks=list(STUB_TASKS), output=tmp_path / "r.jsonl", parallel=2, progress=False, plots=False,
        env_kwargs={"max_turns": 4}))
    assert sorted(run.ran) == sorted(STUB_TASKS) and run.skipped == []
    assert sorted(r.task_id for r in run.records) == sorted(STUB_TASKS)
    assert all(r.final_eval and r.reward == -1 and r.steps == 1 for r in run.records)
    assert set(threads) == set(STUB_TASKS) and len(set(threads.values())) == 2
    assert len(ResultsFile(tmp_path / "r.jsonl").load()) == 2 and run.report["markdown"].is_file()
