"""Tests of the Task dataclass: parsing, loading, constants, sizes and meta-device facts."""

from __future__ import annotations

import json
import sys

import pytest
import torch

from cuda_gym.errors import TaskError
from cuda_gym.paths import cache_dir
from cuda_gym.tasks import Task, TaskFacts, task_facts
from cuda_gym.tasks.facts import compute_facts

GOOD = """
from __future__ import annotations

import dataclasses
import torch
import torch.nn as nn

@dataclasses.dataclass
class Cfg:
    scale: float

class Model(nn.Module):
    def __init__(self, features, scale):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.cfg = Cfg(scale)

    def forward(self, x):
        return self.linear(x) * self.cfg.scale

batch_size = 8  # rows
features = 16

def get_inputs():
    return (torch.randn(batch_size, features),)

def get_init_inputs():
    return [features, 2.0]
"""


def make(code: str, task_id: str = "custom/t") -> Task:
    return Task(task_id, "custom", 1, task_id.split("/")[-1], code)


def test_load_runs_code_in_fresh_module() -> None:
    a, b = make(GOOD).load(), make(GOOD).load()
    assert a.Model is not b.Model  # a fresh namespace each time
    model = a.Model(*a.get_init_inputs())
    inputs = a.get_inputs()
    assert isinstance(inputs, list) and inputs[0].shape == (8, 16)  # the tuple became a list
    assert model(*inputs).shape == (8, 16)
    # a dataclass with string annotations needs its module in sys.modules while it is created
    assert a.namespace["Cfg"](1.5).scale == 1.5
    assert not any(name.startswith("cuda_gym_task_") for name in sys.modules)  # removed afterwards


def test_bare_init_input_is_wrapped() -> None:
    code = GOOD.replace("return [features, 2.0]", 'return "gpt2"')
    assert make(code).load().get_init_inputs() == ["gpt2"]


@pytest.mark.parametrize(
    ("code", "needle"),
    [
        ("def f(:\n", "syntax error at line 1"),
        ("import torch\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n", "Model"),
        ("class Model: pass\ndef get_inputs(): return []\n", "get_init_inputs"),
    ],
)
def test_check_rejects_bad_code(code: str, needle: str) -> None:
    with pytest.raises(TaskError, match="custom/bad") as info:
        make(code, "custom/bad").check()
    assert needle in str(info.value)


def test_load_reports_import_exception() -> None:
    code = GOOD + "\nraise RuntimeError('boom at import')\n"
    with pytest.raises(TaskError, match=r"custom/t: importing its code raised RuntimeError: boom at import"):
        make(code).load()


def test_with_constants_rewrites_only_values() -> None:
    task = make(GOOD).with_constants(batch_size=3, features=5)
    assert "batch_size = 3  # rows" in task.code and "features = 5\n" in task.code
    loaded = task.load()
    assert loaded.get_inputs()[0].shape == (3, 5)
    assert task.meta["overrides"] == {"batch_size": 3, "features": 5}
    with pytest.raises(TaskError, match="nonexistent"):
        make(GOOD).with_constants(nonexistent=1)
    with pytest.raises(TaskError, match="declares no sizes"):
        make(GOOD).resized("small")


def test_facts_on_meta_device() -> None:
    facts = compute_facts(make(GOOD))
    assert facts.error is None
    assert facts.input_bytes == 8 * 16 * 4
    assert facts.param_bytes == (16 * 16 + 16) * 4
    assert facts.output_bytes == 8 * 16 * 4
    assert facts.total_bytes == facts.input_bytes + facts.param_bytes + facts.output_bytes
    assert facts.input_shapes == [[8, 16]] and facts.input_dtypes == ["torch.float32"]


def test_facts_do_not_allocate_huge_tensors() -> None:
    # 64 GiB of input: only the meta device can trace this on a CI machine
    task = make(GOOD).with_constants(batch_size=2**20, features=2**14)
    facts = compute_facts(task)
    assert facts.input_bytes == 2**20 * 2**14 * 4


def test_facts_follow_cuda_code_onto_meta() -> None:
    on_cuda = 'torch.randn(batch_size, features, device="cuda").cuda().to("cuda:0")'
    code = GOOD.replace("torch.randn(batch_size, features)", on_cuda)
    facts = compute_facts(make(code))
    assert facts.error is None and facts.input_bytes == 8 * 16 * 4


def test_facts_of_data_dependent_task_are_partial() -> None:
    code = GOOD.replace("return self.linear(x) * self.cfg.scale", "return x * x.sum().item()")
    facts = compute_facts(make(code))
    assert facts.input_bytes == 8 * 16 * 4 and facts.param_bytes is not None
    assert facts.output_bytes is None and facts.total_bytes is None and not facts.ok
    assert facts.error is not None and facts.error.startswith("forward:")


def test_rnn_facts_match_real_shapes() -> None:
    code = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(10, 20, 2, batch_first=True, bidirectional=True, proj_size=5)

    def forward(self, x):
        out, (h, c) = self.rnn(x)
        return out, h, c

def get_inputs():
    return [torch.randn(3, 7, 10)]

def get_init_inputs():
    return []
"""
    task = make(code)
    facts = compute_facts(task)
    loaded = task.load()
    real = loaded.Model()(*loaded.get_inputs())
    assert facts.output_shapes == [list(t.shape) for t in real]


def test_facts_are_cached(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CUDA_GYM_CACHE_DIR", str(tmp_path))
    task = make(GOOD)
    first = task_facts(task)
    path = cache_dir() / "facts" / f"{task.code_hash}.json"
    assert path.is_file()
    data = json.loads(path.read_text())
    data["input_bytes"] = 12345  # the cache is what later calls read
    path.write_text(json.dumps(data))
    assert task_facts(task).input_bytes == 12345
    assert task_facts(task, use_cache=False) == first
    assert TaskFacts.from_dict(first.to_dict()) == first


def test_meta_tracing_leaves_default_device_alone() -> None:
    compute_facts(make(GOOD))
    assert torch.empty(1).device.type == "cpu"
