"""Build speed: edit-recompile and cache hit against a from-scratch rebuild of the same CUDA workspace.

Run with ``python3 -m pytest benchmarks/bench_build.py --benchmark-only``. Writes a JSON summary
(medians in seconds and the ratios) to ``$BENCH_OUT`` or ``benchmarks/results/bench_build.json``.
Targets on the H200 machine: edit-recompile median <= 1.5 s, cache hit <= 0.1 s.
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from build_fixtures import _built  # noqa: E402
from cuda_gym.build import BuildConfig, build_workspace, find_cuda_home, resolve_arch  # noqa: E402
from cuda_gym.workspace import Workspace  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "bench_build.json"
MEDIANS: dict[str, float] = {}

pytestmark = pytest.mark.skipif(find_cuda_home() is None, reason="needs nvcc (a CUDA toolkit) to compile")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private cache, so the numbers do not depend on earlier runs (the PCH is built once here)."""
    return tmp_path_factory.mktemp("bench_cache")


@pytest.fixture(scope="module")
def built(cache: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Workspace, BuildConfig]:
    """A CUDA add workspace built once (not timed): precompiled header, binding.o and objects warm."""
    add = _built("cuda", BuildConfig(cache_dir=cache, timeout_s=900), tmp_path_factory.mktemp("bench_ws"))
    return add.ws, add.config


def _record(name: str, benchmark: Any) -> None:
    MEDIANS[name] = float(benchmark.stats.stats.median)
    write_summary()  # after each benchmark: a run cut short keeps what it measured


def write_summary() -> None:
    """Write medians and ratios to ``$BENCH_OUT`` (or benchmarks/results/bench_build.json)."""
    if not MEDIANS:
        return
    out = Path(os.environ.get("BENCH_OUT") or RESULTS)
    out.parent.mkdir(parents=True, exist_ok=True)
    scratch = MEDIANS.get("scratch_no_pch")
    ratios = {}
    if scratch:
        for name in ("edit_recompile", "cache_hit", "scratch_with_pch"):
            if name in MEDIANS:
                ratios[f"{name}_over_scratch"] = MEDIANS[name] / scratch
                ratios[f"speedup_{name}"] = scratch / MEDIANS[name] if MEDIANS[name] else float("inf")
    summary = {
        "medians_s": MEDIANS, "ratios": ratios,
        "targets": {"edit_recompile_s": 1.5, "cache_hit_s": 0.1},
        "meets_targets": {"edit_recompile": MEDIANS.get("edit_recompile", 1e9) <= 1.5,
                          "cache_hit": MEDIANS.get("cache_hit", 1e9) <= 0.1},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "arch": resolve_arch()},
    }
    out.write_text(json.dumps(summary, indent=2) + "\n")


def test_edit_recompile(benchmark, built) -> None:
    """(a) One-line edit of a .cu that includes only CUDA headers: recompile it and relink."""
    ws, config = built
    source = ws.root / "kernels" / "add.cu"
    original = source.read_text()
    counter = itertools.count()

    def edit() -> tuple[tuple, dict]:
        # a new constant each round: new content, as an agent's edit (no cache hit)
        source.write_text(original.replace("a[i] + b[i]", f"a[i] + b[i] + {next(counter)}.0f * 0.0f"))
        return (), {}

    def build() -> None:
        result = build_workspace(ws, config)
        assert result.ok and not result.cached, result.log

    benchmark.pedantic(build, setup=edit, rounds=7, iterations=1, warmup_rounds=1)
    source.write_text(original)
    _record("edit_recompile", benchmark)


def test_cache_hit(benchmark, built) -> None:
    """(b) The same contents built before: the module comes from the content-addressed cache."""
    ws, config = built
    assert build_workspace(ws, config).ok  # store the current contents

    def build() -> None:
        result = build_workspace(ws, config)
        assert result.cached

    benchmark.pedantic(build, rounds=50, iterations=1, warmup_rounds=2)
    _record("cache_hit", benchmark)


def _scratch(benchmark, built, *, use_pch: bool, rounds: int) -> None:
    ws, config = built
    scratch_config = BuildConfig(cache_dir=config.cache_dir, timeout_s=900, use_cache=False, use_pch=use_pch)

    def wipe() -> tuple[tuple, dict]:
        shutil.rmtree(ws.build_dir)
        ws.build_dir.mkdir()
        return (), {}

    def build() -> None:
        result = build_workspace(ws, scratch_config)
        assert result.ok and not result.cached, result.log

    benchmark.pedantic(build, setup=wipe, rounds=rounds, iterations=1)


def test_scratch_no_pch(benchmark, built) -> None:
    """(c) CUDA-Agent style: delete the build folder and rebuild everything, no precompiled header."""
    _scratch(benchmark, built, use_pch=False, rounds=2)
    _record("scratch_no_pch", benchmark)


def test_scratch_with_pch(benchmark, built) -> None:
    """(c') A fresh episode's first build here: everything compiles, with the precompiled header."""
    _scratch(benchmark, built, use_pch=True, rounds=2)
    _record("scratch_with_pch", benchmark)
