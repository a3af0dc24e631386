"""Sandboxes run at niceness 19 (agent commands, builds, recordings); the judge's timed servers at 0."""

from __future__ import annotations

from pathlib import Path

import pytest

from adversarial.judging import SOLUTIONS, SharedJudges, load_task, make_workspace
from cuda_gym.sandbox import Limits, Sandbox

NICE = "import os; print('nice', os.nice(0))"


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
