"""Sandboxes run at niceness 19 (agent commands, builds, recordings); the judge's timed servers at 0."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from adversarial.judging import SOLUTIONS, SharedJudges, load_task, make_workspace
from cuda_gym.sandbox import Limits, Sandbox, cpu_weight, cpu_weight_applies

NICE = "import os; print('nice', os.nice(0))"

SPIN = ("import os, sys, time\nos.sched_setaffinity(0, {0})\nstart = float(sys.argv[1])\n"
        "while time.time() < start:\n    time.sleep(0.005)\ncpu0 = time.process_time()\nend = start + 2.0\n"
        "while time.time() < end:\n    pass\nprint('cpu', time.process_time() - cpu0)")
"""From the wall-clock time ``argv[1]`` (both spinners start together, whenever their sandboxes came up), spin
on CPU 0 for 2 s; print the CPU time it got meanwhile."""


def _spin_pair(box: Path, mode: Any = None) -> dict[str, float]:
    """CPU seconds a nice-19 and a nice-0 spinner, each in a sandbox (and writable folder) of its own, got on one
    CPU in 2 s."""
    import time

    start = str(time.time() + 3.0)
    (box / "low").mkdir()
    (box / "high").mkdir()
    low = Sandbox(writable=[box / "low"], mode=mode).start(["python3", "-c", SPIN, start], cwd=box / "low",
                                                           limits=Limits(wall_s=30, nice=19))
    high = Sandbox(writable=[box / "high"], mode=mode).start(["python3", "-c", SPIN, start], cwd=box / "high",
                                                             limits=Limits(wall_s=30, nice=0))
    low.wait()
    high.wait()
    return {name: float(proc.result().output.split("cpu")[-1]) for name, proc in (("low", low), ("high", high))}


def test_sandboxed_commands_run_at_nice_19_unless_told(box: Path) -> None:
    assert "nice 19" in Sandbox(writable=[box]).run(["python3", "-c", NICE], cwd=box).output
    assert "nice 0" in Sandbox(writable=[box]).run(["python3", "-c", NICE], cwd=box, limits=Limits(nice=0)).output


@pytest.mark.slow
def test_the_candidate_server_is_timed_at_nice_0(tmp_path: Path, judges: SharedJudges) -> None:
    task = load_task("custom:scale_relu")
    ws = make_workspace(task, SOLUTIONS / "cpu_scale_relu", "cpu", tmp_path)
    (ws.root / "model_new.py").write_text(
        "import os\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
        "    def __init__(self, scale):\n        super().__init__()\n\n"
        "    def forward(self, x):\n        raise RuntimeError(f'server nice={os.nice(0)}')\n"
    )
    result = judges.get("cpu", static_rules=False).evaluate(task, workspace=ws, mode="verify")
    assert "server nice=0" in result.error, result.error


def test_nice_maps_to_the_kernels_weights() -> None:
    assert cpu_weight(0, 1) == 1024 and cpu_weight(0, 2) == 100
    assert cpu_weight(19, 1) == 15 and cpu_weight(19, 2) == 1
    assert cpu_weight(5, 1) == 336 and cpu_weight(5, 2) == 33


@pytest.mark.skipif(not cpu_weight_applies(), reason="no writable cpu cgroup here")
def test_a_nice_sandbox_yields_the_cpu_to_a_timed_one(box: Path) -> None:
    """Two spinners on one CPU, each in a sandbox (a session of its own): the nice-19 one (a build, an agent
    command) gets a small share against the nice-0 one (a timed server), not the half that a niceness alone
    gives it where the kernel groups sessions (autogroup)."""
    got = _spin_pair(box)
    assert got["low"] < 0.25 * got["high"], got


@pytest.mark.parametrize("mode", ["unshare", "limits"])
def test_without_a_cpu_cgroup_the_sessions_group_gets_the_niceness(box: Path, mode: str, monkeypatch) -> None:
    """Where no cpu cgroup can be made (the lent GPU machines), the sandbox's session group (autogroup) is
    given its niceness: the nice-19 spinner still yields to the nice-0 one."""
    from cuda_gym import sandbox as sandbox_module

    if mode not in sandbox_module.available_modes():
        pytest.skip(f"{mode} mode does not work here")
    real = sandbox_module._cgroup_parent
    monkeypatch.setattr(sandbox_module, "_cgroup_parent", lambda c: None if c == "cpu" else real(c))
    got = _spin_pair(box, mode)
    assert got["low"] < 0.25 * got["high"], got
