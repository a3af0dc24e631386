"""The judge reads one frozen copy of a workspace: files no rule read never run, nor reach a cached verdict.

Each attack starts from the honest slow base (``tests/solutions/cpu_scale_relu_slow``, reward 1); the
files it adds are ones the static rules never read but Python's import system would: bytecode in
``__pycache__`` compiled from other source, a sourceless ``.pyc`` module, Python in a folder the rules
skip. Before the judge froze its copy they ran in the candidate server (and, being outside the
judgement-cache key, a verdict earned by them was served to the honest files).
"""

from __future__ import annotations

import py_compile
import sys
from pathlib import Path

import pytest

from adversarial.judging import SOLUTIONS, SharedJudges, load_task, make_workspace
from cuda_gym.judge.frozen import freeze
from cuda_gym.judge.judgements import tree_hash
from cuda_gym.reward import milestone_reward

pytestmark = pytest.mark.slow

SLOW_BASE = SOLUTIONS / "cpu_scale_relu_slow"

WRONG_MODEL = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()

    def forward(self, x):
        return torch.zeros_like(x)
'''

TORCH_FALLBACK = '''import torch


def scale_relu(x, scale):
    return torch.relu(x * scale)
'''

IMPORTS_HELPER = '''import torch.nn as nn

{import_line}


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = float(scale)

    def forward(self, x):
        return scale_relu(x, self.scale)
'''


def _pyc(source: str, target: Path, tmp_path: Path) -> None:
    """Compile ``source`` to an unchecked-hash ``.pyc`` at ``target`` (loaded without looking at any source)."""
    src = tmp_path / f"src_{target.stem.split('.')[0]}.py"
    src.write_text(source)
    target.parent.mkdir(parents=True, exist_ok=True)
    py_compile.compile(str(src), cfile=str(target), doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)


@pytest.fixture(scope="module")
def task():
    return load_task("custom:scale_relu")


def test_bytecode_beside_the_source_never_runs_nor_poisons_the_cache(task, tmp_path: Path,
                                                                     judges: SharedJudges) -> None:
    judge = judges.get("cpu", cache_judgements=True, cache_dir=tmp_path / "cache")
    attacker = make_workspace(task, SLOW_BASE, "cpu", tmp_path / "attacker")
    _pyc(WRONG_MODEL, attacker.root / "__pycache__" / f"model_new.{sys.implementation.cache_tag}.pyc", tmp_path)
    first = judge.evaluate(task, workspace=attacker, mode="full")
    assert first.passed and milestone_reward(first) == 1, first.to_json()  # the checked source ran
    victim = make_workspace(task, SLOW_BASE, "cpu", tmp_path / "victim")
    second = judge.evaluate(task, workspace=victim, mode="full")
    assert second.passed and milestone_reward(second) == 1, second.to_json()


@pytest.mark.parametrize("layout", ["sourceless_pyc", "unscanned_folder"])
def test_python_the_rules_never_read_cannot_be_imported(layout: str, task, tmp_path: Path,
                                                        judges: SharedJudges) -> None:
    ws = make_workspace(task, SLOW_BASE, "cpu", tmp_path)
    if layout == "sourceless_pyc":  # a module with no source: `import fastpath` would load fastpath.pyc
        _pyc(TORCH_FALLBACK, ws.root / "fastpath.pyc", tmp_path)
        line = "from fastpath import scale_relu"
    else:  # a package outside kernels/: the rules read top-level and kernels/ Python only
        (ws.root / "lib").mkdir()
        (ws.root / "lib" / "fastpath.py").write_text(TORCH_FALLBACK)
        line = "from lib.fastpath import scale_relu"
    (ws.root / "model_new.py").write_text(IMPORTS_HELPER.format(import_line=line))
    result = judges.get("cpu").evaluate(task, workspace=ws, mode="full")
    assert milestone_reward(result) == -1 and not result.correct, result.to_json()
    assert "ModuleNotFoundError" in result.error and "fastpath" in result.error, result.error


def test_changes_after_prepare_do_not_reach_the_verdict(task, tmp_path: Path, judges: SharedJudges) -> None:
    judge = judges.get("cpu")
    ws = make_workspace(task, SLOW_BASE, "cpu", tmp_path)
    job = judge.prepare(task, workspace=ws, mode="verify")
    (ws.root / "model_new.py").write_text(WRONG_MODEL)  # the agent's process rewrites it meanwhile
    result = judge.finish(job)
    assert result.correct and result.violations == [], result.to_json()


def test_undecodable_names_are_violations_not_crashes(task, tmp_path: Path, judges: SharedJudges) -> None:
    ws = make_workspace(task, SLOW_BASE, "cpu", tmp_path)
    root = bytes(ws.root)
    open(root + b"/\xff", "wb").close()  # outside what the rules read: not in the copy, harmless
    assert freeze(ws, tmp_path / "copy").found == []
    tree_hash(Path(root.decode(errors="surrogateescape")))  # hashes names by their bytes
    open(root + b"/kernels/\xfd.cpp", "wb").write(b"// a unit with an undecodable name\n")
    result = judges.get("cpu").evaluate(task, workspace=ws, mode="verify")
    assert milestone_reward(result) == -1, result.to_json()
    assert any(v.rule == "io" and "UTF-8" in v.message for v in result.violations), result.to_json()


@pytest.mark.parametrize("finding", ["link", "tampered_model"])
def test_findings_outside_the_copy_are_part_of_the_judgement_key(finding: str, task, tmp_path: Path,
                                                                 judges: SharedJudges) -> None:
    """A link or a tampered protected file is left out of the copy, yet scores -1: that verdict must
    not be served to the same workspace without it."""
    import os

    judge = judges.get("cpu", cache_judgements=True, cache_dir=tmp_path / "cache")
    attacker = make_workspace(task, SLOW_BASE, "cpu", tmp_path / "attacker")
    if finding == "link":
        (attacker.root / "notes").symlink_to("model_new.py")
    else:
        model = attacker.root / "model.py"
        os.chmod(model, 0o644)
        model.write_text(model.read_text() + "\n# edited\n")
    bad = judge.evaluate(task, workspace=attacker, mode="verify")
    assert milestone_reward(bad) == -1 and bad.violations, bad.to_json()
    honest = judge.evaluate(task, workspace=make_workspace(task, SLOW_BASE, "cpu", tmp_path / "honest"), mode="verify")
    assert honest.correct and honest.violations == [], honest.to_json()
    assert honest.fingerprint.get("judgement") != "cache"
