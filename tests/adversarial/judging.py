"""Helpers shared by the adversarial and solution tests: load a case's task, lay out and judge a workspace."""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
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
        from cuda_gym.paths import data_roots

        shared = Path(__file__).resolve().parents[3] / "shared" / "datasets"  # ../shared/datasets beside the checkout
        found = [r for r in [*data_roots(None), shared] if (r / "kernelbench").is_dir()]
        if not found:
            pytest.skip(f"{spec} needs the KernelBench data set (CUDA_GYM_DATA_DIR)")
        data_dir = found[0]
    _, level, name = spec.split("/")
    path = data_dir / "kernelbench" / f"level{level[1:]}" / f"{name}.py"
    return Task(id=spec, source="kernelbench", level=int(level[1:]), name=name, code=path.read_text(),
                meta={"problem_id": int(name.split("_")[0])})


SOLUTIONS = Path(__file__).resolve().parent.parent / "solutions"


def honest_solutions() -> list[Path]:
    """The honest solution directories under ``tests/solutions`` (those with a ``meta.json``), sorted."""
    return sorted(p for p in SOLUTIONS.iterdir() if (p / "meta.json").exists())


def solution_meta(path: Path) -> dict:
    """A solution's ``meta.json``: its ``task``, ``flavour`` and optional ``expect_fast``."""
    return json.loads((path / "meta.json").read_text())


def submission_files(case_dir: Path) -> dict[str, Path]:
    """``model_new.py`` and ``kernels/*`` of a case or solution directory, by workspace-relative path.

    A case holding a file named ``base`` starts from the honest solution it names
    (``tests/solutions/<base>``) and replaces only the files it carries itself: most hacks change
    ``model_new.py`` or one binding and keep the honest kernels. The name is a path relative to
    ``tests/solutions``: an honest solution may name the shipped demo solution
    (``../../envs/demo_solutions/cuda``) instead of copying it, or another solution (a base's base is
    followed too: the slow bases of the native-code cases change one kernel of an honest solution).
    """
    files: dict[str, Path] = {}
    dirs = [case_dir]
    while (dirs[0] / "base").is_file() and len(dirs) < 8:  # a base may have a base of its own
        dirs.insert(0, (SOLUTIONS / (dirs[0] / "base").read_text().strip()).resolve())
    for folder in dirs:
        if (folder / "model_new.py").is_file():
            files["model_new.py"] = folder / "model_new.py"
        if (folder / "kernels").is_dir():
            for src in sorted((folder / "kernels").rglob("*")):
                if src.is_file():
                    files[src.relative_to(folder).as_posix()] = src
    return files


def materialize(case_dir: Path, dest: Path) -> Path:
    """The case's whole submission written under ``dest`` (what the static rules read)."""
    for rel, src in submission_files(case_dir).items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, dest / rel)
    return dest


def make_workspace(task: Task, case_dir: Path, flavour: str, parent: Path) -> Any:
    """A fresh workspace for ``task`` with the case's ``model_new.py`` and ``kernels/`` copied in."""
    workspace = pytest.importorskip("cuda_gym.workspace")
    ws = workspace.Workspace.create(task, flavour=flavour, parent=parent)
    for rel, src in submission_files(case_dir).items():
        (ws.root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, ws.root / rel)
    tamper = case_dir / "tamper.json"
    if tamper.exists():
        for rel, extra in json.loads(tamper.read_text())["append"].items():
            target = ws.root / rel
            os.chmod(target, target.stat().st_mode | stat.S_IWUSR)
            with target.open("a") as fh:
                fh.write(extra)
    return ws


class SharedJudges:
    """One :class:`~cuda_gym.judge.judge.Judge` per configuration, kept for a whole test session.

    A judge's reference worker (torch import, each task's preparation) is paid once per configuration
    instead of once per case; every submission still gets its own sandboxed candidate server, as in
    real use, where one judge serves many submissions. ``get(device, **changes)`` returns the judge of
    ``judge_config(device)`` with ``changes`` applied (``JudgeConfig`` field values).
    """

    def __init__(self) -> None:
        self._judges: dict[tuple, Any] = {}

    def get(self, device: str, **changes: Any) -> Any:
        """The session's judge for ``judge_config(device)`` with ``changes``; started on first use."""
        import dataclasses

        key = (device, *sorted(changes.items()))
        if key not in self._judges:
            judge_mod = pytest.importorskip("cuda_gym.judge.judge")
            self._judges[key] = judge_mod.Judge(dataclasses.replace(judge_config(device), **changes))
        return self._judges[key]

    def close(self) -> None:
        """Stop every judge's reference worker."""
        for judge in self._judges.values():
            judge.close()
        self._judges.clear()


def judge_config(device: str) -> Any:
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


def open_fds(pid: int) -> int:
    """How many descriptors the process ``pid`` holds now."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def settled_fds(pid: int, bound: int, wait_s: float = 10.0) -> int:
    """The descriptors of ``pid`` once they are down to ``bound`` (closes finish in the background), or after
    ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while (n := open_fds(pid)) > bound and time.monotonic() < deadline:
        time.sleep(0.1)
    return n
