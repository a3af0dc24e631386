"""Honest solutions: no rule fires, the CUDA sources compile here, and the judge passes them."""

from __future__ import annotations

from pathlib import Path

import pytest

from adversarial.judging import SharedJudges, honest_solutions, load_task, make_workspace, solution_meta
from cuda_gym.reward import milestone_reward

SOLUTIONS = honest_solutions()


def _params(flavour: str | None = None, fast: bool = False) -> list:
    out = []
    for p in SOLUTIONS:
        meta = solution_meta(p)
        if flavour and meta["flavour"] != flavour or fast and not meta.get("expect_fast"):
            continue
        out.append(pytest.param(p, id=p.name, marks=[pytest.mark.gpu] if meta["flavour"] == "cuda" else []))
    return out


def test_enough_solutions() -> None:
    metas = [solution_meta(p) for p in SOLUTIONS]
    assert len(metas) >= 12
    assert sum(bool(m.get("expect_fast")) for m in metas) >= 3
    assert any("cublas" in p.name for p in SOLUTIONS) and any("cudnn" in p.name for p in SOLUTIONS)


@pytest.mark.slow
def test_cuda_solutions_build(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Every CUDA solution builds into an extension here (nvcc needs no GPU); the build cache makes
    solutions with the same kernels one compile."""
    build = pytest.importorskip("cuda_gym.build")
    if build.find_cuda_home() is None:
        pytest.skip("no CUDA toolkit: set CUDA_HOME")
    built: dict[str, Path] = {}
    for path in SOLUTIONS:
        meta = solution_meta(path)
        if meta["flavour"] != "cuda":
            continue
        data_dir = request.getfixturevalue("data_dir") if meta["task"].startswith("kernelbench") else None
        ws = make_workspace(load_task(meta["task"], data_dir), path, "cuda", tmp_path)
        result = build.build_workspace(ws, build.BuildConfig(arch="9.0"))
        assert result.ok, f"{path.name}:\n{result.log}"
        assert result.module_path is not None and Path(result.module_path).exists()
        built[path.name] = Path(result.module_path)
    assert len(built) >= 8


def _judge(path: Path, device: str, tmp_path: Path, data_dir: Path | None, judges: SharedJudges):
    meta = solution_meta(path)
    task = load_task(meta["task"], data_dir)
    ws = make_workspace(task, path, meta["flavour"], tmp_path)
    return judges.get(device).evaluate(task, workspace=ws, mode="full")


@pytest.mark.slow
@pytest.mark.parametrize("path", _params("cpu"))
def test_cpu_solution_passes(path: Path, tmp_path: Path, judges: SharedJudges) -> None:
    result = _judge(path, "cpu", tmp_path, None, judges)
    assert result.passed, result.to_json()
    assert milestone_reward(result) >= 1


@pytest.mark.parametrize("path", _params("cuda"))
def test_cuda_solution_passes(path: Path, tmp_path: Path, request: pytest.FixtureRequest, judges: SharedJudges) -> None:
    data_dir = request.getfixturevalue("data_dir") if solution_meta(path)["task"].startswith("kernelbench") else None
    result = _judge(path, "cuda:0", tmp_path, data_dir, judges)
    assert result.passed, result.to_json()
    assert milestone_reward(result) >= 1


@pytest.mark.xfail(strict=False, reason=(
    "open (issue 10, measurement quality): two of these kernels run in about 5 us, far below the trusted "
    "clock's resolution on the H200 (calls spread by about 0.1 ms: GPU context switches between the driver's "
    "and the server's processes, benchmarks/results/h200_2026-12-01/REPORT.md), so no speedup over eager is "
    "resolved and claimed for them"))
@pytest.mark.parametrize("path", _params("cuda", fast=True))
def test_fast_solution_earns_3(path: Path, tmp_path: Path, judges: SharedJudges) -> None:
    result = _judge(path, "cuda:0", tmp_path, None, judges)
    assert milestone_reward(result) == 3, (result.speedup_vs_eager, result.speedup_vs_compile, result.to_json())
