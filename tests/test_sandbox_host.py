"""Tests of cuda_gym.host: the host facts the build, the sandbox and the judge share."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

from cuda_gym import host

REPO = Path(__file__).resolve().parent.parent


def _toolkit(root: Path) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "include").mkdir()
    (root / "bin" / "nvcc").write_text("#!/bin/sh\n")
    (root / "bin" / "nvcc").chmod(0o755)
    (root / "include" / "cuda_runtime.h").write_text("\n")
    return root


def test_find_cuda_home_prefers_a_valid_cuda_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kit = _toolkit(tmp_path / "cuda-x")
    monkeypatch.setenv("CUDA_HOME", str(kit))
    assert host.find_cuda_home() == kit.resolve()
    # A CUDA_HOME without headers is no toolkit: the next source is asked (CUDA_PATH here).
    (kit / "include" / "cuda_runtime.h").unlink()
    other = _toolkit(tmp_path / "cuda-y")
    monkeypatch.setenv("CUDA_PATH", str(other))
    assert host.find_cuda_home() == other.resolve()


def test_find_cuda_home_follows_an_exec_wrapper_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kit = _toolkit(tmp_path / "real-cuda")
    wrapper_dir = tmp_path / "wrappers" / "bin"
    wrapper_dir.mkdir(parents=True)
    (wrapper_dir / "nvcc").write_text(f'#!/bin/sh\nexec {kit}/bin/nvcc "$@"\n')
    (wrapper_dir / "nvcc").chmod(0o755)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("PATH", f"{wrapper_dir}:/usr/bin:/bin")
    assert host.find_cuda_home() == kit.resolve()


def test_find_cxx_and_cpu_model() -> None:
    cxx = host.find_cxx()
    if cxx is None:
        pytest.skip("no C++ compiler here")
    assert cxx.exists()
    assert subprocess.run([str(cxx), "--version"], capture_output=True).returncode == 0
    assert host.cpu_model().strip()


def test_sandbox_does_not_import_build() -> None:
    """The build <-> sandbox cycle (issue 13): the sandbox asks cuda_gym.host, never cuda_gym.build."""
    tree = ast.parse((REPO / "cuda_gym" / "sandbox.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not any(m == "cuda_gym.build" or m.startswith("cuda_gym.build.") for m in imported), imported
    assert "cuda_gym.host" in imported


def test_host_is_a_leaf_module() -> None:
    """host imports nothing of the package, so anything may import it."""
    tree = ast.parse((REPO / "cuda_gym" / "host.py").read_text())
    imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not [m for m in imported if m.startswith("cuda_gym")], imported
