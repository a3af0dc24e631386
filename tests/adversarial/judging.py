"""Helpers shared by the adversarial and solution tests: load a case's task, lay out and judge a workspace."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

from cuda_gym.tasks.task import Task

TASKS = Path(__file__).resolve().parent / "tasks"


def load_task(spec: str, data_dir: Path | None = None) -> Task:
    """``custom:<stem>`` from tests/adversarial/tasks, or ``kernelbench/L<n>/<name>`` from the data sets."""
    if spec.startswith("custom:"):
        stem = spec.split(":", 1)[1]
        return Task(id=f"custom/{stem}", source="custom", level=1, name=stem, code=(TASKS / f"{stem}.py").read_text())
    if spec.startswith("builtin/"):
        from cuda_gym.tasks import get_task

        return get_task(spec)
    if data_dir is None:
        pytest.skip(f"{spec} needs the KernelBench data set")
    _, level, name = spec.split("/")
    path = data_dir / "kernelbench" / f"level{level[1:]}" / f"{name}.py"
    return Task(id=spec, source="kernelbench", level=int(level[1:]), name=name, code=path.read_text(),
                meta={"problem_id": int(name.split("_")[0])})


def make_workspace(task: Task, case_dir: Path, flavour: str, parent: Path) -> Any:
    """A fresh workspace for ``task`` with the case's ``model_new.py`` and ``kernels/`` copied in."""
    workspace = pytest.importorskip("cuda_gym.workspace")
    ws = workspace.Workspace.create(task, flavour=flavour, parent=parent)
    shutil.copy(case_dir / "model_new.py", ws.root / "model_new.py")
    kernels = ws.root / "kernels"
    for src in sorted((case_dir / "kernels").iterdir()):
        shutil.copy(src, kernels / src.name)
    tamper = case_dir / "tamper.json"
    if tamper.exists():
        for rel, extra in json.loads(tamper.read_text())["append"].items():
            target = ws.root / rel
            os.chmod(target, target.stat().st_mode | stat.S_IWUSR)
            with target.open("a") as fh:
                fh.write(extra)
    return ws


def judge_config(device: str, tmp: Path) -> Any:
    """A judge configuration sized for tests (few timed calls, no judgement cache)."""
    config = pytest.importorskip("cuda_gym.judge.config")
    on_cpu = device == "cpu"
    return config.JudgeConfig(
        device=device,
        timed_calls=5 if on_cpu else 20,
        warmup=2 if on_cpu else 5,
        cache_judgements=False,
        compile_baseline=not on_cpu,
    )
