"""Seeded fuzz of ``KernelEnv.step`` on ``CpuKernel-Builtin-v0``: hostile actions never raise, hang,
flood memory or come back as "internal error", and an honest episode afterwards still earns its reward.

The actions come from ``tests/fuzz_actions.py`` (the 10,000-action run is
``benchmarks/bench_fuzz_step.py``). The judge tools are left out here (seconds each on 2 cores);
bash calls, globs and greps get a 1 s limit so that sleeps and catastrophic regexes run past it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from env_helpers import HONEST, TASK_ID, call, play, write_all
from fuzz_actions import HostileActions, fuzz, make_fuzz_env

ACTIONS = int(os.environ.get("CUDA_GYM_FUZZ_ACTIONS", "2000"))
"""Actions per CI run (``CUDA_GYM_FUZZ_ACTIONS`` overrides)."""

LIMIT_S = 1.0
"""Time limit of each bash call, glob and grep in the fuzz episodes: the per-step limit kept small."""


@pytest.mark.timeout(900)
def test_step_holds_under_hostile_actions(tmp_path: Path) -> None:
    env = make_fuzz_env(tmp_path, LIMIT_S)
    try:
        stats = fuzz(env, HostileActions(seed=12), ACTIONS)
        report = stats.as_dict()
        assert stats.actions == ACTIONS
        assert stats.exceptions == 0, report
        assert stats.internal_errors == 0, report
        assert stats.slow_steps == 0 and stats.max_step_seconds < 30, report
        assert stats.rss_peak_mib - stats.rss_start_mib < 1024, report
        # The same env, a fresh episode: the honest solution is judged as usual.
        total, info, _ = play(env, [write_all(HONEST.files), call("submit")], options={"task_id": TASK_ID})
        assert info["final_eval"] and info["correct"], info
        assert total >= 1
    finally:
        env.close()
