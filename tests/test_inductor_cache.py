"""The torch.compile baselines share one inductor cache: a baseline measured again loads its graphs."""

from __future__ import annotations

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


def test_compile_baselines_share_the_judges_inductor_cache(tmp_path: Path) -> None:
    task = get_task("builtin/scale_add_relu", size="small")
    cfg = JudgeConfig(device="cpu", timed_calls=3, warmup=1, cache_dir=tmp_path / "cache", work_dir=tmp_path / "jobs",
                      noise_iqr=0)
    with Judge(cfg) as judge:
        eager, comp, error = judge.baselines(task)
    assert eager is not None and comp is not None, error
    written = _graphs(cfg.cache_dir)  # the sandboxed compile server wrote its graphs to the judge's cache
    assert written, "the compile baseline left no FX graph in the judge's inductor cache"
    for entry in (cfg.cache_dir / "baselines").rglob("*.json"):
        entry.unlink()  # measured again by a new judge: its compile server finds the same graph
    with Judge(cfg) as judge:
        _, again, error = judge.baselines(task)
    assert again is not None and again.source != "cache", error
    assert _graphs(cfg.cache_dir) == written
