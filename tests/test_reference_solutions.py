"""The reference solutions (baselines/solutions): they cover every builtin task and 20+ KernelBench tasks,
pass the static rules, every CUDA one compiles here (nvcc needs no GPU), and every CPU one passes the
judge on the CPU device (size ``small``). The GPU numbers come from benchmarks/device/eval_references.sh."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cuda_gym.baselines.agents import load_solutions
from cuda_gym.baselines.agents.replay import DemoSolution
from cuda_gym.build import BuildConfig, build_workspace, find_cuda_home
from cuda_gym.judge.rules import check_submission
from cuda_gym.tasks import get_task, load_tasks
from cuda_gym.tasks.task import Task
from cuda_gym.workspace import Workspace

SOLUTIONS = Path(__file__).resolve().parents[1] / "baselines" / "solutions"
CUDA = load_solutions(SOLUTIONS / "cuda")
CPU = load_solutions(SOLUTIONS / "cpu")
BUILTIN = [t.id for t in load_tasks("builtin")]


def _task(task_id: str, data_dir: Path | None) -> Task:
    if task_id.startswith("builtin/"):
        return get_task(task_id, size="small")
    return get_task(task_id, path=data_dir)


def _workspace(solution: DemoSolution, flavour: str, parent: Path, data_dir: Path | None) -> Workspace:
    ws = Workspace.create(_task(solution.task_id, data_dir), flavour=flavour, parent=parent)
    for rel, text in solution.files.items():
        (ws.root / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws.root / rel).write_text(text)
    return ws


def test_every_builtin_task_has_a_cuda_and_a_cpu_solution() -> None:
    assert sorted(t for t in CUDA if t.startswith("builtin/")) == sorted(BUILTIN)
    assert sorted(t for t in CPU if t.startswith("builtin/")) == sorted(BUILTIN)
    for solution in CPU.values():
        assert not any(p.endswith(".cu") for p in solution.files), solution.task_id


def test_kernelbench_solutions_span_the_levels() -> None:
    levels = Counter(t.split("/")[1] for t in CUDA if t.startswith("kernelbench/"))
    assert sum(levels.values()) >= 20 and levels["L1"] >= 10 and levels["L2"] >= 5 and levels["L3"] >= 2, levels


def test_shared_kernels_come_from_bases() -> None:
    """Solutions of one family share byte-identical kernels (one compile in the build cache)."""
    relu, tanh = CUDA["kernelbench/L1/19_ReLU"], CUDA["kernelbench/L1/22_Tanh"]
    assert relu.files["kernels/unary.cu"] == tanh.files["kernels/unary.cu"]
    assert relu.files["model_new.py"] != tanh.files["model_new.py"]
    assert "base" not in relu.files and "task.txt" not in relu.files


@pytest.fixture(scope="module")
def cuda_workspaces(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> dict[str, Workspace]:
    parent = tmp_path_factory.mktemp("cuda_refs")
    return {tid: _workspace(s, "cuda", parent, data_dir) for tid, s in CUDA.items()}


def test_cuda_solutions_pass_the_static_rules(cuda_workspaces: dict[str, Workspace]) -> None:
    found = {tid: [f"{v.rule} {v.file}:{v.line} {v.message}" for v in check_submission(ws.root, "cuda")]
             for tid, ws in cuda_workspaces.items()}
    assert {tid: v for tid, v in found.items() if v} == {}


def test_cpu_solutions_pass_the_static_rules(tmp_path: Path) -> None:
    found = {}
    for tid, solution in CPU.items():
        ws = _workspace(solution, "cpu", tmp_path, None)
        found[tid] = [f"{v.rule} {v.file}:{v.line} {v.message}" for v in check_submission(ws.root, "cpu")]
    assert {tid: v for tid, v in found.items() if v} == {}


ALL_ENV = "CUDA_GYM_ALL_SOLUTIONS"
"""``1``: build and judge every reference solution here, not CI's sample (about 15 minutes cold on 2 cores;
the GPU run, benchmarks/device/eval_references.sh, builds and judges them all anyway)."""
CUDA_SAMPLE = ("builtin/softmax", "kernelbench/L2/12_Gemm_Multiply_LeakyReLU", "builtin/diag_matmul")
CPU_SAMPLE = ("builtin/softmax", "builtin/diag_matmul", "builtin/linear_bias_relu", "builtin/scale_add_relu")


def _selected(ids: list[str], sample: tuple[str, ...]) -> list[str]:
    import os

    return ids if os.environ.get(ALL_ENV) == "1" else [t for t in ids if t in sample]


@pytest.mark.slow
def test_cuda_solutions_build(cuda_workspaces: dict[str, Workspace]) -> None:
    """The CUDA solutions build into extensions (CI: one per kernel family of ``CUDA_SAMPLE``; all of them
    with ``CUDA_GYM_ALL_SOLUTIONS=1``). Families share their kernel files, so the shared build cache
    compiles each distinct file once (about 14 units for 52 solutions)."""
    if find_cuda_home() is None:
        pytest.skip("no CUDA toolkit: set CUDA_HOME")
    config = BuildConfig(arch="9.0")
    chosen = _selected(sorted(cuda_workspaces), CUDA_SAMPLE)
    assert chosen, "the CI sample names no solution"
    # One solution of each family first (they fill the object cache), then the rest in parallel.
    order = sorted(chosen, key=lambda t: "\n".join(sorted(CUDA[t].files)))
    firsts: dict[str, str] = {}
    for tid in order:
        firsts.setdefault(" ".join(sorted(p for p in CUDA[tid].files if p.startswith("kernels/"))), tid)
    results = {tid: build_workspace(cuda_workspaces[tid], config) for tid in firsts.values()}
    rest = [t for t in order if t not in results]
    with ThreadPoolExecutor(2) as pool:
        results.update(zip(rest, pool.map(lambda t: build_workspace(cuda_workspaces[t], config), rest)))
    failed = {tid: r.log[-1500:] for tid, r in results.items() if not r.ok}
    assert failed == {}
    assert all(Path(str(r.module_path)).is_file() for r in results.values())


@pytest.mark.slow
def test_cpu_solutions_pass_the_judge(tmp_path: Path) -> None:
    """CPU solutions are judged on the CPU device at size small (CI: ``CPU_SAMPLE``; all of them with
    ``CUDA_GYM_ALL_SOLUTIONS=1``): built, run in the sandboxed candidate server and checked against the
    reference, held-out shapes included (verify mode: the timings of a 2-core CI machine mean nothing;
    the demo test times one solution in full)."""
    from cuda_gym.judge import Judge, JudgeConfig

    config = JudgeConfig(device="cpu", correctness_trials=2, held_out_shapes=True, cache_judgements=False)
    failed = {}
    with Judge(config) as judge:
        for tid in _selected(sorted(CPU), CPU_SAMPLE):
            solution = CPU[tid]
            task = _task(tid, None)
            ws = _workspace(solution, "cpu", tmp_path, None)
            result = judge.evaluate(task, workspace=ws, mode="verify")
            if not result.correct or result.violations:
                failed[tid] = result.error or result.compile_log[-1500:] or [v.message for v in result.violations]
    assert failed == {}
