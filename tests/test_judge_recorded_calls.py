"""A single file's load_inline sources are checked as recorded, whatever Python computed them from.

The attack (red team B4): ``cpp_sources=SRC.replace("\\r", "")`` is not a literal, so the AST pass never
read the C++, which computes with ATen (``at::mul``) under a dispatch-key guard that hides it from the
runtime audit: a torch fallback that scored 2. The AST pass now calls such a source ``unreadable``; the
judge also checks the recorded call, which names what the C++ really does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from adversarial.judging import SharedJudges, load_task
from cuda_gym.reward import milestone_reward

pytestmark = pytest.mark.slow

FILE = Path(__file__).resolve().parent / "adversarial" / "singles" / "computed_inline_source.py"


def test_recorded_inline_sources_are_checked(judges: SharedJudges) -> None:
    task = load_task("custom:scale_relu")
    result = judges.get("cpu").evaluate(task, solution=FILE, mode="verify")
    rules = {v.rule for v in result.violations}
    assert milestone_reward(result) == -1, result.to_json()
    assert "torch-compute" in rules and any(v.file == "cpp_sources" or "cpp_sources" in str(v.file) for v in
                                            result.violations if v.rule == "torch-compute"), result.violations
