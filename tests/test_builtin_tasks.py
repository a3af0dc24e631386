"""Every builtin task runs its small size on the CPU, and its output follows its inputs."""

from __future__ import annotations

import ast

import pytest
import torch

from cuda_gym.tasks import load_tasks
from cuda_gym.tasks.facts import compute_facts

DEFAULT = load_tasks("builtin")
SMALL = {t.id: t for t in load_tasks("builtin", size="small")}


def test_builtin_set() -> None:
    assert len(DEFAULT) >= 16
    assert {t.level for t in DEFAULT} == {1, 2, 3}
    assert all(t.id.startswith("builtin/") and t.meta["description"] for t in DEFAULT)


@pytest.mark.parametrize("task", DEFAULT, ids=lambda t: t.id)
def test_code_is_plain_kernelbench_file(task) -> None:
    tree = ast.parse(task.code)
    assigned = {t.id: s.value for s in tree.body if isinstance(s, ast.Assign) for t in s.targets if isinstance(t, ast.Name)}
    assert "TASK" not in assigned  # the spec is stripped from the code the agent sees
    for name, value in task.sizes["default"].items():
        assert ast.literal_eval(assigned[name]) == value, f"{name} differs from the default size"
    assert task.resized("default").code == task.code


@pytest.mark.parametrize("task_id", sorted(SMALL))
def test_small_runs_and_output_follows_inputs(task_id: str) -> None:
    task = SMALL[task_id]
    assert task.meta["size"] == "small"
    loaded = task.load()
    torch.manual_seed(0)
    model = loaded.Model(*loaded.get_init_inputs()).eval()
    first, second = loaded.get_inputs(), loaded.get_inputs()
    assert all(x.dtype == torch.float32 for x in first if isinstance(x, torch.Tensor))
    with torch.no_grad():
        out1, out1_again, out2 = model(*first), model(*first), model(*second)
    assert torch.isfinite(out1).all()
    assert torch.equal(out1, out1_again)  # no randomness inside forward
    # different inputs give outputs that differ beyond the judge's default tolerance
    assert not torch.allclose(out1, out2, atol=1e-2, rtol=1e-2)
    assert out1.float().std() > 0.05


@pytest.mark.parametrize("task", DEFAULT, ids=lambda t: t.id)
def test_default_size_is_gpu_sized(task) -> None:
    facts = compute_facts(task)
    assert facts.ok, facts.error
    assert 50e6 <= facts.total_bytes <= 8e9  # tens of MB to a few GB: milliseconds on an H200
    small = compute_facts(task.resized("small"))
    assert small.total_bytes < facts.total_bytes / 50
