"""Normalized-AST similarity: what it ignores (names, constants, docstrings, import aliases), what it
does not (operators), and the nearest KernelBench task of real tasks through `tasks nearest`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_gym.cli import main
from cuda_gym.tasks import get_task, load_tasks
from cuda_gym.tasks.similarity import ReferenceIndex, normalized_tokens, similarity

ORIGINAL = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, features):
        super(Model, self).__init__()
        self.norm = nn.LayerNorm(features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.norm(x)) * 2.0


batch_size = 16
features = 1024


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
'''

DISGUISED = '''"""My very own task."""
import torch
from torch import nn
from torch.nn import functional as fn


class Net(nn.Module):
    """Normalize, then activate."""

    def __init__(self, dim):
        super().__init__()
        self.ln = nn.LayerNorm(dim)  # a layer norm

    def forward(self, inp):
        return fn.gelu(self.ln(inp)) * 3.5


b = 128
dim = 77


def get_inputs():
    return [torch.randn(b, dim)]


def get_init_inputs():
    return [dim]
'''


def test_names_constants_docstrings_and_aliases_do_not_count() -> None:
    assert normalized_tokens(ORIGINAL) == normalized_tokens(DISGUISED)
    assert similarity(ORIGINAL, DISGUISED) == 1.0


def test_operators_and_structure_do_count() -> None:
    other_op = ORIGINAL.replace("F.gelu", "torch.tanh").replace("nn.LayerNorm", "nn.BatchNorm1d")
    assert 0.5 < similarity(ORIGINAL, other_op) < 0.9
    longer = ORIGINAL.replace("return F.gelu(self.norm(x)) * 2.0",
                              "y = F.gelu(self.norm(x))\n        y = torch.cumsum(y, dim=1)\n"
                              "        y = torch.softmax(y, dim=-1)\n        return y - y.mean()")
    assert similarity(ORIGINAL, longer) < 0.9
    assert similarity(ORIGINAL, "not python (") == 0.0


def test_nearest_excludes_the_task_itself() -> None:
    index = ReferenceIndex([("a", ORIGINAL), ("b", ORIGINAL.replace("F.gelu", "torch.tanh"))])
    assert index.nearest(DISGUISED) == ("a", 1.0)
    ref, score = index.nearest(ORIGINAL, exclude="a")
    assert ref == "b" and score < 1.0


def test_nearest_kernelbench_task_through_the_cli(data_dir: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    kb = load_tasks("kernelbench", path=data_dir, level=1)
    original = kb.get("kernelbench/L1/23_Softmax")
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "softmax_copy.py").write_text("# mine\n" + original.with_constants(batch_size=2, dim=64).code)
    (folder / "fused.py").write_text(ORIGINAL)
    assert main(["tasks", "nearest", str(folder), "--reference-path", str(data_dir), "--json"]) == 0
    rows = {json.loads(line)["task_id"]: json.loads(line) for line in capsys.readouterr().out.splitlines()}
    assert rows["custom/softmax_copy"]["nearest"] == original.id and rows["custom/softmax_copy"]["similarity"] == 1.0
    assert rows["custom/fused"]["similarity"] < 0.9
    # The builtin tasks are no near-copies of KernelBench.
    index = ReferenceIndex.of_tasks(load_tasks("kernelbench", path=data_dir))
    for task in load_tasks("builtin"):
        assert index.nearest(task.code)[1] < 0.9, task.id
    assert get_task("builtin/softmax").code != original.code
