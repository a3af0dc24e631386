"""The torch.compile baselines share one inductor cache, which ``Judge.prewarm_compile`` fills ahead."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cuda_gym.judge import Judge, JudgeConfig
from cuda_gym.judge.baselines import inductor_cache
from cuda_gym.tasks import get_task

pytestmark = pytest.mark.slow


def _graphs(root: Path) -> set[str]:
    """The FX graphs in the inductor cache (one folder per cache key)."""
    base = inductor_cache(root) / "fxgraph"
    return {str(p.relative_to(base)) for p in base.glob("*/*") if p.is_dir()} if base.is_dir() else set()


def test_prewarm_fills_the_inductor_cache_that_the_compile_baseline_loads(tmp_path: Path) -> None:
    task = get_task("builtin/scale_add_relu", size="small")
    code = task.code.replace("def forward(self", "def forward(self, extra")
    broken = dataclasses.replace(task, id="custom/broken", code=code)  # its reference cannot run
    cfg = JudgeConfig(device="cpu", timed_calls=3, warmup=1, cache_dir=tmp_path / "cache", work_dir=tmp_path / "jobs",
                      noise_iqr=0)
    with Judge(cfg) as judge:
        errors = judge.prewarm_compile([task, broken], jobs=2)
        assert errors[task.id] == "" and "missing 1 required positional argument" in errors["custom/broken"], errors
        warmed = _graphs(cfg.cache_dir)  # a compile server wrote its graph to the judge's inductor cache
        assert warmed, "prewarm left no FX graph in the judge's inductor cache"
        assert not judge.baseline_cached(task)  # nothing was cached as a baseline
        eager, comp, error = judge.baselines(task)
    assert eager is not None and comp is not None and comp.source == "measured", error
    assert _graphs(cfg.cache_dir) == warmed  # the timed compile server found the same graph: no new one
