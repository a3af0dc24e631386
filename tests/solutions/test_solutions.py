"""Honest solutions: no rule fires, the CUDA sources compile here, and the judge passes them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cuda_gym.judge.rules import check_submission
from cuda_gym.reward import milestone_reward

from adversarial.judging import judge_config, load_task, make_workspace

HERE = Path(__file__).resolve().parent
SOLUTIONS = sorted(p for p in HERE.iterdir() if (p / "meta.json").exists())


def _meta(path: Path) -> dict:
    return json.loads((path / "meta.json").read_text())


def _params(flavour: str | None = None, fast: bool = False) -> list:
    out = []
    for p in SOLUTIONS:
        meta = _meta(p)
        if flavour and meta["flavour"] != flavour or fast and not meta.get("expect_fast"):
            continue
        out.append(pytest.param(p, id=p.name, marks=[pytest.mark.gpu] if meta["flavour"] == "cuda" else []))
    return out


def test_enough_solutions() -> None:
    metas = [_meta(p) for p in SOLUTIONS]
    assert len(metas) >= 12
    assert sum(bool(m.get("expect_fast")) for m in metas) >= 3
    assert any("cublas" in p.name for p in SOLUTIONS) and any("cudnn" in p.name for p in SOLUTIONS)


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in SOLUTIONS])
def test_no_violation(path: Path) -> None:
    assert check_submission(path, _meta(path)["flavour"]) == []


def _nvidia_includes() -> list[str]:
    try:
        import nvidia
    except ImportError:
        return []
    out = []
    for base in nvidia.__path__:
        for sub in ("cu13/include", "cu12/include", "cudnn/include", "cublas/include"):
            if (Path(base) / sub).is_dir():
                out += ["-I", str(Path(base) / sub)]
    return out


@pytest.fixture(scope="session")
def nvcc() -> str:
    home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    exe = shutil.which("nvcc") or str(Path(home) / "bin" / "nvcc")
    if not Path(exe).exists():
        pytest.skip("nvcc not found: set CUDA_HOME")
    return exe


@pytest.mark.slow
def test_cuda_sources_compile(nvcc: str, tmp_path: Path) -> None:
    """Every distinct .cu compiles for sm_90 with nvcc (device code only: no GPU needed)."""
    seen: dict[bytes, Path] = {}
    for cu in sorted(HERE.glob("cuda_*/kernels/*.cu")):
        seen.setdefault(cu.read_bytes(), cu)
    assert len(seen) >= 7
    for cu in seen.values():
        out = tmp_path / f"{cu.parent.parent.name}_{cu.stem}.o"
        proc = subprocess.run(
            [nvcc, "-c", "-O3", "-std=c++17", "-gencode", "arch=compute_90,code=sm_90", *_nvidia_includes(),
             str(cu), "-o", str(out)],
            capture_output=True, text=True, timeout=300,
        )
        assert proc.returncode == 0, f"{cu}:\n{proc.stderr[-3000:]}"


def _judge(path: Path, device: str, tmp_path: Path, data_dir: Path | None, mode: str = "full"):
    judge_mod = pytest.importorskip("cuda_gym.judge.judge")
    meta = _meta(path)
    task = load_task(meta["task"], data_dir)
    ws = make_workspace(task, path, meta["flavour"], tmp_path)
    with judge_mod.Judge(judge_config(device, tmp_path)) as judge:
        return judge.evaluate(task, workspace=ws, mode=mode)


@pytest.mark.slow
@pytest.mark.parametrize("path", _params("cpu"))
def test_cpu_solution_passes(path: Path, tmp_path: Path) -> None:
    result = _judge(path, "cpu", tmp_path, None)
    assert result.passed, result.to_json()
    assert milestone_reward(result) >= 1


@pytest.mark.parametrize("path", _params("cuda"))
def test_cuda_solution_passes(path: Path, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    data_dir = request.getfixturevalue("data_dir") if _meta(path)["task"].startswith("kernelbench") else None
    result = _judge(path, "cuda:0", tmp_path, data_dir)
    assert result.passed, result.to_json()
    assert milestone_reward(result) >= 1


@pytest.mark.parametrize("path", _params("cuda", fast=True))
def test_fast_solution_earns_3(path: Path, tmp_path: Path) -> None:
    result = _judge(path, "cuda:0", tmp_path, None)
    assert milestone_reward(result) == 3, (result.speedup_vs_eager, result.speedup_vs_compile, result.to_json())
